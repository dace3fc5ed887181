//! `h9sandbox down`: remove sandboxes and their sub-sandboxes ([`crate::sandbox::down`]); print
//! the removed IDs, or `[{id, name}]` with `--format json`.

use anyhow::Result;

use super::output;
use super::{DownArgs, Format};
use crate::sandbox::down::take_down_or_forget;
use crate::sandbox::Ctx;

/// Runs `down`; returns 0 when every sandbox was removed.
pub(crate) async fn run(ctx: &Ctx, format: Format, args: &DownArgs) -> Result<i32> {
    let report = take_down_or_forget(ctx, &args.ids, args.all, args.forget).await?;
    let failed = !report.unresolved.is_empty() || report.error.is_some();
    match format {
        // A failure prints nothing on stdout, unless some sandboxes were removed all the same:
        // then the document lists those.
        Format::Json if failed && report.removed.is_empty() => {}
        Format::Json => output::print_json(&report.removed)?,
        Format::Table => {
            for r in &report.removed {
                output::print_line(&r.id.to_string())?;
            }
        }
    }
    if !report.unresolved.is_empty() {
        for (_, e) in &report.unresolved {
            ctx.reporter.warn(&e.to_string());
        }
        let names: Vec<&str> = report.unresolved.iter().map(|(q, _)| q.as_str()).collect();
        let removed = if report.removed.is_empty() {
            "nothing was removed"
        } else {
            "every other sandbox named was removed"
        };
        let e = anyhow::anyhow!(
            "{} of the sandboxes named not found ({}); {removed}",
            names.len(),
            names.join(", ")
        );
        return Err(match report.error {
            Some(first) => first.context(e.to_string()),
            None => e,
        });
    }
    match report.error {
        Some(e) => Err(e),
        None => Ok(0),
    }
}
