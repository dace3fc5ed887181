//! Running a shell command in a sandbox (`exec`), streaming or capturing its output, with a
//! timeout that kills the command's whole process tree inside the container.
//!
//! [`run_command`] is the reusable core (the bootstrap calls it too); [`execute`] adds what
//! `exec` does around it (resolve the sandbox, check the working directory and the environment,
//! apply the timeout) for an [`ExecRequest`], which both front ends make.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::signals::Interruption;
use super::Ctx;
use crate::channel::ConnectError;
use crate::engine::{
    AnyEngine, CommandLine, EngineExec, Environment, ExecEnd, ExecFailure, ExecJudge, ExecReader,
    ExecSpec, ExecStdio, RunAs, StdinFrom, EXEC_MARKER_VAR,
};
use crate::error::{Error, EXIT_TIMEOUT};
use crate::report::{self, Forward, Stream};
use crate::state::{Lifecycle, Record};
use crate::types::{Isolation, Signal, WorkdirMode};

/// How long the output of a command that has exited is still read, when something it left
/// running in the background holds its stdout or stderr open (`docker exec` waits about as
/// long; without this bound, a local sandbox's `exec -- 'server &'` would last as long as the
/// server).
pub(crate) const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// The longest command text one request to a sandbox's agent carries (one frame,
/// [`crate::contract::proto::MAX_FRAME`]): the bound of `exec --command-file`.
pub(crate) const COMMAND_MAX_BYTES: usize = crate::contract::proto::MAX_FRAME;

/// Where a stream of the command goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sink {
    /// Straight to our own stdout/stderr, as it arrives.
    Forward,
    /// Both streams to our own stderr, as they arrive (keeps our stdout for a result: `up`'s ID,
    /// a JSON document).
    Stderr,
    /// Into memory, keeping at most this many bytes of each stream (the rest is counted and
    /// dropped).
    Capture(usize),
    /// Into memory, keeping at most this many bytes of each stream: the first half and the
    /// last half (a rolling window), so that both the start of the output and how it ended
    /// survive; the bytes between are counted and dropped. For output read by a model.
    CaptureEnds(usize),
}

impl Sink {
    /// Where a forwarding sink sends the command's stdout; `None` when it captures.
    pub(super) fn stdout_target(self) -> Option<Stream> {
        match self {
            Sink::Forward => Some(Stream::Stdout),
            Sink::Stderr => Some(Stream::Stderr),
            Sink::Capture(_) | Sink::CaptureEnds(_) => None,
        }
    }

    /// The bytes a capturing sink keeps of the start and of the end of each stream; `None`
    /// when it forwards.
    pub(super) fn caps(self) -> Option<(usize, usize)> {
        match self {
            Sink::Capture(n) => Some((n, 0)),
            Sink::CaptureEnds(n) => Some((n - n / 2, n / 2)),
            Sink::Forward | Sink::Stderr => None,
        }
    }
}

/// The result of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Exit status: the command's (128+N for signal N), or 124 on timeout.
    pub exit_code: i32,
    /// Captured stdout (empty when forwarded).
    pub stdout: Captured,
    /// Captured stderr (empty when forwarded).
    pub stderr: Captured,
    /// Both streams captured together, chunk by chunk in the order they were read (kept as
    /// each stream is, at the sink's cap); empty when forwarded. Through the agent that is the
    /// order in which the agent read the command's two pipes; through the engine's exec, the
    /// order in which h9sandbox read the engine client's two pipes (see docs/reference/json.md).
    pub combined: Captured,
    /// Wall-clock time from start to exit.
    pub duration: Duration,
    /// Whether the timeout killed the process tree.
    pub timed_out: bool,
    /// What made us kill the tree (a signal to h9sandbox, our stdout closed, the caller's
    /// `stop`), if something did.
    pub interrupted: Option<Interruption>,
    /// Whether a timeout or signal made us kill the tree and the kill succeeded.
    pub tree_killed: bool,
    /// Whether the kernel's OOM killer ended the command (known through the agent; through the
    /// engine's exec, the in-container wrapper says so on the command's stderr instead).
    pub oom_killed: bool,
    /// The signal that ended the command's own process (its wait status, through the agent);
    /// `None` when it exited, and always through the engine's exec, where only the exit status
    /// (128+N) is known.
    pub signal: Option<Signal>,
}

impl Outcome {
    /// Why the command ended, one stable word (the first that applies): `timed_out` (its
    /// timeout killed the tree: exit 124), `interrupted` (h9sandbox killed the tree because of
    /// [`Outcome::interrupted`]: a signal to it, its stdout closed, the caller cancelled),
    /// `oom_killed` (the kernel's OOM killer), `signal` (a signal ended the command's own
    /// process: [`Outcome::signal`]), `exited` (it exited by itself, with `exit_code`).
    pub(crate) fn ended(&self) -> &'static str {
        if self.timed_out {
            "timed_out"
        } else if self.interrupted.is_some() {
            "interrupted"
        } else if self.oom_killed {
            "oom_killed"
        } else if self.signal.is_some() {
            "signal"
        } else {
            "exited"
        }
    }

    /// The name of the signal that ended the command's own process (`SIGKILL`), if one did.
    pub(crate) fn signal_name(&self) -> Option<String> {
        self.signal.map(|s| s.to_string())
    }
}

/// A captured stream: the first bytes kept, the last bytes kept ([`Sink::CaptureEnds`]), and
/// the total seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Captured {
    /// The kept prefix.
    pub bytes: Vec<u8>,
    /// The kept suffix: the stream's last bytes after `bytes` (empty unless the sink keeps the
    /// end and the stream outgrew the prefix).
    pub tail: std::collections::VecDeque<u8>,
    /// Total bytes the stream carried.
    pub total: u64,
}

impl Captured {
    /// Whether bytes were dropped.
    pub(crate) fn truncated(&self) -> bool {
        self.total > (self.bytes.len() + self.tail.len()) as u64
    }

    /// Keeps what `chunk` adds to the first `head` and the last `tail` bytes of the stream (the
    /// caller counts `total`).
    pub(super) fn keep(&mut self, chunk: &[u8], head: usize, tail: usize) {
        let room = head.saturating_sub(self.bytes.len()).min(chunk.len());
        self.bytes.extend_from_slice(&chunk[..room]);
        let rest = &chunk[room..];
        if tail == 0 || rest.is_empty() {
            return;
        }
        let rest = &rest[rest.len().saturating_sub(tail)..];
        let overflow = (self.tail.len() + rest.len()).saturating_sub(tail);
        self.tail.drain(..overflow);
        self.tail.extend(rest);
    }

    /// The kept bytes as text, with a marker line where bytes were cut between the start and
    /// the end ([`Sink::CaptureEnds`]); also the number of bytes cut, 0 when nothing was.
    /// Characters are never split: a multi-byte character cut at either side of the gap is
    /// dropped whole (and counted as cut); invalid UTF-8 is replaced by U+FFFD.
    pub(crate) fn text_ends(&self) -> (String, u64) {
        if !self.truncated() || self.tail.is_empty() {
            let mut all = self.bytes.clone();
            all.extend(self.tail.iter());
            let cut = self.total - all.len() as u64;
            let whole = Captured {
                bytes: all,
                tail: Default::default(),
                total: self.total,
            };
            return (whole.text(), cut);
        }
        let mut head = &self.bytes[..];
        if let Err(e) = std::str::from_utf8(head) {
            if e.error_len().is_none() {
                head = &head[..e.valid_up_to()];
            }
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        // A character cut at the start of the tail shows as up to 3 continuation bytes.
        let skip = tail
            .iter()
            .take(3)
            .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
            .count();
        let tail = &tail[skip..];
        let cut = self.total - (head.len() + tail.len()) as u64;
        let text = format!(
            "{}\n[... {cut} bytes cut here (the start and the end are kept) ...]\n{}",
            String::from_utf8_lossy(head),
            String::from_utf8_lossy(tail)
        );
        (text, cut)
    }

    /// The kept bytes as text: a multi-byte character cut by the cap is dropped whole, invalid
    /// UTF-8 is replaced by U+FFFD.
    pub(crate) fn text(&self) -> String {
        let mut bytes = &self.bytes[..];
        if self.truncated() {
            if let Err(e) = std::str::from_utf8(bytes) {
                if e.error_len().is_none() {
                    bytes = &bytes[..e.valid_up_to()];
                }
            }
        }
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// Bytes collected by a caller as a capturing [`Sink`] keeps them (e.g. a background command's
/// logs for a model).
#[derive(Debug, Clone, Default)]
pub(crate) struct Capture {
    captured: Captured,
    head: usize,
    tail: usize,
}

impl Capture {
    /// Keeps the first and the last halves of `max` bytes, as [`Sink::CaptureEnds`].
    pub(crate) fn ends(max: usize) -> Capture {
        let (head, tail) = Sink::CaptureEnds(max).caps().unwrap_or((max, 0));
        Capture {
            captured: Captured::default(),
            head,
            tail,
        }
    }

    /// Adds `bytes`.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.captured.total += bytes.len() as u64;
        self.captured.keep(bytes, self.head, self.tail);
    }

    /// What was kept.
    pub(crate) fn captured(&self) -> &Captured {
        &self.captured
    }
}

/// A command to run in a sandbox, as `exec` takes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ExecRequest {
    /// The sandbox: ID, unique ID prefix, or name.
    pub id: String,
    /// Working directory: relative to the work dir, absolute inside it, or (a container's) any
    /// absolute directory of the container (default: the work dir).
    pub cwd: Option<PathBuf>,
    /// Who runs it, `USER|UID[:GID]` ([`RunAs::parse`]; a name is looked up in the container's
    /// `/etc/passwd`); default: the sandbox's user.
    pub user: Option<String>,
    /// Extra environment variables, `K=V` each.
    pub env: Vec<String>,
    /// Time before the command's process tree is killed; zero = none (default: config
    /// `exec_timeout_secs`).
    pub timeout: Option<Duration>,
    /// Attach our standard input to the command.
    pub interactive: bool,
    /// Bytes kept of each of stdout and stderr when captured (the caller passes it to the
    /// [`Sink`]).
    pub max_output: usize,
    /// The command: one word is a shell command line (`bash -c`, or `sh -c` without bash);
    /// two or more are a program and its arguments, run exactly, without a shell (as
    /// `docker exec` and `kubectl exec` do).
    pub command: Vec<String>,
    /// The words are an argument vector even when there is only one.
    pub argv: bool,
}

impl ExecRequest {
    /// What [`ExecRequest::command`] means: a shell command line or an argument vector.
    pub(crate) fn to_command(&self) -> CommandLine {
        match self.command.as_slice() {
            [line] if !self.argv => CommandLine::Shell(line.clone()),
            words => CommandLine::Argv(words.to_vec()),
        }
    }
}

/// What [`execute`] ran, and how it ended.
#[derive(Debug, Clone)]
pub(crate) struct Executed {
    /// The sandbox's record.
    pub record: Record,
    /// The timeout that applied (`None`: none).
    pub timeout: Option<Duration>,
    /// How the command ended.
    pub outcome: Outcome,
}

/// Runs `req.command` (its words joined with spaces) in the sandbox `req.id` as `exec` does:
/// the sandbox must be Running, `req.cwd` must stay inside the work dir, `req.env` must be K=V,
/// and `req.timeout` (else the sandbox's `exec_timeout_secs`, [`Ctx::settings_for`]; 0 = none)
/// bounds the run.
/// `req.max_output` and `req.interactive` are the caller's to honour through `sink` and the spec
/// (an interactive command reads our stdin). `stop` ends the command early like a signal,
/// killing its tree (see [`run_command_until`]). Errors: as [`run_command`], and an unknown
/// sandbox or bad argument ([`Error`]).
pub(crate) async fn execute(
    ctx: &Ctx,
    req: &ExecRequest,
    sink: Sink,
    stop: impl std::future::Future<Output = Interruption>,
) -> Result<Executed> {
    let (rec, spec, timeout) = plan(ctx, req)?;
    let outcome = run_command_until(ctx, &rec, &spec, timeout, sink, stop).await?;
    Ok(Executed {
        record: rec,
        timeout,
        outcome,
    })
}

/// What [`execute`] runs for `req`, checked as it says: the sandbox's record, the engine's spec
/// of the command and the timeout that applies (`None`: none). A terminal's command
/// ([`super::terminal`]) is checked the same way. Errors: as [`execute`]'s, before anything
/// runs.
pub(crate) fn plan(ctx: &Ctx, req: &ExecRequest) -> Result<(Record, ExecSpec, Option<Duration>)> {
    let state = ctx.store.load()?;
    let rec = state.resolve(&req.id)?;
    ensure_running(rec)?;
    super::lifecycle::check_workdir(rec)?;
    let container = ctx.runner_for(rec)?.kind().isolation() != Isolation::None;
    let cwd = match rec.workdir_mode {
        WorkdirMode::Mount => resolve_cwd(&rec.workdir, req.cwd.as_deref(), container)?,
        WorkdirMode::Copy => resolve_copied_cwd(&rec.workdir, req.cwd.as_deref())?,
    };
    let run_as = run_as(req.user.as_deref(), container)?;
    let env = parse_env(&req.env)?;
    let timeout = req
        .timeout
        .unwrap_or(Duration::from_secs(ctx.settings_for(rec).exec_timeout_secs));
    // Beyond ~136 years is "none" (and keeps Instant arithmetic from overflowing).
    let timeout =
        (!timeout.is_zero() && timeout < Duration::from_secs(u32::MAX as u64)).then_some(timeout);
    let spec = ExecSpec {
        command: req.to_command(),
        cwd,
        env,
        interactive: req.interactive,
        marker: Uuid::new_v4().simple().to_string(),
        user: run_as.or_else(|| {
            rec.user
                .filter(|_| rec.agent.is_some())
                .map(|u| RunAs::from((u.uid, u.gid)))
        }),
        wrapped: rec.agent.is_some(),
        wrapper_enters: super::agent::speaks_current(rec),
        backstop: backstop(timeout),
    };
    Ok((rec.clone(), spec, timeout))
}

/// The in-container wrapper's own timeout for a command whose timeout is `timeout`: a little
/// later than the host's, which kills the tree first when it lives.
pub(crate) fn backstop(timeout: Option<Duration>) -> Option<Duration> {
    timeout.map(|t| t + Duration::from_millis(500))
}

/// Fails unless the record is Running.
pub(crate) fn ensure_running(rec: &Record) -> Result<(), Error> {
    if rec.state == Lifecycle::Running {
        return Ok(());
    }
    let id = rec.short_id();
    let detail = match (&rec.state, &rec.error) {
        (_, Some(e)) => format!(": {e}"),
        (Lifecycle::Pending, None) => " (it is still starting)".into(),
        (Lifecycle::Stopped, None) => format!("; `h9sandbox start {id}` starts it again"),
        (Lifecycle::Paused, None) => format!("; `h9sandbox resume {id}` thaws it"),
        _ => String::new(),
    };
    Err(Error::NotRunning {
        id: rec.short_id(),
        state: rec.state.to_string(),
        detail,
    })
}

/// `--user` parsed ([`RunAs::parse`]); `None` without one. Errors: a malformed one, or one for
/// a local sandbox (its commands run as the invoking user, on the host).
pub(crate) fn run_as(user: Option<&str>, container: bool) -> Result<Option<RunAs>, Error> {
    let Some(u) = user else { return Ok(None) };
    if !container {
        return Err(Error::Invalid(format!(
            "--user {u}: a local sandbox runs its commands as you, on the host; use a container engine to run them as another user"
        )));
    }
    RunAs::parse(u)
        .map(Some)
        .map_err(|why| Error::Invalid(format!("invalid --user {u:?}: {why}")))
}

/// Resolves `--cwd`: relative to the work dir, or absolute inside it, it must be a directory
/// inside the work dir (checked on the host, through symlinks); any other absolute path is a
/// directory of the container when `container` (the container checks it, as the command's user:
/// never a host path), and refused for a local sandbox.
pub(crate) fn resolve_cwd(
    workdir: &Path,
    cwd: Option<&Path>,
    container: bool,
) -> Result<PathBuf, Error> {
    let Some(cwd) = cwd else {
        return Ok(workdir.to_path_buf());
    };
    if container && cwd.is_absolute() && !lexically_inside(workdir, cwd) {
        use std::os::unix::ffi::OsStrExt;
        if cwd.as_os_str().as_bytes().contains(&0) {
            return Err(Error::Invalid("--cwd holds a NUL byte".into()));
        }
        return Ok(cwd.to_path_buf());
    }
    let joined = workdir.join(cwd);
    let canon = joined.canonicalize().map_err(|e| {
        Error::Invalid(format!(
            "--cwd {}: {e}; give a directory inside the work dir {}",
            cwd.display(),
            workdir.display()
        ))
    })?;
    if !canon.starts_with(workdir) || !canon.is_dir() {
        return Err(Error::PathEscape(format!(
            "--cwd {} is not a directory inside the work dir {}; pass a path inside it (relative paths start there)",
            cwd.display(),
            workdir.display()
        )));
    }
    Ok(canon)
}

/// Resolves `--cwd` of a sandbox whose work dir `workdir` is copied (the container's, like any
/// other directory there): relative to the work dir, never above it (`..` taken lexically); an
/// absolute path as it is. The container checks that its user can enter it.
pub(crate) fn resolve_copied_cwd(workdir: &Path, cwd: Option<&Path>) -> Result<PathBuf, Error> {
    let Some(cwd) = cwd else {
        return Ok(workdir.to_path_buf());
    };
    use std::os::unix::ffi::OsStrExt;
    if cwd.as_os_str().as_bytes().contains(&0) {
        return Err(Error::Invalid("--cwd holds a NUL byte".into()));
    }
    if cwd.is_absolute() {
        return Ok(cwd.to_path_buf());
    }
    let joined = workdir.join(cwd);
    if !lexically_inside(workdir, &joined) {
        return Err(Error::PathEscape(format!(
            "--cwd {} is not a directory inside the work dir {}; pass a path inside it (relative paths start there)",
            cwd.display(),
            workdir.display()
        )));
    }
    let mut lexical = PathBuf::new();
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir => {
                lexical.pop();
            }
            std::path::Component::CurDir => {}
            c => lexical.push(c),
        }
    }
    Ok(lexical)
}

/// Whether the absolute `path`, its `.` and `..` taken lexically, is `dir` or lies inside it.
fn lexically_inside(dir: &Path, path: &Path) -> bool {
    let mut lexical = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                lexical.pop();
            }
            std::path::Component::CurDir => {}
            c => lexical.push(c),
        }
    }
    lexical.starts_with(dir)
}

/// Parses `K=V` environment assignments.
pub(crate) fn parse_env(raw: &[String]) -> Result<Vec<(String, String)>, Error> {
    raw.iter()
        .map(|e| {
            let (k, v) = e
                .split_once('=')
                .ok_or_else(|| Error::Invalid(format!("invalid --env '{e}': expected K=V")))?;
            if k.is_empty() || k == EXEC_MARKER_VAR {
                return Err(Error::Invalid(format!(
                    "invalid --env '{e}': the name is empty or reserved"
                )));
            }
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
}

/// Runs `spec` in the sandbox `rec`, on the engine that runs it. `timeout` bounds the run (the
/// process tree is then killed and the exit status is 124); SIGINT/SIGTERM/SIGHUP to us also
/// kill the tree (status 128+N). Errors: the engine's own failures (container gone, engine
/// unreachable).
pub(crate) async fn run_command(
    ctx: &Ctx,
    rec: &Record,
    spec: &ExecSpec,
    timeout: Option<Duration>,
    sink: Sink,
) -> Result<Outcome> {
    run_command_until(ctx, rec, spec, timeout, sink, std::future::pending()).await
}

/// [`run_command`], also ended when `stop` resolves (the caller gave up, e.g. a client
/// cancelled its request): the process tree is killed as on a signal, and `stop`'s value is
/// reported as [`Outcome::interrupted`] (exit status 143, as for SIGTERM).
pub(crate) async fn run_command_until(
    ctx: &Ctx,
    rec: &Record,
    spec: &ExecSpec,
    timeout: Option<Duration>,
    sink: Sink,
    stop: impl std::future::Future<Output = Interruption>,
) -> Result<Outcome> {
    // A record saying "local" runs on the host only when the configuration allows it.
    let engine = ctx.runner_for(rec)?;
    let agent = match ctx.cfg.exec_agent {
        true => super::agent::connect(ctx, rec).await,
        false => Ok(None),
    };
    match agent {
        Ok(Some(conn)) => {
            // `-v`: what the agent started, once it says (the shell it found, the program on
            // its PATH).
            let verbose = ctx.verbose().then_some(&*ctx.reporter);
            return super::exec_agent::run(rec, conn, spec, timeout, sink, stop, verbose).await;
        }
        Ok(None) => {}
        // The engine's exec still works; say why it is used.
        Err(e @ ConnectError::Unreachable(_)) => {
            if ctx.verbose() {
                ctx.reporter
                    .note(&format!("{e}; running the command through the engine's exec"));
            }
        }
        Err(e) => ctx.reporter.warn(&format!(
            "{e}; running the command through the engine's exec (`h9sandbox down {}` and a new sandbox restore the agent)",
            rec.short_id()
        )),
    }
    if let Some(out) = local_program_missing(&engine, spec, sink).await {
        return Ok(out);
    }
    if let Some(e) = without_engine_exec(&engine, rec).await {
        return Err(e.into());
    }
    refuse_past_argument_limit(rec, spec)?;
    let started = Instant::now();
    let mut child = spawn(&engine, rec, spec, sink)?;
    let judge = child.judge();
    let mut pumps = Pumps::start(&mut child, sink);
    let ended = wait_for_end(
        &engine,
        rec,
        spec,
        &mut child,
        timeout,
        stop,
        &mut pumps.broken,
    )
    .await?;
    if let Some(e) = &ended.kill_error {
        ctx.reporter.warn(&format!(
            "could not kill all of the command's processes: {e:#}; `h9sandbox down {}` removes them with the sandbox",
            rec.short_id()
        ));
    }
    let duration = started.elapsed();
    let code = ended.status.code;
    let (head, stdout, stderr, combined) = pumps.finish().await?;
    if !ended.timed_out && ended.interrupted.is_none() {
        if let Some(e) = engine_failure(&engine, judge.as_ref(), rec, &head, code) {
            return Err(e.into());
        }
    }
    // The engine's message was held back in case it was the engine's own failure; it was not.
    if head.held {
        write_stderr(&head.bytes).await;
    }
    Ok(Outcome {
        exit_code: ended.exit_code(code),
        stdout,
        stderr,
        combined,
        duration,
        timed_out: ended.timed_out,
        interrupted: ended.interrupted,
        tree_killed: (ended.timed_out || ended.interrupted.is_some()) && ended.kill_error.is_none(),
        oom_killed: false,
        // A local sandbox's child is the command's own shell or program, whose wait status
        // tells; the engine's client only passes 128+N on.
        signal: match engine.kind().isolation() {
            Isolation::None
                if !ended.timed_out && ended.interrupted.is_none() && ended.status.signalled =>
            {
                Some(Signal::from_number(ended.status.code - 128))
            }
            _ => None,
        },
    })
}

/// The kernel's limit on one argument of `execve(2)`, its terminating NUL included
/// (`MAX_ARG_STRLEN`, 32 pages of 4 KiB).
const MAX_ARG_STRLEN: usize = 32 * 4096;

/// Refuses, with the reason and what to do, a command that the engine's exec (or a local
/// sandbox's shell) would have to take as an argument longer than [`MAX_ARG_STRLEN`]: the
/// client's start would fail with a bare `E2BIG`. Through the sandbox's agent no such limit
/// applies (the command travels in a message).
fn refuse_past_argument_limit(rec: &Record, spec: &ExecSpec) -> Result<(), Error> {
    let longest = match &spec.command {
        CommandLine::Shell(line) => line.len(),
        CommandLine::Argv(argv) => argv.iter().map(String::len).max().unwrap_or(0),
    };
    if longest < MAX_ARG_STRLEN {
        return Ok(());
    }
    let how = match rec.isolation {
        Isolation::None => "a local sandbox's commands are started as arguments of its shell".to_string(),
        Isolation::Container => format!(
            "sandbox {} runs its commands through the engine's exec (no agent socket the host can reach, or exec_agent = false), which takes them as arguments",
            rec.short_id()
        ),
    };
    Err(Error::Invalid(format!(
        "the command holds a word of {longest} bytes, more than the kernel's {} KiB for one argument, and {how}; put the script in a file of the work dir and run that file (through the sandbox's agent, `exec --command-file` takes up to 4 MiB)",
        MAX_ARG_STRLEN >> 10
    )))
}

/// For a local sandbox's argument vector whose program is not found on `PATH`: the outcome a
/// shell would give (status 127, the reason on the command's stderr), as the agent gives in a
/// container. `None` otherwise.
async fn local_program_missing(engine: &AnyEngine, spec: &ExecSpec, sink: Sink) -> Option<Outcome> {
    let CommandLine::Argv(argv) = &spec.command else {
        return None;
    };
    if engine.kind().isolation() != Isolation::None || argv[0].contains('/') {
        return None;
    }
    let path = spec
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_default();
    if crate::agent::wrap::find_on(&path, &argv[0]).is_some() {
        return None;
    }
    let message = format!(
        "h9sandbox: error: {}: command not found\n",
        crate::report::printable(&argv[0])
    );
    let mut stderr = Captured::default();
    match sink.caps() {
        Some((head, tail)) => {
            stderr.total = message.len() as u64;
            stderr.keep(message.as_bytes(), head, tail);
        }
        None => write_stderr(message.as_bytes()).await,
    }
    Some(Outcome {
        exit_code: 127,
        stdout: Captured::default(),
        combined: stderr.clone(),
        stderr,
        duration: Duration::ZERO,
        timed_out: false,
        interrupted: None,
        tree_killed: false,
        oom_killed: false,
        signal: None,
    })
}

/// `command` as the agent ran it, in one line for `-v`: `program` (what it started, e.g.
/// `/bin/bash`) for a shell line as `bash -c LINE`, else the program and its arguments.
pub(super) fn describe_as_run(program: &str, command: &CommandLine) -> String {
    use crate::engine::shell::shell_quote;
    match command {
        CommandLine::Shell(line) => {
            let shell = program.rsplit('/').next().unwrap_or(program);
            format!("{} -c {}", shell_quote(shell), shell_quote(line))
        }
        CommandLine::Argv(argv) => std::iter::once(program)
            .chain(argv[1..].iter().map(String::as_str))
            .map(shell_quote)
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// Why a command of sandbox `rec`, whose agent did not answer, cannot run on `engine` when the
/// engine has no exec of its own to stand in ([`Capabilities::engine_exec`](crate::engine::Capabilities::engine_exec),
/// a swarm): its container is gone ([`Error::ContainerGone`]) or has ended
/// ([`Error::ContainerStopped`]; a task never starts again, its files are gone with it), as the
/// engine reports it. `None` with an exec of the engine's, while the container runs (its node
/// unreachable, which the engine's exec error says), or when the engine cannot tell.
pub(super) async fn without_engine_exec(engine: &AnyEngine, rec: &Record) -> Option<Error> {
    if engine.capabilities().engine_exec {
        return None;
    }
    let id = rec.short_id();
    let container = rec.container_ref();
    // A swarm's sandbox is a service, whose one task's container ran it.
    let noun = match engine.kind() {
        crate::types::EngineKind::Swarm => "service",
        _ => "container",
    };
    match engine.inspect(container).await {
        Ok(None) => Some(Error::ContainerGone {
            reason: format!(
                "its {noun} {container} no longer exists (removed outside h9sandbox)"
            ),
            id,
        }),
        Ok(Some(st)) if st.status == "exited" => Some(Error::ContainerStopped {
            reason: format!(
                "its {noun} {container} is not running (it exited with status {} outside h9sandbox{}); its files are gone with it",
                st.exit_code,
                if st.error.is_empty() {
                    String::new()
                } else {
                    format!(": {}", st.error)
                }
            ),
            hint: format!("`h9sandbox down {id}` removes it"),
            id,
        }),
        _ => None,
    }
}

/// Starts the engine's exec running `spec` in the sandbox `rec`, its stdin attached only when
/// interactive, its stderr piped, its stdout piped unless it may go straight to ours.
fn spawn(
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

/// Both streams' chunks as they are read, for [`Outcome::combined`] (shared by the two tasks).
type Combined = std::sync::Arc<std::sync::Mutex<Captured>>;

/// Adds `chunk` to `combined` as a capturing sink keeps it (`caps`: its head and tail).
fn combine(combined: &Combined, chunk: &[u8], (head, tail): (usize, usize)) {
    let mut c = combined.lock().unwrap_or_else(|e| e.into_inner());
    c.total += chunk.len() as u64;
    c.keep(chunk, head, tail);
}

/// The tasks that copy or capture a running command's output.
struct Pumps {
    /// Stdout's task (`None`: stdout goes straight to ours).
    stdout: Option<JoinHandle<std::io::Result<Captured>>>,
    /// Stderr's task.
    stderr: JoinHandle<std::io::Result<(Head, Captured)>>,
    /// Both streams together, in the order read (capturing sinks only).
    combined: Combined,
    /// Tells both to stop reading ([`OUTPUT_GRACE`] after the command ended).
    drained: watch::Sender<bool>,
    /// Turns true when our stdout's reader went away (EPIPE), as for `exec ... | head -1`.
    broken: watch::Receiver<bool>,
}

impl Pumps {
    /// Starts the tasks on `child`'s piped streams, sending them to `sink`.
    fn start(child: &mut EngineExec, sink: Sink) -> Pumps {
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
    async fn finish(self) -> Result<(Head, Captured, Captured, Captured)> {
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
struct Ended {
    /// How the engine's exec ended.
    status: ExecEnd,
    /// Whether the timeout ended it.
    timed_out: bool,
    /// The signal (or the caller's reason, or `SIGPIPE`) that ended it, if one did.
    interrupted: Option<Interruption>,
    /// Why killing the process tree failed, when it was killed and that failed.
    kill_error: Option<anyhow::Error>,
}

impl Ended {
    /// The exit status of the run: 124 on timeout, 128+N when signal N ended it, else the
    /// client's `code`.
    fn exit_code(&self, code: i32) -> i32 {
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
async fn wait_for_end(
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
        sig = super::interrupted() => { interrupted = Some(Interruption::Signal(sig)); None }
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
fn engine_failure(
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
        ExecFailure::Other(reason) => Error::Invalid(reason),
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
async fn capture<R: AsyncRead + Unpin>(
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
struct Head {
    bytes: Vec<u8>,
    held: bool,
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

async fn write_stderr(bytes: &[u8]) {
    let mut f = Forward::new(Stream::Stderr);
    f.write(bytes).await;
    f.finish().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_text_never_splits_a_character() {
        // "é" is two bytes; a cap of 3 over "aé€" keeps "aé" and drops the cut "€".
        let full = "aé€".as_bytes();
        let c = Captured {
            bytes: full[..4].to_vec(),
            total: full.len() as u64,
            ..Default::default()
        };
        assert!(c.truncated());
        assert_eq!(c.text(), "aé");
        // Invalid bytes inside are replaced, not dropped.
        let c = Captured {
            bytes: b"a\xffb".to_vec(),
            total: 3,
            ..Default::default()
        };
        assert_eq!(c.text(), "a\u{fffd}b");
    }

    /// Feeds `input` in chunks of `chunk` bytes to a capture of `max` bytes (head and tail).
    fn ends(input: &[u8], chunk: usize, max: usize) -> Captured {
        let mut c = Captured::default();
        let (head, tail) = Sink::CaptureEnds(max).caps().unwrap();
        for part in input.chunks(chunk) {
            c.total += part.len() as u64;
            c.keep(part, head, tail);
        }
        c
    }

    #[test]
    fn capture_ends_keeps_the_start_and_the_end() {
        let input: Vec<u8> = (0..100u8).map(|i| b'a' + i % 26).collect();
        for chunk in [1, 3, 7, 64, 100] {
            let c = ends(&input, chunk, 10);
            assert_eq!(c.bytes, &input[..5], "chunk {chunk}");
            assert_eq!(c.tail.iter().copied().collect::<Vec<_>>(), &input[95..]);
            assert!(c.truncated());
            let (text, cut) = c.text_ends();
            assert_eq!(cut, 90);
            assert_eq!(
                text,
                "abcde\n[... 90 bytes cut here (the start and the end are kept) ...]\nrstuv"
            );
        }
        // Output that fits is kept whole, without a marker, even when it outgrew the head.
        let c = ends(b"0123456789", 4, 10);
        assert!(!c.truncated());
        assert_eq!(c.text_ends(), ("0123456789".to_string(), 0));
        let c = ends(b"0123", 1, 10);
        assert_eq!(c.text_ends(), ("0123".to_string(), 0));
        // A head-only capture keeps no tail.
        let mut c = Captured {
            total: 5,
            ..Default::default()
        };
        c.keep(b"01234", 2, 0);
        assert_eq!((c.bytes.as_slice(), c.tail.len()), (&b"01"[..], 0));
    }

    #[test]
    fn capture_ends_never_splits_a_character() {
        // "€" is three bytes: the head's last one and the tail's first one are cut mid-way.
        let input = "€€€€xx€€€€".as_bytes(); // 26 bytes
        let c = ends(input, 5, 8);
        let (text, cut) = c.text_ends();
        assert_eq!(
            text,
            "€\n[... 20 bytes cut here (the start and the end are kept) ...]\n€"
        );
        assert_eq!(cut, 20);
        assert!(!text.contains('\u{fffd}'));
    }

    #[test]
    fn env_needs_k_equals_v() {
        assert_eq!(
            parse_env(&["A=1=2".into()]).unwrap(),
            vec![("A".to_string(), "1=2".to_string())]
        );
        assert!(parse_env(&["A".into()]).is_err());
        assert!(parse_env(&["=1".into()]).is_err());
        assert!(parse_env(&[format!("{EXEC_MARKER_VAR}=x")]).is_err());
    }

    #[test]
    fn cwd_stays_inside_the_workdir() {
        let d = tempfile::tempdir().unwrap();
        let w = d.path().canonicalize().unwrap();
        std::fs::create_dir(w.join("sub")).unwrap();
        for container in [false, true] {
            assert_eq!(
                resolve_cwd(&w, Some(Path::new("sub")), container).unwrap(),
                w.join("sub")
            );
            assert_eq!(
                resolve_cwd(&w, Some(&w.join("sub")), container).unwrap(),
                w.join("sub")
            );
            assert!(resolve_cwd(&w, Some(Path::new("..")), container).is_err());
            assert!(resolve_cwd(&w, Some(Path::new("missing")), container).is_err());
            // Inside the work dir lexically: checked on the host.
            std::os::unix::fs::symlink("/etc", w.join("esc")).unwrap_or(());
            assert!(resolve_cwd(&w, Some(&w.join("esc")), container).is_err());
        }
        // Elsewhere: the container's directory (never the host's), or refused for a local one.
        assert!(resolve_cwd(&w, Some(Path::new("/etc")), false).is_err());
        assert_eq!(
            resolve_cwd(&w, Some(Path::new("/etc")), true).unwrap(),
            Path::new("/etc")
        );
    }
}
