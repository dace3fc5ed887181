//! Running a shell command in a sandbox (`exec`), streaming or capturing its output, with a
//! timeout that kills the command's whole process tree inside the container.
//!
//! [`run_command`] is the reusable core (the bootstrap calls it too); [`execute`] adds what
//! `exec` does around it (resolve the sandbox, check the working directory and the environment,
//! apply the timeout) for an [`ExecRequest`], which both front ends make.
//!
//! Its parts: [`output`] (sinks, the outcome, captured streams), [`run`] (running a command on
//! the engine that runs it), [`engine_exec`] (the engine's own exec as the transport).

mod engine_exec;
mod output;
mod run;
#[cfg(test)]
mod tests;

pub(crate) use output::{Capture, Captured, ExecResult, Outcome, Sink};
pub(crate) use run::run_command;
use run::run_command_until;
pub(in crate::sandbox) use run::{describe_as_run, without_engine_exec};

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use uuid::Uuid;

use crate::engine::{CommandLine, Environment, ExecSpec, RunAs, EXEC_MARKER_VAR};
use crate::error::Error;
use crate::sandbox::signals::Interruption;
use crate::sandbox::Ctx;
use crate::state::{Lifecycle, Record};
use crate::types::{Isolation, WorkdirMode};

/// How long the output of a command that has exited is still read, when something it left
/// running in the background holds its stdout or stderr open (`docker exec` waits about as
/// long; without this bound, a local sandbox's `exec -- 'server &'` would last as long as the
/// server).
pub(crate) const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// The longest command text one request to a sandbox's agent carries (one frame,
/// [`crate::contract::proto::MAX_FRAME`]): the bound of `exec --command-file`.
pub(crate) const COMMAND_MAX_BYTES: usize = crate::contract::proto::MAX_FRAME;

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
        return Err(Error::Refused(format!(
            "--user {u}: a local sandbox runs its commands as you, on the host; use a container engine to run them as another user"
        )));
    }
    RunAs::parse(u)
        .map(Some)
        .map_err(|why| Error::Usage(format!("invalid --user {u:?}: {why}")))
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
            return Err(Error::Usage("--cwd holds a NUL byte".into()));
        }
        return Ok(cwd.to_path_buf());
    }
    let joined = workdir.join(cwd);
    let canon = joined.canonicalize().map_err(|e| {
        Error::Usage(format!(
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
        return Err(Error::Usage("--cwd holds a NUL byte".into()));
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
                .ok_or_else(|| Error::Usage(format!("invalid --env '{e}': expected K=V")))?;
            if k.is_empty() || k == EXEC_MARKER_VAR {
                return Err(Error::Usage(format!(
                    "invalid --env '{e}': the name is empty or reserved"
                )));
            }
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
}
