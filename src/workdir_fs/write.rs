//! Writing files of the work dir ([`WorkDir::write`], [`WorkDir::edit`]): a temporary file in
//! the resolved parent directory, flushed, then renamed over the name ([`super`]).

use super::*;
/// Options of [`WorkDir::write`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WriteOptions {
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
pub(crate) struct Written {
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
pub(crate) struct Edited {
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
pub(crate) struct Abort {
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
    pub(crate) fn new() -> Abort {
        Abort::default()
    }

    /// Removes the temporary files of every write in flight with this token; those writes, and
    /// any started later, fail with [`io::ErrorKind::Interrupted`], leaving their targets
    /// untouched. Returns how many writes had already completed (renamed into place) before.
    pub(crate) fn abort(&self) -> usize {
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
    pub(crate) fn write<R: Read>(
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
                return Err(Error::Usage(format!(
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
    pub(crate) fn edit(
        &self,
        user: &Path,
        old: &[u8],
        new: &[u8],
        all: bool,
        abort: Option<&Abort>,
    ) -> Result<Edited> {
        if old.is_empty() {
            return Err(Error::Usage(
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
        if file_size(&st) > EDIT_MAX_BYTES {
            return Err(Error::Refused(format!(
                "cannot edit {}: it is {} bytes, more than edit's limit of {} (edit loads the file into memory); use `exec` with sed or a script instead",
                host.display(),
                st.st_size,
                EDIT_MAX_BYTES
            ))
            .into());
        }
        let mut content = Vec::with_capacity(usize::try_from(file_size(&st)).unwrap_or(0));
        // Bounded, also if the file grows while it is read.
        (&mut file)
            .take(EDIT_MAX_BYTES + 1)
            .read_to_end(&mut content)
            .with_context(|| format!("cannot read {}", host.display()))?;
        if content.len() as u64 > EDIT_MAX_BYTES {
            return Err(Error::Refused(format!(
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
            return Err(Error::Refused(format!(
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
            // cast: at most EDIT_MAX_BYTES (checked above).
            #[allow(clippy::cast_possible_truncation)]
            size: size as u64,
            warning,
        })
    }
}

/// `content` with `old` replaced by `new` (non-overlapping, left to right): exactly one
/// occurrence, or at least one with `all`; returns the new content and the count. `path` names
/// the file in errors. Errors: [`Error::EditMatch`] naming the count, an empty `old`, a result
/// larger than [`EDIT_MAX_BYTES`].
pub(crate) fn replace_in(
    content: &[u8],
    old: &[u8],
    new: &[u8],
    all: bool,
    path: &str,
) -> Result<(Vec<u8>, usize)> {
    if old.is_empty() {
        return Err(Error::Usage(
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
        return Err(Error::Refused(format!(
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
