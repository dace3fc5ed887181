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
    /// When every CA of `ca.pem` is valid: from the latest `notBefore` to the earliest
    /// `notAfter`, seconds since the epoch ([`TlsEndpoint::in_force`]).
    pub valid: (i64, i64),
}

impl TlsEndpoint {
    /// Whether every CA of `ca.pem` is within its validity now. The client refuses a daemon
    /// whose chain ends at an expired or not yet valid CA; webpki, which takes a trust anchor
    /// as it is, would not: outside it, the client is asked instead. Checked before every
    /// connection (an MCP server lives long).
    pub(crate) fn in_force(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.valid.0 <= now && now <= self.valid.1
    }
}

/// What a CA certificate of `ca.pem` must be for webpki's verification to be as strict as the
/// client's (Go's `crypto/x509`, which also checks an anchor's validity, its path length and
/// its extended key usage; webpki checks none of an anchor's): its validity, as `(notBefore,
/// notAfter)` in seconds since the epoch. Errors: not a certificate this reads, or one with a
/// path length constraint or an extended key usage (webpki would not honour them: the client
/// is asked instead).
pub(crate) fn anchor_validity(der: &[u8]) -> Result<(i64, i64), String> {
    use yasna::models::ObjectIdentifier;
    use yasna::tags::{TAG_GENERALIZEDTIME, TAG_UTCTIME};
    const BASIC_CONSTRAINTS: [u64; 4] = [2, 5, 29, 19];
    const EXT_KEY_USAGE: [u64; 4] = [2, 5, 29, 37];
    let time = |r: yasna::BERReader| -> yasna::ASN1Result<i64> {
        let tag = r.lookahead_tag()?;
        if tag == TAG_UTCTIME {
            Ok(r.read_utctime()?.datetime().unix_timestamp())
        } else if tag == TAG_GENERALIZEDTIME {
            Ok(r.read_generalized_time()?.datetime().unix_timestamp())
        } else {
            Err(yasna::ASN1Error::new(yasna::ASN1ErrorKind::Invalid))
        }
    };
    let mut limited = None;
    let validity = yasna::parse_der(der, |r| {
        r.read_sequence(|cert| {
            let validity = cert.next().read_sequence(|tbs| {
                // version [0], serial, signature, issuer
                tbs.read_optional(|r| r.read_tagged(yasna::Tag::context(0), |r| r.read_der()))?;
                for _ in 0..3 {
                    tbs.next().read_der()?;
                }
                let validity = tbs.next().read_sequence(|v| {
                    let not_before = time(v.next())?;
                    let not_after = time(v.next())?;
                    Ok((not_before, not_after))
                })?;
                // subject, subjectPublicKeyInfo, then [1] [2] unique IDs, [3] extensions
                tbs.next().read_der()?;
                tbs.next().read_der()?;
                // (read_der takes any element: the tag is looked at first)
                for n in [1, 2] {
                    tbs.read_optional(|r| match r.lookahead_tag()? == yasna::Tag::context(n) {
                        true => r.read_der(),
                        false => Err(yasna::ASN1Error::new(yasna::ASN1ErrorKind::Invalid)),
                    })?;
                }
                tbs.read_optional(|r| {
                    r.read_tagged(yasna::Tag::context(3), |r| {
                        r.read_sequence_of(|ext| {
                            ext.read_sequence(|e| {
                                let id: ObjectIdentifier = e.next().read_oid()?;
                                let _critical = e.read_default(false, |r| r.read_bool())?;
                                let value = e.next().read_bytes()?;
                                let id = id.components().as_slice();
                                if id == EXT_KEY_USAGE {
                                    limited = Some("an extended key usage");
                                } else if id == BASIC_CONSTRAINTS {
                                    let path_len = yasna::parse_der(&value, |r| {
                                        r.read_sequence(|bc| {
                                            bc.read_default(false, |r| r.read_bool())?;
                                            bc.read_optional(|r| r.read_u64())
                                        })
                                    })?;
                                    if path_len.is_some() {
                                        limited = Some("a path length constraint");
                                    }
                                }
                                Ok(())
                            })
                        })
                    })
                })?;
                Ok(validity)
            })?;
            // signatureAlgorithm, signatureValue
            cert.next().read_der()?;
            cert.next().read_der()?;
            Ok(validity)
        })
    })
    .map_err(|e| format!("not a certificate this reads: {e}"))?;
    match limited {
        Some(what) => Err(format!("a CA with {what}")),
        None => Ok(validity),
    }
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
    // An IPv6 address without brackets (`tcp://::1:2376`) is read differently by the client:
    // its business.
    let bare_v6 = !rest.starts_with('[') && name.contains(':');
    if name.is_empty() || bare_v6 || name.contains(['/', '@', '?', '#', ' ']) {
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
    let (config, client_cert, valid) = client_config(&dir).ok()?;
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
        valid,
    })
}

/// The TLS configuration of the client's files in `dir`: the roots of `ca.pem` (required, at
/// most [`CA_FILE_MAX`] bytes, each CA as [`anchor_validity`] wants it), the chain of
/// `cert.pem` with the key of `key.pem` when both exist. Returns it, whether the client's
/// certificate is in it, and when every CA is valid ([`TlsEndpoint::valid`]). Errors: a file
/// unreadable, too large, or not PEM rustls takes; a CA webpki would not check as the client
/// does.
pub(crate) fn client_config(
    dir: &Path,
) -> anyhow::Result<(Arc<rustls::ClientConfig>, bool, (i64, i64))> {
    use anyhow::Context;
    let mut roots = rustls::RootCertStore::empty();
    let ca = dir.join("ca.pem");
    let text = read_small(&ca)?;
    let mut valid = (i64::MIN, i64::MAX);
    for cert in CertificateDer::pem_slice_iter(&text) {
        let cert = cert.with_context(|| format!("{} is not PEM", ca.display()))?;
        let (not_before, not_after) =
            anchor_validity(&cert).map_err(|why| anyhow::anyhow!("{}: {why}", ca.display()))?;
        valid = (valid.0.max(not_before), valid.1.min(not_after));
        roots
            .add(cert)
            .with_context(|| format!("{} holds a certificate rustls refuses", ca.display()))?;
    }
    anyhow::ensure!(!roots.is_empty(), "{} holds no certificate", ca.display());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    if !(cert.exists() && key.exists()) {
        return Ok((Arc::new(builder.with_no_client_auth()), false, valid));
    }
    let chain = CertificateDer::pem_slice_iter(&read_small(&cert)?)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{} is not PEM", cert.display()))?;
    let key = PrivateKeyDer::from_pem_slice(&read_small(&key)?)
        .with_context(|| format!("cannot read a private key from {}", key.display()))?;
    let config = builder.with_client_auth_cert(chain, key)?;
    Ok((Arc::new(config), true, valid))
}

/// The most a TLS file of the client's is read: 1 MiB (a CA bundle of a few hundred
/// certificates); more is refused, and the client asked instead.
pub(crate) const CA_FILE_MAX: u64 = 1 << 20;

/// The content of `path`, a regular file of at most [`CA_FILE_MAX`] bytes, opened without
/// blocking (a FIFO planted there is refused, not waited on).
fn read_small(path: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let meta = file.metadata()?;
    anyhow::ensure!(meta.is_file(), "{} is not a regular file", path.display());
    anyhow::ensure!(
        meta.len() <= CA_FILE_MAX,
        "{} is larger than {CA_FILE_MAX} bytes",
        path.display()
    );
    let mut text = Vec::new();
    file.take(CA_FILE_MAX + 1).read_to_end(&mut text)?;
    Ok(text)
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
            "tcp://::1:2376",
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

    /// `ca.pem` in `dir` of a CA made with `shape` applied to its parameters.
    fn ca_file(dir: &Path, shape: impl FnOnce(&mut rcgen::CertificateParams)) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        shape(&mut params);
        let ca = params.self_signed(&key).unwrap();
        std::fs::write(dir.join("ca.pem"), pem("CERTIFICATE", ca.der())).unwrap();
    }

    #[test]
    fn a_ca_the_client_would_refuse_is_never_a_root_of_ours() {
        let at = |dir: &Path| tls_endpoint(&daemon("tcp://127.0.0.2:2376", Some("1"), dir));
        // As the client checks an anchor and webpki does not: a path length constraint or an
        // extended key usage sends every request to the client.
        for (what, shape) in [
            (
                "path length",
                Box::new(|p: &mut rcgen::CertificateParams| {
                    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
                }) as Box<dyn FnOnce(&mut rcgen::CertificateParams)>,
            ),
            (
                "extended key usage",
                Box::new(|p: &mut rcgen::CertificateParams| {
                    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
                }),
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            ca_file(dir.path(), shape);
            assert!(at(dir.path()).is_none(), "{what}");
        }
        // Expired, or not valid yet: found, but never connected to.
        for (from, to) in [((2020, 1, 1), (2021, 1, 1)), ((2999, 1, 1), (3000, 1, 1))] {
            let dir = tempfile::tempdir().unwrap();
            ca_file(dir.path(), |p| {
                p.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
                p.not_after = rcgen::date_time_ymd(to.0, to.1, to.2);
            });
            let e = at(dir.path()).unwrap();
            assert!(!e.in_force(), "{from:?}..{to:?}");
        }
        // A CA as Docker's guide makes it (CA:TRUE, no limits), valid now: ours.
        let dir = tempfile::tempdir().unwrap();
        ca_file(dir.path(), |p| {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2999, 1, 1);
        });
        let e = at(dir.path()).unwrap();
        assert!(e.in_force());
        assert_eq!(e.valid.0, 1_577_836_800);
    }

    #[test]
    fn a_planted_fifo_or_a_huge_file_is_refused_without_waiting_or_reading_it_all() {
        let dir = tempfile::tempdir().unwrap();
        pem_files(dir.path(), true);
        let fifo = dir.path().join("key.pem");
        std::fs::remove_file(&fifo).unwrap();
        let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) of a path of our temporary directory.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        assert!(tls_endpoint(&daemon("tcp://h.example:2376", Some("1"), dir.path())).is_none());
        let dir = tempfile::tempdir().unwrap();
        let ca = std::fs::File::create(dir.path().join("ca.pem")).unwrap();
        ca.set_len(CA_FILE_MAX + 1).unwrap();
        assert!(tls_endpoint(&daemon("tcp://h.example:2376", Some("1"), dir.path())).is_none());
    }

    #[test]
    fn without_a_client_certificate_none_is_presented() {
        let dir = tempfile::tempdir().unwrap();
        pem_files(dir.path(), false);
        let e = tls_endpoint(&daemon("tcp://h.example:2376", Some("1"), dir.path())).unwrap();
        assert!(!e.client_cert);
    }
}
