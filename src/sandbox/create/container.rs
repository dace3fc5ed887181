//! Starting the container: alongside `reap_on_up`'s sweep, interruptible, its limits verified,
//! and the fall back to a local sandbox when the engine is unreachable.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use uuid::Uuid;

use super::plan::{channel_connect_address, join_host_port, Plan};
use crate::config::Fallback;
use crate::engine::{
    AgentSetup, AnyEngine, ContainerSpec, ContainerStatus, Environment, Secret, LABEL_ID,
    LABEL_MANAGED,
};
use crate::error::Error;
use crate::poll::{poll_until, Backoff};
use crate::sandbox::reap::{self, Sweep};
use crate::sandbox::workdir::MountCheck;
use crate::sandbox::{interrupted, Ctx};
use crate::state::AgentRecord;
use crate::types::{EngineKind, Isolation};

/// Step 4: starts the container ([`start_container`]) alongside the `reap_on_up` sweep, and,
/// when the engine is unreachable and `fallback = "local"`, a local sandbox instead. Returns the
/// engine that ran the start and how the start went (the container ID, or why it failed, which
/// [`super::fail_pending`] cleans up after). Errors (outer): the state file, during the fallback.
pub(super) async fn start(ctx: &Ctx, plan: &Plan) -> Result<(AnyEngine, Result<Started>)> {
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
        let here = crate::sandbox::Target {
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
            started = Err(Error::Refused(format!(
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
pub(super) struct Started {
    pub(super) container: String,
    pub(super) agent: Option<AgentRecord>,
}

/// Creates the container ([`create_container`]) with a fresh run directory and token for its
/// agent, waits until it runs ([`wait_running`]), verifies its limits and mount
/// ([`verify_limits`]), and waits for its agent ([`crate::sandbox::agent::wait_ready`]).
pub(super) async fn start_container(
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
                    crate::sandbox::agent::prepare(ctx, id)?;
                }
                AgentSetup::Shipped(shipped) => {
                    shipped.secret =
                        Secret(crate::sandbox::agent::prepare_channel(ctx, id)?.to_frame());
                    ctx.reporter
                        .step("preparing the image with h9sandbox's agent");
                    shipped.image = agent_image(ctx, engine, &spec.image).await?;
                }
            }
            crate::sandbox::egress::start(ctx, engine, &spec, id).await?;
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
                crate::sandbox::agent::check_channel(
                    ctx,
                    engine,
                    &container_id,
                    id,
                    address,
                    inside,
                )
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
                Some(id) => crate::sandbox::agent::wait_ready(ctx, id).await,
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
/// to the engine as a hint ([`crate::sandbox::image_cache`]), and the answer kept for the next `up`.
async fn agent_image(ctx: &Ctx, engine: &AnyEngine, image: &str) -> Result<String> {
    let binary = crate::sandbox::agent::binary()?;
    let build = crate::sandbox::agent::binary_build(&binary)?;
    let target = crate::sandbox::Target {
        kind: engine.kind(),
        daemon: engine.daemon().cloned(),
    };
    let hint = crate::sandbox::image_cache::hint(ctx, &target, image);
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
        if let Err(e) = crate::sandbox::image_cache::remember(ctx, &target, image, &tag) {
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
pub(in crate::sandbox) async fn wait_running(
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
