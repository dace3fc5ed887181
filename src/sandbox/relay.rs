//! The host's way to a sandbox's agent for what only the agent does (a terminal, a forwarded
//! port, stats): its socket where the host reaches it, or the remote channel of a copy-mode
//! sandbox (TLS to its published port, else through the engine's exec stream; both
//! [`super::agent::connect`]), else the
//! agent protocol relayed through the engine's own exec (`docker exec -i C h9sandbox agent
//! socket-relay`, [`crate::agent::socket_relay`]), which reaches the socket from inside the
//! container (a daemon in a VM, say), at the cost of one engine exec per connection. Under
//! gVisor, whose sockets do not cross the bind mount, the relay cannot tell who listens on the
//! socket (its kernel answers `SO_PEERCRED` with the asker's own credentials), so a sandbox with a
//! mounted work dir is refused there, naming copy mode, whose channel is TLS-pinned.
//!
//! Configuration `exec_agent = false` (commands through the engine's exec) does not apply: the
//! engine's exec has no terminal size of its own to change, no port to reach on a sandbox
//! without network, and no cgroup counters, so these always speak to the agent. A sandbox made
//! by an older h9sandbox, whose agent does not know them, is refused, saying so.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Result;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, ReadBuf};
use uuid::Uuid;

use super::Ctx;
use crate::channel::{ConnectError, Connection};
use crate::contract::proto::{RunAs, VERSION};
use crate::engine::{
    CommandLine, EngineExec, Environment, ExecReader, ExecSpec, ExecStdio, ExecWriter, StdinFrom,
};
use crate::error::Error;
use crate::state::Record;
use crate::types::Isolation;

/// How long the relay may take to say it is ready (an engine exec, slower under gVisor).
const RELAY_PATIENCE: Duration = Duration::from_secs(15);

/// A connection to the agent of the Running sandbox `rec`, for `what` (named in errors:
/// "a terminal", "port forwarding", "stats"): by its socket, else relayed through the engine's
/// exec. Errors: a local sandbox (no agent), one made by an older h9sandbox, an agent that
/// refuses the token, a relay that cannot start (the container gone, say).
pub(crate) async fn connect(ctx: &Ctx, rec: &Record, what: &str) -> Result<Connection> {
    super::exec::ensure_running(rec)?;
    let engine = ctx.runner_for(rec)?;
    let id = rec.short_id();
    if engine.kind().isolation() == Isolation::None {
        return Err(Error::Refused(format!(
            "sandbox {id} is local (no container): {what} needs the in-container agent, which a local sandbox has not"
        ))
        .into());
    }
    if !super::agent::speaks_current(rec) {
        let theirs = rec
            .agent
            .as_ref()
            .and_then(|a| a.version)
            .map_or("none".to_string(), |v| v.to_string());
        return Err(Error::Refused(format!(
            "sandbox {id} was made by an older h9sandbox whose in-container agent has no {what} (its agent protocol: {theirs}; this h9sandbox speaks {VERSION}); `h9sandbox down {id}` and `up` a new one"
        ))
        .into());
    }
    match super::agent::connect(ctx, rec).await {
        Ok(Some(conn)) => return Ok(conn),
        Ok(None) => {}
        Err(ConnectError::Refused(why)) => {
            return Err(Error::Sandbox(format!(
                "the agent of sandbox {id} refused the connection: {why}"
            ))
            .into())
        }
        Err(e @ ConnectError::Replaced(..)) => ctx.reporter.warn(&format!(
            "{e}; going through the engine's exec to the agent (`h9sandbox down {id}` and a new sandbox restore the socket)"
        )),
        // The remote channel has its own way through the engine's exec, already tried.
        Err(e) if rec.agent.as_ref().is_some_and(|a| a.channel.is_some()) => {
            return Err(Error::Sandbox(format!(
                "cannot reach the agent of sandbox {id} over its channel for {what}: {e}"
            ))
            .into())
        }
        Err(e) => {
            if ctx.verbose() {
                ctx.reporter
                    .note(&format!("{e}; relaying through the engine's exec"));
            }
        }
    }
    if crate::engine::is_gvisor(rec.runtime.as_deref()) {
        // gVisor's kernel does not tell the relay who listens on the agent's socket
        // ([`crate::agent::socket_relay`]): it would hand the token to whatever listens there.
        return Err(Error::Refused(format!(
            "sandbox {id} runs under gVisor, whose agent socket the host cannot reach nor the relay authenticate, so it has no {what}; a sandbox made with `--workdir-mode copy` has (its agent is reached over the pinned TLS channel)"
        ))
        .into());
    }
    relayed(ctx, rec).await
}

/// The agent protocol through `agent socket-relay` in the engine's exec, past the handshake.
async fn relayed(ctx: &Ctx, rec: &Record) -> Result<Connection> {
    let id = rec.short_id();
    let engine = ctx.runner_for(rec)?;
    let spec = ExecSpec {
        command: CommandLine::Argv(vec![
            crate::contract::BIN.into(),
            crate::contract::ARG.into(),
            "socket-relay".into(),
        ]),
        cwd: "/".into(),
        env: vec![],
        interactive: true,
        marker: Uuid::new_v4().simple().to_string(),
        user: Some(RunAs::ROOT),
        wrapped: false,
        wrapper_enters: false,
        backstop: None,
    };
    if ctx.verbose() {
        ctx.reporter.command(&format!(
            "+ (agent of {id}, relayed through the engine's exec) {} {} socket-relay",
            crate::contract::BIN,
            crate::contract::ARG
        ));
    }
    let mut exec = engine.exec(
        rec.container_ref(),
        &spec,
        ExecStdio {
            stdin: StdinFrom::Piped,
            stdout_inherit: false,
        },
    )?;
    let (Some(r), Some(w)) = (exec.stdout.take(), exec.stdin.take()) else {
        return Err(
            Error::Sandbox("the engine's exec gave no streams for the relay".into()).into(),
        );
    };
    let mut r = tokio::io::BufReader::new(r);
    let mut line = String::new();
    let ready = tokio::time::timeout(RELAY_PATIENCE, r.read_line(&mut line)).await;
    if !matches!(ready, Ok(Ok(_)) if line == crate::agent::socket_relay::READY_LINE) {
        let why = relay_failure(&mut exec).await;
        return Err(Error::Sandbox(format!(
            "cannot reach the agent of sandbox {id} through the engine's exec: {why}"
        ))
        .into());
    }
    let token = super::agent::read_token(ctx, rec.id)?;
    let stream = Relay {
        r: Box::new(r),
        w,
        _exec: exec,
    };
    crate::channel::hello(Box::new(stream), &token)
        .await
        .map_err(|e| {
            Error::Sandbox(format!(
                "the agent of sandbox {id}, through the engine's exec: {e}"
            ))
            .into()
        })
}

/// What the relay (or the engine) said on stderr before it ended, in one line.
async fn relay_failure(exec: &mut EngineExec) -> String {
    use tokio::io::AsyncReadExt;
    let mut text = Vec::new();
    if let Some(mut e) = exec.stderr.take() {
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            let mut buf = [0u8; 4096];
            while text.len() < 4096 {
                match e.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => text.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await;
    }
    exec.start_kill();
    let text = String::from_utf8_lossy(&text);
    let line = text
        .lines()
        .map(|l| l.trim().trim_start_matches("h9sandbox: error: "))
        .find(|l| !l.is_empty())
        .unwrap_or("the relay ended without a word");
    crate::report::printable(line).into_owned()
}

/// The relay's streams as one byte stream, holding the engine's exec (killed when dropped).
struct Relay {
    r: ExecReader,
    w: ExecWriter,
    _exec: EngineExec,
}

impl AsyncRead for Relay {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.r).poll_read(cx, buf)
    }
}

impl AsyncWrite for Relay {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.w).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.w).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.w).poll_shutdown(cx)
    }
}
