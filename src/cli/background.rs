//! `h9sandbox ps`, `logs` and `kill`: the commands a sandbox runs in the background
//! (`exec --detach`), through [`crate::sandbox::background`].

use anyhow::Result;
use comfy_table::Cell;

use super::output;
use super::{Format, KillArgs, LogsArgs, PsArgs};
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
                let started = std::time::UNIX_EPOCH + std::time::Duration::from_secs(d.started);
                t.add_row(vec![
                    Cell::new(&d.handle),
                    Cell::new(d.pid),
                    Cell::new(state),
                    Cell::new(output::age(
                        &humantime::format_rfc3339_seconds(started).to_string(),
                    )),
                    Cell::new(crate::sandbox::bootstrap::abbreviate(&d.command, 60)),
                ]);
            }
            output::print_table(&t)?;
        }
    }
    Ok(0)
}

/// Runs `logs`: the command's output on our stdout and stderr; with `--network`, the egress
/// proxy's decisions (a table, or a JSON array of `{ts, method, host, port, decision,
/// bytes_out, bytes_in}`).
pub async fn logs(ctx: &Ctx, format: Format, args: &LogsArgs) -> Result<i32> {
    let Some(handle) = args.handle.as_deref().filter(|_| !args.network) else {
        let rec = ctx.store.load()?.resolve(&args.id)?.clone();
        let entries = crate::sandbox::egress::read_log(ctx, &rec)?;
        match format {
            Format::Json => output::print_json(&entries)?,
            Format::Table => {
                let mut t = output::table(
                    &["TIME", "METHOD", "HOST", "PORT", "DECISION", "OUT", "IN"],
                    output::colour_enabled(),
                );
                for e in &entries {
                    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(e.ts);
                    t.add_row(vec![
                        Cell::new(humantime::format_rfc3339_seconds(at)),
                        Cell::new(&e.method),
                        Cell::new(&e.host),
                        Cell::new(e.port),
                        Cell::new(&e.decision),
                        Cell::new(e.bytes_out),
                        Cell::new(e.bytes_in),
                    ]);
                }
                output::print_table(&t)?;
            }
        }
        return Ok(0);
    };
    background::logs(ctx, &args.id, handle, args.follow, LogSink::Forward).await?;
    Ok(0)
}

/// Runs `kill`: prints nothing; 0 once the tree is being killed.
pub async fn kill(ctx: &Ctx, args: &KillArgs) -> Result<i32> {
    background::kill(ctx, &args.id, &args.handle).await?;
    Ok(0)
}
