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
//! - `forwardPorts` and `appPort` (and `runArgs` `-p`): recorded in the sandbox's record; no
//!   port is forwarded yet (a warning says so).
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
//! engine needed); [`prepare`] builds the image and settles the rest once the engine is known.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::Ctx;
use crate::engine::shell::shell_quote;
use crate::engine::{AnyEngine, BuildSpec, Environment, LABEL_MANAGED, LABEL_STATE_DIR};
use crate::error::Error;
use crate::state::DevcontainerRecord;
use crate::types::{Ids, Isolation, Limits};

/// The largest devcontainer.json read (bytes).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The label every image built from a devcontainer.json carries: the configuration's path
/// (`docker image ls --filter label=h9sandbox.devcontainer` lists them).
pub const LABEL_DEVCONTAINER: &str = "h9sandbox.devcontainer";

/// A devcontainer.json, read and checked ([`load`]): what the sandbox gets from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Devcontainer {
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
pub enum Source {
    /// `image`: a local image (pulled when missing, as any `up --image`).
    Image(String),
    /// `build`: a Dockerfile built with the engine.
    Build(BuildSpec),
}

impl Source {
    /// The image reference the sandbox runs.
    pub fn image(&self) -> &str {
        match self {
            Source::Image(i) => i,
            Source::Build(b) => &b.tag,
        }
    }
}

/// One lifecycle command's value: the three forms of the specification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lifecycle {
    /// A string: a shell command line.
    Shell(String),
    /// An array: a program and its arguments, run without a shell.
    Argv(Vec<String>),
    /// An object: named commands (each a shell line or an argument vector) run in parallel.
    Parallel(Vec<(String, Lifecycle)>),
}

/// What `runArgs` asks that h9sandbox honours (everything else is refused by [`load`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunArgs {
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
pub fn apply(req: &mut super::create::UpRequest, path: Option<&Path>) -> Result<()> {
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
pub fn locate(path: Option<&Path>, workdir: Option<&Path>) -> Result<(PathBuf, PathBuf)> {
    let start = match path.filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p.to_path_buf(),
        None => workdir.map_or_else(|| PathBuf::from("."), Path::to_path_buf),
    };
    let start = start.canonicalize().map_err(|e| {
        Error::Invalid(format!(
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
        0 => Err(Error::Invalid(format!(
            "no devcontainer.json in {} (looked for .devcontainer/devcontainer.json, .devcontainer.json and .devcontainer/*/devcontainer.json); give its path: --devcontainer PATH",
            dir.display()
        ))
        .into()),
        _ => Err(Error::Invalid(format!(
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
pub fn load(config: &Path, project: &Path, workdir: &Path) -> Result<Devcontainer> {
    let text = read_config(config)?;
    parse(&text, config, project, workdir)
}

/// Reads `path`: a regular file of at most [`MAX_CONFIG_BYTES`].
fn read_config(path: &Path) -> Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let meta = f.metadata()?;
    if !meta.is_file() || meta.len() > MAX_CONFIG_BYTES {
        return Err(Error::Invalid(format!(
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

/// The keys h9sandbox reads (the rest, but for [`QUIET_KEYS`], are named in the warning).
const READ_KEYS: &[&str] = &[
    "image",
    "build",
    "dockerFile",
    "dockerfile",
    "context",
    "containerEnv",
    "remoteEnv",
    "remoteUser",
    "containerUser",
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
    "workspaceFolder",
    "forwardPorts",
    "appPort",
    "runArgs",
    "init",
    "overrideCommand",
    "hostRequirements",
];
/// Keys for editors and tools, which change nothing in a container.
const QUIET_KEYS: &[&str] = &["name", "$schema", "customizations"];
/// Keys of Docker Compose configurations.
const COMPOSE_KEYS: &[&str] = &["dockerComposeFile", "service", "runServices"];
/// Keys that would loosen the sandbox: refused.
const LOOSENING_KEYS: &[&str] = &["privileged", "capAdd", "securityOpt", "mounts"];

/// Parses the text of the devcontainer.json `config` (see [`load`]).
pub fn parse(text: &str, config: &Path, project: &Path, workdir: &Path) -> Result<Devcontainer> {
    let name = config.display().to_string();
    let options = jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let value: Value = jsonc_parser::parse_to_serde_value(text, &options)
        .map_err(|e| Error::Invalid(format!("{name} is not valid JSON with comments: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(Error::Invalid(format!("{name}: expected a JSON object")).into());
    };
    let bad = |key: &str, why: &str| -> anyhow::Error {
        Error::Invalid(format!("{name}: `{key}` {why}")).into()
    };
    if let Some(k) = COMPOSE_KEYS.iter().find(|k| obj.contains_key(**k)) {
        return Err(Error::Invalid(format!(
            "{name} is a Docker Compose configuration (`{k}`), which h9sandbox does not run: a sandbox is one container; use a configuration with `image` or `build.dockerfile`"
        ))
        .into());
    }
    for k in LOOSENING_KEYS {
        let set = match obj.get(*k) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if set {
            return Err(bad(
                k,
                "would loosen the sandbox's hardening (h9sandbox keeps its own capabilities, seccomp, privileges and mounts); remove it to use this file with h9sandbox",
            ));
        }
    }
    let vars = Vars::new(config, workdir);
    let mut notes = Notes::default();
    let mut not_honoured = other_keys(&obj);
    let string = |key: &str| -> Result<Option<String>> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(key, "must be a string")),
        }
    };
    let source = source(&obj, &name, project, &vars, &mut notes)?;
    let container_env = env_map(
        obj.get("containerEnv"),
        "containerEnv",
        &name,
        &vars,
        &mut notes,
    )?
    .into_iter()
    .map(|(k, v)| (k, v.unwrap_or_default()))
    .collect();
    let remote_env = env_map(obj.get("remoteEnv"), "remoteEnv", &name, &vars, &mut notes)?;
    let user = string("remoteUser")?.or(string("containerUser")?);
    let mut lifecycle = Vec::new();
    for key in [
        "onCreateCommand",
        "updateContentCommand",
        "postCreateCommand",
        "postStartCommand",
    ] {
        if let Some(v) = obj.get(key) {
            let cmd = lifecycle_value(v, key, &name, &vars, &mut notes)?;
            if let Some(cmd) = cmd {
                lifecycle.push((key, cmd));
            }
        }
    }
    let workspace_folder = string("workspaceFolder")?
        .map(|w| vars.substitute(&w, "workspaceFolder", &mut notes))
        .filter(|w| !w.is_empty());
    if let Some(w) = &workspace_folder {
        if !w.starts_with('/') {
            return Err(bad(
                "workspaceFolder",
                "must be an absolute path in the container",
            ));
        }
    }
    let mut forward_ports = ports(&obj, &name)?;
    let run_args = match obj.get("runArgs") {
        None | Some(Value::Null) => RunArgs::default(),
        Some(Value::Array(a)) => {
            let mut words = Vec::new();
            for w in a {
                let Value::String(s) = w else {
                    return Err(bad("runArgs", "must be an array of strings"));
                };
                words.push(vars.substitute(s, "runArgs", &mut notes));
            }
            parse_run_args(&words, &name, &mut forward_ports)?
        }
        Some(_) => return Err(bad("runArgs", "must be an array of strings")),
    };
    if obj.get("overrideCommand") == Some(&Value::Bool(false)) {
        not_honoured.push(
            "overrideCommand false (the image's own command never runs: h9sandbox's agent is PID 1)"
                .into(),
        );
    }
    if obj.get("init").is_some_and(|v| !v.is_boolean()) {
        return Err(bad("init", "must be true or false"));
    }
    let host_requirements = host_requirements(obj.get("hostRequirements"), &name)?;
    for r in notes.local_env {
        not_honoured.push(format!(
            "{r} (a devcontainer.json may be rewritten by the sandbox, so it may not copy this host's environment into it; pass a variable to one command with `h9sandbox exec --env NAME`)"
        ));
    }
    Ok(Devcontainer {
        config: config.to_path_buf(),
        project: project.to_path_buf(),
        source,
        container_env,
        remote_env,
        user,
        lifecycle,
        workspace_folder,
        forward_ports,
        run_args,
        host_requirements,
        not_honoured,
    })
}

/// The keys of `obj` h9sandbox neither reads nor refuses, each as a phrase for the warning
/// (`features` with the features' IDs, the lifecycle commands it never runs, unknown keys).
fn other_keys(obj: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for key in obj.keys() {
        let k = key.as_str();
        if READ_KEYS.contains(&k) || QUIET_KEYS.contains(&k) || LOOSENING_KEYS.contains(&k) {
            continue;
        }
        out.push(match k {
            "features" => {
                let ids: Vec<&str> = obj[k]
                    .as_object()
                    .map(|f| f.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                format!(
                    "features ({}: h9sandbox installs no Dev Container Features; install what they provide in the Dockerfile or a lifecycle command)",
                    ids.join(", ")
                )
            }
            "initializeCommand" => {
                "initializeCommand (a command on this host: never run)".to_string()
            }
            "postAttachCommand" => {
                "postAttachCommand (nothing attaches to a sandbox: not run)".to_string()
            }
            "workspaceMount" => {
                "workspaceMount (the work dir is always mounted at its own path)".to_string()
            }
            "updateRemoteUserUID" => {
                "updateRemoteUserUID (no user's IDs are changed; h9sandbox runs as the work dir's owner unless remoteUser says otherwise)".to_string()
            }
            other => other.to_string(),
        });
    }
    out
}

/// `forwardPorts` and `appPort`, as written.
fn ports(obj: &serde_json::Map<String, Value>, name: &str) -> Result<Vec<String>> {
    let bad = |key: &str, why: &str| -> anyhow::Error {
        Error::Invalid(format!("{name}: `{key}` {why}")).into()
    };
    let mut forward_ports = Vec::new();
    for key in ["forwardPorts", "appPort"] {
        match obj.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) => {
                for p in a {
                    forward_ports.push(port(p).ok_or_else(|| {
                        bad(key, "must hold port numbers or \"host:port\" strings")
                    })?);
                }
            }
            Some(p) => forward_ports
                .push(port(p).ok_or_else(|| bad(key, "must be a port, or an array of ports"))?),
        }
    }
    Ok(forward_ports)
}

/// `image`, or the Dockerfile build (`build.*`, or the older `dockerFile` and `context`),
/// checked to lie inside `project`.
fn source(
    obj: &serde_json::Map<String, Value>,
    name: &str,
    project: &Path,
    vars: &Vars,
    notes: &mut Notes,
) -> Result<Source> {
    let bad = |key: &str, why: &str| -> anyhow::Error {
        Error::Invalid(format!("{name}: `{key}` {why}")).into()
    };
    let build = match obj.get("build") {
        None | Some(Value::Null) => None,
        Some(Value::Object(b)) => Some(b.clone()),
        Some(_) => return Err(bad("build", "must be an object")),
    };
    let get = |key: &str, legacy: &[&str]| -> Option<Value> {
        build
            .as_ref()
            .and_then(|b| b.get(key).cloned())
            .or_else(|| legacy.iter().find_map(|k| obj.get(*k).cloned()))
            .filter(|v| !v.is_null())
    };
    let Some(dockerfile) = get("dockerfile", &["dockerFile", "dockerfile"]) else {
        return match obj.get("image") {
            Some(Value::String(i)) if !i.trim().is_empty() => {
                Ok(Source::Image(vars.substitute(i, "image", notes)))
            }
            Some(_) => Err(bad("image", "must be an image name")),
            None => Err(Error::Invalid(format!(
                "{name} names no image: it needs `image`, `build.dockerfile` or (not supported by h9sandbox) `dockerComposeFile`"
            ))
            .into()),
        };
    };
    let Value::String(dockerfile) = dockerfile else {
        return Err(bad("build.dockerfile", "must be a path"));
    };
    let base = Path::new(name).parent().unwrap_or(Path::new("/"));
    let inside = |key: &str, rel: &str| -> Result<PathBuf> {
        let p = base.join(vars.substitute(rel, key, &mut Notes::default()));
        let c = p
            .canonicalize()
            .map_err(|e| Error::Invalid(format!("{name}: `{key}` {}: {e}", p.display())))?;
        if !c.starts_with(project) {
            return Err(Error::Invalid(format!(
                "{name}: `{key}` {} lies outside the project folder {}; a devcontainer.json, which a sandbox may rewrite, may only build from files inside it",
                c.display(),
                project.display()
            ))
            .into());
        }
        Ok(c)
    };
    let dockerfile = inside("build.dockerfile", &dockerfile)?;
    let context = match get("context", &["context"]) {
        None => dockerfile.parent().unwrap_or(project).to_path_buf(),
        Some(Value::String(c)) => inside("build.context", &c)?,
        Some(_) => return Err(bad("build.context", "must be a path")),
    };
    let mut args = Vec::new();
    if let Some(a) = get("args", &[]) {
        let Value::Object(a) = a else {
            return Err(bad("build.args", "must be an object of strings"));
        };
        for (k, v) in a {
            let Value::String(v) = v else {
                return Err(bad(&format!("build.args.{k}"), "must be a string"));
            };
            args.push((
                k.clone(),
                vars.substitute(&v, &format!("build.args.{k}"), notes),
            ));
        }
    }
    let target = match get("target", &[]) {
        None => None,
        Some(Value::String(t)) => Some(t),
        Some(_) => return Err(bad("build.target", "must be a string")),
    };
    let cache_from = match get("cacheFrom", &[]) {
        None => Vec::new(),
        Some(Value::String(c)) => vec![c],
        Some(Value::Array(a)) => a
            .iter()
            .map(|c| c.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("build.cacheFrom", "must be a string or strings"))?,
        Some(_) => return Err(bad("build.cacheFrom", "must be a string or strings")),
    };
    if let Some(b) = &build {
        for k in b.keys() {
            if !["dockerfile", "context", "args", "target", "cacheFrom"].contains(&k.as_str()) {
                return Err(bad(
                    &format!("build.{k}"),
                    "is not supported by h9sandbox (build options could loosen the build: networks, secrets, hosts); remove it",
                ));
            }
        }
    }
    Ok(Source::Build(BuildSpec {
        context,
        dockerfile,
        tag: image_tag(project, Path::new(name)),
        args,
        target,
        cache_from,
        no_network: false,
        labels: BTreeMap::from([(LABEL_DEVCONTAINER.to_string(), name.to_string())]),
    }))
}

/// The name of the image built for the configuration `config` of `project`:
/// `h9sandbox-devcontainer-<project folder's name>-<12 hex of the configuration's path>:latest`
/// (the same for every `up` of that file, so the engine's build cache serves the next one).
pub fn image_tag(project: &Path, config: &Path) -> String {
    let folder = project.file_name().map_or(project, Path::new);
    super::build::image_name(
        "h9sandbox-devcontainer",
        folder,
        config.as_os_str().as_encoded_bytes(),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An environment object (`containerEnv`, `remoteEnv`): names and values (`None`: `null`,
/// which unsets the name in `remoteEnv`).
fn env_map(
    v: Option<&Value>,
    key: &str,
    name: &str,
    vars: &Vars,
    notes: &mut Notes,
) -> Result<Vec<(String, Option<String>)>> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let Value::Object(m) = v else {
        return Err(
            Error::Invalid(format!("{name}: `{key}` must be an object of NAME: value")).into(),
        );
    };
    let mut out = Vec::new();
    for (k, v) in m {
        check_env_name(k).map_err(|why| Error::Invalid(format!("{name}: `{key}.{k}` {why}")))?;
        let value = match v {
            Value::Null => None,
            Value::String(s) => Some(vars.substitute(s, &format!("{key}.{k}"), notes)),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => {
                return Err(Error::Invalid(format!("{name}: `{key}.{k}` must be a string")).into())
            }
        };
        out.push((k.clone(), value));
    }
    Ok(out)
}

/// Refuses an environment variable name the container could not be given, or one of
/// h9sandbox's own (`H9SANDBOX_*`, which mark its processes).
fn check_env_name(k: &str) -> Result<(), String> {
    if k.is_empty() || k.contains(['=', '\0']) {
        return Err("is not a usable variable name".into());
    }
    if k.starts_with("H9SANDBOX_") {
        return Err("is reserved: h9sandbox sets H9SANDBOX_* itself".into());
    }
    Ok(())
}

/// A lifecycle command's value (`None`: empty, nothing to run).
fn lifecycle_value(
    v: &Value,
    key: &str,
    name: &str,
    vars: &Vars,
    notes: &mut Notes,
) -> Result<Option<Lifecycle>> {
    let bad = || -> anyhow::Error {
        Error::Invalid(format!(
            "{name}: `{key}` must be a command line, an array of a program and its arguments, or an object of such commands"
        ))
        .into()
    };
    Ok(match v {
        Value::Null => None,
        Value::String(s) if s.trim().is_empty() => None,
        Value::String(s) => Some(Lifecycle::Shell(vars.substitute(s, key, notes))),
        Value::Array(a) if a.is_empty() => None,
        Value::Array(a) => Some(Lifecycle::Argv(
            a.iter()
                .map(|w| w.as_str().map(|w| vars.substitute(w, key, notes)))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(bad)?,
        )),
        Value::Object(m) => {
            let mut cmds = Vec::new();
            for (n, c) in m {
                match c {
                    Value::Object(_) => return Err(bad()),
                    c => {
                        if let Some(c) = lifecycle_value(c, key, name, vars, notes)? {
                            cmds.push((n.clone(), c));
                        }
                    }
                }
            }
            (!cmds.is_empty()).then_some(Lifecycle::Parallel(cmds))
        }
        _ => return Err(bad()),
    })
}

/// A port of `forwardPorts` / `appPort`: a number (1-65535) or a `"host:port"` string.
fn port(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .filter(|p| (1..=65535).contains(p))
            .map(|p| p.to_string()),
        Value::String(s) if !s.is_empty() && !s.contains(char::is_whitespace) => Some(s.clone()),
        _ => None,
    }
}

/// `hostRequirements`: (cpus, memory in bytes); `storage` and `gpu` are not checked.
fn host_requirements(v: Option<&Value>, name: &str) -> Result<(Option<f64>, Option<u64>)> {
    let Some(Value::Object(m)) = v else {
        return Ok((None, None));
    };
    let cpus = m.get("cpus").and_then(Value::as_f64);
    let memory = match m.get("memory").and_then(Value::as_str) {
        None => None,
        Some(s) => {
            // The specification writes `4gb`, `512mb`; Docker's notation drops the `b`.
            let t = s.trim().to_ascii_lowercase();
            let t = t.strip_suffix('b').unwrap_or(&t);
            Some(crate::config::parse_size(t).map_err(|_| {
                Error::Invalid(format!(
                    "{name}: `hostRequirements.memory` {s:?} is not a size such as 4gb"
                ))
            })?)
        }
    };
    Ok((cpus, memory))
}

/// How one `runArgs` option is treated.
enum RunArg {
    /// Honoured: (takes a value).
    Honoured(bool),
    /// Would loosen the sandbox: refused.
    Loosens(bool),
}

/// The `docker run` options of `runArgs` h9sandbox knows: (names, how).
const RUN_ARGS: &[(&[&str], RunArg)] = &[
    (&["-e", "--env"], RunArg::Honoured(true)),
    (&["-l", "--label"], RunArg::Honoured(true)),
    (&["--network", "--net"], RunArg::Honoured(true)),
    (&["--cap-drop"], RunArg::Honoured(true)),
    (&["--security-opt"], RunArg::Honoured(true)),
    (&["-m", "--memory"], RunArg::Honoured(true)),
    (&["--cpus"], RunArg::Honoured(true)),
    (&["--pids-limit"], RunArg::Honoured(true)),
    (&["-p", "--publish"], RunArg::Honoured(true)),
    (
        &["--init", "--rm", "-i", "--interactive", "-t", "--tty"],
        RunArg::Honoured(false),
    ),
    (&["--privileged"], RunArg::Loosens(false)),
    (&["-P", "--publish-all"], RunArg::Loosens(false)),
    (
        &[
            "--cap-add",
            "--device",
            "--device-cgroup-rule",
            "-v",
            "--volume",
            "--mount",
            "--volumes-from",
            "--tmpfs",
            "--pid",
            "--ipc",
            "--uts",
            "--userns",
            "--cgroupns",
            "--cgroup-parent",
            "--group-add",
            "--sysctl",
            "--ulimit",
            "--runtime",
            "--memory-swap",
            "--env-file",
            "--gpus",
        ],
        RunArg::Loosens(true),
    ),
];

/// Parses `runArgs` (`--name=value` and `--name value` forms), keeping what h9sandbox honours
/// and adding `-p` ports to `ports`. Errors, naming the argument: one that would loosen the
/// sandbox, one h9sandbox does not support, a bad value.
fn parse_run_args(words: &[String], name: &str, ports: &mut Vec<String>) -> Result<RunArgs> {
    let mut out = RunArgs::default();
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        let (opt, inline) = match word.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v.to_string())),
            _ => (word.as_str(), None),
        };
        let Some((_, how)) = RUN_ARGS.iter().find(|(names, _)| names.contains(&opt)) else {
            return Err(Error::Invalid(format!(
                "{name}: `runArgs` {word:?} is not supported by h9sandbox (it honours --env, --label, --init, --network none, --cap-drop, --security-opt no-new-privileges, --memory, --cpus, --pids-limit and -p); remove it"
            ))
            .into());
        };
        let takes_value = match how {
            RunArg::Honoured(v) | RunArg::Loosens(v) => *v,
        };
        let value = if takes_value {
            match inline {
                Some(v) => Some(v),
                None => {
                    i += 1;
                    Some(words.get(i).cloned().ok_or_else(|| {
                        Error::Invalid(format!("{name}: `runArgs` {word} needs a value"))
                    })?)
                }
            }
        } else {
            None
        };
        i += 1;
        let shown = match &value {
            Some(v) => format!("{opt} {v}"),
            None => opt.to_string(),
        };
        let loosens = || -> anyhow::Error {
            Error::Invalid(format!(
                "{name}: `runArgs` {shown:?} would loosen the sandbox's hardening (h9sandbox keeps its own capabilities, seccomp, mounts, namespaces and limits); remove it to use this file with h9sandbox"
            ))
            .into()
        };
        if matches!(how, RunArg::Loosens(_)) {
            return Err(loosens());
        }
        let v = value.unwrap_or_default();
        let bad = |why: &str| -> anyhow::Error {
            Error::Invalid(format!("{name}: `runArgs` {shown:?}: {why}")).into()
        };
        match opt {
            "-e" | "--env" => match v.split_once('=') {
                Some((k, val)) => {
                    check_env_name(k).map_err(|why| bad(&why))?;
                    out.env.push((k.to_string(), val.to_string()));
                }
                // `--env NAME` passes this host's value: not from a file the sandbox can write.
                None => return Err(bad("would copy this host's variable into the sandbox; give NAME=VALUE, or pass it to one command with `h9sandbox exec --env NAME`")),
            },
            "-l" | "--label" => out.labels.push(v),
            "--network" | "--net" => match v.as_str() {
                "none" => out.network_none = true,
                // The sandbox's own network (bridge, none or the allowlist) stays.
                "bridge" | "default" => {}
                _ => return Err(loosens()),
            },
            // Every capability but the profile's is dropped already; dropping more is not
            // offered (the profiles are `minimal` and `standard`: `--caps`).
            "--cap-drop" => {}
            // h9sandbox sets no-new-privileges itself.
            "--security-opt" if is_no_new_privileges(&v) => {}
            "--security-opt" => return Err(loosens()),
            "-m" | "--memory" => {
                crate::config::parse_size(&v).map_err(|_| bad("not a size such as 512m"))?;
                out.memory = Some(v);
            }
            "--cpus" => {
                out.cpus = Some(
                    v.parse::<f64>()
                        .ok()
                        .filter(|c| *c > 0.0)
                        .ok_or_else(|| bad("not a number of CPUs"))?,
                )
            }
            "--pids-limit" => {
                out.pids_limit = Some(
                    v.parse::<u32>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| bad("not a positive number"))?,
                )
            }
            "-p" | "--publish" => {
                // [IP:][HOST:]CONTAINER[/PROTO]: the container's port is recorded.
                let container = v.rsplit(':').next().unwrap_or(&v);
                let container = container.split('/').next().unwrap_or(container);
                container
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| bad("not a port"))?;
                ports.push(container.to_string());
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Whether a `--security-opt` value is `no-new-privileges` (which every sandbox has).
fn is_no_new_privileges(v: &str) -> bool {
    matches!(
        v,
        "no-new-privileges" | "no-new-privileges:true" | "no-new-privileges=true"
    )
}

/// The references of a file's strings that h9sandbox did not substitute.
#[derive(Debug, Default)]
struct Notes {
    /// `${localEnv:…}` references, with where (`containerEnv.TOKEN: ${localEnv:TOKEN}`).
    local_env: Vec<String>,
}

/// The variables of the specification, for a sandbox on `workdir`.
struct Vars {
    workdir: String,
    basename: String,
    id: String,
}

impl Vars {
    fn new(config: &Path, workdir: &Path) -> Vars {
        Vars {
            workdir: workdir.display().to_string(),
            basename: workdir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            id: hex(&Sha256::digest(config.as_os_str().as_encoded_bytes()))[..16].to_string(),
        }
    }

    /// `s` with the variables substituted (`where` names the key, for the notes);
    /// `${containerEnv:…}` and unknown variables are left as they are.
    fn substitute(&self, s: &str, at: &str, notes: &mut Notes) -> String {
        substitute(s, |var| match var {
            "localWorkspaceFolder" | "containerWorkspaceFolder" => Some(self.workdir.clone()),
            "localWorkspaceFolderBasename" | "containerWorkspaceFolderBasename" => {
                Some(self.basename.clone())
            }
            "devcontainerId" => Some(self.id.clone()),
            v if v.starts_with("localEnv:") => {
                let mut parts = v.splitn(3, ':');
                let (_, var, default) = (parts.next(), parts.next(), parts.next());
                notes
                    .local_env
                    .push(format!("{at}: ${{localEnv:{}}}", var.unwrap_or_default()));
                Some(default.unwrap_or_default().to_string())
            }
            _ => None,
        })
    }
}

/// `s` with each `${NAME}` replaced by `lookup(NAME)`; those it returns `None` for stay.
fn substitute(s: &str, mut lookup: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                let var = &after[..end];
                match lookup(var) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&rest[start..start + 2 + end + 1]),
                }
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// What [`prepare`] settled for the new sandbox, once its engine and image are known.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
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
pub async fn prepare(
    ctx: &Ctx,
    engine: &AnyEngine,
    dc: &Devcontainer,
    image: &str,
    limits: &Limits,
    user_given: bool,
) -> Result<Prepared> {
    if engine.kind().isolation() != Isolation::Container {
        return Err(Error::Invalid(format!(
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
        super::build::build(ctx, engine, spec, limits.network).await?;
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
            "{name}: forwardPorts {} recorded in the sandbox's record (`h9sandbox ls --format json`: devcontainer.forward_ports) but not forwarded: h9sandbox has no port forwarding yet; reach a server in the sandbox through `h9sandbox exec` (e.g. curl inside it)",
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
pub fn container_env(dc: &Devcontainer, image_env: &[String]) -> Vec<(String, String)> {
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
            Error::Invalid(format!(
                "{name}: `remoteUser` {user} is not a user of the image {image} (its /etc/passwd has no such name); create it in the Dockerfile, or give UID:GID"
            ))
            .into()
        })
}

/// The bootstrap command running `dc`'s lifecycle commands in a sandbox on `workdir` whose user
/// is `user`: a POSIX shell script run as root (as every bootstrap), which links
/// `workspaceFolder` to the work dir when it lies elsewhere, enters it when it lies inside, and
/// runs each command as `user` through h9sandbox's in-container wrapper (`agent exec --user`,
/// which gives the user a home and the set-ID filter), stopping at the first that fails. Its
/// first line is a comment naming the file and the commands, which diagnostics show for it.
/// `None` when there is nothing to run.
pub fn bootstrap_script(dc: &Devcontainer, workdir: &Path, user: Ids) -> Option<String> {
    let keys: Vec<&str> = dc.lifecycle.iter().map(|(k, _)| *k).collect();
    let mut lines = vec![
        format!(
            "# the lifecycle commands of {} ({})",
            dc.config.display(),
            if keys.is_empty() {
                "workspaceFolder".to_string()
            } else {
                keys.join(", ")
            }
        ),
        "set -e".to_string(),
    ];
    let work = workdir.display().to_string();
    let mut cwd = work.clone();
    if let Some(w) = dc.workspace_folder.as_deref().filter(|w| *w != work) {
        if Path::new(w).starts_with(workdir) {
            cwd = w.to_string();
        } else {
            // Paths under it reach the work dir; an existing path of the image is left alone.
            let parent = Path::new(w).parent().unwrap_or(Path::new("/"));
            lines.push(format!(
                "if [ ! -e {w} ] && [ ! -L {w} ]; then mkdir -p {p} && ln -s {work} {w}; fi",
                w = shell_quote(w),
                p = shell_quote(&parent.display().to_string()),
                work = shell_quote(&work)
            ));
        }
    }
    if dc.lifecycle.is_empty() && lines.len() == 2 {
        return None;
    }
    lines.push(format!("cd {}", shell_quote(&cwd)));
    let run_as = |c: &Lifecycle| -> String {
        let wrapper = format!(
            "HOME= {} {} exec --user {user} --",
            crate::contract::BIN,
            crate::contract::ARG
        );
        match c {
            Lifecycle::Shell(s) => format!("{wrapper} sh -c {}", shell_quote(s)),
            Lifecycle::Argv(a) => format!(
                "{wrapper} {}",
                a.iter()
                    .map(|w| shell_quote(w))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Lifecycle::Parallel(_) => unreachable!("nested objects are refused by parse"),
        }
    };
    for (key, cmd) in &dc.lifecycle {
        lines.push(format!(
            "echo {} >&2",
            shell_quote(&format!("devcontainer: {key}"))
        ));
        match cmd {
            Lifecycle::Parallel(cmds) => {
                lines.push("s=0".into());
                for (i, (_, c)) in cmds.iter().enumerate() {
                    lines.push(format!("{} & p{i}=$!", run_as(c)));
                }
                for i in 0..cmds.len() {
                    lines.push(format!("wait $p{i} || s=$?"));
                }
                lines.push("[ \"$s\" -eq 0 ] || exit \"$s\"".into());
            }
            c => lines.push(run_as(c)),
        }
    }
    Some(lines.join("\n"))
}

/// `limits` with `runArgs`' `--memory`, `--cpus`, `--pids-limit` and `--network none` of `dc`
/// applied: each may only tighten them (the sandbox's limits are h9sandbox's). Errors: a looser
/// one, naming it and the sandbox's value.
pub fn tighten(dc: &Devcontainer, limits: &mut Limits) -> Result<()> {
    let name = dc.config.display();
    let r = &dc.run_args;
    let looser = |what: &str, asked: String, have: String| -> anyhow::Error {
        Error::Invalid(format!(
            "{name}: `runArgs` {what} {asked} is more than the sandbox's {have}: the limits stay h9sandbox's (raise them with up's flags or configuration, and drop it from runArgs)"
        ))
        .into()
    };
    if let Some(m) = &r.memory {
        let (asked, have) = (
            crate::config::parse_size(m).unwrap_or(u64::MAX),
            crate::config::parse_size(&limits.memory).unwrap_or(0),
        );
        if asked > have {
            return Err(looser("--memory", m.clone(), limits.memory.clone()));
        }
        limits.memory = m.clone();
    }
    if let Some(c) = r.cpus {
        if c > limits.cpus {
            return Err(looser(
                "--cpus",
                c.to_string(),
                crate::types::format_cpus(limits.cpus),
            ));
        }
        limits.cpus = c;
    }
    if let Some(n) = r.pids_limit {
        if n > limits.pids_limit {
            return Err(looser(
                "--pids-limit",
                n.to_string(),
                limits.pids_limit.to_string(),
            ));
        }
        limits.pids_limit = n;
    }
    if r.network_none {
        limits.network = crate::types::Network::None;
        limits.allow.clear();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().canonicalize().unwrap();
        std::fs::create_dir(p.join(".devcontainer")).unwrap();
        (d, p)
    }

    fn parse_in(project: &Path, text: &str) -> Result<Devcontainer> {
        let config = project.join(".devcontainer/devcontainer.json");
        std::fs::write(&config, text).unwrap();
        let (file, proj) = locate(Some(project), None).unwrap();
        assert_eq!((&file, &proj), (&config, &project.to_path_buf()));
        load(&file, &proj, &proj)
    }

    #[test]
    fn comments_and_trailing_commas_are_jsonc() {
        let (_d, p) = dir();
        let dc = parse_in(
            &p,
            r#"// a comment
            {
              /* block */ "image": "debian:bookworm", // trailing
              "containerEnv": { "A": "1", "B": "${localWorkspaceFolderBasename}", },
              "name": "quiet",
              "customizations": { "vscode": { "extensions": ["x"] } },
            }"#,
        )
        .unwrap();
        assert_eq!(dc.source, Source::Image("debian:bookworm".into()));
        let base = p.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            dc.container_env,
            vec![("A".into(), "1".into()), ("B".into(), base)]
        );
        assert!(dc.not_honoured.is_empty(), "{:?}", dc.not_honoured);
        // Not JSON at all: one line naming the file.
        let e = parse_in(&p, "{ image: 'x' }").unwrap_err().to_string();
        assert!(e.contains("is not valid JSON with comments"), "{e}");
    }

    #[test]
    fn a_dockerfile_builds_inside_the_project_only() {
        let (_d, p) = dir();
        std::fs::write(p.join(".devcontainer/Dockerfile"), "FROM scratch\n").unwrap();
        let dc = parse_in(
            &p,
            r#"{ "build": { "dockerfile": "Dockerfile", "context": "..",
                           "args": { "V": "${containerWorkspaceFolder}" }, "target": "dev" } }"#,
        )
        .unwrap();
        let Source::Build(b) = &dc.source else {
            panic!("{:?}", dc.source)
        };
        assert_eq!(b.dockerfile, p.join(".devcontainer/Dockerfile"));
        assert_eq!(b.context, p);
        assert_eq!(b.args, vec![("V".into(), p.display().to_string())]);
        assert_eq!(b.target.as_deref(), Some("dev"));
        assert!(b.tag.starts_with("h9sandbox-devcontainer-"), "{}", b.tag);
        // The older top-level keys, the context defaulting to the Dockerfile's folder.
        let dc = parse_in(&p, r#"{ "dockerFile": "Dockerfile" }"#).unwrap();
        let Source::Build(b) = &dc.source else {
            panic!()
        };
        assert_eq!(b.context, p.join(".devcontainer"));
        // A context or Dockerfile outside the project folder is refused.
        for text in [
            r#"{ "build": { "dockerfile": "Dockerfile", "context": "../.." } }"#,
            r#"{ "build": { "dockerfile": "/etc/hostname" } }"#,
        ] {
            let e = parse_in(&p, text).unwrap_err().to_string();
            assert!(e.contains("lies outside the project folder"), "{e}");
        }
        let e = parse_in(
            &p,
            r#"{ "build": { "dockerfile": "Dockerfile", "options": ["--network=host"] } }"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`build.options` is not supported"), "{e}");
    }

    #[test]
    fn compose_and_loosening_keys_are_refused_naming_them() {
        let (_d, p) = dir();
        let e = parse_in(&p, r#"{ "dockerComposeFile": "c.yml", "service": "app" }"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Docker Compose configuration (`dockerComposeFile`)"),
            "{e}"
        );
        for (text, named) in [
            (r#"{ "image": "x", "privileged": true }"#, "`privileged`"),
            (r#"{ "image": "x", "capAdd": ["SYS_PTRACE"] }"#, "`capAdd`"),
            (
                r#"{ "image": "x", "mounts": ["source=/,target=/h,type=bind"] }"#,
                "`mounts`",
            ),
            (
                r#"{ "image": "x", "runArgs": ["--cap-add=SYS_PTRACE"] }"#,
                "--cap-add SYS_PTRACE",
            ),
            (
                r#"{ "image": "x", "runArgs": ["--security-opt", "seccomp=unconfined"] }"#,
                "--security-opt seccomp=unconfined",
            ),
            (
                r#"{ "image": "x", "runArgs": ["--network=host"] }"#,
                "--network host",
            ),
            (
                r#"{ "image": "x", "runArgs": ["-v", "/:/host"] }"#,
                "-v /:/host",
            ),
            (
                r#"{ "image": "x", "runArgs": ["--privileged"] }"#,
                "--privileged",
            ),
        ] {
            let e = parse_in(&p, text).unwrap_err().to_string();
            assert!(
                e.contains(named) && e.contains("would loosen"),
                "{text}: {e}"
            );
        }
        let e = parse_in(&p, r#"{ "image": "x", "runArgs": ["--hostname", "h"] }"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"--hostname\" is not supported"), "{e}");
        // Nothing named: no image.
        let e = parse_in(&p, r#"{ "name": "x" }"#).unwrap_err().to_string();
        assert!(e.contains("names no image"), "{e}");
        // false and empty values loosen nothing.
        assert!(parse_in(&p, r#"{ "image": "x", "privileged": false, "capAdd": [] }"#).is_ok());
    }

    #[test]
    fn run_args_that_keep_the_hardening_are_honoured() {
        let (_d, p) = dir();
        let dc = parse_in(
            &p,
            r#"{ "image": "x", "forwardPorts": [3000, "db:5432"], "appPort": 8080,
                 "runArgs": ["--init", "-e", "K=V", "--label=team=ml", "--network", "none",
                             "--memory=256m", "--cpus", "0.5", "--pids-limit=64", "-p", "127.0.0.1:9000:9001/tcp",
                             "--cap-drop=NET_RAW", "--security-opt", "no-new-privileges"] }"#,
        )
        .unwrap();
        let r = &dc.run_args;
        assert_eq!(r.env, vec![("K".into(), "V".into())]);
        assert_eq!(r.labels, vec!["team=ml".to_string()]);
        assert!(r.network_none);
        assert_eq!(
            (r.memory.as_deref(), r.cpus, r.pids_limit),
            (Some("256m"), Some(0.5), Some(64))
        );
        assert_eq!(dc.forward_ports, ["3000", "db:5432", "8080", "9001"]);
        let mut limits = Limits {
            cpus: 1.0,
            memory: "512m".into(),
            pids_limit: 256,
            tmp_size: "64m".into(),
            network: crate::types::Network::Bridge,
            allow: vec![],
            caps: crate::types::Caps::Standard,
        };
        let before = limits.clone();
        tighten(&dc, &mut limits).unwrap();
        assert_eq!(
            (
                limits.memory.as_str(),
                limits.cpus,
                limits.pids_limit,
                limits.network
            ),
            ("256m", 0.5, 64, crate::types::Network::None)
        );
        // Looser than the sandbox's: refused, naming it.
        let mut small = Limits {
            memory: "128m".into(),
            ..before
        };
        let e = tighten(&dc, &mut small).unwrap_err().to_string();
        assert!(
            e.contains("`runArgs` --memory 256m is more than the sandbox's 128m"),
            "{e}"
        );
        // `--env NAME` would copy this host's value.
        let e = parse_in(&p, r#"{ "image": "x", "runArgs": ["--env", "HOME"] }"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("would copy this host's variable"), "{e}");
    }

    #[test]
    fn unknown_keys_features_and_local_env_are_named_not_dropped() {
        let (_d, p) = dir();
        let dc = parse_in(
            &p,
            r#"{ "image": "x", "features": { "ghcr.io/devcontainers/features/node:1": {} },
                 "initializeCommand": "rm -rf ~", "frobnicate": 1,
                 "containerEnv": { "TOKEN": "${localEnv:TOKEN}", "D": "${localEnv:NOPE:fallback}" } }"#,
        )
        .unwrap();
        let all = dc.not_honoured.join("; ");
        for part in [
            "features (ghcr.io/devcontainers/features/node:1",
            "initializeCommand (a command on this host: never run)",
            "frobnicate",
            "containerEnv.TOKEN: ${localEnv:TOKEN}",
        ] {
            assert!(all.contains(part), "{part} not in {all}");
        }
        // (JSON objects have no order: by name.)
        assert_eq!(
            dc.container_env,
            vec![
                ("D".into(), "fallback".into()),
                ("TOKEN".into(), String::new())
            ]
        );
        let e = parse_in(
            &p,
            r#"{ "image": "x", "containerEnv": { "H9SANDBOX_EXEC_ID": "1" } }"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("is reserved"), "{e}");
    }

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

    #[test]
    fn lifecycle_commands_take_the_three_forms() {
        let (_d, p) = dir();
        let dc = parse_in(
            &p,
            r#"{ "image": "x", "workspaceFolder": "/workspaces/${localWorkspaceFolderBasename}",
                 "postStartCommand": ["echo", "it's"],
                 "onCreateCommand": "make deps && echo ok",
                 "postCreateCommand": { "a": "echo a", "b": ["echo", "b"] },
                 "updateContentCommand": "" }"#,
        )
        .unwrap();
        let keys: Vec<&str> = dc.lifecycle.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            ["onCreateCommand", "postCreateCommand", "postStartCommand"]
        );
        let script = bootstrap_script(
            &dc,
            &p,
            Ids {
                uid: 1000,
                gid: 1000,
            },
        )
        .unwrap();
        let base = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            script.contains(&format!(
                "ln -s {} /workspaces/{base}",
                shell_quote(&p.display().to_string())
            )),
            "{script}"
        );
        assert!(
            script.contains("HOME= /.h9sandbox/h9sandbox agent exec --user 1000:1000 -- sh -c 'make deps && echo ok'"),
            "{script}"
        );
        assert!(script.contains("-- echo 'it'\\''s'"), "{script}");
        assert!(
            script.contains("& p1=$!") && script.contains("wait $p1 || s=$?"),
            "{script}"
        );
        // Nothing to run, nothing to link: no bootstrap.
        let dc = parse_in(&p, r#"{ "image": "x" }"#).unwrap();
        assert_eq!(bootstrap_script(&dc, &p, Ids::ROOT), None);
        let e = parse_in(&p, r#"{ "image": "x", "postCreateCommand": 5 }"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`postCreateCommand` must be"), "{e}");
    }

    #[test]
    fn the_script_runs_in_sh_and_stops_at_the_first_failure() {
        // The generated script, with the wrapper replaced by `env` (same argument shape:
        // `VAR= PROG ARGS`), run by the host's sh.
        let (_d, p) = dir();
        let dc = parse_in(
            &p,
            r#"{ "image": "x", "onCreateCommand": "echo one > out.txt",
                 "postCreateCommand": { "a": "echo a >> out.txt", "b": "exit 3" },
                 "postStartCommand": "echo never >> out.txt" }"#,
        )
        .unwrap();
        let script = bootstrap_script(&dc, &p, Ids::ROOT)
            .unwrap()
            .replace("/.h9sandbox/h9sandbox agent exec --user 0:0 --", "env");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{script}");
        assert_eq!(
            std::fs::read_to_string(p.join("out.txt")).unwrap(),
            "one\na\n"
        );
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

    #[test]
    fn substitution_leaves_unknown_variables() {
        let s = substitute("a ${x} ${y} ${z", |v| (v == "x").then(|| "X".into()));
        assert_eq!(s, "a X ${y} ${z");
    }
}
