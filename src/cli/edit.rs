//! `h9sandbox edit`: replace text in a file of the sandbox's work dir (the seed documents'
//! `edit_file`), atomically, through [`crate::sandbox::files::replace`].

use anyhow::Result;
use serde::Serialize;

use super::output;
use super::{EditArgs, Format};
use crate::sandbox::files::replace;
use crate::sandbox::{workdir_of, Ctx};

/// `edit --format json` document.
#[derive(Debug, Serialize)]
pub struct EditJson {
    /// Host path of the file.
    pub path: String,
    /// Occurrences replaced.
    pub replacements: usize,
}

/// Runs `edit`; prints the number of replacements and returns 0.
pub async fn run(ctx: &Ctx, format: Format, args: &EditArgs) -> Result<i32> {
    let (_, wd) = workdir_of(ctx, &args.id)?;
    let edited = replace(
        ctx,
        wd,
        args.path.clone(),
        args.old.clone(),
        args.new.clone(),
        args.all,
    )
    .await?;
    match format {
        Format::Json => output::print_json(&EditJson {
            path: edited.path.display().to_string(),
            replacements: edited.replacements,
        })?,
        Format::Table => output::print_line(&format!(
            "replaced {} occurrence{} in {}",
            edited.replacements,
            if edited.replacements == 1 { "" } else { "s" },
            edited.path.display()
        ))?,
    }
    Ok(0)
}
