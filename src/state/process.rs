//! Processes identified by PID and start time ([`ProcessRef`]), so that a reused PID is not
//! mistaken for the process a record names.

use serde::{Deserialize, Serialize};

/// A process identified by PID and start time, so a reused PID is not mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProcessRef {
    /// Process ID.
    pub pid: u32,
    /// Start time in clock ticks after boot (field 22 of `/proc/PID/stat`); 0 when unknown.
    pub start_time: u64,
}

impl ProcessRef {
    /// The process `pid` as it is now, or `None` when it does not exist (or has exited and is a
    /// zombie waiting for its parent).
    pub(crate) fn of(pid: u32) -> Option<ProcessRef> {
        proc_start_time(pid).map(|start_time| ProcessRef { pid, start_time })
    }

    /// This process.
    pub(crate) fn current() -> ProcessRef {
        let pid = std::process::id();
        ProcessRef::of(pid).unwrap_or(ProcessRef { pid, start_time: 0 })
    }

    /// Whether the very process this refers to (same PID and start time) is still alive. A
    /// zombie (exited, not yet waited for by its parent) counts as dead.
    pub(crate) fn is_alive(&self) -> bool {
        match proc_start_time(self.pid) {
            Some(t) => self.start_time == 0 || t == self.start_time,
            None => false,
        }
    }
}

/// Field 22 (`starttime`) of `/proc/PID/stat`, or `None` when the process does not exist or is
/// a zombie (state `Z`) or dead (`X`): it has exited, whether or not its parent waited for it.
pub(crate) fn proc_start_time(pid: u32) -> Option<u64> {
    if pid == 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_start_time(&stat)
}

/// The start time in a `/proc/PID/stat` line, `None` for a zombie or dead process.
fn parse_stat_start_time(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may contain spaces or ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts at field 3 (state); starttime is field 22, i.e. the 20th from here.
    let mut fields = rest.split_whitespace();
    if matches!(fields.next()?, "Z" | "X" | "x") {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn process_ref_tells_reused_pids_apart() {
        let me = ProcessRef::current();
        assert!(me.start_time > 0 && me.is_alive());
        let impostor = ProcessRef {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!impostor.is_alive());
        assert!(ProcessRef::of(0).is_none());
    }

    #[test]
    fn zombies_are_dead() {
        let line = |state: &str| {
            format!("42 (a) b) {state} 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0")
        };
        assert_eq!(parse_stat_start_time(&line("S")), Some(987654));
        assert_eq!(parse_stat_start_time(&line("R")), Some(987654));
        assert_eq!(parse_stat_start_time(&line("Z")), None);
        assert_eq!(parse_stat_start_time(&line("X")), None);
        // A real child that exited but was not waited for yet.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while ProcessRef::of(pid).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(ProcessRef::of(pid).is_none(), "a zombie counts as alive");
        child.wait().unwrap();
    }
}
