//! Commands that run in the background of a sandbox (`exec --detach`, `ps`, `logs`, `kill`),
//! kept by its in-container agent: each has a handle, its own process tree (killed as a whole),
//! and bounded log files in the scratch volume ([`crate::contract::LOG_DIR`]).
//!
//! They need the agent's socket: a sandbox whose commands go through the engine's exec (gVisor,
//! a daemon in a VM, a sandbox made before the agent existed) cannot detach them.

use futures_util::{SinkExt, StreamExt};

use super::exec::{ensure_running, resolve_cwd, ExecRequest};
use super::Ctx;
use crate::channel::Connection;
use crate::contract::proto::{Detached, LogsRequest, Reply, Request, RunAs, Start};
use crate::error::Error;
use crate::report::{Forward, Stream};
use crate::state::Record;
use crate::types::Ids;

/// A command started in the background.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Started {
    /// The sandbox's ID.
    pub id: String,
    /// The handle `logs` and `kill` take.
    pub handle: String,
    /// Process ID of the command in the container.
    pub pid: u32,
}

/// The sandbox `query` (Running) and a connection to its agent. Errors: an unknown sandbox, one
/// not Running, or one whose agent the host cannot reach, naming why ([`Error::Refused`] when it
/// has none the host can reach, [`Error::Sandbox`] when connecting to it fails).
async fn agent_of(ctx: &Ctx, query: &str) -> anyhow::Result<(Record, Connection)> {
    let state = ctx.store.load()?;
    let rec = state.resolve(query)?.clone();
    ensure_running(&rec)?;
    super::lifecycle::check_workdir(&rec)?;
    match super::agent::connect(ctx, &rec).await {
        Ok(Some(conn)) => Ok((rec, conn)),
        Ok(None) => Err(Error::Refused(format!(
            "sandbox {} has no agent the host can reach (its commands go through the engine's exec), so it cannot keep commands in the background; run the command with `&` inside `exec` instead",
            rec.short_id()
        ))
        .into()),
        Err(e) => Err(Error::Sandbox(format!("sandbox {}: {e}", rec.short_id())).into()),
    }
}

fn agent_failed(e: impl std::fmt::Display) -> anyhow::Error {
    Error::Sandbox(format!("the sandbox's agent failed: {e}")).into()
}

/// Starts `req` in the background (`exec --detach`): returns its handle at once. The command
/// runs with `req`'s working directory and environment, as `req.user` or the sandbox's user, without a
/// timeout unless `req.timeout` gives one, its output going to its log files. Errors: as
/// `agent_of`, a bad working directory or variable, the agent's refusal.
pub(crate) async fn detach(ctx: &Ctx, req: &ExecRequest) -> anyhow::Result<Started> {
    let (rec, mut conn) = agent_of(ctx, &req.id).await?;
    let cwd = resolve_cwd(&rec.workdir, req.cwd.as_deref(), true)?;
    let env = super::exec::parse_env(&req.env)?;
    let user = rec.user.unwrap_or(Ids::ROOT);
    let user = super::exec::run_as(req.user.as_deref(), true)?
        .unwrap_or(RunAs::from((user.uid, user.gid)));
    let start = Start {
        command: req.to_command(),
        cwd: cwd.to_string_lossy().into_owned(),
        env,
        user,
        stdin: false,
        timeout_ms: req
            .timeout
            .filter(|t| !t.is_zero())
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)),
        detach: true,
    };
    conn.send(Request::Start(start))
        .await
        .map_err(agent_failed)?;
    match conn.next().await {
        Some(Ok(Reply::Started {
            pid,
            handle: Some(handle),
            ..
        })) => Ok(Started {
            id: rec.id.to_string(),
            handle: clean_handle(&handle)?,
            pid,
        }),
        Some(Ok(Reply::Failed { code, message })) => Err(Error::Sandbox(format!(
            "the command could not be started ({message}; status {code})"
        ))
        .into()),
        Some(Ok(other)) => Err(agent_failed(format!("unexpected answer {other:?}"))),
        Some(Err(e)) => Err(agent_failed(crate::sandbox::agent::connection_failure(&e))),
        None => Err(agent_failed("it closed the connection")),
    }
}

/// A handle as the agent gave it, checked to be one (8 hex digits): it is printed and typed back.
fn clean_handle(h: &str) -> anyhow::Result<String> {
    if h.len() == 8 && h.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(h.to_string())
    } else {
        Err(agent_failed(format!("malformed handle {h:?}")))
    }
}

/// The background commands of sandbox `query` (`ps`), oldest first.
pub(crate) async fn list(ctx: &Ctx, query: &str) -> anyhow::Result<(Record, Vec<Detached>)> {
    let (rec, mut conn) = agent_of(ctx, query).await?;
    conn.send(Request::List).await.map_err(agent_failed)?;
    match conn.next().await {
        Some(Ok(Reply::Processes(list))) => Ok((rec, list)),
        Some(Ok(Reply::Refused(why))) => Err(agent_failed(why)),
        Some(Ok(other)) => Err(agent_failed(format!("unexpected answer {other:?}"))),
        Some(Err(e)) => Err(agent_failed(crate::sandbox::agent::connection_failure(&e))),
        None => Err(agent_failed("it closed the connection")),
    }
}

/// Kills the process tree of background command `handle` of sandbox `query` (`kill`).
/// Errors: an unknown handle (the agent's refusal names it).
pub(crate) async fn kill(ctx: &Ctx, query: &str, handle: &str) -> anyhow::Result<()> {
    let (_, mut conn) = agent_of(ctx, query).await?;
    conn.send(Request::Kill {
        handle: handle.to_string(),
    })
    .await
    .map_err(agent_failed)?;
    match conn.next().await {
        Some(Ok(Reply::End)) => Ok(()),
        Some(Ok(Reply::Refused(why))) => {
            Err(Error::Sandbox(format!("{why} (see `h9sandbox ps`)")).into())
        }
        Some(Ok(other)) => Err(agent_failed(format!("unexpected answer {other:?}"))),
        Some(Err(e)) => Err(agent_failed(crate::sandbox::agent::connection_failure(&e))),
        None => Err(agent_failed("it closed the connection")),
    }
}

/// Where [`logs`] puts a background command's output.
pub(crate) enum LogSink<'a> {
    /// Its stdout to ours, its stderr to ours, as it arrives.
    Forward,
    /// Both into memory, through this callback (stream, bytes).
    Collect(&'a mut (dyn FnMut(Stream, &[u8]) + Send)),
}

/// Sends what background command `handle` of sandbox `query` wrote (stdout first, then stderr;
/// with `follow`, then what it writes, until its tree has exited) to `sink`.
pub(crate) async fn logs(
    ctx: &Ctx,
    query: &str,
    handle: &str,
    follow: bool,
    mut sink: LogSink<'_>,
) -> anyhow::Result<()> {
    let (_, mut conn) = agent_of(ctx, query).await?;
    conn.send(Request::Logs(LogsRequest {
        handle: handle.to_string(),
        follow,
    }))
    .await
    .map_err(agent_failed)?;
    let mut out = Forward::new(Stream::Stdout);
    let mut err = Forward::new(Stream::Stderr);
    let stop = super::interrupted();
    tokio::pin!(stop);
    loop {
        let reply = tokio::select! {
            r = conn.next() => r,
            _ = &mut stop => break,
        };
        match reply {
            Some(Ok(Reply::Stdout(b))) => match &mut sink {
                LogSink::Forward => {
                    out.write(&b).await;
                    if out.broken {
                        break;
                    }
                }
                LogSink::Collect(f) => f(Stream::Stdout, &b),
            },
            Some(Ok(Reply::Stderr(b))) => match &mut sink {
                LogSink::Forward => err.write(&b).await,
                LogSink::Collect(f) => f(Stream::Stderr, &b),
            },
            Some(Ok(Reply::End)) => break,
            Some(Ok(Reply::Refused(why))) => {
                return Err(Error::Sandbox(format!("{why} (see `h9sandbox ps`)")).into())
            }
            Some(Ok(other)) => return Err(agent_failed(format!("unexpected answer {other:?}"))),
            Some(Err(e)) => return Err(agent_failed(e)),
            None => return Err(agent_failed("it closed the connection")),
        }
    }
    out.finish().await;
    err.finish().await;
    Ok(())
}
