//! A Docker daemon at `tcp://HOST:PORT` with `DOCKER_TLS_VERIFY` set, asked through its Engine
//! API over TLS as the `docker` client would ask it: the daemon's certificate verified against
//! the CA of `DOCKER_CERT_PATH` (`ca.pem`) for the host named in `DOCKER_HOST`, and the
//! client's certificate (`cert.pem`, `key.pem`) presented when both are there. The files and
//! their names are the client's ([Protect the Docker daemon socket]; `DOCKER_CERT_PATH` unset:
//! `$DOCKER_CONFIG`, else `~/.docker`).
//!
//! Nothing here is weaker than the client: where the settings are anything else (plain
//! `tcp://`, `DOCKER_TLS` without verification, `ssh://`, a context), or the files cannot be
//! read, or a handshake fails, the client is run instead, with its own checks and messages.
//!
//! [Protect the Docker daemon socket]: https://docs.docker.com/engine/security/protect-access/

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::types::Daemon;

/// The port of `tcp://HOST` without one, when TLS is on (the client's default).
const DEFAULT_TLS_PORT: u16 = 2376;

/// A daemon at `tcp://` with TLS verified, as [`tls_endpoint`] found it.
#[derive(Debug, Clone)]
pub(crate) struct TlsEndpoint {
    /// `HOST:PORT` to connect to (an IPv6 address in brackets).
    pub address: String,
    /// The name the daemon's certificate must be for: the host of `DOCKER_HOST`.
    pub server_name: ServerName<'static>,
    /// The directory of `ca.pem`, `cert.pem`, `key.pem`.
    pub dir: PathBuf,
    /// Whether the client's certificate is presented (`cert.pem` and `key.pem` both there).
    pub client_cert: bool,
    /// The TLS settings: roots from `ca.pem`, the client's certificate.
    pub config: Arc<rustls::ClientConfig>,
}

/// `tcp://HOST[:PORT]` as `(host, port)`; `None` for anything else (a path after the port,
/// no host, a bad port).
pub(crate) fn parse_tcp_host(host: &str) -> Option<(String, u16)> {
    let rest = host.strip_prefix("tcp://")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (name, port) = match rest.strip_prefix('[') {
        Some(v6) => {
            let (addr, after) = v6.split_once(']')?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':')?),
            };
            (addr, port)
        }
        None => match rest.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (rest, None),
        },
    };
    if name.is_empty() || name.contains(['/', '@', '?', '#', ' ']) {
        return None;
    }
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0)?,
        None => DEFAULT_TLS_PORT,
    };
    Some((name.to_string(), port))
}

/// The directory of the client's TLS files: `DOCKER_CERT_PATH`, else `$DOCKER_CONFIG`, else
/// `~/.docker`.
fn cert_dir(daemon: &Daemon) -> Option<PathBuf> {
    if let Some(p) = daemon.cert_path.as_deref().filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    match std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        Some(d) => Some(PathBuf::from(d)),
        None => Some(PathBuf::from(std::env::var_os("HOME")?).join(".docker")),
    }
}

/// The daemon of `daemon` when it is `tcp://` with `DOCKER_TLS_VERIFY` set (any value but
/// empty, as the client reads it), no context, and the files of [`cert_dir`] make a TLS
/// configuration rustls takes; `None` otherwise (the client's business).
pub(crate) fn tls_endpoint(daemon: &Daemon) -> Option<TlsEndpoint> {
    if daemon.validate().is_err() || daemon.context.as_deref().is_some_and(|c| !c.is_empty()) {
        return None;
    }
    daemon.tls_verify.as_deref().filter(|v| !v.is_empty())?;
    let (host, port) = parse_tcp_host(daemon.host.as_deref()?)?;
    let server_name = ServerName::try_from(host.clone()).ok()?;
    let dir = cert_dir(daemon)?;
    let (config, client_cert) = client_config(&dir).ok()?;
    let address = match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    };
    Some(TlsEndpoint {
        address,
        server_name,
        dir,
        client_cert,
        config,
    })
}

/// The TLS configuration of the client's files in `dir`: the roots of `ca.pem` (required), the
/// chain of `cert.pem` with the key of `key.pem` when both exist. Returns it and whether the
/// client's certificate is in it. Errors: a file unreadable or not PEM rustls takes.
pub(crate) fn client_config(dir: &Path) -> anyhow::Result<(Arc<rustls::ClientConfig>, bool)> {
    use anyhow::Context;
    let mut roots = rustls::RootCertStore::empty();
    let ca = dir.join("ca.pem");
    for cert in CertificateDer::pem_file_iter(&ca)
        .with_context(|| format!("cannot read {}", ca.display()))?
    {
        roots
            .add(cert.with_context(|| format!("{} is not PEM", ca.display()))?)
            .with_context(|| format!("{} holds a certificate rustls refuses", ca.display()))?;
    }
    anyhow::ensure!(!roots.is_empty(), "{} holds no certificate", ca.display());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    if !(cert.exists() && key.exists()) {
        return Ok((Arc::new(builder.with_no_client_auth()), false));
    }
    let chain = CertificateDer::pem_file_iter(&cert)
        .with_context(|| format!("cannot read {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{} is not PEM", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(&key)
        .with_context(|| format!("cannot read a private key from {}", key.display()))?;
    let config = builder.with_client_auth_cert(chain, key)?;
    Ok((Arc::new(config), true))
}

/// `der` as a PEM block of `label` (`CERTIFICATE`, `PRIVATE KEY`), for tests.
#[cfg(test)]
pub(crate) fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_hosts_parse_as_the_client_reads_them() {
        let p = |h: &str| parse_tcp_host(h);
        assert_eq!(
            p("tcp://127.0.0.2:23760"),
            Some(("127.0.0.2".into(), 23760))
        );
        assert_eq!(
            p("tcp://builder.example:2376/"),
            Some(("builder.example".into(), 2376))
        );
        assert_eq!(p("tcp://builder"), Some(("builder".into(), 2376)));
        assert_eq!(p("tcp://[::1]:2376"), Some(("::1".into(), 2376)));
        assert_eq!(p("tcp://[::1]"), Some(("::1".into(), 2376)));
        for bad in [
            "unix:///var/run/docker.sock",
            "ssh://me@host",
            "tcp://",
            "tcp://:2376",
            "tcp://h:0",
            "tcp://h:99999",
            "tcp://h:2376/prefix",
            "tcp://u@h:2376",
            "tcp://[::1]x",
        ] {
            assert_eq!(p(bad), None, "{bad}");
        }
    }

    fn pem_files(dir: &Path, with_client: bool) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&ca_key).unwrap();
        std::fs::write(dir.join("ca.pem"), pem("CERTIFICATE", ca.der())).unwrap();
        if with_client {
            let key = rcgen::KeyPair::generate().unwrap();
            let params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
            std::fs::write(dir.join("cert.pem"), pem("CERTIFICATE", cert.der())).unwrap();
            std::fs::write(
                dir.join("key.pem"),
                pem("PRIVATE KEY", &key.serialize_der()),
            )
            .unwrap();
        }
    }

    fn daemon(host: &str, verify: Option<&str>, dir: &Path) -> Daemon {
        Daemon {
            host: Some(host.into()),
            tls_verify: verify.map(str::to_string),
            cert_path: Some(dir.to_string_lossy().into_owned()),
            ..Default::default()
        }
    }

    #[test]
    fn only_a_verified_tcp_daemon_with_readable_files_is_asked_directly() {
        let dir = tempfile::tempdir().unwrap();
        // No files: the client's business (it says what is missing).
        assert!(tls_endpoint(&daemon("tcp://127.0.0.2:2376", Some("1"), dir.path())).is_none());
        pem_files(dir.path(), true);
        let e = tls_endpoint(&daemon("tcp://127.0.0.2:2376", Some("1"), dir.path())).unwrap();
        assert_eq!(e.address, "127.0.0.2:2376");
        assert!(e.client_cert);
        assert_eq!(
            tls_endpoint(&daemon("tcp://[::1]", Some("1"), dir.path()))
                .unwrap()
                .address,
            "[::1]:2376"
        );
        // Without verification (plain, or DOCKER_TLS alone): the client.
        assert!(tls_endpoint(&daemon("tcp://127.0.0.2:2376", None, dir.path())).is_none());
        assert!(tls_endpoint(&daemon("tcp://127.0.0.2:2376", Some(""), dir.path())).is_none());
        assert!(tls_endpoint(&daemon("ssh://me@host", Some("1"), dir.path())).is_none());
        let mut named = daemon("tcp://127.0.0.2:2376", Some("1"), dir.path());
        named.context = Some("remote".into());
        assert!(tls_endpoint(&named).is_none());
        // A key that is not PEM: the client.
        std::fs::write(dir.path().join("key.pem"), "not a key").unwrap();
        assert!(tls_endpoint(&daemon("tcp://127.0.0.2:2376", Some("1"), dir.path())).is_none());
    }

    #[test]
    fn without_a_client_certificate_none_is_presented() {
        let dir = tempfile::tempdir().unwrap();
        pem_files(dir.path(), false);
        let e = tls_endpoint(&daemon("tcp://h.example:2376", Some("1"), dir.path())).unwrap();
        assert!(!e.client_cert);
    }
}
