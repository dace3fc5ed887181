//! `h9sandbox edit`: replace text in a file of the sandbox's work dir (the seed documents'
//! `edit_file`), atomically, through [`crate::files::WorkDir::edit`].

use anyhow::Result;
use serde::Serialize;

use super::Ctx;
use crate::cli::{EditArgs, Format};
use crate::output;

/// `edit --format json` document.
#[derive(Debug, Serialize)]
pub struct EditJson {
    /// Host path of the file.
    pub path: String,
    /// Occurrences replaced.
    pub replacements: usize,
}

/// Runs `edit`; prints the number of replacements and returns 0.
pub async fn run(ctx: &Ctx, args: &EditArgs) -> Result<i32> {
    let _xfsz = super::catch_file_size_signal();
    let (_, wd) = super::workdir_of(ctx, &args.id)?;
    let (path, old, new, all) = (
        args.path.clone(),
        args.old.clone(),
        args.new.clone(),
        args.all,
    );
    let edited = super::write::interruptible(move |abort| {
        wd.edit(&path, old.as_bytes(), new.as_bytes(), all, Some(abort))
    })
    .await?;
    if let Some(w) = &edited.warning {
        output::warn(w);
    }
    match ctx.format {
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
