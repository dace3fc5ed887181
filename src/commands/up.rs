//! `h9sandbox up`: record Pending, create the hardened container, wait until it really runs,
//! record Running (or Failed, removing the container), then run the bootstrap command if one is
//! configured. With `reap_on_up`, a [`reap::sweep`] of the state directory runs at the same time
//! as the container start (its engine calls overlap it, so `up` takes no longer); its failures are
//! warnings, never `up`'s.
//!
//! With `--parent`, the sandbox is a sub-sandbox: it takes its parent's image, limits, network and
//! work dir; flags given explicitly may only tighten them ([`child_limits`], [`child_workdir`]),
//! never loosen them, and configuration defaults do not apply to it.
//!
//! The container only counts as up once it runs with its limits in force. With
//! `engine = "local"`, or when the engine is unreachable and `fallback = "local"`, the sandbox is
//! local instead (no container, no isolation), which `up` says on stderr.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use uuid::Uuid;

use super::bootstrap;
use super::exec::{ensure_running, Sink};
use super::{reap, Ctx};
use crate::cli::{Format, UpArgs};
use crate::config::{parse_size, Config, Fallback, Ids, Network};
use crate::engine::{
    AnyEngine, ContainerSpec, ContainerStatus, EngineKind, Environment, Isolation, LABEL_ID,
    LABEL_MANAGED, LABEL_PARENT, LABEL_STATE_DIR, SCRATCH_DIR,
};
use crate::error::Error;
use crate::lease::{parse_owner, parse_ttl};
use crate::output;
use crate::progress::Spinner;
use crate::state::{now_rfc3339, BootstrapRun, Lifecycle, Limits, ProcessRef, Record};

/// The configuration keys `up`'s flags override, as [`Ctx::new`] takes them: (key, value,
/// flag). `ctx` must be built with these for [`create`] to see the flags' values.
pub fn config_flags(args: &UpArgs) -> Vec<(&'static str, Option<String>, &'static str)> {
    vec![
        ("image", args.image.clone(), "--image"),
        ("cpus", args.cpus.clone(), "--cpus"),
        ("memory", args.memory.clone(), "--memory"),
        ("pids_limit", args.pids_limit.clone(), "--pids-limit"),
        ("network", args.network.map(|n| n.to_string()), "--network"),
        ("bootstrap_cmd", args.bootstrap.clone(), "--bootstrap"),
        (
            "bootstrap_required",
            args.bootstrap_required.then(|| "true".to_string()),
            "--bootstrap-required",
        ),
        (
            "bootstrap_timeout_secs",
            args.bootstrap_timeout.map(|t| t.to_string()),
            "--bootstrap-timeout",
        ),
        ("user", args.user.clone(), "--user"),
    ]
}

/// Runs `up`; prints the ID (or the record as JSON) and returns 0.
pub async fn run(ctx: &Ctx, args: &UpArgs) -> Result<i32> {
    let rec = create(ctx, args).await?;
    match ctx.format {
        Format::Json => output::print_json(&rec)?,
        Format::Table => output::print_line(&rec.id.to_string())?,
    }
    Ok(0)
}

/// Creates a sandbox as `up` does and returns its Running record; prints nothing on stdout
/// (warnings, the bootstrap's output and, for `format` table on a terminal, the spinner go to
/// stderr). `ctx` carries the configuration with `args`' flags applied ([`config_flags`]).
/// Errors: invalid arguments, the engine's failures (the sandbox is then removed, or its record
/// marked Failed), an interrupting signal, a failed required bootstrap.
pub async fn create(ctx: &Ctx, args: &UpArgs) -> Result<Record> {
    let cfg = &ctx.cfg;
    let owner = args.owner_pid.as_deref().map(parse_owner).transpose()?;
    let ttl_secs = args.ttl.as_deref().map(parse_ttl).transpose()?;
    let parent = match &args.parent {
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
            if let Some(img) = args
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
            let limits = child_limits(&p.limits, &Tighten::explicit(args, cfg))?;
            (
                p.image.clone(),
                limits,
                child_workdir(p, args.workdir.as_deref())?,
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
            resolve_workdir(args.workdir.as_deref())?,
        ),
    };
    refuse_sensitive_workdir(&workdir, &protected_paths(ctx))?;
    let mount_check = MountCheck {
        identity: pin_workdir(&workdir)?,
        // Strictly inside another sandbox's work dir, that sandbox can swap the directory for a
        // symlink between our checks and the engine's mount.
        nested: ctx
            .store
            .load()?
            .sandboxes
            .iter()
            .any(|r| workdir.starts_with(&r.workdir) && workdir != r.workdir),
        workdir: workdir.clone(),
    };
    // A sub-sandbox runs as its parent's user; `--user` may not change it.
    let user = match parent.as_ref().and_then(|p| p.user) {
        Some(u) => {
            if args.user.is_some() && cfg.user().ids() != u {
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
        output::warn(&why);
    }
    let labels = parse_labels(&args.labels)?;
    let id = Uuid::new_v4();
    let name = match &args.name {
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

    let spinner = Spinner::new(ctx.format);
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
        start_interruptible(ctx, &engine, &spec, &mount_check, &spinner),
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
                if ctx.verbose > 0 {
                    for v in &s.reaped {
                        output::note(&format!("reaped {} ({})", v.name, v.detail));
                    }
                }
                for (v, e) in &s.failed {
                    output::warn(&format!(
                        "reap_on_up could not remove {} ({}): {e:#}",
                        v.name, v.detail
                    ));
                }
            }
            Some(Err(e)) => output::warn(&format!("reap_on_up failed: {e:#}")),
            None => {}
        }
    }
    if let Err(e) = &started {
        if let Some(Error::EngineUnavailable { bin, reason }) = e.downcast_ref::<Error>() {
            if engine.kind().isolation() == Isolation::Container
                && ctx.cfg.fallback == Fallback::Local
                && parent.is_none()
            {
                output::warn(&format!(
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
                started = start_interruptible(ctx, &engine, &spec, &mount_check, &spinner).await;
            }
        }
    }
    let isolation = engine.kind().isolation();
    let container_id = match started {
        Ok(c) => c,
        Err(e) => {
            drop(spinner);
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
        output::warn(&local_warning(&rec));
    }
    if let Some(cmd) = cfg.bootstrap() {
        // The command's output goes to stderr: stdout carries the ID (or the JSON record).
        let done = bootstrap::execute(ctx, &rec, cmd, &spinner, Sink::Stderr).await;
        drop(spinner);
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
            output::warn(&format!(
                "{why}; the sandbox is up without it (its record shows the bootstrap: `h9sandbox ls --format json`)"
            ));
        }
    } else {
        drop(spinner);
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

/// Limits a sub-sandbox asks for with explicit flags (`None`: inherit the parent's).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tighten {
    /// `--cpus`, in cores.
    pub cpus: Option<f64>,
    /// `--memory`, Docker notation.
    pub memory: Option<String>,
    /// `--pids-limit`.
    pub pids_limit: Option<u32>,
    /// `--network`.
    pub network: Option<Network>,
}

impl Tighten {
    /// The flags given on the command line, with the values the configuration validated. Values
    /// from the file or environment do not count: a sub-sandbox inherits its parent's instead.
    pub fn explicit(args: &UpArgs, cfg: &Config) -> Tighten {
        Tighten {
            cpus: args.cpus.is_some().then_some(cfg.cpus),
            memory: args.memory.is_some().then(|| cfg.memory.clone()),
            pids_limit: args.pids_limit.is_some().then_some(cfg.pids_limit),
            network: args.network,
        }
    }
}

/// A sub-sandbox's limits: the parent's, tightened by `req`. Asking for more than the parent has
/// is [`Error::Invalid`] naming the flag, the value and the parent's value.
pub fn child_limits(parent: &Limits, req: &Tighten) -> Result<Limits, Error> {
    let refuse = |flag: &str, asked: String, has: String| {
        Error::Invalid(format!(
            "{flag} {asked} exceeds the parent's {has}; a sub-sandbox may only tighten its parent's limits (give at most {has}, or leave {flag} out to inherit it)"
        ))
    };
    let mut out = parent.clone();
    if let Some(c) = req.cpus {
        if c > parent.cpus + 1e-9 {
            return Err(refuse("--cpus", c.to_string(), parent.cpus.to_string()));
        }
        out.cpus = c;
    }
    if let Some(m) = &req.memory {
        let asked = parse_size(m).map_err(|e| Error::Invalid(format!("--memory: {e}")))?;
        // A parent limit that does not parse (hand-edited file) cannot be compared: refuse.
        let has = parse_size(&parent.memory).unwrap_or(0);
        if asked > has {
            return Err(refuse("--memory", m.clone(), parent.memory.clone()));
        }
        out.memory = m.clone();
    }
    if let Some(p) = req.pids_limit {
        if p > parent.pids_limit {
            return Err(refuse(
                "--pids-limit",
                p.to_string(),
                parent.pids_limit.to_string(),
            ));
        }
        out.pids_limit = p;
    }
    if let Some(n) = req.network {
        if n == Network::Bridge && parent.network == Network::None {
            return Err(Error::Invalid(
                "--network bridge would give network access the parent does not have (its network is none); a sub-sandbox may only tighten its parent's limits (leave --network out)".into(),
            ));
        }
        out.network = n;
    }
    Ok(out)
}

/// A sub-sandbox's work dir: the parent's, or `dir` when it is the parent's or inside it.
pub fn child_workdir(parent: &Record, dir: Option<&Path>) -> Result<PathBuf> {
    let Some(dir) = dir else {
        return resolve_workdir(Some(&parent.workdir));
    };
    let canon = resolve_workdir(Some(dir))?;
    if !canon.starts_with(&parent.workdir) {
        return Err(Error::Invalid(format!(
            "--workdir {} is outside the parent's work dir {}; a sub-sandbox works in its parent's work dir or a directory inside it",
            canon.display(),
            parent.workdir.display()
        ))
        .into());
    }
    Ok(canon)
}

/// What `up` and `ls` say about a local sandbox, on stderr.
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
    spinner: &Spinner,
) -> Result<String> {
    tokio::select! {
        r = start(ctx, engine, spec, mount, spinner) => r,
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
    spinner: &Spinner,
) -> Result<String> {
    spinner.step("creating container");
    let container_id = match engine.create(spec).await {
        Err(e)
            if matches!(
                e.downcast_ref::<Error>(),
                Some(Error::ImageUnavailable { .. })
            ) =>
        {
            spinner.step(format!("pulling {}", spec.image));
            engine
                .pull(&spec.image, Duration::from_secs(ctx.cfg.pull_timeout_secs))
                .await?;
            spinner.step("creating container");
            engine.create(spec).await?
        }
        r => r?,
    };
    spinner.step("waiting for the container to run");
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

/// What the container's bind mount must be: the work directory `up` checked, identified by
/// device and inode, so that a directory swapped for a symlink between the checks and the
/// engine's `mount(2)` is caught.
struct MountCheck {
    workdir: PathBuf,
    identity: (u64, u64),
    nested: bool,
}

impl MountCheck {
    /// Compares the identity of what the container sees at the work dir with the checked one:
    /// through `/proc/PID/root` from the host when allowed (cheap: one `stat`), else, for a work
    /// dir nested in another sandbox's, with `stat` run in the fresh container (where only its
    /// init runs yet). Errors: a mismatch, which `up` turns into a Failed, removed sandbox.
    async fn verify(&self, engine: &AnyEngine, container: &str, pid: u32) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        let seen = if let Some(m) = (pid > 0)
            .then(|| std::fs::metadata(format!("/proc/{pid}/root{}", self.workdir.display())).ok())
            .flatten()
        {
            (m.dev(), m.ino())
        } else if self.nested {
            let spec = crate::engine::ExecSpec {
                command: format!(
                    "stat -c '%d %i' {}",
                    crate::engine::shell::shell_quote(&self.workdir.to_string_lossy())
                ),
                cwd: PathBuf::from("/"),
                env: vec![],
                interactive: false,
                marker: Uuid::new_v4().simple().to_string(),
            };
            let out = engine
                .exec_command(container, &spec)
                .stdin(std::process::Stdio::null())
                .output()
                .await
                .context("cannot check the container's work dir mount")?;
            let text = String::from_utf8_lossy(&out.stdout);
            let mut f = text.split_whitespace().map(|w| w.parse::<u64>());
            match (f.next(), f.next()) {
                (Some(Ok(d)), Some(Ok(i))) => (d, i),
                _ => anyhow::bail!(
                    "cannot check the container's work dir mount (`stat` in the container said: {})",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            }
        } else {
            return Ok(());
        };
        if seen != self.identity {
            anyhow::bail!(
                "the container mounted another directory than the work dir {} that was checked (it was replaced while the container started); refusing it",
                self.workdir.display()
            );
        }
        Ok(())
    }
}

/// The work dir's identity (device, inode), opened through a path that holds no symlink (the
/// canonical path has none; one appearing means the path was tampered with).
fn pin_workdir(dir: &Path) -> Result<(u64, u64)> {
    use rustix::fs::{openat2, Mode, OFlags, ResolveFlags, CWD};
    let fd = openat2(
        CWD,
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| {
        Error::Invalid(format!(
            "work directory {} changed while it was checked ({e}); try again",
            dir.display()
        ))
    })?;
    let st = rustix::fs::fstat(&fd).map_err(std::io::Error::from)?;
    Ok((st.st_dev, st.st_ino))
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

/// Resolves when SIGINT, SIGTERM or SIGHUP arrives; yields the signal's name.
pub async fn interrupted() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
        _ = hup.recv() => "SIGHUP",
    }
}

/// The canonical work directory: `dir` or the current directory; must exist and be a directory
/// whose path can be bind-mounted exactly.
pub fn resolve_workdir(dir: Option<&Path>) -> Result<PathBuf> {
    let given = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let canon = given.canonicalize().map_err(|e| {
        Error::Invalid(format!(
            "work directory {} cannot be used: {e}; create it or pass an existing --workdir",
            given.display()
        ))
    })?;
    if !canon.is_dir() {
        return Err(Error::Invalid(format!(
            "work directory {} is not a directory; pass a directory with --workdir",
            canon.display()
        ))
        .into());
    }
    let Some(text) = canon.to_str() else {
        return Err(Error::Invalid(format!(
            "work directory {} is not valid UTF-8, which the engine cannot mount; rename it",
            canon.display()
        ))
        .into());
    };
    if text.chars().any(|c| c.is_control()) {
        return Err(Error::Invalid(format!(
            "work directory {text:?} contains a control character (newline, tab, ...), which the engine cannot mount exactly; rename it"
        ))
        .into());
    }
    if canon == Path::new("/") {
        return Err(Error::Invalid(
            "the host's root directory cannot be the work directory (it would be mounted over the container's /); pass a project directory with --workdir".into(),
        )
        .into());
    }
    if Path::new(SCRATCH_DIR).starts_with(&canon) {
        return Err(Error::Invalid(format!(
            "work directory {text} holds the sandbox's scratch directory {SCRATCH_DIR}, which is mounted there; pass a project directory with --workdir"
        ))
        .into());
    }
    Ok(canon)
}

/// Paths the sandbox must never be able to write through its bind mount: h9sandbox's own state
/// and configuration (rewriting them would steer the host side), the caller's home directory
/// (shell start-up files), and the engine's socket (driving the engine is root on the host).
pub fn protected_paths(ctx: &Ctx) -> Vec<(PathBuf, &'static str)> {
    let mut v = vec![(ctx.store.dir().to_path_buf(), "h9sandbox's state directory")];
    if let Some(d) = crate::config::xdg_dir("XDG_CONFIG_HOME", ".config") {
        v.push((d.join("h9sandbox"), "h9sandbox's configuration directory"));
    }
    if let Some(h) = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
    {
        v.push((h, "your home directory"));
    }
    if let Some(sock) = std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(PathBuf::from))
    {
        v.push((sock, "the engine's socket"));
    }
    for sock in [
        "/run/docker.sock",
        "/var/run/docker.sock",
        "/run/podman/podman.sock",
    ] {
        v.push((PathBuf::from(sock), "the engine's socket"));
    }
    for dir in SYSTEM_DIRS {
        v.push((PathBuf::from(dir), "a system directory"));
    }
    v
}

/// Host directories whose contents a sandbox must not be able to change or read.
const SYSTEM_DIRS: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var/run",
    "/boot",
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/var/lib/docker",
    "/var/lib/containers",
    "/tmp",
];

/// Refuses a work directory that is, contains, or (for the kernel's and h9sandbox's own
/// directories) lies inside one of `protected` paths.
pub fn refuse_sensitive_workdir(
    workdir: &Path,
    protected: &[(PathBuf, &str)],
) -> Result<(), Error> {
    const NEVER_INSIDE: &[&str] = &["/proc", "/sys", "/dev", "/run", "/var/run", "/boot", "/etc"];
    // Both spellings count: a symlinked path (/var/run -> /run) is reachable either way.
    let both = protected.iter().flat_map(|(p, what)| {
        let canon = p.canonicalize().ok().filter(|c| c != p);
        std::iter::once((p.clone(), *what)).chain(canon.map(|c| (c, *what)))
    });
    for (p, what) in both {
        let inside_forbidden =
            NEVER_INSIDE.iter().any(|d| Path::new(d) == p) && workdir.starts_with(&p);
        if p.starts_with(workdir) || inside_forbidden {
            return Err(Error::Invalid(format!(
                "work directory {} {} {what} {}, which the sandbox could then change; use a project directory instead",
                workdir.display(),
                if p.starts_with(workdir) && p != workdir { "contains" } else if workdir == p { "is" } else { "lies in" },
                p.display()
            )));
        }
    }
    Ok(())
}

/// Why a sandbox running as `user` probably cannot write to `workdir` (owner and mode bits of
/// the directory; supplementary groups and ACLs are not considered), or `None` when it can.
pub fn unwritable_for(workdir: &Path, user: Ids) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if user.is_root() {
        return None;
    }
    let m = std::fs::metadata(workdir).ok()?;
    let mode = m.mode();
    let writable = (m.uid() == user.uid && mode & 0o200 != 0)
        || (m.gid() == user.gid && mode & 0o020 != 0)
        || mode & 0o002 != 0;
    (!writable).then(|| {
        format!(
            "the work dir {} belongs to {}:{} (mode {:o}), so the sandbox's user {user} may not write to it; `chown {user}` it or choose another `user`",
            workdir.display(),
            m.uid(),
            m.gid(),
            mode & 0o7777
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

    fn limits() -> Limits {
        Limits {
            cpus: 1.0,
            memory: "512m".into(),
            pids_limit: 100,
            tmp_size: "64m".into(),
            network: Network::Bridge,
        }
    }

    #[test]
    fn children_inherit_and_may_only_tighten() {
        let p = limits();
        assert_eq!(child_limits(&p, &Tighten::default()).unwrap(), p);
        let tight = child_limits(
            &p,
            &Tighten {
                cpus: Some(0.5),
                memory: Some("0.5g".into()),
                pids_limit: Some(100),
                network: Some(Network::None),
            },
        )
        .unwrap();
        assert_eq!(
            (
                tight.cpus,
                tight.memory.as_str(),
                tight.pids_limit,
                tight.network
            ),
            (0.5, "0.5g", 100, Network::None)
        );
        assert_eq!(tight.tmp_size, "64m");
        let err = |t: Tighten| child_limits(&p, &t).unwrap_err().to_string();
        let e = err(Tighten {
            memory: Some("1g".into()),
            ..Default::default()
        });
        assert!(
            e.starts_with("--memory 1g exceeds the parent's 512m"),
            "{e}"
        );
        let e = err(Tighten {
            cpus: Some(1.5),
            ..Default::default()
        });
        assert!(e.starts_with("--cpus 1.5 exceeds the parent's 1"), "{e}");
        let e = err(Tighten {
            pids_limit: Some(101),
            ..Default::default()
        });
        assert!(
            e.starts_with("--pids-limit 101 exceeds the parent's 100"),
            "{e}"
        );
        let closed = Limits {
            network: Network::None,
            ..limits()
        };
        let e = child_limits(
            &closed,
            &Tighten {
                network: Some(Network::Bridge),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--network bridge"), "{e}");
    }

    #[test]
    fn sensitive_workdirs_are_refused() {
        let prot: Vec<(PathBuf, &str)> = vec![
            ("/home/me".into(), "your home directory"),
            (
                "/home/me/.local/state/h9sandbox".into(),
                "h9sandbox's state directory",
            ),
            ("/var/run/docker.sock".into(), "the engine's socket"),
            ("/etc".into(), "a system directory"),
            ("/usr".into(), "a system directory"),
        ];
        let refused = |w: &str| refuse_sensitive_workdir(Path::new(w), &prot).is_err();
        assert!(refused("/home/me"));
        assert!(refused("/home"));
        assert!(refused("/var"));
        assert!(refused("/etc"));
        assert!(refused("/etc/nginx"));
        assert!(refused("/usr"));
        assert!(!refused("/usr/local/src/project"));
        assert!(!refused("/home/me/project"));
        assert!(!refused("/srv/ci/job-1"));
    }

    #[test]
    fn unwritable_work_dirs_are_told() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let me = Ids::current();
        let other = Ids {
            uid: me.uid.wrapping_add(4242),
            gid: me.gid.wrapping_add(4242),
        };
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(unwritable_for(d.path(), Ids::ROOT), None);
        let why = unwritable_for(d.path(), other).unwrap();
        assert!(
            why.contains(&other.to_string()) && why.contains("755"),
            "{why}"
        );
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(unwritable_for(d.path(), other), None);
    }

    #[test]
    fn workdir_must_exist_and_not_be_root() {
        assert!(resolve_workdir(Some(Path::new("/nonexistent/dir"))).is_err());
        assert!(resolve_workdir(Some(Path::new("/"))).is_err());
        // The scratch directory is mounted at /var/tmp: neither it nor /var can be the work dir.
        assert!(resolve_workdir(Some(Path::new("/var/tmp"))).is_err());
        assert!(resolve_workdir(Some(Path::new("/var"))).is_err());
        let d = tempfile::tempdir().unwrap();
        let weird = d.path().join("a b:c,d");
        std::fs::create_dir(&weird).unwrap();
        assert_eq!(
            resolve_workdir(Some(&weird)).unwrap(),
            weird.canonicalize().unwrap()
        );
        let nl = d.path().join("a\nb");
        std::fs::create_dir(&nl).unwrap();
        assert!(resolve_workdir(Some(&nl)).is_err());
    }
}
