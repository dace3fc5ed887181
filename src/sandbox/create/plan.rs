//! What the sandbox will be ([`Plan`]): its spec resolved from the request, the configuration
//! and a parent, before anything is recorded or created.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Result;
use uuid::Uuid;

use super::UpRequest;
use crate::config::Config;
use crate::engine::{
    scratch_volume_name, AgentMount, AgentSetup, AnyEngine, ContainerSpec, Environment,
    MountSource, Secret, ShippedAgent, LABEL_ID, LABEL_MANAGED, LABEL_PARENT, LABEL_STATE_DIR,
};
use crate::error::Error;
use crate::lease::{parse_owner, parse_ttl};
use crate::sandbox::exec::ensure_running;
use crate::sandbox::subsandbox::{child_limits, child_workdir, Tighten};
use crate::sandbox::workdir::{resolve_workdir, unwritable_for, MountCheck, WorkdirRule};
use crate::sandbox::Ctx;
use crate::state::{now_rfc3339, Lifecycle, ProcessRef, Record};
use crate::types::{Ids, Isolation, Limits, Network, WorkdirMode};

/// Everything `up` decided before it records or creates anything.
pub(super) struct Plan {
    /// The sandbox's record, Pending, with its lease started.
    pub(super) record: Record,
    /// The container to create.
    pub(super) spec: ContainerSpec,
    /// The engine to create it with (a sub-sandbox's is its parent's).
    pub(super) engine: AnyEngine,
    /// The checked work dir, which the container's mount must be.
    pub(super) mount: MountCheck,
    /// The parent's record, for a sub-sandbox.
    pub(super) parent: Option<Record>,
}

/// Step 1: what to create. Parses the owner and the lease, checks the parent, settles image,
/// limits and work dir (the parent's, tightened; or the configured ones), checks the work dir
/// ([`check_workdir`]), the user, the labels and the name. Changes nothing but the warning about
/// a work dir the sandbox's user cannot write to.
pub(super) async fn resolve_spec(ctx: &Ctx, req: &UpRequest) -> Result<Plan> {
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
        crate::sandbox::devcontainer::tighten(dc, &mut limits)?;
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
        d.validate().map_err(Error::Usage)?;
    }
    check_engine_fits(&engine, &limits, req)?;
    // Before any build: what is refused with these limits builds nothing.
    let workdir_mode = resolve_workdir_mode(ctx, &engine, parent.as_ref())?;
    let publish = resolve_publish(req, &limits, &engine, parent.as_ref(), workdir_mode)?;
    // The network's flags too: a build is never wasted on a sandbox refused afterwards.
    let runtime = resolve_runtime(ctx, req, parent.as_ref())?;
    check_network_flags(
        ctx,
        req,
        parent.as_ref(),
        &limits,
        &engine,
        runtime.as_deref(),
    )?;
    if let Some(spec) = &req.build {
        crate::sandbox::build::build(ctx, &ctx.engine, spec, limits.network).await?;
    }
    // A devcontainer.json: its image is built, its user looked up in it.
    let devcontainer = match &req.devcontainer {
        Some(dc) => {
            let prepared = crate::sandbox::devcontainer::prepare(
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
    if let Some(why) = unwritable_for(&workdir, user) {
        ctx.reporter.warn(&why);
    }
    let labels = parse_labels(&req.labels)?;
    let id = Uuid::new_v4();
    let name = sandbox_name(req, id)?;
    let now = now_rfc3339();
    if let (Some((dc, _)), None) = (&devcontainer, &req.bootstrap) {
        // Its lifecycle commands are the bootstrap, as if given with --bootstrap.
        if let Some(script) = crate::sandbox::devcontainer::bootstrap_script(dc, &workdir, user) {
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
        pool: pool_tag(req),
    };
    record.start_lease(SystemTime::now())?;
    let binary = match engine.kind().isolation() {
        Isolation::Container => crate::sandbox::agent::binary()?,
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
/// placement constraints only where there are nodes to choose from. Errors: [`Error::Refused`].
fn check_engine_fits(engine: &AnyEngine, limits: &Limits, req: &UpRequest) -> Result<(), Error> {
    let caps = engine.capabilities();
    if !caps.isolated_networks && limits.network != Network::Bridge {
        return Err(Error::Refused(format!(
            "network = \"{}\" is not available on engine {}: it cannot give a sandbox less than a bridge network (the agent's channel is a port published on the sandbox's node); use --network bridge",
            limits.network,
            engine.kind()
        ))
        );
    }
    if let Some(c) = req.constraints.first().filter(|_| !caps.node_ports) {
        return Err(Error::Refused(format!(
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
        .map(|p| crate::types::Publish::parse(p).map_err(Error::Usage))
        .collect::<Result<Vec<_>, _>>()?;
    if publish.is_empty() {
        return Ok(publish);
    }
    let local = match parent {
        Some(p) => p.isolation == Isolation::None,
        None => engine.kind().isolation() == Isolation::None,
    };
    if local {
        return Err(Error::Refused(
            "--publish needs a container: a local sandbox's ports are already this host's own"
                .into(),
        ));
    }
    if let Some(p) = publish
        .iter()
        .find(|p| p.port == crate::contract::CHANNEL_PORT && !workdir_mode.is_mount())
    {
        return Err(Error::Refused(format!(
            "--publish {}: port {} inside is the agent's channel of a sandbox whose work dir is copied; give the server another port",
            p.port,
            crate::contract::CHANNEL_PORT
        )));
    }
    if let Some(host) = engine.remote_host() {
        if let Some(p) = publish.iter().find(|p| p.ip.is_loopback()) {
            return Err(Error::Refused(format!(
                "--publish {}: the engine's daemon is on another machine ({host}), whose loopback is not this machine's; name an address of that machine (IP:HOST_PORT:PORT), or use `h9sandbox port-forward ID {}`, which listens here",
                p.port, p.port
            )));
        }
    }
    if limits.network != Network::Bridge {
        return Err(Error::Usage(format!(
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

/// The network's flags against `limits` (settled, a devcontainer's tightening included) and
/// `engine`: `--allow ''` and `--allow` on a network that is not the allowlist are refused, a
/// configuration's `allow` list that this sandbox does not use is warned about, and the
/// allowlist needs an engine (and `runtime`) that can run its proxy. Errors: [`Error::Usage`],
/// [`Error::Refused`].
fn check_network_flags(
    ctx: &Ctx,
    req: &UpRequest,
    parent: Option<&Record>,
    limits: &Limits,
    engine: &AnyEngine,
    runtime: Option<&str>,
) -> Result<()> {
    if req.allow.iter().any(|h| h.trim().is_empty()) {
        return Err(Error::Usage(
            "--allow '' names no host; give a host name (e.g. deb.debian.org, *.pypi.org), or --network allowlist alone for a sandbox that may reach no host".into(),
        )
        .into());
    }
    if parent.is_none()
        && req.allow.is_empty()
        && limits.network != Network::Allowlist
        && !ctx.cfg.allow.is_empty()
    {
        // The flag is refused in that case (below); a configuration's list may be kept for the
        // sandboxes that ask for the allowlist, but is never silently taken for a restriction.
        ctx.reporter.warn(&format!(
            "the configuration's allow list ({}) is not used: this sandbox's network is {}; set network = \"allowlist\" (or up --network allowlist) to restrict it to those hosts",
            ctx.cfg.allow.join(", "),
            limits.network
        ));
    }
    if !req.allow.is_empty() && limits.network != Network::Allowlist {
        return Err(Error::Usage(format!(
            "--allow needs network allowlist, not {}; leave --network out (--allow implies allowlist)",
            limits.network
        ))
        .into());
    }
    if limits.network == Network::Allowlist {
        crate::sandbox::egress::check_supported(engine, runtime)?;
    }
    Ok(())
}

/// How the new sandbox's work dir reaches its container: config `workdir_mode` (`up
/// --workdir-mode`), else `mount` where `engine` can mount this machine's directories and
/// `copy` where it cannot. Errors: `mount` on an engine that cannot, `copy` for a local sandbox
/// (no container) or a sub-sandbox (its work dir is its parent's, on the host).
fn resolve_workdir_mode(
    ctx: &Ctx,
    engine: &AnyEngine,
    parent: Option<&Record>,
) -> Result<WorkdirMode> {
    let caps = engine.capabilities();
    let mode = ctx.cfg.workdir_mode.unwrap_or(if caps.host_mounts {
        WorkdirMode::Mount
    } else {
        WorkdirMode::Copy
    });
    match mode {
        WorkdirMode::Mount if !caps.host_mounts => Err(Error::Refused(format!(
            "workdir_mode = \"mount\": the {} engine here cannot mount this machine's directories (its daemon is on another machine); use --workdir-mode copy",
            engine.kind()
        ))
        .into()),
        WorkdirMode::Copy if engine.kind().isolation() == Isolation::None => {
            Err(Error::Refused(
                "workdir_mode = \"copy\" needs a container engine: a local sandbox runs in the work dir itself; use --workdir-mode mount, or engine docker".into(),
            )
            .into())
        }
        WorkdirMode::Copy if parent.is_some() => Err(Error::Refused(
            "sub-sandboxes (--parent) do not work with workdir_mode = \"copy\" yet (a sub-sandbox shares its parent's work dir on this machine); use --workdir-mode mount".into(),
        )
        .into()),
        m => Ok(m),
    }
}

/// The parent of a sub-sandbox (`req.parent`): its record, which must be Running, with its
/// container running, and its work dir mounted (a copied one cannot be shared yet). `None`
/// without a parent.
async fn resolve_parent(ctx: &Ctx, req: &UpRequest) -> Result<Option<Record>> {
    let Some(q) = &req.parent else {
        return Ok(None);
    };
    let state = ctx.store.load()?;
    let p = state.resolve(q)?;
    // Before what it would inherit is checked: a copied work dir cannot be shared yet.
    if p.workdir_mode == WorkdirMode::Copy {
        return Err(Error::Refused(format!(
            "sandbox {} has its work dir copied in (workdir_mode = \"copy\"), and a sub-sandbox would share it, which copy mode cannot do yet; give sub-sandboxes a parent made with --workdir-mode mount",
            p.short_id()
        ))
        .into());
    }
    ensure_running(p)
        .map_err(|e| Error::Sandbox(format!("cannot create a sub-sandbox: the parent {e}")))?;
    // The record may say Running while the container died behind our back.
    if p.isolation == Isolation::Container
        && !ctx
            .engine_for(p)
            .inspect(p.container_ref())
            .await?
            .is_some_and(|c| c.running)
    {
        return Err(Error::Sandbox(format!(
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
        return Err(Error::Refused(format!(
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
pub(super) fn configured_limits(cfg: &Config) -> Limits {
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
        return Err(Error::Usage(format!(
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
        Some(u) if req.user.is_some() && wanted != u => Err(Error::Refused(format!(
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
        Some(r) if Some(r) != p.runtime.as_ref() => Err(Error::Refused(format!(
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
        proxy: (record.limits.network == Network::Allowlist).then(|| match record.workdir_mode {
            WorkdirMode::Mount => {
                MountSource::Host(crate::sandbox::egress::socket_dir(ctx, record.id))
            }
            WorkdirMode::Copy => {
                MountSource::Volume(crate::sandbox::egress::socket_volume(ctx, record.id))
            }
        }),
        user_name: (user == Ids::current() && !user.is_root())
            .then(host_login_name)
            .flatten(),
        agent: match record.workdir_mode {
            WorkdirMode::Mount => AgentSetup::Mounted(AgentMount {
                root: crate::sandbox::agent::mount_root(ctx, record.id),
                binary,
                run_dir: crate::sandbox::agent::run_dir(ctx, record.id),
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
pub(in crate::sandbox) fn channel_connect_address(engine: &AnyEngine, port: u16) -> String {
    let host = std::env::var("H9SANDBOX_CHANNEL_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| engine.remote_host())
        .unwrap_or_else(|| "127.0.0.1".into());
    join_host_port(&host, port)
}

/// `HOST:PORT`, an IPv6 address in brackets.
pub(super) fn join_host_port(host: &str, port: u16) -> String {
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

/// `image` with the `:latest` tag an image reference without tag or digest means.
pub(super) fn with_tag(image: &str) -> String {
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
        return Err(Error::Usage(format!(
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
        Err(Error::Usage(format!(
            "invalid --name '{name}': use 2 or more of letters, digits, '_', '.', '-', starting with a letter or digit"
        )))
    }
}

/// Parses `K=V` labels; the `h9sandbox` namespace is reserved.
pub(crate) fn parse_labels(raw: &[String]) -> Result<BTreeMap<String, String>, Error> {
    let mut out = BTreeMap::new();
    for l in raw {
        let Some((k, v)) = l.split_once('=') else {
            return Err(Error::Usage(format!("invalid --label '{l}': expected K=V")));
        };
        if k.is_empty() {
            return Err(Error::Usage(format!(
                "invalid --label '{l}': the key is empty"
            )));
        }
        // A label is shown by `ls`, `docker inspect` and `ps` listings, and read back line by
        // line: a control character (newline, escape) would forge lines or drive the terminal.
        if l.chars().any(char::is_control) {
            return Err(Error::Usage(format!(
                "invalid --label {l:?}: it holds a control character (newline, tab, escape, ...); use printable text"
            )));
        }
        if k == LABEL_MANAGED || k.starts_with("h9sandbox.") {
            return Err(Error::Usage(format!(
                "invalid --label '{l}': keys `h9sandbox` and `h9sandbox.*` are reserved"
            )));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// The pool tag of a sandbox made for a pool (`pool fill`): waiting, not ready yet.
fn pool_tag(req: &UpRequest) -> Option<crate::state::PoolTag> {
    req.pool_member.as_ref().map(|name| crate::state::PoolTag {
        name: name.clone(),
        claimed_at: None,
        ready: false,
    })
}
