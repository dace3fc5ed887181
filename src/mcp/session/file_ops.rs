//! `sandbox_read`, `sandbox_write` and `sandbox_edit`: files of a sandbox's work dir (and, for
//! reading, the rest of its container), confined to what the session may reach.

use std::path::PathBuf;

use anyhow::Result;

use super::Session;
use crate::error::Error;
use crate::mcp::tools::*;
use crate::sandbox::{container_files, host_files, workdir_of};

impl Session {
    /// The directory a `sandbox_up` `workdir` names, which must lie inside the server's
    /// `--workdir`: relative to it, or absolute inside it, resolved beneath it by the kernel
    /// (`openat2(RESOLVE_BENEATH)`, [`crate::workdir_fs::WorkDir::dir_path`]), so `..`, an absolute
    /// path elsewhere and a symlink leading out are refused whatever the sandboxes there plant.
    /// [`create::create`](crate::sandbox::create::create) checks the result again (`within`)
    /// and opens it through no symlink.
    pub(super) fn confined(&self, w: &str) -> Result<PathBuf> {
        let root = crate::workdir_fs::WorkDir::open(&self.workdir)?;
        root.dir_path(std::path::Path::new(w)).map_err(|e| match e.downcast_ref::<Error>() {
            Some(Error::PathEscape(_)) => Error::Usage(format!(
                "workdir {w:?} leads outside this server's --workdir {}; give a directory inside it (relative to it, or absolute inside it)",
                self.workdir.display()
            ))
            .into(),
            _ => e.context(format!("workdir {w:?} cannot be used")),
        })
    }

    /// `sandbox_read`: [`crate::workdir_fs::WorkDir::read_lines`], on a blocking thread.
    pub(super) async fn read(&self, p: ReadParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let (rec, wd) = workdir_of(&self.ctx, &id)?;
        let max = usize::try_from(self.ctx.cfg.mcp_max_output_bytes).unwrap_or(usize::MAX);
        let first = p.offset.unwrap_or(1).max(1);
        let limit = p.limit.unwrap_or(DEFAULT_READ_LINES);
        let path = PathBuf::from(&p.path);
        let lines = match container_files::place(&rec, &path, false) {
            container_files::Place::WorkDir => {
                let wd = wd.open()?;
                tokio::task::spawn_blocking(move || wd.read_lines(&path, first, limit, max))
                    .await??
            }
            container_files::Place::Container(path) => {
                self.read_in_container(&rec, &path, first, limit, max)
                    .await?
            }
        };
        if lines.binary {
            return Err(Error::Refused(format!(
                "{} is a binary file ({} bytes, NUL bytes in it), not text; read it with sandbox_exec, e.g. `base64 {}` or `xxd {} | head`",
                lines.path.display(),
                lines.size,
                p.path,
                p.path
            ))
            .into());
        }
        let count = lines.lines.len() as u64;
        let mut content = String::new();
        for (i, l) in lines.lines.iter().enumerate() {
            let text = String::from_utf8_lossy(l);
            if p.line_numbers {
                content.push_str(&format!("{:>6}\t{text}", lines.first + i as u64));
            } else {
                content.push_str(&text);
            }
            // The file's last line keeps its missing line break missing.
            let last_of_file = lines.first + i as u64 == lines.total;
            if !(last_of_file && lines.open_end) || lines.cut {
                content.push('\n');
            }
        }
        let last = lines.first + count.saturating_sub(1);
        let next_offset = (count > 0 && last < lines.total).then_some(last + 1);
        let result = ReadResult {
            path: lines.path.display().to_string(),
            content,
            first_line: lines.first,
            lines: count,
            total_lines: lines.total,
            next_offset,
            truncated: lines.cut,
            size: lines.size,
        };
        let mut text = result.content.clone();
        if count == 0 {
            text = if lines.total == 0 {
                format!("{} is empty", result.path)
            } else {
                format!(
                    "{} has {} lines; offset {first} is past its end",
                    result.path, lines.total
                )
            };
        } else if let Some(n) = next_offset {
            text.push_str(&format!(
                "[lines {first}-{last} of {}{}; call sandbox_read with offset {n} for more]\n",
                lines.total,
                if lines.cut { ", the last one cut" } else { "" },
            ));
        }
        Done::new(&result, text)
    }

    /// The lines `sandbox_read` returns of the container's file `path` (outside the work dir):
    /// its first bytes (at most `json_max_bytes`, and the scan's own limit), read inside the
    /// container as the sandbox's user ([`container_files::read`]), scanned as on the host side.
    async fn read_in_container(
        &self,
        rec: &crate::state::Record,
        path: &std::path::Path,
        first: u64,
        limit: u64,
        max: usize,
    ) -> Result<crate::workdir_fs::Lines> {
        let cap = self
            .ctx
            .cfg
            .json_max_bytes
            .min(crate::workdir_fs::SCAN_MAX_BYTES);
        let mut bytes = Vec::new();
        let mut out = |b: &[u8]| -> Result<()> {
            bytes.extend_from_slice(b);
            Ok(())
        };
        let user = container_files::acting(rec, None)?;
        let size =
            container_files::read(&self.ctx, rec, user, path, Some(cap), None, &mut out).await?;
        let mut lines =
            crate::workdir_fs::scan_lines(std::io::Cursor::new(bytes), first, limit, max)?;
        lines.path = path.to_path_buf();
        lines.size = size;
        Ok(lines)
    }

    /// `sandbox_write`: [`host_files::write_from`] with `write`'s options for the sandbox (or, for a
    /// path outside the work dir, [`container_files::write`]).
    pub(super) async fn write(&self, p: WriteParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let (rec, wd) = workdir_of(&self.ctx, &id)?;
        if p.no_clobber && p.append {
            return Err(Error::Usage("no_clobber and append exclude each other".into()).into());
        }
        let mut opts = host_files::options(&rec, None, p.parents, p.append);
        opts.no_clobber = p.no_clobber;
        let data = std::io::Cursor::new(p.content.into_bytes());
        let path = PathBuf::from(&p.path);
        let (path, bytes_written, size) = match container_files::place(&rec, &path, false) {
            container_files::Place::WorkDir => {
                let w = host_files::write_from(&self.ctx, wd.open()?, path, data, opts).await?;
                (w.path, w.bytes_written, w.size)
            }
            container_files::Place::Container(path) => {
                let user = container_files::acting(&rec, None)?;
                let w = container_files::write(&self.ctx, &rec, user, &path, Box::new(data), &opts)
                    .await?;
                (w.path, w.bytes_written, w.size)
            }
        };
        let result = WriteResult {
            path: path.display().to_string(),
            bytes_written,
            size,
        };
        let text = format!(
            "wrote {} bytes to {} (now {} bytes)",
            result.bytes_written, result.path, result.size
        );
        Done::new(&result, text)
    }

    /// `sandbox_edit`: [`host_files::replace`].
    pub(super) async fn edit(&self, p: EditParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let (rec, wd) = workdir_of(&self.ctx, &id)?;
        let path = PathBuf::from(&p.path);
        let result = match container_files::place(&rec, &path, false) {
            container_files::Place::WorkDir => {
                let e =
                    host_files::replace(&self.ctx, wd.open()?, path, p.old, p.new, p.replace_all)
                        .await?;
                EditResult {
                    path: e.path.display().to_string(),
                    replacements: e.replacements as u64,
                    size: e.size,
                }
            }
            container_files::Place::Container(path) => {
                let user = container_files::acting(&rec, None)?;
                let (count, size) = container_files::edit(
                    &self.ctx,
                    &rec,
                    user,
                    &path,
                    p.old.as_bytes(),
                    p.new.as_bytes(),
                    p.replace_all,
                )
                .await?;
                EditResult {
                    path: path.display().to_string(),
                    replacements: count as u64,
                    size,
                }
            }
        };
        let text = format!(
            "replaced {} occurrence{} in {}",
            result.replacements,
            if result.replacements == 1 { "" } else { "s" },
            result.path
        );
        Done::new(&result, text)
    }
}
