//! Reading files of the work dir ([`WorkDir::read_to_fd`], [`WorkDir::read_lines`], ...): every
//! path resolved beneath the work dir ([`super`]), every read bounded.

use super::*;
/// How many bytes of a file [`WorkDir::read_lines`] scans at most (256 MiB): lines past them
/// are not reached, and a planted huge (e.g. sparse) file cannot keep the host's CPU busy.
pub(crate) const SCAN_MAX_BYTES: u64 = 256 << 20;

/// How many bytes at the start of a file [`Lines::binary`] looks at.
pub(super) const BINARY_PROBE: usize = 8 * 1024;

impl WorkDir {
    /// Opens the regular file `user` for reading. Errors: escapes ([`Error::PathEscape`]), a
    /// missing file, and anything but a regular file (a FIFO is opened non-blocking, so a planted
    /// one cannot hang us).
    pub(crate) fn open_file(&self, user: &Path) -> Result<(File, Stat)> {
        let rel = self.relative(user)?;
        let fd = self.open_beneath(
            user,
            &rel,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
        )?;
        let (file, st) = regular_file(user, fd)?;
        self.check_access(user, &st, MAY_READ, "read")?;
        Ok((file, st))
    }

    /// Copies the file `user` (at most `max` bytes) to the descriptor `out` (a file, pipe, socket
    /// or terminal) inside the kernel where it can, see [`pump`]: the bytes never pass through
    /// this process's memory, which stays flat whatever the size. Errors: escapes
    /// ([`Error::PathEscape`]), a missing file, anything but a regular file (a FIFO is opened
    /// non-blocking, so a planted one cannot hang us), `out`'s write errors.
    pub(crate) fn read_to_fd(
        &self,
        user: &Path,
        max: Option<u64>,
        out: BorrowedFd<'_>,
    ) -> Result<ReadInfo> {
        let (file, st) = self.open_file(user)?;
        let bytes = pump(&file, out, max)
            .with_context(|| format!("cannot copy out {}", self.host_path(user).display()))?;
        Ok(ReadInfo {
            path: self.host_path(user),
            size: file_size(&st),
            bytes,
        })
    }

    /// The first `max` bytes (all without a cap) of the file `user`, with its size, when they
    /// are at most `hold` bytes; otherwise, without reading them, `Err(size)`: the bytes there
    /// are (the file's size, checked before reading, or `hold + 1` when it grew past `hold`
    /// while being read). Memory stays within `hold` whatever the file (a sparse file reports
    /// any size). Errors (outer) as for [`WorkDir::read_to_fd`].
    pub(crate) fn read_bytes(
        &self,
        user: &Path,
        max: Option<u64>,
        hold: u64,
    ) -> Result<Result<(Vec<u8>, ReadInfo), u64>> {
        let (file, st) = self.open_file(user)?;
        let size = file_size(&st);
        let want = max.map_or(size, |m| m.min(size));
        if want > hold {
            return Ok(Err(size));
        }
        let limit = max.unwrap_or(u64::MAX).min(hold.saturating_add(1));
        // A capacity hint only (want is at most `hold`).
        let mut buf = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
        let bytes = file
            .take(limit)
            .read_to_end(&mut buf)
            .with_context(|| format!("cannot read {}", self.host_path(user).display()))?
            as u64;
        if bytes > hold {
            return Ok(Err(bytes));
        }
        let info = ReadInfo {
            path: self.host_path(user),
            size,
            bytes,
        };
        Ok(Ok((buf, info)))
    }

    /// Lines `first` (1-based; 0 counts as 1) onwards of the file `user`: at most `limit` of
    /// them, and at most `max_bytes` bytes of them (each counted with its line break), but
    /// always at least the first wanted line (cut to `max_bytes` when it alone is longer).
    /// Streams: memory stays bounded by the cap whatever the file's size, and the rest of the
    /// file is only counted. Errors as for [`WorkDir::read_to_fd`].
    pub(crate) fn read_lines(
        &self,
        user: &Path,
        first: u64,
        limit: u64,
        max_bytes: usize,
    ) -> Result<Lines> {
        let (file, st) = self.open_file(user)?;
        let host = self.host_path(user);
        let reader = io::BufReader::with_capacity(64 * 1024, file.take(SCAN_MAX_BYTES));
        let mut lines = scan_lines(reader, first, limit, max_bytes)
            .with_context(|| format!("cannot read {}", host.display()))?;
        lines.path = host;
        lines.size = file_size(&st);
        Ok(lines)
    }
}

/// [`WorkDir::read_lines`] on any reader; `path` and `size` are left empty.
pub(crate) fn scan_lines<R: BufRead>(
    mut r: R,
    first: u64,
    limit: u64,
    max_bytes: usize,
) -> io::Result<Lines> {
    let first = first.max(1);
    let mut out = Lines {
        path: PathBuf::new(),
        size: 0,
        first,
        lines: Vec::new(),
        total: 0,
        cut: false,
        open_end: false,
        binary: false,
    };
    let probe = r.fill_buf()?;
    out.binary = memchr::memchr(0, &probe[..probe.len().min(BINARY_PROBE)]).is_some();
    let mut collecting = limit > 0;
    let mut used = 0usize; // bytes of the lines kept, line breaks included
    let mut line: Vec<u8> = Vec::new(); // the wanted line being read, at most the room left + 1
    let mut partial = false; // a line without its `\n` yet has been read
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let n = buf.len();
        if !collecting {
            // Only counting now.
            out.total += memchr::memchr_iter(b'\n', buf).count() as u64;
            partial = buf[n - 1] != b'\n';
            r.consume(n);
            continue;
        }
        let (seg, newline) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        let line_no = out.total + 1;
        if line_no >= first {
            let room = (max_bytes - used.min(max_bytes)) + 1;
            let take = seg.len().min(room.saturating_sub(line.len()));
            line.extend_from_slice(&seg[..take]);
        }
        let consumed = seg.len() + usize::from(newline);
        partial = !newline;
        r.consume(consumed);
        if newline {
            end_line(
                &mut out,
                &mut line,
                &mut used,
                &mut collecting,
                limit,
                max_bytes,
            );
        }
    }
    out.open_end = partial;
    if partial {
        if collecting {
            end_line(
                &mut out,
                &mut line,
                &mut used,
                &mut collecting,
                limit,
                max_bytes,
            );
        } else {
            out.total += 1;
        }
    }
    out.binary |= out.lines.iter().any(|l| memchr::memchr(0, l).is_some());
    Ok(out)
}

/// Ends line number `out.total + 1` of [`scan_lines`]: keeps it when it is wanted and fits.
fn end_line(
    out: &mut Lines,
    line: &mut Vec<u8>,
    used: &mut usize,
    collecting: &mut bool,
    limit: u64,
    max_bytes: usize,
) {
    out.total += 1;
    if out.total < out.first {
        return;
    }
    let mut text = std::mem::take(line);
    if *used + text.len() + 1 > max_bytes {
        // Too long for what is left: it starts the next run, unless it is the first line, which
        // is returned cut rather than never.
        if out.lines.is_empty() {
            out.cut = text.len() > max_bytes;
            text.truncate(max_bytes);
            out.lines.push(text);
        }
        *collecting = false;
        return;
    }
    *used += text.len() + 1;
    out.lines.push(text);
    if out.lines.len() as u64 >= limit {
        *collecting = false;
    }
}

/// Size of the buffer of [`pump`]'s last resort, as GNU `cat` uses.
pub(super) const PUMP_BUFFER: usize = 128 * 1024;

/// Copies from the current offset of `src` to `dst` until EOF or `max` bytes: with
/// `copy_file_range(2)` (file to file, in the kernel, reflinked where the file system can), else
/// `sendfile(2)` (file to pipe, socket or anything), else `read`/`write` through one 128 KiB buffer
/// (`dst` opened with `O_APPEND`, or a kernel that has neither). Returns the bytes copied.
pub(crate) fn pump(src: &File, dst: BorrowedFd<'_>, max: Option<u64>) -> io::Result<u64> {
    /// Errors meaning "this method does not apply here" when no byte was copied yet.
    fn unsupported(e: Errno) -> bool {
        matches!(
            e,
            Errno::XDEV | Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP | Errno::BADF
        )
    }
    let mut left = max.unwrap_or(u64::MAX);
    let mut total = 0u64;
    let chunk = |left: u64| left.min(1 << 30) as usize;
    let mut method = 0;
    while left > 0 {
        let r = match method {
            0 => rustix::fs::copy_file_range(src, None, dst, None, chunk(left)),
            1 => rustix::fs::sendfile(dst, src, None, chunk(left)),
            _ => break,
        };
        match r {
            Ok(0) => return Ok(total),
            Ok(n) => {
                total += n as u64;
                left -= n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) if total == 0 && unsupported(e) => method += 1,
            Err(e) => return Err(e.into()),
        }
    }
    if left == 0 {
        return Ok(total);
    }
    let mut buf = vec![0u8; PUMP_BUFFER];
    let mut src = src;
    let mut dst = File::from(dst.try_clone_to_owned()?);
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = match src.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        dst.write_all(&buf[..n])?;
        total += n as u64;
        left -= n as u64;
    }
    Ok(total)
}
