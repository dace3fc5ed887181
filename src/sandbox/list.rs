//! Listing sandboxes (`ls`): the records of this state directory, reconciled with the engine's
//! view from one `docker ps -a` call per engine in use, so a container killed or removed behind
//! our back shows its real state. Containers are matched by the container ID each record holds
//! ([`claim_of`]): a container labelled as a sandbox's under another ID is reported in
//! [`Entry::foreign_containers`], never taken for it. Local sandboxes (no container) need no
//! engine. Sub-sandboxes are listed under their parent with their role (`main`, `sub-1`, ...).

use std::collections::{BTreeMap, HashMap, HashSet};

use anyhow::Result;
use serde::Serialize;
use uuid::Uuid;

use super::Ctx;
use crate::config::Fallback;
use crate::engine::{ContainerSummary, Environment, LABEL_MANAGED, LABEL_STATE_DIR};
use crate::error::Error;
use crate::lease::{claim_of, Claim};
use crate::state::{Lifecycle, Record};
use crate::types::Isolation;

/// One `ls --format json` entry: the record, with `state` reconciled with the engine.
#[derive(Debug, Serialize)]
pub(crate) struct Entry {
    /// The record, with `state` (and `error`) as the engine's view makes them: a Running
    /// sandbox whose container is gone is Failed.
    #[serde(flatten)]
    pub record: Record,
    /// Place in the tree of sandboxes ([`tree`]): `main`, `sub-1`, `sub-1.2`, ...
    pub role: String,
    /// The container's state as the engine reports it (`running`, `exited`, ...), `missing`,
    /// `unknown` (engine unreachable), or `none` for a local sandbox (which has no container).
    pub container_state: String,
    /// The engine's human status, e.g. `Exited (137) 3 seconds ago`.
    pub container_status: String,
    /// The node it runs on, for an engine of several nodes (a swarm: the node's host name);
    /// absent where there is one host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Full IDs of containers of this state directory that carry this sandbox's `h9sandbox.id`
    /// label but are not its recorded container (forged or stray labels): reported, never
    /// taken for the sandbox's; `h9sandbox reap` removes them as orphans. Usually empty.
    pub foreign_containers: Vec<String>,
    /// Its ports forwarded by live `port-forward` processes (and MCP servers) of this state
    /// directory ([`super::forward::registered`]); absent when none. Ports published by `up
    /// --publish` are the record's `published`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub forwards: Vec<ListedForward>,
    /// Its resource use, with `ls --stats` ([`with_stats`]); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<ListedStats>,
    /// Depth in the tree (0 for a top-level sandbox); indents the table's ROLE column.
    #[serde(skip)]
    pub depth: usize,
}

/// A forward of a sandbox's port, as `ls` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ListedForward {
    /// Where it listens on this host, `127.0.0.1:PORT`.
    pub address: String,
    /// The port inside the sandbox.
    pub port: u16,
    /// The process that forwards it.
    pub pid: u32,
    /// What that process is: `port-forward` or `mcp`.
    pub kind: String,
}

/// `ls --stats`' `stats` object: the usage `stats --no-stream` shows, or why there is none.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ListedStats {
    /// The usage ([`super::stats::Usage`]'s fields); absent with `error`.
    #[serde(flatten)]
    pub usage: Option<super::stats::Usage>,
    /// Why it could not be sampled; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Adds each Running container sandbox's resource use to `entries` (all sampled at once, two
/// samples `gap` apart for the CPU rate); other sandboxes get none.
pub(crate) async fn with_stats(ctx: &Ctx, entries: &mut [Entry], gap: std::time::Duration) {
    let (idx, recs): (Vec<usize>, Vec<Record>) = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| super::stats::samplable(&e.record) && e.container_state == "running")
        .map(|(i, e)| (i, e.record.clone()))
        .unzip();
    if recs.is_empty() {
        return;
    }
    for (i, row) in idx
        .into_iter()
        .zip(super::stats::once(ctx, recs, gap).await)
    {
        entries[i].stats = Some(ListedStats {
            usage: row.usage,
            error: row.error,
        });
    }
}

/// The records in tree order ([`tree`]), reconciled with one listing of each container engine
/// they use (none when every sandbox is local). An unreachable engine is an error, except with
/// `fallback = "local"`: then it is warned about and its sandboxes are shown as recorded with
/// `container_state` `unknown`, so that local sandboxes (the fallback while the engine is down)
/// can still be listed (the warning goes to `ctx.reporter`).
pub(crate) async fn entries(ctx: &Ctx) -> Result<Vec<Entry>> {
    let mut state = ctx.store.load()?;
    // Sandboxes waiting, ready or starting, in a warm pool are the pool's (`pool ls`), not
    // anyone's yet; one that failed there is shown, for `down` to remove.
    state.sandboxes.retain(|r| {
        !(r.waits_in_pool(None) && matches!(r.state, Lifecycle::Running | Lifecycle::Pending))
    });
    let label = ctx.state_label();
    // One listing per engine and daemon in use ([`super::Target`]).
    let current = ctx.current_target();
    let mut listed: BTreeMap<super::Target, Option<Vec<ContainerSummary>>> = BTreeMap::new();
    for r in &state.sandboxes {
        let target = ctx.target_of(r);
        if r.isolation == Isolation::Container && !listed.contains_key(&target) {
            let containers = match ctx
                .engine_at(&target)
                .list(&[(LABEL_MANAGED, "1"), (LABEL_STATE_DIR, &label)])
                .await
            {
                Ok(c) => Some(c),
                // Another daemon than the one in force failing in any way (a remote host down,
                // settings no longer valid) must not hide the other sandboxes.
                Err(e) if target != current => {
                    ctx.reporter.warn(&format!(
                        "cannot check the sandboxes of {target}: {e:#}; they are shown as recorded, with container_state \"unknown\" (`h9sandbox down --forget ID` drops a record whose daemon is gone)"
                    ));
                    None
                }
                Err(e) => match e.downcast_ref::<Error>() {
                    // Degraded listing when local fallback sandboxes are expected, and for
                    // another daemon than the one in force (a remote host that is down must
                    // not hide this machine's sandboxes); by default an unreachable engine
                    // fails `ls`, as every other subcommand.
                    Some(Error::EngineUnavailable { reason, .. })
                        if ctx.cfg.fallback == Fallback::Local || target != current =>
                    {
                        ctx.reporter.warn(&format!(
                            "cannot check the sandboxes of {target}: {reason}; they are shown as recorded, with container_state \"unknown\""
                        ));
                        None
                    }
                    _ => return Err(e),
                },
            };
            listed.insert(target, containers);
        }
    }
    // Each container is the sandbox's whose record holds its ID; the ID label counts only for a
    // record that holds none yet, and a label naming a record that holds another ID is
    // reported, never trusted ([`claim_of`]).
    let mut theirs: HashMap<Uuid, &ContainerSummary> = HashMap::new();
    let mut foreign: HashMap<Uuid, Vec<String>> = HashMap::new();
    for (kind, cs) in listed
        .iter()
        .filter_map(|(k, cs)| cs.as_ref().map(|cs| (k, cs)))
    {
        let of_kind: Vec<Record> = state
            .sandboxes
            .iter()
            .filter(|r| ctx.target_of(r) == *kind && r.isolation == Isolation::Container)
            .cloned()
            .collect();
        for c in cs {
            match claim_of(c, &of_kind) {
                Claim::Recorded(r) | Claim::Label(r) => {
                    theirs.insert(r.id, c);
                }
                Claim::Foreign(r) => foreign.entry(r.id).or_default().push(c.id.clone()),
                Claim::Unclaimed => {}
            }
        }
    }
    let mut forwards = super::forward::registered(ctx);
    let mut records: Vec<Option<Record>> = state.sandboxes.into_iter().map(Some).collect();
    let nodes = tree(records.iter().flatten());
    Ok(nodes
        .into_iter()
        .filter_map(|n| {
            let record = records[n.index].take()?;
            let mut e = if record.isolation == Isolation::None {
                reconcile_local(record)
            } else if listed
                .get(&ctx.target_of(&record))
                .is_some_and(Option::is_none)
            {
                Entry {
                    record,
                    role: String::new(),
                    container_state: "unknown".into(),
                    container_status: "engine unreachable".into(),
                    node: None,
                    foreign_containers: Vec::new(),
                    forwards: Vec::new(),
                    stats: None,
                    depth: 0,
                }
            } else {
                let c = theirs.get(&record.id).copied();
                let others = foreign.remove(&record.id).unwrap_or_default();
                Entry {
                    foreign_containers: others,
                    ..reconcile(record, c)
                }
            };
            e.role = n.role;
            e.depth = n.depth;
            e.forwards = forwards
                .remove(&e.record.id)
                .unwrap_or_default()
                .into_iter()
                .map(|(pid, kind, b)| ListedForward {
                    address: b.address,
                    port: b.port,
                    pid,
                    kind,
                })
                .collect();
            Some(e)
        })
        .collect())
}

/// Whether a record in `state` agrees with its container's state `cstate` (`running`,
/// `paused`, `exited`, `missing`, …). Only the states that claim a container are checked.
fn agrees(state: Lifecycle, cstate: &str) -> bool {
    match state {
        Lifecycle::Running => cstate == "running",
        Lifecycle::Paused => cstate == "paused",
        Lifecycle::Stopped => matches!(cstate, "exited" | "created"),
        _ => true,
    }
}

/// A local sandbox as it really is: Running as long as its work directory exists.
pub(crate) fn reconcile_local(mut record: Record) -> Entry {
    if record.state == Lifecycle::Running && !record.workdir.is_dir() {
        record.state = Lifecycle::Failed;
        record.error = Some(format!(
            "work directory {} no longer exists",
            record.workdir.display()
        ));
    }
    Entry {
        record,
        role: String::new(),
        container_state: "none".into(),
        container_status: "no container: commands run on the host".into(),
        node: None,
        foreign_containers: Vec::new(),
        forwards: Vec::new(),
        stats: None,
        depth: 0,
    }
}

/// A record's place in the tree of sandboxes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    /// Index of the record in the input.
    pub index: usize,
    /// `main` for a top-level sandbox; `sub-N` for the Nth sub-sandbox (in creation order) of a
    /// main one, `sub-N.M` for the Mth sub-sandbox of that, ...; `sub-?` for a sub-sandbox whose
    /// parent's record is gone.
    pub role: String,
    /// 0 for the root of a tree, 1 for its children, ...
    pub depth: usize,
}

/// The records in tree order (each root in record order, followed by its sub-sandboxes,
/// depth first), with their roles (`main`, `sub-1`, `sub-1.2`: the ROLE column of `ls`).
pub(crate) fn tree<'a>(records: impl IntoIterator<Item = &'a Record>) -> Vec<Node> {
    let records: Vec<&Record> = records.into_iter().collect();
    let known: HashSet<Uuid> = records.iter().map(|r| r.id).collect();
    let mut out = Vec::with_capacity(records.len());
    let mut seen = HashSet::new();
    fn visit(
        records: &[&Record],
        i: usize,
        role: String,
        depth: usize,
        seen: &mut HashSet<Uuid>,
        out: &mut Vec<Node>,
    ) {
        if !seen.insert(records[i].id) {
            return;
        }
        let id = records[i].id;
        out.push(Node {
            index: i,
            role: role.clone(),
            depth,
        });
        let children = (0..records.len()).filter(|&j| records[j].parent == Some(id));
        for (n, j) in children.enumerate() {
            let sub = if role == "main" {
                format!("sub-{}", n + 1)
            } else {
                format!("{role}.{}", n + 1)
            };
            visit(records, j, sub, depth + 1, seen, out);
        }
    }
    for (i, r) in records.iter().enumerate() {
        match r.parent {
            None => visit(&records, i, "main".into(), 0, &mut seen, &mut out),
            Some(p) if !known.contains(&p) => {
                visit(&records, i, "sub-?".into(), 0, &mut seen, &mut out)
            }
            Some(_) => {}
        }
    }
    // Records caught in a parent cycle (only a hand-edited file has one) still show.
    for i in 0..records.len() {
        visit(&records, i, "sub-?".into(), 0, &mut seen, &mut out);
    }
    out
}

/// The record as it really is: a Running sandbox whose container exited or vanished is Failed.
pub(crate) fn reconcile(mut record: Record, c: Option<&ContainerSummary>) -> Entry {
    // A work dir replaced since `up` is one the container does not see.
    let replaced = match record.state {
        Lifecycle::Running | Lifecycle::Stopped | Lifecycle::Paused => {
            super::lifecycle::check_workdir(&record).err()
        }
        _ => None,
    };
    let (cstate, cstatus) = match c {
        Some(c) => (c.state.clone(), c.status.clone()),
        None => ("missing".to_string(), String::new()),
    };
    if record.state == Lifecycle::Pending && !record.creator.is_alive() {
        record.state = Lifecycle::Failed;
        record.error = Some(format!(
            "abandoned: the `up` that created it (pid {}) died before it finished",
            record.creator.pid
        ));
    } else if let Some(e) = replaced {
        record.state = Lifecycle::Failed;
        record.error = Some(e.to_string());
    } else if !agrees(record.state, &cstate) {
        let id = record.short_id();
        let why = match (c, cstate.as_str()) {
            (None, _) => "container removed outside h9sandbox".to_string(),
            (Some(c), "paused") => format!(
                "container paused outside h9sandbox ({}); `h9sandbox resume {id}` thaws it",
                c.status
            ),
            (Some(c), "exited" | "created") => format!(
                "container {} outside h9sandbox ({}); `h9sandbox start {id}` starts it again",
                c.state, c.status
            ),
            (Some(c), _) => format!("container {} outside h9sandbox ({})", c.state, c.status),
        };
        record.state = Lifecycle::Failed;
        record.error = Some(why);
    }
    Entry {
        record,
        role: "main".into(),
        container_state: cstate,
        container_status: cstatus,
        node: c.and_then(|c| c.node.clone()),
        foreign_containers: Vec::new(),
        forwards: Vec::new(),
        stats: None,
        depth: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(parent: Option<Uuid>) -> Record {
        Record {
            parent,
            ..crate::state::tests::record("n")
        }
    }

    #[test]
    fn tree_order_and_roles() {
        let main = rec(None);
        let a = rec(Some(main.id));
        let other = rec(None);
        let b = rec(Some(main.id));
        let a1 = rec(Some(a.id));
        let orphan = rec(Some(Uuid::new_v4()));
        let recs = [main, a, other, b, a1, orphan];
        let got: Vec<(usize, String, usize)> = tree(recs.iter())
            .into_iter()
            .map(|n| (n.index, n.role, n.depth))
            .collect();
        let want = [
            (0, "main", 0),
            (1, "sub-1", 1),
            (4, "sub-1.1", 2),
            (3, "sub-2", 1),
            (2, "main", 0),
            (5, "sub-?", 0),
        ];
        assert_eq!(
            got,
            want.iter()
                .map(|(i, r, d)| (*i, r.to_string(), *d))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_parent_cycle_still_lists_every_record() {
        let mut a = rec(None);
        let b = rec(Some(a.id));
        a.parent = Some(b.id);
        assert_eq!(tree([&a, &b]).len(), 2);
    }
}
