//! Tar streams in and out of a sandbox (`h9sandbox agent tar create|extract`, and the host's
//! end of `h9sandbox cp` and of a copied work dir, which use the same functions): an archive
//! keeps modes, owners, modification times and symlinks (never followed), and extraction
//! treats the stream as hostile whoever made it:
//!
//! - every name is relative and has no `..` (an absolute name or one climbing out is refused);
//! - every file is created beneath the destination through no symlink (each component opened
//!   with `O_NOFOLLOW` from the one before), so a symlink the stream made earlier (or found
//!   there) never redirects a later entry out of it; an existing non-directory entry is
//!   replaced, never written through;
//! - a hard link must name a file the stream already made beneath the destination;
//! - device files, FIFOs and sockets are skipped (and counted);
//! - set-user-ID and set-group-ID bits are dropped, and owners are kept only when asked
//!   (root copying a work dir in);
//! - the bytes written are bounded: past the limit the extraction stops with an error.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

/// What an extraction did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extracted {
    /// Regular files written.
    pub files: u64,
    /// Bytes of them.
    pub bytes: u64,
    /// Entries skipped: devices, FIFOs, sockets.
    pub skipped: u64,
}

/// How to extract.
#[derive(Debug, Clone, Default)]
pub(crate) struct ExtractOptions {
    /// The most bytes of file content to write; `None`: no bound.
    pub max_bytes: Option<u64>,
    /// Give entries their owners from the stream (root only; else the extracting user owns
    /// them).
    pub keep_owners: bool,
    /// Replace the first component of every name with this one (`cp SRC DST` to a new name).
    pub rename_top: Option<String>,
}

/// Why an extraction stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExtractError {
    /// A name that is absolute or climbs out with `..`.
    #[error("the tar stream names {0:?}, which leads out of the destination; nothing past it was extracted")]
    Escape(String),
    /// An owner (UID or GID) past 32 bits, which would otherwise be cut to another (2^32: root).
    #[error("the tar stream gives {0:?} the owner ID {1}, which does not fit in 32 bits; nothing past it was extracted")]
    Owner(String, u64),
    /// More content than the limit.
    #[error("the tar stream holds more than {0} bytes (the limit); it was cut off there")]
    TooLarge(u64),
    /// The stream or the file system failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The components of `name` (a tar entry's path) beneath the destination, or why not.
fn components(name: &Path, rename: Option<&str>) -> Result<Vec<std::ffi::OsString>, ExtractError> {
    let mut out = Vec::new();
    for c in name.components() {
        match c {
            Component::Normal(n) => out.push(n.to_os_string()),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(ExtractError::Escape(name.display().to_string()))
            }
        }
    }
    if let (Some(first), Some(new)) = (out.first_mut(), rename) {
        *first = new.into();
    }
    Ok(out)
}

/// Opens `rel` (relative, no `..`: [`components`] made it) beneath `dir`, one component at a
/// time with `O_NOFOLLOW`, so no symlink is followed on the way or at its end: what
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` does, which the sandbox's set-ID filter
/// refuses (`ENOSYS`) inside the container.
fn beneath(dir: &OwnedFd, rel: &Path, flags: OFlags, mode: Mode) -> std::io::Result<OwnedFd> {
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(Ok(n)),
            Component::CurDir => None,
            _ => Some(Err(std::io::Error::other(format!(
                "{} leads out of the destination",
                rel.display()
            )))),
        })
        .collect::<std::io::Result<_>>()?;
    let Some((last, walk)) = parts.split_last() else {
        return rustix::fs::openat(dir, ".", flags | OFlags::CLOEXEC, mode).map_err(Into::into);
    };
    let mut at: Option<OwnedFd> = None;
    for p in walk {
        let from = at.as_ref().unwrap_or(dir);
        at = Some(rustix::fs::openat(
            from,
            *p,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?);
    }
    let from = at.as_ref().unwrap_or(dir);
    rustix::fs::openat(
        from,
        *last,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        mode,
    )
    .map_err(Into::into)
}

/// Opens (making what is missing, mode 0700 until the stream says otherwise) the directory
/// `parts` beneath `root`, through no symlink.
fn make_dirs(root: &OwnedFd, parts: &[std::ffi::OsString]) -> std::io::Result<OwnedFd> {
    let mut dir = beneath(
        root,
        Path::new("."),
        OFlags::PATH | OFlags::DIRECTORY,
        Mode::empty(),
    )?;
    for p in parts {
        match beneath(
            &dir,
            Path::new(p),
            OFlags::PATH | OFlags::DIRECTORY,
            Mode::empty(),
        ) {
            Ok(d) => dir = d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                rustix::fs::mkdirat(&dir, p.as_os_str(), Mode::from_raw_mode(0o700))?;
                dir = beneath(
                    &dir,
                    Path::new(p),
                    OFlags::PATH | OFlags::DIRECTORY,
                    Mode::empty(),
                )?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(dir)
}

/// Removes the non-directory entry `name` of `dir` if there is one (a symlink is removed, never
/// followed).
fn clear(dir: &OwnedFd, name: &std::ffi::OsStr) -> std::io::Result<()> {
    match rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st)
            if rustix::fs::FileType::from_raw_mode(st.st_mode)
                == rustix::fs::FileType::Directory =>
        {
            Ok(())
        }
        Ok(_) => rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty()).map_err(Into::into),
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The permission bits of `mode` that are kept: no set-user-ID or set-group-ID bit.
fn safe_mode(mode: u32) -> u32 {
    mode & 0o1777
}

/// Writes the regular file `entry` as `last` in `parent`: created afresh (an existing
/// non-directory replaced, never written through), its content bounded by `opts.max_bytes`
/// (counted in `done`), then its owner, mode and modification time.
#[allow(clippy::too_many_arguments)]
fn write_file(
    entry: &mut tar::Entry<'_, impl Read>,
    header: &tar::Header,
    parent: &OwnedFd,
    last: &std::ffi::OsStr,
    mode: u32,
    owner: Option<(u32, u32)>,
    opts: &ExtractOptions,
    done: &mut Extracted,
) -> Result<(), ExtractError> {
    clear(parent, last)?;
    let fd = beneath(
        parent,
        Path::new(last),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
        Mode::from_raw_mode(0o600),
    )?;
    let mut file = std::fs::File::from(fd);
    let room = opts.max_bytes.map(|m| m.saturating_sub(done.bytes));
    let copied = match room {
        Some(room) => std::io::copy(&mut entry.take(room + 1), &mut file)?,
        None => std::io::copy(entry, &mut file)?,
    };
    done.bytes += copied;
    if let Some(max) = opts.max_bytes.filter(|m| done.bytes > *m) {
        return Err(ExtractError::TooLarge(max));
    }
    if let Some((u, g)) = owner {
        let _ = rustix::fs::fchown(
            file.as_fd(),
            Some(rustix::process::Uid::from_raw(u)),
            Some(rustix::process::Gid::from_raw(g)),
        );
    }
    rustix::fs::fchmod(file.as_fd(), Mode::from_raw_mode(mode)).map_err(std::io::Error::from)?;
    // One past i64::MAX seconds is not set (it would wrap to a date before 1970).
    if let Some(mtime) = header.mtime().ok().and_then(|m| i64::try_from(m).ok()) {
        let t = rustix::fs::Timespec {
            tv_sec: mtime,
            tv_nsec: 0,
        };
        let _ = rustix::fs::futimens(
            file.as_fd(),
            &rustix::fs::Timestamps {
                last_access: t,
                last_modification: t,
            },
        );
    }
    done.files += 1;
    Ok(())
}

/// A directory's path beneath the destination, mode and owner, applied once it is filled.
type DirMode = (Vec<std::ffi::OsString>, u32, Option<(u32, u32)>);

/// Extracts the tar stream `input` beneath the directory `dest` (see the module documentation).
/// Errors: [`ExtractError`]; what was extracted before stays.
pub(crate) fn extract(
    input: impl Read,
    dest: &Path,
    opts: &ExtractOptions,
) -> Result<Extracted, ExtractError> {
    // The destination itself is never a symlink gone through (one an earlier copy out of a
    // sandbox left there would lead anywhere): `O_NOFOLLOW` makes it `ENOTDIR`.
    let root: OwnedFd = rustix::fs::open(
        dest,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| std::io::Error::other(format!("{}: {e}", dest.display())))?;
    let mut archive = tar::Archive::new(input);
    let mut done = Extracted::default();
    // Directory modes are applied last, so that a read-only directory can be filled first.
    let mut dir_modes: Vec<DirMode> = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let name = entry.path()?.into_owned();
        let parts = components(&name, opts.rename_top.as_deref())?;
        let header = entry.header().clone();
        let mode = safe_mode(header.mode().unwrap_or(0o644));
        let owner = match (opts.keep_owners, header.uid(), header.gid()) {
            (true, Ok(u), Ok(g)) => {
                let id = |n: u64| {
                    u32::try_from(n).map_err(|_| ExtractError::Owner(name.display().to_string(), n))
                };
                Some((id(u)?, id(g)?))
            }
            _ => None,
        };
        let kind = header.entry_type();
        let Some((last, parents)) = parts.split_last() else {
            // `.`: the destination itself.
            if kind.is_dir() {
                dir_modes.push((Vec::new(), mode, owner));
            }
            continue;
        };
        // A symlink on the way (the stream's own, or found there) is never gone through.
        let through_link = |e: std::io::Error| match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                ExtractError::Escape(name.display().to_string())
            }
            _ => ExtractError::Io(e),
        };
        let parent = make_dirs(&root, parents).map_err(through_link)?;
        match kind {
            tar::EntryType::Directory => {
                clear(&parent, last)?;
                match rustix::fs::mkdirat(&parent, last.as_os_str(), Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(std::io::Error::from(e).into()),
                }
                dir_modes.push((parts.clone(), mode, owner));
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                write_file(
                    &mut entry, &header, &parent, last, mode, owner, opts, &mut done,
                )?;
            }
            tar::EntryType::Symlink => {
                let Some(target) = entry.link_name()? else {
                    continue;
                };
                clear(&parent, last)?;
                // Made as a link, never followed here: what it points at is its business.
                rustix::fs::symlinkat(target.as_ref(), &parent, last.as_os_str())
                    .map_err(std::io::Error::from)?;
                if let Some((u, g)) = owner {
                    let _ = rustix::fs::chownat(
                        &parent,
                        last.as_os_str(),
                        Some(rustix::process::Uid::from_raw(u)),
                        Some(rustix::process::Gid::from_raw(g)),
                        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                    );
                }
            }
            tar::EntryType::Link => {
                let Some(target) = entry.link_name()? else {
                    continue;
                };
                let tparts = components(&target, opts.rename_top.as_deref())?;
                let Some((tlast, tparents)) = tparts.split_last() else {
                    continue;
                };
                let tdir = make_dirs(&root, tparents)?;
                // The target must be a regular file beneath the destination (not a symlink).
                let st = rustix::fs::statat(
                    &tdir,
                    tlast.as_os_str(),
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(std::io::Error::from)?;
                if rustix::fs::FileType::from_raw_mode(st.st_mode)
                    != rustix::fs::FileType::RegularFile
                {
                    return Err(ExtractError::Escape(target.display().to_string()));
                }
                clear(&parent, last)?;
                rustix::fs::linkat(
                    &tdir,
                    tlast.as_os_str(),
                    &parent,
                    last.as_os_str(),
                    rustix::fs::AtFlags::empty(),
                )
                .map_err(std::io::Error::from)?;
            }
            _ => done.skipped += 1,
        }
    }
    for (parts, mode, owner) in dir_modes.into_iter().rev() {
        let rel: PathBuf = parts.iter().collect();
        let rel = if parts.is_empty() {
            PathBuf::from(".")
        } else {
            rel
        };
        if let Ok(fd) = beneath(
            &root,
            &rel,
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        ) {
            if let Some((u, g)) = owner {
                let _ = rustix::fs::fchown(
                    &fd,
                    Some(rustix::process::Uid::from_raw(u)),
                    Some(rustix::process::Gid::from_raw(g)),
                );
            }
            let _ = rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode));
        }
    }
    Ok(done)
}

/// Writes a tar stream of `src` (a directory and everything beneath it, or one file) to `out`,
/// its entries named beneath `top` (`.` for a directory's content itself): modes, owners, times
/// and symlinks as they are, nothing followed; sockets skipped. Returns the stream's writer.
pub(crate) fn archive<W: Write>(out: W, src: &Path, top: &str) -> std::io::Result<W> {
    use std::os::unix::fs::FileTypeExt;
    let mut tar = tar::Builder::new(out);
    tar.follow_symlinks(false);
    // Depth first, each directory's entries in name order, without recursion (a deep tree
    // cannot overflow the stack); the tar crate's own walk (`append_dir_all`) stops at the
    // first socket, which a tar stream cannot carry.
    let mut stack = vec![(src.to_path_buf(), PathBuf::from(top))];
    while let Some((path, name)) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.file_type().is_socket() {
            continue;
        }
        if !meta.is_dir() {
            tar.append_path_with_name(&path, &name)?;
            continue;
        }
        tar.append_dir(&name, &path)?;
        let mut entries: Vec<std::ffi::OsString> = std::fs::read_dir(&path)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<std::io::Result<_>>()?;
        entries.sort_unstable_by(|a, b| b.cmp(a));
        stack.extend(entries.into_iter().map(|e| (path.join(&e), name.join(&e))));
    }
    tar.into_inner()
}

/// The bytes of the regular files beneath `src` (not following symlinks), and how many entries.
pub(crate) fn measure(src: &Path) -> std::io::Result<(u64, u64)> {
    let meta = std::fs::symlink_metadata(src)?;
    if !meta.is_dir() {
        return Ok((if meta.is_file() { meta.len() } else { 0 }, 1));
    }
    let (mut bytes, mut entries) = (0u64, 1u64);
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir)? {
            let e = e?;
            let m = e.metadata()?;
            entries += 1;
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                bytes += m.len();
            }
        }
    }
    Ok((bytes, entries))
}

/// `h9sandbox agent tar …`.
#[derive(Debug, Clone, clap::Subcommand)]
pub(crate) enum TarCommand {
    /// Write a tar stream of PATH to stdout, named after its last component
    Create {
        /// Absolute path in the container
        path: PathBuf,
        /// The name of PATH in the stream (default: its last component; `.` for a directory's
        /// content)
        #[arg(long)]
        name: Option<String>,
    },
    /// Extract the tar stream on stdin: into PATH when it is a directory; else as PATH (its
    /// parent must exist), the stream's top name renamed
    Extract {
        /// Absolute path in the container
        path: PathBuf,
        /// Extract into PATH as the stream names its entries, PATH a directory (`cp -`)
        #[arg(long)]
        as_is: bool,
        /// Keep the stream's owners (root copying a work dir in)
        #[arg(long)]
        keep_owners: bool,
        /// Stop past this many bytes of content
        #[arg(long)]
        max_bytes: Option<u64>,
    },
}

/// Runs `h9sandbox agent tar …`; returns the exit status (0; 1 with one line on stderr).
pub(crate) fn run(cmd: &TarCommand) -> i32 {
    let r = match cmd {
        TarCommand::Create { path, name } => {
            let name = name.clone().unwrap_or_else(|| {
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| ".".into())
            });
            archive(std::io::stdout().lock(), path, &name)
                .and_then(|mut w| w.flush())
                .map(|_| String::new())
                .map_err(|e| format!("cannot archive {}: {e}", path.display()))
        }
        TarCommand::Extract {
            path,
            as_is,
            keep_owners,
            max_bytes,
        } => {
            let (dest, rename) = destination(path, *as_is);
            // `cp DIR/. ID:D` (a stream of `.`, as is) into a D that does not exist makes D, as
            // docker cp does; its parent must exist. The stream's `.` entry gives D its mode.
            if *as_is && rename.is_none() {
                if let Err(e) = std::fs::symlink_metadata(&dest) {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&dest) {
                            eprintln!("h9sandbox: error: cannot make {}: {e}", dest.display());
                            return 1;
                        }
                    }
                }
            }
            let opts = ExtractOptions {
                max_bytes: *max_bytes,
                keep_owners: *keep_owners,
                rename_top: rename,
            };
            extract(std::io::stdin().lock(), &dest, &opts)
                .map(|d| format!("extracted {} {} {}", d.files, d.bytes, d.skipped))
                .map_err(|e| format!("cannot extract into {}: {e}", dest.display()))
        }
    };
    match r {
        Ok(line) => {
            if !line.is_empty() {
                eprintln!("{line}");
            }
            0
        }
        Err(e) => {
            eprintln!("h9sandbox: error: {e}");
            1
        }
    }
}

/// Where `cp`'s semantics put a stream extracted at `path` (docker cp's): into `path` when it
/// is a directory (or `as_is`), else into its parent with the stream's top name replaced by
/// `path`'s last component.
pub(crate) fn destination(path: &Path, as_is: bool) -> (PathBuf, Option<String>) {
    // A symlink at the destination is not gone through (the caller refuses it first).
    let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    if as_is || is_dir {
        return (path.to_path_buf(), None);
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    (
        parent.to_path_buf(),
        path.file_name().map(|n| n.to_string_lossy().into_owned()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    type Entry<'a> = (&'a str, tar::EntryType, &'a [u8], Option<&'a str>, u32);

    fn tar_of(entries: &[Entry]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, kind, data, link, mode) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(*mode);
            // Names the tar crate's own setters refuse (`..`, absolute) go in raw.
            let raw = &mut h.as_old_mut().name;
            raw[..name.len()].copy_from_slice(name.as_bytes());
            if let Some(l) = link {
                h.set_link_name(l).unwrap();
            }
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn owners_past_32_bits_are_refused_not_cut() {
        let d = tempfile::tempdir().unwrap();
        let opts = ExtractOptions {
            keep_owners: true,
            ..Default::default()
        };
        for (uid, gid) in [(1u64 << 32, 0u64), (0, (1 << 32) + 1000)] {
            let mut h = tar::Header::new_gnu();
            h.set_path("f").unwrap();
            h.set_size(1);
            h.set_mode(0o644);
            // Past the octal field: GNU's base-256 numbers, which the tar crate reads as u64.
            h.set_uid(uid);
            h.set_gid(gid);
            h.set_cksum();
            let mut b = tar::Builder::new(Vec::new());
            b.append(&h, &b"x"[..]).unwrap();
            let t = b.into_inner().unwrap();
            let got = extract(&t[..], d.path(), &opts);
            assert!(
                matches!(&got, Err(ExtractError::Owner(name, n)) if name == "f" && *n == uid.max(gid)),
                "{uid} {gid}: {got:?}"
            );
            assert!(!d.path().join("f").exists());
        }
    }

    #[test]
    fn hostile_streams_never_reach_outside_the_destination() {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("dest");
        let outside = d.path().join("outside");
        std::fs::create_dir_all(&dest).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let opts = ExtractOptions::default();
        use tar::EntryType as T;
        // `..` and absolute names.
        for name in ["../outside/x", "/etc/h9-test-x", "a/../../outside/x"] {
            let t = tar_of(&[(name, T::Regular, b"bad", None, 0o644)]);
            assert!(
                matches!(extract(&t[..], &dest, &opts), Err(ExtractError::Escape(_))),
                "{name}"
            );
        }
        // A symlink out, then a file through it.
        let t = tar_of(&[
            (
                "link",
                T::Symlink,
                b"",
                Some(outside.to_str().unwrap()),
                0o777,
            ),
            ("link/x", T::Regular, b"bad", None, 0o644),
        ]);
        assert!(extract(&t[..], &dest, &opts).is_err());
        // A symlink entry replaced by a file is replaced, not written through.
        let t = tar_of(&[
            (
                "f",
                T::Symlink,
                b"",
                Some(outside.join("y").to_str().unwrap()),
                0o777,
            ),
            ("f", T::Regular, b"fine", None, 0o4755),
        ]);
        extract(&t[..], &dest, &opts).unwrap();
        assert_eq!(std::fs::read(dest.join("f")).unwrap(), b"fine");
        // Set-ID bits are dropped.
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(dest.join("f"))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777,
            0o755
        );
        // A hard link to a file outside.
        let t = tar_of(&[("h", T::Link, b"", Some("../outside/z"), 0o644)]);
        assert!(matches!(
            extract(&t[..], &dest, &opts),
            Err(ExtractError::Escape(_))
        ));
        // Devices and FIFOs are skipped.
        let t = tar_of(&[
            ("dev", T::Char, b"", None, 0o666),
            ("fifo", T::Fifo, b"", None, 0o666),
        ]);
        assert_eq!(extract(&t[..], &dest, &opts).unwrap().skipped, 2);
        assert!(!dest.join("dev").exists() && !dest.join("fifo").exists());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // Past the limit it stops.
        let t = tar_of(&[("big", T::Regular, &[7u8; 1000], None, 0o644)]);
        let small = ExtractOptions {
            max_bytes: Some(100),
            ..Default::default()
        };
        assert!(matches!(
            extract(&t[..], &dest, &small),
            Err(ExtractError::TooLarge(100))
        ));
    }

    #[test]
    fn archives_round_trip_with_symlinks_and_modes() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir_all(src.join("sub")).unwrap();
        std::fs::write(src.join("sub/a.txt"), "hello").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.join("esc")).unwrap();
        // A socket cannot be carried: skipped, not the end of the stream.
        let _listener = std::os::unix::net::UnixListener::bind(src.join("sub/0.sock")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            src.join("sub/a.txt"),
            std::fs::Permissions::from_mode(0o751),
        )
        .unwrap();
        let bytes = archive(Vec::new(), &src, "src").unwrap();
        let dest = d.path().join("dest");
        std::fs::create_dir(&dest).unwrap();
        let (into, rename) = destination(&dest.join("copy"), false);
        let done = extract(
            &bytes[..],
            &into,
            &ExtractOptions {
                rename_top: rename,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(done.files, 1);
        assert_eq!(
            std::fs::read_to_string(dest.join("copy/sub/a.txt")).unwrap(),
            "hello"
        );
        assert_eq!(
            std::fs::read_link(dest.join("copy/esc")).unwrap(),
            Path::new("/etc/passwd")
        );
        assert_eq!(
            std::fs::metadata(dest.join("copy/sub/a.txt"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o751
        );
        assert_eq!(measure(&src).unwrap().0, 5);
    }
}
