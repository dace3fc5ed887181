//! `h9sandbox read`: a file of the sandbox's work dir to stdout (raw bytes, streamed in the
//! kernel) or as JSON (held in memory, so at most `json_max_bytes` of it), read on the host side
//! through [`crate::workdir_fs::WorkDir`], so paths that leave the work dir are refused.

use std::os::fd::AsFd;

use anyhow::Result;
use base64::Engine as _;
use serde::Serialize;

use super::output;
use super::{Format, ReadArgs};
use crate::error::Error;
use crate::sandbox::container_files::{self, acting, place, Place};
use crate::sandbox::{workdir_of, Ctx};

/// `read --format json` document: `content` for UTF-8 text, `content_base64` otherwise.
#[derive(Debug, Serialize)]
pub(crate) struct ReadJson {
    /// Host path of the file (the container sees the same path).
    pub path: String,
    /// Size of the whole file in bytes.
    pub size: u64,
    /// The bytes as text, when they are valid UTF-8 (a multi-byte character cut by
    /// `--max-bytes` is left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The bytes in standard base64 (RFC 4648, padded), when they are not valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_base64: Option<String>,
    /// Whether `--max-bytes` cut the file short.
    pub truncated: bool,
}

/// Runs `read`; returns 0.
pub(crate) async fn run(ctx: &Ctx, format: Format, args: &ReadArgs) -> Result<i32> {
    let (rec, wd) = workdir_of(ctx, &args.sandbox.id)?;
    if let Place::Container(path) = place(&rec, &args.path, args.user.is_some()) {
        return in_container(ctx, format, args, &rec, &path).await;
    }
    let wd = wd.open()?;
    match format {
        Format::Table => {
            // Straight to the descriptor (not through std's line-buffered Stdout), in the kernel.
            let stdout = std::io::stdout();
            let r = wd.read_to_fd(&args.path, args.max_bytes, stdout.as_fd());
            match r {
                Err(e) if output::is_broken_pipe(&e) => Ok(0),
                r => r.map(|_| 0),
            }
        }
        Format::Json => {
            let cap = ctx.cfg.json_max_bytes;
            let (bytes, info) = wd
                .read_bytes(&args.path, args.max_bytes, cap)?
                .map_err(|size| too_large(&wd.host_path(&args.path), size, cap))?;
            let truncated = args.max_bytes.is_some_and(|m| info.size > m);
            output::print_json(&json(
                info.path.display().to_string(),
                info.size,
                bytes,
                truncated,
            ))?;
            Ok(0)
        }
    }
}

/// `read` of the container's file `path` (outside the work dir, or with `--user`), served
/// inside the container as the sandbox's user (or `--user`).
async fn in_container(
    ctx: &Ctx,
    format: Format,
    args: &ReadArgs,
    rec: &crate::state::Record,
    path: &std::path::Path,
) -> Result<i32> {
    let user = acting(rec, args.user.as_deref())?;
    match format {
        Format::Table => {
            use std::io::Write;
            let mut broken = false;
            let mut out = |b: &[u8]| -> Result<()> {
                if broken {
                    return Ok(());
                }
                let mut stdout = std::io::stdout().lock();
                match stdout.write_all(b).and_then(|_| stdout.flush()) {
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                        broken = true;
                        Ok(())
                    }
                    r => Ok(r?),
                }
            };
            container_files::read(ctx, rec, user, path, args.max_bytes, None, &mut out).await?;
            Ok(0)
        }
        Format::Json => {
            let cap = ctx.cfg.json_max_bytes;
            let mut bytes = Vec::new();
            let mut out = |b: &[u8]| -> Result<()> {
                bytes.extend_from_slice(b);
                Ok(())
            };
            let size = match container_files::read(
                ctx,
                rec,
                user,
                path,
                args.max_bytes,
                Some(cap),
                &mut out,
            )
            .await
            {
                Err(e) => match e.downcast_ref::<container_files::TooLarge>() {
                    Some(t) => return Err(too_large(path, t.0, cap).into()),
                    None => return Err(e),
                },
                Ok(size) => size,
            };
            let truncated = args.max_bytes.is_some_and(|m| size > m);
            output::print_json(&json(path.display().to_string(), size, bytes, truncated))?;
            Ok(0)
        }
    }
}

/// The error for a file of `size` bytes (or more: it grew while it was read) at `path`, more
/// than `read --format json` may hold (`cap`, config `json_max_bytes`).
fn too_large(path: &std::path::Path, size: u64, cap: u64) -> Error {
    Error::Refused(format!(
        "{} is {size} bytes, more than `read --format json` holds in memory (json_max_bytes = {cap}); read it with plain `h9sandbox read` (it streams any size), take its start with --max-bytes, or raise json_max_bytes (H9SANDBOX_JSON_MAX_BYTES)",
        path.display()
    ))
}

/// The JSON document for `bytes` (the first bytes of a file of `size` bytes at `path`).
pub(crate) fn json(path: String, size: u64, bytes: Vec<u8>, truncated: bool) -> ReadJson {
    let text = match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(e) => {
            let u = e.utf8_error();
            // Only a character cut at the end by the cap is forgiven.
            if truncated && u.error_len().is_none() {
                let mut b = e.into_bytes();
                b.truncate(u.valid_up_to());
                Ok(String::from_utf8(b).expect("valid prefix"))
            } else {
                Err(e.into_bytes())
            }
        }
    };
    let (content, content_base64) = match text {
        Ok(s) => (Some(s), None),
        Err(b) => (
            None,
            Some(base64::engine::general_purpose::STANDARD.encode(b)),
        ),
    };
    ReadJson {
        path,
        size,
        content,
        content_base64,
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_or_base64() {
        let j = json("p".into(), 3, b"h\xc3\xa9".to_vec(), false);
        assert_eq!(j.content.as_deref(), Some("hé"));
        assert_eq!(j.content_base64, None);
        let j = json("p".into(), 2, vec![0xff, 0x00], false);
        assert_eq!(j.content, None);
        assert_eq!(j.content_base64.as_deref(), Some("/wA="));
        // A character cut by the cap is dropped; invalid bytes elsewhere still mean base64.
        let j = json("p".into(), 9, b"ab\xc3".to_vec(), true);
        assert_eq!(j.content.as_deref(), Some("ab"));
        let j = json("p".into(), 9, b"a\xffb\xc3".to_vec(), true);
        assert!(j.content.is_none() && j.content_base64.is_some());
        let j = json("p".into(), 3, b"ab\xc3".to_vec(), false);
        assert!(j.content.is_none());
        let v = serde_json::to_value(json("p".into(), 1, b"x".to_vec(), false)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"path": "p", "size": 1, "content": "x", "truncated": false})
        );
    }
}
