//! Image builds ([`Environment::ensure_image`]): the context as a tar stream on the client's
//! stdin (Docker) or unpacked in a temporary directory (Podman), its output held bounded.

use std::process::Stdio;

use anyhow::{anyhow, Context, Result};

use super::*;
use crate::engine::ENGINE_OUTPUT_MAX;

impl Docker {
    /// Builds `build` ([`Environment::ensure_image`]): `build -q -t TAG -` with the context as a
    /// tar stream on stdin (Docker), or (Podman, whose `build -` takes a Containerfile, not a
    /// context) from the context unpacked in a temporary directory. The engine's output is held
    /// bounded.
    pub(super) async fn build_image(&self, build: &crate::engine::image::ImageBuild) -> Result<()> {
        let mut args: Vec<String> =
            vec!["build".into(), "-q".into(), "-t".into(), build.tag.clone()];
        let _context_dir;
        let mut cmd = match self.flavor {
            Flavor::Docker => {
                args.push("-".into());
                let mut c = self.command(args);
                c.stdin(Stdio::piped());
                c
            }
            Flavor::Podman => {
                let dir = tempfile::tempdir().context("cannot make a build context")?;
                let mut tar = Vec::new();
                crate::engine::image::write_context(build, &mut tar).await?;
                tar::Archive::new(&tar[..])
                    .unpack(dir.path())
                    .context("cannot unpack the build context")?;
                args.push(dir.path().to_string_lossy().into_owned());
                _context_dir = dir;
                self.command(args)
            }
        };
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| self.spawn_error(e))?;
        let stdin = child.stdin.take();
        let feed = async {
            match stdin {
                Some(mut stdin) => {
                    let r = crate::engine::image::write_context(build, &mut stdin).await;
                    drop(stdin);
                    r
                }
                None => Ok(()),
            }
        };
        let (fed, out) = tokio::join!(
            feed,
            crate::engine::collect_bounded(child, ENGINE_OUTPUT_MAX)
        );
        let out = out?;
        let code = out.status.and_then(|s| s.code()).unwrap_or(-1);
        if code != 0 {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(anyhow!(
                "`{} build` of {} failed: {}",
                self.bin,
                build.tag,
                first_error_line(&stderr)
            ));
        }
        fed.with_context(|| format!("cannot send {}'s build context to {}", build.tag, self.bin))?;
        // Another process may have built the same image meanwhile and taken the name last:
        // ours is then an unnamed copy nobody uses, removed (never by force).
        let ours = String::from_utf8_lossy(&out.stdout)
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix("sha256:").map(str::to_string));
        if let Some(ours) = ours {
            let (code, named, _) = self
                .output(vec![
                    "image".into(),
                    "inspect".into(),
                    "--format".into(),
                    "{{.Id}}".into(),
                    build.tag.clone(),
                ])
                .await?;
            if code == 0 && named.trim().trim_start_matches("sha256:") != ours {
                let _ = self
                    .output(vec!["image".into(), "rm".into(), format!("sha256:{ours}")])
                    .await;
            }
        }
        Ok(())
    }
}
