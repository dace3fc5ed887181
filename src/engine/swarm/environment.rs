//! [`Swarm`]'s implementation of [`Environment`]: a sandbox as a service of one task, the
//! client's argv for each operation of the engine trait.

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, Result};

use super::*;
use crate::engine::docker::first_error_line;
use crate::engine::{
    AgentSetup, BuildSpec, Capabilities, ContainerSpec, ContainerStatus, ContainerSummary,
    ContainerVerb, EngineExec, Environment, ExecSpec, ExecStdio, ImageConfig, Secret, SidecarSpec,
    SidecarSummary, VolumeSummary, LABEL_ID, LABEL_MANAGED, LABEL_STATE_DIR,
};
use crate::error::Error;
use crate::types::EngineKind;

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
            crate::engine::daemon_host(
                self.daemon_settings().host.as_deref(),
                self.daemon_settings().context.as_deref(),
            )
            .unwrap_or_else(|| "the swarm's nodes".into()),
        )
    }

    async fn run_sidecar(&self, spec: &SidecarSpec) -> Result<String> {
        Err(Error::Refused(format!(
            "engine swarm runs no sidecar containers ({})",
            spec.name
        ))
        .into())
    }

    async fn run_helper(&self, spec: &SidecarSpec) -> Result<String> {
        Err(Error::Refused(format!(
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
        self.logs(container, lines)
            .await?
            .ok_or_else(|| anyhow!("no such service: {container}"))
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
    /// agent's `ready_timeout`); on any failure both are removed again. A task whose node's
    /// daemon failed to start its container ([`TaskEnded::worth_once_more`]: Docker 20.10's
    /// secrets remount, never the image or the command) is made once more, a fresh service
    /// with a fresh secret, and `-v` says so.
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
        let first = self.create_once(spec, agent, &args, &labels).await;
        let ended = match &first {
            Err(e) => e
                .downcast_ref::<TaskEnded>()
                .filter(|ended| ended.worth_once_more()),
            Ok(_) => None,
        };
        let Some(ended) = ended else {
            return first;
        };
        let reporter = self.docker.reporter_of();
        if reporter.verbose() {
            reporter.note(&format!(
                "{ended}: the node's daemon failed to start the task's container, not its image or command; its service and secret are removed and made once more"
            ));
        }
        reporter.step("making the sandbox's service once more");
        self.create_once(spec, agent, &args, &labels).await
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
        if self.remove_service_api(container).await?.is_some() {
            return self.remove_secrets(&secrets).await;
        }
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
        let ids: Vec<String> = match self.services_api(&[(key, value)]).await? {
            Some(services) => services
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.get("ID")?.as_str().map(str::to_string))
                .collect(),
            None => {
                let filter = format!("label={key}={value}");
                let ids = self
                    .docker
                    .checked(strings(&["service", "ls", "-q", "--filter", &filter]))
                    .await?;
                ids.lines()
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect()
            }
        };
        for id in &ids {
            self.remove(id).await?;
        }
        // A secret whose service was never made (`up` died in between).
        self.remove_secrets_labelled(key, value).await?;
        Ok(ids.len())
    }

    /// Three Engine API requests however many services (the services, their tasks, the
    /// nodes), or three client calls without the API (their IDs, their labels, their tasks).
    async fn list(&self, labels: &[(&str, &str)]) -> Result<Vec<ContainerSummary>> {
        if let Some(mut found) = self.list_api(labels).await? {
            found.retain(|c| crate::engine::docker::summary_has_labels(c, labels));
            return Ok(found);
        }
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
        found.retain(|c| crate::engine::docker::summary_has_labels(c, labels));
        Ok(found)
    }

    fn exec(
        &self,
        container: &str,
        _spec: &ExecSpec,
        _stdio: ExecStdio,
    ) -> Result<EngineExec, Error> {
        Err(Error::Sandbox(format!(
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

    /// The manager's containers ([`Docker`]'s): a swarm sandbox has no sidecar.
    async fn container_file(
        &self,
        container: &str,
        path: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>> {
        self.docker.container_file(container, path, max).await
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
                return Err(Error::Refused(format!(
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

    async fn ensure_image(&self, build: &crate::engine::image::ImageBuild) -> Result<()> {
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
