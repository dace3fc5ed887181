//! Live resource use of sandboxes (`stats`, `ls --stats`): each sandbox's agent samples its
//! cgroup, network and scratch dir ([`crate::contract::proto::Stats`]); this side turns two
//! samples into rates (CPU as a percentage of the sandbox's CPU limit) and marks a sandbox near
//! its memory or process limit ([`NEAR_LIMIT`]), before the OOM killer or `fork` failures tell.
//!
//! What the agent reports is data: every figure is only shown, percentages are computed here and
//! bounded, and a limit the sandbox does not show (gVisor's own cgroups, say) is taken from its
//! record, which `up` set.

use std::time::Duration;

use anyhow::Result;
use futures_util::{SinkExt, StreamExt};
use serde::Serialize;

use super::Ctx;
use crate::contract::proto::{self, DiskUse, Reply, Request, StatsRequest};
use crate::engine::SCRATCH_DIR;
use crate::error::Error;
use crate::state::{Lifecycle, Record};
use crate::types::Isolation;

/// The share of a limit from which a sandbox is marked near it: 90%.
pub(crate) const NEAR_LIMIT: f64 = 0.9;

/// How long a sample may take (a relayed connection under gVisor takes an engine exec; a walk of
/// a large scratch dir is bounded by the agent).
const SAMPLE_PATIENCE: Duration = Duration::from_secs(15);

/// The directories whose disk use is sampled: the scratch dir, and the work dir's copy of a
/// copy-mode sandbox (a mounted work dir is this host's, `du` tells).
fn disk_dirs(rec: &Record) -> Vec<String> {
    let mut dirs = vec![SCRATCH_DIR.to_string()];
    if !rec.workdir_mode.is_mount() {
        dirs.push(rec.workdir.to_string_lossy().into_owned());
    }
    dirs
}

/// One raw sample of sandbox `rec`, from its agent. Errors: no agent can be asked (a local or
/// older sandbox, one not running), or it did not answer.
pub(crate) async fn sample(ctx: &Ctx, rec: &Record) -> Result<proto::Stats> {
    let conn = super::relay::connect(ctx, rec, "stats").await?;
    let ask = async move {
        let (mut tx, mut rx) = conn.split();
        tx.send(Request::Stats(StatsRequest {
            disk: disk_dirs(rec),
        }))
        .await?;
        match rx.next().await {
            Some(Ok(Reply::Stats(s))) => Ok(*s),
            Some(Ok(Reply::Refused(why))) => Err(std::io::Error::other(why)),
            Some(Ok(other)) => Err(std::io::Error::other(format!(
                "unexpected answer {other:?}"
            ))),
            Some(Err(e)) => Err(e),
            None => Err(std::io::Error::other("it closed the connection")),
        }
    };
    match tokio::time::timeout(SAMPLE_PATIENCE, ask).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(Error::Sandbox(format!(
            "the agent of sandbox {} gave no stats: {e}",
            rec.short_id()
        ))
        .into()),
        Err(_) => Err(Error::Sandbox(format!(
            "the agent of sandbox {} gave no stats within {}s",
            rec.short_id(),
            SAMPLE_PATIENCE.as_secs()
        ))
        .into()),
    }
}

/// A sandbox's resource use, as `stats` and `ls --stats` show it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Usage {
    /// CPU used since the previous sample, as a percentage of the sandbox's CPU limit (100: all
    /// of it); `null` in the first sample of a stream, or when the sandbox does not tell.
    pub cpu_percent: Option<f64>,
    /// The CPU limit, in cores.
    pub cpus: Option<f64>,
    /// CPU time its processes have used since it started, seconds.
    pub cpu_seconds: Option<f64>,
    /// Memory.
    pub memory: Gauge,
    /// Processes.
    pub pids: Gauge,
    /// Disk used by the scratch dir (`/var/tmp`), and by the work dir's copy (copy mode).
    pub disk: Disk,
    /// Network bytes (all interfaces but loopback; an allowlist sandbox's traffic goes through
    /// its proxy and shows in the proxy's log instead).
    pub network: Network,
    /// The limits it is at 90% or more of: `memory`, `pids`.
    pub near_limit: Vec<&'static str>,
}

/// A quantity and its limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Gauge {
    /// In use now (memory: bytes in use as `docker stats` counts them; pids: processes).
    pub used: Option<u64>,
    /// The limit.
    pub limit: Option<u64>,
    /// `used` as a percentage of `limit`.
    pub percent: Option<f64>,
    /// The most used at once (memory only: bytes, page cache included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak: Option<u64>,
}

/// Disk use.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Disk {
    /// Bytes the scratch dir's files take.
    pub scratch_bytes: Option<u64>,
    /// Whether every file was counted (false: a very large tree; the figure is a lower bound).
    pub scratch_complete: Option<bool>,
    /// Bytes the work dir's copy takes (a copy-mode sandbox only; absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workdir_bytes: Option<u64>,
    /// Whether every file of the work dir's copy was counted (with `workdir_bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workdir_complete: Option<bool>,
}

/// Network bytes since the sandbox started.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Network {
    /// Received.
    pub rx_bytes: Option<u64>,
    /// Sent.
    pub tx_bytes: Option<u64>,
}

fn percent(used: Option<u64>, limit: Option<u64>) -> Option<f64> {
    let (u, l) = (used? as f64, limit? as f64);
    (l > 0.0).then(|| (u / l * 100.0).clamp(0.0, 1000.0))
}

/// The usage of sandbox `rec` that the sample `now` shows, with its CPU rate since `before` (an
/// earlier sample of the same sandbox) when given. Limits the sample lacks come from the record.
pub(crate) fn usage(rec: &Record, now: &proto::Stats, before: Option<&proto::Stats>) -> Usage {
    let cpus = now
        .cpu_limit_milli
        .map(|m| m as f64 / 1000.0)
        .or((rec.limits.cpus > 0.0).then_some(rec.limits.cpus));
    let cpu_percent = before.and_then(|b| {
        let used = now.cpu_ns?.checked_sub(b.cpu_ns?)? as f64;
        let wall = now.at_ns.checked_sub(b.at_ns).filter(|w| *w > 0)? as f64;
        let cores = cpus.filter(|c| *c > 0.0)?;
        Some((used / wall / cores * 100.0).clamp(0.0, 1000.0))
    });
    let memory_limit = now.memory_limit.or_else(|| {
        crate::config::parse_size(&rec.limits.memory)
            .ok()
            .filter(|b| *b > 0)
    });
    let pids_limit = now
        .pids_limit
        .or((rec.limits.pids_limit > 0).then_some(u64::from(rec.limits.pids_limit)));
    let memory = Gauge {
        used: now.memory,
        limit: memory_limit,
        percent: percent(now.memory, memory_limit),
        peak: now.memory_peak,
    };
    let pids = Gauge {
        used: now.pids,
        limit: pids_limit,
        percent: percent(now.pids, pids_limit),
        peak: None,
    };
    let mut near_limit = Vec::new();
    if memory.percent.is_some_and(|p| p >= NEAR_LIMIT * 100.0) {
        near_limit.push("memory");
    }
    if pids.percent.is_some_and(|p| p >= NEAR_LIMIT * 100.0) {
        near_limit.push("pids");
    }
    let scratch: Option<&DiskUse> = now.disk.first();
    let copy: Option<&DiskUse> = now.disk.get(1).filter(|_| !rec.workdir_mode.is_mount());
    Usage {
        cpu_percent,
        cpus,
        cpu_seconds: now.cpu_ns.map(|n| n as f64 / 1e9),
        memory,
        pids,
        disk: Disk {
            scratch_bytes: scratch.map(|d| d.bytes),
            scratch_complete: scratch.map(|d| d.complete),
            workdir_bytes: copy.map(|d| d.bytes),
            workdir_complete: copy.map(|d| d.complete),
        },
        network: Network {
            rx_bytes: now.net_rx,
            tx_bytes: now.net_tx,
        },
        near_limit,
    }
}

/// One line of `stats`: a sandbox and its usage, or why it has none.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    /// The sandbox's ID.
    pub id: uuid::Uuid,
    /// Its name.
    pub name: String,
    /// Its usage; `null` with `error`.
    #[serde(flatten)]
    pub usage: Option<Usage>,
    /// Why it could not be sampled (not running, no agent that can tell), else absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Whether `rec` can be sampled at all: a Running container sandbox.
pub(crate) fn samplable(rec: &Record) -> bool {
    rec.state == Lifecycle::Running && rec.isolation == Isolation::Container
}

/// A stream of samples of `records`: each [`Sampler::next`] samples every one at once and
/// returns their rows, with CPU rates since the previous call.
pub(crate) struct Sampler {
    records: Vec<Record>,
    last: Vec<Option<proto::Stats>>,
}

impl Sampler {
    /// A sampler of `records` (in this order).
    pub(crate) fn new(records: Vec<Record>) -> Sampler {
        let n = records.len();
        Sampler {
            records,
            last: vec![None; n],
        }
    }

    /// Samples every record at once.
    pub(crate) async fn next(&mut self, ctx: &Ctx) -> Vec<Row> {
        let samples = futures_util::future::join_all(self.records.iter().map(|r| async move {
            if !samplable(r) {
                let fix = match r.state {
                    Lifecycle::Stopped => {
                        format!(" (`h9sandbox start {}` starts it again)", r.short_id())
                    }
                    Lifecycle::Paused => format!(" (`h9sandbox resume {}` thaws it)", r.short_id()),
                    _ => String::new(),
                };
                return Err(format!(
                    "sandbox {} is {}, not Running{fix}",
                    r.short_id(),
                    r.state
                ));
            }
            sample(ctx, r).await.map_err(|e| format!("{e:#}"))
        }))
        .await;
        let mut rows = Vec::with_capacity(samples.len());
        for (i, s) in samples.into_iter().enumerate() {
            let r = &self.records[i];
            let row = match s {
                Ok(now) => {
                    let u = usage(r, &now, self.last[i].as_ref());
                    self.last[i] = Some(now);
                    Row {
                        id: r.id,
                        name: r.name.clone(),
                        usage: Some(u),
                        error: None,
                    }
                }
                Err(e) => {
                    self.last[i] = None;
                    Row {
                        id: r.id,
                        name: r.name.clone(),
                        usage: None,
                        error: Some(e),
                    }
                }
            };
            rows.push(row);
        }
        rows
    }
}

/// Two samples `gap` apart (the first only for the CPU rate), as `stats --no-stream` and `ls
/// --stats` give them.
pub(crate) async fn once(ctx: &Ctx, records: Vec<Record>, gap: Duration) -> Vec<Row> {
    let mut s = Sampler::new(records);
    let first = s.next(ctx).await;
    if first.iter().all(|r| r.error.is_some()) {
        return first;
    }
    tokio::time::sleep(gap).await;
    s.next(ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        serde_json::from_value(serde_json::json!({
            "id": "6f1c2f33-8a4e-4a52-9b1a-0c2f9d2c1e11",
            "name": "s",
            "state": "Running",
            "image": "x",
            "workdir": "/w",
            "limits": {"cpus": 0.5, "memory": "512m", "pids_limit": 100, "tmp_size": "64m", "network": "none"},
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "creator": {"pid": 1, "start_time": 0}
        }))
        .unwrap()
    }

    #[test]
    fn cpu_is_a_share_of_the_limit_and_limits_mark_near() {
        let rec = record();
        let before = proto::Stats {
            at_ns: 1_000_000_000,
            cpu_ns: Some(2_000_000_000),
            ..Default::default()
        };
        // 0.25 s of CPU in 1 s, of a 0.5-core limit: 50%.
        let now = proto::Stats {
            at_ns: 2_000_000_000,
            cpu_ns: Some(2_250_000_000),
            cpu_limit_milli: Some(500),
            memory: Some(470 << 20),
            memory_limit: Some(512 << 20),
            pids: Some(12),
            ..Default::default()
        };
        let u = usage(&rec, &now, Some(&before));
        assert_eq!(u.cpu_percent, Some(50.0));
        assert_eq!(u.cpus, Some(0.5));
        assert!(u.memory.percent.unwrap() > 91.0);
        // The process limit the sample lacks is the record's.
        assert_eq!(u.pids.limit, Some(100));
        assert_eq!(u.near_limit, vec!["memory"]);
        // No earlier sample: no rate. A counter going back (a garbled sample) gives none either.
        assert_eq!(usage(&rec, &now, None).cpu_percent, None);
        let later = proto::Stats {
            cpu_ns: Some(1),
            ..now.clone()
        };
        assert_eq!(usage(&rec, &later, Some(&now)).cpu_percent, None);
        // The memory limit the sample lacks comes from the record too.
        let bare = proto::Stats {
            memory: Some(100 << 20),
            pids: Some(95),
            ..Default::default()
        };
        let u = usage(&rec, &bare, None);
        assert_eq!(u.memory.limit, Some(512 << 20));
        assert_eq!(u.near_limit, vec!["pids"]);
    }
}
