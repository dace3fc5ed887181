//! `h9sandbox write`: replace a file of the sandbox's work dir atomically with stdin or a host
//! file, through [`crate::files::WorkDir::write`].

use std::io::{IsTerminal, Read};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use serde::Serialize;

use super::Ctx;
use crate::cli::{Format, WriteArgs};
use crate::error::Error;
use crate::files::{self, Abort, WorkDir, WriteOptions, Written};
use crate::output;
use crate::state::Record;

/// `write --format json` document.
#[derive(Debug, Serialize)]
pub struct WriteJson {
    /// Host path of the file.
    pub path: String,
    /// Bytes taken from stdin or `--from`.
    pub bytes_written: u64,
    /// Size of the file now (with `--append`, the old content included).
    pub size: u64,
}

/// Runs `write`; prints nothing (or the JSON document) and returns 0.
pub async fn run(ctx: &Ctx, args: &WriteArgs) -> Result<i32> {
    let (rec, wd) = super::workdir_of(ctx, &args.id)?;
    let mode = args.mode.as_deref().map(files::parse_mode).transpose()?;
    let opts = options(&rec, mode, args.parents, args.append);
    let from = match &args.from {
        Some(f) => {
            // A source inside the work dir is the sandbox's to plant symlinks in: open it the
            // safe way, so a link cannot copy a host file into the sandbox.
            let abs = std::path::absolute(f)
                .with_context(|| format!("cannot resolve --from {}", f.display()))?;
            // `..` taken lexically, as the kernel does when the path holds no symlink.
            let mut lexical = std::path::PathBuf::new();
            for c in abs.components() {
                match c {
                    std::path::Component::ParentDir => {
                        lexical.pop();
                    }
                    c => lexical.push(c),
                }
            }
            let file = if lexical.starts_with(wd.path()) {
                wd.open_file(&lexical)?.0
            } else {
                std::fs::File::open(f)
                    .with_context(|| format!("cannot open --from {}", f.display()))?
            };
            if file.metadata().is_ok_and(|m| m.is_dir()) {
                return Err(Error::Invalid(format!(
                    "--from {} is a directory; give a file",
                    f.display()
                ))
                .into());
            }
            Some(file)
        }
        None if std::io::stdin().is_terminal() => {
            return Err(Error::Invalid(
                "stdin is a terminal; pipe the content in, or pass --from FILE".into(),
            )
            .into())
        }
        None => None,
    };
    let from = match from {
        Some(f) => f,
        // The raw descriptor (not std's 8 KiB BufReader): File to File lets io::copy use
        // copy_file_range or splice.
        None => std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?),
    };
    let written = write_from(wd, args.path.clone(), from, opts).await?;
    if ctx.format == Format::Json {
        output::print_json(&WriteJson {
            path: written.path.display().to_string(),
            bytes_written: written.bytes_written,
            size: written.size,
        })?;
    }
    Ok(0)
}

/// The options `write` uses in the sandbox `rec`: `mode` (`None`: an existing file's, else
/// 644), `parents`, `append`, and the owner of new files: the sandbox's user, except root's files,
/// which are left to the invoking user (root in the container may write anything anyway, with
/// `CAP_DAC_OVERRIDE`, and the host user keeps control of them).
pub fn options(rec: &Record, mode: Option<u32>, parents: bool, append: bool) -> WriteOptions {
    WriteOptions {
        mode,
        parents,
        append,
        owner: rec.user.filter(|u| !u.is_root()),
    }
}

/// Replaces the file `path` of the work dir `wd` with the bytes of `data` ([`WorkDir::write`],
/// atomic), on its own thread, given up on a signal ([`interruptible`]), failing instead of
/// dying past `RLIMIT_FSIZE` ([`super::catch_file_size_signal`]); warns on stderr when the owner
/// could not be given. Prints nothing on stdout.
pub async fn write_from<R: Read + Send + 'static>(
    wd: WorkDir,
    path: PathBuf,
    mut data: R,
    opts: WriteOptions,
) -> Result<Written> {
    let _xfsz = super::catch_file_size_signal();
    let written =
        interruptible(move |abort| wd.write(&path, &mut data, &opts, Some(abort))).await?;
    if let Some(w) = &written.warning {
        output::warn(w);
    }
    Ok(written)
}

/// Runs the blocking file operation `f` on its own thread. When SIGINT, SIGTERM or SIGHUP
/// arrives first, its temporary file is removed through the [`Abort`] token and the error says
/// whether the file was already replaced.
pub async fn interruptible<T: Send + 'static>(
    f: impl FnOnce(&Abort) -> Result<T> + Send + 'static,
) -> Result<T> {
    let abort = Arc::new(Abort::new());
    let (tx, rx) = tokio::sync::oneshot::channel();
    let token = Arc::clone(&abort);
    std::thread::spawn(move || {
        let _ = tx.send(f(&token));
    });
    tokio::select! {
        biased;
        r = rx => r.map_err(|_| anyhow!("the file operation panicked"))?,
        sig = super::up::interrupted() => Err(if abort.abort() == 0 {
            anyhow!("interrupted by {sig}; the file keeps its old content")
        } else {
            anyhow!("interrupted by {sig} after the file was written")
        }),
    }
}
