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

mod read;
mod write;
pub(crate) use read::*;
pub(crate) use write::*;

/// How many symlinks a path may pass through, as the kernel's own limit (`MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;
/// How often a resolution is retried when `openat2` reports `EAGAIN` (a concurrent rename made
/// a `..` ambiguous; the kernel asks the caller to try again).
const EAGAIN_RETRIES: usize = 128;
/// Permission bits of a new file unless `--mode` says otherwise.
pub(crate) const DEFAULT_MODE: u32 = 0o644;
/// Prefix of the temporary files that writes create next to their target.
pub(crate) const TEMP_PREFIX: &str = ".h9tmp-";

/// The resolution rule of every path: stay beneath the work dir, never through `/proc` magic links.
/// The largest file `edit` loads into memory (64 MiB): an edit searches the whole file, and a
/// sandbox could otherwise plant a huge sparse file to exhaust the host's memory.
pub(crate) const EDIT_MAX_BYTES: u64 = 64 << 20;

fn beneath() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS
}

/// An open handle on a sandbox's work directory; every path is resolved beneath it.
#[derive(Debug)]
pub(crate) struct WorkDir {
    fd: OwnedFd,
    path: PathBuf,
    /// Whose rights the file operations check ([`WorkDir::acting_as`]); `None`: the invoking
    /// user's alone.
    acting: Option<Ids>,
}

/// Permission bits [`permits`] checks: read.
pub(crate) const MAY_READ: u32 = 4;
/// Permission bits [`permits`] checks: write.
pub(crate) const MAY_WRITE: u32 = 2;
/// Permission bits [`permits`] checks: search (a directory) or execute.
pub(crate) const MAY_SEARCH: u32 = 1;

/// Whether a process running as `who` (no supplementary groups, as the sandbox's commands run)
/// may access a file of status `st` for `want` ([`MAY_READ`], [`MAY_WRITE`], [`MAY_SEARCH`]
/// or'ed), by its permission bits as the kernel checks them (`inode_permission`): the owner's
/// bits for its owner, else the group's for its group, else the others'. Root may always: it
/// holds `CAP_DAC_OVERRIDE` in every sandbox. POSIX ACLs are not read.
pub(crate) fn permits(who: Ids, st: &Stat, want: u32) -> bool {
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

/// What [`WorkDir::read_to_fd`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadInfo {
    /// Host path of the file (the work dir joined with the given path; the container sees the same).
    pub path: PathBuf,
    /// Size of the file in bytes when it was opened.
    pub size: u64,
    /// Bytes copied out (at most the cap).
    pub bytes: u64,
}

/// A run of lines of a text file, as [`WorkDir::read_lines`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lines {
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
/// `st_size` in bytes. The kernel never gives a negative size; were it, it counts as too big for
/// every limit rather than wrapping.
fn file_size(st: &Stat) -> u64 {
    u64::try_from(st.st_size).unwrap_or(u64::MAX)
}

fn regular_file(user: &Path, fd: OwnedFd) -> Result<(File, Stat)> {
    let st = rustix::fs::fstat(&fd).map_err(io::Error::from)?;
    ensure_regular(user, &st)?;
    rustix::fs::fcntl_setfl(&fd, OFlags::empty()).map_err(io::Error::from)?;
    Ok((File::from(fd), st))
}

impl WorkDir {
    /// Opens the work directory `path` (the canonical host path the sandbox was created with).
    /// Errors: the directory is gone or unreadable; this kernel has no `openat2(2)` (checked here,
    /// so that no operation ever falls back to a weaker resolution).
    pub(crate) fn open(path: &Path) -> Result<WorkDir> {
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
    pub(crate) fn acting_as(mut self, who: Option<Ids>) -> WorkDir {
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
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// `user` relative to the work dir: a relative path as it is, an absolute one with the work
    /// dir's path taken off (the container sees the work dir at the same path). `.` for the work
    /// dir itself. Errors: [`Error::PathEscape`] for an absolute path elsewhere.
    pub(crate) fn relative(&self, user: &Path) -> Result<PathBuf, Error> {
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
    pub(crate) fn host_path(&self, user: &Path) -> PathBuf {
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
    pub(crate) fn dir_path(&self, user: &Path) -> Result<PathBuf> {
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
        return Err(Error::Usage(format!(
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
    Error::Usage(format!(
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
pub(crate) fn parse_mode(s: &str) -> Result<u32, Error> {
    let t = s.strip_prefix("0o").unwrap_or(s);
    match u32::from_str_radix(t, 8) {
        Ok(m) if m <= 0o777 && !t.is_empty() && !t.starts_with('+') => Ok(m),
        _ => Err(Error::Usage(format!(
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
