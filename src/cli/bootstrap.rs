//! `h9sandbox bootstrap`: run a one-time setup command in a sandbox
//! ([`crate::sandbox::bootstrap`]), streaming its output (on stderr with `--format json`, whose
//! document goes to stdout), and exit with its status. On a terminal (table format) a spinner on
//! stderr shows the command while it runs.

use anyhow::Result;
use serde::Serialize;
use uuid::Uuid;

use super::output;
use super::progress::CliReporter;
use super::{BootstrapArgs, Format};
use crate::sandbox::exec::Sink;
use crate::sandbox::{bootstrap, Ctx};
use crate::state::BootstrapRun;

/// `bootstrap --format json` document: the sandbox ID and the recorded run.
#[derive(Debug, Serialize)]
pub(crate) struct BootstrapJson {
    /// Sandbox ID.
    pub id: Uuid,
    /// What was recorded.
    #[serde(flatten)]
    pub run: BootstrapRun,
}

/// Runs `bootstrap`; clears the spinner of `progress`; returns the command's exit status.
pub(crate) async fn run(
    ctx: &Ctx,
    format: Format,
    progress: &CliReporter,
    args: &BootstrapArgs,
) -> Result<i32> {
    super::exec::refuse_option_as_command("bootstrap", &args.command)?;
    // The command's stdout stays on stdout for people; JSON mode keeps stdout for the document.
    let sink = match format {
        Format::Table => Sink::Forward,
        Format::Json => Sink::Stderr,
    };
    let ran = bootstrap::run(ctx, &args.sandbox.id, &args.command, sink).await;
    progress.finish();
    let (rec, done) = ran?;
    let code = done.run.exit_code;
    if done.run.timed_out {
        crate::report::eprintln(&format!(
            "h9sandbox: error: the bootstrap timed out after {}s (--timeout, else the sandbox's bootstrap_timeout_secs): it and its whole process tree in sandbox {} were killed (exit {code})",
            ctx.settings_for(&rec).bootstrap_timeout_secs,
            rec.short_id()
        ));
    } else if let Some(sig) = done.interrupted {
        crate::report::eprintln(&format!(
            "h9sandbox: error: interrupted by {sig}: the bootstrap and its whole process tree in sandbox {} were killed (exit {code})",
            rec.short_id()
        ));
    }
    if format == Format::Json {
        output::print_json(&BootstrapJson {
            id: rec.id,
            run: done.run,
        })?;
    }
    Ok(code)
}
