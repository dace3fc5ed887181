//! Whether a state directory can be trusted: owned by the invoking user, writable by nobody
//! else, every directory above it safe too (ssh's `StrictModes`), no symlinks, and a printable
//! path.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::error::Error;

/// The effective user ID, who must own the state directory and its files.
pub(super) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// An [`Error::UnsafeState`].
pub(super) fn unsafe_state(what: String, problem: String, fix: String) -> Error {
    Error::UnsafeState { what, problem, fix }
}

/// Checks that what `st` describes (the state directory, or one of its files, named by `what`
/// and `path`) is owned by `me` and writable by nobody else.
pub(super) fn check_owned(
    what: &str,
    path: &Path,
    st: &rustix::fs::Stat,
    me: u32,
) -> Result<(), Error> {
    let shown = || format!("{what} {}", path.display());
    if st.st_uid != me {
        return Err(unsafe_state(
            shown(),
            format!(
                "it is owned by uid {}, not by you (uid {me}), so that user can rewrite your sandboxes' records",
                st.st_uid
            ),
            format!(
                "use a state directory of your own (state_dir, H9SANDBOX_STATE_DIR), or take it over with `chown {me} {}`",
                path.display()
            ),
        ));
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o022 != 0 {
        let who = crate::types::also_writable_by(mode).unwrap_or("others");
        return Err(unsafe_state(
            shown(),
            format!("it is writable by {who} (mode {mode:04o}), who could rewrite your sandboxes' records"),
            format!("make it yours alone with `chmod go-w {}`", path.display()),
        ));
    }
    Ok(())
}

/// Checks every directory above `dir` (and every symlink on the way there, followed as the
/// kernel does): each must belong to `me` or root, and a directory writable by group or others
/// must be sticky, or someone else could rename the state directory away and put another there.
/// Returns the real path of `dir`'s parent (symlinks resolved), `None` for `/`.
pub(super) fn check_ancestors(dir: &Path, me: u32) -> Result<Option<PathBuf>> {
    use std::collections::VecDeque;
    use std::ffi::OsString;
    use std::os::unix::fs::MetadataExt;
    use std::path::Component;
    let what = || format!("the state directory {}", dir.display());
    let parts = |p: &Path| -> Vec<OsString> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_os_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect()
    };
    let Some(parent) = dir.parent() else {
        return Ok(None);
    };
    let mut todo: VecDeque<OsString> = parts(parent).into();
    let mut cur = PathBuf::from("/");
    let mut links = 0;
    let check = |p: &Path, md: &std::fs::Metadata| -> Result<(), Error> {
        let mode = md.mode() & 0o7777;
        if md.uid() != 0 && md.uid() != me {
            return Err(unsafe_state(
                what(),
                format!(
                    "the directory {} above it belongs to uid {} (neither you nor root), who could swap the state directory for another",
                    p.display(),
                    md.uid()
                ),
                "choose a state_dir (H9SANDBOX_STATE_DIR) inside directories of your own".into(),
            ));
        }
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Err(unsafe_state(
                what(),
                format!(
                    "the directory {} above it is writable by {} (mode {mode:04o}) without the sticky bit, so they could swap the state directory for another",
                    p.display(),
                    crate::types::also_writable_by(mode).unwrap_or("others")
                ),
                format!(
                    "`chmod go-w {0}` (or `chmod +t {0}`), or choose another state_dir",
                    p.display()
                ),
            ));
        }
        Ok(())
    };
    let root = std::fs::symlink_metadata(&cur).context("cannot inspect /")?;
    check(&cur, &root)?;
    while let Some(part) = todo.pop_front() {
        if part == ".." {
            cur.pop();
            continue;
        }
        let next = cur.join(&part);
        let md = std::fs::symlink_metadata(&next)
            .with_context(|| format!("cannot inspect {}", next.display()))?;
        if md.file_type().is_symlink() {
            links += 1;
            if links > 40 {
                anyhow::bail!("too many symlinks on the way to {}", dir.display());
            }
            if md.uid() != 0 && md.uid() != me {
                return Err(unsafe_state(
                    what(),
                    format!(
                        "the symlink {} on the way to it belongs to uid {} (neither you nor root), who could point it elsewhere",
                        next.display(),
                        md.uid()
                    ),
                    "set state_dir (H9SANDBOX_STATE_DIR) to the real directory".into(),
                )
                .into());
            }
            let target = std::fs::read_link(&next)
                .with_context(|| format!("cannot read the symlink {}", next.display()))?;
            if target.is_absolute() {
                cur = PathBuf::from("/");
            }
            for p in parts(&target).into_iter().rev() {
                todo.push_front(p);
            }
            continue;
        }
        check(&next, &md)?;
        cur = next;
    }
    Ok(Some(cur))
}

/// Refuses a state directory whose path is not UTF-8 or holds a control character: the path is
/// the value of every container's `h9sandbox.state_dir` label, which engine listings print one
/// container a line (a newline would forge a line), which two different non-UTF-8 paths could
/// share once made text, and which diagnostics print (an escape would drive the terminal).
pub(super) fn check_printable(dir: &Path) -> Result<(), Error> {
    match dir.to_str() {
        Some(text) if !text.chars().any(char::is_control) => Ok(()),
        _ => Err(Error::Refused(format!(
            "the state directory {:?} is not valid UTF-8 or holds a control character (newline, tab, escape, ...), which its containers' labels cannot carry; set state_dir (H9SANDBOX_STATE_DIR) to another path",
            dir.as_os_str()
        ))),
    }
}

/// The refusal of `what` at `path`, a symlink.
pub(super) fn symlink_refused(what: &str, path: &Path) -> Error {
    unsafe_state(
        format!("{what} {}", path.display()),
        "it is a symlink, and h9sandbox never follows one there (someone could point it elsewhere)"
            .into(),
        if what == "the state directory" {
            "set state_dir (H9SANDBOX_STATE_DIR) to the real directory".into()
        } else {
            format!(
                "remove it (`rm {}`); h9sandbox makes a new one",
                path.display()
            )
        },
    )
}
