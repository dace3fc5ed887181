//! `h9sandbox stats [ID…]` ([`crate::sandbox::stats`]), with `docker stats`' flags: a stream of
//! samples (a table redrawn in place on a terminal, or one compact JSON array per line) until
//! Ctrl-C, or one sample with `--no-stream`. The stream is the default on a terminal only, so a
//! program that runs `stats` without a flag gets one answer, not an endless stream.

use std::io::IsTerminal;

use anyhow::Result;
use comfy_table::{Cell, Table};

use super::output;
use super::{Format, StatsArgs};
use crate::sandbox::stats::{once, samplable, Row, Sampler};
use crate::sandbox::{interrupted, Ctx};
use crate::state::Record;

/// The gap between the two samples of a single answer (the first only gives the CPU rate a base).
const ONCE_GAP: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs `stats`. Exit status: 0; with `--no-stream` (or the single answer), 1 when a sandbox
/// named could not be sampled.
pub(crate) async fn run(ctx: &Ctx, format: Format, args: &StatsArgs) -> Result<i32> {
    let records = chosen(ctx, &args.ids)?;
    let stream = args.watch || (!args.no_stream && std::io::stdout().is_terminal());
    if !stream {
        let rows = once(ctx, records, ONCE_GAP).await;
        warn_errors(ctx, &rows);
        print(format, &rows)?;
        let failed = !args.ids.is_empty() && rows.iter().any(|r| r.error.is_some());
        return Ok(i32::from(failed));
    }
    let tty = std::io::stdout().is_terminal() && format == Format::Table;
    let mut sampler = Sampler::new(records);
    let stop = interrupted();
    tokio::pin!(stop);
    let mut first = true;
    loop {
        let rows = tokio::select! {
            rows = sampler.next(ctx) => rows,
            _ = &mut stop => break,
        };
        if first {
            first = false;
            warn_errors(ctx, &rows);
        }
        if tty {
            let mut screen = format!(
                "Every {}s, until Ctrl-C: h9sandbox stats    {}\n\n",
                args.interval.as_secs_f64(),
                humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            );
            screen.push_str(&table(&rows, output::colour_enabled()).to_string());
            let mut out = String::from("\x1b[H");
            for line in screen.lines() {
                out.push_str(line.trim_end());
                out.push_str("\x1b[K\n");
            }
            out.push_str("\x1b[J");
            output::print_bytes(out.as_bytes())?;
        } else {
            match format {
                Format::Json => output::print_line(&serde_json::to_string(&rows)?)?,
                Format::Table => {
                    output::print_table(&table(&rows, output::colour_enabled()))?;
                    output::print_line("")?;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(args.interval) => {}
            _ = &mut stop => break,
        }
    }
    Ok(0)
}

/// The sandboxes `ids` names, or every Running one of the state directory.
fn chosen(ctx: &Ctx, ids: &[String]) -> Result<Vec<Record>> {
    let state = ctx.store.load()?;
    if ids.is_empty() {
        return Ok(state.sandboxes.into_iter().filter(samplable).collect());
    }
    let mut out: Vec<Record> = Vec::new();
    for q in ids {
        let r = state.resolve(q)?;
        if !out.iter().any(|o| o.id == r.id) {
            out.push(r.clone());
        }
    }
    Ok(out)
}

fn warn_errors(ctx: &Ctx, rows: &[Row]) {
    for r in rows {
        if let Some(e) = &r.error {
            ctx.reporter.warn(e);
        }
    }
}

fn print(format: Format, rows: &[Row]) -> Result<()> {
    match format {
        Format::Json => output::print_json(rows),
        Format::Table => output::print_table(&table(rows, output::colour_enabled())),
    }
}

/// `bytes` as `docker stats` shows them (binary units: 12.5MiB).
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n}B")
    } else {
        format!("{v:.1}{}", UNITS[u])
    }
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

/// What the NOTE column says of a sandbox near its limits.
pub(crate) fn near_note(near: &[&str]) -> String {
    near.iter()
        .map(|l| match *l {
            "memory" => "NEAR LIMIT: memory",
            "pids" => "NEAR LIMIT: processes",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The table of `rows`.
pub(crate) fn table(rows: &[Row], colour: bool) -> Table {
    let mut t = output::table(
        &[
            "ID",
            "NAME",
            "CPU %",
            "MEM USAGE / LIMIT",
            "MEM %",
            "MEM PEAK",
            "PIDS",
            "DISK",
            "NET I/O",
            "NOTE",
        ],
        colour,
    );
    for r in rows {
        let id = r.id.simple().to_string()[..12].to_string();
        let Some(u) = &r.usage else {
            t.add_row(vec![
                Cell::new(id),
                Cell::new(&r.name),
                Cell::new("-"),
                Cell::new("-"),
                Cell::new("-"),
                Cell::new("-"),
                Cell::new("-"),
                Cell::new("-"),
                Cell::new("-"),
                Cell::new(crate::report::printable(r.error.as_deref().unwrap_or(""))),
            ]);
            continue;
        };
        let mut note = Cell::new(near_note(&u.near_limit));
        if colour && !u.near_limit.is_empty() {
            note = note.fg(comfy_table::Color::Yellow);
        }
        t.add_row(vec![
            Cell::new(id),
            Cell::new(&r.name),
            Cell::new(opt(u.cpu_percent, |p| format!("{p:.1}%"))),
            Cell::new(format!(
                "{} / {}",
                opt(u.memory.used, bytes),
                opt(u.memory.limit, bytes)
            )),
            Cell::new(opt(u.memory.percent, |p| format!("{p:.1}%"))),
            Cell::new(opt(u.memory.peak, bytes)),
            Cell::new(format!(
                "{} / {}",
                opt(u.pids.used, |n| n.to_string()),
                opt(u.pids.limit, |n| n.to_string())
            )),
            Cell::new({
                let shown = |b: Option<u64>, complete: Option<bool>| match (b, complete) {
                    (Some(b), Some(false)) => format!("≥{}", bytes(b)),
                    (b, _) => opt(b, bytes),
                };
                let scratch = shown(u.disk.scratch_bytes, u.disk.scratch_complete);
                match u.disk.workdir_bytes {
                    Some(_) => format!(
                        "{scratch} + work dir {}",
                        shown(u.disk.workdir_bytes, u.disk.workdir_complete)
                    ),
                    None => scratch,
                }
            }),
            Cell::new(format!(
                "{} / {}",
                opt(u.network.rx_bytes, bytes),
                opt(u.network.tx_bytes, bytes)
            )),
            note,
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_read_as_docker_shows_them() {
        assert_eq!(super::bytes(0), "0B");
        assert_eq!(super::bytes(1023), "1023B");
        assert_eq!(super::bytes(1536), "1.5KiB");
        assert_eq!(super::bytes(512 << 20), "512.0MiB");
    }
}
