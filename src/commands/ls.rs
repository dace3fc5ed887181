//! `h9sandbox ls`: the records of this state directory, reconciled with the engine's view from
//! one `docker ps -a` call per engine in use, so a container killed or removed behind our back
//! shows its real state. Local sandboxes (no container) need no engine; `ls` warns about them.

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use comfy_table::Cell;
use serde::Serialize;

use super::Ctx;
use crate::cli::{Format, LsArgs};
use crate::engine::{
    ContainerSummary, EngineKind, Environment, Isolation, LABEL_MANAGED, LABEL_STATE_DIR,
};
use crate::error::Error;
use crate::output;
use crate::state::{Lifecycle, Record};

/// One `ls --format json` entry: the record, with `state` reconciled with the engine.
#[derive(Debug, Serialize)]
pub struct Entry {
    #[serde(flatten)]
    pub record: Record,
    /// The container's state as the engine reports it (`running`, `exited`, ...), `missing`, or
    /// `none` for a local sandbox (which has no container).
    pub container_state: String,
    /// The engine's human status, e.g. `Exited (137) 3 seconds ago`.
    pub container_status: String,
}

/// Runs `ls`.
pub async fn run(ctx: &Ctx, _args: &LsArgs) -> Result<i32> {
    let entries = entries(ctx).await?;
    let local = entries
        .iter()
        .filter(|e| e.record.isolation == Isolation::None)
        .count();
    if local > 0 {
        output::warn(&format!(
            "{local} sandbox(es) listed are local (engine \"local\", isolation: none): their commands run directly on this host, without a container or limits"
        ));
    }
    match ctx.format {
        Format::Json => output::print_json(&entries)?,
        Format::Table => {
            let mut t = output::table(
                &["ID", "NAME", "STATE", "ENGINE", "IMAGE", "WORKDIR", "AGE"],
                output::colour_enabled(),
            );
            for e in &entries {
                let r = &e.record;
                t.add_row(vec![
                    Cell::new(r.short_id()),
                    Cell::new(&r.name),
                    output::state_cell(r.state),
                    Cell::new(r.engine),
                    Cell::new(if r.isolation == Isolation::None {
                        "-"
                    } else {
                        r.image.as_str()
                    }),
                    Cell::new(r.workdir.display()),
                    Cell::new(output::age(&r.created_at)),
                ]);
            }
            output::print_table(&t)?;
        }
    }
    Ok(0)
}

/// The records, reconciled with one listing of each container engine they use (none when every
/// sandbox is local). An unreachable engine is warned about, and its sandboxes are shown as
/// recorded with `container_state` `unknown`, so that local sandboxes (the fallback when the
/// engine is down) can still be listed.
pub async fn entries(ctx: &Ctx) -> Result<Vec<Entry>> {
    let state = ctx.store.load()?;
    let label = ctx.state_label();
    let mut listed: BTreeMap<EngineKind, Option<Vec<ContainerSummary>>> = BTreeMap::new();
    for r in &state.sandboxes {
        if r.isolation == Isolation::Container && !listed.contains_key(&r.engine) {
            let containers = match ctx
                .engine_of(r.engine)
                .list(&[(LABEL_MANAGED, "1"), (LABEL_STATE_DIR, &label)])
                .await
            {
                Ok(c) => Some(c),
                Err(e) => match e.downcast_ref::<Error>() {
                    Some(Error::EngineUnavailable { reason, .. }) => {
                        output::warn(&format!(
                            "cannot check the {} sandboxes: {reason}; they are shown as recorded, with container_state \"unknown\"",
                            r.engine
                        ));
                        None
                    }
                    _ => return Err(e),
                },
            };
            listed.insert(r.engine, containers);
        }
    }
    let by_sandbox: HashMap<(EngineKind, &str), &ContainerSummary> = listed
        .iter()
        .filter_map(|(kind, cs)| cs.as_ref().map(|cs| (kind, cs)))
        .flat_map(|(kind, cs)| {
            cs.iter()
                .filter_map(move |c| c.sandbox_id.as_deref().map(|id| ((*kind, id), c)))
        })
        .collect();
    Ok(state
        .sandboxes
        .into_iter()
        .map(|record| {
            if record.isolation == Isolation::None {
                return reconcile_local(record);
            }
            if listed.get(&record.engine).is_some_and(Option::is_none) {
                return Entry {
                    record,
                    container_state: "unknown".into(),
                    container_status: "engine unreachable".into(),
                };
            }
            let c = by_sandbox
                .get(&(record.engine, record.id.to_string().as_str()))
                .copied();
            reconcile(record, c)
        })
        .collect())
}

/// A local sandbox as it really is: Running as long as its work directory exists.
pub fn reconcile_local(mut record: Record) -> Entry {
    if record.state == Lifecycle::Running && !record.workdir.is_dir() {
        record.state = Lifecycle::Failed;
        record.error = Some(format!(
            "work directory {} no longer exists",
            record.workdir.display()
        ));
    }
    Entry {
        record,
        container_state: "none".into(),
        container_status: "no container: commands run on the host".into(),
    }
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
