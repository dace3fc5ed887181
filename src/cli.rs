//! Command-line types (clap derive). Only parsing lives here; `commands` does the work.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::config::Network;

/// Output format of every subcommand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// For people: a table, or plain lines.
    #[default]
    Table,
    /// For programs: one JSON document on stdout.
    Json,
}

const ABOUT: &str = "Hardened, throw-away Docker sandboxes for agents, scripts and CI jobs";

const EXAMPLES: &str = "\
Examples:
  id=$(h9sandbox up --image ubuntu:22.04)      start a sandbox on the current directory
  h9sandbox exec \"$id\" -- make test            run a command in it
  h9sandbox exec \"$id\" --format json -- ls     capture output, status and timing as JSON
  h9sandbox ls                                 list sandboxes and their states
  h9sandbox down \"$id\"                         stop and remove it

Exit status: 0 success, 1 failure, 2 bad usage; `exec` passes the command's status through
(128+N for signal N), 124 on timeout and 125 when h9sandbox itself failed.";

/// h9sandbox command line.
#[derive(Debug, Parser)]
#[command(name = "h9sandbox", version, about = ABOUT, after_help = EXAMPLES)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand accepts.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Configuration file (default: ./sandbox.toml, then $XDG_CONFIG_HOME/h9sandbox/config.toml)
    #[arg(long, global = true, env = "H9SANDBOX_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Output format
    #[arg(long, global = true, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Same as --format json
    #[arg(long, global = true)]
    pub json: bool,
    /// Print every engine command line to stderr before running it
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub verbose: u8,
}

impl GlobalArgs {
    /// The effective format (`--json` wins).
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else {
            self.format
        }
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a sandbox: a hardened container with the work directory bind-mounted
    #[command(after_help = "\
Examples:
  h9sandbox up                                   sandbox on the current directory, default image
  h9sandbox up --workdir ./proj --image debian:12 --memory 1g --network none
  h9sandbox up --name ci-job-42 --label job=42 --format json
  h9sandbox up --owner-pid $$ --ttl 30m          reaped once this shell exits or after 30 minutes

Prints the sandbox ID (a UUID; any unique prefix names it), or the whole record with --format json.")]
    Up(UpArgs),
    /// Run a shell command in a sandbox (bash -c, or sh -c without bash)
    #[command(after_help = "\
Examples:
  h9sandbox exec 3f2a -- ls -la                   stream output; exit with the command's status
  h9sandbox exec 3f2a --timeout 30 -- make test   kill the whole process tree after 30 s (exit 124)
  h9sandbox exec 3f2a --cwd src --env RUST_LOG=debug -- cargo test
  echo data | h9sandbox exec 3f2a -i -- wc -c      attach stdin (never attached without -i)
  h9sandbox exec 3f2a --format json -- 'ls; echo done >&2'

Exit status: the command's (128+N when killed by signal N), 124 on timeout, 125 when h9sandbox
itself failed (unknown sandbox, engine down, container gone).")]
    Exec(ExecArgs),
    /// Stop and remove sandboxes (always removes, even when the stop fails)
    #[command(after_help = "\
Examples:
  h9sandbox down 3f2a
  h9sandbox down 3f2a 9b1c
  h9sandbox down --all")]
    Down(DownArgs),
    /// Remove abandoned sandboxes of this state directory, and say what and why
    #[command(after_help = "\
Examples:
  h9sandbox reap --dry-run                        show what would be removed
  h9sandbox reap                                  remove it
  h9sandbox reap --format json                    [{id, name, container, action, reason, detail}]

Removes: containers of this state directory without a record; records whose container is gone;
sandboxes whose owner process (up --owner-pid) has exited or whose lease (up --ttl) has run out;
Pending records whose `up` died; Stopping records whose `down` died. Never touches containers of
another state directory, a sandbox a live process answers for, or one whose lease runs.
Running it twice is a no-op. `up` runs it too, alongside its own start (config reap_on_up).")]
    Reap(ReapArgs),
    /// Extend a sandbox's lease (up --ttl): it then expires TTL from now
    #[command(after_help = "\
Examples:
  h9sandbox renew 3f2a                            another lease of the length given to up --ttl
  h9sandbox renew 3f2a --ttl 2h                   a 2-hour lease from now (and from now on)
  h9sandbox renew 3f2a --format json              the updated record

Prints the new end of the lease (RFC 3339 UTC). Only touches the state file: it works while the
engine is unreachable. A Stopping or Failed sandbox cannot be renewed.")]
    Renew(RenewArgs),
    /// List sandboxes with their real container state
    #[command(after_help = "\
Examples:
  h9sandbox ls
  h9sandbox ls --format json | jq -r '.[] | select(.state == \"Running\") | .id'")]
    Ls(LsArgs),
}

/// `up` arguments. Unset options come from the configuration.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Host directory bind-mounted at the same path [default: current directory]
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Image to run [config: image]
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Container name [default: h9sandbox-<short id>]
    #[arg(long)]
    pub name: Option<String>,
    /// CPU limit in cores [config: cpus]
    #[arg(long, value_name = "N")]
    pub cpus: Option<String>,
    /// Memory limit, e.g. 512m or 2g [config: memory]
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,
    /// Maximum number of processes [config: pids_limit]
    #[arg(long, value_name = "N")]
    pub pids_limit: Option<String>,
    /// Network mode [config: network]
    #[arg(long, value_enum)]
    pub network: Option<Network>,
    /// Extra label on the container and record (repeatable)
    #[arg(long = "label", value_name = "K=V")]
    pub labels: Vec<String>,
    /// Tie the sandbox to a process: once it exits, `reap` removes the sandbox. A PID, or
    /// `parent` (the process that started h9sandbox) [default: none]
    #[arg(long, value_name = "PID|parent")]
    pub owner_pid: Option<String>,
    /// Lease: `reap` removes the sandbox this long after it started, unless `renew`ed
    /// (e.g. 90s, 30m, 2h, 1d) [default: none]
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
}

/// `exec` arguments.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Sandbox ID, unique ID prefix, or name
    pub id: String,
    /// Working directory, relative to the work dir or absolute inside it [default: the work dir]
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Environment variable for the command (repeatable)
    #[arg(long = "env", short = 'e', value_name = "K=V")]
    pub env: Vec<String>,
    /// Seconds before the command's process tree is killed; 0 = none [config: exec_timeout_secs]
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Attach standard input to the command
    #[arg(short, long)]
    pub interactive: bool,
    /// With --format json: bytes kept of each of stdout and stderr
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub max_output: usize,
    /// The command; words are joined with spaces and run by `bash -c`
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

/// `down` arguments.
#[derive(Debug, Args)]
pub struct DownArgs {
    /// Sandbox IDs, unique ID prefixes, or names
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub ids: Vec<String>,
    /// Every sandbox of this state directory
    #[arg(long)]
    pub all: bool,
}

/// `reap` arguments.
#[derive(Debug, Args)]
pub struct ReapArgs {
    /// Report what would be removed, and remove nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// `renew` arguments.
#[derive(Debug, Args)]
pub struct RenewArgs {
    /// Sandbox ID, unique ID prefix, or name
    pub id: String,
    /// New lease length from now, which later renewals keep (e.g. 30m, 2h)
    /// [default: the sandbox's TTL]
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
}

/// `ls` arguments.
#[derive(Debug, Args)]
pub struct LsArgs {}
