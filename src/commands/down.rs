//! `h9sandbox down`: stop with the configured grace, remove whatever the stop did, drop the record.
//! Idempotent: a vanished container, or a record another `down` already dropped, is success.

use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use uuid::Uuid;

use super::Ctx;
use crate::cli::{DownArgs, Format};
use crate::engine::Environment;
use crate::error::Error;
use crate::output;
use crate::state::{Lifecycle, ProcessRef, Record};

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
                // The engine being unreachable is not about this sandbox: say it once, bare.
                let e = if matches!(e.downcast_ref(), Some(Error::EngineUnavailable { .. })) {
                    e
                } else {
                    e.context(format!("could not remove sandbox {}", rec.short_id()))
                };
                // The first failure is the error; the others are warnings before it.
                if first_err.is_none() {
                    first_err = Some(e);
                } else {
                    output::warn(&format!("{e:#}"));
                }
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

/// Stops and removes one sandbox's container, then drops its record. While it works the record
/// is Stopping with this process as its stopper (so `reap` and `renew` leave it alone); when the
/// engine fails, the record is put back as it was.
pub async fn remove(ctx: &Ctx, rec: &Record) -> Result<()> {
    let me = ProcessRef::current();
    let claimed = ctx.store.update(|s| {
        Ok(s.get_mut(rec.id).map(|r| {
            let before = r.clone();
            r.set_state(Lifecycle::Stopping, r.error.clone());
            r.stopper = Some(me);
            (before, r.clone())
        }))
    })?;
    let container = rec.container_ref();
    let grace = Duration::from_secs(ctx.cfg.stop_timeout_secs);
    // Whatever the stop did (timed out, failed), the container is removed.
    let stopped = ctx.engine.stop(container, grace).await;
    let removed = ctx
        .engine
        .remove(container)
        .await
        .map_err(|e| match &stopped {
            Err(s) if !matches!(e.downcast_ref(), Some(Error::EngineUnavailable { .. })) => {
                e.context(format!("after the stop failed too ({s:#})"))
            }
            _ => e,
        });
    if let Err(e) = removed {
        if let Some((before, ours)) = claimed {
            // Compare-and-swap: only if no one changed it since.
            let _ = ctx.store.update(|s| {
                if let Some(r) = s.get_mut(rec.id).filter(|r| **r == ours) {
                    *r = before;
                }
                Ok(())
            });
        }
        return Err(e);
    }
    ctx.store.update(|s| {
        s.sandboxes.retain(|r| r.id != rec.id);
        Ok(())
    })
}
