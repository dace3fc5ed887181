//! [`AnyEngine`], the engine the core holds: the configured one, or the one a record was
//! created with, delegating each operation of [`Environment`] to it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use super::*;
use crate::config::Config;
use crate::report::Reporter;
use crate::types::{Daemon, EngineKind};

/// The engine a command works with: the configured one, or the one a record was created with.
#[derive(Debug, Clone)]
pub(crate) enum AnyEngine {
    /// Docker or Podman.
    Docker(Docker),
    /// Commands on the host, no container.
    Local(Local),
    /// Services on a Docker Swarm.
    Swarm(Swarm),
}

impl AnyEngine {
    /// The daemon a Docker engine's client talks to; `None` for Podman and the local engine.
    pub(crate) fn daemon(&self) -> Option<&Daemon> {
        match self {
            AnyEngine::Docker(d) if d.flavor() == Flavor::Docker => Some(d.daemon_settings()),
            AnyEngine::Swarm(s) => Some(s.daemon_settings()),
            _ => None,
        }
    }

    /// The same engine talking to `daemon` instead (a Docker engine; others as they are).
    pub(crate) fn at(self, daemon: &Daemon) -> AnyEngine {
        match self {
            AnyEngine::Docker(d) if d.flavor() == Flavor::Docker => {
                AnyEngine::Docker(d.daemon(daemon.clone()))
            }
            AnyEngine::Swarm(s) => AnyEngine::Swarm(s.at(daemon)),
            other => other,
        }
    }

    /// The engine `kind` as `cfg` configures it, for the state directory `state_dir`, showing
    /// its command lines to `reporter` (`-v`). The configured `engine_bin` applies when `kind`
    /// is the configured engine; another container engine (the one an older record was created
    /// with) is run by its own name.
    pub(crate) fn for_kind(
        kind: EngineKind,
        cfg: &Config,
        state_dir: &Path,
        reporter: &Arc<dyn Reporter>,
    ) -> AnyEngine {
        let options = RunOptions {
            ulimit_nofile: cfg.ulimit_nofile,
            ulimit_nproc: cfg.ulimit_nproc,
        };
        let bin = |default: &str| {
            cfg.engine_bin
                .clone()
                .filter(|_| kind == cfg.engine)
                .unwrap_or_else(|| default.to_string())
        };
        match kind {
            EngineKind::Docker => AnyEngine::Docker(
                Docker::with_flavor(Flavor::Docker, bin("docker"))
                    .options(options)
                    .reporter(Arc::clone(reporter))
                    .daemon(current_daemon(cfg, |k| std::env::var(k).ok())),
            ),
            EngineKind::Podman => AnyEngine::Docker(
                Docker::with_flavor(Flavor::Podman, bin("podman"))
                    .options(options)
                    .reporter(Arc::clone(reporter)),
            ),
            EngineKind::Local => {
                AnyEngine::Local(Local::new(state_dir).reporter(Arc::clone(reporter)))
            }
            EngineKind::Swarm => AnyEngine::Swarm(Swarm::new(
                Docker::with_flavor(Flavor::Docker, bin("docker"))
                    .options(options)
                    .reporter(Arc::clone(reporter))
                    .daemon(current_daemon(cfg, |k| std::env::var(k).ok())),
                cfg.registry.clone(),
                Duration::from_secs(cfg.placement_timeout_secs),
            )),
        }
    }
}

impl AnyEngine {
    /// The same engine, creating containers with `options` (a sub-sandbox's rlimits are its
    /// parent's, not the configuration's). The local engine has no containers: unchanged.
    /// A swarm's tasks get them from their agent ([`Swarm::options`]).
    pub(crate) fn with_run_options(self, options: RunOptions) -> AnyEngine {
        match self {
            AnyEngine::Docker(d) => AnyEngine::Docker(d.options(options)),
            AnyEngine::Swarm(s) => AnyEngine::Swarm(s.options(options)),
            local => local,
        }
    }
}

macro_rules! delegate {
    ($self:ident, $e:ident => $call:expr) => {
        match $self {
            AnyEngine::Docker($e) => $call,
            AnyEngine::Local($e) => $call,
            AnyEngine::Swarm($e) => $call,
        }
    };
}

impl Environment for AnyEngine {
    fn kind(&self) -> EngineKind {
        delegate!(self, e => e.kind())
    }

    fn capabilities(&self) -> Capabilities {
        delegate!(self, e => e.capabilities())
    }

    fn remote_host(&self) -> Option<String> {
        delegate!(self, e => e.remote_host())
    }

    async fn run_sidecar(&self, spec: &SidecarSpec) -> Result<String> {
        delegate!(self, e => e.run_sidecar(spec).await)
    }

    async fn run_helper(&self, spec: &SidecarSpec) -> Result<String> {
        delegate!(self, e => e.run_helper(spec).await)
    }

    async fn list_sidecars(&self, of_label: &str, state_dir: &str) -> Result<Vec<SidecarSummary>> {
        delegate!(self, e => e.list_sidecars(of_label, state_dir).await)
    }

    async fn logs_tail(&self, container: &str, lines: usize) -> Result<String> {
        delegate!(self, e => e.logs_tail(container, lines).await)
    }

    async fn published_ports(&self, container: &str) -> Result<Vec<crate::types::PublishedPort>> {
        delegate!(self, e => e.published_ports(container).await)
    }

    async fn create(&self, spec: &ContainerSpec) -> Result<String> {
        delegate!(self, e => e.create(spec).await)
    }

    async fn pull(&self, image: &str, timeout: Duration) -> Result<()> {
        delegate!(self, e => e.pull(image, timeout).await)
    }

    async fn inspect(&self, container: &str) -> Result<Option<ContainerStatus>> {
        delegate!(self, e => e.inspect(container).await)
    }

    async fn stop(&self, container: &str, grace: Duration) -> Result<()> {
        delegate!(self, e => e.stop(container, grace).await)
    }

    async fn remove(&self, container: &str) -> Result<()> {
        delegate!(self, e => e.remove(container).await)
    }

    async fn remove_labelled(&self, key: &str, value: &str) -> Result<usize> {
        delegate!(self, e => e.remove_labelled(key, value).await)
    }

    async fn list(&self, labels: &[(&str, &str)]) -> Result<Vec<ContainerSummary>> {
        delegate!(self, e => e.list(labels).await)
    }

    fn exec(
        &self,
        container: &str,
        spec: &ExecSpec,
        stdio: ExecStdio,
    ) -> Result<EngineExec, crate::error::Error> {
        delegate!(self, e => e.exec(container, spec, stdio))
    }

    async fn kill_exec(&self, container: &str, spec: &ExecSpec) -> Result<()> {
        delegate!(self, e => e.kill_exec(container, spec).await)
    }

    async fn lifecycle(&self, verb: ContainerVerb, container: &str) -> Result<()> {
        delegate!(self, e => e.lifecycle(verb, container).await)
    }

    async fn commit(&self, container: &str, image: &str, changes: &[String]) -> Result<String> {
        delegate!(self, e => e.commit(container, image, changes).await)
    }

    async fn image_config(&self, image: &str) -> Result<ImageConfig> {
        delegate!(self, e => e.image_config(image).await)
    }

    async fn build(&self, spec: &BuildSpec, timeout: Duration) -> Result<()> {
        delegate!(self, e => e.build(spec, timeout).await)
    }

    async fn container_file(
        &self,
        container: &str,
        path: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>> {
        delegate!(self, e => e.container_file(container, path, max).await)
    }

    async fn image_file(
        &self,
        image: &str,
        path: &str,
        max: u64,
        labels: &[(&str, &str)],
    ) -> Result<Option<Vec<u8>>> {
        delegate!(self, e => e.image_file(image, path, max, labels).await)
    }

    async fn agent_image(
        &self,
        image: &str,
        binary: &Path,
        build: &str,
        hint: Option<&str>,
    ) -> Result<String> {
        delegate!(self, e => e.agent_image(image, binary, build, hint).await)
    }

    async fn start_shipped(&self, container: &str, secret: &Secret, ready: Duration) -> Result<()> {
        delegate!(self, e => e.start_shipped(container, secret, ready).await)
    }

    async fn list_volumes(&self, labels: &[(&str, &str)]) -> Result<Vec<VolumeSummary>> {
        delegate!(self, e => e.list_volumes(labels).await)
    }

    async fn remove_volume(&self, name: &str) -> Result<()> {
        delegate!(self, e => e.remove_volume(name).await)
    }

    async fn ensure_image(&self, build: &image::ImageBuild) -> Result<()> {
        delegate!(self, e => e.ensure_image(build).await)
    }
}
