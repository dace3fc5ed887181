//! Readying a devcontainer once the engine is known: its image built, its user looked up in the
//! image, its container environment settled, and the warnings for what it does not honour.

use anyhow::Result;

use super::vars::substitute;
use super::{Devcontainer, Source};
use crate::engine::{AnyEngine, Environment, LABEL_MANAGED, LABEL_STATE_DIR};
use crate::error::Error;
use crate::sandbox::Ctx;
use crate::state::DevcontainerRecord;
use crate::types::{Ids, Isolation, Limits};

/// What [`prepare`] settled for the new sandbox, once its engine and image are known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prepared {
    /// The sandbox's user from `remoteUser` / `containerUser` (`None`: h9sandbox's own).
    pub user: Option<Ids>,
    /// The container's extra environment, in order.
    pub env: Vec<(String, String)>,
    /// What the record keeps.
    pub record: DevcontainerRecord,
}

/// Readies the devcontainer `dc` for a sandbox of `image` on `engine` (the configured one) with
/// `limits`: builds its image (unless `--image` named another) (step `building IMAGE`, bounded by `pull_timeout_secs`; without a network
/// when the sandbox has none), looks its user up in the image unless `user_given` (a `--user`
/// flag beats it), settles its environment (the image's `ENV` for `${containerEnv:…}`), and
/// warns, once each: what it does not honour, the ports it records but cannot forward, host
/// requirements beyond the limits. Errors: a local engine, the build, a user the image lacks.
pub(crate) async fn prepare(
    ctx: &Ctx,
    engine: &AnyEngine,
    dc: &Devcontainer,
    image: &str,
    limits: &Limits,
    user_given: bool,
) -> Result<Prepared> {
    if engine.kind().isolation() != Isolation::Container {
        return Err(Error::Refused(format!(
            "--devcontainer needs a container engine, and engine = \"{}\" runs commands on this host without one; use docker or podman",
            engine.kind()
        ))
        .into());
    }
    let name = dc.config.display().to_string();
    // Built unless `--image` named another image to run.
    let build = match &dc.source {
        Source::Build(spec) if spec.tag == image => Some(spec),
        _ => None,
    };
    if let Some(spec) = build {
        crate::sandbox::build::build(ctx, engine, spec, limits.network).await?;
    }
    let user = match dc.user.as_deref().filter(|_| !user_given) {
        None => None,
        Some(u) => Some(image_user(ctx, engine, image, u, &name).await?),
    };
    let needs_image_env = dc
        .remote_env
        .iter()
        .any(|(_, v)| v.as_deref().is_some_and(|v| v.contains("${containerEnv:")));
    let image_env = if needs_image_env {
        engine.image_config(image).await?.env
    } else {
        Vec::new()
    };
    let env = container_env(dc, &image_env);
    let mut not_honoured = dc.not_honoured.clone();
    let mut ours = vec!["TMPDIR"];
    if limits.network == crate::types::Network::Allowlist {
        ours.extend(crate::engine::docker::proxy_env().iter().map(|(k, _)| *k));
    }
    for (k, _) in env.iter().filter(|(k, _)| ours.contains(&k.as_str())) {
        not_honoured.push(format!(
            "{k} in containerEnv or remoteEnv (h9sandbox sets {k} itself)"
        ));
    }
    if let (Some(cpus), _) = dc.host_requirements {
        if cpus > limits.cpus {
            not_honoured.push(format!(
                "hostRequirements.cpus {cpus} (the sandbox has {}: --cpus)",
                crate::types::format_cpus(limits.cpus)
            ));
        }
    }
    if let (_, Some(mem)) = dc.host_requirements {
        if crate::config::parse_size(&limits.memory).is_ok_and(|have| mem > have) {
            not_honoured.push(format!(
                "hostRequirements.memory {} MiB (the sandbox has {}: --memory)",
                mem >> 20,
                limits.memory
            ));
        }
    }
    if !not_honoured.is_empty() {
        ctx.reporter.warn(&format!(
            "{name}: not honoured: {}",
            not_honoured.join("; ")
        ));
    }
    if !dc.forward_ports.is_empty() {
        ctx.reporter.warn(&format!(
            "{name}: forwardPorts {} recorded in the sandbox's record (`h9sandbox ls --format json`: devcontainer.forward_ports) but not forwarded by `up`: `h9sandbox port-forward ID PORT...` forwards ports of the sandbox to this machine's loopback while it runs",
            dc.forward_ports.join(", ")
        ));
    }
    Ok(Prepared {
        user,
        record: DevcontainerRecord {
            config: dc.config.clone(),
            built: build.is_some(),
            env: env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            forward_ports: dc.forward_ports.clone(),
        },
        env,
    })
}

/// The container environment of `dc`: `containerEnv`, `runArgs --env`, then `remoteEnv`, whose
/// `${containerEnv:NAME}` sees the image's `ENV` (`image_env`, `NAME=VALUE` each) and what
/// came before (and, for an image without `PATH`, the default `PATH` Docker gives its
/// containers); a `null` in `remoteEnv` removes the name. Later names replace earlier ones in
/// place.
pub(crate) fn container_env(dc: &Devcontainer, image_env: &[String]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let set = |env: &mut Vec<(String, String)>, k: &str, v: Option<String>| {
        env.retain(|(n, _)| n != k);
        if let Some(v) = v {
            env.push((k.to_string(), v));
        }
    };
    for (k, v) in dc.container_env.iter().chain(&dc.run_args.env) {
        set(&mut env, k, Some(v.clone()));
    }
    for (k, v) in &dc.remote_env {
        let v = v.as_ref().map(|v| {
            substitute(v, |var| {
                let name = var.strip_prefix("containerEnv:")?;
                let (name, default) = name.split_once(':').unwrap_or((name, ""));
                let from_env = env
                    .iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone());
                let from_image = || {
                    image_env
                        .iter()
                        .rev()
                        .find_map(|e| e.strip_prefix(name)?.strip_prefix('=').map(str::to_string))
                };
                // An image without `PATH` gets the engine's default one in its containers.
                let engine_default =
                    || (name == "PATH").then(|| crate::agent::wrap::SHELL_PATH.to_string());
                Some(
                    from_env
                        .or_else(from_image)
                        .or_else(engine_default)
                        .unwrap_or_else(|| default.to_string()),
                )
            })
        });
        set(&mut env, k, v);
    }
    env
}

/// The IDs of `user` (`remoteUser`): `root`, `UID`, `UID:GID`, or a name of the image's
/// `/etc/passwd` (read out of the image: [`Environment::image_file`]).
async fn image_user(
    ctx: &Ctx,
    engine: &AnyEngine,
    image: &str,
    user: &str,
    name: &str,
) -> Result<Ids> {
    if user == "root" {
        return Ok(Ids::ROOT);
    }
    if let Ok(ids) = user.parse::<Ids>() {
        return Ok(ids);
    }
    if let Ok(uid) = user.parse::<u32>() {
        return Ok(Ids { uid, gid: uid });
    }
    ctx.reporter
        .step(&format!("looking up user {user} in {image}"));
    let state = ctx.state_label();
    let labels = [(LABEL_MANAGED, "1"), (LABEL_STATE_DIR, state.as_str())];
    let passwd = engine
        .image_file(image, "/etc/passwd", 4 << 20, &labels)
        .await?
        .unwrap_or_default();
    crate::agent::user::parse_passwd(&String::from_utf8_lossy(&passwd))
        .into_iter()
        .find(|e| e.name == user)
        .map(|e| Ids {
            uid: e.uid,
            gid: e.gid,
        })
        .ok_or_else(|| {
            Error::Usage(format!(
                "{name}: `remoteUser` {user} is not a user of the image {image} (its /etc/passwd has no such name); create it in the Dockerfile, or give UID:GID"
            ))
            .into()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::devcontainer::tests::{dir, parse_in};

    #[test]
    fn remote_env_sees_the_image_and_container_env() {
        let (_d, p) = dir();
        let dc = parse_in(
            &p,
            r#"{ "image": "x", "containerEnv": { "A": "a", "GONE": "g" },
                 "remoteEnv": { "PATH": "${containerEnv:PATH}:/opt/bin", "B": "${containerEnv:A}-b",
                                "C": "${containerEnv:MISSING:dflt}", "GONE": null } }"#,
        )
        .unwrap();
        let env = container_env(&dc, &["PATH=/usr/bin:/bin".into(), "X=1".into()]);
        // An image without PATH: Docker's default.
        let bare = container_env(&dc, &[]);
        assert!(bare.contains(&(
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/bin".into()
        )));
        assert_eq!(
            env,
            vec![
                ("A".to_string(), "a".to_string()),
                ("B".into(), "a-b".into()),
                ("C".into(), "dflt".into()),
                ("PATH".into(), "/usr/bin:/bin:/opt/bin".into()),
            ]
        );
    }
}
