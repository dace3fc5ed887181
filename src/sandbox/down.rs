//! Removing sandboxes (`down`): stop with the configured grace, remove whatever the stop did,
//! drop the record.
//! Idempotent: a vanished container, or a record another `down` already dropped, is success.
//!
//! Sub-sandboxes go with their parent, first: the deepest level of the tree is removed first
//! (each level concurrently), the named sandboxes last. All of them are marked Stopping up front,
//! in one locked update, so that `up --parent` cannot add a child that this `down` would miss.
//! A local sandbox has no container: `down` ends the processes its commands left running.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use uuid::Uuid;

use super::Ctx;
use crate::engine::Environment;
use crate::error::Error;
use crate::state::{Lifecycle, ProcessRef, Record, State};

/// One line of `down`'s report.
#[derive(Debug, Serialize)]
pub(crate) struct Removed {
    /// Sandbox ID.
    pub id: Uuid,
    /// Container name.
    pub name: String,
}

/// What [`take_down`] removed, and its first failure.
#[derive(Debug)]
pub(crate) struct Report {
    /// The sandboxes removed, sub-sandboxes first.
    pub removed: Vec<Removed>,
    /// The first failure (the others were reported as warnings); `None` when every sandbox was
    /// removed.
    pub error: Option<anyhow::Error>,
    /// The queries that named no sandbox (or several), with why; the others were removed all
    /// the same, so that one stale ID in a clean-up list leaks nothing.
    pub unresolved: Vec<(String, Error)>,
}

/// Removes the sandboxes `ids` (IDs, prefixes or names; every sandbox of the state directory
/// with `all`) and their sub-sandboxes, as `down` does; prints nothing. A full ID that is already
/// gone counts as removed (and is reported as a note). A name or prefix that matches nothing or
/// several is in [`Report::unresolved`], and every other sandbox is removed all the same.
/// Errors: the state file. Engine failures while removing are in the [`Report`].
pub(crate) async fn take_down(ctx: &Ctx, ids: &[String], all: bool) -> Result<Report> {
    take_down_or_forget(ctx, ids, all, false).await
}

/// [`take_down`]; with `forget`, a sandbox whose daemon cannot be reached
/// ([`Error::EngineUnavailable`]: down, gone, or its recorded settings no longer valid) loses
/// its record and this machine's files all the same, with a warning that its container (if it
/// has one) was left on that daemon (`down --forget`).
pub(crate) async fn take_down_or_forget(
    ctx: &Ctx,
    ids: &[String],
    all: bool,
    forget: bool,
) -> Result<Report> {
    let me = ProcessRef::current();
    let mut unresolved = Vec::new();
    // Each level: (the record as it was, the claim on it).
    let levels: Vec<Vec<(Record, Claim)>> = ctx.store.update(|s| {
        unresolved.clear();
        let roots: Vec<Uuid> = if all {
            s.sandboxes.iter().map(|r| r.id).collect()
        } else {
            let mut v: Vec<Uuid> = Vec::new();
            for q in ids {
                let id = match s.resolve(q) {
                    Ok(r) => r.id,
                    // A full ID that is gone was removed already (by a concurrent `down`, or
                    // `reap`): `down` is idempotent. A prefix or name that matches nothing is
                    // still an error (likely a typo).
                    Err(Error::NotFound { .. }) if Uuid::parse_str(q).is_ok() => {
                        ctx.reporter.note(&format!("sandbox {q} is already gone"));
                        continue;
                    }
                    Err(e) => {
                        unresolved.push((q.clone(), e));
                        continue;
                    }
                };
                if !v.contains(&id) {
                    v.push(id);
                }
            }
            v
        };
        let levels = removal_levels(s, &roots);
        Ok(levels
            .iter()
            .map(|l| {
                l.iter()
                    .filter_map(|id| s.get_mut(*id).map(|r| claim(r, me)))
                    .map(|c| (c.0.clone(), Some(c)))
                    .collect()
            })
            .collect())
    })?;
    let mut removed = Vec::new();
    let mut first_err = None;
    for targets in levels {
        let results = futures_util::future::join_all(
            targets
                .iter()
                .map(|(rec, claimed)| finish(ctx, rec, claimed.clone(), forget)),
        )
        .await;
        for ((rec, _), res) in targets.iter().zip(results) {
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
                        ctx.reporter.warn(&format!("{e:#}"));
                    }
                }
            }
        }
    }
    Ok(Report {
        removed,
        error: first_err,
        unresolved,
    })
}

/// The sandboxes `roots` and all their sub-sandboxes, in removal order: grouped by depth below
/// the roots, deepest first (each group in record order). A root that is itself below another
/// root is placed by that depth.
pub(crate) fn removal_levels(state: &State, roots: &[Uuid]) -> Vec<Vec<Uuid>> {
    let mut depth: HashMap<Uuid, usize> = roots.iter().map(|&id| (id, 0)).collect();
    for &root in roots {
        for (i, level) in state.descendants(root).iter().enumerate() {
            for &id in level {
                let d = depth.entry(id).or_insert(0);
                *d = (*d).max(i + 1);
            }
        }
    }
    let deepest = depth.values().copied().max().unwrap_or(0);
    (0..=deepest)
        .rev()
        .map(|d| {
            state
                .sandboxes
                .iter()
                .map(|r| r.id)
                .filter(|id| depth.get(id) == Some(&d))
                .collect::<Vec<_>>()
        })
        .filter(|l| !l.is_empty())
        .collect()
}

/// A record as it was before this process claimed it, and as the claim left it.
type Claim = Option<(Record, Record)>;

/// Marks `r` Stopping with `me` as its stopper (so `reap` and `renew` leave it alone, and a
/// concurrent `up --parent` is refused); returns the record before and after.
fn claim(r: &mut Record, me: ProcessRef) -> (Record, Record) {
    let before = r.clone();
    r.set_state(Lifecycle::Stopping, r.error.clone());
    r.stopper = Some(me);
    (before, r.clone())
}

/// Stops and removes one sandbox's container, then drops its record, for a record already
/// claimed (Stopping with this process as its stopper; when the engine fails, the record is put
/// back as it was).
async fn finish(ctx: &Ctx, rec: &Record, claimed: Claim, forget: bool) -> Result<()> {
    let engine = ctx.engine_for(rec);
    let container = rec.container_ref();
    let grace = Duration::from_secs(ctx.settings_for(rec).stop_timeout_secs);
    // Whatever the stop did (timed out, failed), the container is removed.
    let stopped = engine.stop(container, grace).await;
    let removed = engine.remove(container).await.map_err(|e| match &stopped {
        Err(s)
            if !matches!(e.downcast_ref(), Some(Error::EngineUnavailable { .. }))
                && format!("{s:#}") != format!("{e:#}") =>
        {
            e.context(format!("after the stop failed too ({s:#})"))
        }
        _ => e,
    });
    let removed = match removed {
        Err(e) if forget && matches!(e.downcast_ref(), Some(Error::EngineUnavailable { .. })) => {
            ctx.reporter.warn(&format!(
                "forgetting sandbox {}: its daemon cannot be reached ({e:#}); its container {}, if it has one, is left there",
                rec.short_id(),
                container
            ));
            Ok(())
        }
        r => r,
    };
    if let Err(e) = removed {
        if let Some((before, ours)) = claimed {
            // Nothing was removed: the record goes back to what it was, so it tells the truth
            // (compare-and-swap: only if no one changed it since).
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
    })?;
    // Its forwards would end by themselves at their next look; told now, they end at once.
    super::forward::end_for(ctx, rec.id);
    super::release(ctx, &engine, rec.id).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, parent: Option<Uuid>) -> Record {
        Record {
            parent,
            ..crate::state::tests::record(name)
        }
    }

    #[test]
    fn children_are_removed_before_their_parents() {
        let main = rec("main", None);
        let a = rec("a", Some(main.id));
        let a1 = rec("a1", Some(a.id));
        let b = rec("b", Some(main.id));
        let other = rec("other", None);
        let state = State {
            version: 1,
            dir: None,
            sandboxes: vec![
                main.clone(),
                a.clone(),
                a1.clone(),
                b.clone(),
                other.clone(),
            ],
        };
        assert_eq!(
            removal_levels(&state, &[main.id]),
            vec![vec![a1.id], vec![a.id, b.id], vec![main.id]]
        );
        // Naming a child too changes nothing; naming only a child leaves its parent alone.
        assert_eq!(
            removal_levels(&state, &[a.id, main.id]),
            vec![vec![a1.id], vec![a.id, b.id], vec![main.id]]
        );
        assert_eq!(
            removal_levels(&state, &[a.id]),
            vec![vec![a1.id], vec![a.id]]
        );
        // --all: every root at depth 0.
        let all: Vec<Uuid> = state.sandboxes.iter().map(|r| r.id).collect();
        assert_eq!(
            removal_levels(&state, &all),
            vec![vec![a1.id], vec![a.id, b.id], vec![main.id, other.id]]
        );
    }
}
