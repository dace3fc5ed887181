//! The configuration keys: [`KEYS`] (name, type, meaning, in the reference's order), the sets
//! of keys closed to some layers ([`HOST_SIDE_KEYS`], [`USER_FILE_ONLY_KEYS`]) or tolerated by
//! commands on existing sandboxes ([`UP_ONLY_KEYS`]), and finding a key by its name or a typo.

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

/// One configuration key: its name (file key; env `H9SANDBOX_<NAME>`), type, unprefixed
/// fallback variable and meaning.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// Key in the TOML file and, upper-cased, in `H9SANDBOX_<KEY>`.
    pub name: &'static str,
    /// Its type.
    pub kind: Kind,
    /// The unprefixed variable of the design h9sandbox started from (`SANDBOX_IMAGE`, ...),
    /// honoured when `H9SANDBOX_<KEY>` is unset.
    pub unprefixed_env: Option<&'static str>,
    /// What it means, for people: Markdown on one line (links relative to `docs/reference/`),
    /// naming the flag that sets it and what an unset value means. The configuration reference,
    /// `docs/reference/configuration.md`, is generated from [`KEYS`] (`tests/it/generated.rs`).
    pub doc: &'static str,
}

const fn key(name: &'static str, kind: Kind, doc: &'static str) -> Key {
    Key {
        name,
        kind,
        unprefixed_env: None,
        doc,
    }
}

/// Every configuration key, in the order the reference lists them.
pub const KEYS: &[Key] = &[
    Key {
        name: "image",
        kind: Kind::Str,
        unprefixed_env: Some("SANDBOX_IMAGE"),
        doc: "Image of new sandboxes (`up --image`); pulled once when missing.",
    },
    Key {
        name: "cpus",
        kind: Kind::Float,
        unprefixed_env: Some("SANDBOX_CPUS"),
        doc: "CPU limit in cores, at least 0.01; more than the host's CPUs is lowered to them with a warning (`up --cpus`).",
    },
    Key {
        name: "memory",
        kind: Kind::Str,
        unprefixed_env: Some("SANDBOX_MEMORY"),
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
        unprefixed_env: Some("SANDBOX_BOOTSTRAP_CMD"),
        doc: "Shell command `up` runs once the container runs (`up --bootstrap`; see [Bootstrap](../guide.md#bootstrap)); unset or blank: none.",
    },
    Key {
        name: "bootstrap_timeout_secs",
        kind: Kind::Secs,
        unprefixed_env: Some("SANDBOX_BOOTSTRAP_TIMEOUT_SECS"),
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

/// Keys that only matter when a sandbox is made (`up`, `run`, `mcp`): what it gets (image,
/// limits, network, user, capabilities), how it is started and watched. A command on an existing
/// sandbox (`exec`, `down`, `ls`, `reap`, `renew`, the file commands, ...) uses what `up`
/// recorded instead, so a bad value of one of these (`H9SANDBOX_CPUS=abc`) never stops it: it is
/// ignored there with a warning
/// ([`Layers::load_for_existing`](super::Layers::load_for_existing)), as a project file is
/// never read there at all.
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

pub(super) fn lookup(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

pub(super) fn key_names() -> String {
    KEYS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

/// The configuration key closest to `name` (at most two edits away), for a typo's message.
pub fn nearest_key(name: &str) -> Option<&'static str> {
    KEYS.iter()
        .map(|k| (strsim::levenshtein(name, k.name), k.name))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn example_file_documents_every_key_with_its_default() {
        let example = include_str!("../../sandbox.toml.example");
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
        let example = include_str!("../../sandbox.toml.example");
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
