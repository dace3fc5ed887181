//! The engine's own exec as the transport: the client process, the pumps that stream or capture
//! its output, and the end of the run (exit status, timeout, the engine's failure).

use std::time::Duration;

use anyhow::Result;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::output::{Captured, Sink};
use super::OUTPUT_GRACE;
use crate::engine::{
    AnyEngine, EngineExec, Environment, ExecEnd, ExecFailure, ExecJudge, ExecReader, ExecSpec,
    ExecStdio, StdinFrom,
};
use crate::error::{Error, EXIT_TIMEOUT};
use crate::report::{self, Forward, Stream};
use crate::sandbox::signals::Interruption;
use crate::state::Record;
use crate::types::{Isolation, Signal};

/// Starts the engine's exec running `spec` in the sandbox `rec`, its stdin attached only when
/// interactive, its stderr piped, its stdout piped unless it may go straight to ours.
pub(super) fn spawn(
    engine: &AnyEngine,
    rec: &Record,
    spec: &ExecSpec,
    sink: Sink,
) -> Result<EngineExec, Error> {
    // A container engine's client may write straight to our stdout when nothing else must go
    // there (the fastest path: no copy). Otherwise stdout passes through us: a local sandbox's
    // background processes would hold our caller's pipe open past OUTPUT_GRACE, and a spinner
    // needs whole lines.
    let direct = sink == Sink::Forward
        && !report::status_line_shown()
        && engine.kind().isolation() == Isolation::Container;
    let stdio = ExecStdio {
        stdin: if spec.interactive {
            StdinFrom::Inherit
        } else {
            StdinFrom::Null
        },
        stdout_inherit: direct,
    };
    engine.exec(rec.container_ref(), spec, stdio)
}

/// Both streams' chunks as they are read, for [`super::Outcome::combined`] (shared by the two
/// tasks).
type Combined = std::sync::Arc<std::sync::Mutex<Captured>>;

/// Adds `chunk` to `combined` as a capturing sink keeps it (`caps`: its head and tail).
fn combine(combined: &Combined, chunk: &[u8], (head, tail): (usize, usize)) {
    let mut c = combined.lock().unwrap_or_else(|e| e.into_inner());
    c.total += chunk.len() as u64;
    c.keep(chunk, head, tail);
}

/// The tasks that copy or capture a running command's output.
pub(super) struct Pumps {
    /// Stdout's task (`None`: stdout goes straight to ours).
    pub(super) stdout: Option<JoinHandle<std::io::Result<Captured>>>,
    /// Stderr's task.
    pub(super) stderr: JoinHandle<std::io::Result<(Head, Captured)>>,
    /// Both streams together, in the order read (capturing sinks only).
    pub(super) combined: Combined,
    /// Tells both to stop reading ([`OUTPUT_GRACE`] after the command ended).
    drained: watch::Sender<bool>,
    /// Turns true when our stdout's reader went away (EPIPE), as for `exec ... | head -1`.
    pub(super) broken: watch::Receiver<bool>,
}

impl Pumps {
    /// Starts the tasks on `child`'s piped streams, sending them to `sink`.
    pub(super) fn start(child: &mut EngineExec, sink: Sink) -> Pumps {
        let (drained, stop) = watch::channel(false);
        let (broken_tx, broken) = watch::channel(false);
        let combined = Combined::default();
        let stdout = child
            .stdout
            .take()
            .map(|s| tokio::spawn(capture(s, sink, stop.clone(), broken_tx, combined.clone())));
        let stderr: ExecReader = child
            .stderr
            .take()
            .unwrap_or_else(|| Box::new(tokio::io::empty()));
        let stderr = tokio::spawn(stderr_pump(
            stderr,
            sink,
            stop,
            child.judge(),
            combined.clone(),
        ));
        Pumps {
            stdout,
            stderr,
            combined,
            drained,
            broken,
        }
    }

    /// Waits for the tasks to reach the end of the output, or [`OUTPUT_GRACE`] at most for
    /// output that something left running keeps open. Returns stderr's head and what both
    /// captured, apart and together.
    pub(super) async fn finish(self) -> Result<(Head, Captured, Captured, Captured)> {
        let drained = self.drained;
        let grace = tokio::spawn(async move {
            tokio::time::sleep(OUTPUT_GRACE).await;
            let _ = drained.send(true);
        });
        let (head, stderr) = self.stderr.await??;
        let stdout = match self.stdout {
            Some(t) => t.await??,
            None => Captured::default(),
        };
        grace.abort();
        let combined =
            std::mem::take(&mut *self.combined.lock().unwrap_or_else(|e| e.into_inner()));
        Ok((head, stdout, stderr, combined))
    }
}

/// How the wait for a command ended.
pub(super) struct Ended {
    /// How the engine's exec ended.
    pub(super) status: ExecEnd,
    /// Whether the timeout ended it.
    pub(super) timed_out: bool,
    /// The signal (or the caller's reason, or `SIGPIPE`) that ended it, if one did.
    pub(super) interrupted: Option<Interruption>,
    /// Why killing the process tree failed, when it was killed and that failed.
    pub(super) kill_error: Option<anyhow::Error>,
}

impl Ended {
    /// The exit status of the run: 124 on timeout, 128+N when signal N ended it, else the
    /// client's `code`.
    pub(super) fn exit_code(&self, code: i32) -> i32 {
        if self.timed_out {
            EXIT_TIMEOUT
        } else if let Some(why) = self.interrupted {
            why.exit_status()
        } else {
            code
        }
    }
}

/// Waits for `child` to exit, for `timeout`, for SIGINT/SIGTERM/SIGHUP, for `stop`, or for our
/// stdout's reader to go away (`broken`); in every case but a normal exit the command's process
/// tree is killed (also when the client itself was killed), and the client reaped.
pub(super) async fn wait_for_end(
    engine: &AnyEngine,
    rec: &Record,
    spec: &ExecSpec,
    child: &mut EngineExec,
    timeout: Option<Duration>,
    stop: impl std::future::Future<Output = Interruption>,
    broken: &mut watch::Receiver<bool>,
) -> Result<Ended> {
    let deadline = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    let mut timed_out = false;
    let mut interrupted = None;
    let status = tokio::select! {
        s = child.wait() => Some(s?),
        _ = deadline => { timed_out = true; None }
        sig = crate::sandbox::interrupted() => { interrupted = Some(Interruption::Signal(sig)); None }
        why = stop => { interrupted = Some(why); None }
        // Nobody reads the output any more: the command would run on unattended.
        _ = async {
            // An Err means the reader task ended without a broken pipe: never fire.
            if broken.wait_for(|b| *b).await.is_err() {
                std::future::pending::<()>().await;
            }
        } => { interrupted = Some(Interruption::Signal(Signal::PIPE)); None }
    };
    let container = rec.container_ref();
    let mut kill_error = None;
    let status = match status {
        // The client itself was killed (e.g. SIGPIPE when our reader went away): the command
        // would run on unattended, so its tree goes too.
        Some(s) if s.signalled => {
            kill_error = engine.kill_exec(container, spec).await.err();
            s
        }
        Some(s) => s,
        None => {
            kill_error = engine.kill_exec(container, spec).await.err();
            // The client ends once its process is gone; make sure of it.
            match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
                Ok(s) => s?,
                Err(_) => {
                    child.start_kill();
                    child.wait().await?
                }
            }
        }
    };
    Ok(Ended {
        status,
        timed_out,
        interrupted,
        kill_error,
    })
}

/// h9sandbox's own error when the first bytes of stderr (`head`) and the client's exit `code`
/// show that the engine, not the command, failed: the container is gone, the engine is
/// unreachable, or it could not start the command.
pub(super) fn engine_failure(
    engine: &AnyEngine,
    judge: &dyn ExecJudge,
    rec: &Record,
    head: &Head,
    code: i32,
) -> Option<Error> {
    let f = judge.failure(&head.bytes, code)?;
    Some(match f {
        ExecFailure::ContainerGone(reason) => Error::ContainerGone {
            id: rec.short_id(),
            reason,
        },
        ExecFailure::ContainerStopped(reason) => Error::ContainerStopped {
            id: rec.short_id(),
            reason,
            hint: format!(
                "`h9sandbox start {}` starts it again, `h9sandbox down {}` removes it",
                rec.short_id(),
                rec.short_id()
            ),
        },
        ExecFailure::ContainerPaused(reason) => Error::ContainerStopped {
            id: rec.short_id(),
            reason,
            hint: format!("`h9sandbox resume {}` thaws it", rec.short_id()),
        },
        ExecFailure::EngineUnavailable(reason) => Error::EngineUnavailable {
            bin: engine.kind().to_string(),
            reason,
        },
        ExecFailure::Other(reason) => Error::Sandbox(reason),
    })
}

/// Reads from `r` into `buf` until `stop` turns true; `Ok(0)` then, as at the end of the stream.
async fn read_until<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut [u8],
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<usize> {
    tokio::select! {
        n = r.read(buf) => n,
        _ = stop.wait_for(|s| *s) => Ok(0),
    }
}

/// Reads `r` to the end (or until `stop`), keeping what a capturing sink keeps, or copying to
/// the forwarding sink's stream.
pub(super) async fn capture<R: AsyncRead + Unpin>(
    mut r: R,
    sink: Sink,
    mut stop: tokio::sync::watch::Receiver<bool>,
    broken: tokio::sync::watch::Sender<bool>,
    combined: Combined,
) -> std::io::Result<Captured> {
    let mut out = Captured::default();
    let mut buf = vec![0u8; 64 * 1024];
    let mut fwd = sink.stdout_target().map(Forward::new);
    loop {
        let n = read_until(&mut r, &mut buf, &mut stop).await?;
        if n == 0 {
            if let Some(f) = &mut fwd {
                f.finish().await;
            }
            return Ok(out);
        }
        out.total += n as u64;
        match (&mut fwd, sink.caps()) {
            (Some(f), _) => {
                f.write(&buf[..n]).await;
                if f.broken {
                    let _ = broken.send(true);
                }
            }
            (None, Some((head, tail))) => {
                out.keep(&buf[..n], head, tail);
                combine(&combined, &buf[..n], (head, tail));
            }
            (None, None) => {}
        }
    }
}

/// The first bytes of stderr, and whether they were held back from the terminal.
#[derive(Debug, Default)]
pub(super) struct Head {
    pub(super) bytes: Vec<u8>,
    pub(super) held: bool,
}

/// Copies stderr to ours (Forward, Stderr) or captures it. The first chunk is also kept as the
/// [`Head`], so the engine's own failure can be recognised; when forwarding and that chunk looks
/// like an engine message, it is held back until more output comes or 100 ms pass, so that
/// h9sandbox can replace it with its own one-line error.
async fn stderr_pump<R: AsyncRead + Unpin>(
    mut r: R,
    sink: Sink,
    mut stop: tokio::sync::watch::Receiver<bool>,
    judge: std::sync::Arc<dyn ExecJudge>,
    combined: Combined,
) -> std::io::Result<(Head, Captured)> {
    let mut head = Head::default();
    let mut out = Captured::default();
    let mut buf = vec![0u8; 64 * 1024];
    let mut first = true;
    let mut fwd = match sink.caps() {
        Some(_) => None,
        None => Some(Forward::new(Stream::Stderr)),
    };
    loop {
        let read = if head.held {
            match tokio::time::timeout(
                Duration::from_millis(100),
                read_until(&mut r, &mut buf, &mut stop),
            )
            .await
            {
                Ok(n) => n?,
                Err(_) => {
                    if let Some(f) = &mut fwd {
                        f.write(&head.bytes).await;
                    }
                    head.held = false;
                    continue;
                }
            }
        } else {
            read_until(&mut r, &mut buf, &mut stop).await?
        };
        let n = read;
        if n == 0 {
            if let Some(f) = &mut fwd {
                f.finish().await;
            }
            return Ok((head, out));
        }
        let chunk = &buf[..n];
        out.total += n as u64;
        if first {
            first = false;
            head.bytes = chunk[..n.min(4096)].to_vec();
            if fwd.is_some() && judge.may_be_engine_message(chunk) {
                head.held = true;
                continue;
            }
        } else if head.held {
            if let Some(f) = &mut fwd {
                f.write(&head.bytes).await;
            }
            head.held = false;
        }
        match (&mut fwd, sink.caps()) {
            (Some(f), _) => f.write(chunk).await,
            (None, Some((head, tail))) => {
                out.keep(chunk, head, tail);
                combine(&combined, chunk, (head, tail));
            }
            (None, None) => {}
        }
    }
}

pub(super) async fn write_stderr(bytes: &[u8]) {
    let mut f = Forward::new(Stream::Stderr);
    f.write(bytes).await;
    f.finish().await;
}
