//! `network = "allowlist"`: the proxy sidecar of a sandbox, started by `up` before the sandbox's
//! container and removed with it (`down`, `reap`, a failed `up`).
//!
//! The sandbox's container runs with `--network none` (loopback only: no route out, not even
//! to the host). Its PID 1 relays `127.0.0.1:3128` to a unix socket in
//! `<state dir>/proxy/<id>/sock/`, mounted read-only into it; behind that socket, a second
//! container, the sidecar, runs `h9sandbox agent proxy` ([`crate::agent::proxy`]) on the
//! engine's default bridge and forwards HTTP and HTTPS (CONNECT) to the allowed hosts only. The
//! sidecar is hardened like a sandbox and more: read-only root file system, every capability
//! dropped, no-new-privileges, the invoking user's IDs, 64 MiB, 64 processes, half a core. It
//! runs nothing of the sandbox's: its image is h9sandbox's runtime image
//! ([`crate::engine::image::ImageBuild::runtime`]: the static binary alone, `FROM scratch`, no
//! NSS configuration or libraries to load), with no environment of its own, and the proxy
//! resolves names itself (hickory-resolver, from the `/etc/resolv.conf` and `/etc/hosts` the
//! engine gives the container), so a sandbox image or snapshot shipping `libnss_*.so` and an
//! `nsswitch.conf` never runs code next to the bridge. It writes every decision to
//! `<state dir>/proxy/<id>/log.jsonl` (`h9sandbox logs ID --network`).
//!
//! In copy mode (`workdir_mode = "copy"`: no directory of this machine is mounted, as on a
//! remote daemon) the socket's directory is a volume of the engine in memory (tmpfs, mode 0711,
//! `h9sandbox-proxy-<12 hex digits>-sock`) that the sidecar mounts read-write and the sandbox
//! read-only, and the log is in a second one only the sidecar mounts (`…-log`, mode 0700, sized
//! to hold [`LOG_MAX`]), read through the engine (`docker cp`); the sidecar runs as `nobody`
//! (65534:65534), which owns both. Both volumes carry the sandbox's labels, so `down` and
//! `reap` remove them with it. The two containers share the socket because they run on one
//! machine, the engine's.
//!
//! It carries `h9sandbox.proxy_of=<sandbox ID>` and `h9sandbox.state_dir` (not `h9sandbox=1`, so
//! it is never taken for a sandbox's container); `reap` removes the sidecars whose sandbox has no
//! record.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Result};
use uuid::Uuid;

use super::Ctx;
use crate::agent::proxy::{Entry, LOG_MAX};
use crate::engine::{
    AgentSetup, AnyEngine, ContainerSpec, Environment, MountSource, SidecarMount, SidecarSpec,
    TmpfsVolume, LABEL_ID, LABEL_MANAGED, LABEL_STATE_DIR,
};
use crate::error::Error;
use crate::poll::{poll_until, Backoff};
use crate::state::Record;
use crate::types::{Ids, Network, WorkdirMode};

/// The label naming the sandbox a proxy sidecar serves.
pub(crate) use crate::engine::LABEL_PROXY_OF;

/// Where the sidecar mounts its directory (socket and log).
const SIDECAR_DIR: &str = "/.h9sandbox/proxy";

/// `<state dir>/proxy/<id>`: the sidecar's directory (owner-only).
pub(crate) fn proxy_dir(ctx: &Ctx, id: Uuid) -> PathBuf {
    ctx.store.dir().join("proxy").join(id.to_string())
}

/// The directory of the proxy's socket, which the sandbox mounts read-only.
pub(crate) fn socket_dir(ctx: &Ctx, id: Uuid) -> PathBuf {
    proxy_dir(ctx, id).join("sock")
}

/// The decision log of sandbox `id`'s proxy.
pub(crate) fn log_path(ctx: &Ctx, id: Uuid) -> PathBuf {
    proxy_dir(ctx, id).join("log.jsonl")
}

/// The sidecar's container name: `h9sandbox-proxy-` and 12 hex digits of the sandbox's ID.
pub(crate) fn sidecar_name(id: Uuid) -> String {
    format!("h9sandbox-proxy-{}", &id.simple().to_string()[..12])
}

/// Who the sidecar of a copy-mode sandbox runs as, owner of its volumes: `nobody`.
const VOLUME_OWNER: Ids = Ids {
    uid: 65534,
    gid: 65534,
};

/// The volume of a copy-mode sandbox's proxy socket (see the module's documentation), which
/// the sidecar mounts at [`SIDECAR_DIR`]`/sock` and the sandbox at [`crate::contract::PROXY_DIR`].
pub(crate) fn socket_volume(ctx: &Ctx, id: Uuid) -> TmpfsVolume {
    TmpfsVolume {
        name: format!("{}-sock", sidecar_name(id)),
        owner: VOLUME_OWNER,
        mode: 0o711,
        size: 64 << 10,
        labels: volume_labels(ctx, id),
    }
}

/// The volume of a copy-mode sandbox's proxy log, the sidecar's alone.
fn log_volume(ctx: &Ctx, id: Uuid) -> TmpfsVolume {
    TmpfsVolume {
        name: format!("{}-log", sidecar_name(id)),
        owner: VOLUME_OWNER,
        mode: 0o700,
        size: LOG_MAX + (1 << 20),
        labels: volume_labels(ctx, id),
    }
}

/// The labels of a proxy's volumes: the sandbox's own (so that `reap` removes them when it has
/// no record, as it does its scratch volume) and the sidecar's.
fn volume_labels(ctx: &Ctx, id: Uuid) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_MANAGED.to_string(), "1".to_string()),
        (LABEL_ID.to_string(), id.to_string()),
        (LABEL_STATE_DIR.to_string(), ctx.state_label()),
        (LABEL_PROXY_OF.to_string(), id.to_string()),
    ])
}

/// Where sandbox `id`'s proxy keeps its socket and log: a directory of this machine, or
/// volumes of the engine (copy mode).
enum Place {
    Host(PathBuf),
    Volumes {
        socket: TmpfsVolume,
        log: TmpfsVolume,
    },
}

impl Place {
    /// The sidecar's mounts and the paths (in it) of its socket and log.
    fn sidecar_mounts(&self) -> (Vec<SidecarMount>, String, String) {
        match self {
            Place::Host(dir) => (
                vec![SidecarMount {
                    source: MountSource::Host(dir.clone()),
                    target: SIDECAR_DIR.into(),
                    readonly: false,
                }],
                format!("{SIDECAR_DIR}/sock/proxy.sock"),
                format!("{SIDECAR_DIR}/log.jsonl"),
            ),
            Place::Volumes { socket, log } => (
                vec![
                    SidecarMount {
                        source: MountSource::Volume(socket.clone()),
                        target: format!("{SIDECAR_DIR}/sock"),
                        readonly: false,
                    },
                    SidecarMount {
                        source: MountSource::Volume(log.clone()),
                        target: format!("{SIDECAR_DIR}/log"),
                        readonly: false,
                    },
                ],
                format!("{SIDECAR_DIR}/sock/proxy.sock"),
                SIDECAR_LOG.into(),
            ),
        }
    }
}

/// The log's path in a copy-mode sandbox's sidecar.
const SIDECAR_LOG: &str = "/.h9sandbox/proxy/log/log.jsonl";

/// The sidecar of sandbox `id`, whose container is `spec`: hardened, labelled, from h9sandbox's
/// runtime image `image` (never the sandbox's: nothing of it runs or is read there), running as
/// `user`, with `mounts` (the proxy's directory, read-write), listening on `socket` and logging
/// to `log` (paths in it), the allowed hosts of `spec.limits`.
pub(crate) fn sidecar_spec(
    spec: &ContainerSpec,
    image: &str,
    id: Uuid,
    state_dir: &str,
    (mounts, socket, log): (Vec<SidecarMount>, String, String),
    user: Ids,
) -> SidecarSpec {
    let mut args: Vec<String> = vec![
        crate::contract::ARG.into(),
        "proxy".into(),
        "--listen".into(),
        socket,
        "--log".into(),
        log,
    ];
    for h in &spec.limits.allow {
        args.extend(["--allow".into(), h.clone()]);
    }
    SidecarSpec {
        name: sidecar_name(id),
        labels: BTreeMap::from([
            (LABEL_PROXY_OF.to_string(), id.to_string()),
            (LABEL_STATE_DIR.to_string(), state_dir.to_string()),
        ]),
        network: "bridge".into(),
        user,
        caps: Vec::new(),
        memory: "64m".into(),
        pids_limit: 64,
        cpus: 0.5,
        mounts,
        entrypoint: crate::engine::image::RUNTIME_BINARY.into(),
        image: image.into(),
        args,
    }
}

/// Checks that `engine` can run an allowlist sandbox with `runtime`: an engine that runs
/// sidecars beside its sandboxes on one machine (Docker, the tested one), and not under gVisor,
/// whose unix sockets do not cross the mount the relay needs.
pub(crate) fn check_supported(engine: &AnyEngine, runtime: Option<&str>) -> Result<(), Error> {
    let caps = engine.capabilities();
    if !caps.sidecars {
        return Err(Error::Refused(format!(
            "network = \"allowlist\" needs engine = \"docker\" (this sandbox's engine is {}); use network = \"none\" or \"bridge\"",
            engine.kind()
        )));
    }
    if crate::engine::is_gvisor(runtime) {
        return Err(Error::Refused(
            "network = \"allowlist\" does not work under gVisor (runtime runsc): its unix sockets do not cross the mount that joins the sandbox to its proxy; use network = \"none\" there, or the default runtime".into(),
        ));
    }
    Ok(())
}

/// Starts the sidecar of sandbox `id` (whose container is `spec`) when its network is
/// `allowlist`, and waits (at most 10 s) for its socket. Errors: the engine's, or a sidecar that
/// never listened (its own message, from the engine's log, included); the caller removes what
/// was made ([`remove`]).
pub(crate) async fn start(
    ctx: &Ctx,
    engine: &AnyEngine,
    spec: &ContainerSpec,
    id: Uuid,
) -> Result<()> {
    if spec.limits.network != Network::Allowlist {
        return Ok(());
    }
    check_supported(engine, spec.runtime.as_deref())?;
    let dir = proxy_dir(ctx, id);
    for d in [
        dir.parent().map(PathBuf::from),
        Some(dir.clone()),
        Some(socket_dir(ctx, id)),
    ]
    .into_iter()
    .flatten()
    {
        match std::fs::DirBuilder::new().mode(0o700).create(&d) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(anyhow!("cannot create {}: {e}", d.display()))
            }
            _ => {}
        }
    }
    ctx.reporter.step("starting the egress proxy");
    // The proxy runs from an image of h9sandbox's own binary alone (FROM scratch): nothing of
    // the sandbox's image (its NSS modules, its environment) is read or run there.
    let (binary, place, user) = match &spec.agent {
        AgentSetup::Mounted(m) => (m.binary.clone(), Place::Host(dir), Ids::current()),
        AgentSetup::Shipped(_) => (
            crate::sandbox::agent::binary()?,
            Place::Volumes {
                socket: socket_volume(ctx, id),
                log: log_volume(ctx, id),
            },
            VOLUME_OWNER,
        ),
    };
    let image = crate::engine::image::ImageBuild::runtime(&binary)?;
    engine.ensure_image(&image).await?;
    let sidecar = sidecar_spec(
        spec,
        &image.tag,
        id,
        &ctx.state_label(),
        place.sidecar_mounts(),
        user,
    );
    let container = engine.run_sidecar(&sidecar).await?;
    let by_socket = match &place {
        Place::Host(_) => Some(socket_dir(ctx, id).join("proxy.sock")),
        Place::Volumes { .. } => None,
    };
    wait_listening(engine, &container, id, by_socket.as_deref(), 0).await
}

/// How many times the proxy of `container` said it listens, in what it printed since its
/// container was made (once per start).
async fn listening_count(engine: &AnyEngine, container: &str) -> usize {
    engine
        .logs_tail(container, 100_000)
        .await
        .map(|out| {
            out.lines()
                .filter(|l| *l == crate::agent::proxy::LISTENING)
                .count()
        })
        .unwrap_or(0)
}

/// Waits (at most 10 s) until sandbox `id`'s proxy in `container` listens: its socket appears at
/// `socket` (a directory of this machine), or else it says so once more than the `before` times
/// it had (a socket in a volume cannot be seen from here). Errors: it never did (its last
/// lines from the engine's log included).
async fn wait_listening(
    engine: &AnyEngine,
    container: &str,
    id: Uuid,
    socket: Option<&std::path::Path>,
    before: usize,
) -> Result<()> {
    let listening = poll_until(
        Duration::from_secs(10),
        Backoff::fixed(Duration::from_millis(20)),
        || async {
            anyhow::Ok(match socket {
                Some(sock) => std::fs::symlink_metadata(sock).ok().map(drop),
                None => (listening_count(engine, container).await > before).then_some(()),
            })
        },
    )
    .await?;
    if listening.is_none() {
        let why = engine.logs_tail(container, 3).await.unwrap_or_default();
        return Err(anyhow!(
            "the egress proxy ({}) did not listen within 10s{}",
            sidecar_name(id),
            if why.is_empty() {
                String::new()
            } else {
                format!(": {}", why.replace('\n', "; "))
            }
        ));
    }
    Ok(())
}

/// `start` of an allowlist sandbox `rec`: its proxy sidecar runs again (a daemon's restart, or
/// `docker stop`, stopped it with the sandbox or alone), or the start is refused when it is
/// gone. Nothing for other networks.
pub(crate) async fn ensure_running(ctx: &Ctx, engine: &AnyEngine, rec: &Record) -> Result<()> {
    if rec.limits.network != Network::Allowlist {
        return Ok(());
    }
    let sidecar = sidecar_name(rec.id);
    match engine.inspect(&sidecar).await? {
        Some(s) if s.running => Ok(()),
        Some(_) => {
            ctx.reporter.step("starting the egress proxy again");
            // Its socket is made afresh: wait for the proxy's word, not for the old file. A
            // proxy that never said it (made by an h9sandbox before the word) is not waited for.
            let before = listening_count(engine, &sidecar).await;
            engine
                .lifecycle(crate::engine::ContainerVerb::Start, &sidecar)
                .await?;
            if before == 0 {
                return Ok(());
            }
            wait_listening(engine, &sidecar, rec.id, None, before).await
        }
        None => Err(Error::Sandbox(format!(
            "the egress proxy of sandbox {} ({sidecar}) is gone (removed outside h9sandbox), so its network allowlist cannot work; `h9sandbox down {}` removes the sandbox",
            rec.short_id(),
            rec.short_id()
        ))
        .into()),
    }
}

/// Removes sandbox `id`'s sidecar and its directory, if it has them. Best effort on the
/// directory; the container's removal error is returned (`reap` retries).
pub(crate) async fn remove(ctx: &Ctx, engine: &AnyEngine, id: Uuid) -> Result<()> {
    let dir = proxy_dir(ctx, id);
    if !dir.exists() {
        return Ok(());
    }
    engine
        .remove_labelled(LABEL_PROXY_OF, &id.to_string())
        .await?;
    remove_volumes(ctx, engine, id).await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Removes the volumes of a copy-mode sandbox's proxy (none is success), once its sidecar and
/// its sandbox are gone.
async fn remove_volumes(ctx: &Ctx, engine: &AnyEngine, id: Uuid) -> Result<()> {
    for v in [socket_volume(ctx, id), log_volume(ctx, id)] {
        engine.remove_volume(&v.name).await?;
    }
    Ok(())
}

/// `reap`: removes the sidecars of this state directory whose sandbox has no record, and the
/// directories (and volumes) of proxies whose sandbox has neither a record nor a sidecar.
/// Returns how many sidecars. Both are listed before the state is read: a sandbox being made
/// has its record before its proxy, so it is never taken for an orphan.
pub(crate) async fn reap_orphans(ctx: &Ctx) -> Result<usize> {
    let sidecars = ctx
        .engine
        .list_sidecars(LABEL_PROXY_OF, &ctx.state_label())
        .await?;
    let dirs: Vec<(Uuid, PathBuf)> = std::fs::read_dir(ctx.store.dir().join("proxy"))
        .map(|d| {
            d.flatten()
                .filter_map(|d| {
                    let id = d.file_name().to_str()?.parse::<Uuid>().ok()?;
                    Some((id, d.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    let known: Vec<Uuid> = ctx.store.load()?.sandboxes.iter().map(|r| r.id).collect();
    let mut n = 0;
    for sidecar in sidecars {
        if sidecar
            .of
            .parse::<Uuid>()
            .is_ok_and(|id| known.contains(&id))
        {
            continue;
        }
        ctx.engine.remove(&sidecar.id).await?;
        if let Ok(id) = sidecar.of.parse::<Uuid>() {
            let _ = remove_volumes(ctx, &ctx.engine, id).await;
            let _ = std::fs::remove_dir_all(proxy_dir(ctx, id));
        }
        n += 1;
    }
    // What a `down` killed between the sidecar and the rest left: the directory (and in copy
    // mode the volumes) of a sandbox that has neither a record nor a sidecar any more.
    for (id, dir) in dirs {
        if !known.contains(&id) {
            let _ = remove_volumes(ctx, &ctx.engine, id).await;
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    Ok(n)
}

/// The decisions of sandbox `rec`'s proxy, oldest first (at most [`LOG_MAX`] bytes are read,
/// never through a symlink; lines that do not parse are skipped: the sidecar is trusted less
/// than the host). Errors: a sandbox whose network is not `allowlist`.
pub(crate) async fn read_log(ctx: &Ctx, rec: &Record) -> Result<Vec<Entry>> {
    if rec.limits.network != Network::Allowlist {
        return Err(Error::Refused(format!(
            "sandbox {} has network {}, not allowlist: it has no egress proxy and no network log",
            rec.short_id(),
            rec.limits.network
        ))
        .into());
    }
    let mut text = Vec::new();
    if rec.workdir_mode == WorkdirMode::Copy {
        // In the sidecar's own volume in memory (copy mode), read through the engine; it lives
        // as long as the sidecar runs.
        let engine = ctx.engine_for(rec);
        let sidecar = sidecar_name(rec.id);
        let gone = match engine.inspect(&sidecar).await? {
            None => Some("is gone (removed outside h9sandbox?)"),
            Some(s) if !s.running => {
                Some("does not run (stopped outside h9sandbox, or its daemon restarted)")
            }
            Some(_) => None,
        };
        if let Some(why) = gone {
            return Err(Error::Sandbox(format!(
                "the egress proxy of sandbox {} ({sidecar}) {why}: in copy mode its decision log lives in the proxy's memory, so it is lost; `h9sandbox down {}` removes the sandbox",
                rec.short_id(),
                rec.short_id()
            ))
            .into());
        }
        text = engine
            .container_file(&sidecar, SIDECAR_LOG, LOG_MAX + 64)
            .await?
            .unwrap_or_default();
        warn_if_full(ctx, rec, &text);
        return Ok(parse_log(&text));
    }
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(log_path(ctx, rec.id))
    {
        Ok(f) if f.metadata().is_ok_and(|m| m.is_file()) => {
            f.take(LOG_MAX + 64).read_to_end(&mut text)?;
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    warn_if_full(ctx, rec, &text);
    Ok(parse_log(&text))
}

/// Says so when sandbox `rec`'s log is full: what it shows is not every decision since.
fn warn_if_full(ctx: &Ctx, rec: &Record, text: &[u8]) {
    if log_full(text) {
        ctx.reporter.warn(&format!(
            "the egress proxy's log of sandbox {} is full ({} MiB): the decisions after the last one shown were not logged",
            rec.short_id(),
            LOG_MAX >> 20
        ));
    }
}

/// Whether the proxy wrote its last line: its log reached [`LOG_MAX`] and later decisions
/// were not logged.
fn log_full(text: &[u8]) -> bool {
    text.split(|b| *b == b'\n')
        .any(|l| l == b"{\"log_full\":true}")
}

/// The entries of a decision log's lines; a line that does not parse is skipped.
fn parse_log(text: &[u8]) -> Vec<Entry> {
    text.split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Entry>(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_full_log_is_told_by_the_proxys_own_last_line_only() {
        let entry = br#"{"ts":1,"method":"GET","host":"a.org","port":80,"decision":"denied","bytes_out":0,"bytes_in":0}"#;
        let mut text = entry.to_vec();
        text.push(b'\n');
        assert!(!super::log_full(&text));
        assert_eq!(super::parse_log(&text).len(), 1);
        // A host that merely holds the marker's text is an entry, not the marker.
        let forged = br#"{"ts":1,"method":"GET","host":"{\"log_full\":true}","port":80,"decision":"bad","bytes_out":0,"bytes_in":0}"#;
        assert!(!super::log_full(forged));
        text.extend_from_slice(b"{\"log_full\":true}\n");
        assert!(super::log_full(&text));
        assert_eq!(super::parse_log(&text).len(), 1);
    }
}
