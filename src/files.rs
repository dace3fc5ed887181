//! Files in a sandbox's work directory, read and written from the host side of the bind mount,
//! safe against the symlinks that code in the container plants.
//!
//! The container owns the *contents* of the work dir: it can replace any file or directory in it
//! with a symlink (`ln -s / root`, `ln -s /etc esc`, `ln -s .. up`), at any moment. A host process
//! that checks a path and then opens it follows whatever is there at the second instant, and
//! reads or writes the host's files (the bug class of CVE-2018-15664, `docker cp`). So no path is
//! ever checked lexically here. The work dir is opened once ([`WorkDir::open`]), and every path is
//! resolved by the kernel relative to that handle with `openat2(2)` and
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` (Linux 5.6 or later): `..` past the work dir, an
//! absolute symlink, or a relative one that climbs out fails with `EXDEV` *during* resolution,
//! whatever the container swaps meanwhile. Symlinks that stay inside work as usual.
//!
//! Writes never open an existing file for writing. The parent directory is resolved as above and
//! kept open; the new content goes to a fresh temporary file in it (`openat(O_CREAT | O_EXCL)`,
//! which never follows a symlink), is flushed to disk (`fsync(2)`), given its mode and owner, and
//! then renamed over the final name (`renameat(2)` within that directory: atomic, and it replaces
//! a symlink planted there instead of following it). A reader sees the old or the new file, never
//! half of one; on any failure the temporary file is removed and the old content stays. A final
//! component that is a symlink is followed by re-resolving its target the same way, so writing
//! through `link -> sub/file` updates `sub/file`, while `link -> /etc/passwd` is refused.
//!
//! Every function streams (bounded memory), except [`WorkDir::edit`], which must search the
//! whole file (at most [`EDIT_MAX_BYTES`]), and [`WorkDir::read_bytes`], which returns it (at
//! most what its caller may hold): a sandbox can make a file of any apparent size at no cost
//! (`truncate -s 1T`), so nothing here sizes a buffer by a file without a cap.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, BufRead, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{anyhow, Context, Result};
use rustix::fs::{AtFlags, FileType, Gid, Mode, OFlags, ResolveFlags, Stat, Uid};
use rustix::io::Errno;

use crate::error::Error;
use crate::types::Ids;

/// How many symlinks a path may pass through, as the kernel's own limit (`MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;
/// How often a resolution is retried when `openat2` reports `EAGAIN` (a concurrent rename made
/// a `..` ambiguous; the kernel asks the caller to try again).
const EAGAIN_RETRIES: usize = 128;
/// Permission bits of a new file unless `--mode` says otherwise.
pub const DEFAULT_MODE: u32 = 0o644;
/// Prefix of the temporary files that writes create next to their target.
pub const TEMP_PREFIX: &str = ".h9tmp-";

/// The resolution rule of every path: stay beneath the work dir, never through `/proc` magic links.
/// The largest file `edit` loads into memory (64 MiB): an edit searches the whole file, and a
/// sandbox could otherwise plant a huge sparse file to exhaust the host's memory.
pub const EDIT_MAX_BYTES: u64 = 64 << 20;

fn beneath() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS
}

/// An open handle on a sandbox's work directory; every path is resolved beneath it.
#[derive(Debug)]
pub struct WorkDir {
    fd: OwnedFd,
    path: PathBuf,
    /// Whose rights the file operations check ([`WorkDir::acting_as`]); `None`: the invoking
    /// user's alone.
    acting: Option<Ids>,
}

/// Permission bits [`permits`] checks: read.
pub const MAY_READ: u32 = 4;
/// Permission bits [`permits`] checks: write.
pub const MAY_WRITE: u32 = 2;
/// Permission bits [`permits`] checks: search (a directory) or execute.
pub const MAY_SEARCH: u32 = 1;

/// Whether a process running as `who` (no supplementary groups, as the sandbox's commands run)
/// may access a file of status `st` for `want` ([`MAY_READ`], [`MAY_WRITE`], [`MAY_SEARCH`]
/// or'ed), by its permission bits as the kernel checks them (`inode_permission`): the owner's
/// bits for its owner, else the group's for its group, else the others'. Root may always: it
/// holds `CAP_DAC_OVERRIDE` in every sandbox. POSIX ACLs are not read.
pub fn permits(who: Ids, st: &Stat, want: u32) -> bool {
    if who.is_root() {
        return true;
    }
    let mode = st.st_mode;
    let bits = if st.st_uid == who.uid {
        (mode >> 6) & 7
    } else if st.st_gid == who.gid {
        (mode >> 3) & 7
    } else {
        mode & 7
    };
    bits & want == want
}

/// What [`WorkDir::read_to`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadInfo {
    /// Host path of the file (the work dir joined with the given path; the container sees the same).
    pub path: PathBuf,
    /// Size of the file in bytes when it was opened.
    pub size: u64,
    /// Bytes copied out (at most the cap).
    pub bytes: u64,
}

/// A run of lines of a text file, as [`WorkDir::read_lines`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lines {
    /// Host path of the file.
    pub path: PathBuf,
    /// Size of the file in bytes when it was opened.
    pub size: u64,
    /// 1-based number of the first line in `lines`.
    pub first: u64,
    /// The lines, without their `\n` (a `\r` before it stays).
    pub lines: Vec<Vec<u8>>,
    /// Lines in the whole file (a last line without `\n` counts), or in its first
    /// [`SCAN_MAX_BYTES`] when it is larger (see `size`).
    pub total: u64,
    /// Whether the only line in `lines` is cut short: it alone is longer than the byte cap.
    pub cut: bool,
    /// Whether the file's last line has no line break at its end.
    pub open_end: bool,
    /// Whether the file looks binary: its first 8 KiB, or the lines returned, hold a NUL byte
    /// (the rule of `git` and `grep`).
    pub binary: bool,
}

/// The descriptor `fd` (opened `O_NONBLOCK`, so a planted FIFO cannot hang the open) as a
/// blocking [`File`] with its status, when it is a regular file; otherwise the error of
/// [`ensure_regular`].
fn regular_file(user: &Path, fd: OwnedFd) -> Result<(File, Stat)> {
    let st = rustix::fs::fstat(&fd).map_err(io::Error::from)?;
    ensure_regular(user, &st)?;
    rustix::fs::fcntl_setfl(&fd, OFlags::empty()).map_err(io::Error::from)?;
    Ok((File::from(fd), st))
}

/// How many bytes of a file [`WorkDir::read_lines`] scans at most (256 MiB): lines past them
/// are not reached, and a planted huge (e.g. sparse) file cannot keep the host's CPU busy.
pub const SCAN_MAX_BYTES: u64 = 256 << 20;

/// How many bytes at the start of a file [`Lines::binary`] looks at.
const BINARY_PROBE: usize = 8 * 1024;

/// Options of [`WorkDir::write`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Permission bits (at most `0o777`). `None`: an existing file keeps its bits, a new file gets
    /// [`DEFAULT_MODE`].
    pub mode: Option<u32>,
    /// Create missing parent directories (mode 0755 less the umask), one component at a time.
    pub parents: bool,
    /// Keep the existing content and add the new bytes after it (still one atomic replacement).
    pub append: bool,
    /// Owner of new files and directories (`fchown(2)`); `None` leaves them to this process.
    /// Existing files always keep their owner.
    pub owner: Option<Ids>,
    /// Fail with [`Error::Exists`] when anything (a file, a symlink, even a dangling one) is at
    /// the path, as `open(O_CREAT | O_EXCL)` would: never replace. Atomic: the temporary file
    /// is put in place with `renameat2(RENAME_NOREPLACE)` (or, on a file system without it,
    /// `linkat(2)`, which fails the same way), so a file made meanwhile is not overwritten.
    pub no_clobber: bool,
}

/// What [`WorkDir::write`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Host path of the file.
    pub path: PathBuf,
    /// Bytes taken from the reader.
    pub bytes_written: u64,
    /// Size of the file now (the old content included with `append`).
    pub size: u64,
    /// Set when the owner could not be given to the file (this process is not root).
    pub warning: Option<String>,
}

/// What [`WorkDir::edit`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// Host path of the file.
    pub path: PathBuf,
    /// Occurrences replaced.
    pub replacements: usize,
    /// Size of the file now.
    pub size: u64,
    /// Set when the file's owner could not be kept (this process is not root).
    pub warning: Option<String>,
}

/// Cancels writes in flight: [`Abort::abort`] removes their temporary files and makes them fail
/// instead of renaming. For a process that was interrupted (SIGINT) while a write ran on
/// another thread, so that no temporary file is left behind. Share it with `Arc`.
#[derive(Debug, Default)]
pub struct Abort {
    inner: Mutex<AbortState>,
}

#[derive(Debug, Default)]
struct AbortState {
    aborted: bool,
    committed: usize,
    next: u64,
    temps: Vec<(u64, OwnedFd, OsString)>,
}

impl Abort {
    /// A fresh token.
    pub fn new() -> Abort {
        Abort::default()
    }

    /// Removes the temporary files of every write in flight with this token; those writes, and
    /// any started later, fail with [`io::ErrorKind::Interrupted`], leaving their targets
    /// untouched. Returns how many writes had already completed (renamed into place) before.
    pub fn abort(&self) -> usize {
        let mut st = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        st.aborted = true;
        for (_, dir, name) in std::mem::take(&mut st.temps) {
            let _ = rustix::fs::unlinkat(&dir, name.as_os_str(), AtFlags::empty());
        }
        st.committed
    }

    /// Makes the temporary file `name` in `dir` with `open` and registers it, both under the
    /// lock [`Abort::abort`] takes, so that an abort finds every file made; fails with
    /// [`io::ErrorKind::Interrupted`] (making nothing) once aborted.
    fn create(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        open: impl FnOnce() -> Result<OwnedFd, Errno>,
    ) -> io::Result<(OwnedFd, u64)> {
        let mut st = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if st.aborted {
            return Err(interrupted());
        }
        let dir_handle = dir.try_clone()?;
        let fd = open()?;
        st.next += 1;
        let id = st.next;
        st.temps.push((id, dir_handle, name.to_os_string()));
        Ok((fd, id))
    }

    /// Runs `rename` unless aborted, atomically with respect to [`Abort::abort`].
    fn commit(&self, id: u64, rename: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let mut st = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if st.aborted {
            return Err(interrupted());
        }
        rename()?;
        st.committed += 1;
        st.temps.retain(|(i, _, _)| *i != id);
        Ok(())
    }

    fn forget(&self, id: u64) {
        let mut st = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        st.temps.retain(|(i, _, _)| *i != id);
    }
}

fn interrupted() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "the write was interrupted")
}

/// A temporary file next to a write's target; removed on drop unless renamed into place.
struct Temp<'a> {
    dir: &'a OwnedFd,
    name: OsString,
    file: File,
    abort: Option<(&'a Abort, u64)>,
    done: bool,
}

impl<'a> Temp<'a> {
    /// Creates `.h9tmp-<random>` in `dir`, mode 0600, never through a symlink (`O_EXCL`).
    fn create(dir: &'a OwnedFd, abort: Option<&'a Abort>) -> io::Result<Temp<'a>> {
        let mut last = Errno::EXIST;
        for _ in 0..16 {
            let name = OsString::from(format!(
                "{TEMP_PREFIX}{}",
                &uuid::Uuid::new_v4().simple().to_string()[..16]
            ));
            let flags = OFlags::WRONLY
                | OFlags::CREATE
                | OFlags::EXCL
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC
                | OFlags::NOCTTY;
            let open =
                || rustix::fs::openat(dir, name.as_os_str(), flags, Mode::from_raw_mode(0o600));
            // With an abort token the file is made and registered under its lock at once: an
            // abort never runs between the two, which would leave the file behind.
            let made = match abort {
                Some(a) => a
                    .create(dir, &name, open)
                    .map(|(fd, id)| (fd, Some((a, id)))),
                None => open().map(|fd| (fd, None)).map_err(io::Error::from),
            };
            match made {
                Ok((fd, abort)) => {
                    return Ok(Temp {
                        dir,
                        name,
                        file: File::from(fd),
                        abort,
                        done: false,
                    });
                }
                Err(e) if e.raw_os_error() == Some(Errno::EXIST.raw_os_error()) => {
                    last = Errno::EXIST
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.into())
    }

    /// Flushes, sets mode and owner, and renames over `name` in the same directory (with
    /// `no_replace`, only where nothing is: `EEXIST` otherwise, see [`put_in_place`]).
    /// Returns a warning when the owner could not be set.
    fn commit(
        mut self,
        name: &OsStr,
        mode: u32,
        owner: Option<Ids>,
        no_replace: bool,
    ) -> io::Result<Option<String>> {
        self.file.flush()?;
        let mut warning = None;
        if let Some(want) = owner {
            let st = rustix::fs::fstat(&self.file)?;
            if (st.st_uid, st.st_gid) != (want.uid, want.gid) {
                match rustix::fs::fchown(
                    &self.file,
                    Some(Uid::from_raw(want.uid)),
                    Some(Gid::from_raw(want.gid)),
                ) {
                    Ok(()) => {}
                    Err(Errno::PERM) => {
                        warning = Some(format!(
                            "cannot give the file to {want}: h9sandbox runs as uid {}, not root; it is owned by {}:{}",
                            rustix::process::geteuid().as_raw(),
                            st.st_uid,
                            st.st_gid
                        ))
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        // After fchown, which clears set-ID bits.
        rustix::fs::fchmod(&self.file, Mode::from_raw_mode(mode))?;
        self.file.sync_all()?;
        let dir = self.dir;
        let rename = || put_in_place(dir, self.name.as_os_str(), name, no_replace);
        match self.abort {
            Some((a, id)) => a.commit(id, rename)?,
            None => rename()?,
        }
        self.done = true;
        Ok(warning)
    }
}

/// Renames `temp` to `name` in `dir`; with `no_replace` only where `name` does not exist
/// (`renameat2(2)`'s `RENAME_NOREPLACE`, Linux 3.15; where the file system refuses the flag
/// (`EINVAL`), a hard link then the removal of `temp`: `linkat(2)` fails with `EEXIST` just as
/// atomically). Errors: `EEXIST` when something is there, and the calls' own.
fn put_in_place(dir: &OwnedFd, temp: &OsStr, name: &OsStr, no_replace: bool) -> io::Result<()> {
    if !no_replace {
        return rustix::fs::renameat(dir, temp, dir, name).map_err(io::Error::from);
    }
    match rustix::fs::renameat_with(dir, temp, dir, name, rustix::fs::RenameFlags::NOREPLACE) {
        Err(Errno::INVAL | Errno::NOSYS) => {
            rustix::fs::linkat(dir, temp, dir, name, AtFlags::empty())?;
            let _ = rustix::fs::unlinkat(dir, temp, AtFlags::empty());
            Ok(())
        }
        r => r.map_err(io::Error::from),
    }
}

impl Drop for Temp<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = rustix::fs::unlinkat(self.dir, self.name.as_os_str(), AtFlags::empty());
        }
        if let Some((a, id)) = self.abort {
            a.forget(id);
        }
    }
}

/// Where a write lands: an open directory beneath the work dir, a plain name in it, and what is
/// there now (never a symlink: those are resolved first).
struct Target {
    dir: OwnedFd,
    name: OsString,
    existing: Option<Stat>,
}

impl WorkDir {
    /// Opens the work directory `path` (the canonical host path the sandbox was created with).
    /// Errors: the directory is gone or unreadable; this kernel has no `openat2(2)` (checked here,
    /// so that no operation ever falls back to a weaker resolution).
    pub fn open(path: &Path) -> Result<WorkDir> {
        // The recorded work dir is canonical: it has no symlink. One appearing on the way means
        // someone (e.g. a parent sandbox whose work dir holds this one's) swapped a directory
        // for a symlink: following it could lead anywhere on the host.
        let fd = match rustix::fs::openat2(
            rustix::fs::CWD,
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => fd,
            Err(Errno::NOSYS) => return Err(no_openat2()),
            Err(Errno::LOOP) => {
                return Err(Error::PathEscape(format!(
                    "refusing the work dir {}: a symlink now stands on its path (it was replaced since `up`); `h9sandbox down` the sandbox",
                    path.display()
                ))
                .into())
            }
            Err(e) => {
                return Err(io::Error::from(e))
                    .with_context(|| format!("cannot open the work dir {}", path.display()))
            }
        };
        let wd = WorkDir {
            fd,
            path: path.to_path_buf(),
            acting: None,
        };
        match rustix::fs::openat2(
            &wd.fd,
            ".",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            beneath(),
        ) {
            Ok(_) => Ok(wd),
            Err(Errno::NOSYS) => Err(no_openat2()),
            Err(e) => Err(io::Error::from(e))
                .with_context(|| format!("cannot open the work dir {}", path.display())),
        }
    }

    /// Checks every file operation against the rights of `who` (the sandbox's user, which the
    /// container's commands run as) besides the invoking user's: what `who` could not read is
    /// not read, what it could not write is not written ([`permits`]). `None` or root: no check
    /// beyond the invoking user's own.
    pub fn acting_as(mut self, who: Option<Ids>) -> WorkDir {
        self.acting = who.filter(|w| !w.is_root());
        self
    }

    /// Fails with "permission denied" (`EACCES`) unless the acting user may access `st` for
    /// `want`; `what` says what was tried ("read", "write").
    fn check_access(&self, user: &Path, st: &Stat, want: u32, what: &str) -> Result<()> {
        let Some(who) = self.acting else {
            return Ok(());
        };
        if permits(who, st, want) {
            return Ok(());
        }
        Err(
            anyhow::Error::from(io::Error::from(Errno::ACCESS)).context(format!(
                "cannot {what} {}: the sandbox's user {who} may not (mode {:04o}, owner {}:{})",
                self.host_path(user).display(),
                st.st_mode & 0o7777,
                st.st_uid,
                st.st_gid
            )),
        )
    }

    /// [`WorkDir::check_access`] of the directory `dir` a file is made or replaced in: write and
    /// search.
    fn check_dir_access(&self, user: &Path, dir: &OwnedFd) -> Result<()> {
        if self.acting.is_none() {
            return Ok(());
        }
        let st = rustix::fs::fstat(dir).map_err(io::Error::from)?;
        let parent = user.parent().unwrap_or(Path::new("."));
        self.check_access(
            parent,
            &st,
            MAY_WRITE | MAY_SEARCH,
            "write in the directory",
        )
    }

    /// The work directory's host path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `user` relative to the work dir: a relative path as it is, an absolute one with the work
    /// dir's path taken off (the container sees the work dir at the same path). `.` for the work
    /// dir itself. Errors: [`Error::PathEscape`] for an absolute path elsewhere.
    pub fn relative(&self, user: &Path) -> Result<PathBuf, Error> {
        let rel = if user.is_absolute() {
            user.strip_prefix(&self.path)
                .map_err(|_| {
                    Error::PathEscape(format!(
                        "refusing {}: it is outside the sandbox's work dir {}; give a path inside it, or relative to it",
                        user.display(),
                        self.path.display()
                    ))
                })?
                .to_path_buf()
        } else {
            user.to_path_buf()
        };
        Ok(if rel.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            rel
        })
    }

    /// The host path `user` names (lexically; for reports).
    pub fn host_path(&self, user: &Path) -> PathBuf {
        match self.relative(user) {
            Ok(rel) if rel == Path::new(".") => self.path.clone(),
            Ok(rel) => self.path.join(rel),
            Err(_) => user.to_path_buf(),
        }
    }

    /// The canonical host path of the directory `user` (relative, or absolute inside the work
    /// dir), resolved beneath the work dir as every path here is: `..` above it, an absolute
    /// symlink or one that climbs out is refused during resolution. The path is read back from
    /// the kernel (`/proc/self/fd`), so it holds no symlink. Errors: [`Error::PathEscape`], a
    /// missing directory or one that is not a directory.
    pub fn dir_path(&self, user: &Path) -> Result<PathBuf> {
        let rel = self.relative(user)?;
        let fd = self.open_beneath(user, &rel, OFlags::PATH | OFlags::DIRECTORY)?;
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .with_context(|| format!("cannot tell where {} leads", user.display()))?;
        anyhow::ensure!(
            link.starts_with(&self.path),
            "{} was moved out of the work dir while it was resolved; try again",
            user.display()
        );
        Ok(link)
    }

    /// Resolves `rel` beneath the work dir with `flags`, following symlinks that stay inside.
    fn open_beneath(&self, user: &Path, rel: &Path, flags: OFlags) -> Result<OwnedFd> {
        for _ in 0..EAGAIN_RETRIES {
            match rustix::fs::openat2(
                &self.fd,
                rel,
                flags | OFlags::CLOEXEC,
                Mode::empty(),
                beneath(),
            ) {
                Err(Errno::AGAIN) | Err(Errno::INTR) => continue,
                r => return r.map_err(|e| self.resolve_error(user, e)),
            }
        }
        Err(anyhow!(
            "{}: the work dir kept changing while the path was resolved; try again",
            user.display()
        ))
    }

    /// The error for `openat2` failing with `e` on the user's path `user`.
    fn resolve_error(&self, user: &Path, e: Errno) -> anyhow::Error {
        match e {
            Errno::XDEV => Error::PathEscape(format!(
                "refusing {}: it leads outside the sandbox's work dir {} ('..' above it, an absolute symlink, or a symlink that climbs out); give a path that stays inside",
                user.display(),
                self.path.display()
            ))
            .into(),
            Errno::LOOP => Error::PathEscape(format!(
                "refusing {}: it runs through a symlink loop, more than {MAX_SYMLINKS} symlinks, or a /proc magic link; give a path that stays inside the work dir",
                user.display()
            ))
            .into(),
            Errno::NOSYS => no_openat2(),
            e => anyhow::Error::from(io::Error::from(e)).context(format!(
                "cannot open {} in the sandbox's work dir {} (relative paths start there)",
                user.display(),
                self.path.display()
            )),
        }
    }

    /// Opens the regular file `user` for reading. Errors: escapes ([`Error::PathEscape`]), a
    /// missing file, and anything but a regular file (a FIFO is opened non-blocking, so a planted
    /// one cannot hang us).
    pub fn open_file(&self, user: &Path) -> Result<(File, Stat)> {
        let rel = self.relative(user)?;
        let fd = self.open_beneath(
            user,
            &rel,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
        )?;
        let (file, st) = regular_file(user, fd)?;
        self.check_access(user, &st, MAY_READ, "read")?;
        Ok((file, st))
    }

    /// Copies the file `user` (at most `max` bytes) to the descriptor `out` (a file, pipe, socket
    /// or terminal) inside the kernel where it can, see [`pump`]: the bytes never pass through
    /// this process's memory, which stays flat whatever the size. Errors as for
    /// [`WorkDir::read_to`].
    pub fn read_to_fd(
        &self,
        user: &Path,
        max: Option<u64>,
        out: BorrowedFd<'_>,
    ) -> Result<ReadInfo> {
        let (file, st) = self.open_file(user)?;
        let bytes = pump(&file, out, max)
            .with_context(|| format!("cannot copy out {}", self.host_path(user).display()))?;
        Ok(ReadInfo {
            path: self.host_path(user),
            size: st.st_size as u64,
            bytes,
        })
    }

    /// Copies the file `user` (at most `max` bytes) to `out`, streaming (std's `io::copy`).
    /// Errors: escapes ([`Error::PathEscape`]), a missing file, anything but a regular file (a
    /// FIFO is opened non-blocking, so a planted one cannot hang us), `out`'s write errors.
    pub fn read_to<W: Write>(
        &self,
        user: &Path,
        max: Option<u64>,
        out: &mut W,
    ) -> Result<ReadInfo> {
        let (file, st) = self.open_file(user)?;
        let bytes = match max {
            Some(m) => io::copy(&mut file.take(m), out),
            None => io::copy(&mut { file }, out),
        }
        .with_context(|| format!("cannot copy out {}", self.host_path(user).display()))?;
        Ok(ReadInfo {
            path: self.host_path(user),
            size: st.st_size as u64,
            bytes,
        })
    }

    /// The first `max` bytes (all without a cap) of the file `user`, with its size, when they
    /// are at most `hold` bytes; otherwise, without reading them, `Err(size)`: the bytes there
    /// are (the file's size, checked before reading, or `hold + 1` when it grew past `hold`
    /// while being read). Memory stays within `hold` whatever the file (a sparse file reports
    /// any size). Errors (outer) as for [`WorkDir::read_to`].
    pub fn read_bytes(
        &self,
        user: &Path,
        max: Option<u64>,
        hold: u64,
    ) -> Result<Result<(Vec<u8>, ReadInfo), u64>> {
        let (file, st) = self.open_file(user)?;
        let size = st.st_size as u64;
        let want = max.map_or(size, |m| m.min(size));
        if want > hold {
            return Ok(Err(size));
        }
        let limit = max.unwrap_or(u64::MAX).min(hold.saturating_add(1));
        let mut buf = Vec::with_capacity(want as usize);
        let bytes = file
            .take(limit)
            .read_to_end(&mut buf)
            .with_context(|| format!("cannot read {}", self.host_path(user).display()))?
            as u64;
        if bytes > hold {
            return Ok(Err(bytes));
        }
        let info = ReadInfo {
            path: self.host_path(user),
            size,
            bytes,
        };
        Ok(Ok((buf, info)))
    }

    /// Lines `first` (1-based; 0 counts as 1) onwards of the file `user`: at most `limit` of
    /// them, and at most `max_bytes` bytes of them (each counted with its line break), but
    /// always at least the first wanted line (cut to `max_bytes` when it alone is longer).
    /// Streams: memory stays bounded by the cap whatever the file's size, and the rest of the
    /// file is only counted. Errors as for [`WorkDir::read_to`].
    pub fn read_lines(
        &self,
        user: &Path,
        first: u64,
        limit: u64,
        max_bytes: usize,
    ) -> Result<Lines> {
        let (file, st) = self.open_file(user)?;
        let host = self.host_path(user);
        let reader = io::BufReader::with_capacity(64 * 1024, file.take(SCAN_MAX_BYTES));
        let mut lines = scan_lines(reader, first, limit, max_bytes)
            .with_context(|| format!("cannot read {}", host.display()))?;
        lines.path = host;
        lines.size = st.st_size as u64;
        Ok(lines)
    }

    /// The first component of the directory `rel` (a prefix of it, resolved beneath the work dir
    /// as every access is) that exists and is not a directory: what keeps a write of `user` out.
    fn in_the_way(&self, user: &Path, rel: &Path) -> Option<PathBuf> {
        let mut prefix = PathBuf::new();
        for c in rel.components() {
            prefix.push(c);
            let fd = self.open_beneath(user, &prefix, OFlags::PATH).ok()?;
            let st = rustix::fs::fstat(&fd).ok()?;
            if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
                return Some(prefix);
            }
        }
        None
    }

    /// Opens the directory `rel` beneath the work dir (`O_PATH`), creating missing components
    /// when `parents` (each one with `mkdirat` in the directory resolved so far, then resolved
    /// again from the work dir, so a symlink swapped in meanwhile is caught), owned by `owner`.
    fn open_dir(
        &self,
        user: &Path,
        rel: &Path,
        parents: bool,
        owner: Option<Ids>,
    ) -> Result<OwnedFd> {
        let flags = OFlags::PATH | OFlags::DIRECTORY;
        match self.open_beneath(user, rel, flags) {
            Err(e) if parents && is_errno(&e, Errno::NOENT) => {}
            Err(e) if is_errno(&e, Errno::NOTDIR) => {
                let file = self.in_the_way(user, rel);
                return Err(anyhow!(
                    "cannot write {}: {} is not a directory; remove it, or choose another path",
                    user.display(),
                    file.as_deref().unwrap_or(rel).display()
                ));
            }
            r => return r,
        }
        let mut dir = self.open_beneath(user, Path::new("."), flags)?;
        let mut prefix = PathBuf::new();
        for comp in rel.as_os_str().as_bytes().split(|&b| b == b'/') {
            if comp.is_empty() || comp == b"." {
                continue;
            }
            let comp = OsStr::from_bytes(comp);
            prefix.push(comp);
            match self.open_beneath(user, &prefix, flags) {
                Ok(fd) => dir = fd,
                Err(e) if is_errno(&e, Errno::NOENT) => {
                    match rustix::fs::mkdirat(&dir, comp, Mode::from_raw_mode(0o755)) {
                        Ok(()) => {
                            if let Some(o) = owner {
                                // NOFOLLOW: if a symlink replaced the new directory, only the link
                                // changes owner.
                                let _ = rustix::fs::chownat(
                                    &dir,
                                    comp,
                                    Some(Uid::from_raw(o.uid)),
                                    Some(Gid::from_raw(o.gid)),
                                    AtFlags::SYMLINK_NOFOLLOW,
                                );
                            }
                        }
                        Err(Errno::EXIST) => {}
                        Err(e) => {
                            return Err(io::Error::from(e)).with_context(|| {
                                format!(
                                    "{}: cannot create the directory {}",
                                    user.display(),
                                    self.path.join(&prefix).display()
                                )
                            })
                        }
                    }
                    dir = self.open_beneath(user, &prefix, flags)?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(dir)
    }

    /// For `--no-clobber`: fails with [`Error::Exists`] when anything is at `user`'s final name
    /// (not followed: a symlink counts, dangling or not). A cheap early answer; the final
    /// rename checks again, atomically.
    fn refuse_existing(&self, user: &Path, parents: bool, owner: Option<Ids>) -> Result<()> {
        let rel = self.relative(user)?;
        let (parent, name) = split_final(user, &rel)?;
        let dir = match self.open_dir(user, &parent, parents, owner) {
            Err(e) if is_errno(&e, Errno::NOENT) => return Ok(()), // reported by the write
            r => r?,
        };
        match rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => Ok(()),
            Ok(_) => Err(Error::Exists {
                path: self.host_path(user).display().to_string(),
            }
            .into()),
            Err(e) => Err(io::Error::from(e))
                .with_context(|| format!("{}: cannot look it up", user.display())),
        }
    }

    /// Resolves where writing `user` lands: its parent directory (beneath the work dir) and the
    /// final name, with a final symlink followed by re-resolving its target from the work dir
    /// (so it must stay inside too).
    fn target(&self, user: &Path, parents: bool, owner: Option<Ids>) -> Result<Target> {
        let mut rel = self.relative(user)?;
        for _ in 0..=MAX_SYMLINKS {
            let (parent, name) = split_final(user, &rel)?;
            let dir = self.open_dir(user, &parent, parents, owner)?;
            let st = match rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT) => {
                    return Ok(Target {
                        dir,
                        name,
                        existing: None,
                    })
                }
                Err(e) => {
                    return Err(io::Error::from(e))
                        .with_context(|| format!("{}: cannot look it up", user.display()))
                }
            };
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Symlink => {
                    let link = rustix::fs::readlinkat(&dir, name.as_os_str(), Vec::new())
                        .map_err(io::Error::from)
                        .with_context(|| format!("{}: cannot read the symlink", user.display()))?;
                    let link = PathBuf::from(OsStr::from_bytes(link.as_bytes()));
                    if link.is_absolute() {
                        return Err(self.resolve_error(user, Errno::XDEV));
                    }
                    rel = parent.join(link);
                }
                FileType::RegularFile => {
                    return Ok(Target {
                        dir,
                        name,
                        existing: Some(st),
                    })
                }
                _ => return Err(not_regular(user, &st).into()),
            }
        }
        Err(self.resolve_error(user, Errno::LOOP))
    }

    /// Replaces (or creates) the file `user` with the bytes of `data`, atomically: see the
    /// module documentation. Streams `data` (std's `io::copy`: `copy_file_range`/`splice` where
    /// the kernel can). New files get `opts.mode` or [`DEFAULT_MODE`] and `opts.owner`; an
    /// existing file keeps its permission bits (set-ID bits dropped) and owner unless `opts.mode`
    /// is given. Errors: escapes ([`Error::PathEscape`]), a directory or other non-regular file
    /// at `user`, a missing parent without `opts.parents`, I/O errors of `data` or the disk (the
    /// old file is then untouched), an [`Abort`].
    pub fn write<R: Read>(
        &self,
        user: &Path,
        data: &mut R,
        opts: &WriteOptions,
        abort: Option<&Abort>,
    ) -> Result<Written> {
        if let Some(m) = opts.mode {
            anyhow::ensure!(m <= 0o777, "mode {m:o} has bits beyond 0777");
        }
        let host = self.host_path(user);
        if opts.no_clobber {
            anyhow::ensure!(!opts.append, "--no-clobber and --append exclude each other");
            self.refuse_existing(user, opts.parents, opts.owner)?;
        }
        let t = match self.target(user, opts.parents, opts.owner) {
            Err(e) if !opts.parents && is_errno(&e, Errno::NOENT) => {
                return Err(Error::Invalid(format!(
                    "the directory of {} does not exist in the work dir {}; pass --parents to create it",
                    user.display(),
                    self.path.display()
                ))
                .into())
            }
            r => r?,
        };
        // As the sandbox's user: an existing file must be writable (a read-only file is not
        // replaced, though the rename could: as `>` in a shell), and the file is replaced by a
        // rename in its directory, which needs the directory too.
        if let Some(st) = &t.existing {
            self.check_access(user, st, MAY_WRITE, "write")?;
            if opts.append {
                self.check_access(user, st, MAY_READ, "append to")?;
            }
        }
        self.check_dir_access(user, &t.dir)?;
        let fail =
            |what: &str| format!("cannot {what} {}; it keeps its old content", host.display());
        let mut temp = Temp::create(&t.dir, abort).with_context(|| fail("write"))?;
        let mut size = 0;
        if opts.append && t.existing.is_some() {
            let (mut old, _) = self.open_existing(user, &t)?;
            size += io::copy(&mut old, &mut temp.file).with_context(|| fail("append to"))?;
        }
        let bytes_written = io::copy(data, &mut temp.file).with_context(|| fail("write"))?;
        size += bytes_written;
        let (mode, owner) = match &t.existing {
            Some(st) => (
                opts.mode.unwrap_or(st.st_mode & 0o777),
                Some(Ids {
                    uid: st.st_uid,
                    gid: st.st_gid,
                }),
            ),
            None => (opts.mode.unwrap_or(DEFAULT_MODE), opts.owner),
        };
        let warning = match temp.commit(&t.name, mode, owner, opts.no_clobber) {
            Err(e) if opts.no_clobber && e.raw_os_error() == Some(Errno::EXIST.raw_os_error()) => {
                return Err(Error::Exists {
                    path: host.display().to_string(),
                }
                .into())
            }
            r => r.with_context(|| fail("write"))?,
        }
        .map(|w| format!("{}: {w}", host.display()));
        Ok(Written {
            path: host,
            bytes_written,
            size,
            warning,
        })
    }

    /// Opens the regular file at `t` for reading, without following a symlink swapped in.
    fn open_existing(&self, user: &Path, t: &Target) -> Result<(File, Stat)> {
        let fd = rustix::fs::openat(
            &t.dir,
            t.name.as_os_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::LOOP => Error::PathEscape(format!(
                "refusing {}: it was replaced by a symlink while it was opened; try again",
                user.display()
            ))
            .into(),
            e => anyhow::Error::from(io::Error::from(e))
                .context(format!("cannot open {}", self.host_path(user).display())),
        })?;
        regular_file(user, fd)
    }

    /// Replaces `old` by `new` in the file `user`, atomically like [`WorkDir::write`], keeping
    /// its mode and owner. `old` must occur exactly once, or at least once with `all`.
    /// Errors: [`Error::EditMatch`] naming the count, and those of [`WorkDir::write`].
    pub fn edit(
        &self,
        user: &Path,
        old: &[u8],
        new: &[u8],
        all: bool,
        abort: Option<&Abort>,
    ) -> Result<Edited> {
        if old.is_empty() {
            return Err(Error::Invalid(
                "the text to replace (--old) is empty; give the text to find".into(),
            )
            .into());
        }
        let t = self.target(user, false, None)?;
        let host = self.host_path(user);
        if t.existing.is_none() {
            return Err(anyhow::Error::from(io::Error::from(Errno::NOENT))
                .context(format!("cannot edit {}", host.display())));
        }
        let (mut file, st) = self.open_existing(user, &t)?;
        self.check_access(user, &st, MAY_READ | MAY_WRITE, "edit")?;
        self.check_dir_access(user, &t.dir)?;
        if st.st_size as u64 > EDIT_MAX_BYTES {
            return Err(Error::Invalid(format!(
                "cannot edit {}: it is {} bytes, more than edit's limit of {} (edit loads the file into memory); use `exec` with sed or a script instead",
                host.display(),
                st.st_size,
                EDIT_MAX_BYTES
            ))
            .into());
        }
        let mut content = Vec::with_capacity(st.st_size as usize);
        // Bounded, also if the file grows while it is read.
        (&mut file)
            .take(EDIT_MAX_BYTES + 1)
            .read_to_end(&mut content)
            .with_context(|| format!("cannot read {}", host.display()))?;
        if content.len() as u64 > EDIT_MAX_BYTES {
            return Err(Error::Invalid(format!(
                "cannot edit {}: it grew past edit's limit of {EDIT_MAX_BYTES} bytes while being read",
                host.display()
            ))
            .into());
        }
        // Non-overlapping occurrences, left to right (as `str::replace`), counted without
        // keeping them: a file of 64 MiB of `a` has 64 Mi of them.
        let finder = memchr::memmem::Finder::new(old);
        let count = finder.find_iter(&content).count();
        if count == 0 || (count > 1 && !all) {
            return Err(Error::EditMatch {
                path: host.display().to_string(),
                count,
            }
            .into());
        }
        // What the file becomes, checked before anything is written: a short `old` replaced
        // by a long `new` everywhere multiplies the file.
        let size = content.len() as u128 - count as u128 * old.len() as u128
            + count as u128 * new.len() as u128;
        if size > EDIT_MAX_BYTES as u128 {
            return Err(Error::Invalid(format!(
                "cannot edit {}: replacing {count} occurrence(s) would make it {size} bytes, more than edit's limit of {EDIT_MAX_BYTES}; use `exec` with sed or a script instead",
                host.display()
            ))
            .into());
        }
        let fail = || format!("cannot write {}; it keeps its old content", host.display());
        let mut temp = Temp::create(&t.dir, abort).with_context(fail)?;
        {
            let mut out = io::BufWriter::with_capacity(PUMP_BUFFER, &mut temp.file);
            let mut at = 0;
            for s in finder.find_iter(&content) {
                out.write_all(&content[at..s]).with_context(fail)?;
                out.write_all(new).with_context(fail)?;
                at = s + old.len();
            }
            out.write_all(&content[at..]).with_context(fail)?;
            out.flush().with_context(fail)?;
        }
        let owner = Some(Ids {
            uid: st.st_uid,
            gid: st.st_gid,
        });
        let warning = temp
            .commit(&t.name, st.st_mode & 0o777, owner, false)
            .with_context(fail)?
            .map(|w| format!("{}: {w}", host.display()));
        Ok(Edited {
            path: host,
            replacements: count,
            size: size as u64,
            warning,
        })
    }
}

/// `content` with `old` replaced by `new` (non-overlapping, left to right): exactly one
/// occurrence, or at least one with `all`; returns the new content and the count. `path` names
/// the file in errors. Errors: [`Error::EditMatch`] naming the count, an empty `old`, a result
/// larger than [`EDIT_MAX_BYTES`].
pub fn replace_in(
    content: &[u8],
    old: &[u8],
    new: &[u8],
    all: bool,
    path: &str,
) -> Result<(Vec<u8>, usize)> {
    if old.is_empty() {
        return Err(Error::Invalid(
            "the text to replace (--old) is empty; give the text to find".into(),
        )
        .into());
    }
    let finder = memchr::memmem::Finder::new(old);
    let count = finder.find_iter(content).count();
    if count == 0 || (count > 1 && !all) {
        return Err(Error::EditMatch {
            path: path.to_string(),
            count,
        }
        .into());
    }
    let size = content.len() as u128 - count as u128 * old.len() as u128
        + count as u128 * new.len() as u128;
    if size > EDIT_MAX_BYTES as u128 {
        return Err(Error::Invalid(format!(
            "cannot edit {path}: replacing {count} occurrence(s) would make it {size} bytes, more than edit's limit of {EDIT_MAX_BYTES}; use `exec` with sed or a script instead"
        ))
        .into());
    }
    let mut out = Vec::with_capacity(size as usize);
    let mut at = 0;
    for s in finder.find_iter(content) {
        out.extend_from_slice(&content[at..s]);
        out.extend_from_slice(new);
        at = s + old.len();
    }
    out.extend_from_slice(&content[at..]);
    Ok((out, count))
}

/// [`WorkDir::read_lines`] on any reader; `path` and `size` are left empty.
pub fn scan_lines<R: BufRead>(
    mut r: R,
    first: u64,
    limit: u64,
    max_bytes: usize,
) -> io::Result<Lines> {
    let first = first.max(1);
    let mut out = Lines {
        path: PathBuf::new(),
        size: 0,
        first,
        lines: Vec::new(),
        total: 0,
        cut: false,
        open_end: false,
        binary: false,
    };
    let probe = r.fill_buf()?;
    out.binary = memchr::memchr(0, &probe[..probe.len().min(BINARY_PROBE)]).is_some();
    let mut collecting = limit > 0;
    let mut used = 0usize; // bytes of the lines kept, line breaks included
    let mut line: Vec<u8> = Vec::new(); // the wanted line being read, at most the room left + 1
    let mut partial = false; // a line without its `\n` yet has been read
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let n = buf.len();
        if !collecting {
            // Only counting now.
            out.total += memchr::memchr_iter(b'\n', buf).count() as u64;
            partial = buf[n - 1] != b'\n';
            r.consume(n);
            continue;
        }
        let (seg, newline) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        let line_no = out.total + 1;
        if line_no >= first {
            let room = (max_bytes - used.min(max_bytes)) + 1;
            let take = seg.len().min(room.saturating_sub(line.len()));
            line.extend_from_slice(&seg[..take]);
        }
        let consumed = seg.len() + usize::from(newline);
        partial = !newline;
        r.consume(consumed);
        if newline {
            end_line(
                &mut out,
                &mut line,
                &mut used,
                &mut collecting,
                limit,
                max_bytes,
            );
        }
    }
    out.open_end = partial;
    if partial {
        if collecting {
            end_line(
                &mut out,
                &mut line,
                &mut used,
                &mut collecting,
                limit,
                max_bytes,
            );
        } else {
            out.total += 1;
        }
    }
    out.binary |= out.lines.iter().any(|l| memchr::memchr(0, l).is_some());
    Ok(out)
}

/// Ends line number `out.total + 1` of [`scan_lines`]: keeps it when it is wanted and fits.
fn end_line(
    out: &mut Lines,
    line: &mut Vec<u8>,
    used: &mut usize,
    collecting: &mut bool,
    limit: u64,
    max_bytes: usize,
) {
    out.total += 1;
    if out.total < out.first {
        return;
    }
    let mut text = std::mem::take(line);
    if *used + text.len() + 1 > max_bytes {
        // Too long for what is left: it starts the next run, unless it is the first line, which
        // is returned cut rather than never.
        if out.lines.is_empty() {
            out.cut = text.len() > max_bytes;
            text.truncate(max_bytes);
            out.lines.push(text);
        }
        *collecting = false;
        return;
    }
    *used += text.len() + 1;
    out.lines.push(text);
    if out.lines.len() as u64 >= limit {
        *collecting = false;
    }
}

/// Size of the buffer of [`pump`]'s last resort, as GNU `cat` uses.
const PUMP_BUFFER: usize = 128 * 1024;

/// Copies from the current offset of `src` to `dst` until EOF or `max` bytes: with
/// `copy_file_range(2)` (file to file, in the kernel, reflinked where the file system can), else
/// `sendfile(2)` (file to pipe, socket or anything), else `read`/`write` through one 128 KiB buffer
/// (`dst` opened with `O_APPEND`, or a kernel that has neither). Returns the bytes copied.
pub fn pump(src: &File, dst: BorrowedFd<'_>, max: Option<u64>) -> io::Result<u64> {
    /// Errors meaning "this method does not apply here" when no byte was copied yet.
    fn unsupported(e: Errno) -> bool {
        matches!(
            e,
            Errno::XDEV | Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP | Errno::BADF
        )
    }
    let mut left = max.unwrap_or(u64::MAX);
    let mut total = 0u64;
    let chunk = |left: u64| left.min(1 << 30) as usize;
    let mut method = 0;
    while left > 0 {
        let r = match method {
            0 => rustix::fs::copy_file_range(src, None, dst, None, chunk(left)),
            1 => rustix::fs::sendfile(dst, src, None, chunk(left)),
            _ => break,
        };
        match r {
            Ok(0) => return Ok(total),
            Ok(n) => {
                total += n as u64;
                left -= n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) if total == 0 && unsupported(e) => method += 1,
            Err(e) => return Err(e.into()),
        }
    }
    if left == 0 {
        return Ok(total);
    }
    let mut buf = vec![0u8; PUMP_BUFFER];
    let mut src = src;
    let mut dst = File::from(dst.try_clone_to_owned()?);
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = match src.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        dst.write_all(&buf[..n])?;
        total += n as u64;
        left -= n as u64;
    }
    Ok(total)
}

/// Splits `rel` into its parent directory (`.` when none) and a final name that is a plain
/// file name. Errors: the path ends in `/`, `.` or `..` (it names a directory).
fn split_final(user: &Path, rel: &Path) -> Result<(PathBuf, OsString)> {
    let bytes = rel.as_os_str().as_bytes();
    let (parent, name) = match bytes.iter().rposition(|&b| b == b'/') {
        Some(i) => (&bytes[..i], &bytes[i + 1..]),
        None => (&b""[..], bytes),
    };
    if name.is_empty() || name == b"." || name == b".." {
        return Err(Error::Invalid(format!(
            "{} names a directory; give the path of a file",
            user.display()
        ))
        .into());
    }
    let parent = if parent.is_empty() {
        b"." as &[u8]
    } else {
        parent
    };
    Ok((
        PathBuf::from(OsStr::from_bytes(parent)),
        OsStr::from_bytes(name).to_os_string(),
    ))
}

fn ensure_regular(user: &Path, st: &Stat) -> Result<(), Error> {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Ok(()),
        _ => Err(not_regular(user, st)),
    }
}

fn not_regular(user: &Path, st: &Stat) -> Error {
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Unknown => "of an unknown type",
    };
    Error::Invalid(format!(
        "{} is {kind}, not a regular file; give the path of a file",
        user.display()
    ))
}

fn is_errno(e: &anyhow::Error, want: Errno) -> bool {
    e.downcast_ref::<io::Error>()
        .and_then(io::Error::raw_os_error)
        .is_some_and(|c| c == want.raw_os_error())
}

fn no_openat2() -> anyhow::Error {
    anyhow!(
        "this kernel lacks openat2(2) (Linux 5.6 or later), which h9sandbox needs to resolve paths safely against symlinks planted in the sandbox; upgrade the kernel, or copy files with `h9sandbox exec`"
    )
}

/// Parses an octal permission string such as `644` or `0755` (at most `777`).
pub fn parse_mode(s: &str) -> Result<u32, Error> {
    let t = s.strip_prefix("0o").unwrap_or(s);
    match u32::from_str_radix(t, 8) {
        Ok(m) if m <= 0o777 && !t.is_empty() && !t.starts_with('+') => Ok(m),
        _ => Err(Error::Invalid(format!(
            "invalid --mode '{s}': give octal permission bits from 000 to 777, such as 644"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str, first: u64, limit: u64, max: usize) -> (Vec<String>, u64, bool) {
        // A tiny buffer, so that lines straddle reads.
        let r = io::BufReader::with_capacity(3, text.as_bytes());
        let l = scan_lines(r, first, limit, max).unwrap();
        let lines = l
            .lines
            .iter()
            .map(|b| String::from_utf8(b.clone()).unwrap())
            .collect();
        (lines, l.total, l.cut)
    }

    #[test]
    fn lines_by_number_count_and_bytes() {
        let t = "one\ntwo\nthree\nfour";
        assert_eq!(
            scan(t, 1, 100, 1000),
            (
                vec!["one", "two", "three", "four"]
                    .into_iter()
                    .map(String::from)
                    .collect(),
                4,
                false
            )
        );
        assert_eq!(scan(t, 0, 2, 1000).0, ["one", "two"]);
        assert_eq!(
            scan(t, 2, 2, 1000),
            (vec!["two".into(), "three".into()], 4, false)
        );
        assert_eq!(scan(t, 4, 9, 1000).0, ["four"]);
        assert_eq!(scan(t, 5, 9, 1000), (vec![], 4, false));
        assert_eq!(scan(t, 1, 0, 1000), (vec![], 4, false));
        // Bytes: each line costs its length plus the line break; the line that does not fit
        // starts the next run.
        assert_eq!(scan(t, 1, 100, 8).0, ["one", "two"]);
        assert_eq!(scan(t, 1, 100, 7).0, ["one"]);
        // A first line longer than the cap comes cut, alone.
        assert_eq!(
            scan("abcdefgh\nx\n", 1, 100, 5),
            (vec!["abcde".into()], 2, true)
        );
        assert_eq!(scan("", 1, 10, 10), (vec![], 0, false));
        assert_eq!(
            scan("\n\n", 1, 10, 10),
            (vec!["".into(), "".into()], 2, false)
        );
        assert_eq!(scan("a\r\nb\n", 1, 10, 10).0, ["a\r", "b"]);
    }

    #[test]
    fn nul_bytes_mean_binary() {
        let l = scan_lines(&b"\x89PNG\r\n\x1a\n\0\0"[..], 1, 1, 100).unwrap();
        assert!(l.binary);
        let l = scan_lines(&b"text\n"[..], 1, 1, 100).unwrap();
        assert!(!l.binary);
        let mut late = vec![b'a'; BINARY_PROBE + 10];
        late.extend_from_slice(b"\n\0\n");
        assert!(!scan_lines(&late[..], 1, 1, 1 << 20).unwrap().binary);
        assert!(scan_lines(&late[..], 2, 1, 1 << 20).unwrap().binary);
    }
    use rustix::fs::CWD;
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

    fn setup() -> (tempfile::TempDir, PathBuf, WorkDir) {
        let root = tempfile::tempdir().unwrap();
        let work = root.path().join("work");
        std::fs::create_dir(&work).unwrap();
        std::fs::write(root.path().join("canary"), "outside").unwrap();
        let wd = WorkDir::open(&work.canonicalize().unwrap()).unwrap();
        (root, work, wd)
    }

    fn escape(e: anyhow::Error) -> bool {
        matches!(e.downcast_ref::<Error>(), Some(Error::PathEscape(_)))
    }

    #[test]
    fn read_bytes_holds_at_most_what_it_may() {
        let (_r, work, wd) = setup();
        // A sparse terabyte costs the sandbox nothing; it is refused before a byte is read.
        std::fs::File::create(work.join("sparse"))
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        assert_eq!(
            wd.read_bytes(Path::new("sparse"), None, 1024).unwrap(),
            Err(1 << 40)
        );
        let (head, info) = wd
            .read_bytes(Path::new("sparse"), Some(3), 1024)
            .unwrap()
            .unwrap();
        assert_eq!((head, info.size, info.bytes), (vec![0; 3], 1 << 40, 3));
        std::fs::write(work.join("ten"), "0123456789").unwrap();
        assert_eq!(wd.read_bytes(Path::new("ten"), None, 9).unwrap(), Err(10));
        let (all, _) = wd.read_bytes(Path::new("ten"), None, 10).unwrap().unwrap();
        assert_eq!(all, b"0123456789");
    }

    #[test]
    fn edit_counts_and_bounds_the_result_before_writing() {
        let (_r, work, wd) = setup();
        std::fs::write(work.join("a"), "a".repeat(1000)).unwrap();
        let big = vec![b'x'; (EDIT_MAX_BYTES / 500) as usize];
        let e = wd.edit(Path::new("a"), b"a", &big, true, None).unwrap_err();
        assert!(e.to_string().contains("edit's limit"), "{e}");
        assert_eq!(std::fs::read(work.join("a")).unwrap().len(), 1000);
        let done = wd.edit(Path::new("a"), b"aa", b"b", true, None).unwrap();
        assert_eq!((done.replacements, done.size), (500, 500));
        assert_eq!(std::fs::read(work.join("a")).unwrap(), vec![b'b'; 500]);
    }

    #[test]
    fn relative_paths_and_absolute_ones_inside() {
        let (_r, work, wd) = setup();
        let w = work.canonicalize().unwrap();
        assert_eq!(wd.relative(Path::new("a/b")).unwrap(), Path::new("a/b"));
        assert_eq!(wd.relative(&w.join("a/b")).unwrap(), Path::new("a/b"));
        assert_eq!(wd.relative(&w).unwrap(), Path::new("."));
        assert!(matches!(
            wd.relative(Path::new("/etc/passwd")),
            Err(Error::PathEscape(_))
        ));
        // A sibling with the work dir's name as a prefix is not inside.
        let sibling = PathBuf::from(format!("{}x/f", w.display()));
        assert!(wd.relative(&sibling).is_err());
    }

    #[test]
    fn escapes_are_refused_and_inside_links_work() {
        let (root, work, wd) = setup();
        std::fs::create_dir(work.join("sub")).unwrap();
        std::fs::write(work.join("sub/f"), "inside").unwrap();
        symlink("/", work.join("root")).unwrap();
        symlink("..", work.join("up")).unwrap();
        symlink(root.path().join("canary"), work.join("abs")).unwrap();
        symlink("../canary", work.join("rel")).unwrap();
        symlink("sub/f", work.join("good")).unwrap();
        symlink("sub", work.join("gooddir")).unwrap();
        for p in [
            "root/etc/passwd",
            "up/canary",
            "abs",
            "rel",
            "../canary",
            "sub/../../canary",
        ] {
            let e = wd.read_bytes(Path::new(p), None, 1 << 20).unwrap_err();
            assert!(escape(e), "read {p}");
            let e = wd
                .write(Path::new(p), &mut &b"x"[..], &WriteOptions::default(), None)
                .unwrap_err();
            assert!(escape(e), "write {p}");
        }
        assert_eq!(
            std::fs::read_to_string(root.path().join("canary")).unwrap(),
            "outside"
        );
        assert_eq!(
            wd.read_bytes(Path::new("good"), None, 1 << 20)
                .unwrap()
                .unwrap()
                .0,
            b"inside"
        );
        assert_eq!(
            wd.read_bytes(Path::new("gooddir/f"), None, 1 << 20)
                .unwrap()
                .unwrap()
                .0,
            b"inside"
        );
        // Writing through an inside symlink updates its target and keeps the link.
        wd.write(
            Path::new("good"),
            &mut &b"new"[..],
            &WriteOptions::default(),
            None,
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(work.join("sub/f")).unwrap(), "new");
        assert!(std::fs::symlink_metadata(work.join("good"))
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn writes_are_atomic_keep_mode_and_leave_no_temp_file() {
        let (_r, work, wd) = setup();
        let opts = WriteOptions::default();
        let w = wd
            .write(Path::new("f"), &mut &b"one"[..], &opts, None)
            .unwrap();
        assert_eq!((w.bytes_written, w.size), (3, 3));
        assert_eq!(
            std::fs::metadata(work.join("f"))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777,
            DEFAULT_MODE
        );
        std::fs::set_permissions(work.join("f"), std::fs::Permissions::from_mode(0o4750)).unwrap();
        let append = WriteOptions {
            append: true,
            ..opts
        };
        let w = wd
            .write(Path::new("f"), &mut &b"two"[..], &append, None)
            .unwrap();
        assert_eq!((w.bytes_written, w.size), (3, 6));
        assert_eq!(std::fs::read_to_string(work.join("f")).unwrap(), "onetwo");
        // Permission bits kept, the set-user-ID bit dropped.
        assert_eq!(
            std::fs::metadata(work.join("f")).unwrap().mode() & 0o7777,
            0o750
        );
        // A reader that fails midway leaves the old content and no temporary file.
        struct Failing(usize);
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::other("disk on fire"));
                }
                self.0 -= 1;
                buf[0] = b'x';
                Ok(1)
            }
        }
        let e = wd
            .write(Path::new("f"), &mut Failing(5), &opts, None)
            .unwrap_err();
        assert!(format!("{e:#}").contains("disk on fire"), "{e:#}");
        assert_eq!(std::fs::read_to_string(work.join("f")).unwrap(), "onetwo");
        let names: Vec<_> = std::fs::read_dir(&work)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["f"]);
    }

    #[test]
    fn parents_directories_and_non_files() {
        let (_r, work, wd) = setup();
        let opts = WriteOptions::default();
        let e = wd
            .write(Path::new("a/b/c"), &mut &b"x"[..], &opts, None)
            .unwrap_err();
        assert!(e.to_string().contains("--parents"), "{e:#}");
        let parents = WriteOptions {
            parents: true,
            ..opts
        };
        wd.write(Path::new("a/./b//c"), &mut &b"x"[..], &parents, None)
            .unwrap();
        assert_eq!(std::fs::read(work.join("a/b/c")).unwrap(), b"x");
        for p in ["a", "a/b/", "a/..", "."] {
            assert!(
                wd.write(Path::new(p), &mut &b"x"[..], &opts, None).is_err(),
                "{p}"
            );
            assert!(wd.read_bytes(Path::new(p), None, 1 << 20).is_err(), "{p}");
        }
        rustix::fs::mkfifoat(CWD, work.join("fifo"), Mode::from_raw_mode(0o644)).unwrap();
        let e = wd.read_bytes(Path::new("fifo"), None, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e:#}");
        assert!(wd
            .write(Path::new("fifo"), &mut &b"x"[..], &opts, None)
            .is_err());
    }

    #[test]
    fn edit_replaces_exactly_one_or_all() {
        let (_r, work, wd) = setup();
        std::fs::write(work.join("t"), "a-b-a-aa").unwrap();
        let count = |e: anyhow::Error| match e.downcast_ref::<Error>() {
            Some(Error::EditMatch { count, .. }) => *count,
            _ => panic!("{e:#}"),
        };
        assert_eq!(
            count(
                wd.edit(Path::new("t"), b"a", b"x", false, None)
                    .unwrap_err()
            ),
            4
        );
        assert_eq!(
            count(
                wd.edit(Path::new("t"), b"zz", b"x", false, None)
                    .unwrap_err()
            ),
            0
        );
        assert_eq!(std::fs::read_to_string(work.join("t")).unwrap(), "a-b-a-aa");
        assert_eq!(
            wd.edit(Path::new("t"), b"b", b"BB", false, None)
                .unwrap()
                .replacements,
            1
        );
        // Non-overlapping, left to right, like str::replace.
        std::fs::write(work.join("t"), "aaa").unwrap();
        let e = wd.edit(Path::new("t"), b"aa", b"b", true, None).unwrap();
        assert_eq!((e.replacements, e.size), (1, 2));
        assert_eq!(std::fs::read_to_string(work.join("t")).unwrap(), "ba");
    }

    #[test]
    fn abort_removes_the_temp_file_and_keeps_the_old_content() {
        let (_r, work, wd) = setup();
        std::fs::write(work.join("f"), "old").unwrap();
        let abort = Abort::new();
        struct AbortAfterFirstRead<'a>(&'a Abort, bool);
        impl Read for AbortAfterFirstRead<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.1 {
                    assert_eq!(self.0.abort(), 0, "nothing was committed yet");
                    return Ok(0);
                }
                self.1 = true;
                buf[0] = b'n';
                Ok(1)
            }
        }
        let e = wd
            .write(
                Path::new("f"),
                &mut AbortAfterFirstRead(&abort, false),
                &WriteOptions::default(),
                Some(&abort),
            )
            .unwrap_err();
        assert!(format!("{e:#}").contains("interrupted"), "{e:#}");
        assert_eq!(std::fs::read_to_string(work.join("f")).unwrap(), "old");
        assert_eq!(std::fs::read_dir(&work).unwrap().count(), 1);
        // After an abort, no write starts; a completed write is counted.
        let e = wd.write(
            Path::new("g"),
            &mut &b"x"[..],
            &WriteOptions::default(),
            Some(&abort),
        );
        assert!(e.is_err() && !work.join("g").exists());
        let fresh = Abort::new();
        wd.write(
            Path::new("g"),
            &mut &b"x"[..],
            &WriteOptions::default(),
            Some(&fresh),
        )
        .unwrap();
        assert_eq!(fresh.abort(), 1);
    }

    #[test]
    fn pump_copies_to_files_pipes_and_append_only_files() {
        use std::os::fd::AsFd;
        let (_r, work, wd) = setup();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(work.join("src"), &data).unwrap();
        // To a regular file (copy_file_range), capped.
        let out = tempfile::tempfile().unwrap();
        let info = wd
            .read_to_fd(Path::new("src"), Some(1000), out.as_fd())
            .unwrap();
        assert_eq!((info.size, info.bytes), (300_000, 1000));
        // To an O_APPEND file (copy_file_range refuses it: sendfile or the buffer loop).
        let p = work.join("appended");
        std::fs::write(&p, b"head").unwrap();
        let out = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        wd.read_to_fd(Path::new("src"), None, out.as_fd()).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), [&b"head"[..], &data].concat());
        // To a pipe (sendfile), read on another thread.
        let (mut r, w) = std::io::pipe().unwrap();
        let reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).unwrap();
            v
        });
        let info = wd.read_to_fd(Path::new("src"), None, w.as_fd()).unwrap();
        drop(w);
        assert_eq!(info.bytes, 300_000);
        assert_eq!(reader.join().unwrap(), data);
    }

    #[test]
    fn modes_parse_as_octal_permissions() {
        assert_eq!(parse_mode("644").unwrap(), 0o644);
        assert_eq!(parse_mode("0755").unwrap(), 0o755);
        assert_eq!(parse_mode("0o600").unwrap(), 0o600);
        for bad in ["", "888", "1777", "4755", "rw", "+644", "-1"] {
            assert!(parse_mode(bad).is_err(), "{bad}");
        }
    }
}
