//! The file commands for paths outside the work dir (`read /etc/os-release`, `write /tmp/x`,
//! `edit ~/.bashrc` as an absolute path): served inside the container, never from a host path.
//! The host runs h9sandbox's own in-container helper ([`crate::agent::file_helper`]) as a command of
//! the sandbox, through its agent (or the engine's exec where the agent cannot be reached), as
//! the sandbox's user or `--user`, so that the container's permissions decide, with the bytes
//! streamed both ways (stdin frames in, stdout frames out), the same size caps as on the host
//! side, and the same errors (not found, not a regular file, permission denied: exit status 1).
//!
//! What the helper prints is the sandbox's output (a process of the same user could trace it):
//! its messages are cut to one short printable line, its sizes parsed strictly, and what a
//! capped read collects is bounded here too.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, Result};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::exec::ensure_running;
use super::Ctx;
use crate::contract::proto::{Reply, Request, RunAs, Start};
use crate::contract::{EXIT_DENIED, EXIT_EXISTS, EXIT_NOT_FOUND, EXIT_NOT_REGULAR, EXIT_TOO_LARGE};
use crate::engine::{CommandLine, Environment, ExecSpec, ExecStdio, StdinFrom};
use crate::error::Error;
use crate::state::Record;
use crate::types::{Ids, Isolation};
use crate::workdir_fs::WriteOptions;

/// The most bytes of the helper's stderr kept (its message, or `size N`).
const STDERR_KEEP: usize = 4096;

/// Where a file command's path is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    /// The host side of the work dir's bind mount ([`crate::workdir_fs::WorkDir`]): a relative path,
    /// or an absolute one inside the work dir.
    WorkDir,
    /// Inside the container, at this absolute path.
    Container(PathBuf),
}

/// Where `path` of sandbox `rec` is served: relative (the work dir's side refuses `..` above
/// it), or absolute inside the work dir (`.` and `..` taken lexically), on the host side, unless
/// `by_user` (a `--user`, which only the container can resolve) sends it into the container at
/// the same path (the container sees the work dir there); any other absolute path inside the
/// container. A local sandbox has no
/// container: its paths stay on the work dir's side (which refuses the ones outside).
pub(crate) fn place(rec: &Record, path: &Path, by_user: bool) -> Place {
    if rec.isolation == Isolation::None {
        return Place::WorkDir;
    }
    // A copied work dir is the container's, like every other path of it.
    let by_user = by_user || rec.workdir_mode == crate::types::WorkdirMode::Copy;
    if !path.is_absolute() {
        // Relative paths start in the work dir, whose side refuses `..` above it.
        return match by_user {
            false => Place::WorkDir,
            true => Place::Container(lexical(&rec.workdir.join(path))),
        };
    }
    let abs = lexical(path);
    if abs.starts_with(&rec.workdir) && !by_user {
        Place::WorkDir
    } else {
        Place::Container(abs)
    }
}

fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Who the helper runs as: `user` (`--user`, checked) or the sandbox's user.
pub(crate) fn acting(rec: &Record, user: Option<&str>) -> Result<RunAs> {
    match user {
        Some(u) => RunAs::parse(u)
            .map_err(|why| Error::Usage(format!("invalid --user {u:?}: {why}")).into()),
        None => {
            let u = rec.user.unwrap_or(Ids::ROOT);
            Ok(RunAs::from((u.uid, u.gid)))
        }
    }
}

/// How the helper ended: its exit status and the start of its stderr.
pub(super) struct Ended {
    pub(super) code: i32,
    pub(super) stderr: Vec<u8>,
}

impl Ended {
    /// The helper's one-line message: printable characters only, at most 300 of them.
    pub(super) fn message(&self) -> String {
        let text = String::from_utf8_lossy(&self.stderr);
        let line = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty() && !l.starts_with("size "))
            .unwrap_or("(no message)");
        line.chars().filter(|c| !c.is_control()).take(300).collect()
    }

    /// `Ok` for status 0; else the error of its kind, with the helper's message.
    fn check(&self, what: &str) -> Result<()> {
        let msg = self.message();
        // The kind, for callers that branch on it, with the helper's own words (said once).
        let io = |kind: std::io::ErrorKind| {
            Err(anyhow::Error::from(std::io::Error::new(
                kind,
                format!("{msg} (in the container)"),
            )))
        };
        match self.code {
            0 => Ok(()),
            EXIT_NOT_FOUND => io(std::io::ErrorKind::NotFound),
            EXIT_DENIED => io(std::io::ErrorKind::PermissionDenied),
            EXIT_NOT_REGULAR => Err(Error::Sandbox(msg).into()),
            EXIT_EXISTS => Err(Error::Exists {
                path: msg.strip_suffix(" exists").unwrap_or(&msg).to_string(),
            }
            .into()),
            _ => Err(Error::Sandbox(format!("cannot {what} in the container: {msg}")).into()),
        }
    }
}

/// The helper's command line: `h9sandbox agent file ARGS…` from the read-only mount.
fn helper(args: Vec<String>) -> Vec<String> {
    let mut argv = vec![
        crate::contract::BIN.to_string(),
        crate::contract::ARG.to_string(),
        "file".to_string(),
    ];
    argv.extend(args);
    argv
}

/// Runs the helper with `args` in sandbox `rec` as `user`, feeding it `input` (when given) on
/// stdin and its stdout to `out`. Errors: the sandbox is not Running or has no helper (made
/// before the agent), the agent or the engine failed, `input` could not be read (the helper is
/// then killed before it replaced anything), `out` failed.
async fn run_helper(
    ctx: &Ctx,
    rec: &Record,
    user: RunAs,
    args: Vec<String>,
    input: Option<Box<dyn Read + Send>>,
    out: &mut (dyn FnMut(&[u8]) -> Result<()> + Send),
) -> Result<Ended> {
    ensure_running(rec)?;
    super::lifecycle::check_workdir(rec)?;
    if !super::agent::speaks_current(rec) {
        return Err(Error::Refused(format!(
            "sandbox {} was made before h9sandbox served files outside the work dir; use `exec` (cat, tee), or `down` it and `up` a new one",
            rec.short_id()
        ))
        .into());
    }
    run_tool(ctx, rec, user, helper(args), input, out).await
}

/// Runs the in-container program `argv` (h9sandbox's own, from its fixed path) in sandbox `rec`
/// as `user`, as [`run_helper`] does the file helper.
pub(super) async fn run_tool(
    ctx: &Ctx,
    rec: &Record,
    user: RunAs,
    argv: Vec<String>,
    input: Option<Box<dyn Read + Send>>,
    out: &mut (dyn FnMut(&[u8]) -> Result<()> + Send),
) -> Result<Ended> {
    let chunks = input.map(feed);
    let conn = match ctx.cfg.exec_agent {
        true => super::agent::connect(ctx, rec).await,
        false => Ok(None),
    };
    match conn {
        Ok(Some(conn)) => via_agent(conn, user, argv, chunks, out).await,
        Ok(None) => via_engine(ctx, rec, user, argv, chunks, out, None).await,
        Err(e) => via_engine(ctx, rec, user, argv, chunks, out, Some(e)).await,
    }
}

/// A chunk of the input, its end, or its read error.
type Chunk = std::io::Result<Option<Vec<u8>>>;

/// Reads `input` on a thread of its own, in chunks of 64 KiB, into a small channel (so memory
/// stays bounded whatever the size).
fn feed(mut input: Box<dyn Read + Send>) -> mpsc::Receiver<Chunk> {
    let (tx, rx) = mpsc::channel::<Chunk>(4);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let msg = match input.read(&mut buf) {
                Ok(0) => Ok(None),
                Ok(n) => Ok(Some(buf[..n].to_vec())),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => Err(e),
            };
            let last = !matches!(msg, Ok(Some(_)));
            if tx.blocking_send(msg).is_err() || last {
                return;
            }
        }
    });
    rx
}

async fn next_chunk(rx: &mut Option<mpsc::Receiver<Chunk>>) -> Chunk {
    match rx {
        Some(r) => r
            .recv()
            .await
            .unwrap_or_else(|| Err(std::io::Error::other("the input ended unexpectedly"))),
        None => std::future::pending().await,
    }
}

fn keep(stderr: &mut Vec<u8>, bytes: &[u8]) {
    let room = STDERR_KEEP.saturating_sub(stderr.len()).min(bytes.len());
    stderr.extend_from_slice(&bytes[..room]);
}

async fn via_agent(
    conn: crate::channel::Connection,
    user: RunAs,
    argv: Vec<String>,
    mut chunks: Option<mpsc::Receiver<Chunk>>,
    out: &mut (dyn FnMut(&[u8]) -> Result<()> + Send),
) -> Result<Ended> {
    let lost = |e: String| Error::Sandbox(format!("the sandbox's agent failed: {e}"));
    let (mut tx, mut rx) = conn.split();
    tx.send(Request::Start(Start {
        command: CommandLine::Argv(argv),
        cwd: "/".into(),
        env: vec![],
        user,
        stdin: chunks.is_some(),
        timeout_ms: None,
        detach: false,
    }))
    .await
    .map_err(|e| lost(crate::sandbox::agent::connection_failure(&e)))?;
    let mut stderr = Vec::new();
    loop {
        tokio::select! {
            reply = rx.next() => match reply {
                Some(Ok(Reply::Started { .. })) => {}
                Some(Ok(Reply::Stdout(b))) => {
                    if let Err(e) = out(&b) {
                        let _ = tx.send(Request::Cancel).await;
                        return Err(e);
                    }
                }
                Some(Ok(Reply::Stderr(b))) => keep(&mut stderr, &b),
                Some(Ok(Reply::Exited(e))) => return Ok(Ended { code: e.code, stderr }),
                Some(Ok(Reply::Failed { message, .. })) | Some(Ok(Reply::Refused(message))) => {
                    return Err(lost(message).into())
                }
                Some(Ok(other)) => return Err(lost(format!("unexpected answer {other:?}")).into()),
                Some(Err(e)) => return Err(lost(crate::sandbox::agent::connection_failure(&e)).into()),
                None => return Err(lost("it closed the connection".into()).into()),
            },
            chunk = next_chunk(&mut chunks) => match chunk {
                Ok(Some(b)) => { let _ = tx.send(Request::Stdin(b)).await; }
                Ok(None) => { chunks = None; let _ = tx.send(Request::CloseStdin).await; }
                Err(e) => {
                    // Never close the input: the helper would take what came as the whole.
                    let _ = tx.send(Request::Cancel).await;
                    return Err(anyhow!(e).context("cannot read the content to write; the file keeps its old content"));
                }
            },
        }
    }
}

async fn via_engine(
    ctx: &Ctx,
    rec: &Record,
    user: RunAs,
    argv: Vec<String>,
    mut chunks: Option<mpsc::Receiver<Chunk>>,
    out: &mut (dyn FnMut(&[u8]) -> Result<()> + Send),
    why: Option<crate::channel::ConnectError>,
) -> Result<Ended> {
    let engine = ctx.runner_for(rec)?;
    let spec = ExecSpec {
        command: CommandLine::Argv(argv),
        cwd: PathBuf::from("/"),
        env: vec![],
        interactive: chunks.is_some(),
        marker: Uuid::new_v4().simple().to_string(),
        user: Some(user),
        wrapped: true,
        wrapper_enters: true,
        backstop: None,
    };
    let stdio = ExecStdio {
        stdin: if chunks.is_some() {
            StdinFrom::Piped
        } else {
            StdinFrom::Null
        },
        stdout_inherit: false,
    };
    if let Some(e) = super::exec::without_engine_exec(&engine, rec, why.as_ref()).await {
        return Err(e.into());
    }
    let mut child = engine.exec(rec.container_ref(), &spec, stdio)?;
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take().expect("piped");
    let mut errs = child.stderr.take().expect("piped");
    let mut stderr = Vec::new();
    let (mut buf, mut ebuf) = (vec![0u8; 64 << 10], vec![0u8; 4096]);
    let (mut out_open, mut err_open) = (true, true);
    while out_open || err_open {
        tokio::select! {
            n = stdout.read(&mut buf), if out_open => match n? {
                0 => out_open = false,
                n => out(&buf[..n])?,
            },
            n = errs.read(&mut ebuf), if err_open => match n? {
                0 => err_open = false,
                n => keep(&mut stderr, &ebuf[..n]),
            },
            chunk = next_chunk(&mut chunks) => match chunk {
                Ok(Some(b)) => {
                    if let Some(s) = &mut stdin {
                        if s.write_all(&b).await.is_err() { stdin = None; }
                    }
                }
                Ok(None) => { chunks = None; stdin = None; }
                Err(e) => {
                    let _ = engine.kill_exec(rec.container_ref(), &spec).await;
                    return Err(anyhow!(e).context("cannot read the content to write; the file keeps its old content"));
                }
            },
        }
    }
    let code = child.wait().await?.code;
    if let Some(f) = child.judge().failure(&stderr, code) {
        use crate::engine::ExecFailure as F;
        let id = rec.short_id();
        return Err(match f {
            F::ContainerGone(reason) => Error::ContainerGone { id, reason },
            F::ContainerStopped(reason) | F::ContainerPaused(reason) => Error::Sandbox(format!(
                "sandbox {id} cannot serve files outside its work dir: {reason}"
            )),
            F::EngineUnavailable(reason) => Error::EngineUnavailable {
                bin: engine.kind().to_string(),
                reason,
            },
            F::Other(reason) => Error::Sandbox(reason),
        }
        .into());
    }
    Ok(Ended { code, stderr })
}

/// Reads the container's file `path` as `user` (at most `max` bytes; failing with
/// [`TooLarge`] past `cap` bytes when given), its bytes to `out`. Returns the file's size.
pub(crate) async fn read(
    ctx: &Ctx,
    rec: &Record,
    user: RunAs,
    path: &Path,
    max: Option<u64>,
    cap: Option<u64>,
    out: &mut (dyn FnMut(&[u8]) -> Result<()> + Send),
) -> Result<u64> {
    let mut args = vec!["read".to_string(), path.to_string_lossy().into_owned()];
    if let Some(m) = max {
        args.extend(["--max-bytes".into(), m.to_string()]);
    }
    if let Some(c) = cap {
        args.extend(["--cap".into(), c.to_string()]);
    }
    let want = max.unwrap_or(u64::MAX).min(cap.unwrap_or(u64::MAX));
    let mut seen = 0u64;
    let mut bounded = |b: &[u8]| -> Result<()> {
        seen += b.len() as u64;
        if seen > want {
            return Err(anyhow!(
                "the sandbox sent more of {} than asked",
                path.display()
            ));
        }
        out(b)
    };
    let ended = run_helper(ctx, rec, user, args, None, &mut bounded).await?;
    if ended.code == EXIT_TOO_LARGE {
        let size = ended
            .message()
            .rsplit_once(" is ")
            .and_then(|(_, s)| s.strip_suffix(" bytes"))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        return Err(TooLarge(size).into());
    }
    ended.check("read")?;
    let text = String::from_utf8_lossy(&ended.stderr);
    text.lines()
        .find_map(|l| l.strip_prefix("size ")?.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            anyhow!(
                "the sandbox's file helper did not say the size of {}",
                path.display()
            )
        })
}

/// The file is larger (this many bytes) than a capped read holds.
#[derive(Debug, thiserror::Error)]
#[error("the file is {0} bytes")]
pub(crate) struct TooLarge(pub u64);

/// What [`write()`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Written {
    /// The container's path.
    pub path: PathBuf,
    /// Bytes taken from the input.
    pub bytes_written: u64,
    /// The file's size now.
    pub size: u64,
}

/// Replaces the container's file `path` with `data`, as `user`, atomically (see
/// [`crate::agent::file_helper`]): `opts.mode` (`None`: the file's, or 644), `opts.parents`,
/// `opts.append` (`opts.owner` is the user's: files are made by `user` itself).
pub(crate) async fn write(
    ctx: &Ctx,
    rec: &Record,
    user: RunAs,
    path: &Path,
    data: Box<dyn Read + Send>,
    opts: &WriteOptions,
) -> Result<Written> {
    let mut args = vec!["write".to_string(), path.to_string_lossy().into_owned()];
    if let Some(m) = opts.mode {
        args.extend(["--mode".into(), format!("{m:o}")]);
    }
    if opts.parents {
        args.push("--parents".into());
    }
    if opts.append {
        args.push("--append".into());
    }
    if opts.no_clobber {
        args.push("--no-clobber".into());
    }
    let mut said = Vec::new();
    let mut collect = |b: &[u8]| -> Result<()> {
        keep(&mut said, b);
        Ok(())
    };
    let ended = run_helper(ctx, rec, user, args, Some(data), &mut collect).await?;
    ended.check("write")?;
    let text = String::from_utf8_lossy(&said);
    let mut f = text.split_whitespace().map(str::parse::<u64>);
    match (f.next(), f.next()) {
        (Some(Ok(bytes_written)), Some(Ok(size))) => Ok(Written {
            path: path.to_path_buf(),
            bytes_written,
            size,
        }),
        _ => Err(anyhow!(
            "the sandbox's file helper did not say what it wrote to {}",
            path.display()
        )),
    }
}

/// Replaces `old` by `new` in the container's file `path` as `user` (exactly one occurrence,
/// or every one with `all`), as `edit` does on the host side ([`crate::workdir_fs::replace_in`]):
/// read (at most [`crate::workdir_fs::EDIT_MAX_BYTES`]), replaced here, written back atomically with
/// its mode. Returns the replacements and the new size.
pub(crate) async fn edit(
    ctx: &Ctx,
    rec: &Record,
    user: RunAs,
    path: &Path,
    old: &[u8],
    new: &[u8],
    all: bool,
) -> Result<(usize, u64)> {
    let cap = crate::workdir_fs::EDIT_MAX_BYTES;
    let mut content = Vec::new();
    let mut collect = |b: &[u8]| -> Result<()> {
        content.extend_from_slice(b);
        Ok(())
    };
    match read(ctx, rec, user.clone(), path, None, Some(cap), &mut collect).await {
        Err(e) if e.downcast_ref::<TooLarge>().is_some() => {
            return Err(Error::Refused(format!(
                "cannot edit {}: it is larger than edit's limit of {cap} bytes (edit loads the file into memory); use `exec` with sed or a script instead",
                path.display()
            ))
            .into())
        }
        r => r?,
    };
    let (edited, count) =
        crate::workdir_fs::replace_in(&content, old, new, all, &path.display().to_string())?;
    let size = edited.len() as u64;
    write(
        ctx,
        rec,
        user,
        path,
        Box::new(std::io::Cursor::new(edited)),
        &WriteOptions::default(),
    )
    .await?;
    Ok((count, size))
}
