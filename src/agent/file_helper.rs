//! The file commands' in-container side (`h9sandbox agent file read|write`), for paths outside
//! the work dir: the host runs it as a command of the sandbox (through the agent, or the engine's
//! exec), as the sandbox's user (or `--user`), so the container's own permissions decide, and
//! nothing but the container's file system is reached.
//!
//! `read` copies a regular file to stdout and says `size N` on stderr; `write` replaces a file
//! with stdin atomically (a temporary file in its directory, `fsync`, `rename`) and prints
//! `BYTES SIZE`. Failures exit with a status telling their kind ([`EXIT_NOT_FOUND`], …) and one
//! line on stderr. The host treats all of it as the sandbox's output: bounded, checked.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

// Exit statuses: the contract's ([`crate::contract::EXIT_NOT_FOUND`] and its kin).
pub(crate) use crate::contract::{
    EXIT_DENIED, EXIT_EXISTS, EXIT_NOT_FOUND, EXIT_NOT_REGULAR, EXIT_OTHER, EXIT_TOO_LARGE,
};

/// `h9sandbox agent file …`.
#[derive(Debug, Clone, clap::Subcommand)]
pub(crate) enum FileCommand {
    /// Copy a regular file to stdout
    Read {
        /// Absolute path in the container
        path: PathBuf,
        /// Copy at most this many bytes
        #[arg(long)]
        max_bytes: Option<u64>,
        /// Fail (exit 13) when the bytes to copy are more than this
        #[arg(long)]
        cap: Option<u64>,
    },
    /// Replace a file with stdin, atomically
    Write {
        /// Absolute path in the container
        path: PathBuf,
        /// Permission bits, octal (default: the file's, or 644)
        #[arg(long)]
        mode: Option<String>,
        /// Create missing directories
        #[arg(long)]
        parents: bool,
        /// Keep the old content first
        #[arg(long)]
        append: bool,
        /// Fail (exit 15) when anything exists at the path; atomic (RENAME_NOREPLACE)
        #[arg(long, conflicts_with = "append")]
        no_clobber: bool,
    },
}

/// A failure: its exit status and its one-line message.
struct Fail(i32, String);

impl Fail {
    fn io(what: &str, path: &Path, e: &std::io::Error) -> Fail {
        let code = match e.kind() {
            std::io::ErrorKind::NotFound => EXIT_NOT_FOUND,
            std::io::ErrorKind::PermissionDenied => EXIT_DENIED,
            _ if e.raw_os_error() == Some(libc::EISDIR) => EXIT_NOT_REGULAR,
            _ if e.raw_os_error() == Some(libc::EPERM) => EXIT_DENIED,
            _ => EXIT_OTHER,
        };
        Fail(code, format!("cannot {what} {}: {e}", path.display()))
    }
}

/// Runs `h9sandbox agent file …`; returns the exit status.
pub(crate) fn run(cmd: &FileCommand) -> i32 {
    let r = match cmd {
        FileCommand::Read {
            path,
            max_bytes,
            cap,
        } => read(path, *max_bytes, *cap),
        FileCommand::Write {
            path,
            mode,
            parents,
            append,
            no_clobber,
        } => write(path, mode.as_deref(), *parents, *append, *no_clobber),
    };
    match r {
        Ok(()) => 0,
        Err(Fail(code, msg)) => {
            let _ = writeln!(std::io::stderr(), "{msg}");
            code
        }
    }
}

/// The first existing component of `dir` (from the root down) that is not a directory, if any:
/// what stops `--parents` from making `dir`.
fn in_the_way(dir: &Path) -> Option<PathBuf> {
    let mut at = PathBuf::new();
    for c in dir.components() {
        at.push(c);
        match std::fs::metadata(&at) {
            Ok(m) if !m.is_dir() => return Some(at),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

fn kind_of(m: &std::fs::Metadata) -> &'static str {
    let t = m.file_type();
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

fn not_regular(path: &Path, m: &std::fs::Metadata) -> Fail {
    Fail(
        EXIT_NOT_REGULAR,
        format!(
            "{} is {}, not a regular file; give the path of a file",
            path.display(),
            kind_of(m)
        ),
    )
}

/// Copies the regular file `path` (at most `max` bytes) to stdout; `size N` on stderr.
fn read(path: &Path, max: Option<u64>, cap: Option<u64>) -> Result<(), Fail> {
    // Non-blocking, so a FIFO planted there cannot hang the read; then checked to be a file.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| Fail::io("read", path, &e))?;
    let m = file.metadata().map_err(|e| Fail::io("read", path, &e))?;
    if !m.is_file() {
        return Err(not_regular(path, &m));
    }
    let size = m.len();
    let want = max.map_or(size, |x| x.min(size));
    if let Some(c) = cap {
        if want > c {
            return Err(Fail(
                EXIT_TOO_LARGE,
                format!("{} is {size} bytes", path.display()),
            ));
        }
    }
    let _ = writeln!(std::io::stderr(), "size {size}");
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let limit = max.unwrap_or(u64::MAX);
    std::io::copy(&mut file.take(limit), &mut out).map_err(|e| Fail::io("read", path, &e))?;
    out.flush().map_err(|e| Fail::io("read", path, &e))?;
    Ok(())
}

/// Replaces `path` with stdin: see the module documentation. As the user it runs as: a file it
/// cannot write is refused (a read-only file is not replaced, though a rename in a writable
/// directory could), and the directory must be writable (the rename happens there).
/// With `no_clobber`, nothing at the path (a symlink included) is ever replaced: refused at once
/// when something is there, and the final rename is `RENAME_NOREPLACE`.
fn write(
    path: &Path,
    mode: Option<&str>,
    parents: bool,
    append: bool,
    no_clobber: bool,
) -> Result<(), Fail> {
    let exists = || Fail(EXIT_EXISTS, format!("{} exists", path.display()));
    if no_clobber && std::fs::symlink_metadata(path).is_ok() {
        return Err(exists());
    }
    let mode = match mode {
        Some(m) => Some(
            u32::from_str_radix(m.trim_start_matches("0o"), 8)
                .ok()
                .filter(|m| *m <= 0o777)
                .ok_or_else(|| Fail(EXIT_OTHER, format!("invalid mode {m:?}")))?,
        ),
        None => None,
    };
    // A symlink is written through: its target is replaced, the link stays a link.
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => match std::fs::canonicalize(path) {
            Ok(p) => p,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => path.to_path_buf(),
            Err(e) => return Err(Fail::io("write", path, &e)),
        },
        _ => path.to_path_buf(),
    };
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        return Err(Fail(
            EXIT_NOT_REGULAR,
            format!("{} is not a file's path", path.display()),
        ));
    };
    if parents {
        std::fs::create_dir_all(dir).map_err(|e| match in_the_way(dir) {
            // EEXIST from mkdir (or ENOTDIR further down) means a file where a directory goes.
            Some(file) => Fail(
                EXIT_OTHER,
                format!(
                    "cannot create the directory of {}: {} is not a directory; remove it, or choose another path",
                    path.display(),
                    file.display()
                ),
            ),
            None => Fail::io("create the directory of", path, &e),
        })?;
    }
    let existing = match std::fs::metadata(&target) {
        Ok(m) if m.is_file() => Some(m),
        Ok(m) => return Err(not_regular(path, &m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Fail::io("write", path, &e)),
    };
    if existing.is_some() {
        rustix::fs::access(&target, rustix::fs::Access::WRITE_OK)
            .map_err(|e| Fail::io("write", path, &e.into()))?;
    }
    // A name of its own (at most 64 bytes of the target's kept: NAME_MAX is 255).
    let mut short = name.to_string_lossy().into_owned();
    while short.len() > 64 {
        short.pop();
    }
    let temp = dir.join(format!(".h9tmp-{}-{short}", std::process::id()));
    let result = fill(&temp, &target, existing.as_ref(), mode, append);
    match result {
        Ok((written, size)) => {
            if let Err(e) = put_in_place(&temp, &target, no_clobber) {
                let _ = std::fs::remove_file(&temp);
                if no_clobber && e.raw_os_error() == Some(libc::EEXIST) {
                    return Err(exists());
                }
                return Err(Fail::io("write", path, &e));
            }
            println!("{written} {size}");
            Ok(())
        }
        Err(f) => {
            let _ = std::fs::remove_file(&temp);
            Err(Fail(
                f.0,
                f.1.replace(&temp.display().to_string(), &path.display().to_string()),
            ))
        }
    }
}

/// Renames `temp` to `target`; with `no_replace` only where nothing is (`renameat2(2)`
/// `RENAME_NOREPLACE`; a hard link then an unlink where the file system refuses the flag).
fn put_in_place(temp: &Path, target: &Path, no_replace: bool) -> std::io::Result<()> {
    if !no_replace {
        return std::fs::rename(temp, target);
    }
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, temp, CWD, target, RenameFlags::NOREPLACE) {
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            std::fs::hard_link(temp, target)?;
            let _ = std::fs::remove_file(temp);
            Ok(())
        }
        r => r.map_err(std::io::Error::from),
    }
}

/// Writes the temporary file `temp`: the old content of `target` first with `append`, then
/// stdin; gives it its mode (and, for root, the old owner); `fsync`s it. Returns the bytes taken
/// from stdin and the new size.
fn fill(
    temp: &Path,
    target: &Path,
    existing: Option<&std::fs::Metadata>,
    mode: Option<u32>,
    append: bool,
) -> Result<(u64, u64), Fail> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(temp)
        .map_err(|e| Fail::io("write in the directory of", target, &e))?;
    let mut size = 0;
    if append && existing.is_some() {
        let mut old = std::fs::File::open(target).map_err(|e| Fail::io("append to", target, &e))?;
        size += std::io::copy(&mut old, &mut f).map_err(|e| Fail::io("append to", target, &e))?;
    }
    let written = std::io::copy(&mut std::io::stdin().lock(), &mut f)
        .map_err(|e| Fail::io("write", target, &e))?;
    size += written;
    let bits = mode.unwrap_or_else(|| existing.map_or(0o644, |m| m.mode() & 0o777));
    f.set_permissions(std::fs::Permissions::from_mode(bits))
        .map_err(|e| Fail::io("write", target, &e))?;
    if let Some(m) = existing {
        // Root keeps the old owner where it may (CHOWN, the standard profile); others cannot.
        if rustix::process::geteuid().is_root() {
            let _ = std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()));
        }
    }
    f.sync_all().map_err(|e| Fail::io("write", target, &e))?;
    Ok((written, size))
}
