//! The signals h9sandbox acts on, SIGINT, SIGTERM and SIGHUP: caught for the whole life of a
//! command that promises to clean up on them ([`install`], called before the command does
//! anything), and never lost from then on ([`interrupted`] also sees a signal that arrived
//! before it was called).
//!
//! Why this way: a handler installed only when a command starts waiting (tokio's
//! `signal(2)` registration at its first poll) leaves two holes. A signal that comes before it
//! takes the default action (the process dies, its temporary file left behind) or, inherited as
//! ignored, is dropped (the command runs on, and a caller waiting for it to stop waits forever).
//! And once registered, the handler stays (tokio never removes it), so a signal arriving while
//! nothing waits, between two steps, is swallowed. Catching once, first, and latching the first
//! signal closes both.
//!
//! Dispositions: a command that promises to act on SIGINT and SIGTERM replaces an inherited
//! "ignore" with its handler (a background job of a non-interactive shell, so most CI scripts,
//! starts with SIGINT ignored: `sh -c 'cmd &'`, POSIX 2.11), and unblocks the three signals in
//! its mask. SIGHUP inherited as ignored stays ignored: that is `nohup(1)`'s whole request.

use std::sync::OnceLock;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

use crate::types::Signal;

/// The latch: `None` until the first of the signals arrives, then that signal.
static FIRST: OnceLock<watch::Receiver<Option<Signal>>> = OnceLock::new();

/// Catches SIGINT, SIGTERM and SIGHUP (but see the module documentation for an ignored SIGHUP)
/// for the rest of the process's life, and latches the first one for [`interrupted`]. Call it
/// from inside the tokio runtime (with signals enabled) before any side effect of the command.
/// Calling it again does nothing. Errors (the runtime cannot register a handler) are not
/// fatal: the signals then keep their dispositions, as without h9sandbox's cleanup.
pub(crate) fn install() {
    FIRST.get_or_init(|| {
        let (tx, rx) = watch::channel(None);
        unblock();
        let hup_ignored = ignored(libc::SIGHUP);
        let int = signal(SignalKind::interrupt()).ok();
        let term = signal(SignalKind::terminate()).ok();
        let hup = if hup_ignored {
            None
        } else {
            signal(SignalKind::hangup()).ok()
        };
        tokio::spawn(async move {
            let (mut int, mut term, mut hup) = (int, term, hup);
            loop {
                let sig = tokio::select! {
                    Some(()) = recv(&mut int) => Signal::INT,
                    Some(()) = recv(&mut term) => Signal::TERM,
                    Some(()) = recv(&mut hup) => Signal::HUP,
                    else => return,
                };
                // Only the first counts; later ones change nothing.
                tx.send_if_modified(|v| {
                    if v.is_none() {
                        *v = Some(sig);
                        true
                    } else {
                        false
                    }
                });
            }
        });
        rx
    });
}

/// The next delivery of `s`; `None` when there is no such stream.
async fn recv(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => None,
    }
}

/// Whether the disposition of `sig` is "ignore" (inherited through `execve(2)`).
fn ignored(sig: libc::c_int) -> bool {
    // SAFETY: sigaction with a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Unblocks SIGINT, SIGTERM and SIGHUP in this thread's signal mask (inherited through
/// `execve(2)`; a blocked signal would stay pending and never reach the handler). Threads made
/// later inherit the mask.
fn unblock() {
    // SAFETY: plain sigset manipulation on a local set, then pthread_sigmask on this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Resolves with the signal (SIGINT, SIGTERM or SIGHUP) once one has arrived
/// since [`install`], at once when one already did. Installs the handlers first when nothing
/// did yet (a command that promised no cleanup, or a unit test).
pub(crate) async fn interrupted() -> Signal {
    install();
    let Some(rx) = FIRST.get() else {
        return std::future::pending().await;
    };
    let mut rx = rx.clone();
    let got = rx.wait_for(|v| v.is_some()).await.map(|v| *v);
    match got {
        Ok(v) => v.unwrap_or(Signal::TERM),
        // The latch's task is gone (the runtime is shutting down): nothing will arrive.
        Err(_) => std::future::pending().await,
    }
}

/// Why h9sandbox ended a command before it ended by itself (other than by its timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interruption {
    /// A signal: one of those h9sandbox acts on (SIGINT, SIGTERM, SIGHUP) arrived, or SIGPIPE
    /// for "our standard output's reader went away".
    Signal(Signal),
    /// The caller gave up (an MCP client cancelled its request).
    Cancelled,
}

impl Interruption {
    /// The exit status of a command so ended, as a shell reports a child killed by the signal:
    /// 128 + its number (SIGINT 130, SIGHUP 129, SIGPIPE 141, SIGTERM 143), and 143, as for
    /// SIGTERM, for a cancelled one.
    pub(crate) fn exit_status(self) -> i32 {
        match self {
            Interruption::Signal(s) => s.exit_status(),
            Interruption::Cancelled => Signal::TERM.exit_status(),
        }
    }
}

impl std::fmt::Display for Interruption {
    /// The signal's name (`SIGINT`), or `cancelled`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Interruption::Signal(s) => s.fmt(f),
            Interruption::Cancelled => f.write_str("cancelled"),
        }
    }
}

/// The signal that has arrived since [`install`], if one did (without waiting).
pub(crate) fn received() -> Option<Signal> {
    FIRST.get().and_then(|rx| *rx.borrow())
}
