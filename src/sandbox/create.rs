//! Creating a sandbox (`up`): record Pending, create the hardened container, wait until it
//! really runs, record Running (or Failed, removing the container), then run the bootstrap
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
use super::subsandbox::{child_limits, child_workdir, Tighten};
use super::workdir::{
    protected_paths, refuse_sensitive_workdir, resolve_workdir, unwritable_for, MountCheck,
};
use super::{bootstrap, interrupted, reap, Ctx};
use crate::config::{Config, Fallback};
use crate::engine::{
    AnyEngine, ContainerSpec, ContainerStatus, EngineKind, Environment, Isolation, LABEL_ID,
    LABEL_MANAGED, LABEL_PARENT, LABEL_STATE_DIR,
};
use crate::error::Error;
use crate::lease::{parse_owner, parse_ttl};
use crate::state::{now_rfc3339, BootstrapRun, Lifecycle, ProcessRef, Record};
use crate::types::{Limits, Network};

/// What to create: `up`'s arguments, each `None` (or empty, or false) when not given. The limits,
/// image, user and bootstrap settings reach [`create`] through the configuration
/// ([`UpRequest::config_flags`]); the rest it reads from here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpRequest {
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
}

impl UpRequest {
    /// The configuration keys the request overrides, as [`Ctx::from_layers`] takes them: (key,
    /// value, flag). The context must be built with these for [`create`] to see the values;
    /// a bad value is reported with its flag (`--cpus`, ...).
    pub fn config_flags(&self) -> Vec<(&'static str, Option<String>, &'static str)> {
        vec![
            ("image", self.image.clone(), "--image"),
            ("cpus", self.cpus.clone(), "--cpus"),
            ("memory", self.memory.clone(), "--memory"),
            ("pids_limit", self.pids_limit.clone(), "--pids-limit"),
            ("network", self.network.map(|n| n.to_string()), "--network"),
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
        ]
    }
}

/// Creates a sandbox as `up` does and returns its Running record. Prints nothing: warnings and
/// steps go to `ctx.reporter`, the bootstrap's output to stderr. `ctx` carries the configuration
/// with `req`'s flags applied ([`UpRequest::config_flags`]).
/// Errors: invalid arguments, the engine's failures (the sandbox is then removed, or its record
/// marked Failed), an interrupting signal, a failed required bootstrap.
pub async fn create(ctx: &Ctx, req: &UpRequest) -> Result<Record> {
    let cfg = &ctx.cfg;
    let owner = req.owner_pid.as_deref().map(parse_owner).transpose()?;
    let ttl_secs = req.ttl.as_deref().map(parse_ttl).transpose()?;
    let parent = match &req.parent {
        Some(q) => {
            let state = ctx.store.load()?;
            let p = state.resolve(q)?;
            ensure_running(p).map_err(|e| {
                Error::Invalid(format!("cannot create a sub-sandbox: the parent {e}"))
            })?;
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
            Some(p.clone())
        }
        None => None,
    };
    let (image, limits, workdir) = match &parent {
        Some(p) => {
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
            let limits = child_limits(&p.limits, &Tighten::explicit(req, cfg))?;
            (
                p.image.clone(),
                limits,
                child_workdir(p, req.workdir.as_deref())?,
            )
        }
        None => (
            cfg.image.clone(),
            Limits {
                cpus: cfg.cpus,
                memory: cfg.memory.clone(),
                pids_limit: cfg.pids_limit,
                tmp_size: cfg.tmp_size.clone(),
                network: cfg.network,
            },
            resolve_workdir(req.workdir.as_deref())?,
        ),
    };
    refuse_sensitive_workdir(&workdir, &protected_paths(ctx))?;
    let mount_check = MountCheck::pin(ctx, &workdir)?;
    // A sub-sandbox runs as its parent's user; `--user` may not change it.
    let user = match parent.as_ref().and_then(|p| p.user) {
        Some(u) => {
            if req.user.is_some() && cfg.user().ids() != u {
                return Err(Error::Invalid(format!(
                    "--user {} differs from the parent's {u}; a sub-sandbox runs as its parent's user (leave --user out)",
                    cfg.user().ids()
                ))
                .into());
            }
            u
        }
        None => cfg.user().ids(),
    };
    if let Some(why) = unwritable_for(&workdir, user) {
        ctx.reporter.warn(&why);
    }
    let labels = parse_labels(&req.labels)?;
    let id = Uuid::new_v4();
    let name = match &req.name {
        Some(n) => {
            validate_name(n)?;
            n.clone()
        }
        None => format!("h9sandbox-{}", &id.simple().to_string()[..12]),
    };
    let now = now_rfc3339();
    // A sub-sandbox runs on its parent's engine.
    let mut engine = match &parent {
        Some(p) => ctx.engine_for(p),
        None => ctx.engine.clone(),
    };
    let mut record = Record {
        id,
        name: name.clone(),
        state: Lifecycle::Pending,
        engine: engine.kind(),
        isolation: engine.kind().isolation(),
        container_id: None,
        image: image.clone(),
        workdir: workdir.clone(),
        limits,
        labels: labels.clone(),
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
        stopper: None,
    };
    record.start_lease(SystemTime::now())?;
    // Pending goes on record before the container exists, so a crash leaves a trace. The parent
    // is checked again under the lock: `down` of the parent marks it Stopping first, so a child is
    // either seen (and removed) by that `down`, or refused here.
    ctx.store.update(|s| {
        // A Failed record keeps its name only until a new sandbox wants it (its container is gone).
        s.sandboxes
            .retain(|r| !(r.name == name && r.state == Lifecycle::Failed));
        if s.sandboxes.iter().any(|r| r.name == name) {
            return Err(Error::NameInUse(name.clone()).into());
        }
        if let Some(p) = &parent {
            let now = s
                .get(p.id)
                .ok_or_else(|| Error::NotFound(p.id.to_string()))?;
            ensure_running(now).map_err(|e| {
                Error::Invalid(format!("cannot create a sub-sandbox: the parent {e}"))
            })?;
        }
        s.sandboxes.push(record.clone());
        Ok(())
    })?;

    let mut all_labels = labels;
    all_labels.insert(LABEL_MANAGED.into(), "1".into());
    all_labels.insert(LABEL_ID.into(), id.to_string());
    all_labels.insert(LABEL_STATE_DIR.into(), ctx.state_label());
    if let Some(p) = &parent {
        all_labels.insert(LABEL_PARENT.into(), p.id.to_string());
    }
    let spec = ContainerSpec {
        name: name.clone(),
        image,
        workdir,
        limits: record.limits.clone(),
        labels: all_labels,
        user,
    };

    let sweep = async {
        if ctx.cfg.reap_on_up {
            Some(reap::sweep(ctx, false).await)
        } else {
            None
        }
    };
    // Every state directory with live containers: none may lie in the work dir, or the sandbox
    // could rewrite its records (engine, container, work dir) and steer another session's
    // commands to the host. Listed alongside the start, checked before the sandbox is usable.
    let others = async {
        if engine.kind().isolation() == Isolation::Container {
            engine.list(&[(LABEL_MANAGED, "1")]).await.ok()
        } else {
            None
        }
    };
    let (mut started, swept, others) = tokio::join!(
        start_interruptible(ctx, &engine, &spec, &mount_check),
        sweep,
        others
    );
    if let (Ok(c), Some(list)) = (&started, &others) {
        let own = ctx.state_label();
        if let Some(d) = list
            .iter()
            .filter_map(|s| s.state_dir.as_deref())
            .find(|d| *d != own && Path::new(d).starts_with(&spec.workdir))
        {
            let _ = engine.remove(c).await;
            started = Err(Error::Invalid(format!(
                "work directory {} contains the state directory {d} of other sandboxes, which this sandbox could then rewrite; use a directory that does not hold one",
                spec.workdir.display()
            ))
            .into());
        }
    }
    // A failed `up` reports its own error only: the sweep's would mostly repeat it.
    if started.is_ok() {
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
    if let Err(e) = &started {
        if let Some(Error::EngineUnavailable { bin, reason }) = e.downcast_ref::<Error>() {
            if engine.kind().isolation() == Isolation::Container
                && ctx.cfg.fallback == Fallback::Local
                && parent.is_none()
            {
                ctx.reporter.warn(&format!(
                    "{} is unreachable ({reason}; see `{bin} info`). fallback = \"local\": \
                     sandbox {} is created WITHOUT A CONTAINER; its commands run directly on this host",
                    engine.kind(),
                    &id.simple().to_string()[..12]
                ));
                ctx.store.update(|s| {
                    let r = s.get_mut(id).context(
                        "the sandbox's record vanished from the state file while it started",
                    )?;
                    r.engine = EngineKind::Local;
                    r.isolation = Isolation::None;
                    Ok(())
                })?;
                engine = ctx.engine_of(EngineKind::Local);
                started = start_interruptible(ctx, &engine, &spec, &mount_check).await;
            }
        }
    }
    let isolation = engine.kind().isolation();
    let container_id = match started {
        Ok(c) => c,
        Err(e) => {
            // Remove whatever was created; by label, since a failed `run` prints no ID.
            let _ = engine.remove_labelled(LABEL_ID, &id.to_string()).await;
            // Nothing of ours was created when the name belongs to a container we do not manage,
            // or when the engine could not be reached: then the record goes, as if `up` never ran.
            let nothing_created = matches!(
                e.downcast_ref::<Error>(),
                Some(Error::NameInUse(_) | Error::EngineUnavailable { .. })
            );
            let reason = format!("{e:#}");
            let _ = ctx.store.update(|s| {
                if nothing_created {
                    s.sandboxes.retain(|r| r.id != id);
                } else if let Some(r) = s.get_mut(id) {
                    r.set_state(Lifecycle::Failed, Some(reason.clone()));
                }
                Ok(())
            });
            if let Some(Error::EngineUnavailable { bin, reason }) = e.downcast_ref::<Error>() {
                if ctx.cfg.fallback == Fallback::Fail && parent.is_none() {
                    return Err(Error::EngineUnavailable {
                        bin: bin.clone(),
                        reason: format!(
                            "{reason}; or set fallback = \"local\" to run sandboxes without isolation meanwhile"
                        ),
                    }
                    .into());
                }
            }
            return Err(e);
        }
    };
    let rec = ctx.store.update(|s| {
        let r = s
            .get_mut(id)
            .context("the sandbox's record vanished from the state file while it started")?;
        r.container_id = (isolation == Isolation::Container).then(|| container_id.clone());
        r.set_state(Lifecycle::Running, None);
        // The lease runs from the moment the sandbox is usable.
        r.start_lease(SystemTime::now())?;
        Ok(r.clone())
    });
    let mut rec = match rec {
        Ok(r) => r,
        Err(e) => {
            let _ = engine.remove(&container_id).await;
            return Err(e);
        }
    };
    if isolation == Isolation::None {
        ctx.reporter.warn(&local_warning(&rec));
    }
    if let Some(cmd) = cfg.bootstrap() {
        // The command's output goes to stderr: stdout carries the ID (or the JSON record).
        let done = bootstrap::execute(ctx, &rec, cmd, Sink::Stderr).await;
        if let Some(sig) = done.interrupted {
            let why = format!("interrupted by {sig} during the bootstrap");
            return Err(abort(ctx, &rec, why).await);
        }
        let failure = (!done.run.succeeded()).then(|| bootstrap_failure(&done.run, cfg));
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
            ctx.reporter.warn(&format!(
                "{why}; the sandbox is up without it (its record shows the bootstrap: `h9sandbox ls --format json`)"
            ));
        }
    }
    Ok(rec)
}

/// One line on why a recorded bootstrap failed.
fn bootstrap_failure(run: &BootstrapRun, cfg: &Config) -> String {
    if run.timed_out {
        format!(
            "bootstrap `{}` timed out after {}s (bootstrap_timeout_secs) and its process tree was killed",
            run.cmd, cfg.bootstrap_timeout_secs
        )
    } else if let Some(e) = &run.error {
        format!("bootstrap `{}` could not run: {e}", run.cmd)
    } else {
        format!(
            "bootstrap `{}` exited with status {}",
            run.cmd, run.exit_code
        )
    }
}

/// Removes a started sandbox's container and marks its record Failed with `reason`; returns the
/// error `up` fails with.
async fn abort(ctx: &Ctx, rec: &Record, reason: String) -> anyhow::Error {
    let removed = ctx.engine_for(rec).remove(rec.container_ref()).await;
    let _ = ctx.store.update(|s| {
        if let Some(r) = s.get_mut(rec.id) {
            r.set_state(Lifecycle::Failed, Some(reason.clone()));
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
pub fn local_warning(rec: &Record) -> String {
    format!(
        "sandbox {} is local (engine = \"local\", isolation: none): its commands run directly on this host as user {}, with no container, no resource limits and no network restrictions",
        rec.short_id(),
        rustix::process::geteuid().as_raw()
    )
}

/// [`start`], given up on SIGINT, SIGTERM or SIGHUP.
async fn start_interruptible(
    ctx: &Ctx,
    engine: &AnyEngine,
    spec: &ContainerSpec,
    mount: &MountCheck,
) -> Result<String> {
    tokio::select! {
        r = start(ctx, engine, spec, mount) => r,
        sig = interrupted() => Err(anyhow::anyhow!("interrupted by {sig}")),
    }
}

/// Creates the container (pulling the image once if it is missing), waits until it runs, and
/// checks that the engine applied every resource limit.
async fn start(
    ctx: &Ctx,
    engine: &AnyEngine,
    spec: &ContainerSpec,
    mount: &MountCheck,
) -> Result<String> {
    ctx.reporter.step("creating container");
    let container_id = match engine.create(spec).await {
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
            engine.create(spec).await?
        }
        r => r?,
    };
    ctx.reporter.step("waiting for the container to run");
    let status = wait_running(
        engine,
        &container_id,
        Duration::from_secs(ctx.cfg.start_timeout_secs),
    )
    .await?;
    if engine.kind().isolation() == Isolation::Container {
        let applied = status.applied.ok_or_else(|| {
            anyhow::anyhow!("the engine did not report the container's resource limits; refusing to run a sandbox whose limits cannot be checked")
        })?;
        applied.check(&spec.limits).map_err(anyhow::Error::msg)?;
        mount.verify(engine, &container_id, status.pid).await?;
    }
    Ok(container_id)
}

/// Polls the container's `State.Running` right away, then with back-off (10 ms doubling to
/// 200 ms), until it runs or `timeout` passes. Returns the running container's status.
async fn wait_running(
    engine: &AnyEngine,
    container: &str,
    timeout: Duration,
) -> Result<ContainerStatus> {
    let deadline = Instant::now() + timeout;
    let mut delay = Duration::from_millis(10);
    loop {
        match engine.inspect(container).await? {
            Some(s) if s.running => return Ok(s),
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
            Some(_) => {}
        }
        if Instant::now() >= deadline {
            anyhow::bail!(
                "the container did not reach Running within {}s (start_timeout_secs)",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(delay.min(deadline.saturating_duration_since(Instant::now()))).await;
        delay = (delay * 2).min(Duration::from_millis(200));
    }
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
pub fn validate_name(name: &str) -> Result<(), Error> {
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
pub fn parse_labels(raw: &[String]) -> Result<BTreeMap<String, String>, Error> {
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

    #[test]
    fn labels_parse_and_reserve_our_namespace() {
        let l = parse_labels(&["a=1".into(), "b=x=y".into(), "c=".into()]).unwrap();
        assert_eq!(l["b"], "x=y");
        assert_eq!(l["c"], "");
        for bad in ["novalue", "=v", "h9sandbox=2", "h9sandbox.id=x"] {
            assert!(parse_labels(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
