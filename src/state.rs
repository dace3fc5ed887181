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
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::Error;
use crate::types::{EngineKind, Ids, Isolation, Limits};

/// Name prefix of the temporary files a write renames over `state.json`.
const TEMP_PREFIX: &str = ".state.json.";

/// Version of the state file's schema; a file with a higher version is refused.
pub const SCHEMA_VERSION: u32 = 1;

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
}

/// What `up` found of a sandbox's in-container agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// The agent's socket (device and inode, as the host sees it) when `up` connected to it:
    /// commands go through that very socket, never another one put in its place. `null` when
    /// the host cannot reach the socket (gVisor, a daemon in a VM): commands then go through the
    /// engine's exec, wrapped by the in-container binary.
    pub socket: Option<[u64; 2]>,
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
}

impl State {
    /// Finds the one record whose ID starts with `query` (hex digits, dashes optional), or whose
    /// name equals `query`. Errors: [`Error::NotFound`], [`Error::Ambiguous`].
    pub fn resolve(&self, query: &str) -> Result<&Record, Error> {
        let idx = self.resolve_index(query)?;
        Ok(&self.sandboxes[idx])
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
            return Err(Error::NotFound(query.to_string()));
        }
        let hits: Vec<usize> = self
            .sandboxes
            .iter()
            .enumerate()
            .filter(|(_, r)| r.id.simple().to_string().starts_with(&q))
            .map(|(i, _)| i)
            .collect();
        match hits.len() {
            0 => Err(Error::NotFound(query.to_string())),
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

impl Store {
    /// The store in `dir`, created (mode 0700) when missing.
    pub fn open(dir: &Path) -> Result<Store> {
        if !dir.is_dir() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the state directory {}", dir.display()))?;
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
        // One state directory, one label value, however it was spelled.
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        Ok(Store {
            dir: dir.clone(),
            file: dir.join("state.json"),
            lock: dir.join("state.lock"),
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

    /// Reads the state without locking (writes are atomic renames, so this sees a whole file).
    /// A missing file is an empty state. Errors: [`Error::StateCorrupt`], I/O errors.
    pub fn load(&self) -> Result<State> {
        let bytes = match std::fs::read(&self.file) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(State {
                    version: SCHEMA_VERSION,
                    sandboxes: vec![],
                })
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot read state file {}", self.file.display()))
            }
        };
        let state: State = serde_json::from_slice(&bytes).map_err(|e| Error::StateCorrupt {
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
        Ok(state)
    }

    /// Takes the exclusive lock (blocking until the holder releases it or dies).
    pub fn lock(&self) -> Result<LockGuard> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock)
            .with_context(|| format!("cannot open the lock file {}", self.lock.display()))?;
        file.lock()
            .with_context(|| format!("cannot lock {}", self.lock.display()))?;
        Ok(LockGuard { _file: file })
    }

    /// Read-modify-write under the lock. `f` may return an error, in which case nothing is written.
    /// The file is only rewritten when `f` changed the state.
    pub fn update<T>(&self, f: impl FnOnce(&mut State) -> Result<T>) -> Result<T> {
        let _guard = self.lock()?;
        let mut state = self.load()?;
        let before = state.clone();
        let out = f(&mut state)?;
        if state != before {
            state.version = SCHEMA_VERSION;
            self.write(&state)?;
        }
        Ok(out)
    }

    /// Removes the temporary files of writers that died between creating and renaming them
    /// (a temporary file only lives while its writer holds the lock, so any found under the lock
    /// is stale). Takes the lock only when there is one. Returns how many were removed.
    pub fn remove_stale_temp_files(&self) -> Result<usize> {
        let stale = || -> Result<Vec<PathBuf>> {
            let entries = std::fs::read_dir(&self.dir)
                .with_context(|| format!("cannot list {}", self.dir.display()))?;
            Ok(entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(TEMP_PREFIX))
                .map(|e| e.path())
                .collect())
        };
        if stale()?.is_empty() {
            return Ok(0);
        }
        let _guard = self.lock()?;
        let files = stale()?;
        for f in &files {
            std::fs::remove_file(f).with_context(|| format!("cannot remove {}", f.display()))?;
        }
        Ok(files.len())
    }

    fn write(&self, state: &State) -> Result<()> {
        let mut tmp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .tempfile_in(&self.dir)
            .with_context(|| format!("cannot create a temporary file in {}", self.dir.display()))?;
        let mut json = serde_json::to_vec_pretty(state).expect("state serializes");
        json.push(b'\n');
        tmp.write_all(&json)
            .and_then(|_| tmp.as_file().sync_all())
            .with_context(|| format!("cannot write the state file in {}", self.dir.display()))?;
        tmp.persist(&self.file)
            .with_context(|| format!("cannot replace the state file {}", self.file.display()))?;
        Ok(())
    }
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
            stopper: None,
            agent: None,
            workdir_id: None,
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
        assert!(matches!(s.resolve("ffff"), Err(Error::NotFound(_))));
        assert!(matches!(s.resolve(""), Err(Error::NotFound(_))));
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
