//! `h9sandbox up`: record Pending, create the hardened container, wait until it really runs,
//! record Running (or Failed, removing the container). With `reap_on_up`, a [`reap::sweep`] of
//! the state directory runs at the same time (its engine calls overlap the container start, so
//! `up` takes no longer); its failures are warnings, never `up`'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use uuid::Uuid;

use super::{reap, Ctx};
use crate::cli::{Format, UpArgs};
use crate::engine::{ContainerSpec, Environment, LABEL_ID, LABEL_MANAGED, LABEL_STATE_DIR};
use crate::error::Error;
use crate::lease::{parse_owner, parse_ttl};
use crate::output;
use crate::state::{now_rfc3339, Lifecycle, Limits, ProcessRef, Record};

/// Runs `up`; prints the ID (or the record as JSON) and returns 0.
pub async fn run(ctx: &Ctx, args: &UpArgs) -> Result<i32> {
    let (record, spec) = plan(ctx, args)?;
    let sweep = async {
        if ctx.cfg.reap_on_up {
            Some(reap::sweep(ctx, false).await)
        } else {
            None
        }
    };
    let (rec, swept) = tokio::join!(launch(ctx, record, &spec), sweep);
    // A failed `up` reports its own error only: the sweep's would mostly repeat it.
    if rec.is_ok() {
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
    let rec = rec?;
    match ctx.format {
        Format::Json => output::print_json(&rec)?,
        Format::Table => output::print_line(&rec.id.to_string())?,
    }
    Ok(0)
}

/// Checks the arguments; returns the Pending record and the container to create.
fn plan(ctx: &Ctx, args: &UpArgs) -> Result<(Record, ContainerSpec)> {
    let workdir = resolve_workdir(args.workdir.as_deref())?;
    let labels = parse_labels(&args.labels)?;
    let owner = args.owner_pid.as_deref().map(parse_owner).transpose()?;
    let ttl_secs = args.ttl.as_deref().map(parse_ttl).transpose()?;
    let id = Uuid::new_v4();
    let name = match &args.name {
        Some(n) => {
            validate_name(n)?;
            n.clone()
        }
        None => format!("h9sandbox-{}", &id.simple().to_string()[..12]),
    };
    let cfg = &ctx.cfg;
    let now = now_rfc3339();
    let mut record = Record {
        id,
        name: name.clone(),
        state: Lifecycle::Pending,
        container_id: None,
        image: cfg.image.clone(),
        workdir: workdir.clone(),
        limits: Limits {
            cpus: cfg.cpus,
            memory: cfg.memory.clone(),
            pids_limit: cfg.pids_limit,
            tmp_size: cfg.tmp_size.clone(),
            network: cfg.network,
        },
        labels: labels.clone(),
        created_at: now.clone(),
        updated_at: now,
        error: None,
        creator: ProcessRef::current(),
        owner,
        expires_at: None,
        ttl_secs,
        stopper: None,
    };
    record.start_lease(SystemTime::now())?;
    let mut all_labels = labels;
    all_labels.insert(LABEL_MANAGED.into(), "1".into());
    all_labels.insert(LABEL_ID.into(), id.to_string());
    all_labels.insert(LABEL_STATE_DIR.into(), ctx.state_label());
    let spec = ContainerSpec {
        name: name.clone(),
        image: cfg.image.clone(),
        workdir,
        limits: record.limits.clone(),
        labels: all_labels,
    };
    Ok((record, spec))
}

/// Records the sandbox, starts its container and returns the Running record.
async fn launch(ctx: &Ctx, record: Record, spec: &ContainerSpec) -> Result<Record> {
    let (id, name) = (record.id, &record.name);
    // Pending goes on record before the container exists, so a crash leaves a trace.
    ctx.store.update(|s| {
        if s.sandboxes.iter().any(|r| &r.name == name) {
            return Err(Error::NameInUse(name.clone()).into());
        }
        s.sandboxes.push(record.clone());
        Ok(())
    })?;

    let started = tokio::select! {
        r = start(ctx, spec) => r,
        sig = interrupted() => Err(anyhow::anyhow!("interrupted by {sig}")),
    };
    match started {
        Ok(container_id) => {
            let rec = ctx.store.update(|s| {
                let r = s.get_mut(id).context(
                    "the sandbox's record vanished from the state file while it started",
                )?;
                r.container_id = Some(container_id.clone());
                r.set_state(Lifecycle::Running, None);
                // The lease runs from the moment the sandbox is usable.
                r.start_lease(SystemTime::now())?;
                Ok(r.clone())
            });
            match rec {
                Ok(r) => Ok(r),
                Err(e) => {
                    let _ = ctx.engine.remove(&container_id).await;
                    Err(e)
                }
            }
        }
        Err(e) => {
            // Remove whatever was created; by label, since a failed `run` prints no ID.
            let _ = ctx.engine.remove_labelled(LABEL_ID, &id.to_string()).await;
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
            Err(e)
        }
    }
}

/// Creates the container (pulling the image once if it is missing) and waits until it runs.
async fn start(ctx: &Ctx, spec: &ContainerSpec) -> Result<String> {
    let container_id = match ctx.engine.create(spec).await {
        Err(e)
            if matches!(
                e.downcast_ref::<Error>(),
                Some(Error::ImageUnavailable { .. })
            ) =>
        {
            ctx.engine
                .pull(&spec.image, Duration::from_secs(ctx.cfg.pull_timeout_secs))
                .await?;
            ctx.engine.create(spec).await?
        }
        r => r?,
    };
    wait_running(
        ctx,
        &container_id,
        Duration::from_secs(ctx.cfg.start_timeout_secs),
    )
    .await?;
    Ok(container_id)
}

/// Polls the container's `State.Running` right away, then with back-off (10 ms doubling to
/// 200 ms), until it runs or `timeout` passes.
async fn wait_running(ctx: &Ctx, container: &str, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut delay = Duration::from_millis(10);
    loop {
        match ctx.engine.inspect(container).await? {
            Some(s) if s.running => return Ok(()),
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
    Ok(canon)
}

/// Checks a container name against the engine's rule `[a-zA-Z0-9][a-zA-Z0-9_.-]+`.
pub fn validate_name(name: &str) -> Result<(), Error> {
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
        for bad in ["", "a", "-x", "a b", "a/b", "é1"] {
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

    #[test]
    fn workdir_must_exist_and_not_be_root() {
        assert!(resolve_workdir(Some(Path::new("/nonexistent/dir"))).is_err());
        assert!(resolve_workdir(Some(Path::new("/"))).is_err());
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
