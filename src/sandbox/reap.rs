//! Reaping (`reap`): remove what was abandoned in this state directory (orphan containers,
//! records without containers, sandboxes whose owner died or whose lease ran out, Pending and
//! Stopping records whose process died), and say what was removed and why.
//!
//! [`sweep`] is also what `up` runs at start (`reap_on_up`). The judgement is
//! [`crate::lease::judge`]; this module carries it out:
//! 1. read the state, list this state directory's containers (one `docker ps -a`), read again;
//! 2. under the state lock, re-check every verdict against the record as it is now
//!    ([`crate::lease::still_holds`]): drop the records that need no engine call, mark the others
//!    Stopping with this process as their stopper (so no one renews or reaps them meanwhile);
//! 3. without the lock, remove the containers (`docker rm -f`, concurrently);
//! 4. under the lock, drop each removed sandbox's record if it is still Stopping by us.
//!
//! Each engine in use (the configured one, and any other a record names) is listed and judged on
//! its own; an engine other than the configured one that cannot be reached is skipped with a
//! warning, so its sandboxes are never judged "gone" merely because it is down. Local sandboxes
//! (no container) are judged by their lease alone, and removing one ends its processes.
//!
//! If this process dies between 2 and 4, the next `reap` finishes the job (its stopper is dead).
//! It also removes temporary state files that writers killed mid-write left behind.

use std::collections::BTreeSet;
use std::time::SystemTime;

use anyhow::Result;

use super::Ctx;
use crate::engine::{EngineKind, Environment, Isolation, LABEL_MANAGED, LABEL_STATE_DIR};
use crate::error::Error;
use crate::lease::{judge, lease_reason, sandbox_uuid, still_holds, Action, Verdict};
use crate::state::{Lifecycle, ProcessRef, State};

/// The outcome of one sweep.
#[derive(Debug, Default)]
pub struct Sweep {
    /// What was removed (or, in a dry run, would be).
    pub reaped: Vec<Verdict>,
    /// What could not be removed, with the engine's error.
    pub failed: Vec<(Verdict, anyhow::Error)>,
}

/// Finds what is abandoned in this state directory and, unless `dry_run`, removes it.
/// Errors: the state file cannot be read or written, the engine cannot list containers.
/// Failures to remove single containers are returned in [`Sweep::failed`].
pub async fn sweep(ctx: &Ctx, dry_run: bool) -> Result<Sweep> {
    let label = ctx.state_label();
    let before = ctx.store.load()?;
    // The container engines to look at: the configured one, and every one a record names.
    let mut kinds: BTreeSet<EngineKind> = before
        .sandboxes
        .iter()
        .filter(|r| r.isolation == Isolation::Container)
        .map(|r| r.engine)
        .collect();
    if ctx.engine.kind().isolation() == Isolation::Container {
        kinds.insert(ctx.engine.kind());
    }
    let mut listings = Vec::new();
    for kind in kinds {
        match ctx
            .engine_of(kind)
            .list(&[(LABEL_MANAGED, "1"), (LABEL_STATE_DIR, &label)])
            .await
        {
            Ok(c) => listings.push((kind, c)),
            // Another engine than the configured one being down is no reason to fail; its
            // sandboxes are simply not judged this time.
            Err(e)
                if kind != ctx.engine.kind()
                    && matches!(e.downcast_ref(), Some(Error::EngineUnavailable { .. })) =>
            {
                ctx.reporter
                    .warn(&format!("reap skips the {kind} sandboxes: {e:#}"));
            }
            Err(e) => return Err(e),
        }
    }
    let after = ctx.store.load()?;
    let alive = |p: &ProcessRef| p.is_alive();
    let now = SystemTime::now();
    let of_kind = |s: &State, kind: EngineKind| State {
        version: s.version,
        sandboxes: s
            .sandboxes
            .iter()
            .filter(|r| r.isolation == Isolation::Container && r.engine == kind)
            .cloned()
            .collect(),
    };
    let mut verdicts = Vec::new();
    for (kind, containers) in &listings {
        verdicts.extend(judge(
            &of_kind(&before, *kind),
            containers,
            &of_kind(&after, *kind),
            alive,
            now,
        ));
    }
    // Local sandboxes have no container to lose: only their lease can end them.
    for r in after
        .sandboxes
        .iter()
        .filter(|r| r.isolation == Isolation::None)
    {
        if r.state == Lifecycle::Stopping && r.stopper.is_some_and(|p| alive(&p)) {
            continue;
        }
        if let Some((reason, detail)) = lease_reason(r, &alive, now) {
            verdicts.push(Verdict {
                id: Some(r.id.to_string()),
                name: r.name.clone(),
                container: None,
                action: Action::Remove,
                reason,
                detail,
                record: Some(r.clone()),
            });
        }
    }
    // Sub-sandboxes go with their parent: those of a sandbox reaped now, and those whose parent
    // is gone already (a parent removed by an older version, or by hand).
    loop {
        let going: BTreeSet<String> = verdicts.iter().filter_map(|v| v.id.clone()).collect();
        let known: BTreeSet<String> = after.sandboxes.iter().map(|r| r.id.to_string()).collect();
        let more: Vec<Verdict> = after
            .sandboxes
            .iter()
            .filter(|r| !going.contains(&r.id.to_string()))
            .filter(|r| r.state != Lifecycle::Pending || !alive(&r.creator))
            .filter(|r| !(r.state == Lifecycle::Stopping && r.stopper.is_some_and(|p| alive(&p))))
            .filter_map(|r| {
                let p = r.parent?.to_string();
                let why = if going.contains(&p) {
                    format!("its parent {} is reaped with it", &p[..8])
                } else if !known.contains(&p) {
                    format!("its parent {} is gone", &p[..8])
                } else {
                    return None;
                };
                Some(Verdict {
                    id: Some(r.id.to_string()),
                    name: r.name.clone(),
                    container: r.container_id.clone(),
                    action: Action::Remove,
                    reason: crate::lease::Reason::ParentGone,
                    detail: why,
                    record: Some(r.clone()),
                })
            })
            .collect();
        if more.is_empty() {
            break;
        }
        verdicts.extend(more);
    }
    if !dry_run {
        // A writer killed mid-write leaves its temporary file; it is garbage too.
        ctx.store.remove_stale_temp_files()?;
    }
    if dry_run || verdicts.is_empty() {
        return Ok(Sweep {
            reaped: verdicts,
            failed: vec![],
        });
    }

    // Claim under the lock: only what still holds, now.
    let me = ProcessRef::current();
    let (dropped, claimed) = ctx.store.update(|s| {
        let now = SystemTime::now();
        let mut dropped = Vec::new();
        let mut claimed = Vec::new();
        for v in verdicts {
            let id = v.record.as_ref().map(|r| r.id).or_else(|| sandbox_uuid(&v));
            let idx = id.and_then(|id| s.sandboxes.iter().position(|r| r.id == id));
            if !still_holds(&v, idx.map(|i| &s.sandboxes[i]), alive, now) {
                continue;
            }
            match (v.action, idx) {
                (Action::DropRecord, Some(i)) => {
                    s.sandboxes.remove(i);
                    dropped.push(v);
                }
                (Action::Remove, Some(i)) => {
                    let r = &mut s.sandboxes[i];
                    r.set_state(Lifecycle::Stopping, None);
                    r.stopper = Some(me);
                    claimed.push(v);
                }
                (Action::RemoveContainer, None) => claimed.push(v),
                _ => {}
            }
        }
        Ok((dropped, claimed))
    })?;

    // The engine calls, without the lock.
    let results = futures_util::future::join_all(claimed.iter().map(|v| async {
        match (&v.container, &v.record) {
            (Some(c), Some(r)) => ctx.engine_for(r).remove(c).await,
            // An orphan: removed by the engine that listed it.
            (Some(c), None) => {
                let kind = listings
                    .iter()
                    .find(|(_, cs)| cs.iter().any(|x| &x.id == c))
                    .map_or(ctx.engine.kind(), |(k, _)| *k);
                ctx.engine_of(kind).remove(c).await
            }
            // A local sandbox: end the processes it left running.
            (None, Some(r)) if r.isolation == Isolation::None => {
                ctx.engine_for(r).remove(r.container_ref()).await
            }
            (None, _) => Ok(()),
        }
    }))
    .await;
    let mut sweep = Sweep {
        reaped: dropped,
        failed: vec![],
    };
    let mut removed = Vec::new();
    for (v, r) in claimed.into_iter().zip(results) {
        match r {
            Ok(()) => {
                if let Some(rec) = &v.record {
                    removed.push(rec.id);
                }
                sweep.reaped.push(v);
            }
            Err(e) => sweep.failed.push((v, e)),
        }
    }
    if !removed.is_empty() {
        // Compare-and-delete: only records still Stopping by us.
        ctx.store.update(|s| {
            s.sandboxes.retain(|r| {
                !(removed.contains(&r.id)
                    && r.state == Lifecycle::Stopping
                    && r.stopper == Some(me))
            });
            Ok(())
        })?;
    }
    Ok(sweep)
}
