//! The host's side of a sandbox's in-container agent ([`crate::agent`]): the binary it runs, the
//! per-sandbox run directory and token, the wait for the agent at `up`, and the connection
//! `exec` makes.
//!
//! Layout in the state directory (owner-only, like the state file):
//! - `run/<id>/`: bind-mounted into the container at [`crate::contract::RUN_DIR`]; the
//!   agent's socket and `ready` file appear there. Code in the sandbox can write this directory,
//!   so the host reads nothing from it but `ready` (bounded, without following a symlink) and
//!   connects to the socket only through [`crate::channel::socket::connect`].
//! - `tokens/<id>`: the sandbox's token (random, 64 hex digits), which the agent demands before
//!   it serves a connection. The agent gets a copy through `run/<id>/token`, written before the
//!   container starts and deleted by the agent before any other process exists in it.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use uuid::Uuid;

use super::Ctx;
use crate::channel::tls::HostKeys;
use crate::channel::{socket as client, ConnectError, Connection};
use crate::contract::tls::ChannelSecret;
use crate::contract::{READY_FILE, SOCKET_FILE, TOKEN_FILE};
use crate::engine::{
    AnyEngine, CommandLine, EngineExec, Environment, ExecReader, ExecSpec, ExecStdio, ExecWriter,
    RunAs, StdinFrom,
};
use crate::error::Error;
use crate::poll::{poll_until, Backoff};
use crate::state::{AgentRecord, ChannelRecord, Record};

/// How long `up` waits for the agent's `ready` file once the container runs; an agent that does
/// not answer by then leaves the sandbox to the engine's exec.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// What went wrong with a connection to a sandbox's agent mid-conversation, for the line
/// "the sandbox's agent failed: …": an end without TLS's close (rustls' message names a URL)
/// or a connection the kernel's keepalive probes found dead
/// ([`crate::contract::tls::keep_alive`]) in words a person can act on; anything else as it is.
pub(crate) fn connection_failure(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => {
            "its connection closed before it answered (the container stopped, or the network between closed it)".into()
        }
        std::io::ErrorKind::TimedOut => {
            "its connection went silent: no answer to the keepalive probes of 30 s (its node down, or its packets lost)".into()
        }
        _ => e.to_string(),
    }
}

/// The run directory of sandbox `id`.
pub(crate) fn run_dir(ctx: &Ctx, id: Uuid) -> PathBuf {
    ctx.store.dir().join("run").join(id.to_string())
}

/// Sandbox `id`'s mount root: the directory mounted read-only at [`crate::contract::ROOT`], holding
/// the empty mount points `h9sandbox`, `run` and `proxy` (an allowlist sandbox's socket
/// directory, [`crate::contract::PROXY_DIR`]) and `token.sha256`
/// ([`crate::agent::server::TOKEN_HASH_FILE`]) ([`crate::engine::AgentMount::root`]).
pub(crate) fn mount_root(ctx: &Ctx, id: Uuid) -> PathBuf {
    ctx.store.dir().join("mounts").join(id.to_string())
}

fn token_path(ctx: &Ctx, id: Uuid) -> PathBuf {
    ctx.store.dir().join("tokens").join(id.to_string())
}

/// This process's own executable, which is mounted into every container: it must be linked
/// statically (the repository's `.cargo/config.toml` builds it so), since it runs in any image.
/// Errors: a dynamically linked build, an executable that was deleted or replaced meanwhile.
pub(crate) fn binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find h9sandbox's own executable")?;
    let mut head = Vec::new();
    std::fs::File::open(&exe)
        .and_then(|f| f.take(64 << 10).read_to_end(&mut head))
        .with_context(|| format!("cannot read h9sandbox's own executable {}", exe.display()))?;
    match elf_interpreter(&head) {
        Some(false) => Ok(exe),
        Some(true) => Err(Error::Refused(format!(
            "{} is dynamically linked, so it cannot run inside the sandbox's container (any image, FROM scratch included); build h9sandbox from its repository, whose .cargo/config.toml links it statically (`cargo install --path .`)",
            exe.display()
        ))
        .into()),
        None => Err(Error::Refused(format!(
            "{} is not an ELF executable for this machine; reinstall h9sandbox",
            exe.display()
        ))
        .into()),
    }
}

/// Whether the 64-bit little-endian ELF image starting with `head` names a program interpreter
/// (`PT_INTERP`, i.e. it is dynamically linked); `None` when it is no such ELF file or its
/// program headers lie beyond `head`.
fn elf_interpreter(head: &[u8]) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(head.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(head.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(head.get(o..o + 8)?.try_into().ok()?));
    let phoff = usize::try_from(u64_at(32)?).ok()?;
    let phentsize = usize::from(u16_at(54)?);
    let phnum = usize::from(u16_at(56)?);
    let mut interp = false;
    for i in 0..phnum {
        interp |= u32_at(phoff.checked_add(i.checked_mul(phentsize)?)?)? == PT_INTERP;
    }
    Some(interp)
}

/// Makes sandbox `id`'s run directory (fresh, mode 0700) and token, and hands the token to the
/// agent through the run directory. Returns the run directory. Errors: the state directory.
pub(crate) fn prepare(ctx: &Ctx, id: Uuid) -> Result<PathBuf> {
    let dir = run_dir(ctx, id);
    for d in [dir.parent(), token_path(ctx, id).parent()]
        .into_iter()
        .flatten()
    {
        private_dir(d)?;
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    private_dir(&dir)?;
    make_mount_root(&mount_root(ctx, id))?;
    let token = format!("{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple());
    write_new(&token_path(ctx, id), &token)?;
    // Read-only in the container: the agent takes a token from the run directory only when it
    // hashes to this.
    let hash = mount_root(ctx, id).join("token.sha256");
    write_new(&hash, &crate::agent::server::token_hash(&token))?;
    std::fs::set_permissions(&hash, std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .with_context(|| format!("cannot make {} readable", hash.display()))?;
    write_new(&dir.join(TOKEN_FILE), &token)?;
    Ok(dir)
}

/// Hands sandbox `id`'s token to its agent again (before its container starts anew) in a fresh
/// run directory: the old one, which the sandbox could write (a directory planted at `token`,
/// a stale `ready`, files of its root), is moved aside whole (a rename in our own `run/`, which
/// nothing in it can prevent) and removed as far as we can; what we cannot remove is left for
/// `down` and `reap` ([`forget`], [`purge`]). Errors: the state directory.
pub(crate) fn hand_over(ctx: &Ctx, id: Uuid) -> Result<()> {
    let token = read_token(ctx, id)?;
    let dir = run_dir(ctx, id);
    if std::fs::symlink_metadata(&dir).is_ok() {
        let aside = dir.with_file_name(format!(
            "{id}{STALE}{}",
            &Uuid::new_v4().simple().to_string()[..8]
        ));
        std::fs::rename(&dir, &aside)
            .with_context(|| format!("cannot move {} aside", dir.display()))?;
        let _ = std::fs::remove_dir_all(&aside);
    }
    private_dir(&dir)?;
    write_new(&dir.join(TOKEN_FILE), &token)
}

/// What a run directory moved aside by [`hand_over`] is named after: `<id>` this, 8 hex digits.
pub(crate) const STALE: &str = ".stale-";

/// The sandbox ID a run directory's name (`<id>`, or `<id>.stale-…`) belongs to.
pub(crate) fn run_dir_owner(name: &str) -> Option<Uuid> {
    Uuid::parse_str(name.split_once(STALE).map_or(name, |(id, _)| id)).ok()
}

/// Makes `root` afresh (mode 0755: the sandbox's user must reach the binary through it; its
/// parent, in the state directory, is owner-only) with the empty mount points in it.
fn make_mount_root(root: &Path) -> Result<()> {
    if let Some(parent) = root.parent() {
        private_dir(parent)?;
    }
    if root.exists() {
        std::fs::remove_dir_all(root)
            .with_context(|| format!("cannot clear {}", root.display()))?;
    }
    let made = std::fs::DirBuilder::new()
        .mode(0o755)
        .create(root)
        .and_then(|_| {
            std::fs::DirBuilder::new()
                .mode(0o755)
                .create(root.join("run"))
        })
        // Under the read-only root the engine cannot make a mount point itself.
        .and_then(|_| {
            std::fs::DirBuilder::new()
                .mode(0o755)
                .create(root.join("proxy"))
        })
        .and_then(|_| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o755)
                .open(root.join("h9sandbox"))
                .map(|_| ())
        });
    made.with_context(|| format!("cannot make {}", root.display()))
}

fn private_dir(d: &Path) -> Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(d) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        r => r.with_context(|| format!("cannot create {}", d.display())),
    }
}

/// Creates `path` (never through a symlink, never over an existing file), mode 0600.
fn write_new(path: &Path, text: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Sandbox `id`'s token, as the host keeps it. Errors: the state directory.
pub(crate) fn read_token(ctx: &Ctx, id: Uuid) -> Result<String> {
    let path = token_path(ctx, id);
    let mut text = String::new();
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .and_then(|f| f.take(256).read_to_string(&mut text))
        .with_context(|| format!("cannot read the sandbox's token {}", path.display()))?;
    Ok(text.trim().to_string())
}

/// Removes sandbox `id`'s run directories (the current one and those moved aside) and token;
/// returns the run directories that could not be removed (files the sandbox's root made there,
/// which this user may not delete), for [`purge`].
pub(crate) fn forget(ctx: &Ctx, id: Uuid) -> Vec<PathBuf> {
    let mut left = Vec::new();
    let run = ctx.store.dir().join("run");
    let dirs = std::fs::read_dir(&run)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_str().and_then(run_dir_owner) == Some(id))
                .map(|e| e.path())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for d in dirs {
        if std::fs::remove_dir_all(&d).is_err() && std::fs::symlink_metadata(&d).is_ok() {
            left.push(d);
        }
    }
    let _ = std::fs::remove_dir_all(mount_root(ctx, id));
    let _ = std::fs::remove_file(token_path(ctx, id));
    let _ = std::fs::remove_file(keys_path(ctx, id));
    left
}

/// Removes `dirs` (run directories of this state directory that [`forget`] could not remove:
/// they hold what the sandbox's root made, owned by root or other users) with the engine's
/// help: a container of h9sandbox's runtime image (the static binary alone), as root with
/// `DAC_OVERRIDE` and `FOWNER` only, no network, each directory bind-mounted, empties them
/// (`agent purge`, which follows no symlink); then they are removed here. Errors: the engine's;
/// a local engine has no containers (nothing of a local sandbox is another user's).
pub(crate) async fn purge(
    ctx: &Ctx,
    engine: &crate::engine::AnyEngine,
    dirs: &[PathBuf],
) -> Result<()> {
    use crate::engine::{Environment, MountSource, SidecarMount, SidecarSpec};
    if dirs.is_empty() || !engine.capabilities().sidecars || !engine.capabilities().host_mounts {
        return Ok(());
    }
    let image = crate::engine::image::ImageBuild::runtime(&binary()?)?;
    engine.ensure_image(&image).await?;
    let mut mounts = Vec::new();
    let mut args = vec![crate::contract::ARG.to_string(), "purge".into()];
    for (i, d) in dirs.iter().enumerate() {
        let target = format!("/purge/{i}");
        mounts.push(SidecarMount {
            source: MountSource::Host(d.clone()),
            target: target.clone(),
            readonly: false,
        });
        args.push(target);
    }
    let helper = SidecarSpec {
        name: format!(
            "h9sandbox-purge-{}",
            &Uuid::new_v4().simple().to_string()[..12]
        ),
        labels: std::collections::BTreeMap::from([(
            crate::engine::LABEL_STATE_DIR.to_string(),
            ctx.state_label(),
        )]),
        network: "none".into(),
        user: crate::types::Ids::ROOT,
        caps: vec!["DAC_OVERRIDE".into(), "FOWNER".into()],
        memory: "64m".into(),
        pids_limit: 16,
        cpus: 0.5,
        mounts,
        entrypoint: crate::engine::image::RUNTIME_BINARY.into(),
        image: image.tag.clone(),
        args,
    };
    engine.run_helper(&helper).await?;
    for d in dirs {
        std::fs::remove_dir_all(d).with_context(|| format!("cannot remove {}", d.display()))?;
    }
    Ok(())
}

/// Waits (at most [`READY_TIMEOUT`]) for the agent of the just-started sandbox `id` to say it is
/// ready, then connects once: returns what to record (the socket's identity when the host could
/// connect; `None` inside when it could not, e.g. under gVisor, whose sockets do not cross bind
/// mounts). `None` when the agent never said it was ready.
pub(crate) async fn wait_ready(ctx: &Ctx, id: Uuid) -> Option<AgentRecord> {
    let dir = run_dir(ctx, id);
    let ready = poll_until(
        READY_TIMEOUT,
        Backoff::doubling(Duration::from_millis(1), Duration::from_millis(50)),
        || async { Ok::<_, std::convert::Infallible>(read_ready(&dir.join(READY_FILE))) },
    )
    .await;
    let Ok(Some(line)) = ready else {
        if ctx.verbose() {
            ctx.reporter.note(&format!(
                "the agent of {} did not say it was ready within {}s; commands go through the engine's exec",
                &id.simple().to_string()[..12],
                READY_TIMEOUT.as_secs()
            ));
        }
        return None;
    };
    let version = line
        .strip_prefix("h9sandbox-agent ")?
        .trim()
        .parse::<u32>()
        .ok();
    let token = read_token(ctx, id).ok()?;
    let socket = dir.join(SOCKET_FILE);
    match client::connect(&socket, &token, None).await {
        Ok(_) => Some(AgentRecord {
            socket: client::identity(&socket).ok().map(|(d, i)| [d, i]),
            version,
            channel: None,
        }),
        Err(e) => {
            if ctx.verbose() {
                ctx.reporter.note(&format!(
                    "{e}; commands of {} go through the engine's exec",
                    &id.simple().to_string()[..12]
                ));
            }
            Some(AgentRecord {
                socket: None,
                version,
                channel: None,
            })
        }
    }
}

/// The `ready` file's first line: at most 64 bytes, never through a symlink, never blocking on
/// a FIFO.
fn read_ready(path: &Path) -> Option<String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    f.take(64).read_to_string(&mut text).ok()?;
    text.lines().next().map(str::to_string)
}

/// Whether sandbox `rec`'s in-container side speaks this h9sandbox's agent protocol
/// ([`crate::contract::proto::VERSION`], recorded by `up`): its agent, its exec wrapper and its file
/// helper take what this h9sandbox sends. A sandbox made by an older h9sandbox runs its commands
/// through the engine's exec, with the flags its wrapper knows, and has no file helper.
pub(crate) fn speaks_current(rec: &Record) -> bool {
    rec.agent.as_ref().and_then(|a| a.version) == Some(crate::contract::proto::VERSION)
}

/// A connection to the agent of sandbox `rec`, when it has one the host can reach: `Ok(None)`
/// when commands go through the engine's exec (no agent, a socket the host cannot reach, or an
/// agent of another protocol version: a sandbox made by an older h9sandbox).
/// A socket found replaced, or an agent that refuses the token, is an error for the caller to
/// report before it falls back.
pub(crate) async fn connect(ctx: &Ctx, rec: &Record) -> Result<Option<Connection>, ConnectError> {
    // An agent of an older h9sandbox speaks another protocol: the engine's exec serves it.
    if !speaks_current(rec) {
        return Ok(None);
    }
    let Some(agent) = &rec.agent else {
        return Ok(None);
    };
    if let Some(channel) = &agent.channel {
        return connect_channel(ctx, rec, channel).await.map(Some);
    }
    let Some(socket) = agent.socket else {
        return Ok(None);
    };
    let token = read_token(ctx, rec.id).map_err(|e| ConnectError::Unreachable(format!("{e:#}")))?;
    let path = run_dir(ctx, rec.id).join(SOCKET_FILE);
    client::connect(&path, &token, Some((socket[0], socket[1])))
        .await
        .map(Some)
}

fn keys_path(ctx: &Ctx, id: Uuid) -> PathBuf {
    ctx.store.dir().join("keys").join(id.to_string())
}

/// Makes sandbox `id`'s token and channel keys (the host's kept owner-only in the state
/// directory, next to the token) and returns the secret its PID 1 receives. Errors: the state
/// directory, key generation.
pub(crate) fn prepare_channel(ctx: &Ctx, id: Uuid) -> Result<ChannelSecret> {
    for d in [token_path(ctx, id), keys_path(ctx, id)] {
        if let Some(parent) = d.parent() {
            private_dir(parent)?;
        }
        match std::fs::remove_file(&d) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot replace {}", d.display()))
            }
            _ => {}
        }
    }
    let token = format!("{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple());
    let (keys, secret) = crate::channel::tls::generate(None, &token)
        .context("cannot make the sandbox's channel keys")?;
    write_new(&token_path(ctx, id), &token)?;
    write_keys(ctx, id, &keys)?;
    Ok(secret)
}

/// A new key pair for the agent of sandbox `id` (its container starts again: the agent's key
/// lived only in the memory of its PID 1), with the host's keys and the token kept; returns the
/// secret for PID 1 and the new fingerprint. Errors: the state directory, key generation.
pub(crate) fn renew_channel(ctx: &Ctx, id: Uuid) -> Result<(ChannelSecret, String)> {
    let token = read_token(ctx, id)?;
    let old = read_keys(ctx, id)?;
    let (keys, secret) = crate::channel::tls::generate(Some(&old), &token)
        .context("cannot make the sandbox's channel keys")?;
    let path = keys_path(ctx, id);
    std::fs::remove_file(&path).with_context(|| format!("cannot replace {}", path.display()))?;
    write_keys(ctx, id, &keys)?;
    Ok((secret, crate::contract::tls::hex(&keys.agent_pin)))
}

fn write_keys(ctx: &Ctx, id: Uuid, keys: &HostKeys) -> Result<()> {
    let bytes = postcard::to_stdvec(keys).context("cannot encode the channel keys")?;
    let path = keys_path(ctx, id);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    f.write_all(&bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

fn read_keys(ctx: &Ctx, id: Uuid) -> Result<HostKeys> {
    let path = keys_path(ctx, id);
    let mut bytes = Vec::new();
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .and_then(|f| f.take(64 << 10).read_to_end(&mut bytes))
        .with_context(|| format!("cannot read the sandbox's channel keys {}", path.display()))?;
    postcard::from_bytes(&bytes)
        .with_context(|| format!("the sandbox's channel keys {} are damaged", path.display()))
}

/// The fingerprint (hex) of the agent certificate the host keys of sandbox `id` accept.
pub(crate) fn channel_fingerprint(ctx: &Ctx, id: Uuid) -> Result<String> {
    Ok(crate::contract::tls::hex(&read_keys(ctx, id)?.agent_pin))
}

/// A connection over sandbox `rec`'s remote channel: to its published port, or, when it has
/// none the host can reach, relayed through the engine's exec stream (slower: one engine exec
/// per connection; `-v` says so).
async fn connect_channel(
    ctx: &Ctx,
    rec: &Record,
    channel: &ChannelRecord,
) -> Result<Connection, ConnectError> {
    let engine = ctx
        .runner_for(rec)
        .map_err(|e| ConnectError::Unreachable(e.to_string()))?;
    channel_conn(ctx, &engine, rec.container_ref(), rec.id, channel).await
}

/// [`connect_channel`] of sandbox `id`, whose container `container` runs on `engine`.
async fn channel_conn(
    ctx: &Ctx,
    engine: &AnyEngine,
    container: &str,
    id: Uuid,
    channel: &ChannelRecord,
) -> Result<Connection, ConnectError> {
    let failed = |e: anyhow::Error| ConnectError::Unreachable(format!("{e:#}"));
    let token = read_token(ctx, id).map_err(failed)?;
    let keys = read_keys(ctx, id).map_err(failed)?;
    // The record pins the agent; the keys file is the host's own copy of the same pin.
    if crate::contract::tls::hex(&keys.agent_pin) != channel.fingerprint {
        return Err(ConnectError::Refused(
            "the channel's keys do not match the sandbox's record".into(),
        ));
    }
    if let Some(address) = &channel.address {
        match crate::channel::tls::connect(address, &keys, &token).await {
            // No exec of the engine's to relay through (a swarm): why the channel failed is
            // the answer.
            Err(e @ ConnectError::Unreachable(_)) if !engine.capabilities().engine_exec => {
                return Err(e)
            }
            Err(ConnectError::Unreachable(why)) => {
                if ctx.verbose() {
                    ctx.reporter.note(&format!(
                        "{why}; relaying the channel through the engine's exec stream"
                    ));
                }
            }
            r => return r,
        }
    }
    let stream = relay(ctx, engine, container, &channel.inside)
        .map_err(|e| ConnectError::Unreachable(e.to_string()))?;
    crate::channel::tls::over(Box::new(stream), &keys, &token).await
}

/// The engine's exec running `agent relay --to INSIDE` in sandbox `rec`'s container, as one
/// byte stream: the TLS bytes of the channel, end to end to the agent.
fn relay(
    ctx: &Ctx,
    engine: &AnyEngine,
    container: &str,
    inside: &str,
) -> Result<ExecStream, crate::error::Error> {
    let spec = ExecSpec {
        command: CommandLine::Argv(vec![
            crate::contract::BIN.into(),
            crate::contract::ARG.into(),
            "relay".into(),
            "--to".into(),
            inside.into(),
        ]),
        cwd: PathBuf::from("/"),
        env: vec![],
        interactive: true,
        marker: Uuid::new_v4().simple().to_string(),
        user: Some(RunAs::ROOT),
        wrapped: false,
        wrapper_enters: false,
        backstop: None,
    };
    if ctx.verbose() {
        ctx.reporter
            .note("the sandbox's channel goes through the engine's exec stream");
    }
    let mut exec = engine.exec(
        container,
        &spec,
        ExecStdio {
            stdin: StdinFrom::Piped,
            stdout_inherit: false,
        },
    )?;
    let (Some(r), Some(w)) = (exec.stdout.take(), exec.stdin.take()) else {
        return Err(crate::error::Error::Sandbox(
            "the engine's exec gave no streams for the relay".into(),
        ));
    };
    Ok(ExecStream { exec, r, w })
}

/// An engine exec's stdout and stdin as one duplex stream, keeping the exec alive.
struct ExecStream {
    #[allow(dead_code)]
    exec: EngineExec,
    r: ExecReader,
    w: ExecWriter,
}

impl tokio::io::AsyncRead for ExecStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.r).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for ExecStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.w).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.w).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.w).poll_shutdown(cx)
    }
}

/// Connects once to the just-started sandbox `id`'s channel (at `address` when its port is
/// published, else, or when that does not answer, through the engine's exec stream into
/// `container` on `engine`) and returns what to record: the address when it answered there,
/// none when only the relay did. Errors: neither answered, or something else than the
/// sandbox's agent did.
pub(crate) async fn check_channel(
    ctx: &Ctx,
    engine: &AnyEngine,
    container: &str,
    id: Uuid,
    address: Option<String>,
    inside: String,
) -> Result<AgentRecord> {
    let mut channel = ChannelRecord {
        address,
        fingerprint: channel_fingerprint(ctx, id)?,
        inside,
    };
    if let Some(address) = channel.address.clone() {
        let token = read_token(ctx, id)?;
        let keys = read_keys(ctx, id)?;
        match crate::channel::tls::connect(&address, &keys, &token).await {
            Ok(_) => {}
            Err(ConnectError::Unreachable(why)) => {
                if ctx.verbose() {
                    ctx.reporter.note(&format!(
                        "{why}; the channel of {} goes through the engine's exec stream (slower)",
                        &id.simple().to_string()[..12]
                    ));
                }
                channel.address = None;
            }
            Err(e) => return Err(anyhow::anyhow!("the sandbox's channel: {e}")),
        }
    }
    if channel.address.is_none() {
        channel_conn(ctx, engine, container, id, &channel)
            .await
            .map_err(|e| anyhow::anyhow!("the sandbox's channel cannot be reached: {e}"))?;
    }
    Ok(AgentRecord {
        socket: None,
        version: Some(crate::contract::proto::VERSION),
        channel: Some(channel),
    })
}

/// The build ID of the ELF image whose first bytes are `head` (its `NT_GNU_BUILD_ID` note, in
/// hex), which names the derived image the binary is shipped in; `None` without one.
pub(crate) fn build_id(head: &[u8]) -> Option<String> {
    const PT_NOTE: u32 = 4;
    const NT_GNU_BUILD_ID: u32 = 3;
    let u16_at = |o: usize| Some(u16::from_le_bytes(head.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(head.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(head.get(o..o + 8)?.try_into().ok()?));
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let phoff = usize::try_from(u64_at(32)?).ok()?;
    let phentsize = usize::from(u16_at(54)?);
    let phnum = usize::from(u16_at(56)?);
    for i in 0..phnum {
        let ph = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(ph)? != PT_NOTE {
            continue;
        }
        let (mut at, end) = {
            let off = usize::try_from(u64_at(ph + 8)?).ok()?;
            (
                off,
                off.checked_add(usize::try_from(u64_at(ph + 32)?).ok()?)?,
            )
        };
        while at + 12 <= end {
            let namesz = u32_at(at)? as usize;
            let descsz = u32_at(at + 4)? as usize;
            let kind = u32_at(at + 8)?;
            let name = at + 12;
            let desc = name + namesz.div_ceil(4) * 4;
            if kind == NT_GNU_BUILD_ID && head.get(name..name + namesz)? == b"GNU\0" {
                return Some(crate::contract::tls::hex(head.get(desc..desc + descsz)?));
            }
            at = desc + descsz.div_ceil(4) * 4;
        }
    }
    None
}

/// The build of this executable (its [`build_id`], else its size and modification time), which
/// names the derived image that ships it.
pub(crate) fn binary_build(exe: &Path) -> Result<String> {
    let mut head = Vec::new();
    std::fs::File::open(exe)
        .and_then(|f| f.take(64 << 10).read_to_end(&mut head))
        .with_context(|| format!("cannot read h9sandbox's own executable {}", exe.display()))?;
    if let Some(id) = build_id(&head) {
        return Ok(id);
    }
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(exe)?;
    Ok(format!("{:012x}{:012x}", m.size(), m.mtime()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_is_static() {
        // The crate's .cargo/config.toml links every binary of the target statically.
        let exe = std::env::current_exe().unwrap();
        let head = std::fs::read(&exe).unwrap();
        assert_eq!(elf_interpreter(&head), Some(false));
        assert_eq!(elf_interpreter(b"#!/bin/sh\n"), None);
        // Its build ID names the derived image it is shipped in (GNU ld and lld write one).
        let id = build_id(&head).expect("a build ID note");
        assert!(
            id.len() >= 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
        assert_eq!(build_id(b"#!/bin/sh\n"), None);
        // A dynamically linked system binary names its interpreter.
        if let Ok(sh) = std::fs::read("/bin/sh") {
            if elf_interpreter(&sh) == Some(true) {
                assert_eq!(elf_interpreter(&sh[..64]), None);
            }
        }
    }
}
