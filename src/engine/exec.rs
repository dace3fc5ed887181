//! The engine's own exec (the fallback transport where no agent channel answers): its
//! standard streams, the process, how its failures are told from the command's
//! ([`ExecJudge`], [`ExecFailure`]).

use std::sync::Arc;

use anyhow::Result;

use super::*;

/// How [`Environment::exec`] wires the standard streams of the engine's own exec: stdin from
/// nothing, from ours, or a pipe the caller writes ([`EngineExec::stdin`]); stdout straight to
/// ours or a pipe ([`EngineExec::stdout`]); stderr is always a pipe ([`EngineExec::stderr`]), so
/// the engine's own failure can be told from the command's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExecStdio {
    /// Where the command's standard input comes from.
    pub stdin: StdinFrom,
    /// Whether its standard output goes straight to ours (`false`: a pipe).
    pub stdout_inherit: bool,
}

impl ExecStdio {
    /// Nothing in, everything piped: for commands whose output the caller reads.
    pub(crate) const PIPED: ExecStdio = ExecStdio {
        stdin: StdinFrom::Null,
        stdout_inherit: false,
    };
}

/// Where an engine exec's standard input comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StdinFrom {
    /// `/dev/null`.
    Null,
    /// Our own standard input.
    Inherit,
    /// A pipe the caller writes to ([`EngineExec::stdin`]).
    Piped,
}

/// A byte stream read from an engine exec.
pub(crate) type ExecReader = Box<dyn tokio::io::AsyncRead + Send + Unpin>;
/// A byte stream written to an engine exec.
pub(crate) type ExecWriter = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;

/// A command started by an engine's own exec ([`Environment::exec`]: `docker exec`, a process
/// of the local engine): its piped streams, its end, and what the engine makes of its failures.
/// The core never sees how the engine runs it (a client process today, an API stream later):
/// what it reads is bytes, what it learns of the engine's failures is [`ExecFailure`].
pub(crate) struct EngineExec {
    /// The command's standard input, when piped ([`StdinFrom::Piped`]).
    pub stdin: Option<ExecWriter>,
    /// Its standard output, unless it goes straight to ours.
    pub stdout: Option<ExecReader>,
    /// Its standard error.
    pub stderr: Option<ExecReader>,
    child: tokio::process::Child,
    judge: Arc<dyn ExecJudge>,
}

/// What an engine makes of its own exec's failures: the first bytes of stderr and the exit
/// status are the engine's message (the container is gone, the daemon unreachable) or the
/// command's own.
pub(crate) trait ExecJudge: Send + Sync {
    /// The engine's failure that `head` (the first bytes of stderr) and `status` show; `None`
    /// when they are the command's own.
    fn failure(&self, head: &[u8], status: i32) -> Option<ExecFailure>;

    /// Whether a first chunk of stderr may be the engine's own message, to be held back from
    /// the caller's terminal until [`ExecJudge::failure`] can tell (see the core's stderr pump).
    fn may_be_engine_message(&self, chunk: &[u8]) -> bool;
}

/// The judge of an engine whose exec's output is all the command's own (the local engine).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommandOwnsAll;

impl ExecJudge for CommandOwnsAll {
    fn failure(&self, _head: &[u8], _status: i32) -> Option<ExecFailure> {
        None
    }

    fn may_be_engine_message(&self, _chunk: &[u8]) -> bool {
        false
    }
}

/// How an engine exec ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExecEnd {
    /// Its exit status; 128+N when signal N killed the engine's client (or the command).
    pub code: i32,
    /// Whether a signal killed the engine's client itself (SIGPIPE, say): the command may run
    /// on unattended.
    pub signalled: bool,
}

impl EngineExec {
    /// The exec that `child` (spawned with the streams `stdio` asks for) runs, judged by `judge`.
    pub(crate) fn from_child(
        mut child: tokio::process::Child,
        judge: Arc<dyn ExecJudge>,
    ) -> EngineExec {
        EngineExec {
            stdin: child.stdin.take().map(|s| Box::new(s) as ExecWriter),
            stdout: child.stdout.take().map(|s| Box::new(s) as ExecReader),
            stderr: child.stderr.take().map(|s| Box::new(s) as ExecReader),
            child,
            judge,
        }
    }

    /// Waits for its end. Errors: waiting failed.
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExecEnd> {
        use std::os::unix::process::ExitStatusExt;
        let status = self.child.wait().await?;
        Ok(ExecEnd {
            code: status
                .code()
                .or_else(|| status.signal().map(|s| 128 + s))
                .unwrap_or(125),
            signalled: status.signal().is_some(),
        })
    }

    /// Starts killing what runs the exec (the engine's client); the command's own tree is
    /// [`Environment::kill_exec`]'s.
    pub(crate) fn start_kill(&mut self) {
        let _ = self.child.start_kill();
    }

    /// The engine's judge of this exec's failures.
    pub(crate) fn judge(&self) -> Arc<dyn ExecJudge> {
        Arc::clone(&self.judge)
    }

    /// Runs it to its end, capturing stdout and stderr, each at most `max` bytes (see
    /// [`bounded_output`]). Errors: reading or waiting failed.
    pub(crate) async fn output(mut self, max: usize) -> std::io::Result<BoundedOutput> {
        let (out, err) = (self.stdout.take(), self.stderr.take());
        let (stdout, stderr, overflow) = read_bounded(out, err, max).await?;
        if overflow.is_some() {
            self.start_kill();
            let _ = self.child.wait().await;
        } else {
            self.wait().await?;
        }
        Ok(BoundedOutput {
            status: None,
            stdout,
            stderr,
            overflow,
        })
    }
}

/// Spawns `cmd` (an engine client's exec) with the streams `stdio` asks for (stderr piped,
/// killed when dropped), judged by `judge`. Errors: the client `bin` cannot be started.
pub(crate) fn spawn_exec(
    cmd: &mut tokio::process::Command,
    stdio: ExecStdio,
    judge: Arc<dyn ExecJudge>,
    bin: &str,
) -> Result<EngineExec, crate::error::Error> {
    use std::process::Stdio;
    cmd.stdin(match stdio.stdin {
        StdinFrom::Null => Stdio::null(),
        StdinFrom::Inherit => Stdio::inherit(),
        StdinFrom::Piped => Stdio::piped(),
    })
    .stdout(if stdio.stdout_inherit {
        Stdio::inherit()
    } else {
        Stdio::piped()
    })
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    let child = cmd
        .spawn()
        .map_err(|e| crate::error::Error::EngineUnavailable {
            bin: bin.to_string(),
            reason: format!("cannot run the engine client: {e}; check engine_bin"),
        })?;
    Ok(EngineExec::from_child(child, judge))
}

/// Why an exec never ran the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExecFailure {
    /// The container does not exist any more.
    ContainerGone(String),
    /// The container exists but is not running (`start` brings it back).
    ContainerStopped(String),
    /// The container is paused (`resume` thaws it).
    ContainerPaused(String),
    /// The engine's daemon cannot be reached.
    EngineUnavailable(String),
    /// The engine failed otherwise (e.g. no `/bin/sh` in the image).
    Other(String),
}
