//! Images h9sandbox builds on the engine itself, from files of the host, without any registry
//! ([`super::Environment::ensure_image`]): h9sandbox's own runtime image, which holds nothing
//! but the static h9sandbox binary ([`ImageBuild::runtime`], `FROM scratch`), for what runs
//! beside a sandbox and must run none of the sandbox's image (the allowlist's proxy sidecar);
//! and, with a base image, a derived image (the base plus files of the host), for a sandbox whose
//! container cannot bind-mount the binary.
//!
//! The build is the engine's own (`docker build`, the context a tar stream on its standard input:
//! a `Dockerfile` with `FROM`, one `COPY` per file, the labels and the entrypoint, and the files),
//! so nothing is pulled for `FROM scratch`, and a base image is taken from the engine's local
//! images. An image is named after what it holds (the binary's SHA-256), so it is built once per
//! binary and reused while it exists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Label of h9sandbox's images (value: the SHA-256 of the h9sandbox binary they hold): the
/// images are h9sandbox's, and may be removed (`docker image rm`) once no container uses them.
/// Never `h9sandbox` itself: a container inherits its image's labels, and that one marks a
/// sandbox's container.
pub(crate) const LABEL_RUNTIME: &str = "h9sandbox.runtime";

/// The repository of h9sandbox's runtime images (tag: 16 hex digits of the binary's SHA-256).
pub(crate) const RUNTIME_REPOSITORY: &str = "h9sandbox-runtime";

/// Where the runtime image holds the binary.
pub(crate) const RUNTIME_BINARY: &str = "/h9sandbox";

/// One file of the host copied into an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageFile {
    /// The file on the host (a regular file; read when the image is built).
    pub source: PathBuf,
    /// Its absolute path in the image.
    pub target: String,
    /// Its mode bits in the image (e.g. `0o755`).
    pub mode: u32,
}

/// An image to build ([`super::Environment::ensure_image`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageBuild {
    /// Its name, `repository:tag`, which says what it holds (it is built only when missing).
    pub tag: String,
    /// The image it starts from, one the engine has locally; `None`: nothing (`FROM scratch`).
    pub base: Option<String>,
    /// The files laid on it.
    pub files: Vec<ImageFile>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its entrypoint (exec form); empty: the base's.
    pub entrypoint: Vec<String>,
}

impl ImageBuild {
    /// h9sandbox's runtime image for the static binary `binary`: only that file, at
    /// [`RUNTIME_BINARY`], mode 0755, `FROM scratch`, its entrypoint; no shell, no libraries,
    /// no `/etc` (the engine supplies `/etc/hosts` and `/etc/resolv.conf`), no environment.
    /// Named `h9sandbox-runtime:<16 hex digits of its SHA-256>` and labelled [`LABEL_RUNTIME`].
    /// Errors: the binary cannot be read.
    pub(crate) fn runtime(binary: &Path) -> Result<ImageBuild> {
        let digest = file_sha256(binary)?;
        Ok(ImageBuild {
            tag: format!("{RUNTIME_REPOSITORY}:{}", &digest[..16]),
            base: None,
            files: vec![ImageFile {
                source: binary.to_path_buf(),
                target: RUNTIME_BINARY.into(),
                mode: 0o755,
            }],
            labels: BTreeMap::from([(LABEL_RUNTIME.to_string(), digest)]),
            entrypoint: vec![RUNTIME_BINARY.into()],
        })
    }

    /// The `Dockerfile` of the build: the context holds file `i` of [`ImageBuild::files`] as
    /// `f<i>`.
    pub(crate) fn dockerfile(&self) -> String {
        let json = |v: &str| serde_json::to_string(v).unwrap_or_default();
        let mut d = format!("FROM {}\n", self.base.as_deref().unwrap_or("scratch"));
        for (i, f) in self.files.iter().enumerate() {
            d.push_str(&format!("COPY [\"f{i}\", {}]\n", json(&f.target)));
        }
        for (k, v) in &self.labels {
            d.push_str(&format!("LABEL {}={}\n", json(k), json(v)));
        }
        if !self.entrypoint.is_empty() {
            d.push_str(&format!(
                "ENTRYPOINT {}\n",
                serde_json::to_string(&self.entrypoint).unwrap_or_default()
            ));
        }
        d
    }
}

/// The SHA-256 of the file at `path`, in hex. Errors: the file cannot be read.
pub(crate) fn file_sha256(path: &Path) -> Result<String> {
    use sha2::Digest;
    use std::io::Read;
    let mut f = std::fs::File::open(path)
        .with_context(|| format!("cannot read {} to name its image", path.display()))?;
    let mut hash = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("cannot read {} to name its image", path.display()))?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// A ustar header for a regular file `name` of `size` bytes and mode `mode`, owned by root,
/// dated the epoch (the build's result depends on the content only).
fn header(name: &str, size: u64, mode: u32) -> Result<tar::Header> {
    let mut h = tar::Header::new_ustar();
    h.set_path(name)?;
    h.set_size(size);
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    Ok(h)
}

/// Writes the build context of `build` to `out` as a tar stream (the `Dockerfile`, then each
/// file as `f<i>`), reading the files as it goes (never holding one in memory). Errors: a file
/// that cannot be read, or that changed size meanwhile; the stream's.
pub(crate) async fn write_context<W: AsyncWrite + Unpin>(
    build: &ImageBuild,
    out: &mut W,
) -> Result<()> {
    async fn pad<W: AsyncWrite + Unpin>(out: &mut W, size: u64) -> std::io::Result<()> {
        let rest = (512 - size % 512) % 512;
        out.write_all(&vec![0u8; rest as usize]).await
    }
    let dockerfile = build.dockerfile();
    out.write_all(header("Dockerfile", dockerfile.len() as u64, 0o644)?.as_bytes())
        .await?;
    out.write_all(dockerfile.as_bytes()).await?;
    pad(out, dockerfile.len() as u64).await?;
    for (i, f) in build.files.iter().enumerate() {
        let file = tokio::fs::File::open(&f.source)
            .await
            .with_context(|| format!("cannot read {}", f.source.display()))?;
        let size = file.metadata().await?.len();
        out.write_all(header(&format!("f{i}"), size, f.mode)?.as_bytes())
            .await?;
        let copied = tokio::io::copy(&mut tokio::io::AsyncReadExt::take(file, size), out).await?;
        anyhow::ensure!(
            copied == size,
            "{} changed while it was copied into an image",
            f.source.display()
        );
        pad(out, size).await?;
    }
    out.write_all(&[0u8; 1024]).await?;
    out.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_runtime_image_holds_only_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("h9sandbox");
        std::fs::write(&bin, b"\x7fELF not really").unwrap();
        let b = ImageBuild::runtime(&bin).unwrap();
        assert!(b.tag.starts_with("h9sandbox-runtime:") && b.tag.len() == 18 + 16);
        assert_eq!(
            b.dockerfile(),
            format!(
                "FROM scratch\nCOPY [\"f0\", \"/h9sandbox\"]\nLABEL \"h9sandbox.runtime\"=\"{}\"\nENTRYPOINT [\"/h9sandbox\"]\n",
                b.labels[LABEL_RUNTIME]
            )
        );
        // Another binary, another image.
        std::fs::write(&bin, b"\x7fELF another").unwrap();
        assert_ne!(ImageBuild::runtime(&bin).unwrap().tag, b.tag);
        // The context is a tar stream the tar crate reads back: the Dockerfile and the file.
        let mut ctx = Vec::new();
        write_context(&ImageBuild::runtime(&bin).unwrap(), &mut ctx)
            .await
            .unwrap();
        let mut a = tar::Archive::new(&ctx[..]);
        let entries: Vec<(String, u64, u32)> = a
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                (
                    e.path().unwrap().display().to_string(),
                    h.size().unwrap(),
                    h.mode().unwrap(),
                )
            })
            .collect();
        assert_eq!(entries[1], ("f0".into(), 12, 0o755));
        assert_eq!(entries[0].0, "Dockerfile");
        assert_eq!(entries.len(), 2);
    }
}
