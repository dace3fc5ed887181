//! The Docker Swarm implementation of [`Environment`](super::Environment) (`engine = "swarm"`): every sandbox is a
//! swarm service of one task (restart condition none) on a node the swarm's scheduler picks,
//! made and watched through the `docker` client pointed at a manager (`DOCKER_HOST`, a
//! context), with [`Docker`]'s client underneath for what is the manager's own (images).
//!
//! Nothing of this machine reaches a task: the work dir is copied in, h9sandbox's agent ships
//! in a derived image (pushed to `registry` so that every node can pull it), the channel's key
//! material is a swarm secret (a file readable by the container's root only, never an
//! environment variable or a label), and the channel's port is published in host mode on the
//! task's node, whose address the manager reports ([`Capabilities::node_ports`](super::Capabilities::node_ports)). What a
//! service cannot express is refused ([`Capabilities`](super::Capabilities), [`Swarm::create`](super::Environment::create)) or listed in
//! docs/swarm.md, never dropped silently.
//!
//! Split along its seams: this file holds [`Swarm`] and what it asks the manager; [`environment`]
//! its [`Environment`](super::Environment) implementation, [`args`] the service's argv, [`parse`] the parsers of what
//! the manager answers.

mod args;
mod environment;
mod parse;
#[cfg(test)]
mod tests;
mod via_api;

pub(crate) use args::*;
pub(crate) use parse::*;

use std::time::Duration;

use anyhow::{anyhow, Result};

use super::docker::{first_error_line, Docker, RunOptions};
use super::{ContainerSpec, Secret, ShippedAgent};
use crate::error::Error;
use crate::poll::{Backoff, Pacer};
use crate::types::Daemon;

/// Where a task finds the channel's secret ([`SECRET_TARGET`] under `/run/secrets`).
pub(crate) const SECRET_PATH: &str = "/run/secrets/h9sandbox-channel";
/// The secret's name inside a task.
pub(crate) const SECRET_TARGET: &str = "h9sandbox-channel";

/// How many times `up` tries to push the agent image to the registry before it fails.
const PUSH_ATTEMPTS: u64 = 3;

/// `Ok` for a manager that speaks Engine API `v` ([`MIN_API_VERSION`] or newer). Errors:
/// [`Error::Refused`], naming both versions.
pub(crate) fn manager_new_enough(v: (u32, u32)) -> Result<()> {
    if v >= MIN_API_VERSION {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "the swarm manager speaks Engine API {}.{}, and engine swarm needs {}.{} or newer (Docker 20.10): older managers drop a service's capabilities, ulimits and process limit without a word; upgrade the manager's Docker Engine",
        v.0, v.1, MIN_API_VERSION.0, MIN_API_VERSION.1
    ))
    .into())
}

/// The oldest Engine API a swarm manager may speak: 1.41 (Docker 20.10) brought a service's
/// `CapabilityDrop`/`CapabilityAdd`, `Ulimits` and `Resources.Limits.Pids`, which older
/// managers drop from the spec without an error (moby's `adjustForAPIVersion`).
pub(crate) const MIN_API_VERSION: (u32, u32) = (1, 41);

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
        Error::Refused(format!(
            "{what} is not available on engine swarm (a sandbox is a service whose task cannot be stopped, restarted or committed as the same container); use down and up"
        ))
        .into()
    }

    /// One try of [`Environment::create`](super::Environment::create): the secret `spec`'s
    /// service uses, labelled `labels`, the service (`args`), then its task running and its
    /// agent serving; on any failure both are removed again ([`TaskEnded::removed`] says
    /// whether they were, for a task that ended before it ran). Errors: a manager older than
    /// [`MIN_API_VERSION`] (refused before anything is made), the name taken, the manager's
    /// refusals, the task's end.
    async fn create_once(
        &self,
        spec: &ContainerSpec,
        agent: &ShippedAgent,
        args: &[String],
        labels: &[(String, String)],
    ) -> Result<String> {
        if let Some(v) = self.docker.api_version().await {
            manager_new_enough(v)?;
        }
        let secret = secret_name(&spec.name);
        let secret_id = self.create_secret(&secret, &agent.secret, labels).await?;
        let made = match &secret_id {
            Some(id) => self.create_service_api(spec, &secret, id).await,
            None => Ok(None),
        };
        let service = match made {
            Ok(Some(service)) => Ok(service),
            Ok(None) => self.create_service_cli(spec, args).await,
            Err(e) => Err(e),
        };
        let service = match service {
            Ok(service) => service,
            Err(e) => {
                // A name in use is another sandbox's service. Any other failure may have come
                // after the manager made ours (a timeout, a broken connection): it goes first,
                // or the secret it uses could not.
                if !matches!(e.downcast_ref::<Error>(), Some(Error::NameInUse(_))) {
                    let _ = super::Environment::remove(self, &spec.name).await;
                }
                let _ = self.remove_secrets(&[secret_id.unwrap_or(secret)]).await;
                return Err(e);
            }
        };
        let started = match self.wait_placed(&service, spec).await {
            Ok(()) => self.wait_serving(&service, agent.ready_timeout).await,
            Err(e) => Err(e),
        };
        if let Err(mut e) = started {
            let removed = super::Environment::remove(self, &service).await.is_ok();
            if let Some(ended) = e.downcast_mut::<TaskEnded>() {
                ended.removed = removed;
            }
            return Err(e);
        }
        Ok(service)
    }

    /// Creates the service through the client (`args`: `docker service create …`); its ID.
    /// Errors: the name taken ([`Error::NameInUse`]), the client's failure, no ID printed.
    async fn create_service_cli(&self, spec: &ContainerSpec, args: &[String]) -> Result<String> {
        let (code, out, err) = self.docker.output(args.to_vec()).await?;
        if code != 0 {
            if err.contains("already exists") {
                return Err(Error::NameInUse(spec.name.clone()).into());
            }
            return Err(anyhow!(
                "`{} service create` failed: {}",
                self.bin(),
                first_error_line(&err)
            ));
        }
        let id = out.lines().last().unwrap_or("").trim();
        if id.is_empty() {
            return Err(anyhow!(
                "`{} service create` printed no service ID",
                self.bin()
            ));
        }
        Ok(id.to_string())
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
        if let Some(found) = self.task_api(service, true).await? {
            return Ok(found);
        }
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
        if let Some(found) = self.task_api(service, false).await? {
            return Ok(found.map(|t| (t.state, t.err)));
        }
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

    /// The last `lines` lines of service `service`'s log, through the API where it answers
    /// ([`Swarm::logs_api`]), the client otherwise. `Ok(None)`: no such service.
    pub(crate) async fn logs(&self, service: &str, lines: usize) -> Result<Option<String>> {
        if let Some(found) = self.logs_api(service, lines).await? {
            return Ok(found);
        }
        let n = lines.to_string();
        self.service_query(&["logs", "--raw", "--tail", &n, service])
            .await
    }

    /// Waits until service `service`'s task runs (polled every 100 ms, one client call each),
    /// at most the placement timeout. Errors name what the sandbox asked for and what the
    /// scheduler said; a task that ended first is [`TaskEnded`].
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
                    let reason = [task.err.as_str(), task.message.as_str(), err.as_str()]
                        .into_iter()
                        .find(|m| !m.is_empty())
                        .unwrap_or("no reason given")
                        .to_string();
                    return Err(TaskEnded {
                        state: s.to_string(),
                        err: if task.err.is_empty() { err } else { task.err },
                        reason,
                        removed: false,
                    }
                    .into());
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
                return Err(Error::Refused(why).into());
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
        let mut pacer = Pacer::new(ready, Backoff::fixed(Duration::from_millis(50)));
        let mut failed = String::new();
        loop {
            // A log the manager cannot give yet (the task just starting) is no word yet; a
            // failure that lasts is told when the wait ends.
            match self.logs(service, 20).await {
                Ok(Some(out)) if out.lines().any(|l| l.starts_with("h9sandbox-agent ready")) => {
                    return Ok(())
                }
                Ok(Some(_)) => failed.clear(),
                Ok(None) => {
                    return Err(anyhow!(
                        "the sandbox's service disappeared while it started"
                    ))
                }
                Err(e) => failed = format!("; its log could not be read: {e:#}"),
            }
            if !pacer.pause().await {
                return Err(anyhow!(
                    "the sandbox's agent did not say it serves within {}s (start_timeout_secs){failed}",
                    ready.as_secs()
                ));
            }
        }
    }

    /// The names of the secrets service `service` uses; empty when it does not exist.
    async fn secrets_of(&self, service: &str) -> Result<Option<Vec<String>>> {
        if let Some(found) = self.secrets_of_api(service).await? {
            return Ok(found);
        }
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
    /// an `up` that died in between), which [`Environment::remove`](super::Environment::remove) of the service cannot find.
    pub(crate) async fn remove_secrets_labelled(&self, key: &str, value: &str) -> Result<()> {
        if let Some(ids) = self.secrets_labelled_api(key, value).await? {
            return self.remove_secrets(&ids).await;
        }
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
                let err = match self.remove_secret_api(name).await? {
                    Some(Ok(())) => break,
                    Some(Err(refused)) => refused,
                    None => {
                        let (code, _, err) =
                            self.docker.output(strings(&["secret", "rm", name])).await?;
                        if code == 0 || is_no_such_secret(&err) {
                            break;
                        }
                        err
                    }
                };
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

    /// Creates the secret `name` holding `secret`, labelled `labels`: through the Engine API
    /// where it answers (its ID returned), or the client (the secret on its standard input,
    /// never in an argument; `None`: the ID is the client's to resolve).
    async fn create_secret(
        &self,
        name: &str,
        secret: &Secret,
        labels: &[(String, String)],
    ) -> Result<Option<String>> {
        use tokio::io::AsyncWriteExt;
        if let Some(id) = self.create_secret_api(name, secret, labels).await? {
            return Ok(Some(id));
        }
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
        Ok(None)
    }
}
