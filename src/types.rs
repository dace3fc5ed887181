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
    /// Docker Swarm mode: each sandbox a service of one task on a node the swarm's scheduler
    /// picks, through the `docker` client pointed at a manager.
    Swarm,
}

impl EngineKind {
    /// The config value and record field: `docker`, `podman` or `local`.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
            EngineKind::Local => "local",
            EngineKind::Swarm => "swarm",
        }
    }

    /// The isolation a sandbox of this engine has.
    pub fn isolation(self) -> Isolation {
        match self {
            EngineKind::Docker | EngineKind::Podman | EngineKind::Swarm => Isolation::Container,
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

/// The daemon a Docker client talks to, as its own settings name it: the environment variables
/// `DOCKER_HOST`, `DOCKER_CONTEXT` (or config `docker_context`), `DOCKER_TLS_VERIFY` and
/// `DOCKER_CERT_PATH` of the Docker CLI (<https://docs.docker.com/reference/cli/docker/#environment-variables>).
/// `up` records it, and every later command on that sandbox hands the same settings to the
/// client, whatever its own environment says; all unset is the client's default (this
/// machine's daemon, or the current context).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) struct Daemon {
    /// `DOCKER_HOST` (`unix:///…`, `tcp://H:P`, `ssh://[U@]H[:P]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `DOCKER_CONTEXT`: a context of the client (`docker context ls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// `DOCKER_TLS_VERIFY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_verify: Option<String>,
    /// `DOCKER_CERT_PATH`: this machine's directory of the client's TLS certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_path: Option<String>,
}

impl Daemon {
    /// The client's environment variables these settings are, in order.
    pub(crate) const VARS: [&'static str; 4] = [
        "DOCKER_HOST",
        "DOCKER_CONTEXT",
        "DOCKER_TLS_VERIFY",
        "DOCKER_CERT_PATH",
    ];

    /// The settings by variable name, as [`Daemon::VARS`] orders them.
    pub(crate) fn values(&self) -> [Option<&str>; 4] {
        [
            self.host.as_deref(),
            self.context.as_deref(),
            self.tls_verify.as_deref(),
            self.cert_path.as_deref(),
        ]
    }

    /// Checks the settings before any client is started with them: a host of a scheme a
    /// client on Linux reaches a daemon by (`unix`, `tcp`, `ssh`), an `ssh://` host that cannot be read
    /// as an option of `ssh` (no leading `-`), no control characters, no empty value.
    /// Errors: a one-line message naming the variable.
    pub(crate) fn validate(&self) -> Result<(), String> {
        for (name, v) in Self::VARS.iter().zip(self.values()) {
            let Some(v) = v else { continue };
            if v.is_empty() || v.chars().any(char::is_control) {
                return Err(format!(
                    "{name} is empty or holds a control character; unset it or give a value such as tcp://host:2376"
                ));
            }
        }
        if let Some(h) = &self.host {
            let (scheme, rest) = h.split_once("://").unwrap_or(("", h));
            if !["unix", "tcp", "ssh"].contains(&scheme) {
                return Err(format!(
                    "DOCKER_HOST={h} names no daemon the Docker client knows (unix://, tcp://, ssh://)"
                ));
            }
            let host = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
            if scheme == "ssh" && (host.starts_with('-') || rest.starts_with('-')) {
                return Err(format!(
                    "DOCKER_HOST={h}: an ssh host may not start with '-'"
                ));
            }
        }
        Ok(())
    }

    /// Where the daemon is, for people (`ls`): `local` for the client's default, else the
    /// host (`tcp://10.0.0.5:2376`) or `context NAME`.
    pub(crate) fn describe(&self) -> String {
        match (&self.host, &self.context) {
            (Some(h), _) => h.clone(),
            (None, Some(c)) if c != "default" => format!("context {c}"),
            _ => "local".into(),
        }
    }
}

/// A port `up --publish` asks for (`docker run -p`'s `[[IP:]HOST_PORT:]PORT`, TCP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Publish {
    /// The host address to listen on: 127.0.0.1 unless the caller names another.
    pub ip: std::net::IpAddr,
    /// The host port; 0: one the engine picks.
    pub host_port: u16,
    /// The sandbox's port (1–65535).
    pub port: u16,
}

impl Publish {
    /// Parses `PORT` (a free host port), `HOST_PORT:PORT`, `IP:HOST_PORT:PORT` or `IP::PORT`
    /// (an IPv6 address in brackets: `[::1]:8080:80`). Unlike `docker run -p`, whose default is
    /// every interface, the host address is 127.0.0.1 unless given. Errors: a one-line reason.
    pub(crate) fn parse(s: &str) -> Result<Publish, String> {
        let bad = |why: &str| {
            format!("--publish {s:?}: {why} (give PORT, HOST_PORT:PORT or IP:HOST_PORT:PORT)")
        };
        let (ip, rest) = if let Some(r) = s.strip_prefix('[') {
            let (ip, rest) = r
                .split_once("]:")
                .ok_or_else(|| bad("an IPv6 address needs its port after ]:"))?;
            (Some(ip), rest)
        } else {
            match s.matches(':').count() {
                2 => {
                    let (ip, rest) = s.split_once(':').unwrap_or_default();
                    (Some(ip), rest)
                }
                0 | 1 => (None, s),
                _ => return Err(bad("too many ':' (an IPv6 address goes in brackets)")),
            }
        };
        let ip: std::net::IpAddr = match ip {
            None => std::net::Ipv4Addr::LOCALHOST.into(),
            Some(ip) => ip
                .parse()
                .map_err(|_| bad(&format!("{ip:?} is not an IP address")))?,
        };
        let (host, port) = match rest.split_once(':') {
            Some((h, p)) => (h, p),
            None if ip.is_loopback() && !s.contains(':') => ("", rest),
            None => return Err(bad("the host port is missing")),
        };
        let num = |p: &str, what: &str| {
            p.parse::<u16>()
                .map_err(|_| bad(&format!("{what} {p:?} is not a port number")))
        };
        let port = num(port.trim_end_matches("/tcp"), "the sandbox's port")?;
        if port == 0 {
            return Err(bad("the sandbox's port must be 1 to 65535"));
        }
        let host_port = if host.is_empty() {
            0
        } else {
            num(host, "the host port")?
        };
        Ok(Publish {
            ip,
            host_port,
            port,
        })
    }

    /// `docker run --publish`'s value: `IP:HOST_PORT:PORT/tcp` (the host port empty for a free one).
    pub(crate) fn engine_arg(&self) -> String {
        let ip = match self.ip {
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            v4 => v4.to_string(),
        };
        let host = if self.host_port == 0 {
            String::new()
        } else {
            self.host_port.to_string()
        };
        format!("{ip}:{host}:{}/tcp", self.port)
    }
}

/// A port of a sandbox published on the host, as the engine reports it after the start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PublishedPort {
    /// Where clients connect on the host, `IP:PORT` (`[IPv6]:PORT`).
    pub address: String,
    /// The sandbox's port.
    pub port: u16,
}

/// How a sandbox's work dir reaches its container (config `workdir_mode`, `up --workdir-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WorkdirMode {
    /// Bind-mounted at the same path: the sandbox and the host see the same files (needs an
    /// engine that mounts this machine's directories).
    #[default]
    Mount,
    /// Copied in at `up` (a tar stream through the agent's channel), copied out only by `cp`:
    /// nothing of this machine's file system is mounted, every command goes over the remote
    /// channel, as for a daemon on another machine.
    Copy,
}

impl WorkdirMode {
    /// The mode's name.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkdirMode::Mount => "mount",
            WorkdirMode::Copy => "copy",
        }
    }

    /// Whether this is [`WorkdirMode::Mount`] (records leave the default out).
    pub fn is_mount(&self) -> bool {
        *self == WorkdirMode::Mount
    }
}

impl fmt::Display for WorkdirMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Network mode of a sandbox (`docker run --network`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Docker's default bridge: outbound access; ports reach it from the host only where
    /// `up --publish` publishes them.
    Bridge,
    /// No network at all, only loopback.
    None,
    /// Only loopback, where the agent relays `127.0.0.1:3128` to a proxy sidecar that forwards
    /// HTTP and HTTPS to the allowed hosts only (--allow, config `allow`; `h9sandbox logs ID
    /// --network` shows its decisions).
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

/// Which capabilities a sandbox's container gets back after `--cap-drop all`
/// (`capabilities(7)`). They are effective only for processes running as root in the sandbox
/// (bootstraps, `exec --user root`): a command of a non-root user has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Caps {
    /// DAC_OVERRIDE (write files one does not own), SETUID and SETGID (package managers drop to
    /// their service users).
    Minimal,
    /// Minimal's, and CHOWN, FOWNER, FSETID: `groupadd`, `useradd`, `adduser` and package
    /// post-install scripts that give files to a system user work. Safe next to the set-ID
    /// filter, which refuses every set-user/group-ID mode bit, whatever the capabilities
    /// (`chown` itself clears those bits); file capabilities need SETFCAP, which is not granted.
    Standard,
}

impl Caps {
    /// The capabilities `--cap-add` gives back, in that order.
    pub fn added(self) -> &'static [&'static str] {
        match self {
            Caps::Minimal => &["DAC_OVERRIDE", "SETUID", "SETGID"],
            Caps::Standard => &[
                "DAC_OVERRIDE",
                "SETUID",
                "SETGID",
                "CHOWN",
                "FOWNER",
                "FSETID",
            ],
        }
    }

    /// The profile of sandboxes recorded before profiles existed: [`Caps::Minimal`].
    pub fn recorded_before() -> Caps {
        Caps::Minimal
    }

    /// The configuration's spelling: `minimal`, `standard`.
    pub fn as_str(self) -> &'static str {
        match self {
            Caps::Minimal => "minimal",
            Caps::Standard => "standard",
        }
    }
}

impl fmt::Display for Caps {
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
pub(crate) struct Limits {
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
    /// The capability profile (`minimal` in records made before profiles existed).
    #[serde(default = "Caps::recorded_before")]
    pub caps: Caps,
}

/// A signal, by its number on Linux (signal(7)): the one that ended a command's own process (its
/// wait status, as the agent reports it: data, any number), or the one that made h9sandbox end a
/// command (SIGINT, SIGTERM, SIGHUP, SIGPIPE). Printed by its name ([`fmt::Display`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Signal(i32);

impl Signal {
    /// SIGHUP (1).
    pub(crate) const HUP: Signal = Signal(libc::SIGHUP);
    /// SIGINT (2).
    pub(crate) const INT: Signal = Signal(libc::SIGINT);
    /// SIGPIPE (13).
    pub(crate) const PIPE: Signal = Signal(libc::SIGPIPE);
    /// SIGTERM (15).
    pub(crate) const TERM: Signal = Signal(libc::SIGTERM);

    /// The signal numbered `n`, whatever the number (one outside 1..=64 prints as `SIG<n>`).
    pub(crate) fn from_number(n: i32) -> Signal {
        Signal(n)
    }

    /// The exit status a shell reports for a child this signal killed: 128 + its number.
    pub(crate) fn exit_status(self) -> i32 {
        128 + self.0
    }
}

impl fmt::Display for Signal {
    /// The name signal(7) gives it on Linux (`SIGKILL`), `SIGRTMIN+k` for the real-time ones,
    /// `SIG<n>` for any other number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 31] = [
            "SIGHUP",
            "SIGINT",
            "SIGQUIT",
            "SIGILL",
            "SIGTRAP",
            "SIGABRT",
            "SIGBUS",
            "SIGFPE",
            "SIGKILL",
            "SIGUSR1",
            "SIGSEGV",
            "SIGUSR2",
            "SIGPIPE",
            "SIGALRM",
            "SIGTERM",
            "SIGSTKFLT",
            "SIGCHLD",
            "SIGCONT",
            "SIGSTOP",
            "SIGTSTP",
            "SIGTTIN",
            "SIGTTOU",
            "SIGURG",
            "SIGXCPU",
            "SIGXFSZ",
            "SIGVTALRM",
            "SIGPROF",
            "SIGWINCH",
            "SIGIO",
            "SIGPWR",
            "SIGSYS",
        ];
        match self.0 {
            // cast: 0 to 30.
            #[allow(clippy::cast_sign_loss)]
            n @ 1..=31 => f.write_str(NAMES[(n - 1) as usize]),
            n @ 34..=64 => write!(f, "SIGRTMIN+{}", n - 34),
            n => write!(f, "SIG{n}"),
        }
    }
}

/// Who besides the owner may write a file of permission bits `mode` (`st_mode`): `"its group"`,
/// `"others"` or `"group and others"` (the `S_IWGRP` and `S_IWOTH` bits, chmod(2)); `None`
/// when nobody else may. For messages that must name the right fix (`chmod g-w`, `o-w`).
pub(crate) fn also_writable_by(mode: u32) -> Option<&'static str> {
    match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (true, true) => Some("group and others"),
        (true, false) => Some("its group"),
        (false, true) => Some("others"),
        (false, false) => None,
    }
}

#[cfg(test)]
mod publish_tests {
    use super::Publish;

    #[test]
    fn publish_takes_dockers_forms_on_loopback_by_default() {
        let p = |s| Publish::parse(s).map(|p| p.engine_arg());
        assert_eq!(p("8000").unwrap(), "127.0.0.1::8000/tcp");
        assert_eq!(p("8080:80").unwrap(), "127.0.0.1:8080:80/tcp");
        assert_eq!(p("0.0.0.0:8080:80").unwrap(), "0.0.0.0:8080:80/tcp");
        assert_eq!(p("127.0.0.1::80").unwrap(), "127.0.0.1::80/tcp");
        assert_eq!(p("[::1]:8080:80").unwrap(), "[::1]:8080:80/tcp");
        assert_eq!(p("80/tcp").unwrap(), "127.0.0.1::80/tcp");
        for bad in [
            "",
            "x",
            "0",
            "1:2:3:4",
            "host:80:80",
            "8080:",
            "[::1]80",
            "70000",
            "1.2.3.4:80",
        ] {
            assert!(Publish::parse(bad).is_err(), "{bad:?}");
        }
    }
}

/// Parses a duration as every time option and key takes it: a bare number is seconds
/// (`30`, `0.5`), anything else humantime's syntax (`500ms`, `30s`, `1m`, `2h`, `1d`,
/// `1h 30m`). Errors: a one-line reason naming accepted forms.
pub(crate) fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let bad = || {
        format!("'{text}' is not a duration; give seconds (30, 0.5) or a duration with a unit (500ms, 30s, 1m, 2h, 1d)")
    };
    if t.is_empty() {
        return Err(bad());
    }
    if t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let secs: f64 = t.parse().map_err(|_| bad())?;
        // Beyond ~136 years is refused (it would overflow deadlines); 0 stays 0.
        if !secs.is_finite() || secs > u32::MAX as f64 {
            return Err(bad());
        }
        return Ok(std::time::Duration::from_secs_f64(secs));
    }
    humantime::parse_duration(t).map_err(|_| bad())
}

/// `d` in whole seconds, rounded up (a timeout of 500ms kept in a `*_secs` key is 1 second).
pub(crate) fn ceil_secs(d: std::time::Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// `d` as a person reads it: `2s`, `1.5s`, `500ms`, `1m 30s` (humantime's notation).
pub(crate) fn show_duration(d: std::time::Duration) -> String {
    if d < std::time::Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    if d.subsec_millis() > 0 && d < std::time::Duration::from_secs(60) {
        return format!("{:.1}s", d.as_secs_f64());
    }
    humantime::format_duration(std::time::Duration::from_secs(d.as_secs())).to_string()
}

/// A CPU limit in cores as people and `docker run --cpus` write it: at most two decimals, no
/// useless fraction (`1`, `0.5`, `0.25`).
pub(crate) fn format_cpus(cpus: f64) -> String {
    let s = format!("{cpus:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_print_as_signal_7_names_them() {
        let name = |n| Signal::from_number(n).to_string();
        assert_eq!(name(9), "SIGKILL");
        assert_eq!(name(1), "SIGHUP");
        assert_eq!(name(31), "SIGSYS");
        assert_eq!(name(34), "SIGRTMIN+0");
        assert_eq!(name(64), "SIGRTMIN+30");
        assert_eq!(
            (name(0), name(32), name(65), name(-3)),
            (
                "SIG0".into(),
                "SIG32".into(),
                "SIG65".into(),
                "SIG-3".into()
            )
        );
        assert_eq!(Signal::INT.exit_status(), 130);
        assert_eq!(Signal::PIPE.exit_status(), 141);
    }

    #[test]
    fn engine_kinds_name_their_isolation() {
        assert_eq!(EngineKind::Docker.isolation(), Isolation::Container);
        assert_eq!(EngineKind::Podman.isolation(), Isolation::Container);
        assert_eq!(EngineKind::Local.isolation(), Isolation::None);
        assert_eq!(EngineKind::Podman.to_string(), "podman");
        assert_eq!(EngineKind::Swarm.to_string(), "swarm");
        assert_eq!(EngineKind::Swarm.isolation(), Isolation::Container);
    }

    #[test]
    fn durations_take_seconds_or_units() {
        use std::time::Duration as D;
        assert_eq!(parse_duration("30").unwrap(), D::from_secs(30));
        assert_eq!(parse_duration("0.5").unwrap(), D::from_millis(500));
        assert_eq!(parse_duration("500ms").unwrap(), D::from_millis(500));
        assert_eq!(parse_duration(" 1m ").unwrap(), D::from_secs(60));
        assert_eq!(parse_duration("1h 30m").unwrap(), D::from_secs(5400));
        assert_eq!(parse_duration("0").unwrap(), D::ZERO);
        for bad in ["", "soon", "-5", "1.2.3", "5 parsecs", "1e99"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("500ms, 30s, 1m"), "{bad}: {e}");
        }
        assert_eq!(ceil_secs(D::from_millis(500)), 1);
        assert_eq!(ceil_secs(D::from_secs(2)), 2);
        assert_eq!(show_duration(D::from_millis(500)), "500ms");
        assert_eq!(show_duration(D::from_millis(1500)), "1.5s");
        assert_eq!(show_duration(D::from_secs(90)), "1m 30s");
    }
}
