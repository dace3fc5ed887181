//! Building a sandbox's image from a Dockerfile with the engine ([`Environment::build`]): `up
//! --build DIR` (a build context the caller names, as `docker compose up --build` does; what
//! Harbor's task environments need) and `up --devcontainer` with a `build` configuration. The
//! image is named after its context and Dockerfile, so the next `up` of the same directory
//! reuses the engine's build cache and tag, as Harbor's Docker environment and the
//! `devcontainer` CLI do.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use sha2::{Digest, Sha256};

use super::Ctx;
use crate::engine::{AnyEngine, BuildSpec, Environment};
use crate::error::Error;
use crate::types::{Isolation, Network};

/// The label every image `up --build` makes carries: its build context
/// (`docker image ls --filter label=h9sandbox.build` lists them).
pub(crate) const LABEL_BUILD: &str = "h9sandbox.build";

/// The build of `up --build CONTEXT [--dockerfile FILE]`: the context and Dockerfile
/// canonicalized (the Dockerfile, relative to the current directory, defaults to the context's
/// `Dockerfile`), named `h9sandbox-build-<context's parent and folder names>-<12 hex of both
/// paths>:latest`.
/// Errors: either does not exist.
pub(crate) fn spec_for(context: &Path, dockerfile: Option<&Path>) -> Result<BuildSpec> {
    let context = context.canonicalize().map_err(|e| {
        Error::Usage(format!(
            "--build {}: {e}; give the directory to build (the build context)",
            context.display()
        ))
    })?;
    if !context.is_dir() {
        return Err(Error::Usage(format!(
            "--build {} is not a directory; give the build context (the directory holding the Dockerfile), and the file with --dockerfile",
            context.display()
        ))
        .into());
    }
    let file = dockerfile.map_or_else(|| context.join("Dockerfile"), Path::to_path_buf);
    let file = file.canonicalize().map_err(|e| {
        Error::Usage(format!(
            "{}: {e}; name the Dockerfile with --dockerfile",
            file.display()
        ))
    })?;
    let mut both = context.as_os_str().as_encoded_bytes().to_vec();
    both.push(0);
    both.extend_from_slice(file.as_os_str().as_encoded_bytes());
    // Named after the context's parent and its folder: a Harbor task's context is always
    // `TASK/environment`.
    let named = match (
        context.parent().and_then(Path::file_name),
        context.file_name(),
    ) {
        (Some(p), Some(f)) => Path::new(p).join(f),
        _ => context.clone(),
    };
    Ok(BuildSpec {
        tag: image_name("h9sandbox-build", &named, &both),
        labels: BTreeMap::from([(LABEL_BUILD.to_string(), context.display().to_string())]),
        context,
        dockerfile: file,
        ..BuildSpec::default()
    })
}

/// `PREFIX-<the last components of `folder`, lower case, `-` for anything but letters and
/// digits, at most 40 characters>-<12 hex of SHA-256(key)>:latest`, a valid image reference for
/// any folder name.
pub(crate) fn image_name(prefix: &str, folder: &Path, key: &[u8]) -> String {
    let base: String = folder
        .components()
        .rev()
        .take(2)
        .filter_map(|c| match c {
            std::path::Component::Normal(n) => Some(n.to_string_lossy().to_ascii_lowercase()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("-")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let base = base.trim_matches('-');
    let base = if base.is_empty() { "project" } else { base };
    let hash: String = Sha256::digest(key)
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{prefix}-{}-{hash}:latest", &base[..base.len().min(40)])
}

/// Builds `spec` with `engine` for a sandbox whose network is `network` (`none` and `allowlist`
/// build without a network too): step `building IMAGE from DOCKERFILE`, bounded by
/// `pull_timeout_secs`, given up on SIGINT, SIGTERM or SIGHUP. Errors: a local engine, the
/// build's failure, the signal.
pub(crate) async fn build(
    ctx: &Ctx,
    engine: &AnyEngine,
    spec: &BuildSpec,
    network: Network,
) -> Result<()> {
    if engine.kind().isolation() != Isolation::Container {
        return Err(Error::Refused(format!(
            "building an image needs a container engine, and engine = \"{}\" runs commands on this host without one; use docker or podman",
            engine.kind()
        ))
        .into());
    }
    let spec = BuildSpec {
        no_network: spec.no_network || network != Network::Bridge,
        ..spec.clone()
    };
    ctx.reporter.step(&format!(
        "building {} from {}",
        spec.tag,
        spec.dockerfile.display()
    ));
    let timeout = Duration::from_secs(ctx.cfg.pull_timeout_secs);
    tokio::select! {
        r = engine.build(&spec, timeout) => r,
        sig = super::interrupted() => Err(anyhow::anyhow!("interrupted by {sig} while building {}", spec.tag)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_references_stable_per_directory() {
        let d = tempfile::tempdir().unwrap();
        let ctx = d.path().join("My Task_1/environment");
        std::fs::create_dir_all(&ctx).unwrap();
        std::fs::write(ctx.join("Dockerfile"), "FROM scratch\n").unwrap();
        let a = spec_for(&ctx, None).unwrap();
        assert!(
            a.tag.starts_with("h9sandbox-build-my-task-1-environment-"),
            "{}",
            a.tag
        );
        assert!(a.tag.ends_with(":latest"));
        assert_eq!(a.tag, spec_for(&ctx, None).unwrap().tag);
        assert_eq!(a.dockerfile, ctx.canonicalize().unwrap().join("Dockerfile"));
        assert_eq!(
            a.labels[LABEL_BUILD],
            ctx.canonicalize().unwrap().display().to_string()
        );
        // Another Dockerfile of the same context is another image.
        std::fs::write(ctx.join("Dockerfile.dev"), "FROM scratch\n").unwrap();
        let b = spec_for(&ctx, Some(&ctx.join("Dockerfile.dev"))).unwrap();
        assert_ne!(a.tag, b.tag);
        let e = spec_for(&d.path().join("missing"), None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--build "), "{e}");
        let e = spec_for(d.path(), None).unwrap_err().to_string();
        assert!(e.contains("name the Dockerfile with --dockerfile"), "{e}");
        assert_eq!(
            image_name("p", Path::new("/"), b"k").split('-').nth(1),
            Some("project")
        );
    }
}
