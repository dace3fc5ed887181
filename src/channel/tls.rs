//! The remote channel, the host's end: the key pairs `up` makes for a sandbox, and TLS 1.3 to
//! its agent ([`crate::contract::tls`]) over a TCP connection to the published port, or over
//! any other byte stream (the engine's exec relay).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;

use super::{ConnectError, Connection, Duplex};
use crate::contract::tls::{self, ChannelSecret};

/// How long connecting to the published port may take before it counts as unreachable.
pub const CONNECT_PATIENCE: Duration = Duration::from_secs(3);

/// What the host keeps of a sandbox's channel (owner-only, in the state directory): its own
/// certificate and key, and the agent's fingerprint it accepts.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostKeys {
    /// The host's certificate (DER).
    #[serde(with = "serde_bytes")]
    pub cert: Vec<u8>,
    /// The host's private key (PKCS #8, DER).
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// SHA-256 of the agent's certificate.
    #[serde(with = "serde_bytes")]
    pub agent_pin: Vec<u8>,
}

impl std::fmt::Debug for HostKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostKeys")
            .field("agent_pin", &tls::hex(&self.agent_pin))
            .finish_non_exhaustive()
    }
}

/// A fresh self-signed certificate and its key (ECDSA P-256), named [`tls::SERVER_NAME`].
fn self_signed() -> Result<(Vec<u8>, Vec<u8>), rcgen::Error> {
    let key = rcgen::KeyPair::generate()?;
    let cert =
        rcgen::CertificateParams::new(vec![tls::SERVER_NAME.to_string()])?.self_signed(&key)?;
    Ok((cert.der().to_vec(), key.serialize_der()))
}

/// Makes the agent's key pair for a sandbox whose host keys are `host` (`None`: makes those
/// too) and whose token is `token`: the secret PID 1 receives and what the host keeps (its own
/// keys, the agent's new fingerprint). Errors: key generation failed.
pub fn generate(
    host: Option<&HostKeys>,
    token: &str,
) -> Result<(HostKeys, ChannelSecret), rcgen::Error> {
    let (cert, key) = match host {
        Some(h) => (h.cert.clone(), h.key.clone()),
        None => self_signed()?,
    };
    let (agent_cert, agent_key) = self_signed()?;
    let keys = HostKeys {
        agent_pin: tls::fingerprint(&agent_cert).to_vec(),
        cert: cert.clone(),
        key,
    };
    let secret = ChannelSecret {
        token: token.to_string(),
        cert: agent_cert,
        key: agent_key,
        client: tls::fingerprint(&cert).to_vec(),
    };
    Ok((keys, secret))
}

/// TLS over `stream` with `keys`, then the hello with `token`. Errors: [`ConnectError`] (a
/// failed handshake is [`ConnectError::Refused`]: the peer is not the sandbox's agent).
pub async fn over(
    stream: Box<dyn Duplex>,
    keys: &HostKeys,
    token: &str,
) -> Result<Connection, ConnectError> {
    let config = tls::client_config(&keys.cert, &keys.key, &keys.agent_pin)
        .map_err(|e| ConnectError::Refused(format!("the channel's keys: {e}")))?;
    let connector = tokio_rustls::TlsConnector::from(config);
    let tls = tokio::time::timeout(
        super::HELLO_PATIENCE,
        connector.connect(tls::server_name(), stream),
    )
    .await
    .map_err(|_| {
        ConnectError::Unreachable(format!(
            "the channel's TLS handshake did not finish within {}s",
            super::HELLO_PATIENCE.as_secs()
        ))
    })?
    .map_err(|e| {
        // Nothing behind the port (a stopped container's published port closes at once) is
        // not a refusal; a certificate that is not the pinned one is.
        if e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
            ConnectError::Refused(format!(
                "the channel's TLS handshake failed ({e}): the peer is not this sandbox's agent"
            ))
        } else {
            ConnectError::Unreachable(format!("the channel's TLS handshake: {e}"))
        }
    })?;
    super::hello(Box::new(tls), token).await
}

/// Connects to the channel at `address` (`HOST:PORT`, the published port) and speaks TLS and
/// the hello ([`over`]). Errors: [`ConnectError::Unreachable`] when no TCP connection is made
/// within [`CONNECT_PATIENCE`].
pub async fn connect(
    address: &str,
    keys: &HostKeys,
    token: &str,
) -> Result<Connection, ConnectError> {
    let tcp = tokio::time::timeout(CONNECT_PATIENCE, TcpStream::connect(address))
        .await
        .map_err(|_| {
            ConnectError::Unreachable(format!(
                "the channel {address} did not answer within {}s",
                CONNECT_PATIENCE.as_secs()
            ))
        })?
        .map_err(|e| ConnectError::Unreachable(format!("the channel {address}: {e}")))?;
    let _ = tcp.set_nodelay(true);
    crate::contract::tls::keep_alive(&tcp);
    over(Box::new(tcp), keys, token).await
}
