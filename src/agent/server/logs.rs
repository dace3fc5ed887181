//! The log files of detached commands (`exec -d`): rotated past [`LOG_CAP`], opened without
//! following a planted symlink, read from an offset (`logs`).

use std::path::{Path, PathBuf};

use super::*;
use crate::agent::proto;

/// The log files of detached command `handle`: stdout's and stderr's.
pub(super) fn log_files(handle: &str) -> [PathBuf; 2] {
    let dir = Path::new(LOG_DIR);
    [
        dir.join(format!("{handle}.out")),
        dir.join(format!("{handle}.err")),
    ]
}

/// A log file, rotated (one older copy, `.1`) past [`LOG_CAP`].
pub(super) struct LogFile {
    pub(super) path: PathBuf,
    pub(super) file: Option<std::fs::File>,
    pub(super) size: u64,
}

impl LogFile {
    pub(super) fn new(path: PathBuf) -> LogFile {
        LogFile {
            path,
            file: None,
            size: 0,
        }
    }

    pub(super) fn append(&mut self, bytes: &[u8]) {
        use std::io::Write;
        if self.size + bytes.len() as u64 > LOG_CAP && self.file.is_some() {
            self.file = None;
            let mut old = self.path.clone().into_os_string();
            old.push(".1");
            let _ = std::fs::rename(&self.path, old);
            self.size = 0;
        }
        if self.file.is_none() {
            self.file = open_log(&self.path).ok();
        }
        if let Some(f) = &mut self.file {
            if f.write_all(bytes).is_ok() {
                self.size += bytes.len() as u64;
            }
        }
    }
}

/// Opens (creates) a log file in [`LOG_DIR`] without following a symlink, after making sure the
/// directory is root's own and closed to others (it lies in the scratch volume, which the
/// sandbox can write; the sticky bit of `/var/tmp` keeps others from replacing it).
pub(super) fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    let dir = Path::new(LOG_DIR);
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() && m.uid() == 0 && m.mode() & 0o077 == 0 => {}
        Ok(_) => {
            return Err(std::io::Error::other(format!(
                "{LOG_DIR} is not a private directory of root"
            )))
        }
        Err(_) => std::fs::DirBuilder::new().mode(0o700).create(dir)?,
    }
    let f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    regular(f)
}

/// `f` if it is a regular file: a FIFO or a device planted in its place (the sandbox's root can
/// write [`LOG_DIR`]) would block the agent's only thread or feed it without end.
pub(super) fn regular(f: std::fs::File) -> std::io::Result<std::fs::File> {
    if f.metadata()?.is_file() {
        Ok(f)
    } else {
        Err(std::io::Error::other("not a regular file"))
    }
}

/// The bytes of `path` from `offset` on, in chunks, at most [`LOG_CAP`] and one chunk (what the
/// agent ever writes to one file; more was written by someone else); advances `offset`.
/// Errors: a FIFO, device or symlink at `path`, and I/O errors.
pub(super) fn read_from(path: &Path, offset: &mut u64) -> std::io::Result<Vec<Vec<u8>>> {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .and_then(regular)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(e),
    };
    let mut budget = LOG_CAP + proto::CHUNK as u64;
    let len = f.metadata()?.len();
    if len < *offset {
        // Rotated meanwhile: start over.
        *offset = 0;
    }
    f.seek(SeekFrom::Start(*offset))?;
    let mut out = Vec::new();
    while budget > 0 {
        let mut buf = vec![0u8; proto::CHUNK];
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        buf.truncate(n);
        *offset += n as u64;
        budget = budget.saturating_sub(n as u64);
        out.push(buf);
    }
    Ok(out)
}
