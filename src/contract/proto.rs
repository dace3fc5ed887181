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

use bytes::{Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

/// Version of this protocol; a peer speaking another one is refused at `Hello`.
pub const VERSION: u32 = 3;

/// The protocol versions of agents the host still knows but no longer speaks to (their sandboxes'
/// commands go through the engine's exec): 2 had no [`RunAs`].
pub const OLD_VERSIONS: [u32; 1] = [2];

/// The largest frame either end accepts (bytes after the length prefix): a command line and its
/// environment must fit in one [`Start`].
pub const MAX_FRAME: usize = 4 << 20;

/// The most output bytes one [`Reply::Stdout`]/[`Reply::Stderr`] frame carries.
pub const CHUNK: usize = 64 << 10;

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
pub fn valid_name(name: &str) -> bool {
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
    /// The command runs (its process ID in the container); `handle` for a detached one.
    Started { pid: u32, handle: Option<String> },
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
    /// The end of a `Logs` answer.
    End,
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
        let mut buf = BytesMut::from(&((MAX_FRAME as u32 + 1).to_be_bytes())[..]);
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
