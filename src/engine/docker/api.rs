//! The Docker Engine API over a daemon's unix socket, or over TLS to `tcp://`: what the hot
//! paths (`up`, `down`, `ls`, `reap`, `inspect`) ask of a Docker daemon, without a `docker`
//! process each (30–60 ms apiece before it talks to the daemon).
//!
//! Used only where it is the same daemon the client would reach, checked as strictly: the
//! default client (`docker`, no `engine_bin` of one's own), and `DOCKER_HOST` unset or
//! `unix://` with no context other than `default` ([`local_socket`]), or `tcp://` with
//! `DOCKER_TLS_VERIFY` and the client's certificate files ([`super::api_tls`]). Anything else
//! (plain tcp://, ssh://, a named context, Podman) keeps the client, and so does every call
//! that finds no daemon at the endpoint or fails its TLS handshake: the client then fails as
//! before, with its own message.
//!
//! Pure parts here ([`create_body`], [`parse_inspect_body`], [`parse_list_body`],
//! [`parse_volumes_body`], [`Answer::message`]), compared by the unit tests; the connection in
//! [`Api::call`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use serde_json::{json, Value};

use super::args::volume_labels;
use super::gvisor_host_pids;
use crate::contract as agent;
use crate::engine::{
    is_gvisor, AgentSetup, ContainerSpec, ContainerSummary, MountSource, TmpfsVolume,
    ENGINE_OUTPUT_MAX, SCRATCH_DIR,
};
use crate::types::Daemon;

/// The newest API version the requests and answers here are written against: a daemon that
/// speaks a newer one is asked in this one (Docker 25 and later accept it), an older daemon in
/// its own (1.41, Docker 20.10, has every field used here).
pub(crate) const MAX_API_VERSION: (u32, u32) = (1, 44);

/// The socket of the default context when `DOCKER_HOST` is unset.
pub(crate) const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// The unix socket of the daemon a `docker` client with these settings reaches, when that is a
/// socket on this machine: `DOCKER_HOST` unset (then [`DEFAULT_SOCKET`]) or `unix://PATH`, and
/// `DOCKER_CONTEXT` unset or `default`; when both are unset, the client's current context
/// (`current_context`, from its `config.json`) must be unset or `default` too. `None`: the
/// client's business (tcp://, ssh://, a named context, settings that fail the checks).
/// A CPU limit in cores (validated: finite, at least 0.01) as the engine's `NanoCpus`, billionths
/// of a core, rounded.
pub(crate) fn nano_cpus(cpus: f64) -> i64 {
    // cast: a validated limit is a few cores; a float-to-integer cast saturates anyway (NaN: 0).
    #[allow(clippy::cast_possible_truncation)]
    let nano = (cpus * 1e9).round() as i64;
    nano
}

pub(crate) fn local_socket(daemon: &Daemon, current_context: Option<&str>) -> Option<PathBuf> {
    if daemon.validate().is_err() {
        return None;
    }
    let named = |c: Option<&str>| c.is_some_and(|c| !c.is_empty() && c != "default");
    if named(daemon.context.as_deref()) {
        return None;
    }
    match daemon.host.as_deref() {
        Some(h) => h
            .strip_prefix("unix://")
            .filter(|p| p.starts_with('/'))
            .map(PathBuf::from),
        None if daemon.context.is_none() && named(current_context) => None,
        None => Some(PathBuf::from(DEFAULT_SOCKET)),
    }
}

/// The `currentContext` of the client's `config.json` (`$DOCKER_CONFIG/config.json`, else
/// `~/.docker/config.json`), if it names one.
pub(crate) fn client_current_context() -> Option<String> {
    let dir = match std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".docker"),
    };
    let text = std::fs::read(dir.join("config.json")).ok()?;
    let v: Value = serde_json::from_slice(&text).ok()?;
    v.get("currentContext")?.as_str().map(str::to_string)
}

/// One answer of the daemon.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body (at most [`ENGINE_OUTPUT_MAX`] bytes).
    pub body: Bytes,
}

impl Answer {
    /// 2xx, or 304 (nothing to do: already started, already stopped).
    pub(crate) fn ok(&self) -> bool {
        (200..300).contains(&self.status) || self.status == 304
    }

    /// 404: no such container, image or volume.
    pub(crate) fn not_found(&self) -> bool {
        self.status == 404
    }

    /// 409: a conflict (a name in use, a removal in progress, a volume in use).
    pub(crate) fn conflict(&self) -> bool {
        self.status == 409
    }

    /// 400 refusing the API version itself (a daemon whose oldest version is newer than
    /// [`MAX_API_VERSION`]: "client version 1.44 is too old"): the client, which negotiates
    /// its own, is asked instead.
    pub(crate) fn version_refused(&self) -> bool {
        self.status == 400 && self.message().contains("is too old")
    }

    /// The daemon's message (`{"message": "..."}`), else the body as text; on one line (its
    /// line breaks become spaces: it ends up in a one-line error), at most
    /// [`MESSAGE_LIMIT`] bytes of it.
    pub(crate) fn message(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let message = serde_json::from_slice::<Value>(&self.body)
            .ok()
            .and_then(|v| v.get("message")?.as_str().map(str::to_string))
            .unwrap_or_else(|| text.trim().to_string());
        clipped(
            &message
                .split(['\n', '\r'])
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" "),
        )
    }

    /// The daemon's message as the client prints it: `Error response from daemon: MESSAGE`.
    pub(crate) fn as_client_error(&self) -> String {
        format!("Error response from daemon: {}", self.message())
    }

    /// The body as JSON. Errors: it is not JSON (`what` names the request).
    pub(crate) fn json(&self, what: &str) -> Result<Value> {
        serde_json::from_slice(&self.body).with_context(|| {
            format!(
                "cannot parse the Docker daemon's answer to {what}: {}",
                clipped(&String::from_utf8_lossy(&self.body))
            )
        })
    }
}

/// Where a daemon's Engine API is reached.
#[derive(Debug, Clone)]
pub(crate) enum Endpoint {
    /// A unix socket on this machine ([`local_socket`]).
    Unix(PathBuf),
    /// `tcp://` with TLS verified as the client verifies it ([`super::api_tls`]).
    Tls(super::api_tls::TlsEndpoint),
}

impl Endpoint {
    /// The endpoint of the daemon `daemon` names, where its API is asked directly: a unix
    /// socket on this machine ([`local_socket`], `current_context` as there), or `tcp://`
    /// with `DOCKER_TLS_VERIFY` ([`super::api_tls::tls_endpoint`]). `None`: the client's.
    pub(crate) fn of(daemon: &Daemon, current_context: Option<&str>) -> Option<Endpoint> {
        if let Some(socket) = local_socket(daemon, current_context) {
            return Some(Endpoint::Unix(socket));
        }
        super::api_tls::tls_endpoint(daemon).map(Endpoint::Tls)
    }

    /// The endpoint as `DOCKER_HOST` writes it (`unix:///var/run/docker.sock`,
    /// `tcp://127.0.0.2:2376`), for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Endpoint::Unix(p) => format!("unix://{}", p.display()),
            Endpoint::Tls(t) => format!("tcp://{}", t.address),
        }
    }
}

/// A daemon's endpoint and the API version agreed with it (asked once: `GET /_ping`).
#[derive(Debug, Clone)]
pub(crate) struct Api {
    endpoint: Arc<Endpoint>,
    version: Arc<tokio::sync::OnceCell<Option<String>>>,
}

/// How long one request may take, beyond what it waits for by design (`stop`'s grace).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

impl Api {
    /// The daemon at `endpoint`.
    pub(crate) fn new(endpoint: Endpoint) -> Api {
        Api {
            endpoint: Arc::new(endpoint),
            version: Arc::new(tokio::sync::OnceCell::new()),
        }
    }

    /// Where the daemon is reached.
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The version prefix of every request (`/v1.44`), from the daemon's `Api-Version` at most
    /// [`MAX_API_VERSION`]. `None`: nothing answers at the endpoint (the client then runs).
    pub(crate) async fn version(&self) -> Option<String> {
        self.version
            .get_or_init(|| async {
                let a = send(
                    &self.endpoint,
                    "GET",
                    "/_ping",
                    None,
                    Duration::from_secs(30),
                )
                .await
                .ok()?;
                Some(agreed_version(a.1.as_deref()))
            })
            .await
            .clone()
    }

    /// Sends `method path` (the path without version prefix, with its query) with the JSON
    /// `body`, waiting at most `timeout`. `Ok(None)`: nothing answers at the socket (the caller
    /// runs the client instead, which fails as it always did), or the daemon refused the API
    /// version ([`Answer::version_refused`]). Errors: the daemon accepted the
    /// connection but did not answer in time, or answered with something unreadable.
    pub(crate) async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Option<Answer>> {
        let Some(version) = self.version().await else {
            return Ok(None);
        };
        let full = format!("/{version}{path}");
        let body = body.map(|b| b.to_string());
        match send(&self.endpoint, method, &full, body, timeout).await {
            Ok((answer, _)) if answer.version_refused() => Ok(None),
            Ok((answer, _)) => Ok(Some(answer)),
            Err(Failure::Connect) => Ok(None),
            Err(Failure::Other(e)) => Err(e.context(format!(
                "the Docker daemon at {} failed {method} {full}",
                self.endpoint.describe()
            ))),
        }
    }

    /// `method path` with `body` as a `curl` command line a person can paste (`-v`).
    pub(crate) async fn curl_line(&self, method: &str, path: &str, body: Option<&Value>) -> String {
        let version = self.version().await.unwrap_or_else(|| "v1.41".into());
        curl_line(&self.endpoint, method, &format!("/{version}{path}"), body)
    }
}

/// `method path` (version prefix included) at `endpoint` as a `curl` command line: `curl
/// --unix-socket SOCKET … http://localhost/PATH`, or for TLS `curl --cacert DIR/ca.pem
/// [--cert DIR/cert.pem --key DIR/key.pem] … https://HOST:PORT/PATH`.
pub(crate) fn curl_line(
    endpoint: &Endpoint,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> String {
    use crate::engine::shell::shell_quote;
    let file = |dir: &Path, name: &str| shell_quote(&dir.join(name).to_string_lossy());
    let mut line = match endpoint {
        Endpoint::Unix(socket) => format!(
            "curl --unix-socket {} -X {method} {}",
            shell_quote(&socket.to_string_lossy()),
            shell_quote(&format!("http://localhost{path}"))
        ),
        Endpoint::Tls(t) => {
            let mut line = format!("curl --cacert {}", file(&t.dir, "ca.pem"));
            if t.client_cert {
                line.push_str(&format!(
                    " --cert {} --key {}",
                    file(&t.dir, "cert.pem"),
                    file(&t.dir, "key.pem")
                ));
            }
            line.push_str(&format!(
                " -X {method} {}",
                shell_quote(&format!("https://{}{path}", t.address))
            ));
            line
        }
    };
    if let Some(b) = body {
        line.push_str(" -H 'Content-Type: application/json' -d ");
        line.push_str(&shell_quote(&b.to_string()));
    }
    line
}

/// The version prefix agreed from the daemon's `Api-Version` header (`1.47`): the lower of it
/// and [`MAX_API_VERSION`]; without a readable header, `v1.41`.
pub(crate) fn agreed_version(daemon: Option<&str>) -> String {
    let (a, b) = match daemon.and_then(parse_version) {
        Some(v) => v.min(MAX_API_VERSION),
        None => (1, 41),
    };
    format!("v{a}.{b}")
}

/// How much of a daemon's answer an error quotes (bytes): a body can be megabytes.
pub(crate) const MESSAGE_LIMIT: usize = 1024;

/// `text`, cut at a character boundary within [`MESSAGE_LIMIT`] bytes, with how long it was.
fn clipped(text: &str) -> String {
    if text.len() <= MESSAGE_LIMIT {
        return text.to_string();
    }
    let mut end = MESSAGE_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

/// An API version `MAJOR.MINOR` (`1.41`) as numbers; `None` for anything else.
pub(crate) fn parse_version(v: &str) -> Option<(u32, u32)> {
    let (a, b) = v.trim().split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Why a request got no answer.
enum Failure {
    /// No connection to the endpoint (no daemon there, no permission; for TLS, a handshake
    /// that failed: the client, with its own checks, is asked instead).
    Connect,
    /// Anything after the connection.
    Other(anyhow::Error),
}

/// How long a connection to the endpoint (with its TLS handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One request on a connection of its own. Returns the answer and its `Api-Version` header.
async fn send(
    endpoint: &Endpoint,
    method: &str,
    path: &str,
    body: Option<String>,
    timeout: Duration,
) -> Result<(Answer, Option<String>), Failure> {
    match endpoint {
        Endpoint::Unix(socket) => {
            let stream =
                tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::UnixStream::connect(socket))
                    .await
                    .map_err(|_| Failure::Connect)?
                    .map_err(|_| Failure::Connect)?;
            exchange(stream, "localhost", method, path, body, timeout).await
        }
        Endpoint::Tls(t) => {
            if !t.in_force() {
                // A CA out of its validity: the client, which refuses it, is asked instead.
                return Err(Failure::Connect);
            }
            let connect = async {
                let tcp = tokio::net::TcpStream::connect(&t.address).await?;
                let _ = tcp.set_nodelay(true);
                tokio_rustls::TlsConnector::from(t.config.clone())
                    .connect(t.server_name.clone(), tcp)
                    .await
            };
            let stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
                .await
                .map_err(|_| Failure::Connect)?
                .map_err(|_| Failure::Connect)?;
            exchange(stream, &t.address, method, path, body, timeout).await
        }
    }
}

/// One request (`Host: host`) on the connection `stream`, its answer read within `timeout`.
async fn exchange<S>(
    stream: S,
    host: &str,
    method: &str,
    path: &str,
    body: Option<String>,
    timeout: Duration,
) -> Result<(Answer, Option<String>), Failure>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::{BodyExt, Full, Limited};
    let exchange = async {
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("Host", host)
            .header(
                "User-Agent",
                concat!("h9sandbox/", env!("CARGO_PKG_VERSION")),
            );
        if body.is_some() {
            req = req.header("Content-Type", "application/json");
        }
        let req = req.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        let resp = sender.send_request(req).await?;
        let status = resp.status().as_u16();
        let version = resp
            .headers()
            .get("api-version")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = Limited::new(resp.into_body(), ENGINE_OUTPUT_MAX)
            .collect()
            .await
            .map_err(|e| anyhow!("reading the answer: {e}"))?
            .to_bytes();
        driver.abort();
        Ok::<_, anyhow::Error>((Answer { status, body }, version))
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r.map_err(Failure::Other),
        Err(_) => Err(Failure::Other(anyhow!(
            "no answer within {}s",
            timeout.as_secs()
        ))),
    }
}

/// `s` as one path segment or query value (RFC 3986 unreserved characters kept).
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// An image reference as the path of `/images/{name}/json`: each `/`-separated part encoded
/// (the daemon decodes the path before it reads the name).
pub(crate) fn encode_image(s: &str) -> String {
    s.split('/').map(encode).collect::<Vec<_>>().join("/")
}

/// The `filters` query value of labels (`{"label": ["k=v", "k"]}`; an empty value: the label
/// with any value).
pub(crate) fn label_filters(labels: &[(&str, &str)]) -> String {
    let list: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            if v.is_empty() {
                k.to_string()
            } else {
                format!("{k}={v}")
            }
        })
        .collect();
    encode(&json!({ "label": list }).to_string())
}

/// A `Mounts` entry of the tmpfs volume `v` at `target`, made by this mount when it does not
/// exist yet (the API's `VolumeOptions.DriverConfig`, as [`super::args::mount_arg`]).
fn volume_mount(v: &TmpfsVolume, target: &str, readonly: bool) -> Value {
    let options: BTreeMap<&str, String> = v.driver_options().into_iter().collect();
    json!({
        "Type": "volume",
        "Source": v.name,
        "Target": target,
        "ReadOnly": readonly,
        "VolumeOptions": {
            "Labels": v.labels,
            "DriverConfig": { "Name": "local", "Options": options },
        },
    })
}

/// The body of `POST /containers/create` for `spec` (a mounted agent's container; a shipped
/// one's `run` stays the client's, whose attached standard input hands over the secret): the
/// same container as [`super::run_args`]'s `docker run -d`. `ulimits` are
/// [`super::ulimit_args`]'s (`--ulimit NAME=SOFT:HARD` pairs).
pub(crate) fn create_body(spec: &ContainerSpec, ulimits: &[String]) -> Result<Value> {
    let l = &spec.limits;
    let workdir = spec.workdir.to_string_lossy().into_owned();
    let size =
        |s: &str| crate::config::parse_size(s).map_err(|e| anyhow!("{e} (memory of the sandbox)"));
    let memory = size(&l.memory)?;
    let mut env: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    env.push(format!("TMPDIR={SCRATCH_DIR}"));
    let volume_labels: BTreeMap<String, String> = volume_labels(spec).into_iter().collect();
    let mut mounts = vec![json!({
        "Type": "volume",
        "Source": spec.scratch_volume,
        "Target": SCRATCH_DIR,
        "VolumeOptions": { "Labels": volume_labels },
    })];
    let bind = |source: &Path, target: &str, readonly: bool| {
        json!({
            "Type": "bind",
            "Source": source.to_string_lossy(),
            "Target": target,
            "ReadOnly": readonly,
        })
    };
    let AgentSetup::Mounted(m) = &spec.agent else {
        return Err(anyhow!(
            "a shipped agent's container is made by the client (its secret goes on stdin)"
        ));
    };
    mounts.extend([
        bind(&spec.workdir, &workdir, false),
        bind(&m.root, agent::ROOT, true),
        bind(&m.binary, agent::BIN, true),
        bind(&m.run_dir, agent::RUN_DIR, false),
    ]);
    if let Some(dir) = &spec.proxy {
        mounts.push(match dir {
            MountSource::Host(p) => bind(p, agent::PROXY_DIR, true),
            MountSource::Volume(v) => volume_mount(v, agent::PROXY_DIR, true),
        });
        env.extend(
            super::proxy_env()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}")),
        );
    }
    let mut exposed = serde_json::Map::new();
    let mut bindings: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for p in &spec.publish {
        let key = format!("{}/tcp", p.port);
        exposed.insert(key.clone(), json!({}));
        let host_port = if p.host_port == 0 {
            String::new()
        } else {
            p.host_port.to_string()
        };
        bindings
            .entry(key)
            .or_default()
            .push(json!({ "HostIp": p.ip.to_string(), "HostPort": host_port }));
    }
    let ulimits: Vec<Value> = ulimits
        .iter()
        .filter(|a| *a != "--ulimit")
        .filter_map(|a| {
            let (name, rest) = a.split_once('=')?;
            let (soft, hard) = rest.split_once(':').unwrap_or((rest, rest));
            Some(json!({
                "Name": name,
                "Soft": soft.parse::<i64>().ok()?,
                "Hard": hard.parse::<i64>().ok()?,
            }))
        })
        .collect();
    let mut cmd = vec![
        agent::ARG.to_string(),
        "init".into(),
        "--user".into(),
        spec.user.to_string(),
    ];
    if let Some(n) = &spec.user_name {
        cmd.extend(["--user-name".into(), n.clone()]);
    }
    if spec.proxy.is_some() {
        cmd.push("--proxy-relay".into());
    }
    let pids = if is_gvisor(spec.runtime.as_deref()) {
        gvisor_host_pids(l.pids_limit)
    } else {
        u64::from(l.pids_limit)
    };
    // As the client sends them: `CAP_` names, sorted.
    let mut caps: Vec<String> = l.caps.added().iter().map(|c| format!("CAP_{c}")).collect();
    caps.sort();
    let mut host = json!({
        "CapDrop": ["ALL"],
        "RestartPolicy": { "Name": "no" },
        "CapAdd": caps,
        "SecurityOpt": ["no-new-privileges:true"],
        "PidsLimit": pids,
        "NanoCpus": nano_cpus(l.cpus),
        "Memory": memory,
        "ShmSize": memory,
        "Tmpfs": { "/tmp": format!("size={},nosuid,noexec,nodev", l.tmp_size) },
        "NetworkMode": l.network.engine_mode(),
        "Mounts": mounts,
        "PortBindings": bindings,
    });
    if !ulimits.is_empty() {
        host["Ulimits"] = Value::Array(ulimits);
    }
    if let Some(r) = &spec.runtime {
        host["Runtime"] = json!(r);
    }
    Ok(json!({
        "Image": spec.image,
        "User": "0:0",
        "Labels": spec.labels,
        "Env": env,
        "WorkingDir": workdir,
        "Entrypoint": [agent::BIN],
        "Cmd": cmd,
        "Healthcheck": { "Test": ["NONE"] },
        "ExposedPorts": exposed,
        "AttachStdin": false,
        "AttachStdout": false,
        "AttachStderr": false,
        "OpenStdin": false,
        "Tty": false,
        "HostConfig": host,
    }))
}

/// `GET /containers/{id}/json`'s body as [`super::inspect_args`]'s output (`State`,
/// `HostConfig`, `NetworkSettings.Ports`), for [`super::parse_inspect`].
pub(crate) fn parse_inspect_body(body: &[u8]) -> Result<crate::engine::ContainerStatus> {
    let v: Value = serde_json::from_slice(body).with_context(|| {
        format!(
            "cannot parse the engine's container state: {}",
            String::from_utf8_lossy(body)
        )
    })?;
    let picked = json!({
        "State": v.get("State").cloned().unwrap_or(Value::Null),
        "HostConfig": v.get("HostConfig").cloned().unwrap_or(Value::Null),
        "Ports": v.pointer("/NetworkSettings/Ports").cloned().unwrap_or(Value::Null),
    });
    super::parse_inspect(&picked.to_string())
}

/// `GET /containers/json`'s body as container summaries (as [`super::parse_ps`] makes them
/// of `ps`: the first name without its `/`, the sandbox ID and state directory labels).
pub(crate) fn parse_list_body(body: &[u8]) -> Result<Vec<ContainerSummary>> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Entry {
        id: String,
        #[serde(default)]
        names: Option<Vec<String>>,
        #[serde(default)]
        state: String,
        #[serde(default)]
        status: String,
        #[serde(default)]
        labels: Option<BTreeMap<String, String>>,
    }
    let entries: Vec<Entry> = serde_json::from_slice(body).with_context(|| {
        format!(
            "cannot parse the Docker daemon's container list: {}",
            String::from_utf8_lossy(body)
        )
    })?;
    Ok(entries
        .into_iter()
        .filter(|e| !e.id.is_empty())
        .map(|e| {
            let mut labels = e.labels.unwrap_or_default();
            let mut label = |k: &str| labels.remove(k).filter(|s| !s.is_empty());
            ContainerSummary {
                sandbox_id: label(crate::engine::LABEL_ID),
                state_dir: label(crate::engine::LABEL_STATE_DIR),
                id: e.id,
                name: e
                    .names
                    .unwrap_or_default()
                    .first()
                    .map(|n| n.trim_start_matches('/').to_string())
                    .unwrap_or_default(),
                state: e.state,
                status: e.status,
                node: None,
            }
        })
        .collect())
}

/// `GET /volumes`'s body: each volume's name and labels.
pub(crate) fn parse_volumes_body(body: &[u8]) -> Result<Vec<(String, BTreeMap<String, String>)>> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct List {
        #[serde(default)]
        volumes: Option<Vec<Volume>>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Volume {
        name: String,
        #[serde(default)]
        labels: Option<BTreeMap<String, String>>,
    }
    let list: List = serde_json::from_slice(body).with_context(|| {
        format!(
            "cannot parse the Docker daemon's volume list: {}",
            String::from_utf8_lossy(body)
        )
    })?;
    Ok(list
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|v| (v.name, v.labels.unwrap_or_default()))
        .collect())
}
