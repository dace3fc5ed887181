//! The state file: one JSON document listing every sandbox record of a state directory.
//!
//! Layout: `<state_dir>/state.json` (versioned schema, see [`SCHEMA_VERSION`]) and
//! `<state_dir>/state.lock`. Every read-modify-write ([`Store::update`]) holds an exclusive
//! advisory lock (`flock(2)` via `std::fs::File::lock`) on the lock file, and writes a temporary
//! file in the same directory which is then renamed over `state.json` (`rename(2)` is atomic), so
//! a reader without the lock always sees a whole document, and no two writers lose each other's
//! records. The lock dies with its holder, so a killed process never blocks the others. Callers
//! never hold the lock across a slow engine call: they update, call the engine, update again.

//!
//! The submodules: `record` (what one sandbox's record holds), `process` (processes told apart
//! by start time), `store` (the locked file and its documents) and `checks` (who must own the
//! state directory and the path to it).

use std::path::PathBuf;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::Error;

mod checks;
mod process;
mod record;
mod store;

pub(crate) use process::{proc_start_time, ProcessRef};
pub(crate) use record::{
    now_rfc3339, tighter, AgentRecord, BootstrapRun, ChannelRecord, DevcontainerRecord, Lifecycle,
    PoolTag, Record, Settings,
};
pub(crate) use store::Store;

/// Version of the state file's schema; a file with a higher version is refused.
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// The largest `state.json` read (64 MiB, some 60 000 records): the file is read whole, so a
/// bigger one (a tampered or runaway file) is refused as corrupt rather than sizing our memory.
pub(crate) const STATE_MAX_BYTES: u64 = 64 << 20;

/// The whole state file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct State {
    /// Schema version ([`SCHEMA_VERSION`]).
    pub version: u32,
    /// All records, oldest first.
    pub sandboxes: Vec<Record>,
    /// The state directory it was read from (not stored; named when a query matches nothing).
    #[serde(skip)]
    pub dir: Option<PathBuf>,
}

impl State {
    /// Finds the one record whose ID starts with `query` (hex digits, dashes optional), or whose
    /// name equals `query`. Errors: [`Error::NotFound`], [`Error::Ambiguous`].
    pub(crate) fn resolve(&self, query: &str) -> Result<&Record, Error> {
        let idx = self.resolve_index(query)?;
        Ok(&self.sandboxes[idx])
    }

    /// [`Error::NotFound`] for `query`, naming the state directory looked in.
    pub(crate) fn not_found(&self, query: &str) -> Error {
        Error::NotFound {
            query: query.to_string(),
            state_dir: self
                .dir
                .as_ref()
                .map_or_else(|| "(unknown)".into(), |d| d.display().to_string()),
        }
    }

    /// As [`State::resolve`], returning the index into `sandboxes`.
    pub(crate) fn resolve_index(&self, query: &str) -> Result<usize, Error> {
        // A full ID, then a name, then an ID prefix.
        if let Ok(id) = Uuid::parse_str(query) {
            if let Some(i) = self.sandboxes.iter().position(|r| r.id == id) {
                return Ok(i);
            }
        }
        if let Some(i) = self.sandboxes.iter().position(|r| r.name == query) {
            return Ok(i);
        }
        let q = query.to_ascii_lowercase().replace('-', "");
        if q.is_empty() || !q.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(self.not_found(query));
        }
        let hits: Vec<usize> = self
            .sandboxes
            .iter()
            .enumerate()
            .filter(|(_, r)| r.id.simple().to_string().starts_with(&q))
            .map(|(i, _)| i)
            .collect();
        match hits.len() {
            0 => Err(self.not_found(query)),
            1 => Ok(hits[0]),
            n => Err(Error::Ambiguous {
                prefix: query.to_string(),
                count: n,
                ids: hits
                    .iter()
                    .take(5)
                    .map(|&i| self.sandboxes[i].short_id())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// The record with this exact ID.
    pub(crate) fn get_mut(&mut self, id: Uuid) -> Option<&mut Record> {
        self.sandboxes.iter_mut().find(|r| r.id == id)
    }

    /// The record with this exact ID.
    pub(crate) fn get(&self, id: Uuid) -> Option<&Record> {
        self.sandboxes.iter().find(|r| r.id == id)
    }

    /// The sub-sandboxes of `id`, their sub-sandboxes and so on, grouped by depth: the children
    /// first, then the grandchildren, ... (each group in record order). A cycle (only possible in
    /// a hand-edited file) ends the walk.
    pub(crate) fn descendants(&self, id: Uuid) -> Vec<Vec<Uuid>> {
        let mut levels: Vec<Vec<Uuid>> = Vec::new();
        let mut seen = vec![id];
        let mut frontier = vec![id];
        while !frontier.is_empty() {
            let next: Vec<Uuid> = self
                .sandboxes
                .iter()
                .filter(|r| r.parent.is_some_and(|p| frontier.contains(&p)))
                .map(|r| r.id)
                .filter(|c| !seen.contains(c))
                .collect();
            seen.extend(&next);
            if !next.is_empty() {
                levels.push(next.clone());
            }
            frontier = next;
        }
        levels
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::types::{EngineKind, Isolation, Limits, Network};

    /// A Running Docker record named `name`, for unit tests.
    pub(crate) fn record(name: &str) -> Record {
        Record {
            id: Uuid::new_v4(),
            name: name.into(),
            state: Lifecycle::Running,
            engine: EngineKind::Docker,
            isolation: Isolation::Container,
            container_id: None,
            image: "img".into(),
            workdir: "/w".into(),
            limits: Limits {
                cpus: 1.0,
                memory: "512m".into(),
                pids_limit: 256,
                tmp_size: "256m".into(),
                network: Network::Bridge,
                allow: Vec::new(),
                caps: crate::types::Caps::Minimal,
            },
            labels: Default::default(),
            created_at: now_rfc3339(),
            updated_at: now_rfc3339(),
            error: None,
            creator: ProcessRef::current(),
            parent: None,
            bootstrap: None,
            user: None,
            owner: None,
            expires_at: None,
            ttl_secs: None,
            settings: None,
            stopper: None,
            agent: None,
            workdir_id: None,
            runtime: None,
            devcontainer: None,
            pool: None,
            published: Vec::new(),
            workdir_mode: Default::default(),
            daemon: None,
        }
    }

    #[test]
    fn resolve_by_prefix_name_and_ambiguity() {
        let mut s = State::default();
        let mut a = record("alpha");
        a.id = Uuid::parse_str("aaaa1111-0000-4000-8000-000000000000").unwrap();
        let mut b = record("beta");
        b.id = Uuid::parse_str("aaaa2222-0000-4000-8000-000000000000").unwrap();
        s.sandboxes = vec![a, b];
        assert_eq!(s.resolve("aaaa1").unwrap().name, "alpha");
        assert_eq!(s.resolve("AAAA2222-0").unwrap().name, "beta");
        assert_eq!(s.resolve("beta").unwrap().name, "beta");
        assert!(matches!(
            s.resolve("aaaa"),
            Err(Error::Ambiguous { count: 2, .. })
        ));
        assert!(matches!(s.resolve("ffff"), Err(Error::NotFound { .. })));
        assert!(matches!(s.resolve(""), Err(Error::NotFound { .. })));
    }

    #[test]
    fn descendants_are_grouped_by_depth() {
        let mut s = State::default();
        let root = record("root");
        let mut a = record("a");
        a.parent = Some(root.id);
        let mut b = record("b");
        b.parent = Some(root.id);
        let mut a1 = record("a1");
        a1.parent = Some(a.id);
        let other = record("other");
        s.sandboxes = vec![root.clone(), a.clone(), b.clone(), a1.clone(), other];
        assert_eq!(s.descendants(root.id), vec![vec![a.id, b.id], vec![a1.id]]);
        assert_eq!(s.descendants(a.id), vec![vec![a1.id]]);
        assert!(s.descendants(b.id).is_empty());
        // A hand-made cycle terminates.
        s.sandboxes[0].parent = Some(a1.id);
        assert_eq!(s.descendants(root.id).len(), 2);
    }
}
