//! Running a command in a sandbox on the engine that runs it ([`run_command`]), through its agent
//! or the engine's own exec, with the checks made before (the argument limit, a local program).

use std::time::{Duration, Instant};

use anyhow::Result;

use super::engine_exec::{engine_failure, spawn, wait_for_end, write_stderr, Pumps};
use super::output::{Captured, Outcome, Sink};
use crate::channel::ConnectError;
use crate::engine::{AnyEngine, CommandLine, Environment, ExecSpec};
use crate::error::Error;
use crate::sandbox::signals::Interruption;
use crate::sandbox::Ctx;
use crate::state::Record;
use crate::types::{Isolation, Signal};

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
        true => crate::sandbox::agent::connect(ctx, rec).await,
        false => Ok(None),
    };
    let mut why = None;
    match agent {
        Ok(Some(conn)) => {
            // `-v`: what the agent started, once it says (the shell it found, the program on
            // its PATH).
            let verbose = ctx.verbose().then_some(&*ctx.reporter);
            return crate::sandbox::exec_agent::run(rec, conn, spec, timeout, sink, stop, verbose).await;
        }
        Ok(None) => {}
        // Without an exec of the engine's (a swarm), why is the error (below).
        Err(e) if !engine.capabilities().engine_exec => why = Some(e),
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
    if let Some(e) = without_engine_exec(&engine, rec, why.as_ref()).await {
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
            return Err(stopped_by_oom(&engine, rec, e).await.into());
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
    Err(Error::Refused(format!(
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
/// `/bin/bash`) for a shell line as `bash -c LINE`, else the program and its arguments (also
/// for a shell line the agent ran without its shell, [`crate::contract::simple`], whose
/// `program` is then the first word's, found on `PATH`).
pub(in crate::sandbox) fn describe_as_run(program: &str, command: &CommandLine) -> String {
    use crate::engine::shell::shell_quote;
    match command {
        CommandLine::Shell(line) => {
            if let Some(words) = crate::contract::simple::simple_words(line) {
                let first = words[0];
                if program == first || program.ends_with(&format!("/{first}")) {
                    return std::iter::once(program)
                        .chain(words[1..].iter().copied())
                        .map(shell_quote)
                        .collect::<Vec<_>>()
                        .join(" ");
                }
            }
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

/// `e`, or, when it says that `rec`'s container is not running and the engine reports that the
/// kernel's OOM killer ended it, an error that says so, naming the sandbox's memory limit, in
/// place of "stopped outside h9sandbox".
async fn stopped_by_oom(engine: &AnyEngine, rec: &Record, e: Error) -> Error {
    let Error::ContainerStopped { id, hint, .. } = &e else {
        return e;
    };
    match engine.inspect(rec.container_ref()).await {
        Ok(Some(st)) if !st.running && st.oom_killed => Error::ContainerStopped {
            reason: format!(
                "its container {} was stopped by the kernel's OOM killer: the sandbox ran out of memory (its limit is {}; `up --memory` sets a larger one, and files left in /tmp or /dev/shm count against it)",
                rec.container_ref(),
                rec.limits.memory
            ),
            id: id.clone(),
            hint: hint.clone(),
        },
        _ => e,
    }
}

/// Why a command of sandbox `rec`, whose agent did not answer (`why`, when connecting failed),
/// cannot run on `engine` when the engine has no exec of its own to stand in
/// ([`Capabilities::engine_exec`](crate::engine::Capabilities::engine_exec), a swarm): its
/// container is gone ([`Error::ContainerGone`]) or has ended ([`Error::ContainerStopped`]; a
/// task never starts again, its files are gone with it), as the engine reports it, or, while it
/// runs or the engine cannot tell, `why` itself (its node unreachable, an agent that did not
/// answer in time). `None` with an exec of the engine's, or with no `why` while the container
/// runs (the engine's exec error then says what it can).
pub(in crate::sandbox) async fn without_engine_exec(
    engine: &AnyEngine,
    rec: &Record,
    why: Option<&ConnectError>,
) -> Option<Error> {
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
        _ => why.map(|why| {
            let hint = match why {
                ConnectError::Unreachable(_) => "is its node down (`docker node ls`)? Is the channel's published port reachable from this machine?".to_string(),
                _ => format!("`h9sandbox down {id}` and a new sandbox restore the agent"),
            };
            Error::Sandbox(format!(
                "{why}, and engine {} has no exec of its own to fall back on ({noun} {container}): {hint}",
                engine.kind().as_str()
            ))
        }),
    }
}
