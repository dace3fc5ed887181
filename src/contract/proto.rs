//! The exec agent's wire protocol, between the host (`h9sandbox exec`, `bootstrap`, MCP) and the
//! agent inside the container, over a unix stream socket, and between the agent and a command's
//! supervisor over a socket pair.
//!
//! Framing is `tokio_util`'s length-delimited codec (a 4-byte big-endian length, then the frame),
//! with every frame at most [`MAX_FRAME`] bytes: a longer one is a protocol error that ends the
//! connection, so neither end can make the other buffer more. Each frame holds one message encoded
//! with `postcard` (serde). Both ends treat what they receive as untrusted: the agent checks every
//! request ([`Start::check`]) and the host clamps what the agent reports.
//!
//! A connection carries one conversation: [`Request::Hello`] (protocol [`VERSION`] and the
//! sandbox's token), answered by [`Reply::Welcome`] or [`Reply::Refused`]; then one request:
//! [`Request::Start`] (a command: then `Stdin`/`CloseStdin`/`Signal`/`Cancel` from the host,
//! `Started`/`Stdout`/`Stderr`/`Exited` from the agent), or [`Request::List`], [`Request::Logs`],
//! [`Request::Kill`] for detached commands.
//!
//! Protocol 4 added, each as a conversation of its own (see [`Terminal`], [`Forward`],
//! [`StatsRequest`]): [`Request::Terminal`] (a command on a pseudo-terminal: then `Stdin`,
//! `Resize`, `Signal`, `Cancel` from the host, `Started`/`Stdout`/`Exited` from the agent),
//! [`Request::Forward`] (a TCP connection to a port on the sandbox's loopback: `Connected` or
//! `Reset`, then the bytes as `Stdin`/`CloseStdin` one way and `Stdout`/`End`/`Reset` the other),
//! and [`Request::Stats`] (answered by one [`Reply::Stats`]).

use bytes::{Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

/// Version of this protocol; a peer speaking another one is refused at `Hello`. The agents of
/// older versions (their sandboxes' commands go through the engine's exec): 2 had no [`RunAs`];
/// 3 had neither [`Reply::Started`]'s `program` nor [`Exit::signal`], nor terminals, port
/// forwarding or stats ([`Request::Terminal`], [`Request::Forward`], [`Request::Stats`]).
pub(crate) const VERSION: u32 = 4;

/// The largest frame either end accepts (bytes after the length prefix): a command line and its
/// environment must fit in one [`Start`].
pub(crate) const MAX_FRAME: usize = 4 << 20;

/// The most output bytes one [`Reply::Stdout`]/[`Reply::Stderr`] frame carries.
pub(crate) const CHUNK: usize = 64 << 10;

/// A frame codec for `T` (what is decoded) and `U` (what is encoded) over the length-delimited
/// framing, bounded by [`MAX_FRAME`].
#[derive(Debug)]
pub struct Codec<T, U> {
    frames: LengthDelimitedCodec,
    _types: std::marker::PhantomData<fn(U) -> T>,
}

impl<T, U> Default for Codec<T, U> {
    fn default() -> Self {
        Codec {
            frames: LengthDelimitedCodec::builder()
                .max_frame_length(MAX_FRAME)
                .new_codec(),
            _types: std::marker::PhantomData,
        }
    }
}

impl<T: for<'de> Deserialize<'de>, U> Decoder for Codec<T, U> {
    type Item = T;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> std::io::Result<Option<T>> {
        match self.frames.decode(src)? {
            None => Ok(None),
            Some(frame) => postcard::from_bytes(&frame).map(Some).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("malformed message: {e}"),
                )
            }),
        }
    }
}

impl<T, U: Serialize> Encoder<U> for Codec<T, U> {
    type Error = std::io::Error;

    fn encode(&mut self, item: U, dst: &mut BytesMut) -> std::io::Result<()> {
        let bytes = postcard::to_stdvec(&item).map_err(std::io::Error::other)?;
        self.frames.encode(Bytes::from(bytes), dst)
    }
}

/// What the host sends the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// First message: the protocol version and the sandbox's secret token.
    Hello { version: u32, token: String },
    /// Run a command.
    Start(Start),
    /// Bytes for the command's standard input.
    Stdin(#[serde(with = "serde_bytes")] Vec<u8>),
    /// End of the command's standard input.
    CloseStdin,
    /// Send this signal to the command's process group.
    Signal(i32),
    /// Kill the command's whole process tree now (the caller gave up).
    Cancel,
    /// List the detached commands.
    List,
    /// The output of a detached command.
    Logs(LogsRequest),
    /// Kill a detached command's process tree.
    Kill { handle: String },
    // Protocol 4: terminals, port forwarding, stats (kept together, after every older request,
    // so that each older one keeps its encoding).
    /// Run a command on a pseudo-terminal the agent allocates in the sandbox.
    Terminal(Terminal),
    /// The terminal's new size (the caller's window changed).
    Resize(WinSize),
    /// Carry one TCP connection to a port on the sandbox's own loopback.
    Forward(Forward),
    /// Sample the sandbox's resource use once.
    Stats(StatsRequest),
}

/// How a command is given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandLine {
    /// A shell command line, run by `bash -c` (`sh -c` where the image has no bash).
    Shell(String),
    /// A program and its arguments, run exactly (no shell); the program is looked up on `PATH`.
    Argv(Vec<String>),
}

/// A command to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Start {
    /// What to run.
    pub command: CommandLine,
    /// Working directory (absolute, in the container).
    pub cwd: String,
    /// Variables added to (or replacing) the container's environment, in order.
    pub env: Vec<(String, String)>,
    /// Who runs it.
    pub user: RunAs,
    /// Whether the host streams standard input (`Stdin` frames); otherwise it reads `/dev/null`.
    pub stdin: bool,
    /// Kill the process tree after this many milliseconds (the agent enforces it, so it holds
    /// when the caller dies); `None`: no timeout.
    pub timeout_ms: Option<u64>,
    /// Run in the background: output goes to log files, the reply is a handle, and the command
    /// outlives the connection.
    pub detach: bool,
}

/// Who a command runs as: `exec --user USER|UID[:GID]`, or the sandbox's user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunAs {
    /// These numeric IDs (the sandbox's user; `--user UID:GID`; a bare `--user UID` has the
    /// group of the same number).
    Ids { uid: u32, gid: u32 },
    /// A login name of the container's `/etc/passwd` (resolved inside the container, where the
    /// name means something), with its primary group unless `gid` is given.
    Name { name: String, gid: Option<u32> },
}

impl RunAs {
    /// `0:0`.
    pub const ROOT: RunAs = RunAs::Ids { uid: 0, gid: 0 };

    /// Parses `USER|UID[:GID]`: a login name (letters, digits, `_`, `.`, `-`, not starting with
    /// `-`, at most 32 bytes) or a numeric user ID, then optionally `:` and a numeric group ID.
    /// Errors: the reason, for a one-line message.
    pub fn parse(s: &str) -> Result<RunAs, String> {
        let (user, group) = match s.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (s, None),
        };
        let gid = match group {
            None => None,
            Some(g) => Some(g.parse::<u32>().map_err(|_| {
                format!("the group {g:?} is not a numeric group ID (give USER, UID or UID:GID)")
            })?),
        };
        if let Ok(uid) = user.parse::<u32>() {
            return Ok(RunAs::Ids {
                uid,
                gid: gid.unwrap_or(uid),
            });
        }
        if !valid_name(user) {
            return Err(format!(
                "{user:?} is neither a user ID nor a login name (letters, digits, '_', '.', '-')"
            ));
        }
        Ok(RunAs::Name {
            name: user.to_string(),
            gid,
        })
    }
}

impl From<(u32, u32)> for RunAs {
    fn from((uid, gid): (u32, u32)) -> RunAs {
        RunAs::Ids { uid, gid }
    }
}

/// `UID:GID`, `NAME` or `NAME:GID`: what `docker exec --user` takes.
impl std::fmt::Display for RunAs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunAs::Ids { uid, gid } => write!(f, "{uid}:{gid}"),
            RunAs::Name { name, gid: None } => write!(f, "{name}"),
            RunAs::Name { name, gid: Some(g) } => write!(f, "{name}:{g}"),
        }
    }
}

/// Whether `name` is a login name [`RunAs::parse`] takes.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        && !name.bytes().all(|b| b.is_ascii_digit())
}

impl Start {
    /// Checks what the agent must not take on trust. Errors name the field.
    pub fn check(&self) -> Result<(), String> {
        if let RunAs::Name { name, .. } = &self.user {
            if !valid_name(name) {
                return Err(format!("user {name:?} is not a valid login name"));
            }
        }
        if !self.cwd.starts_with('/') || self.cwd.contains('\0') {
            return Err(format!("cwd {:?} is not an absolute path", self.cwd));
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                return Err(format!(
                    "environment variable {k:?} has an invalid name or value"
                ));
            }
        }
        match &self.command {
            CommandLine::Shell(s) if s.contains('\0') => Err("the command holds a NUL byte".into()),
            CommandLine::Argv(a) if a.is_empty() => Err("the command is empty".into()),
            CommandLine::Argv(a) if a.iter().any(|w| w.contains('\0')) => {
                Err("an argument holds a NUL byte".into())
            }
            _ => Ok(()),
        }
    }
}

/// Which detached output [`Request::Logs`] asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogsRequest {
    /// The detached command.
    pub handle: String,
    /// Keep sending new output until the command's tree has exited.
    pub follow: bool,
}

/// What the agent sends the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// The token was right and the version is spoken.
    Welcome { version: u32 },
    /// The agent will not serve this connection (bad token, other version, bad request).
    Refused(String),
    /// The command runs (its process ID in the container); `handle` for a detached one;
    /// `program` is what was started: the shell that runs a command line (`/bin/bash`, or
    /// `/bin/sh` where the image has no bash), or the program of an argument vector, as found on
    /// the `PATH`.
    Started {
        pid: u32,
        handle: Option<String>,
        program: String,
    },
    /// Output on the command's standard output.
    Stdout(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Output on the command's standard error.
    Stderr(#[serde(with = "serde_bytes")] Vec<u8>),
    /// The command's own process has ended.
    Exited(Exit),
    /// The command could not be started (program not found: 127; not executable: 126).
    Failed { code: i32, message: String },
    /// The detached commands.
    Processes(Vec<Detached>),
    /// The end of a `Logs` answer; in a [`Request::Forward`] conversation, the server closed
    /// its side of the connection (no more `Stdout`).
    End,
    // Protocol 4 (see [`Request::Terminal`] and the requests after it).
    /// The forwarded connection is open ([`Request::Forward`]).
    Connected,
    /// The forwarded connection could not be made (nothing listens on the port) or ended
    /// abnormally (the server reset it): the reason. The host then resets its client's
    /// connection, so the client sees what it would have seen at the port itself.
    Reset(String),
    /// A sample of the sandbox's resource use ([`Request::Stats`]).
    Stats(Box<Stats>),
}

/// How a command's own process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// Its exit status, or 128+N when signal N ended it.
    pub code: i32,
    /// Whether the timeout killed the tree.
    pub timed_out: bool,
    /// Whether the tree was killed (timeout, cancel, caller gone).
    pub killed: bool,
    /// Whether the kernel's OOM killer ended the command's own process (the sandbox ran out of
    /// memory).
    pub oom_killed: bool,
    /// The signal that ended the command's own process (`WTERMSIG` of its wait status,
    /// `wait(2)`), `None` when it exited (`code` is then its status; a shell that reports its
    /// child's death by a signal as 128+N itself exited).
    pub signal: Option<i32>,
}

/// One detached command, as [`Reply::Processes`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detached {
    /// Its handle.
    pub handle: String,
    /// Process ID of its own process in the container.
    pub pid: u32,
    /// The command, as given.
    pub command: String,
    /// Start time, seconds since the epoch.
    pub started: u64,
    /// `None` while its own process runs; its exit status after.
    pub exit_code: Option<i32>,
    /// Processes of its tree still running.
    pub running: bool,
}

/// A terminal's size in character cells (`struct winsize` of `TIOCSWINSZ`, `ioctl_tty(2)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WinSize {
    /// Lines.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

impl WinSize {
    /// What a terminal of unknown size is taken to be: 24 lines of 80 columns (VT100's).
    pub const DEFAULT: WinSize = WinSize { rows: 24, cols: 80 };

    /// This size, each side at least 1 (a zero-sized terminal breaks full-screen programs).
    pub fn at_least_one(self) -> WinSize {
        WinSize {
            rows: self.rows.max(1),
            cols: self.cols.max(1),
        }
    }
}

/// [`Request::Terminal`]: `start`'s command on a new pseudo-terminal, as `docker exec -t` and
/// `ssh` give one. The agent opens the terminal as the command's user (so the user owns its
/// `/dev/pts/N`), makes it the controlling terminal of the command's new session
/// (`setsid(2)`, `TIOCSCTTY`), and gives it `size`. Everything else is `start`'s: the user,
/// the working directory, the environment, the timeout that kills the whole tree, the tree
/// killed when the connection closes. `start.stdin` says whether the host sends keystrokes
/// (`Stdin`, bytes the terminal's line discipline turns into signals as a terminal does:
/// Ctrl-C is SIGINT); the command's output and its echo come back as `Stdout` (a terminal has
/// one output stream). `start.detach` must be false.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terminal {
    /// The command.
    pub start: Start,
    /// The terminal's size at start.
    pub size: WinSize,
}

impl Terminal {
    /// Checks what the agent must not take on trust ([`Start::check`], and no `detach`).
    pub fn check(&self) -> Result<(), String> {
        if self.start.detach {
            return Err("a terminal's command cannot be detached".into());
        }
        self.start.check()
    }
}

/// [`Request::Forward`]: connect to `port` on the sandbox's loopback (`127.0.0.1`, else `::1`)
/// from inside the sandbox's network namespace, so that it works whatever the sandbox's network
/// (none and the allowlist included) and reaches nothing but the sandbox's own ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forward {
    /// The TCP port inside the sandbox (1–65535).
    pub port: u16,
}

/// [`Request::Stats`]: what to sample beside the cgroup's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsRequest {
    /// Absolute directories of the container whose disk use to measure (the scratch dir, a
    /// copied work dir); answered in [`Stats::disk`] in the same order. At most 8.
    pub disk: Vec<String>,
}

/// The most directories one [`StatsRequest`] may name.
pub(crate) const STATS_DISK_MAX: usize = 8;

impl StatsRequest {
    /// Checks what the agent must not take on trust: at most [`STATS_DISK_MAX`] absolute paths
    /// without NUL bytes.
    pub fn check(&self) -> Result<(), String> {
        if self.disk.len() > STATS_DISK_MAX {
            return Err(format!(
                "at most {STATS_DISK_MAX} directories per stats request"
            ));
        }
        match self
            .disk
            .iter()
            .find(|d| !d.starts_with('/') || d.contains('\0'))
        {
            Some(d) => Err(format!("{d:?} is not an absolute path")),
            None => Ok(()),
        }
    }
}

/// [`Reply::Stats`]: one sample of the sandbox's resource use, read by the agent from the
/// container's cgroup (v1 or v2), `/proc/net/dev` and the file system. `None` where the
/// sandbox cannot tell (no such controller, a kernel without the file). Counters are
/// cumulative: rates come from two samples.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// When it was taken: `CLOCK_MONOTONIC` in the container, nanoseconds.
    pub at_ns: u64,
    /// The cgroup version read: 1, 2, or 0 when none could be read.
    pub cgroup: u8,
    /// CPU time used by the sandbox's processes since it started, nanoseconds.
    pub cpu_ns: Option<u64>,
    /// The CPU limit in thousandths of a core (`--cpus 0.5` is 500); `None`: no limit.
    pub cpu_limit_milli: Option<u64>,
    /// Memory in use, bytes, as `docker stats` counts it: the usage less inactive file cache.
    pub memory: Option<u64>,
    /// The memory limit, bytes; `None`: no limit.
    pub memory_limit: Option<u64>,
    /// The most memory used at once, bytes (cgroup v2 `memory.peak`, v1
    /// `memory.max_usage_in_bytes`: page cache included).
    pub memory_peak: Option<u64>,
    /// Processes (tasks) in the sandbox.
    pub pids: Option<u64>,
    /// The process limit; `None`: no limit.
    pub pids_limit: Option<u64>,
    /// Bytes received on the sandbox's network interfaces but loopback.
    pub net_rx: Option<u64>,
    /// Bytes sent on the sandbox's network interfaces but loopback.
    pub net_tx: Option<u64>,
    /// Disk use of each directory of the request, in its order.
    pub disk: Vec<DiskUse>,
}

/// The disk use of one directory of a [`StatsRequest`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskUse {
    /// Bytes of disk its files take (allocated blocks), on its own file system only, symlinks
    /// not followed.
    pub bytes: u64,
    /// Files and directories counted.
    pub entries: u64,
    /// Whether every entry was counted (false: the walk stopped at its bound, or could not read
    /// a directory; `bytes` is then a lower bound).
    pub complete: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(r: Request) -> Request {
        let mut codec: Codec<Request, Request> = Codec::default();
        let mut buf = BytesMut::new();
        codec.encode(r, &mut buf).unwrap();
        codec.decode(&mut buf).unwrap().unwrap()
    }

    #[test]
    fn messages_round_trip() {
        let start = Request::Start(Start {
            command: CommandLine::Argv(vec![
                "printf".into(),
                "%s\n".into(),
                "one two".into(),
                "".into(),
            ]),
            cwd: "/w".into(),
            env: vec![("spring.profiles.active".into(), "dev".into())],
            user: RunAs::Ids {
                uid: 1000,
                gid: 1000,
            },
            stdin: false,
            timeout_ms: Some(3000),
            detach: false,
        });
        assert_eq!(round_trip(start.clone()), start);
        let data = Request::Stdin(vec![0, 1, 2, 255]);
        assert_eq!(round_trip(data.clone()), data);
        for r in [
            Request::Resize(WinSize {
                rows: 50,
                cols: 132,
            }),
            Request::Forward(Forward { port: 8000 }),
            Request::Stats(StatsRequest {
                disk: vec!["/var/tmp".into()],
            }),
        ] {
            assert_eq!(round_trip(r.clone()), r);
        }
    }

    #[test]
    fn older_requests_keep_their_encoding() {
        // What an agent of protocol 3 sent and understood stays byte for byte the same: the
        // additions of protocol 4 come after every older variant.
        let mut codec: Codec<Request, Request> = Codec::default();
        let mut buf = BytesMut::new();
        codec.encode(Request::List, &mut buf).unwrap();
        assert_eq!(&buf[..], &[0, 0, 0, 1, 6]);
        let mut buf = BytesMut::new();
        codec.encode(Request::Cancel, &mut buf).unwrap();
        assert_eq!(&buf[..], &[0, 0, 0, 1, 5]);
        let mut replies: Codec<Reply, Reply> = Codec::default();
        let mut buf = BytesMut::new();
        replies.encode(Reply::End, &mut buf).unwrap();
        assert_eq!(&buf[..], &[0, 0, 0, 1, 8]);
    }

    #[test]
    fn users_parse_as_names_or_ids() {
        assert_eq!(
            RunAs::parse("1000").unwrap(),
            RunAs::Ids {
                uid: 1000,
                gid: 1000
            }
        );
        assert_eq!(
            RunAs::parse("0:50").unwrap(),
            RunAs::Ids { uid: 0, gid: 50 }
        );
        assert_eq!(
            RunAs::parse("nobody").unwrap(),
            RunAs::Name {
                name: "nobody".into(),
                gid: None
            }
        );
        assert_eq!(
            RunAs::parse("www-data:33").unwrap().to_string(),
            "www-data:33"
        );
        for bad in ["", "-x", "a b", "a:b", "1:", "../x", "a/b", "x:1:2"] {
            assert!(RunAs::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn oversized_and_garbled_frames_are_errors() {
        let mut codec: Codec<Request, Request> = Codec::default();
        let mut buf = BytesMut::from(&((u32::try_from(MAX_FRAME).unwrap() + 1).to_be_bytes())[..]);
        assert!(codec.decode(&mut buf).is_err());
        let mut codec: Codec<Request, Request> = Codec::default();
        let mut buf = BytesMut::from(&[0, 0, 0, 3, 250, 251, 252][..]);
        assert!(codec.decode(&mut buf).is_err());
    }

    #[test]
    fn starts_are_checked() {
        let ok = Start {
            command: CommandLine::Shell("true".into()),
            cwd: "/".into(),
            env: vec![],
            user: RunAs::Ids { uid: 0, gid: 0 },
            stdin: false,
            timeout_ms: None,
            detach: false,
        };
        assert!(ok.check().is_ok());
        for bad in [
            Start {
                cwd: "rel".into(),
                ..ok.clone()
            },
            Start {
                env: vec![("A=B".into(), "x".into())],
                ..ok.clone()
            },
            Start {
                env: vec![("".into(), "x".into())],
                ..ok.clone()
            },
            Start {
                command: CommandLine::Argv(vec![]),
                ..ok.clone()
            },
            Start {
                user: RunAs::Name {
                    name: "a:b".into(),
                    gid: None,
                },
                ..ok.clone()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
