//! Progress on stderr: an indicatif spinner showing the current step of a slow subcommand (`up`,
//! `bootstrap`) and how long that step has run, kept below the output that streams meanwhile.
//!
//! The spinner is drawn only when stderr is a terminal and the format is `table`; in pipes and in
//! JSON mode nothing of it is written (and nothing is allocated: a disabled [`Spinner`] is an empty
//! `Option`). One terminal has one status line, so the live spinner is registered process-wide:
//! everything else that writes to the terminal while it runs (a command's forwarded output, a
//! warning, `-v` command lines) goes through [`Forward`] or [`eprintln`], which move the spinner
//! out of the way (`ProgressBar::suspend`) and write whole lines only, so a redraw never erases
//! half a line. Without a live spinner they write straight through, at the cost of one atomic load.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::io::AsyncWriteExt;

use crate::cli::Format;

/// Whether a spinner is live (cheap check on every forwarded write).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The live spinner, if any.
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// How often the spinner redraws (and its elapsed time advances).
const TICK: Duration = Duration::from_millis(120);
/// Forwarded output without a line break is written anyway once this much has piled up.
const MAX_PENDING: usize = 8 * 1024;

/// A spinner on stderr with the current step and its elapsed time; cleared when dropped.
#[must_use = "the spinner disappears when dropped"]
pub struct Spinner {
    bar: Option<ProgressBar>,
}

impl Spinner {
    /// A spinner when `format` is table and stderr is a terminal; otherwise one that draws nothing.
    pub fn new(format: Format) -> Spinner {
        if format != Format::Table || !std::io::stderr().is_terminal() {
            return Spinner::disabled();
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .expect("the template is valid"),
        );
        bar.enable_steady_tick(TICK);
        *BAR.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar.clone());
        ACTIVE.store(true, Ordering::Release);
        Spinner { bar: Some(bar) }
    }

    /// A spinner that draws nothing.
    pub fn disabled() -> Spinner {
        Spinner { bar: None }
    }

    /// Whether it is drawn.
    pub fn enabled(&self) -> bool {
        self.bar.is_some()
    }

    /// Shows `step` (e.g. `creating container`) and restarts the elapsed time.
    pub fn step(&self, step: impl Into<Cow<'static, str>>) {
        if let Some(bar) = &self.bar {
            bar.reset_elapsed();
            bar.set_message(step);
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            ACTIVE.store(false, Ordering::Release);
            BAR.lock().unwrap_or_else(|e| e.into_inner()).take();
            bar.finish_and_clear();
        }
    }
}

/// Whether a spinner is being drawn right now.
pub fn drawing() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// The live spinner, if one is drawn.
fn live() -> Option<ProgressBar> {
    if !ACTIVE.load(Ordering::Acquire) {
        return None;
    }
    BAR.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Prints `line` and a newline on stderr, above the spinner when one is drawn.
pub fn eprintln(line: &str) {
    match live() {
        Some(bar) => bar.suspend(|| eprintln!("{line}")),
        None => eprintln!("{line}"),
    }
}

/// One of our own output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Copies a child's output to one of our streams as it arrives. While a spinner is drawn, bytes
/// are written a whole line at a time (up to the last `\n` or `\r`) above the spinner; the rest
/// waits for its line break, for [`MAX_PENDING`] bytes, or for [`Forward::finish`].
#[derive(Debug)]
pub struct Forward {
    stream: Stream,
    pending: Vec<u8>,
    /// Set once a write found our stream closed (EPIPE: the reader went away).
    pub broken: bool,
}

impl Forward {
    /// A forwarder to `stream`.
    pub fn new(stream: Stream) -> Forward {
        Forward {
            stream,
            pending: Vec::new(),
            broken: false,
        }
    }

    /// Writes `bytes` (errors, e.g. a closed pipe, are ignored: the child's status still counts).
    pub async fn write(&mut self, bytes: &[u8]) {
        let Some(bar) = live() else {
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
        bar.suspend(|| write_blocking(stream, &lines));
    }

    /// Writes whatever still waits for a line break (ending it with one while a spinner is
    /// drawn, or the spinner's redraw would erase it).
    pub async fn finish(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        match live() {
            Some(bar) => {
                pending.push(b'\n');
                let stream = self.stream;
                bar.suspend(|| write_blocking(stream, &pending));
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
    fn disabled_outside_a_terminal_and_in_json_mode() {
        // `cargo test` captures nothing of stderr's fd, but JSON mode never draws, terminal or not.
        let s = Spinner::new(Format::Json);
        assert!(!s.enabled());
        s.step("nothing happens");
        assert!(live().is_none());
    }
}
