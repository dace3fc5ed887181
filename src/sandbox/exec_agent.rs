//! Running a command through the sandbox's in-container agent ([`crate::agent::server`]) instead
//! of the engine's exec: one connection, the command and its environment in one message, the
//! output streamed back, the exit status as soon as the command's own process has exited.
//!
//! The timeout is the agent's to enforce (it kills the process tree inside the sandbox, so it
//! holds when this process dies: the agent also kills the tree when the connection closes);
//! SIGINT/SIGTERM/SIGHUP, the caller's `stop` and a reader of our stdout that went away make us
//! ask the agent to kill the tree. What the agent reports is data: the exit status is clamped to
//! 0–255, and an agent that goes quiet past the timeout is given up on.

use std::time::{Duration, Instant};

use anyhow::Result;
use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncReadExt;

use super::exec::{Captured, Outcome, Sink};
use super::signals::Interruption;
use crate::channel::Connection;
use crate::contract::proto::{Reply, Request, RunAs, Start};
use crate::engine::ExecSpec;
use crate::error::{Error, EXIT_TIMEOUT};
use crate::report::{Forward, Stream};
use crate::state::Record;
use crate::types::{Ids, Signal};

/// How long past its timeout (or past our request to kill it) a command may go unreported before
/// the agent is given up on.
const AGENT_PATIENCE: Duration = Duration::from_secs(30);

/// One output stream of the command, as the sink wants it.
struct Out {
    forward: Option<Forward>,
    captured: Captured,
    caps: Option<(usize, usize)>,
}

impl Out {
    fn new(target: Option<Stream>, caps: Option<(usize, usize)>) -> Out {
        Out {
            forward: target.map(Forward::new),
            captured: Captured::default(),
            caps,
        }
    }

    async fn write(&mut self, bytes: &[u8]) {
        self.captured.total += bytes.len() as u64;
        match (&mut self.forward, self.caps) {
            (Some(f), _) => f.write(bytes).await,
            (None, Some((head, tail))) => self.captured.keep(bytes, head, tail),
            (None, None) => {}
        }
    }

    fn broken(&self) -> bool {
        self.forward.as_ref().is_some_and(|f| f.broken)
    }

    async fn finish(&mut self) -> Captured {
        if let Some(f) = &mut self.forward {
            f.finish().await;
        }
        std::mem::take(&mut self.captured)
    }
}

/// Runs `spec` in the sandbox `rec` over `conn` (past its handshake). `timeout` bounds the run
/// (exit status 124); see the module documentation for the rest. Errors: the agent failed
/// (h9sandbox's own failure, exit 125).
pub(crate) async fn run(
    rec: &Record,
    conn: Connection,
    spec: &ExecSpec,
    timeout: Option<Duration>,
    sink: Sink,
    stop: impl std::future::Future<Output = Interruption>,
    verbose: Option<&dyn crate::report::Reporter>,
) -> Result<Outcome> {
    let start = Start {
        command: spec.command.clone(),
        cwd: spec.cwd.to_string_lossy().into_owned(),
        env: spec.env.clone(),
        user: run_as(rec, spec),
        stdin: spec.interactive,
        timeout_ms: timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        detach: false,
    };
    let started = Instant::now();
    let (mut tx, mut rx) = conn.split();
    let lost = |e: std::io::Error| {
        Error::Sandbox(format!(
            "the sandbox's agent failed: {}",
            crate::sandbox::agent::connection_failure(&e)
        ))
    };
    tx.send(Request::Start(start))
        .await
        .map_err(|e| start_refused(e).unwrap_or_else(&lost))?;
    let mut out = Out::new(sink.stdout_target(), sink.caps());
    let mut err = Out::new(
        if sink.caps().is_some() {
            None
        } else {
            Some(Stream::Stderr)
        },
        sink.caps(),
    );
    // Both streams as the agent read them (its frames keep that order on the one connection).
    let mut combined = Captured::default();
    let mut combine = |bytes: &[u8]| {
        if let Some((head, tail)) = sink.caps() {
            combined.total += bytes.len() as u64;
            combined.keep(bytes, head, tail);
        }
    };
    let mut stdin = spec.interactive.then(tokio::io::stdin);
    let mut stdin_buf = vec![0u8; 64 << 10];
    // Past the agent's own deadline, or after we asked for the kill, it must answer soon.
    let mut backstop = timeout.map(|t| tokio::time::Instant::now() + t + AGENT_PATIENCE);
    let mut interrupted: Option<Interruption> = None;
    let signal = super::interrupted();
    tokio::pin!(signal, stop);
    let exit = loop {
        tokio::select! {
            reply = rx.next() => match reply {
                Some(Ok(Reply::Started { program, .. })) => {
                    if let Some(r) = verbose {
                        r.command(&format!(
                            "+ (agent of {}) {}",
                            rec.short_id(),
                            super::exec::describe_as_run(&crate::report::printable(&program), &spec.command)
                        ));
                    }
                }
                Some(Ok(Reply::Stdout(b))) => {
                    combine(&b);
                    out.write(&b).await;
                    if out.broken() && interrupted.is_none() {
                        interrupted = Some(Interruption::Signal(Signal::PIPE));
                        backstop = Some(tokio::time::Instant::now() + AGENT_PATIENCE);
                        let _ = tx.send(Request::Cancel).await;
                    }
                }
                Some(Ok(Reply::Stderr(b))) => {
                    combine(&b);
                    err.write(&b).await;
                }
                Some(Ok(Reply::Exited(e))) => break e,
                // The program could not be started: what a shell says, with its status.
                Some(Ok(Reply::Failed { code, message })) if code == 126 || code == 127 => {
                    let message = crate::report::printable(&message);
                    let line = format!("h9sandbox: error: {message}\n");
                    combine(line.as_bytes());
                    err.write(line.as_bytes()).await;
                    break crate::contract::proto::Exit { code, timed_out: false, killed: false, oom_killed: false, signal: None };
                }
                // The caller's mistake (an unknown user, a working directory the user cannot
                // enter): h9sandbox's own failure, named as such.
                Some(Ok(Reply::Failed { code: 125, message })) => {
                    return Err(Error::Sandbox(message).into());
                }
                Some(Ok(Reply::Failed { message, .. })) | Some(Ok(Reply::Refused(message))) => {
                    return Err(lost(std::io::Error::other(message)).into());
                }
                Some(Ok(other)) => return Err(lost(std::io::Error::other(format!("unexpected answer {other:?}"))).into()),
                Some(Err(e)) => return Err(lost(e).into()),
                None => return Err(lost(std::io::Error::other("it closed the connection before the command ended")).into()),
            },
            n = read_stdin(&mut stdin, &mut stdin_buf) => match n {
                Some(bytes) => { let _ = tx.send(Request::Stdin(bytes)).await; }
                None => { stdin = None; let _ = tx.send(Request::CloseStdin).await; }
            },
            sig = &mut signal, if interrupted.is_none() => {
                interrupted = Some(Interruption::Signal(sig));
                backstop = Some(tokio::time::Instant::now() + AGENT_PATIENCE);
                let _ = tx.send(Request::Cancel).await;
            }
            why = &mut stop, if interrupted.is_none() => {
                interrupted = Some(why);
                backstop = Some(tokio::time::Instant::now() + AGENT_PATIENCE);
                let _ = tx.send(Request::Cancel).await;
            }
            _ = sleep_until(backstop) => {
                return Err(Error::Sandbox(format!(
                    "the agent of sandbox {} did not end the command in time; `h9sandbox down {}` removes what is left",
                    rec.short_id(), rec.short_id()
                ))
                .into());
            }
        }
    };
    let duration = started.elapsed();
    let stdout = out.finish().await;
    let stderr = err.finish().await;
    let exit_code = if exit.timed_out {
        EXIT_TIMEOUT
    } else if let Some(why) = interrupted {
        why.exit_status()
    } else {
        exit.code.clamp(0, 255)
    };
    Ok(Outcome {
        exit_code,
        stdout,
        stderr,
        combined,
        duration,
        timed_out: exit.timed_out,
        interrupted,
        tree_killed: exit.killed,
        oom_killed: exit.oom_killed,
        // What the agent reports is data: a signal number, or nothing.
        signal: exit
            .signal
            .filter(|s| (1..=64).contains(s))
            .map(Signal::from_number),
    })
}

/// Who runs `spec`: its user (`exec --user`), else the sandbox's.
fn run_as(rec: &Record, spec: &ExecSpec) -> RunAs {
    spec.user.clone().unwrap_or_else(|| {
        let u = rec.user.unwrap_or(Ids::ROOT);
        RunAs::from((u.uid, u.gid))
    })
}

/// The next chunk of our stdin (`None` at its end); never resolves without stdin.
async fn read_stdin(stdin: &mut Option<tokio::io::Stdin>, buf: &mut [u8]) -> Option<Vec<u8>> {
    let Some(s) = stdin else {
        return std::future::pending().await;
    };
    match s.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(buf[..n].to_vec()),
    }
}

/// The error for a start request the codec refused before sending it (a frame past the
/// protocol's bound), or `Err(e)` back for any other failure.
fn start_refused(e: std::io::Error) -> Result<Error, std::io::Error> {
    if e.to_string().contains("frame size too big") {
        Ok(Error::Refused(format!(
            "the command, its arguments and environment come to more than the {} MiB the sandbox's agent takes in one request; pass large data on stdin (-i) or in a file of the work dir",
            crate::contract::proto::MAX_FRAME >> 20
        )))
    } else {
        Err(e)
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
