//! `sandbox_exec`, `sandbox_spawn`, `sandbox_ps`, `sandbox_logs` and `sandbox_kill`: commands
//! in a sandbox, in the foreground with its output capped, or in its background.

use std::path::PathBuf;

use anyhow::Result;

use super::Session;
use crate::config::MIN_MCP_OUTPUT;
use crate::error::Error;
use crate::mcp::tools::*;
use crate::sandbox::background;
use crate::sandbox::exec::{self, ExecRequest};

impl Session {
    /// `sandbox_exec`: [`exec::execute`] capturing both streams' start and end; a client's
    /// cancellation kills the command's process tree as a signal would.
    pub(super) async fn exec(
        &self,
        p: ExecParams,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> Result<Done> {
        let max = p
            .max_output_bytes
            .unwrap_or(self.ctx.cfg.mcp_max_output_bytes);
        if max < MIN_MCP_OUTPUT {
            return Err(Error::Usage(format!(
                "max_output_bytes {max} is too small; give at least {MIN_MCP_OUTPUT}"
            ))
            .into());
        }
        // The sandbox's output fills up to this much host memory per stream: the client may ask
        // for at most what the server's operator allows.
        let most = self
            .ctx
            .cfg
            .json_max_bytes
            .max(self.ctx.cfg.mcp_max_output_bytes);
        if max > most {
            return Err(Error::Refused(format!(
                "max_output_bytes {max} is more than this server holds per stream ({most}, its json_max_bytes); give at most that"
            ))
            .into());
        }
        let p_combined = p.combined;
        let (command, argv) = command_words(p.command, p.argv)?;
        let id = self.target(p.id).await?;
        let timeout = self.exec_timeout(&id, timeout_of(p.timeout_secs)?)?;
        let req = ExecRequest {
            id,
            cwd: p.cwd.map(PathBuf::from),
            user: p.user,
            env: env_assignments(p.env)?,
            timeout: Some(timeout),
            interactive: false,
            max_output: usize::try_from(max).unwrap_or(usize::MAX),
            command,
            argv,
        };
        let stop = async {
            cancelled.await;
            crate::sandbox::signals::Interruption::Cancelled
        };
        let done = exec::execute(
            &self.ctx,
            &req,
            exec::Sink::CaptureEnds(req.max_output),
            stop,
        )
        .await?;
        let out = &done.outcome;
        let result = exec::ExecResult::of(out, p_combined);
        let mut text = format!(
            "exit code {} in {} ms{}{}",
            result.exit_code,
            result.duration_ms,
            if result.oom_killed {
                format!(
                    " (killed by the kernel's OOM killer: the sandbox's memory limit is {})",
                    done.record.limits.memory
                )
            } else {
                String::new()
            },
            if result.truncated {
                " (output cut in the middle: see the marker)"
            } else {
                ""
            }
        );
        for (name, s) in [("stdout", &result.stdout), ("stderr", &result.stderr)] {
            if !s.is_empty() {
                text.push_str(&format!("\n--- {name} ---\n{s}"));
                if !s.ends_with('\n') {
                    text.push('\n');
                }
            }
        }
        let error = out.timed_out.then(|| {
            format!(
                "the command timed out after {} and {}; exit code 124",
                done.timeout
                    .map_or("0s".into(), crate::types::show_duration),
                if out.tree_killed {
                    "its process tree was killed"
                } else {
                    "killing its process tree failed (see the server's stderr)"
                }
            )
        });
        let result = ExecResult {
            id: done.record.id.to_string(),
            result,
        };
        let mut d = Done::new(&result, text)?;
        d.error = error;
        Ok(d)
    }

    /// The timeout of a `sandbox_exec` on sandbox `id` asking for `asked` (`None`: the
    /// sandbox's default, [`Ctx::settings_for`](crate::sandbox::Ctx::settings_for); zero:
    /// none). The server's `exec_timeout_secs` is a ceiling, as its other limits are: a client
    /// asking for more (or for none, `0`) is refused, and a sandbox's longer default is lowered
    /// to it. Zero when neither bounds the command (the server's is 0). Errors:
    /// [`Error::Refused`] naming the ceiling.
    fn exec_timeout(
        &self,
        id: &str,
        asked: Option<std::time::Duration>,
    ) -> Result<std::time::Duration> {
        use std::time::Duration;
        let ceiling = Duration::from_secs(self.ctx.cfg.exec_timeout_secs);
        if let Some(t) = asked {
            if !ceiling.is_zero() && (t.is_zero() || t > ceiling) {
                let what = if t.is_zero() {
                    "0 (no limit)".to_string()
                } else {
                    crate::types::show_duration(t)
                };
                return Err(Error::Refused(format!(
                    "timeout_secs {what} exceeds what this server grants ({}, its exec_timeout_secs); give at most {}, or leave timeout_secs out",
                    crate::types::show_duration(ceiling),
                    ceiling.as_secs()
                ))
                .into());
            }
            return Ok(t);
        }
        let state = self.ctx.store.load()?;
        let rec = state.resolve(id)?;
        let default = Duration::from_secs(self.ctx.settings_for(rec).exec_timeout_secs);
        Ok(match (default.is_zero(), ceiling.is_zero()) {
            (_, true) => default,
            (true, false) => ceiling,
            (false, false) => default.min(ceiling),
        })
    }

    /// `sandbox_spawn`: [`background::detach`].
    pub(super) async fn spawn(&self, p: SpawnParams) -> Result<Done> {
        let (command, argv) = command_words(p.command, p.argv)?;
        let req = ExecRequest {
            id: self.target(p.id).await?,
            cwd: p.cwd.map(PathBuf::from),
            user: p.user,
            env: env_assignments(p.env)?,
            timeout: timeout_of(p.timeout_secs)?,
            interactive: false,
            max_output: 0,
            command,
            argv,
        };
        let s = background::detach(&self.ctx, &req).await?;
        let text = format!(
            "started in the background as {} (pid {}); see sandbox_logs and sandbox_kill",
            s.handle, s.pid
        );
        Done::new(
            &SpawnResult {
                id: s.id,
                handle: s.handle,
                pid: s.pid,
            },
            text,
        )
    }

    /// `sandbox_ps`: [`background::list`].
    pub(super) async fn ps(&self, p: PsParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let (rec, list) = background::list(&self.ctx, &id).await?;
        let processes: Vec<ProcessInfo> = list
            .into_iter()
            .map(|d| ProcessInfo {
                handle: d.handle,
                pid: d.pid,
                command: d.command,
                started: d.started,
                exit_code: d.exit_code,
                running: d.running,
            })
            .collect();
        let mut text = if processes.is_empty() {
            "no background commands".to_string()
        } else {
            String::new()
        };
        for p in &processes {
            text.push_str(&format!(
                "{} pid {} {} {}\n",
                p.handle,
                p.pid,
                match (p.running, p.exit_code) {
                    (true, None) => "running".to_string(),
                    (_, c) => format!("exited {}", c.unwrap_or(255)),
                },
                p.command
            ));
        }
        Done::new(
            &PsResult {
                id: rec.id.to_string(),
                processes,
            },
            text,
        )
    }

    /// `sandbox_logs`: [`background::logs`], capped like `sandbox_exec`'s output.
    pub(super) async fn logs(&self, p: LogsParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        // Held in memory: at most what the server's operator allows per stream.
        let most = self
            .ctx
            .cfg
            .json_max_bytes
            .max(self.ctx.cfg.mcp_max_output_bytes);
        let max = p
            .max_output_bytes
            .unwrap_or(self.ctx.cfg.mcp_max_output_bytes)
            .clamp(MIN_MCP_OUTPUT, most);
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        let (mut out, mut err) = (exec::Capture::ends(max), exec::Capture::ends(max));
        let mut collect = |s: crate::report::Stream, b: &[u8]| match s {
            crate::report::Stream::Stdout => out.push(b),
            crate::report::Stream::Stderr => err.push(b),
        };
        background::logs(
            &self.ctx,
            &id,
            &p.handle,
            false,
            background::LogSink::Collect(&mut collect),
        )
        .await?;
        let (stdout, cut_out) = out.captured().text_ends();
        let (stderr, cut_err) = err.captured().text_ends();
        let mut text = String::new();
        for (name, s) in [("stdout", &stdout), ("stderr", &stderr)] {
            if !s.is_empty() {
                text.push_str(&format!("--- {name} ---\n{s}\n"));
            }
        }
        if text.is_empty() {
            text = format!("{} has written nothing yet", p.handle);
        }
        Done::new(
            &LogsResult {
                handle: p.handle,
                stdout,
                stderr,
                truncated: cut_out > 0 || cut_err > 0,
            },
            text,
        )
    }

    /// `sandbox_kill`: [`background::kill`].
    pub(super) async fn kill(&self, p: KillParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        background::kill(&self.ctx, &id, &p.handle).await?;
        let text = format!("the process tree of {} is being killed", p.handle);
        Done::new(&KillResult { handle: p.handle }, text)
    }
}

/// A tool's command as [`ExecRequest`] takes it: `command` (one shell command line) or `argv`
/// (an argument vector, run exactly), exactly one of them. Returns (words, argv?).
fn command_words(
    command: Option<String>,
    argv: Option<Vec<String>>,
) -> Result<(Vec<String>, bool)> {
    match (command, argv) {
        (Some(c), None) => Ok((vec![c], false)),
        (None, Some(a)) if !a.is_empty() => Ok((a, true)),
        (None, Some(_)) => Err(Error::Usage("argv is empty; give the program and its arguments".into()).into()),
        (None, None) => Err(Error::Usage("give the command: command (a shell command line) or argv (a program and its arguments)".into()).into()),
        (Some(_), Some(_)) => Err(Error::Usage("give either command or argv, not both".into()).into()),
    }
}

/// A tool's `env` object as `K=V` assignments. Errors: a name holding `=`.
fn env_assignments(env: Option<std::collections::BTreeMap<String, String>>) -> Result<Vec<String>> {
    env.unwrap_or_default()
        .into_iter()
        .map(|(k, v)| {
            if k.contains('=') {
                Err(Error::Usage(format!("invalid env name '{k}': it contains '='")).into())
            } else {
                Ok(format!("{k}={v}"))
            }
        })
        .collect()
}

/// A tool's `timeout_secs` (seconds, fractions allowed) as a duration. Errors: a negative or
/// non-finite number.
fn timeout_of(secs: Option<f64>) -> Result<Option<std::time::Duration>, Error> {
    secs.map(|s| {
        std::time::Duration::try_from_secs_f64(s).map_err(|_| {
            Error::Usage(format!(
                "timeout_secs {s} is not a number of seconds >= 0 (0 = no limit)"
            ))
        })
    })
    .transpose()
}
