//! Creating a sandbox (`up`): record Pending, create the hardened container, wait until it
//! really runs, record Running (or remove everything and drop the record), then run the bootstrap
//! command if one is configured. With `reap_on_up`, a [`crate::sandbox::reap::sweep`] of the
//! state directory runs at the same time as the container start (its engine calls overlap it, so
//! `up` takes no longer); its failures are warnings, never `up`'s.
//!
//! With a parent, the sandbox is a sub-sandbox: it takes its parent's image, limits, network and
//! work dir; values requested explicitly may only tighten them ([`super::subsandbox`]), never
//! loosen them, and configuration defaults do not apply to it.
//!
//! The container only counts as up once it runs with its limits in force. With
//! `engine = "local"`, or when the engine is unreachable and `fallback = "local"`, the sandbox is
//! local instead (no container, no isolation), which `up` reports as a warning.
//!
//! Its parts: [`plan`] (what the sandbox will be), [`container`] (starting its container),
//! [`bootstrap_run`] (its bootstrap command).

mod bootstrap_run;
mod container;
mod plan;
#[cfg(test)]
mod tests;

use bootstrap_run::run_bootstrap;
pub(in crate::sandbox) use container::wait_running;
use container::{start, Started};
pub(in crate::sandbox) use plan::channel_connect_address;
use plan::{resolve_spec, with_tag, Plan};

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};

use super::exec::ensure_running;
use super::{interrupted, Ctx};
use crate::config::Fallback;
use crate::engine::{AnyEngine, Environment, LABEL_ID};
use crate::error::Error;
use crate::state::{Lifecycle, Record};
use crate::types::{Caps, Isolation, Network, WorkdirMode};

/// What to create: `up`'s arguments, each `None` (or empty, or false) when not given. The limits,
/// image, user and bootstrap settings reach [`create`] through the configuration
/// ([`UpRequest::config_flags`]); the rest it reads from here.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct UpRequest {
    /// Host directory bind-mounted at the same path (default: the current directory; for a
    /// sub-sandbox, its parent's work dir).
    pub workdir: Option<PathBuf>,
    /// Image to run (default: config `image`; a sub-sandbox runs its parent's).
    pub image: Option<String>,
    /// Container name (default: `h9sandbox-` and 12 hex digits of the ID).
    pub name: Option<String>,
    /// CPU limit in cores, as text (`"0.5"`).
    pub cpus: Option<String>,
    /// Memory limit, Docker notation (`"512m"`).
    pub memory: Option<String>,
    /// Maximum number of processes, as text.
    pub pids_limit: Option<String>,
    /// Network mode.
    pub network: Option<Network>,
    /// OCI runtime (`runsc` for gVisor); a sub-sandbox may only name its parent's.
    pub runtime: Option<String>,
    /// Hosts an allowlist sandbox may reach (`--allow`, replacing config `allow`; implies
    /// `network = "allowlist"` unless `network` says otherwise).
    pub allow: Vec<String>,
    /// Capability profile.
    pub caps: Option<Caps>,
    /// Extra labels, `K=V` each.
    pub labels: Vec<String>,
    /// The parent sandbox (ID, prefix or name) of a sub-sandbox.
    pub parent: Option<String>,
    /// Bootstrap command; `""` for none.
    pub bootstrap: Option<String>,
    /// Whether a failing bootstrap fails the creation and removes the sandbox.
    pub bootstrap_required: bool,
    /// Bootstrap timeout in seconds; 0 = none.
    pub bootstrap_timeout: Option<u64>,
    /// User of the sandbox's processes: `root`, `host` or `UID:GID`.
    pub user: Option<String>,
    /// Owner process: a PID, or `parent` (see [`crate::lease::parse_owner`]).
    pub owner_pid: Option<String>,
    /// Lease, e.g. `30m` (see [`crate::lease::parse_ttl`]).
    pub ttl: Option<String>,
    /// A directory the work dir must lie in (canonical; the MCP server's `--workdir`). The
    /// work dir, canonical too, is then opened through no symlink
    /// ([`crate::sandbox::workdir::MountCheck::pin`]), so no symlink swapped in later leads out
    /// of it.
    pub within: Option<PathBuf>,
    /// With `name`: a Running sandbox of that name with the same image, limits and work dir is
    /// the result, untouched ([`create`]).
    pub reuse: bool,
    /// The sandbox exists for one command and is removed right after (`run`): messages point at
    /// nothing that will be gone by then (its record).
    pub one_command: bool,
    /// The devcontainer.json to make the sandbox from (`up --devcontainer`, read by
    /// [`super::devcontainer::apply`], which also put its image and work dir in the fields above
    /// when they were not given): its user, environment, lifecycle commands and `runArgs`
    /// limits reach the sandbox in [`create`].
    pub devcontainer: Option<super::devcontainer::Devcontainer>,
    /// The image to build first (`up --build`), whose name is also in `image`.
    pub build: Option<crate::engine::BuildSpec>,
    /// Ports to publish on the host, `[[IP:]HOST_PORT:]PORT` each ([`crate::types::Publish`]).
    pub publish: Vec<String>,
    /// How the work dir reaches the container (`--workdir-mode`; default: config
    /// `workdir_mode`, else `mount` where the engine can mount this machine's directories).
    pub workdir_mode: Option<WorkdirMode>,
    /// The engine (`--engine`; default: config `engine`).
    pub engine: Option<String>,
    /// Placement constraints (`--constraint`, repeatable; engine swarm only).
    pub constraints: Vec<String>,
    /// How long a swarm may take to place the sandbox (`--placement-timeout`; default: config
    /// `placement_timeout_secs`).
    pub placement_timeout: Option<String>,
    /// The warm pool the sandbox is made for (`h9sandbox pool fill`): it is recorded as waiting
    /// in it ([`crate::state::PoolTag`]), and a copied work dir stays empty until an `up --pool`
    /// claims it and copies the directory's content in then ([`super::pool`]).
    pub pool_member: Option<String>,
}

impl UpRequest {
    /// The configuration keys the request overrides, as [`Ctx::from_layers`] takes them: (key,
    /// value, flag). The context must be built with these for [`create`] to see the values;
    /// a bad value is reported with its flag (`--cpus`, ...).
    pub(crate) fn config_flags(&self) -> Vec<(&'static str, Option<String>, &'static str)> {
        vec![
            ("image", self.image.clone(), "--image"),
            ("cpus", self.cpus.clone(), "--cpus"),
            ("memory", self.memory.clone(), "--memory"),
            ("pids_limit", self.pids_limit.clone(), "--pids-limit"),
            (
                "network",
                self.network
                    .or((!self.allow.is_empty()).then_some(Network::Allowlist))
                    .map(|n| n.to_string()),
                "--network",
            ),
            (
                "allow",
                (!self.allow.is_empty()).then(|| self.allow.join(",")),
                "--allow",
            ),
            ("runtime", self.runtime.clone(), "--runtime"),
            ("network", self.network.map(|n| n.to_string()), "--network"),
            ("caps", self.caps.map(|c| c.to_string()), "--caps"),
            ("bootstrap_cmd", self.bootstrap.clone(), "--bootstrap"),
            (
                "bootstrap_required",
                self.bootstrap_required.then(|| "true".to_string()),
                "--bootstrap-required",
            ),
            (
                "bootstrap_timeout_secs",
                self.bootstrap_timeout.map(|t| t.to_string()),
                "--bootstrap-timeout",
            ),
            ("user", self.user.clone(), "--user"),
            (
                "workdir_mode",
                self.workdir_mode.map(|m| m.to_string()),
                "--workdir-mode",
            ),
            ("engine", self.engine.clone(), "--engine"),
            (
                "placement_timeout_secs",
                self.placement_timeout.clone(),
                "--placement-timeout",
            ),
        ]
    }
}

/// Creates a sandbox as `up` does and returns its Running record. Prints nothing: warnings and
/// steps go to `ctx.reporter`, the bootstrap's output to stderr. `ctx` carries the configuration
/// with `req`'s flags applied ([`UpRequest::config_flags`]).
/// Errors: invalid arguments, the engine's failures (the sandbox is then removed, or its record
/// marked Failed), an interrupting signal, a failed required bootstrap.
pub(crate) async fn create(ctx: &Ctx, req: &UpRequest) -> Result<Record> {
    let plan = resolve_spec(ctx, req).await?;
    if req.reuse {
        if let Some(rec) = reusable(ctx, &plan).await? {
            return Ok(rec);
        }
    }
    if let Err(e) = record_pending(ctx, &plan) {
        // Another `up --reuse` of the same name got there first: that sandbox is the one.
        if req.reuse && matches!(e.downcast_ref(), Some(Error::NameInUse(_))) {
            if let Some(rec) = reusable(ctx, &plan).await? {
                return Ok(rec);
            }
        }
        return Err(e);
    }
    let (engine, started) = start(ctx, &plan).await?;
    let started = match started {
        Ok(c) => c,
        Err(e) => return Err(fail_pending(ctx, &plan, &engine, e).await),
    };
    let rec = record_running(ctx, &plan, &engine, started).await?;
    if engine.kind().isolation() == Isolation::None {
        ctx.reporter.warn(&local_warning(&rec));
    }
    // A copied work dir: its content goes in before anyone may use the sandbox's files (a pool's
    // sandbox gets it when it is claimed, as it is then).
    if rec.workdir_mode == WorkdirMode::Copy && req.pool_member.is_none() {
        let seeded = tokio::select! {
            r = super::copy::seed(ctx, &rec) => r.map(|_| ()),
            sig = interrupted() => Err(anyhow::anyhow!("interrupted by {sig}")),
        };
        if let Err(e) = seeded {
            return Err(abort(ctx, &rec, format!("{e:#}; the sandbox was removed")).await);
        }
    }
    let mut rec = run_bootstrap(ctx, rec, req.one_command).await?;
    if req.pool_member.is_some() {
        // Claimable from now on: made, started and bootstrapped.
        rec = super::pool::mark_ready(ctx, rec.id)?;
    }
    if rec.owner.is_some() && ctx.cfg.watch_owner {
        if let Err(e) = super::watch::spawn(ctx, &rec) {
            ctx.reporter.warn(&format!(
                "{e:#}; the next `h9sandbox reap` or `up` removes sandbox {} once its owner has exited",
                rec.short_id()
            ));
        }
    }
    Ok(rec)
}

/// For `up --reuse`: the sandbox of `plan`'s name when it is Running with the plan's image,
/// limits and work dir (`None` when no sandbox has the name, or only a Failed one: then a new
/// one is made). One still starting (another `up --reuse`) is waited for. Errors: the sandbox
/// differs (naming how), its work dir was replaced since (naming it), or it is stopped or
/// paused (naming what brings it back).
async fn reusable(ctx: &Ctx, plan: &Plan) -> Result<Option<Record>> {
    let name = &plan.record.name;
    let deadline = Instant::now() + Duration::from_secs(ctx.cfg.start_timeout_secs + 60);
    loop {
        let state = ctx.store.load()?;
        let Some(rec) = state.sandboxes.iter().find(|r| &r.name == name) else {
            return Ok(None);
        };
        // The same path, but another directory (deleted and made again, a fresh clone): the
        // container still sees the old one, and every command on it would fail. Refused while
        // that container exists, Running or marked Failed for it (by `ls` or a command).
        let replaced = match (rec.workdir_id, plan.record.workdir_id) {
            (Some(have), Some(want)) => have != want && rec.workdir == plan.record.workdir,
            _ => false,
        };
        if replaced && matches!(rec.state, Lifecycle::Running | Lifecycle::Failed) {
            return Err(Error::Sandbox(format!(
                "sandbox {name} exists, but its work directory {} was replaced since it was made (deleted and made again, e.g. by a fresh clone), so it no longer sees it; `h9sandbox down {name}` first to make a new one, or choose another --name",
                rec.workdir.display()
            ))
            .into());
        }
        match rec.state {
            Lifecycle::Failed => return Ok(None),
            Lifecycle::Pending if Instant::now() < deadline && rec.creator.is_alive() => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Lifecycle::Running => {}
            other => {
                let hint = match other {
                    Lifecycle::Stopped => format!("`h9sandbox start {name}` starts it again"),
                    Lifecycle::Paused => format!("`h9sandbox resume {name}` thaws it"),
                    _ => format!("`h9sandbox down {name}` removes it"),
                };
                return Err(Error::Sandbox(format!(
                    "sandbox {name} exists but is {other}; {hint}, or choose another --name"
                ))
                .into());
            }
        }
        let mut differences = differences(rec, &plan.record);
        let ports = |mut v: Vec<u16>| {
            v.sort_unstable();
            v.dedup();
            v.iter().map(u16::to_string).collect::<Vec<_>>().join(",")
        };
        let (have, want) = (
            ports(rec.published.iter().map(|p| p.port).collect()),
            ports(plan.spec.publish.iter().map(|p| p.port).collect()),
        );
        if have != want {
            let none = |s: String| if s.is_empty() { "none".to_string() } else { s };
            differences.push(format!(
                "published ports {}, not {}",
                none(have),
                none(want)
            ));
        }
        if differences.is_empty() {
            return Ok(Some(rec.clone()));
        }
        return Err(Error::Refused(format!(
            "sandbox {name} exists with {}; `h9sandbox down {name}` first to make a new one, or leave out --reuse",
            differences.join(", ")
        ))
        .into());
    }
}

/// How the existing sandbox `have` differs from the one `want` asks for (image, limits, work
/// dir, user), each as `KEY VALUE, not WANTED`.
fn differences(have: &Record, want: &Record) -> Vec<String> {
    let mut d = Vec::new();
    let mut differ = |key: &str, h: String, w: String| {
        if h != w {
            d.push(format!("{key} {h}, not {w}"));
        }
    };
    differ("image", with_tag(&have.image), with_tag(&want.image));
    differ(
        "work dir",
        have.workdir.display().to_string(),
        want.workdir.display().to_string(),
    );
    let (h, w) = (&have.limits, &want.limits);
    differ(
        "cpus",
        crate::types::format_cpus(h.cpus),
        crate::types::format_cpus(w.cpus),
    );
    differ("memory", h.memory.clone(), w.memory.clone());
    differ(
        "pids_limit",
        h.pids_limit.to_string(),
        w.pids_limit.to_string(),
    );
    differ("tmp_size", h.tmp_size.clone(), w.tmp_size.clone());
    differ("network", h.network.to_string(), w.network.to_string());
    differ("allow", h.allow.join(","), w.allow.join(","));
    differ(
        "runtime",
        have.runtime.clone().unwrap_or_else(|| "default".into()),
        want.runtime.clone().unwrap_or_else(|| "default".into()),
    );
    differ("caps", h.caps.to_string(), w.caps.to_string());
    differ(
        "user",
        have.user.map(|u| u.to_string()).unwrap_or_default(),
        want.user.map(|u| u.to_string()).unwrap_or_default(),
    );
    d
}

/// Step 3: puts the Pending record on file before the container exists, so a crash leaves a
/// trace. The parent is checked again under the lock: `down` of the parent marks it Stopping
/// first, so a child is either seen (and removed) by that `down`, or refused here.
/// Errors: [`Error::NameInUse`], a parent gone or no longer Running, the state file.
fn record_pending(ctx: &Ctx, plan: &Plan) -> Result<()> {
    let name = &plan.record.name;
    ctx.store.update(|s| {
        // A Failed record keeps its name only until a new sandbox wants it (its container is gone).
        s.sandboxes
            .retain(|r| !(r.name == *name && r.state == Lifecycle::Failed));
        if s.sandboxes.iter().any(|r| r.name == *name) {
            return Err(Error::NameInUse(name.clone()).into());
        }
        if let Some(p) = &plan.parent {
            let now = s.get(p.id).ok_or_else(|| s.not_found(&p.id.to_string()))?;
            ensure_running(now).map_err(|e| {
                Error::Sandbox(format!("cannot create a sub-sandbox: the parent {e}"))
            })?;
        }
        s.sandboxes.push(plan.record.clone());
        Ok(())
    })
}

/// Step 5 when the start failed with `e`: removes whatever was created (the container, by
/// label, since a failed `run` prints no ID; its scratch volume, proxy sidecar, run directory
/// and token) and drops the record, as if `up` never ran: a failed `up` leaves nothing but its
/// error line. Only when the container could not be removed (the engine went away meanwhile)
/// does the record stay, Failed with the reason and what is left, so that `ls` shows it and
/// `down` (or `reap`) removes it. Returns the error `up` fails with.
async fn fail_pending(
    ctx: &Ctx,
    plan: &Plan,
    engine: &AnyEngine,
    e: anyhow::Error,
) -> anyhow::Error {
    let id = plan.record.id;
    let nothing_created = matches!(
        e.downcast_ref::<Error>(),
        Some(Error::NameInUse(_) | Error::EngineUnavailable { .. })
    );
    let removed = match nothing_created {
        true => Ok(()),
        false => engine
            .remove_labelled(LABEL_ID, &id.to_string())
            .await
            .map(|_| ()),
    };
    if removed.is_ok() {
        super::release(ctx, engine, id).await;
    }
    let reason = format!("{e:#}");
    let _ = ctx.store.update(|s| {
        match &removed {
            Ok(()) => s.sandboxes.retain(|r| r.id != id),
            Err(left) => {
                if let Some(r) = s.get_mut(id) {
                    r.set_state(
                        Lifecycle::Failed,
                        Some(format!(
                            "{reason} (removing its container failed too: {left:#}; `h9sandbox down {}` retries)",
                            r.short_id()
                        )),
                    );
                }
            }
        }
        Ok(())
    });
    if let Some(Error::EngineUnavailable { bin, reason }) = e.downcast_ref::<Error>() {
        if ctx.cfg.fallback == Fallback::Fail && plan.parent.is_none() {
            return Error::EngineUnavailable {
                bin: bin.clone(),
                reason: format!(
                    "{reason}; or set fallback = \"local\" to run sandboxes without isolation meanwhile"
                ),
            }
            .into();
        }
    }
    e
}

/// Step 5 when the start succeeded: records the sandbox Running with its container, its lease
/// running from now (the moment it is usable). Errors: the state file (the container is then
/// removed).
async fn record_running(
    ctx: &Ctx,
    plan: &Plan,
    engine: &AnyEngine,
    started: Started,
) -> Result<Record> {
    let isolation = engine.kind().isolation();
    let container_id = started.container;
    let published = if plan.spec.publish.is_empty() {
        Vec::new()
    } else {
        match engine.published_ports(&container_id).await {
            // The channel's own port (copy mode) is no port the caller asked for.
            Ok(p) => p
                .into_iter()
                .filter(|b| plan.spec.publish.iter().any(|want| want.port == b.port))
                .collect(),
            Err(e) => {
                ctx.reporter.warn(&format!(
                    "cannot tell which host ports the engine bound for --publish: {e:#}"
                ));
                Vec::new()
            }
        }
    };
    let rec = ctx.store.update(|s| {
        let r = s
            .get_mut(plan.record.id)
            .context("the sandbox's record vanished from the state file while it started")?;
        r.container_id = (isolation == Isolation::Container).then(|| container_id.clone());
        r.agent = started.agent;
        r.published = published.clone();
        r.set_state(Lifecycle::Running, None);
        // The lease runs from the moment the sandbox is usable.
        r.start_lease(SystemTime::now())?;
        Ok(r.clone())
    });
    if rec.is_err() {
        let _ = engine.remove(&container_id).await;
    }
    rec
}

/// Removes a started sandbox (its container, then what it holds beside it) and drops its
/// record, as [`fail_pending`] does; returns the error `up` fails with. When the container
/// cannot be removed, the record stays Failed with `reason`, for `down` to retry.
pub(in crate::sandbox) async fn abort(ctx: &Ctx, rec: &Record, reason: String) -> anyhow::Error {
    let engine = ctx.engine_for(rec);
    let removed = engine.remove(rec.container_ref()).await;
    if removed.is_ok() {
        super::release(ctx, &engine, rec.id).await;
    }
    let _ = ctx.store.update(|s| {
        match &removed {
            Ok(()) => s.sandboxes.retain(|r| r.id != rec.id),
            Err(_) => {
                if let Some(r) = s.get_mut(rec.id) {
                    r.set_state(Lifecycle::Failed, Some(reason.clone()));
                }
            }
        }
        Ok(())
    });
    match removed {
        Ok(()) => anyhow::anyhow!(reason),
        Err(e) => anyhow::anyhow!(
            "{reason} (removing its container failed too: {e:#}; `h9sandbox down {}` retries)",
            rec.short_id()
        ),
    }
}

/// What `up` warns about a local sandbox.
pub(crate) fn local_warning(rec: &Record) -> String {
    format!(
        "sandbox {} is local (engine = \"local\", isolation: none): its commands run directly on this host as user {}, with no container, no resource limits and no network restrictions",
        rec.short_id(),
        rustix::process::geteuid().as_raw()
    )
}
