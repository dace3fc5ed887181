//! The engine behind one trait ([`Environment`]), and what `up`, `exec`, `down` and `ls`
//! exchange with it.
//!
//! The implementations: [`docker::Docker`] runs a container engine's command-line client
//! (Docker, or Podman through the same argv builders) with an argv vector (never through a
//! shell), so every call can be printed (`-v`) and pasted into a terminal;
//! [`local::Local`] runs commands directly on the host, with no isolation at all;
//! [`swarm::Swarm`] runs a sandbox as a service of a Docker Swarm. [`AnyEngine`] is the one
//! the core holds: it delegates to one of them.
//!
//! Split along its seams: this file holds the trait and what crosses it (specs, statuses,
//! capabilities); [`any`] the delegating engine, [`exec`] the engine's own exec, [`bounded`]
//! client runs with bounded output.

pub(crate) mod docker;
pub(crate) mod image;
pub(crate) mod local;
pub(crate) mod marker;
pub(crate) mod shell;
pub(crate) mod swarm;

mod any;
mod bounded;
mod exec;
#[cfg(test)]
mod tests;

pub(crate) use any::*;
pub(crate) use bounded::*;
pub(crate) use exec::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use crate::config::Config;
use crate::types::{Daemon, EngineKind, Ids, Limits};

pub(crate) use docker::{Docker, Flavor, RunOptions};
pub(crate) use local::Local;
pub(crate) use swarm::Swarm;

/// Label every h9sandbox container carries (`h9sandbox=1`).
pub(crate) const LABEL_MANAGED: &str = "h9sandbox";
/// Label holding the sandbox ID.
pub(crate) const LABEL_ID: &str = "h9sandbox.id";
/// Label holding the state directory the container's record lives in, so that several state
/// directories (users, CI jobs) on one engine never touch each other's containers.
pub(crate) const LABEL_STATE_DIR: &str = "h9sandbox.state_dir";
/// Label holding the parent sandbox's ID on a sub-sandbox's container (`up --parent`).
pub(crate) const LABEL_PARENT: &str = "h9sandbox.parent";
/// Exec-capable scratch directory of every sandbox, outside the work dir: an anonymous volume of
/// the engine (on the host's disk, so big builds do not count against the memory limit as a
/// tmpfs would), removed with the container. `TMPDIR` points at it in every process of the
/// sandbox, while `/tmp` stays a `noexec` tmpfs. It is mounted over the image's own `/var/tmp`,
/// whose contents and mode (`1777` in common distributions) the engine copies into the volume, so
/// non-root users (e.g. apt's `_apt`) can write there too.
pub(crate) const SCRATCH_DIR: &str = "/var/tmp";
/// Environment variable set on every `exec`'d process; its value identifies the exec so that
/// its whole process tree (children inherit the environment) can be found and killed.
pub(crate) const EXEC_MARKER_VAR: &str = crate::contract::MARKER_VAR;

/// Environment variable set on every process of a local sandbox: the sandbox's name.
/// With [`LOCAL_STATE_DIR_VAR`] it tells which processes `down` must end.
pub(crate) const LOCAL_SANDBOX_VAR: &str = "H9SANDBOX_SANDBOX";
/// Environment variable set on every process of a local sandbox: its state directory.
pub(crate) const LOCAL_STATE_DIR_VAR: &str = "H9SANDBOX_SANDBOX_STATE_DIR";

/// Everything needed to create a sandbox's container.
#[derive(Debug, Clone)]
pub(crate) struct ContainerSpec {
    /// Container name.
    pub name: String,
    /// Image reference.
    pub image: String,
    /// Canonical host work directory, bind-mounted at the same path and used as working directory.
    pub workdir: PathBuf,
    /// Resource limits and network.
    pub limits: Limits,
    /// All labels, the managed ones included.
    pub labels: BTreeMap<String, String>,
    /// The user and group the sandbox's commands run as. The container itself runs as root:
    /// its PID 1 is h9sandbox's agent ([`crate::agent::init`]), which runs every command as
    /// this user.
    pub user: Ids,
    /// How the in-container agent gets into the container: bind mounts of this machine's
    /// directories, or shipped in a derived image with its secret on PID 1's standard input.
    pub agent: AgentSetup,
    /// Login name for the sandbox's user when the image has none for its UID.
    pub user_name: Option<String>,
    /// Name of the scratch volume mounted at [`SCRATCH_DIR`] (`h9sandbox-<id>`), labelled like
    /// the container, so that it can be found and removed even when the container was removed
    /// without its volumes.
    pub scratch_volume: String,
    /// OCI runtime (`docker run --runtime`, e.g. `runc`, `runsc`); `None` is the engine's
    /// default. gVisor's `runsc` changes how the process limit is applied
    /// ([`docker::gvisor_host_pids`]).
    pub runtime: Option<String>,
    /// With `network = "allowlist"`: the directory holding the proxy sidecar's socket (a host
    /// directory, or in copy mode a volume the sidecar shares), mounted read-only at
    /// [`crate::contract::PROXY_DIR`]; the container's PID 1 relays `127.0.0.1:3128` to it and
    /// every process gets `HTTP_PROXY` and its kin ([`docker::proxy_env`]).
    pub proxy: Option<MountSource>,
    /// Extra environment of every process of the container (`docker run --env`), in order
    /// (a later name wins), set before h9sandbox's own (`TMPDIR`, the proxy's), which win over
    /// them: a devcontainer.json's `containerEnv` and `remoteEnv`. Empty for most sandboxes.
    pub env: Vec<(String, String)>,
    /// Ports to publish on the host (`docker run --publish`, `up --publish`; a bridge network
    /// only, which the core checks).
    pub publish: Vec<crate::types::Publish>,
    /// Placement constraints of a swarm service (`up --constraint`, e.g.
    /// `node.labels.gpu==true`); other engines have one host and refuse any.
    pub constraints: Vec<String>,
}

/// An image to build from a Dockerfile with the engine (`docker build`, `podman build`), as
/// `up --devcontainer` does for a `build` configuration. Built from local images only: the
/// engine pulls a `FROM` image only when it is missing (and fails where no registry answers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BuildSpec {
    /// The build context: a host directory the engine's client sends to the builder (minus
    /// what its `.dockerignore` leaves out).
    pub context: PathBuf,
    /// The Dockerfile (`--file`).
    pub dockerfile: PathBuf,
    /// The image's name (`--tag`).
    pub tag: String,
    /// Build arguments (`--build-arg K=V`), in order.
    pub args: Vec<(String, String)>,
    /// The stage to build (`--target`), if any.
    pub target: Option<String>,
    /// Images whose layers may be reused (`--cache-from`).
    pub cache_from: Vec<String>,
    /// Run the build's `RUN` steps without a network (`--network none`): a sandbox whose own
    /// network is `none` or `allowlist` does not get one in its build either.
    pub no_network: bool,
    /// Labels of the image (`--label K=V`).
    pub labels: BTreeMap<String, String>,
}

/// Whether the OCI runtime `runtime` is gVisor: named `runsc`, or `runsc-` something (as
/// `runsc-kvm`), the names gVisor's documentation registers it under.
pub(crate) fn is_gvisor(runtime: Option<&str>) -> bool {
    runtime.is_some_and(|r| r == "runsc" || r.starts_with("runsc-"))
}

/// Label naming the sandbox an allowlist proxy sidecar serves (`h9sandbox.proxy_of=<ID>`); a
/// sidecar carries it (and [`LABEL_STATE_DIR`]), never [`LABEL_MANAGED`], so it is never taken
/// for a sandbox's container.
pub(crate) const LABEL_PROXY_OF: &str = "h9sandbox.proxy_of";

/// What an engine offers beyond running containers, which decides how the core sets a sandbox
/// up: whether the work dir, the agent's binary and its run directory can be bind-mounted from
/// this machine, and whether helper containers can run beside a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// The engine's containers can bind-mount this machine's directories (a daemon on this
    /// machine): the work dir, the agent's binary and run directory are mounted. Without it,
    /// nothing of this machine's file system reaches a container.
    pub host_mounts: bool,
    /// It runs sidecar containers ([`SidecarSpec`]) beside a sandbox (the allowlist's proxy).
    pub sidecars: bool,
    /// It can give a sandbox less than a bridge network (`network = "none"`, the allowlist);
    /// an engine without it refuses those modes at `up`, never giving a wider network.
    pub isolated_networks: bool,
    /// The host address of a published port in [`ContainerStatus::ports`] is the address of
    /// the node the sandbox runs on, where this machine connects to it (a swarm's task), not
    /// the daemon's host.
    pub node_ports: bool,
    /// Its sandboxes can be stopped, started again, paused and snapshotted
    /// ([`Environment::lifecycle`], [`Environment::commit`]).
    pub lifecycle: bool,
    /// It has an exec of its own ([`Environment::exec`]) that stands in for a sandbox's agent
    /// the host cannot reach. Without it (a swarm, whose nodes' daemons are not the client's),
    /// a command whose agent does not answer fails, saying why ([`Environment::inspect`]).
    pub engine_exec: bool,
}

/// Where a Docker-CLI client's daemon is, from the client's own settings (`DOCKER_HOST`,
/// `DOCKER_CONTEXT`): `None` for this machine (unset, `unix://`, the `default` context), else
/// the daemon's host name or address as the user gave it (`tcp://H:P` and `ssh://[U@]H[:P]` give
/// `H`; a context other than `default` gives its name, its host unknown here). A daemon that is
/// not this machine's cannot mount this machine's directories: its sandboxes are remote.
pub(crate) fn daemon_host(docker_host: Option<&str>, context: Option<&str>) -> Option<String> {
    match docker_host.filter(|h| !h.is_empty()) {
        Some(h) if h.starts_with("unix://") || h.starts_with("npipe://") => None,
        Some(h) => {
            let rest = h.split_once("://").map_or(h, |(_, r)| r);
            let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
            let host = match rest.strip_prefix('[') {
                Some(v6) => v6.split(']').next().unwrap_or(v6),
                None => rest.split([':', '/']).next().unwrap_or(rest),
            };
            Some(host.to_string())
        }
        None => context
            .filter(|c| !c.is_empty() && *c != "default")
            .map(str::to_string),
    }
}

/// The daemon new Docker sandboxes go to: the client's own settings in the environment `var`
/// reads (`DOCKER_HOST`, `DOCKER_CONTEXT`, `DOCKER_TLS_VERIFY`, `DOCKER_CERT_PATH`), the
/// configured `docker_context` when `DOCKER_CONTEXT` is unset. Empty values count as unset.
pub(crate) fn current_daemon(cfg: &Config, var: impl Fn(&str) -> Option<String>) -> Daemon {
    let get = |k: &str| var(k).filter(|v| !v.is_empty());
    Daemon {
        host: get("DOCKER_HOST"),
        context: get("DOCKER_CONTEXT").or_else(|| cfg.docker_context.clone()),
        tls_verify: get("DOCKER_TLS_VERIFY"),
        cert_path: get("DOCKER_CERT_PATH"),
    }
}

/// Where a mount of a sidecar (or the proxy's socket directory in a sandbox) comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MountSource {
    /// A directory or file of this machine (needs [`Capabilities::host_mounts`]).
    Host(PathBuf),
    /// A named volume of the engine, on the engine's machine: no directory of this one.
    Volume(TmpfsVolume),
}

/// A named volume kept in memory (the `local` driver's `type=tmpfs` volume, whose `o=` options
/// are tmpfs(5)'s `uid`, `gid`, `mode` and `size`), made by the engine at its first mount with
/// these owner, mode, size and labels; a later mount of the same name gets the same volume.
/// Two containers on one machine share a unix socket through it (the proxy sidecar and its
/// sandbox in copy mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TmpfsVolume {
    /// The volume's name.
    pub name: String,
    /// Owner of its root directory.
    pub owner: crate::types::Ids,
    /// Permission bits of its root directory (`0o711`).
    pub mode: u32,
    /// Its size limit, in bytes.
    pub size: u64,
    /// Its labels (found and removed with its sandbox).
    pub labels: BTreeMap<String, String>,
}

impl TmpfsVolume {
    /// The `local` driver's options making it (`--opt`, `volume-opt`: `type`, `device`, `o`).
    pub(crate) fn driver_options(&self) -> [(&'static str, String); 3] {
        [
            ("type", "tmpfs".into()),
            ("device", "tmpfs".into()),
            (
                "o",
                format!(
                    "uid={},gid={},mode={:o},size={}",
                    self.owner.uid, self.owner.gid, self.mode, self.size
                ),
            ),
        ]
    }
}

/// One mount of a sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SidecarMount {
    /// What is mounted.
    pub source: MountSource,
    /// Where, in the sidecar.
    pub target: String,
    /// Read-only.
    pub readonly: bool,
}

/// A helper container beside a sandbox (the allowlist's egress proxy), hardened like a
/// sandbox and more (read-only root file system, every capability dropped, no-new-privileges),
/// detached, never pulling its image, labelled so that it is found and removed with its sandbox.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SidecarSpec {
    /// Container name.
    pub name: String,
    /// Its labels (never [`LABEL_MANAGED`]).
    pub labels: BTreeMap<String, String>,
    /// The engine's network it joins (`bridge`).
    pub network: String,
    /// Who it runs as.
    pub user: crate::types::Ids,
    /// The capabilities it keeps (all others dropped), Linux names without `CAP_`.
    pub caps: Vec<String>,
    /// Memory limit, Docker notation (`64m`).
    pub memory: String,
    /// Process limit.
    pub pids_limit: u32,
    /// CPU limit in cores.
    pub cpus: f64,
    /// Its mounts, in order.
    pub mounts: Vec<SidecarMount>,
    /// The program it runs (in place of the image's entrypoint).
    pub entrypoint: String,
    /// The image it runs from.
    pub image: String,
    /// The program's arguments.
    pub args: Vec<String>,
}

/// One sidecar as listed by the engine ([`Environment::list_sidecars`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SidecarSummary {
    /// Its container ID.
    pub id: String,
    /// The value of the label naming its sandbox.
    pub of: String,
    /// Its state directory label.
    pub state_dir: String,
}

/// The name of sandbox `id`'s scratch volume.
pub(crate) fn scratch_volume_name(id: &uuid::Uuid) -> String {
    format!("h9sandbox-{}", id.simple())
}

/// What [`Environment::lifecycle`] does to a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContainerVerb {
    /// Start a stopped container (`docker start`).
    Start,
    /// Freeze every process of it (`docker pause`, the cgroup freezer).
    Pause,
    /// Thaw it (`docker unpause`).
    Unpause,
}

impl ContainerVerb {
    /// The engine's subcommand.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ContainerVerb::Start => "start",
            ContainerVerb::Pause => "pause",
            ContainerVerb::Unpause => "unpause",
        }
    }
}

/// An image's own configuration (`docker image inspect` `.Config`), which a snapshot restores.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ImageConfig {
    /// `ENTRYPOINT`, exec form; empty when none.
    pub entrypoint: Vec<String>,
    /// `CMD`, exec form; empty when none.
    pub cmd: Vec<String>,
    /// `USER`; empty when none.
    pub user: String,
    /// `WORKDIR`; empty when none.
    pub working_dir: String,
    /// `ENV`, `NAME=VALUE` each; empty when none.
    pub env: Vec<String>,
}

/// One volume as listed by the engine (`docker volume ls`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VolumeSummary {
    /// Its name.
    pub name: String,
    /// The sandbox ID label, if present.
    pub sandbox_id: Option<String>,
}

/// What a container needs for h9sandbox's in-container agent: the static binary, bind-mounted
/// read-only at [`crate::contract::BIN`] and run as the container's PID 1 (in place of the image's
/// entrypoint and command), and the sandbox's run directory, bind-mounted at
/// [`crate::contract::RUN_DIR`] (the agent's socket, the token handed over at start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentMount {
    /// The directory mounted read-only at `/.h9sandbox` (holding the empty mount points of
    /// the binary, the run directory and an allowlist sandbox's proxy socket directory, and
    /// the token's hash, [`crate::agent::server::TOKEN_HASH_FILE`]): a mount point cannot be renamed or replaced from
    /// inside (`EBUSY`), so root in the sandbox cannot swap in a binary of its own for the one
    /// the engine's exec starts.
    pub root: PathBuf,
    /// The static h9sandbox binary on the host.
    pub binary: PathBuf,
    /// The sandbox's run directory on the host (owner-only).
    pub run_dir: PathBuf,
}

/// How the in-container agent gets into a sandbox's container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AgentSetup {
    /// Bind mounts of this machine's directories ([`Capabilities::host_mounts`]): the binary,
    /// the run directory (the agent's unix socket, its token), the work dir.
    Mounted(AgentMount),
    /// Nothing of this machine's file system: the binary in a derived image, the channel's
    /// secret on PID 1's standard input, commands over the remote channel.
    Shipped(ShippedAgent),
}

/// The agent of a sandbox with no host mounts ([`AgentSetup::Shipped`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShippedAgent {
    /// The derived image: the sandbox's image with h9sandbox at [`crate::contract::BIN`]
    /// ([`Environment::agent_image`]).
    pub image: String,
    /// What PID 1 reads on its standard input before anything else runs
    /// ([`crate::contract::tls::ChannelSecret::to_frame`]).
    pub secret: Secret,
    /// Where the channel listens in the container (`IP:PORT`).
    pub listen: String,
    /// The address of the daemon's host to publish the channel's port on (`0.0.0.0`,
    /// `127.0.0.1`); `None`: not published (the engine's exec stream is the way).
    pub publish: Option<String>,
    /// How long `create` waits for the agent to say it serves.
    pub ready_timeout: Duration,
}

/// Bytes that must never be printed: `Debug` shows only their length.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(pub Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

impl AgentSetup {
    /// The host mounts, when the agent is mounted.
    pub(crate) fn mounted(&self) -> Option<&AgentMount> {
        match self {
            AgentSetup::Mounted(m) => Some(m),
            AgentSetup::Shipped(_) => None,
        }
    }
}

/// A command to run in a sandbox.
#[derive(Debug, Clone)]
pub(crate) struct ExecSpec {
    /// What to run: a shell command line (`bash -c`, or `sh -c` where the image has no bash) or
    /// an argument vector run exactly.
    pub command: CommandLine,
    /// Working directory inside the container (inside the work directory).
    pub cwd: PathBuf,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Attach our standard input (`docker exec -i`).
    pub interactive: bool,
    /// Value of [`EXEC_MARKER_VAR`] for this exec.
    pub marker: String,
    /// Who runs it (`docker exec --user`, which looks a name up in the container's
    /// `/etc/passwd`): `exec --user`, else the sandbox's user; `None`: the container's user
    /// (sandboxes made before the agent existed).
    pub user: Option<RunAs>,
    /// Whether the container has h9sandbox's binary ([`AgentMount`]), which then wraps the
    /// command (`h9sandbox agent exec`: the set-ID filter, a home); sandboxes made before it
    /// existed run it through [`docker::SHELL_WRAPPER`].
    pub wrapped: bool,
    /// Whether that wrapper enters the working directory and looks a user name up itself
    /// (`agent exec --cwd --user`, agent protocol 3 and later), as the agent does; an older one
    /// (a sandbox made by an older h9sandbox) gets `docker exec -w` and `--user` instead.
    pub wrapper_enters: bool,
    /// The wrapper's own timeout (`agent exec --timeout-ms`): a backstop that kills the command's
    /// tree inside the container when the host's process died before its own timeout could.
    pub backstop: Option<Duration>,
}

pub(crate) use crate::contract::proto::{CommandLine, RunAs};

/// A container's state as the engine reports it (`docker inspect` `.State`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ContainerStatus {
    /// `created`, `running`, `exited`, `paused`, `restarting`, `removing` or `dead`.
    pub status: String,
    /// Whether the main process runs.
    pub running: bool,
    /// Exit status of the main process once exited.
    pub exit_code: i64,
    /// The engine's error message, if any.
    pub error: String,
    /// Whether the kernel's OOM killer ended it.
    pub oom_killed: bool,
    /// The resource limits the engine reports it applied (`HostConfig`); `None` when the engine
    /// has no containers ([`Local`]).
    pub applied: Option<AppliedLimits>,
    /// Host PID of the container's init process (`State.Pid`); 0 when not running or unknown.
    pub pid: u32,
    /// Its published ports (`NetworkSettings.Ports`): (container port, host address, host
    /// port) each.
    pub ports: Vec<(u16, String, u16)>,
}

/// Resource limits as an engine applied them (`docker inspect` `.HostConfig`); 0 means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub(crate) struct AppliedLimits {
    /// Memory limit in bytes (`HostConfig.Memory`).
    pub memory_bytes: u64,
    /// CPU limit in billionths of a core (`HostConfig.NanoCpus`, or `CpuQuota`/`CpuPeriod`).
    pub nano_cpus: u64,
    /// Maximum number of processes (`HostConfig.PidsLimit`).
    pub pids_limit: u64,
}

impl AppliedLimits {
    /// Checks that every limit of `want` is in force; the error names each one that is not.
    /// An engine that accepted a flag but could not apply it (a kernel without the cgroup
    /// controller, rootless Podman on cgroup v1) reports 0 here; such a container must not run.
    pub(crate) fn check(&self, want: &Limits) -> Result<(), String> {
        let mut missing = Vec::new();
        let memory = crate::config::parse_size(&want.memory).unwrap_or(0);
        if self.memory_bytes != memory {
            missing.push(format!(
                "memory {} (engine reports {})",
                want.memory,
                shown(self.memory_bytes, |b| format!("{b} bytes"))
            ));
        }
        let nano = u64::try_from(docker::api::nano_cpus(want.cpus)).unwrap_or(0);
        if self.nano_cpus.abs_diff(nano) > 5_000_000 {
            missing.push(format!(
                "cpus {} (engine reports {})",
                crate::types::format_cpus(want.cpus),
                shown(self.nano_cpus, |n| crate::types::format_cpus(
                    n as f64 / 1e9
                ))
            ));
        }
        if self.pids_limit != u64::from(want.pids_limit) {
            missing.push(format!(
                "pids_limit {} (engine reports {})",
                want.pids_limit,
                shown(self.pids_limit, |n| n.to_string())
            ));
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the engine did not apply {}; refusing to run a sandbox without its limits (does the kernel have the cgroup controllers? rootless Podman on cgroup v1 ignores limits)",
                missing.join(", ")
            ))
        }
    }
}

fn shown(v: u64, f: impl Fn(u64) -> String) -> String {
    if v == 0 {
        "none".into()
    } else {
        f(v)
    }
}

/// One container as listed by the engine (`docker ps -a`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ContainerSummary {
    /// Full container ID.
    pub id: String,
    /// Container name.
    pub name: String,
    /// `created`, `running`, `exited`, ...
    pub state: String,
    /// Human status, e.g. `Exited (137) 5 seconds ago`.
    pub status: String,
    /// The sandbox ID label, if present.
    pub sandbox_id: Option<String>,
    /// The state directory label ([`LABEL_STATE_DIR`]), if present.
    pub state_dir: Option<String>,
    /// The node it runs on, for an engine of several nodes (a swarm's node's host name);
    /// `None` where there is one host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// What h9sandbox needs from an engine.
#[allow(async_fn_in_trait)]
pub(crate) trait Environment {
    /// Which engine this is, as recorded in records (`docker`, `podman`, `local`); its
    /// [`EngineKind::isolation`] tells whether there is a container at all.
    fn kind(&self) -> EngineKind;

    /// What it offers beyond running containers ([`Capabilities`]).
    fn capabilities(&self) -> Capabilities;

    /// The host of its daemon when that is not this machine ([`daemon_host`]); `None` here.
    fn remote_host(&self) -> Option<String>;

    /// Creates and starts the sidecar `spec`; returns its container ID. Errors: the engine's,
    /// or one that runs no sidecars ([`Capabilities::sidecars`]).
    async fn run_sidecar(&self, spec: &SidecarSpec) -> Result<String>;

    /// Runs the helper container `spec` to its end (attached, removed afterwards: `--rm`);
    /// returns its stdout. Errors: the engine's, a non-zero exit (its first error line), or an
    /// engine that runs no sidecars ([`Capabilities::sidecars`]).
    async fn run_helper(&self, spec: &SidecarSpec) -> Result<String>;

    /// Lists this engine's sidecars carrying the label `of_label` and the state directory label
    /// `state_dir`, in one call; the engine's filtering is checked, not trusted.
    async fn list_sidecars(&self, of_label: &str, state_dir: &str) -> Result<Vec<SidecarSummary>>;

    /// The last `lines` lines a container wrote to its log (`docker logs --tail`), for a
    /// message. Errors: the engine's.
    async fn logs_tail(&self, container: &str, lines: usize) -> Result<String>;

    /// The ports `container` publishes on the host, as the engine bound them (`docker port`:
    /// the host port it picked for a free one). Errors: the engine's.
    async fn published_ports(&self, container: &str) -> Result<Vec<crate::types::PublishedPort>>;

    /// Creates and starts a container, without pulling (an absent image is
    /// [`crate::error::Error::ImageUnavailable`]). Returns the container ID ([`Local`]: the
    /// sandbox name, since there is no container).
    async fn create(&self, spec: &ContainerSpec) -> Result<String>;

    /// Pulls `image`, giving up after `timeout`.
    async fn pull(&self, image: &str, timeout: Duration) -> Result<()>;

    /// The container's state, or `None` when it does not exist.
    async fn inspect(&self, container: &str) -> Result<Option<ContainerStatus>>;

    /// Stops the container (SIGTERM, then SIGKILL after `grace`). A missing container is success.
    async fn stop(&self, container: &str, grace: Duration) -> Result<()>;

    /// Removes the container, forcibly, with its anonymous volumes (the scratch directory). A
    /// missing container is success; a removal already under way elsewhere is waited for.
    async fn remove(&self, container: &str) -> Result<()>;

    /// Removes every container carrying the label `key=value`. Returns how many were removed.
    async fn remove_labelled(&self, key: &str, value: &str) -> Result<usize>;

    /// Lists all containers (running or not) carrying every `key=value` label, in one call.
    async fn list(&self, labels: &[(&str, &str)]) -> Result<Vec<ContainerSummary>>;

    /// Starts `spec` in `container` through the engine's own exec (`docker exec`), its
    /// standard streams wired as `stdio` says. The core uses it where no agent can be reached,
    /// and for the stream a relay to the agent runs over. Errors: the engine's client cannot be
    /// started ([`crate::error::Error::EngineUnavailable`]).
    fn exec(
        &self,
        container: &str,
        spec: &ExecSpec,
        stdio: ExecStdio,
    ) -> Result<EngineExec, crate::error::Error>;

    /// Kills every process of the exec `spec` (marked with its `marker`: the whole tree,
    /// daemonized ones included).
    async fn kill_exec(&self, container: &str, spec: &ExecSpec) -> Result<()>;

    /// Starts, pauses or thaws the container ([`ContainerVerb`]). Errors: the container is gone,
    /// or (a local sandbox) there is no container.
    async fn lifecycle(&self, verb: ContainerVerb, container: &str) -> Result<()>;

    /// Commits the container's file system (not its volumes nor bind mounts) to the image
    /// `image`, applying `changes` (Dockerfile instructions, `docker commit --change`); returns
    /// the image ID.
    async fn commit(&self, container: &str, image: &str, changes: &[String]) -> Result<String>;

    /// The configuration of the local image `image`.
    async fn image_config(&self, image: &str) -> Result<ImageConfig>;

    /// Builds the image `spec` describes, giving up after `timeout` (the build's processes are
    /// then stopped with the client). Errors: the build failed (its last output lines go to
    /// the reporter as notes, the error names the failing step), [`crate::error::Error::Refused`]
    /// where the engine has no images ([`Local`]).
    async fn build(&self, spec: &BuildSpec, timeout: Duration) -> Result<()>;

    /// The content of the regular file `path` of the local image `image` (symlinks in the image
    /// followed, inside the image), read through a container created for it and never started
    /// (`docker create`, `docker cp -L`, `docker rm`; it carries `labels`, so that `reap` finds
    /// it if h9sandbox dies meanwhile), at most `max` bytes. `None` when the image has no such
    /// file ([`Local`]: always).
    async fn image_file(
        &self,
        image: &str,
        path: &str,
        max: u64,
        labels: &[(&str, &str)],
    ) -> Result<Option<Vec<u8>>>;
    /// At most `max` bytes of the regular file `path` of the container `container` (a
    /// sidecar's, whose files only h9sandbox's own program writes; a sandbox's files go through
    /// its agent), copied out through the engine (`docker cp`, a symlink there copied as one and
    /// refused, never followed). `None` when the container or the file does not exist
    /// ([`Local`]: always). Errors: the engine's, a path that is not a regular file.
    async fn container_file(
        &self,
        container: &str,
        path: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>>;
    /// The derived image of `image` for sandboxes without host mounts: `image` with the static
    /// h9sandbox `binary` at [`crate::contract::BIN`], made on the engine without a registry
    /// and kept for the next `up`, named by the image's ID and `build` (the binary's build ID).
    /// `hint` is the name this returned for `image` last time (the caller's cache): an engine
    /// whose lookups cost a process each may check the image's ID and that name in one, and
    /// returns it only when it is still the derived image of what `image` names now; a stale
    /// or wrong hint costs the full lookup, never a wrong image.
    /// Errors: `image` is absent ([`crate::error::Error::ImageUnavailable`]), the engine's.
    async fn agent_image(
        &self,
        image: &str,
        binary: &Path,
        build: &str,
        hint: Option<&str>,
    ) -> Result<String>;

    /// Makes sure the engine has the image `build` describes ([`image::ImageBuild`]): when no
    /// image of its name exists, builds it from the host's files, without any registry
    /// (`FROM scratch`, or a base image the engine has). An image of that name is reused as it
    /// is: the name says what it holds. Errors: the engine's (a base it lacks, no build
    /// support), a file that cannot be read; [`Local`] has no images.
    async fn ensure_image(&self, build: &image::ImageBuild) -> Result<()>;

    /// Starts the stopped container of a shipped agent ([`AgentSetup::Shipped`]), handing
    /// `secret` to its PID 1 again, and waits (at most `ready`) until the agent serves.
    async fn start_shipped(&self, container: &str, secret: &Secret, ready: Duration) -> Result<()>;

    /// Lists the volumes carrying every `key=value` label.
    async fn list_volumes(&self, labels: &[(&str, &str)]) -> Result<Vec<VolumeSummary>>;

    /// Removes the volume `name`; a missing one is success.
    async fn remove_volume(&self, name: &str) -> Result<()>;
}
