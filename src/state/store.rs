//! The state file and its lock in one state directory ([`Store`]): opening it, reading and
//! updating `state.json` and the other documents under the lock, and atomic writes.

use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use uuid::Uuid;

use super::checks::{
    check_ancestors, check_owned, check_printable, euid, symlink_refused, unsafe_state,
};
use super::{State, SCHEMA_VERSION, STATE_MAX_BYTES};
use crate::error::Error;

/// Name prefixes of the temporary files a write renames over `state.json` (and over the other
/// documents of the state directory, `trust.json`).
const TEMP_PREFIXES: &[&str] = &[".state.json.", ".trust.json.", ".agent-images.json."];

/// The state file and its lock in one state directory.
///
/// Records decide what runs where, so the directory is trusted only when nobody but the invoking
/// user (and root) can change it, the rule of ssh's `StrictModes`: the directory, `state.json`
/// and `state.lock` must be owned by the invoking user (effective uid), not writable by group or
/// others, and not symlinks; every directory above it must belong to that user or root and be
/// writable by nobody else unless it is sticky (`/tmp`), so that no one can swap the state
/// directory out from under it (symlinks on the way must belong to that user or root too).
/// Anything else is [`Error::UnsafeState`], naming the path and the fix. Every operation opens
/// the directory anew without following a symlink (`O_NOFOLLOW`), checks it (`fstat`), and
/// opens, creates and renames its files relative to that handle, never following a symlink.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
    file: PathBuf,
    lock: PathBuf,
}

/// Holds the exclusive lock on `state.lock` until dropped.
#[must_use = "the lock is released when the guard is dropped"]
pub(crate) struct LockGuard {
    _file: File,
}

/// File name of the state file in the state directory.
const STATE_FILE: &str = "state.json";
/// File name of the lock file in the state directory.
const LOCK_FILE: &str = "state.lock";

impl Store {
    /// The store in `dir`, created (mode 0700, with its missing parents) when missing.
    /// Errors: [`Error::UnsafeState`] when the directory, a directory above it, or a symlink
    /// on the way could be changed by another user (see [`Store`]); I/O errors.
    pub(crate) fn open(dir: &Path) -> Result<Store> {
        let dir = std::path::absolute(dir)
            .with_context(|| format!("cannot resolve the state directory {}", dir.display()))?;
        check_printable(&dir)?;
        if std::fs::symlink_metadata(&dir).is_err() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .with_context(|| format!("cannot create the state directory {}", dir.display()))?;
        }
        let real_parent = check_ancestors(&dir, euid())?;
        let unchecked = Store {
            file: dir.join(STATE_FILE),
            lock: dir.join(LOCK_FILE),
            dir: dir.clone(),
        };
        unchecked.open_dir()?;
        // One state directory, one label value, however it was spelled: the real path (the
        // directory itself is no symlink, `open_dir` made sure).
        let dir = match (real_parent, dir.file_name()) {
            (Some(p), Some(name)) => p.join(name),
            _ => dir,
        };
        check_printable(&dir)?;
        Ok(Store {
            file: dir.join(STATE_FILE),
            lock: dir.join(LOCK_FILE),
            dir,
        })
    }

    /// The state directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The state directory, opened without following a symlink and checked (owner, mode).
    fn open_dir(&self) -> Result<OwnedFd> {
        use rustix::fs::{Mode, OFlags};
        let what = "the state directory";
        let fd = match rustix::fs::open(
            &self.dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(e) => {
                if std::fs::symlink_metadata(&self.dir).is_ok_and(|m| m.file_type().is_symlink()) {
                    return Err(symlink_refused(what, &self.dir).into());
                }
                return Err(std::io::Error::from(e)).with_context(|| {
                    format!("cannot open the state directory {}", self.dir.display())
                });
            }
        };
        let st = rustix::fs::fstat(&fd)
            .with_context(|| format!("cannot inspect {}", self.dir.display()))?;
        check_owned(what, &self.dir, &st, euid())?;
        Ok(fd)
    }

    /// Opens `name` in the state directory `dir` with `flags`, never through a symlink
    /// (`O_NOFOLLOW`), and checks that it is a regular file of ours that nobody else may
    /// write. `Ok(None)` when it does not exist (and `flags` do not create it).
    fn open_file(
        &self,
        dir: &OwnedFd,
        name: &str,
        flags: rustix::fs::OFlags,
    ) -> Result<Option<File>> {
        use rustix::fs::{FileType, Mode, OFlags};
        let path = self.dir.join(name);
        let what = if name == LOCK_FILE {
            "the lock file"
        } else {
            "the state file"
        };
        let fd = match rustix::fs::openat(
            dir,
            name,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(rustix::io::Errno::LOOP) => return Err(symlink_refused(what, &path).into()),
            Err(e) => {
                return Err(std::io::Error::from(e))
                    .with_context(|| format!("cannot open {what} {}", path.display()))
            }
        };
        let st =
            rustix::fs::fstat(&fd).with_context(|| format!("cannot inspect {}", path.display()))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(unsafe_state(
                format!("{what} {}", path.display()),
                "it is not a regular file".into(),
                "move it aside; h9sandbox makes a new one".into(),
            )
            .into());
        }
        check_owned(what, &path, &st, euid())?;
        // Reads and writes block as usual from here on (O_NONBLOCK only kept a FIFO planted in
        // its place from hanging the open).
        rustix::fs::fcntl_setfl(&fd, OFlags::empty())
            .with_context(|| format!("cannot open {}", path.display()))?;
        Ok(Some(File::from(fd)))
    }

    /// Reads the state without locking (writes are atomic renames, so this sees a whole file).
    /// A missing file is an empty state. Errors: [`Error::StateCorrupt`],
    /// [`Error::UnsafeState`], I/O errors.
    pub(crate) fn load(&self) -> Result<State> {
        let dir = self.open_dir()?;
        self.load_in(&dir)
    }

    fn load_in(&self, dir: &OwnedFd) -> Result<State> {
        let Some(bytes) = self.read_in(dir, STATE_FILE)? else {
            return Ok(State {
                version: SCHEMA_VERSION,
                sandboxes: vec![],
                dir: Some(self.dir.clone()),
            });
        };
        let mut state: State = serde_json::from_slice(&bytes).map_err(|e| Error::StateCorrupt {
            path: self.file.clone(),
            reason: e.to_string(),
        })?;
        if state.version > SCHEMA_VERSION {
            return Err(Error::StateCorrupt {
                path: self.file.clone(),
                reason: format!(
                    "schema version {} was written by a newer h9sandbox; this one reads up to {SCHEMA_VERSION}",
                    state.version
                ),
            }
            .into());
        }
        state.dir = Some(self.dir.clone());
        Ok(state)
    }

    /// The bytes of the file `name` of the state directory `dir`; `None` when it is missing.
    fn read_in(&self, dir: &OwnedFd, name: &str) -> Result<Option<Vec<u8>>> {
        use std::io::Read;
        let Some(f) = self.open_file(dir, name, rustix::fs::OFlags::RDONLY)? else {
            return Ok(None);
        };
        let path = self.dir.join(name);
        let mut bytes = Vec::new();
        f.take(STATE_MAX_BYTES + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if bytes.len() as u64 > STATE_MAX_BYTES {
            return Err(Error::StateCorrupt {
                path,
                reason: format!(
                    "it is larger than {STATE_MAX_BYTES} bytes, more than a state file can be"
                ),
            }
            .into());
        }
        Ok(Some(bytes))
    }

    /// The bytes of the file `name` (e.g. `trust.json`) of the state directory, checked as
    /// `state.json` is; `None` when it is missing. Read without the lock: writes are atomic.
    pub(crate) fn read_document(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let dir = self.open_dir()?;
        self.read_in(&dir, name)
    }

    /// Read-modify-write of the file `name` of the state directory under the state lock: `f`
    /// gets its bytes (`None` when missing) and returns the new ones (`None`: leave it as is).
    pub(crate) fn update_document<T>(
        &self,
        name: &str,
        f: impl FnOnce(Option<Vec<u8>>) -> Result<(Option<Vec<u8>>, T)>,
    ) -> Result<T> {
        let dir = self.open_dir()?;
        let _guard = self.lock_in(&dir)?;
        let (new, out) = f(self.read_in(&dir, name)?)?;
        if let Some(bytes) = new {
            self.write_in(&dir, name, &bytes)?;
        }
        Ok(out)
    }

    /// Takes the exclusive lock of the lock file `name` of the state directory (e.g.
    /// `pool-NAME.lock`, which a pool's filler holds while it works) without waiting: `None`
    /// when another process holds it. The lock dies with its holder, as the state lock does.
    pub(crate) fn try_lock_named(&self, name: &str) -> Result<Option<LockGuard>> {
        use rustix::fs::OFlags;
        let dir = self.open_dir()?;
        let path = self.dir.join(name);
        let file = self
            .open_file(&dir, name, OFlags::RDWR | OFlags::CREATE)?
            .with_context(|| format!("cannot create the lock file {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(LockGuard { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("cannot lock {}", path.display()))
            }
        }
    }

    fn lock_in(&self, dir: &OwnedFd) -> Result<LockGuard> {
        use rustix::fs::OFlags;
        let file = self
            .open_file(dir, LOCK_FILE, OFlags::RDWR | OFlags::CREATE)?
            .with_context(|| format!("cannot create the lock file {}", self.lock.display()))?;
        file.lock()
            .with_context(|| format!("cannot lock {}", self.lock.display()))?;
        Ok(LockGuard { _file: file })
    }

    /// Read-modify-write under the lock. `f` may return an error, in which case nothing is written.
    /// The file is only rewritten when `f` changed the state.
    pub(crate) fn update<T>(&self, f: impl FnOnce(&mut State) -> Result<T>) -> Result<T> {
        let dir = self.open_dir()?;
        let _guard = self.lock_in(&dir)?;
        let mut state = self.load_in(&dir)?;
        let before = state.clone();
        let out = f(&mut state)?;
        if state != before {
            state.version = SCHEMA_VERSION;
            let mut json = serde_json::to_vec_pretty(&state).expect("state serializes");
            json.push(b'\n');
            self.write_in(&dir, STATE_FILE, &json)?;
        }
        Ok(out)
    }

    /// Removes the temporary files of writers that died between creating and renaming them
    /// (a temporary file only lives while its writer holds the lock, so any found under the lock
    /// is stale). Takes the lock only when there is one. Returns how many were removed.
    pub(crate) fn remove_stale_temp_files(&self) -> Result<usize> {
        let dir = self.open_dir()?;
        let stale = || -> Result<Vec<std::ffi::CString>> {
            let entries = rustix::fs::Dir::read_from(&dir)
                .with_context(|| format!("cannot list {}", self.dir.display()))?;
            Ok(entries
                .flatten()
                .map(|e| e.file_name().to_owned())
                .filter(|n| {
                    let n = n.to_string_lossy();
                    TEMP_PREFIXES.iter().any(|p| n.starts_with(p))
                })
                .collect())
        };
        if stale()?.is_empty() {
            return Ok(0);
        }
        let _guard = self.lock_in(&dir)?;
        let files = stale()?;
        for f in &files {
            rustix::fs::unlinkat(&dir, f.as_c_str(), rustix::fs::AtFlags::empty())
                .map_err(std::io::Error::from)
                .with_context(|| {
                    format!(
                        "cannot remove {}",
                        self.dir.join(f.to_string_lossy().as_ref()).display()
                    )
                })?;
        }
        Ok(files.len())
    }

    /// Replaces the file `name` of the state directory `dir` with `bytes`: written to a new
    /// temporary file (`O_EXCL`, mode 0600), synced, and renamed over it (`renameat(2)`, which
    /// replaces a symlink planted there instead of following it).
    fn write_in(&self, dir: &OwnedFd, name: &str, bytes: &[u8]) -> Result<()> {
        use rustix::fs::{Mode, OFlags};
        let tmp = format!(".{name}.{}", Uuid::new_v4().simple());
        let fd = rustix::fs::openat(
            dir,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(std::io::Error::from)
        .with_context(|| format!("cannot create a temporary file in {}", self.dir.display()))?;
        let mut f = File::from(fd);
        let written = f
            .write_all(bytes)
            .and_then(|_| f.sync_all())
            .map_err(anyhow::Error::from)
            .and_then(|_| {
                rustix::fs::renameat(dir, &tmp, dir, name)
                    .map_err(|e| anyhow::Error::from(std::io::Error::from(e)))
            });
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(dir, &tmp, rustix::fs::AtFlags::empty());
            return Err(e.context(format!("cannot write {}", self.dir.join(name).display())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tests::record;

    #[test]
    fn update_round_trips_and_corrupt_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .update(|s| {
                s.sandboxes.push(record("x"));
                Ok(())
            })
            .unwrap();
        assert_eq!(store.load().unwrap().sandboxes[0].name, "x");
        std::fs::write(&store.file, b"{not json").unwrap();
        let err = store.load().unwrap_err().to_string();
        assert!(
            err.contains("state.json") && err.contains("corrupt"),
            "{err}"
        );
        // A failed update writes nothing.
        assert!(store.update(|_| Ok(())).is_err());
        assert_eq!(std::fs::read(&store.file).unwrap(), b"{not json");
    }

    #[test]
    fn an_oversized_state_file_is_refused_without_being_held() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // Sparse: a terabyte that costs nothing on disk would be read whole.
        std::fs::File::create(&store.file)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let err = format!("{:#}", store.load().unwrap_err());
        assert!(err.contains("larger than 67108864 bytes"), "{err}");
    }

    #[test]
    fn stale_temp_files_are_removed_under_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.remove_stale_temp_files().unwrap(), 0);
        store
            .update(|s| {
                s.sandboxes.push(record("x"));
                Ok(())
            })
            .unwrap();
        std::fs::write(dir.path().join(".state.json.abc123"), b"{half").unwrap();
        assert_eq!(store.remove_stale_temp_files().unwrap(), 1);
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["state.json", "state.lock"]);
    }
}
