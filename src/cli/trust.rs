//! `h9sandbox trust`: trust a project's `./sandbox.toml` (its exact content) so that `up` and
//! `mcp` use it, forget that trust (`--forget`), or list what is trusted (`--list`)
//! ([`crate::sandbox::trust`]).

use std::path::Path;

use anyhow::Result;
use comfy_table::Cell;
use serde::Serialize;

use super::output;
use super::{Format, TrustArgs};
use crate::sandbox::trust::{self, Trusted, PROJECT_FILE};
use crate::sandbox::Ctx;

/// `trust --format json` document.
#[derive(Debug, Serialize)]
struct TrustJson<'a> {
    #[serde(flatten)]
    record: &'a Trusted,
    /// The keys the file sets, with their values.
    settings: serde_json::Value,
}

/// `trust --list --format json` entry.
#[derive(Debug, Serialize)]
struct ListJson<'a> {
    #[serde(flatten)]
    record: &'a Trusted,
    /// `trusted` (same content), `changed`, `missing` or `unusable`.
    status: &'static str,
}

/// Runs `trust`; returns 0.
pub(crate) async fn run(ctx: &Ctx, format: Format, args: &TrustArgs) -> Result<i32> {
    let file = args
        .file
        .clone()
        .unwrap_or_else(|| Path::new(PROJECT_FILE).to_path_buf());
    if args.list {
        return list(ctx, format);
    }
    if args.forget {
        let (path, was) = trust::forget(&ctx.store, &file)?;
        match format {
            Format::Json => output::print_json(&serde_json::json!({
                "path": path, "forgotten": was
            }))?,
            Format::Table if was => output::print_line(&format!(
                "forgot {}: `h9sandbox up` ignores it from now on",
                path.display()
            ))?,
            Format::Table => output::print_line(&format!("{} was not trusted", path.display()))?,
        }
        return Ok(0);
    }
    let granted = trust::trust(&ctx.store, &file)?;
    let r = &granted.record;
    match format {
        Format::Json => output::print_json(&TrustJson {
            record: r,
            settings: serde_json::to_value(&granted.settings)?,
        })?,
        Format::Table => {
            let dir = r.path.parent().unwrap_or(Path::new("/"));
            let mut text = format!(
                "trusted {} (sha256 {}); `h9sandbox up` and `h9sandbox mcp` in {} now apply",
                r.path.display(),
                r.sha256,
                dir.display()
            );
            if granted.settings.is_empty() {
                text.push_str(" nothing from it (it sets no keys)");
            } else {
                text.push(':');
                for (k, v) in &granted.settings {
                    text.push_str(&format!("\n  {k} = {v}"));
                }
            }
            output::print_line(&text)?;
        }
    }
    Ok(0)
}

/// `trust --list`.
fn list(ctx: &Ctx, format: Format) -> Result<i32> {
    let records = trust::trusted(&ctx.store)?;
    let rows: Vec<ListJson> = records
        .iter()
        .map(|r| ListJson {
            record: r,
            status: trust::status(r),
        })
        .collect();
    match format {
        Format::Json => output::print_json(&rows)?,
        Format::Table if !rows.is_empty() => {
            let mut t = output::table(
                &["PATH", "STATUS", "SHA256", "TRUSTED"],
                output::colour_enabled(),
            );
            for r in &rows {
                t.add_row(vec![
                    Cell::new(r.record.path.display()),
                    Cell::new(r.status),
                    Cell::new(&r.record.sha256[..12.min(r.record.sha256.len())]),
                    Cell::new(format!("{} ago", output::age(&r.record.trusted_at))),
                ]);
            }
            output::print_table(&t)?;
        }
        Format::Table => {}
    }
    Ok(0)
}
