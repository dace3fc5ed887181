//! Running the configured bootstrap command in the new sandbox, and what its failure says.

use anyhow::Result;

use super::abort;
use crate::sandbox::exec::Sink;
use crate::sandbox::{bootstrap, Ctx};
use crate::state::{BootstrapRun, Record};

/// Step 6: runs the configured bootstrap command, if any, in the Running sandbox `rec` (its
/// output to stderr: stdout carries the ID or the JSON record) and returns the record with the
/// bootstrap's outcome. A failure only warns, unless `bootstrap_required`: then, as on an
/// interrupting signal, the sandbox is removed ([`abort`]) and `up` fails. For `one_command`
/// (`run`), the warning says the command runs without it (the record it would point at is gone
/// once the command ends).
pub(super) async fn run_bootstrap(ctx: &Ctx, mut rec: Record, one_command: bool) -> Result<Record> {
    let cfg = &ctx.cfg;
    // What `up` recorded a moment ago: the configuration's, or the devcontainer's lifecycle
    // commands, which count as a flag.
    let Some(cmd) = rec.settings.as_ref().and_then(|s| s.bootstrap_cmd.clone()) else {
        return Ok(rec);
    };
    let cmd = cmd.as_str();
    let done = bootstrap::execute(ctx, &rec, cmd, Sink::Stderr).await;
    if let Some(sig) = done.interrupted {
        let why = format!("interrupted by {sig} during the bootstrap");
        return Err(abort(ctx, &rec, why).await);
    }
    let timeout = ctx.settings_for(&rec).bootstrap_timeout_secs;
    let failure = (!done.run.succeeded()).then(|| bootstrap_failure(&done.run, timeout));
    rec.bootstrap = Some(done.run);
    if let Some(why) = failure {
        if cfg.bootstrap_required {
            return Err(abort(
                ctx,
                &rec,
                format!("{why}; the sandbox was removed (bootstrap_required); fix the command, or leave out --bootstrap-required to keep such a sandbox"),
            )
            .await);
        }
        ctx.reporter.warn(&match one_command {
            true => format!(
                "{why}; the command runs without it (--bootstrap-required makes `run` fail instead)"
            ),
            false => format!(
                "{why}; the sandbox is up without it (its record shows the bootstrap: `h9sandbox ls --format json`)"
            ),
        });
    }
    Ok(rec)
}

/// One line on why a recorded bootstrap failed.
fn bootstrap_failure(run: &BootstrapRun, timeout_secs: u64) -> String {
    let what = shown_bootstrap(&run.cmd);
    if run.timed_out {
        format!(
            "bootstrap {what} timed out after {timeout_secs}s (--bootstrap-timeout, else bootstrap_timeout_secs) and its process tree was killed"
        )
    } else if let Some(e) = &run.error {
        format!("bootstrap {what} could not run: {e}")
    } else {
        format!("bootstrap {what} exited with status {}", run.exit_code)
    }
}

/// A bootstrap command as a diagnostic line names it: in backquotes, or, for a script whose
/// first line is a comment (a devcontainer.json's lifecycle commands), that comment.
fn shown_bootstrap(cmd: &str) -> String {
    match cmd
        .strip_prefix("# ")
        .and_then(|rest| rest.split_once('\n'))
    {
        Some((comment, _)) => format!("({comment})"),
        None => format!("`{cmd}`"),
    }
}
