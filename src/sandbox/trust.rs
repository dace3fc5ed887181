//! Trusted project files (`h9sandbox trust`): a project's `./sandbox.toml` usually lies in a
//! work dir, which code in the sandbox can write, so `up` and `mcp` honour it only when a person
//! trusted that exact content for that path, as direnv (`direnv allow`) and mise (`mise trust`)
//! do. Anything else, a file changed since (by the sandbox or by anyone), is ignored with one
//! warning line naming `h9sandbox trust`.
//!
//! Trust records live in the state directory (`trust.json`, checked and written as `state.json`
//! is, under the same lock): `{"version": 1, "files": [{"path", "sha256", "trusted_at"}]}`, one
//! entry per canonical path (the directory canonicalized, then `sandbox.toml`; the file itself
//! is never a symlink). The file is read once (at most [`MAX_PROJECT_BYTES`], without following
//! a symlink), and the bytes hashed are the bytes layered.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::{Layers, ProjectText};
use crate::error::Error;
use crate::report::Reporter;
use crate::state::{now_rfc3339, Store};

/// The project file's name: `up` and `mcp` read `./sandbox.toml`.
pub(crate) const PROJECT_FILE: &str = "sandbox.toml";
/// The trust records' file in the state directory.
pub(crate) const TRUST_FILE: &str = "trust.json";
/// The largest project file read (bytes); a larger one is refused, or ignored by `up`.
pub(crate) const MAX_PROJECT_BYTES: u64 = 1 << 20;
/// Version of `trust.json`'s schema.
const TRUST_VERSION: u32 = 1;

/// One trusted project file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Trusted {
    /// Canonical path of the file.
    pub path: PathBuf,
    /// SHA-256 of the trusted content, lower-case hex.
    pub sha256: String,
    /// When it was trusted, RFC 3339 UTC.
    pub trusted_at: String,
}

/// `trust.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct TrustList {
    version: u32,
    files: Vec<Trusted>,
}

/// A project file as read from disk: its canonical path, content and hash.
#[derive(Debug, Clone)]
pub(crate) struct Project {
    /// Canonical path (canonical directory, then the file name).
    pub path: PathBuf,
    /// The content, read once.
    pub text: String,
    /// SHA-256 of the content, lower-case hex.
    pub sha256: String,
}

impl Project {
    /// The content for [`Layers::load_with_project`].
    pub(crate) fn text(&self) -> ProjectText {
        ProjectText {
            path: self.path.clone(),
            text: self.text.clone(),
        }
    }
}

/// Where the project file `file` (a `sandbox.toml`, or a directory holding one) is, by its
/// canonical path: the directory canonicalized, then the file name (not followed). Errors: the
/// directory does not exist; the file is not named `sandbox.toml`.
pub(crate) fn project_path(file: &Path) -> Result<PathBuf, Error> {
    let file = if file.is_dir() {
        file.join(PROJECT_FILE)
    } else {
        file.to_path_buf()
    };
    if file.file_name().is_none_or(|n| n != PROJECT_FILE) {
        return Err(Error::Usage(format!(
            "{} is not a project file: `up` and `mcp` read only ./{PROJECT_FILE} (give another configuration file with --config instead)",
            file.display()
        )));
    }
    let dir = match file.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    let dir = dir.canonicalize().map_err(|e| {
        Error::Usage(format!(
            "cannot find the directory of {}: {e}",
            file.display()
        ))
    })?;
    Ok(dir.join(PROJECT_FILE))
}

/// Reads the project file at the canonical `path` once: never through a symlink, only a regular
/// file, at most [`MAX_PROJECT_BYTES`]. `Ok(None)` when there is none. Errors say why it cannot
/// be used (one line).
pub(crate) fn read_project(path: &Path) -> Result<Option<Project>, Error> {
    use rustix::fs::{FileType, Mode, OFlags};
    let refuse = |why: String| Error::Refused(format!("{}: {why}", path.display()));
    let fd = match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(rustix::io::Errno::LOOP) => {
            return Err(refuse(
                "it is a symlink, which h9sandbox never follows for a project file (a sandbox could point it at another project's); copy the file there instead".into(),
            ))
        }
        Err(e) => return Err(refuse(format!("cannot be read: {e}"))),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| refuse(format!("cannot be read: {e}")))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(refuse("it is not a regular file".into()));
    }
    let mut bytes = Vec::new();
    File::from(fd)
        .take(MAX_PROJECT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(format!("cannot be read: {e}")))?;
    if bytes.len() as u64 > MAX_PROJECT_BYTES {
        return Err(refuse(format!(
            "it is larger than {MAX_PROJECT_BYTES} bytes, too large for a configuration file"
        )));
    }
    let sha256 = hex(&Sha256::digest(&bytes));
    let text = String::from_utf8(bytes).map_err(|_| refuse("it is not valid UTF-8 text".into()))?;
    Ok(Some(Project {
        path: path.to_path_buf(),
        text,
        sha256,
    }))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The trust records of the state directory `store`, oldest first.
pub(crate) fn trusted(store: &Store) -> Result<Vec<Trusted>> {
    Ok(parse(store, store.read_document(TRUST_FILE)?)?.files)
}

fn parse(store: &Store, bytes: Option<Vec<u8>>) -> Result<TrustList> {
    let Some(bytes) = bytes else {
        return Ok(TrustList {
            version: TRUST_VERSION,
            files: vec![],
        });
    };
    let list: TrustList = serde_json::from_slice(&bytes).map_err(|e| Error::StateCorrupt {
        path: store.dir().join(TRUST_FILE),
        reason: e.to_string(),
    })?;
    if list.version > TRUST_VERSION {
        return Err(Error::StateCorrupt {
            path: store.dir().join(TRUST_FILE),
            reason: format!(
                "schema version {} was written by a newer h9sandbox",
                list.version
            ),
        }
        .into());
    }
    Ok(list)
}

/// Changes the trust records of `store` with `f` under the state lock; returns what `f` returns.
fn update<T>(store: &Store, f: impl FnOnce(&mut Vec<Trusted>) -> T) -> Result<T> {
    store.update_document(TRUST_FILE, |bytes| {
        let mut list = parse(store, bytes)?;
        let before = list.files.clone();
        let out = f(&mut list.files);
        if list.files == before {
            return Ok((None, out));
        }
        list.version = TRUST_VERSION;
        let mut json = serde_json::to_vec_pretty(&list).expect("trust list serializes");
        json.push(b'\n');
        Ok((Some(json), out))
    })
}

/// What [`trust`] trusted: the record, and the keys the file sets (sorted by name).
#[derive(Debug, Clone)]
pub(crate) struct Granted {
    /// The trust record.
    pub record: Trusted,
    /// The configuration keys the file sets, with their values.
    pub settings: toml::Table,
}

/// Trusts the content the project file `file` (default `./sandbox.toml`) has now, for its
/// canonical path, in `store` (replacing what that path had). Errors: no such file, a symlink,
/// a file `up` would refuse (bad TOML, an unknown key, a host-side key, a bad value), the state
/// directory.
pub(crate) fn trust(store: &Store, file: &Path) -> Result<Granted> {
    let path = project_path(file)?;
    let project = read_project(&path)?.ok_or_else(|| {
        Error::Usage(format!(
            "{} does not exist; nothing to trust",
            path.display()
        ))
    })?;
    let settings = Layers::check_project(&project.text())?;
    let record = Trusted {
        path: project.path.clone(),
        sha256: project.sha256.clone(),
        trusted_at: now_rfc3339(),
    };
    let kept = record.clone();
    update(store, move |files| {
        files.retain(|t| t.path != kept.path);
        files.push(kept);
    })?;
    Ok(Granted { record, settings })
}

/// Forgets the trust of the project file `file` (which need not exist any more); returns
/// whether it was trusted, and its canonical path.
pub(crate) fn forget(store: &Store, file: &Path) -> Result<(PathBuf, bool)> {
    let path = project_path(file)?;
    let p = path.clone();
    let was = update(store, move |files| {
        let n = files.len();
        files.retain(|t| t.path != p);
        files.len() != n
    })?;
    Ok((path, was))
}

/// What became of a trusted file since: still the same, changed, or gone (or unreadable).
pub(crate) fn status(t: &Trusted) -> &'static str {
    match read_project(&t.path) {
        Ok(Some(p)) if p.sha256 == t.sha256 => "trusted",
        Ok(Some(_)) => "changed",
        Ok(None) => "missing",
        Err(_) => "unusable",
    }
}

/// The configuration layers of `up` and `mcp`: the user's (or `explicit`) file and the
/// environment, with the project file `./sandbox.toml` layered between them when its content
/// is trusted for its path in the state directory those layers name. An untrusted, changed or
/// unusable project file is ignored with one warning to `reporter`; with `explicit` (`--config`,
/// `H9SANDBOX_CONFIG`), no project file is read at all. Errors: as [`Layers::load`], a bad state
/// directory, and a trusted project file `up` cannot use after all (a value this host refuses).
pub(crate) fn layers_for_new_sandboxes(
    explicit: Option<&Path>,
    reporter: &dyn Reporter,
) -> Result<Layers> {
    let base = Layers::load(explicit)?;
    if explicit.is_some() {
        return Ok(base);
    }
    let here = match std::env::current_dir().and_then(|d| d.canonicalize()) {
        Ok(d) => d.join(PROJECT_FILE),
        Err(_) => return Ok(base),
    };
    let ignore = |why: &str| {
        reporter.warn(&format!(
            "ignoring ./{PROJECT_FILE} ({}): {why}",
            here.display()
        ));
    };
    let project = match read_project(&here) {
        Ok(Some(p)) => p,
        Ok(None) => return Ok(base),
        Err(e) => {
            ignore(&format!("{e}"));
            return Ok(base);
        }
    };
    let store = Store::open(&base.resolve()?.state_dir()?)?;
    let records = trusted(&store)?;
    match records.iter().find(|t| t.path == project.path) {
        Some(t) if t.sha256 == project.sha256 => {
            Ok(Layers::load_with_project(explicit, &project.text())
                .context("the trusted project file cannot be used here")?)
        }
        Some(_) => {
            ignore("it changed since you trusted it (code in a sandbox may have written it); review it and run `h9sandbox trust` again to use it");
            Ok(base)
        }
        None => {
            ignore("it is not trusted (code in a sandbox may have written it); review it and run `h9sandbox trust` to use it");
            Ok(base)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_records_the_exact_content_and_forget_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state")).unwrap();
        let proj = dir.path().join("proj");
        std::fs::create_dir(&proj).unwrap();
        std::fs::write(proj.join(PROJECT_FILE), "memory = \"2g\"\n").unwrap();
        let g = trust(&store, &proj).unwrap();
        assert_eq!(g.settings["memory"].as_str(), Some("2g"));
        assert_eq!(
            g.record.sha256,
            // sha256 of `memory = "2g"\n`
            hex(&Sha256::digest(b"memory = \"2g\"\n"))
        );
        let list = trusted(&store).unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(status(&list[0]), "trusted");
        std::fs::write(proj.join(PROJECT_FILE), "memory = \"3g\"\n").unwrap();
        assert_eq!(status(&list[0]), "changed");
        // Trusting again replaces the path's record.
        trust(&store, &proj.join(PROJECT_FILE)).unwrap();
        assert_eq!(trusted(&store).unwrap().len(), 1);
        assert!(forget(&store, &proj).unwrap().1);
        assert!(!forget(&store, &proj).unwrap().1);
        assert!(trusted(&store).unwrap().is_empty());
        // Only files named sandbox.toml.
        std::fs::write(proj.join("other.toml"), "").unwrap();
        assert!(trust(&store, &proj.join("other.toml")).is_err());
    }
}
