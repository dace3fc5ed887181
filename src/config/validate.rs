//! Checking the merged values of a [`Config`] (image, limits, user, paths), and fitting its CPU
//! limit to this host.

use super::{parse_size, Config, Origin, MIN_MCP_OUTPUT};
use crate::error::Error;
use crate::types::User;

/// The number of CPUs the engine will accept for `--cpus` on this host.
pub fn host_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

impl Config {
    /// Checks every value; `origin` names where a key's value came from for the error message.
    pub fn validate(&self, origin: impl Fn(&str) -> Origin) -> Result<(), Error> {
        match self.first_problem() {
            None => Ok(()),
            Some((key, message)) => Err(Error::Config {
                origin: match origin(key) {
                    Origin::File(p) => format!("config file {}, key `{key}`", p.display()),
                    o => o.to_string(),
                },
                message,
            }),
        }
    }

    /// The first key whose value is invalid, and why; `None` when every value is fine.
    pub(super) fn first_problem(&self) -> Option<(&'static str, String)> {
        let fail = |key: &'static str, message: String| Some((key, message));
        if self.image.trim().is_empty() {
            return fail("image", "the image name is empty".into());
        }
        if self.image.starts_with('-')
            || self
                .image
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return fail(
                "image",
                format!(
                    "'{}' is not an image reference (it starts with '-' or holds spaces); give a name like ubuntu:22.04",
                    self.image
                ),
            );
        }
        // Above the host's CPU count is lowered by `fit_to_host` (a committed file travels
        // between machines), not refused.
        if !self.cpus.is_finite() || self.cpus < 0.01 {
            return fail(
                "cpus",
                format!(
                    "{} is out of range: give a number of cores of at least 0.01 (more than this host's {} are lowered to {})",
                    self.cpus,
                    host_cpus(),
                    host_cpus()
                ),
            );
        }
        let mem = match parse_size(&self.memory) {
            Ok(m) => m,
            Err(m) => return fail("memory", m),
        };
        if mem < 6 << 20 {
            let unitless = self
                .memory
                .trim()
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.');
            return fail(
                "memory",
                if unitless {
                    format!(
                        "'{m}' is {m} bytes (a size without a unit counts bytes), below Docker's minimum of 6m; did you mean {m}m?",
                        m = self.memory.trim()
                    )
                } else {
                    format!("'{}' is below Docker's minimum of 6m", self.memory)
                },
            );
        }
        if let Err(m) = parse_size(&self.tmp_size) {
            return fail("tmp_size", m);
        }
        if self.pids_limit == 0 {
            return fail(
                "pids_limit",
                "0 would leave processes unlimited; give a limit >= 1".into(),
            );
        }
        if self.start_timeout_secs == 0 {
            return fail("start_timeout_secs", "must be at least 1 second".into());
        }
        if self
            .engine_bin
            .as_deref()
            .is_some_and(|b| b.trim().is_empty())
        {
            return fail("engine_bin", "the engine binary is empty".into());
        }
        if let Some(c) = &self.docker_context {
            if c.is_empty()
                || c.starts_with('-')
                || c.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return fail(
                    "docker_context",
                    format!("'{c}' is not a context name (see `docker context ls`)"),
                );
            }
        }
        if let Some(r) = &self.runtime {
            if r.is_empty() || r.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return fail(
                    "runtime",
                    format!("'{r}' is not a runtime name or path (e.g. runc)"),
                );
            }
        }
        if let Err(m) = self.user.parse::<User>() {
            return fail("user", m);
        }
        if self.mcp_max_output_bytes < MIN_MCP_OUTPUT {
            return fail(
                "mcp_max_output_bytes",
                format!(
                    "{} is too small to be useful; give at least {MIN_MCP_OUTPUT}",
                    self.mcp_max_output_bytes
                ),
            );
        }
        if self.json_max_bytes == 0 {
            return fail(
                "json_max_bytes",
                "0 would refuse every JSON read; give a number of bytes >= 1".into(),
            );
        }
        if let Some(d) = &self.state_dir {
            if !d.is_absolute() {
                return fail(
                    "state_dir",
                    format!(
                        "'{}' is not an absolute path; give one, so that every caller finds the same state",
                        d.display()
                    ),
                );
            }
        }
        None
    }

    /// Lowers `cpus` to this host's CPU count when it asks for more (the engine would refuse
    /// it, and a committed configuration file must work on smaller machines too); returns the
    /// warning to show, naming `origin` (where the value came from).
    pub fn fit_to_host(&mut self, origin: &Origin) -> Option<String> {
        // Every host has one: not asked (its cgroup's CPU quota is read, a dozen system calls
        // on every command, the default `cpus = 1` included).
        if self.cpus <= 1.0 {
            return None;
        }
        let ncpu = host_cpus() as f64;
        if self.cpus <= ncpu {
            return None;
        }
        let asked = self.cpus;
        self.cpus = ncpu;
        Some(format!(
            "cpus = {asked} ({origin}) is more than this host's {ncpu} CPUs; using {ncpu}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load::tests::load;
    use crate::types::Ids;

    #[test]
    fn bad_values_name_origin_and_reason() {
        let err = load(Some("memory = \"lots\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("c.toml, key `memory`") && err.contains("'lots' is not a size"),
            "{err}"
        );
        let err = load(Some("cpus = -1\n"), &[]).unwrap_err().to_string();
        assert!(
            err.contains("key `cpus`") && err.contains("out of range"),
            "{err}"
        );
        let err = load(None, &[("H9SANDBOX_PIDS_LIMIT", "many")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("H9SANDBOX_PIDS_LIMIT") && err.contains("not a whole number"),
            "{err}"
        );
        let err = load(Some("network = \"host\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("network") && err.contains("host"), "{err}");
        let err = load(Some("pids_limit = \"x\"\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("pids_limit"), "{err}");
    }

    #[test]
    fn user_is_owner_root_host_or_numeric_ids() {
        assert_eq!(load(None, &[]).unwrap().user(), User::Owner);
        let d = tempfile::tempdir().unwrap();
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(d.path()).unwrap();
        assert_eq!(
            User::Owner.resolve(d.path()),
            Ids {
                uid: m.uid(),
                gid: m.gid()
            }
        );
        let cfg = load(Some("user = \"1000:1000\"\n"), &[]).unwrap();
        assert_eq!(
            cfg.user(),
            User::Ids(Ids {
                uid: 1000,
                gid: 1000
            })
        );
        assert_eq!(cfg.user().resolve(d.path()).to_string(), "1000:1000");
        let cfg = load(None, &[("H9SANDBOX_USER", "host")]).unwrap();
        assert_eq!(cfg.user().resolve(d.path()), Ids::current());
        assert_eq!(User::Root.resolve(d.path()), Ids::ROOT);
        for bad in [
            "nobody",
            "1000",
            "1000:",
            ":1000",
            "-1:0",
            "1:2:3",
            "4294967295:0",
            " 1:1",
        ] {
            let err = load(None, &[("H9SANDBOX_USER", bad)])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("H9SANDBOX_USER") && err.contains("uid:gid"),
                "{bad}: {err}"
            );
        }
        // Recorded as a string.
        let ids: Ids = serde_json::from_str("\"0:5\"").unwrap();
        assert_eq!((ids.uid, ids.gid), (0, 5));
        assert_eq!(serde_json::to_string(&ids).unwrap(), "\"0:5\"");
        assert!(serde_json::from_str::<Ids>("\"x\"").is_err());
    }
}
