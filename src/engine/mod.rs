//! The container engine behind one trait ([`Environment`], after the seed documents), and what
//! `up`, `exec`, `down` and `ls` exchange with it.
//!
//! [`docker::Docker`] implements it by running the engine's command-line client with an argv
//! vector (never through a shell), so every call can be printed (`-v`) and pasted into a terminal.

pub mod docker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use crate::state::Limits;

pub use docker::Docker;

/// Label every h9sandbox container carries (`h9sandbox=1`).
pub const LABEL_MANAGED: &str = "h9sandbox";
/// Label holding the sandbox ID.
pub const LABEL_ID: &str = "h9sandbox.id";
/// Label holding the state directory the container's record lives in, so that several state
/// directories (users, CI jobs) on one engine never touch each other's containers.
pub const LABEL_STATE_DIR: &str = "h9sandbox.state_dir";
/// Environment variable set on every `exec`'d process; its value identifies the exec so that
/// its whole process tree (children inherit the environment) can be found and killed.
pub const EXEC_MARKER_VAR: &str = "H9SANDBOX_EXEC_ID";

/// Everything needed to create a sandbox's container.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
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
    /// The user and group the container's processes run as (`--user uid:gid`).
    pub user: crate::config::Ids,
}

/// A command to run in a sandbox.
#[derive(Debug, Clone)]
pub struct ExecSpec {
    /// Shell command line, run by `bash -c` (or `sh -c` where the image has no bash).
    pub command: String,
    /// Working directory inside the container (inside the work directory).
    pub cwd: PathBuf,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Attach our standard input (`docker exec -i`).
    pub interactive: bool,
    /// Value of [`EXEC_MARKER_VAR`] for this exec.
    pub marker: String,
}

/// A container's state as the engine reports it (`docker inspect` `.State`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerStatus {
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
}

/// One container as listed by the engine (`docker ps -a`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerSummary {
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
}

/// What h9sandbox needs from a container runtime.
#[allow(async_fn_in_trait)]
pub trait Environment {
    /// Short name of the implementation (`docker`, `podman`, ...), as recorded in records.
    fn kind(&self) -> &str;

    /// Creates and starts a container, without pulling (an absent image is
    /// [`crate::error::Error::ImageUnavailable`]). Returns the container ID.
    async fn create(&self, spec: &ContainerSpec) -> Result<String>;

    /// Pulls `image`, giving up after `timeout`.
    async fn pull(&self, image: &str, timeout: Duration) -> Result<()>;

    /// The container's state, or `None` when it does not exist.
    async fn inspect(&self, container: &str) -> Result<Option<ContainerStatus>>;

    /// Stops the container (SIGTERM, then SIGKILL after `grace`). A missing container is success.
    async fn stop(&self, container: &str, grace: Duration) -> Result<()>;

    /// Removes the container, forcibly. A missing container is success.
    async fn remove(&self, container: &str) -> Result<()>;

    /// Removes every container carrying the label `key=value`. Returns how many were removed.
    async fn remove_labelled(&self, key: &str, value: &str) -> Result<usize>;

    /// Lists all containers (running or not) carrying every `key=value` label, in one call.
    async fn list(&self, labels: &[(&str, &str)]) -> Result<Vec<ContainerSummary>>;

    /// The command that runs `spec` in `container`; the caller wires its standard streams.
    fn exec_command(&self, container: &str, spec: &ExecSpec) -> tokio::process::Command;

    /// Kills every process of the exec marked `marker` (the whole tree, daemonized ones included).
    async fn kill_exec(&self, container: &str, marker: &str) -> Result<()>;

    /// Turns the first bytes an exec wrote to stderr, with its exit status, into h9sandbox's own
    /// error when they show that the engine (not the command) failed: the container is gone or
    /// stopped, the daemon is unreachable, or the image has no shell. `None` otherwise.
    fn exec_failure(&self, container: &str, stderr_head: &[u8], status: i32)
        -> Option<ExecFailure>;
}

/// Why an exec never ran the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecFailure {
    /// The container does not exist any more, or is not running.
    ContainerGone(String),
    /// The engine's daemon cannot be reached.
    EngineUnavailable(String),
    /// The engine failed otherwise (e.g. no `/bin/sh` in the image).
    Other(String),
}
