//! `h9sandbox edit`: replace text in a file of the sandbox's work dir (the seed documents'
//! `edit_file`), atomically, through [`crate::files::WorkDir::edit`].

use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use super::Ctx;
use crate::cli::{EditArgs, Format};
use crate::files::{Edited, WorkDir};
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
    let (_, wd) = super::workdir_of(ctx, &args.id)?;
    let edited = replace(
        wd,
        args.path.clone(),
        args.old.clone(),
        args.new.clone(),
        args.all,
    )
    .await?;
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

/// Replaces `old` by `new` in the file `path` of the work dir `wd` ([`WorkDir::edit`]: exactly
/// one occurrence, or every one with `all`; atomic, keeping mode and owner), on its own thread,
/// given up on a signal, failing instead of dying past `RLIMIT_FSIZE`; warns on stderr when the
/// owner could not be kept. Prints nothing on
/// stdout. Errors: [`crate::error::Error::EditMatch`] naming the count, and those of the write.
pub async fn replace(
    wd: WorkDir,
    path: PathBuf,
    old: String,
    new: String,
    all: bool,
) -> Result<Edited> {
    let _xfsz = super::catch_file_size_signal();
    let edited = super::write::interruptible(move |abort| {
        wd.edit(&path, old.as_bytes(), new.as_bytes(), all, Some(abort))
    })
    .await?;
    if let Some(w) = &edited.warning {
        output::warn(w);
    }
    Ok(edited)
}
