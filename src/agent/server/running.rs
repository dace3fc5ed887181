//! A command while it runs: its supervisor's control socket and output pipes, the caller's
//! requests read alongside, the end (exit, timeout, a lost supervisor or caller) sent back.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

use tokio::sync::mpsc;

use super::*;
use crate::agent::proto::{self, Codec, Exit, Reply, Request};
use crate::agent::supervise::{Control, Event, Spec};

/// A started command: its supervisor's control socket and its output pipes.
pub(super) struct Running {
    pub(super) ctl: Ctl,
    /// The supervisor's PID.
    pub(super) supervisor: i32,
    /// The value of [`MARKER_VAR`] every process of the command inherits.
    pub(super) marker: String,
    /// The command's audit session, which none of its processes can leave
    /// ([`crate::agent::supervise::join_audit_session`]); `None` where the kernel gave none.
    pub(super) session: Option<u32>,
    pub(super) stdout: Option<pipe::Receiver>,
    pub(super) stderr: Option<pipe::Receiver>,
    pub(super) stdin: Option<pipe::Sender>,
}

pub(super) trait SendSpec {
    async fn send_spec(&mut self, spec: Spec) -> std::io::Result<()>;
}

impl SendSpec for Ctl {
    /// The spec is the supervisor's first message, in the other direction's type.
    async fn send_spec(&mut self, spec: Spec) -> std::io::Result<()> {
        let mut codec: Codec<(), Spec> = Codec::default();
        let mut buf = bytes::BytesMut::new();
        tokio_util::codec::Encoder::encode(&mut codec, spec, &mut buf)?;
        self.get_mut().write_all(&buf).await
    }
}

impl Running {
    /// Keeps the command's tree supervised until its last process exits: reads its output
    /// (into `logs` for a detached command, else nowhere) so no writer dies of SIGPIPE, and
    /// passes kill requests on.
    /// `timeout`: kill the tree after this long (a detached command's own timeout).
    pub(super) async fn linger(
        mut self,
        detached: Option<(Arc<Background>, mpsc::Receiver<Control>, [PathBuf; 2])>,
        timeout: Option<Duration>,
    ) {
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut killed = false;
        // When the supervisor was told to kill the tree; one that has not ended it
        // KILL_PATIENCE later (stopped by root in the sandbox) is killed, and the tree with it.
        let mut kill_asked: Option<tokio::time::Instant> = None;
        let (entry, mut control, mut files) = match detached {
            Some((e, c, paths)) => (Some(e), Some(c), paths.map(|p| Some(LogFile::new(p)))),
            None => (None, None, [None, None]),
        };
        let mut out_buf = vec![0u8; proto::CHUNK];
        let mut err_buf = vec![0u8; proto::CHUNK];
        loop {
            tokio::select! {
                n = read_some(&mut self.stdout, &mut out_buf) => {
                    if let (Some(n), Some(f)) = (n, &mut files[0]) { f.append(&out_buf[..n]); }
                }
                n = read_some(&mut self.stderr, &mut err_buf) => {
                    if let (Some(n), Some(f)) = (n, &mut files[1]) { f.append(&err_buf[..n]); }
                }
                c = recv_control(&mut control) => {
                    if let Some(c) = c {
                        if c == Control::Kill {
                            kill_asked.get_or_insert_with(tokio::time::Instant::now);
                        }
                        let _ = self.ctl.send(c).await;
                    }
                }
                _ = sleep_until(deadline), if !killed => {
                    killed = true;
                    kill_asked.get_or_insert_with(tokio::time::Instant::now);
                    let _ = self.ctl.send(Control::Kill).await;
                }
                _ = sleep_until(kill_asked.map(|t| t + KILL_PATIENCE)) => {
                    // SAFETY: kill(2) of our own child.
                    unsafe { libc::kill(self.supervisor, libc::SIGKILL) };
                    kill_exec(&self.marker, self.session).await;
                    kill_asked = None;
                }
                ev = self.ctl.next() => match ev {
                    Some(Ok(Event::Exited { code, .. })) => {
                        if let Some(e) = &entry {
                            e.info.lock().unwrap_or_else(|e| e.into_inner()).exit_code = Some(code);
                        }
                    }
                    Some(Ok(Event::Empty)) => break,
                    Some(Ok(_)) => {}
                    // The supervisor died under the command: nothing answers for the tree.
                    Some(Err(_)) | None => {
                        kill_exec(&self.marker, self.session).await;
                        break;
                    }
                },
            }
        }
        // The tree is gone: what is left in the pipes is the last of it.
        for (i, pipe) in [&mut self.stdout, &mut self.stderr].into_iter().enumerate() {
            for chunk in drain(pipe, DRAIN_CAP) {
                if let Some(f) = &mut files[i] {
                    f.append(&chunk);
                }
            }
        }
        if let Some(e) = &entry {
            let mut info = e.info.lock().unwrap_or_else(|e| e.into_inner());
            info.running = false;
            info.exit_code.get_or_insert(255);
        }
    }
}

/// How long the supervisor has to end a tree it was told to kill before the agent does it.
pub(super) const KILL_PATIENCE: Duration = Duration::from_secs(1);

/// How long a supervisor may take between its words while it starts a command (reading the
/// spec, joining the audit session, the fork and exec) before it counts as stopped.
pub(super) const START_PATIENCE: Duration = Duration::from_secs(10);

/// What happened to an attached command and its caller.
#[derive(Debug, Default)]
pub(super) struct Flags {
    pub(super) timed_out: bool,
    pub(super) killed: bool,
    pub(super) caller_gone: bool,
    pub(super) supervisor_lost: bool,
    /// The supervisor did not end the tree in [`KILL_PATIENCE`] (stopped, say): the agent killed
    /// the tree by its marker and the supervisor itself.
    pub(super) escalated: bool,
}

impl Flags {
    /// Sends `msg` to the caller (unless gone) by the deadline; at the deadline, kills the tree.
    pub(super) async fn forward<S>(
        &mut self,
        sink: &mut S,
        msg: Reply,
        deadline: Option<tokio::time::Instant>,
        ctl: &mut Ctl,
    ) where
        S: futures_util::Sink<Reply> + Unpin,
    {
        if self.caller_gone {
            return;
        }
        match send_by(sink, msg, deadline.filter(|_| !self.killed)).await {
            Sent::Yes => {}
            Sent::CallerGone => self.caller_gone = true,
            Sent::Deadline => {
                (self.timed_out, self.killed) = (true, true);
                let _ = ctl.send(Control::Kill).await;
            }
        }
    }
}

/// Reads the caller's requests of an attached command: stdin goes to the command's stdin,
/// signals and cancellation to `to_main`; `None` there when the caller is gone.
pub(super) async fn read_requests(
    mut requests: futures_util::stream::SplitStream<&mut Conn>,
    mut stdin: Option<pipe::Sender>,
    to_main: mpsc::Sender<Option<Request>>,
) {
    loop {
        match requests.next().await {
            Some(Ok(Request::Stdin(bytes))) => {
                if let Some(s) = &mut stdin {
                    if s.write_all(&bytes).await.is_err() {
                        stdin = None;
                    }
                }
            }
            Some(Ok(Request::CloseStdin)) => stdin = None,
            Some(Ok(r @ (Request::Signal(_) | Request::Cancel | Request::Resize(_)))) => {
                if to_main.send(Some(r)).await.is_err() {
                    return;
                }
            }
            // The caller is gone (or broke the protocol).
            _ => {
                let _ = to_main.send(None).await;
                return;
            }
        }
    }
}

/// Ends an attached command once its own process exited with `code` (status, OOM-killed, the
/// signal that ended it): kills
/// its tree by the marker when its supervisor was lost, sends what is left in the pipes and the
/// exit status (unless the caller is gone).
pub(super) async fn finish<S>(
    sink: &mut S,
    run: &mut Running,
    code: (i32, bool, Option<i32>),
    f: &Flags,
) where
    S: futures_util::Sink<Reply> + Unpin,
{
    if f.supervisor_lost {
        kill_exec(&run.marker, run.session).await;
        if !f.caller_gone && !f.escalated {
            // Say only what is true: without an audit session, a process that cleared its
            // environment and left the tree cannot be found.
            let msg: &[u8] = if run.session.is_some() {
                b"h9sandbox: error: the command's supervisor was killed (by the command?); \
                  every process of the command was killed\n"
            } else {
                b"h9sandbox: error: the command's supervisor was killed (by the command?); \
                  its processes that still carry its marker were killed (one that cleared its \
                  environment may still run; this runtime gives no audit session)\n"
            };
            let _ = sink.send(Reply::Stderr(msg.to_vec())).await;
        }
    }
    if f.caller_gone {
        return;
    }
    for (pipe, stdout) in [(&mut run.stdout, true), (&mut run.stderr, false)] {
        for chunk in drain(pipe, DRAIN_CAP) {
            let msg = if stdout {
                Reply::Stdout(chunk)
            } else {
                Reply::Stderr(chunk)
            };
            if sink.send(msg).await.is_err() {
                return;
            }
        }
    }
    let _ = sink
        .send(Reply::Exited(Exit {
            // Killed by us at its timeout, however the supervisor ended.
            code: if f.escalated && f.timed_out {
                124
            } else {
                code.0
            },
            timed_out: f.timed_out,
            killed: f.killed,
            oom_killed: code.1 && !f.killed,
            signal: code.2,
        }))
        .await;
}

/// How [`send_by`] ended.
pub(super) enum Sent {
    Yes,
    CallerGone,
    /// The deadline came first: the message may be lost.
    Deadline,
}

/// Sends `msg` to the caller, unless `deadline` passes first: a caller that stops reading
/// (its own output blocked, say) must not hold the command's timeout off.
pub(super) async fn send_by<S>(
    sink: &mut S,
    msg: Reply,
    deadline: Option<tokio::time::Instant>,
) -> Sent
where
    S: futures_util::Sink<Reply> + Unpin,
{
    tokio::select! {
        r = sink.send(msg) => if r.is_ok() { Sent::Yes } else { Sent::CallerGone },
        _ = sleep_until(deadline) => Sent::Deadline,
    }
}

/// SIGKILLs every process of an exec whose supervisor is gone: those carrying `marker` in
/// [`MARKER_VAR`] or in its audit `session`, and all their descendants, each as its owner
/// ([`crate::agent::supervise::kill_marked`]: PID 1 is root without `CAP_KILL`), on the agent's
/// worker thread ([`crate::agent::worker`]), which exists even when the command filled the sandbox's
/// process limit.
pub(super) async fn kill_exec(marker: &str, session: Option<u32>) {
    let args = crate::agent::supervise::KillMarkedArgs {
        marker: marker.to_string(),
        session,
    };
    crate::agent::worker::run(move || crate::agent::supervise::kill_marked(&args)).await;
}

pub(super) async fn recv_control(c: &mut Option<mpsc::Receiver<Control>>) -> Option<Control> {
    match c {
        Some(rx) => match rx.recv().await {
            Some(v) => Some(v),
            None => {
                *c = None;
                None
            }
        },
        None => std::future::pending().await,
    }
}

/// Reads what is there from `pipe`; `None` (and the pipe closed) at its end. Never resolves for
/// a closed pipe.
pub(super) async fn read_some(pipe: &mut Option<pipe::Receiver>, buf: &mut [u8]) -> Option<usize> {
    let Some(p) = pipe else {
        return std::future::pending().await;
    };
    match p.read(buf).await {
        Ok(0) | Err(_) => {
            *pipe = None;
            None
        }
        Ok(n) => Some(n),
    }
}

/// What `pipe` holds right now (at most `cap` bytes), without waiting for more. Reads the
/// descriptor itself (it is non-blocking): the runtime's readiness flag may lag behind data
/// already written by a process that has exited.
pub(super) fn drain(pipe: &mut Option<pipe::Receiver>, cap: usize) -> Vec<Vec<u8>> {
    use std::os::fd::AsFd;
    let mut out = Vec::new();
    let mut total = 0;
    let Some(p) = pipe else { return out };
    while total < cap {
        let mut buf = vec![0u8; proto::CHUNK];
        match rustix::io::read(p.as_fd(), &mut buf) {
            Ok(0) => {
                *pipe = None;
                break;
            }
            Ok(n) => {
                buf.truncate(n);
                total += n;
                out.push(buf);
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => break,
        }
    }
    out
}

pub(super) async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

pub(super) fn pipe_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(Into::into)
}
