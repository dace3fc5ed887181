//! `h9sandbox reap`: remove what was abandoned in this state directory ([`crate::sandbox::reap`])
//! and print one row per removal (ID, name, container, action, reason, detail), or the verdicts
//! as JSON; with `--dry-run`, what would be removed.

use anyhow::Result;
use comfy_table::Cell;

use super::output;
use super::{Format, ReapArgs};
use crate::sandbox::reap::sweep;
use crate::sandbox::Ctx;

/// Runs `reap`; prints what was removed; returns 0, or fails when a removal failed.
pub(crate) async fn run(ctx: &Ctx, format: Format, args: &ReapArgs) -> Result<i32> {
    let sweep = sweep(ctx, args.dry_run).await?;
    match format {
        Format::Json => output::print_json(&sweep.reaped)?,
        Format::Table if !sweep.reaped.is_empty() => {
            let mut t = output::table(
                &["ID", "NAME", "CONTAINER", "ACTION", "REASON", "DETAIL"],
                output::colour_enabled(),
            );
            for v in &sweep.reaped {
                t.add_row(vec![
                    Cell::new(v.id.as_deref().map_or("-".into(), short)),
                    Cell::new(&v.name),
                    Cell::new(v.container.as_deref().map_or("-".into(), short)),
                    Cell::new(if args.dry_run {
                        format!("would {}", v.action)
                    } else {
                        v.action.to_string()
                    }),
                    Cell::new(v.reason.to_string()),
                    Cell::new(&v.detail),
                ]);
            }
            output::print_table(&t)?;
        }
        Format::Table => {}
    }
    if format == Format::Table {
        output::print_line(&summary(ctx, &sweep, args.dry_run))?;
    }
    let mut first = None;
    for (v, e) in sweep.failed {
        ctx.reporter.warn(&format!(
            "could not remove {} ({}): {e:#}",
            v.name,
            v.container.as_deref().map(short).unwrap_or_default()
        ));
        first.get_or_insert(e);
    }
    match first {
        Some(e) => Err(e.context("some abandoned containers could not be removed; run `h9sandbox reap` again, or `docker rm -f` them")),
        None => Ok(0),
    }
}

/// The line `reap` ends with on a table: what it did, out of what it looked at, where.
fn summary(ctx: &Ctx, sweep: &crate::sandbox::reap::Sweep, dry_run: bool) -> String {
    let n = sweep.reaped.len();
    let did = match (n, dry_run) {
        (0, _) => "nothing to reap".to_string(),
        (n, true) => format!("would reap {n}"),
        (n, false) => format!("reaped {n}"),
    };
    let plural = |k: usize, what: &str| format!("{k} {what}{}", if k == 1 { "" } else { "s" });
    format!(
        "{did}: {} and {} of {} looked at{}",
        plural(sweep.records, "sandbox record"),
        plural(sweep.containers, "container"),
        ctx.store.dir().display(),
        if n == 0 && sweep.records > 0 {
            ", all in use"
        } else {
            ""
        }
    )
}

/// The first 12 characters of an ID (container or sandbox), as `docker ps` shows them.
fn short(id: &str) -> String {
    id.replace('-', "").chars().take(12).collect()
}
