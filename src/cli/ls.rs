//! `h9sandbox ls`: the sandboxes of this state directory with their real container state
//! ([`crate::sandbox::list`]), as a table (sub-sandboxes under their parent) or JSON; warns about
//! local sandboxes. `--watch` keeps the list up to date, redrawn as states change.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Result;
use comfy_table::{Cell, Table};

use super::output;
use super::{Format, LsArgs};
use crate::lease::{self, foreign_detail};
use crate::sandbox::list::{entries, with_stats, Entry};
use crate::sandbox::{interrupted, Ctx};
use crate::types::Isolation;

/// The gap between the two samples of `ls --stats` (the first only gives the CPU rate a base).
const STATS_GAP: Duration = Duration::from_millis(500);

/// Runs `ls`, or `ls --watch`.
pub(crate) async fn run(ctx: &Ctx, format: Format, args: &LsArgs) -> Result<i32> {
    if args.watch {
        return watch(ctx, format, args.interval, args.stats).await;
    }
    let mut entries = entries(ctx).await?;
    if args.stats {
        with_stats(ctx, &mut entries, STATS_GAP).await;
    }
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

/// The PORTS cell of a sandbox: its published ports (`127.0.0.1:49153->8000`) and forwards
/// (`127.0.0.1:8000=>8000`, through the agent).
fn ports(e: &Entry) -> String {
    let mut out: Vec<String> = e
        .record
        .published
        .iter()
        .map(|p| format!("{}->{}", p.address, p.port))
        .collect();
    out.extend(
        e.forwards
            .iter()
            .map(|f| format!("{}=>{}", f.address, f.port)),
    );
    // Text from the state directory's files, as every cell of such text: no escape sequences.
    crate::report::printable(&out.join(", ")).into_owned()
}

/// The table of `entries`: one row per sandbox, sub-sandboxes under their parent; a PORTS
/// column when a sandbox has published or forwarded ports, CPU, MEM, PIDS and NOTE columns when
/// they were sampled (`--stats`).
pub(crate) fn table(entries: &[Entry], colour: bool) -> Table {
    let mut head = vec![
        "ID", "ROLE", "NAME", "STATE", "ENGINE", "IMAGE", "WORKDIR", "AGE", "LEASE",
    ];
    let with_node = entries.iter().any(|e| e.node.is_some());
    if with_node {
        head.push("NODE");
    }
    let with_ports = entries
        .iter()
        .any(|e| !e.record.published.is_empty() || !e.forwards.is_empty());
    if with_ports {
        head.push("PORTS");
    }
    let with_stats = entries.iter().any(|e| e.stats.is_some());
    if with_stats {
        head.extend(["CPU %", "MEM USAGE / LIMIT", "PIDS", "NOTE"]);
    }
    let mut t = output::table(&head, colour);
    let now = std::time::SystemTime::now();
    for e in entries {
        let r = &e.record;
        let mut row = vec![
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
        ];
        if with_node {
            row.push(Cell::new(e.node.as_deref().unwrap_or("-")));
        }
        if with_ports {
            row.push(Cell::new(ports(e)));
        }
        if with_stats {
            row.extend(stats_cells(e, colour));
        }
        t.add_row(row);
    }
    t
}

/// The CPU %, MEM USAGE / LIMIT, PIDS and NOTE cells of `ls --stats`.
fn stats_cells(e: &Entry, colour: bool) -> Vec<Cell> {
    use super::stats::{bytes, near_note};
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let Some(s) = &e.stats else {
        return vec![
            Cell::new("-"),
            Cell::new("-"),
            Cell::new("-"),
            Cell::new(""),
        ];
    };
    let Some(u) = &s.usage else {
        let why = crate::report::printable(s.error.as_deref().unwrap_or("")).into_owned();
        return vec![
            Cell::new("-"),
            Cell::new("-"),
            Cell::new("-"),
            Cell::new(why),
        ];
    };
    let mut note = Cell::new(near_note(&u.near_limit));
    if colour && !u.near_limit.is_empty() {
        note = note.fg(comfy_table::Color::Yellow);
    }
    vec![
        Cell::new(opt(u.cpu_percent.map(|p| format!("{p:.1}%")))),
        Cell::new(format!(
            "{} / {}",
            opt(u.memory.used.map(bytes)),
            opt(u.memory.limit.map(bytes))
        )),
        Cell::new(format!(
            "{} / {}",
            opt(u.pids.used.map(|n| n.to_string())),
            opt(u.pids.limit.map(|n| n.to_string()))
        )),
        note,
    ]
}

/// `ls --watch`: looks at the sandboxes every `interval` until SIGINT/SIGTERM/SIGHUP (then exits
/// 0). On a terminal, the table is redrawn in place each time (ANSI cursor-home and
/// clear-to-end); in a pipe, a table (blank-line separated) or, with `--format json`, one compact
/// JSON array per line is written only when the sandboxes changed. A failing look (engine down)
/// is shown and the watch goes on.
pub(crate) async fn watch(
    ctx: &Ctx,
    format: Format,
    interval: Duration,
    stats: bool,
) -> Result<i32> {
    let tty = std::io::stdout().is_terminal() && format == Format::Table;
    let colour = output::colour_enabled();
    let stop = interrupted();
    tokio::pin!(stop);
    let mut last: Option<String> = None;
    loop {
        let looked = tokio::select! {
            r = async {
                let mut es = entries(ctx).await?;
                if stats {
                    with_stats(ctx, &mut es, STATS_GAP).await;
                }
                anyhow::Ok(es)
            } => r.map_err(|e| format!("{e:#}")),
            _ = &mut stop => break,
        };
        // What changed is judged on the data, not on the rendering (ages tick on their own).
        let key = match &looked {
            // The engine's human status ("Up 36 seconds") ticks by itself: not a change.
            Ok(entries) => serde_json::to_string(
                &entries
                    .iter()
                    .map(|e| {
                        (
                            &e.record,
                            &e.role,
                            &e.container_state,
                            &e.forwards,
                            &e.stats,
                        )
                    })
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
