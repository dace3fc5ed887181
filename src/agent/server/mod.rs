//! The exec agent: PID 1 serves exec requests on a unix socket in the per-sandbox run directory
//! the host bind-mounts at [`RUN_DIR`], so that a command costs a connection and a `fork`, not a
//! `docker exec` (the engine's own path: tens of milliseconds).
//!
//! Trust: the run directory is writable from inside the sandbox, and any process there may
//! connect. The agent serves only a peer that presents the sandbox's token in its first message
//! ([`super::proto::Request::Hello`]); the token reaches it through a file the host writes before
//! the container starts ([`TOKEN_FILE`]), which the agent reads and deletes before any other
//! process exists in the container. Everything a request says is checked
//! ([`super::proto::Start::check`]) and every frame is bounded ([`super::proto::MAX_FRAME`]).
//!
//! Each command runs under its own supervisor ([`super::supervise`]): a subreaper that keeps the
//! whole process tree findable. One is started ahead of the next command
//! ([`super::supervise::Idle`]), so a command waits for no `execve` of this binary. The timeout is enforced here, inside the sandbox, so it holds when
//! the caller dies; and when the caller's connection closes while the command runs, its tree is
//! killed (unless it was detached). The reply [`super::proto::Reply::Exited`] goes out as soon as
//! the command's own process has exited, with the output already in its pipes; what background
//! processes write later is read and dropped, so they never die of SIGPIPE.
//!
//! Split along its seams: this file holds the [`Agent`] and its requests; [`running`] a command
//! while it runs, [`logs`] detached commands' log files.

mod logs;
mod running;

use logs::*;
use running::*;

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use tokio::net::unix::pipe;
use tokio::net::{UnixListener, UnixStream};

use tokio::sync::mpsc;
use tokio_util::codec::Framed;

use super::proto::{self, Codec, Detached, Exit, LogsRequest, Reply, Request, Start, WinSize};
use super::supervise::{Control, Event, Idle, Spec, MARKER_VAR};
use super::user;

pub(crate) use crate::contract::{LOG_DIR, READY_FILE, RUN_DIR, SOCKET_FILE, TOKEN_FILE};
/// Each detached stream's log file is rotated past this size (one older file is kept), so a
/// chatty background process cannot fill the disk.
pub(crate) const LOG_CAP: u64 = 8 << 20;
/// After a command's own process exited, at most this many bytes already in its pipes are still
/// sent (a background process writing without pause would otherwise hold the reply back).
pub(crate) const DRAIN_CAP: usize = 4 << 20;

/// A byte stream the agent serves: its unix socket, or a TLS stream of the remote channel
/// ([`super::channel`]).
pub(crate) trait AgentStream:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin
{
}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> AgentStream for T {}

type Conn = Framed<Box<dyn AgentStream>, Codec<Request, Reply>>;
type Ctl = Framed<UnixStream, Codec<Event, Control>>;

/// The agent's state.
pub(crate) struct Agent {
    token: String,
    /// The container's environment, as PID 1 received it.
    env: Vec<(String, String)>,
    detached: Mutex<HashMap<String, Arc<Background>>>,
    /// The supervisor started ahead of the next command ([`Agent::replenish`]).
    idle: Mutex<Option<Idle>>,
}

/// A detached command.
struct Background {
    info: Mutex<Detached>,
    control: mpsc::Sender<Control>,
}

/// The SHA-256 (hex) of the sandbox's token, which the host writes in the read-only mount root
/// ([`crate::contract::ROOT`]): the run directory is the sandbox's to write, so a token found there is
/// taken only when it hashes to this (one planted for a restart outside h9sandbox, which hands
/// over nothing, is not).
pub(crate) const TOKEN_HASH_FILE: &str = "/.h9sandbox/token.sha256";

/// The SHA-256 of `token`, in hex (what [`TOKEN_HASH_FILE`] holds).
pub(crate) fn token_hash(token: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(token.trim().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads (and deletes) the token the host left in `run_dir`; `None` when there is none, or it
/// is not the one the host handed over ([`TOKEN_HASH_FILE`]; a container made by an older
/// h9sandbox has no such file, and its token is taken as before).
pub(crate) fn take_token(run_dir: &Path) -> Option<String> {
    let path = run_dir.join(TOKEN_FILE);
    let text = std::fs::read_to_string(&path).ok();
    let _ = std::fs::remove_file(&path);
    let token = text
        .map(|t| t.trim().to_string())
        .filter(|t| t.len() >= 16)?;
    match std::fs::read_to_string(TOKEN_HASH_FILE) {
        Ok(h) if h.trim() == token_hash(&token) => Some(token),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(token),
        _ => None,
    }
}

/// The agent that serves peers presenting `token`, in the environment PID 1 received.
pub(crate) fn new_agent(token: String) -> Arc<Agent> {
    let env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    Arc::new(Agent {
        token,
        env,
        detached: Mutex::new(HashMap::new()),
        idle: Mutex::new(None),
    })
}

/// Serves one connection of `agent` on `stream` (the handshake, then one request).
pub(crate) async fn serve_stream(agent: Arc<Agent>, stream: Box<dyn AgentStream>) {
    let mut conn: Conn = Framed::new(stream, Codec::default());
    if let Err(e) = agent.converse(&mut conn).await {
        let _ = conn.send(Reply::Refused(e)).await;
    }
}

/// Binds the socket in `run_dir` (replacing whatever has that name), writes the ready file, and
/// serves connections of `agent` forever.
pub(crate) async fn serve(run_dir: PathBuf, agent: Arc<Agent>) -> std::io::Result<()> {
    let socket = run_dir.join(SOCKET_FILE);
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)?;
    // Any local user may connect; only a peer with the token is served. The host reaches the
    // socket through its own directory's permissions, and must be able to write to it whatever
    // its uid (the agent has no CAP_CHOWN to give the socket away).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))?;
    let ready = run_dir.join(READY_FILE);
    let _ = std::fs::remove_file(&ready);
    std::fs::write(&ready, format!("h9sandbox-agent {}\n", proto::VERSION))?;
    agent.replenish();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        tokio::spawn(serve_stream(Arc::clone(&agent), Box::new(stream)));
    }
}

/// Compares two secrets in time independent of where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl Agent {
    /// One connection: the handshake, then one request. Errors are sent as `Refused`.
    async fn converse(self: &Arc<Self>, conn: &mut Conn) -> Result<(), String> {
        let hello = tokio::time::timeout(Duration::from_secs(10), conn.next())
            .await
            .map_err(|_| "no hello within 10 s".to_string())?;
        match hello {
            Some(Ok(Request::Hello { version, token })) => {
                if version != proto::VERSION {
                    return Err(format!(
                        "protocol version {version} is not spoken here (this agent speaks {})",
                        proto::VERSION
                    ));
                }
                if !same_secret(&token, &self.token) {
                    return Err("wrong token".into());
                }
            }
            _ => return Err("expected hello".into()),
        }
        conn.send(Reply::Welcome {
            version: proto::VERSION,
        })
        .await
        .map_err(|e| e.to_string())?;
        match conn.next().await {
            Some(Ok(Request::Start(start))) => {
                start.check()?;
                if start.detach {
                    let reply = self.detach(start).await?;
                    let sent = conn.send(reply).await.map_err(|e| e.to_string());
                    self.replenish();
                    sent
                } else {
                    self.attached(conn, start, None).await
                }
            }
            Some(Ok(Request::Terminal(t))) => {
                t.check()?;
                self.attached(conn, t.start, Some(t.size)).await
            }
            Some(Ok(Request::Forward(f))) => super::forward::serve(conn, f).await,
            Some(Ok(Request::Stats(r))) => {
                r.check()?;
                let sample = super::worker::run(move || super::stats::sample(&r))
                    .await
                    .ok_or("sampling the statistics failed")?;
                conn.send(Reply::Stats(Box::new(sample)))
                    .await
                    .map_err(|e| e.to_string())
            }
            Some(Ok(Request::List)) => {
                let list = self.list();
                conn.send(Reply::Processes(list))
                    .await
                    .map_err(|e| e.to_string())
            }
            Some(Ok(Request::Kill { handle })) => {
                let b = self.background(&handle)?;
                let _ = b.control.send(Control::Kill).await;
                conn.send(Reply::End).await.map_err(|e| e.to_string())
            }
            Some(Ok(Request::Logs(r))) => self.logs(conn, r).await,
            Some(Ok(other)) => Err(format!("unexpected request {other:?}")),
            Some(Err(e)) => Err(e.to_string()),
            None => Ok(()),
        }
    }

    /// The environment of a command: the container's, then `HOME` for its user, then the
    /// request's variables (each replacing one of the same name).
    fn environment(&self, start: &Start, home: &Path) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self.env.clone();
        let mut set = |k: &str, v: String| {
            env.retain(|(n, _)| n != k);
            env.push((k.to_string(), v));
        };
        set("HOME", home.to_string_lossy().into_owned());
        for (k, v) in &start.env {
            set(k, v.clone());
        }
        env
    }

    /// A supervisor for a command, holding its standard streams (`stdin` `None`: `/dev/null`):
    /// the one started ahead ([`Agent::replenish`]) while it is usable, else a new one; its PID
    /// and the agent's end of its control socket, on which the spec goes next. Errors: no
    /// supervisor could be started (`EAGAIN` at the sandbox's process limit).
    fn supervisor(
        &self,
        stdin: Option<std::os::fd::BorrowedFd<'_>>,
        stdout: std::os::fd::BorrowedFd<'_>,
        stderr: std::os::fd::BorrowedFd<'_>,
    ) -> std::io::Result<(i32, std::os::unix::net::UnixStream)> {
        let ready = self
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .filter(Idle::usable);
        if let Some(idle) = ready {
            let pid = idle.pid;
            // Gone since (killed by root in the sandbox): a new one, as when there was none.
            if let Ok(ctl) = idle.hand_over(stdin, stdout, stderr) {
                return Ok((pid, ctl));
            }
        }
        let idle = Idle::start()?;
        let pid = idle.pid;
        Ok((pid, idle.hand_over(stdin, stdout, stderr)?))
    }

    /// Starts a supervisor ahead of the next command ([`Idle`]) unless one waits already; at
    /// the sandbox's process limit, none (the next command starts its own, or is refused as
    /// before). Called once the agent serves, and after each command's start has been answered,
    /// off the path of its reply.
    pub(crate) fn replenish(&self) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.is_none() {
            *idle = Idle::start().ok();
        }
    }

    /// Starts `start` under a supervisor (on a new terminal of size `tty`, when given); returns
    /// it once the command's process runs, with its PID and the program executed.
    async fn spawn(
        &self,
        start: &Start,
        tty: Option<WinSize>,
    ) -> Result<(Running, u32, String), Reply> {
        let fail = |m: String| Reply::Failed {
            code: 125,
            message: m,
        };
        let (uid, gid) = user::resolve(&start.user).map_err(fail)?;
        let home = user::home_of(uid);
        let marker = uuid::Uuid::new_v4().simple().to_string();
        let mut env = self.environment(start, &home);
        env.retain(|(k, _)| k != MARKER_VAR);
        env.push((MARKER_VAR.to_string(), marker.clone()));
        let spec = Spec {
            command: start.command.clone(),
            cwd: start.cwd.clone(),
            env,
            uid,
            gid,
            home: Some(home.to_string_lossy().into_owned()),
            tty,
        };
        let (out_r, out_w) = pipe_pair().map_err(|e| fail(format!("cannot make a pipe: {e}")))?;
        let (err_r, err_w) = pipe_pair().map_err(|e| fail(format!("cannot make a pipe: {e}")))?;
        let (stdin_child, stdin) = if start.stdin {
            let (r, w) = pipe_pair().map_err(|e| fail(format!("cannot make a pipe: {e}")))?;
            (Some(r), Some(w))
        } else {
            (None, None)
        };
        // PID 1 reaps it ([`super::init`]); its status travels on the control socket.
        let (supervisor, ours) = self
            .supervisor(
                stdin_child.as_ref().map(|r| r.as_fd()),
                out_w.as_fd(),
                err_w.as_fd(),
            )
            .map_err(|e| {
                fail(
                    super::stats::at_process_limit(&e)
                        .unwrap_or_else(|| format!("cannot start the supervisor: {e}")),
                )
            })?;
        // The supervisor holds the command's ends now; ours would keep its output open.
        drop((stdin_child, out_w, err_w));
        ours.set_nonblocking(true)
            .map_err(|e| fail(e.to_string()))?;
        let mut ctl: Ctl = Framed::new(
            UnixStream::from_std(ours).map_err(|e| fail(e.to_string()))?,
            Codec::default(),
        );
        ctl.send_spec(spec).await.map_err(|e| fail(e.to_string()))?;
        let mut early_session = None;
        // The command runs from its fork on, before the supervisor reports it: one that stops
        // its supervisor first (root may) must not hold this wait, so it has the command's
        // timeout, and START_PATIENCE from the supervisor's last word.
        let now = tokio::time::Instant::now();
        let timeout_at = start.timeout_ms.map(|ms| now + Duration::from_millis(ms));
        let mut patience_at = now + START_PATIENCE;
        let (pid, session, program) = loop {
            let ev = tokio::select! {
                ev = ctl.next() => ev,
                _ = sleep_until(Some(timeout_at.map_or(patience_at, |t| t.min(patience_at)))) => {
                    // SAFETY: kill(2) of our own child (PID 1 reaps it).
                    unsafe { libc::kill(supervisor, libc::SIGKILL) };
                    kill_exec(&marker, early_session).await;
                    if timeout_at.is_some_and(|t| t <= patience_at) {
                        return Err(Reply::Exited(Exit {
                            code: 124,
                            timed_out: true,
                            killed: true,
                            oom_killed: false,
                            signal: None,
                        }));
                    }
                    return Err(fail(format!(
                        "the command's supervisor did not report the command's start within {}s (stopped by the command?); every process of the command was killed",
                        START_PATIENCE.as_secs()
                    )));
                }
            };
            match ev {
                Some(Ok(Event::Session { session })) => {
                    early_session = session;
                    patience_at = tokio::time::Instant::now() + START_PATIENCE;
                }
                Some(Ok(Event::Started {
                    pid,
                    session,
                    program,
                })) => break (pid, session, program),
                Some(Ok(Event::Failed { code, message })) => {
                    return Err(Reply::Failed { code, message })
                }
                _ => {
                    // Killed (by the command, which may already run) before it said the
                    // command started: whatever of it runs goes, by marker and session.
                    kill_exec(&marker, early_session).await;
                    return Err(fail(
                        "the command's supervisor was killed (by the command?) before it reported the command's start; every process of the command was killed".into(),
                    ));
                }
            }
        };
        let to_pipe =
            |fd: OwnedFd| pipe::Receiver::from_owned_fd(fd).map_err(|e| fail(e.to_string()));
        let running = Running {
            ctl,
            supervisor,
            marker,
            session,
            stdout: Some(to_pipe(out_r)?),
            stderr: Some(to_pipe(err_r)?),
            stdin: match stdin {
                Some(w) => Some(pipe::Sender::from_owned_fd(w).map_err(|e| fail(e.to_string()))?),
                None => None,
            },
        };
        Ok((running, pid, program))
    }

    /// Runs `start` attached to `conn` (on a new terminal of size `tty`, when given): streams
    /// its output, forwards stdin, signals and resizes, enforces its timeout, and kills its tree
    /// when the connection closes before it exits.
    async fn attached(
        &self,
        conn: &mut Conn,
        start: Start,
        tty: Option<WinSize>,
    ) -> Result<(), String> {
        let (mut run, pid, program) = match self.spawn(&start, tty).await {
            Ok(r) => r,
            Err(reply) => {
                let sent = conn.send(reply).await.map_err(|e| e.to_string());
                self.replenish();
                return sent;
            }
        };
        conn.send(Reply::Started {
            pid,
            handle: None,
            program,
        })
        .await
        .map_err(|e| e.to_string())?;
        let (mut sink, requests) = conn.split();
        // Requests are read on their own, so a stdin write that waits for the command never
        // holds up its output.
        let (to_main, mut from_reader) = mpsc::channel::<Option<Request>>(4);
        let reader = read_requests(requests, run.stdin.take(), to_main);
        tokio::pin!(reader);
        let mut reader_done = false;
        let deadline = start
            .timeout_ms
            .map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
        let mut f = Flags::default();
        let mut killed_at: Option<tokio::time::Instant> = None;
        let mut out_buf = vec![0u8; proto::CHUNK];
        let mut err_buf = vec![0u8; proto::CHUNK];
        let code = loop {
            tokio::select! {
                n = read_some(&mut run.stdout, &mut out_buf) => if let Some(n) = n {
                    let msg = Reply::Stdout(out_buf[..n].to_vec());
                    f.forward(&mut sink, msg, deadline, &mut run.ctl).await;
                },
                n = read_some(&mut run.stderr, &mut err_buf) => if let Some(n) = n {
                    let msg = Reply::Stderr(err_buf[..n].to_vec());
                    f.forward(&mut sink, msg, deadline, &mut run.ctl).await;
                },
                r = from_reader.recv(), if !f.caller_gone => match r {
                    Some(Some(Request::Signal(sig))) => { let _ = run.ctl.send(Control::Signal(sig)).await; }
                    Some(Some(Request::Cancel)) => { f.killed = true; let _ = run.ctl.send(Control::Kill).await; }
                    Some(Some(Request::Resize(size))) => { let _ = run.ctl.send(Control::Resize(size)).await; }
                    _ => { f.caller_gone = true; }
                },
                ev = run.ctl.next() => match ev {
                    Some(Ok(Event::Exited { code, oom, signal })) => break (code, oom, signal),
                    Some(Ok(_)) => {}
                    // The supervisor died under the command (root in the sandbox may kill it).
                    _ => { f.supervisor_lost = true; break (125, false, None) }
                },
                _ = &mut reader, if !reader_done => { reader_done = true; }
                _ = sleep_until(deadline), if !f.killed => {
                    (f.timed_out, f.killed) = (true, true);
                    let _ = run.ctl.send(Control::Kill).await;
                }
                // The supervisor was killed a while ago, but its control socket is still open
                // (a process of the command kept a copy): it is lost all the same.
                _ = sleep_until(killed_at.map(|t| t + 3 * KILL_PATIENCE)), if f.escalated => {
                    f.supervisor_lost = true;
                    break (125, false, None);
                }
                _ = sleep_until(killed_at.map(|t| t + KILL_PATIENCE)), if !f.escalated => {
                    // A supervisor that does not act (root in the sandbox may SIGSTOP it) is
                    // killed; its end ends this loop.
                    // (finish() then kills the tree by its marker.)
                    f.escalated = true;
                    // SAFETY: kill(2) of our own child.
                    unsafe { libc::kill(run.supervisor, libc::SIGKILL) };
                }
            }
            if f.killed && killed_at.is_none() {
                killed_at = Some(tokio::time::Instant::now());
            }
            if f.caller_gone && !f.killed {
                f.killed = true;
                let _ = run.ctl.send(Control::Kill).await;
            }
        };
        finish(&mut sink, &mut run, code, &f).await;
        tokio::spawn(run.linger(None, None));
        self.replenish();
        Ok(())
    }

    /// Starts `start` in the background, its output going to log files; returns its handle.
    async fn detach(&self, start: Start) -> Result<Reply, String> {
        let (run, pid, program) = match self.spawn(&start, None).await {
            Ok(r) => r,
            Err(reply) => return Ok(reply),
        };
        let handle = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        let (tx, rx) = mpsc::channel(4);
        let entry = Arc::new(Background {
            info: Mutex::new(Detached {
                handle: handle.clone(),
                pid,
                command: match &start.command {
                    proto::CommandLine::Shell(s) => s.clone(),
                    proto::CommandLine::Argv(a) => a.join(" "),
                },
                started: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                exit_code: None,
                running: true,
            }),
            control: tx,
        });
        self.detached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(handle.clone(), Arc::clone(&entry));
        let logs = log_files(&handle);
        let timeout = start.timeout_ms.map(Duration::from_millis);
        tokio::spawn(run.linger(Some((entry, rx, logs)), timeout));
        Ok(Reply::Started {
            pid,
            handle: Some(handle),
            program,
        })
    }

    fn background(&self, handle: &str) -> Result<Arc<Background>, String> {
        self.detached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(handle)
            .cloned()
            .ok_or_else(|| format!("no detached command {handle}"))
    }

    fn list(&self) -> Vec<Detached> {
        let mut v: Vec<Detached> = self
            .detached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|b| b.info.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .collect();
        v.sort_by_key(|d| d.started);
        v
    }

    /// Sends what a detached command wrote (stdout, then stderr), then, with `follow`, what it
    /// writes, until its tree is gone.
    async fn logs(&self, conn: &mut Conn, r: LogsRequest) -> Result<(), String> {
        let b = self.background(&r.handle)?;
        let [out, err] = log_files(&r.handle);
        let mut offsets = [0u64, 0u64];
        loop {
            let running = b.info.lock().unwrap_or_else(|e| e.into_inner()).running;
            for (i, path) in [&out, &err].into_iter().enumerate() {
                let chunks = read_from(path, &mut offsets[i])
                    .map_err(|e| format!("cannot read the log {}: {e}", path.display()))?;
                for c in chunks {
                    let msg = if i == 0 {
                        Reply::Stdout(c)
                    } else {
                        Reply::Stderr(c)
                    };
                    conn.send(msg).await.map_err(|e| e.to_string())?;
                }
            }
            if !r.follow || !running {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                next = conn.next() => if next.is_none() { return Ok(()) },
            }
        }
        conn.send(Reply::End).await.map_err(|e| e.to_string())
    }
}
