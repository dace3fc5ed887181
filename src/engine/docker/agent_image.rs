//! The derived image that carries h9sandbox's agent to a daemon that cannot mount it (a remote
//! one, copy mode): its tag (by image ID and build ID) and the probe container that copies a
//! file out of an image.

use std::path::Path;

use anyhow::{anyhow, Context, Result};

use super::*;
use crate::engine::Environment;
use crate::error::Error;

impl Docker {
    /// One attempt of [`Environment::image_file`]: a probe container of `image` created, `path`
    /// copied out of it into a temporary directory, the probe removed.
    pub(super) async fn copy_out(
        &self,
        image: &str,
        path: &str,
        labels: &[(&str, &str)],
    ) -> Result<Copied> {
        let (code, stdout, stderr) = self.output(probe_create_args(image, labels)).await?;
        if code != 0 {
            if is_no_such_image(&stderr) {
                return Err(Error::ImageUnavailable {
                    image: image.into(),
                    reason: "not present locally".into(),
                }
                .into());
            }
            return Err(anyhow!(
                "`{} create` of {image} (to read {path}) failed: {}",
                self.bin,
                first_error_line(&stderr)
            ));
        }
        let probe = stdout.lines().last().unwrap_or_default().to_string();
        // Docker follows a symlink in the image with -L; Podman's cp has no such flag (a symlink
        // it copies as one is then refused by read_regular, never followed on the host).
        let copied = self
            .copy_from(&probe, path, self.flavor == Flavor::Docker)
            .await;
        let _ = self.remove(&probe).await;
        copied.map_err(|e| anyhow!("`{} cp` of {path} from {image} failed: {e}", self.bin))
    }

    /// `path` of the container `container` copied into a fresh temporary directory (`cp`;
    /// `follow`: `cp -L`, a symlink in the container followed there). Errors: the engine's
    /// first error line.
    pub(super) async fn copy_from(
        &self,
        container: &str,
        path: &str,
        follow: bool,
    ) -> Result<Copied> {
        let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
        let dest = dir.path().join("file");
        let mut args: Vec<String> = vec!["cp".into()];
        if follow {
            args.push("-L".into());
        }
        args.extend([
            format!("{container}:{path}"),
            dest.to_string_lossy().into_owned(),
        ]);
        let (code, _, stderr) = self.output(args).await?;
        if code == 0 {
            return Ok(Copied::File(dest, dir));
        }
        if stderr.contains("Could not find the file") || stderr.contains("no such file") {
            return Ok(Copied::Missing);
        }
        if is_no_such_container(&stderr) {
            return Ok(Copied::Gone);
        }
        Err(anyhow!("{}", first_error_line(&stderr)))
    }
}

/// What one attempt of [`Docker::copy_out`] found.
pub(super) enum Copied {
    /// The file, in its temporary directory (kept alive with it).
    File(std::path::PathBuf, tempfile::TempDir),
    /// The image has no such file.
    Missing,
    /// The container (a probe) vanished before the copy.
    Gone,
}

/// The content of the regular file `path` (not followed if it is a symlink), at most `max`
/// bytes. Errors: it is not a regular file, or larger.
pub(super) fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        // Not through a symlink, and never waiting on a FIFO the copy made.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(anyhow!("{} is not a regular file", path.display()));
    }
    if meta.len() > max {
        return Err(anyhow!(
            "{} has {} bytes, more than the {max} read",
            path.display(),
            meta.len()
        ));
    }
    let mut v = Vec::new();
    f.take(max).read_to_end(&mut v)?;
    Ok(v)
}

/// The label of a derived image (its value: the build ID of the binary in it) and of the
/// container it is made from.
pub(crate) const LABEL_AGENT_IMAGE: &str = "h9sandbox.agent_image";

/// Whether `tag` has the shape of [`agent_image_tag`]'s names (`h9sandbox-agent:` and two runs
/// of 12 lowercase hex digits): what a cached name must be before it is handed to the client.
pub(crate) fn is_agent_image_tag(tag: &str) -> bool {
    let hex12 = |s: &str| {
        s.len() == 12
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    tag.strip_prefix("h9sandbox-agent:")
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(a, b)| hex12(a) && hex12(b))
}

/// The tag of the derived image of the image whose ID is `image_id` with the binary of build
/// `build`: `h9sandbox-agent:<12 hex digits of each>`.
pub(crate) fn agent_image_tag(image_id: &str, build: &str) -> String {
    let id = image_id.trim().trim_start_matches("sha256:");
    let short = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_hexdigit())
            .take(12)
            .collect::<String>()
            .to_ascii_lowercase()
    };
    format!("h9sandbox-agent:{}-{}", short(id), short(build))
}
