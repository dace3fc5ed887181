//! The host's end of the agent protocol ([`crate::contract::proto`]): the ways the host reaches
//! a sandbox's in-container agent, each ending in the same framed [`Connection`] past the
//! handshake, so that every command, file operation and background request is the same
//! conversation whatever carries it.
//!
//! - [`socket`]: the agent's unix socket in the sandbox's run directory, on this machine (the
//!   engine bind-mounts host directories);
//! - [`tls`]: the remote channel, TLS 1.3 with pinned certificates to the agent's published
//!   port, or over any other byte stream (the core's relay through the engine's exec stream).
//!
//! Where none can be reached, the core runs commands through the engine's own exec instead.

pub mod socket;
pub mod tls;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::Framed;

use crate::contract::proto::{self, Codec, Reply, Request};

/// How long the agent may take to answer the hello, and a TLS handshake to finish: 10 s, as
/// the agent gives a peer (a loaded remote host or a busy 2-core CI machine took over 3 s).
pub const HELLO_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// A byte stream to an agent: a unix socket, a TLS stream, a relay through the engine's exec.
pub trait Duplex: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Duplex for T {}

/// A connection to an agent, past the handshake: framed requests out, replies in.
pub type Connection = Framed<Box<dyn Duplex>, Codec<Reply, Request>>;

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

/// Says hello to the agent at the other end of `stream` with the sandbox's `token` and waits
/// (at most [`HELLO_PATIENCE`]) for its welcome. Errors: [`ConnectError`].
pub async fn hello(stream: Box<dyn Duplex>, token: &str) -> Result<Connection, ConnectError> {
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
