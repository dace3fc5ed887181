//! Where the command's output goes ([`Sink`]) and what comes back: the [`Outcome`], its captured
//! streams ([`Captured`]), and the one document both front ends report it as ([`ExecResult`]).

use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;

use crate::report::Stream;
use crate::sandbox::signals::Interruption;
use crate::types::Signal;

/// Where a stream of the command goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sink {
    /// Straight to our own stdout/stderr, as it arrives.
    Forward,
    /// Both streams to our own stderr, as they arrive (keeps our stdout for a result: `up`'s ID,
    /// a JSON document).
    Stderr,
    /// Into memory, keeping at most this many bytes of each stream (the rest is counted and
    /// dropped).
    Capture(usize),
    /// Into memory, keeping at most this many bytes of each stream: the first half and the
    /// last half (a rolling window), so that both the start of the output and how it ended
    /// survive; the bytes between are counted and dropped. For output read by a model.
    CaptureEnds(usize),
}

impl Sink {
    /// Where a forwarding sink sends the command's stdout; `None` when it captures.
    pub(in crate::sandbox) fn stdout_target(self) -> Option<Stream> {
        match self {
            Sink::Forward => Some(Stream::Stdout),
            Sink::Stderr => Some(Stream::Stderr),
            Sink::Capture(_) | Sink::CaptureEnds(_) => None,
        }
    }

    /// The bytes a capturing sink keeps of the start and of the end of each stream; `None`
    /// when it forwards.
    pub(in crate::sandbox) fn caps(self) -> Option<(usize, usize)> {
        match self {
            Sink::Capture(n) => Some((n, 0)),
            Sink::CaptureEnds(n) => Some((n - n / 2, n / 2)),
            Sink::Forward | Sink::Stderr => None,
        }
    }
}

/// The result of one command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Exit status: the command's (128+N for signal N), or 124 on timeout.
    pub exit_code: i32,
    /// Captured stdout (empty when forwarded).
    pub stdout: Captured,
    /// Captured stderr (empty when forwarded).
    pub stderr: Captured,
    /// Both streams captured together, chunk by chunk in the order they were read (kept as
    /// each stream is, at the sink's cap); empty when forwarded. Through the agent that is the
    /// order in which the agent read the command's two pipes; through the engine's exec, the
    /// order in which h9sandbox read the engine client's two pipes (see docs/reference/json.md).
    pub combined: Captured,
    /// Wall-clock time from start to exit.
    pub duration: Duration,
    /// Whether the timeout killed the process tree.
    pub timed_out: bool,
    /// What made us kill the tree (a signal to h9sandbox, our stdout closed, the caller's
    /// `stop`), if something did.
    pub interrupted: Option<Interruption>,
    /// Whether a timeout or signal made us kill the tree and the kill succeeded.
    pub tree_killed: bool,
    /// Whether the kernel's OOM killer ended the command (known through the agent; through the
    /// engine's exec, the in-container wrapper says so on the command's stderr instead).
    pub oom_killed: bool,
    /// The signal that ended the command's own process (its wait status, through the agent);
    /// `None` when it exited, and always through the engine's exec, where only the exit status
    /// (128+N) is known.
    pub signal: Option<Signal>,
}

impl Outcome {
    /// Why the command ended, one stable word (the first that applies): `timed_out` (its
    /// timeout killed the tree: exit 124), `interrupted` (h9sandbox killed the tree because of
    /// [`Outcome::interrupted`]: a signal to it, its stdout closed, the caller cancelled),
    /// `oom_killed` (the kernel's OOM killer), `signal` (a signal ended the command's own
    /// process: [`Outcome::signal`]), `exited` (it exited by itself, with `exit_code`).
    pub(crate) fn ended(&self) -> &'static str {
        if self.timed_out {
            "timed_out"
        } else if self.interrupted.is_some() {
            "interrupted"
        } else if self.oom_killed {
            "oom_killed"
        } else if self.signal.is_some() {
            "signal"
        } else {
            "exited"
        }
    }

    /// The name of the signal that ended the command's own process (`SIGKILL`), if one did.
    pub(crate) fn signal_name(&self) -> Option<String> {
        self.signal.map(|s| s.to_string())
    }
}

/// A captured stream: the first bytes kept, the last bytes kept ([`Sink::CaptureEnds`]), and
/// the total seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Captured {
    /// The kept prefix.
    pub bytes: Vec<u8>,
    /// The kept suffix: the stream's last bytes after `bytes` (empty unless the sink keeps the
    /// end and the stream outgrew the prefix).
    pub tail: std::collections::VecDeque<u8>,
    /// Total bytes the stream carried.
    pub total: u64,
}

impl Captured {
    /// Whether bytes were dropped.
    pub(crate) fn truncated(&self) -> bool {
        self.total > (self.bytes.len() + self.tail.len()) as u64
    }

    /// Keeps what `chunk` adds to the first `head` and the last `tail` bytes of the stream (the
    /// caller counts `total`).
    pub(in crate::sandbox) fn keep(&mut self, chunk: &[u8], head: usize, tail: usize) {
        let room = head.saturating_sub(self.bytes.len()).min(chunk.len());
        self.bytes.extend_from_slice(&chunk[..room]);
        let rest = &chunk[room..];
        if tail == 0 || rest.is_empty() {
            return;
        }
        let rest = &rest[rest.len().saturating_sub(tail)..];
        let overflow = (self.tail.len() + rest.len()).saturating_sub(tail);
        self.tail.drain(..overflow);
        self.tail.extend(rest);
    }

    /// The kept bytes as text, with a marker line where bytes were cut between the start and
    /// the end ([`Sink::CaptureEnds`]); also the number of bytes cut, 0 when nothing was.
    /// Characters are never split: a multi-byte character cut at either side of the gap is
    /// dropped whole (and counted as cut); invalid UTF-8 is replaced by U+FFFD.
    pub(crate) fn text_ends(&self) -> (String, u64) {
        if !self.truncated() || self.tail.is_empty() {
            let mut all = self.bytes.clone();
            all.extend(self.tail.iter());
            let cut = self.total - all.len() as u64;
            let whole = Captured {
                bytes: all,
                tail: Default::default(),
                total: self.total,
            };
            return (whole.text(), cut);
        }
        let mut head = &self.bytes[..];
        if let Err(e) = std::str::from_utf8(head) {
            if e.error_len().is_none() {
                head = &head[..e.valid_up_to()];
            }
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        // A character cut at the start of the tail shows as up to 3 continuation bytes.
        let skip = tail
            .iter()
            .take(3)
            .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
            .count();
        let tail = &tail[skip..];
        let cut = self.total - (head.len() + tail.len()) as u64;
        let text = format!(
            "{}\n[... {cut} bytes cut here (the start and the end are kept) ...]\n{}",
            String::from_utf8_lossy(head),
            String::from_utf8_lossy(tail)
        );
        (text, cut)
    }

    /// The bytes kept, as text: [`Captured::text_ends`] when the end was kept too, else
    /// [`Captured::text`].
    pub(crate) fn shown(&self) -> String {
        if self.tail.is_empty() {
            self.text()
        } else {
            self.text_ends().0
        }
    }

    /// The kept bytes as text: a multi-byte character cut by the cap is dropped whole, invalid
    /// UTF-8 is replaced by U+FFFD.
    pub(crate) fn text(&self) -> String {
        let mut bytes = &self.bytes[..];
        if self.truncated() {
            if let Err(e) = std::str::from_utf8(bytes) {
                if e.error_len().is_none() {
                    bytes = &bytes[..e.valid_up_to()];
                }
            }
        }
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// Bytes collected by a caller as a capturing [`Sink`] keeps them (e.g. a background command's
/// logs for a model).
#[derive(Debug, Clone, Default)]
pub(crate) struct Capture {
    captured: Captured,
    head: usize,
    tail: usize,
}

impl Capture {
    /// Keeps the first and the last halves of `max` bytes, as [`Sink::CaptureEnds`].
    pub(crate) fn ends(max: usize) -> Capture {
        let (head, tail) = Sink::CaptureEnds(max).caps().unwrap_or((max, 0));
        Capture {
            captured: Captured::default(),
            head,
            tail,
        }
    }

    /// Adds `bytes`.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.captured.total += bytes.len() as u64;
        self.captured.keep(bytes, self.head, self.tail);
    }

    /// What was kept.
    pub(crate) fn captured(&self) -> &Captured {
        &self.captured
    }
}

/// A command's outcome as both front ends report it: the document of `exec --format json` (and,
/// with the sandbox's `id`, of `run --format json`) and the structured result of the MCP tool
/// `sandbox_exec`, which adds the `id` too. Its shape is documented in `docs/reference/json.md`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct ExecResult {
    /// The command's exit status: its own, 128+N when signal N ended it, 124 when the timeout
    /// killed its process tree, 128+N when a signal to h9sandbox made it kill the tree (141: its
    /// stdout was closed).
    pub exit_code: i32,
    /// Standard output, as text, capped at the output limit (see truncated).
    pub stdout: String,
    /// Standard error, as text, capped at the output limit (see truncated).
    pub stderr: String,
    /// Wall-clock milliseconds from the start to the command's own exit.
    pub duration_ms: u64,
    /// Whether the timeout killed the command's whole process tree (exit_code 124).
    pub timed_out: bool,
    /// Whether bytes of a stream (or, with combined, of output) were cut at the output limit.
    pub truncated: bool,
    /// Bytes the command wrote to stdout in all, kept or cut.
    pub stdout_bytes: u64,
    /// Bytes the command wrote to stderr in all, kept or cut.
    pub stderr_bytes: u64,
    /// Whether the kernel's OOM killer ended the command: the sandbox ran out of memory.
    pub oom_killed: bool,
    /// Why it ended, one word, the first that applies: "timed_out", "interrupted" (see
    /// interrupted), "oom_killed", "signal" (see signal), "exited" ([`Outcome::ended`]).
    pub ended: String,
    /// The signal that ended the command's own process ("SIGKILL"), from its wait status; null
    /// when it exited, and always through the engine's exec (which knows only the status 128+N).
    pub signal: Option<String>,
    /// What made h9sandbox kill the tree: "SIGINT", "SIGTERM", "SIGHUP" (a signal to h9sandbox),
    /// "SIGPIPE" (its stdout was closed), "cancelled" (the MCP client cancelled the call, or the
    /// server was told to stop); null otherwise.
    pub interrupted: Option<String>,
    /// With combined: stdout and stderr together, chunk by chunk in the order they were read,
    /// capped as each stream is; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

impl ExecResult {
    /// The document of `out`, with `output` when `combined`. A stream captured with its ends
    /// ([`Sink::CaptureEnds`]) shows both, with the marker of what was cut between them.
    pub(crate) fn of(out: &Outcome, combined: bool) -> ExecResult {
        ExecResult {
            exit_code: out.exit_code,
            stdout: out.stdout.shown(),
            stderr: out.stderr.shown(),
            duration_ms: u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX),
            timed_out: out.timed_out,
            truncated: out.stdout.truncated()
                || out.stderr.truncated()
                || (combined && out.combined.truncated()),
            stdout_bytes: out.stdout.total,
            stderr_bytes: out.stderr.total,
            oom_killed: out.oom_killed,
            ended: out.ended().to_string(),
            signal: out.signal_name(),
            interrupted: out.interrupted.map(|i| i.to_string()),
            output: combined.then(|| out.combined.shown()),
        }
    }
}
