//! The agent's end of a forwarded connection ([`super::proto::Request::Forward`]): a TCP
//! connection from inside the sandbox to a port on its own loopback, carried over the agent's
//! connection, so that `h9sandbox port-forward` reaches a server of the sandbox whatever its
//! network (none and the allowlist included) and reaches nothing else: the agent connects to
//! `127.0.0.1` (else `::1`) only, from the sandbox's network namespace.
//!
//! After `Connected`, the host's `Stdin` frames are written to the connection and its
//! `CloseStdin` shuts the connection's sending side down (a half-close); what the server sends
//! comes back as `Stdout`, its end as `End`, a reset (or any other failure) as `Reset`. The two
//! directions run on their own, so neither waits for the other. The connection to the server
//! is dropped as soon as the host's connection ends.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

use super::proto::{self, Codec, Forward, Reply, Request};

/// How long connecting to the port may take (loopback answers at once; a full backlog not).
const CONNECT_PATIENCE: Duration = Duration::from_secs(10);

/// How many forwarded connections the agent carries at once. Each costs it buffers charged to
/// the sandbox's memory: without a bound, anyone who can reach a forward's local port (every
/// local user) could grow PID 1 until the OOM killer ends the sandbox.
pub(crate) const MAX_FORWARDS: usize = 512;

/// Forwarded connections under way.
static FORWARDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One of [`FORWARDS`], given back when dropped.
struct Slot;

impl Slot {
    fn take() -> Option<Slot> {
        use std::sync::atomic::Ordering;
        FORWARDS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_FORWARDS).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        FORWARDS.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Connects to `port` on the sandbox's loopback: IPv4 first, then IPv6 (as `kubectl
/// port-forward` tries `localhost`). Errors: the reason, for [`Reply::Reset`].
async fn connect(port: u16) -> Result<TcpStream, String> {
    let mut why = String::new();
    for ip in [
        std::net::IpAddr::from([127, 0, 0, 1]),
        std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
    ] {
        match tokio::time::timeout(CONNECT_PATIENCE, TcpStream::connect((ip, port))).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) if why.is_empty() => why = e.to_string(),
            Ok(Err(_)) => {}
            Err(_) => why = format!("no answer within {}s", CONNECT_PATIENCE.as_secs()),
        }
    }
    Err(format!(
        "nothing accepts connections on port {port} in the sandbox ({why})"
    ))
}

/// Serves one forwarded connection on `conn` (past the handshake). Errors: the host's
/// connection failed.
pub(crate) async fn serve<S>(
    conn: &mut Framed<S, Codec<Request, Reply>>,
    f: Forward,
) -> Result<(), String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if f.port == 0 {
        return Err("port 0 cannot be forwarded".into());
    }
    let Some(_slot) = Slot::take() else {
        return conn
            .send(Reply::Reset(format!(
                "the sandbox's agent carries {MAX_FORWARDS} forwarded connections already; this one is reset"
            )))
            .await
            .map_err(|e| e.to_string());
    };
    let stream = match connect(f.port).await {
        Ok(s) => s,
        Err(why) => {
            return conn
                .send(Reply::Reset(why))
                .await
                .map_err(|e| e.to_string())
        }
    };
    conn.send(Reply::Connected)
        .await
        .map_err(|e| e.to_string())?;
    let (mut from_server, mut to_server) = stream.into_split();
    let (mut sink, mut requests) = conn.split();
    // Host to server, until the host's connection ends.
    let up = async {
        let mut open = true;
        loop {
            match requests.next().await {
                Some(Ok(Request::Stdin(bytes))) if open => {
                    if to_server.write_all(&bytes).await.is_err() {
                        open = false;
                    }
                }
                Some(Ok(Request::CloseStdin)) => {
                    if open {
                        let _ = to_server.shutdown().await;
                    }
                    open = false;
                }
                // Bytes after the server stopped taking them are dropped.
                Some(Ok(Request::Stdin(_))) => {}
                _ => return,
            }
        }
    };
    // Server to host, until the server's end (or its reset).
    let down = async {
        let mut buf = vec![0u8; proto::CHUNK];
        loop {
            match from_server.read(&mut buf).await {
                Ok(0) => {
                    let _ = sink.send(Reply::End).await;
                    return true;
                }
                Ok(n) => {
                    if sink.send(Reply::Stdout(buf[..n].to_vec())).await.is_err() {
                        return false;
                    }
                }
                Err(e) => {
                    let _ = sink
                        .send(Reply::Reset(format!("the server in the sandbox: {e}")))
                        .await;
                    return false;
                }
            }
        }
    };
    tokio::pin!(up, down);
    tokio::select! {
        // The host is gone: the connection to the server goes with it.
        _ = &mut up => {}
        // The server has sent everything: the host may still send (a half-closed connection),
        // until it is gone. After a reset, nothing more.
        clean = &mut down => if clean { up.await },
    }
    Ok(())
}
