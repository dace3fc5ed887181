//! Leases (an owner process, a time to live) and the reaper's judgement: which containers and
//! records of a state directory are abandoned, and why.
//!
//! [`judge`] is pure: it takes two snapshots of the state file (read before and after one listing
//! of the engine's containers), that listing, a liveness oracle and the current time, and returns
//! the [`Verdict`]s. The core's `sandbox::reap` carries them out, re-checking each one under the
//! state lock ([`still_holds`]) so that a sandbox renewed or removed in between is left alone.
//!
//! Why two snapshots: `up` writes its Pending record *before* it creates the container, so every
//! container in the listing has its record in the state read *after* the listing, unless that
//! record is truly gone: an orphan, when the record was not in the first read either (a record
//! dropped between the reads belongs to a `down` or `reap` that removed its container first). And a record that already had a container in the state read
//! *before* the listing, but whose container is missing from it, really lost its container; a
//! record that turned Running in between is not mistaken for one.
//!
//! A container is a record's when the record holds its ID ([`claim_of`]). Labels are data that
//! anyone who can reach the engine may set, so the `h9sandbox.id` label only stands in for a
//! record that holds no container ID yet; a container labelled as a record's that holds another
//! ID is an orphan, never that sandbox's container.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use uuid::Uuid;

use crate::engine::ContainerSummary;
use crate::error::Error;
use crate::state::{Lifecycle, ProcessRef, Record, State};

/// Why something is reaped (stable codes, as printed in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Reason {
    /// A container of this state directory without a record (e.g. `up` killed between
    /// `docker run` and its state write, or a state file moved aside).
    Orphan,
    /// A record whose container no longer exists (removed behind h9sandbox's back).
    ContainerGone,
    /// The owner process (`up --owner-pid`) has exited.
    OwnerDead,
    /// The lease (`up --ttl`, `renew`) has run out.
    Expired,
    /// The `up` that created it died before finishing (Pending), or failed and died without
    /// removing its container (Failed).
    CreatorDead,
    /// The `down` (or `reap`) removing it died before finishing (Stopping).
    StopperDead,
    /// Its parent sandbox (`up --parent`) is gone or being reaped: sub-sandboxes go with it.
    ParentGone,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reason::Orphan => "orphan",
            Reason::ContainerGone => "container-gone",
            Reason::OwnerDead => "owner-dead",
            Reason::Expired => "expired",
            Reason::CreatorDead => "creator-dead",
            Reason::StopperDead => "stopper-dead",
            Reason::ParentGone => "parent-gone",
        })
    }
}

/// What is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Action {
    /// Only a container (it has no record).
    RemoveContainer,
    /// Only a record (it has no container).
    DropRecord,
    /// The container and its record.
    Remove,
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Action::RemoveContainer => "remove-container",
            Action::DropRecord => "drop-record",
            Action::Remove => "remove",
        })
    }
}

/// One thing to reap (one entry of `reap --format json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Verdict {
    /// The sandbox ID (from the record, or from an orphan's `h9sandbox.id` label).
    pub id: Option<String>,
    /// The sandbox's (or orphan container's) name.
    pub name: String,
    /// The engine's container ID to remove, when there is a container.
    pub container: Option<String>,
    /// What is removed.
    pub action: Action,
    /// Why, as a stable code.
    pub reason: Reason,
    /// Why, for people (names the process, the time, ...).
    pub detail: String,
    /// The record as judged (for the compare-and-delete), when there is one.
    #[serde(skip)]
    pub record: Option<Record>,
}

/// Why a record's lease or lifecycle makes it abandoned, whatever its container does; `None`
/// when a live process still answers for it. The rules:
/// - Pending: abandoned once its creator (`up`) is dead — and only then, even when its owner is
///   dead or its TTL has passed (the `up` in progress finishes first);
/// - Stopping: abandoned once its stopper (`down`, `reap`) is dead;
/// - Running, Stopped, Paused, Stopping, Failed: abandoned once the owner is dead, or the lease
///   has run out;
/// - Failed: abandoned once its creator is dead (a live one is still cleaning up).
pub(crate) fn lease_reason(
    r: &Record,
    alive: &impl Fn(&ProcessRef) -> bool,
    now: SystemTime,
) -> Option<(Reason, String)> {
    match r.state {
        Lifecycle::Pending => {
            return (!alive(&r.creator)).then(|| {
                (
                    Reason::CreatorDead,
                    format!(
                        "Pending, and the `up` that created it (process {}) is gone",
                        r.creator.pid
                    ),
                )
            });
        }
        Lifecycle::Stopping => match r.stopper {
            Some(p) if alive(&p) => return None,
            Some(p) => {
                return Some((
                    Reason::StopperDead,
                    format!("Stopping, and the process removing it ({}) is gone", p.pid),
                ))
            }
            None => {}
        },
        // Made for a warm pool, never made ready (started, not bootstrapped), and its filler is
        // gone: nobody will finish it, and nobody may claim it.
        Lifecycle::Running
            if r.pool
                .as_ref()
                .is_some_and(|p| p.claimed_at.is_none() && !p.ready)
                && !alive(&r.creator) =>
        {
            return Some((
                Reason::CreatorDead,
                format!(
                    "made for pool {} but never ready, and the filler that made it (process {}) is gone",
                    r.pool.as_ref().map_or("", |p| p.name.as_str()),
                    r.creator.pid
                ),
            ));
        }
        Lifecycle::Running
        | Lifecycle::Stopped
        | Lifecycle::Paused
        | Lifecycle::Failed
        | Lifecycle::Terminated => {}
    }
    if let Some(owner) = r.owner {
        if !alive(&owner) {
            return Some((
                Reason::OwnerDead,
                format!("its owner process {} has exited", owner.pid),
            ));
        }
    }
    if let Some(end) = &r.expires_at {
        match humantime::parse_rfc3339_weak(end) {
            Ok(t) if now >= t => {
                return Some((Reason::Expired, format!("its lease ran out at {end}")));
            }
            Ok(_) => {}
            Err(_) => {
                return Some((
                    Reason::Expired,
                    format!("its lease end '{end}' is not a valid time"),
                ));
            }
        }
    }
    if r.state == Lifecycle::Failed && !alive(&r.creator) {
        return Some((
            Reason::CreatorDead,
            format!(
                "Failed, and the `up` that created it (process {}) is gone",
                r.creator.pid
            ),
        ));
    }
    if r.state == Lifecycle::Stopping && r.stopper.is_none() {
        return Some((
            Reason::StopperDead,
            "Stopping, and no live process is removing it".into(),
        ));
    }
    None
}

/// Whose container a listed container is, by the records of a state file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Claim<'a> {
    /// This record holds the container's ID: it is that sandbox's container.
    Recorded(&'a Record),
    /// No record holds its ID, but it carries the `h9sandbox.id` label of this record, which
    /// holds no container ID yet (Pending while `up` starts it, or Failed before it was
    /// recorded): taken as that sandbox's container.
    Label(&'a Record),
    /// It carries the `h9sandbox.id` label of this record, whose recorded container is another
    /// one: NOT that sandbox's container (a forged or stray label; labels are mere data that
    /// anyone who can reach the engine may set).
    Foreign(&'a Record),
    /// No record holds its ID or the ID its label names.
    Unclaimed,
}

/// Whose container `c` is among `records`: matched by the container ID a record holds, never by
/// the label alone when the record holds another ID ([`Claim`]).
pub(crate) fn claim_of<'a>(c: &ContainerSummary, records: &'a [Record]) -> Claim<'a> {
    if let Some(r) = records
        .iter()
        .find(|r| r.container_id.as_deref() == Some(c.id.as_str()))
    {
        return Claim::Recorded(r);
    }
    let labelled = c
        .sandbox_id
        .as_deref()
        .and_then(|s| records.iter().find(|r| r.id.to_string() == s));
    match labelled {
        Some(r) if r.container_id.is_none() => Claim::Label(r),
        Some(r) => Claim::Foreign(r),
        None => Claim::Unclaimed,
    }
}

/// Why the container `container` (its ID), labelled as `r`'s, is not `r`'s (for warnings and
/// `reap`'s detail).
pub(crate) fn foreign_detail(container: &str, r: &Record) -> String {
    format!(
        "container {} carries the label of sandbox {} but is not its container ({}): a forged or stray label, never trusted",
        short(container),
        r.short_id(),
        short(r.container_id.as_deref().unwrap_or("none"))
    )
}

/// The first 12 characters of a container ID, as `docker ps` shows it.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The verdicts for one state directory. `before` and `after` are the state read just before
/// and just after `containers` (every container labelled with this state directory) was listed;
/// `alive` tells whether a process still lives; `now` is the current time.
///
/// Never judged: containers absent from `containers` (other state directories), a Pending record
/// whose creator lives, a Stopping record whose stopper lives, a sandbox whose owner lives and
/// whose lease runs, and a record whose container may have been created after the listing.
pub(crate) fn judge(
    before: &State,
    containers: &[ContainerSummary],
    after: &State,
    alive: impl Fn(&ProcessRef) -> bool,
    now: SystemTime,
) -> Vec<Verdict> {
    let mut out = Vec::new();
    let known_ids: HashSet<String> = after.sandboxes.iter().map(|r| r.id.to_string()).collect();
    // Records dropped between the two reads: whoever dropped them (`down`, another `reap`)
    // removed their containers first, or is about to find them again.
    let dropped_ids: HashSet<String> = before
        .sandboxes
        .iter()
        .map(|r| r.id.to_string())
        .filter(|id| !known_ids.contains(id))
        .collect();
    // Containers are matched by the container ID each record holds; the `h9sandbox.id` label
    // counts only for a record that has no container ID yet (see [`claim_of`]).
    let mut by_label: HashMap<Uuid, &ContainerSummary> = HashMap::new();
    for c in containers {
        let claim = claim_of(c, &after.sandboxes);
        let detail = match claim {
            Claim::Recorded(_) => continue,
            Claim::Label(r) => {
                by_label.insert(r.id, c);
                continue;
            }
            Claim::Foreign(r) => foreign_detail(&c.id, r),
            Claim::Unclaimed
                if c.sandbox_id
                    .as_ref()
                    .is_some_and(|s| dropped_ids.contains(s)) =>
            {
                continue
            }
            Claim::Unclaimed => "container of this state directory without a record".into(),
        };
        out.push(Verdict {
            id: c.sandbox_id.clone(),
            name: c.name.clone(),
            container: Some(c.id.clone()),
            action: Action::RemoveContainer,
            reason: Reason::Orphan,
            detail,
            record: None,
        });
    }
    let by_container: HashMap<&str, &ContainerSummary> =
        containers.iter().map(|c| (c.id.as_str(), c)).collect();
    for r in &after.sandboxes {
        let id = r.id.to_string();
        let container = match r.container_id.as_deref() {
            Some(cid) => by_container.get(cid).copied(),
            None => by_label.get(&r.id).copied(),
        };
        let verdict = |action, reason, detail| Verdict {
            id: Some(id.clone()),
            name: r.name.clone(),
            container: container.map(|c| c.id.clone()),
            action,
            reason,
            detail,
            record: Some(r.clone()),
        };
        match container {
            Some(_) => {
                if let Some((reason, detail)) = lease_reason(r, &alive, now) {
                    out.push(verdict(Action::Remove, reason, detail));
                }
            }
            None => {
                if r.state == Lifecycle::Pending {
                    // Its container may not exist yet: only a dead creator abandons it.
                    if let Some((reason, detail)) = lease_reason(r, &alive, now) {
                        out.push(verdict(Action::DropRecord, reason, detail));
                    }
                    continue;
                }
                if r.state == Lifecycle::Stopping && r.stopper.is_some_and(|p| alive(&p)) {
                    continue; // a live `down` drops it itself
                }
                // Past Pending already before the listing: the container existed (or, Failed,
                // was removed by `up`), so its absence from the listing is real.
                let settled = before
                    .sandboxes
                    .iter()
                    .any(|b| b.id == r.id && b.state != Lifecycle::Pending);
                if settled {
                    let detail = match r.state {
                        Lifecycle::Failed => format!(
                            "Failed ({}), and it has no container",
                            r.error.as_deref().unwrap_or("no reason recorded")
                        ),
                        _ => format!("{}, but its container no longer exists", r.state),
                    };
                    out.push(verdict(Action::DropRecord, Reason::ContainerGone, detail));
                }
            }
        }
    }
    out
}

/// Whether `verdict` still holds for `current`, the record as it is now under the state lock
/// (compare-and-delete): the record still exists, and a dead process or a run-out lease still
/// abandons it (a `renew`, a `down` or a finished `up` in between makes it not hold), or its
/// container was already gone and it is not Pending.
pub(crate) fn still_holds(
    verdict: &Verdict,
    current: Option<&Record>,
    alive: impl Fn(&ProcessRef) -> bool,
    now: SystemTime,
) -> bool {
    let Some(cur) = current else {
        // An orphan must still have no record; a record already dropped needs nothing.
        return verdict.record.is_none();
    };
    if verdict.record.is_none() {
        // The record its label names exists: the container is still an orphan only when that
        // record holds another container's ID (a record without one may be starting it).
        return cur
            .container_id
            .as_deref()
            .is_some_and(|cid| Some(cid) != verdict.container.as_deref());
    }
    match verdict.reason {
        Reason::ContainerGone => {
            cur.state != Lifecycle::Pending
                && !(cur.state == Lifecycle::Stopping && cur.stopper.is_some_and(|p| alive(&p)))
        }
        // Decided with its parent's verdict (or the parent's absence) in the same sweep.
        Reason::ParentGone => {
            (cur.state != Lifecycle::Pending || !alive(&cur.creator))
                && !(cur.state == Lifecycle::Stopping && cur.stopper.is_some_and(|p| alive(&p)))
        }
        _ => lease_reason(cur, &alive, now).is_some(),
    }
}

/// Parses a TTL (`30m`, `2h`, `1h 30m`, `90s`, or bare seconds: [`crate::types::parse_duration`])
/// into whole seconds (rounded up), at least 1.
pub(crate) fn parse_ttl(text: &str) -> Result<u64, Error> {
    let d: Duration = crate::types::parse_duration(text)
        .map_err(|e| Error::Usage(format!("invalid --ttl: {e}")))?;
    if d < Duration::from_secs(1) {
        return Err(Error::Usage(format!(
            "invalid --ttl '{text}': a lease lasts at least 1s"
        )));
    }
    Ok(crate::types::ceil_secs(d))
}

/// Resolves `--owner-pid`: `parent` is the process that started h9sandbox
/// (`getppid(2)`), else a PID, which must name a running process.
pub(crate) fn parse_owner(text: &str) -> Result<ProcessRef, Error> {
    let pid = if text == "parent" {
        std::os::unix::process::parent_id()
    } else {
        text.parse::<u32>().ok().filter(|&p| p > 0).ok_or_else(|| {
            Error::Usage(format!(
                "invalid --owner-pid '{text}': give a process ID or `parent`"
            ))
        })?
    };
    ProcessRef::of(pid).ok_or_else(|| {
        Error::Usage(format!(
            "--owner-pid {text}: no running process has PID {pid}; give the PID of a live process"
        ))
    })
}

/// A short, human description of a record's lease for `ls`: `-` when it has none, else the
/// owner's PID (with `(exited)` once dead) and the time left (`12m`, or `expired`).
pub(crate) fn describe(r: &Record, alive: impl Fn(&ProcessRef) -> bool, now: SystemTime) -> String {
    let mut parts = Vec::new();
    if let Some(o) = &r.owner {
        parts.push(if alive(o) {
            format!("pid {}", o.pid)
        } else {
            format!("pid {} (exited)", o.pid)
        });
    }
    if let Some(end) = &r.expires_at {
        parts.push(match humantime::parse_rfc3339_weak(end) {
            Ok(t) => match t.duration_since(now) {
                Ok(left) => format!("{} left", short_duration(left)),
                Err(_) => "expired".into(),
            },
            Err(_) => "expired".into(),
        });
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// `d` in its largest whole unit, rounded up (`45s`, `3m`, `2h`, `4d`).
fn short_duration(d: Duration) -> String {
    let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s.div_ceil(60)),
        3600..86400 => format!("{}h", s.div_ceil(3600)),
        _ => format!("{}d", s.div_ceil(86400)),
    }
}

/// A sandbox ID as a UUID, if the text is one.
pub(crate) fn sandbox_uuid(v: &Verdict) -> Option<Uuid> {
    v.id.as_deref().and_then(|s| Uuid::parse_str(s).ok())
}

#[cfg(test)]
mod tests;
