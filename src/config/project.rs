//! What a project's `./sandbox.toml` may set: it is layered between the user's file and the
//! environment only once the front end decided to honour it, may not set the keys that act on
//! the host, and may only narrow the network and the capability profile.

use std::path::{Path, PathBuf};

use super::{Layers, Origin};
use crate::error::Error;

/// A project file's content, read once (so that what was checked, hashed and trusted is what
/// is layered), and the path it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectText {
    /// Where it was read from (shown in messages).
    pub path: PathBuf,
    /// Its content.
    pub text: String,
}

/// Whether setting `caps` to `new` over `old` (the layers below) gives more capabilities.
pub(super) fn widens_caps(old: Option<&toml::Value>, new: &toml::Value) -> bool {
    let rank = |v: Option<&toml::Value>| match v.and_then(|v| v.as_str()) {
        Some("minimal") => 0,
        _ => 1,
    };
    rank(Some(new)) > rank(old)
}

impl Layers {
    /// As [`Layers::load`], with the project file `project` (a `sandbox.toml` whose content
    /// the caller read once, and decided to honour) layered between the user's file and the
    /// environment. The project file may not set [`HOST_SIDE_KEYS`](super::HOST_SIDE_KEYS).
    /// Errors: as [`Layers::load`], and the project file's own (bad TOML, unknown or forbidden
    /// key, a value of the wrong type), naming it.
    pub fn load_with_project(
        explicit_file: Option<&Path>,
        project: &ProjectText,
    ) -> Result<Layers, Error> {
        Self::load_opts(explicit_file, |k| std::env::var(k).ok(), Some(project))
    }

    /// Checks `project` as [`Layers::load_with_project`] would layer it, over the built-in
    /// defaults alone (neither the user's file nor the environment), and returns the keys it
    /// sets, in file order. Errors: what would make `up` refuse it.
    pub fn check_project(project: &ProjectText) -> Result<toml::Table, Error> {
        let mut layers = Self::defaults();
        let table = layers.merge_text(&project.path, &project.text, true)?;
        layers.resolve()?;
        Ok(table)
    }

    /// A project file may only narrow the network: `network` no wider than the value layered
    /// so far (`none` < `allowlist` < `bridge`), and, under a user's `allowlist`, `allow` only
    /// of hosts the user's list already allows.
    pub(super) fn check_narrows(
        &self,
        origin: &Origin,
        name: &str,
        value: &toml::Value,
    ) -> Result<(), Error> {
        let reach = |v: Option<&toml::Value>| match v.and_then(|v| v.as_str()) {
            Some("none") => 0,
            Some("allowlist") => 1,
            _ => 2,
        };
        let fail = |message: String| Error::Config {
            origin: format!("{origin}, key `{name}`"),
            message,
        };
        let have = reach(self.table.get("network"));
        if name == "network" && reach(Some(value)) > have {
            return Err(fail(format!(
                "a project's sandbox.toml may only narrow the network, not widen it from {}; change network in your own configuration",
                self.table.get("network").and_then(|v| v.as_str()).unwrap_or("bridge")
            )));
        }
        if name == "allow" && have == 1 {
            let user: Vec<String> = self
                .table
                .get("allow")
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            for h in value
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str())
            {
                if !crate::agent::proxy::covers(&user, h) {
                    return Err(fail(format!(
                        "'{h}' is not in your own allow list; a project's sandbox.toml may only narrow it"
                    )));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load::tests::load;
    use crate::types::{Caps, Network};

    #[test]
    fn project_file_cannot_set_host_side_keys() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sandbox.toml");
        std::fs::write(&file, "engine_bin = \"/tmp/evil\"\n").unwrap();
        let mut layers = Layers::load_with_env(None, |_| None).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        let err = layers
            .merge_text(&file, &text, true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("engine_bin") && err.contains("not allowed"),
            "{err}"
        );
        // The same key from an explicit file, the environment or a flag is fine.
        layers
            .set_str("engine_bin", "/usr/bin/docker", Origin::Flag("x".into()))
            .unwrap();
        assert!(load(Some("engine_bin = \"podman\"\n"), &[]).is_ok());
        let err = load(None, &[("H9SANDBOX_IMAGE", "--privileged")]).unwrap_err();
        assert!(err.to_string().contains("not an image reference"), "{err}");
    }

    #[test]
    fn a_project_file_may_only_narrow_the_network() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("config.toml");
        std::fs::write(
            &user,
            "network = \"allowlist\"\nallow = [\"*.debian.org\", \"pypi.org\"]\n",
        )
        .unwrap();
        let project = |text: &str| ProjectText {
            path: dir.path().join("sandbox.toml"),
            text: text.into(),
        };
        let load = |text: &str| Layers::load_opts(Some(&user), |_| None, Some(&project(text)));
        let cfg = load("allow = [\"deb.debian.org\", \"*.security.debian.org\", \"pypi.org\"]\n")
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(cfg.network, Network::Allowlist);
        assert_eq!(cfg.allow.len(), 3);
        assert!(load("network = \"none\"\n").is_ok());
        for (text, why) in [
            ("network = \"bridge\"\n", "may only narrow the network"),
            (
                "allow = [\"evil.com\"]\n",
                "'evil.com' is not in your own allow list",
            ),
            (
                "allow = [\"debian.org\"]\n",
                "'debian.org' is not in your own allow list",
            ),
            (
                "allow = [\"*.org\"]\n",
                "'*.org' is not in your own allow list",
            ),
        ] {
            let err = load(text).unwrap_err().to_string();
            assert!(
                err.contains(why) && err.contains("sandbox.toml"),
                "{text}: {err}"
            );
        }
        // Under a user's bridge (everything reachable) any list narrows; the environment and
        // flags are the user's own.
        std::fs::write(&user, "network = \"none\"\n").unwrap();
        assert!(load("network = \"allowlist\"\n").is_err());
        let env = |k: &str| (k == "H9SANDBOX_ALLOW").then(|| "a.org, *.b.org".to_string());
        let cfg = Layers::load_opts(None, env, None)
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(cfg.allow, ["a.org", "*.b.org"]);
        let bad = |k: &str| (k == "H9SANDBOX_ALLOW").then(|| "http://x/".to_string());
        assert!(Layers::load_opts(None, bad, None).is_err());
    }

    #[test]
    fn a_project_file_may_only_narrow_the_capability_profile() {
        let dir = tempfile::tempdir().unwrap();
        let project = |text: &str| ProjectText {
            path: dir.path().join("sandbox.toml"),
            text: text.into(),
        };
        let no_env = |_: &str| None;
        // Over the default (standard): minimal narrows, standard changes nothing.
        for (text, want) in [
            ("caps = \"minimal\"\n", Caps::Minimal),
            ("caps = \"standard\"\n", Caps::Standard),
        ] {
            let cfg = Layers::load_opts(None, no_env, Some(&project(text)))
                .unwrap()
                .resolve()
                .unwrap();
            assert_eq!(cfg.caps, want);
        }
        // Over a user's minimal: standard is refused, naming where to set it.
        let user = dir.path().join("config.toml");
        std::fs::write(&user, "caps = \"minimal\"\n").unwrap();
        let err = Layers::load_opts(Some(&user), no_env, Some(&project("caps = \"standard\"\n")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("may only narrow") && err.contains("--caps"),
            "{err}"
        );
        // The environment (and a flag) may widen it.
        let env = |k: &str| (k == "H9SANDBOX_CAPS").then(|| "standard".to_string());
        let cfg = Layers::load_opts(Some(&user), env, None)
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(cfg.caps, Caps::Standard);
        assert!(load(Some("caps = \"all\"\n"), &[]).is_err());
    }

    #[test]
    fn a_project_file_lies_between_the_users_file_and_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("config.toml");
        std::fs::write(&user, "memory = \"300m\"\npids_limit = 10\n").unwrap();
        let project = ProjectText {
            path: dir.path().join("sandbox.toml"),
            text: "pids_limit = 77\ncpus = 0.5\n".into(),
        };
        let env = |k: &str| (k == "H9SANDBOX_CPUS").then(|| "0.25".to_string());
        let cfg = Layers::load_opts(Some(&user), env, Some(&project))
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(
            (cfg.memory.as_str(), cfg.pids_limit, cfg.cpus),
            ("300m", 77, 0.25)
        );
        let set = Layers::check_project(&project).unwrap();
        assert_eq!(set.keys().collect::<Vec<_>>(), ["cpus", "pids_limit"]);
        let bad = ProjectText {
            path: project.path.clone(),
            text: "state_dir = \"/tmp/x\"\n".into(),
        };
        let err = Layers::check_project(&bad).unwrap_err().to_string();
        assert!(
            err.contains("key `state_dir`") && err.contains("not allowed"),
            "{err}"
        );
    }
}
