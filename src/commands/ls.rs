//! `h9sandbox ls`: the records of this state directory, reconciled with the engine's view from
//! one `docker ps -a` call, so a container killed or removed behind our back shows its real state.

use std::collections::HashMap;

use anyhow::Result;
use comfy_table::Cell;
use serde::Serialize;

use super::Ctx;
use crate::cli::{Format, LsArgs};
use crate::engine::{ContainerSummary, Environment, LABEL_MANAGED, LABEL_STATE_DIR};
use crate::lease;
use crate::output;
use crate::state::{Lifecycle, Record};

/// One `ls --format json` entry: the record, with `state` reconciled with the engine.
#[derive(Debug, Serialize)]
pub struct Entry {
    #[serde(flatten)]
    pub record: Record,
    /// The container's state as the engine reports it (`running`, `exited`, ...), or `missing`.
    pub container_state: String,
    /// The engine's human status, e.g. `Exited (137) 3 seconds ago`.
    pub container_status: String,
}

/// Runs `ls`.
pub async fn run(ctx: &Ctx, _args: &LsArgs) -> Result<i32> {
    let entries = entries(ctx).await?;
    match ctx.format {
        Format::Json => output::print_json(&entries)?,
        Format::Table => {
            let mut t = output::table(
                &["ID", "NAME", "STATE", "IMAGE", "WORKDIR", "AGE", "LEASE"],
                output::colour_enabled(),
            );
            let now = std::time::SystemTime::now();
            for e in &entries {
                let r = &e.record;
                t.add_row(vec![
                    Cell::new(r.short_id()),
                    Cell::new(&r.name),
                    output::state_cell(r.state),
                    Cell::new(&r.image),
                    Cell::new(r.workdir.display()),
                    Cell::new(output::age(&r.created_at)),
                    Cell::new(lease::describe(r, |p| p.is_alive(), now)),
                ]);
            }
            output::print_table(&t)?;
        }
    }
    Ok(0)
}

/// The records, reconciled with one engine listing.
pub async fn entries(ctx: &Ctx) -> Result<Vec<Entry>> {
    let state = ctx.store.load()?;
    let label = ctx.state_label();
    let listed = ctx
        .engine
        .list(&[(LABEL_MANAGED, "1"), (LABEL_STATE_DIR, &label)])
        .await?;
    let by_sandbox: HashMap<&str, &ContainerSummary> = listed
        .iter()
        .filter_map(|c| c.sandbox_id.as_deref().map(|id| (id, c)))
        .collect();
    Ok(state
        .sandboxes
        .into_iter()
        .map(|record| {
            let c = by_sandbox.get(record.id.to_string().as_str()).copied();
            reconcile(record, c)
        })
        .collect())
}

/// The record as it really is: a Running sandbox whose container exited or vanished is Failed.
pub fn reconcile(mut record: Record, c: Option<&ContainerSummary>) -> Entry {
    let (cstate, cstatus) = match c {
        Some(c) => (c.state.clone(), c.status.clone()),
        None => ("missing".to_string(), String::new()),
    };
    if record.state == Lifecycle::Running && cstate != "running" {
        let why = match c {
            Some(c) => format!("container {} outside h9sandbox ({})", c.state, c.status),
            None => "container removed outside h9sandbox".to_string(),
        };
        record.state = Lifecycle::Failed;
        record.error = Some(why);
    }
    Entry {
        record,
        container_state: cstate,
        container_status: cstatus,
    }
}
