//! A sandbox's container between `up` and `down`: `stop` and `start` (the container and its
//! scratch volume are kept; after a daemon restart or a reboot, `start` brings a sandbox back),
//! `pause` and `resume` (every process frozen by the cgroup freezer), `snapshot` (its file
//! system, not its work dir nor its scratch volume, committed to a local image that `up --image`
//! starts from), and the check every command makes that its work dir is still the one the
//! container mounted.

use std::time::Duration;

use anyhow::{Context, Result};

use super::create::wait_running;
use super::workdir::MountCheck;
use super::Ctx;
use crate::engine::{ContainerVerb, Environment};
use crate::error::Error;
use crate::state::{Lifecycle, Record};
use crate::types::Isolation;

/// Fails when the work dir of `rec` is not the directory its container mounted (deleted and
/// made again, or replaced by a symlink, since `up`): the sandbox would go on seeing the old
/// one while the host's file commands see the new one. Records made before the identity was
/// recorded, and local sandboxes, pass.
pub(crate) fn check_workdir(rec: &Record) -> Result<(), Error> {
    use std::os::unix::fs::MetadataExt;
    let Some(want) = rec.workdir_id else {
        return Ok(());
    };
    if rec.isolation == Isolation::None {
        return Ok(());
    }
    let meta = std::fs::symlink_metadata(&rec.workdir).ok();
    let now = meta
        .as_ref()
        .filter(|m| m.is_dir())
        .map(|m| [m.dev(), m.ino()]);
    if now == Some(want) {
        return Ok(());
    }
    let what = match &meta {
        Some(m) if m.file_type().is_symlink() => "was replaced by a symlink since `up`",
        Some(_) => "was replaced since `up` (deleted and made again, e.g. by a fresh clone)",
        None => "no longer exists",
    };
    Err(Error::Sandbox(format!(
        "the work directory {} of sandbox {} {what}, so the sandbox no longer sees it; `h9sandbox down {}` and `up` again",
        rec.workdir.display(),
        rec.short_id(),
        rec.short_id()
    )))
}

/// The record of sandbox `query`, which must have a container (not a local sandbox).
fn container_record(ctx: &Ctx, query: &str, verb: &str) -> Result<Record> {
    let state = ctx.store.load()?;
    let rec = state.resolve(query)?.clone();
    if rec.isolation == Isolation::None {
        return Err(Error::Refused(format!(
            "sandbox {} is local (no container): there is nothing to {verb}",
            rec.short_id()
        ))
        .into());
    }
    if !ctx.engine_for(&rec).capabilities().lifecycle {
        return Err(Error::Refused(format!(
            "sandbox {} runs on engine {}, whose sandboxes cannot {verb} (a swarm service's task is never stopped, restarted, frozen or committed as the same container); `h9sandbox down {}` and `up` again",
            rec.short_id(),
            rec.engine,
            rec.short_id()
        ))
        .into());
    }
    Ok(rec)
}

/// Sets the state of `rec` to `to` if it still is `from` (one of them); returns the record.
fn transition(ctx: &Ctx, rec: &Record, from: &[Lifecycle], to: Lifecycle) -> Result<Record> {
    ctx.store.update(|s| {
        let missing = s.not_found(&rec.id.to_string());
        let r = s.get_mut(rec.id).ok_or(missing)?;
        if !from.contains(&r.state) {
            return Err(Error::Sandbox(format!(
                "sandbox {} changed meanwhile: it is {} now",
                r.short_id(),
                r.state
            ))
            .into());
        }
        r.set_state(to, None);
        Ok(r.clone())
    })
}

fn refuse_state(rec: &Record, verb: &str, hint: &str) -> anyhow::Error {
    Error::Sandbox(format!(
        "sandbox {} is {}: it cannot be {verb}{hint}",
        rec.short_id(),
        rec.state
    ))
    .into()
}

/// `stop`: stops the container (SIGTERM, SIGKILL after `stop_timeout_secs`), keeping it and its
/// scratch volume; the record becomes Stopped. A Stopped sandbox stays stopped (no error).
pub(crate) async fn stop(ctx: &Ctx, query: &str) -> Result<Record> {
    let rec = container_record(ctx, query, "stop")?;
    match rec.state {
        Lifecycle::Stopped => return Ok(rec),
        Lifecycle::Running | Lifecycle::Paused => {}
        _ => return Err(refuse_state(&rec, "stopped", "")),
    }
    let engine = ctx.engine_for(&rec);
    let grace = Duration::from_secs(ctx.settings_for(&rec).stop_timeout_secs);
    if rec.state == Lifecycle::Paused {
        // A frozen container cannot act on SIGTERM.
        let _ = engine
            .lifecycle(ContainerVerb::Unpause, rec.container_ref())
            .await;
    }
    engine.stop(rec.container_ref(), grace).await?;
    transition(
        ctx,
        &rec,
        &[Lifecycle::Running, Lifecycle::Paused],
        Lifecycle::Stopped,
    )
}

/// `start`: starts the container of a Stopped sandbox (or of a Running one whose container was
/// stopped behind h9sandbox's back: a daemon restart, a reboot, `docker stop`), waits until it
/// runs, checks again that its limits are in force and that it mounted the very work dir `up`
/// checked, and brings its agent back; the record becomes Running.
pub(crate) async fn start(ctx: &Ctx, query: &str) -> Result<Record> {
    let rec = container_record(ctx, query, "start")?;
    match rec.state {
        Lifecycle::Stopped | Lifecycle::Running => {}
        Lifecycle::Paused => return Err(refuse_state(&rec, "started", "; `h9sandbox resume` it")),
        _ => {
            return Err(refuse_state(
                &rec,
                "started",
                "; `h9sandbox down` removes it",
            ))
        }
    }
    check_workdir(&rec)?;
    let engine = ctx.engine_for(&rec);
    let running = engine
        .inspect(rec.container_ref())
        .await?
        .ok_or_else(|| {
            Error::Sandbox(format!(
                "the container of sandbox {} no longer exists; `h9sandbox down {}` removes its record",
                rec.short_id(),
                rec.short_id()
            ))
        })?
        .running;
    // An allowlist sandbox's proxy first, also for a running sandbox whose proxy alone stopped.
    super::egress::ensure_running(ctx, &engine, &rec).await?;
    if rec.state == Lifecycle::Running && running {
        return Ok(rec);
    }
    let channel = rec.agent.as_ref().and_then(|a| a.channel.clone());
    match (&rec.agent, &channel) {
        // A shipped agent's key lived only in its PID 1: a new one, handed over as at `up`.
        (_, Some(_)) => {
            let (secret, _) = super::agent::renew_channel(ctx, rec.id)?;
            engine
                .start_shipped(
                    rec.container_ref(),
                    &crate::engine::Secret(secret.to_frame()),
                    Duration::from_secs(ctx.cfg.start_timeout_secs),
                )
                .await?;
        }
        (agent, None) => {
            if agent.is_some() {
                super::agent::hand_over(ctx, rec.id)?;
            }
            engine
                .lifecycle(ContainerVerb::Start, rec.container_ref())
                .await?;
        }
    }
    // Until its checks pass, the container runs nothing of the sandbox's: a failed check
    // stops it again, and the record says so.
    let status = match check_started(ctx, &engine, &rec).await {
        Ok(status) => status,
        Err(e) => {
            let stopped = engine.stop(rec.container_ref(), Duration::ZERO).await;
            let reason = match &stopped {
                Ok(()) => format!("{e:#}; the container was stopped again"),
                Err(s) => format!("{e:#}; stopping the container again failed too ({s:#}): `h9sandbox down {}` removes it", rec.short_id()),
            };
            let _ = ctx.store.update(|s| {
                if let Some(r) = s.get_mut(rec.id) {
                    let to = if stopped.is_ok() {
                        Lifecycle::Stopped
                    } else {
                        Lifecycle::Failed
                    };
                    r.set_state(to, Some(reason.clone()));
                }
                Ok(())
            });
            return Err(anyhow::anyhow!(reason));
        }
    };
    let agent = match (&rec.agent, channel) {
        // The engine may publish the channel on another port after a restart.
        (_, Some(c)) => {
            let address = status
                .ports
                .iter()
                .find(|(port, _, _)| *port == crate::contract::CHANNEL_PORT)
                .map(|(_, _, p)| super::create::channel_connect_address(&engine, *p));
            Some(
                super::agent::check_channel(
                    ctx,
                    &engine,
                    rec.container_ref(),
                    rec.id,
                    address,
                    c.inside,
                )
                .await?,
            )
        }
        (Some(_), None) => super::agent::wait_ready(ctx, rec.id).await,
        (None, None) => None,
    };
    // A port published on a free host port may get another one at each start.
    let published = match rec.published.is_empty() {
        true => None,
        false => engine
            .published_ports(rec.container_ref())
            .await
            .ok()
            .map(|p| {
                p.into_iter()
                    .filter(|b| rec.published.iter().any(|was| was.port == b.port))
                    .collect::<Vec<_>>()
            }),
    };
    ctx.store.update(|s| {
        let missing = s.not_found(&rec.id.to_string());
        let r = s.get_mut(rec.id).ok_or(missing)?;
        r.set_state(Lifecycle::Running, None);
        if r.agent.is_some() {
            r.agent = agent;
        }
        if let Some(p) = &published {
            r.published = p.clone();
        }
        Ok(r.clone())
    })
}

/// The checks of a container `start` just started: it runs, with its limits in force, and it
/// mounted the very work dir `up` checked ([`MountCheck::verify`], from inside the container).
async fn check_started(
    ctx: &Ctx,
    engine: &crate::engine::AnyEngine,
    rec: &Record,
) -> Result<crate::engine::ContainerStatus> {
    let status = wait_running(
        engine,
        rec.container_ref(),
        Duration::from_secs(ctx.cfg.start_timeout_secs),
    )
    .await?;
    let applied = status
        .applied
        .context("the engine did not report the container's resource limits")?;
    applied.check(&rec.limits).map_err(anyhow::Error::msg)?;
    if let Some(id) = rec.workdir_id {
        MountCheck::recorded(&rec.workdir, id)
            .verify(
                engine,
                rec.container_ref(),
                status.pid,
                crate::engine::is_gvisor(rec.runtime.as_deref()),
            )
            .await?;
    }
    Ok(status)
}

/// `pause`: freezes every process of a Running sandbox; the record becomes Paused.
pub(crate) async fn pause(ctx: &Ctx, query: &str) -> Result<Record> {
    let rec = container_record(ctx, query, "pause")?;
    match rec.state {
        Lifecycle::Paused => return Ok(rec),
        Lifecycle::Running => {}
        _ => return Err(refuse_state(&rec, "paused", "")),
    }
    let engine = ctx.engine_for(&rec);
    // runc's cgroup-v1 freezer gives up when the tree forks while it freezes ("unable to
    // freeze"), a busy sandbox's everyday case: asked again, a little later, twice at most.
    let mut tries = 0;
    loop {
        match engine
            .lifecycle(ContainerVerb::Pause, rec.container_ref())
            .await
        {
            Err(e) if tries < 2 && format!("{e:#}").contains("unable to freeze") => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            r => break r?,
        }
    }
    transition(ctx, &rec, &[Lifecycle::Running], Lifecycle::Paused)
}

/// `resume`: thaws a Paused sandbox; the record becomes Running.
pub(crate) async fn resume(ctx: &Ctx, query: &str) -> Result<Record> {
    let rec = container_record(ctx, query, "resume")?;
    match rec.state {
        Lifecycle::Running => return Ok(rec),
        Lifecycle::Paused => {}
        _ => return Err(refuse_state(&rec, "resumed", "")),
    }
    ctx.engine_for(&rec)
        .lifecycle(ContainerVerb::Unpause, rec.container_ref())
        .await?;
    transition(ctx, &rec, &[Lifecycle::Paused], Lifecycle::Running)
}

/// A snapshot made by [`snapshot`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Snapshot {
    /// The sandbox's ID.
    pub id: String,
    /// The image's name.
    pub image: String,
    /// The image's ID (`sha256:…`).
    pub image_id: String,
}

/// `snapshot`: commits the file system of sandbox `query`'s container (what was installed, what
/// its commands changed outside the work dir and the scratch volume) to the local image `tag`,
/// with the configuration of the image it was made from (entrypoint, command, user, working
/// dir), so that `up --image TAG` starts from it. The container is paused while it is committed
/// (the engine's default). Errors: a bad tag, a local sandbox, the engine's failure.
pub(crate) async fn snapshot(ctx: &Ctx, query: &str, tag: &str) -> Result<Snapshot> {
    validate_tag(tag)?;
    let rec = container_record(ctx, query, "snapshot")?;
    if !matches!(
        rec.state,
        Lifecycle::Running | Lifecycle::Stopped | Lifecycle::Paused
    ) {
        return Err(refuse_state(&rec, "snapshotted", ""));
    }
    let engine = ctx.engine_for(&rec);
    let base = engine.image_config(&rec.image).await.unwrap_or_default();
    let image_id = engine
        .commit(rec.container_ref(), tag, &restore_changes(&base))
        .await?;
    Ok(Snapshot {
        id: rec.id.to_string(),
        image: tag.to_string(),
        image_id,
    })
}

/// `docker commit --change` instructions giving the committed image its base image's
/// entrypoint, command, user and working dir back (the container's are h9sandbox's own agent,
/// root and the work dir), and emptying h9sandbox's labels (a container made from the image gets
/// its own).
pub(crate) fn restore_changes(base: &crate::engine::ImageConfig) -> Vec<String> {
    let json = |v: &Vec<String>| serde_json::to_string(v).unwrap_or_else(|_| "[]".into());
    // `ENTRYPOINT []` would keep the container's; `[""]` is the engines' "none".
    let entrypoint = match base.entrypoint.is_empty() {
        true => "[\"\"]".to_string(),
        false => json(&base.entrypoint),
    };
    let mut c = vec![
        format!("ENTRYPOINT {entrypoint}"),
        format!("CMD {}", json(&base.cmd)),
        format!(
            "USER {}",
            if base.user.is_empty() {
                "0"
            } else {
                &base.user
            }
        ),
        format!(
            "WORKDIR {}",
            if base.working_dir.is_empty() {
                "/"
            } else {
                &base.working_dir
            }
        ),
    ];
    for label in [
        crate::engine::LABEL_MANAGED,
        crate::engine::LABEL_ID,
        crate::engine::LABEL_STATE_DIR,
        crate::engine::LABEL_PARENT,
    ] {
        c.push(format!("LABEL {label}=\"\""));
    }
    c
}

/// Checks an image name for `snapshot --tag`: a reference the engine takes (lower-case
/// repository path components, an optional `:tag`), never an option.
pub(crate) fn validate_tag(tag: &str) -> Result<(), Error> {
    let (repo, t) = match tag.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r, Some(t)),
        _ => (tag, None),
    };
    let repo_ok = !repo.is_empty()
        && repo.split('/').all(|c| {
            !c.is_empty()
                && c.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
                && c.as_bytes()[0].is_ascii_alphanumeric()
        });
    let tag_ok = t.is_none_or(|t| {
        !t.is_empty()
            && t.len() <= 128
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            && !t.starts_with(['.', '-'])
    });
    // h9sandbox's own images are found by their names (the proxy's runtime image, the derived
    // images of shipped agents): a snapshot, of a sandbox or asked for by an MCP client, never
    // takes one of those names.
    if [crate::engine::image::RUNTIME_REPOSITORY, "h9sandbox-agent"].contains(&repo) {
        return Err(Error::Refused(format!(
            "--tag '{tag}': the name {repo} is h9sandbox's own (the images it runs its agent and the egress proxy from); choose another name"
        )));
    }
    if repo_ok && tag_ok && !tag.starts_with('-') {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "invalid --tag '{tag}': give an image name such as my-env or my-env:v1 (lower-case letters, digits, '.', '_', '-', '/')"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_image_names() {
        for ok in [
            "my-env",
            "my-env:v1",
            "team/proj.env:2026-11_30",
            "localhost/x",
        ] {
            assert!(validate_tag(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-x",
            "My-Env",
            "x:",
            "x:-y",
            "a//b",
            "x y",
            "x:a/b",
            "h9sandbox-runtime:0123456789abcdef",
            "h9sandbox-agent:aaa-bbb",
            "h9sandbox-agent",
        ] {
            assert!(validate_tag(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_snapshot_gets_its_base_images_configuration_back() {
        let base = crate::engine::ImageConfig {
            entrypoint: vec!["/entry.sh".into()],
            cmd: vec![],
            user: "app".into(),
            working_dir: "/srv".into(),
            env: vec![],
        };
        let c = restore_changes(&base);
        assert_eq!(
            c[..4],
            [
                "ENTRYPOINT [\"/entry.sh\"]",
                "CMD []",
                "USER app",
                "WORKDIR /srv"
            ]
        );
        assert!(c.contains(&"LABEL h9sandbox.id=\"\"".to_string()));
        let c = restore_changes(&Default::default());
        assert_eq!(c[0], "ENTRYPOINT [\"\"]");
        assert_eq!(c[2..4], ["USER 0", "WORKDIR /"]);
    }
}
