//! Port forwarding (`port-forward`, the MCP server's `sandbox_port_forward`): listeners on this
//! host's `127.0.0.1`, each connection carried through the sandbox's agent to a port on the
//! sandbox's own loopback ([`crate::contract::proto::Forward`]), so it works whatever the
//! sandbox's network (none and the allowlist included) and reaches nothing the sandbox did not
//! listen on itself. Each connection is a conversation of its own with the agent, so many run
//! at once and a slow one holds up no other; a port nothing listens on inside resets the client's
//! connection (RST), as the port itself would.
//!
//! Forwards register themselves in the state directory (`forwards/<pid>.json`: the process,
//! what it forwards of which sandbox), written atomically when they start and removed when they
//! end; a record whose process is gone (killed, say) is ignored and removed by the next look.
//! `ls` lists them ([`registered`]), `down` ends a sandbox's `port-forward` processes
//! ([`end_for`]); every forward also ends by itself once its sandbox is gone.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use futures_util::stream::FuturesUnordered;
use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use uuid::Uuid;

use super::Ctx;
use crate::contract::proto::{self, Forward, Reply, Request};
use crate::error::Error;
use crate::state::{Lifecycle, ProcessRef, Record};

/// One `[LOCAL:]PORT` of `port-forward` (kubectl's syntax).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSpec {
    /// The local port on 127.0.0.1; 0: a free one.
    pub local: u16,
    /// The port inside the sandbox (1–65535).
    pub remote: u16,
}

impl PortSpec {
    /// Parses `PORT` (the same local port), `LOCAL:PORT`, `:PORT` or `0:PORT` (a free local
    /// port). Errors: the reason, for a one-line message.
    pub fn parse(s: &str) -> Result<PortSpec, String> {
        let (local, remote) = match s.split_once(':') {
            Some((l, r)) => (Some(l), r),
            None => (None, s),
        };
        let port = |p: &str, what: &str| -> Result<u16, String> {
            p.parse::<u16>().map_err(|_| {
                format!("{s:?}: {what} {p:?} is not a port number (give PORT, LOCAL:PORT or :PORT)")
            })
        };
        let remote = port(remote, "the sandbox's port")?;
        if remote == 0 {
            return Err(format!("{s:?}: the sandbox's port must be 1 to 65535"));
        }
        let local = match local {
            None => remote,
            Some("") => 0,
            Some(l) => port(l, "the local port")?,
        };
        Ok(PortSpec { local, remote })
    }
}

/// A forward listening: where, and to which port inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct Bound {
    /// The local address it listens on, `127.0.0.1:PORT`.
    pub address: String,
    /// The port inside the sandbox.
    pub port: u16,
}

/// What `port-forward` prints once it listens.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Listening {
    /// The sandbox's ID.
    pub id: Uuid,
    /// Its forwards.
    pub forwards: Vec<Bound>,
}

/// Forwards of one sandbox, bound and ready to serve ([`Forwarder::serve`]).
pub(crate) struct Forwarder {
    /// The sandbox's record.
    pub record: Record,
    listeners: Vec<(TcpListener, Bound)>,
}

/// Who asked for a forward, for the fix a refusal names: the command line's `LOCAL:PORT`, or
/// MCP's `local_port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asker {
    /// `h9sandbox port-forward ID [LOCAL:]PORT…`.
    Cli,
    /// `sandbox_port_forward {"port", "local_port"}`.
    Mcp,
}

/// Binds a listener on 127.0.0.1 for each of `ports` of the Running sandbox `query`, after
/// checking that its agent can forward (a connection to it). Errors: a local port given twice,
/// an unknown or stopped sandbox, one whose agent cannot forward ([`super::relay::connect`]), a
/// local port in use (the fix phrased for `asker`).
pub(crate) async fn bind(
    ctx: &Ctx,
    query: &str,
    ports: &[PortSpec],
    asker: Asker,
) -> Result<Forwarder> {
    for (i, p) in ports.iter().enumerate() {
        if p.local != 0 && ports[..i].iter().any(|q| q.local == p.local) {
            return Err(Error::Usage(format!(
                "local port {} is given twice; give each forward a local port of its own, or :PORT for a free one",
                p.local
            ))
            .into());
        }
    }
    let state = ctx.store.load()?;
    let record = state.resolve(query)?.clone();
    // Said now rather than at the first connection: an old or local sandbox cannot forward.
    drop(super::relay::connect(ctx, &record, "port forwarding").await?);
    let mut listeners = Vec::new();
    for p in ports {
        let addr = SocketAddr::from(([127, 0, 0, 1], p.local));
        let l = TcpListener::bind(addr).await.map_err(|e| {
            let hint = match (e.kind() == std::io::ErrorKind::AddrInUse, asker) {
                (true, Asker::Cli) => format!(
                    "another process listens there; give another local port ({}:{}) or a free one (:{})",
                    p.local.wrapping_add(1).max(1024),
                    p.remote,
                    p.remote
                ),
                (true, Asker::Mcp) => format!(
                    "another process listens there; give another local_port ({}), or none for a free one",
                    p.local.wrapping_add(1).max(1024)
                ),
                (false, _) if p.local < 1024 => {
                    "ports below 1024 need privileges; give a higher local port".to_string()
                }
                (false, _) => "give another local port".to_string(),
            };
            Error::Usage(format!("cannot listen on {addr}: {e}; {hint}"))
        })?;
        let bound = Bound {
            address: l.local_addr()?.to_string(),
            port: p.remote,
        };
        listeners.push((l, bound));
    }
    Ok(Forwarder { record, listeners })
}

impl Forwarder {
    /// Where it listens.
    pub(crate) fn bound(&self) -> Vec<Bound> {
        self.listeners.iter().map(|(_, b)| b.clone()).collect()
    }

    /// Serves every connection until `stop` resolves or the sandbox is gone (no longer Running
    /// or Paused); returns why it ended. Connections under way end with it.
    pub(crate) async fn serve(
        self,
        ctx: &Ctx,
        stop: impl std::future::Future<Output = String>,
    ) -> String {
        let rec = &self.record;
        let mut accepts: FuturesUnordered<_> = self
            .listeners
            .iter()
            .map(|(l, b)| accept(l, b.port))
            .collect();
        let mut carried = FuturesUnordered::new();
        let mut look = tokio::time::interval(Duration::from_secs(1));
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let engine = ctx.engine_for(rec);
        let mut ticks = 0u32;
        tokio::pin!(stop);
        loop {
            tokio::select! {
                why = &mut stop => return why,
                Some((l, port, got)) = accepts.next() => {
                    match got {
                        // Each costs this process and the sandbox's agent memory: anyone on
                        // this machine can connect, so there is a bound.
                        Ok(client) if carried.len() >= MAX_CONNECTIONS => reset(client),
                        Ok(client) => carried.push(carry(ctx, rec, client, port)),
                        Err(_) => {}
                    }
                    accepts.push(accept(l, port));
                }
                Some(()) = carried.next() => {}
                _ = look.tick() => {
                    if let Some(why) = gone(ctx, rec) {
                        return why;
                    }
                    // The record is not told when the container dies or is removed behind
                    // h9sandbox's back (`docker kill`, `docker rm -f`): the engine is asked
                    // every few seconds.
                    ticks += 1;
                    if ticks.is_multiple_of(CONTAINER_LOOK_TICKS) {
                        if let Some(why) = container_gone(&engine, rec).await {
                            return why;
                        }
                    }
                }
            }
        }
    }
}

type Accepted<'a> = (&'a TcpListener, u16, std::io::Result<TcpStream>);

async fn accept(l: &TcpListener, port: u16) -> Accepted<'_> {
    let got = l.accept().await.map(|(s, _)| s);
    if got.is_err() {
        // Out of descriptors, say: a pause, not a busy loop of failed accepts.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (l, port, got)
}

/// Why the forwards of `rec` must end, if they must: its record is gone, or it no longer runs.
fn gone(ctx: &Ctx, rec: &Record) -> Option<String> {
    let state = match ctx.store.load() {
        Ok(s) => s,
        Err(_) => return None,
    };
    match state.sandboxes.iter().find(|r| r.id == rec.id) {
        None => Some(format!("sandbox {} was removed", rec.short_id())),
        Some(r) if matches!(r.state, Lifecycle::Running | Lifecycle::Paused) => None,
        Some(r) => Some(format!("sandbox {} is {} now", rec.short_id(), r.state)),
    }
}

/// How many connections one forwarding process carries at once; more are reset at once (the
/// sandbox's agent has a bound of its own, [`crate::agent::forward::MAX_FORWARDS`]).
pub(crate) const MAX_CONNECTIONS: usize = 256;

/// Every how many seconds [`Forwarder::serve`] asks the engine whether the container still runs.
const CONTAINER_LOOK_TICKS: u32 = 3;

/// Why the forwards of `rec` must end because of its container, if they must: gone, or no
/// longer running (nor paused). An engine that does not answer ends nothing.
async fn container_gone(engine: &crate::engine::AnyEngine, rec: &Record) -> Option<String> {
    use crate::engine::Environment;
    match engine.inspect(rec.container_ref()).await {
        Ok(None) => Some(format!(
            "sandbox {}'s container was removed behind h9sandbox's back (`h9sandbox down {}` removes its record)",
            rec.short_id(),
            rec.short_id()
        )),
        Ok(Some(st)) if !st.running && st.status != "paused" => Some(format!(
            "sandbox {}'s container is {} (`h9sandbox ls` shows why)",
            rec.short_id(),
            st.status
        )),
        _ => None,
    }
}

/// Resets `client`'s connection (RST, not FIN: `SO_LINGER` of zero), as a port nothing
/// listens on does.
fn reset(client: TcpStream) {
    // With a zero linger time close(2) does not wait: it sends the reset and returns.
    let _ = rustix::net::sockopt::set_socket_linger(&client, Some(Duration::ZERO));
    drop(client);
}

/// Carries one client connection to `port` in sandbox `rec`, through a connection of its own
/// to the agent.
async fn carry(ctx: &Ctx, rec: &Record, mut client: TcpStream, port: u16) {
    let _ = client.set_nodelay(true);
    let conn = match super::relay::connect(ctx, rec, "port forwarding").await {
        Ok(c) => c,
        Err(e) => {
            ctx.reporter
                .warn(&format!("a connection to port {port} failed: {e:#}"));
            return reset(client);
        }
    };
    let (mut tx, mut rx) = conn.split();
    if tx.send(Request::Forward(Forward { port })).await.is_err() {
        return reset(client);
    }
    match rx.next().await {
        Some(Ok(Reply::Connected)) => {}
        Some(Ok(Reply::Reset(why))) => {
            if ctx.verbose() {
                ctx.reporter.note(&crate::report::printable(&why));
            }
            return reset(client);
        }
        _ => return reset(client),
    }
    let clean = {
        let (mut from_client, mut to_client) = client.split();
        // Client to sandbox; its end is a half-close the server sees.
        let up = async {
            let mut buf = vec![0u8; proto::CHUNK];
            loop {
                match from_client.read(&mut buf).await {
                    // The sandbox may still answer: the other direction goes on.
                    Ok(0) => return tx.send(Request::CloseStdin).await.is_ok(),
                    Ok(n) => {
                        if tx.send(Request::Stdin(buf[..n].to_vec())).await.is_err() {
                            return false;
                        }
                    }
                    // The client reset or broke its connection.
                    Err(_) => return false,
                }
            }
        };
        // Sandbox to client: `true` once the server closed cleanly.
        let down = async {
            loop {
                match rx.next().await {
                    Some(Ok(Reply::Stdout(b))) => {
                        if to_client.write_all(&b).await.is_err() {
                            return false;
                        }
                    }
                    Some(Ok(Reply::End)) => {
                        let _ = to_client.shutdown().await;
                        return true;
                    }
                    _ => return false,
                }
            }
        };
        tokio::pin!(up, down);
        tokio::select! {
            ok = &mut up => if ok { (&mut down).await } else { false },
            clean = &mut down => if clean {
                // The client may still send (a half-closed connection) until it closes.
                (&mut up).await
            } else {
                false
            },
        }
    };
    if !clean {
        reset(client);
    }
}

/// Sends SIGTERM to the very process `p` names, through a pidfd (`pidfd_open(2)`, Linux 5.3)
/// taken before its start time is compared, so that a PID reused meanwhile is never signalled;
/// never to one whose start time is unknown (0). Returns whether it was sent.
fn terminate(p: ProcessRef) -> bool {
    if p.start_time == 0 {
        return false;
    }
    let Some(pid) = i32::try_from(p.pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    let Ok(fd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) else {
        return false;
    };
    if crate::state::proc_start_time(p.pid) != Some(p.start_time) {
        return false;
    }
    rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::TERM).is_ok()
}

/// What the state directory records of one process's forwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Registration {
    /// The process holding the listeners.
    pub process: ProcessRef,
    /// `port-forward` (a process of its own, which `down` ends) or `mcp` (an MCP server, whose
    /// forwards end with their sandbox).
    pub kind: String,
    /// The forwards, each with its sandbox.
    pub forwards: Vec<RegisteredForward>,
}

/// One forward of a [`Registration`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RegisteredForward {
    /// The sandbox.
    pub sandbox: Uuid,
    /// Where it listens, and to which port.
    #[serde(flatten)]
    pub bound: Bound,
}

fn registry_dir(ctx: &Ctx) -> PathBuf {
    ctx.store.dir().join("forwards")
}

fn registration_path(ctx: &Ctx, pid: u32) -> PathBuf {
    registry_dir(ctx).join(format!("{pid}.json"))
}

/// This process's registration while it lives: written at once (replacing one of a dead
/// process of the same PID), rewritten on [`Registry::set`], removed when dropped.
pub(crate) struct Registry {
    path: PathBuf,
    reg: Registration,
}

impl Registry {
    /// Registers this process (`kind`: `port-forward` or `mcp`) with `forwards`. Errors: the
    /// state directory cannot be written.
    pub(crate) fn new(ctx: &Ctx, kind: &str, forwards: Vec<RegisteredForward>) -> Result<Registry> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = registry_dir(ctx);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(e).with_context(|| format!("cannot create {}", dir.display()))
            }
            _ => {}
        }
        // One an older h9sandbox made with the umask's mode, or anything else there: only a
        // directory of our own, closed to others, holds registrations.
        if open_registry_dir(&dir).is_none() {
            return Err(Error::Refused(format!(
                "{} is not a directory of yours closed to others (a symlink, another owner, or group/other access); remove it, and port-forward makes it again",
                dir.display()
            ))
            .into());
        }
        let me = ProcessRef::current();
        let r = Registry {
            path: registration_path(ctx, me.pid),
            reg: Registration {
                process: me,
                kind: kind.to_string(),
                forwards,
            },
        };
        r.write()?;
        Ok(r)
    }

    /// Replaces the registered forwards.
    pub(crate) fn set(&mut self, forwards: Vec<RegisteredForward>) -> Result<()> {
        self.reg.forwards = forwards;
        self.write()
    }

    fn write(&self) -> Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .with_context(|| format!("cannot write in {}", dir.display()))?;
        serde_json::to_writer(&mut tmp, &self.reg)?;
        tmp.persist(&self.path)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(())
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The registry directory `dir`, opened without following a symlink, when it is a directory
/// owned by this user that nobody else may enter or write (mode 0700 or tighter; one of ours
/// that is looser, made by an older h9sandbox under the umask, is closed first): what it holds
/// decides which processes `down` signals.
fn open_registry_dir(dir: &Path) -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if st.st_uid != rustix::process::geteuid().as_raw() {
        return None;
    }
    if st.st_mode & 0o077 != 0 && rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700)).is_err() {
        return None;
    }
    Some(fd)
}

/// The registration in the file `name` of the registry directory `dir`: a regular file of ours
/// (opened without following a symlink, and without waiting on a FIFO), at most 1 MiB, whose
/// every address is a socket address. `None` for anything else.
fn read_registration(dir: &std::os::fd::OwnedFd, name: &std::ffi::OsStr) -> Option<Registration> {
    use rustix::fs::{FileType, Mode, OFlags};
    use std::io::Read;
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
        || st.st_uid != rustix::process::geteuid().as_raw()
    {
        return None;
    }
    let mut text = String::new();
    std::fs::File::from(fd)
        .take(1 << 20)
        .read_to_string(&mut text)
        .ok()?;
    let reg: Registration = serde_json::from_str(&text).ok()?;
    reg.forwards
        .iter()
        .all(|f| f.bound.address.parse::<SocketAddr>().is_ok())
        .then_some(reg)
}

/// The registrations of live processes in `ctx`'s state directory; those of processes that are
/// gone are removed. Nothing is read from a registry directory that is not ours alone.
pub(crate) fn registrations(ctx: &Ctx) -> Vec<Registration> {
    let path = registry_dir(ctx);
    let Some(fd) = open_registry_dir(&path) else {
        return Vec::new();
    };
    let Ok(dir) = std::fs::read_dir(&path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let reg = read_registration(&fd, &e.file_name());
        match reg {
            // Ours always carry a start time: one without it names no process for sure.
            Some(r) if r.process.start_time != 0 && r.process.is_alive() => out.push(r),
            // Its process is gone (or it is no registration): nobody answers for it.
            Some(r) if r.process.pid != std::process::id() => {
                let _ = std::fs::remove_file(&path);
            }
            _ => {}
        }
    }
    out
}

/// The live forwards of each sandbox: (the process's PID, its kind, the forward).
pub(crate) fn registered(ctx: &Ctx) -> HashMap<Uuid, Vec<(u32, String, Bound)>> {
    let mut out: HashMap<Uuid, Vec<(u32, String, Bound)>> = HashMap::new();
    for r in registrations(ctx) {
        for f in r.forwards {
            out.entry(f.sandbox)
                .or_default()
                .push((r.process.pid, r.kind.clone(), f.bound));
        }
    }
    out
}

/// Ends the `port-forward` processes forwarding ports of sandbox `id` (SIGTERM to each, checked
/// to be the very process that registered: PID and start time); an MCP server's forwards end by
/// themselves once the sandbox is gone. Returns how many were told to end.
pub(crate) fn end_for(ctx: &Ctx, id: Uuid) -> usize {
    let mut n = 0;
    for r in registrations(ctx) {
        if r.kind != "port-forward"
            || r.process.pid == std::process::id()
            || !r.forwards.iter().any(|f| f.sandbox == id)
        {
            continue;
        }
        if terminate(r.process) {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_specs_take_kubectls_forms() {
        let p = |s| PortSpec::parse(s);
        assert_eq!(
            p("8000"),
            Ok(PortSpec {
                local: 8000,
                remote: 8000
            })
        );
        assert_eq!(
            p("8080:80"),
            Ok(PortSpec {
                local: 8080,
                remote: 80
            })
        );
        assert_eq!(
            p(":5432"),
            Ok(PortSpec {
                local: 0,
                remote: 5432
            })
        );
        assert_eq!(
            p("0:5432"),
            Ok(PortSpec {
                local: 0,
                remote: 5432
            })
        );
        for bad in ["", "0", "x", "80:", "1:2:3", "70000", "-1", "8080:0"] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
        assert!(p("http").unwrap_err().contains("not a port number"));
    }
}
