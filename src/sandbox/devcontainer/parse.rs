//! Parsing a devcontainer.json's keys into a [`Devcontainer`]: which keys are read, refused
//! or named in the warning, the image or Dockerfile build, the environments, the lifecycle
//! commands, ports and host requirements.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::Value;

use super::run_args::parse_run_args;
use super::vars::{Notes, Vars};
use super::{Devcontainer, Lifecycle, RunArgs, Source, LABEL_DEVCONTAINER};
use crate::engine::BuildSpec;
use crate::error::Error;

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

/// Parses the text of the devcontainer.json `config` (see [`load`](super::load)).
pub(crate) fn parse(
    text: &str,
    config: &Path,
    project: &Path,
    workdir: &Path,
) -> Result<Devcontainer> {
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
        .map_err(|e| Error::Usage(format!("{name} is not valid JSON with comments: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(Error::Usage(format!("{name}: expected a JSON object")).into());
    };
    let bad = |key: &str, why: &str| -> anyhow::Error {
        Error::Usage(format!("{name}: `{key}` {why}")).into()
    };
    if let Some(k) = COMPOSE_KEYS.iter().find(|k| obj.contains_key(**k)) {
        return Err(Error::Refused(format!(
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
            return Err(Error::Refused(format!(
                "{name}: `{k}` would loosen the sandbox's hardening (h9sandbox keeps its own capabilities, seccomp, privileges and mounts); remove it to use this file with h9sandbox"
            ))
            .into());
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
        Error::Usage(format!("{name}: `{key}` {why}")).into()
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
        Error::Usage(format!("{name}: `{key}` {why}")).into()
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
            None => Err(Error::Usage(format!(
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
            .map_err(|e| Error::Usage(format!("{name}: `{key}` {}: {e}", p.display())))?;
        if !c.starts_with(project) {
            return Err(Error::Refused(format!(
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
                return Err(Error::Refused(format!(
                    "{name}: `build.{k}` is not supported by h9sandbox (build options could loosen the build: networks, secrets, hosts); remove it"
                ))
                .into());
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
pub(crate) fn image_tag(project: &Path, config: &Path) -> String {
    let folder = project.file_name().map_or(project, Path::new);
    crate::sandbox::build::image_name(
        "h9sandbox-devcontainer",
        folder,
        config.as_os_str().as_encoded_bytes(),
    )
}

pub(super) fn hex(bytes: &[u8]) -> String {
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
            Error::Usage(format!("{name}: `{key}` must be an object of NAME: value")).into(),
        );
    };
    let mut out = Vec::new();
    for (k, v) in m {
        check_env_name(k).map_err(|why| Error::Usage(format!("{name}: `{key}.{k}` {why}")))?;
        let value = match v {
            Value::Null => None,
            Value::String(s) => Some(vars.substitute(s, &format!("{key}.{k}"), notes)),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => return Err(Error::Usage(format!("{name}: `{key}.{k}` must be a string")).into()),
        };
        out.push((k.clone(), value));
    }
    Ok(out)
}

/// Refuses an environment variable name the container could not be given, or one of
/// h9sandbox's own (`H9SANDBOX_*`, which mark its processes).
pub(super) fn check_env_name(k: &str) -> Result<(), String> {
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
        Error::Usage(format!(
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
                Error::Usage(format!(
                    "{name}: `hostRequirements.memory` {s:?} is not a size such as 4gb"
                ))
            })?)
        }
    };
    Ok((cpus, memory))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::devcontainer::tests::{dir, parse_in};

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
}
