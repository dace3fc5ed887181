//! The agent's unix socket in the sandbox's run directory: connect without ever being steered to
//! another socket, and say hello ([`super::hello`]).
//!
//! The socket lies in the sandbox's run directory, which code in the sandbox can write: it can
//! put a symlink or another socket there. So the path is opened with `O_PATH | O_NOFOLLOW`
//! (never following a symlink), the descriptor is checked to be a socket, and, when the host
//! recorded the agent's socket at `up` (device and inode), to be that very socket; the connection
//! then goes through that descriptor (`/proc/self/fd/N`), so nothing swapped in after the checks
//! is reached. What the agent sends is treated as data: frames are bounded
//! ([`crate::contract::proto::MAX_FRAME`]) and the caller clamps exit statuses.

use std::os::fd::AsRawFd;
use std::path::Path;

use tokio::net::UnixStream;

use super::{ConnectError, Connection};

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
    super::hello(Box::new(stream), token).await
}
