//! The arguments of each subcommand (clap derive; every doc comment is help text, see the
//! parent module).
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::*;
use crate::types::{Caps, Network};

#[cfg_attr(
    doc,
    doc = "`up` arguments. Unset options come from the configuration. A warm pool keeps them
(`pool create`) as JSON, to make its sandboxes with later."
)]
#[derive(Debug, Default, Args, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct UpArgs {
    /// Host directory at the same path (bind-mounted, or copied in with --workdir-mode copy);
    /// not one holding the host's secrets or code (a dot-directory of your home, a system tree
    /// such as /usr or /etc, ...; see allowed_workdirs) [default: current directory]
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// How the work dir reaches the sandbox: mount (a bind mount) or copy (copied in, copied
    /// out only by `h9sandbox cp`; nothing of this machine mounted) [config: workdir_mode;
    /// default: mount where the engine's daemon is on this machine, else copy]
    #[arg(long, value_enum, value_name = "MODE")]
    pub workdir_mode: Option<crate::types::WorkdirMode>,
    /// Engine of the sandbox: docker, podman, local (no isolation) or swarm [config: engine]
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<String>,
    /// Swarm placement constraint, e.g. node.labels.gpu==true (repeatable; engine swarm)
    #[arg(long = "constraint", value_name = "EXPR")]
    pub constraints: Vec<String>,
    /// How long a swarm may take to place and start the sandbox, e.g. 90s [config:
    /// placement_timeout_secs; default: 60]
    #[arg(long, value_name = "DURATION")]
    pub placement_timeout: Option<String>,
    /// Image to run [config: image; default: ubuntu:22.04]
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Container name [default: h9sandbox-<short id>]
    #[arg(long)]
    pub name: Option<String>,
    /// CPU limit in cores [config: cpus; default: 1.0]
    #[arg(long, value_name = "N")]
    pub cpus: Option<String>,
    /// Memory limit, e.g. 512m or 2g [config: memory; default: 512m]
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,
    /// Maximum number of processes [config: pids_limit; default: 256]
    #[arg(long, value_name = "N")]
    pub pids_limit: Option<String>,
    /// Network mode; allowlist: HTTP and HTTPS to the --allow hosts only [config: network;
    /// default: bridge]
    #[arg(long, value_enum)]
    pub network: Option<Network>,
    /// Host an allowlist sandbox may reach: a name, or *.domain (repeatable; implies --network
    /// allowlist) [config: allow]
    #[arg(long = "allow", value_name = "HOST")]
    pub allow: Vec<String>,
    /// OCI runtime of the container, e.g. runsc for gVisor (see scripts/setup-gvisor.sh)
    /// [config: runtime]
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,
    /// Capabilities of root in the sandbox: minimal (DAC_OVERRIDE, SETUID, SETGID) or standard
    /// (also CHOWN, FOWNER, FSETID: adduser, groupadd) [config: caps; default: standard]
    #[arg(long, value_enum, value_name = "PROFILE")]
    pub caps: Option<Caps>,
    /// Extra label on the container and record (repeatable)
    #[arg(long = "label", value_name = "K=V")]
    pub labels: Vec<String>,
    /// Make this a sub-sandbox of ID: its image, limits, network and work dir, which the flags
    /// may only tighten
    #[arg(long, value_name = "ID", add = sandboxes())]
    pub parent: Option<String>,
    /// Shell command run once the container is ready; '' for none [config: bootstrap_cmd]
    #[arg(long, value_name = "CMD")]
    pub bootstrap: Option<String>,
    /// Fail, and remove the sandbox, when the bootstrap command fails [config: bootstrap_required]
    #[arg(long)]
    pub bootstrap_required: bool,
    /// Time before the bootstrap's process tree is killed: seconds or a duration (600, 10m);
    /// 0 = none [config: bootstrap_timeout_secs; default: 600]
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub bootstrap_timeout: Option<std::time::Duration>,
    /// User of the sandbox's processes: owner (the work dir's owner, the default), root, host
    /// (your uid:gid) or UID:GID [config: user]
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Tie the sandbox to a process: within seconds of its exit the sandbox is removed (by its
    /// owner watcher; else by the next `reap`). A PID, or `parent` (the process that started
    /// h9sandbox). In a Makefile each recipe line runs in its own shell, which exits at once:
    /// give make's PID, `--owner-pid $$PPID` [default: none]
    #[arg(long, value_name = "PID|parent")]
    pub owner_pid: Option<String>,
    /// Lease: the sandbox is removed this long after it started (by its owner watcher, else by
    /// `reap`), unless `renew`ed (e.g. 90s, 30m, 2h, 1d) [default: none]
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
    /// With --name: when a Running sandbox of that name has the same image, limits and work
    /// dir, print its ID and change nothing (fail naming what differs)
    #[arg(long, requires = "name")]
    pub reuse: bool,
    /// Make it from a devcontainer.json: PATH is the file or the project folder holding
    /// .devcontainer/ [default: the work dir's]. Its image or Dockerfile, environment, user and
    /// lifecycle commands (as the bootstrap) are used, never anything that loosens the sandbox;
    /// the flags given beat it
    #[arg(long, value_name = "PATH", conflicts_with_all = ["parent", "build"])]
    pub devcontainer: Option<Option<PathBuf>>,
    /// Build the image from this directory's Dockerfile with the engine first (as `docker
    /// compose up --build`), named h9sandbox-build-NAME-HASH; the engine's cache makes the next
    /// build of the same directory quick
    #[arg(long, value_name = "DIR", conflicts_with_all = ["image", "parent"])]
    pub build: Option<PathBuf>,
    /// With --build: the Dockerfile [default: DIR/Dockerfile]
    #[arg(long, value_name = "FILE", requires = "build")]
    pub dockerfile: Option<PathBuf>,
    /// Publish a port of the sandbox on this host, as `docker run -p` (network bridge only):
    /// PORT (a free host port), HOST_PORT:PORT or IP:HOST_PORT:PORT, on 127.0.0.1 unless IP
    /// names another address (repeatable; `ls` shows the host ports)
    #[arg(long = "publish", short = 'p', value_name = "[[IP:]HOST_PORT:]PORT")]
    pub publish: Vec<String>,
    /// Claim a ready sandbox of the warm pool POOL (`h9sandbox pool create`) instead of making
    /// one: image, limits, network and work dir are the pool's, a copied work dir gets its
    /// content now; of up's options only --owner-pid and --ttl may be given with it
    #[arg(long, value_name = "POOL", conflicts_with_all = [
        "workdir", "workdir_mode", "engine", "constraints", "placement_timeout", "image", "name",
        "cpus", "memory", "pids_limit", "network", "allow", "runtime", "caps", "labels", "parent",
        "bootstrap", "bootstrap_required", "bootstrap_timeout", "user", "reuse", "devcontainer",
        "build", "dockerfile", "publish",
    ])]
    pub pool: Option<String>,
}

// The subcommands' argument structs document themselves for rustdoc alone (`cfg_attr(doc)`):
// `h9sandbox`'s subcommands are built only when used (clap's `Command::defer`, 0.2 ms of every
// command's start), and a deferred struct's doc comment would replace the subcommand's one-line
// description, which its variant of `Command` gives.
#[cfg_attr(doc, doc = "`pool` arguments.")]
#[derive(Debug, Args)]
pub struct PoolArgs {
    #[command(subcommand)]
    pub command: PoolCommand,
}

#[cfg_attr(doc, doc = "`pool`'s subcommands.")]
#[derive(Debug, Subcommand)]
pub enum PoolCommand {
    /// Make a warm pool: SIZE sandboxes made with up's options, kept ready for `up --pool NAME`
    #[command(after_help = "\
Examples:
  h9sandbox pool create py --size 4 --image python:3.12 --memory 1g --network none
  h9sandbox pool create eval --size 8 --workdir-mode copy --bootstrap 'pip install pytest'
  h9sandbox up --pool py --owner-pid $$          claims one at once; the pool makes the next

Takes up's options except --name, --reuse, --parent, --owner-pid, --ttl and --pool. The work dir
(--workdir, default: the current directory) is fixed by the pool: with --workdir-mode copy each
claim copies the directory's content in as it is at the claim; mounted, every sandbox of the pool
mounts it. The bootstrap runs when a sandbox is made, before it is claimed (a copied work dir is
empty then). The options, this directory and the environment's H9SANDBOX_* and DOCKER_* variables
are kept in the state directory (pools.json): every sandbox of the pool is made with them.

Waits until SIZE sandboxes are ready (--no-wait: returns at once); when the first cannot be made,
nothing is kept and the error is up's.")]
    Create(Box<PoolCreateArgs>),
    /// List the warm pools: size, sandboxes ready and starting, the filler's last error
    #[command(after_help = "\
Examples:
  h9sandbox pool ls
  h9sandbox pool ls --format json                 [{name, size, ready, starting, cwd, created_at, last_error}]

Reads the state directory only (no engine call). `ls` leaves out the sandboxes that wait in a
pool; `up --pool` claims one, which `ls` shows from then on.")]
    Ls,
    /// Make sandboxes for a pool until SIZE are ready (after a failure, or a `down --all`)
    #[command(after_help = "\
Examples:
  h9sandbox pool fill py

`up --pool` starts a filler in the background after each claim; one filler works on a pool at a
time (this one then returns at once). Exit status: 0, or 1 when a sandbox could not be made (the
error is kept: `pool ls` shows it).")]
    Fill(PoolFillArgs),
    /// Remove warm pools: their definitions and the sandboxes that wait in them
    #[command(after_help = "\
Examples:
  h9sandbox pool rm py

Sandboxes claimed from the pool are the claimants': `down` removes those.")]
    Rm(PoolRmArgs),
}

#[cfg_attr(doc, doc = "`pool create` arguments.")]
#[derive(Debug, Args)]
pub struct PoolCreateArgs {
    /// The pool's name: 1 to 63 of a-z, 0-9, '.', '_', '-'
    #[arg(value_name = "NAME")]
    pub pool_name: String,
    /// How many sandboxes wait, ready, in the pool (1 to 64)
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=crate::sandbox::pool::MAX_SIZE as i64))]
    pub size: u32,
    /// Return once the definition is kept and its filler started, without waiting for the
    /// sandboxes
    #[arg(long)]
    pub no_wait: bool,
    #[command(flatten)]
    pub up: UpArgs,
}

#[cfg_attr(doc, doc = "`pool fill` arguments.")]
#[derive(Debug, Args)]
pub struct PoolFillArgs {
    /// The pool
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Be the filler itself (h9sandbox's own use: `pool fill` and `up --pool` start it with the
    /// pool's directory and environment)
    #[arg(long, hide = true)]
    pub worker: bool,
}

#[cfg_attr(doc, doc = "`pool rm` arguments.")]
#[derive(Debug, Args)]
pub struct PoolRmArgs {
    /// The pools
    #[arg(value_name = "NAME", required = true)]
    pub names: Vec<String>,
}

#[cfg_attr(doc, doc = "`mcp` arguments.")]
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Work dir of sandboxes made without one (--auto-up, sandbox_up), and where relative
    /// work dirs start [default: current directory]
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Image of the sandboxes the session makes [config: image; default: ubuntu:22.04]
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Make the session's sandbox at start (the tools' default), removed when the session ends
    #[arg(long)]
    pub auto_up: bool,
    /// Let the tools list and act on every sandbox of the state directory, also those made
    /// elsewhere [default: only the sandboxes this session made, and their sub-sandboxes]
    #[arg(long)]
    pub all_sandboxes: bool,
    /// Offer the tool sandbox_port_forward: the client may have this server listen on
    /// 127.0.0.1 and carry connections to a port inside a sandbox, until the sandbox or the
    /// session ends [default: not offered]
    #[arg(long)]
    pub port_forward: bool,
}

#[cfg_attr(doc, doc = "`exec` arguments.")]
#[derive(Debug, Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
    /// Working directory: relative to the work dir, or absolute (any directory of the container)
    /// [default: the work dir]
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Run it as this user: a name of the container's /etc/passwd, or UID[:GID] [default: the
    /// sandbox's user]
    #[arg(long, short = 'u', value_name = "USER|UID[:GID]")]
    pub user: Option<String>,
    /// Environment variable for the command (repeatable); NAME alone passes your own value of
    /// NAME (as `docker exec -e NAME`), and is refused when NAME is unset
    #[arg(long = "env", short = 'e', value_name = "K=V|NAME")]
    pub env: Vec<String>,
    /// Time before the command's process tree is killed: seconds or a duration (30, 0.5, 500ms,
    /// 1m); 0 = none [config: exec_timeout_secs; default: 600]
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub timeout: Option<std::time::Duration>,
    /// Attach standard input to the command
    #[arg(short, long)]
    pub interactive: bool,
    /// Run it on a terminal of its own in the sandbox (with -i: as `docker exec -it`); needs a
    /// terminal on our side
    #[arg(short, long)]
    pub tty: bool,
    /// With -t: give the command a terminal even when ours is none (for programs that drive
    /// a terminal themselves; 80x24 unless our stdout is a terminal)
    #[arg(long, requires = "tty")]
    pub force_tty: bool,
    /// With --format json: bytes kept of each of stdout and stderr
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub max_output: usize,
    /// With --format json: also `output`, stdout and stderr together in the order they were
    /// read (chunk by chunk; see docs/reference/json.md), capped as each stream is
    #[arg(long)]
    pub combined: bool,
    /// Run it in the background: print its handle at once (see `ps`, `logs`, `kill`)
    #[arg(short, long, conflicts_with_all = ["interactive", "tty"])]
    pub detach: bool,
    /// Take the command, one shell command line (bash -c), from this file (`-`: stdin) instead
    /// of the arguments: for a text past the 128 KiB one argument may hold (up to 4 MiB)
    #[arg(long, value_name = "FILE", conflicts_with = "command")]
    pub command_file: Option<PathBuf>,
    /// The command: a program and its arguments, or one shell command line (bash -c)
    #[arg(
        required_unless_present = "command_file",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

#[cfg_attr(doc, doc = "`shell` arguments.")]
#[derive(Debug, Args)]
pub struct ShellArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
    /// Working directory: relative to the work dir, or absolute (any directory of the container)
    /// [default: the work dir]
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Run it as this user: a name of the container's /etc/passwd, or UID[:GID] [default: the
    /// sandbox's user]
    #[arg(long, short = 'u', value_name = "USER|UID[:GID]")]
    pub user: Option<String>,
    /// Environment variable for the shell (repeatable); NAME alone passes your own value of
    /// NAME
    #[arg(long = "env", short = 'e', value_name = "K=V|NAME")]
    pub env: Vec<String>,
    /// Time before the session's process tree is killed: seconds or a duration (30m, 2h)
    /// [default: none]
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub timeout: Option<std::time::Duration>,
}

#[cfg_attr(doc, doc = "`port-forward` arguments.")]
#[derive(Debug, Args)]
pub struct PortForwardArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
    /// Ports to forward: PORT (the same local port), LOCAL:PORT, or :PORT (a free local port)
    #[arg(required = true, value_name = "[LOCAL:]PORT", value_parser = parse_forward_spec)]
    pub ports: Vec<crate::sandbox::forward::PortSpec>,
    /// End after this long: seconds or a duration (90s, 10m) [default: until Ctrl-C or `down`]
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub timeout: Option<std::time::Duration>,
}

#[cfg_attr(doc, doc = "`stats` arguments.")]
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Sandbox IDs, unique ID prefixes, or names [default: every running sandbox]
    #[arg(add = sandboxes())]
    pub ids: Vec<String>,
    /// Keep sampling: a table redrawn in place on a terminal, one JSON array per line with
    /// --format json [default: on a terminal]
    #[arg(short, long, conflicts_with = "no_stream")]
    pub watch: bool,
    /// Print one sample and exit (as `docker stats --no-stream`) [default: unless on a terminal]
    #[arg(long)]
    pub no_stream: bool,
    /// Time between two samples (seconds, or 500ms, 2s)
    #[arg(long, value_name = "DURATION", default_value = "1", value_parser = parse_interval)]
    pub interval: std::time::Duration,
}

/// Parses a port-forward argument ([`crate::sandbox::forward::PortSpec::parse`]).
fn parse_forward_spec(s: &str) -> Result<crate::sandbox::forward::PortSpec, String> {
    crate::sandbox::forward::PortSpec::parse(s)
}

#[cfg_attr(doc, doc = "`ps` arguments.")]
#[derive(Debug, Args)]
pub struct PsArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
}

#[cfg_attr(doc, doc = "`logs` arguments.")]
#[derive(Debug, Args)]
pub struct LogsArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
    /// The background command's handle (printed by exec --detach; see `ps`)
    #[arg(required_unless_present = "network")]
    pub handle: Option<String>,
    /// The egress proxy's decisions instead (network = "allowlist")
    #[arg(long, conflicts_with_all = ["handle", "follow"])]
    pub network: bool,
    /// Keep printing what it writes until its processes have exited (or Ctrl-C)
    #[arg(short, long)]
    pub follow: bool,
}

#[cfg_attr(doc, doc = "`kill` arguments.")]
#[derive(Debug, Args)]
pub struct KillArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
    /// The background command's handle
    pub handle: String,
}

#[cfg_attr(doc, doc = "`bootstrap` arguments.")]
#[derive(Debug, Args)]
pub struct BootstrapArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
    /// Time before the command's process tree is killed: seconds or a duration (1800, 30m),
    /// counted in whole seconds (rounded up); 0 = none [config: bootstrap_timeout_secs;
    /// default: 600]
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub timeout: Option<std::time::Duration>,
    /// The command; words are joined with spaces and run by `bash -c` [default: bootstrap_cmd]
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

#[cfg_attr(doc, doc = "`down` arguments.")]
#[derive(Debug, Args)]
pub struct DownArgs {
    /// Sandbox IDs, unique ID prefixes, or names
    #[arg(required_unless_present = "all", conflicts_with = "all", add = sandboxes())]
    pub ids: Vec<String>,
    /// Every sandbox of this state directory
    #[arg(long)]
    pub all: bool,
    /// Drop the records of sandboxes whose daemon cannot be reached (gone, down, or named by
    /// settings no longer valid), leaving their containers, if any, on that daemon
    #[arg(long)]
    pub forget: bool,
}

#[cfg_attr(doc, doc = "`read` arguments.")]
#[derive(Debug, Args)]
pub struct ReadArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
    /// File: relative to the work dir, or absolute (inside a mounted work dir: read on the host
    /// side; in a copied one, or elsewhere: the container's file, served inside it)
    pub path: PathBuf,
    /// Act as this user of the container (name, or UID[:GID]) instead of the sandbox's user;
    /// the file is then served inside the container
    #[arg(long, short = 'u', value_name = "USER|UID[:GID]")]
    pub user: Option<String>,
    /// Print at most this many bytes (JSON: the content holds at most this many)
    #[arg(long, value_name = "N")]
    pub max_bytes: Option<u64>,
}

#[cfg_attr(doc, doc = "`write` arguments.")]
#[derive(Debug, Args)]
pub struct WriteArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
    /// File: relative to the work dir, or absolute (inside a mounted work dir: read on the host
    /// side; in a copied one, or elsewhere: the container's file, served inside it)
    pub path: PathBuf,
    /// Act as this user of the container (name, or UID[:GID]) instead of the sandbox's user;
    /// the file is then served inside the container
    #[arg(long, short = 'u', value_name = "USER|UID[:GID]")]
    pub user: Option<String>,
    /// Take the content from this host file instead of stdin
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Permission bits in octal [default: an existing file's, else 644]
    #[arg(long, value_name = "OCTAL")]
    pub mode: Option<String>,
    /// Create missing parent directories
    #[arg(long)]
    pub parents: bool,
    /// Add to the end of the existing content (still replaced atomically)
    #[arg(long)]
    pub append: bool,
    /// Fail (exit 1, nothing written) when the file, or anything else, exists at PATH: never
    /// replace it (atomic: no file made meanwhile is overwritten)
    #[arg(long, short = 'n', conflicts_with = "append")]
    pub no_clobber: bool,
}

#[cfg_attr(doc, doc = "`edit` arguments.")]
#[derive(Debug, Args)]
pub struct EditArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
    /// File: relative to the work dir, or absolute (inside a mounted work dir: read on the host
    /// side; in a copied one, or elsewhere: the container's file, served inside it)
    pub path: PathBuf,
    /// Act as this user of the container (name, or UID[:GID]) instead of the sandbox's user;
    /// the file is then served inside the container
    #[arg(long, short = 'u', value_name = "USER|UID[:GID]")]
    pub user: Option<String>,
    /// Text to find (exact, whitespace and newlines included)
    #[arg(long, value_name = "STR", allow_hyphen_values = true)]
    pub old: String,
    /// Replacement text (may be empty)
    #[arg(long, value_name = "STR", allow_hyphen_values = true)]
    pub new: String,
    /// Replace every occurrence (at least one must exist)
    #[arg(long)]
    pub all: bool,
}

#[cfg_attr(doc, doc = "`reap` arguments.")]
#[derive(Debug, Args)]
pub struct ReapArgs {
    /// Report what would be removed, and remove nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[cfg_attr(doc, doc = "`stop` arguments.")]
#[derive(Debug, Args)]
pub struct StopArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
}

#[cfg_attr(doc, doc = "`start` arguments.")]
#[derive(Debug, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
}

#[cfg_attr(doc, doc = "`pause` arguments.")]
#[derive(Debug, Args)]
pub struct PauseArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
}

#[cfg_attr(doc, doc = "`resume` arguments.")]
#[derive(Debug, Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
}

#[cfg_attr(doc, doc = "`snapshot` arguments.")]
#[derive(Debug, Args)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
    /// Name of the image to make, e.g. my-env:v1
    #[arg(long, value_name = "NAME")]
    pub tag: String,
}

#[cfg_attr(doc, doc = "`run` arguments: `up`'s, then `exec`'s, then the command.")]
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub up: UpArgs,
    /// Working directory: relative to the work dir, or absolute (any directory of the container)
    /// [default: the work dir]
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Environment variable for the command (repeatable); NAME alone passes your own value of
    /// NAME (as `docker exec -e NAME`), and is refused when NAME is unset
    #[arg(long = "env", short = 'e', value_name = "K=V|NAME")]
    pub env: Vec<String>,
    /// Time before the command's process tree is killed: seconds or a duration (30, 0.5, 500ms,
    /// 1m); 0 = none [config: exec_timeout_secs; default: 600]
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub timeout: Option<std::time::Duration>,
    /// Attach standard input to the command
    #[arg(short, long)]
    pub interactive: bool,
    /// With --format json: bytes kept of each of stdout and stderr
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub max_output: usize,
    /// With --format json: also `output`, stdout and stderr together in the order they were
    /// read (chunk by chunk; see docs/reference/json.md), capped as each stream is
    #[arg(long)]
    pub combined: bool,
    /// The command: a program and its arguments, or one shell command line (bash -c)
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

#[cfg_attr(doc, doc = "`cp` arguments.")]
#[derive(Debug, Args)]
pub struct CpArgs {
    /// The source: a path of this machine, ID:PATH, or - (a tar stream on stdin)
    #[arg(value_name = "SRC")]
    pub src: String,
    /// The destination: a path of this machine, ID:PATH, or - (a tar stream on stdout)
    #[arg(value_name = "DST")]
    pub dst: String,
    /// Act in the sandbox as this user, USER|UID[:GID] [default: the sandbox's user]
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
}

#[cfg_attr(doc, doc = "`renew` arguments.")]
#[derive(Debug, Args)]
pub struct RenewArgs {
    #[command(flatten)]
    pub sandbox: SandboxArg,
    /// New lease length from now, which later renewals keep (e.g. 30m, 2h)
    /// [default: the sandbox's TTL]
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
}

#[cfg_attr(doc, doc = "`trust` arguments.")]
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The project file, or the directory holding it [default: ./sandbox.toml]
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Stop trusting it (the file need not exist any more)
    #[arg(long, conflicts_with = "list")]
    pub forget: bool,
    /// List the trusted files, and whether each still has the content trusted
    #[arg(long, conflicts_with = "file")]
    pub list: bool,
}

#[cfg_attr(doc, doc = "`ls` arguments.")]
#[derive(Debug, Args)]
pub struct LsArgs {
    /// Redraw the list whenever it changes, until Ctrl-C
    #[arg(short, long)]
    pub watch: bool,
    /// Print only the sandboxes' IDs, one a line (as `docker ps -q`)
    #[arg(short, long, conflicts_with = "watch")]
    pub quiet: bool,
    /// With --watch: time between two looks at the sandboxes (seconds, or 500ms, 2s)
    #[arg(long, value_name = "DURATION", default_value = "1", value_parser = parse_interval, requires = "watch")]
    pub interval: std::time::Duration,
    /// Also sample each running sandbox's resource use, as `stats --no-stream` does: a `stats`
    /// object in JSON; CPU, MEM and PIDS columns in the table, and NEAR LIMIT marks
    #[arg(long, conflicts_with = "quiet")]
    pub stats: bool,
}

/// Parses a timeout: seconds or a duration, as `--ttl` takes it ([`crate::types::parse_duration`]).
fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    crate::types::parse_duration(s)
}

/// Parses `ls --interval`: seconds or a duration ([`crate::types::parse_duration`]), from
/// 0.1 s to 1 hour.
fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    let d = crate::types::parse_duration(s)?;
    if !(0.1..=3600.0).contains(&d.as_secs_f64()) {
        return Err(format!("{s} is out of range: give 0.1s to 1h"));
    }
    Ok(d)
}

#[cfg_attr(doc, doc = "`generate` arguments.")]
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// What to generate
    #[command(subcommand)]
    pub what: Generate,
}

#[cfg_attr(doc, doc = "What `generate` writes.")]
#[derive(Debug, Subcommand)]
pub enum Generate {
    /// A shell's completion script on stdout, or every shell's into DIR with --all
    #[command(after_help = "\
Examples:
  h9sandbox generate completions zsh > ~/.zfunc/_h9sandbox
  h9sandbox generate completions --all completions/")]
    Completions {
        /// The shell
        #[arg(value_enum, required_unless_present = "all", conflicts_with = "all")]
        shell: Option<clap_complete::Shell>,
        /// Write the scripts of every shell into this directory
        #[arg(long, value_name = "DIR")]
        all: Option<PathBuf>,
    },
    /// Man pages: h9sandbox.1 and one h9sandbox-SUBCOMMAND.1 per subcommand, into DIR
    #[command(after_help = "\
Examples:
  h9sandbox generate man man/
  man -l man/h9sandbox-up.1")]
    Man {
        /// Output directory (created when missing)
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}
