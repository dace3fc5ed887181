//! The in-container side of h9sandbox: the same binary, built static (see `.cargo/config.toml`),
//! bind-mounted read-only into every sandbox container at [`BIN`], where it runs as PID 1
//! ([`init`]) and wraps every command an engine's exec starts ([`wrap`]), in any image (glibc,
//! musl, busybox, `FROM scratch`). Nothing here reads host state; it imports nothing of the
//! crate but [`crate::contract`] (the protocol and the fixed paths both sides agree on), so the
//! host side can depend on it and never the reverse.
//!
//! Entry: `h9sandbox agent init …` and `h9sandbox agent exec …`, dispatched by [`main`] before the
//! host command line is parsed (they are no user commands, and `init` refuses to run unless it is
//! PID 1).

pub mod channel;
pub mod files;
pub mod forward;
pub mod init;
pub mod proxy;
pub mod pty;
pub mod seccomp;
pub mod server;
pub mod socket_relay;
pub mod stats;
pub mod supervise;
pub mod tarball;
pub mod user;
pub mod wrap;

// The protocol, the fixed paths and the entry argument: the contract's.
pub use crate::contract::{proto, ARG, BIN, ROOT};

/// Makes this process not dumpable (`prctl(PR_SET_DUMPABLE, 0)`, see `prctl(2)`): no process
/// without `CAP_SYS_PTRACE` (which no sandbox has) may then `ptrace` it or read its memory,
/// environment or descriptors through `/proc/PID`, even one running as the same user. PID 1 and
/// every supervisor call this first: a command running as the container's root has the same
/// user and capabilities as they do, and would otherwise be let in (the kernel's
/// `ptrace_may_access`). A command's own `execve` makes it dumpable again, as usual.
pub fn not_dumpable() -> std::io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(std::io::Error::from)
}

/// `h9sandbox agent …`.
#[derive(Debug, clap::Parser)]
#[command(
    name = "h9sandbox agent",
    about = "h9sandbox's in-container side (not a user command)"
)]
struct AgentCli {
    #[command(subcommand)]
    command: AgentCommand,
}

#[derive(Debug, clap::Subcommand)]
enum AgentCommand {
    /// PID 1 of a sandbox container
    Init(init::InitArgs),
    /// Run a command under the set-ID filter (the engine's exec calls this)
    Exec(wrap::ExecArgs),
    /// Supervise one command of the exec agent (the agent starts this)
    Supervise,
    /// Kill a supervised tree's processes of one user (the supervisor starts this)
    Signal(supervise::SignalArgs),
    /// Kill an exec's processes found by their marker, and their descendants
    KillMarked(supervise::KillMarkedArgs),
    /// Forward HTTP and HTTPS (CONNECT) to allowed hosts only (the allowlist sidecar)
    Proxy(proxy::ProxyArgs),
    /// Read or write a file of the container as the user it runs as (the file commands, for
    /// paths outside the work dir)
    File {
        #[command(subcommand)]
        command: files::FileCommand,
    },
    /// Carry standard input and output to the agent's socket inside the container and back
    /// (the host's way to the agent where that socket does not cross the bind mount)
    SocketRelay,
    /// Write a tar stream of a path, or extract one (`h9sandbox cp`, a copied work dir)
    Tar {
        #[command(subcommand)]
        command: tarball::TarCommand,
    },
    /// Carry standard input and output to the remote channel inside the container (the host's
    /// fallback where the channel's published port cannot be reached)
    Relay(channel::RelayArgs),
    /// Print the device and inode of a path, `DEV INO` (the host checks a mount with it)
    Stat {
        /// The path
        path: std::path::PathBuf,
    },
}

/// Runs `h9sandbox agent …` when `args` (the whole argv) asks for it; `None` otherwise.
pub fn main(args: &[std::ffi::OsString]) -> Option<i32> {
    if args.get(1).map(|a| a.as_os_str()) != Some(std::ffi::OsStr::new(ARG)) {
        return None;
    }
    use clap::Parser;
    let cli = match AgentCli::try_parse_from(&args[1..]) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return Some(if e.use_stderr() { 125 } else { 0 });
        }
    };
    Some(match &cli.command {
        AgentCommand::Init(a) => init::run(a),
        AgentCommand::Exec(a) => wrap::run(a),
        AgentCommand::Supervise => supervise::run(),
        AgentCommand::Signal(a) => supervise::signal(a),
        AgentCommand::KillMarked(a) => supervise::kill_marked(a),
        AgentCommand::Proxy(a) => proxy::run(a),
        AgentCommand::Relay(a) => channel::relay(a),
        AgentCommand::Tar { command } => tarball::run(command),
        AgentCommand::File { command } => files::run(command),
        AgentCommand::SocketRelay => socket_relay::run(),
        AgentCommand::Stat { path } => match std::fs::metadata(path) {
            Ok(m) => {
                use std::os::unix::fs::MetadataExt;
                println!("{} {}", m.dev(), m.ino());
                0
            }
            Err(e) => {
                eprintln!("h9sandbox: error: {}: {e}", path.display());
                1
            }
        },
    })
}
