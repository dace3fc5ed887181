//! `h9sandbox ls`: the sandboxes of this state directory with their real container state
//! ([`crate::sandbox::list`]), as a table (sub-sandboxes under their parent) or JSON; warns about
//! local sandboxes. `--watch` keeps the list up to date, like the seed documents' status bar.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Result;
use comfy_table::{Cell, Table};

use super::output;
use super::{Format, LsArgs};
use crate::lease::{self, foreign_detail};
use crate::sandbox::list::{entries, Entry};
use crate::sandbox::{interrupted, Ctx};
use crate::types::Isolation;

/// Runs `ls`, or `ls --watch`.
pub async fn run(ctx: &Ctx, format: Format, args: &LsArgs) -> Result<i32> {
    if args.watch {
        return watch(ctx, format, args.interval).await;
    }
    let entries = entries(ctx).await?;
    if args.quiet {
        for e in &entries {
            output::print_line(&e.record.id.to_string())?;
        }
        return Ok(0);
    }
    let local = entries
        .iter()
        .filter(|e| e.record.isolation == Isolation::None)
        .count();
    if local > 0 {
        ctx.reporter.warn(&format!(
            "{local} sandbox(es) listed are local (engine \"local\", isolation: none): their commands run directly on this host, without a container or limits"
        ));
    }
    for e in &entries {
        for c in &e.foreign_containers {
            ctx.reporter.warn(&format!(
                "{}; it is ignored (`h9sandbox reap` removes it as an orphan)",
                foreign_detail(c, &e.record)
            ));
        }
    }
    match format {
        Format::Json => output::print_json(&entries)?,
        Format::Table => output::print_table(&table(&entries, output::colour_enabled()))?,
    }
    Ok(0)
}

/// The table of `entries`: one row per sandbox, sub-sandboxes under their parent.
pub fn table(entries: &[Entry], colour: bool) -> Table {
    let mut t = output::table(
        &[
            "ID", "ROLE", "NAME", "STATE", "ENGINE", "IMAGE", "WORKDIR", "AGE", "LEASE",
        ],
        colour,
    );
    let now = std::time::SystemTime::now();
    for e in entries {
        let r = &e.record;
        t.add_row(vec![
            Cell::new(r.short_id()),
            Cell::new(format!("{}{}", "  ".repeat(e.depth), e.role)),
            Cell::new(&r.name),
            output::state_cell(r.state),
            // Where it runs: the engine, and a daemon other than this machine's default.
            Cell::new(match r.daemon.as_ref().map(|d| d.describe()) {
                Some(d) if d != "local" => format!("{} at {d}", r.engine),
                _ => r.engine.to_string(),
            }),
            Cell::new(if r.isolation == Isolation::None {
                "-"
            } else {
                r.image.as_str()
            }),
            Cell::new(r.workdir.display()),
            Cell::new(output::age(&r.created_at)),
            Cell::new(lease::describe(r, |p| p.is_alive(), now)),
        ]);
    }
    t
}

/// `ls --watch`: looks at the sandboxes every `interval` until SIGINT/SIGTERM/SIGHUP (then exits
/// 0). On a terminal, the table is redrawn in place each time (ANSI cursor-home and
/// clear-to-end); in a pipe, a table (blank-line separated) or, with `--format json`, one compact
/// JSON array per line is written only when the sandboxes changed. A failing look (engine down)
/// is shown and the watch goes on.
pub async fn watch(ctx: &Ctx, format: Format, interval: Duration) -> Result<i32> {
    let tty = std::io::stdout().is_terminal() && format == Format::Table;
    let colour = output::colour_enabled();
    let stop = interrupted();
    tokio::pin!(stop);
    let mut last: Option<String> = None;
    loop {
        let looked = tokio::select! {
            r = entries(ctx) => r.map_err(|e| format!("{e:#}")),
            _ = &mut stop => break,
        };
        // What changed is judged on the data, not on the rendering (ages tick on their own).
        let key = match &looked {
            // The engine's human status ("Up 36 seconds") ticks by itself: not a change.
            Ok(entries) => serde_json::to_string(
                &entries
                    .iter()
                    .map(|e| (&e.record, &e.role, &e.container_state))
                    .collect::<Vec<_>>(),
            )?,
            Err(e) => e.clone(),
        };
        let changed = last.as_deref() != Some(key.as_str());
        if tty {
            let mut screen = format!(
                "Every {}s, until Ctrl-C: h9sandbox ls    {}\n\n",
                interval.as_secs_f64(),
                humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            );
            match &looked {
                Ok(entries) => screen.push_str(&table(entries, colour).to_string()),
                Err(e) => screen.push_str(&format!(
                    "h9sandbox: error: {}",
                    crate::report::printable(&e.to_string())
                )),
            }
            let mut out = String::from("\x1b[H");
            for line in screen.lines() {
                out.push_str(line.trim_end());
                out.push_str("\x1b[K\n");
            }
            out.push_str("\x1b[J");
            output::print_bytes(out.as_bytes())?;
        } else if changed {
            match (&looked, format) {
                (Ok(entries), Format::Json) => {
                    output::print_line(&serde_json::to_string(entries)?)?
                }
                (Ok(entries), Format::Table) => {
                    if last.is_some() {
                        output::print_line("")?;
                    }
                    output::print_table(&table(entries, colour))?;
                }
                (Err(e), _) => ctx
                    .reporter
                    .warn(&format!("cannot list the sandboxes: {e}")),
            }
        }
        last = Some(key);
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = &mut stop => break,
        }
    }
    Ok(0)
}
