//! Command-line types (clap derive). Only parsing lives here; the subcommands' modules of
//! [`crate::cli`] do the work. Every doc comment here is help text: `tests/it/generated.rs` compares
//! the help, completions and man pages made from it with the committed ones. So rustdoc's
//! link and HTML checks do not apply to them: `USER[:GID]` and `<short id>` are help text.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod commands;

pub use commands::*;

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

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
  h9sandbox bootstrap \"$id\" -- pip install -e .  install dependencies once (long timeout)
  h9sandbox exec \"$id\" -- make test            run a command in it
  h9sandbox exec \"$id\" --format json -- ls     capture output, status and timing as JSON
  sub=$(h9sandbox up --parent \"$id\")           a sub-sandbox for a sub-agent, never looser
  h9sandbox write \"$id\" notes.txt < notes.txt  replace a file of the work dir atomically
  h9sandbox read \"$id\" out/report.txt          print one; /etc/os-release: the container's
  h9sandbox ls --watch                         list sandboxes and their states, live
  h9sandbox mcp --auto-up                      serve the tools to an agent over MCP (stdio)
  h9sandbox down \"$id\"                         stop and remove it (and its sub-sandboxes)

Exit status: 0 success, 1 failure, 2 bad usage; `exec`, `run`, `bootstrap` and `shell` pass the
command's status through (128+N for signal N), 124 on timeout and 125 when h9sandbox itself failed.";

/// The top-level `--help` epilogue: the examples and the exit status, then the environment
/// variables read (every configuration key's `H9SANDBOX_<KEY>`, from [`crate::config::KEYS`]).
fn top_help() -> String {
    let keys: Vec<String> = crate::config::KEYS
        .iter()
        .filter(|k| !crate::config::USER_FILE_ONLY_KEYS.contains(&k.name))
        .map(|k| format!("H9SANDBOX_{}", k.name.to_ascii_uppercase()))
        .collect();
    format!(
        "{EXAMPLES}\n\nEnvironment: H9SANDBOX_CONFIG (the configuration file), and one variable per configuration key (precedence: defaults < files < environment < flags): {}. Also SANDBOX_IMAGE, SANDBOX_CPUS, SANDBOX_MEMORY, SANDBOX_BOOTSTRAP_CMD, SANDBOX_BOOTSTRAP_TIMEOUT_SECS (when the H9SANDBOX_ one is unset), SANDBOX_ENABLED=false (engine local), NO_COLOR, HOME, XDG_CONFIG_HOME, XDG_STATE_HOME; see ENVIRONMENT in `man h9sandbox`.",
        keys.join(", ")
    )
}

/// Completion of an argument naming a sandbox: the live sandboxes' IDs and names, asked of the
/// binary at completion time (clap_complete's dynamic completion, see
/// [`crate::cli::generate::sandbox_candidates`]).
fn sandboxes() -> clap_complete::engine::ArgValueCandidates {
    clap_complete::engine::ArgValueCandidates::new(crate::cli::generate::sandbox_candidates)
}

// For rustdoc alone, as the subcommands' argument structs (see `commands.rs`).
#[cfg_attr(
    doc,
    doc = "The one sandbox a subcommand acts on, flattened into each such subcommand's arguments (its
first positional, `<ID>`, completed with the live sandboxes' IDs and names)."
)]
#[derive(Debug, Args)]
pub struct SandboxArg {
    /// Sandbox ID, unique ID prefix, or name
    #[arg(add = sandboxes())]
    pub id: String,
}

/// h9sandbox command line.
#[derive(Debug, Parser)]
#[command(name = "h9sandbox", version, about = ABOUT, after_help = top_help())]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand accepts (listed apart, under "Global options", in every `--help`).
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Configuration file, used alone (instead of $XDG_CONFIG_HOME/h9sandbox/config.toml and
    /// ./sandbox.toml); the environment and the flags still override it. Without it: your
    /// $XDG_CONFIG_HOME/h9sandbox/config.toml, with, for `up` and `mcp`, a ./sandbox.toml you
    /// trusted layered over it (`h9sandbox trust`)
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

impl Cli {
    /// The whole command tree with every subcommand's arguments made (clap's
    /// `Command::build`), for walking it: `Cli::command()` leaves them to be made when the
    /// subcommand is used ([`Command`] is deferred), so its subcommands show no arguments and
    /// no subcommands of their own. Building also adds each command's `--help` (and `help`).
    pub fn tree() -> clap::Command {
        use clap::CommandFactory;
        let mut cmd = Cli::command();
        cmd.build();
        cmd
    }

    /// Whether `name` is one of the subcommands.
    pub fn is_subcommand(name: &str) -> bool {
        use clap::CommandFactory;
        Cli::command().find_subcommand(name).is_some()
    }
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

/// Subcommands. Each one's arguments are made only when it is the one used (`defer`: building
/// all of them cost every command about 0.2 ms of its start); see `commands.rs` for what this
/// asks of the argument structs' doc comments.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Start a sandbox: a hardened container with the work directory bind-mounted (or copied in)
    #[command(after_help = "\
Examples:
  h9sandbox up                                   sandbox on the current directory, default image
  h9sandbox up --workdir ./proj --image debian:12 --memory 1g --network none
  h9sandbox up --name ci-job-42 --label job=42 --format json
  h9sandbox up --bootstrap 'pip install -e .'    set up once; a failure only warns
  h9sandbox up --bootstrap 'make deps' --bootstrap-required   a failure removes it and fails
  h9sandbox up --parent 3f2a --memory 256m       sub-sandbox: parent's image, limits, work dir
  h9sandbox up --owner-pid $$ --ttl 30m          removed once this shell exits or after 30 minutes

In a Makefile, tie a sandbox that several recipe lines use to make itself (each line runs in a
shell of its own, which exits at once; `parent` would be that shell), and name it:
  sandbox: ; h9sandbox up --name build-$$PPID --owner-pid $$PPID --ttl 2h
  test: sandbox ; h9sandbox exec build-$$PPID -- ./test.sh
It goes within seconds of make's exit, on success, failure or Ctrl-C alike: a sandbox with an
owner gets an owner watcher, a detached process that removes it once the owner has exited or
its lease has run out (config watch_owner). `up` warns when the owner has already exited by the
time it returns.

Prints the sandbox ID (a UUID; any unique prefix names it), or the whole record with --format json.
A sub-sandbox (--parent) may only tighten its parent's limits; `down` of the parent removes it.
The engine is config `engine` (H9SANDBOX_ENGINE, --engine): docker (default), podman, swarm (a
service on a Docker Swarm node: docs/swarm.md), or local, which runs commands directly on the host
WITHOUT ISOLATION (so does `fallback = \"local\"` when the engine is unreachable); `up` warns on
stderr when a sandbox is local.")]
    Up(UpArgs),
    /// Run a command in a sandbox: a program and its arguments, or one shell command line
    #[command(
        override_usage = "h9sandbox exec [OPTIONS] <ID> -- <COMMAND>...\n       h9sandbox exec [OPTIONS] <ID> --command-file <FILE>",
        after_help = "\
Examples:
  h9sandbox exec 3f2a -- ls -la                   a program and its arguments, run exactly
  h9sandbox exec 3f2a -- 'make && make test'      ONE argument: a shell command line (bash -c)
  h9sandbox exec 3f2a --timeout 30 -- make test   kill the whole process tree after 30 s (exit 124)
  h9sandbox exec 3f2a --cwd src --env RUST_LOG=debug -- cargo test
  echo data | h9sandbox exec 3f2a -i -- wc -c      attach stdin (never attached without -i)
  h9sandbox exec 3f2a --format json -- 'ls; echo done >&2'
  h9sandbox exec 3f2a --detach -- 'python -m http.server'   in the background: prints a handle
  h9sandbox exec -it 3f2a -- vi notes.txt          on a terminal, as `docker exec -it`

Two or more words after `--` are a program and its arguments, passed as they are (no shell, as
`docker exec` does); a single word is a command line for `bash -c` (`sh -c` without bash).

With -t the command gets a terminal of its own in the sandbox (your window's size, following
it); with -i your keystrokes go to it (your terminal in raw mode until it ends: Ctrl-C, Ctrl-Z
and Ctrl-\\ reach the command as a terminal delivers them). -t needs a terminal on our side;
--force-tty gives the command one anyway (for programs that drive a terminal themselves).

Exit status: the command's (128+N when killed by signal N), 124 on timeout, 125 when h9sandbox
itself failed (unknown sandbox, engine down, container gone)."
    )]
    Exec(ExecArgs),
    /// Open an interactive login shell in a sandbox, on a terminal (bash, else sh)
    #[command(after_help = "\
Examples:
  h9sandbox shell 3f2a                            as the sandbox's user, in the work dir
  h9sandbox shell 3f2a --user root --cwd /etc     as root, elsewhere
  h9sandbox shell 3f2a --timeout 1h               the session's tree is killed after an hour

The same as `h9sandbox exec -it ID -- 'exec bash -l'` (sh -l where the image has no bash), with
no timeout unless --timeout gives one. `exit` or Ctrl-D ends it, with the shell's exit status.

Exit status: the shell's (128+N when killed by signal N), 124 on timeout, 125 when h9sandbox
itself failed (unknown sandbox, no terminal, sandbox stopped, engine down).")]
    Shell(ShellArgs),
    /// List the commands running in a sandbox's background (exec --detach)
    #[command(after_help = "\
Examples:
  h9sandbox ps 3f2a
  h9sandbox ps 3f2a --format json                 [{handle, pid, command, started, exit_code, running}]")]
    Ps(PsArgs),
    /// Print the output of a background command (exec --detach), or the egress proxy's decisions
    #[command(after_help = "\
Examples:
  h9sandbox logs 3f2a 9c1e04ab                    what it wrote so far (stdout, then stderr)
  h9sandbox logs 3f2a 9c1e04ab --follow           and what it writes, until its processes exit
  h9sandbox logs 3f2a --network --format json     network = \"allowlist\": every request's host,
                                                  decision (allowed/denied/failed/bad) and bytes

Each stream keeps its last 8 to 16 MiB (log files in the sandbox's scratch volume).")]
    Logs(LogsArgs),
    /// Kill a background command's whole process tree (exec --detach)
    #[command(after_help = "\
Examples:
  h9sandbox kill 3f2a 9c1e04ab")]
    Kill(KillArgs),
    /// Run a one-time setup command in a sandbox (streams its output; recorded in the sandbox)
    #[command(
        override_usage = "h9sandbox bootstrap [OPTIONS] <ID> [-- <COMMAND>...]",
        after_help = "\
Examples:
  h9sandbox bootstrap 3f2a -- pip install -e .
  h9sandbox bootstrap 3f2a --timeout 1800 -- 'apt-get update && apt-get install -y gcc'
  h9sandbox bootstrap 3f2a                        again: bootstrap_cmd, else the last one run
  h9sandbox bootstrap 3f2a --format json -- make deps   output on stderr, result as JSON

The command runs in the work dir with TMPDIR on the sandbox's exec-capable scratch dir
(/var/tmp), and its result {cmd, exit_code, duration_ms, finished_at} is recorded in the sandbox
(`h9sandbox ls --format json`).

Exit status: the command's (128+N when killed by signal N), 124 on timeout, 125 when h9sandbox
itself failed."
    )]
    Bootstrap(BootstrapArgs),
    /// Stop and remove sandboxes and their sub-sandboxes (always removes, even when the stop fails)
    #[command(after_help = "\
Examples:
  h9sandbox down 3f2a                             also removes 3f2a's sub-sandboxes, first
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
    /// Copy files or directories between a sandbox and this machine (docker cp's syntax)
    #[command(after_help = "\
Examples:
  h9sandbox cp ./src 3f2a:/opt/src                this machine's ./src into the sandbox
  h9sandbox cp 3f2a:out/report.html .             a file of its work dir (relative paths start there)
  h9sandbox cp 3f2a:/var/log - | tar t            a tar stream on stdout
  tar c data | h9sandbox cp - 3f2a:/srv           a tar stream from stdin, into a directory

ID:PATH names a path of a sandbox; `-` a tar stream. A destination that is a directory receives
the source under its own name; one that does not exist becomes the source. Works whether the
work dir is mounted or copied (a copied work dir changes on this machine only by cp). Modes,
times and symlinks are kept (none is followed); set-ID bits, device files and FIFOs are not
copied; names that lead out of the destination are refused. At most copy_max_bytes.")]
    Cp(CpArgs),
    /// Extend a sandbox's lease (up --ttl): it then expires TTL from now
    #[command(after_help = "\
Examples:
  h9sandbox renew 3f2a                            another lease of the length given to up --ttl
  h9sandbox renew 3f2a --ttl 2h                   a 2-hour lease from now (and from now on)
  h9sandbox renew 3f2a --format json              the updated record

Prints the new end of the lease (RFC 3339 UTC). Only touches the state file: it works while the
engine is unreachable. A Stopping or Failed sandbox cannot be renewed.")]
    Renew(RenewArgs),
    /// Trust a project's ./sandbox.toml, its exact content, so that `up` and `mcp` use it
    #[command(after_help = "\
Examples:
  cat sandbox.toml && h9sandbox trust             review it, then trust it (up and mcp use it)
  h9sandbox trust ../other-project                 the sandbox.toml of another directory
  h9sandbox trust --list                           what is trusted, and whether it changed since
  h9sandbox trust --forget                         stop using ./sandbox.toml

A project's sandbox.toml usually lies in a work dir, which code in the sandbox can write. So `up`
and `mcp` ignore it (with a warning) until you trust it, and again whenever its content changes;
no other command reads it. Trust is kept per path and SHA-256 of the content, in the state
directory. A file with a bad value, an unknown key, a key that acts on the host (engine,
engine_bin, fallback, runtime, state_dir, docker_context, workdir_mode, registry) or
allowed_workdirs cannot be trusted.")]
    Trust(TrustArgs),
    /// Keep warm pools of sandboxes, made before they are asked for: `up --pool` claims one at once
    #[command(after_help = "\
Examples:
  h9sandbox pool create py --size 4 --image python:3.12 --workdir-mode copy
  h9sandbox up --pool py --owner-pid $$ --ttl 30m
  h9sandbox pool ls
  h9sandbox pool rm py

`up --pool NAME` takes a Running sandbox of the pool (no engine call; a copied work dir's content
is copied in then) and starts a filler in the background that makes the next one. With none
ready it waits for the filler, up to start_timeout_secs + 30 s.")]
    Pool(PoolArgs),
    /// Stop a sandbox's container, keeping it and its scratch volume (see `start`)
    #[command(after_help = "\
Examples:
  h9sandbox stop 3f2a
  h9sandbox start 3f2a                            bring it back: same container, scratch, setup

Its processes end (SIGTERM, SIGKILL after stop_timeout_secs); what they installed stays. `exec`
on a stopped sandbox fails (exit 125) and names `start`.")]
    Stop(StopArgs),
    /// Start a stopped sandbox again (also after a daemon restart or a reboot)
    #[command(after_help = "\
Examples:
  h9sandbox start 3f2a
  h9sandbox start 3f2a --format json             the record

Checks again that its limits are in force and that its work dir is the one `up` checked, and
brings its agent back. A sandbox whose container was stopped outside h9sandbox (docker stop,
a daemon restart, a reboot) comes back the same way.")]
    Start(StartArgs),
    /// Freeze every process of a sandbox (see `resume`)
    #[command(after_help = "\
Examples:
  h9sandbox pause 3f2a
  h9sandbox resume 3f2a

`exec` on a paused sandbox fails (exit 125) and says it is paused.")]
    Pause(PauseArgs),
    /// Thaw a paused sandbox
    #[command(after_help = "\
Examples:
  h9sandbox resume 3f2a")]
    Resume(ResumeArgs),
    /// Commit a sandbox's file system (not its work dir) to a local image
    #[command(after_help = "\
Examples:
  h9sandbox snapshot 3f2a --tag my-env:v1         after installing what the task needs
  h9sandbox up --image my-env:v1                  start new sandboxes from it, many times

The image holds what the sandbox changed outside its work dir and scratch volume (packages,
tools), with the configuration of the image it came from (entrypoint, command, user).")]
    Snapshot(SnapshotArgs),
    /// Create a sandbox, run one command in it, remove it: the `docker run --rm` of sandboxes
    #[command(
        override_usage = "h9sandbox run [OPTIONS] -- <COMMAND>...",
        after_help = "\
Examples:
  h9sandbox run -- make test                      exit with make's status; nothing left behind
  h9sandbox run --image debian:12 --memory 1g --network none -- ./ci.sh
  h9sandbox run --bootstrap 'pip install -e .' --timeout 30m -- pytest -q
  h9sandbox run --format json -- 'ls; echo done >&2'   {id, exit_code, stdout, stderr, ...}

Takes `up`'s options, then `exec`'s (--cwd, --env, --timeout, -i), then the command. The sandbox
is removed whatever happens: the command ends, fails or times out, h9sandbox fails, or SIGINT /
SIGTERM / SIGHUP arrive; it is tied to this process (--owner-pid), so `reap` removes it even if
h9sandbox is killed with SIGKILL.

Exit status: the command's (128+N when killed by signal N), 124 on timeout, 125 when h9sandbox
itself failed."
    )]
    Run(RunArgs),
    /// List sandboxes with their real container state, sub-sandboxes under their parent
    #[command(after_help = "\
Examples:
  h9sandbox ls
  h9sandbox ls --watch                            redraw as states change, until Ctrl-C
  h9sandbox ls --format json | jq -r '.[] | select(.state == \"Running\") | .id'
  h9sandbox ls --watch --format json              one JSON array per line, on every change")]
    Ls(LsArgs),
    /// Forward local ports to ports on a sandbox's loopback, through its agent (kubectl's shape)
    #[command(
        name = "port-forward",
        after_help = "\
Examples:
  h9sandbox port-forward 3f2a 8000                127.0.0.1:8000 to port 8000 in the sandbox
  h9sandbox port-forward 3f2a 8080:80 :5432       8080 to 80, and a free local port to 5432
  h9sandbox port-forward 3f2a 8000 --format json  prints {id, forwards: [{address, port}]}
  h9sandbox port-forward 3f2a 8000 --timeout 10m  ends by itself after 10 minutes

Listens on 127.0.0.1 only, and carries each connection through the sandbox's agent to
127.0.0.1:PORT inside it (the sandbox's own loopback: nothing else is reachable), so it works
with network none and allowlist too. Prints where it listens once it does, then runs until
Ctrl-C, --timeout, or `h9sandbox down` of the sandbox. A port nothing listens on inside resets
the client's connection. `ls --format json` lists the forwards."
    )]
    PortForward(PortForwardArgs),
    /// Show sandboxes' live resource use: CPU, memory, processes, disk, network
    #[command(after_help = "\
Examples:
  h9sandbox stats                                 every running sandbox, live on a terminal
  h9sandbox stats 3f2a --no-stream                one sample, then exit
  h9sandbox stats --format json --watch           one JSON array per line, every second

Read inside each sandbox by its agent, from its cgroup (v1 or v2): CPU as a percentage of the
sandbox's CPU limit, memory in use (as `docker stats` counts it) of its limit and the most used
at once, processes of the process limit, disk used by the scratch dir (/var/tmp), and bytes
received and sent on its network. A sandbox at 90% or more of its memory or process limit is
marked (NEAR LIMIT; `near_limit` in JSON). Streams (--watch) by default on a terminal; prints
once otherwise or with --no-stream.")]
    Stats(StatsArgs),
    /// Print a file of the sandbox, in its work dir or anywhere in the container
    #[command(after_help = "\
Examples:
  h9sandbox read 3f2a src/main.rs                 raw bytes to stdout (binary-safe)
  h9sandbox read 3f2a build.log --max-bytes 4096  only the first 4 KiB
  h9sandbox read 3f2a out.png --format json       {path, size, content_base64, truncated}

Paths are relative to the work dir, or absolute inside it (a mounted work dir is read on the
host side, a copied one inside the container, by the same rules; symlinks that stay inside are
followed, '..' above the work dir and symlinks that lead out of it are refused, exit 1),
or any other absolute path: the container's file, read inside it (the container must run). Always
as the sandbox's user, or --user: a file it may not read is refused. Plain read streams
any size; --format json holds the content in memory, so a file over json_max_bytes (16 MiB by
default; H9SANDBOX_JSON_MAX_BYTES) is refused (exit 1) unless --max-bytes takes its start.")]
    Read(ReadArgs),
    /// Replace a file of the sandbox atomically with stdin or --from FILE
    #[command(after_help = "\
Examples:
  echo 'print(1)' | h9sandbox write 3f2a src/x.py          create or replace
  h9sandbox write 3f2a data/big.bin --from ./big.bin --parents
  h9sandbox write 3f2a run.sh --from ./run.sh --mode 755
  echo more | h9sandbox write 3f2a notes.txt --append

The content goes to a temporary file next to the target, which is then renamed over it: readers
see the old or the new file, and a failed write keeps the old content. Paths as for `read`.")]
    Write(WriteArgs),
    /// Replace text in a file of the sandbox (exactly one occurrence, or --all)
    #[command(after_help = "\
Examples:
  h9sandbox edit 3f2a src/lib.rs --old 'fn old_name(' --new 'fn new_name('
  h9sandbox edit 3f2a Cargo.toml --old 'version = \"0.1.0\"' --new 'version = \"0.2.0\"'
  h9sandbox edit 3f2a notes.txt --old TODO --new DONE --all --format json

Fails (exit 1, naming the count) when --old occurs 0 times, or more than once without --all.
The file is replaced atomically and keeps its mode and owner. Paths as for `read`.")]
    Edit(EditArgs),
    /// Serve the sandbox tools to an AI agent over the Model Context Protocol (stdio)
    #[command(after_help = "\
Examples:
  h9sandbox mcp --auto-up                         one sandbox on the current directory per session
  h9sandbox mcp --workdir ~/proj --image python:3.12-slim --auto-up
  h9sandbox mcp                                   the agent makes sandboxes with sandbox_up
  h9sandbox mcp --all-sandboxes                   the tools also reach sandboxes made elsewhere

An MCP client starts it as a subprocess (its configuration: command `h9sandbox`, args
[\"mcp\", \"--auto-up\"]) and calls the tools sandbox_up, sandbox_exec, sandbox_spawn, sandbox_ps,
sandbox_logs, sandbox_kill, sandbox_read, sandbox_write, sandbox_edit, sandbox_list, sandbox_down
(and sandbox_port_forward, with --port-forward; docs/mcp.md has each one's arguments); each takes
an optional `id`, by default the session's sandbox (made by --auto-up or by the last sandbox_up). They act only on the sandboxes the session
made and their sub-sandboxes, unless --all-sandboxes. stdout carries protocol messages only;
warnings and -v output go to stderr. The session's sandboxes are removed when the client
disconnects (stdin closes) or on SIGTERM/SIGINT/SIGHUP; if the server is killed, their owner
watcher removes them within seconds (with watch_owner = false, `reap` does).
Output of sandbox_exec is capped per stream (config mcp_max_output_bytes, default 30000), keeping
its start and end. A message over 16 MiB is answered with a JSON-RPC error naming the limit.

Exit status: 0 when the session ended, 1 when the server could not start (or could not remove
the session's sandboxes).")]
    Mcp(McpArgs),
    /// Generate shell completion scripts and man pages from this command line's definition
    #[command(
        hide = true,
        after_help = "\
Examples:
  h9sandbox generate completions bash > ~/.local/share/bash-completion/completions/h9sandbox
  h9sandbox generate completions --all completions/
  h9sandbox generate man man/

The committed completions/ and man/ are regenerated with `H9SANDBOX_BLESS=1 cargo test --test it generated::`."
    )]
    Generate(GenerateArgs),
}

impl Command {
    /// The subcommand's name, as typed.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Up(_) => "up",
            Command::Exec(_) => "exec",
            Command::Shell(_) => "shell",
            Command::PortForward(_) => "port-forward",
            Command::Stats(_) => "stats",
            Command::Ps(_) => "ps",
            Command::Logs(_) => "logs",
            Command::Kill(_) => "kill",
            Command::Bootstrap(_) => "bootstrap",
            Command::Down(_) => "down",
            Command::Ls(_) => "ls",
            Command::Generate(_) => "generate",
            Command::Read(_) => "read",
            Command::Write(_) => "write",
            Command::Edit(_) => "edit",
            Command::Reap(_) => "reap",
            Command::Renew(_) => "renew",
            Command::Cp(_) => "cp",
            Command::Stop(_) => "stop",
            Command::Start(_) => "start",
            Command::Pause(_) => "pause",
            Command::Resume(_) => "resume",
            Command::Snapshot(_) => "snapshot",
            Command::Run(_) => "run",
            Command::Mcp(_) => "mcp",
            Command::Trust(_) => "trust",
            Command::Pool(_) => "pool",
        }
    }
}
