//! One sandbox's record in the state file ([`Record`]): its lifecycle, limits, lease, bootstrap
//! run, agent and channel, and the settings a child sandbox inherits.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::ProcessRef;
use crate::error::Error;
use crate::types::{EngineKind, Ids, Isolation, Limits, WorkdirMode};

/// Lifecycle of a sandbox: Pending → Running ⇄ Stopped / Paused, → Stopping → Terminated;
/// any → Failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Lifecycle {
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

/// One sandbox as recorded in the state file (and printed by `up --format json` / `ls --format json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record {
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
    /// The warm pool the sandbox was made for (`h9sandbox pool create`): while `claimed_at` is
    /// `null` it waits, ready, for an `up --pool NAME` to claim it, and `ls` leaves it out.
    /// Absent for a sandbox made by a plain `up`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolTag>,
}

/// A sandbox's place in a warm pool ([`Record::pool`]; `ls --format json`: `"pool"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PoolTag {
    /// The pool's name.
    pub name: String,
    /// When an `up --pool` claimed it, RFC 3339 UTC; `null` while it waits in the pool.
    pub claimed_at: Option<String>,
    /// Whether it is ready to be claimed: made, started and bootstrapped (the filler sets it
    /// last). One that is not, whose filler is gone, is removed by `reap`.
    #[serde(default)]
    pub ready: bool,
}

impl Record {
    /// Whether the sandbox waits, unclaimed, in the pool `name` (any pool when `None`).
    pub(crate) fn waits_in_pool(&self, name: Option<&str>) -> bool {
        self.pool
            .as_ref()
            .is_some_and(|p| p.claimed_at.is_none() && name.is_none_or(|n| n == p.name))
    }
}

/// What a sandbox's record keeps of its devcontainer.json (`ls --format json`:
/// `"devcontainer"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DevcontainerRecord {
    /// The configuration file.
    pub config: PathBuf,
    /// Whether the image was built from its Dockerfile.
    pub built: bool,
    /// The environment it gave the container (`containerEnv`, `runArgs --env`, `remoteEnv`),
    /// `NAME=VALUE` each, as `docker inspect` shows `Config.Env`; its sub-sandboxes get it too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// `forwardPorts`, `appPort` and `runArgs -p`, as written: recorded; `up` forwards none
    /// (`h9sandbox port-forward` does).
    #[serde(default)]
    pub forward_ports: Vec<String>,
}

/// What `up` found of a sandbox's in-container agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AgentRecord {
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
pub(crate) struct ChannelRecord {
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
pub(crate) struct Settings {
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
    pub(crate) fn for_child(
        &self,
        bootstrap_timeout: Option<u64>,
        own_bootstrap: Option<String>,
    ) -> Result<Settings, crate::error::Error> {
        if let Some(t) = bootstrap_timeout {
            if tighter(t, self.bootstrap_timeout_secs) != t {
                return Err(crate::error::Error::Refused(format!(
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
    pub(crate) const KEYS: &'static [&'static str] = &[
        "exec_timeout_secs",
        "bootstrap_timeout_secs",
        "stop_timeout_secs",
        "bootstrap_cmd",
    ];
}

/// The tighter of two bounds where 0 means none: the smaller non-zero one.
pub(crate) fn tighter(a: u64, b: u64) -> u64 {
    match (a, b) {
        (0, x) | (x, 0) => x,
        (a, b) => a.min(b),
    }
}

/// The outcome of a sandbox's last bootstrap command, as recorded in its [`Record`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BootstrapRun {
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
    pub(crate) fn succeeded(&self) -> bool {
        self.exit_code == 0 && self.error.is_none()
    }
}

impl Record {
    /// The first 12 hex digits of the ID, as shown by `ls`.
    pub(crate) fn short_id(&self) -> String {
        self.id.simple().to_string()[..12].to_string()
    }

    /// The name or ID the engine knows the container by (a local sandbox: its name).
    pub(crate) fn container_ref(&self) -> &str {
        self.container_id.as_deref().unwrap_or(&self.name)
    }

    /// Sets the state and bumps `updated_at`; a state other than Stopping forgets the stopper.
    pub(crate) fn set_state(&mut self, state: Lifecycle, error: Option<String>) {
        self.state = state;
        self.error = error;
        if state != Lifecycle::Stopping {
            self.stopper = None;
        }
        self.updated_at = now_rfc3339();
    }

    /// Starts (or restarts) the lease: `expires_at` becomes `now` + `ttl_secs`. Without a TTL,
    /// nothing changes. Errors when the end is beyond what the clock can represent.
    pub(crate) fn start_lease(&mut self, now: SystemTime) -> Result<(), Error> {
        if let Some(ttl) = self.ttl_secs {
            self.expires_at = Some(lease_end(now, Duration::from_secs(ttl))?);
        }
        Ok(())
    }
}

/// `now` + `ttl` as RFC 3339 UTC with milliseconds. Errors when it is out of range.
pub(crate) fn lease_end(now: SystemTime, ttl: Duration) -> Result<String, Error> {
    now.checked_add(ttl)
        .filter(|t| {
            // humantime formats years up to 9999.
            t.duration_since(UNIX_EPOCH)
                .is_ok_and(|d| d.as_secs() < 253_402_300_799)
        })
        .map(|t| humantime::format_rfc3339_millis(t).to_string())
        .ok_or_else(|| {
            Error::Usage(format!(
                "a TTL of {} ends beyond the year 9999; give a shorter one",
                humantime::format_duration(ttl)
            ))
        })
}

/// Current time as RFC 3339 UTC with seconds precision.
pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tests::record;

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
