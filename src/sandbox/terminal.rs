//! A command on a pseudo-terminal inside a sandbox (`exec -t`, `shell`): the agent opens the
//! terminal as the command's user and makes it the controlling terminal of the command's
//! session ([`crate::contract::proto::Terminal`]); this side passes the caller's keystrokes and
//! window sizes in and the terminal's output out, and returns the command's exit status.
//!
//! The command is checked and run as `exec` runs one ([`super::exec::plan`]): its user, working
//! directory, environment and timeout, which the agent enforces by killing the whole process
//! tree (also when this process dies: the agent kills the tree when the connection closes).
//! SIGINT, SIGTERM and SIGHUP to us kill the tree too (exit 128+N); the caller's terminal sends
//! Ctrl-C, Ctrl-Z and Ctrl-\ as bytes, which the sandbox's terminal turns into signals of its
//! foreground process group, as a terminal does. The caller's own terminal (raw mode, its size,
//! `SIGWINCH`) is the front end's: this module never touches it.

use std::time::{Duration, Instant};

use anyhow::Result;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::exec::{Captured, ExecRequest, Executed, Outcome};
use super::signals::Interruption;
use super::Ctx;
use crate::contract::proto::{Exit, Reply, Request, RunAs, Start, Terminal, WinSize};
use crate::error::{Error, EXIT_TIMEOUT};
use crate::types::{Ids, Signal};

/// What the caller's side of a terminal sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    /// Keystrokes (bytes, as the caller's terminal in raw mode gives them).
    Bytes(Vec<u8>),
    /// The caller's input ended.
    End,
    /// The caller's window has this size now.
    Resize(WinSize),
}

/// How long past its timeout (or past our request to kill it) a command may go unreported
/// before the agent is given up on.
const AGENT_PATIENCE: Duration = Duration::from_secs(30);

/// Runs `req` (as `exec` checks it; `req.interactive`: keystrokes are passed in) on a new
/// terminal of `size` in its sandbox, passing `input` in and the terminal's output to `output`;
/// returns how it ended ([`Outcome::exit_code`]: the command's status, 124 at its timeout,
/// 128+N when signal N to us ended it). Errors: as [`super::exec::execute`]'s, and a sandbox
/// whose agent cannot give terminals ([`super::relay::connect`]).
pub(crate) async fn run(
    ctx: &Ctx,
    req: &ExecRequest,
    size: WinSize,
    mut input: mpsc::Receiver<Input>,
    output: &mut (dyn AsyncWrite + Unpin + Send),
) -> Result<Executed> {
    let (rec, spec, timeout) = super::exec::plan(ctx, req)?;
    let conn = super::relay::connect(ctx, &rec, "terminals").await?;
    let user = spec.user.clone().unwrap_or_else(|| {
        let u = rec.user.unwrap_or(Ids::ROOT);
        RunAs::from((u.uid, u.gid))
    });
    let terminal = Terminal {
        start: Start {
            command: spec.command.clone(),
            cwd: spec.cwd.to_string_lossy().into_owned(),
            env: spec.env.clone(),
            user,
            stdin: req.interactive,
            timeout_ms: timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            detach: false,
        },
        size: size.at_least_one(),
    };
    if ctx.verbose() {
        ctx.reporter.command(&format!(
            "+ (agent of {}, on a terminal of {}x{}) {}",
            rec.short_id(),
            size.cols,
            size.rows,
            req.command.join(" ")
        ));
    }
    let started = Instant::now();
    let lost = |e: std::io::Error| {
        Error::Sandbox(format!(
            "the sandbox's agent failed: {}",
            crate::sandbox::agent::connection_failure(&e)
        ))
    };
    let (mut tx, mut rx) = conn.split();
    tx.send(Request::Terminal(terminal)).await.map_err(&lost)?;
    let mut backstop = timeout.map(|t| tokio::time::Instant::now() + t + AGENT_PATIENCE);
    let mut interrupted: Option<Interruption> = None;
    let mut input_open = true;
    // The last byte the caller typed, for the end of its input.
    let mut last_typed: Option<u8> = None;
    let signal = super::interrupted();
    tokio::pin!(signal);
    let exit = loop {
        tokio::select! {
            reply = rx.next() => match reply {
                Some(Ok(Reply::Started { .. })) => {}
                Some(Ok(Reply::Stdout(b) | Reply::Stderr(b))) => {
                    // A caller's terminal that went away only stops the copying.
                    if output.write_all(&b).await.is_ok() {
                        let _ = output.flush().await;
                    }
                }
                Some(Ok(Reply::Exited(e))) => break e,
                Some(Ok(Reply::Failed { code, message })) if code == 126 || code == 127 => {
                    let line = format!("h9sandbox: error: {}\r\n", crate::report::printable(&message));
                    let _ = output.write_all(line.as_bytes()).await;
                    let _ = output.flush().await;
                    break Exit { code, timed_out: false, killed: false, oom_killed: false, signal: None };
                }
                Some(Ok(Reply::Failed { message, .. })) => return Err(Error::Sandbox(message).into()),
                Some(Ok(Reply::Refused(message))) => return Err(lost(std::io::Error::other(message)).into()),
                Some(Ok(other)) => return Err(lost(std::io::Error::other(format!("unexpected answer {other:?}"))).into()),
                Some(Err(e)) => return Err(lost(e).into()),
                None => return Err(lost(std::io::Error::other("it closed the connection before the command ended")).into()),
            },
            i = input.recv(), if input_open => match i {
                Some(Input::Bytes(b)) if req.interactive => {
                    last_typed = b.last().copied().or(last_typed);
                    let _ = tx.send(Request::Stdin(b)).await;
                }
                Some(Input::Bytes(_)) => {}
                Some(Input::Resize(s)) => { let _ = tx.send(Request::Resize(s.at_least_one())).await; }
                Some(Input::End) | None => {
                    input_open = false;
                    if req.interactive {
                        // A terminal has no end of input but the EOF character (^D) at the start
                        // of a line (termios(3), VEOF): what a person types, and what a program
                        // reading piped input through `--force-tty` waits for. After a partial
                        // line the first one only sends the line.
                        let eof: &[u8] = match last_typed {
                            None | Some(b'\n' | b'\r') => b"\x04",
                            Some(_) => b"\x04\x04",
                        };
                        let _ = tx.send(Request::Stdin(eof.to_vec())).await;
                        let _ = tx.send(Request::CloseStdin).await;
                    }
                }
            },
            sig = &mut signal, if interrupted.is_none() => {
                interrupted = Some(Interruption::Signal(sig));
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
    let exit_code = if exit.timed_out {
        EXIT_TIMEOUT
    } else if let Some(why) = interrupted {
        why.exit_status()
    } else {
        exit.code.clamp(0, 255)
    };
    Ok(Executed {
        record: rec,
        timeout,
        outcome: Outcome {
            exit_code,
            stdout: Captured::default(),
            stderr: Captured::default(),
            combined: Captured::default(),
            duration: started.elapsed(),
            timed_out: exit.timed_out,
            interrupted,
            tree_killed: exit.killed,
            oom_killed: exit.oom_killed,
            signal: exit.signal.map(Signal::from_number),
        },
    })
}

/// The command line of `h9sandbox shell`: the image's login shell, bash where it has one, else
/// sh (run by the agent's `bash -c`, or `sh -c` without bash).
pub(crate) const LOGIN_SHELL: &str = "command -v bash >/dev/null 2>&1 && exec bash -l; exec sh -l";

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
