//! The Docker Swarm implementation of [`Environment`] (`engine = "swarm"`): every sandbox is a
//! swarm service of one task (restart condition none) on a node the swarm's scheduler picks,
//! made and watched through the `docker` client pointed at a manager (`DOCKER_HOST`, a
//! context), with [`Docker`]'s client underneath for what is the manager's own (images).
//!
//! Nothing of this machine reaches a task: the work dir is copied in, h9sandbox's agent ships
//! in a derived image (pushed to `registry` so that every node can pull it), the channel's key
//! material is a swarm secret (a file readable by the container's root only, never an
//! environment variable or a label), and the channel's port is published in host mode on the
//! task's node, whose address the manager reports ([`Capabilities::node_ports`]). What a
//! service cannot express is refused ([`Capabilities`], [`Swarm::create`]) or listed in
//! docs/swarm.md, never dropped silently.

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};

use super::docker::{first_error_line, Docker, RunOptions};
use super::{
    AgentSetup, AppliedLimits, BuildSpec, Capabilities, ContainerSpec, ContainerStatus,
    ContainerSummary, ContainerVerb, EngineExec, Environment, ExecSpec, ExecStdio, ImageConfig,
    Secret, SidecarSpec, SidecarSummary, VolumeSummary, LABEL_ID, LABEL_MANAGED, LABEL_STATE_DIR,
    SCRATCH_DIR,
};
use crate::error::Error;
use crate::poll::{poll_until, Backoff, Pacer};
use crate::types::{Daemon, EngineKind, Network};

/// Where a task finds the channel's secret ([`SECRET_TARGET`] under `/run/secrets`).
pub(crate) const SECRET_PATH: &str = "/run/secrets/h9sandbox-channel";
/// The secret's name inside a task.
pub(crate) const SECRET_TARGET: &str = "h9sandbox-channel";

/// How many times `up` tries to push the agent image to the registry before it fails.
const PUSH_ATTEMPTS: u64 = 3;

/// A Docker Swarm, through its manager.
#[derive(Debug, Clone)]
pub(crate) struct Swarm {
    docker: Docker,
    registry: Option<String>,
    placement_timeout: Duration,
}

impl Swarm {
    /// The swarm whose manager `docker`'s client talks to, pushing derived images to
    /// `registry` (none: a one-node swarm only), waiting at most `placement_timeout` for a
    /// task to run.
    pub(crate) fn new(
        docker: Docker,
        registry: Option<String>,
        placement_timeout: Duration,
    ) -> Swarm {
        Swarm {
            docker,
            registry: registry.filter(|r| !r.trim().is_empty()),
            placement_timeout,
        }
    }

    /// The manager's daemon settings.
    pub(crate) fn daemon_settings(&self) -> &Daemon {
        self.docker.daemon_settings()
    }

    /// The same swarm through the manager `daemon`.
    pub(crate) fn at(self, daemon: &Daemon) -> Swarm {
        Swarm {
            docker: self.docker.daemon(daemon.clone()),
            ..self
        }
    }

    /// The same swarm, its tasks created with `options`: the rlimits, which a service of the
    /// nodes' Docker Engine 20.10 cannot set (`service create` has no `--ulimit` before 23.0),
    /// are set by the task's agent on its PID 1 before anything runs ([`service_create_args`]).
    pub(crate) fn options(self, options: RunOptions) -> Swarm {
        Swarm {
            docker: self.docker.options(options),
            ..self
        }
    }

    /// The client binary.
    pub(crate) fn bin(&self) -> &str {
        self.docker.bin()
    }

    fn unsupported(&self, what: &str) -> anyhow::Error {
        Error::Invalid(format!(
            "{what} is not available on engine swarm (a sandbox is a service whose task cannot be stopped, restarted or committed as the same container); use down and up"
        ))
        .into()
    }

    /// The number of nodes of the swarm. Errors: the manager's (not a manager, no swarm).
    async fn node_count(&self) -> Result<usize> {
        let out = self.docker.checked(strings(&["node", "ls", "-q"])).await?;
        Ok(out.lines().filter(|l| !l.trim().is_empty()).count())
    }

    /// What the manager's client prints for `docker service VERB ARGS…` (`args` begins with
    /// the verb); `Ok(None)` when the service it names does not exist. Errors: any other
    /// failure, with the client's first error line.
    async fn service_query(&self, args: &[&str]) -> Result<Option<String>> {
        let mut argv = vec!["service"];
        argv.extend_from_slice(args);
        let (code, out, err) = self.docker.output(strings(&argv)).await?;
        if code == 0 {
            return Ok(Some(out));
        }
        if is_no_such_service(&err) {
            return Ok(None);
        }
        Err(anyhow!(
            "`{} service {}` failed: {}",
            self.bin(),
            args.first().copied().unwrap_or_default(),
            first_error_line(&err)
        ))
    }

    /// The current task of service `service` as the manager reports it; `Ok(None)` when the
    /// service does not exist, a task of state `new` when it has none yet.
    async fn task(&self, service: &str) -> Result<Option<Task>> {
        let Some(out) = self
            .service_query(&["ps", "-q", "--no-trunc", service])
            .await?
        else {
            return Ok(None);
        };
        let Some(task) = out.lines().map(str::trim).find(|l| !l.is_empty()) else {
            return Ok(Some(Task::default()));
        };
        let json = self
            .docker
            .checked(strings(&["inspect", "--type", "task", task]))
            .await?;
        let mut task = parse_task(&json)?;
        if task.state == "running" && !task.node_id.is_empty() {
            let addr = self
                .docker
                .checked(strings(&[
                    "node",
                    "inspect",
                    "--format",
                    "{{.Status.Addr}}",
                    &task.node_id,
                ]))
                .await?;
            task.node_addr = addr.trim().to_string();
        }
        Ok(Some(task))
    }

    /// The state of service `service`'s task (lower case: `pending`, `running`, ...; empty
    /// while it has none) and the scheduler's error, in one client call; `None` when the
    /// service does not exist.
    async fn task_brief(&self, service: &str) -> Result<Option<(String, String)>> {
        let Some(out) = self
            .service_query(&[
                "ps",
                "--no-trunc",
                "--format",
                "{{.CurrentState}}\t{{.Error}}",
                service,
            ])
            .await?
        else {
            return Ok(None);
        };
        let line = out.lines().next().unwrap_or("");
        let (state, err) = line.split_once('\t').unwrap_or((line, ""));
        let state = state.split_whitespace().next().unwrap_or("");
        let err = err.trim();
        let err = err
            .strip_prefix('"')
            .and_then(|e| e.strip_suffix('"'))
            .unwrap_or(err);
        Ok(Some((state.to_ascii_lowercase(), err.to_string())))
    }

    /// Waits until service `service`'s task runs (polled every 100 ms, one client call each),
    /// at most the placement timeout. Errors name what the sandbox asked for and what the
    /// scheduler said.
    async fn wait_placed(&self, service: &str, spec: &ContainerSpec) -> Result<()> {
        let mut pacer = Pacer::new(
            self.placement_timeout,
            Backoff::fixed(Duration::from_millis(100)),
        );
        let (mut said, mut shown) = (String::new(), String::new());
        loop {
            let Some((state, err)) = self.task_brief(service).await? else {
                return Err(anyhow!(
                    "the sandbox's service disappeared while it started"
                ));
            };
            match state.as_str() {
                "running" => return Ok(()),
                s if is_terminal(s) => {
                    let task = self.task(service).await?.unwrap_or_default();
                    return Err(anyhow!(
                        "the sandbox's task ended ({s}) before it ran: {}",
                        [task.err.as_str(), task.message.as_str(), err.as_str()]
                            .into_iter()
                            .find(|m| !m.is_empty())
                            .unwrap_or("no reason given")
                    ));
                }
                state => {
                    if !err.is_empty() {
                        said = err.clone();
                    }
                    // What the swarm is at, on the spinner: placing, pulling, starting.
                    let now = match err.as_str() {
                        "" => format!("waiting for the swarm's task to run (it is {state})"),
                        err => format!("waiting for a node of the swarm: {err}"),
                    };
                    if now != shown {
                        self.docker.reporter_of().step(&now);
                        shown = now;
                    }
                }
            }
            if !pacer.pause().await {
                let free = self.biggest_free_node().await;
                let why = placement_failure(spec, self.placement_timeout, &said, free.as_deref());
                return Err(Error::Invalid(why).into());
            }
        }
    }

    /// The node with the most unreserved memory among the ready, active ones, as
    /// [`biggest_free`] describes it; `None` when it cannot be told (a client call failed).
    async fn biggest_free_node(&self) -> Option<String> {
        let nodes = self
            .docker
            .checked(strings(&["node", "ls", "-q"]))
            .await
            .ok()?;
        let nodes: Vec<String> = nodes.split_whitespace().map(str::to_string).collect();
        let mut inspect = strings(&["node", "inspect"]);
        inspect.extend(nodes.iter().cloned());
        let nodes_json = self.docker.checked(inspect).await.ok()?;
        let mut ps = strings(&[
            "node",
            "ps",
            "-q",
            "--no-trunc",
            "--filter",
            "desired-state=running",
        ]);
        ps.extend(nodes);
        let tasks = self.docker.checked(ps).await.ok()?;
        let tasks: Vec<String> = tasks.split_whitespace().map(str::to_string).collect();
        let tasks_json = if tasks.is_empty() {
            "[]".to_string()
        } else {
            let mut inspect = strings(&["inspect", "--type", "task"]);
            inspect.extend(tasks);
            self.docker.checked(inspect).await.ok()?
        };
        biggest_free(&nodes_json, &tasks_json)
    }

    /// Waits (polling its log every 50 ms, at most `ready`) until the agent of service
    /// `service`'s running task says it serves (`h9sandbox-agent ready` on its standard output,
    /// which the swarm's log of the task holds): a task runs before its PID 1 listens.
    async fn wait_serving(&self, service: &str, ready: Duration) -> Result<()> {
        let serving = poll_until(ready, Backoff::fixed(Duration::from_millis(50)), || async {
            let (code, out, _) = self
                .docker
                .output(strings(&[
                    "service", "logs", "--raw", "--tail", "20", service,
                ]))
                .await?;
            anyhow::Ok(
                (code == 0 && out.lines().any(|l| l.starts_with("h9sandbox-agent ready")))
                    .then_some(()),
            )
        })
        .await?;
        serving.ok_or_else(|| {
            anyhow!(
                "the sandbox's agent did not say it serves within {}s (start_timeout_secs)",
                ready.as_secs()
            )
        })
    }

    /// The names of the secrets service `service` uses; empty when it does not exist.
    async fn secrets_of(&self, service: &str) -> Result<Option<Vec<String>>> {
        let Some(out) = self
            .service_query(&[
                "inspect",
                "--format",
                "{{range .Spec.TaskTemplate.ContainerSpec.Secrets}}{{.SecretName}} {{end}}",
                service,
            ])
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(out.split_whitespace().map(str::to_string).collect()))
    }

    /// Removes the secrets labelled `key=value` (one client call to find them): what is left of
    /// a sandbox whose service was removed before its secret (by hand, `docker service rm`, or
    /// an `up` that died in between), which [`Environment::remove`] of the service cannot find.
    pub(crate) async fn remove_secrets_labelled(&self, key: &str, value: &str) -> Result<()> {
        let filter = format!("label={key}={value}");
        let secrets = self
            .docker
            .checked(strings(&["secret", "ls", "-q", "--filter", &filter]))
            .await?;
        let secrets: Vec<String> = secrets
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        self.remove_secrets(&secrets).await
    }

    /// Removes the secrets `names` (a missing one is success), retrying for a few seconds while
    /// the swarm still counts a service being removed as their user.
    async fn remove_secrets(&self, names: &[String]) -> Result<()> {
        for name in names {
            let mut pacer = Pacer::new(
                Duration::from_secs(10),
                Backoff::fixed(Duration::from_millis(200)),
            );
            loop {
                let (code, _, err) = self.docker.output(strings(&["secret", "rm", name])).await?;
                if code == 0 || is_no_such_secret(&err) {
                    break;
                }
                if !pacer.pause().await {
                    return Err(anyhow!(
                        "`{} secret rm {name}` failed: {}",
                        self.bin(),
                        first_error_line(&err)
                    ));
                }
            }
        }
        Ok(())
    }

    /// Creates the secret `name` holding `secret` (on the client's standard input, never in an
    /// argument), labelled `labels`.
    async fn create_secret(
        &self,
        name: &str,
        secret: &Secret,
        labels: &[(String, String)],
    ) -> Result<()> {
        use tokio::io::AsyncWriteExt;
        let mut args = strings(&["secret", "create"]);
        for (k, v) in labels {
            args.extend(["--label".into(), format!("{k}={v}")]);
        }
        args.extend([name.to_string(), "-".into()]);
        let mut child = self
            .docker
            .command(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| Error::EngineUnavailable {
                bin: self.bin().into(),
                reason: format!("cannot run the engine client: {e}; check engine_bin"),
            })?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(&secret.0).await;
            let _ = stdin.shutdown().await;
        }
        let out = child.wait_with_output().await?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            if let Some(reason) = super::docker::unreachable_reason(&err) {
                return Err(Error::EngineUnavailable {
                    bin: self.bin().into(),
                    reason,
                }
                .into());
            }
            return Err(anyhow!(
                "`{} secret create` failed: {}{}",
                self.bin(),
                first_error_line(&err),
                if err.contains("not a swarm manager") || err.contains("This node is not") {
                    " (engine swarm needs DOCKER_HOST or the context to name a swarm manager)"
                } else {
                    ""
                }
            ));
        }
        Ok(())
    }
}

/// `s` as owned strings.
fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

fn is_no_such_service(stderr: &str) -> bool {
    let e = stderr.to_ascii_lowercase();
    e.contains("no such service") || e.contains("service") && e.contains("not found")
}

fn is_no_such_secret(stderr: &str) -> bool {
    let e = stderr.to_ascii_lowercase();
    e.contains("no such secret") || e.contains("secret") && e.contains("not found")
}

/// Whether a task in state `s` will never run (again).
fn is_terminal(s: &str) -> bool {
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

/// The swarm secret of sandbox service `service`.
pub(crate) fn secret_name(service: &str) -> String {
    format!("{service}-channel")
}

/// `docker service create` arguments for `spec` (a shipped agent's: [`AgentSetup::Shipped`]),
/// detached: one task, never restarted; labelled (service and container); limits as limits
/// and equal reservations; capabilities dropped but the profile's; the channel's secret
/// `secret` as a file for root only; the channel's port published in host mode on the task's
/// node; `/tmp` a tmpfs, the scratch dir and the work dir anonymous volumes (removed with the
/// task's container); the rlimits of `options` (configuration `ulimit_nofile`,
/// `ulimit_nproc`; 0: the node daemon's) set by the agent on PID 1 (`agent init --rlimit`),
/// inherited by every process. Errors: what a service cannot express ([`Error::Invalid`]).
pub(crate) fn service_create_args(
    spec: &ContainerSpec,
    secret: &str,
    options: &RunOptions,
) -> Result<Vec<String>, Error> {
    let AgentSetup::Shipped(agent) = &spec.agent else {
        return Err(Error::Invalid(
            "engine swarm cannot mount this machine's directories; its sandboxes copy the work dir (workdir_mode = \"copy\")".into(),
        ));
    };
    if spec.limits.network != Network::Bridge {
        return Err(network_refusal(spec.limits.network));
    }
    if let Some(r) = &spec.runtime {
        return Err(Error::Invalid(format!(
            "runtime = \"{r}\": a swarm service cannot choose its OCI runtime (set it as the default runtime of the nodes' daemons instead); unset runtime"
        )));
    }
    if !spec.publish.is_empty() {
        return Err(Error::Invalid(
            "--publish is not available on engine swarm yet; `h9sandbox port-forward ID PORT` reaches a port of the sandbox through its agent".into(),
        ));
    }
    let l = &spec.limits;
    let workdir = spec.workdir.to_string_lossy();
    let mut a = strings(&["service", "create", "--detach", "--quiet"]);
    a.extend(["--name".into(), spec.name.clone()]);
    for (k, v) in &spec.labels {
        a.extend(["--label".into(), format!("{k}={v}")]);
        a.extend(["--container-label".into(), format!("{k}={v}")]);
    }
    a.extend(strings(&[
        "--restart-condition",
        "none",
        "--replicas",
        "1",
        "--user",
        "0:0",
        "--no-healthcheck",
        "--no-resolve-image",
        "--cap-drop",
        "ALL",
    ]));
    for cap in l.caps.added() {
        a.extend(["--cap-add".into(), format!("CAP_{cap}")]);
    }
    let cpus = crate::types::format_cpus(l.cpus);
    a.extend([
        "--limit-cpu".into(),
        cpus.clone(),
        "--reserve-cpu".into(),
        cpus,
        "--limit-memory".into(),
        l.memory.clone(),
        "--reserve-memory".into(),
        l.memory.clone(),
        "--limit-pids".into(),
        l.pids_limit.to_string(),
        "--mount".into(),
        format!(
            "type=tmpfs,destination=/tmp,tmpfs-size={},tmpfs-mode=1777",
            l.tmp_size
        ),
        "--mount".into(),
        format!(
            "type=tmpfs,destination=/dev/shm,tmpfs-size={},tmpfs-mode=1777",
            l.memory
        ),
        "--mount".into(),
        format!("type=volume,destination={SCRATCH_DIR}"),
        "--mount".into(),
        format!(
            "type=volume,{}",
            super::docker::csv_field(format!("destination={workdir}"))
        ),
        "--workdir".into(),
        workdir.to_string(),
        "--secret".into(),
        format!("source={secret},target={SECRET_TARGET},uid=0,gid=0,mode=0400"),
        "--publish".into(),
        format!(
            "mode=host,target={},protocol=tcp",
            crate::contract::CHANNEL_PORT
        ),
    ]);
    for c in &spec.constraints {
        a.extend(["--constraint".into(), c.clone()]);
    }
    for (k, v) in &spec.env {
        a.extend(["--env".into(), format!("{k}={v}")]);
    }
    a.extend([
        "--env".into(),
        format!("TMPDIR={SCRATCH_DIR}"),
        "--entrypoint".into(),
        crate::contract::BIN.into(),
        agent.image.clone(),
        crate::contract::ARG.into(),
        "init".into(),
        "--user".into(),
        spec.user.to_string(),
    ]);
    if let Some(n) = &spec.user_name {
        a.extend(["--user-name".into(), n.clone()]);
    }
    for (name, n) in [
        ("nofile", options.ulimit_nofile),
        ("nproc", options.ulimit_nproc),
    ] {
        if n > 0 {
            a.extend(["--rlimit".into(), format!("{name}={n}")]);
        }
    }
    a.extend([
        "--secret-file".into(),
        SECRET_PATH.into(),
        "--channel".into(),
        agent.listen.clone(),
    ]);
    Ok(a)
}

/// Why a sandbox with network `network` cannot run on a swarm.
pub(crate) fn network_refusal(network: Network) -> Error {
    Error::Invalid(format!(
        "network = \"{network}\" is not available on engine swarm: {}; use --network bridge",
        match network {
            Network::None => "a swarm service cannot run without a network, and the agent's channel is a port published on its node",
            _ => "the allowlist's proxy joins the sandbox through a directory of this machine",
        }
    ))
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

impl Environment for Swarm {
    fn kind(&self) -> EngineKind {
        EngineKind::Swarm
    }

    /// No host mounts (the tasks run on other nodes), no sidecars, no network less than a
    /// bridge, no exec of its own; published ports are on the task's node.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            host_mounts: false,
            sidecars: false,
            isolated_networks: false,
            node_ports: true,
            lifecycle: false,
            engine_exec: false,
        }
    }

    fn remote_host(&self) -> Option<String> {
        Some(
            super::daemon_host(
                self.daemon_settings().host.as_deref(),
                self.daemon_settings().context.as_deref(),
            )
            .unwrap_or_else(|| "the swarm's nodes".into()),
        )
    }

    async fn run_sidecar(&self, spec: &SidecarSpec) -> Result<String> {
        Err(Error::Invalid(format!(
            "engine swarm runs no sidecar containers ({})",
            spec.name
        ))
        .into())
    }

    async fn run_helper(&self, spec: &SidecarSpec) -> Result<String> {
        Err(Error::Invalid(format!(
            "engine swarm runs no helper containers ({})",
            spec.name
        ))
        .into())
    }

    async fn list_sidecars(
        &self,
        _of_label: &str,
        _state_dir: &str,
    ) -> Result<Vec<SidecarSummary>> {
        Ok(Vec::new())
    }

    async fn logs_tail(&self, container: &str, lines: usize) -> Result<String> {
        self.docker
            .checked(vec![
                "service".into(),
                "logs".into(),
                "--raw".into(),
                "--tail".into(),
                lines.to_string(),
                container.into(),
            ])
            .await
    }

    async fn published_ports(&self, container: &str) -> Result<Vec<crate::types::PublishedPort>> {
        let Some(task) = self.task(container).await? else {
            return Ok(Vec::new());
        };
        Ok(task
            .ports
            .iter()
            .map(|(target, published)| crate::types::PublishedPort {
                address: format!("{}:{published}", task.node_addr),
                port: *target,
            })
            .collect())
    }

    /// Creates the channel's secret and the service, then waits for its task to run on some
    /// node (at most the placement timeout) and for its agent to serve (at most the shipped
    /// agent's `ready_timeout`); on any failure both are removed again.
    async fn create(&self, spec: &ContainerSpec) -> Result<String> {
        let AgentSetup::Shipped(agent) = &spec.agent else {
            return Err(service_create_args(spec, "", self.docker.run_options())
                .unwrap_err()
                .into());
        };
        let secret = secret_name(&spec.name);
        let args = service_create_args(spec, &secret, self.docker.run_options())?;
        let labels: Vec<(String, String)> = spec
            .labels
            .iter()
            .filter(|(k, _)| [LABEL_MANAGED, LABEL_ID, LABEL_STATE_DIR].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.create_secret(&secret, &agent.secret, &labels).await?;
        let created = self.docker.output(args).await;
        let service = match created {
            Ok((0, out, _)) => out.lines().last().unwrap_or("").trim().to_string(),
            Ok((_, _, err)) => {
                let _ = self.remove_secrets(std::slice::from_ref(&secret)).await;
                if err.contains("already exists") {
                    return Err(Error::NameInUse(spec.name.clone()).into());
                }
                return Err(anyhow!(
                    "`{} service create` failed: {}",
                    self.bin(),
                    first_error_line(&err)
                ));
            }
            Err(e) => {
                let _ = self.remove_secrets(std::slice::from_ref(&secret)).await;
                return Err(e);
            }
        };
        if service.is_empty() {
            let _ = self.remove(&spec.name).await;
            return Err(anyhow!(
                "`{} service create` printed no service ID",
                self.bin()
            ));
        }
        let started = match self.wait_placed(&service, spec).await {
            Ok(()) => self.wait_serving(&service, agent.ready_timeout).await,
            Err(e) => Err(e),
        };
        if let Err(e) = started {
            let _ = self.remove(&service).await;
            return Err(e);
        }
        Ok(service)
    }

    async fn pull(&self, image: &str, timeout: Duration) -> Result<()> {
        self.docker.pull(image, timeout).await
    }

    async fn inspect(&self, container: &str) -> Result<Option<ContainerStatus>> {
        Ok(self.task(container).await?.map(|t| task_status(&t)))
    }

    /// Nothing to stop apart from removing: a task's container goes with its service.
    async fn stop(&self, _container: &str, _grace: Duration) -> Result<()> {
        Ok(())
    }

    /// Removes the service (its task's container goes with it, on its node, with its
    /// anonymous volumes) and its secrets. A missing service is success.
    async fn remove(&self, container: &str) -> Result<()> {
        let Some(secrets) = self.secrets_of(container).await? else {
            return Ok(());
        };
        let (code, _, err) = self
            .docker
            .output(strings(&["service", "rm", container]))
            .await?;
        if code != 0 && !is_no_such_service(&err) {
            return Err(anyhow!(
                "`{} service rm` failed: {}",
                self.bin(),
                first_error_line(&err)
            ));
        }
        self.remove_secrets(&secrets).await
    }

    async fn remove_labelled(&self, key: &str, value: &str) -> Result<usize> {
        let filter = format!("label={key}={value}");
        let ids = self
            .docker
            .checked(strings(&["service", "ls", "-q", "--filter", &filter]))
            .await?;
        let ids: Vec<&str> = ids.lines().filter(|l| !l.is_empty()).collect();
        for id in &ids {
            self.remove(id).await?;
        }
        // A secret whose service was never made (`up` died in between).
        self.remove_secrets_labelled(key, value).await?;
        Ok(ids.len())
    }

    /// Three client calls however many services: their IDs, their labels, their tasks.
    async fn list(&self, labels: &[(&str, &str)]) -> Result<Vec<ContainerSummary>> {
        let mut args = strings(&["service", "ls", "-q"]);
        for (k, v) in labels {
            args.extend(["--filter".into(), format!("label={k}={v}")]);
        }
        let ids = self.docker.checked(args).await?;
        let ids: Vec<String> = ids
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut inspect = strings(&["service", "inspect"]);
        inspect.extend(ids.iter().cloned());
        let inspect = self.docker.checked(inspect).await?;
        let mut ps = strings(&["service", "ps", "--no-trunc", "--format", PS_FORMAT]);
        ps.extend(ids.iter().cloned());
        let ps = self.docker.checked(ps).await?;
        let mut found = parse_services(&inspect, &ps)?;
        found.retain(|c| super::docker::summary_has_labels(c, labels));
        Ok(found)
    }

    fn exec(
        &self,
        container: &str,
        _spec: &ExecSpec,
        _stdio: ExecStdio,
    ) -> Result<EngineExec, Error> {
        Err(Error::Invalid(format!(
            "its agent's channel on its node does not answer, and engine swarm has no exec of its own to fall back on (service {container}): is its node down (`docker node ls`)? Is the channel's published port reachable from this machine?"
        )))
    }

    async fn kill_exec(&self, container: &str, _spec: &ExecSpec) -> Result<()> {
        Err(anyhow!(
            "engine swarm cannot kill a command of service {container} but through the sandbox's agent"
        ))
    }

    async fn lifecycle(&self, verb: ContainerVerb, _container: &str) -> Result<()> {
        Err(self.unsupported(verb.as_str()))
    }

    async fn commit(&self, _container: &str, _image: &str, _changes: &[String]) -> Result<String> {
        Err(self.unsupported("snapshot"))
    }

    async fn image_config(&self, image: &str) -> Result<ImageConfig> {
        self.docker.image_config(image).await
    }

    async fn build(&self, spec: &BuildSpec, timeout: Duration) -> Result<()> {
        self.docker.build(spec, timeout).await
    }

    async fn image_file(
        &self,
        image: &str,
        path: &str,
        max: u64,
        labels: &[(&str, &str)],
    ) -> Result<Option<Vec<u8>>> {
        self.docker.image_file(image, path, max, labels).await
    }

    /// The manager's derived image ([`Docker`]'s), pushed to `registry` (once: a local tag of
    /// that name says it was) so that every node can pull it. Errors: no registry on a swarm
    /// of several nodes, the push's.
    async fn agent_image(
        &self,
        image: &str,
        binary: &Path,
        build: &str,
        hint: Option<&str>,
    ) -> Result<String> {
        // A hint is the pushed name; the manager's own tag is its last part.
        let local_hint = hint.map(|h| h.rsplit('/').next().unwrap_or(h));
        let local = self
            .docker
            .agent_image(image, binary, build, local_hint)
            .await?;
        let Some(registry) = &self.registry else {
            let nodes = self.node_count().await?;
            if nodes > 1 {
                return Err(Error::Invalid(format!(
                    "the swarm has {nodes} nodes, which cannot pull the image with h9sandbox's agent from this manager; set registry = \"HOST:PORT\" (config, H9SANDBOX_REGISTRY) to a registry every node reaches (docs/swarm.md)"
                ))
                .into());
            }
            return Ok(local);
        };
        let pushed = format!("{}/{local}", registry.trim_end_matches('/'));
        // Pushed once: the client records the registry's digest of an image only once a push
        // of it finished (an `up` running beside the one pushing pushes too, and waits).
        let repo = pushed.rsplit_once(':').map_or(pushed.as_str(), |(r, _)| r);
        let (code, digests, _) = self
            .docker
            .output(strings(&[
                "image",
                "inspect",
                "--format",
                "{{range .RepoDigests}}{{.}} {{end}}",
                &pushed,
            ]))
            .await?;
        if code == 0
            && digests
                .split_whitespace()
                .any(|d| d.starts_with(&format!("{repo}@")))
        {
            return Ok(pushed);
        }
        self.docker
            .checked(strings(&["tag", &local, &pushed]))
            .await?;
        // A registry may answer 500 to two pushes of the same blob at once (Distribution's
        // registry does, for `up`s in parallel): the push is tried three times, a second and
        // two seconds apart; a push of what is there already costs one round trip.
        let mut attempt = 0;
        let (code, err) = loop {
            let (code, _, err) = self
                .docker
                .output(strings(&["push", "--quiet", &pushed]))
                .await?;
            attempt += 1;
            if code == 0 || attempt == PUSH_ATTEMPTS {
                break (code, err);
            }
            tokio::time::sleep(std::time::Duration::from_secs(attempt)).await;
        };
        if code != 0 {
            let _ = self.docker.output(strings(&["rmi", &pushed])).await;
            return Err(anyhow!(
                "cannot push the image with h9sandbox's agent to {registry}: {}; check registry (config, H9SANDBOX_REGISTRY)",
                first_error_line(&err)
            ));
        }
        Ok(pushed)
    }

    async fn ensure_image(&self, build: &super::image::ImageBuild) -> Result<()> {
        self.docker.ensure_image(build).await
    }

    async fn start_shipped(
        &self,
        _container: &str,
        _secret: &Secret,
        _ready: Duration,
    ) -> Result<()> {
        Err(self.unsupported("start"))
    }

    /// No named volumes: a task's volumes are anonymous, removed with its container.
    async fn list_volumes(&self, _labels: &[(&str, &str)]) -> Result<Vec<VolumeSummary>> {
        Ok(Vec::new())
    }

    async fn remove_volume(&self, _name: &str) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{AgentMount, ShippedAgent};
    use crate::types::{Ids, Limits};
    use std::collections::BTreeMap;

    fn spec() -> ContainerSpec {
        ContainerSpec {
            name: "h9sandbox-abc".into(),
            image: "debian:bookworm".into(),
            workdir: "/w, odd".into(),
            limits: Limits {
                cpus: 0.5,
                memory: "256m".into(),
                pids_limit: 40,
                tmp_size: "64m".into(),
                network: Network::Bridge,
                allow: Vec::new(),
                caps: crate::types::Caps::Minimal,
            },
            labels: BTreeMap::from([
                (LABEL_MANAGED.into(), "1".into()),
                (LABEL_ID.into(), "abc".into()),
            ]),
            user: Ids {
                uid: 1000,
                gid: 1000,
            },
            agent: AgentSetup::Shipped(ShippedAgent {
                image: "reg:5000/h9sandbox-agent:1-2".into(),
                secret: Secret(b"never in argv".to_vec()),
                listen: "0.0.0.0:7336".into(),
                publish: Some("0.0.0.0".into()),
                ready_timeout: Duration::from_secs(5),
            }),
            user_name: Some("me".into()),
            scratch_volume: "h9sandbox-abc".into(),
            runtime: None,
            proxy: None,
            env: vec![("A".into(), "b".into())],
            publish: Vec::new(),
            constraints: vec!["node.labels.gpu==true".into()],
        }
    }

    /// The values following each occurrence of `flag` in `a`.
    fn values<'a>(a: &'a [String], flag: &str) -> Vec<&'a str> {
        a.windows(2)
            .filter(|w| w[0] == flag)
            .map(|w| w[1].as_str())
            .collect()
    }

    #[test]
    fn a_service_is_one_hardened_task_with_limits_reserved_and_its_secret_as_a_file() {
        let a =
            service_create_args(&spec(), "h9sandbox-abc-channel", &RunOptions::default()).unwrap();
        assert_eq!(a[..4], ["service", "create", "--detach", "--quiet"]);
        assert_eq!(values(&a, "--restart-condition"), ["none"]);
        assert_eq!(values(&a, "--replicas"), ["1"]);
        assert_eq!(values(&a, "--user"), ["0:0", "1000:1000"]);
        assert_eq!(values(&a, "--cap-drop"), ["ALL"]);
        assert_eq!(
            values(&a, "--cap-add"),
            ["CAP_DAC_OVERRIDE", "CAP_SETUID", "CAP_SETGID"]
        );
        // Limits, and reservations equal to them: nodes are never oversubscribed.
        assert_eq!(values(&a, "--limit-cpu"), ["0.5"]);
        assert_eq!(values(&a, "--reserve-cpu"), ["0.5"]);
        assert_eq!(values(&a, "--limit-memory"), ["256m"]);
        assert_eq!(values(&a, "--reserve-memory"), ["256m"]);
        assert_eq!(values(&a, "--limit-pids"), ["40"]);
        // Labels on the service and on its task's container.
        assert_eq!(values(&a, "--label"), ["h9sandbox=1", "h9sandbox.id=abc"]);
        assert_eq!(
            values(&a, "--container-label"),
            ["h9sandbox=1", "h9sandbox.id=abc"]
        );
        assert_eq!(
            values(&a, "--secret"),
            ["source=h9sandbox-abc-channel,target=h9sandbox-channel,uid=0,gid=0,mode=0400"]
        );
        assert_eq!(
            values(&a, "--publish"),
            ["mode=host,target=7336,protocol=tcp"]
        );
        assert_eq!(values(&a, "--constraint"), ["node.labels.gpu==true"]);
        assert_eq!(
            values(&a, "--mount"),
            [
                "type=tmpfs,destination=/tmp,tmpfs-size=64m,tmpfs-mode=1777",
                "type=tmpfs,destination=/dev/shm,tmpfs-size=256m,tmpfs-mode=1777",
                "type=volume,destination=/var/tmp",
                "type=volume,\"destination=/w, odd\"",
            ]
        );
        assert_eq!(values(&a, "--env"), ["A=b", "TMPDIR=/var/tmp"]);
        let image = a
            .iter()
            .position(|w| w == "reg:5000/h9sandbox-agent:1-2")
            .unwrap();
        assert_eq!(
            a[image + 1..],
            [
                "agent",
                "init",
                "--user",
                "1000:1000",
                "--user-name",
                "me",
                "--secret-file",
                SECRET_PATH,
                "--channel",
                "0.0.0.0:7336"
            ]
        );
        assert!(!a.iter().any(|w| w.contains("never in argv")));
    }

    #[test]
    fn the_rlimits_a_service_cannot_set_are_set_by_its_agent() {
        let options = RunOptions {
            ulimit_nofile: 1000,
            ulimit_nproc: 0,
        };
        let a = service_create_args(&spec(), "x", &options).unwrap();
        assert_eq!(values(&a, "--rlimit"), ["nofile=1000"]);
        assert!(!a.iter().any(|w| w == "--ulimit"));
        let options = RunOptions {
            ulimit_nofile: 0,
            ulimit_nproc: 50,
        };
        let a = service_create_args(&spec(), "x", &options).unwrap();
        assert_eq!(values(&a, "--rlimit"), ["nproc=50"]);
    }

    #[test]
    fn what_a_service_cannot_express_is_refused() {
        let refused = |s: ContainerSpec| {
            service_create_args(&s, "x", &RunOptions::default())
                .unwrap_err()
                .to_string()
        };
        let mut s = spec();
        s.limits.network = Network::None;
        assert!(refused(s).contains("network = \"none\""));
        let mut s = spec();
        s.runtime = Some("runsc".into());
        assert!(refused(s).contains("runtime"));
        let mut s = spec();
        s.publish = vec![crate::types::Publish::parse("8000").unwrap()];
        assert!(refused(s).contains("--publish"));
        let mut s = spec();
        s.agent = AgentSetup::Mounted(AgentMount {
            root: "/r".into(),
            binary: "/b".into(),
            run_dir: "/d".into(),
        });
        assert!(refused(s).contains("copy"));
    }

    #[test]
    fn a_task_is_read_with_its_node_ports_and_limits() {
        let json = r#"[{"ID":"t1","NodeID":"n1","Spec":{"Resources":{"Limits":{"NanoCPUs":500000000,"MemoryBytes":268435456,"Pids":40}}},
          "Status":{"State":"running","Message":"started","ContainerStatus":{"ExitCode":0},
          "PortStatus":{"Ports":[{"Protocol":"tcp","TargetPort":7336,"PublishedPort":30001,"PublishMode":"host"},
                                 {"Protocol":"tcp","TargetPort":7336,"PublishedPort":30001,"PublishMode":"host"}]}}}]"#;
        let mut t = parse_task(json).unwrap();
        assert_eq!((t.state.as_str(), t.node_id.as_str()), ("running", "n1"));
        assert_eq!(t.ports, [(7336, 30001)]);
        t.node_addr = "10.0.0.7".into();
        let s = task_status(&t);
        assert!(s.running);
        assert_eq!(s.ports, [(7336, "10.0.0.7".to_string(), 30001)]);
        assert_eq!(
            s.applied.unwrap(),
            AppliedLimits {
                memory_bytes: 256 << 20,
                nano_cpus: 500_000_000,
                pids_limit: 40
            }
        );
        let pending = parse_task(
            r#"[{"Status":{"State":"pending","Err":"no suitable node (insufficient resources on 2 nodes)"}}]"#,
        )
        .unwrap();
        assert_eq!(task_status(&pending).status, "created");
        let failed =
            parse_task(r#"[{"Status":{"State":"failed","ContainerStatus":{"ExitCode":137}}}]"#)
                .unwrap();
        assert_eq!(
            (
                task_status(&failed).status.as_str(),
                task_status(&failed).exit_code
            ),
            ("exited", 137)
        );
    }

    #[test]
    fn services_are_summarised_with_their_tasks_state() {
        let inspect = r#"[{"ID":"s1","Spec":{"Name":"h9sandbox-a","Labels":{"h9sandbox":"1","h9sandbox.id":"a","h9sandbox.state_dir":"/st"}}},
                          {"ID":"s2","Spec":{"Name":"h9sandbox-b","Labels":{"h9sandbox":"1","h9sandbox.id":"b","h9sandbox.state_dir":"/st"}}}]"#;
        let ps = "t1\th9sandbox-a.1\tnode-7\tRunning\tRunning 5 seconds ago\nt2\th9sandbox-b.1\t\tShutdown\tFailed 1 second ago\n";
        let s = parse_services(inspect, ps).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (
                s[0].id.as_str(),
                s[0].state.as_str(),
                s[0].sandbox_id.as_deref()
            ),
            ("s1", "running", Some("a"))
        );
        assert_eq!(
            (s[1].state.as_str(), s[1].state_dir.as_deref()),
            ("exited", Some("/st"))
        );
        assert_eq!(
            (s[0].node.as_deref(), s[1].node.as_deref()),
            (Some("node-7"), None)
        );
        // A task the swarm gave up while it ran (its node went down) is lost, not running.
        let ps = "t1\th9sandbox-a.1\tnode-7\tShutdown\tRunning 5 minutes ago\n";
        let s = parse_services(inspect, ps).unwrap();
        assert_eq!(s[0].state, "lost");
        assert!(s[0].status.starts_with("task lost:"), "{}", s[0].status);
    }

    #[test]
    fn the_biggest_free_node_is_the_one_with_most_memory_unreserved() {
        let nodes = r#"[
          {"ID":"aaaaaaaaaaaaaaaa","Description":{"Hostname":"a","Resources":{"NanoCPUs":4000000000,"MemoryBytes":8589934592}},"Status":{"State":"ready"},"Spec":{"Availability":"active"}},
          {"ID":"bbbbbbbbbbbbbbbb","Description":{"Hostname":"b","Resources":{"NanoCPUs":2000000000,"MemoryBytes":4294967296}},"Status":{"State":"ready"},"Spec":{"Availability":"active"}},
          {"ID":"cccccccccccccccc","Description":{"Hostname":"c","Resources":{"NanoCPUs":64000000000,"MemoryBytes":68719476736}},"Status":{"State":"down"},"Spec":{"Availability":"active"}}]"#;
        let tasks = r#"[
          {"NodeID":"aaaaaaaaaaaaaaaa","Spec":{"Resources":{"Reservations":{"NanoCPUs":3000000000,"MemoryBytes":6442450944}}}},
          {"NodeID":"bbbbbbbbbbbbbbbb","Spec":{"Resources":{"Reservations":{"NanoCPUs":500000000,"MemoryBytes":1073741824}}}}]"#;
        assert_eq!(
            biggest_free(nodes, tasks).as_deref(),
            Some("the biggest free node, b (bbbbbbbbbbbb), has 1.5 CPUs and 3072 MiB unreserved")
        );
        assert_eq!(biggest_free("[]", "[]"), None);
    }

    #[test]
    fn a_placement_failure_names_what_was_asked_for() {
        let msg = placement_failure(
            &spec(),
            Duration::from_secs(5),
            "no suitable node (scheduling constraints not satisfied on 2 nodes)",
            Some("the biggest free node, b (bbbbbbbbbbbb), has 1 CPUs and 512 MiB unreserved"),
        );
        assert!(
            msg.contains("on 2 nodes); the biggest free node, b (bbbbbbbbbbbb), has 1 CPUs and 512 MiB unreserved; free resources"),
            "{msg}"
        );
        assert!(
            msg.starts_with("no node of the swarm ran the sandbox within 5s"),
            "{msg}"
        );
        assert!(
            msg.contains("0.5 CPUs and 256m of memory reserved, constraints node.labels.gpu==true"),
            "{msg}"
        );
        assert!(
            msg.contains("scheduling constraints not satisfied"),
            "{msg}"
        );
        assert!(!msg.contains('\n'));
    }
}
