//! Plain types shared by every layer: which engine runs a sandbox and how isolated it is, its
//! network, user and resource limits. They carry no behaviour beyond parsing and printing
//! themselves, and import nothing of the crate, so the configuration, the state file, the engine
//! and the front ends can all use them without depending on each other.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which engine runs a sandbox (config `engine`; recorded in every record as `engine`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Docker Engine, through the `docker` client.
    #[default]
    Docker,
    /// Podman, through the `podman` client (daemonless).
    Podman,
    /// No engine: commands run directly on the host (the engine's `Local`).
    Local,
}

impl EngineKind {
    /// The config value and record field: `docker`, `podman` or `local`.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
            EngineKind::Local => "local",
        }
    }

    /// The isolation a sandbox of this engine has.
    pub fn isolation(self) -> Isolation {
        match self {
            EngineKind::Docker | EngineKind::Podman => Isolation::Container,
            EngineKind::Local => Isolation::None,
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What separates a sandbox's commands from the host (recorded as `isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// A hardened container: namespaces, dropped capabilities, cgroup limits.
    #[default]
    Container,
    /// Nothing: commands run on the host as the invoking user, with no limits.
    None,
}

/// Network mode of a sandbox (`docker run --network`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Docker's default bridge: outbound access, no published ports.
    Bridge,
    /// No network at all, only loopback.
    None,
    /// Only loopback, where the agent relays `127.0.0.1:3128` to a proxy sidecar that forwards
    /// HTTP and HTTPS to the allowed hosts only (config `allow`; see `sandbox::egress`).
    Allowlist,
}

impl Network {
    /// The mode's name (config `network`, `up --network`).
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Bridge => "bridge",
            Network::None => "none",
            Network::Allowlist => "allowlist",
        }
    }

    /// The value passed to the engine's `--network`: an allowlist sandbox has no network of its
    /// own (`none`); it reaches the outside only through its proxy.
    pub fn engine_mode(self) -> &'static str {
        match self {
            Network::Bridge => "bridge",
            Network::None | Network::Allowlist => "none",
        }
    }

    /// How much it lets through: `none` < `allowlist` < `bridge` (a sub-sandbox or a project
    /// file may only go down).
    pub fn reach(self) -> u8 {
        match self {
            Network::None => 0,
            Network::Allowlist => 1,
            Network::Bridge => 2,
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A numeric user and group, written `uid:gid` (the form `docker run --user` takes, and the form
/// recorded in the state file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Ids {
    /// User ID.
    pub uid: u32,
    /// Group ID.
    pub gid: u32,
}

impl Ids {
    /// `0:0`.
    pub const ROOT: Ids = Ids { uid: 0, gid: 0 };

    /// The real user and group of this process (`getuid(2)`, `getgid(2)`).
    pub fn current() -> Ids {
        Ids {
            uid: rustix::process::getuid().as_raw(),
            gid: rustix::process::getgid().as_raw(),
        }
    }

    /// Whether this is the superuser.
    pub fn is_root(self) -> bool {
        self.uid == 0
    }
}

impl fmt::Display for Ids {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.uid, self.gid)
    }
}

impl std::str::FromStr for Ids {
    type Err = String;

    /// Parses `uid:gid`, both decimal numbers below 2^32 - 1 (the kernel's "no ID").
    fn from_str(s: &str) -> Result<Ids, String> {
        let bad =
            || format!("'{s}' is not owner, root, host, or a numeric uid:gid such as 1000:1000");
        let (u, g) = s.split_once(':').ok_or_else(bad)?;
        let num = |t: &str| {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            t.parse::<u32>()
                .ok()
                .filter(|&n| n != u32::MAX)
                .ok_or_else(bad)
        };
        Ok(Ids {
            uid: num(u)?,
            gid: num(g)?,
        })
    }
}

impl From<Ids> for String {
    fn from(ids: Ids) -> String {
        ids.to_string()
    }
}

impl TryFrom<String> for Ids {
    type Error = String;
    fn try_from(s: String) -> Result<Ids, String> {
        s.parse()
    }
}

/// The value of the `user` key: who the commands of a sandbox run as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    /// `owner` (the default): the owner (uid and gid) of the work dir, so that what the sandbox
    /// leaves there belongs to the person whose directory it is.
    Owner,
    /// `root`: uid 0, gid 0.
    Root,
    /// `host`: the real uid and gid of the h9sandbox process that runs `up`.
    Host,
    /// `uid:gid`: these numeric IDs.
    Ids(Ids),
}

impl std::str::FromStr for User {
    type Err = String;
    fn from_str(s: &str) -> Result<User, String> {
        match s {
            "owner" => Ok(User::Owner),
            "root" => Ok(User::Root),
            "host" => Ok(User::Host),
            _ => s.parse().map(User::Ids),
        }
    }
}

impl User {
    /// The numeric IDs for a sandbox on `workdir`: `owner` is the directory's owner (`stat(2)`;
    /// root when it cannot be read), `host` this process's real IDs.
    pub fn resolve(self, workdir: &std::path::Path) -> Ids {
        use std::os::unix::fs::MetadataExt;
        match self {
            User::Owner => std::fs::metadata(workdir).map_or(Ids::ROOT, |m| Ids {
                uid: m.uid(),
                gid: m.gid(),
            }),
            User::Root => Ids::ROOT,
            User::Host => Ids::current(),
            User::Ids(ids) => ids,
        }
    }
}

/// Resource limits and network a sandbox was created with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU limit in cores.
    pub cpus: f64,
    /// Memory limit, Docker notation (e.g. `512m`).
    pub memory: String,
    /// Maximum number of processes.
    pub pids_limit: u32,
    /// Size of the `/tmp` tmpfs.
    pub tmp_size: String,
    /// `bridge`, `none` or `allowlist`.
    pub network: Network,
    /// With `allowlist`: the hosts its proxy lets through (config `allow`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_kinds_name_their_isolation() {
        assert_eq!(EngineKind::Docker.isolation(), Isolation::Container);
        assert_eq!(EngineKind::Podman.isolation(), Isolation::Container);
        assert_eq!(EngineKind::Local.isolation(), Isolation::None);
        assert_eq!(EngineKind::Podman.to_string(), "podman");
    }
}
