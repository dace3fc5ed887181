//! `h9sandbox down`: stop with the configured grace, remove whatever the stop did, drop the record.
//! Idempotent: a vanished container, or a record another `down` already dropped, is success.
//! A local sandbox has no container: `down` ends the processes its commands left running.

use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use uuid::Uuid;

use super::Ctx;
use crate::cli::{DownArgs, Format};
use crate::engine::Environment;
use crate::output;
use crate::state::{Lifecycle, Record};

/// One line of `down`'s report.
#[derive(Debug, Serialize)]
pub struct Removed {
    /// Sandbox ID.
    pub id: Uuid,
    /// Container name.
    pub name: String,
}

/// Runs `down`; returns 0 when every sandbox was removed.
pub async fn run(ctx: &Ctx, args: &DownArgs) -> Result<i32> {
    let state = ctx.store.load()?;
    let targets: Vec<Record> = if args.all {
        state.sandboxes.clone()
    } else {
        let mut v: Vec<Record> = Vec::new();
        for q in &args.ids {
            let r = state.resolve(q)?;
            if !v.iter().any(|x| x.id == r.id) {
                v.push(r.clone());
            }
        }
        v
    };
    let results = futures_util::future::join_all(targets.iter().map(|r| remove(ctx, r))).await;
    let mut removed = Vec::new();
    let mut first_err = None;
    for (rec, res) in targets.iter().zip(results) {
        match res {
            Ok(()) => removed.push(Removed {
                id: rec.id,
                name: rec.name.clone(),
            }),
            Err(e) => {
                output::warn(&format!(
                    "could not remove sandbox {}: {e:#}",
                    rec.short_id()
                ));
                first_err.get_or_insert(e);
            }
        }
    }
    match ctx.format {
        Format::Json => output::print_json(&removed)?,
        Format::Table => {
            for r in &removed {
                output::print_line(&r.id.to_string())?;
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

/// Stops and removes one sandbox's container, then drops its record.
pub async fn remove(ctx: &Ctx, rec: &Record) -> Result<()> {
    ctx.store.update(|s| {
        if let Some(r) = s.get_mut(rec.id) {
            if r.state != Lifecycle::Failed {
                r.set_state(Lifecycle::Stopping, None);
            }
        }
        Ok(())
    })?;
    let container = rec.container_ref();
    let grace = Duration::from_secs(ctx.cfg.stop_timeout_secs);
    // The engine the sandbox was created with: a local one is never sent to a container engine.
    let engine = ctx.engine_for(rec);
    // Whatever the stop did (timed out, failed), the container is removed.
    let stopped = engine.stop(container, grace).await;
    engine.remove(container).await.map_err(|e| {
        if let Err(s) = &stopped {
            e.context(format!("after the stop failed too ({s:#})"))
        } else {
            e
        }
    })?;
    ctx.store.update(|s| {
        s.sandboxes.retain(|r| r.id != rec.id);
        Ok(())
    })
}
