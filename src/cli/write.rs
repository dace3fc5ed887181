//! `h9sandbox write`: replace a file of the sandbox's work dir atomically with stdin or a host
//! file, through [`crate::sandbox::host_files::write_from`].

use std::io::IsTerminal;
use std::os::fd::AsFd;

use anyhow::Result;
use serde::Serialize;

use super::output;
use super::{Format, WriteArgs};
use crate::error::Error;
use crate::sandbox::container_files::{self, acting, place, Place};
use crate::sandbox::host_files::{options, write_from};
use crate::sandbox::{workdir_of, Ctx};
use crate::workdir_fs;

/// `write --format json` document.
#[derive(Debug, Serialize)]
pub(crate) struct WriteJson {
    /// Host path of the file.
    pub path: String,
    /// Bytes taken from stdin or `--from`.
    pub bytes_written: u64,
    /// Size of the file now (with `--append`, the old content included).
    pub size: u64,
}

/// Runs `write`; prints nothing (or the JSON document) and returns 0.
pub(crate) async fn run(ctx: &Ctx, format: Format, args: &WriteArgs) -> Result<i32> {
    let (rec, wd) = workdir_of(ctx, &args.sandbox.id)?;
    let mode = args
        .mode
        .as_deref()
        .map(workdir_fs::parse_mode)
        .transpose()?;
    let mut opts = options(&rec, mode, args.parents, args.append);
    opts.no_clobber = args.no_clobber;
    let from = match &args.from {
        Some(f) => wd.clone().open_source(f)?,
        None if std::io::stdin().is_terminal() => {
            return Err(Error::Usage(
                "stdin is a terminal; pipe the content in, or pass --from FILE".into(),
            )
            .into())
        }
        // The raw descriptor (not std's 8 KiB BufReader): File to File lets io::copy use
        // copy_file_range or splice.
        None => std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?),
    };
    let (path, bytes_written, size) = match place(&rec, &args.path, args.user.is_some()) {
        Place::WorkDir => {
            let w = write_from(ctx, wd.open()?, args.path.clone(), from, opts).await?;
            (w.path, w.bytes_written, w.size)
        }
        Place::Container(path) => {
            let user = acting(&rec, args.user.as_deref())?;
            let w = container_files::write(ctx, &rec, user, &path, Box::new(from), &opts).await?;
            (w.path, w.bytes_written, w.size)
        }
    };
    if format == Format::Json {
        output::print_json(&WriteJson {
            path: path.display().to_string(),
            bytes_written,
            size,
        })?;
    }
    Ok(0)
}
