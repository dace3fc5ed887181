//! File operations in a sandbox's work dir that both front ends share: replacing a file with new
//! content ([`write_from`]) and replacing text in one ([`replace`]), each on its own thread,
//! given up on a signal, and failing instead of dying past `RLIMIT_FSIZE`. The safe path
//! resolution itself is [`crate::workdir_fs::WorkDir`]'s.

use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};

use super::{catch_file_size_signal, interrupted, Ctx};
use crate::error::Error;
use crate::state::Record;
use crate::workdir_fs::{Abort, Edited, WorkDir, WriteOptions, Written};

/// The options `write` uses in the sandbox `rec`: `mode` (`None`: an existing file's, else
/// 644), `parents`, `append`, and the owner of new files: the sandbox's user, except root's files,
/// which are left to the invoking user (root in the container may write anything anyway, with
/// `CAP_DAC_OVERRIDE`, and the host user keeps control of them).
pub(crate) fn options(
    rec: &Record,
    mode: Option<u32>,
    parents: bool,
    append: bool,
) -> WriteOptions {
    WriteOptions {
        mode,
        parents,
        append,
        owner: rec.user.filter(|u| !u.is_root()),
        no_clobber: false,
    }
}

/// Opens the host file `from` as the source of a write into the work dir `wd`. A source inside
/// the work dir is the sandbox's to plant symlinks in: it is opened the safe way (beneath the
/// work dir), so a link cannot copy a host file into the sandbox. Errors: the file cannot be
/// opened, or is a directory.
pub(crate) fn open_source(wd: &WorkDir, from: &Path) -> Result<File> {
    let abs = std::path::absolute(from)
        .with_context(|| format!("cannot resolve --from {}", from.display()))?;
    // `..` taken lexically, as the kernel does when the path holds no symlink.
    let mut lexical = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                lexical.pop();
            }
            c => lexical.push(c),
        }
    }
    let file = if lexical.starts_with(wd.path()) {
        wd.open_file(&lexical)?.0
    } else {
        File::open(from).with_context(|| format!("cannot open --from {}", from.display()))?
    };
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(Error::Usage(format!(
            "--from {} is a directory; give a file",
            from.display()
        ))
        .into());
    }
    Ok(file)
}

/// Replaces the file `path` of the work dir `wd` with the bytes of `data` ([`WorkDir::write`],
/// atomic), on its own thread, given up on a signal ([`interruptible`]), failing instead of
/// dying past `RLIMIT_FSIZE` ([`catch_file_size_signal`]); warns through `ctx.reporter` when the
/// owner could not be given. Prints nothing.
pub(crate) async fn write_from<R: Read + Send + 'static>(
    ctx: &Ctx,
    wd: WorkDir,
    path: PathBuf,
    mut data: R,
    opts: WriteOptions,
) -> Result<Written> {
    let _xfsz = catch_file_size_signal();
    let written =
        interruptible(move |abort| wd.write(&path, &mut data, &opts, Some(abort))).await?;
    if let Some(w) = &written.warning {
        ctx.reporter.warn(w);
    }
    Ok(written)
}

/// Replaces `old` by `new` in the file `path` of the work dir `wd` ([`WorkDir::edit`]: exactly
/// one occurrence, or every one with `all`; atomic, keeping mode and owner), on its own thread,
/// given up on a signal, failing instead of dying past `RLIMIT_FSIZE`; warns through
/// `ctx.reporter` when the owner could not be kept. Prints nothing. Errors:
/// [`Error::EditMatch`] naming the count, and those of the write.
pub(crate) async fn replace(
    ctx: &Ctx,
    wd: WorkDir,
    path: PathBuf,
    old: String,
    new: String,
    all: bool,
) -> Result<Edited> {
    let _xfsz = catch_file_size_signal();
    let edited = interruptible(move |abort| {
        wd.edit(&path, old.as_bytes(), new.as_bytes(), all, Some(abort))
    })
    .await?;
    if let Some(w) = &edited.warning {
        ctx.reporter.warn(w);
    }
    Ok(edited)
}

/// Runs the blocking file operation `f` on its own thread. When SIGINT, SIGTERM or SIGHUP
/// arrives first, its temporary file is removed through the [`Abort`] token and the error says
/// whether the file was already replaced.
pub(crate) async fn interruptible<T: Send + 'static>(
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
        sig = interrupted() => Err(if abort.abort() == 0 {
            anyhow!("interrupted by {sig}; the file keeps its old content")
        } else {
            anyhow!("interrupted by {sig} after the file was written")
        }),
    }
}
