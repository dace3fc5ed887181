//! `h9sandbox edit`: replace text in a file of the sandbox's work dir (what MCP's
//! `sandbox_edit` does), atomically, through [`crate::sandbox::host_files::replace`].

use anyhow::Result;
use serde::Serialize;

use super::output;
use super::{EditArgs, Format};
use crate::sandbox::container_files::{self, acting, place, Place};
use crate::sandbox::host_files::replace;
use crate::sandbox::{workdir_of, Ctx};

/// `edit --format json` document.
#[derive(Debug, Serialize)]
pub(crate) struct EditJson {
    /// Host path of the file.
    pub path: String,
    /// Occurrences replaced.
    pub replacements: usize,
}

/// Runs `edit`; prints the number of replacements and returns 0.
pub(crate) async fn run(ctx: &Ctx, format: Format, args: &EditArgs) -> Result<i32> {
    let (rec, wd) = workdir_of(ctx, &args.sandbox.id)?;
    let (path, replacements) = match place(&rec, &args.path, args.user.is_some()) {
        Place::WorkDir => {
            let edited = replace(
                ctx,
                wd.open()?,
                args.path.clone(),
                args.old.clone(),
                args.new.clone(),
                args.all,
            )
            .await?;
            (edited.path, edited.replacements)
        }
        Place::Container(path) => {
            let user = acting(&rec, args.user.as_deref())?;
            let (count, _) = container_files::edit(
                ctx,
                &rec,
                user,
                &path,
                args.old.as_bytes(),
                args.new.as_bytes(),
                args.all,
            )
            .await?;
            (path, count)
        }
    };
    match format {
        Format::Json => output::print_json(&EditJson {
            path: path.display().to_string(),
            replacements,
        })?,
        Format::Table => output::print_line(&format!(
            "replaced {} occurrence{} in {}",
            replacements,
            if replacements == 1 { "" } else { "s" },
            path.display()
        ))?,
    }
    Ok(0)
}
