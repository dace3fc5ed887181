//! The state file: one JSON document listing every sandbox record of a state directory.
//!
//! Layout: `<state_dir>/state.json` (versioned schema, see [`SCHEMA_VERSION`]) and
//! `<state_dir>/state.lock`. Every read-modify-write ([`Store::update`]) holds an exclusive
//! advisory lock (`flock(2)` via `std::fs::File::lock`) on the lock file, and writes a temporary
//! file in the same directory which is then renamed over `state.json` (`rename(2)` is atomic), so
//! a reader without the lock always sees a whole document, and no two writers lose each other's
//! records. The lock dies with its holder, so a killed process never blocks the others. Callers
//! never hold the lock across a slow engine call: they update, call the engine, update again.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::Error;
use crate::types::{EngineKind, Ids, Isolation, Limits, WorkdirMode};

/// Name prefixes of the temporary files a write renames over `state.json` (and over the other
/// documents of the state directory, `trust.json`).
const TEMP_PREFIXES: &[&str] = &[".state.json.", ".trust.json."];

/// Version of the state file's schema; a file with a higher version is refused.
pub const SCHEMA_VERSION: u32 = 1;

/// The largest `state.json` read (64 MiB, some 60 000 records): the file is read whole, so a
/// bigger one (a tampered or runaway file) is refused as corrupt rather than sizing our memory.
pub const STATE_MAX_BYTES: u64 = 64 << 20;

/// Lifecycle of a sandbox: Pending → Running ⇄ Stopped / Paused, → Stopping → Terminated;
/// any → Failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Lifecycle {
    /// Recorded before the container is created; waiting for it to run.
    Pending,
    /// The container runs and accepts commands.
    Running,
    /// Stopped by `h9sandbox stop`: the container (and its scratch volume) is kept, its
    /// processes are gone; `start` brings it back.
    Stopped,
    /// Frozen by `h9sandbox pause` (every process of it); `resume` thaws it.
    Paused,
    /// `down` has begun stopping the container.
    Stopping,
    /// The container has been stopped and removed.
    Terminated,
    /// Something went wrong; `error` says what.
    Failed,
}

impl std::fmt::Display for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// A process identified by PID and start time, so a reused PID is not mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRef {
    /// Process ID.
    pub pid: u32,
    /// Start time in clock ticks after boot (field 22 of `/proc/PID/stat`); 0 when unknown.
    pub start_time: u64,
}

impl ProcessRef {
    /// The process `pid` as it is now, or `None` when it does not exist (or has exited and is a
    /// zombie waiting for its parent).
    pub fn of(pid: u32) -> Option<ProcessRef> {
        proc_start_time(pid).map(|start_time| ProcessRef { pid, start_time })
    }

    /// This process.
    pub fn current() -> ProcessRef {
        let pid = std::process::id();
        ProcessRef::of(pid).unwrap_or(ProcessRef { pid, start_time: 0 })
    }

    /// Whether the very process this refers to (same PID and start time) is still alive. A
    /// zombie (exited, not yet waited for by its parent) counts as dead.
    pub fn is_alive(&self) -> bool {
        match proc_start_time(self.pid) {
            Some(t) => self.start_time == 0 || t == self.start_time,
            None => false,
        }
    }
}

/// Field 22 (`starttime`) of `/proc/PID/stat`, or `None` when the process does not exist or is
/// a zombie (state `Z`) or dead (`X`): it has exited, whether or not its parent waited for it.
pub fn proc_start_time(pid: u32) -> Option<u64> {
    if pid == 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_start_time(&stat)
}

/// The start time in a `/proc/PID/stat` line, `None` for a zombie or dead process.
fn parse_stat_start_time(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may contain spaces or ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts at field 3 (state); starttime is field 22, i.e. the 20th from here.
    let mut fields = rest.split_whitespace();
    if matches!(fields.next()?, "Z" | "X" | "x") {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// One sandbox as recorded in the state file (and printed by `up --format json` / `ls --format json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The sandbox ID (a UUID v4); any unique prefix names the sandbox.
    pub id: Uuid,
    /// Container name (`h9sandbox-<first 12 hex digits of the ID>` unless `--name` was given).
    pub name: String,
    /// Lifecycle state.
    pub state: Lifecycle,
    /// The engine that runs it (`docker`, `podman`, `local`); every later command uses this one,
    /// whatever the configuration says now. Records written before engines existed are `docker`.
    #[serde(default)]
    pub engine: EngineKind,
    /// The daemon of a Docker sandbox, as the client's settings named it at `up`
    /// ([`crate::types::Daemon`]): every later command on it talks to that daemon, whatever
    /// `DOCKER_HOST` or `DOCKER_CONTEXT` say then. Absent in records made before it existed
    /// (their commands use the settings in force) and for other engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<crate::types::Daemon>,
    /// `container`, or `none` for a local sandbox: its commands run on the host unconfined.
    #[serde(default)]
    pub isolation: Isolation,
    /// The engine's container ID, once created; always `null` for a local sandbox.
    #[serde(default)]
    pub container_id: Option<String>,
    /// Image reference the container was started from.
    pub image: String,
    /// Canonical host path of the work directory, bind-mounted at the same path.
    pub workdir: PathBuf,
    /// Resource limits.
    pub limits: Limits,
    /// User labels (`--label K=V`), also set on the container.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Creation time, RFC 3339 UTC.
    pub created_at: String,
    /// Time of the last state change, RFC 3339 UTC.
    pub updated_at: String,
    /// Why the sandbox failed, when `state` is `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The process that ran `up` (tells a live Pending record from an abandoned one).
    pub creator: ProcessRef,
    /// The sandbox this one is a sub-sandbox of (`up --parent`); `null` for a top-level sandbox.
    #[serde(default)]
    pub parent: Option<Uuid>,
    /// The last bootstrap command run in the sandbox (`bootstrap`, `up --bootstrap`), if any.
    #[serde(default)]
    pub bootstrap: Option<BootstrapRun>,
    /// The `uid:gid` the container's processes run as (`docker run --user`); `write` gives new
    /// files this owner. Absent in records written before the `user` key existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<Ids>,
    /// The process whose life the sandbox is tied to (`up --owner-pid`): once it has exited,
    /// `reap` removes the sandbox. `null` when none.
    #[serde(default)]
    pub owner: Option<ProcessRef>,
    /// End of the lease, RFC 3339 UTC with milliseconds (`up --ttl`, `renew`): after it, `reap`
    /// removes the sandbox. `null` when the sandbox has no TTL.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// Length of the lease in seconds, by which `renew` extends it unless given `--ttl`.
    #[serde(default)]
    pub ttl_secs: Option<u64>,
    /// What the commands on this sandbox use later (timeouts, the bootstrap command), fixed by
    /// `up` from the configuration then in force: a later command never takes them from the
    /// project file of the directory it runs in. Absent in records made before they existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Settings>,
    /// The process (`down` or `reap`) removing the sandbox while it is Stopping; `reap` leaves a
    /// Stopping sandbox alone while this process lives, and finishes the job once it is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopper: Option<ProcessRef>,
    /// h9sandbox's agent inside the container (PID 1; see [`crate::agent`]). Absent for a local
    /// sandbox and for sandboxes made before the agent existed: their commands go through the
    /// engine's exec and a shell wrapper.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRecord>,
    /// The work dir's identity (device, inode) when the container mounted it: a directory
    /// deleted and made again at the same path is another one, which the sandbox does not see.
    /// Absent in records made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir_id: Option<[u64; 2]>,
    /// The OCI runtime the container was created with (config `runtime`, `up --runtime`; a
    /// sub-sandbox's is its parent's), e.g. `runsc` for gVisor; absent: the engine's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The ports the container publishes on the host (`up --publish`), as the engine bound them
    /// at the last start. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub published: Vec<crate::types::PublishedPort>,
    /// How the work dir reaches the container: `mount` (left out: the default, and what
    /// records made before the key mean) or `copy` (copied in at `up`; the host's directory is
    /// never changed by the sandbox, `cp` copies out).
    #[serde(default, skip_serializing_if = "WorkdirMode::is_mount")]
    pub workdir_mode: WorkdirMode,
    /// The devcontainer.json the sandbox was made from (`up --devcontainer`; a sub-sandbox's is
    /// its parent's); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devcontainer: Option<DevcontainerRecord>,
}

/// What a sandbox's record keeps of its devcontainer.json (`ls --format json`:
/// `"devcontainer"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevcontainerRecord {
    /// The configuration file.
    pub config: PathBuf,
    /// Whether the image was built from its Dockerfile.
    pub built: bool,
    /// The environment it gave the container (`containerEnv`, `runArgs --env`, `remoteEnv`),
    /// `NAME=VALUE` each, as `docker inspect` shows `Config.Env`; its sub-sandboxes get it too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// `forwardPorts`, `appPort` and `runArgs -p`, as written: recorded, not forwarded (h9sandbox
    /// has no port forwarding yet).
    #[serde(default)]
    pub forward_ports: Vec<String>,
}

/// What `up` found of a sandbox's in-container agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// The agent's socket (device and inode, as the host sees it) when `up` connected to it:
    /// commands go through that very socket, never another one put in its place. `null` when
    /// the host cannot reach the socket (gVisor, a daemon in a VM): commands then go through the
    /// engine's exec, wrapped by the in-container binary.
    pub socket: Option<[u64; 2]>,
    /// The protocol version the agent said it speaks (its `ready` file). The host connects only
    /// to an agent of its own version ([`crate::contract::proto::VERSION`]); a sandbox made by an
    /// older h9sandbox (no version recorded, or another one) runs its commands through the
    /// engine's exec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    /// The remote channel (TLS over TCP to the agent), for a sandbox with no host mounts;
    /// absent for a sandbox whose agent's socket is on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<ChannelRecord>,
}

/// Where and how the host reaches a sandbox's agent over the remote channel
/// ([`crate::contract::tls`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelRecord {
    /// `HOST:PORT` of the channel's published port; `null` when it cannot be reached from here:
    /// the host then relays through the engine's exec stream.
    pub address: Option<String>,
    /// SHA-256 of the agent's certificate, in hex: the host speaks to no other.
    pub fingerprint: String,
    /// Where the channel listens inside the container (`IP:PORT`), which the relay reaches.
    pub inside: String,
}

/// The configuration a sandbox keeps for the commands run on it later, recorded by `up`
/// ([`Record::settings`]). Later commands take these over the configuration files (but not over
/// the environment or their own flags, the caller's choice for that one command).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// Default timeout of `exec` in seconds; 0 = none (config `exec_timeout_secs`).
    pub exec_timeout_secs: u64,
    /// Timeout of a bootstrap in seconds; 0 = none (config `bootstrap_timeout_secs`).
    pub bootstrap_timeout_secs: u64,
    /// `down`'s grace period in seconds before SIGKILL (config `stop_timeout_secs`).
    pub stop_timeout_secs: u64,
    /// What `bootstrap ID` without a command runs (config `bootstrap_cmd`); `null`: none.
    #[serde(default)]
    pub bootstrap_cmd: Option<String>,
    /// The container's open-files rlimit as configured (`ulimit_nofile`; 0 = the engine's
    /// default). A sub-sandbox gets at most this.
    #[serde(default)]
    pub ulimit_nofile: u64,
    /// The container's processes rlimit as configured (`ulimit_nproc`; 0 = the engine's
    /// default). A sub-sandbox gets at most this.
    #[serde(default)]
    pub ulimit_nproc: u64,
}

impl Settings {
    /// The settings of a sub-sandbox of a parent that has `self`: each bound is the parent's,
    /// or the tighter value `asked` gives explicitly (an `up --parent` flag; `None`: inherit).
    /// Timeouts and rlimits of 0 mean none (the loosest). `bootstrap_cmd` is `own` (what the
    /// child's configuration runs: no bound). Errors: an asked value looser than the parent's,
    /// naming the flag.
    pub fn for_child(
        &self,
        bootstrap_timeout: Option<u64>,
        own_bootstrap: Option<String>,
    ) -> Result<Settings, crate::error::Error> {
        if let Some(t) = bootstrap_timeout {
            if tighter(t, self.bootstrap_timeout_secs) != t {
                return Err(crate::error::Error::Invalid(format!(
                    "--bootstrap-timeout {t} exceeds the parent's {}s (0 is none); a sub-sandbox may only tighten its parent's limits (give at most {}, or leave --bootstrap-timeout out to inherit it)",
                    self.bootstrap_timeout_secs, self.bootstrap_timeout_secs
                )));
            }
        }
        Ok(Settings {
            exec_timeout_secs: self.exec_timeout_secs,
            bootstrap_timeout_secs: bootstrap_timeout.unwrap_or(self.bootstrap_timeout_secs),
            stop_timeout_secs: self.stop_timeout_secs,
            bootstrap_cmd: own_bootstrap,
            ulimit_nofile: self.ulimit_nofile,
            ulimit_nproc: self.ulimit_nproc,
        })
    }

    /// The configuration keys these settings record.
    pub const KEYS: &'static [&'static str] = &[
        "exec_timeout_secs",
        "bootstrap_timeout_secs",
        "stop_timeout_secs",
        "bootstrap_cmd",
    ];
}

/// The tighter of two bounds where 0 means none: the smaller non-zero one.
pub fn tighter(a: u64, b: u64) -> u64 {
    match (a, b) {
        (0, x) | (x, 0) => x,
        (a, b) => a.min(b),
    }
}

/// The outcome of a sandbox's last bootstrap command, as recorded in its [`Record`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapRun {
    /// The shell command line, as run by `bash -c` (or `sh -c`).
    pub cmd: String,
    /// Its exit status (128+N when killed by signal N), 124 when it timed out, 125 when
    /// h9sandbox could not run it (then `error` says why).
    pub exit_code: i32,
    /// Wall-clock milliseconds from start to exit.
    pub duration_ms: u64,
    /// When it ended, RFC 3339 UTC.
    pub finished_at: String,
    /// Whether the bootstrap timeout killed its process tree.
    #[serde(default)]
    pub timed_out: bool,
    /// Why h9sandbox could not run the command (engine failure), when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl BootstrapRun {
    /// Whether the command ran and exited with status 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == 0 && self.error.is_none()
    }
}

impl Record {
    /// The first 12 hex digits of the ID, as shown by `ls`.
    pub fn short_id(&self) -> String {
        self.id.simple().to_string()[..12].to_string()
    }

    /// The name or ID the engine knows the container by (a local sandbox: its name).
    pub fn container_ref(&self) -> &str {
        self.container_id.as_deref().unwrap_or(&self.name)
    }

    /// Sets the state and bumps `updated_at`; a state other than Stopping forgets the stopper.
    pub fn set_state(&mut self, state: Lifecycle, error: Option<String>) {
        self.state = state;
        self.error = error;
        if state != Lifecycle::Stopping {
            self.stopper = None;
        }
        self.updated_at = now_rfc3339();
    }

    /// Starts (or restarts) the lease: `expires_at` becomes `now` + `ttl_secs`. Without a TTL,
    /// nothing changes. Errors when the end is beyond what the clock can represent.
    pub fn start_lease(&mut self, now: SystemTime) -> Result<(), Error> {
        if let Some(ttl) = self.ttl_secs {
            self.expires_at = Some(lease_end(now, Duration::from_secs(ttl))?);
        }
        Ok(())
    }
}

/// `now` + `ttl` as RFC 3339 UTC with milliseconds. Errors when it is out of range.
pub fn lease_end(now: SystemTime, ttl: Duration) -> Result<String, Error> {
    now.checked_add(ttl)
        .filter(|t| {
            // humantime formats years up to 9999.
            t.duration_since(UNIX_EPOCH)
                .is_ok_and(|d| d.as_secs() < 253_402_300_799)
        })
        .map(|t| humantime::format_rfc3339_millis(t).to_string())
        .ok_or_else(|| {
            Error::Invalid(format!(
                "a TTL of {} ends beyond the year 9999; give a shorter one",
                humantime::format_duration(ttl)
            ))
        })
}

/// Current time as RFC 3339 UTC with seconds precision.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// The whole state file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Schema version ([`SCHEMA_VERSION`]).
    pub version: u32,
    /// All records, oldest first.
    pub sandboxes: Vec<Record>,
    /// The state directory it was read from (not stored; named when a query matches nothing).
    #[serde(skip)]
    pub dir: Option<PathBuf>,
}

impl State {
    /// Finds the one record whose ID starts with `query` (hex digits, dashes optional), or whose
    /// name equals `query`. Errors: [`Error::NotFound`], [`Error::Ambiguous`].
    pub fn resolve(&self, query: &str) -> Result<&Record, Error> {
        let idx = self.resolve_index(query)?;
        Ok(&self.sandboxes[idx])
    }

    /// [`Error::NotFound`] for `query`, naming the state directory looked in.
    pub fn not_found(&self, query: &str) -> Error {
        Error::NotFound {
            query: query.to_string(),
            state_dir: self
                .dir
                .as_ref()
                .map_or_else(|| "(unknown)".into(), |d| d.display().to_string()),
        }
    }

    /// As [`State::resolve`], returning the index into `sandboxes`.
    pub fn resolve_index(&self, query: &str) -> Result<usize, Error> {
        // A full ID, then a name, then an ID prefix.
        if let Ok(id) = Uuid::parse_str(query) {
            if let Some(i) = self.sandboxes.iter().position(|r| r.id == id) {
                return Ok(i);
            }
        }
        if let Some(i) = self.sandboxes.iter().position(|r| r.name == query) {
            return Ok(i);
        }
        let q = query.to_ascii_lowercase().replace('-', "");
        if q.is_empty() || !q.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(self.not_found(query));
        }
        let hits: Vec<usize> = self
            .sandboxes
            .iter()
            .enumerate()
            .filter(|(_, r)| r.id.simple().to_string().starts_with(&q))
            .map(|(i, _)| i)
            .collect();
        match hits.len() {
            0 => Err(self.not_found(query)),
            1 => Ok(hits[0]),
            n => Err(Error::Ambiguous {
                prefix: query.to_string(),
                count: n,
                ids: hits
                    .iter()
                    .take(5)
                    .map(|&i| self.sandboxes[i].short_id())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// The record with this exact ID.
    pub fn get_mut(&mut self, id: Uuid) -> Option<&mut Record> {
        self.sandboxes.iter_mut().find(|r| r.id == id)
    }

    /// The record with this exact ID.
    pub fn get(&self, id: Uuid) -> Option<&Record> {
        self.sandboxes.iter().find(|r| r.id == id)
    }

    /// The sub-sandboxes of `id`, their sub-sandboxes and so on, grouped by depth: the children
    /// first, then the grandchildren, ... (each group in record order). A cycle (only possible in
    /// a hand-edited file) ends the walk.
    pub fn descendants(&self, id: Uuid) -> Vec<Vec<Uuid>> {
        let mut levels: Vec<Vec<Uuid>> = Vec::new();
        let mut seen = vec![id];
        let mut frontier = vec![id];
        while !frontier.is_empty() {
            let next: Vec<Uuid> = self
                .sandboxes
                .iter()
                .filter(|r| r.parent.is_some_and(|p| frontier.contains(&p)))
                .map(|r| r.id)
                .filter(|c| !seen.contains(c))
                .collect();
            seen.extend(&next);
            if !next.is_empty() {
                levels.push(next.clone());
            }
            frontier = next;
        }
        levels
    }
}

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
pub struct Store {
    dir: PathBuf,
    file: PathBuf,
    lock: PathBuf,
}

/// Holds the exclusive lock on `state.lock` until dropped.
#[must_use = "the lock is released when the guard is dropped"]
pub struct LockGuard {
    _file: File,
}

/// File name of the state file in the state directory.
const STATE_FILE: &str = "state.json";
/// File name of the lock file in the state directory.
const LOCK_FILE: &str = "state.lock";

/// The effective user ID, who must own the state directory and its files.
fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// An [`Error::UnsafeState`].
fn unsafe_state(what: String, problem: String, fix: String) -> Error {
    Error::UnsafeState { what, problem, fix }
}

/// Checks that what `st` describes (the state directory, or one of its files, named by `what`
/// and `path`) is owned by `me` and writable by nobody else.
fn check_owned(what: &str, path: &Path, st: &rustix::fs::Stat, me: u32) -> Result<(), Error> {
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
fn check_ancestors(dir: &Path, me: u32) -> Result<Option<PathBuf>> {
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

impl Store {
    /// The store in `dir`, created (mode 0700, with its missing parents) when missing.
    /// Errors: [`Error::UnsafeState`] when the directory, a directory above it, or a symlink
    /// on the way could be changed by another user (see [`Store`]); I/O errors.
    pub fn open(dir: &Path) -> Result<Store> {
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

    /// Path of `state.json`.
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
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
    pub fn load(&self) -> Result<State> {
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
    pub fn read_document(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let dir = self.open_dir()?;
        self.read_in(&dir, name)
    }

    /// Read-modify-write of the file `name` of the state directory under the state lock: `f`
    /// gets its bytes (`None` when missing) and returns the new ones (`None`: leave it as is).
    pub fn update_document<T>(
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

    /// Takes the exclusive lock (blocking until the holder releases it or dies).
    pub fn lock(&self) -> Result<LockGuard> {
        let dir = self.open_dir()?;
        self.lock_in(&dir)
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
    pub fn update<T>(&self, f: impl FnOnce(&mut State) -> Result<T>) -> Result<T> {
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
    pub fn remove_stale_temp_files(&self) -> Result<usize> {
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

/// The refusal of `what` at `path`, a symlink.
/// Refuses a state directory whose path is not UTF-8 or holds a control character: the path is
/// the value of every container's `h9sandbox.state_dir` label, which engine listings print one
/// container a line (a newline would forge a line), which two different non-UTF-8 paths could
/// share once made text, and which diagnostics print (an escape would drive the terminal).
fn check_printable(dir: &Path) -> Result<(), Error> {
    match dir.to_str() {
        Some(text) if !text.chars().any(char::is_control) => Ok(()),
        _ => Err(Error::Invalid(format!(
            "the state directory {:?} is not valid UTF-8 or holds a control character (newline, tab, escape, ...), which its containers' labels cannot carry; set state_dir (H9SANDBOX_STATE_DIR) to another path",
            dir.as_os_str()
        ))),
    }
}

fn symlink_refused(what: &str, path: &Path) -> Error {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::types::Network;

    /// A Running Docker record named `name`, for unit tests.
    pub(crate) fn record(name: &str) -> Record {
        Record {
            id: Uuid::new_v4(),
            name: name.into(),
            state: Lifecycle::Running,
            engine: EngineKind::Docker,
            isolation: Isolation::Container,
            container_id: None,
            image: "img".into(),
            workdir: "/w".into(),
            limits: Limits {
                cpus: 1.0,
                memory: "512m".into(),
                pids_limit: 256,
                tmp_size: "256m".into(),
                network: Network::Bridge,
                allow: Vec::new(),
                caps: crate::types::Caps::Minimal,
            },
            labels: Default::default(),
            created_at: now_rfc3339(),
            updated_at: now_rfc3339(),
            error: None,
            creator: ProcessRef::current(),
            parent: None,
            bootstrap: None,
            user: None,
            owner: None,
            expires_at: None,
            ttl_secs: None,
            settings: None,
            stopper: None,
            agent: None,
            workdir_id: None,
            runtime: None,
            devcontainer: None,
            published: Vec::new(),
            workdir_mode: Default::default(),
            daemon: None,
        }
    }

    #[test]
    fn resolve_by_prefix_name_and_ambiguity() {
        let mut s = State::default();
        let mut a = record("alpha");
        a.id = Uuid::parse_str("aaaa1111-0000-4000-8000-000000000000").unwrap();
        let mut b = record("beta");
        b.id = Uuid::parse_str("aaaa2222-0000-4000-8000-000000000000").unwrap();
        s.sandboxes = vec![a, b];
        assert_eq!(s.resolve("aaaa1").unwrap().name, "alpha");
        assert_eq!(s.resolve("AAAA2222-0").unwrap().name, "beta");
        assert_eq!(s.resolve("beta").unwrap().name, "beta");
        assert!(matches!(
            s.resolve("aaaa"),
            Err(Error::Ambiguous { count: 2, .. })
        ));
        assert!(matches!(s.resolve("ffff"), Err(Error::NotFound { .. })));
        assert!(matches!(s.resolve(""), Err(Error::NotFound { .. })));
    }

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
        std::fs::write(store.path(), b"{not json").unwrap();
        let err = store.load().unwrap_err().to_string();
        assert!(
            err.contains("state.json") && err.contains("corrupt"),
            "{err}"
        );
        // A failed update writes nothing.
        assert!(store.update(|_| Ok(())).is_err());
        assert_eq!(std::fs::read(store.path()).unwrap(), b"{not json");
    }

    #[test]
    fn an_oversized_state_file_is_refused_without_being_held() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // Sparse: a terabyte that costs nothing on disk would be read whole.
        std::fs::File::create(store.path())
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let err = format!("{:#}", store.load().unwrap_err());
        assert!(err.contains("larger than 67108864 bytes"), "{err}");
    }

    #[test]
    fn descendants_are_grouped_by_depth() {
        let mut s = State::default();
        let root = record("root");
        let mut a = record("a");
        a.parent = Some(root.id);
        let mut b = record("b");
        b.parent = Some(root.id);
        let mut a1 = record("a1");
        a1.parent = Some(a.id);
        let other = record("other");
        s.sandboxes = vec![root.clone(), a.clone(), b.clone(), a1.clone(), other];
        assert_eq!(s.descendants(root.id), vec![vec![a.id, b.id], vec![a1.id]]);
        assert_eq!(s.descendants(a.id), vec![vec![a1.id]]);
        assert!(s.descendants(b.id).is_empty());
        // A hand-made cycle terminates.
        s.sandboxes[0].parent = Some(a1.id);
        assert_eq!(s.descendants(root.id).len(), 2);
    }

    #[test]
    fn old_records_without_new_fields_still_parse() {
        let mut v = serde_json::to_value(record("old")).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("parent");
        o.remove("bootstrap");
        let r: Record = serde_json::from_value(v).unwrap();
        assert_eq!((r.parent, r.bootstrap), (None, None));
    }

    #[test]
    fn records_without_engine_fields_are_docker_containers() {
        let mut json = serde_json::to_value(record("old")).unwrap();
        let obj = json.as_object_mut().unwrap();
        obj.remove("engine");
        obj.remove("isolation");
        let r: Record = serde_json::from_value(json).unwrap();
        assert_eq!(
            (r.engine, r.isolation),
            (EngineKind::Docker, Isolation::Container)
        );
        let mut local = record("l");
        local.engine = EngineKind::Local;
        local.isolation = Isolation::None;
        let json = serde_json::to_value(&local).unwrap();
        assert_eq!(
            (&json["engine"], &json["isolation"]),
            (&"local".into(), &"none".into())
        );
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

    #[test]
    fn process_ref_tells_reused_pids_apart() {
        let me = ProcessRef::current();
        assert!(me.start_time > 0 && me.is_alive());
        let impostor = ProcessRef {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!impostor.is_alive());
        assert!(ProcessRef::of(0).is_none());
    }

    #[test]
    fn zombies_are_dead() {
        let line = |state: &str| {
            format!("42 (a) b) {state} 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0")
        };
        assert_eq!(parse_stat_start_time(&line("S")), Some(987654));
        assert_eq!(parse_stat_start_time(&line("R")), Some(987654));
        assert_eq!(parse_stat_start_time(&line("Z")), None);
        assert_eq!(parse_stat_start_time(&line("X")), None);
        // A real child that exited but was not waited for yet.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while ProcessRef::of(pid).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(ProcessRef::of(pid).is_none(), "a zombie counts as alive");
        child.wait().unwrap();
    }

    #[test]
    fn old_records_without_lease_fields_still_parse() {
        let mut v = serde_json::to_value(record("old")).unwrap();
        for k in ["owner", "expires_at", "ttl_secs", "stopper"] {
            v.as_object_mut().unwrap().remove(k);
        }
        let r: Record = serde_json::from_value(v).unwrap();
        assert_eq!(
            (r.owner, r.expires_at, r.ttl_secs, r.stopper),
            (None, None, None, None)
        );
    }

    #[test]
    fn lease_end_is_now_plus_ttl_in_milliseconds() {
        let now = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        assert_eq!(
            lease_end(now, Duration::from_secs(90)).unwrap(),
            "2023-11-14T22:14:50.250Z"
        );
        assert!(lease_end(now, Duration::from_secs(u64::MAX / 2)).is_err());
        let mut r = record("x");
        r.start_lease(now).unwrap();
        assert_eq!(r.expires_at, None);
        r.ttl_secs = Some(2);
        r.start_lease(now).unwrap();
        assert_eq!(r.expires_at.as_deref(), Some("2023-11-14T22:13:22.250Z"));
    }
}
