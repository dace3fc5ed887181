//! The host's end of the agent protocol: connect to a sandbox's agent socket without ever being
//! steered to another socket, and say hello.
//!
//! The socket lies in the sandbox's run directory, which code in the sandbox can write: it can
//! put a symlink or another socket there. So the path is opened with `O_PATH | O_NOFOLLOW`
//! (never following a symlink), the descriptor is checked to be a socket, and, when the host
//! recorded the agent's socket at `up` (device and inode), to be that very socket; the connection
//! then goes through that descriptor (`/proc/self/fd/N`), so nothing swapped in after the checks
//! is reached. What the agent sends is treated as data: frames are bounded
//! ([`super::proto::MAX_FRAME`]) and the caller clamps exit statuses.

use std::os::fd::AsRawFd;
use std::path::Path;

use futures_util::{SinkExt, StreamExt};
use tokio::net::UnixStream;
use tokio_util::codec::Framed;

use super::proto::{self, Codec, Reply, Request};

/// How long the agent may take to answer the hello.
pub const HELLO_PATIENCE: std::time::Duration = std::time::Duration::from_secs(3);

/// A connection to an agent, past the handshake.
pub type Connection = Framed<UnixStream, Codec<Reply, Request>>;

/// Why no connection was made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Nothing usable is at the path (no socket yet, a stale one, a daemon in a VM): the engine's
    /// exec is the way.
    #[error("the agent's socket cannot be reached: {0}")]
    Unreachable(String),
    /// Something else sits where the agent's socket was (a symlink, a file, another socket):
    /// the sandbox replaced it.
    #[error("the agent's socket {0} was replaced inside the sandbox ({1})")]
    Replaced(String, String),
    /// The agent refused us (another protocol version, a wrong token).
    #[error("the agent refused the connection: {0}")]
    Refused(String),
}

/// The socket's identity (device, inode), for [`connect`]'s `pinned`.
pub fn identity(path: &Path) -> Result<(u64, u64), ConnectError> {
    let fd = open_socket(path)?;
    let st = rustix::fs::fstat(&fd).map_err(|e| ConnectError::Unreachable(e.to_string()))?;
    Ok((st.st_dev, st.st_ino))
}

fn open_socket(path: &Path) -> Result<std::os::fd::OwnedFd, ConnectError> {
    use rustix::fs::{FileType, Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::LOOP => {
            ConnectError::Replaced(path.display().to_string(), "it is a symlink".into())
        }
        e => ConnectError::Unreachable(format!("{}: {e}", path.display())),
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| ConnectError::Unreachable(e.to_string()))?;
    let kind = FileType::from_raw_mode(st.st_mode);
    if kind != FileType::Socket {
        return Err(ConnectError::Replaced(
            path.display().to_string(),
            format!("it is a {kind:?}, not a socket"),
        ));
    }
    Ok(fd)
}

/// Connects to the agent socket at `path` (which must be the socket `pinned` names, when given)
/// and says hello with `token`. Errors: [`ConnectError`].
pub async fn connect(
    path: &Path,
    token: &str,
    pinned: Option<(u64, u64)>,
) -> Result<Connection, ConnectError> {
    let fd = open_socket(path)?;
    if let Some(want) = pinned {
        let st = rustix::fs::fstat(&fd).map_err(|e| ConnectError::Unreachable(e.to_string()))?;
        if (st.st_dev, st.st_ino) != want {
            return Err(ConnectError::Replaced(
                path.display().to_string(),
                "another socket than the agent's".into(),
            ));
        }
    }
    let via = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let stream = UnixStream::connect(&via)
        .await
        .map_err(|e| ConnectError::Unreachable(format!("{}: {e}", path.display())))?;
    drop(fd);
    let mut conn: Connection = Framed::new(stream, Codec::default());
    conn.send(Request::Hello {
        version: proto::VERSION,
        token: token.to_string(),
    })
    .await
    .map_err(|e| ConnectError::Unreachable(e.to_string()))?;
    // A frozen agent (its container paused behind our back) accepts but never answers.
    let answer = tokio::time::timeout(HELLO_PATIENCE, conn.next())
        .await
        .map_err(|_| {
            ConnectError::Unreachable(format!(
                "the agent did not answer within {}s (its container paused or overloaded?)",
                HELLO_PATIENCE.as_secs()
            ))
        })?;
    match answer {
        Some(Ok(Reply::Welcome { version })) if version == proto::VERSION => Ok(conn),
        Some(Ok(Reply::Refused(why))) => Err(ConnectError::Refused(why)),
        Some(Ok(other)) => Err(ConnectError::Refused(format!(
            "unexpected answer {other:?}"
        ))),
        Some(Err(e)) => Err(ConnectError::Unreachable(e.to_string())),
        None => Err(ConnectError::Unreachable(
            "the agent closed the connection".into(),
        )),
    }
}
