//! Engine client runs with their output held bounded ([`ENGINE_OUTPUT_MAX`]): what a client,
//! or a command it runs inside a container, prints cannot make the host hold more.

use anyhow::Result;

/// Most bytes kept of each output stream of an engine client's run ([`bounded_output`]): 16
/// MiB, far more than a listing (`ps`) or an `inspect` prints, and a bound on what a command run
/// inside a container (the kill helper, a `stat`) can make the host hold.
pub(crate) const ENGINE_OUTPUT_MAX: usize = 16 << 20;

/// What [`bounded_output`] captured.
#[derive(Debug)]
pub(crate) struct BoundedOutput {
    /// Exit status (`None` when the process was killed for printing too much, or when it came
    /// from an engine exec, whose callers read only its output).
    pub status: Option<std::process::ExitStatus>,
    /// stdout, at most the cap.
    pub stdout: Vec<u8>,
    /// stderr, at most the cap.
    pub stderr: Vec<u8>,
    /// The stream (`"stdout"`, `"stderr"`) that went past the cap, after which the process was
    /// killed; `None` when both fit.
    pub overflow: Option<&'static str>,
}

/// Runs `cmd` to its end, capturing stdout and stderr (both read at once, so neither blocks the
/// process), each at most `max` bytes: a process printing more is killed at once rather than
/// having its output held (tokio's `output()` keeps all of it). Errors: the process cannot be
/// started or read.
pub(crate) async fn bounded_output(
    cmd: &mut tokio::process::Command,
    max: usize,
) -> std::io::Result<BoundedOutput> {
    use std::process::Stdio;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    collect_bounded(child, max).await
}

/// [`bounded_output`] of a process already started with piped stdout and stderr (the caller
/// may be feeding its stdin meanwhile).
pub(crate) async fn collect_bounded(
    mut child: tokio::process::Child,
    max: usize,
) -> std::io::Result<BoundedOutput> {
    let (stdout, stderr, overflow) =
        read_bounded(child.stdout.take(), child.stderr.take(), max).await?;
    let status = if overflow.is_some() {
        let _ = child.start_kill();
        let _ = child.wait().await;
        None
    } else {
        Some(child.wait().await?)
    };
    Ok(BoundedOutput {
        status,
        stdout,
        stderr,
        overflow,
    })
}

/// Reads `out` and `err` at once to their ends, each at most `max` bytes; the first stream past
/// the cap ends the reading (its name is returned).
pub(super) async fn read_bounded<O, E>(
    out: Option<O>,
    err: Option<E>,
    max: usize,
) -> std::io::Result<(Vec<u8>, Vec<u8>, Option<&'static str>)>
where
    O: tokio::io::AsyncRead + Unpin,
    E: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::{AsyncRead, AsyncReadExt};
    async fn read<R: AsyncRead + Unpin>(
        r: Option<R>,
        max: usize,
        name: &'static str,
    ) -> std::io::Result<Result<Vec<u8>, (&'static str, Vec<u8>)>> {
        let mut v = Vec::new();
        if let Some(r) = r {
            r.take(max as u64 + 1).read_to_end(&mut v).await?;
        }
        Ok(if v.len() > max {
            v.truncate(max);
            Err((name, v))
        } else {
            Ok(v)
        })
    }
    let out = read(out, max, "stdout");
    let err = read(err, max, "stderr");
    tokio::pin!(out, err);
    // Both at once; the first stream past the cap ends the wait.
    let (mut o, mut e) = (None, None);
    let overflow = loop {
        tokio::select! {
            r = &mut out, if o.is_none() => match r? {
                Ok(v) => o = Some(v),
                Err((name, v)) => { o = Some(v); break Some(name); }
            },
            r = &mut err, if e.is_none() => match r? {
                Ok(v) => e = Some(v),
                Err((name, v)) => { e = Some(v); break Some(name); }
            },
        }
        if o.is_some() && e.is_some() {
            break None;
        }
    };
    Ok((o.unwrap_or_default(), e.unwrap_or_default(), overflow))
}
