//! `h9sandbox exec`: run a command in a sandbox ([`crate::sandbox::exec`]), streaming its
//! output, or capturing it into a JSON document; exit with its status. With `--detach`, start it
//! in the background ([`crate::sandbox::background`]) and print its handle.

use anyhow::Result;
use serde::Serialize;

use super::output;
use super::{ExecArgs, Format};
use crate::error::Error;
use crate::sandbox::exec::{execute, ExecRequest, Sink};
use crate::sandbox::Ctx;

/// `exec --format json` document.
#[derive(Debug, Serialize)]
pub struct ExecJson {
    /// Exit status (as our own exit status).
    pub exit_code: i32,
    /// Standard output, capped at `--max-output` bytes.
    pub stdout: String,
    /// Standard error, capped at `--max-output` bytes.
    pub stderr: String,
    /// Wall-clock milliseconds.
    pub duration_ms: u64,
    /// Whether the timeout killed the command.
    pub timed_out: bool,
    /// Whether either stream was cut at `--max-output`.
    pub truncated: bool,
    /// Whether the kernel's OOM killer ended the command (the sandbox's memory limit).
    pub oom_killed: bool,
}

/// The JSON document of a command's outcome.
pub fn json(out: &crate::sandbox::exec::Outcome) -> ExecJson {
    ExecJson {
        exit_code: out.exit_code,
        stdout: out.stdout.text(),
        stderr: out.stderr.text(),
        duration_ms: out.duration.as_millis() as u64,
        timed_out: out.timed_out,
        truncated: out.stdout.truncated() || out.stderr.truncated(),
        oom_killed: out.oom_killed,
    }
}

/// What `exec` says on stderr when the kernel's OOM killer ended the command in sandbox `rec`.
pub fn oom_message(rec: &crate::state::Record) -> String {
    format!(
        "the command was killed by the kernel's OOM killer: sandbox {} ran out of memory (its limit is {}; `up --memory` sets a larger one)",
        rec.short_id(),
        rec.limits.memory
    )
}

/// The core's request for `exec`'s arguments.
pub fn request(args: &ExecArgs) -> ExecRequest {
    ExecRequest {
        id: args.id.clone(),
        cwd: args.cwd.clone(),
        user: args.user.clone(),
        env: args.env.clone(),
        timeout: args.timeout,
        interactive: args.interactive,
        max_output: args.max_output,
        command: args.command.clone(),
        argv: false,
    }
}

/// Runs `exec`; returns the command's exit status.
pub async fn run(ctx: &Ctx, format: Format, args: &ExecArgs) -> Result<i32> {
    if let Some(opt) = args.command.first().filter(|w| w.starts_with('-')) {
        return Err(Error::Invalid(format!(
            "unknown option '{opt}' (h9sandbox's options go before `--`, the command after it); see `h9sandbox exec --help`"
        ))
        .into());
    }
    if args.detach {
        let started = crate::sandbox::background::detach(ctx, &request(args)).await?;
        match format {
            Format::Json => output::print_json(&started)?,
            Format::Table => output::print_line(&started.handle)?,
        }
        return Ok(0);
    }
    let sink = match format {
        Format::Json => Sink::Capture(args.max_output),
        Format::Table => Sink::Forward,
    };
    let done = execute(ctx, &request(args), sink, std::future::pending()).await?;
    let (out, timeout) = (done.outcome, done.timeout);
    if out.timed_out && format == Format::Table {
        eprintln!(
            "h9sandbox: command timed out after {}s{}",
            timeout.map_or(0, |t| t.as_secs()),
            if out.tree_killed {
                "; its process tree was killed"
            } else {
                ""
            }
        );
    }
    if out.oom_killed {
        ctx.reporter.warn(&oom_message(&done.record));
    }
    if format == Format::Json {
        output::print_json(&json(&out))?;
    }
    Ok(out.exit_code)
}
