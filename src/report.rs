//! How the core and the engine tell the front end what happens, and how a command's output
//! reaches our own stdout and stderr.
//!
//! [`Reporter`] is the one channel from the layers below the front ends to a person: warnings,
//! notes, the step a slow operation is at, and the engine command lines `-v` shows. The front
//! end supplies it (the CLI draws steps on a spinner, the MCP server writes to stderr); the core
//! and the engine never print diagnostics themselves.
//!
//! One terminal has one status line (the CLI's spinner), so it is registered process-wide with
//! [`set_status_line`]. Everything else that writes to the terminal while it is drawn (a
//! command's forwarded output, a warning, `-v` command lines) goes through [`Forward`] or
//! [`eprintln()`], which move the status line out of the way ([`StatusLine::suspend`]) and write
//! whole lines only, so a redraw never erases half a line. Without a status line they write
//! straight through, at the cost of one atomic load.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;

/// What the core and the engine tell the person behind the front end. Implementations must be
/// cheap: they are called on hot paths (`verbose` before every engine call).
pub trait Reporter: Send + Sync {
    /// A warning for a person (the CLI prints `h9sandbox: warning: MSG` on stderr).
    fn warn(&self, msg: &str);
    /// Information for a person (the CLI prints `h9sandbox: note: MSG` on stderr). Callers send
    /// details meant for `-v` only when [`Reporter::verbose`] is true.
    fn note(&self, _msg: &str) {}
    /// The step a slow operation (`up`, a bootstrap) is at now, e.g. `creating container`.
    fn step(&self, _step: &str) {}
    /// An engine command line about to run (`+ docker run …`, ready to paste into a terminal);
    /// sent only when [`Reporter::verbose`] is true.
    fn command(&self, _line: &str) {}
    /// Whether `-v` was given: notes for `-v` and engine command lines are wanted.
    fn verbose(&self) -> bool {
        false
    }
}

/// A reporter that drops everything (for tests, and for callers that want no diagnostics).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Silent;

impl Reporter for Silent {
    fn warn(&self, _msg: &str) {}
}

/// A reporter writing to stderr (above the status line, if one is drawn): warnings as
/// `h9sandbox: warning: MSG`, notes as `h9sandbox: note: MSG`, engine command lines as they are.
/// Steps are not shown.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stderr {
    /// Whether `-v` was given.
    pub verbose: bool,
}

impl Reporter for Stderr {
    fn warn(&self, msg: &str) {
        eprintln(&format!("h9sandbox: warning: {msg}"));
    }

    fn note(&self, msg: &str) {
        eprintln(&format!("h9sandbox: note: {msg}"));
    }

    fn command(&self, line: &str) {
        eprintln(line);
    }

    fn verbose(&self) -> bool {
        self.verbose
    }
}

/// A line drawn at the bottom of the terminal (the CLI's spinner) that other output must not
/// garble.
pub(crate) trait StatusLine: Send + Sync {
    /// Hides the line, runs `f` (which writes whole lines to stdout or stderr), draws it again.
    fn suspend(&self, f: &mut dyn FnMut());
}

/// Whether a status line is installed (cheap check on every forwarded write).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The installed status line, if any.
static LINE: Mutex<Option<Arc<dyn StatusLine>>> = Mutex::new(None);

/// Installs `line` as the process's status line, or removes it (`None`).
pub(crate) fn set_status_line(line: Option<Arc<dyn StatusLine>>) {
    let mut slot = LINE.lock().unwrap_or_else(|e| e.into_inner());
    let shown = line.is_some();
    if !shown {
        ACTIVE.store(false, Ordering::Release);
    }
    *slot = line;
    if shown {
        ACTIVE.store(true, Ordering::Release);
    }
}

/// Whether a status line is drawn right now.
pub(crate) fn status_line_shown() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// The installed status line, if one is drawn.
fn live() -> Option<Arc<dyn StatusLine>> {
    if !ACTIVE.load(Ordering::Acquire) {
        return None;
    }
    LINE.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Forwarded output without a line break is written anyway once this much has piled up.
const MAX_PENDING: usize = 8 * 1024;

/// `text` safe to show on a terminal: every control character but newline and tab (C0, DEL, C1:
/// terminal escape sequences, carriage returns, bells) written as a Rust escape (`\u{1b}`).
/// Diagnostics carry text that a sandbox controls (file names, the agent's messages, the
/// commands a sandbox lists), which must not be able to rewrite the caller's screen.
pub(crate) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Prints `line` and a newline on stderr, above the status line when one is drawn. Control
/// characters are escaped ([`printable`]).
pub(crate) fn eprintln(line: &str) {
    let line = printable(line);
    match live() {
        Some(status) => status.suspend(&mut || eprintln!("{line}")),
        None => eprintln!("{line}"),
    }
}

/// One of our own output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Copies a child's output to one of our streams as it arrives. While a status line is drawn,
/// bytes are written a whole line at a time (up to the last `\n` or `\r`) above it; the rest
/// waits for its line break, for `MAX_PENDING` bytes, or for [`Forward::finish`].
#[derive(Debug)]
pub(crate) struct Forward {
    stream: Stream,
    pending: Vec<u8>,
    /// Set once a write found our stream closed (EPIPE: the reader went away).
    pub broken: bool,
}

impl Forward {
    /// A forwarder to `stream`.
    pub(crate) fn new(stream: Stream) -> Forward {
        Forward {
            stream,
            pending: Vec::new(),
            broken: false,
        }
    }

    /// Writes `bytes` (errors, e.g. a closed pipe, are ignored: the child's status still counts).
    pub(crate) async fn write(&mut self, bytes: &[u8]) {
        let Some(status) = live() else {
            if !self.pending.is_empty() {
                let pending = std::mem::take(&mut self.pending);
                self.write_direct(&pending).await;
            }
            return self.write_direct(bytes).await;
        };
        self.pending.extend_from_slice(bytes);
        let cut = match self.pending.iter().rposition(|&b| b == b'\n' || b == b'\r') {
            Some(i) => i + 1,
            None if self.pending.len() >= MAX_PENDING => self.pending.len(),
            None => return,
        };
        let lines: Vec<u8> = self.pending.drain(..cut).collect();
        let stream = self.stream;
        status.suspend(&mut || write_blocking(stream, &lines));
    }

    /// Writes whatever still waits for a line break (ending it with one while a status line is
    /// drawn, or its redraw would erase it).
    pub(crate) async fn finish(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        match live() {
            Some(status) => {
                pending.push(b'\n');
                let stream = self.stream;
                status.suspend(&mut || write_blocking(stream, &pending));
            }
            None => self.write_direct(&pending).await,
        }
    }

    async fn write_direct(&mut self, bytes: &[u8]) {
        if self.broken {
            return;
        }
        let r = match self.stream {
            Stream::Stdout => {
                let mut out = tokio::io::stdout();
                match out.write_all(bytes).await {
                    Ok(()) => out.flush().await,
                    e => e,
                }
            }
            Stream::Stderr => {
                let mut err = tokio::io::stderr();
                match err.write_all(bytes).await {
                    Ok(()) => err.flush().await,
                    e => e,
                }
            }
        };
        if matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe) {
            self.broken = true;
        }
    }
}

fn write_blocking(stream: Stream, bytes: &[u8]) {
    let _ = match stream {
        Stream::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes).and_then(|_| out.flush())
        }
        Stream::Stderr => {
            let mut err = std::io::stderr().lock();
            err.write_all(bytes).and_then(|_| err.flush())
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_report_nothing() {
        let s = Silent;
        s.warn("dropped");
        s.note("dropped");
        s.step("dropped");
        assert!(!s.verbose());
        assert!(Stderr { verbose: true }.verbose());
    }

    #[test]
    fn control_characters_are_escaped_lines_and_tabs_kept() {
        assert!(matches!(
            printable("plain é\tx\ny"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            printable("a\u{1b}]0;pwned\u{7}b\rc\u{9b}d\u{7f}"),
            "a\\u{1b}]0;pwned\\u{7}b\\rc\\u{9b}d\\u{7f}"
        );
    }
}
