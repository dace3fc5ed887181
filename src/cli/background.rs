//! `h9sandbox ps`, `logs` and `kill`: the commands a sandbox runs in the background
//! (`exec --detach`), through [`crate::sandbox::background`].

use anyhow::Result;
use comfy_table::Cell;

use super::output;
use super::{Format, KillArgs, LogsArgs, PsArgs};
use crate::report::printable;
use crate::sandbox::background::{self, LogSink};
use crate::sandbox::exec::Capture;
use crate::sandbox::Ctx;

/// Runs `ps`: one row per background command (or a JSON array).
pub(crate) async fn ps(ctx: &Ctx, format: Format, args: &PsArgs) -> Result<i32> {
    let (_, list) = background::list(ctx, &args.sandbox.id).await?;
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

/// `logs --format json`: what the command wrote so far, each stream's first and last bytes
/// within `json_max_bytes` (the middle cut out, `*_cut` bytes of it, as MCP's `sandbox_logs`).
#[derive(Debug, serde::Serialize)]
struct LogsJson {
    handle: String,
    stdout: String,
    stderr: String,
    stdout_cut: u64,
    stderr_cut: u64,
}

/// Runs `logs`: the command's output on our stdout and stderr, or with `--format json` one
/// document (`LogsJson`; not with `--follow`, which streams); with `--network`, the egress
/// proxy's decisions (a table, or a JSON array of `{ts, method, host, port, decision,
/// bytes_out, bytes_in}`).
pub(crate) async fn logs(ctx: &Ctx, format: Format, args: &LogsArgs) -> Result<i32> {
    let Some(handle) = args.handle.clone().filter(|_| !args.network) else {
        let rec = ctx.store.load()?.resolve(&args.sandbox.id)?.clone();
        let entries = crate::sandbox::egress::read_log(ctx, &rec).await?;
        match format {
            Format::Json => output::print_json(&entries)?,
            Format::Table => {
                let mut t = output::table(
                    &["TIME", "METHOD", "HOST", "PORT", "DECISION", "OUT", "IN"],
                    output::colour_enabled(),
                );
                // The log is the sidecar's, trusted less than the host: every cell is shown
                // bounded and without control characters, whatever it holds.
                let shown = |s: &str, max: usize| -> String {
                    s.chars().filter(|c| !c.is_control()).take(max).collect()
                };
                for e in &entries {
                    t.add_row(vec![
                        Cell::new(log_time(e.ts)),
                        Cell::new(shown(&e.method, 32)),
                        Cell::new(shown(&e.host, 253)),
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
    if format == Format::Table {
        background::logs(
            ctx,
            &args.sandbox.id,
            &handle,
            args.follow,
            LogSink::Forward,
        )
        .await?;
        return Ok(0);
    }
    if args.follow {
        return Err(crate::error::Error::Usage(
            "--follow streams the output as it comes; use it without --format json".into(),
        )
        .into());
    }
    let max = usize::try_from(ctx.cfg.json_max_bytes).unwrap_or(usize::MAX);
    let (mut out, mut err) = (Capture::ends(max), Capture::ends(max));
    let mut collect = |s: crate::report::Stream, b: &[u8]| match s {
        crate::report::Stream::Stdout => out.push(b),
        crate::report::Stream::Stderr => err.push(b),
    };
    background::logs(
        ctx,
        &args.sandbox.id,
        &handle,
        false,
        LogSink::Collect(&mut collect),
    )
    .await?;
    let (stdout, stdout_cut) = out.captured().text_ends();
    let (stderr, stderr_cut) = err.captured().text_ends();
    output::print_json(&LogsJson {
        handle,
        stdout,
        stderr,
        stdout_cut,
        stderr_cut,
    })?;
    Ok(0)
}

/// Runs `kill`: prints nothing (with `--format json`, `{"handle": H, "killed": true}`); 0 once
/// the tree is being killed.
pub(crate) async fn kill(ctx: &Ctx, format: Format, args: &KillArgs) -> Result<i32> {
    background::kill(ctx, &args.sandbox.id, &args.handle).await?;
    if format == Format::Json {
        output::print_json(&serde_json::json!({"handle": args.handle, "killed": true}))?;
    }
    Ok(0)
}

/// A decision's time (seconds since the Unix epoch) in RFC 3339, or the number itself when no
/// date of four-digit years holds it.
fn log_time(ts: u64) -> String {
    // 9999-12-31T23:59:59Z: humantime's last date.
    const LAST: u64 = 253_402_300_799;
    match ts {
        ..=LAST => humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(ts),
        )
        .to_string(),
        _ => ts.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn log_times_past_any_date_are_shown_as_numbers_not_a_panic() {
        assert_eq!(super::log_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::log_time(253_402_300_799), "9999-12-31T23:59:59Z");
        assert_eq!(super::log_time(253_402_300_800), "253402300800");
        assert_eq!(super::log_time(u64::MAX), u64::MAX.to_string());
    }
}
