//! Copying files in and out of a sandbox as tar streams through its agent (the remote channel,
//! the socket, or the engine's exec): a copied work dir at `up` ([`seed`]) and `h9sandbox cp`
//! ([`copy`]), in docker cp's syntax and semantics. The container's side is h9sandbox's own
//! `agent tar` (the sandbox's image may have no tar); the host's side of a stream out of the
//! sandbox is extracted as hostile ([`crate::agent::tarball::extract`]: no name out of the
//! destination, nothing written through a symlink, no device file, no set-ID bit, bounded).
//! Nothing comes back to the host but by `cp`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};

use super::container_files::{acting, run_tool};
use super::exec::ensure_running;
use super::Ctx;
use crate::agent::tarball::{self, ExtractOptions};
use crate::contract::proto::RunAs;
use crate::error::Error;
use crate::state::Record;

/// One side of `cp`: a path of this machine, a path of a sandbox, or a tar stream on stdin or
/// stdout (`-`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Side {
    /// A path of this machine.
    Host(PathBuf),
    /// `ID:PATH`: a path of the sandbox `ID` (relative paths start in its work dir).
    Sandbox(String, PathBuf),
    /// `-`: a tar stream on stdin (source) or stdout (destination).
    Stream,
}

impl Side {
    /// Parses one operand as docker cp does: `-`; `ID:PATH` when what comes before the first
    /// `:` names no local path (holds no `/`); else a path of this machine.
    pub(crate) fn parse(s: &str) -> Side {
        if s == "-" {
            return Side::Stream;
        }
        match s.split_once(':') {
            Some((id, path)) if !id.is_empty() && !id.contains('/') => {
                Side::Sandbox(id.to_string(), PathBuf::from(path))
            }
            _ => Side::Host(PathBuf::from(s)),
        }
    }
}

/// What a copy moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Copied {
    /// Regular files.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Entries skipped (devices, FIFOs, sockets).
    pub skipped: u64,
}

/// The in-container `agent tar …` command line.
fn tar_tool(args: Vec<String>) -> Vec<String> {
    let mut argv = vec![
        crate::contract::BIN.to_string(),
        crate::contract::ARG.to_string(),
        "tar".to_string(),
    ];
    argv.extend(args);
    argv
}

/// `path` of sandbox `rec` as the container sees it: relative paths start in its work dir.
fn in_container(rec: &Record, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        rec.workdir.join(path)
    }
}

/// Checks what every copy needs: the sandbox runs, and its in-container side speaks this
/// h9sandbox's protocol (it has `agent tar`).
fn check(rec: &Record) -> Result<()> {
    ensure_running(rec)?;
    super::lifecycle::check_workdir(rec)?;
    if rec.isolation == crate::types::Isolation::None {
        return Err(Error::Refused(format!(
            "sandbox {} is local (no container): copy its files with cp(1)",
            rec.short_id()
        ))
        .into());
    }
    if !super::agent::speaks_current(rec) {
        return Err(Error::Refused(format!(
            "sandbox {} was made by an older h9sandbox, whose in-container side cannot copy; `down` it and `up` a new one",
            rec.short_id()
        ))
        .into());
    }
    Ok(())
}

/// A reader that counts what passes, for progress.
struct Counting<R> {
    inner: R,
    seen: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.seen.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A tar stream of the host's `src` named `top`, made on a thread of its own, as a reader.
fn host_stream(src: PathBuf, top: String) -> Result<std::io::PipeReader> {
    let (reader, writer) = std::io::pipe().context("cannot make a pipe")?;
    std::thread::spawn(move || {
        // A failure shows on the other end as a stream cut short (the extraction fails).
        let _ = tarball::archive(writer, &src, &top);
    });
    Ok(reader)
}

/// Sends `input` (a tar stream) to `agent tar extract ARGS` in sandbox `rec` as `user`, the
/// step `what` reported with the bytes sent so far. Returns what the container extracted.
async fn send(
    ctx: &Ctx,
    rec: &Record,
    user: RunAs,
    args: Vec<String>,
    input: impl Read + Send + 'static,
    what: &str,
    total: Option<u64>,
) -> Result<Copied> {
    let seen = Arc::new(AtomicU64::new(0));
    let counting = Counting {
        inner: input,
        seen: Arc::clone(&seen),
    };
    let progress = progress(ctx, what, total, Arc::clone(&seen));
    let mut out = |_: &[u8]| -> Result<()> { Ok(()) };
    let ended = run_tool(
        ctx,
        rec,
        user,
        tar_tool(args),
        Some(Box::new(counting)),
        &mut out,
    )
    .await;
    progress.abort();
    let ended = ended?;
    let text = String::from_utf8_lossy(&ended.stderr);
    if ended.code != 0 {
        return Err(Error::Sandbox(format!(
            "{what} failed in the sandbox: {}",
            ended.message().trim_start_matches("h9sandbox: error: ")
        ))
        .into());
    }
    let mut f = text
        .lines()
        .find_map(|l| l.strip_prefix("extracted "))
        .unwrap_or("")
        .split_whitespace()
        .map(|w| w.parse::<u64>().unwrap_or(0));
    Ok(Copied {
        files: f.next().unwrap_or(0),
        bytes: f.next().unwrap_or(0),
        skipped: f.next().unwrap_or(0),
    })
}

/// Copies the host's work dir of the just-started sandbox `rec` into its container at the same
/// path (owners, modes, times and symlinks kept, nothing followed; as the container's root,
/// through the agent), refusing one larger than `copy_max_bytes` before anything is sent.
/// Owners other than root's need `CHOWN`, which the `standard` capability profile has and
/// `minimal` has not (the files are then root's; a warning says so). Returns what was copied.
/// Errors: too large, the copy failed.
pub(crate) async fn seed(ctx: &Ctx, rec: &Record) -> Result<Copied> {
    let src = rec.workdir.clone();
    let (bytes, _) = tarball::measure(&src)
        .with_context(|| format!("cannot read the work dir {}", src.display()))?;
    let max = ctx.cfg.copy_max_bytes;
    if bytes > max {
        return Err(Error::Refused(format!(
            "the work dir {} holds {} MiB of files, more than copy_max_bytes ({} MiB) allows copying into a sandbox; raise copy_max_bytes, or use a smaller directory",
            src.display(),
            bytes >> 20,
            max >> 20
        ))
        .into());
    }
    if rec.limits.caps == crate::types::Caps::Minimal && rec.user.is_some_and(|u| !u.is_root()) {
        ctx.reporter.warn(&format!(
            "caps = minimal has no CHOWN: the copied work dir's files are root's in sandbox {}, not user {}'s; use --caps standard",
            rec.short_id(),
            rec.user.map(|u| u.to_string()).unwrap_or_default()
        ));
    }
    let stream = host_stream(src.clone(), ".".into())?;
    send(
        ctx,
        rec,
        RunAs::ROOT,
        vec![
            "extract".into(),
            "--as-is".into(),
            "--keep-owners".into(),
            "--max-bytes".into(),
            max.to_string(),
            rec.workdir.to_string_lossy().into_owned(),
        ],
        stream,
        "copying the work dir in",
        Some(bytes),
    )
    .await
}

/// Reports the step `what` with the bytes `seen` so far (of `total`) every quarter second, on
/// the front end's spinner, until aborted.
fn progress(
    ctx: &Ctx,
    what: &str,
    total: Option<u64>,
    seen: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    let reporter = Arc::clone(&ctx.reporter);
    let what = what.to_string();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            let mib = seen.load(Ordering::Relaxed) >> 20;
            reporter.step(&match total {
                Some(t) => format!("{what}: {mib} of {} MiB", t >> 20),
                None => format!("{what}: {mib} MiB"),
            });
        }
    })
}

/// `h9sandbox cp SRC DST`: from this machine (or a tar stream on stdin) into the sandbox, or
/// from the sandbox to this machine (or a tar stream on stdout), as the sandbox's user (or
/// `user`), in docker cp's semantics: a destination that is a directory receives the source
/// under its own name; one that does not exist becomes the source. Errors: bad operands, the
/// sandbox, the copy.
pub(crate) async fn copy(ctx: &Ctx, src: &Side, dst: &Side, user: Option<&str>) -> Result<Copied> {
    match (src, dst) {
        (Side::Sandbox(..), Side::Sandbox(..)) => Err(Error::Usage(
            "cp copies between a sandbox and this machine, not between two sandboxes: copy to a local directory first".into(),
        )
        .into()),
        (Side::Host(_) | Side::Stream, Side::Host(_) | Side::Stream) => Err(Error::Usage(
            "one side of cp must be a sandbox's path, ID:PATH".into(),
        )
        .into()),
        (from, Side::Sandbox(id, path)) => {
            let rec = super::resolve(ctx, id)?;
            check(&rec)?;
            let user = acting(&rec, user)?;
            let target = in_container(&rec, path).to_string_lossy().into_owned();
            let max = ctx.cfg.copy_max_bytes;
            match from {
                Side::Stream => {
                    let stdin = std::fs::File::from(
                        std::os::fd::AsFd::as_fd(&std::io::stdin()).try_clone_to_owned()?,
                    );
                    send(
                        ctx,
                        &rec,
                        user,
                        vec!["extract".into(), "--as-is".into(), "--max-bytes".into(), max.to_string(), target],
                        stdin,
                        "copying in",
                        None,
                    )
                    .await
                }
                Side::Host(p) => {
                    let meta = std::fs::symlink_metadata(p)
                        .with_context(|| format!("cannot copy {}", p.display()))?;
                    let (bytes, _) = tarball::measure(p)?;
                    if bytes > max {
                        return Err(Error::Refused(format!(
                            "{} holds {} MiB, more than copy_max_bytes ({} MiB); raise copy_max_bytes",
                            p.display(),
                            bytes >> 20,
                            max >> 20
                        ))
                        .into());
                    }
                    // `DIR/.`: the directory's content (Path::ends_with drops a trailing `.`).
                    let content = p.as_os_str() == "."
                        || p.as_os_str().as_encoded_bytes().ends_with(b"/.");
                    let top = if meta.is_dir() && content {
                        ".".to_string()
                    } else {
                        std::path::absolute(p)?
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .ok_or_else(|| anyhow!("cannot copy {}: it has no name", p.display()))?
                    };
                    let mut args = vec!["extract".to_string()];
                    if top == "." {
                        args.push("--as-is".into());
                    }
                    args.extend(["--max-bytes".into(), max.to_string(), target]);
                    let stream = host_stream(p.clone(), top)?;
                    send(ctx, &rec, user, args, stream, "copying in", Some(bytes)).await
                }
                Side::Sandbox(..) => unreachable!("refused above"),
            }
        }
        (Side::Sandbox(id, path), to) => {
            let rec = super::resolve(ctx, id)?;
            check(&rec)?;
            let user = acting(&rec, user)?;
            let source = in_container(&rec, path);
            let mut args = vec!["create".to_string()];
            // `ID:DIR/.`: the directory's content, into the destination (made when missing).
            let content = path.ends_with(".") || path.as_os_str().as_encoded_bytes().ends_with(b"/.");
            if content {
                args.extend(["--name".into(), ".".into()]);
            }
            args.push(source.to_string_lossy().into_owned());
            receive(ctx, &rec, user, args, to, content).await
        }
    }
}

/// Runs `agent tar ARGS` (a `create`) in sandbox `rec` as `user` and extracts its stream at
/// `to` on this machine (hostile: see the module documentation), or writes it to stdout.
async fn receive(
    ctx: &Ctx,
    rec: &Record,
    user: RunAs,
    args: Vec<String>,
    to: &Side,
    content: bool,
) -> Result<Copied> {
    let max = ctx.cfg.copy_max_bytes;
    match to {
        Side::Stream => {
            use std::io::Write;
            let mut sent = 0u64;
            let mut out = |b: &[u8]| -> Result<()> {
                sent += b.len() as u64;
                let mut stdout = std::io::stdout().lock();
                stdout.write_all(b)?;
                Ok(())
            };
            let ended = run_tool(ctx, rec, user, tar_tool(args), None, &mut out).await?;
            std::io::stdout().flush()?;
            if ended.code != 0 {
                return Err(Error::Sandbox(format!(
                    "copying out failed in the sandbox: {}",
                    ended.message().trim_start_matches("h9sandbox: error: ")
                ))
                .into());
            }
            Ok(Copied {
                bytes: sent,
                ..Copied::default()
            })
        }
        Side::Host(dest) => {
            // A symlink at the destination may be the sandbox's own (an earlier `cp` out of it
            // copied one there): never written through, whatever it points at.
            if std::fs::symlink_metadata(dest).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(Error::Refused(format!(
                    "cp: {} is a symbolic link (perhaps copied out of a sandbox earlier); nothing is copied through one: remove it, or name another destination",
                    dest.display()
                ))
                .into());
            }
            if content {
                std::fs::create_dir_all(dest)
                    .with_context(|| format!("cannot make {}", dest.display()))?;
            }
            let (into, rename) = tarball::destination(dest, content);
            let opts = ExtractOptions {
                max_bytes: Some(max),
                keep_owners: false,
                rename_top: rename,
            };
            let (reader, mut writer) = std::io::pipe().context("cannot make a pipe")?;
            let extractor = std::thread::spawn(move || tarball::extract(reader, &into, &opts));
            let mut write_failed = None;
            // Owns the pipe's writer: dropping it ends the stream for the extractor.
            let mut out = move |b: &[u8]| -> Result<()> {
                use std::io::Write;
                if write_failed.is_none() {
                    if let Err(e) = writer.write_all(b) {
                        // The extractor stopped (its error tells why): stop the stream too.
                        write_failed = Some(e);
                        return Err(anyhow!("the extraction stopped"));
                    }
                }
                Ok(())
            };
            let ended = run_tool(ctx, rec, user, tar_tool(args), None, &mut out).await;
            #[allow(clippy::drop_non_drop)]
            drop(out);
            let extracted = extractor
                .join()
                .map_err(|_| anyhow!("the extraction thread failed"))?;
            let done = extracted.map_err(|e| Error::Sandbox(format!("cp: {e}")))?;
            let ended = ended?;
            if ended.code != 0 {
                return Err(Error::Sandbox(format!(
                    "copying out failed in the sandbox: {}",
                    ended.message().trim_start_matches("h9sandbox: error: ")
                ))
                .into());
            }
            if done.skipped > 0 {
                ctx.reporter.warn(&format!(
                    "{} {} not copied (device files, FIFOs or sockets)",
                    done.skipped,
                    if done.skipped == 1 {
                        "entry was"
                    } else {
                        "entries were"
                    }
                ));
            }
            Ok(Copied {
                files: done.files,
                bytes: done.bytes,
                skipped: done.skipped,
            })
        }
        Side::Sandbox(..) => unreachable!("refused by copy"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_parse_as_docker_cp_reads_them() {
        assert_eq!(Side::parse("-"), Side::Stream);
        assert_eq!(
            Side::parse("abc:/etc/os-release"),
            Side::Sandbox("abc".into(), "/etc/os-release".into())
        );
        assert_eq!(
            Side::parse("abc:rel"),
            Side::Sandbox("abc".into(), "rel".into())
        );
        assert_eq!(Side::parse("./a:b"), Side::Host("./a:b".into()));
        assert_eq!(Side::parse("/x/y:z"), Side::Host("/x/y:z".into()));
        assert_eq!(Side::parse("file"), Side::Host("file".into()));
        assert_eq!(Side::parse(":x"), Side::Host(":x".into()));
    }
}
