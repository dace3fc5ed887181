//! The sandbox core: what every front end does with sandboxes, as functions over a context
//! ([`Ctx`]): create ([`create`]), run commands ([`exec`], [`bootstrap`]), read and write files
//! ([`host_files`]), list ([`list`]), remove ([`down`], [`reap`]) and renew leases ([`renew`]).
//!
//! The core returns typed results and errors and prints nothing: warnings, notes, the steps of
//! slow operations and `-v` command lines go to the [`Reporter`] the front end supplies. A
//! command's own output reaches our stdout or stderr only when the caller asks for it
//! ([`exec::Sink`]). It never touches clap types or output formats; the front ends (`cli`,
//! `mcp`) sit on top of it, and it sits on the engine, the state file, the configuration and the
//! file access below.

pub(crate) mod agent;
pub(crate) mod background;
pub(crate) mod bootstrap;
pub(crate) mod build;
pub(crate) mod container_files;
pub(crate) mod copy;
pub(crate) mod create;
pub(crate) mod devcontainer;
pub(crate) mod down;
pub(crate) mod egress;
pub(crate) mod exec;
pub(crate) mod exec_agent;
pub(crate) mod forward;
pub(crate) mod host_files;
pub(crate) mod image_cache;
pub(crate) mod lifecycle;
pub(crate) mod list;
pub(crate) mod pool;
pub(crate) mod reap;
pub(crate) mod relay;
pub(crate) mod renew;
pub(crate) mod signals;
pub(crate) mod stats;
pub(crate) mod subsandbox;
pub(crate) mod terminal;
pub(crate) mod trust;
pub(crate) mod watch;
pub(crate) mod workdir;

use std::sync::Arc;

use anyhow::Result;

use crate::config::{Config, Fallback, Layers, Origin};
use crate::engine::{AnyEngine, Environment};
use crate::error::Error;
use crate::report::Reporter;
use crate::state::{Record, Settings, Store};
use crate::types::{EngineKind, Isolation};
use crate::workdir_fs::WorkDir;

/// What every operation works with: the configuration, the state store, the engine, and where
/// to report.
pub(crate) struct Ctx {
    /// Effective configuration.
    pub cfg: Config,
    /// The state file of `cfg.state_dir`.
    pub store: Store,
    /// The configured engine (config `engine`), which `up` creates sandboxes with. Operations on
    /// an existing sandbox use [`Ctx::engine_for`] its record instead.
    pub engine: AnyEngine,
    /// Where warnings, notes, steps and `-v` command lines go.
    pub reporter: Arc<dyn Reporter>,
    /// The keys of [`Settings::KEYS`] that the environment or a flag set for this command: they
    /// beat what a sandbox's record says ([`Ctx::settings_for`]).
    pub explicit: Vec<&'static str>,
}

impl Ctx {
    /// The context of `layers` with `flags` on top (key, value, flag name, e.g.
    /// `("cpus", Some("2"), "--cpus")`), reporting to `reporter`. Front ends that create several
    /// contexts from one configuration (the MCP server: one per `sandbox_up` with its own
    /// limits) load the layers once. Errors: a bad value ([`crate::error::Error::Config`]
    /// naming its origin), a state directory that cannot be created.
    pub(crate) fn from_layers(
        layers: &Layers,
        flags: &[(&str, Option<String>, &str)],
        reporter: Arc<dyn Reporter>,
    ) -> Result<Ctx> {
        let mut layers = layers.clone();
        for (key, value, flag) in flags {
            if let Some(v) = value {
                layers.set_str(key, v, Origin::Flag((*flag).to_string()))?;
            }
        }
        let mut cfg = layers.resolve()?;
        // Only where sandboxes are made does `cpus` matter enough to say so.
        if let Some(warning) = cfg.fit_to_host(&layers.origin("cpus")) {
            if !layers.for_existing() {
                reporter.warn(&warning);
            }
        }
        let store = Store::open(&cfg.state_dir()?)?;
        let engine = AnyEngine::for_kind(cfg.engine, &cfg, store.dir(), &reporter);
        let explicit = Settings::KEYS
            .iter()
            .copied()
            .filter(|k| matches!(layers.origin(k), Origin::Env(_) | Origin::Flag(_)))
            .collect();
        Ok(Ctx {
            cfg,
            store,
            engine,
            reporter,
            explicit,
        })
    }

    /// The settings of the configuration in force, as `up` records them in a new sandbox.
    pub(crate) fn configured_settings(&self) -> Settings {
        Settings {
            exec_timeout_secs: self.cfg.exec_timeout_secs,
            bootstrap_timeout_secs: self.cfg.bootstrap_timeout_secs,
            stop_timeout_secs: self.cfg.stop_timeout_secs,
            bootstrap_cmd: self.cfg.bootstrap().map(str::to_string),
            ulimit_nofile: self.cfg.ulimit_nofile,
            ulimit_nproc: self.cfg.ulimit_nproc,
        }
    }

    /// The settings that apply to a command on the existing sandbox `rec`: what `up` recorded
    /// in it, except where the environment or a flag of this command set a key; the
    /// configuration in force for a record made before settings were recorded. So a project
    /// file written since `up` (by the sandbox, say) changes nothing. For a sub-sandbox the
    /// environment and flags may only tighten the recorded timeouts (0 = none, but for
    /// `stop_timeout_secs`, where 0 is the tightest).
    pub(crate) fn settings_for(&self, rec: &Record) -> Settings {
        let now = self.configured_settings();
        let Some(recorded) = &rec.settings else {
            return now;
        };
        let pick = |key: &str| self.explicit.contains(&key);
        // A sub-sandbox's recorded bounds are its parent's (or tighter): the caller's
        // environment and flags may tighten them for one command, never loosen them.
        let bound = |key: &str, now: u64, recorded: u64| match (pick(key), rec.parent.is_some()) {
            (false, _) => recorded,
            (true, false) => now,
            (true, true) => crate::state::tighter(now, recorded),
        };
        Settings {
            exec_timeout_secs: bound(
                "exec_timeout_secs",
                now.exec_timeout_secs,
                recorded.exec_timeout_secs,
            ),
            bootstrap_timeout_secs: bound(
                "bootstrap_timeout_secs",
                now.bootstrap_timeout_secs,
                recorded.bootstrap_timeout_secs,
            ),
            // The grace before SIGKILL: 0 is the tightest (kill at once), so the smaller.
            stop_timeout_secs: match (pick("stop_timeout_secs"), rec.parent.is_some()) {
                (false, _) => recorded.stop_timeout_secs,
                (true, false) => now.stop_timeout_secs,
                (true, true) => now.stop_timeout_secs.min(recorded.stop_timeout_secs),
            },
            bootstrap_cmd: if pick("bootstrap_cmd") {
                now.bootstrap_cmd
            } else {
                recorded.bootstrap_cmd.clone()
            },
            // What the container was created with: no later command changes it.
            ulimit_nofile: recorded.ulimit_nofile,
            ulimit_nproc: recorded.ulimit_nproc,
        }
    }

    /// Whether `-v` was given (the reporter wants details).
    pub(crate) fn verbose(&self) -> bool {
        self.reporter.verbose()
    }

    /// The engine `kind`: the configured one, or another as [`AnyEngine::for_kind`] builds it.
    pub(crate) fn engine_of(&self, kind: EngineKind) -> AnyEngine {
        if kind == self.engine.kind() {
            self.engine.clone()
        } else {
            AnyEngine::for_kind(kind, &self.cfg, self.store.dir(), &self.reporter)
        }
    }

    /// The engine that runs the sandbox `rec` (the one it was created with), so that a local
    /// sandbox is never sent to a container engine, nor a container to another engine.
    pub(crate) fn engine_for(&self, rec: &Record) -> AnyEngine {
        let engine = self.engine_of(rec.engine);
        match &rec.daemon {
            Some(d) if engine.daemon().is_some_and(|now| now != d) => engine.at(d),
            _ => engine,
        }
    }

    /// Where the sandbox `rec` runs: its engine and, for Docker, its daemon (the recorded one;
    /// for a record older than that, the one in force).
    pub(crate) fn target_of(&self, rec: &Record) -> Target {
        Target {
            kind: rec.engine,
            daemon: self.engine_for(rec).daemon().cloned(),
        }
    }

    /// Where new sandboxes go: the configured engine and its daemon.
    pub(crate) fn current_target(&self) -> Target {
        Target {
            kind: self.engine.kind(),
            daemon: self.engine.daemon().cloned(),
        }
    }

    /// The engine of `target`.
    pub(crate) fn engine_at(&self, target: &Target) -> AnyEngine {
        let engine = self.engine_of(target.kind);
        match &target.daemon {
            Some(d) => engine.at(d),
            None => engine,
        }
    }

    /// Whether the configuration in force allows the local engine (no isolation): `engine =
    /// "local"`, or `fallback = "local"`.
    pub(crate) fn local_allowed(&self) -> bool {
        self.cfg.engine == EngineKind::Local || self.cfg.fallback == Fallback::Local
    }

    /// The engine to run commands of the sandbox `rec` with, as [`Ctx::engine_for`]; but a
    /// record alone never makes a command run on the host: a local record is refused unless
    /// the configuration in force allows the local engine ([`Ctx::local_allowed`]).
    /// Errors: [`Error::Refused`] for such a record.
    pub(crate) fn runner_for(&self, rec: &Record) -> Result<AnyEngine, Error> {
        let local = rec.engine.isolation() == Isolation::None || rec.isolation == Isolation::None;
        if local && !self.local_allowed() {
            return Err(Error::Refused(format!(
                "sandbox {} is recorded as local (no container: its commands would run directly on this host), but the configuration in force allows no local engine; refusing to run anything on the host for a record: if you made it local, set engine = \"local\" or fallback = \"local\" in your configuration, else remove it with `h9sandbox down {}`",
                rec.short_id(),
                rec.short_id()
            )));
        }
        if let Some(d) = &rec.daemon {
            d.validate().map_err(|m| {
                Error::Refused(format!(
                    "sandbox {}'s record names its daemon wrongly ({m}); `h9sandbox down {}` removes the record",
                    rec.short_id(),
                    rec.short_id()
                ))
            })?;
        }
        Ok(self.engine_for(rec))
    }

    /// The value of the state-directory label of this store's containers.
    pub(crate) fn state_label(&self) -> String {
        self.store.dir().to_string_lossy().into_owned()
    }
}

/// An engine and, for Docker, the daemon its client talks to: where sandboxes run, each
/// listed and judged on its own by `reap` ([`Ctx::target_of`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Target {
    /// The engine.
    pub kind: crate::types::EngineKind,
    /// Its daemon (Docker), else `None`.
    pub daemon: Option<crate::types::Daemon>,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.daemon {
            Some(d) if d.describe() != "local" => write!(f, "{} at {}", self.kind, d.describe()),
            _ => write!(f, "{}", self.kind),
        }
    }
}

/// The record of sandbox `query` (ID, prefix or name). Errors: none or several match.
pub(crate) fn resolve(ctx: &Ctx, query: &str) -> Result<Record> {
    Ok(ctx.store.load()?.resolve(query)?.clone())
}

/// The record of sandbox `query` (ID, prefix or name) and its work dir on this machine, for the
/// file operations ([`HostWorkDir`]). The container need not run for paths served on the host
/// side of the bind mount.
pub(crate) fn workdir_of(ctx: &Ctx, query: &str) -> Result<(Record, HostWorkDir)> {
    let state = ctx.store.load()?;
    let rec = state.resolve(query)?.clone();
    lifecycle::check_workdir(&rec)?;
    let wd = HostWorkDir { rec: rec.clone() };
    Ok((rec, wd))
}

/// The host side of a sandbox's work dir, opened when a file command is served there
/// ([`container_files::Place::WorkDir`]): a mounted work dir. A copied one has none: every path
/// of it is the container's ([`container_files::place`]).
#[derive(Debug, Clone)]
pub(crate) struct HostWorkDir {
    rec: Record,
}

impl HostWorkDir {
    /// The handle, acting with the sandbox user's rights (the container's commands run as that
    /// user). Errors: the directory cannot be opened, or the work dir is copied (no host side).
    pub(crate) fn open(self) -> Result<WorkDir> {
        if self.rec.workdir_mode == crate::types::WorkdirMode::Copy {
            return Err(Error::Refused(format!(
                "sandbox {} has a copied work dir: its files are the container's, not {}'s",
                self.rec.short_id(),
                self.rec.workdir.display()
            ))
            .into());
        }
        Ok(WorkDir::open(&self.rec.workdir)?.acting_as(self.rec.user))
    }

    /// Opens the host file `from` as the source of a write ([`host_files::open_source`]): beneath
    /// the work dir when it lies there and the work dir is mounted (the sandbox plants symlinks
    /// there); a copied work dir's host directory is the caller's own, opened as it is.
    pub(crate) fn open_source(self, from: &std::path::Path) -> Result<std::fs::File> {
        if self.rec.workdir_mode == crate::types::WorkdirMode::Copy {
            let file = std::fs::File::open(from).map_err(|e| {
                anyhow::anyhow!(e).context(format!("cannot open --from {}", from.display()))
            })?;
            if file.metadata().is_ok_and(|m| m.is_dir()) {
                return Err(Error::Usage(format!(
                    "--from {} is a directory; give a file",
                    from.display()
                ))
                .into());
            }
            return Ok(file);
        }
        host_files::open_source(&self.open()?, from)
    }
}

/// Catches `SIGXFSZ` while the returned handle lives. Past `RLIMIT_FSIZE` (`ulimit -f`) the
/// kernel sends it, and its default action would kill us with a temporary file left behind;
/// caught, the write fails with `EFBIG` instead and is cleaned up (see `setrlimit(2)`).
pub(crate) fn catch_file_size_signal() -> Option<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{signal, SignalKind};
    signal(SignalKind::from_raw(rustix::process::Signal::XFSZ.as_raw())).ok()
}

/// Resolves when SIGINT, SIGTERM or SIGHUP has arrived (also one that came before the call,
/// once [`signals::install`] ran); yields the signal.
pub(crate) async fn interrupted() -> crate::types::Signal {
    signals::interrupted().await
}

/// Releases what sandbox `id` holds beside its container, once the container is gone: its
/// scratch volume (on `engine`), on a swarm its channel's secret when its service went first
/// (one client call), and its agent's run directory and token. Best effort: a volume
/// still in use or already gone is left to the next `reap`.
pub(crate) async fn release(ctx: &Ctx, engine: &AnyEngine, id: uuid::Uuid) {
    if engine.kind().isolation() == crate::types::Isolation::Container {
        if let Err(e) = engine
            .remove_volume(&crate::engine::scratch_volume_name(&id))
            .await
        {
            if ctx.verbose() {
                ctx.reporter.note(&format!(
                    "could not remove the scratch volume of {}: {e:#} (`h9sandbox reap` retries)",
                    &id.simple().to_string()[..12]
                ));
            }
        }
    }
    if let Err(e) = egress::remove(ctx, engine, id).await {
        if ctx.verbose() {
            ctx.reporter.note(&format!(
                "could not remove the egress proxy of {}: {e:#} (`h9sandbox reap` retries)",
                &id.simple().to_string()[..12]
            ));
        }
    }
    // A swarm sandbox's secret, when its service went without it (removed by hand).
    if let AnyEngine::Swarm(swarm) = engine {
        if let Err(e) = swarm
            .remove_secrets_labelled(crate::engine::LABEL_ID, &id.to_string())
            .await
        {
            ctx.reporter.warn(&format!(
                "could not remove the channel's secret of {}: {e:#} (`docker secret rm h9sandbox-…-channel` on a manager removes it)",
                &id.simple().to_string()[..12]
            ));
        }
    }
    let left = agent::forget(ctx, id);
    if let Err(e) = agent::purge(ctx, engine, &left).await {
        ctx.reporter.warn(&format!(
            "could not remove the run directory of {}, which holds files its sandbox's root made: {e:#} (`h9sandbox reap` retries)",
            &id.simple().to_string()[..12]
        ));
    }
}
