//! The egress proxy of `network = "allowlist"` (`h9sandbox agent proxy`): the static binary run
//! in a hardened sidecar container that sits on the sandbox's internal network (no route out)
//! and on the engine's default bridge. It forwards, to allowed host names only:
//!
//! - HTTP requests in absolute form (`GET http://host/path HTTP/1.1`, what a client configured
//!   with `HTTP_PROXY` sends), rewritten to origin form on a fresh connection to the host;
//! - HTTPS through `CONNECT host:port` (RFC 9110 §9.3.6): a byte tunnel, no TLS interception, so
//!   the decision rests on the name the client asked for.
//!
//! Everything else is answered `403 Forbidden` (a host off the list) or `400 Bad Request` (a
//! request in origin form: the sandbox tried to use the proxy as a server). HTTP parsing is
//! hyper's (HTTP/1.1 only). Every decision is appended to the log file as one JSON line
//! ([`Entry`]); the log stops growing at [`LOG_MAX`] bytes.
//!
//! Names are resolved by hickory-resolver (DNS in Rust, configured from `/etc/resolv.conf` and
//! `/etc/hosts`, which the engine writes for the container), never by the C library's
//! `getaddrinfo`: that one reads `/etc/nsswitch.conf` and loads the `libnss_*.so` it names,
//! code from whatever image the proxy runs in.
//!
//! The allow list holds host names (`deb.debian.org`) and suffix patterns (`*.debian.org`: every
//! name below `debian.org`, not `debian.org` itself); an IP address is allowed only when listed
//! as such. Names are compared in lower case without a trailing dot; any port is allowed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;

// The port, the socket directory and the socket, as the contract fixes them.
pub(crate) use crate::contract::{PROXY_PORT as PORT, PROXY_RELAY_SOCKET as RELAY_SOCKET};
/// Bytes the decision log may grow to; later decisions are not written (the last line says so).
pub(crate) const LOG_MAX: u64 = 16 << 20;

/// Connections the proxy serves at once; more are closed as they are accepted.
const MAX_CONNECTIONS: usize = 256;

/// Most bytes of a request's head the proxy reads on one connection (hyper's `max_buf_size`;
/// its least is 8 KiB): a longer head is refused, not held.
const READ_BUFFER_MAX: usize = 16 << 10;

/// Longest host name logged or served (RFC 1035's 253 characters of a name).
const HOST_MAX: usize = 253;

/// Longest method logged or served (the registered ones have at most 17 characters).
const METHOD_MAX: usize = 32;

/// The line the proxy prints on its standard output once it listens (the host waits for it
/// where it cannot see the socket: a copy-mode sandbox's proxy, whose socket is in a volume).
pub(crate) const LISTENING: &str = "h9sandbox: proxy listening";

/// Options of `h9sandbox agent proxy`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ProxyArgs {
    /// Unix socket to listen on (made afresh)
    #[arg(long, value_name = "PATH")]
    pub listen: PathBuf,
    /// Allowed host: a name, or *.domain for every name below domain (repeatable)
    #[arg(long = "allow", value_name = "HOST")]
    pub allow: Vec<String>,
    /// File the decisions are appended to, one JSON object a line
    #[arg(long, value_name = "PATH")]
    pub log: PathBuf,
}

/// One decision of the proxy, a line of its log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct Entry {
    /// Seconds since the Unix epoch when the request came.
    pub ts: u64,
    /// `CONNECT`, or the HTTP method of a forwarded request.
    pub method: String,
    /// The host name (or address) asked for, in lower case.
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// `allowed`, `denied` (not on the list: 403), `failed` (allowed, but the host could not be
    /// reached: 502) or `bad` (not a proxy request: 400).
    pub decision: String,
    /// Bytes sent from the sandbox to the host (request bodies, or the tunnel's upstream).
    pub bytes_out: u64,
    /// Bytes from the host to the sandbox (response bodies, or the tunnel's downstream).
    pub bytes_in: u64,
}

type Body = BoxBody<Bytes, hyper::Error>;

/// Whether `host` is allowed by `patterns` (see the module documentation).
pub(crate) fn allowed(patterns: &[String], host: &str) -> bool {
    let host = normalize(host);
    if host.is_empty() {
        return false;
    }
    patterns.iter().any(|p| {
        let p = normalize(p);
        match p.strip_prefix("*.") {
            Some(suffix) => {
                !suffix.is_empty()
                    && host.len() > suffix.len() + 1
                    && host.ends_with(suffix)
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
            }
            None => p == host,
        }
    })
}

/// Whether every host the entry `pattern` allows is allowed by `patterns` too (a narrower list
/// may hold it): the same entry, a name `patterns` allows, or `*.d` where `patterns` allows `d`'s
/// whole subtree (`*.d` or `*.` a parent of `d`).
pub(crate) fn covers(patterns: &[String], pattern: &str) -> bool {
    let p = normalize(pattern);
    if patterns.iter().any(|q| normalize(q) == p) {
        return true;
    }
    match p.strip_prefix("*.") {
        Some(d) => {
            allowed(patterns, d) && patterns.iter().any(|q| q.starts_with("*.")) && {
                // `*.d` is covered by `*.e` when d is e or below e; `allowed(d)` alone would
                // also accept a plain entry `d` (which covers d only, not its subtree).
                patterns
                    .iter()
                    .filter_map(|q| normalize(q).strip_prefix("*.").map(String::from))
                    .any(|e| d == e || d.ends_with(&format!(".{e}")))
            }
        }
        None => allowed(patterns, &p),
    }
}

/// A host name as compared: lower case, no trailing dot, no IPv6 brackets.
fn normalize(h: &str) -> String {
    h.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// Checks an allow-list entry: a host name or address, or `*.` and a name. Returns the reason
/// when it is none of those.
pub(crate) fn check_pattern(p: &str) -> Result<(), String> {
    let name = p.strip_prefix("*.").unwrap_or(p);
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:".contains(&b))
        && !name.starts_with('.')
        && !name.contains("..");
    if ok && name.contains(':') && name.parse::<std::net::Ipv6Addr>().is_err() {
        Err(format!(
            "'{p}' names a port; an allow-list entry is a host (every port of it is allowed), e.g. deb.debian.org"
        ))
    } else if ok {
        Ok(())
    } else {
        Err(format!(
            "'{p}' is not a host name, an address, or *. and a domain (e.g. deb.debian.org, *.pypi.org)"
        ))
    }
}

/// The decision log: appended to by every connection, bounded by [`LOG_MAX`].
struct Log {
    file: Mutex<std::fs::File>,
    written: AtomicU64,
}

impl Log {
    fn record(&self, e: &Entry) {
        let Ok(mut line) = serde_json::to_vec(e) else {
            return;
        };
        line.push(b'\n');
        let n = line.len() as u64;
        let before = self.written.fetch_add(n, Ordering::Relaxed);
        if before + n > LOG_MAX {
            if before <= LOG_MAX {
                line = b"{\"log_full\":true}\n".to_vec();
            } else {
                return;
            }
        }
        use std::io::Write;
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let _ = f.write_all(&line);
    }
}

/// Writes its entry to the log when dropped (after a response body or a tunnel ended).
struct Pending {
    log: Arc<Log>,
    entry: Entry,
    out: Arc<AtomicU64>,
    inn: Arc<AtomicU64>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.entry.bytes_out = self.out.load(Ordering::Relaxed);
        self.entry.bytes_in = self.inn.load(Ordering::Relaxed);
        self.log.record(&self.entry);
    }
}

/// Runs the proxy until killed; returns 1 when it cannot start.
pub(crate) fn run(args: &ProxyArgs) -> i32 {
    for p in &args.allow {
        if let Err(e) = check_pattern(p) {
            eprintln!("h9sandbox: error: --allow {e}");
            return 2;
        }
    }
    let file = match std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&args.log)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("h9sandbox: error: cannot open {}: {e}", args.log.display());
            return 1;
        }
    };
    let written = file.metadata().map(|m| m.len()).unwrap_or(0);
    let log = Arc::new(Log {
        file: Mutex::new(file),
        written: AtomicU64::new(written),
    });
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("h9sandbox: error: cannot start the proxy: {e}");
            return 1;
        }
    };
    let allow = Arc::new(args.allow.clone());
    rt.block_on(async move {
        let resolver = match hickory_resolver::TokioResolver::builder_tokio() {
            Ok(b) => Arc::new(b.build()),
            Err(e) => {
                eprintln!("h9sandbox: error: cannot read the resolver's configuration (/etc/resolv.conf): {e}");
                return 1;
            }
        };
        let _ = std::fs::remove_file(&args.listen);
        let listener = match tokio::net::UnixListener::bind(&args.listen) {
            Ok(l) => l,
            Err(e) => {
                eprintln!(
                    "h9sandbox: error: cannot listen on {}: {e}",
                    args.listen.display()
                );
                return 1;
            }
        };
        // The sandbox's PID 1 (root, without CAP_DAC_OVERRIDE's help needed) connects to it.
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&args.listen, std::fs::Permissions::from_mode(0o666));
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{LISTENING}").and_then(|()| out.flush());
        }
        // The sandbox opens as many connections as it likes: at most MAX_CONNECTIONS are
        // served at once (the rest are closed as they come), each reading at most
        // READ_BUFFER_MAX bytes of a request head, so that the sidecar's memory (64 MiB) is
        // never what ends it, and its log with it.
        let open = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
                drop(stream);
                continue;
            };
            let (allow, log) = (Arc::clone(&allow), Arc::clone(&log));
            let resolver = Arc::clone(&resolver);
            tokio::spawn(async move {
                let _permit = permit;
                let service = service_fn(move |req| {
                    handle(
                        req,
                        Arc::clone(&allow),
                        Arc::clone(&log),
                        Arc::clone(&resolver),
                    )
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .max_buf_size(READ_BUFFER_MAX)
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
            });
        }
    })
}

/// At most `max` bytes of `s`, cut at a character's boundary.
fn cut(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn text(status: StatusCode, msg: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(msg)).map_err(|n| match n {}).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    r
}

/// Connects to `host` (an address, or a name resolved by `resolver`) at `port`, trying each
/// address in turn.
async fn dial(
    resolver: &hickory_resolver::TokioResolver,
    host: &str,
    port: u16,
) -> std::io::Result<tokio::net::TcpStream> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return tokio::net::TcpStream::connect((ip, port)).await;
    }
    let ips = resolver
        .lookup_ip(host)
        .await
        .map_err(std::io::Error::other)?;
    let mut last = std::io::Error::other(format!("{host} has no address"));
    for ip in ips.iter() {
        match tokio::net::TcpStream::connect((ip, port)).await {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn handle(
    req: Request<Incoming>,
    allow: Arc<Vec<String>>,
    log: Arc<Log>,
    resolver: Arc<hickory_resolver::TokioResolver>,
) -> Result<Response<Body>, hyper::Error> {
    let connect = req.method() == Method::CONNECT;
    let host = req.uri().host().map(normalize).unwrap_or_default();
    // A CONNECT names its port (RFC 9110 §9.3.6); a port that is not one is refused below.
    let port = req.uri().port_u16().unwrap_or(if connect { 0 } else { 80 });
    let method = req.method().as_str();
    // What the sandbox sent is bounded before it is logged: no log entry is longer than a
    // name and a method can be.
    let oversized = host.len() > HOST_MAX || method.len() > METHOD_MAX;
    let mut entry = Entry {
        ts: now(),
        method: cut(method, METHOD_MAX),
        host: cut(&host, HOST_MAX),
        port,
        decision: "allowed".into(),
        bytes_out: 0,
        bytes_in: 0,
    };
    let proxy_form = !oversized
        && if connect {
            req.uri().authority().is_some() && port != 0
        } else {
            req.uri().scheme_str() == Some("http") && !host.is_empty()
        };
    if !proxy_form {
        entry.decision = "bad".into();
        log.record(&entry);
        return Ok(text(
            StatusCode::BAD_REQUEST,
            "h9sandbox proxy: send requests in absolute form (http://host/...) or CONNECT host:port\n".into(),
        ));
    }
    if !allowed(&allow, &host) {
        entry.decision = "denied".into();
        log.record(&entry);
        return Ok(text(
            StatusCode::FORBIDDEN,
            format!("h9sandbox proxy: {host} is not in the sandbox's allow list\n"),
        ));
    }
    let upstream = match dial(&resolver, &host, port).await {
        Ok(s) => s,
        Err(e) => {
            entry.decision = "failed".into();
            log.record(&entry);
            return Ok(text(
                StatusCode::BAD_GATEWAY,
                format!("h9sandbox proxy: cannot reach {host}:{port}: {e}\n"),
            ));
        }
    };
    let pending = Pending {
        log,
        entry,
        out: Arc::new(AtomicU64::new(0)),
        inn: Arc::new(AtomicU64::new(0)),
    };
    if connect {
        tokio::spawn(tunnel(req, upstream, pending));
        return Ok(Response::new(
            http_body_util::Empty::new().map_err(|n| match n {}).boxed(),
        ));
    }
    forward(req, upstream, pending).await
}

/// Pipes the upgraded CONNECT connection to `upstream` both ways until either side closes.
async fn tunnel(req: Request<Incoming>, mut upstream: tokio::net::TcpStream, p: Pending) {
    let Ok(upgraded) = hyper::upgrade::on(req).await else {
        return;
    };
    let mut client = TokioIo::new(upgraded);
    if let Ok((out, inn)) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        p.out.store(out, Ordering::Relaxed);
        p.inn.store(inn, Ordering::Relaxed);
    }
}

/// Sends `req`, in origin form without hop-by-hop headers, over `upstream`, and returns the
/// response, whose body counts the bytes and writes the log entry when it ends.
async fn forward(
    mut req: Request<Incoming>,
    upstream: tokio::net::TcpStream,
    p: Pending,
) -> Result<Response<Body>, hyper::Error> {
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake::<_, Body>(TokioIo::new(upstream)).await {
            Ok(c) => c,
            Err(e) => {
                let mut p = p;
                p.entry.decision = "failed".into();
                return Ok(text(
                    StatusCode::BAD_GATEWAY,
                    format!("h9sandbox proxy: {}: {e}\n", p.entry.host),
                ));
            }
        };
    tokio::spawn(conn);
    // The host connected to is the request-target's: its Host header must say the same, or an
    // allowed host's shared front end (a CDN) would serve another site (RFC 9112 §3.2.2: a
    // proxy replaces Host with the absolute-form target's authority).
    if let Some(authority) = req.uri().authority().map(|a| a.as_str().to_string()) {
        let authority = authority.rsplit('@').next().unwrap_or_default().to_string();
        match hyper::header::HeaderValue::from_str(&authority) {
            Ok(v) => {
                req.headers_mut().insert(hyper::header::HOST, v);
            }
            Err(_) => {
                req.headers_mut().remove(hyper::header::HOST);
            }
        }
    }
    let path = req
        .uri()
        .path_and_query()
        .map_or("/".to_string(), |pq| pq.to_string());
    if let Ok(uri) = path.parse() {
        *req.uri_mut() = uri;
    }
    for h in [
        "proxy-connection",
        "proxy-authorization",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
    ] {
        req.headers_mut().remove(h);
    }
    let out = Arc::clone(&p.out);
    let req = req.map(|b| {
        b.map_frame(move |f| {
            if let Some(d) = f.data_ref() {
                out.fetch_add(d.len() as u64, Ordering::Relaxed);
            }
            f
        })
        .boxed()
    });
    let resp = match sender.send_request(req).await {
        Ok(r) => r,
        Err(e) => {
            let mut p = p;
            p.entry.decision = "failed".into();
            return Ok(text(
                StatusCode::BAD_GATEWAY,
                format!("h9sandbox proxy: {}: {e}\n", p.entry.host),
            ));
        }
    };
    let inn = Arc::clone(&p.inn);
    Ok(resp.map(move |b| {
        b.map_frame(move |f| {
            let _ = &p;
            if let Some(d) = f.data_ref() {
                inn.fetch_add(d.len() as u64, Ordering::Relaxed);
            }
            f
        })
        .boxed()
    }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn cut_keeps_whole_characters_within_the_bound() {
        assert_eq!(super::cut("deb.debian.org", 253), "deb.debian.org");
        assert_eq!(super::cut("abcdef", 3), "abc");
        assert_eq!(super::cut("aé", 2), "a");
        assert_eq!(super::cut(&"x".repeat(70_000), super::HOST_MAX).len(), 253);
    }

    use super::*;

    #[test]
    fn names_and_suffix_patterns() {
        let allow: Vec<String> = ["deb.debian.org", "*.pypi.org", "10.0.0.1"]
            .map(String::from)
            .to_vec();
        for ok in [
            "deb.debian.org",
            "DEB.Debian.ORG.",
            "files.pypi.org",
            "a.b.pypi.org",
            "10.0.0.1",
        ] {
            assert!(allowed(&allow, ok), "{ok}");
        }
        for no in [
            "debian.org",
            "security.debian.org",
            "pypi.org",
            "evilpypi.org",
            "pypi.org.evil.com",
            "deb.debian.org.evil.com",
            "10.0.0.2",
            "",
        ] {
            assert!(!allowed(&allow, no), "{no}");
        }
        assert!(!allowed(&["*.".into()], "x"));
        let user: Vec<String> = ["*.debian.org", "pypi.org"].map(String::from).to_vec();
        for ok in [
            "deb.debian.org",
            "*.debian.org",
            "*.security.debian.org",
            "pypi.org",
        ] {
            assert!(covers(&user, ok), "{ok}");
        }
        for no in [
            "debian.org",
            "*.org",
            "*.pypi.org",
            "files.pypi.org",
            "evil.com",
        ] {
            assert!(!covers(&user, no), "{no}");
        }
        assert!(check_pattern("*.debian.org").is_ok());
        assert!(check_pattern("deb.debian.org").is_ok());
        assert!(check_pattern("::1").is_ok());
        for bad in [
            "*",
            "*.",
            "a b",
            "a/b",
            ".x",
            "a..b",
            "*.*.x",
            "http://x",
            "deb.debian.org:80",
        ] {
            assert!(check_pattern(bad).is_err(), "{bad}");
        }
    }
}
