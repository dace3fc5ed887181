//! The work directory of a new sandbox: which directories may be one ([`WorkdirRule`]), whether
//! the sandbox's user can write to it, and that the container really mounted the directory that
//! was checked ([`MountCheck`]).
//!
//! The rule, derived from what a bind mount gives the sandbox (read and write access to the
//! directory and everything under it, and `connect(2)` to the sockets there): a work dir may not
//! be, contain or lie inside a place that holds the host's secrets or code, or that steers the
//! host side. Two kinds:
//! - never, whatever `allowed_workdirs` says: h9sandbox's state and configuration directories
//!   (rewriting records steers the host side), the engine's sockets and data (root on the host,
//!   other containers), the session's sockets (an ssh-agent signs and tmux types for the user),
//!   the kernel's file systems (`/proc`, `/sys`, `/dev`, `/run`); nor be or contain the user's
//!   home (shell start-up files, every credential) or the shared temporary directories (other
//!   users' files and sockets);
//! - unless `allowed_workdirs` (the user's own configuration file only) lists it: the home's
//!   dot-directories, found by listing the home (where tools keep credentials and
//!   configuration; a symlinked one also where it leads), the XDG base directories (the same,
//!   moved), other users' homes (from `/etc/passwd`: their files are not this user's to hand to
//!   a sandbox), and the system trees of the Filesystem Hierarchy Standard ([`SYSTEM_TREES`]:
//!   the host's code, configuration, logs and services' data). A project inside the user's own
//!   home stays fine even in a system tree (a service account's home, `/var/lib/jenkins`),
//!   unless that tree only holds installed code (`/usr`, `/etc`, `/boot`, ...); so does one inside `/tmp` or
//!   `/var/tmp`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use uuid::Uuid;

use super::Ctx;
use crate::engine::{AnyEngine, CommandLine, Environment, ExecSpec, ExecStdio, SCRATCH_DIR};
use crate::error::Error;
use crate::types::Ids;

/// The canonical work directory: `dir` or the current directory; must exist and be a directory
/// whose path can be bind-mounted exactly.
pub(crate) fn resolve_workdir(dir: Option<&Path>) -> Result<PathBuf> {
    let given = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let canon = given.canonicalize().map_err(|e| {
        Error::Usage(format!(
            "work directory {} cannot be used: {e}; create it or pass an existing --workdir",
            given.display()
        ))
    })?;
    if !canon.is_dir() {
        return Err(Error::Usage(format!(
            "work directory {} is not a directory; pass a directory with --workdir",
            canon.display()
        ))
        .into());
    }
    let Some(text) = canon.to_str() else {
        return Err(Error::Refused(format!(
            "work directory {} is not valid UTF-8, which the engine cannot mount; rename it",
            canon.display()
        ))
        .into());
    };
    if text.chars().any(|c| c.is_control()) {
        return Err(Error::Refused(format!(
            "work directory {text:?} contains a control character (newline, tab, ...), which the engine cannot mount exactly; rename it"
        ))
        .into());
    }
    if canon == Path::new("/") {
        return Err(Error::Refused(
            "the host's root directory cannot be the work directory (it would be mounted over the container's /); pass a project directory with --workdir".into(),
        )
        .into());
    }
    if Path::new(SCRATCH_DIR).starts_with(&canon) {
        return Err(Error::Refused(format!(
            "work directory {text} holds the sandbox's scratch directory {SCRATCH_DIR}, which is mounted there; pass a project directory with --workdir"
        ))
        .into());
    }
    Ok(canon)
}

/// System trees: where the host's code (`/usr`, `/bin`, `/sbin`, `/lib*`, `/opt`, `/snap`,
/// `/nix`), configuration (`/etc`), boot files (`/boot`, `/efi`), services' data and logs
/// (`/var`) and the data it serves (`/srv`: web roots, repositories whose hooks it runs) live,
/// per the Filesystem Hierarchy Standard. A sandbox mounting one could change what the host runs
/// or read what its services keep. `/root` is not here: it is root's home, judged as a home.
pub(crate) const SYSTEM_TREES: &[&str] = &[
    "/bin", "/boot", "/efi", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/nix", "/opt",
    "/sbin", "/snap", "/srv", "/usr", "/var",
];

/// The system trees that hold only what the package manager installs: a home inside one is a
/// system account's placeholder, never a place for projects, so it earns no exemption
/// ([`WorkdirRule::check`]). Homes of service accounts in `/var`, `/srv` or `/opt`
/// (`/var/lib/jenkins`) do.
const CODE_TREES: &[&str] = &[
    "/bin", "/boot", "/efi", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/nix", "/sbin",
    "/snap", "/usr",
];

/// Kernel and runtime file systems: processes, devices, the running system's sockets.
const KERNEL_TREES: &[&str] = &["/proc", "/sys", "/dev", "/run", "/var/run"];

/// Directories every user shares for temporary files: never a work dir themselves (they hold
/// other users' files and sockets), but what lies in them is fine.
const TEMP_ROOTS: &[&str] = &["/tmp", SCRATCH_DIR];

/// The engines' own data (container file systems, their configuration): writing there changes
/// other containers, or this one's next start.
const ENGINE_DATA: &[&str] = &["/var/lib/docker", "/var/lib/containers"];

/// The engines' default sockets: who can write to one drives the engine, which is root on the
/// host for a rootful engine.
const ENGINE_SOCKETS: &[&str] = &[
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/podman/podman.sock",
];

/// One place a work dir must keep away from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    /// Its path (canonical when it exists).
    path: PathBuf,
    /// What it is, for the error: "your home directory", "the system directory", ...
    noun: String,
    /// Said after its path in the error (", where credentials ... live").
    detail: String,
    /// Whether a work dir lying inside it is refused too (not only one that is or contains it).
    inside: bool,
    /// Whether `allowed_workdirs` can allow it (false: never a work dir, whatever is allowed).
    allowable: bool,
    /// A system tree ([`SYSTEM_TREES`]), which the own-home exemption applies to.
    system: bool,
}

/// What the work-dir rule looks at on this host: the invoking user's home and environment,
/// the password database, h9sandbox's own directories and `allowed_workdirs`. Built by
/// [`HostView::current`]; tests build their own.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostView {
    /// The invoking user's home: `$HOME` when absolute, else their password-database entry's.
    pub home: Option<PathBuf>,
    /// The invoking user's ID.
    pub uid: u32,
    /// The text of `/etc/passwd` (`name:password:uid:gid:gecos:home:shell` lines).
    pub passwd: String,
    /// The environment variables the rule reads (`XDG_*`, `DOCKER_HOST`, `CONTAINER_HOST`,
    /// `SSH_AUTH_SOCK`, `TMUX`, `DBUS_SESSION_BUS_ADDRESS`), when set.
    pub env: BTreeMap<String, OsString>,
    /// h9sandbox's state directory.
    pub state_dir: PathBuf,
    /// h9sandbox's configuration directory (`$XDG_CONFIG_HOME/h9sandbox`).
    pub config_dir: Option<PathBuf>,
    /// `allowed_workdirs`, from the user's own configuration file.
    pub allowed: Vec<PathBuf>,
}

/// The environment variables [`HostView::env`] holds.
const RULE_ENV: &[&str] = &[
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "SSH_AUTH_SOCK",
    "TMUX",
    "DBUS_SESSION_BUS_ADDRESS",
];

impl HostView {
    /// This process's view: `$HOME` (else the password database's home of our uid),
    /// `/etc/passwd`, the environment, `ctx`'s state directory and `allowed_workdirs`.
    pub(crate) fn current(ctx: &Ctx) -> HostView {
        let uid = rustix::process::getuid().as_raw();
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .or_else(|| passwd_entries(&passwd).find(|e| e.1 == uid).map(|e| e.2));
        HostView {
            home,
            uid,
            passwd,
            env: RULE_ENV
                .iter()
                .filter_map(|k| std::env::var_os(k).map(|v| (k.to_string(), v)))
                .filter(|(_, v)| !v.is_empty())
                .collect(),
            state_dir: ctx.store.dir().to_path_buf(),
            config_dir: crate::config::xdg_dir("XDG_CONFIG_HOME", ".config")
                .map(|d| d.join("h9sandbox")),
            allowed: ctx.cfg.allowed_workdirs.clone(),
        }
    }

    /// An environment variable's value as an absolute path, if it is one.
    fn path_var(&self, name: &str) -> Option<PathBuf> {
        self.env
            .get(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    }
}

/// The (name, uid, home) of every entry of a password database's text.
fn passwd_entries(text: &str) -> impl Iterator<Item = (&str, u32, PathBuf)> {
    text.lines().filter_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        if f.len() < 7 || f[0].starts_with('#') {
            return None;
        }
        Some((f[0], f[2].parse().ok()?, PathBuf::from(f[5])))
    })
}

/// `p` canonical when it exists (symlinks resolved), else as given.
fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// A [`Place`] that is no system tree.
fn place(path: &Path, noun: &str, detail: &str, inside: bool, allowable: bool) -> Place {
    Place {
        path: path.to_path_buf(),
        noun: noun.into(),
        detail: detail.into(),
        inside,
        allowable,
        system: false,
    }
}

/// Which work dirs lead to the host's secrets or code (see [`WorkdirRule::check`]).
#[derive(Debug, Clone)]
pub(crate) struct WorkdirRule {
    places: Vec<Place>,
    /// The invoking user's home (canonical).
    home: Option<PathBuf>,
    /// `allowed_workdirs`, canonical where they exist.
    allowed: Vec<PathBuf>,
}

impl WorkdirRule {
    /// The rule on this host for `ctx`'s configuration ([`HostView::current`]).
    pub(crate) fn for_host(ctx: &Ctx) -> WorkdirRule {
        WorkdirRule::new(&HostView::current(ctx))
    }

    /// The rule for `view`: every place a work dir must keep away from, with what it is.
    pub(crate) fn new(view: &HostView) -> WorkdirRule {
        let home = view.home.as_deref().map(canonical);
        let mut places = never_places(view, home.as_deref());
        places.extend(allowable_places(view, home.as_deref()));
        // Symlinked spellings (/var/run -> /run, /lib -> /usr/lib) count as the place they lead to.
        let places = places
            .into_iter()
            .flat_map(|p| {
                let c = p.path.canonicalize().ok().filter(|c| *c != p.path);
                let resolved = c.map(|c| Place {
                    path: c,
                    ..p.clone()
                });
                std::iter::once(p).chain(resolved)
            })
            .collect();
        WorkdirRule {
            places,
            home,
            allowed: view.allowed.iter().map(|a| canonical(a)).collect(),
        }
    }

    /// Refuses the work dir `workdir` (canonical) when the sandbox could reach the host's
    /// secrets or code through it: when it is, contains, or lies inside
    /// - never allowed: h9sandbox's state or configuration directory, the engine's socket or
    ///   data, a socket of the user's session (ssh-agent, tmux, D-Bus, X11, `$XDG_RUNTIME_DIR`),
    ///   `/proc`, `/sys`, `/dev` or `/run`; or when it is or contains the user's home, `/tmp` or
    ///   `/var/tmp`;
    /// - unless it is or lies inside a directory of `allowed_workdirs`: a dot-directory of the
    ///   user's home (or where a symlinked one leads), an XDG base directory, another user's
    ///   home, or a system tree ([`SYSTEM_TREES`]), except, for a system tree, inside the
    ///   user's own home (a service account's, `/var/lib/jenkins`, unless in a code tree) or
    ///   inside `/tmp` or `/var/tmp`.
    ///
    /// Errors: [`Error::Refused`] naming the place, what it is and the fix.
    pub(crate) fn check(&self, workdir: &Path) -> Result<(), Error> {
        let allowed = self.allowed.iter().any(|a| workdir.starts_with(a));
        let in_temp = TEMP_ROOTS
            .iter()
            .any(|t| workdir.starts_with(t) && workdir != Path::new(t));
        let own_home = self.home.as_ref().filter(|h| {
            workdir.starts_with(h)
                && workdir != h.as_path()
                && !CODE_TREES.iter().any(|c| h.starts_with(c))
        });
        for p in &self.places {
            let relation = if workdir == p.path {
                "is"
            } else if p.path.starts_with(workdir) {
                "contains"
            } else if p.inside && workdir.starts_with(&p.path) {
                "lies in"
            } else {
                continue;
            };
            if p.allowable && allowed {
                continue;
            }
            if p.system
                && relation == "lies in"
                && (in_temp || own_home.is_some_and(|h| h.starts_with(&p.path)))
            {
                continue;
            }
            let fix = if p.allowable {
                format!(
                    "use a project directory, or allow it in allowed_workdirs in your own configuration file ({})",
                    user_config_file()
                )
            } else {
                "use a project directory (allowed_workdirs cannot allow this one)".into()
            };
            return Err(Error::Refused(format!(
                "work directory {} {relation} {} {}{}, which the sandbox could then read and change; {fix}",
                workdir.display(),
                p.noun,
                p.path.display(),
                p.detail,
            )));
        }
        Ok(())
    }
}

/// The places no work dir may be, contain or (most) lie in, whatever `allowed_workdirs` says.
fn never_places(view: &HostView, home: Option<&Path>) -> Vec<Place> {
    let mut places = Vec::new();
    // Never a work dir, whatever `allowed_workdirs` says: h9sandbox's own directories (a
    // sandbox rewriting them steers the host side), the engine (root on the host), the
    // session's sockets (an ssh-agent signs for you, tmux types for you), the kernel's file
    // systems, the home itself (shell start-up files), the shared temporary directories.
    if let Some(h) = home {
        places.push(place(h, "your home directory", "", false, false));
    }
    for t in TEMP_ROOTS {
        places.push(place(
            Path::new(t),
            "the shared temporary directory",
            "",
            false,
            false,
        ));
    }
    places.push(place(
        &view.state_dir,
        "h9sandbox's state directory",
        "",
        true,
        false,
    ));
    if let Some(d) = &view.config_dir {
        places.push(place(
            d,
            "h9sandbox's configuration directory",
            "",
            true,
            false,
        ));
    }
    let unix_path = |v: &str| {
        view.env.get(v).and_then(|h| {
            let h = h.to_string_lossy();
            h.strip_prefix("unix://").map(PathBuf::from)
        })
    };
    let mut sockets: Vec<PathBuf> = ENGINE_SOCKETS.iter().map(PathBuf::from).collect();
    sockets.extend(unix_path("DOCKER_HOST"));
    sockets.extend(unix_path("CONTAINER_HOST"));
    if let Some(run) = view.path_var("XDG_RUNTIME_DIR") {
        sockets.push(run.join("docker.sock"));
        sockets.push(run.join("podman/podman.sock"));
        places.push(place(
            &run,
            "your runtime directory",
            " ($XDG_RUNTIME_DIR, your session's sockets)",
            true,
            false,
        ));
    }
    for s in sockets {
        places.push(place(&s, "the engine's socket", "", true, false));
    }
    let mut data: Vec<PathBuf> = ENGINE_DATA.iter().map(PathBuf::from).collect();
    if let Some(d) = view
        .path_var("XDG_DATA_HOME")
        .or_else(|| home.map(|h| h.join(".local/share")))
    {
        data.push(d.join("docker"));
        data.push(d.join("containers"));
    }
    for d in data {
        places.push(place(&d, "the engine's data directory", "", true, false));
    }
    for (p, what) in session_sockets(view) {
        places.push(place(&p, what, "", true, false));
    }
    for k in KERNEL_TREES {
        places.push(place(
            Path::new(k),
            "the kernel's file system",
            "",
            true,
            false,
        ));
    }
    places
}

/// The sockets of the user's session a sandbox must not reach: the X server's, tmux's (its
/// default directory and `$TMUX`), the ssh-agent's (`$SSH_AUTH_SOCK`), the D-Bus session bus's.
fn session_sockets(view: &HostView) -> Vec<(PathBuf, &'static str)> {
    let mut session: Vec<(PathBuf, &'static str)> = vec![
        (PathBuf::from("/tmp/.X11-unix"), "the X server's sockets"),
        (
            PathBuf::from(format!("/tmp/tmux-{}", view.uid)),
            "your tmux server's sockets",
        ),
    ];
    session.extend(
        view.path_var("SSH_AUTH_SOCK")
            .map(|p| (p, "your ssh-agent's socket")),
    );
    if let Some(t) = view.env.get("TMUX") {
        let t = t.to_string_lossy();
        let sock = PathBuf::from(t.split(',').next().unwrap_or_default());
        if sock.is_absolute() {
            session.push((sock, "your tmux server's socket"));
        }
    }
    if let Some(d) = view.env.get("DBUS_SESSION_BUS_ADDRESS") {
        let d = d.to_string_lossy();
        if let Some(p) = d.strip_prefix("unix:path=") {
            session.push((
                PathBuf::from(p.split(',').next().unwrap_or_default()),
                "your D-Bus session bus",
            ));
        }
    }
    session.retain(|(p, _)| p.is_absolute());
    session
}

/// The places a work dir may not be, contain or lie in unless `allowed_workdirs` allows it:
/// the home's dot-directories, the XDG base directories, system trees, other users' homes.
fn allowable_places(view: &HostView, home: Option<&Path>) -> Vec<Place> {
    let mut places = Vec::new();
    // Refused unless allowed: the user's credential and tool directories, other users'
    // homes, system trees.
    let skip = |p: &Path| {
        home.is_some_and(|h| h.starts_with(p)) || TEMP_ROOTS.iter().any(|t| Path::new(t) == p)
    };
    if let Some(h) = home {
        for (path, name) in dot_entries(h) {
            if !skip(&path) {
                places.push(place(
                    &path,
                    "one of your home's dot-directories",
                    &format!("{name}, where credentials and tool configuration live"),
                    true,
                    true,
                ));
            }
        }
    }
    for var in [
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_CACHE_HOME",
    ] {
        if let Some(p) = view
            .path_var(var)
            .map(|p| canonical(&p))
            .filter(|p| !skip(p))
        {
            places.push(place(
                &p,
                "your XDG base directory",
                &format!(" (${var}), where tools keep configuration and data"),
                true,
                true,
            ));
        }
    }
    for t in SYSTEM_TREES {
        places.push(Place {
            path: PathBuf::from(t),
            noun: "the system directory".into(),
            detail: ", where the host's code or configuration lives".into(),
            inside: true,
            allowable: true,
            system: true,
        });
    }
    let mut homes: Vec<(String, PathBuf)> = passwd_entries(&view.passwd)
        .map(|(name, _, h)| (name.to_string(), h))
        .collect();
    homes.push(("root".into(), PathBuf::from("/root")));
    for (name, h) in homes {
        let h = canonical(&h);
        // Homes of system accounts in a system tree or the kernel's are refused as those.
        let covered = SYSTEM_TREES
            .iter()
            .chain(KERNEL_TREES)
            .any(|t| h.starts_with(t));
        if h.is_absolute()
            && h != Path::new("/")
            && !covered
            && !skip(&h)
            && home != Some(h.as_path())
            && h.is_dir()
        {
            places.push(place(
                &h,
                "the home directory",
                &format!(" of user {name}"),
                true,
                true,
            ));
        }
    }
    places
}

/// The user's own configuration file, for messages.
fn user_config_file() -> String {
    crate::config::xdg_dir("XDG_CONFIG_HOME", ".config")
        .map(|d| d.join("h9sandbox/config.toml").display().to_string())
        .unwrap_or_else(|| "$XDG_CONFIG_HOME/h9sandbox/config.toml".into())
}

/// The dot-entries directly under `home` (found by listing it), each as its path and, for a
/// symlink, also as where it leads (a work dir holding the target of `~/.bashrc` or
/// `~/.config` is as bad as one holding them): (path, how the error names it).
fn dot_entries(home: &Path) -> Vec<(PathBuf, String)> {
    let Ok(dir) = std::fs::read_dir(home) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let name = e.file_name();
        if !name.as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let path = e.path();
        if e.file_type().is_ok_and(|t| t.is_symlink()) {
            if let Ok(target) = path.canonicalize() {
                out.push((target, format!(" (where {} leads)", path.display())));
            }
        }
        out.push((path, String::new()));
    }
    out
}

/// Why a sandbox running as `user` probably cannot write to `workdir` (owner and mode bits of
/// the directory; supplementary groups and ACLs are not considered), or `None` when it can.
pub(crate) fn unwritable_for(workdir: &Path, user: Ids) -> Option<String> {
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
pub(crate) struct MountCheck {
    workdir: PathBuf,
    identity: (u64, u64),
}

impl MountCheck {
    /// Pins the work dir `workdir` (canonical, see [`resolve_workdir`]) by its identity.
    /// Errors: the path changed while it was checked.
    pub(crate) fn pin(workdir: &Path) -> Result<MountCheck> {
        Ok(MountCheck {
            identity: pin_workdir(workdir)?,
            workdir: workdir.to_path_buf(),
        })
    }

    /// Its identity: (device, inode).
    pub(crate) fn identity(&self) -> [u64; 2] {
        [self.identity.0, self.identity.1]
    }

    /// The check of a sandbox's recorded work dir and identity (`start` verifies the mount again).
    pub(crate) fn recorded(workdir: &Path, identity: [u64; 2]) -> MountCheck {
        MountCheck {
            workdir: workdir.to_path_buf(),
            identity: (identity[0], identity[1]),
        }
    }

    /// Compares the identity of what the container sees at the work dir with the checked one,
    /// in the container's own mount namespace and root, reaching the mount point through no
    /// symlink ([`crate::agent::identity_beneath`]: whatever the image or a process inside put
    /// on the way, only the directory at that very path answers). From the host through
    /// `/proc/PID/root` of the container's init `pid` when this process may open it (root, or
    /// the containers' own user: one `openat` per component); else (a non-root user of a
    /// rootful engine) by h9sandbox's own binary in the container (`agent stat`, through the
    /// engine's exec). Under gVisor, whose file system numbers devices and inodes itself, by a
    /// mark (`MountCheck::verify_by_mark`). Run before any of the sandbox's processes exists
    /// (`up`, `start`).
    /// Errors: a mismatch or a path that does not resolve, which the caller turns into a
    /// stopped or removed container; the engine's.
    pub(crate) async fn verify(
        &self,
        engine: &AnyEngine,
        container: &str,
        pid: u32,
        gvisor: bool,
    ) -> Result<()> {
        if gvisor {
            return self.verify_by_mark(engine, container).await;
        }
        let seen = match (pid > 0)
            .then(|| std::fs::File::open(format!("/proc/{pid}/root")).ok())
            .flatten()
        {
            Some(root) => {
                use std::os::fd::AsFd;
                crate::agent::identity_beneath(root.as_fd(), &self.workdir)
                    .map_err(|e| self.mismatch(&format!("it does not resolve there: {e}")))?
            }
            None => self.inside(engine, container, &self.workdir).await?,
        };
        if seen != self.identity {
            return Err(self.mismatch("it was replaced while the container started"));
        }
        Ok(())
    }

    fn mismatch(&self, why: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "the container mounted another directory than the work dir {} that was checked ({why}); refusing it",
            self.workdir.display()
        )
    }

    /// gVisor's check: its file system numbers devices and inodes itself, so the host marks
    /// the work dir instead (a fresh directory of a random name, made through a handle on the
    /// pinned work dir) and asks the container whether it sees the mark there (a parent sandbox
    /// that swapped the work dir cannot make it in the directory the engine then mounted: that
    /// one lies outside its reach); the mark is removed again. Errors: the mark cannot be made
    /// (fail closed: a work dir the host user cannot write), it is not seen inside.
    async fn verify_by_mark(&self, engine: &AnyEngine, container: &str) -> Result<()> {
        use rustix::fs::{mkdirat, openat2, unlinkat, AtFlags, Mode, OFlags, ResolveFlags, CWD};
        let dir = openat2(
            CWD,
            &self.workdir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|e| self.mismatch(&format!("it cannot be opened through no symlink: {e}")))?;
        let st = rustix::fs::fstat(&dir).map_err(std::io::Error::from)?;
        if (st.st_dev, st.st_ino) != self.identity {
            return Err(self.mismatch("it was replaced"));
        }
        let name = format!(".h9sandbox-mount-check-{}", Uuid::new_v4().simple());
        mkdirat(&dir, name.as_str(), Mode::from_raw_mode(0o700)).map_err(|e| {
            anyhow::anyhow!(
                "cannot check the container's work dir mount under gVisor: making {} failed ({e}); the check needs a work dir this user can write",
                self.workdir.join(&name).display()
            )
        })?;
        let seen = self
            .inside(engine, container, &self.workdir.join(&name))
            .await;
        let _ = unlinkat(&dir, name.as_str(), AtFlags::REMOVEDIR);
        seen.map(|_| ())
    }

    /// The identity of the directory `path` as h9sandbox's own binary in the container sees
    /// it (`agent stat`, through the engine's exec, as root), whatever the image holds.
    async fn inside(&self, engine: &AnyEngine, container: &str, path: &Path) -> Result<(u64, u64)> {
        let spec = ExecSpec {
            command: CommandLine::Argv(vec![
                crate::contract::BIN.into(),
                crate::contract::ARG.into(),
                "stat".into(),
                path.to_string_lossy().into_owned(),
            ]),
            cwd: PathBuf::from("/"),
            env: vec![],
            interactive: false,
            marker: Uuid::new_v4().simple().to_string(),
            user: Some(crate::engine::RunAs::ROOT),
            wrapped: false,
            wrapper_enters: false,
            backstop: None,
        };
        // What the container prints is the sandbox's: hold at most a few KiB of it.
        let out = engine
            .exec(container, &spec, ExecStdio::PIPED)?
            .output(4096)
            .await
            .context("cannot check the container's work dir mount")?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut f = text.split_whitespace().map(|w| w.parse::<u64>());
        match (f.next(), f.next()) {
            (Some(Ok(d)), Some(Ok(i))) => Ok((d, i)),
            _ => Err(self.mismatch(&format!(
                "`stat` in the container said: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))),
        }
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
        Error::Refused(format!(
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

    /// A view with `home` and the password database `passwd`, state and configuration under
    /// `/state` and `/config`, and `env`.
    fn view(home: &Path, passwd: &str, env: &[(&str, &str)]) -> HostView {
        HostView {
            home: Some(home.to_path_buf()),
            uid: 4242,
            passwd: passwd.into(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), OsString::from(v)))
                .collect(),
            state_dir: home.join(".local/state/h9sandbox"),
            config_dir: Some(home.join(".config/h9sandbox")),
            allowed: vec![],
        }
    }

    /// The message refusing `w` under `rule`, or `None` when it is accepted.
    fn why(rule: &WorkdirRule, w: impl AsRef<Path>) -> Option<String> {
        rule.check(w.as_ref()).err().map(|e| e.to_string())
    }

    #[test]
    fn credential_and_tool_directories_of_the_home_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let t = t.path().canonicalize().unwrap();
        let home = t.join("me");
        let elsewhere = t.join("dotfiles");
        for d in [".ssh/keys", ".config/gcloud", ".cargo", "project/src"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::create_dir_all(elsewhere.join("aws")).unwrap();
        std::fs::write(elsewhere.join("bashrc"), "").unwrap();
        std::os::unix::fs::symlink(elsewhere.join("aws"), home.join(".aws")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("bashrc"), home.join(".bashrc")).unwrap();
        let rule = WorkdirRule::new(&view(&home, "", &[]));
        for w in [
            home.join(".ssh"),
            home.join(".ssh/keys"),
            home.join(".config/gcloud"),
            home.join(".cargo"),
            elsewhere.join("aws"),
            elsewhere.join("aws/sub"),
            // Holds where ~/.bashrc and ~/.aws lead.
            elsewhere.clone(),
        ] {
            let e = why(&rule, &w).unwrap_or_else(|| panic!("{} accepted", w.display()));
            assert!(
                e.contains("one of your home's dot-directories") && e.contains("allowed_workdirs"),
                "{e}"
            );
        }
        // ~/.config holds h9sandbox's own configuration: never.
        let e = why(&rule, home.join(".config")).unwrap();
        assert!(
            e.contains("h9sandbox's configuration directory") && e.contains("cannot allow"),
            "{e}"
        );
        // The home itself and what holds it: never, and allowed_workdirs cannot change that.
        for w in [home.clone(), t.clone()] {
            let e = why(&rule, &w).unwrap();
            assert!(
                e.contains("your home directory") && e.contains("cannot allow"),
                "{e}"
            );
        }
        assert_eq!(why(&rule, home.join("project")), None);
        assert_eq!(why(&rule, home.join("project/src")), None);
        // allowed_workdirs opens a dot-directory (and what lies in it), never the home.
        let mut v = view(&home, "", &[]);
        v.allowed = vec![home.join(".config/gcloud"), home.clone()];
        let rule = WorkdirRule::new(&v);
        assert_eq!(why(&rule, home.join(".config/gcloud")), None);
        assert!(why(&rule, home.join(".config")).is_some());
        assert!(why(&rule, &home).is_some());
        assert!(why(&rule, home.join(".config/h9sandbox")).is_some());
    }

    #[test]
    fn system_trees_and_other_homes_are_refused_ci_workspaces_are_not() {
        let t = tempfile::tempdir().unwrap();
        let t = t.path().canonicalize().unwrap();
        let alice = t.join("alice");
        std::fs::create_dir_all(alice.join("project")).unwrap();
        let passwd = format!(
            "root:x:0:0:root:/root:/bin/bash\nsync:x:4:65534:sync:/bin:/bin/sync\nnet:x:998:998::/:/usr/sbin/nologin\nalice:x:1000:1000::{}:/bin/bash\n",
            alice.display()
        );
        let me = view(Path::new("/home/me"), &passwd, &[]);
        let rule = WorkdirRule::new(&me);
        for (w, needle) in [
            ("/usr/local/x", "the system directory /usr"),
            ("/usr", "the system directory /usr"),
            ("/etc/nginx", "the system directory /etc"),
            ("/var/log/x", "the system directory /var"),
            ("/var/www/site", "the system directory /var"),
            ("/opt/tool", "the system directory /opt"),
            ("/srv/git/repo.git", "the system directory /srv"),
            ("/boot/grub", "the system directory /boot"),
        ] {
            let e = why(&rule, w).unwrap_or_else(|| panic!("{w} accepted"));
            assert!(
                e.contains(needle) && e.contains("allowed_workdirs"),
                "{w}: {e}"
            );
        }
        if Path::new("/root").is_dir() {
            assert!(why(&rule, "/root/project")
                .unwrap()
                .contains("of user root"));
        }
        for w in [alice.clone(), alice.join("project")] {
            assert!(
                why(&rule, &w).unwrap().contains("of user alice"),
                "{}",
                w.display()
            );
        }
        for (w, needle) in [
            ("/proc/1", "the kernel's file system /proc"),
            ("/run/user/1000", "the kernel's file system /run"),
            ("/tmp", "the shared temporary directory /tmp"),
            ("/var/tmp", "the shared temporary directory /var/tmp"),
            ("/var", "the shared temporary directory /var/tmp"),
            (
                "/var/lib/docker/volumes/v/_data",
                "the engine's data directory",
            ),
        ] {
            let e = why(&rule, w).unwrap_or_else(|| panic!("{w} accepted"));
            assert!(e.contains(needle) && e.contains("cannot allow"), "{w}: {e}");
        }
        // A home of "/" (a system account's) protects nothing more; /bin is a system tree anyway.
        for w in [
            "/home/me/project",
            "/tmp/build-1",
            "/var/tmp/build-1",
            "/builds/group/proj",
            "/work/tb-workdir",
            "/mnt/data/proj",
        ] {
            assert_eq!(why(&rule, w), None, "{w}");
        }
        // CI workspaces under the CI user's own home, also in /var (a service account's).
        let runner = WorkdirRule::new(&view(Path::new("/home/runner"), &passwd, &[]));
        assert_eq!(why(&runner, "/home/runner/work/r/r"), None);
        let jenkins = WorkdirRule::new(&view(Path::new("/var/lib/jenkins"), &passwd, &[]));
        assert_eq!(why(&jenkins, "/var/lib/jenkins/workspace/job"), None);
        assert!(why(&jenkins, "/var/lib/jenkins").is_some());
        assert!(why(&jenkins, "/var/lib/other").is_some());
        // A system account's home inside a code tree earns nothing; nor does a home of /.
        let daemon = WorkdirRule::new(&view(Path::new("/usr/sbin"), &passwd, &[]));
        assert!(why(&daemon, "/usr/sbin/x").is_some());
        let nobody = WorkdirRule::new(&view(Path::new("/"), &passwd, &[]));
        assert!(why(&nobody, "/etc/x").is_some());
        assert_eq!(why(&nobody, "/tmp/x"), None);
        // allowed_workdirs opens a system tree's directory, never the kernel's or the engine's.
        let mut v = view(Path::new("/home/me"), &passwd, &[]);
        v.allowed = vec!["/usr/local/src".into(), "/proc".into(), "/".into()];
        let rule = WorkdirRule::new(&v);
        assert_eq!(why(&rule, "/usr/local/src/proj"), None);
        assert_eq!(why(&rule, "/etc/x"), None);
        assert!(why(&rule, "/proc/1").is_some());
        assert!(why(&rule, "/var/lib/docker/x").is_some());
    }

    #[test]
    fn the_sessions_sockets_are_refused() {
        let rule = WorkdirRule::new(&view(
            Path::new("/home/me"),
            "",
            &[
                ("SSH_AUTH_SOCK", "/tmp/ssh-XYZ/agent.77"),
                ("TMUX", "/tmp/tmux-0/default,123,0"),
                ("DOCKER_HOST", "unix:///tmp/dock/docker.sock"),
                ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/tmp/dbus-abc,guid=1"),
                ("XDG_CACHE_HOME", "/tmp/cache"),
            ],
        ));
        for (w, needle) in [
            ("/tmp/ssh-XYZ", "your ssh-agent's socket"),
            ("/tmp/tmux-0", "your tmux server's socket"),
            ("/tmp/tmux-4242", "your tmux server's sockets"),
            ("/tmp/dock", "the engine's socket"),
            ("/tmp/dbus-abc", "your D-Bus session bus"),
            ("/tmp/.X11-unix", "the X server's sockets"),
            ("/tmp/cache/pip", "your XDG base directory"),
        ] {
            let e = why(&rule, w).unwrap_or_else(|| panic!("{w} accepted"));
            assert!(e.contains(needle), "{w}: {e}");
        }
        assert_eq!(why(&rule, "/tmp/ssh-other"), None);
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
