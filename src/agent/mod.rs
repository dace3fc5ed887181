//! The in-container side of h9sandbox: the same binary, built static (see `.cargo/config.toml`),
//! bind-mounted read-only into every sandbox container at [`crate::contract::BIN`], where it runs as PID 1
//! ([`init`]) and wraps every command an engine's exec starts ([`wrap`]), in any image (glibc,
//! musl, busybox, `FROM scratch`). Nothing here reads host state; it imports nothing of the
//! crate but [`crate::contract`] (the protocol and the fixed paths both sides agree on), so the
//! host side can depend on it and never the reverse.
//!
//! Entry: `h9sandbox agent init …` and `h9sandbox agent exec …`, dispatched by [`main`] before the
//! host command line is parsed (they are no user commands, and `init` refuses to run unless it is
//! PID 1).

pub(crate) mod as_user;
pub(crate) mod channel;
pub(crate) mod file_helper;
pub(crate) mod forward;
pub(crate) mod init;
pub(crate) mod proxy;
pub(crate) mod pty;
pub(crate) mod seccomp;
pub(crate) mod server;
pub(crate) mod socket_relay;
pub(crate) mod stats;
pub(crate) mod supervise;
pub(crate) mod tarball;
pub(crate) mod user;
pub(crate) mod worker;
pub(crate) mod wrap;

// The protocol, the fixed paths and the entry argument: the contract's.
pub(crate) use crate::contract::{proto, ARG};

/// Makes this process not dumpable (`prctl(PR_SET_DUMPABLE, 0)`, see `prctl(2)`): no process
/// without `CAP_SYS_PTRACE` (which no sandbox has) may then `ptrace` it or read its memory,
/// environment or descriptors through `/proc/PID`, even one running as the same user. PID 1 and
/// every supervisor call this first: a command running as the container's root has the same
/// user and capabilities as they do, and would otherwise be let in (the kernel's
/// `ptrace_may_access`). A command's own `execve` makes it dumpable again, as usual.
pub(crate) fn not_dumpable() -> std::io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(std::io::Error::from)
}

/// The identity (device, inode) of the directory at `path` (absolute, no `..`), found from
/// the directory `root` one component at a time without following any symlink
/// (`openat(O_PATH | O_NOFOLLOW | O_DIRECTORY)` each: a symlink on the way is `ENOTDIR`), so
/// only a real directory at that very path answers, whoever arranged the directories above it.
/// `root` is `/` in the container (`agent stat`), or a host handle on a container's root
/// (`/proc/PID/root`). Errors: a component missing, a symlink or no directory on the way.
pub(crate) fn identity_beneath(
    root: std::os::fd::BorrowedFd<'_>,
    path: &std::path::Path,
) -> std::io::Result<(u64, u64)> {
    use rustix::fs::{openat, Mode, OFlags};
    use std::path::Component;
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut dir: Option<std::os::fd::OwnedFd> = None;
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(name) => {
                let at = match &dir {
                    Some(d) => {
                        use std::os::fd::AsFd;
                        d.as_fd()
                    }
                    None => root,
                };
                dir = Some(openat(at, name, flags, Mode::empty())?);
            }
            Component::ParentDir | Component::Prefix(_) => {
                return Err(std::io::Error::other("the path holds `..`"))
            }
        }
    }
    let st = match &dir {
        Some(d) => rustix::fs::fstat(d)?,
        None => rustix::fs::fstat(root)?,
    };
    Ok((st.st_dev, st.st_ino))
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
    /// Kill an exec's processes found by their marker, and their descendants
    KillMarked(supervise::KillMarkedArgs),
    /// Forward HTTP and HTTPS (CONNECT) to allowed hosts only (the allowlist sidecar)
    Proxy(proxy::ProxyArgs),
    /// Read or write a file of the container as the user it runs as (the file commands, for
    /// paths outside the work dir)
    File {
        #[command(subcommand)]
        command: file_helper::FileCommand,
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
    /// Empty these directories, following no symlink (the host's clean-up of a run directory
    /// holding files of the sandbox's root)
    Purge {
        /// The directories (each kept, emptied)
        #[arg(required = true)]
        dirs: Vec<std::path::PathBuf>,
    },
    /// Print the device and inode of a directory, `DEV INO`, reached through no symlink (the
    /// host checks a mount with it)
    Stat {
        /// The path
        path: std::path::PathBuf,
    },
}

/// Runs `h9sandbox agent …` when `args` (the whole argv) asks for it; `None` otherwise.
pub(crate) fn main(args: &[std::ffi::OsString]) -> Option<i32> {
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
        AgentCommand::KillMarked(a) => supervise::kill_marked(a),
        AgentCommand::Proxy(a) => proxy::run(a),
        AgentCommand::Relay(a) => channel::relay(a),
        AgentCommand::Tar { command } => tarball::run(command),
        AgentCommand::File { command } => file_helper::run(command),
        AgentCommand::SocketRelay => socket_relay::run(),
        AgentCommand::Purge { dirs } => {
            let mut status = 0;
            for d in dirs {
                let entries = match std::fs::read_dir(d) {
                    Ok(e) => e,
                    Err(e) => {
                        eprintln!("h9sandbox: error: {}: {e}", d.display());
                        status = 1;
                        continue;
                    }
                };
                for e in entries.flatten() {
                    // `remove_dir_all` follows no symlink (it removes the link itself).
                    let path = e.path();
                    let gone = match e.file_type() {
                        Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
                        _ => std::fs::remove_file(&path),
                    };
                    if let Err(err) = gone {
                        eprintln!("h9sandbox: error: {}: {err}", path.display());
                        status = 1;
                    }
                }
            }
            status
        }
        AgentCommand::Stat { path } => match std::fs::File::open("/").and_then(|root| {
            use std::os::fd::AsFd;
            identity_beneath(root.as_fd(), path)
        }) {
            Ok((dev, ino)) => {
                println!("{dev} {ino}");
                0
            }
            Err(e) => {
                eprintln!("h9sandbox: error: {}: {e}", path.display());
                1
            }
        },
    })
}
