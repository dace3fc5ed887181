//! Configuration: built-in defaults < TOML file < environment < command-line flags.
//!
//! Every key is declared once in [`KEYS`] (name, type, meaning) and once as a field of [`Config`]
//! (with its default in `Default`). Loading merges the layers into one TOML table, remembering for
//! each key where its value came from, so that a bad value is reported with its origin: the file
//! and key, the environment variable, or the flag.
//!
//! Files: `--config PATH` (or `$H9SANDBOX_CONFIG`) alone when given; otherwise
//! `$XDG_CONFIG_HOME/h9sandbox/config.toml` (`~/.config/...` when unset) if present. A project
//! file `./sandbox.toml` is layered over it only through [`Layers::load_with_project`], once the
//! front end decided to honour it (`up` and `mcp`, for content the user trusted: see
//! the core's `sandbox/trust.rs`).
//! Environment: `H9SANDBOX_<KEY>` (key upper-cased); the unprefixed variables of the design
//! h9sandbox started from, `SANDBOX_IMAGE`,
//! `SANDBOX_CPUS`, `SANDBOX_MEMORY`, `SANDBOX_BOOTSTRAP_CMD` and `SANDBOX_BOOTSTRAP_TIMEOUT_SECS`
//! are honoured when the `H9SANDBOX_` name is unset, and so is their `SANDBOX_ENABLED=false`,
//! which selects `engine = "local"` (see [`SANDBOX_ENABLED`]). Two sets of keys are closed to
//! some layers: [`HOST_SIDE_KEYS`] to the project file, [`USER_FILE_ONLY_KEYS`] to everything
//! but the user's own file or a `--config` file.

//!
//! The submodules, one concern each: `keys` (the key table and the sets of keys closed to some
//! layers), `file` (where the configuration file is and how it is read), `load` (merging the
//! layers), `project` (what a project's `sandbox.toml` may set), `value` (converting a value to
//! its key's type) and `validate` (checking the merged values).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::types::{Caps, EngineKind, Network, User, WorkdirMode};

mod file;
mod keys;
mod load;
mod project;
mod validate;
mod value;

pub use file::{find_config_file, CONFIG_MAX_BYTES};
pub use keys::{
    nearest_key, Key, Kind, HOST_SIDE_KEYS, KEYS, OTHER_ENV, UP_ONLY_KEYS, USER_FILE_ONLY_KEYS,
};
pub use project::ProjectText;
pub use validate::host_cpus;
pub use value::parse_size;

/// The switch of the design h9sandbox started from: `SANDBOX_ENABLED=false` (or `0`, `no`, `off`) selects
/// `engine = "local"` when `H9SANDBOX_ENGINE` is unset; `true` leaves the engine as configured.
pub const SANDBOX_ENABLED: &str = "SANDBOX_ENABLED";

/// What `up` does when the container engine cannot be reached (config `fallback`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fallback {
    /// Fail with the reason (exit 1).
    Fail,
    /// Create a local sandbox (no isolation) instead, with a loud warning.
    Local,
}

/// The effective configuration after all layers are merged and validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Image of new sandboxes (`docker run IMAGE`).
    pub image: String,
    /// CPU limit in cores (`--cpus`), > 0 and at most the host's CPU count.
    pub cpus: f64,
    /// Memory limit (`--memory`), a size such as `512m` or `2g`; at least `6m` (Docker's minimum).
    pub memory: String,
    /// Maximum number of processes in the container (`--pids-limit`), >= 1.
    pub pids_limit: u32,
    /// Size of the `/tmp` tmpfs (`--tmpfs /tmp:size=...`).
    pub tmp_size: String,
    /// Network mode: `bridge`, `none`, or `allowlist` (HTTP and HTTPS to the hosts of `allow`
    /// only, through a proxy sidecar).
    pub network: Network,
    /// Hosts an `allowlist` sandbox may reach: names (`deb.debian.org`) and `*.domain` patterns
    /// (every name below the domain). A project file may only narrow it (and `network`).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Capability profile of new containers: `minimal` or `standard` ([`Caps`]).
    pub caps: Caps,
    /// Seconds `up` waits for the container to report `State.Running`.
    pub start_timeout_secs: u64,
    /// Default timeout of `exec` in seconds; 0 means none.
    pub exec_timeout_secs: u64,
    /// Grace period of `down` in seconds between SIGTERM and SIGKILL (`docker stop -t`).
    pub stop_timeout_secs: u64,
    /// Seconds `up` waits for an image pull when the image is missing locally.
    pub pull_timeout_secs: u64,
    /// Which engine runs new sandboxes: `docker`, `podman`, or `local` (no container at all).
    pub engine: EngineKind,
    /// The engine's command-line client: a name on `PATH` or a path; unset is the engine's name
    /// (`docker`, `podman`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_bin: Option<String>,
    /// The Docker context new sandboxes go to when `DOCKER_CONTEXT` is unset (`docker context
    /// ls`); unset is the client's current context. `DOCKER_HOST` wins over both, as in the
    /// Docker CLI. Each sandbox keeps the daemon it was made on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_context: Option<String>,
    /// What `up` does when the engine cannot be reached: `fail`, or `local` (no isolation).
    pub fallback: Fallback,
    /// OCI runtime of new containers (`--runtime`, e.g. `runc`); unset is the engine's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// Open-files rlimit of new containers (`--ulimit nofile=N:N`); 0 = automatic: the engine's
    /// default with Docker, the host's hard limit with Podman.
    pub ulimit_nofile: u64,
    /// Processes rlimit of new containers (`--ulimit nproc=N:N`), counted per user ID across
    /// the host; 0 = automatic, as `ulimit_nofile`.
    pub ulimit_nproc: u64,
    /// Who the sandbox's commands run as, and who owns the files `write` creates: `owner` (the
    /// work dir's owner, the default), `root`, `host` (the invoking uid:gid) or `uid:gid`. See
    /// [`User`].
    pub user: String,
    /// Whether `up` reaps abandoned sandboxes of its state directory (as `h9sandbox reap`),
    /// alongside its own container start.
    pub reap_on_up: bool,
    /// Whether `up` starts an owner watcher for a sandbox tied to a process (`--owner-pid`,
    /// `run`, MCP sessions): a small detached process that removes the sandbox within seconds
    /// of the owner's exit (or when its lease runs out), as `reap` would, even when nothing else
    /// runs. `false` leaves it to the next `reap` or `up`.
    pub watch_owner: bool,
    /// Directory of the state file and its lock; `$XDG_STATE_HOME/h9sandbox` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<PathBuf>,
    /// Shell command `up` runs once the container is ready (`up --bootstrap`); unset or blank
    /// means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_cmd: Option<String>,
    /// Timeout of a bootstrap command in seconds (`bootstrap --timeout`); 0 means none.
    pub bootstrap_timeout_secs: u64,
    /// Whether a failing `up` bootstrap fails `up` and removes the sandbox (fail-closed) instead
    /// of only warning (fail-open, the default).
    pub bootstrap_required: bool,
    /// Bytes of each of stdout and stderr that the MCP server's `sandbox_exec` returns (the
    /// first and the last half; the middle is cut with a marker), and of file content that
    /// `sandbox_read` returns at once. At least [`MIN_MCP_OUTPUT`].
    pub mcp_max_output_bytes: u64,
    /// Whether `exec` and `bootstrap` go through the sandbox's in-container agent when the host
    /// can reach its socket (milliseconds per command); `false`: always through the engine's
    /// exec (`docker exec`), as where the socket cannot be reached.
    pub exec_agent: bool,
    /// Bytes of sandbox data one JSON answer may hold in memory: the most of a file that `read
    /// --format json` loads (a larger one is refused, pointing at plain `read`, which streams),
    /// and the most `sandbox_exec`'s `max_output_bytes` may ask for per stream (MCP). At least 1.
    pub json_max_bytes: u64,
    /// Directories `up` may use as work dirs (each, and what lies inside it) although they are
    /// in a system tree, a dot-directory of the home, an XDG base directory or another user's
    /// home (see `sandbox::workdir::WorkdirRule`); never h9sandbox's own directories, the
    /// engine's, the kernel's, or the home itself. Absolute paths. Only the user's own
    /// configuration file (or a `--config` file) may set it ([`USER_FILE_ONLY_KEYS`]).
    #[serde(default)]
    pub allowed_workdirs: Vec<PathBuf>,
    /// How a new sandbox's work dir reaches its container: `mount` (a bind mount) or `copy`
    /// (copied in through the remote channel, nothing of this machine mounted); unset: `mount`
    /// where the engine can mount this machine's directories, else `copy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir_mode: Option<WorkdirMode>,
    /// The most bytes of file content one copy moves into or out of a sandbox (a copied work
    /// dir at `up`, `h9sandbox cp`): a larger one is refused before it starts (a stream from
    /// the sandbox: cut off there).
    pub copy_max_bytes: u64,
    /// Where `up` on a swarm pushes the image with h9sandbox's agent, so that every node can
    /// pull it (`HOST[:PORT][/PATH]`); unset: the manager's own image, which only a one-node
    /// swarm can run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
    /// Seconds `up` on a swarm waits for the scheduler to place and start the sandbox's task.
    pub placement_timeout_secs: u64,
}

/// The smallest `mcp_max_output_bytes` (and `sandbox_exec` `max_output_bytes`).
pub const MIN_MCP_OUTPUT: u64 = 256;

/// Default `json_max_bytes`: 16 MiB. A JSON document escapes a byte into at most 6 (`\u0000`),
/// and base64 into 4/3, so this keeps a JSON read well under 200 MiB of host memory.
pub const DEFAULT_JSON_MAX_BYTES: u64 = 16 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            image: "ubuntu:22.04".into(),
            cpus: 1.0,
            memory: "512m".into(),
            pids_limit: 256,
            tmp_size: "256m".into(),
            network: Network::Bridge,
            allow: Vec::new(),
            caps: Caps::Standard,
            start_timeout_secs: 30,
            exec_timeout_secs: 600,
            stop_timeout_secs: 5,
            pull_timeout_secs: 300,
            engine: EngineKind::Docker,
            engine_bin: None,
            docker_context: None,
            fallback: Fallback::Fail,
            runtime: None,
            ulimit_nofile: 0,
            ulimit_nproc: 0,
            user: "owner".into(),
            reap_on_up: true,
            watch_owner: true,
            state_dir: None,
            bootstrap_cmd: None,
            bootstrap_timeout_secs: 600,
            bootstrap_required: false,
            mcp_max_output_bytes: 30_000,
            exec_agent: true,
            json_max_bytes: DEFAULT_JSON_MAX_BYTES,
            allowed_workdirs: Vec::new(),
            workdir_mode: None,
            copy_max_bytes: 4 << 30,
            registry: None,
            placement_timeout_secs: 60,
        }
    }
}

/// Where a configuration value came from; shown in error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The built-in default.
    Default,
    /// A key of this TOML file.
    File(PathBuf),
    /// This environment variable.
    Env(String),
    /// This command-line flag (e.g. `--cpus`).
    Flag(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("built-in default"),
            Origin::File(p) => write!(f, "config file {}", p.display()),
            Origin::Env(v) => write!(f, "environment variable {v}"),
            Origin::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

/// The merged layers before validation: one TOML table and the origin of every key.
#[derive(Debug, Clone)]
pub struct Layers {
    table: toml::Table,
    origins: BTreeMap<String, Origin>,
    /// The configuration file that was read, if any.
    pub file: Option<PathBuf>,
    /// For a command on existing sandboxes ([`Layers::load_for_existing`]): a bad value of a key
    /// only new sandboxes use ([`UP_ONLY_KEYS`]) is ignored with a warning instead of failing.
    lenient: bool,
    /// What was ignored that way, one line each, for the front end to print as warnings.
    pub warnings: Vec<String>,
}

/// `$VAR` if set and absolute, else `$HOME/<fallback>`, per the XDG Base Directory specification.
pub fn xdg_dir(var: &str, fallback: &str) -> Option<PathBuf> {
    match std::env::var_os(var).map(PathBuf::from) {
        Some(p) if p.is_absolute() => Some(p),
        _ => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(fallback)),
    }
}

impl Config {
    /// The bootstrap command `up` runs, if one is configured (blank counts as none).
    pub fn bootstrap(&self) -> Option<&str> {
        self.bootstrap_cmd
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
    }

    /// The memory limit in bytes (already validated).
    pub fn memory_bytes(&self) -> u64 {
        parse_size(&self.memory).unwrap_or(0)
    }

    /// The `user` key (already validated; `owner` if it somehow is not).
    pub fn user(&self) -> User {
        self.user.parse().unwrap_or(User::Owner)
    }

    /// The directory holding `state.json` and `state.lock`.
    pub fn state_dir(&self) -> Result<PathBuf, Error> {
        if let Some(d) = &self.state_dir {
            return Ok(d.clone());
        }
        xdg_dir("XDG_STATE_HOME", ".local/state")
            .map(|d| d.join("h9sandbox"))
            .ok_or_else(|| {
                Error::Usage(
                    "cannot find a state directory: neither XDG_STATE_HOME nor HOME is set; set state_dir".into(),
                )
            })
    }
}
