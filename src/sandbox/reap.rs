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

use super::{Ctx, Target};
use crate::engine::{ContainerSummary, Environment, LABEL_MANAGED, LABEL_STATE_DIR};
use crate::lease::{judge, lease_reason, sandbox_uuid, still_holds, Action, Reason, Verdict};
use crate::state::{Lifecycle, ProcessRef, Record, State};
use crate::types::Isolation;

/// The outcome of one sweep.
#[derive(Debug, Default)]
pub(crate) struct Sweep {
    /// What was removed (or, in a dry run, would be).
    pub reaped: Vec<Verdict>,
    /// What could not be removed, with the engine's error.
    pub failed: Vec<(Verdict, anyhow::Error)>,
    /// How many records the sweep judged (those of the state file when it listed).
    pub records: usize,
    /// How many containers of this state directory the engines listed.
    pub containers: usize,
}

/// The containers of this state directory, as each container engine in use lists them.
type Listings = Vec<(Target, Vec<ContainerSummary>)>;

/// Finds what is abandoned in this state directory and, unless `dry_run`, removes it.
/// Errors: the state file cannot be read or written, the engine cannot list containers.
/// Failures to remove single containers are returned in [`Sweep::failed`].
pub(crate) async fn sweep(ctx: &Ctx, dry_run: bool) -> Result<Sweep> {
    sweep_where(ctx, dry_run, None, None).await
}

/// [`sweep`] for one sandbox only: removes sandbox `id` (and its sub-sandboxes) when, and only
/// when, `reap` would (its owner is dead, its lease ran out, ...), the same way, re-checked
/// under the state lock; touches nothing else of the state directory. What the owner watcher
/// ([`super::watch`]) runs once the owner exits. Errors: as [`sweep`].
pub(crate) async fn sweep_sandbox(ctx: &Ctx, id: uuid::Uuid) -> Result<Sweep> {
    sweep_where(ctx, false, Some(id), None).await
}

/// A listing of one engine made already, for [`sweep_listed`]: every container there that
/// carries [`LABEL_MANAGED`], of any state directory (what `up` lists anyway to check that no
/// other state directory lies in the work dir).
pub(crate) struct Listed {
    /// Where it was listed.
    pub target: Target,
    /// What the engine listed, or why it could not.
    pub containers: Result<Vec<ContainerSummary>>,
}

/// [`sweep`] (not a dry run) with the state `before` read before `listed` was made: `listed`'s
/// target is not listed again, its containers of this state directory are taken instead.
/// What `up` runs, saving one engine call. Errors: as [`sweep`].
pub(crate) async fn sweep_listed(ctx: &Ctx, before: State, listed: Listed) -> Result<Sweep> {
    sweep_where(ctx, false, None, Some((before, listed))).await
}

/// [`sweep`], limited to sandbox `only` and its sub-sandboxes when given (then without the
/// state directory's other garbage: temporary files, orphan volumes, sidecars, agent dirs);
/// with `listed`, the state read before a listing made already, and that listing.
async fn sweep_where(
    ctx: &Ctx,
    dry_run: bool,
    only: Option<uuid::Uuid>,
    listed: Option<(State, Listed)>,
) -> Result<Sweep> {
    let (before, listed) = match listed {
        Some((before, l)) => (before, Some(l)),
        None => (ctx.store.load()?, None),
    };
    let listings = list_containers(ctx, &before, listed).await?;
    let after = ctx.store.load()?;
    let mut verdicts = judge_all(
        &before,
        &listings,
        &after,
        |r| ctx.target_of(r),
        SystemTime::now(),
    );
    if let Some(id) = only {
        let mut tree: Vec<uuid::Uuid> = after.descendants(id).into_iter().flatten().collect();
        tree.push(id);
        verdicts.retain(|v| v.record.as_ref().is_some_and(|r| tree.contains(&r.id)));
    }
    let (records, containers) = (
        after.sandboxes.len(),
        listings.iter().map(|(_, l)| l.len()).sum::<usize>(),
    );
    let tidy = !dry_run && only.is_none();
    if tidy {
        // A writer killed mid-write leaves its temporary file; it is garbage too, and so are
        // the agent directories of sandboxes without a record.
        ctx.store.remove_stale_temp_files()?;
        forget_agents(ctx)?;
        // Proxy sidecars of sandboxes without a record (those of sandboxes reaped below go
        // with them, see `super::release`).
        if ctx.store.dir().join("proxy").exists() {
            if let Err(e) = super::egress::reap_orphans(ctx).await {
                if ctx.verbose() {
                    ctx.reporter
                        .note(&format!("could not reap proxy sidecars: {e:#}"));
                }
            }
        }
    }
    if dry_run || verdicts.is_empty() {
        if tidy {
            remove_orphan_volumes(ctx, &listings).await;
        }
        return Ok(Sweep {
            reaped: verdicts,
            failed: vec![],
            records,
            containers,
        });
    }
    let me = ProcessRef::current();
    let (dropped, claimed) = claim(ctx, verdicts, me)?;
    let sweep = remove_claimed(ctx, &listings, dropped, claimed, me).await?;
    // Volumes without a record, once the containers that used them are gone (an orphan's
    // scratch volume, its proxy's; a volume still in use is not removed).
    if tidy {
        remove_orphan_volumes(ctx, &listings).await;
    }
    Ok(Sweep {
        records,
        containers,
        ..sweep
    })
}

/// Whether the process `p` still runs (the liveness oracle of the judgement).
fn alive(p: &ProcessRef) -> bool {
    p.is_alive()
}

/// Step 1: lists the containers of this state directory on every container engine in use: the
/// configured one, and every one a record of `before` names. Another engine than the configured
/// one being unreachable is only warned about: its sandboxes are simply not judged this time.
/// The target of `listed` is not listed again: its containers of this state directory are
/// taken from it.
async fn list_containers(
    ctx: &Ctx,
    before: &State,
    mut listed: Option<Listed>,
) -> Result<Listings> {
    let label = ctx.state_label();
    let mut targets: BTreeSet<Target> = before
        .sandboxes
        .iter()
        .filter(|r| r.isolation == Isolation::Container)
        .map(|r| ctx.target_of(r))
        .collect();
    let current = ctx.current_target();
    if current.kind.isolation() == Isolation::Container {
        targets.insert(current.clone());
    }
    let mut listings = Vec::new();
    for target in targets {
        let found = match listed.take_if(|l| l.target == target) {
            Some(l) => l.containers.map(|mut c| {
                c.retain(|c| c.state_dir.as_deref() == Some(label.as_str()));
                c
            }),
            None => {
                ctx.engine_at(&target)
                    .list(&[(LABEL_MANAGED, "1"), (LABEL_STATE_DIR, &label)])
                    .await
            }
        };
        match found {
            Ok(c) => listings.push((target, c)),
            // Another daemon than the one in force failing in any way: its sandboxes are not
            // judged this time, the others are.
            Err(e) if target != current => {
                ctx.reporter
                    .warn(&format!("reap skips the sandboxes of {target}: {e:#}"));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(listings)
}

/// The verdicts on the state read `before` and `after` the `listings`, at `now`: each
/// container engine's sandboxes judged against its own listing ([`judge`]), local sandboxes by
/// their lease, and the sub-sandboxes of everything reaped (or already gone).
fn judge_all(
    before: &State,
    listings: &Listings,
    after: &State,
    target_of: impl Fn(&Record) -> Target,
    now: SystemTime,
) -> Vec<Verdict> {
    let of_kind = |s: &State, kind: &Target| State {
        version: s.version,
        dir: s.dir.clone(),
        sandboxes: s
            .sandboxes
            .iter()
            .filter(|r| r.isolation == Isolation::Container && target_of(r) == *kind)
            .cloned()
            .collect(),
    };
    let mut verdicts = Vec::new();
    for (kind, containers) in listings {
        verdicts.extend(judge(
            &of_kind(before, kind),
            containers,
            &of_kind(after, kind),
            alive,
            now,
        ));
    }
    verdicts.extend(local_verdicts(after, now));
    // Sub-sandboxes go with their parent: those of a sandbox reaped now, and those whose parent
    // is gone already (a parent removed by an older version, or by hand).
    loop {
        let more = orphaned_children(after, &verdicts);
        if more.is_empty() {
            break;
        }
        verdicts.extend(more);
    }
    verdicts
}

/// Local sandboxes have no container to lose: only their lease can end them.
fn local_verdicts(after: &State, now: SystemTime) -> Vec<Verdict> {
    after
        .sandboxes
        .iter()
        .filter(|r| r.isolation == Isolation::None)
        .filter(|r| !(r.state == Lifecycle::Stopping && r.stopper.is_some_and(|p| alive(&p))))
        .filter_map(|r| {
            let (reason, detail) = lease_reason(r, &alive, now)?;
            Some(Verdict {
                id: Some(r.id.to_string()),
                name: r.name.clone(),
                container: None,
                action: Action::Remove,
                reason,
                detail,
                record: Some(r.clone()),
            })
        })
        .collect()
}

/// The sandboxes of `after` not yet in `verdicts` whose parent is reaped (is in `verdicts`) or
/// gone (has no record); never one whose `up` or `down` is still at work.
fn orphaned_children(after: &State, verdicts: &[Verdict]) -> Vec<Verdict> {
    let going: BTreeSet<String> = verdicts.iter().filter_map(|v| v.id.clone()).collect();
    let known: BTreeSet<String> = after.sandboxes.iter().map(|r| r.id.to_string()).collect();
    after
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
                reason: Reason::ParentGone,
                detail: why,
                record: Some(r.clone()),
            })
        })
        .collect()
}

/// Step 2, under the state lock: keeps only the verdicts that still hold now ([`still_holds`]),
/// drops the records that need no engine call, and marks the sandboxes to remove Stopping with
/// `me` as their stopper. Returns (the records dropped, the verdicts claimed for removal).
fn claim(
    ctx: &Ctx,
    verdicts: Vec<Verdict>,
    me: ProcessRef,
) -> Result<(Vec<Verdict>, Vec<Verdict>)> {
    ctx.store.update(|s| {
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
                // An orphan; or a container labelled as a record's that holds another one.
                (Action::RemoveContainer, _) => claimed.push(v),
                _ => {}
            }
        }
        Ok((dropped, claimed))
    })
}

/// Steps 3 and 4: removes what was `claimed` (the engine calls, concurrently, without the lock),
/// then drops each removed sandbox's record if it is still Stopping by `me`. Returns the sweep:
/// `dropped` and what was removed, and what could not be.
async fn remove_claimed(
    ctx: &Ctx,
    listings: &Listings,
    dropped: Vec<Verdict>,
    claimed: Vec<Verdict>,
    me: ProcessRef,
) -> Result<Sweep> {
    // A dropped record's container is gone already: what it held beside it goes now.
    for v in &dropped {
        if let Some(r) = &v.record {
            super::release(ctx, &ctx.engine_for(r), r.id).await;
        }
    }
    let results =
        futures_util::future::join_all(claimed.iter().map(|v| remove_one(ctx, listings, v))).await;
    let mut sweep = Sweep {
        reaped: dropped,
        ..Sweep::default()
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
    let left = forget_agents(ctx)?;
    if let Err(e) = super::agent::purge(ctx, &ctx.engine, &left).await {
        ctx.reporter.warn(&format!(
            "could not remove {} run directories holding files their sandboxes' root made: {e:#}",
            left.len()
        ));
    }
    Ok(sweep)
}

/// Removes the agents' run directories and tokens that belong to no record any more (their
/// sandbox was reaped or removed, or its `up` died). Under the state lock: `up` writes its
/// record before it makes them, so none of a sandbox being created is taken.
fn forget_agents(ctx: &Ctx) -> Result<Vec<std::path::PathBuf>> {
    let ids = |dir: &str| -> Vec<uuid::Uuid> {
        std::fs::read_dir(ctx.store.dir().join(dir))
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| super::agent::run_dir_owner(e.file_name().to_str()?))
                    .collect()
            })
            .unwrap_or_default()
    };
    let found: Vec<uuid::Uuid> = ids("run")
        .into_iter()
        .chain(ids("tokens"))
        .chain(ids("mounts"))
        .collect();
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let mut left = Vec::new();
    ctx.store.update(|s| {
        for id in found.iter().filter(|id| s.get(**id).is_none()) {
            left.extend(super::agent::forget(ctx, *id));
        }
        Ok(())
    })?;
    left.sort();
    left.dedup();
    Ok(left)
}

/// The engine's part of one removal: the container of a record, by the record's engine; an
/// orphan container, by the engine that listed it; a local sandbox's leftover processes.
async fn remove_one(ctx: &Ctx, listings: &Listings, v: &Verdict) -> Result<()> {
    let (engine, removed) = match (&v.container, &v.record) {
        (Some(c), Some(r)) => {
            let e = ctx.engine_for(r);
            let removed = e.remove(c).await;
            (e, removed)
        }
        (Some(c), None) => {
            let target = listings
                .iter()
                .find(|(_, cs)| cs.iter().any(|x| &x.id == c))
                .map_or_else(|| ctx.current_target(), |(t, _)| t.clone());
            let e = ctx.engine_at(&target);
            let removed = e.remove(c).await;
            (e, removed)
        }
        (None, Some(r)) => {
            let e = ctx.engine_for(r);
            let removed = match r.isolation {
                Isolation::None => e.remove(r.container_ref()).await,
                Isolation::Container => Ok(()),
            };
            (e, removed)
        }
        (None, None) => return Ok(()),
    };
    removed?;
    // What the sandbox held beside its container: its scratch volume, its agent's directory.
    if let Some(id) = v.record.as_ref().map(|r| r.id).or_else(|| sandbox_uuid(v)) {
        super::release(ctx, &engine, id).await;
    }
    Ok(())
}

/// Removes the volumes of this state directory that belong to no record (scratch volumes, the
/// proxy volumes of copy-mode sandboxes: left behind by
/// a container removed without its volumes, or a sandbox whose record was dropped), on every
/// container engine in `listings`. A volume still in use is left. Listed before the state is
/// read: a sandbox being created has its record before its volume.
async fn remove_orphan_volumes(ctx: &Ctx, listings: &Listings) {
    let label = ctx.state_label();
    for (target, _) in listings {
        let engine = ctx.engine_at(target);
        let Ok(volumes) = engine
            .list_volumes(&[(LABEL_MANAGED, "1"), (LABEL_STATE_DIR, &label)])
            .await
        else {
            continue;
        };
        let Ok(state) = ctx.store.load() else {
            return;
        };
        for v in volumes {
            let known = v
                .sandbox_id
                .as_deref()
                .and_then(|i| uuid::Uuid::parse_str(i).ok())
                .is_some_and(|id| state.get(id).is_some());
            if !known {
                let _ = engine.remove_volume(&v.name).await;
            }
        }
    }
}
