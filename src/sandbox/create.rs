//! Creating a sandbox (`up`): record Pending, create the hardened container, wait until it
//! really runs, record Running (or remove everything and drop the record), then run the bootstrap
//! command if one is configured. With `reap_on_up`, a [`reap::sweep`] of the state directory
//! runs at the same time as the container start (its engine calls overlap it, so `up` takes no
//! longer); its failures are warnings, never `up`'s.
//!
//! With a parent, the sandbox is a sub-sandbox: it takes its parent's image, limits, network and
//! work dir; values requested explicitly may only tighten them ([`super::subsandbox`]), never
//! loosen them, and configuration defaults do not apply to it.
//!
//! The container only counts as up once it runs with its limits in force. With
//! `engine = "local"`, or when the engine is unreachable and `fallback = "local"`, the sandbox is
//! local instead (no container, no isolation), which `up` reports as a warning.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use uuid::Uuid;

use super::exec::{ensure_running, Sink};
use super::reap::{self, Sweep};
use super::subsandbox::{child_limits, child_workdir, Tighten};
use super::workdir::{resolve_workdir, unwritable_for, MountCheck, WorkdirRule};
use super::{bootstrap, interrupted, Ctx};
use crate::config::{Config, Fallback};
use crate::engine::{
    scratch_volume_name, AgentMount, AgentSetup, AnyEngine, ContainerSpec, ContainerStatus,
    Environment, Secret, ShippedAgent, LABEL_ID, LABEL_MANAGED, LABEL_PARENT, LABEL_STATE_DIR,
};
use crate::error::Error;
use crate::lease::{parse_owner, parse_ttl};
use crate::poll::{poll_until, Backoff};
use crate::state::{now_rfc3339, AgentRecord, BootstrapRun, Lifecycle, ProcessRef, Record};
use crate::types::{Caps, EngineKind, Ids, Isolation, Limits, Network, WorkdirMode};

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
    /// Owner process: a PID, or `parent` (see [`parse_owner`]).
    pub owner_pid: Option<String>,
    /// Lease, e.g. `30m` (see [`parse_ttl`]).
    pub ttl: Option<String>,
    /// A directory the work dir must lie in (canonical; the MCP server's `--workdir`). The
    /// work dir, canonical too, is then opened through no symlink ([`MountCheck::pin`]), so no
    /// symlink swapped in later leads out of it.
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
    // A copied work dir: its content goes in before anyone may use the sandbox's files.
    if rec.workdir_mode == WorkdirMode::Copy {
        let seeded = tokio::select! {
            r = super::copy::seed(ctx, &rec) => r.map(|_| ()),
            sig = interrupted() => Err(anyhow::anyhow!("interrupted by {sig}")),
        };
        if let Err(e) = seeded {
            return Err(abort(ctx, &rec, format!("{e:#}; the sandbox was removed")).await);
        }
    }
    let rec = run_bootstrap(ctx, rec, req.one_command).await?;
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
            return Err(Error::Invalid(format!(
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
                return Err(Error::Invalid(format!(
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
        return Err(Error::Invalid(format!(
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

/// Everything `up` decided before it records or creates anything.
struct Plan {
    /// The sandbox's record, Pending, with its lease started.
    record: Record,
    /// The container to create.
    spec: ContainerSpec,
    /// The engine to create it with (a sub-sandbox's is its parent's).
    engine: AnyEngine,
    /// The checked work dir, which the container's mount must be.
    mount: MountCheck,
    /// The parent's record, for a sub-sandbox.
    parent: Option<Record>,
}

/// Step 1: what to create. Parses the owner and the lease, checks the parent, settles image,
/// limits and work dir (the parent's, tightened; or the configured ones), checks the work dir
/// ([`check_workdir`]), the user, the labels and the name. Changes nothing but the warning about
/// a work dir the sandbox's user cannot write to.
async fn resolve_spec(ctx: &Ctx, req: &UpRequest) -> Result<Plan> {
    let owner = req.owner_pid.as_deref().map(parse_owner).transpose()?;
    let ttl_secs = req.ttl.as_deref().map(parse_ttl).transpose()?;
    let parent = resolve_parent(ctx, req).await?;
    let (image, mut limits, workdir) = match &parent {
        Some(p) => inherit_from(ctx, req, p)?,
        None => (
            ctx.cfg.image.clone(),
            configured_limits(&ctx.cfg),
            resolve_workdir(req.workdir.as_deref())?,
        ),
    };
    let mount = check_workdir(ctx, req, &workdir)?;
    // A devcontainer.json's runArgs may only tighten the limits.
    if let Some(dc) = &req.devcontainer {
        super::devcontainer::tighten(dc, &mut limits)?;
    }
    // Every setting that bounds the sandbox is recorded; a sub-sandbox's are its parent's,
    // tightened by its own flags only (the configuration and environment in force now do not
    // apply to it).
    let mut settings = match &parent {
        Some(p) => p
            .settings
            .clone()
            .unwrap_or_else(|| ctx.configured_settings())
            .for_child(
                req.bootstrap_timeout,
                ctx.configured_settings().bootstrap_cmd,
            )?,
        None => ctx.configured_settings(),
    };
    // A sub-sandbox runs on its parent's engine, with its parent's rlimits.
    let engine = match &parent {
        Some(p) => ctx
            .runner_for(p)?
            .with_run_options(crate::engine::RunOptions {
                ulimit_nofile: settings.ulimit_nofile,
                ulimit_nproc: settings.ulimit_nproc,
            }),
        None => ctx.engine.clone(),
    };
    if let Some(d) = engine.daemon() {
        d.validate().map_err(Error::Invalid)?;
    }
    check_engine_fits(&engine, &limits, req)?;
    // Before any build: a work dir mode refused with these limits builds nothing.
    let workdir_mode = resolve_workdir_mode(ctx, &engine, parent.as_ref(), &limits)?;
    let publish = resolve_publish(req, &limits, &engine, parent.as_ref(), workdir_mode)?;
    if let Some(spec) = &req.build {
        super::build::build(ctx, &ctx.engine, spec, limits.network).await?;
    }
    // A devcontainer.json: its image is built, its user looked up in it.
    let devcontainer = match &req.devcontainer {
        Some(dc) => {
            let prepared = super::devcontainer::prepare(
                ctx,
                &ctx.engine,
                dc,
                &image,
                &limits,
                req.user.is_some(),
            )
            .await?;
            Some((dc, prepared))
        }
        None => None,
    };
    let user = match devcontainer.as_ref().and_then(|(_, p)| p.user) {
        Some(u) => u,
        None => resolve_user(ctx, req, parent.as_ref(), &workdir)?,
    };
    let runtime = resolve_runtime(ctx, req, parent.as_ref())?;
    if !req.allow.is_empty() && limits.network != Network::Allowlist {
        return Err(Error::Invalid(format!(
            "--allow needs network allowlist, not {}; leave --network out (--allow implies allowlist)",
            limits.network
        ))
        .into());
    }
    if limits.network == Network::Allowlist {
        super::egress::check_supported(&engine, runtime.as_deref())?;
    }
    if let Some(why) = unwritable_for(&workdir, user) {
        ctx.reporter.warn(&why);
    }
    let labels = parse_labels(&req.labels)?;
    let id = Uuid::new_v4();
    let name = sandbox_name(req, id)?;
    let now = now_rfc3339();
    if let (Some((dc, _)), None) = (&devcontainer, &req.bootstrap) {
        // Its lifecycle commands are the bootstrap, as if given with --bootstrap.
        if let Some(script) = super::devcontainer::bootstrap_script(dc, &workdir, user) {
            settings.bootstrap_cmd = Some(script);
        }
    }
    let dc_record = match &devcontainer {
        Some((_, p)) => Some(p.record.clone()),
        None => parent.as_ref().and_then(|p| p.devcontainer.clone()),
    };
    let mut record = Record {
        id,
        name,
        state: Lifecycle::Pending,
        engine: engine.kind(),
        isolation: engine.kind().isolation(),
        container_id: None,
        image,
        workdir,
        limits,
        labels,
        created_at: now.clone(),
        updated_at: now,
        error: None,
        creator: ProcessRef::current(),
        parent: parent.as_ref().map(|p| p.id),
        bootstrap: None,
        user: Some(user),
        owner,
        expires_at: None,
        ttl_secs,
        settings: Some(settings),
        stopper: None,
        agent: None,
        // A copied work dir is the sandbox's own: what happens to the host's later is not its.
        workdir_id: workdir_mode.is_mount().then(|| mount.identity()),
        runtime,
        devcontainer: dc_record,
        published: Vec::new(),
        workdir_mode,
        daemon: engine.daemon().cloned(),
    };
    record.start_lease(SystemTime::now())?;
    let binary = match engine.kind().isolation() {
        Isolation::Container => super::agent::binary()?,
        Isolation::None => PathBuf::new(),
    };
    let mut spec = container_spec(ctx, &record, user, binary);
    spec.publish = publish;
    spec.constraints = req.constraints.clone();
    Ok(Plan {
        record,
        spec,
        engine,
        mount,
        parent,
    })
}

/// Checks that `engine` can give the sandbox what `req` and `limits` ask for: a network no wider
/// than asked (an engine without isolated networks refuses `none` and the allowlist) and
/// placement constraints only where there are nodes to choose from. Errors: [`Error::Invalid`].
fn check_engine_fits(engine: &AnyEngine, limits: &Limits, req: &UpRequest) -> Result<(), Error> {
    let caps = engine.capabilities();
    if !caps.isolated_networks && limits.network != Network::Bridge {
        return Err(Error::Invalid(format!(
            "network = \"{}\" is not available on engine {}: it cannot give a sandbox less than a bridge network (the agent's channel is a port published on the sandbox's node); use --network bridge",
            limits.network,
            engine.kind()
        ))
        );
    }
    if let Some(c) = req.constraints.first().filter(|_| !caps.node_ports) {
        return Err(Error::Invalid(format!(
            "--constraint {c}: engine {} has one host, no nodes to choose from; placement constraints need engine swarm",
            engine.kind()
        ))
        );
    }
    Ok(())
}

/// The ports `req.publish` asks to publish, checked: only on a container engine and on the
/// bridge network (a sandbox with network none has no interface to publish; an allowlist
/// sandbox's only way out is its proxy). Errors: a malformed one, or one that cannot apply.
fn resolve_publish(
    req: &UpRequest,
    limits: &Limits,
    engine: &AnyEngine,
    parent: Option<&Record>,
    workdir_mode: WorkdirMode,
) -> Result<Vec<crate::types::Publish>, Error> {
    let publish = req
        .publish
        .iter()
        .map(|p| crate::types::Publish::parse(p).map_err(Error::Invalid))
        .collect::<Result<Vec<_>, _>>()?;
    if publish.is_empty() {
        return Ok(publish);
    }
    let local = match parent {
        Some(p) => p.isolation == Isolation::None,
        None => engine.kind().isolation() == Isolation::None,
    };
    if local {
        return Err(Error::Invalid(
            "--publish needs a container: a local sandbox's ports are already this host's own"
                .into(),
        ));
    }
    if let Some(p) = publish
        .iter()
        .find(|p| p.port == crate::contract::CHANNEL_PORT && !workdir_mode.is_mount())
    {
        return Err(Error::Invalid(format!(
            "--publish {}: port {} inside is the agent's channel of a sandbox whose work dir is copied; give the server another port",
            p.port,
            crate::contract::CHANNEL_PORT
        )));
    }
    if let Some(host) = engine.remote_host() {
        if let Some(p) = publish.iter().find(|p| p.ip.is_loopback()) {
            return Err(Error::Invalid(format!(
                "--publish {}: the engine's daemon is on another machine ({host}), whose loopback is not this machine's; name an address of that machine (IP:HOST_PORT:PORT), or use `h9sandbox port-forward ID {}`, which listens here",
                p.port, p.port
            )));
        }
    }
    if limits.network != Network::Bridge {
        return Err(Error::Invalid(format!(
            "--publish needs network bridge, not {}: {}; `h9sandbox port-forward ID PORT` reaches a port of any sandbox through its agent",
            limits.network,
            match limits.network {
                Network::None => "a sandbox without network has no interface to publish a port on",
                _ => "an allowlist sandbox has no network of its own (its only way out is its proxy)",
            }
        )));
    }
    Ok(publish)
}

/// How the new sandbox's work dir reaches its container: config `workdir_mode` (`up
/// --workdir-mode`), else `mount` where `engine` can mount this machine's directories and
/// `copy` where it cannot. Errors: `mount` on an engine that cannot, `copy` for a local sandbox
/// (no container) or with what needs a host mount (the allowlist's proxy socket), a
/// sub-sandbox (its work dir is its parent's, on the host).
fn resolve_workdir_mode(
    ctx: &Ctx,
    engine: &AnyEngine,
    parent: Option<&Record>,
    limits: &Limits,
) -> Result<WorkdirMode> {
    let caps = engine.capabilities();
    let mode = ctx.cfg.workdir_mode.unwrap_or(if caps.host_mounts {
        WorkdirMode::Mount
    } else {
        WorkdirMode::Copy
    });
    match mode {
        WorkdirMode::Mount if !caps.host_mounts => Err(Error::Invalid(format!(
            "workdir_mode = \"mount\": the {} engine here cannot mount this machine's directories (its daemon is on another machine); use --workdir-mode copy",
            engine.kind()
        ))
        .into()),
        WorkdirMode::Copy if engine.kind().isolation() == Isolation::None => {
            Err(Error::Invalid(
                "workdir_mode = \"copy\" needs a container engine: a local sandbox runs in the work dir itself; use --workdir-mode mount, or engine docker".into(),
            )
            .into())
        }
        WorkdirMode::Copy if limits.network == Network::Allowlist => Err(Error::Invalid(
            "network = \"allowlist\" does not work with workdir_mode = \"copy\" yet (its proxy joins the sandbox through a directory of this machine); use network none or bridge there".into(),
        )
        .into()),
        WorkdirMode::Copy if parent.is_some() => Err(Error::Invalid(
            "sub-sandboxes (--parent) do not work with workdir_mode = \"copy\" yet (a sub-sandbox shares its parent's work dir on this machine); use --workdir-mode mount".into(),
        )
        .into()),
        m => Ok(m),
    }
}

/// The parent of a sub-sandbox (`req.parent`): its record, which must be Running, with its
/// container running. `None` without a parent.
async fn resolve_parent(ctx: &Ctx, req: &UpRequest) -> Result<Option<Record>> {
    let Some(q) = &req.parent else {
        return Ok(None);
    };
    let state = ctx.store.load()?;
    let p = state.resolve(q)?;
    ensure_running(p)
        .map_err(|e| Error::Invalid(format!("cannot create a sub-sandbox: the parent {e}")))?;
    // The record may say Running while the container died behind our back.
    if p.isolation == Isolation::Container
        && !ctx
            .engine_for(p)
            .inspect(p.container_ref())
            .await?
            .is_some_and(|c| c.running)
    {
        return Err(Error::Invalid(format!(
            "cannot create a sub-sandbox of {}: its container is not running (see `h9sandbox ls`)",
            p.short_id()
        ))
        .into());
    }
    Ok(Some(p.clone()))
}

/// The sandbox's name: `req.name` (checked by [`validate_name`]), else `h9sandbox-` and the
/// first 12 hex digits of `id`.
fn sandbox_name(req: &UpRequest, id: Uuid) -> Result<String, Error> {
    match &req.name {
        Some(n) => {
            validate_name(n)?;
            Ok(n.clone())
        }
        None => Ok(format!("h9sandbox-{}", &id.simple().to_string()[..12])),
    }
}

/// A sub-sandbox's image, limits and work dir: its parent's, which `req` may only tighten.
fn inherit_from(ctx: &Ctx, req: &UpRequest, p: &Record) -> Result<(String, Limits, PathBuf)> {
    if let Some(img) = req
        .image
        .as_deref()
        .filter(|i| with_tag(i) != with_tag(&p.image))
    {
        return Err(Error::Invalid(format!(
            "--image {img} differs from the parent's {}; a sub-sandbox runs its parent's image (leave --image out)",
            p.image
        ))
        .into());
    }
    let limits = child_limits(&p.limits, &Tighten::explicit(req, &ctx.cfg))?;
    Ok((
        p.image.clone(),
        limits,
        child_workdir(p, req.workdir.as_deref())?,
    ))
}

/// The limits the configuration gives a new top-level sandbox.
fn configured_limits(cfg: &Config) -> Limits {
    Limits {
        cpus: cfg.cpus,
        memory: cfg.memory.clone(),
        pids_limit: cfg.pids_limit,
        tmp_size: cfg.tmp_size.clone(),
        network: cfg.network,
        allow: if cfg.network == Network::Allowlist {
            cfg.allow.clone()
        } else {
            Vec::new()
        },
        caps: cfg.caps,
    }
}

/// Step 2: refuses a work dir through which the sandbox could reach the host's secrets or code
/// ([`WorkdirRule`]) or, with `req.within`, one outside that directory, and pins the one
/// accepted ([`MountCheck`], which opens it through no symlink), so that the container's mount
/// can be checked against it.
fn check_workdir(ctx: &Ctx, req: &UpRequest, workdir: &Path) -> Result<MountCheck> {
    if let Some(root) = req.within.as_deref().filter(|r| !workdir.starts_with(r)) {
        return Err(Error::Invalid(format!(
            "work directory {} is outside this server's --workdir {}; give a directory inside it",
            workdir.display(),
            root.display()
        ))
        .into());
    }
    WorkdirRule::for_host(ctx).check(workdir)?;
    MountCheck::pin(workdir)
}

/// Who the sandbox's commands run as: config `user` (by default the owner of `workdir`), or for
/// a sub-sandbox its parent's user, which `req.user` may not change.
fn resolve_user(
    ctx: &Ctx,
    req: &UpRequest,
    parent: Option<&Record>,
    workdir: &Path,
) -> Result<Ids> {
    let wanted = ctx.cfg.user().resolve(workdir);
    match parent.and_then(|p| p.user) {
        Some(u) if req.user.is_some() && wanted != u => Err(Error::Invalid(format!(
            "--user {wanted} differs from the parent's {u}; a sub-sandbox runs as its parent's user (leave --user out)"
        ))
        .into()),
        Some(u) => Ok(u),
        None => Ok(wanted),
    }
}

/// The OCI runtime of the new sandbox: config `runtime` (`up --runtime`), or for a sub-sandbox
/// its parent's, which `req.runtime` may not change (a sub-sandbox is never looser: a gVisor
/// parent has gVisor children). `None` for a local sandbox (no container).
fn resolve_runtime(ctx: &Ctx, req: &UpRequest, parent: Option<&Record>) -> Result<Option<String>> {
    let Some(p) = parent else {
        return Ok(ctx
            .cfg
            .runtime
            .clone()
            .filter(|_| ctx.engine.kind().isolation() == Isolation::Container));
    };
    match &req.runtime {
        Some(r) if Some(r) != p.runtime.as_ref() => Err(Error::Invalid(format!(
            "--runtime {r} differs from the parent's {}; a sub-sandbox runs on its parent's runtime (leave --runtime out)",
            p.runtime.as_deref().unwrap_or("default runtime")
        ))
        .into()),
        _ => Ok(p.runtime.clone()),
    }
}

/// The container of the sandbox `record`: its name, image, work dir, limits and user, its
/// labels with h9sandbox's own (managed, ID, state directory, parent), and the agent's mounts
/// (`binary`, the sandbox's run directory).
fn container_spec(ctx: &Ctx, record: &Record, user: Ids, binary: PathBuf) -> ContainerSpec {
    let mut labels = record.labels.clone();
    let env = record
        .devcontainer
        .iter()
        .flat_map(|d| &d.env)
        .filter_map(|e| e.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels.insert(LABEL_MANAGED.into(), "1".into());
    labels.insert(LABEL_ID.into(), record.id.to_string());
    labels.insert(LABEL_STATE_DIR.into(), ctx.state_label());
    if let Some(p) = record.parent {
        labels.insert(LABEL_PARENT.into(), p.to_string());
    }
    ContainerSpec {
        name: record.name.clone(),
        image: record.image.clone(),
        workdir: record.workdir.clone(),
        limits: record.limits.clone(),
        labels,
        user,
        scratch_volume: scratch_volume_name(&record.id),
        runtime: record.runtime.clone(),
        env,
        publish: Vec::new(),
        constraints: Vec::new(),
        proxy: (record.limits.network == Network::Allowlist)
            .then(|| super::egress::socket_dir(ctx, record.id)),
        user_name: (user == Ids::current() && !user.is_root())
            .then(host_login_name)
            .flatten(),
        agent: match record.workdir_mode {
            WorkdirMode::Mount => AgentSetup::Mounted(AgentMount {
                root: super::agent::mount_root(ctx, record.id),
                binary,
                run_dir: super::agent::run_dir(ctx, record.id),
            }),
            // The image and the secret are made as the container is ([`start_container`]).
            WorkdirMode::Copy => {
                let published = record.limits.network == Network::Bridge;
                AgentSetup::Shipped(ShippedAgent {
                    image: String::new(),
                    secret: Secret(Vec::new()),
                    listen: format!(
                        "{}:{}",
                        if published { "0.0.0.0" } else { "127.0.0.1" },
                        crate::contract::CHANNEL_PORT
                    ),
                    publish: published.then(|| channel_publish_address(&ctx.engine_for(record))),
                    ready_timeout: Duration::from_secs(ctx.cfg.start_timeout_secs),
                })
            }
        },
    }
}

/// The address of the daemon's host the channel's port is published on: this machine's
/// loopback for a daemon on this machine, every address of a remote daemon's host (the channel
/// is authenticated both ways: docs/guide.md, Remote sandboxes).
fn channel_publish_address(engine: &AnyEngine) -> String {
    match engine.remote_host() {
        None => "127.0.0.1".into(),
        Some(_) => "0.0.0.0".into(),
    }
}

/// Where the host connects to a channel published on port `port` of the daemon's host:
/// `channel_host` when configured (`H9SANDBOX_CHANNEL_HOST`), else the daemon's host as
/// `DOCKER_HOST` names it (the sandbox's own daemon, `engine`), else this machine's loopback.
pub(super) fn channel_connect_address(engine: &AnyEngine, port: u16) -> String {
    let host = std::env::var("H9SANDBOX_CHANNEL_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| engine.remote_host())
        .unwrap_or_else(|| "127.0.0.1".into());
    join_host_port(&host, port)
}

/// `HOST:PORT`, an IPv6 address in brackets.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// This process's login name, from the host's `/etc/passwd` (read directly: a static binary
/// has no NSS modules), for the sandbox's user when it is us.
fn host_login_name() -> Option<String> {
    let uid = Ids::current().uid;
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    crate::agent::user::parse_passwd(&passwd)
        .into_iter()
        .find(|e| e.uid == uid)
        .map(|e| e.name)
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
                Error::Invalid(format!("cannot create a sub-sandbox: the parent {e}"))
            })?;
        }
        s.sandboxes.push(plan.record.clone());
        Ok(())
    })
}

/// Step 4: starts the container ([`start_container`]) alongside the `reap_on_up` sweep, and,
/// when the engine is unreachable and `fallback = "local"`, a local sandbox instead. Returns the
/// engine that ran the start and how the start went (the container ID, or why it failed, which
/// [`fail_pending`] cleans up after). Errors (outer): the state file, during the fallback.
async fn start(ctx: &Ctx, plan: &Plan) -> Result<(AnyEngine, Result<Started>)> {
    let mut engine = plan.engine.clone();
    let (mut started, swept) = start_alongside_sweep(ctx, &engine, plan).await;
    // A failed `up` reports its own error only: the sweep's would mostly repeat it.
    if started.is_ok() {
        report_sweep(ctx, swept);
    }
    if let Err(e) = &started {
        if let Some(local) = fall_back_to_local(ctx, plan, &engine, e)? {
            engine = local;
            started = start_interruptible(ctx, &engine, &plan.spec, &plan.mount).await;
        }
    }
    Ok((engine, started))
}

/// Starts the container and, at the same time, runs the `reap_on_up` sweep (if configured) and
/// lists every state directory with live containers: none may lie in the work dir, or the
/// sandbox could rewrite its records (engine, container, work dir) and steer another session's
/// commands to the host. A container started in such a work dir is removed again. Returns the
/// start's result and the sweep's (`None`: no sweep).
async fn start_alongside_sweep(
    ctx: &Ctx,
    engine: &AnyEngine,
    plan: &Plan,
) -> (Result<Started>, Option<Result<Sweep>>) {
    // One listing of every state directory's containers serves both: the sweep takes its own
    // from it when it lists the same engine (one client process less through a remote daemon).
    let beside = async {
        let here = super::Target {
            kind: engine.kind(),
            daemon: engine.daemon().cloned(),
        };
        let managed = [(LABEL_MANAGED, "1")];
        if engine.kind().isolation() != Isolation::Container {
            return (sweep_if_configured(ctx).await, None);
        }
        if !ctx.cfg.reap_on_up || here != ctx.current_target() {
            let (swept, all) = tokio::join!(sweep_if_configured(ctx), engine.list(&managed));
            return (swept, all.ok());
        }
        // The state the sweep judges is read before the listing, as `reap` reads it.
        let before = match ctx.store.load() {
            Ok(b) => b,
            Err(e) => return (Some(Err(e)), engine.list(&managed).await.ok()),
        };
        let all = engine.list(&managed).await;
        let others = all.as_ref().ok().cloned();
        let listed = reap::Listed {
            target: here,
            containers: all,
        };
        (Some(reap::sweep_listed(ctx, before, listed).await), others)
    };
    let (mut started, (swept, others)) = tokio::join!(
        start_interruptible(ctx, engine, &plan.spec, &plan.mount),
        beside
    );
    if let (Ok(c), Some(list)) = (&started, &others) {
        let own = ctx.state_label();
        let workdir = &plan.spec.workdir;
        if let Some(d) = list
            .iter()
            .filter_map(|s| s.state_dir.as_deref())
            .find(|d| *d != own && Path::new(d).starts_with(workdir))
        {
            let _ = engine.remove(&c.container).await;
            started = Err(Error::Invalid(format!(
                "work directory {} contains the state directory {d} of other sandboxes, which this sandbox could then rewrite; use a directory that does not hold one",
                workdir.display()
            ))
            .into());
        }
    }
    (started, swept)
}

/// The `reap_on_up` sweep, when configured (`None` otherwise).
async fn sweep_if_configured(ctx: &Ctx) -> Option<Result<Sweep>> {
    match ctx.cfg.reap_on_up {
        true => Some(reap::sweep(ctx, false).await),
        false => None,
    }
}

/// Reports what `up`'s sweep did: what it reaped (with `-v`), and what it could not remove or
/// why it failed (warnings; never `up`'s failure).
fn report_sweep(ctx: &Ctx, swept: Option<Result<Sweep>>) {
    match swept {
        Some(Ok(s)) => {
            if ctx.verbose() {
                for v in &s.reaped {
                    ctx.reporter
                        .note(&format!("reaped {} ({})", v.name, v.detail));
                }
            }
            for (v, e) in &s.failed {
                ctx.reporter.warn(&format!(
                    "reap_on_up could not remove {} ({}): {e:#}",
                    v.name, v.detail
                ));
            }
        }
        Some(Err(e)) => ctx.reporter.warn(&format!("reap_on_up failed: {e:#}")),
        None => {}
    }
}

/// With `fallback = "local"`, a top-level sandbox whose container engine is unreachable (the
/// start's error `e`) becomes a local one: warns loudly, records the local engine, and returns
/// it. `None` when this does not apply. Errors: the state file.
fn fall_back_to_local(
    ctx: &Ctx,
    plan: &Plan,
    engine: &AnyEngine,
    e: &anyhow::Error,
) -> Result<Option<AnyEngine>> {
    let Some(Error::EngineUnavailable { bin, reason }) = e.downcast_ref::<Error>() else {
        return Ok(None);
    };
    if engine.kind().isolation() != Isolation::Container
        || ctx.cfg.fallback != Fallback::Local
        || plan.parent.is_some()
    {
        return Ok(None);
    }
    ctx.reporter.warn(&format!(
        "{} is unreachable ({reason}; see `{bin} info`). fallback = \"local\": \
         sandbox {} is created WITHOUT A CONTAINER; its commands run directly on this host",
        engine.kind(),
        plan.record.short_id()
    ));
    ctx.store.update(|s| {
        let r = s
            .get_mut(plan.record.id)
            .context("the sandbox's record vanished from the state file while it started")?;
        r.engine = EngineKind::Local;
        r.isolation = Isolation::None;
        Ok(())
    })?;
    Ok(Some(ctx.engine_of(EngineKind::Local)))
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

/// Step 6: runs the configured bootstrap command, if any, in the Running sandbox `rec` (its
/// output to stderr: stdout carries the ID or the JSON record) and returns the record with the
/// bootstrap's outcome. A failure only warns, unless `bootstrap_required`: then, as on an
/// interrupting signal, the sandbox is removed ([`abort`]) and `up` fails. For `one_command`
/// (`run`), the warning says the command runs without it (the record it would point at is gone
/// once the command ends).
async fn run_bootstrap(ctx: &Ctx, mut rec: Record, one_command: bool) -> Result<Record> {
    let cfg = &ctx.cfg;
    // What `up` recorded a moment ago: the configuration's, or the devcontainer's lifecycle
    // commands, which count as a flag.
    let Some(cmd) = rec.settings.as_ref().and_then(|s| s.bootstrap_cmd.clone()) else {
        return Ok(rec);
    };
    let cmd = cmd.as_str();
    let done = bootstrap::execute(ctx, &rec, cmd, Sink::Stderr).await;
    if let Some(sig) = done.interrupted {
        let why = format!("interrupted by {sig} during the bootstrap");
        return Err(abort(ctx, &rec, why).await);
    }
    let timeout = ctx.settings_for(&rec).bootstrap_timeout_secs;
    let failure = (!done.run.succeeded()).then(|| bootstrap_failure(&done.run, timeout));
    rec.bootstrap = Some(done.run);
    if let Some(why) = failure {
        if cfg.bootstrap_required {
            return Err(abort(
                ctx,
                &rec,
                format!("{why}; the sandbox was removed (bootstrap_required); fix the command, or leave out --bootstrap-required to keep such a sandbox"),
            )
            .await);
        }
        ctx.reporter.warn(&match one_command {
            true => format!(
                "{why}; the command runs without it (--bootstrap-required makes `run` fail instead)"
            ),
            false => format!(
                "{why}; the sandbox is up without it (its record shows the bootstrap: `h9sandbox ls --format json`)"
            ),
        });
    }
    Ok(rec)
}

/// One line on why a recorded bootstrap failed.
fn bootstrap_failure(run: &BootstrapRun, timeout_secs: u64) -> String {
    let what = shown_bootstrap(&run.cmd);
    if run.timed_out {
        format!(
            "bootstrap {what} timed out after {timeout_secs}s (--bootstrap-timeout, else bootstrap_timeout_secs) and its process tree was killed"
        )
    } else if let Some(e) = &run.error {
        format!("bootstrap {what} could not run: {e}")
    } else {
        format!("bootstrap {what} exited with status {}", run.exit_code)
    }
}

/// A bootstrap command as a diagnostic line names it: in backquotes, or, for a script whose
/// first line is a comment (a devcontainer.json's lifecycle commands), that comment.
fn shown_bootstrap(cmd: &str) -> String {
    match cmd
        .strip_prefix("# ")
        .and_then(|rest| rest.split_once('\n'))
    {
        Some((comment, _)) => format!("({comment})"),
        None => format!("`{cmd}`"),
    }
}

/// Removes a started sandbox (its container, then what it holds beside it) and drops its
/// record, as [`fail_pending`] does; returns the error `up` fails with. When the container
/// cannot be removed, the record stays Failed with `reason`, for `down` to retry.
async fn abort(ctx: &Ctx, rec: &Record, reason: String) -> anyhow::Error {
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

/// [`start_container`], given up on SIGINT, SIGTERM or SIGHUP.
async fn start_interruptible(
    ctx: &Ctx,
    engine: &AnyEngine,
    spec: &ContainerSpec,
    mount: &MountCheck,
) -> Result<Started> {
    tokio::select! {
        r = start_container(ctx, engine, spec, mount) => r,
        sig = interrupted() => Err(anyhow::anyhow!("interrupted by {sig}")),
    }
}

/// A started container: its ID (a local sandbox: its name), and what `up` found of its agent.
struct Started {
    container: String,
    agent: Option<AgentRecord>,
}

/// Creates the container ([`create_container`]) with a fresh run directory and token for its
/// agent, waits until it runs ([`wait_running`]), verifies its limits and mount
/// ([`verify_limits`]), and waits for its agent ([`super::agent::wait_ready`]).
async fn start_container(
    ctx: &Ctx,
    engine: &AnyEngine,
    spec: &ContainerSpec,
    mount: &MountCheck,
) -> Result<Started> {
    let mut spec = spec.clone();
    let container_id = match engine.kind().isolation() {
        Isolation::Container => {
            let id = spec
                .labels
                .get(LABEL_ID)
                .and_then(|i| Uuid::parse_str(i).ok());
            let id = id.context("the container has no sandbox ID label")?;
            match &mut spec.agent {
                AgentSetup::Mounted(_) => {
                    super::agent::prepare(ctx, id)?;
                }
                AgentSetup::Shipped(shipped) => {
                    shipped.secret = Secret(super::agent::prepare_channel(ctx, id)?.to_frame());
                    ctx.reporter
                        .step("preparing the image with h9sandbox's agent");
                    shipped.image = agent_image(ctx, engine, &spec.image).await?;
                }
            }
            super::egress::start(ctx, engine, &spec, id).await?;
            create_container(ctx, engine, &spec).await?
        }
        Isolation::None => create_container(ctx, engine, &spec).await?,
    };
    let spec = &spec;
    ctx.reporter.step("waiting for the container to run");
    let status = wait_running(
        engine,
        &container_id,
        Duration::from_secs(ctx.cfg.start_timeout_secs),
    )
    .await?;
    verify_limits(engine, spec, mount, &container_id, &status).await?;
    let agent = match engine.kind().isolation() {
        Isolation::Container if matches!(spec.agent, AgentSetup::Shipped(_)) => {
            ctx.reporter.step("connecting to the sandbox's agent");
            let id = spec
                .labels
                .get(LABEL_ID)
                .and_then(|i| Uuid::parse_str(i).ok())
                .context("the container has no sandbox ID label")?;
            let on_node = engine.capabilities().node_ports;
            let address = status
                .ports
                .iter()
                .find(|(port, _, _)| *port == crate::contract::CHANNEL_PORT)
                .map(|(_, node, host_port)| match on_node {
                    // The task's node, as its manager sees it (a swarm).
                    true if std::env::var("H9SANDBOX_CHANNEL_HOST")
                        .map_or(true, |h| h.is_empty()) =>
                    {
                        join_host_port(node, *host_port)
                    }
                    _ => channel_connect_address(engine, *host_port),
                });
            let inside = format!("127.0.0.1:{}", crate::contract::CHANNEL_PORT);
            Some(
                super::agent::check_channel(ctx, engine, &container_id, id, address, inside)
                    .await?,
            )
        }
        Isolation::Container => {
            ctx.reporter.step("waiting for the sandbox's agent");
            let id = spec
                .labels
                .get(LABEL_ID)
                .and_then(|i| Uuid::parse_str(i).ok());
            match id {
                Some(id) => super::agent::wait_ready(ctx, id).await,
                None => None,
            }
        }
        Isolation::None => None,
    };
    Ok(Started {
        container: container_id,
        agent,
    })
}

/// The derived image of `image` that ships h9sandbox's agent ([`Environment::agent_image`]),
/// pulling `image` once if it is missing. The name it had last time on this daemon is handed
/// to the engine as a hint ([`super::image_cache`]), and the answer kept for the next `up`.
async fn agent_image(ctx: &Ctx, engine: &AnyEngine, image: &str) -> Result<String> {
    let binary = super::agent::binary()?;
    let build = super::agent::binary_build(&binary)?;
    let target = super::Target {
        kind: engine.kind(),
        daemon: engine.daemon().cloned(),
    };
    let hint = super::image_cache::hint(ctx, &target, image);
    let tag = match engine
        .agent_image(image, &binary, &build, hint.as_deref())
        .await
    {
        Err(e)
            if matches!(
                e.downcast_ref::<Error>(),
                Some(Error::ImageUnavailable { .. })
            ) =>
        {
            ctx.reporter.step(&format!("pulling {image}"));
            engine
                .pull(image, Duration::from_secs(ctx.cfg.pull_timeout_secs))
                .await?;
            engine.agent_image(image, &binary, &build, None).await
        }
        r => r,
    }?;
    if hint.as_deref() != Some(tag.as_str()) {
        if let Err(e) = super::image_cache::remember(ctx, &target, image, &tag) {
            if ctx.verbose() {
                ctx.reporter
                    .note(&format!("cannot remember the derived image: {e:#}"));
            }
        }
    }
    Ok(tag)
}

/// Creates and starts the container, pulling the image once if it is missing (bounded by
/// `pull_timeout_secs`). Returns the container ID.
async fn create_container(ctx: &Ctx, engine: &AnyEngine, spec: &ContainerSpec) -> Result<String> {
    ctx.reporter.step("creating container");
    match engine.create(spec).await {
        Err(e)
            if matches!(
                e.downcast_ref::<Error>(),
                Some(Error::ImageUnavailable { .. })
            ) =>
        {
            ctx.reporter.step(&format!("pulling {}", spec.image));
            engine
                .pull(&spec.image, Duration::from_secs(ctx.cfg.pull_timeout_secs))
                .await?;
            ctx.reporter.step("creating container");
            engine.create(spec).await
        }
        r => r,
    }
}

/// Checks that the engine applied every resource limit of `spec` to the running container
/// (`status`), and that it mounted the checked work dir. Nothing to check for a local sandbox.
async fn verify_limits(
    engine: &AnyEngine,
    spec: &ContainerSpec,
    mount: &MountCheck,
    container_id: &str,
    status: &ContainerStatus,
) -> Result<()> {
    if engine.kind().isolation() != Isolation::Container {
        return Ok(());
    }
    let applied = status.applied.ok_or_else(|| {
        anyhow::anyhow!("the engine did not report the container's resource limits; refusing to run a sandbox whose limits cannot be checked")
    })?;
    applied.check(&spec.limits).map_err(anyhow::Error::msg)?;
    // A shipped agent's container mounts nothing of this machine.
    if spec.agent.mounted().is_none() {
        return Ok(());
    }
    mount
        .verify(
            engine,
            container_id,
            status.pid,
            crate::engine::is_gvisor(spec.runtime.as_deref()),
        )
        .await
}

/// Polls the container's `State.Running` right away, then with back-off (10 ms doubling to
/// 200 ms), until it runs or `timeout` passes. Returns the running container's status.
pub(super) async fn wait_running(
    engine: &AnyEngine,
    container: &str,
    timeout: Duration,
) -> Result<ContainerStatus> {
    let running = poll_until(
        timeout,
        Backoff::doubling(Duration::from_millis(10), Duration::from_millis(200)),
        || async {
            match engine.inspect(container).await? {
                Some(s) if s.running => Ok(Some(s)),
                Some(s) if s.status == "exited" || s.status == "dead" => {
                    let mut why = format!(
                        "the container exited with status {} right after it started",
                        s.exit_code
                    );
                    if s.oom_killed {
                        why.push_str(" (killed for lack of memory: raise --memory)");
                    }
                    if !s.error.is_empty() {
                        why.push_str(&format!(": {}", s.error));
                    }
                    anyhow::bail!(why);
                }
                None => anyhow::bail!("the container disappeared while it started"),
                Some(_) => Ok(None),
            }
        },
    )
    .await?;
    running.ok_or_else(|| {
        anyhow::anyhow!(
            "the container did not reach Running within {}s (start_timeout_secs)",
            timeout.as_secs()
        )
    })
}

/// `image` with the `:latest` tag an image reference without tag or digest means.
fn with_tag(image: &str) -> String {
    let last = image.rsplit('/').next().unwrap_or(image);
    if last.contains(':') || last.contains('@') {
        image.to_string()
    } else {
        format!("{image}:latest")
    }
}

/// Checks a container name against the engine's rule `[a-zA-Z0-9][a-zA-Z0-9_.-]+`, refusing names
/// that could be mistaken for an ID prefix (only hex digits and dashes).
pub(crate) fn validate_name(name: &str) -> Result<(), Error> {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return Err(Error::Invalid(format!(
            "invalid --name '{name}': names made only of hex digits and dashes look like sandbox IDs; add another letter"
        )));
    }
    let mut chars = name.chars();
    let ok = name.len() >= 2
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "invalid --name '{name}': use 2 or more of letters, digits, '_', '.', '-', starting with a letter or digit"
        )))
    }
}

/// Parses `K=V` labels; the `h9sandbox` namespace is reserved.
pub(crate) fn parse_labels(raw: &[String]) -> Result<BTreeMap<String, String>, Error> {
    let mut out = BTreeMap::new();
    for l in raw {
        let Some((k, v)) = l.split_once('=') else {
            return Err(Error::Invalid(format!(
                "invalid --label '{l}': expected K=V"
            )));
        };
        if k.is_empty() {
            return Err(Error::Invalid(format!(
                "invalid --label '{l}': the key is empty"
            )));
        }
        // A label is shown by `ls`, `docker inspect` and `ps` listings, and read back line by
        // line: a control character (newline, escape) would forge lines or drive the terminal.
        if l.chars().any(char::is_control) {
            return Err(Error::Invalid(format!(
                "invalid --label {l:?}: it holds a control character (newline, tab, escape, ...); use printable text"
            )));
        }
        if k == LABEL_MANAGED || k.starts_with("h9sandbox.") {
            return Err(Error::Invalid(format!(
                "invalid --label '{l}': keys `h9sandbox` and `h9sandbox.*` are reserved"
            )));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_engine_rule() {
        assert!(validate_name("ci-job_4.2").is_ok());
        for bad in [
            "",
            "a",
            "-x",
            "a b",
            "a/b",
            "é1",
            "cafe",
            "05f7096d-da1b",
            "deadbeef",
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    /// A context on the local engine (no container engine needed), with its own state
    /// directory, and a work dir; both in the returned temporary directory.
    fn local_ctx() -> (tempfile::TempDir, Ctx, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        let state = dir.path().join("state");
        std::fs::write(
            &config,
            format!(
                "engine = \"local\"\nreap_on_up = false\nstate_dir = {:?}\n",
                state.to_str().unwrap()
            ),
        )
        .unwrap();
        let layers = crate::config::Layers::load_with_env(Some(&config), |_| None).unwrap();
        let ctx =
            Ctx::from_layers(&layers, &[], std::sync::Arc::new(crate::report::Silent)).unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let work = work.canonicalize().unwrap();
        (dir, ctx, work)
    }

    #[tokio::test]
    async fn the_steps_plan_record_and_fail_a_pending_sandbox() {
        let (_dir, ctx, work) = local_ctx();
        let req = UpRequest {
            workdir: Some(work.clone()),
            name: Some("job-1".into()),
            labels: vec!["k=v".into()],
            ..Default::default()
        };
        let plan = resolve_spec(&ctx, &req).await.unwrap();
        let r = &plan.record;
        assert_eq!(
            (r.state, r.engine, &r.name),
            (Lifecycle::Pending, EngineKind::Local, &"job-1".to_string())
        );
        assert_eq!((&r.workdir, &plan.spec.workdir), (&work, &work));
        assert_eq!(plan.spec.labels[LABEL_ID], r.id.to_string());
        assert_eq!(plan.spec.labels[LABEL_MANAGED], "1");
        assert_eq!(plan.spec.labels["k"], "v");
        assert_eq!(r.limits, configured_limits(&ctx.cfg));
        record_pending(&ctx, &plan).unwrap();
        // The name is taken now: a second sandbox of that name is refused before it is recorded.
        let again = resolve_spec(&ctx, &req).await.unwrap();
        let e = record_pending(&ctx, &again).unwrap_err();
        assert!(matches!(e.downcast_ref(), Some(Error::NameInUse(_))), "{e}");
        // A failed start leaves nothing: its record is dropped, and the name free again.
        let e = fail_pending(&ctx, &plan, &plan.engine, anyhow::anyhow!("boom")).await;
        assert_eq!(e.to_string(), "boom");
        assert!(ctx.store.load().unwrap().sandboxes.is_empty());
        record_pending(&ctx, &again).unwrap();
    }

    #[tokio::test]
    async fn a_local_sandbox_is_created_running() {
        let (_dir, ctx, work) = local_ctx();
        let req = UpRequest {
            workdir: Some(work.clone()),
            ttl: Some("1h".into()),
            ..Default::default()
        };
        let rec = create(&ctx, &req).await.unwrap();
        assert_eq!(
            (rec.state, rec.isolation),
            (Lifecycle::Running, Isolation::None)
        );
        assert_eq!(
            (rec.container_id.as_deref(), rec.ttl_secs),
            (None, Some(3600))
        );
        assert!(rec.name.starts_with("h9sandbox-") && rec.expires_at.is_some());
        assert_eq!(ctx.store.load().unwrap().sandboxes, vec![rec]);
        // A work dir that does not exist is refused before anything is recorded.
        let bad = UpRequest {
            workdir: Some(work.join("missing")),
            ..Default::default()
        };
        assert!(create(&ctx, &bad).await.is_err());
        assert_eq!(ctx.store.load().unwrap().sandboxes.len(), 1);
    }

    #[test]
    fn labels_parse_and_reserve_our_namespace() {
        let l = parse_labels(&["a=1".into(), "b=x=y".into(), "c=".into()]).unwrap();
        assert_eq!(l["b"], "x=y");
        assert_eq!(l["c"], "");
        for bad in [
            "novalue",
            "=v",
            "h9sandbox=2",
            "h9sandbox.id=x",
            "k=v\u{1b}[2J\nx",
            "k\t=v",
            "k=\u{7f}",
        ] {
            assert!(parse_labels(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
