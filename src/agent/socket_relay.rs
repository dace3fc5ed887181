//! `h9sandbox agent socket-relay`: the in-container end of the host's way to the agent where
//! the agent's socket does not cross the bind mount (gVisor, whose sockets live in its own
//! kernel): the host runs it through the engine's exec and speaks the agent protocol through its
//! standard input and output, which it carries to the agent's socket inside the container and
//! back, byte for byte. The host and the agent still do their own handshake (the token) through
//! it, so the relay learns nothing it could use and grants nothing.
//!
//! The socket lies in the run directory, which a process of the sandbox can write: it could put
//! a socket of its own in the agent's place, to be handed the host's token. So the relay
//! serves only a socket whose listener is PID 1 (`SO_PEERCRED`, `unix(7)`), which no process of
//! the sandbox can be; and it makes itself not dumpable before the host sends a byte, so no
//! process of the sandbox (root included) can read its memory or descriptors. It tells the host
//! it is ready with one line on stdout, [`READY_LINE`].

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use crate::contract::{RUN_DIR, SOCKET_FILE};

/// What the relay prints once it is connected to the agent: the host sends nothing before.
pub(crate) const READY_LINE: &str = "h9sandbox-relay ready\n";

/// Runs the relay; returns its exit status: 0 when either side ended, 125 when the agent's
/// socket cannot be used (the reason on stderr).
pub(crate) fn run() -> i32 {
    let fail = |why: String| {
        eprintln!("h9sandbox: error: {why}");
        125
    };
    if let Err(e) = super::not_dumpable() {
        return fail(format!("cannot make the relay not dumpable: {e}"));
    }
    let path = std::path::Path::new(RUN_DIR).join(SOCKET_FILE);
    let sock = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) => {
            return fail(format!(
                "cannot reach the agent's socket {}: {e}",
                path.display()
            ))
        }
    };
    match rustix::net::sockopt::socket_peercred(&sock) {
        Ok(cred) if cred.pid.as_raw_nonzero().get() == 1 => {}
        // gVisor's kernel answers with the asking process's own credentials: who listens
        // cannot be told, so a socket a sandbox process put there cannot be told apart.
        Ok(cred) if cred.pid == rustix::process::getpid() => {
            return fail(format!(
                "this kernel (gVisor) does not tell who listens on {}, so the agent's socket cannot be told apart from one a process of the sandbox put there",
                path.display()
            ))
        }
        Ok(cred) => {
            return fail(format!(
                "the socket {} is not the agent's (its listener is process {}, not PID 1): it was replaced inside the sandbox",
                path.display(),
                cred.pid.as_raw_nonzero()
            ))
        }
        Err(e) => return fail(format!("cannot tell who listens on {}: {e}", path.display())),
    }
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(READY_LINE.as_bytes())
        .and_then(|_| stdout.flush())
        .is_err()
    {
        return 0;
    }
    // Host to agent on a thread of its own; its end half-closes the socket, so the agent sees
    // the host leave.
    let mut to_agent = match sock.try_clone() {
        Ok(s) => s,
        Err(e) => return fail(format!("cannot use the agent's socket: {e}")),
    };
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to_agent.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to_agent.shutdown(std::net::Shutdown::Write);
    });
    // Agent to host, until the agent ends the conversation.
    let mut from_agent = sock;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match from_agent.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if stdout
                    .write_all(&buf[..n])
                    .and_then(|_| stdout.flush())
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    0
}
