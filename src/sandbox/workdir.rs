//! The work directory of a new sandbox: which directories may be one (never a place through
//! which the sandbox could reach the host: its home, h9sandbox's state and configuration, the
//! engine's socket, system directories), whether the sandbox's user can write to it, and that
//! the container really mounted the directory that was checked ([`MountCheck`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use uuid::Uuid;

use super::Ctx;
use crate::engine::{AnyEngine, CommandLine, Environment, ExecSpec, SCRATCH_DIR};
use crate::error::Error;
use crate::types::Ids;

/// The canonical work directory: `dir` or the current directory; must exist and be a directory
/// whose path can be bind-mounted exactly.
pub fn resolve_workdir(dir: Option<&Path>) -> Result<PathBuf> {
    let given = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let canon = given.canonicalize().map_err(|e| {
        Error::Invalid(format!(
            "work directory {} cannot be used: {e}; create it or pass an existing --workdir",
            given.display()
        ))
    })?;
    if !canon.is_dir() {
        return Err(Error::Invalid(format!(
            "work directory {} is not a directory; pass a directory with --workdir",
            canon.display()
        ))
        .into());
    }
    let Some(text) = canon.to_str() else {
        return Err(Error::Invalid(format!(
            "work directory {} is not valid UTF-8, which the engine cannot mount; rename it",
            canon.display()
        ))
        .into());
    };
    if text.chars().any(|c| c.is_control()) {
        return Err(Error::Invalid(format!(
            "work directory {text:?} contains a control character (newline, tab, ...), which the engine cannot mount exactly; rename it"
        ))
        .into());
    }
    if canon == Path::new("/") {
        return Err(Error::Invalid(
            "the host's root directory cannot be the work directory (it would be mounted over the container's /); pass a project directory with --workdir".into(),
        )
        .into());
    }
    if Path::new(SCRATCH_DIR).starts_with(&canon) {
        return Err(Error::Invalid(format!(
            "work directory {text} holds the sandbox's scratch directory {SCRATCH_DIR}, which is mounted there; pass a project directory with --workdir"
        ))
        .into());
    }
    Ok(canon)
}

/// Paths the sandbox must never be able to write through its bind mount: h9sandbox's own state
/// and configuration (rewriting them would steer the host side), the caller's home directory
/// (shell start-up files), and the engine's socket (driving the engine is root on the host).
pub fn protected_paths(ctx: &Ctx) -> Vec<(PathBuf, &'static str)> {
    let mut v = vec![(ctx.store.dir().to_path_buf(), "h9sandbox's state directory")];
    if let Some(d) = crate::config::xdg_dir("XDG_CONFIG_HOME", ".config") {
        v.push((d.join("h9sandbox"), "h9sandbox's configuration directory"));
    }
    if let Some(h) = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
    {
        v.push((h, "your home directory"));
    }
    if let Some(sock) = std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(PathBuf::from))
    {
        v.push((sock, "the engine's socket"));
    }
    for sock in [
        "/run/docker.sock",
        "/var/run/docker.sock",
        "/run/podman/podman.sock",
    ] {
        v.push((PathBuf::from(sock), "the engine's socket"));
    }
    for dir in SYSTEM_DIRS {
        v.push((PathBuf::from(dir), "a system directory"));
    }
    v
}

/// Host directories whose contents a sandbox must not be able to change or read.
const SYSTEM_DIRS: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var/run",
    "/boot",
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/var/lib/docker",
    "/var/lib/containers",
    "/tmp",
];

/// Refuses a work directory that is, contains, or (for the kernel's and h9sandbox's own
/// directories) lies inside one of `protected` paths.
pub fn refuse_sensitive_workdir(
    workdir: &Path,
    protected: &[(PathBuf, &str)],
) -> Result<(), Error> {
    const NEVER_INSIDE: &[&str] = &["/proc", "/sys", "/dev", "/run", "/var/run", "/boot", "/etc"];
    // Both spellings count: a symlinked path (/var/run -> /run) is reachable either way.
    let both = protected.iter().flat_map(|(p, what)| {
        let canon = p.canonicalize().ok().filter(|c| c != p);
        std::iter::once((p.clone(), *what)).chain(canon.map(|c| (c, *what)))
    });
    for (p, what) in both {
        let inside_forbidden =
            NEVER_INSIDE.iter().any(|d| Path::new(d) == p) && workdir.starts_with(&p);
        if p.starts_with(workdir) || inside_forbidden {
            return Err(Error::Invalid(format!(
                "work directory {} {} {what} {}, which the sandbox could then change; use a project directory instead",
                workdir.display(),
                if p.starts_with(workdir) && p != workdir { "contains" } else if workdir == p { "is" } else { "lies in" },
                p.display()
            )));
        }
    }
    Ok(())
}

/// Why a sandbox running as `user` probably cannot write to `workdir` (owner and mode bits of
/// the directory; supplementary groups and ACLs are not considered), or `None` when it can.
pub fn unwritable_for(workdir: &Path, user: Ids) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if user.is_root() {
        return None;
    }
    let m = std::fs::metadata(workdir).ok()?;
    let mode = m.mode();
    let writable = (m.uid() == user.uid && mode & 0o200 != 0)
        || (m.gid() == user.gid && mode & 0o020 != 0)
        || mode & 0o002 != 0;
    (!writable).then(|| {
        format!(
            "the work dir {} belongs to {}:{} (mode {:o}), so the sandbox's user {user} may not write to it; `chown {user}` it or choose another `user`",
            workdir.display(),
            m.uid(),
            m.gid(),
            mode & 0o7777
        )
    })
}

/// What the container's bind mount must be: the work directory `up` checked, identified by
/// device and inode, so that a directory swapped for a symlink between the checks and the
/// engine's `mount(2)` is caught.
pub struct MountCheck {
    workdir: PathBuf,
    identity: (u64, u64),
    nested: bool,
}

impl MountCheck {
    /// Pins the work dir `workdir` (canonical, see [`resolve_workdir`]) by its identity, and
    /// notes whether it lies strictly inside another sandbox's work dir of `ctx`'s state
    /// directory. Errors: the path changed while it was checked, the state file.
    pub fn pin(ctx: &Ctx, workdir: &Path) -> Result<MountCheck> {
        Ok(MountCheck {
            identity: pin_workdir(workdir)?,
            // Strictly inside another sandbox's work dir, that sandbox can swap the directory for
            // a symlink between our checks and the engine's mount.
            nested: ctx
                .store
                .load()?
                .sandboxes
                .iter()
                .any(|r| workdir.starts_with(&r.workdir) && workdir != r.workdir),
            workdir: workdir.to_path_buf(),
        })
    }

    /// The work dir that was checked.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// Its identity: (device, inode).
    pub fn identity(&self) -> [u64; 2] {
        [self.identity.0, self.identity.1]
    }

    /// The check of a sandbox's recorded work dir and identity (`start` verifies the mount again).
    pub fn recorded(workdir: &Path, identity: [u64; 2]) -> MountCheck {
        MountCheck {
            workdir: workdir.to_path_buf(),
            identity: (identity[0], identity[1]),
            nested: false,
        }
    }

    /// Compares the identity of what the container sees at the work dir with the checked one:
    /// through `/proc/PID/root` from the host when allowed (cheap: one `stat`), else, for a work
    /// dir nested in another sandbox's, with `stat` run in the fresh container (where only its
    /// init runs yet). Errors: a mismatch, which `up` turns into a Failed, removed sandbox.
    pub async fn verify(&self, engine: &AnyEngine, container: &str, pid: u32) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        let seen = if let Some(m) = (pid > 0)
            .then(|| std::fs::metadata(format!("/proc/{pid}/root{}", self.workdir.display())).ok())
            .flatten()
        {
            (m.dev(), m.ino())
        } else if self.nested {
            // h9sandbox's own binary in the container answers, whatever the image holds.
            let spec = ExecSpec {
                command: CommandLine::Argv(vec![
                    crate::agent::BIN.into(),
                    crate::agent::ARG.into(),
                    "stat".into(),
                    self.workdir.to_string_lossy().into_owned(),
                ]),
                cwd: PathBuf::from("/"),
                env: vec![],
                interactive: false,
                marker: Uuid::new_v4().simple().to_string(),
                user: Some(Ids::ROOT),
                wrapped: false,
                backstop: None,
            };
            let out = engine
                .exec_command(container, &spec)
                .stdin(std::process::Stdio::null())
                .output()
                .await
                .context("cannot check the container's work dir mount")?;
            let text = String::from_utf8_lossy(&out.stdout);
            let mut f = text.split_whitespace().map(|w| w.parse::<u64>());
            match (f.next(), f.next()) {
                (Some(Ok(d)), Some(Ok(i))) => (d, i),
                _ => anyhow::bail!(
                    "cannot check the container's work dir mount (`stat` in the container said: {})",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            }
        } else {
            return Ok(());
        };
        if seen != self.identity {
            anyhow::bail!(
                "the container mounted another directory than the work dir {} that was checked (it was replaced while the container started); refusing it",
                self.workdir.display()
            );
        }
        Ok(())
    }
}

/// The work dir's identity (device, inode), opened through a path that holds no symlink (the
/// canonical path has none; one appearing means the path was tampered with).
fn pin_workdir(dir: &Path) -> Result<(u64, u64)> {
    use rustix::fs::{openat2, Mode, OFlags, ResolveFlags, CWD};
    let fd = openat2(
        CWD,
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| {
        Error::Invalid(format!(
            "work directory {} changed while it was checked ({e}); try again",
            dir.display()
        ))
    })?;
    let st = rustix::fs::fstat(&fd).map_err(std::io::Error::from)?;
    Ok((st.st_dev, st.st_ino))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitive_workdirs_are_refused() {
        let prot: Vec<(PathBuf, &str)> = vec![
            ("/home/me".into(), "your home directory"),
            (
                "/home/me/.local/state/h9sandbox".into(),
                "h9sandbox's state directory",
            ),
            ("/var/run/docker.sock".into(), "the engine's socket"),
            ("/etc".into(), "a system directory"),
            ("/usr".into(), "a system directory"),
        ];
        let refused = |w: &str| refuse_sensitive_workdir(Path::new(w), &prot).is_err();
        assert!(refused("/home/me"));
        assert!(refused("/home"));
        assert!(refused("/var"));
        assert!(refused("/etc"));
        assert!(refused("/etc/nginx"));
        assert!(refused("/usr"));
        assert!(!refused("/usr/local/src/project"));
        assert!(!refused("/home/me/project"));
        assert!(!refused("/srv/ci/job-1"));
    }

    #[test]
    fn unwritable_work_dirs_are_told() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let me = Ids::current();
        let other = Ids {
            uid: me.uid.wrapping_add(4242),
            gid: me.gid.wrapping_add(4242),
        };
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(unwritable_for(d.path(), Ids::ROOT), None);
        let why = unwritable_for(d.path(), other).unwrap();
        assert!(
            why.contains(&other.to_string()) && why.contains("755"),
            "{why}"
        );
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(unwritable_for(d.path(), other), None);
    }

    #[test]
    fn workdir_must_exist_and_not_be_root() {
        assert!(resolve_workdir(Some(Path::new("/nonexistent/dir"))).is_err());
        assert!(resolve_workdir(Some(Path::new("/"))).is_err());
        // The scratch directory is mounted at /var/tmp: neither it nor /var can be the work dir.
        assert!(resolve_workdir(Some(Path::new("/var/tmp"))).is_err());
        assert!(resolve_workdir(Some(Path::new("/var"))).is_err());
        let d = tempfile::tempdir().unwrap();
        let weird = d.path().join("a b:c,d");
        std::fs::create_dir(&weird).unwrap();
        assert_eq!(
            resolve_workdir(Some(&weird)).unwrap(),
            weird.canonicalize().unwrap()
        );
        let nl = d.path().join("a\nb");
        std::fs::create_dir(&nl).unwrap();
        assert!(resolve_workdir(Some(&nl)).is_err());
    }
}
