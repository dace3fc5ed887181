//! PID 1 of every sandbox container (`h9sandbox agent init`), in place of `--init` + `sleep`.
//!
//! It runs as the container's root, before anything else: makes the sandbox user known
//! ([`super::user::prepare`]), installs the set-ID filter ([`super::seccomp`]) on itself, so that
//! every process of the container inherits it, then waits: it reaps every zombie reparented to
//! it (what `tini` does for `--init`), and exits at once on SIGTERM, SIGINT or SIGHUP, which ends
//! the container (the kernel kills every other process of the PID namespace with its init), so
//! `docker stop` returns without waiting out its grace period. Signals without a handler are
//! ignored by a namespace's init, so nothing inside can kill it.

use std::io::Write;

use super::{seccomp, server, user};

/// Options of `h9sandbox agent init`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct InitArgs {
    /// The user commands run as, `UID:GID`.
    #[arg(long, value_name = "UID:GID")]
    pub user: String,
    /// Login name for that user when the image has none for its UID.
    #[arg(long, value_name = "NAME")]
    pub user_name: Option<String>,
    /// Relay 127.0.0.1:3128 to the allowlist proxy's socket (network = "allowlist")
    #[arg(long)]
    pub proxy_relay: bool,
    /// Read the remote channel's secret (token, the agent's key, the host's fingerprint) from
    /// standard input before anything else runs, and serve the channel
    #[arg(long, requires = "channel", conflicts_with = "secret_file")]
    pub secret_stdin: bool,
    /// Read the remote channel's secret from this file instead (an engine's secret, as a swarm
    /// service's `/run/secrets/NAME`, readable by root only), and serve the channel
    #[arg(long, value_name = "PATH", requires = "channel")]
    pub secret_file: Option<std::path::PathBuf>,
    /// Where the remote channel listens (TLS over TCP), `IP:PORT`
    #[arg(long, value_name = "IP:PORT")]
    pub channel: Option<String>,
    /// Set this rlimit (`nofile` or `nproc`, soft and hard) on PID 1 before anything runs, so
    /// that every process of the container inherits it: for an engine that cannot pass
    /// `--ulimit` itself (a swarm service); repeatable
    #[arg(long, value_name = "NAME=N")]
    pub rlimit: Vec<String>,
}

/// Prints `msg` to stderr (the container's log, `docker logs`) as `h9sandbox-init: msg`.
fn log(msg: &str) {
    let _ = writeln!(std::io::stderr(), "h9sandbox-init: {msg}");
}

/// Runs PID 1; returns only on failure to start (the exit status), or with 0 on a stop signal.
pub(crate) fn run(args: &InitArgs) -> i32 {
    if rustix::process::getpid().as_raw_nonzero().get() != 1 {
        log("refusing to run: `agent init` is the PID 1 of a sandbox container, not a command");
        return 2;
    }
    if let Err(e) = super::not_dumpable() {
        log(&format!(
            "cannot make PID 1 not dumpable: {e}; refusing to run the sandbox"
        ));
        return 1;
    }
    for r in &args.rlimit {
        if let Err(e) = set_rlimit(r) {
            log(&format!("--rlimit {r}: {e}; refusing to run the sandbox"));
            return 1;
        }
    }
    let Some((uid, gid)) = parse_ids(&args.user) else {
        log(&format!("--user {}: expected UID:GID", args.user));
        return 2;
    };
    if let Err(e) = user::prepare(uid, gid, args.user_name.as_deref()) {
        log(&format!(
            "cannot make user {uid}:{gid} known in /etc/passwd: {e}"
        ));
    }
    // Before any thread exists, so that every later thread and child inherits it.
    match seccomp::programs()
        .map_err(|e| e.to_string())
        .and_then(|p| seccomp::install_all_threads(&p).map_err(|e| e.to_string()))
    {
        Ok(()) => {}
        Err(e) => {
            log(&format!(
                "cannot install the set-ID filter: {e}; refusing to run the sandbox"
            ));
            return 1;
        }
    }
    // The token is read (and its file deleted) before any other process exists in the container;
    // so is the remote channel's secret, from standard input, which is then closed.
    let run_dir = std::path::PathBuf::from(server::RUN_DIR);
    if args.channel.is_some() && !args.secret_stdin && args.secret_file.is_none() {
        log("--channel needs the channel's secret: --secret-stdin or --secret-file");
        return 2;
    }
    let secret = match (args.secret_stdin, &args.secret_file) {
        (true, _) => Some(take_secret()),
        (false, Some(path)) => Some(
            std::fs::File::open(path).and_then(|mut f| crate::contract::tls::read_secret(&mut f)),
        ),
        (false, None) => None,
    };
    let secret = match secret {
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            log(&format!(
                "cannot read the channel's secret: {e}; refusing to run the sandbox"
            ));
            return 1;
        }
        None => None,
    };
    let token = match &secret {
        Some(s) => Some(s.token.clone()),
        None => server::take_token(&run_dir),
    };
    // Before any command can fill the process limit: its kills run there.
    if let Err(e) = super::worker::start() {
        log(&format!("cannot start: {e}"));
        return 1;
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            log(&format!("cannot start: {e}"));
            return 1;
        }
    };
    rt.block_on(async move {
        if args.proxy_relay {
            match tokio::net::TcpListener::bind(("127.0.0.1", super::proxy::PORT)).await {
                Ok(l) => {
                    tokio::spawn(relay(l));
                }
                Err(e) => log(&format!("cannot listen for the proxy relay: {e}")),
            }
        }
        let channel = match (&args.channel, &secret) {
            (Some(address), Some(secret)) => {
                match super::channel::Listener::bind(address, secret).await {
                    Ok(l) => Some(l),
                    Err(e) => {
                        log(&format!("cannot listen for the channel on {address}: {e}"));
                        return 1;
                    }
                }
            }
            _ => None,
        };
        serve(run_dir, token, channel).await
    })
}

/// Sets the rlimit `NAME=N` (`nofile`, `nproc`; soft and hard `N`) on this process. Errors:
/// an unknown name or a bad number, and `setrlimit(2)`'s (raising a hard limit needs
/// `CAP_SYS_RESOURCE`, which no sandbox has: the node's daemon's limit is the ceiling).
fn set_rlimit(r: &str) -> Result<(), String> {
    use rustix::process::{setrlimit, Resource, Rlimit};
    let (name, n) = r
        .split_once('=')
        .ok_or_else(|| "expected NAME=N".to_string())?;
    let resource = match name {
        "nofile" => Resource::Nofile,
        "nproc" => Resource::Nproc,
        other => {
            return Err(format!(
                "unknown rlimit {other:?} (expected nofile or nproc)"
            ))
        }
    };
    let n: u64 = n.parse().map_err(|_| format!("{n:?} is not a number"))?;
    setrlimit(
        resource,
        Rlimit {
            current: Some(n),
            maximum: Some(n),
        },
    )
    .map_err(|e| {
        format!("setrlimit: {e} (above the hard limit the node's daemon gives its containers?)")
    })
}

/// Reads the channel's secret from standard input, then puts `/dev/null` in its place (a
/// command never sees what came there).
fn take_secret() -> std::io::Result<crate::contract::tls::ChannelSecret> {
    let secret = crate::contract::tls::read_secret(&mut std::io::stdin().lock());
    let null = std::fs::File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    secret
}

/// Relays every connection to 127.0.0.1:[`super::proxy::PORT`] to the allowlist proxy's socket
/// ([`super::proxy::RELAY_SOCKET`]), byte for byte: the sandbox has no network but loopback,
/// and the proxy decides.
async fn relay(listener: tokio::net::TcpListener) {
    loop {
        let Ok((mut client, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            if let Ok(mut up) = tokio::net::UnixStream::connect(super::proxy::RELAY_SOCKET).await {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut up).await;
            }
        });
    }
}

async fn serve(
    run_dir: std::path::PathBuf,
    token: Option<String>,
    channel: Option<super::channel::Listener>,
) -> i32 {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup), Ok(mut chld)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
        signal(SignalKind::child()),
    ) else {
        log("cannot install signal handlers");
        return 1;
    };
    // Without a token (an engine whose bind mounts cannot carry a socket, or a token file that
    // did not arrive), commands come through the engine's exec only.
    if let Some(token) = token {
        let agent = server::new_agent(token);
        match channel {
            // The remote channel: no run directory of the host's; say so on stdout, which the
            // host reads while it hands the secret over.
            Some(listener) => {
                tokio::spawn(listener.serve(agent));
                println!("h9sandbox-agent ready {}", super::proto::VERSION);
            }
            None => {
                tokio::spawn(async move {
                    if let Err(e) = server::serve(run_dir, agent).await {
                        log(&format!("the exec agent cannot serve: {e}"));
                    }
                });
            }
        }
    }
    // Also every second: gVisor (runsc 20221219) sends no SIGCHLD for a zombie reparented to
    // PID 1, which would otherwise stay, counting against the process limit.
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = term.recv() => return 0,
            _ = int.recv() => return 0,
            _ = hup.recv() => return 0,
            _ = chld.recv() => reap_all(),
            _ = tick.tick() => reap_all(),
        }
    }
}

/// Reaps every child that has exited, orphans reparented to PID 1 included: `wait(2)` for any
/// child (`waitpid(-1, …, WNOHANG)`), not `waitpid(0, …)`, which would wait only for children in
/// PID 1's own process group, while every command runs in a session of its own.
fn reap_all() {
    use rustix::process::{wait, WaitOptions};
    while let Ok(Some(_)) = wait(WaitOptions::NOHANG) {}
}

/// Parses `UID:GID`.
pub(crate) fn parse_ids(s: &str) -> Option<(u32, u32)> {
    let (u, g) = s.split_once(':')?;
    Some((u.parse().ok()?, g.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::set_rlimit;

    #[test]
    fn an_rlimit_is_a_known_name_and_a_number() {
        // Only the refusals: setting one would lower this test process's own hard limit.
        assert_eq!(set_rlimit("nofile").unwrap_err(), "expected NAME=N");
        assert!(set_rlimit("core=0")
            .unwrap_err()
            .contains("unknown rlimit \"core\""));
        assert!(set_rlimit("nofile=lots")
            .unwrap_err()
            .contains("\"lots\" is not a number"));
    }
}
