//! `up --devcontainer [PATH]`: a sandbox from a project's `devcontainer.json` (the Development
//! Containers specification, containers.dev: "Dev Container metadata reference"), with
//! h9sandbox's hardening and limits.
//!
//! The file is JSON with comments and trailing commas (JSONC, read by the `jsonc-parser` crate
//! with only those two extensions). What it can say, and what becomes of it:
//!
//! - `image`, or `build.dockerfile` / `build.context` / `build.args` / `build.target` /
//!   `build.cacheFrom` (and the older top-level `dockerFile` / `context`): the sandbox's image;
//!   a Dockerfile is built with the engine ([`crate::engine::Environment::build`]) as
//!   `h9sandbox-devcontainer-NAME-HASH:latest`. The Dockerfile and the context must lie inside
//!   the project folder: a file a sandbox can rewrite must not send other host directories into
//!   an image it then runs.
//! - `containerEnv`, then `remoteEnv`: the environment of every process of the container
//!   (`remoteEnv` may use `${containerEnv:NAME}`, the image's `ENV` and `containerEnv`).
//! - `remoteUser`, else `containerUser`: the sandbox's user (`root`, a UID, `UID:GID`, or a
//!   name looked up in the image's `/etc/passwd`).
//! - `onCreateCommand`, `updateContentCommand`, `postCreateCommand`, `postStartCommand`: the
//!   sandbox's bootstrap command, run in that order as the sandbox's user in the workspace
//!   folder (string: a shell line; array: a program and its arguments; object: commands run in
//!   parallel); the first that fails stops the rest, as the specification says.
//! - `workspaceFolder`: where the lifecycle commands start when it lies in the work dir;
//!   another absolute path becomes a symbolic link to the work dir (the work dir itself is
//!   always mounted at its own path).
//! - `forwardPorts` and `appPort` (and `runArgs` `-p`): recorded in the sandbox's record; `up`
//!   forwards none (a warning names `h9sandbox port-forward`, which does).
//! - `runArgs`: only what does not loosen the sandbox (`--env`, `--label`, `--init`, `--network
//!   none`, `--cap-drop`, `--security-opt no-new-privileges`, limits no looser than
//!   h9sandbox's, `-p`); anything that would loosen it is refused naming it, as are
//!   `privileged`, `capAdd`, `securityOpt` and `mounts`, and Docker Compose configurations.
//! - `features`, `initializeCommand` (a host command: never run), `postAttachCommand`,
//!   `hostRequirements` beyond the sandbox's limits, unknown keys...: named in one warning.
//!   `name`, `$schema` and `customizations` (editors' settings) change nothing and draw none.
//!
//! Variables (`${localWorkspaceFolder}`, `${containerWorkspaceFolder}`, their `Basename`
//! forms, `${devcontainerId}`) are substituted in the strings used. `${localEnv:NAME}` is not:
//! the file usually lies in the work dir, which the sandbox can write, so it could otherwise
//! copy this host's secrets into the sandbox; such a reference takes its default (or nothing)
//! and the warning names it.
//!
//! The values the file gives count as `up`'s flags (they beat the configuration and the
//! environment); the flags given on the command line beat them. [`load`] reads the file (no
//! engine needed); [`prepare()`] builds the image and settles the rest once the engine is known.

//!
//! The submodules: `parse` (the file's keys into a [`Devcontainer`]), `vars` (the
//! specification's variables), `run_args` (which `runArgs` it honours, and the limits they may
//! tighten), `prepare` (the image, user and environment once the engine is known) and
//! `lifecycle` (the bootstrap script running its lifecycle commands).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::engine::BuildSpec;
use crate::error::Error;

mod lifecycle;
mod parse;
mod prepare;
mod run_args;
mod vars;

pub(crate) use lifecycle::bootstrap_script;
pub(crate) use parse::parse;
pub(crate) use prepare::prepare;
pub(crate) use run_args::tighten;

/// The largest devcontainer.json read (bytes).
pub(crate) const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The label every image built from a devcontainer.json carries: the configuration's path
/// (`docker image ls --filter label=h9sandbox.devcontainer` lists them).
pub(crate) const LABEL_DEVCONTAINER: &str = "h9sandbox.devcontainer";

/// A devcontainer.json, read and checked ([`load`]): what the sandbox gets from it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Devcontainer {
    /// The configuration file (canonical).
    pub config: PathBuf,
    /// The project folder it belongs to (canonical): the folder holding `.devcontainer/`, or
    /// `.devcontainer.json`. The sandbox's work dir unless `--workdir` says otherwise.
    pub project: PathBuf,
    /// Where the image comes from.
    pub source: Source,
    /// `containerEnv`, substituted, by name (a JSON object has no order).
    pub container_env: Vec<(String, String)>,
    /// `remoteEnv`, substituted but for `${containerEnv:…}`, by name; a `null` value
    /// unsets the name.
    pub remote_env: Vec<(String, Option<String>)>,
    /// `remoteUser`, else `containerUser`.
    pub user: Option<String>,
    /// The lifecycle commands, in the order they run: (key, command).
    pub lifecycle: Vec<(&'static str, Lifecycle)>,
    /// `workspaceFolder`, substituted.
    pub workspace_folder: Option<String>,
    /// `forwardPorts`, `appPort` and `runArgs -p`, as written (`3000`, `"db:5432"`).
    pub forward_ports: Vec<String>,
    /// What `runArgs` asks that h9sandbox honours.
    pub run_args: RunArgs,
    /// `hostRequirements`: (cpus, memory in bytes).
    pub host_requirements: (Option<f64>, Option<u64>),
    /// What the file says that h9sandbox does not do, each a short phrase for the warning.
    pub not_honoured: Vec<String>,
}

/// Where a devcontainer's image comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// `image`: a local image (pulled when missing, as any `up --image`).
    Image(String),
    /// `build`: a Dockerfile built with the engine.
    Build(BuildSpec),
}

impl Source {
    /// The image reference the sandbox runs.
    pub(crate) fn image(&self) -> &str {
        match self {
            Source::Image(i) => i,
            Source::Build(b) => &b.tag,
        }
    }
}

/// One lifecycle command's value: the three forms of the specification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    /// A string: a shell command line.
    Shell(String),
    /// An array: a program and its arguments, run without a shell.
    Argv(Vec<String>),
    /// An object: named commands (each a shell line or an argument vector) run in parallel.
    Parallel(Vec<(String, Lifecycle)>),
}

/// What `runArgs` asks that h9sandbox honours (everything else is refused by [`load`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RunArgs {
    /// `--env K=V`.
    pub env: Vec<(String, String)>,
    /// `--label K=V`.
    pub labels: Vec<String>,
    /// `--network none`.
    pub network_none: bool,
    /// `--memory`, which may only lower the sandbox's.
    pub memory: Option<String>,
    /// `--cpus`, which may only lower the sandbox's.
    pub cpus: Option<f64>,
    /// `--pids-limit`, which may only lower the sandbox's.
    pub pids_limit: Option<u32>,
}

/// Reads the devcontainer.json of `up --devcontainer [PATH]` (no `path`: the work dir's;
/// [`locate`], [`load`]) into `req`: its project folder as the work dir, its image (or the name
/// of the image its Dockerfile builds) and `runArgs` labels, where `req` has none of its own,
/// and the configuration itself ([`super::create::UpRequest::devcontainer`]). Errors: as
/// [`locate`] and [`load`].
pub(crate) fn apply(req: &mut super::create::UpRequest, path: Option<&Path>) -> Result<()> {
    let (config, project) = locate(path, req.workdir.as_deref())?;
    let workdir = match &req.workdir {
        Some(w) => w.canonicalize().unwrap_or_else(|_| w.clone()),
        None => project.clone(),
    };
    let dc = load(&config, &project, &workdir)?;
    req.workdir.get_or_insert(workdir);
    req.image
        .get_or_insert_with(|| dc.source.image().to_string());
    req.labels.extend(dc.run_args.labels.iter().cloned());
    req.devcontainer = Some(dc);
    Ok(())
}

/// Where the devcontainer.json for `path` is, and its project folder: `path` a file; or a
/// directory holding `.devcontainer/devcontainer.json`, `.devcontainer.json`, exactly one
/// `.devcontainer/NAME/devcontainer.json`, or `devcontainer.json` itself (a `.devcontainer`
/// folder). Without `path`, the work dir's (else the current directory's).
/// Errors: nothing found, or several subfolder configurations (naming them).
pub(crate) fn locate(path: Option<&Path>, workdir: Option<&Path>) -> Result<(PathBuf, PathBuf)> {
    let start = match path.filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p.to_path_buf(),
        None => workdir.map_or_else(|| PathBuf::from("."), Path::to_path_buf),
    };
    let start = start.canonicalize().map_err(|e| {
        Error::Usage(format!(
            "--devcontainer {}: {e}; give a devcontainer.json or the project folder holding .devcontainer/",
            start.display()
        ))
    })?;
    let file = if start.is_file() {
        start
    } else {
        find_in(&start)?
    };
    let dir = file.parent().unwrap_or(Path::new("/")).to_path_buf();
    let is_dc = |p: &Path| p.file_name().is_some_and(|n| n == ".devcontainer");
    let project = if is_dc(&dir) {
        dir.parent().unwrap_or(&dir).to_path_buf()
    } else if dir.parent().is_some_and(is_dc) {
        dir.parent()
            .and_then(Path::parent)
            .unwrap_or(&dir)
            .to_path_buf()
    } else {
        dir
    };
    Ok((file, project))
}

/// The configuration in the directory `dir` (see [`locate`]).
fn find_in(dir: &Path) -> Result<PathBuf> {
    for candidate in [
        dir.join(".devcontainer/devcontainer.json"),
        dir.join(".devcontainer.json"),
        dir.join("devcontainer.json"),
    ] {
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    let mut nested: Vec<PathBuf> = std::fs::read_dir(dir.join(".devcontainer"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("devcontainer.json"))
        .filter(|p| p.is_file())
        .collect();
    nested.sort();
    match nested.len() {
        1 => Ok(nested.remove(0)),
        0 => Err(Error::Usage(format!(
            "no devcontainer.json in {} (looked for .devcontainer/devcontainer.json, .devcontainer.json and .devcontainer/*/devcontainer.json); give its path: --devcontainer PATH",
            dir.display()
        ))
        .into()),
        _ => Err(Error::Usage(format!(
            "{} has {} devcontainer configurations ({}); name one: --devcontainer PATH",
            dir.display(),
            nested.len(),
            nested
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into()),
    }
}

/// Reads and checks the devcontainer.json `config` of the project folder `project` ([`locate`])
/// for a sandbox on `workdir`. Errors (each naming the key): not JSONC, a Docker Compose
/// configuration, no image or Dockerfile, a Dockerfile or context outside the project folder,
/// a key that would loosen the sandbox (`runArgs`, `privileged`, `capAdd`, `securityOpt`,
/// `mounts`), a malformed value.
pub(crate) fn load(config: &Path, project: &Path, workdir: &Path) -> Result<Devcontainer> {
    let text = read_config(config)?;
    parse(&text, config, project, workdir)
}

/// Reads `path`: a regular file of at most [`MAX_CONFIG_BYTES`].
fn read_config(path: &Path) -> Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let meta = f.metadata()?;
    if !meta.is_file() || meta.len() > MAX_CONFIG_BYTES {
        return Err(Error::Usage(format!(
            "{} is not a regular file of at most {MAX_CONFIG_BYTES} bytes",
            path.display()
        ))
        .into());
    }
    let mut text = String::new();
    f.take(MAX_CONFIG_BYTES)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read {} as UTF-8 text", path.display()))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn dir() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().canonicalize().unwrap();
        std::fs::create_dir(p.join(".devcontainer")).unwrap();
        (d, p)
    }

    pub(super) fn parse_in(project: &Path, text: &str) -> Result<Devcontainer> {
        let config = project.join(".devcontainer/devcontainer.json");
        std::fs::write(&config, text).unwrap();
        let (file, proj) = locate(Some(project), None).unwrap();
        assert_eq!((&file, &proj), (&config, &project.to_path_buf()));
        load(&file, &proj, &proj)
    }

    #[test]
    fn locate_finds_the_documented_places() {
        let (_d, p) = dir();
        let e = locate(Some(&p), None).unwrap_err().to_string();
        assert!(e.contains("no devcontainer.json in"), "{e}");
        std::fs::create_dir_all(p.join(".devcontainer/py")).unwrap();
        std::fs::create_dir_all(p.join(".devcontainer/go")).unwrap();
        std::fs::write(p.join(".devcontainer/py/devcontainer.json"), "{}").unwrap();
        assert_eq!(
            locate(Some(&p), None).unwrap(),
            (p.join(".devcontainer/py/devcontainer.json"), p.clone())
        );
        std::fs::write(p.join(".devcontainer/go/devcontainer.json"), "{}").unwrap();
        let e = locate(Some(&p), None).unwrap_err().to_string();
        assert!(e.contains("has 2 devcontainer configurations"), "{e}");
        std::fs::write(p.join(".devcontainer.json"), "{}").unwrap();
        assert_eq!(
            locate(None, Some(&p)).unwrap(),
            (p.join(".devcontainer.json"), p.clone())
        );
        assert_eq!(
            locate(Some(&p.join(".devcontainer/go/devcontainer.json")), None).unwrap(),
            (p.join(".devcontainer/go/devcontainer.json"), p.clone())
        );
    }
}
