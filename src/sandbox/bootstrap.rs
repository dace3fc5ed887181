//! Bootstraps: a one-time setup command (`pip install -e .`, `apt-get install …`) run in a
//! sandbox with its own long timeout, streaming its output, and its outcome ([`BootstrapRun`])
//! recorded in the sandbox's record. `h9sandbox bootstrap` runs [`run`]; `up --bootstrap` runs
//! [`execute`].
//!
//! The command runs like `exec` does ([`super::exec::run_command`]), in the work dir, with `TMPDIR`
//! on the sandbox's exec-capable scratch directory ([`crate::engine::SCRATCH_DIR`]), since `/tmp`
//! is `noexec` and many installers build there.

use std::time::Duration;

use anyhow::Result;
use uuid::Uuid;

use super::exec::{ensure_running, run_command, Sink};
use super::Ctx;
use crate::engine::{CommandLine, ExecSpec, RunAs};
use crate::error::{Error, EXIT_OWN_FAILURE};
use crate::state::{now_rfc3339, BootstrapRun, Record};

/// Runs a bootstrap in the sandbox `query` (ID, prefix or name) as `bootstrap` does: `command`
/// (its words joined with spaces), or without one the sandbox's `bootstrap_cmd`
/// ([`Ctx::settings_for`]), else the command this sandbox last bootstrapped with; output to `sink`. Returns the sandbox's record and
/// what ran, whatever its exit status. Errors: an unknown sandbox, no command to run, a sandbox
/// that is not Running, and h9sandbox's own failure to run the command (recorded as well).
pub(crate) async fn run(
    ctx: &Ctx,
    query: &str,
    command: &[String],
    sink: Sink,
) -> Result<(Record, Done)> {
    let state = ctx.store.load()?;
    let rec = state.resolve(query)?;
    // Without a command: the sandbox's (recorded by `up`, or given by the environment now),
    // else the one it last bootstrapped with.
    let cmd = if command.is_empty() {
        ctx.settings_for(rec)
            .bootstrap_cmd
            .or_else(|| rec.bootstrap.as_ref().map(|b| b.cmd.clone()))
            .ok_or_else(|| {
                Error::Usage(
                    "no command given, none recorded for this sandbox and no bootstrap_cmd configured; pass the command after `--` (see `h9sandbox bootstrap --help`)".into(),
                )
            })?
    } else {
        command.join(" ")
    };
    ensure_running(rec)?;
    super::lifecycle::check_workdir(rec)?;
    let done = execute(ctx, rec, &cmd, sink).await;
    if let Some(e) = &done.run.error {
        return Err(anyhow::anyhow!("{e}"));
    }
    Ok((rec.clone(), done))
}

/// A bootstrap that ran (whatever its exit status).
#[derive(Debug, Clone)]
pub(crate) struct Done {
    /// What was recorded.
    pub run: BootstrapRun,
    /// The signal (SIGINT, SIGTERM, SIGHUP) that interrupted it, if one did.
    pub interrupted: Option<super::signals::Interruption>,
}

/// Runs `cmd` as the bootstrap of the Running sandbox `rec` (timeout: the sandbox's
/// `bootstrap_timeout_secs`, [`Ctx::settings_for`],
/// output to `sink`, step `bootstrap: CMD` reported) and records the outcome in its record. When
/// h9sandbox itself could not run it (container gone, engine unreachable), the outcome has exit
/// code 125 and `error` says why.
pub(crate) async fn execute(ctx: &Ctx, rec: &Record, cmd: &str, sink: Sink) -> Done {
    ctx.reporter
        .step(&format!("bootstrap: {}", abbreviate(cmd, 60)));
    let secs = ctx.settings_for(rec).bootstrap_timeout_secs;
    let timeout = (secs > 0).then(|| Duration::from_secs(secs));
    // As root, whoever the sandbox's user is: a bootstrap installs packages.
    let spec = ExecSpec {
        command: CommandLine::Shell(cmd.to_string()),
        cwd: rec.workdir.clone(),
        env: vec![],
        interactive: false,
        marker: Uuid::new_v4().simple().to_string(),
        user: rec.agent.is_some().then_some(RunAs::ROOT),
        wrapped: rec.agent.is_some(),
        wrapper_enters: super::agent::speaks_current(rec),
        backstop: super::exec::backstop(timeout),
    };
    let started = std::time::Instant::now();
    let done = match run_command(ctx, rec, &spec, timeout, sink).await {
        Ok(out) => Done {
            run: BootstrapRun {
                cmd: cmd.to_string(),
                exit_code: out.exit_code,
                duration_ms: u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX),
                finished_at: now_rfc3339(),
                timed_out: out.timed_out,
                error: None,
            },
            interrupted: out.interrupted,
        },
        Err(e) => Done {
            run: BootstrapRun {
                cmd: cmd.to_string(),
                exit_code: EXIT_OWN_FAILURE,
                duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                finished_at: now_rfc3339(),
                timed_out: false,
                error: Some(format!("{e:#}")),
            },
            interrupted: None,
        },
    };
    let recorded = ctx.store.update(|s| {
        if let Some(r) = s.get_mut(rec.id) {
            r.bootstrap = Some(done.run.clone());
        }
        Ok(())
    });
    if let Err(e) = recorded {
        ctx.reporter.warn(&format!(
            "could not record the bootstrap in the state file: {e:#}"
        ));
    }
    done
}

/// `text` cut to `max` characters with an ellipsis, on one line.
pub(crate) fn abbreviate(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abbreviations_fit_one_line() {
        assert_eq!(abbreviate("pip install -e .", 60), "pip install -e .");
        assert_eq!(abbreviate("a\n  b", 60), "a b");
        assert_eq!(abbreviate("abcdefgh", 5), "abcd…");
        assert_eq!(abbreviate("ééééééé", 4).chars().count(), 4);
    }
}
