//! Rendering: JSON documents and tables on stdout, colour rules. (Diagnostics on stderr go
//! through the reporter, [`super::progress::CliReporter`].)

use std::io::{IsTerminal, Write};
use std::time::{Duration, SystemTime};

use comfy_table::{presets, Cell, Color, Table};
use serde::Serialize;

use crate::state::Lifecycle;

/// Writes `value` as pretty JSON plus a newline to stdout, serialized straight into a buffered
/// stdout (a document is never held whole: escaping can make it 6 times the data it carries).
/// A closed pipe is not an error.
pub(crate) fn print_json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let r = serde_json::to_writer_pretty(&mut out, value)
        .map_err(std::io::Error::from)
        .and_then(|_| out.write_all(b"\n"))
        .and_then(|_| out.flush());
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// Writes `text` plus a newline to stdout. A closed pipe is not an error.
pub(crate) fn print_line(text: &str) -> anyhow::Result<()> {
    write_stdout(format!("{text}\n").as_bytes())
}

/// Writes `bytes` as they are to stdout. A closed pipe is not an error.
pub(crate) fn print_bytes(bytes: &[u8]) -> anyhow::Result<()> {
    write_stdout(bytes)
}

fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// Whether to colour stdout: a terminal, and `NO_COLOR` unset or empty (<https://no-color.org>).
pub(crate) fn colour_enabled() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A borderless table (like `docker ps`) with `header`, coloured only when `colour`.
pub(crate) fn table(header: &[&str], colour: bool) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    if colour {
        t.enforce_styling();
    } else {
        t.force_no_tty();
    }
    t.set_header(header.iter().map(Cell::new));
    t
}

/// The cell for a lifecycle state: Running green, Pending yellow, Stopping/Terminated grey,
/// Failed red (`ls`'s STATE column).
pub(crate) fn state_cell(state: Lifecycle) -> Cell {
    let colour = match state {
        Lifecycle::Running => Color::Green,
        Lifecycle::Pending | Lifecycle::Paused => Color::Yellow,
        Lifecycle::Stopping | Lifecycle::Stopped | Lifecycle::Terminated => Color::DarkGrey,
        Lifecycle::Failed => Color::Red,
    };
    Cell::new(state.to_string()).fg(colour)
}

/// Prints `table` on stdout.
pub(crate) fn print_table(table: &Table) -> anyhow::Result<()> {
    let text = table.to_string();
    let text: String = text
        .lines()
        .map(|l| format!("{}\n", l.trim_end()))
        .collect();
    write_stdout(text.as_bytes())
}

/// How long ago an RFC 3339 timestamp was, in the largest whole unit (`45s`, `3m`, `2h`, `4d`).
pub(crate) fn age(rfc3339: &str) -> String {
    let Ok(t) = humantime::parse_rfc3339_weak(rfc3339) else {
        return "?".into();
    };
    age_since(t)
}

/// How long ago `t` was, as [`age`] shows it (a time in the future is `0s`).
pub(crate) fn age_since(t: SystemTime) -> String {
    let d = SystemTime::now()
        .duration_since(t)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    match d {
        0..60 => format!("{d}s"),
        60..3600 => format!("{}m", d / 60),
        3600..86400 => format!("{}h", d / 3600),
        _ => format!("{}d", d / 86400),
    }
}

/// Whether `e` comes from writing to a pipe whose reader has gone (`EPIPE`: `h9sandbox read ID
/// F | head`), which ends the output early without being a failure.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
