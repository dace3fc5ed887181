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
//! Environment: `H9SANDBOX_<KEY>` (key upper-cased); the seed documents' `SANDBOX_IMAGE`,
//! `SANDBOX_CPUS`, `SANDBOX_MEMORY`, `SANDBOX_BOOTSTRAP_CMD` and `SANDBOX_BOOTSTRAP_TIMEOUT_SECS`
//! are honoured when the `H9SANDBOX_` name is unset, and so is their `SANDBOX_ENABLED=false`,
//! which selects `engine = "local"` (see [`SEED_ENABLED`]). Two sets of keys are closed to
//! some layers: [`HOST_SIDE_KEYS`] to the project file, [`USER_FILE_ONLY_KEYS`] to everything
//! but the user's own file or a `--config` file.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::types::{Caps, EngineKind, Network, User, WorkdirMode};

/// The seed documents' switch: `SANDBOX_ENABLED=false` (or `0`, `no`, `off`) selects
/// `engine = "local"` when `H9SANDBOX_ENGINE` is unset; `true` leaves the engine as configured.
pub const SEED_ENABLED: &str = "SANDBOX_ENABLED";

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

/// The type of a configuration key, used to convert environment strings and to check files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Any string.
    Str,
    /// A non-negative integer.
    Int,
    /// A time in whole seconds: an integer, or a duration as `--ttl` takes it (`0.5`, `500ms`,
    /// `30s`, `1m`, `2h`; [`crate::types::parse_duration`]) rounded up to whole seconds.
    Secs,
    /// A number (an integer is accepted).
    Float,
    /// A filesystem path.
    Path,
    /// `true` or `false`.
    Bool,
    /// A list of absolute paths (TOML array of strings); files only, no environment variable.
    PathList,
    /// A list of host names or `*.domain` patterns (TOML array of strings; in the environment,
    /// separated by commas).
    HostList,
    /// One of these strings.
    OneOf(&'static [&'static str]),
}

/// One configuration key: its name (file key; env `H9SANDBOX_<NAME>`), type, seed fallback and
/// meaning.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// Key in the TOML file and, upper-cased, in `H9SANDBOX_<KEY>`.
    pub name: &'static str,
    /// Its type.
    pub kind: Kind,
    /// Environment variable of the seed documents honoured when `H9SANDBOX_<KEY>` is unset.
    pub seed_env: Option<&'static str>,
    /// What it means, for people: Markdown on one line (links relative to `docs/reference/`),
    /// naming the flag that sets it and what an unset value means. The configuration reference,
    /// `docs/reference/configuration.md`, is generated from [`KEYS`] (`tests/it/generated.rs`).
    pub doc: &'static str,
}

const fn key(name: &'static str, kind: Kind, doc: &'static str) -> Key {
    Key {
        name,
        kind,
        seed_env: None,
        doc,
    }
}

/// Every configuration key, in the order the reference lists them.
pub const KEYS: &[Key] = &[
    Key {
        name: "image",
        kind: Kind::Str,
        seed_env: Some("SANDBOX_IMAGE"),
        doc: "Image of new sandboxes (`up --image`); pulled once when missing.",
    },
    Key {
        name: "cpus",
        kind: Kind::Float,
        seed_env: Some("SANDBOX_CPUS"),
        doc: "CPU limit in cores, at least 0.01; more than the host's CPUs is lowered to them with a warning (`up --cpus`).",
    },
    Key {
        name: "memory",
        kind: Kind::Str,
        seed_env: Some("SANDBOX_MEMORY"),
        doc: "Memory limit, a size such as `512m` or `2g`, at least `6m`, Docker's minimum; a number without a unit counts bytes (`up --memory`).",
    },
    key(
        "pids_limit",
        Kind::Int,
        "Maximum number of processes in the container (`up --pids-limit`).",
    ),
    key(
        "tmp_size",
        Kind::Str,
        "Size of the `/tmp` tmpfs (mounted `nosuid,noexec,nodev`).",
    ),
    key(
        "network",
        Kind::OneOf(&["bridge", "none", "allowlist"]),
        "`bridge` (outbound access), `none` (loopback only), or `allowlist` (HTTP and HTTPS to the hosts of `allow` only, see [Isolation tiers](../security.md#egress-allowlist-network--allowlist)) (`up --network`).",
    ),
    key(
        "allow",
        Kind::HostList,
        "Hosts an allowlist sandbox may reach: names and `*.domain` (`up --allow`, repeatable; `H9SANDBOX_ALLOW` comma-separated); a project file may only narrow it.",
    ),
    key(
        "caps",
        Kind::OneOf(&["minimal", "standard"]),
        "Capabilities root in the sandbox gets back after `--cap-drop all`: `minimal` or `standard`, see [Capabilities](../security.md#capabilities) (`up --caps`); a project file may only narrow it.",
    ),
    key(
        "start_timeout_secs",
        Kind::Secs,
        "How long `up` waits for the container's `State.Running`.",
    ),
    key(
        "exec_timeout_secs",
        Kind::Secs,
        "Default `exec --timeout`; 0 = none (recorded in the sandbox by `up`).",
    ),
    key(
        "stop_timeout_secs",
        Kind::Secs,
        "`down`'s and `stop`'s grace period between SIGTERM and SIGKILL (`docker stop -t`; recorded by `up`).",
    ),
    key(
        "pull_timeout_secs",
        Kind::Secs,
        "How long `up` waits for the pull of a missing image.",
    ),
    key(
        "engine",
        Kind::OneOf(&["docker", "podman", "local", "swarm"]),
        "Which engine runs new sandboxes: `docker`, `podman`, `local` (no container, no isolation; see [Engines](../guide.md#engines-docker-podman-local)), or `swarm` (a service per sandbox on a Docker Swarm, through its manager; see [Docker Swarm](../swarm.md)).",
    ),
    key(
        "engine_bin",
        Kind::Str,
        "The engine's command-line client: a name on `PATH` or a path; unset: the engine's name (`docker`, `podman`).",
    ),
    key(
        "docker_context",
        Kind::Str,
        "The Docker context new sandboxes go to when `DOCKER_CONTEXT` is unset (`docker context ls`); unset: the client's current context. `DOCKER_HOST` wins over both. Each sandbox keeps the daemon it was made on (see [Remote sandboxes](../guide.md#remote-sandboxes)).",
    ),
    key(
        "fallback",
        Kind::OneOf(&["fail", "local"]),
        "When the engine cannot be reached, `up` fails (`fail`), or with `local` creates a local sandbox, warning loudly.",
    ),
    key(
        "runtime",
        Kind::Str,
        "OCI runtime of new containers (`up --runtime`, e.g. `runc`; `runsc`: gVisor, see [Isolation tiers](../security.md#gvisor-runtime--runsc)); unset: the engine's default. Recorded; a sub-sandbox's is its parent's.",
    ),
    key(
        "ulimit_nofile",
        Kind::Int,
        "Open-files rlimit of new containers (`--ulimit nofile=N:N`); 0 = automatic: Docker's default, with Podman the host's hard limit.",
    ),
    key(
        "ulimit_nproc",
        Kind::Int,
        "Processes rlimit of new containers, per user ID across the host (`--ulimit nproc=N:N`); 0 = automatic, as `ulimit_nofile`.",
    ),
    key(
        "user",
        Kind::Str,
        "Who the sandbox's commands run as: `owner` (the work dir's uid:gid), `root`, `host` (the invoking uid:gid) or `UID:GID`; also the owner of files `write` creates (`up --user`; see [Ownership](../guide.md#ownership)).",
    ),
    key(
        "reap_on_up",
        Kind::Bool,
        "`up` also reaps abandoned sandboxes of its state directory (as `h9sandbox reap`), alongside its own start.",
    ),
    key(
        "watch_owner",
        Kind::Bool,
        "`up` starts an [owner watcher](../guide.md#the-owner-watcher) for a sandbox with an owner (`--owner-pid`, `run`, MCP sessions), which removes it within seconds of the owner's exit or at the end of its lease; `false`: the next `reap` or `up` does.",
    ),
    key(
        "state_dir",
        Kind::Path,
        "Where `state.json`, `state.lock` and `trust.json` live; unset: `$XDG_STATE_HOME/h9sandbox` (`~/.local/state/h9sandbox`). Must be yours alone (see [State file](#state-file)).",
    ),
    Key {
        name: "bootstrap_cmd",
        kind: Kind::Str,
        seed_env: Some("SANDBOX_BOOTSTRAP_CMD"),
        doc: "Shell command `up` runs once the container runs (`up --bootstrap`; see [Bootstrap](../guide.md#bootstrap)); unset or blank: none.",
    },
    Key {
        name: "bootstrap_timeout_secs",
        kind: Kind::Secs,
        seed_env: Some("SANDBOX_BOOTSTRAP_TIMEOUT_SECS"),
        doc: "Timeout of a bootstrap; 0 = none (`up --bootstrap-timeout`, `bootstrap --timeout`).",
    },
    key(
        "bootstrap_required",
        Kind::Bool,
        "A failing `up` bootstrap fails `up` and removes the sandbox (fail-closed; `up --bootstrap-required`) instead of only warning.",
    ),
    key(
        "mcp_max_output_bytes",
        Kind::Int,
        "`h9sandbox mcp`: bytes of each stream `sandbox_exec` returns (the first and last halves), and the most bytes one `sandbox_read` returns; at least 256.",
    ),
    key(
        "exec_agent",
        Kind::Bool,
        "`exec` and `bootstrap` go through the sandbox's in-container agent when its socket can be reached; `false`: always the engine's exec (see [The in-container agent](../security.md#the-in-container-agent)).",
    ),
    key(
        "json_max_bytes",
        Kind::Int,
        "Most bytes of sandbox data one JSON answer holds in memory (16 MiB by default): of a file `read --format json` loads (a larger one is refused; plain `read` streams), and of each stream an MCP client's `sandbox_exec` `max_output_bytes` may ask for; at least 1.",
    ),
    key(
        "allowed_workdirs",
        Kind::PathList,
        "Directories `up` may use as work dirs (each, and what lies in it) although a system tree, a dot-directory of your home, an XDG base directory or another user's home holds them (see [Work directories](../security.md#work-directories)); never the ones always refused. Absolute paths. An MCP client has no way to set it.",
    ),
    key(
        "workdir_mode",
        Kind::OneOf(&["mount", "copy"]),
        "How the work dir reaches the sandbox: `mount` (a bind mount of the host directory at the same path) or `copy` (copied in at `up` as a tar stream through the agent; changes come back only through `h9sandbox cp`); `up --workdir-mode`. Default: `mount` where the engine can mount this machine's directories, else `copy`. A project file may not set it.",
    ),
    key(
        "copy_max_bytes",
        Kind::Int,
        "The most bytes `up` copies into a copy-mode sandbox (4 GiB by default); a larger work dir is refused, naming the limit.",
    ),
    key(
        "registry",
        Kind::Str,
        "Engine `swarm`: the registry (`HOST[:PORT][/PATH]`) `up` pushes the image with h9sandbox's agent to, so that every node can pull it; unset: only a one-node swarm works (see [Docker Swarm](../swarm.md)).",
    ),
    key(
        "placement_timeout_secs",
        Kind::Secs,
        "Engine `swarm`: how long `up` waits for the scheduler to place and start the sandbox's task (`up --placement-timeout`); then it fails naming what it asked for.",
    ),
];

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

/// A project file's content, read once (so that what was checked, hashed and trusted is what
/// is layered), and the path it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectText {
    /// Where it was read from (shown in messages).
    pub path: PathBuf,
    /// Its content.
    pub text: String,
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

/// Keys that only matter when a sandbox is made (`up`, `run`, `mcp`): what it gets (image,
/// limits, network, user, capabilities), how it is started and watched. A command on an existing
/// sandbox (`exec`, `down`, `ls`, `reap`, `renew`, the file commands, ...) uses what `up`
/// recorded instead, so a bad value of one of these (`H9SANDBOX_CPUS=abc`) never stops it: it is
/// ignored there with a warning ([`Layers::load_for_existing`]), as a project file is never read
/// there at all.
pub const UP_ONLY_KEYS: &[&str] = &[
    "image",
    "cpus",
    "memory",
    "pids_limit",
    "tmp_size",
    "network",
    "allow",
    "caps",
    "start_timeout_secs",
    "pull_timeout_secs",
    "runtime",
    "ulimit_nofile",
    "ulimit_nproc",
    "user",
    "reap_on_up",
    "watch_owner",
    "bootstrap_required",
    "mcp_max_output_bytes",
    "allowed_workdirs",
    "workdir_mode",
    "docker_context",
    "registry",
    "placement_timeout_secs",
];

/// The `H9SANDBOX_*` variables that are no configuration key: the configuration file, the
/// shells' completion requests (`cli::generate::COMPLETE_VAR`), and the marks the local engine
/// puts on its commands' processes (`engine::EXEC_MARKER_VAR`, `LOCAL_SANDBOX_VAR`,
/// `LOCAL_STATE_DIR_VAR`), which an h9sandbox run inside a local sandbox inherits.
pub const OTHER_ENV: &[&str] = &[
    "H9SANDBOX_CONFIG",
    "H9SANDBOX_CHANNEL_HOST",
    "H9SANDBOX_COMPLETE",
    "H9SANDBOX_EXEC_ID",
    "H9SANDBOX_SANDBOX",
    "H9SANDBOX_SANDBOX_STATE_DIR",
];

/// Keys that act on the host (what runs there, where records live), which the project file
/// `./sandbox.toml` may not set, even once trusted: it usually sits in a work directory, which
/// code inside a sandbox can write, and it travels with a repository; these keys belong to the
/// person who runs h9sandbox.
pub const HOST_SIDE_KEYS: &[&str] = &[
    "engine_bin",
    "docker_context",
    "state_dir",
    "engine",
    "fallback",
    "runtime",
    "workdir_mode",
    "registry",
];

/// Keys that widen what a sandbox may reach on the host, which only the user's own
/// configuration file (or a `--config` / `$H9SANDBOX_CONFIG` file) may set: not a project's
/// `./sandbox.toml` (a sandbox may write it), not the environment (which every program a
/// session starts, a Makefile, a CI step, passes on and may set), and not a flag or an MCP client.
pub const USER_FILE_ONLY_KEYS: &[&str] = &["allowed_workdirs"];

/// Whether setting `caps` to `new` over `old` (the layers below) gives more capabilities.
fn widens_caps(old: Option<&toml::Value>, new: &toml::Value) -> bool {
    let rank = |v: Option<&toml::Value>| match v.and_then(|v| v.as_str()) {
        Some("minimal") => 0,
        _ => 1,
    };
    rank(Some(new)) > rank(old)
}

/// Where the configuration file is looked for (see the module documentation); `None` when
/// there is none. The project file is not among them: see [`Layers::load_with_project`].
pub fn find_config_file(explicit: Option<&Path>) -> Result<Option<PathBuf>, Error> {
    Ok(config_files(explicit)?.pop())
}

/// The configuration file to read: `explicit` when given (it must exist), else the user's
/// `$XDG_CONFIG_HOME/h9sandbox/config.toml` when it exists.
fn config_files(explicit: Option<&Path>) -> Result<Vec<PathBuf>, Error> {
    if let Some(p) = explicit {
        if !p.is_file() {
            return Err(Error::Config {
                origin: format!("config file {}", p.display()),
                message: "does not exist or is not a file; fix --config / H9SANDBOX_CONFIG".into(),
            });
        }
        return Ok(vec![p.to_path_buf()]);
    }
    let user = xdg_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("h9sandbox/config.toml"));
    Ok(user.filter(|p| p.is_file()).into_iter().collect())
}

/// Fails (with the reason and the fix) when the user's configuration file `path`, whose
/// metadata is `md`, belongs to someone other than the invoking user (effective uid) or root, or
/// is writable by group or others: whoever can write it chooses the programs h9sandbox runs.
fn check_user_file(path: &Path, md: &std::fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    if md.uid() != me && md.uid() != 0 {
        return Err(format!(
            "refusing it: it belongs to uid {}, not to you (uid {me}), and whoever can write it chooses the programs h9sandbox runs (engine_bin); `chown {me} {}`, or pass it explicitly with --config",
            md.uid(),
            path.display()
        ));
    }
    let mode = md.mode() & 0o7777;
    if let Some(who) = crate::types::also_writable_by(mode) {
        let fix = match who {
            "its group" => "g-w",
            "others" => "o-w",
            _ => "go-w",
        };
        return Err(format!(
            "refusing it: it is writable by {who} (mode {mode:04o}), and whoever can write it chooses the programs h9sandbox runs (engine_bin); `chmod {fix} {}`",
            path.display()
        ));
    }
    Ok(())
}

/// The largest configuration file read (1 MiB; the example documenting every key is 6 KiB). A
/// project file lies in a work dir, where a sandbox can make a file of any apparent size.
pub const CONFIG_MAX_BYTES: u64 = 1 << 20;

/// The text of the configuration file `path`, and its metadata (of the file read, not of the
/// path again): a regular file (opened without blocking, so a FIFO planted there cannot hang us)
/// of at most [`CONFIG_MAX_BYTES`], in UTF-8.
fn read_config_file(path: &Path) -> std::io::Result<(String, std::fs::Metadata)> {
    use std::io::{Error as IoError, ErrorKind, Read};
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    let md = file.metadata()?;
    if !md.is_file() {
        return Err(IoError::new(
            ErrorKind::InvalidInput,
            "it is not a regular file",
        ));
    }
    let mut text = String::new();
    file.take(CONFIG_MAX_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > CONFIG_MAX_BYTES {
        return Err(IoError::new(
            ErrorKind::InvalidData,
            format!(
                "it is larger than {CONFIG_MAX_BYTES} bytes, more than a configuration file can be"
            ),
        ));
    }
    Ok((text, md))
}

/// `$VAR` if set and absolute, else `$HOME/<fallback>`, per the XDG Base Directory specification.
pub fn xdg_dir(var: &str, fallback: &str) -> Option<PathBuf> {
    match std::env::var_os(var).map(PathBuf::from) {
        Some(p) if p.is_absolute() => Some(p),
        _ => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(fallback)),
    }
}

impl Layers {
    /// Built-in defaults, then the file (if any), then the environment. Never the project
    /// file `./sandbox.toml` (see [`Layers::load_with_project`]).
    pub fn load(explicit_file: Option<&Path>) -> Result<Layers, Error> {
        Self::load_with_env(explicit_file, |k| std::env::var(k).ok())
    }

    /// As [`Layers::load`], for a command on existing sandboxes: a bad value of a key only `up`
    /// uses ([`UP_ONLY_KEYS`]), in the file or the environment, is left at its default and
    /// reported in [`Layers::warnings`] instead of failing the command.
    pub fn load_for_existing(explicit_file: Option<&Path>) -> Result<Layers, Error> {
        Self::load_for_existing_with_env(explicit_file, |k| std::env::var(k).ok())
    }

    /// As [`Layers::load_for_existing`], reading the environment through `env` (for tests).
    pub fn load_for_existing_with_env(
        explicit_file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Layers, Error> {
        let mut layers = Self::defaults();
        layers.lenient = true;
        layers.load_into(explicit_file, env, None)?;
        layers.settle()?;
        Ok(layers)
    }

    /// As [`Layers::load`], with the project file `project` (a `sandbox.toml` whose content
    /// the caller read once, and decided to honour) layered between the user's file and the
    /// environment. The project file may not set [`HOST_SIDE_KEYS`]. Errors: as
    /// [`Layers::load`], and the project file's own (bad TOML, unknown or forbidden key, a
    /// value of the wrong type), naming it.
    pub fn load_with_project(
        explicit_file: Option<&Path>,
        project: &ProjectText,
    ) -> Result<Layers, Error> {
        Self::load_opts(explicit_file, |k| std::env::var(k).ok(), Some(project))
    }

    /// As [`Layers::load`], reading the environment through `env` (for tests).
    pub fn load_with_env(
        explicit_file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Layers, Error> {
        Self::load_opts(explicit_file, env, None)
    }

    /// Checks `project` as [`Layers::load_with_project`] would layer it, over the built-in
    /// defaults alone (neither the user's file nor the environment), and returns the keys it
    /// sets, in file order. Errors: what would make `up` refuse it.
    pub fn check_project(project: &ProjectText) -> Result<toml::Table, Error> {
        let mut layers = Self::defaults();
        let table = layers.merge_text(&project.path, &project.text, true)?;
        layers.resolve()?;
        Ok(table)
    }

    /// The built-in defaults alone (no file, no environment), for a process that is handed its
    /// few settings explicitly (the owner watcher, `sandbox::watch`).
    pub fn defaults() -> Layers {
        let table = toml::Table::try_from(Config::default()).expect("defaults serialize");
        let origins = table.keys().map(|k| (k.clone(), Origin::Default)).collect();
        Layers {
            table,
            origins,
            file: None,
            lenient: false,
            warnings: Vec::new(),
        }
    }

    fn load_opts(
        explicit_file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
        project: Option<&ProjectText>,
    ) -> Result<Layers, Error> {
        let mut layers = Self::defaults();
        layers.load_into(explicit_file, env, project)?;
        Ok(layers)
    }

    /// Whether these layers are for a command on existing sandboxes
    /// ([`Layers::load_for_existing`]), which makes none.
    pub fn for_existing(&self) -> bool {
        self.lenient
    }

    /// Whether a bad value of `key` is to be ignored (with a warning) rather than fail.
    fn tolerates(&self, key: &str) -> bool {
        self.lenient && UP_ONLY_KEYS.contains(&key)
    }

    /// Records that the bad value `e` of `key` is ignored (see [`Layers::tolerates`]).
    fn ignore(&mut self, key: &str, e: Error) {
        let (origin, message) = match e {
            Error::Config { origin, message } => (origin, message),
            other => (key.to_string(), other.to_string()),
        };
        self.warnings.push(format!(
            "ignoring {origin} ({key}), which only the commands that make sandboxes use (`up`, `run`, `mcp`: they refuse it): {message}"
        ));
    }

    fn load_into(
        &mut self,
        explicit_file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
        project: Option<&ProjectText>,
    ) -> Result<(), Error> {
        let layers = self;
        for path in config_files(explicit_file)? {
            layers.merge_file(&path, explicit_file.is_some())?;
            layers.file = Some(path);
        }
        if let Some(p) = project {
            layers.merge_text(&p.path, &p.text, true)?;
            layers.file = Some(p.path.clone());
        }
        for key in KEYS {
            let var = format!("H9SANDBOX_{}", key.name.to_ascii_uppercase());
            if USER_FILE_ONLY_KEYS.contains(&key.name) {
                if env(&var).is_some_and(|v| !v.is_empty()) {
                    let e = Error::Config {
                        origin: Origin::Env(var).to_string(),
                        message: format!(
                            "{} cannot come from the environment: it widens which host directories a sandbox may mount; set it in your own configuration file ($XDG_CONFIG_HOME/h9sandbox/config.toml) or a --config file",
                            key.name
                        ),
                    };
                    if !layers.tolerates(key.name) {
                        return Err(e);
                    }
                    layers.ignore(key.name, e);
                }
                continue;
            }
            let (var, value) = match env(&var).filter(|v| !v.is_empty()) {
                Some(v) => (var, v),
                None => match key
                    .seed_env
                    .and_then(|s| env(s).filter(|v| !v.is_empty()).map(|v| (s.to_string(), v)))
                {
                    Some(pair) => pair,
                    None => continue,
                },
            };
            match layers.set_str(key.name, &value, Origin::Env(var)) {
                Err(e) if layers.tolerates(key.name) => layers.ignore(key.name, e),
                r => r?,
            }
        }
        if env("H9SANDBOX_ENGINE").is_none_or(|v| v.is_empty()) {
            if let Some(v) = env(SEED_ENABLED).filter(|v| !v.is_empty()) {
                let origin = Origin::Env(SEED_ENABLED.into());
                match v.trim().to_ascii_lowercase().as_str() {
                    "false" | "0" | "no" | "off" => layers.set_str("engine", "local", origin)?,
                    "true" | "1" | "yes" | "on" => {}
                    _ => {
                        return Err(Error::Config {
                            origin: origin.to_string(),
                            message: format!(
                                "'{v}' is not true or false (false selects engine = \"local\")"
                            ),
                        })
                    }
                }
            }
        }
        Ok(())
    }

    /// Names of `H9SANDBOX_*` environment variables that are neither a configuration key nor
    /// one of [`OTHER_ENV`] (likely typos), from `vars`.
    pub fn unknown_env_vars(vars: impl Iterator<Item = String>) -> Vec<String> {
        vars.filter(|v| {
            !OTHER_ENV.contains(&v.as_str())
                && v.strip_prefix("H9SANDBOX_")
                    .is_some_and(|k| !KEYS.iter().any(|key| key.name.eq_ignore_ascii_case(k)))
        })
        .collect()
    }

    /// Merges the user's (or, `explicit`, a given) configuration file `path`. The user's file
    /// decides what runs on the host (`engine_bin`), so like ssh's `~/.ssh/config` it must belong
    /// to the invoking user or root and be writable by nobody else ([`check_user_file`]); a file
    /// given with `--config` is the caller's explicit choice and is read as it is.
    fn merge_file(&mut self, path: &Path, explicit: bool) -> Result<(), Error> {
        let fail = |message: String| Error::Config {
            origin: Origin::File(path.to_path_buf()).to_string(),
            message,
        };
        let (text, md) =
            read_config_file(path).map_err(|e| fail(format!("cannot be read: {e}")))?;
        if !explicit {
            check_user_file(path, &md).map_err(fail)?;
        }
        self.merge_text(path, &text, false).map(|_| ())
    }

    /// Merges `text`, the content of the file `path` (a project file when `project`: then
    /// [`HOST_SIDE_KEYS`] are refused); returns the keys it set.
    fn merge_text(&mut self, path: &Path, text: &str, project: bool) -> Result<toml::Table, Error> {
        let origin = Origin::File(path.to_path_buf());
        let parsed: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
            let hint = line
                .and_then(|n| text.lines().nth(n - 1))
                .and_then(unquoted_value_hint)
                .map(|h| format!("; {h}"))
                .unwrap_or_default();
            Error::Config {
                origin: origin.to_string(),
                message: format!(
                    "is not valid TOML{}: {}{hint}",
                    line.map(|n| format!(" (line {n})")).unwrap_or_default(),
                    e.message().trim().replace('\n', "; ")
                ),
            }
        })?;
        let mut set = toml::Table::new();
        for (name, value) in parsed {
            let key = lookup(&name).ok_or_else(|| Error::Config {
                origin: origin.to_string(),
                message: match nearest_key(&name) {
                    Some(k) => format!(
                        "unknown key `{name}`; did you mean `{k}`? (known keys: {})",
                        key_names()
                    ),
                    None => format!("unknown key `{name}` (known keys: {})", key_names()),
                },
            })?;
            if project && USER_FILE_ONLY_KEYS.contains(&name.as_str()) {
                return Err(Error::Config {
                    origin: format!("{origin}, key `{name}`"),
                    message: "not allowed in a project's sandbox.toml, which a sandbox may be able to write: it widens which host directories a sandbox may mount; set it in your own configuration file ($XDG_CONFIG_HOME/h9sandbox/config.toml) or a --config file".into(),
                });
            }
            if project {
                self.check_narrows(&origin, &name, &value)?;
            }
            if project && HOST_SIDE_KEYS.contains(&name.as_str()) {
                return Err(Error::Config {
                    origin: format!("{origin}, key `{name}`"),
                    message: format!(
                        "not allowed in a project's sandbox.toml, even a trusted one: it acts on the host; set it in $XDG_CONFIG_HOME/h9sandbox/config.toml, H9SANDBOX_{} or with --config",
                        name.to_ascii_uppercase()
                    ),
                });
            }
            let value = match coerce(key, value) {
                Ok(v) => v,
                Err(m) => {
                    let e = Error::Config {
                        origin: format!("{origin}, key `{name}`"),
                        message: m,
                    };
                    if project || !self.tolerates(&name) {
                        return Err(e);
                    }
                    self.ignore(&name, e);
                    continue;
                }
            };
            if project && name == "caps" && widens_caps(self.table.get("caps"), &value) {
                return Err(Error::Config {
                    origin: format!("{origin}, key `{name}`"),
                    message: "a project's sandbox.toml may only narrow the capability profile (caps = \"minimal\"), never widen it; set caps = \"standard\" in your configuration file, H9SANDBOX_CAPS or with up --caps".into(),
                });
            }
            self.table.insert(name.clone(), value.clone());
            self.origins.insert(name.clone(), origin.clone());
            set.insert(name, value);
        }
        Ok(set)
    }

    /// Sets `name` from a string (environment or flag), converted to the key's type.
    pub fn set_str(&mut self, name: &str, value: &str, origin: Origin) -> Result<(), Error> {
        let key = lookup(name).ok_or_else(|| Error::Config {
            origin: origin.to_string(),
            message: format!("unknown key `{name}`"),
        })?;
        if key.kind == Kind::PathList || USER_FILE_ONLY_KEYS.contains(&name) {
            return Err(Error::Config {
                origin: origin.to_string(),
                message: format!(
                    "{name} can only be set in a configuration file (your own, or a --config file)"
                ),
            });
        }
        let v = match key.kind {
            Kind::Str | Kind::Path | Kind::OneOf(_) => toml::Value::String(value.to_string()),
            Kind::HostList => toml::Value::Array(
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|h| !h.is_empty())
                    .map(|h| toml::Value::String(h.to_string()))
                    .collect(),
            ),
            _ => {
                let parsed = value.trim().parse::<toml::Value>().ok().or_else(|| {
                    // A bare scalar is not a TOML document; parse it as a value.
                    toml::from_str::<toml::Table>(&format!("v = {value}"))
                        .ok()
                        .and_then(|mut t| t.remove("v"))
                });
                parsed.unwrap_or_else(|| toml::Value::String(value.to_string()))
            }
        };
        let v = coerce(key, v).map_err(|m| Error::Config {
            origin: origin.to_string(),
            message: m,
        })?;
        self.table.insert(name.to_string(), v);
        self.origins.insert(name.to_string(), origin);
        Ok(())
    }

    /// A project file may only narrow the network: `network` no wider than the value layered
    /// so far (`none` < `allowlist` < `bridge`), and, under a user's `allowlist`, `allow` only
    /// of hosts the user's list already allows.
    fn check_narrows(&self, origin: &Origin, name: &str, value: &toml::Value) -> Result<(), Error> {
        let reach = |v: Option<&toml::Value>| match v.and_then(|v| v.as_str()) {
            Some("none") => 0,
            Some("allowlist") => 1,
            _ => 2,
        };
        let fail = |message: String| Error::Config {
            origin: format!("{origin}, key `{name}`"),
            message,
        };
        let have = reach(self.table.get("network"));
        if name == "network" && reach(Some(value)) > have {
            return Err(fail(format!(
                "a project's sandbox.toml may only narrow the network, not widen it from {}; change network in your own configuration",
                self.table.get("network").and_then(|v| v.as_str()).unwrap_or("bridge")
            )));
        }
        if name == "allow" && have == 1 {
            let user: Vec<String> = self
                .table
                .get("allow")
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            for h in value
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str())
            {
                if !crate::agent::proxy::covers(&user, h) {
                    return Err(fail(format!(
                        "'{h}' is not in your own allow list; a project's sandbox.toml may only narrow it"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Where the current value of `name` came from.
    pub fn origin(&self, name: &str) -> Origin {
        self.origins.get(name).cloned().unwrap_or(Origin::Default)
    }

    /// Converts the merged table into a validated [`Config`].
    pub fn resolve(&self) -> Result<Config, Error> {
        let cfg = self.unvalidated()?;
        cfg.validate(|k| self.origin(k))?;
        Ok(cfg)
    }

    /// For [`Layers::load_for_existing`]: puts every key only `up` uses whose value fails
    /// validation back to its default, with a warning. Errors: the table cannot be read as a
    /// configuration at all.
    fn settle(&mut self) -> Result<(), Error> {
        let defaults = Self::defaults();
        for _ in 0..KEYS.len() {
            let cfg = self.unvalidated()?;
            let Some((key, _)) = cfg.first_problem() else {
                return Ok(());
            };
            if !self.tolerates(key) {
                return Ok(()); // `resolve` reports it
            }
            if let Err(e) = cfg.validate(|k| self.origin(k)) {
                self.ignore(key, e);
            }
            match defaults.table.get(key) {
                Some(v) => self.table.insert(key.to_string(), v.clone()),
                None => self.table.remove(key),
            };
            self.origins.insert(key.to_string(), Origin::Default);
        }
        Ok(())
    }

    /// The merged table as a [`Config`], not yet validated.
    fn unvalidated(&self) -> Result<Config, Error> {
        let cfg: Config = self
            .table
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| {
                let msg = e.message().to_string();
                // Attribute the error to the key serde names, when it does.
                let origin = KEYS
                    .iter()
                    .find(|k| msg.contains(k.name))
                    .map(|k| self.origin(k.name).to_string())
                    .unwrap_or_else(|| "configuration".into());
                Error::Config {
                    origin,
                    message: msg,
                }
            })?;
        Ok(cfg)
    }
}

/// For a TOML line that failed to parse, `key = value` with a bare word as the value (`memory =
/// 1g`, `image = ubuntu:22.04`, `network = none`: TOML strings need quotes), how to write it.
fn unquoted_value_hint(line: &str) -> Option<String> {
    let (key, value) = line.split_once('=')?;
    let key = key.trim();
    let value = value.split(" #").next().unwrap_or(value).trim();
    let bare_key = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let bare_value = !value.is_empty()
        && !value.starts_with(['"', '\'', '[', '{'])
        && !value.contains(['"', '\'']);
    (bare_key && bare_value)
        .then(|| format!("a text value needs quotes in TOML: write {key} = \"{value}\""))
}

fn lookup(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

fn key_names() -> String {
    KEYS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

/// The configuration key closest to `name` (at most two edits away), for a typo's message.
pub fn nearest_key(name: &str) -> Option<&'static str> {
    KEYS.iter()
        .map(|k| (edit_distance(name, k.name), k.name))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance between `a` and `b` (bytes; the names are ASCII).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

fn coerce(key: &Key, v: toml::Value) -> Result<toml::Value, String> {
    use toml::Value as V;
    let got = v.type_str();
    match (key.kind, v) {
        (Kind::Str | Kind::Path, V::String(s)) => Ok(V::String(s)),
        (Kind::OneOf(allowed), V::String(s)) if allowed.contains(&s.as_str()) => Ok(V::String(s)),
        (Kind::OneOf(allowed), V::String(s)) => {
            Err(format!("'{s}' is not one of: {}", allowed.join(", ")))
        }
        (Kind::Int, V::Integer(i)) if i >= 0 => Ok(V::Integer(i)),
        (Kind::Int, V::Integer(i)) => Err(format!("{i} is negative; expected a whole number >= 0")),
        (Kind::Float, V::Float(f)) => Ok(V::Float(f)),
        (Kind::Float, V::Integer(i)) => Ok(V::Float(i as f64)),
        (Kind::Bool, V::Boolean(b)) => Ok(V::Boolean(b)),
        (Kind::PathList, V::Array(items)) => {
            for item in &items {
                match item.as_str() {
                    Some(p) if Path::new(p).is_absolute() => {}
                    Some(p) => {
                        return Err(format!(
                            "'{p}' is not an absolute path; give absolute paths, e.g. [\"/srv/www/site\"]"
                        ))
                    }
                    None => return Err(format!("expected paths (strings), found {}", item.type_str())),
                }
            }
            Ok(V::Array(items))
        }
        (Kind::HostList, V::Array(items)) => {
            for item in &items {
                match item.as_str() {
                    Some(h) => crate::agent::proxy::check_pattern(h)?,
                    None => {
                        return Err(format!(
                            "expected host names (strings), found {}",
                            item.type_str()
                        ))
                    }
                }
            }
            Ok(V::Array(items))
        }
        (Kind::Secs, V::Integer(i)) if i >= 0 => Ok(V::Integer(i)),
        (Kind::Secs, V::Integer(i)) => Err(format!("{i} is negative; expected seconds >= 0")),
        (Kind::Secs, V::Float(f)) => secs_value(&f.to_string()),
        (Kind::Secs, V::String(s)) => secs_value(&s),
        (Kind::Int, V::String(s)) if s.trim().parse::<u64>().is_ok() => {
            Err(unquote_hint(key, &s, "a whole number"))
        }
        (Kind::Int, V::String(s)) => Err(format!("'{s}' is not a whole number")),
        (Kind::Float, V::String(s)) if s.trim().parse::<f64>().is_ok() => {
            Err(unquote_hint(key, &s, "a number"))
        }
        (Kind::Float, V::String(s)) => Err(format!("'{s}' is not a number")),
        (Kind::Bool, V::String(s)) if matches!(s.trim(), "true" | "false") => {
            Err(unquote_hint(key, &s, "true or false"))
        }
        (Kind::Bool, V::String(s)) => Err(format!("'{s}' is not true or false")),
        (
            Kind::Str | Kind::Path | Kind::OneOf(_),
            v @ (V::Integer(_) | V::Float(_) | V::Boolean(_)),
        ) => Err(format!(
            "expected {}, found {got}; write it in quotes: {} = \"{v}\"",
            kind_name(key.kind),
            key.name
        )),
        (kind, _) => Err(format!("expected {}, found {got}", kind_name(kind))),
    }
}

/// A `*_secs` key's value from a duration text, in whole seconds (rounded up).
fn secs_value(text: &str) -> Result<toml::Value, String> {
    let d = crate::types::parse_duration(text)?;
    i64::try_from(crate::types::ceil_secs(d))
        .map(toml::Value::Integer)
        .map_err(|_| format!("'{text}' is too long a time"))
}

/// The error for a value of `key` written as a TOML string (`cpus = "2"`) that would be right
/// without the quotes.
fn unquote_hint(key: &Key, s: &str, what: &str) -> String {
    format!(
        "\"{s}\" is a string, not {what}; write it without quotes: {} = {}",
        key.name,
        s.trim()
    )
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Str => "a string",
        Kind::Int => "a whole number",
        Kind::Secs => "seconds or a duration (30, 0.5, 500ms, 1m)",
        Kind::Float => "a number",
        Kind::Path => "a path (string)",
        Kind::Bool => "true or false",
        Kind::PathList => "a list of absolute paths",
        Kind::HostList => "a list of host names",
        Kind::OneOf(_) => "a string",
    }
}

/// Parses a size in Docker's notation (`512m`, `2g`, `1.5G`, `1024`, `64k`, `1gb`) into bytes.
/// Units are binary (k = 1024), as in Docker's `RAMInBytes`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let lower = lower.strip_suffix('b').unwrap_or(&lower);
    let lower = lower.strip_suffix('i').unwrap_or(lower);
    let (num, mult) = match lower.chars().last() {
        Some('k') => (&lower[..lower.len() - 1], 1u64 << 10),
        Some('m') => (&lower[..lower.len() - 1], 1 << 20),
        Some('g') => (&lower[..lower.len() - 1], 1 << 30),
        Some('t') => (&lower[..lower.len() - 1], 1 << 40),
        _ => (lower, 1),
    };
    let num = num.trim();
    let bad = || format!("'{s}' is not a size like 512m or 2g");
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let n: f64 = num.parse().map_err(|_| bad())?;
    let bytes = n * mult as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// The number of CPUs the engine will accept for `--cpus` on this host.
pub fn host_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

impl Config {
    /// Checks every value; `origin` names where a key's value came from for the error message.
    pub fn validate(&self, origin: impl Fn(&str) -> Origin) -> Result<(), Error> {
        match self.first_problem() {
            None => Ok(()),
            Some((key, message)) => Err(Error::Config {
                origin: match origin(key) {
                    Origin::File(p) => format!("config file {}, key `{key}`", p.display()),
                    o => o.to_string(),
                },
                message,
            }),
        }
    }

    /// The first key whose value is invalid, and why; `None` when every value is fine.
    fn first_problem(&self) -> Option<(&'static str, String)> {
        let fail = |key: &'static str, message: String| Some((key, message));
        if self.image.trim().is_empty() {
            return fail("image", "the image name is empty".into());
        }
        if self.image.starts_with('-')
            || self
                .image
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return fail(
                "image",
                format!(
                    "'{}' is not an image reference (it starts with '-' or holds spaces); give a name like ubuntu:22.04",
                    self.image
                ),
            );
        }
        // Above the host's CPU count is lowered by `fit_to_host` (a committed file travels
        // between machines), not refused.
        if !self.cpus.is_finite() || self.cpus < 0.01 {
            return fail(
                "cpus",
                format!(
                    "{} is out of range: give a number of cores of at least 0.01 (more than this host's {} are lowered to {})",
                    self.cpus,
                    host_cpus(),
                    host_cpus()
                ),
            );
        }
        let mem = match parse_size(&self.memory) {
            Ok(m) => m,
            Err(m) => return fail("memory", m),
        };
        if mem < 6 << 20 {
            let unitless = self
                .memory
                .trim()
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.');
            return fail(
                "memory",
                if unitless {
                    format!(
                        "'{m}' is {m} bytes (a size without a unit counts bytes), below Docker's minimum of 6m; did you mean {m}m?",
                        m = self.memory.trim()
                    )
                } else {
                    format!("'{}' is below Docker's minimum of 6m", self.memory)
                },
            );
        }
        if let Err(m) = parse_size(&self.tmp_size) {
            return fail("tmp_size", m);
        }
        if self.pids_limit == 0 {
            return fail(
                "pids_limit",
                "0 would leave processes unlimited; give a limit >= 1".into(),
            );
        }
        if self.start_timeout_secs == 0 {
            return fail("start_timeout_secs", "must be at least 1 second".into());
        }
        if self
            .engine_bin
            .as_deref()
            .is_some_and(|b| b.trim().is_empty())
        {
            return fail("engine_bin", "the engine binary is empty".into());
        }
        if let Some(c) = &self.docker_context {
            if c.is_empty()
                || c.starts_with('-')
                || c.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return fail(
                    "docker_context",
                    format!("'{c}' is not a context name (see `docker context ls`)"),
                );
            }
        }
        if let Some(r) = &self.runtime {
            if r.is_empty() || r.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return fail(
                    "runtime",
                    format!("'{r}' is not a runtime name or path (e.g. runc)"),
                );
            }
        }
        if let Err(m) = self.user.parse::<User>() {
            return fail("user", m);
        }
        if self.mcp_max_output_bytes < MIN_MCP_OUTPUT {
            return fail(
                "mcp_max_output_bytes",
                format!(
                    "{} is too small to be useful; give at least {MIN_MCP_OUTPUT}",
                    self.mcp_max_output_bytes
                ),
            );
        }
        if self.json_max_bytes == 0 {
            return fail(
                "json_max_bytes",
                "0 would refuse every JSON read; give a number of bytes >= 1".into(),
            );
        }
        if let Some(d) = &self.state_dir {
            if !d.is_absolute() {
                return fail(
                    "state_dir",
                    format!(
                        "'{}' is not an absolute path; give one, so that every caller finds the same state",
                        d.display()
                    ),
                );
            }
        }
        None
    }

    /// Lowers `cpus` to this host's CPU count when it asks for more (the engine would refuse
    /// it, and a committed configuration file must work on smaller machines too); returns the
    /// warning to show, naming `origin` (where the value came from).
    pub fn fit_to_host(&mut self, origin: &Origin) -> Option<String> {
        let ncpu = host_cpus() as f64;
        if self.cpus <= ncpu {
            return None;
        }
        let asked = self.cpus;
        self.cpus = ncpu;
        Some(format!(
            "cpus = {asked} ({origin}) is more than this host's {ncpu} CPUs; using {ncpu}"
        ))
    }

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
                Error::Invalid(
                    "cannot find a state directory: neither XDG_STATE_HOME nor HOME is set; set state_dir".into(),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Ids;
    use std::collections::HashMap;

    fn load(file: Option<&str>, env: &[(&str, &str)]) -> Result<Config, Error> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        if let Some(text) = file {
            std::fs::write(&path, text).unwrap();
        }
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let layers = Layers::load_with_env(file.map(|_| path.as_path()), |k| env.get(k).cloned())?;
        layers.resolve()
    }

    #[test]
    fn commands_on_existing_sandboxes_ignore_bad_values_only_up_uses() {
        let env: HashMap<String, String> = [
            ("H9SANDBOX_CPUS", "abc"),
            ("H9SANDBOX_MEMORY", "1"),
            ("H9SANDBOX_ALLOWED_WORKDIRS", "/srv"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let get = |k: &str| env.get(k).cloned();
        // `up` refuses them...
        assert!(Layers::load_with_env(None, get).is_err());
        // ...the others warn, once each, and use the defaults.
        let layers = Layers::load_for_existing_with_env(None, get).unwrap();
        let cfg = layers.resolve().unwrap();
        assert_eq!((cfg.cpus, cfg.memory.as_str()), (1.0, "512m"));
        assert_eq!(layers.warnings.len(), 3, "{:?}", layers.warnings);
        assert!(layers.warnings[0].starts_with(
            "ignoring environment variable H9SANDBOX_CPUS (cpus), which only the commands that make sandboxes use"
        ), "{:?}", layers.warnings);
        // A key commands on a sandbox use still fails them.
        let bad = |k: &str| (k == "H9SANDBOX_EXEC_TIMEOUT_SECS").then(|| "soon".to_string());
        assert!(Layers::load_for_existing_with_env(None, bad).is_err());
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        assert_eq!(load(None, &[]).unwrap(), Config::default());
    }

    #[test]
    fn precedence_file_then_env() {
        let cfg = load(
            Some("image = \"a:1\"\nmemory = \"1g\"\ncpus = 1\n"),
            &[("H9SANDBOX_MEMORY", "2g"), ("SANDBOX_IMAGE", "seed:1")],
        )
        .unwrap();
        // The seed name is a fallback for the environment layer, which beats the file.
        assert_eq!(cfg.image, "seed:1");
        assert_eq!(cfg.memory, "2g");
        assert_eq!(cfg.cpus, 1.0);
        let cfg = load(
            None,
            &[("H9SANDBOX_IMAGE", "mine:1"), ("SANDBOX_IMAGE", "seed:1")],
        )
        .unwrap();
        assert_eq!(cfg.image, "mine:1");
    }

    #[test]
    fn bootstrap_keys_honour_the_seed_names() {
        let cfg = load(
            None,
            &[
                ("SANDBOX_BOOTSTRAP_CMD", "pip install -e ."),
                ("SANDBOX_BOOTSTRAP_TIMEOUT_SECS", "30"),
                ("H9SANDBOX_BOOTSTRAP_REQUIRED", "true"),
            ],
        )
        .unwrap();
        assert_eq!(cfg.bootstrap(), Some("pip install -e ."));
        assert_eq!(cfg.bootstrap_timeout_secs, 30);
        assert!(cfg.bootstrap_required);
        let cfg = load(Some("bootstrap_cmd = \"  \"\n"), &[]).unwrap();
        assert_eq!(cfg.bootstrap(), None);
        let err = load(None, &[("H9SANDBOX_BOOTSTRAP_REQUIRED", "yes")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not true or false"), "{err}");
    }

    #[test]
    fn booleans_from_file_and_environment() {
        assert!(load(None, &[]).unwrap().reap_on_up);
        assert!(!load(Some("reap_on_up = false\n"), &[]).unwrap().reap_on_up);
        assert!(
            !load(None, &[("H9SANDBOX_REAP_ON_UP", "false")])
                .unwrap()
                .reap_on_up
        );
        let err = load(None, &[("H9SANDBOX_REAP_ON_UP", "nope")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("H9SANDBOX_REAP_ON_UP") && err.contains("true or false"),
            "{err}"
        );
    }

    #[test]
    fn flags_beat_everything() {
        let mut layers =
            Layers::load_with_env(None, |k| (k == "H9SANDBOX_CPUS").then(|| "0.5".to_string()))
                .unwrap();
        layers
            .set_str("cpus", "0.25", Origin::Flag("--cpus".into()))
            .unwrap();
        assert_eq!(layers.resolve().unwrap().cpus, 0.25);
    }

    #[test]
    fn typos_and_unquoted_strings_say_how_to_fix_them() {
        let err = load(Some("memroy = \"1g\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("did you mean `memory`?"), "{err}");
        let err = load(Some("memory = 512\n"), &[]).unwrap_err().to_string();
        assert!(
            err.contains("write it in quotes: memory = \"512\""),
            "{err}"
        );
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let err = load(Some("imgae = \"x\"\n"), &[]).unwrap_err().to_string();
        assert!(
            err.contains("c.toml") && err.contains("unknown key `imgae`"),
            "{err}"
        );
    }

    #[test]
    fn bad_values_name_origin_and_reason() {
        let err = load(Some("memory = \"lots\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("c.toml, key `memory`") && err.contains("'lots' is not a size"),
            "{err}"
        );
        let err = load(Some("cpus = -1\n"), &[]).unwrap_err().to_string();
        assert!(
            err.contains("key `cpus`") && err.contains("out of range"),
            "{err}"
        );
        let err = load(None, &[("H9SANDBOX_PIDS_LIMIT", "many")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("H9SANDBOX_PIDS_LIMIT") && err.contains("not a whole number"),
            "{err}"
        );
        let err = load(Some("network = \"host\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("network") && err.contains("host"), "{err}");
        let err = load(Some("pids_limit = \"x\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("pids_limit"), "{err}");
    }

    #[test]
    fn typos_in_env_names_are_found() {
        let vars = [
            "H9SANDBOX_MEMROY",
            "H9SANDBOX_MEMORY",
            "H9SANDBOX_CONFIG",
            "PATH",
        ];
        assert_eq!(
            Layers::unknown_env_vars(vars.iter().map(|s| s.to_string())),
            vec!["H9SANDBOX_MEMROY"]
        );
        let err = load(None, &[("H9SANDBOX_STATE_DIR", "relative/dir")]).unwrap_err();
        assert!(err.to_string().contains("not an absolute path"), "{err}");
        let err = load(Some("image = \"a\"\nmemory = = 3\n"), &[]).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn project_file_cannot_set_host_side_keys() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sandbox.toml");
        std::fs::write(&file, "engine_bin = \"/tmp/evil\"\n").unwrap();
        let mut layers = Layers::load_with_env(None, |_| None).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        let err = layers
            .merge_text(&file, &text, true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("engine_bin") && err.contains("not allowed"),
            "{err}"
        );
        // The same key from an explicit file, the environment or a flag is fine.
        layers
            .set_str("engine_bin", "/usr/bin/docker", Origin::Flag("x".into()))
            .unwrap();
        assert!(load(Some("engine_bin = \"podman\"\n"), &[]).is_ok());
        let err = load(None, &[("H9SANDBOX_IMAGE", "--privileged")]).unwrap_err();
        assert!(err.to_string().contains("not an image reference"), "{err}");
    }

    #[test]
    fn a_project_file_may_only_narrow_the_network() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("config.toml");
        std::fs::write(
            &user,
            "network = \"allowlist\"\nallow = [\"*.debian.org\", \"pypi.org\"]\n",
        )
        .unwrap();
        let project = |text: &str| ProjectText {
            path: dir.path().join("sandbox.toml"),
            text: text.into(),
        };
        let load = |text: &str| Layers::load_opts(Some(&user), |_| None, Some(&project(text)));
        let cfg = load("allow = [\"deb.debian.org\", \"*.security.debian.org\", \"pypi.org\"]\n")
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(cfg.network, Network::Allowlist);
        assert_eq!(cfg.allow.len(), 3);
        assert!(load("network = \"none\"\n").is_ok());
        for (text, why) in [
            ("network = \"bridge\"\n", "may only narrow the network"),
            (
                "allow = [\"evil.com\"]\n",
                "'evil.com' is not in your own allow list",
            ),
            (
                "allow = [\"debian.org\"]\n",
                "'debian.org' is not in your own allow list",
            ),
            (
                "allow = [\"*.org\"]\n",
                "'*.org' is not in your own allow list",
            ),
        ] {
            let err = load(text).unwrap_err().to_string();
            assert!(
                err.contains(why) && err.contains("sandbox.toml"),
                "{text}: {err}"
            );
        }
        // Under a user's bridge (everything reachable) any list narrows; the environment and
        // flags are the user's own.
        std::fs::write(&user, "network = \"none\"\n").unwrap();
        assert!(load("network = \"allowlist\"\n").is_err());
        let env = |k: &str| (k == "H9SANDBOX_ALLOW").then(|| "a.org, *.b.org".to_string());
        let cfg = Layers::load_opts(None, env, None)
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(cfg.allow, ["a.org", "*.b.org"]);
        let bad = |k: &str| (k == "H9SANDBOX_ALLOW").then(|| "http://x/".to_string());
        assert!(Layers::load_opts(None, bad, None).is_err());
    }

    #[test]
    fn a_project_file_may_only_narrow_the_capability_profile() {
        let dir = tempfile::tempdir().unwrap();
        let project = |text: &str| ProjectText {
            path: dir.path().join("sandbox.toml"),
            text: text.into(),
        };
        let no_env = |_: &str| None;
        // Over the default (standard): minimal narrows, standard changes nothing.
        for (text, want) in [
            ("caps = \"minimal\"\n", Caps::Minimal),
            ("caps = \"standard\"\n", Caps::Standard),
        ] {
            let cfg = Layers::load_opts(None, no_env, Some(&project(text)))
                .unwrap()
                .resolve()
                .unwrap();
            assert_eq!(cfg.caps, want);
        }
        // Over a user's minimal: standard is refused, naming where to set it.
        let user = dir.path().join("config.toml");
        std::fs::write(&user, "caps = \"minimal\"\n").unwrap();
        let err = Layers::load_opts(Some(&user), no_env, Some(&project("caps = \"standard\"\n")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("may only narrow") && err.contains("--caps"),
            "{err}"
        );
        // The environment (and a flag) may widen it.
        let env = |k: &str| (k == "H9SANDBOX_CAPS").then(|| "standard".to_string());
        let cfg = Layers::load_opts(Some(&user), env, None)
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(cfg.caps, Caps::Standard);
        assert!(load(Some("caps = \"all\"\n"), &[]).is_err());
    }

    #[test]
    fn a_project_file_lies_between_the_users_file_and_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("config.toml");
        std::fs::write(&user, "memory = \"300m\"\npids_limit = 10\n").unwrap();
        let project = ProjectText {
            path: dir.path().join("sandbox.toml"),
            text: "pids_limit = 77\ncpus = 0.5\n".into(),
        };
        let env = |k: &str| (k == "H9SANDBOX_CPUS").then(|| "0.25".to_string());
        let cfg = Layers::load_opts(Some(&user), env, Some(&project))
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(
            (cfg.memory.as_str(), cfg.pids_limit, cfg.cpus),
            ("300m", 77, 0.25)
        );
        let set = Layers::check_project(&project).unwrap();
        assert_eq!(set.keys().collect::<Vec<_>>(), ["cpus", "pids_limit"]);
        let bad = ProjectText {
            path: project.path.clone(),
            text: "state_dir = \"/tmp/x\"\n".into(),
        };
        let err = Layers::check_project(&bad).unwrap_err().to_string();
        assert!(
            err.contains("key `state_dir`") && err.contains("not allowed"),
            "{err}"
        );
    }

    #[test]
    fn engine_keys_and_the_seed_switch() {
        let cfg = load(None, &[]).unwrap();
        assert_eq!(
            (cfg.engine, cfg.engine_bin, cfg.fallback),
            (EngineKind::Docker, None, Fallback::Fail)
        );
        let cfg = load(
            Some("engine = \"podman\"\nfallback = \"local\"\nulimit_nofile = 4096\n"),
            &[("H9SANDBOX_RUNTIME", "runc")],
        )
        .unwrap();
        assert_eq!(cfg.engine, EngineKind::Podman);
        assert_eq!(cfg.fallback, Fallback::Local);
        assert_eq!((cfg.ulimit_nofile, cfg.ulimit_nproc), (4096, 0));
        assert_eq!(cfg.runtime.as_deref(), Some("runc"));
        // SANDBOX_ENABLED=false beats the file, and loses to H9SANDBOX_ENGINE.
        for off in ["false", "0", "NO", "off"] {
            let cfg = load(Some("engine = \"podman\"\n"), &[("SANDBOX_ENABLED", off)]).unwrap();
            assert_eq!(cfg.engine, EngineKind::Local, "{off}");
        }
        let cfg = load(None, &[("SANDBOX_ENABLED", "true")]).unwrap();
        assert_eq!(cfg.engine, EngineKind::Docker);
        let cfg = load(
            None,
            &[("SANDBOX_ENABLED", "false"), ("H9SANDBOX_ENGINE", "docker")],
        )
        .unwrap();
        assert_eq!(cfg.engine, EngineKind::Docker);
        let err = load(None, &[("SANDBOX_ENABLED", "maybe")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("SANDBOX_ENABLED") && err.contains("'maybe'"),
            "{err}"
        );
        let err = load(Some("engine = \"lxc\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'lxc' is not one of: docker, podman, local"),
            "{err}"
        );
        let err = load(None, &[("H9SANDBOX_FALLBACK", "retry")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("H9SANDBOX_FALLBACK"), "{err}");
        let err = load(Some("runtime = \"run c\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("key `runtime`"), "{err}");
        let err = load(Some("ulimit_nproc = -5\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("negative"), "{err}");
    }

    #[test]
    fn user_is_owner_root_host_or_numeric_ids() {
        assert_eq!(load(None, &[]).unwrap().user(), User::Owner);
        let d = tempfile::tempdir().unwrap();
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(d.path()).unwrap();
        assert_eq!(
            User::Owner.resolve(d.path()),
            Ids {
                uid: m.uid(),
                gid: m.gid()
            }
        );
        let cfg = load(Some("user = \"1000:1000\"\n"), &[]).unwrap();
        assert_eq!(
            cfg.user(),
            User::Ids(Ids {
                uid: 1000,
                gid: 1000
            })
        );
        assert_eq!(cfg.user().resolve(d.path()).to_string(), "1000:1000");
        let cfg = load(None, &[("H9SANDBOX_USER", "host")]).unwrap();
        assert_eq!(cfg.user().resolve(d.path()), Ids::current());
        assert_eq!(User::Root.resolve(d.path()), Ids::ROOT);
        for bad in [
            "nobody",
            "1000",
            "1000:",
            ":1000",
            "-1:0",
            "1:2:3",
            "4294967295:0",
            " 1:1",
        ] {
            let err = load(None, &[("H9SANDBOX_USER", bad)])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("H9SANDBOX_USER") && err.contains("uid:gid"),
                "{bad}: {err}"
            );
        }
        // Recorded as a string.
        let ids: Ids = serde_json::from_str("\"0:5\"").unwrap();
        assert_eq!((ids.uid, ids.gid), (0, 5));
        assert_eq!(serde_json::to_string(&ids).unwrap(), "\"0:5\"");
        assert!(serde_json::from_str::<Ids>("\"x\"").is_err());
    }

    #[test]
    fn allowed_workdirs_comes_only_from_the_users_own_file() {
        let cfg = load(Some("allowed_workdirs = [\"/srv/www\", \"/opt/x\"]\n"), &[]).unwrap();
        assert_eq!(
            cfg.allowed_workdirs,
            vec![PathBuf::from("/srv/www"), PathBuf::from("/opt/x")]
        );
        assert!(load(None, &[]).unwrap().allowed_workdirs.is_empty());
        let err = load(Some("allowed_workdirs = [\"srv\"]\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an absolute path"), "{err}");
        let err = load(Some("allowed_workdirs = \"/srv\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("a list of absolute paths"), "{err}");
        // Not from the environment, even next to a file that sets it...
        let err = load(
            Some("allowed_workdirs = [\"/srv\"]\n"),
            &[("H9SANDBOX_ALLOWED_WORKDIRS", "[\"/etc\"]")],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("H9SANDBOX_ALLOWED_WORKDIRS") && err.contains("configuration file"),
            "{err}"
        );
        // ...nor from a project's sandbox.toml, nor as a flag.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sandbox.toml");
        std::fs::write(&file, "allowed_workdirs = [\"/etc\"]\n").unwrap();
        let mut layers = Layers::load_with_env(None, |_| None).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        let err = layers
            .merge_text(&file, &text, true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not allowed in a project's sandbox.toml"),
            "{err}"
        );
        assert!(layers
            .set_str("allowed_workdirs", "/etc", Origin::Flag("--x".into()))
            .is_err());
        assert!(
            Layers::unknown_env_vars(["H9SANDBOX_ALLOWED_WORKDIRS".to_string()].into_iter())
                .is_empty()
        );
    }

    #[test]
    fn oversized_and_special_config_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.toml");
        // A sparse file: what a sandbox can plant as ./sandbox.toml at no cost.
        std::fs::File::create(&big)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let err = Layers::load_with_env(Some(&big), |_| None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("larger than 1048576 bytes"), "{err}");
        let fifo = dir.path().join("fifo.toml");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let mut layers = Layers::load_with_env(None, |_| None).unwrap();
        let err = layers.merge_file(&fifo, true).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        let err = load(None, &[("H9SANDBOX_JSON_MAX_BYTES", "0")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("H9SANDBOX_JSON_MAX_BYTES"), "{err}");
        assert_eq!(load(None, &[]).unwrap().json_max_bytes, 16 << 20);
    }

    #[test]
    fn sizes_parse_like_docker() {
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_size("64kb").unwrap(), 64 << 10);
        assert_eq!(parse_size("1024").unwrap(), 1024);
        for bad in ["lots", "", "m", "-1m", "1x", "1..2m"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn example_file_documents_every_key_with_its_default() {
        let example = include_str!("../sandbox.toml.example");
        let defaults = toml::Table::try_from(Config::default()).unwrap();
        for key in KEYS {
            let line = example
                .lines()
                .find(|l| {
                    l.trim_start_matches('#')
                        .trim_start()
                        .starts_with(&format!("{} =", key.name))
                })
                .unwrap_or_else(|| panic!("sandbox.toml.example lacks `{}`", key.name));
            if let Some(v) = defaults.get(key.name) {
                assert!(
                    line.contains(&v.to_string()),
                    "default of {} is {v}: {line}",
                    key.name
                );
            }
        }
        // The example, uncommented, is itself a valid configuration.
        let uncommented: String = example
            .lines()
            .filter_map(|l| l.strip_prefix("# ").filter(|l| l.contains(" = ")))
            .map(|l| format!("{l}\n"))
            .collect();
        let t: toml::Table = uncommented.parse().unwrap();
        assert!(t.len() >= KEYS.len() - 1);
    }

    #[test]
    fn example_file_marks_the_keys_a_project_file_may_not_set() {
        let example = include_str!("../sandbox.toml.example");
        let lines: Vec<&str> = example.lines().collect();
        for key in KEYS {
            let at = lines
                .iter()
                .position(|l| l.starts_with(&format!("# {} = ", key.name)))
                .unwrap();
            let marked = lines[at - 1].starts_with("# NOT in a project's ./sandbox.toml");
            let refused =
                HOST_SIDE_KEYS.contains(&key.name) || USER_FILE_ONLY_KEYS.contains(&key.name);
            assert_eq!(marked, refused, "{}", key.name);
        }
    }
}
