//! Merging the layers: the built-in defaults, the configuration file, the environment and
//! flags, into one table that remembers where each value came from ([`Layers`]).

use std::path::Path;

use super::file::{check_user_file, config_files, read_config_file};
use super::keys::{key_names, lookup};
use super::project::widens_caps;
use super::value::coerce;
use super::{
    nearest_key, Config, Kind, Layers, Origin, ProjectText, HOST_SIDE_KEYS, KEYS, OTHER_ENV,
    SANDBOX_ENABLED, UP_ONLY_KEYS, USER_FILE_ONLY_KEYS,
};
use crate::error::Error;

impl Layers {
    /// Built-in defaults, then the file (if any), then the environment. Never the project
    /// file `./sandbox.toml` (see [`Layers::load_with_project`]).
    pub fn load(explicit_file: Option<&Path>) -> Result<Layers, Error> {
        Self::load_with_env(explicit_file, |k| std::env::var(k).ok())
    }

    /// As [`Layers::load`], for a command on existing sandboxes: a bad value of a key only `up`
    /// uses ([`UP_ONLY_KEYS`]), in the file or the environment, is left at its default and
    /// reported in [`Layers::warnings`] instead of failing the command.
    pub fn load_for_existing(explicit_file: Option<&Path>) -> Result<Layers, Error> {
        Self::load_for_existing_with_env(explicit_file, |k| std::env::var(k).ok())
    }

    /// As [`Layers::load_for_existing`], reading the environment through `env` (for tests).
    pub fn load_for_existing_with_env(
        explicit_file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Layers, Error> {
        let mut layers = Self::defaults();
        layers.lenient = true;
        layers.load_into(explicit_file, env, None)?;
        layers.settle()?;
        Ok(layers)
    }

    /// As [`Layers::load`], reading the environment through `env` (for tests).
    pub fn load_with_env(
        explicit_file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Layers, Error> {
        Self::load_opts(explicit_file, env, None)
    }

    /// The built-in defaults alone (no file, no environment), for a process that is handed its
    /// few settings explicitly (the owner watcher, `sandbox::watch`).
    pub fn defaults() -> Layers {
        let table = toml::Table::try_from(Config::default()).expect("defaults serialize");
        let origins = table.keys().map(|k| (k.clone(), Origin::Default)).collect();
        Layers {
            table,
            origins,
            file: None,
            lenient: false,
            warnings: Vec::new(),
        }
    }

    pub(super) fn load_opts(
        explicit_file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
        project: Option<&ProjectText>,
    ) -> Result<Layers, Error> {
        let mut layers = Self::defaults();
        layers.load_into(explicit_file, env, project)?;
        Ok(layers)
    }

    /// Whether these layers are for a command on existing sandboxes
    /// ([`Layers::load_for_existing`]), which makes none.
    pub fn for_existing(&self) -> bool {
        self.lenient
    }

    /// Whether a bad value of `key` is to be ignored (with a warning) rather than fail.
    fn tolerates(&self, key: &str) -> bool {
        self.lenient && UP_ONLY_KEYS.contains(&key)
    }

    /// Records that the bad value `e` of `key` is ignored (see [`Layers::tolerates`]).
    fn ignore(&mut self, key: &str, e: Error) {
        let (origin, message) = match e {
            Error::Config { origin, message } => (origin, message),
            other => (key.to_string(), other.to_string()),
        };
        self.warnings.push(format!(
            "ignoring {origin} ({key}), which only the commands that make sandboxes use (`up`, `run`, `mcp`: they refuse it): {message}"
        ));
    }

    fn load_into(
        &mut self,
        explicit_file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
        project: Option<&ProjectText>,
    ) -> Result<(), Error> {
        let layers = self;
        for path in config_files(explicit_file)? {
            layers.merge_file(&path, explicit_file.is_some())?;
            layers.file = Some(path);
        }
        if let Some(p) = project {
            layers.merge_text(&p.path, &p.text, true)?;
            layers.file = Some(p.path.clone());
        }
        for key in KEYS {
            let var = format!("H9SANDBOX_{}", key.name.to_ascii_uppercase());
            if USER_FILE_ONLY_KEYS.contains(&key.name) {
                if env(&var).is_some_and(|v| !v.is_empty()) {
                    let e = Error::Config {
                        origin: Origin::Env(var).to_string(),
                        message: format!(
                            "{} cannot come from the environment: it widens which host directories a sandbox may mount; set it in your own configuration file ($XDG_CONFIG_HOME/h9sandbox/config.toml) or a --config file",
                            key.name
                        ),
                    };
                    if !layers.tolerates(key.name) {
                        return Err(e);
                    }
                    layers.ignore(key.name, e);
                }
                continue;
            }
            let (var, value) = match env(&var).filter(|v| !v.is_empty()) {
                Some(v) => (var, v),
                None => match key
                    .unprefixed_env
                    .and_then(|s| env(s).filter(|v| !v.is_empty()).map(|v| (s.to_string(), v)))
                {
                    Some(pair) => pair,
                    None => continue,
                },
            };
            match layers.set_str(key.name, &value, Origin::Env(var)) {
                Err(e) if layers.tolerates(key.name) => layers.ignore(key.name, e),
                r => r?,
            }
        }
        if env("H9SANDBOX_ENGINE").is_none_or(|v| v.is_empty()) {
            if let Some(v) = env(SANDBOX_ENABLED).filter(|v| !v.is_empty()) {
                let origin = Origin::Env(SANDBOX_ENABLED.into());
                match v.trim().to_ascii_lowercase().as_str() {
                    "false" | "0" | "no" | "off" => layers.set_str("engine", "local", origin)?,
                    "true" | "1" | "yes" | "on" => {}
                    _ => {
                        return Err(Error::Config {
                            origin: origin.to_string(),
                            message: format!(
                                "'{v}' is not true or false (false selects engine = \"local\")"
                            ),
                        })
                    }
                }
            }
        }
        Ok(())
    }

    /// Names of `H9SANDBOX_*` environment variables that are neither a configuration key nor
    /// one of [`OTHER_ENV`] (likely typos), from `vars`.
    pub fn unknown_env_vars(vars: impl Iterator<Item = String>) -> Vec<String> {
        vars.filter(|v| {
            !OTHER_ENV.contains(&v.as_str())
                && v.strip_prefix("H9SANDBOX_")
                    .is_some_and(|k| !KEYS.iter().any(|key| key.name.eq_ignore_ascii_case(k)))
        })
        .collect()
    }

    /// Merges the user's (or, `explicit`, a given) configuration file `path`. The user's file
    /// decides what runs on the host (`engine_bin`), so like ssh's `~/.ssh/config` it must belong
    /// to the invoking user or root and be writable by nobody else ([`check_user_file`]); a file
    /// given with `--config` is the caller's explicit choice and is read as it is.
    pub(super) fn merge_file(&mut self, path: &Path, explicit: bool) -> Result<(), Error> {
        let fail = |message: String| Error::Config {
            origin: Origin::File(path.to_path_buf()).to_string(),
            message,
        };
        let (text, md) =
            read_config_file(path).map_err(|e| fail(format!("cannot be read: {e}")))?;
        if !explicit {
            check_user_file(path, &md).map_err(fail)?;
        }
        self.merge_text(path, &text, false).map(|_| ())
    }

    /// Merges `text`, the content of the file `path` (a project file when `project`: then
    /// [`HOST_SIDE_KEYS`] are refused); returns the keys it set.
    pub(super) fn merge_text(
        &mut self,
        path: &Path,
        text: &str,
        project: bool,
    ) -> Result<toml::Table, Error> {
        let origin = Origin::File(path.to_path_buf());
        let parsed: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
            let hint = line
                .and_then(|n| text.lines().nth(n - 1))
                .and_then(unquoted_value_hint)
                .map(|h| format!("; {h}"))
                .unwrap_or_default();
            Error::Config {
                origin: origin.to_string(),
                message: format!(
                    "is not valid TOML{}: {}{hint}",
                    line.map(|n| format!(" (line {n})")).unwrap_or_default(),
                    e.message().trim().replace('\n', "; ")
                ),
            }
        })?;
        let mut set = toml::Table::new();
        for (name, value) in parsed {
            let key = lookup(&name).ok_or_else(|| Error::Config {
                origin: origin.to_string(),
                message: match nearest_key(&name) {
                    Some(k) => format!(
                        "unknown key `{name}`; did you mean `{k}`? (known keys: {})",
                        key_names()
                    ),
                    None => format!("unknown key `{name}` (known keys: {})", key_names()),
                },
            })?;
            if project && USER_FILE_ONLY_KEYS.contains(&name.as_str()) {
                return Err(Error::Config {
                    origin: format!("{origin}, key `{name}`"),
                    message: "not allowed in a project's sandbox.toml, which a sandbox may be able to write: it widens which host directories a sandbox may mount; set it in your own configuration file ($XDG_CONFIG_HOME/h9sandbox/config.toml) or a --config file".into(),
                });
            }
            if project {
                self.check_narrows(&origin, &name, &value)?;
            }
            if project && HOST_SIDE_KEYS.contains(&name.as_str()) {
                return Err(Error::Config {
                    origin: format!("{origin}, key `{name}`"),
                    message: format!(
                        "not allowed in a project's sandbox.toml, even a trusted one: it acts on the host; set it in $XDG_CONFIG_HOME/h9sandbox/config.toml, H9SANDBOX_{} or with --config",
                        name.to_ascii_uppercase()
                    ),
                });
            }
            let value = match coerce(key, value) {
                Ok(v) => v,
                Err(m) => {
                    let e = Error::Config {
                        origin: format!("{origin}, key `{name}`"),
                        message: m,
                    };
                    if project || !self.tolerates(&name) {
                        return Err(e);
                    }
                    self.ignore(&name, e);
                    continue;
                }
            };
            if project && name == "caps" && widens_caps(self.table.get("caps"), &value) {
                return Err(Error::Config {
                    origin: format!("{origin}, key `{name}`"),
                    message: "a project's sandbox.toml may only narrow the capability profile (caps = \"minimal\"), never widen it; set caps = \"standard\" in your configuration file, H9SANDBOX_CAPS or with up --caps".into(),
                });
            }
            self.table.insert(name.clone(), value.clone());
            self.origins.insert(name.clone(), origin.clone());
            set.insert(name, value);
        }
        Ok(set)
    }

    /// Sets `name` from a string (environment or flag), converted to the key's type.
    pub fn set_str(&mut self, name: &str, value: &str, origin: Origin) -> Result<(), Error> {
        let key = lookup(name).ok_or_else(|| Error::Config {
            origin: origin.to_string(),
            message: format!("unknown key `{name}`"),
        })?;
        if key.kind == Kind::PathList || USER_FILE_ONLY_KEYS.contains(&name) {
            return Err(Error::Config {
                origin: origin.to_string(),
                message: format!(
                    "{name} can only be set in a configuration file (your own, or a --config file)"
                ),
            });
        }
        let v = match key.kind {
            Kind::Str | Kind::Path | Kind::OneOf(_) => toml::Value::String(value.to_string()),
            Kind::HostList => toml::Value::Array(
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|h| !h.is_empty())
                    .map(|h| toml::Value::String(h.to_string()))
                    .collect(),
            ),
            _ => {
                let parsed = value.trim().parse::<toml::Value>().ok().or_else(|| {
                    // A bare scalar is not a TOML document; parse it as a value.
                    toml::from_str::<toml::Table>(&format!("v = {value}"))
                        .ok()
                        .and_then(|mut t| t.remove("v"))
                });
                parsed.unwrap_or_else(|| toml::Value::String(value.to_string()))
            }
        };
        let v = coerce(key, v).map_err(|m| Error::Config {
            origin: origin.to_string(),
            message: m,
        })?;
        self.table.insert(name.to_string(), v);
        self.origins.insert(name.to_string(), origin);
        Ok(())
    }

    /// Where the current value of `name` came from.
    pub fn origin(&self, name: &str) -> Origin {
        self.origins.get(name).cloned().unwrap_or(Origin::Default)
    }

    /// Converts the merged table into a validated [`Config`].
    pub fn resolve(&self) -> Result<Config, Error> {
        let cfg = self.unvalidated()?;
        cfg.validate(|k| self.origin(k))?;
        Ok(cfg)
    }

    /// For [`Layers::load_for_existing`]: puts every key only `up` uses whose value fails
    /// validation back to its default, with a warning. Errors: the table cannot be read as a
    /// configuration at all.
    fn settle(&mut self) -> Result<(), Error> {
        let defaults = Self::defaults();
        for _ in 0..KEYS.len() {
            let cfg = self.unvalidated()?;
            let Some((key, _)) = cfg.first_problem() else {
                return Ok(());
            };
            if !self.tolerates(key) {
                return Ok(()); // `resolve` reports it
            }
            if let Err(e) = cfg.validate(|k| self.origin(k)) {
                self.ignore(key, e);
            }
            match defaults.table.get(key) {
                Some(v) => self.table.insert(key.to_string(), v.clone()),
                None => self.table.remove(key),
            };
            self.origins.insert(key.to_string(), Origin::Default);
        }
        Ok(())
    }

    /// The merged table as a [`Config`], not yet validated.
    fn unvalidated(&self) -> Result<Config, Error> {
        let cfg: Config = self
            .table
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| {
                let msg = e.message().to_string();
                // Attribute the error to the key serde names, when it does.
                let origin = KEYS
                    .iter()
                    .find(|k| msg.contains(k.name))
                    .map(|k| self.origin(k.name).to_string())
                    .unwrap_or_else(|| "configuration".into());
                Error::Config {
                    origin,
                    message: msg,
                }
            })?;
        Ok(cfg)
    }
}

/// For a TOML line that failed to parse, `key = value` with a bare word as the value (`memory =
/// 1g`, `image = ubuntu:22.04`, `network = none`: TOML strings need quotes), how to write it.
fn unquoted_value_hint(line: &str) -> Option<String> {
    let (key, value) = line.split_once('=')?;
    let key = key.trim();
    let value = value.split(" #").next().unwrap_or(value).trim();
    let bare_key = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let bare_value = !value.is_empty()
        && !value.starts_with(['"', '\'', '[', '{'])
        && !value.contains(['"', '\'']);
    (bare_key && bare_value)
        .then(|| format!("a text value needs quotes in TOML: write {key} = \"{value}\""))
}

#[cfg(test)]
pub(in crate::config) mod tests {
    use super::*;

    use crate::config::Fallback;
    use crate::types::EngineKind;
    use std::collections::HashMap;
    use std::path::PathBuf;

    pub(in crate::config) fn load(
        file: Option<&str>,
        env: &[(&str, &str)],
    ) -> Result<Config, Error> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        if let Some(text) = file {
            std::fs::write(&path, text).unwrap();
        }
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let layers = Layers::load_with_env(file.map(|_| path.as_path()), |k| env.get(k).cloned())?;
        layers.resolve()
    }

    #[test]
    fn commands_on_existing_sandboxes_ignore_bad_values_only_up_uses() {
        let env: HashMap<String, String> = [
            ("H9SANDBOX_CPUS", "abc"),
            ("H9SANDBOX_MEMORY", "1"),
            ("H9SANDBOX_ALLOWED_WORKDIRS", "/srv"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let get = |k: &str| env.get(k).cloned();
        // `up` refuses them...
        assert!(Layers::load_with_env(None, get).is_err());
        // ...the others warn, once each, and use the defaults.
        let layers = Layers::load_for_existing_with_env(None, get).unwrap();
        let cfg = layers.resolve().unwrap();
        assert_eq!((cfg.cpus, cfg.memory.as_str()), (1.0, "512m"));
        assert_eq!(layers.warnings.len(), 3, "{:?}", layers.warnings);
        assert!(layers.warnings[0].starts_with(
            "ignoring environment variable H9SANDBOX_CPUS (cpus), which only the commands that make sandboxes use"
        ), "{:?}", layers.warnings);
        // A key commands on a sandbox use still fails them.
        let bad = |k: &str| (k == "H9SANDBOX_EXEC_TIMEOUT_SECS").then(|| "soon".to_string());
        assert!(Layers::load_for_existing_with_env(None, bad).is_err());
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        assert_eq!(load(None, &[]).unwrap(), Config::default());
    }

    #[test]
    fn precedence_file_then_env() {
        let cfg = load(
            Some("image = \"a:1\"\nmemory = \"1g\"\ncpus = 1\n"),
            &[("H9SANDBOX_MEMORY", "2g"), ("SANDBOX_IMAGE", "seed:1")],
        )
        .unwrap();
        // The unprefixed name is a fallback for the environment layer, which beats the file.
        assert_eq!(cfg.image, "seed:1");
        assert_eq!(cfg.memory, "2g");
        assert_eq!(cfg.cpus, 1.0);
        let cfg = load(
            None,
            &[("H9SANDBOX_IMAGE", "mine:1"), ("SANDBOX_IMAGE", "seed:1")],
        )
        .unwrap();
        assert_eq!(cfg.image, "mine:1");
    }

    #[test]
    fn bootstrap_keys_honour_the_unprefixed_names() {
        let cfg = load(
            None,
            &[
                ("SANDBOX_BOOTSTRAP_CMD", "pip install -e ."),
                ("SANDBOX_BOOTSTRAP_TIMEOUT_SECS", "30"),
                ("H9SANDBOX_BOOTSTRAP_REQUIRED", "true"),
            ],
        )
        .unwrap();
        assert_eq!(cfg.bootstrap(), Some("pip install -e ."));
        assert_eq!(cfg.bootstrap_timeout_secs, 30);
        assert!(cfg.bootstrap_required);
        let cfg = load(Some("bootstrap_cmd = \"  \"\n"), &[]).unwrap();
        assert_eq!(cfg.bootstrap(), None);
        let err = load(None, &[("H9SANDBOX_BOOTSTRAP_REQUIRED", "yes")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not true or false"), "{err}");
    }

    #[test]
    fn booleans_from_file_and_environment() {
        assert!(load(None, &[]).unwrap().reap_on_up);
        assert!(!load(Some("reap_on_up = false\n"), &[]).unwrap().reap_on_up);
        assert!(
            !load(None, &[("H9SANDBOX_REAP_ON_UP", "false")])
                .unwrap()
                .reap_on_up
        );
        let err = load(None, &[("H9SANDBOX_REAP_ON_UP", "nope")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("H9SANDBOX_REAP_ON_UP") && err.contains("true or false"),
            "{err}"
        );
    }

    #[test]
    fn flags_beat_everything() {
        let mut layers =
            Layers::load_with_env(None, |k| (k == "H9SANDBOX_CPUS").then(|| "0.5".to_string()))
                .unwrap();
        layers
            .set_str("cpus", "0.25", Origin::Flag("--cpus".into()))
            .unwrap();
        assert_eq!(layers.resolve().unwrap().cpus, 0.25);
    }

    #[test]
    fn typos_and_unquoted_strings_say_how_to_fix_them() {
        let err = load(Some("memroy = \"1g\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("did you mean `memory`?"), "{err}");
        let err = load(Some("memory = 512\n"), &[]).unwrap_err().to_string();
        assert!(
            err.contains("write it in quotes: memory = \"512\""),
            "{err}"
        );
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let err = load(Some("imgae = \"x\"\n"), &[]).unwrap_err().to_string();
        assert!(
            err.contains("c.toml") && err.contains("unknown key `imgae`"),
            "{err}"
        );
    }

    #[test]
    fn typos_in_env_names_are_found() {
        let vars = [
            "H9SANDBOX_MEMROY",
            "H9SANDBOX_MEMORY",
            "H9SANDBOX_CONFIG",
            "PATH",
        ];
        assert_eq!(
            Layers::unknown_env_vars(vars.iter().map(|s| s.to_string())),
            vec!["H9SANDBOX_MEMROY"]
        );
        let err = load(None, &[("H9SANDBOX_STATE_DIR", "relative/dir")]).unwrap_err();
        assert!(err.to_string().contains("not an absolute path"), "{err}");
        let err = load(Some("image = \"a\"\nmemory = = 3\n"), &[]).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn engine_keys_and_the_unprefixed_switch() {
        let cfg = load(None, &[]).unwrap();
        assert_eq!(
            (cfg.engine, cfg.engine_bin, cfg.fallback),
            (EngineKind::Docker, None, Fallback::Fail)
        );
        let cfg = load(
            Some("engine = \"podman\"\nfallback = \"local\"\nulimit_nofile = 4096\n"),
            &[("H9SANDBOX_RUNTIME", "runc")],
        )
        .unwrap();
        assert_eq!(cfg.engine, EngineKind::Podman);
        assert_eq!(cfg.fallback, Fallback::Local);
        assert_eq!((cfg.ulimit_nofile, cfg.ulimit_nproc), (4096, 0));
        assert_eq!(cfg.runtime.as_deref(), Some("runc"));
        // SANDBOX_ENABLED=false beats the file, and loses to H9SANDBOX_ENGINE.
        for off in ["false", "0", "NO", "off"] {
            let cfg = load(Some("engine = \"podman\"\n"), &[("SANDBOX_ENABLED", off)]).unwrap();
            assert_eq!(cfg.engine, EngineKind::Local, "{off}");
        }
        let cfg = load(None, &[("SANDBOX_ENABLED", "true")]).unwrap();
        assert_eq!(cfg.engine, EngineKind::Docker);
        let cfg = load(
            None,
            &[("SANDBOX_ENABLED", "false"), ("H9SANDBOX_ENGINE", "docker")],
        )
        .unwrap();
        assert_eq!(cfg.engine, EngineKind::Docker);
        let err = load(None, &[("SANDBOX_ENABLED", "maybe")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("SANDBOX_ENABLED") && err.contains("'maybe'"),
            "{err}"
        );
        let err = load(Some("engine = \"lxc\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'lxc' is not one of: docker, podman, local"),
            "{err}"
        );
        let err = load(None, &[("H9SANDBOX_FALLBACK", "retry")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("H9SANDBOX_FALLBACK"), "{err}");
        let err = load(Some("runtime = \"run c\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("key `runtime`"), "{err}");
        let err = load(Some("ulimit_nproc = -5\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("negative"), "{err}");
    }

    #[test]
    fn allowed_workdirs_comes_only_from_the_users_own_file() {
        let cfg = load(Some("allowed_workdirs = [\"/srv/www\", \"/opt/x\"]\n"), &[]).unwrap();
        assert_eq!(
            cfg.allowed_workdirs,
            vec![PathBuf::from("/srv/www"), PathBuf::from("/opt/x")]
        );
        assert!(load(None, &[]).unwrap().allowed_workdirs.is_empty());
        let err = load(Some("allowed_workdirs = [\"srv\"]\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an absolute path"), "{err}");
        let err = load(Some("allowed_workdirs = \"/srv\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("a list of absolute paths"), "{err}");
        // Not from the environment, even next to a file that sets it...
        let err = load(
            Some("allowed_workdirs = [\"/srv\"]\n"),
            &[("H9SANDBOX_ALLOWED_WORKDIRS", "[\"/etc\"]")],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("H9SANDBOX_ALLOWED_WORKDIRS") && err.contains("configuration file"),
            "{err}"
        );
        // ...nor from a project's sandbox.toml, nor as a flag.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sandbox.toml");
        std::fs::write(&file, "allowed_workdirs = [\"/etc\"]\n").unwrap();
        let mut layers = Layers::load_with_env(None, |_| None).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        let err = layers
            .merge_text(&file, &text, true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not allowed in a project's sandbox.toml"),
            "{err}"
        );
        assert!(layers
            .set_str("allowed_workdirs", "/etc", Origin::Flag("--x".into()))
            .is_err());
        assert!(
            Layers::unknown_env_vars(["H9SANDBOX_ALLOWED_WORKDIRS".to_string()].into_iter())
                .is_empty()
        );
    }
}
