//! What the manager's client answers, read: tasks (`inspect --type task`), service listings,
//! nodes' free resources, and the errors that mean a service or secret is gone.

use std::time::Duration;

use anyhow::{Context, Result};

use crate::engine::{
    AppliedLimits, ContainerSpec, ContainerStatus, ContainerSummary, LABEL_ID, LABEL_STATE_DIR,
};

pub(super) fn is_no_such_service(stderr: &str) -> bool {
    let e = stderr.to_ascii_lowercase();
    e.contains("no such service") || e.contains("service") && e.contains("not found")
}

pub(super) fn is_no_such_secret(stderr: &str) -> bool {
    let e = stderr.to_ascii_lowercase();
    e.contains("no such secret") || e.contains("secret") && e.contains("not found")
}

/// Why a sandbox's task ended before it ran: its state (`failed`, `rejected`, ...), its
/// `Status.Err` (empty if none) and what `up` says of it (the error, else the status message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskEnded {
    pub state: String,
    pub err: String,
    pub reason: String,
    /// Whether its service and secret were removed since (a failure to remove them is never
    /// made once more over what is left).
    pub removed: bool,
}

impl std::fmt::Display for TaskEnded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the sandbox's task ended ({}) before it ran: {}",
            self.state, self.reason
        )
    }
}

impl std::error::Error for TaskEnded {}

impl TaskEnded {
    /// Whether a fresh service may get past it: the node's daemon failed to start the task's
    /// container ([`is_daemon_start_failure`]) and what the failed one left was removed.
    pub(crate) fn worth_once_more(&self) -> bool {
        self.removed && is_daemon_start_failure(&self.err)
    }
}

/// Whether a task's `Status.Err` says that its node's daemon failed to set its container up,
/// before any process of the image ran: the swarm's executor says `starting container failed:`
/// and the daemon's own reason follows (Docker 20.10's race on the secrets' tmpfs, `unable to
/// remount dir as readonly: mount tmpfs:/var/lib/docker/containers/ID/mounts/secrets, flags:
/// 0x21, data: uid=0,gid=0: device or resource busy`, moby/moby#48783). Never what the image or
/// the command caused: the OCI runtime's failures to start the process (`exec format error`,
/// `executable file not found`, a missing file, a denied one), an image the node has not (`No
/// such image`, at the task's preparation, not its start), or a command that ran and exited
/// (`task: non-zero exit (1)`).
pub(crate) fn is_daemon_start_failure(err: &str) -> bool {
    let e = err.trim().to_ascii_lowercase();
    let Some(why) = e.strip_prefix("starting container failed:") else {
        return false;
    };
    const OF_THE_IMAGE_OR_COMMAND: [&str; 8] = [
        "oci runtime",
        "starting container process",
        "exec format error",
        "executable file not found",
        "no such file or directory",
        "permission denied",
        "no such image",
        "not found",
    ];
    !why.trim().is_empty() && !OF_THE_IMAGE_OR_COMMAND.iter().any(|m| why.contains(m))
}

/// Whether a task in state `s` will never run (again).
pub(super) fn is_terminal(s: &str) -> bool {
    matches!(
        s,
        "complete" | "failed" | "shutdown" | "rejected" | "orphaned" | "remove"
    )
}

/// The one-line error of a sandbox no node took within `timeout`: what it asked for, what the
/// scheduler said (`said`), and the biggest free node (`free`, [`biggest_free`]) if known.
pub(crate) fn placement_failure(
    spec: &ContainerSpec,
    timeout: Duration,
    said: &str,
    free: Option<&str>,
) -> String {
    let mut asked = format!(
        "{} CPUs and {} of memory reserved",
        crate::types::format_cpus(spec.limits.cpus),
        spec.limits.memory
    );
    if !spec.constraints.is_empty() {
        asked.push_str(&format!(", constraints {}", spec.constraints.join(", ")));
    }
    format!(
        "no node of the swarm ran the sandbox within {}s (placement_timeout_secs, up --placement-timeout): it asked for {asked}; the scheduler says: {}{}; free resources on a node, lower --cpus or --memory, or fix the constraints",
        timeout.as_secs(),
        if said.is_empty() { "nothing" } else { said },
        free.map(|f| format!("; {f}")).unwrap_or_default()
    )
}

/// "the biggest free node, NAME (ID), has C CPUs and M MiB unreserved": the ready, active node
/// of `docker node inspect` output `nodes` with the most memory left once the reservations of
/// the tasks in `docker inspect --type task` output `tasks` (those the swarm wants running) are
/// taken off; `None` without such a node.
pub(crate) fn biggest_free(nodes: &str, tasks: &str) -> Option<String> {
    let nodes: serde_json::Value = serde_json::from_str(nodes).ok()?;
    let tasks: serde_json::Value = serde_json::from_str(tasks).ok()?;
    let n = |v: &serde_json::Value, p: &str| v.pointer(p).and_then(|v| v.as_u64()).unwrap_or(0);
    let s = |v: &serde_json::Value, p: &str| {
        v.pointer(p)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    nodes
        .as_array()?
        .iter()
        .filter(|node| {
            s(node, "/Status/State") == "ready" && s(node, "/Spec/Availability") == "active"
        })
        .map(|node| {
            let id = s(node, "/ID");
            let on: Vec<&serde_json::Value> = tasks
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| s(t, "/NodeID") == id)
                .collect();
            let used = |p: &str| on.iter().map(|t| n(t, p)).sum::<u64>();
            let cpus = n(node, "/Description/Resources/NanoCPUs")
                .saturating_sub(used("/Spec/Resources/Reservations/NanoCPUs"));
            let mem = n(node, "/Description/Resources/MemoryBytes")
                .saturating_sub(used("/Spec/Resources/Reservations/MemoryBytes"));
            (mem, cpus, s(node, "/Description/Hostname"), id)
        })
        .max()
        .map(|(mem, cpus, name, id)| {
            format!(
                "the biggest free node, {name} ({}), has {} CPUs and {} MiB unreserved",
                id.get(..12).unwrap_or(&id),
                crate::types::format_cpus(cpus as f64 / 1e9),
                mem >> 20
            )
        })
}

/// What h9sandbox reads of a task (`docker inspect --type task`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Task {
    /// `new`, `pending`, `assigned`, ..., `running`, `complete`, `failed`, `shutdown`, ...
    pub state: String,
    /// The state the swarm wants it in (`running`; `shutdown` once it gave it up).
    pub desired: String,
    /// The scheduler's or the node's error (`no suitable node (...)`).
    pub err: String,
    /// Its status message.
    pub message: String,
    /// The node it was given to, if any.
    pub node_id: String,
    /// That node's address as the manager sees it (filled once the task runs).
    pub node_addr: String,
    /// Exit code of its container, once ended.
    pub exit_code: i64,
    /// Its published ports: (target port, published port).
    pub ports: Vec<(u16, u16)>,
    /// The limits of its spec.
    pub applied: AppliedLimits,
}

/// Parses `docker inspect --type task` (a JSON array of one task).
pub(crate) fn parse_task(json: &str) -> Result<Task> {
    let v: serde_json::Value = serde_json::from_str(json)
        .with_context(|| format!("cannot parse `docker inspect --type task`: {json}"))?;
    let t = v.get(0).unwrap_or(&v);
    let s = |p: &str| {
        t.pointer(p)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    let n = |p: &str| t.pointer(p).and_then(|v| v.as_u64()).unwrap_or(0);
    let mut ports: Vec<(u16, u16)> = t
        .pointer("/Status/PortStatus/Ports")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some((
                u16::try_from(p.get("TargetPort")?.as_u64()?).ok()?,
                u16::try_from(p.get("PublishedPort")?.as_u64()?).ok()?,
            ))
        })
        .collect();
    ports.dedup();
    Ok(Task {
        state: s("/Status/State"),
        desired: s("/DesiredState"),
        err: s("/Status/Err"),
        message: s("/Status/Message"),
        node_id: s("/NodeID"),
        node_addr: String::new(),
        exit_code: t
            .pointer("/Status/ContainerStatus/ExitCode")
            .and_then(|v| v.as_i64())
            .unwrap_or(0),
        ports,
        applied: AppliedLimits {
            memory_bytes: n("/Spec/Resources/Limits/MemoryBytes"),
            nano_cpus: n("/Spec/Resources/Limits/NanoCPUs"),
            pids_limit: n("/Spec/Resources/Limits/Pids"),
        },
    })
}

/// Why a task is lost: the swarm wants it shut down while its last word was that it runs.
pub(crate) const LOST: &str = "the swarm gave it up while it ran (its node is down, or was drained); its files are gone with it";

/// The container status a task stands for: `running`, `created` while it waits for a node or
/// starts, `exited` once it ended (it is never restarted), `lost` when the swarm gave up a task
/// that ran (its node down).
pub(crate) fn task_status(task: &Task) -> ContainerStatus {
    let given_up = !task.desired.is_empty() && task.desired != "running";
    let status = match task.state.as_str() {
        "running" if given_up => "lost",
        "running" => "running",
        s if is_terminal(s) => "exited",
        _ => "created",
    };
    ContainerStatus {
        status: status.into(),
        running: status == "running",
        exit_code: task.exit_code,
        error: if status == "lost" {
            LOST.into()
        } else {
            task.err.clone()
        },
        oom_killed: false,
        applied: Some(task.applied),
        pid: 0,
        ports: task
            .ports
            .iter()
            .map(|(target, published)| (*target, task.node_addr.clone(), *published))
            .collect(),
    }
}

/// The `docker service ps` format [`parse_services`] reads: task, its name, its node, the state
/// the swarm wants it in, its state, tab-separated (a task waiting for a node has no node).
pub(crate) const PS_FORMAT: &str =
    "{{.ID}}\t{{.Name}}\t{{.Node}}\t{{.DesiredState}}\t{{.CurrentState}}";

/// Parses `docker service inspect` of several services and `docker service ps` lines
/// ([`PS_FORMAT`]) into summaries: a service's state is its task's, as [`task_status`] names
/// it, and its node the task's.
pub(crate) fn parse_services(inspect: &str, ps: &str) -> Result<Vec<ContainerSummary>> {
    let v: serde_json::Value = serde_json::from_str(inspect)
        .with_context(|| format!("cannot parse `docker service inspect`: {inspect}"))?;
    let mut found = Vec::new();
    for s in v.as_array().into_iter().flatten() {
        let name = s
            .pointer("/Spec/Name")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        let label = |k: &str| {
            s.pointer("/Spec/Labels")
                .and_then(|l| l.get(k))
                .and_then(|v| v.as_str())
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let (node, desired, state) = ps
            .lines()
            .filter_map(|l| {
                let mut f = l.split('\t');
                let (_, task, node, desired, state) =
                    (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
                let state = state.split_whitespace().next().unwrap_or("");
                (task.rsplit_once('.').map(|(svc, _)| svc) == Some(name.as_str())).then(|| {
                    (
                        node.trim().to_string(),
                        desired.trim().to_ascii_lowercase(),
                        state.to_ascii_lowercase(),
                    )
                })
            })
            .next()
            .unwrap_or_default();
        let status = task_status(&Task {
            state: state.clone(),
            desired,
            ..Task::default()
        })
        .status;
        found.push(ContainerSummary {
            id: s
                .get("ID")
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string(),
            name,
            status: match (state.as_str(), status.as_str()) {
                ("", _) => "no task".into(),
                (_, "lost") => format!("task lost: {LOST}"),
                (s, _) => format!("task {s}"),
            },
            state: status,
            sandbox_id: label(LABEL_ID),
            state_dir: label(LABEL_STATE_DIR),
            node: Some(node).filter(|n| !n.is_empty()),
        });
    }
    Ok(found)
}

/// The newest task of `GET /tasks?filters={"service":[…]}`'s answer (a JSON array of task
/// objects, as the Engine API's `TaskList` gives them), by `CreatedAt`; `None` when there is
/// none yet. A sandbox's service (restart condition none) has one task; the newest is what
/// `docker service ps` would list first.
pub(crate) fn newest_task(body: &[u8]) -> Result<Option<serde_json::Value>> {
    let v: serde_json::Value =
        serde_json::from_slice(body).context("cannot parse the manager's GET /tasks answer")?;
    let Some(tasks) = v.as_array() else {
        anyhow::bail!("the manager's GET /tasks answer is not a list of tasks");
    };
    Ok(tasks
        .iter()
        .max_by_key(|t| created_key(t.get("CreatedAt").and_then(|c| c.as_str()).unwrap_or("")))
        .cloned())
}

/// An RFC 3339 timestamp (`2026-12-04T05:51:44.1234Z`, Go's `RFC3339Nano`, which trims the
/// fraction's trailing zeros) as a key that orders as time does: the fraction padded to 9 digits.
fn created_key(at: &str) -> (String, String) {
    let (secs, rest) = at.split_once('.').unwrap_or((at.trim_end_matches('Z'), ""));
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (secs.to_string(), format!("{digits:0<9}"))
}

/// The text of a log answer of the Engine API (`GET /services/{id}/logs`): without a TTY a
/// multiplexed stream of frames (a byte naming the stream, 3 zero bytes, the payload's length
/// as a big-endian `u32`, the payload; Engine API, "Stream format"), with one the bytes
/// themselves. A frame cut short ends the text.
pub(crate) fn log_text(body: &[u8]) -> String {
    let framed = body.len() >= 8 && body[0] <= 2 && body[1..4] == [0, 0, 0];
    if !framed {
        return String::from_utf8_lossy(body).into_owned();
    }
    let (mut out, mut rest) = (Vec::new(), body);
    while rest.len() >= 8 {
        let len = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
        let end = (8 + len).min(rest.len());
        out.extend_from_slice(&rest[8..end]);
        rest = &rest[end..];
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The lines `docker service ps --format PS_FORMAT` would print for `tasks` (the Engine API's
/// `GET /tasks` answer) of `services` (`GET /services`) on `nodes` (`GET /nodes`), newest
/// task first: `TASK-ID \t SERVICE.SLOT \t NODE-HOSTNAME \t Desired \t State`, the input of
/// [`parse_services`].
pub(crate) fn ps_lines(
    services: &serde_json::Value,
    tasks: &serde_json::Value,
    nodes: &serde_json::Value,
) -> String {
    let s = |v: &serde_json::Value, p: &str| {
        v.pointer(p)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    let name_of = |id: &str, all: &serde_json::Value, p: &str| {
        all.as_array()
            .into_iter()
            .flatten()
            .find(|o| o.get("ID").and_then(|i| i.as_str()) == Some(id))
            .map(|o| s(o, p))
            .unwrap_or_default()
    };
    let mut tasks: Vec<&serde_json::Value> = tasks.as_array().into_iter().flatten().collect();
    tasks.sort_by_key(|t| std::cmp::Reverse(created_key(&s(t, "/CreatedAt"))));
    let mut out = String::new();
    for t in tasks {
        let service = name_of(&s(t, "/ServiceID"), services, "/Spec/Name");
        let slot = t.get("Slot").and_then(|v| v.as_u64()).unwrap_or(1);
        let node = name_of(&s(t, "/NodeID"), nodes, "/Description/Hostname");
        out.push_str(&format!(
            "{}\t{service}.{slot}\t{node}\t{}\t{}\n",
            s(t, "/ID"),
            s(t, "/DesiredState"),
            s(t, "/Status/State"),
        ));
    }
    out
}
