//! Finding and killing an exec's process tree from the host, by the marker variable every process
//! of the exec inherits ([`super::EXEC_MARKER_VAR`]), through `/proc` (see `proc(5)`:
//! `/proc/PID/environ`, `/proc/PID/ns/pid`).
//!
//! Doing this on the host, rather than with a script inside the container, means code in the
//! sandbox cannot defeat it by replacing the container's `sh`, `tr` or `grep`. It needs the right
//! to read the processes' `/proc` entries (root, or the same user as the container's processes,
//! as with rootless engines); without it, [`kill_marked`] says so and the engine falls back to
//! killing from inside.

use std::io;
use std::path::Path;

use rustix::process::{kill_process, Pid, Signal};

use crate::agent::supervise::{environ_has, marked_kill_pass, processes, Proc};

use super::EXEC_MARKER_VAR;

/// What a pass over `/proc` did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sweep {
    /// Processes sent SIGKILL.
    pub killed: usize,
    /// Marked processes that could not be signalled.
    pub failed: usize,
}

/// Sends SIGKILL to every process in the PID namespace of `ns_of` (a host PID, e.g. the
/// container's init; `None` = our own namespace) whose environment holds
/// `H9SANDBOX_EXEC_ID=<marker>`, and to every descendant of such a process (one that cleared its
/// environment under a subreaper, as h9sandbox's in-container wrapper, is still one), the
/// topmost marked processes last ([`crate::agent::supervise::marked_kill_pass`]), repeating
/// until a pass finds none (children forked meanwhile are caught too), at most 200 passes.
///
/// Errors: `PermissionDenied` when the namespace of `ns_of` cannot be read (the caller should
/// fall back to another method); other I/O errors reading `/proc`.
pub(crate) fn kill_marked(ns_of: Option<u32>, marker: &str) -> io::Result<Sweep> {
    let ns_path = match ns_of {
        Some(pid) => format!("/proc/{pid}/ns/pid"),
        None => "/proc/self/ns/pid".to_string(),
    };
    let ns = std::fs::read_link(&ns_path)?;
    let needle = format!("{EXEC_MARKER_VAR}={marker}");
    // The init's session is everyone's where the exec got none of its own (unset: none).
    let init = ns_of.map(|p| {
        i32::try_from(p)
            .ok()
            .and_then(crate::agent::supervise::audit_session)
            .unwrap_or(u32::MAX)
    });
    let mut total = Sweep::default();
    for _ in 0..200 {
        let procs = namespace_processes(&ns, needle.as_bytes(), init)?;
        let pass = marked_kill_pass(&procs);
        if pass.is_empty() {
            break;
        }
        crate::agent::supervise::stop_marked_tree(&procs);
        total.failed = 0;
        for pid in pass {
            let Some(p) = Pid::from_raw(pid) else {
                continue;
            };
            match kill_process(p, Signal::KILL) {
                Ok(()) => total.killed += 1,
                Err(rustix::io::Errno::SRCH) => {}
                Err(_) => total.failed += 1,
            }
        }
        if total.failed > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    Ok(total)
}

/// The processes of the PID namespace `ns` (but us), each with whether it is the exec's: its
/// environment holds `needle`, or it is in the audit session of a process that does (the
/// in-container wrapper joins one of its own, which the command's processes cannot leave:
/// [`crate::agent::supervise::join_audit_session`]), other than the session of the namespace's
/// init `init` (where the kernel gave none, every process shares that one). `init` is `None`
/// for our own namespace: no session is looked at there.
fn namespace_processes(
    ns: &Path,
    needle: &[u8],
    init: Option<u32>,
) -> io::Result<Vec<(Proc, bool)>> {
    use crate::agent::supervise::audit_session;
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut out = Vec::new();
    for p in processes() {
        if p.pid == me {
            continue;
        }
        // Processes vanish while we look: every read may fail, and that is fine.
        match std::fs::read_link(format!("/proc/{}/ns/pid", p.pid)) {
            Ok(n) if n == ns => {}
            _ => continue,
        }
        out.push((p, environ_has(p.pid, needle)));
    }
    // Only in a container's namespace: on the host (the local engine) the marked processes
    // are in the user's own login session.
    let Some(init) = init else {
        return Ok(out);
    };
    let mut sessions: Vec<u32> = Vec::new();
    for (p, marked) in &out {
        if let Some(s) = marked.then(|| audit_session(p.pid)).flatten() {
            if s != init && !sessions.contains(&s) {
                sessions.push(s);
            }
        }
    }
    if !sessions.is_empty() {
        for (p, of) in &mut out {
            *of = *of || audit_session(p.pid).is_some_and(|s| sessions.contains(&s));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kills_marked_tree_and_spares_the_rest() {
        let marker = uuid::Uuid::new_v4().simple().to_string();
        // A marked shell with a background child and a daemon-like grandchild, and an unmarked one.
        let mut marked = std::process::Command::new("sh")
            .args(["-c", "sleep 300 & (sleep 301 &); sleep 302"])
            .env(EXEC_MARKER_VAR, &marker)
            .spawn()
            .unwrap();
        let mut bystander = std::process::Command::new("sleep")
            .arg("303")
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let s = kill_marked(None, &marker).unwrap();
        assert!(s.killed >= 3, "{s:?}");
        assert_eq!(s.failed, 0);
        marked.wait().unwrap();
        assert!(
            bystander.try_wait().unwrap().is_none(),
            "an unmarked process was killed"
        );
        bystander.kill().unwrap();
        let _ = bystander.wait();
        // Nothing marked is left.
        assert_eq!(kill_marked(None, &marker).unwrap().killed, 0);
    }
}
