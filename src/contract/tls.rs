//! The remote channel's security, as both ends must agree on it: TLS 1.3 (rustls with `ring`,
//! no OpenSSL), both ends authenticated by a certificate pinned by its SHA-256 fingerprint, then
//! the protocol's hello with the sandbox's token ([`super::proto::Request::Hello`]).
//!
//! `up` makes two key pairs per sandbox (ECDSA P-256, self-signed certificates): the agent's,
//! whose fingerprint the sandbox's record pins, and the host's, whose fingerprint the agent pins.
//! The agent's key, the host's fingerprint and the token reach PID 1 as a [`ChannelSecret`] on
//! its standard input before anything else runs in the container ([`read_secret`]): never in the
//! image, a label, the environment or a log. A peer without the pinned certificate fails the
//! handshake before a byte of the protocol is read; one with it still needs the token.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The name the agent's certificate carries and the host asks for (the certificate is pinned by
/// its fingerprint; the name only has to be well formed).
pub(crate) const SERVER_NAME: &str = "h9sandbox-agent";

/// The largest [`ChannelSecret`] PID 1 reads from its standard input.
pub(crate) const SECRET_MAX: usize = 64 << 10;

/// What PID 1 of a sandbox with a remote channel receives on its standard input, once, before
/// anything else runs in the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelSecret {
    /// The sandbox's token, demanded in the hello.
    pub token: String,
    /// The agent's certificate (DER).
    #[serde(with = "serde_bytes")]
    pub cert: Vec<u8>,
    /// The agent's private key (PKCS #8, DER).
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// The SHA-256 fingerprint of the host's certificate, the only client the agent serves.
    #[serde(with = "serde_bytes")]
    pub client: Vec<u8>,
}

impl ChannelSecret {
    /// The secret as PID 1 reads it: a 4-byte big-endian length, then the postcard encoding.
    pub fn to_frame(&self) -> Vec<u8> {
        let body = postcard::to_stdvec(self).unwrap_or_default();
        // A certificate, a key and a fingerprint: a few KiB, far below u32::MAX (and a length
        // that did not fit would read as more than SECRET_MAX, refused, not cut).
        let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
        let mut out = len.to_be_bytes().to_vec();
        out.extend(body);
        out
    }
}

/// Reads a [`ChannelSecret`] frame from `r` (at most [`SECRET_MAX`] bytes). Errors: a short,
/// oversized or malformed frame.
pub(crate) fn read_secret(r: &mut impl std::io::Read) -> std::io::Result<ChannelSecret> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > SECRET_MAX {
        return Err(std::io::Error::other(format!(
            "a channel secret of {len} bytes (at most {SECRET_MAX})"
        )));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    postcard::from_bytes(&body)
        .map_err(|e| std::io::Error::other(format!("malformed channel secret: {e}")))
}

/// The SHA-256 fingerprint of a certificate's DER encoding.
pub(crate) fn fingerprint(der: &[u8]) -> [u8; 32] {
    Sha256::digest(der).into()
}

/// `bytes` as lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses lower-case or upper-case hex. `None` for anything else.
#[cfg(test)]
fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Turns on TCP keepalive on a channel's connection `socket`, on either end: after 15 s without
/// traffic the kernel probes the peer every 5 s, and 3 probes unanswered end the connection
/// (`ETIMEDOUT`). A peer that vanished without closing (its node down, its replies lost on the
/// way) is so told in about 30 s; without it, a command that prints nothing waits for it
/// forever. A peer that is there answers the probes from its kernel, however long its command
/// runs quietly. `SO_KEEPALIVE`, `TCP_KEEPIDLE`, `TCP_KEEPINTVL`, `TCP_KEEPCNT`: socket(7),
/// tcp(7). Best effort: a setting the socket refuses is left as it is.
pub(crate) fn keep_alive(socket: impl std::os::fd::AsFd) {
    use rustix::net::sockopt;
    let fd = socket.as_fd();
    if sockopt::set_socket_keepalive(fd, true).is_ok() {
        let _ = sockopt::set_tcp_keepidle(fd, std::time::Duration::from_secs(15));
        let _ = sockopt::set_tcp_keepintvl(fd, std::time::Duration::from_secs(5));
        let _ = sockopt::set_tcp_keepcnt(fd, 3);
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Accepts exactly the certificate whose fingerprint is `pin`, and checks that the peer holds
/// its key (the handshake's signature, with the provider's algorithms).
#[derive(Debug)]
struct Pinned {
    pin: Vec<u8>,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl Pinned {
    fn new(pin: &[u8]) -> Pinned {
        Pinned {
            pin: pin.to_vec(),
            algorithms: provider().signature_verification_algorithms,
        }
    }

    fn check(&self, cert: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        // Both are 32 bytes; comparing without an early exit costs nothing here.
        let seen = fingerprint(cert.as_ref());
        let same = seen.len() == self.pin.len()
            && seen
                .iter()
                .zip(&self.pin)
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        if same {
            Ok(())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify13(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.check(end_entity)
            .map(|_| ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not spoken here".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verify13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

impl ClientCertVerifier for Pinned {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.check(end_entity)
            .map(|_| ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not spoken here".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verify13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

fn key_der(pkcs8: &[u8]) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pkcs8.to_vec()))
}

/// The agent's TLS configuration: TLS 1.3 only, its certificate and key from `secret`, a client
/// certificate demanded and accepted only when it is the one `secret.client` pins. Errors: a
/// key or certificate rustls does not take.
pub(crate) fn server_config(
    secret: &ChannelSecret,
) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(Arc::new(Pinned::new(&secret.client)))
        .with_single_cert(
            vec![CertificateDer::from(secret.cert.clone())],
            key_der(&secret.key),
        )?;
    Ok(Arc::new(config))
}

/// The host's TLS configuration for one sandbox: TLS 1.3 only, its own certificate `cert` and
/// key `key` (PKCS #8) presented, the agent's certificate accepted only when its fingerprint is
/// `agent_pin`. Errors: a key or certificate rustls does not take.
pub(crate) fn client_config(
    cert: &[u8],
    key: &[u8],
    agent_pin: &[u8],
) -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned::new(agent_pin)))
        .with_client_auth_cert(vec![CertificateDer::from(cert.to_vec())], key_der(key))?;
    Ok(Arc::new(config))
}

/// The server name the host asks for.
pub(crate) fn server_name() -> ServerName<'static> {
    ServerName::try_from(SERVER_NAME).expect("a valid DNS name")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channels_connection_probes_a_quiet_peer() {
        use rustix::net::sockopt;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert!(!sockopt::socket_keepalive(&tcp).unwrap());
        keep_alive(&tcp);
        assert!(sockopt::socket_keepalive(&tcp).unwrap());
        assert_eq!(
            sockopt::tcp_keepidle(&tcp).unwrap(),
            std::time::Duration::from_secs(15)
        );
        assert_eq!(
            sockopt::tcp_keepintvl(&tcp).unwrap(),
            std::time::Duration::from_secs(5)
        );
        assert_eq!(sockopt::tcp_keepcnt(&tcp).unwrap(), 3);
    }

    #[test]
    fn secrets_round_trip_and_bad_frames_are_refused() {
        let s = ChannelSecret {
            token: "t".repeat(64),
            cert: vec![1, 2, 3],
            key: vec![4; 100],
            client: vec![9; 32],
        };
        assert_eq!(read_secret(&mut &s.to_frame()[..]).unwrap(), s);
        let mut big = u32::try_from(SECRET_MAX + 1)
            .unwrap()
            .to_be_bytes()
            .to_vec();
        big.extend([0; 8]);
        assert!(read_secret(&mut &big[..]).is_err());
        assert!(read_secret(&mut &s.to_frame()[..10]).is_err());
        assert!(read_secret(&mut &[0, 0, 0, 2, 0xff, 0xff][..]).is_err());
        assert_eq!(unhex(&hex(&[0, 1, 254, 255])), Some(vec![0, 1, 254, 255]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }
}
