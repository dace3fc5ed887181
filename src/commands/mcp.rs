//! `h9sandbox mcp`: the Model Context Protocol server ([`crate::mcp`]) over stdin and stdout.
//!
//! stdout belongs to the protocol alone. Before anything else runs, the protocol's two
//! descriptors are moved off 0 and 1 ([`take_stdio`]): descriptor 1 then points at stderr and
//! descriptor 0 at `/dev/null`, so that nothing else (a warning printed by mistake, a child
//! process inheriting them) can write into the protocol stream or read from it.
//!
//! Lifecycle: with `--auto-up` the session's sandbox is created alongside the protocol's start
//! (the client's `initialize` does not wait for it; tools called without `id` do). The server
//! ends when the client closes stdin, or on SIGTERM, SIGINT or SIGHUP: it then waits briefly for
//! tool calls under way (their commands' process trees are killed, as by `exec`'s signals),
//! removes the sandboxes the session made (`--auto-up`, `sandbox_up` without `keep`) and exits 0.
//! Those sandboxes carry the server's PID as their owner (`up --owner-pid`), so `reap` removes
//! them when the server was killed (SIGKILL) before it could.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rmcp::ServiceExt;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{down, up, Ctx};
use crate::cli::{Cli, Format, McpArgs};
use crate::config::Origin;
use crate::mcp::{Server, Session};
use crate::output;

/// How long the shutdown waits for tool calls under way to end (a killed command's clean-up
/// takes a few seconds at most) before it removes the session's sandboxes anyway.
const CALLS_PATIENCE: Duration = Duration::from_secs(10);

/// The protocol's input stream.
type Input = Pin<Box<dyn AsyncRead + Send>>;
/// The protocol's output stream.
type Output = Pin<Box<dyn AsyncWrite + Send>>;

/// Runs `mcp`: serves until the client disconnects or a signal arrives; returns 0.
pub async fn run(cli: &Cli, args: &McpArgs) -> Result<i32> {
    let reporter = Arc::new(crate::report::Stderr {
        verbose: cli.global.verbose > 0,
    });
    let mut layers = Ctx::load_layers(cli, &*reporter)?;
    if let Some(image) = &args.image {
        layers.set_str("image", image, Origin::Flag("--image".into()))?;
    }
    // JSON: no spinner is ever drawn (several tool calls may run at once).
    let ctx = Ctx::from_layers(&layers, &[], Format::Json, cli.global.verbose, reporter)?;
    let workdir = up::resolve_workdir(args.workdir.as_deref())?;
    let (input, output) = take_stdio()?;
    let session = Arc::new(Session::new(ctx, layers, workdir, args.auto_up));

    let auto = async {
        if args.auto_up {
            session.auto_up().await;
        }
    };
    // Boxed, so that dropping it below really drops the service (and cancels its calls).
    let mut serve = Box::pin(async {
        let service = Server::new(Arc::clone(&session))
            .serve((input, output))
            .await
            .context("the MCP handshake failed")?;
        service
            .waiting()
            .await
            .context("the MCP service stopped unexpectedly")
    });
    let stop = up::interrupted();
    tokio::pin!(auto, stop);
    let mut auto_done = !args.auto_up;
    let ended = loop {
        tokio::select! {
            _ = &mut auto, if !auto_done => auto_done = true,
            r = &mut serve => break r.map(|reason| format!("the client disconnected ({reason:?})")),
            sig = &mut stop => break Ok(sig.to_string()),
        }
    };
    // Dropping the service cancels the calls under way (their commands are killed).
    drop(serve);
    if session.ctx().verbose > 0 {
        match &ended {
            Ok(why) => output::note(&format!("mcp: shutting down: {why}")),
            Err(e) => output::note(&format!("mcp: shutting down: {e:#}")),
        }
    }
    if !auto_done {
        // An `up` under way finishes (or, on a signal, gives up and cleans up by itself).
        auto.await;
    }
    session.wait_for_calls(CALLS_PATIENCE).await;
    let owned: Vec<String> = session
        .take_owned()
        .iter()
        .map(|id| id.to_string())
        .collect();
    if !owned.is_empty() {
        let report = down::take_down(session.ctx(), &owned, false).await?;
        if let Some(e) = report.error {
            return Err(e.context(
                "could not remove the session's sandboxes; `h9sandbox reap` removes them (their owner, this server, has exited)",
            ));
        }
    }
    // A failed handshake (garbage on stdin, or stdin closed before `initialize`) fails.
    ended.map(|_| 0)
}

/// Moves the protocol's streams off descriptors 0 and 1: returns stdin and stdout as async
/// streams on descriptors of their own (close-on-exec), then points descriptor 1 at stderr and
/// descriptor 0 at `/dev/null`. Pipes (as MCP clients use) are read and written without
/// blocking, through the runtime's reactor, on their own open file descriptions (reopened via
/// `/proc/self/fd`, so `O_NONBLOCK` never reaches anyone else sharing them); anything else (a
/// file, a terminal, a socket) through blocking reads and writes on the runtime's thread pool.
pub fn take_stdio() -> Result<(Input, Output)> {
    let dup = |fd: std::os::fd::BorrowedFd<'_>| -> Result<OwnedFd> {
        rustix::io::fcntl_dupfd_cloexec(fd, 3).context("cannot duplicate a standard stream")
    };
    let input = dup(std::io::stdin().as_fd())?;
    let output = dup(std::io::stdout().as_fd())?;
    let null = File::open("/dev/null").context("cannot open /dev/null")?;
    rustix::stdio::dup2_stdin(&null).context("cannot redirect stdin")?;
    rustix::stdio::dup2_stdout(std::io::stderr().as_fd()).context("cannot redirect stdout")?;

    let input: Input = match fifo_reopened(&input, false) {
        Some(fd) => Box::pin(tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?),
        None => Box::pin(tokio::fs::File::from_std(File::from(input))),
    };
    let output: Output = match fifo_reopened(&output, true) {
        Some(fd) => Box::pin(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?),
        None => Box::pin(tokio::fs::File::from_std(File::from(output))),
    };
    Ok((input, output))
}

/// `fd` reopened non-blocking on an open file description of its own, when it is a pipe.
fn fifo_reopened(fd: &OwnedFd, write: bool) -> Option<OwnedFd> {
    use rustix::fs::{FileType, Mode, OFlags};
    let st = rustix::fs::fstat(fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Fifo {
        return None;
    }
    let access = if write {
        OFlags::WRONLY
    } else {
        OFlags::RDONLY
    };
    rustix::fs::open(
        format!("/proc/self/fd/{}", fd.as_raw_fd()),
        access | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}
