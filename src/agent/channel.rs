//! The agent's end of the remote channel ([`crate::contract::tls`]): a TCP listener whose every
//! connection must complete a TLS 1.3 handshake with the host's pinned certificate before the
//! agent reads a byte of the protocol, and then present the sandbox's token
//! ([`super::server::serve_stream`]); and `agent relay`, the in-container end of the engine's
//! exec stream, which carries the same TLS bytes to the listener where the host cannot reach
//! the published port.

use std::sync::Arc;
use std::time::Duration;

use super::server::{self, Agent};
use crate::contract::tls::{self, ChannelSecret};

/// How long a peer has to finish the TLS handshake.
const HANDSHAKE_PATIENCE: Duration = Duration::from_secs(10);

/// The channel's listener, bound: TLS with `secret`'s certificate for `agent`.
pub(crate) struct Listener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl Listener {
    /// Binds `address` (`IP:PORT`) for `secret`. Errors: the address, or a key rustls refuses.
    pub(crate) async fn bind(address: &str, secret: &ChannelSecret) -> std::io::Result<Listener> {
        let config = tls::server_config(secret).map_err(std::io::Error::other)?;
        let tcp = tokio::net::TcpListener::bind(address).await?;
        Ok(Listener {
            tcp,
            acceptor: tokio_rustls::TlsAcceptor::from(config),
        })
    }

    /// Serves connections of `agent` forever, each in a task of its own; a peer that does not
    /// finish the handshake in time, or without the pinned certificate, is dropped unanswered.
    pub(crate) async fn serve(self, agent: Arc<Agent>) {
        loop {
            let stream = match self.tcp.accept().await {
                Ok((s, _)) => s,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            crate::contract::tls::keep_alive(&stream);
            let acceptor = self.acceptor.clone();
            let agent = Arc::clone(&agent);
            tokio::spawn(async move {
                let Ok(Ok(tls)) =
                    tokio::time::timeout(HANDSHAKE_PATIENCE, acceptor.accept(stream)).await
                else {
                    return;
                };
                server::serve_stream(agent, Box::new(tls)).await;
            });
        }
    }
}

/// Options of `h9sandbox agent relay`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RelayArgs {
    /// The channel's address inside the container (`IP:PORT`)
    #[arg(long, value_name = "IP:PORT")]
    pub to: String,
}

/// `h9sandbox agent relay --to ADDR`: copies standard input to a TCP connection to `ADDR` and
/// the connection to standard output, until either ends. It sees only TLS bytes: the host and
/// the agent authenticate each other through it. Returns the exit status.
pub(crate) fn relay(args: &RelayArgs) -> i32 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("h9sandbox: error: cannot start the relay: {e}");
            return 125;
        }
    };
    rt.block_on(async {
        let mut up = match tokio::net::TcpStream::connect(&args.to).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!(
                    "h9sandbox: error: the relay cannot reach the agent at {}: {e}",
                    args.to
                );
                return 125;
            }
        };
        let _ = up.set_nodelay(true);
        let mut local = tokio::io::join(tokio::io::stdin(), tokio::io::stdout());
        match tokio::io::copy_bidirectional(&mut local, &mut up).await {
            Ok(_) => 0,
            Err(_) => 0,
        }
    })
}
