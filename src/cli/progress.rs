//! Progress on stderr: an indicatif spinner showing the current step of a slow subcommand (`up`,
//! `bootstrap`) and how long that step has run, kept below the output that streams meanwhile,
//! and [`CliReporter`], the command line's [`Reporter`], which draws the core's steps on it.
//!
//! The spinner is drawn only when stderr is a terminal and the format is `table`; in pipes and in
//! JSON mode nothing of it is written (and nothing is allocated: a disabled [`Spinner`] is an empty
//! `Option`). A live spinner is installed as the process's status line
//! ([`crate::report::set_status_line`]), so that forwarded output, warnings and `-v` command lines
//! are written above it.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Format;
use crate::report::{self, Reporter, StatusLine};

/// How often the spinner redraws (and its elapsed time advances).
const TICK: Duration = Duration::from_millis(120);

/// A spinner on stderr with the current step and its elapsed time; cleared when dropped.
#[must_use = "the spinner disappears when dropped"]
pub(crate) struct Spinner {
    bar: Option<ProgressBar>,
}

/// The spinner as the process's status line.
struct Line(ProgressBar);

impl StatusLine for Line {
    fn suspend(&self, f: &mut dyn FnMut()) {
        self.0.suspend(f)
    }
}

impl Spinner {
    /// A spinner when `format` is table and stderr is a terminal; otherwise one that draws nothing.
    pub(crate) fn new(format: Format) -> Spinner {
        if format != Format::Table || !std::io::stderr().is_terminal() {
            return Spinner::disabled();
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .expect("the template is valid"),
        );
        bar.enable_steady_tick(TICK);
        report::set_status_line(Some(Arc::new(Line(bar.clone()))));
        Spinner { bar: Some(bar) }
    }

    /// A spinner that draws nothing.
    pub(crate) fn disabled() -> Spinner {
        Spinner { bar: None }
    }

    /// Shows `step` (e.g. `creating container`) and restarts the elapsed time.
    pub(crate) fn step(&self, step: impl Into<Cow<'static, str>>) {
        if let Some(bar) = &self.bar {
            bar.reset_elapsed();
            bar.set_message(step);
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            report::set_status_line(None);
            bar.finish_and_clear();
        }
    }
}

/// The command line's [`Reporter`]: warnings, notes and `-v` command lines on stderr (above the
/// spinner), and the core's steps on a [`Spinner`], made at the first step (drawn only as
/// [`Spinner::new`] says) and cleared by [`CliReporter::finish`] or when dropped.
pub(crate) struct CliReporter {
    stderr: report::Stderr,
    format: Format,
    spinner: Mutex<Option<Spinner>>,
}

impl CliReporter {
    /// The reporter of a subcommand run with `format` and `-v` (`verbose`).
    pub(crate) fn new(format: Format, verbose: bool) -> CliReporter {
        CliReporter {
            stderr: report::Stderr { verbose },
            format,
            spinner: Mutex::new(None),
        }
    }

    /// Clears the spinner, if one is drawn (before the result is printed); a later step draws a
    /// new one.
    pub(crate) fn finish(&self) {
        let spinner = self
            .spinner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop(spinner);
    }
}

impl Reporter for CliReporter {
    fn warn(&self, msg: &str) {
        self.stderr.warn(msg);
    }

    fn note(&self, msg: &str) {
        self.stderr.note(msg);
    }

    fn step(&self, step: &str) {
        let mut spinner = self.spinner.lock().unwrap_or_else(|e| e.into_inner());
        spinner
            .get_or_insert_with(|| Spinner::new(self.format))
            .step(step.to_string());
    }

    fn command(&self, line: &str) {
        self.stderr.command(line);
    }

    fn verbose(&self) -> bool {
        self.stderr.verbose
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_outside_a_terminal_and_in_json_mode() {
        // `cargo test` captures nothing of stderr's fd, but JSON mode never draws, terminal or not.
        let s = Spinner::new(Format::Json);
        assert!(s.bar.is_none());
        s.step("nothing happens");
        let r = CliReporter::new(Format::Json, false);
        r.step("nothing happens either");
        assert!(!report::status_line_shown());
    }
}
