//! `h9sandbox ps`, `logs` and `kill`: the commands a sandbox runs in the background
//! (`exec --detach`), through [`crate::sandbox::background`].

use anyhow::Result;
use comfy_table::Cell;

use super::output;
use super::{Format, KillArgs, LogsArgs, PsArgs};
use crate::report::printable;
use crate::sandbox::background::{self, LogSink};
use crate::sandbox::Ctx;

/// Runs `ps`: one row per background command (or a JSON array).
pub async fn ps(ctx: &Ctx, format: Format, args: &PsArgs) -> Result<i32> {
    let (_, list) = background::list(ctx, &args.id).await?;
    match format {
        Format::Json => output::print_json(&list)?,
        Format::Table => {
            let mut t = output::table(
                &["HANDLE", "PID", "STATE", "STARTED", "COMMAND"],
                output::colour_enabled(),
            );
            for d in &list {
                let state = match (d.running, d.exit_code) {
                    (true, None) => "running".to_string(),
                    (true, Some(c)) => format!("exited {c}, children running"),
                    (false, c) => format!("exited {}", c.unwrap_or(255)),
                };
                // What the agent reports is data: a time past what SystemTime holds is shown as
                // unknown, control characters escaped.
                let started = std::time::UNIX_EPOCH
                    .checked_add(std::time::Duration::from_secs(d.started))
                    .map(output::age_since)
                    .unwrap_or_else(|| "?".into());
                let command = crate::sandbox::bootstrap::abbreviate(&d.command, 60);
                t.add_row(vec![
                    Cell::new(printable(&d.handle)),
                    Cell::new(d.pid),
                    Cell::new(state),
                    Cell::new(started),
                    Cell::new(printable(&command)),
                ]);
            }
            output::print_table(&t)?;
        }
    }
    Ok(0)
}

/// Runs `logs`: the command's output on our stdout and stderr.
pub async fn logs(ctx: &Ctx, args: &LogsArgs) -> Result<i32> {
    background::logs(ctx, &args.id, &args.handle, args.follow, LogSink::Forward).await?;
    Ok(0)
}

/// Runs `kill`: prints nothing; 0 once the tree is being killed.
pub async fn kill(ctx: &Ctx, args: &KillArgs) -> Result<i32> {
    background::kill(ctx, &args.id, &args.handle).await?;
    Ok(0)
}
