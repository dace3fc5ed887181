//! The sandbox's processes as the supervisors and PID 1 see them: the `/proc` scan, the
//! kills of a tree or of an exec's marked processes (each as its owner), audit sessions, and the
//! memory cgroup's OOM count and limit.

/// The `oom_score_adj` a command starts with ([`first_to_go_at_oom`]): the highest, which makes
/// its processes the OOM killer's choice before any of the agent's (`proc(5)`,
/// `/proc/PID/oom_score_adj`).
pub(crate) const COMMAND_OOM_SCORE_ADJ: &str = "1000";

/// Runs `spawn` with this process's `oom_score_adj` at [`COMMAND_OOM_SCORE_ADJ`], which the
/// command it forks inherits, then sets it back. At the sandbox's memory limit the kernel's OOM
/// killer then ends a process of the command, never PID 1 or a supervisor, whatever their
/// sizes (a command whose memory is in a tmpfs is small itself, and before, PID 1 went, and the
/// container with it). Raising the value needs no privilege, and neither does lowering it back
/// to the least value a privileged process set (the engine's, for the container), so a command
/// may lower its own to the agent's: it only chooses itself less. Written here, not between
/// fork and exec: after `setuid` the child is not dumpable and its `/proc/self` is root's until
/// the exec. Best effort: where it cannot be read or written (gVisor), nothing changes.
pub(crate) fn first_to_go_at_oom<T>(spawn: impl FnOnce() -> T) -> T {
    const ADJ: &str = "/proc/self/oom_score_adj";
    let before = std::fs::read_to_string(ADJ).ok();
    let raised = before.is_some() && std::fs::write(ADJ, COMMAND_OOM_SCORE_ADJ).is_ok();
    let out = spawn();
    if let (true, Some(before)) = (raised, before) {
        let _ = std::fs::write(ADJ, before.trim());
    }
    out
}

/// How many processes the kernel's OOM killer has killed in this container's memory cgroup:
/// `oom_kill` of `memory.events` (cgroup v2) or of `memory.oom_control` (cgroup v1, Linux
/// 4.13 and later). `None` when neither can be read.
pub(crate) fn oom_kills() -> Option<u64> {
    [
        "/sys/fs/cgroup/memory.events",
        "/sys/fs/cgroup/memory/memory.oom_control",
    ]
    .iter()
    .find_map(|f| {
        let text = std::fs::read_to_string(f).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
    })
}

/// The container's memory limit in bytes (`memory.max`, cgroup v2, or
/// `memory.limit_in_bytes`, v1), when one is set.
pub(crate) fn memory_limit() -> Option<u64> {
    [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|f| std::fs::read_to_string(f).ok()?.trim().parse::<u64>().ok())
    .filter(|b| *b < (1 << 62))
}

/// A process as `/proc/PID/stat` and `/proc/PID/status` show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Proc {
    /// Process ID.
    pub pid: i32,
    /// Parent's process ID.
    pub ppid: i32,
    /// Real user ID (the one `kill(2)` compares).
    pub uid: u32,
    /// Real group ID (which the `ptrace` access check of `/proc/PID/environ` compares too).
    pub gid: u32,
    /// Whether it has exited and waits to be reaped (a zombie).
    pub dead: bool,
}

/// Every process of the PID namespace, from `/proc`.
pub(crate) fn processes() -> Vec<Proc> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().unwrap_or("");
        let Some(ppid) = f.next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let real = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|l| l.split_whitespace().next()?.parse().ok())
                .unwrap_or(u32::MAX)
        };
        out.push(Proc {
            pid,
            ppid,
            uid: real("Uid:"),
            gid: real("Gid:"),
            dead: matches!(state, "Z" | "X"),
        });
    }
    out
}

/// The live (not zombie) descendants of `root` among `all`.
pub(crate) fn descendants(all: &[Proc], root: i32) -> Vec<Proc> {
    let mut out = Vec::new();
    let mut seen = vec![root];
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for proc_ in all.iter().filter(|x| x.ppid == p) {
            if seen.contains(&proc_.pid) {
                continue;
            }
            seen.push(proc_.pid);
            frontier.push(proc_.pid);
            if !proc_.dead {
                out.push(*proc_);
            }
        }
    }
    out
}

/// SIGKILLs every live descendant of `root` (this supervisor), pass after pass, until none is
/// left (a process forked meanwhile is found on the next pass; at most 400 passes). Each pass
/// stops the whole tree first, so that no process forks a replacement for one killed now.
///
/// `kill(2)` lets a process signal only processes of its own user unless it holds `CAP_KILL`,
/// which the container does not grant: each process is signalled as its owner
/// ([`signal_as_owner`]), from this thread, with no helper process (none could start at the
/// process limit a fork bomb fills).
pub(crate) fn kill_tree(root: i32) {
    for _ in 0..400 {
        let all = processes();
        let mut live: Vec<Proc> = descendants(&all, root);
        // Where the tree has an audit session of its own, its members are found by it too,
        // wherever they were reparented.
        if let Some(s) = audit_session(root).filter(|s| Some(*s) != audit_session(1)) {
            for p in &all {
                if p.pid != root
                    && !p.dead
                    && !live.iter().any(|l| l.pid == p.pid)
                    && audit_session(p.pid) == Some(s)
                {
                    live.push(*p);
                }
            }
        }
        if live.is_empty() {
            return;
        }
        for sig in [libc::SIGSTOP, libc::SIGKILL] {
            for p in &live {
                signal_as_owner(p, sig);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Sends `sig` to `p` as `p`'s owner: directly when it is ours (or we may), else from this
/// thread switched to its user ([`crate::agent::as_user::as_user`]). Returns whether it was delivered
/// or `p` is gone (`ESRCH`).
pub(crate) fn signal_as_owner(p: &Proc, sig: i32) -> bool {
    let send = || {
        // SAFETY: kill(2) with a PID read from /proc; a vanished process is ESRCH.
        if unsafe { libc::kill(p.pid, sig) } == 0 {
            return Ok(());
        }
        Err(std::io::Error::last_os_error().raw_os_error())
    };
    match send() {
        Ok(()) | Err(Some(libc::ESRCH)) => true,
        Err(Some(libc::EPERM)) => {
            matches!(
                crate::agent::as_user::as_user(p.uid, p.gid, send),
                Ok(Ok(()) | Err(Some(libc::ESRCH)))
            )
        }
        Err(_) => false,
    }
}

/// Whether `/proc/PID/environ` of `pid` holds exactly `needle` (`NAME=value`), read with our own
/// credentials (for the host's sweep of a local sandbox's marked processes, in the engine layer).
pub(crate) fn environ_has(pid: i32, needle: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle))
}

/// Whether `/proc/PID/environ` of `p` holds exactly `needle` (`NAME=value`), read as `p`'s
/// owner where we may not read it ourselves (another user's, without `CAP_SYS_PTRACE`).
pub(crate) fn environ_of_has(p: &Proc, needle: &[u8]) -> bool {
    let read = || std::fs::read(format!("/proc/{}/environ", p.pid));
    let env = match read() {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            crate::agent::as_user::as_user(p.uid, p.gid, read).and_then(|r| r)
        }
        r => r,
    };
    env.is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle))
}

/// One pass of killing an exec's processes found by its marker: among `procs` (every process
/// of the PID namespace, with whether it carries the marker), the marked ones and all their live
/// descendants (a process that cleared its environment or left its session is still a descendant
/// of its subreaper). Returns the PIDs to SIGKILL now: every such process but the topmost marked
/// ones (whose parent is not among them: the exec's own process, the wrapper that is its
/// subreaper), which go only once nothing is left under them, so that orphans made meanwhile are
/// still reparented to them and found on the next pass. Empty when nothing is left.
pub(crate) fn marked_kill_pass(procs: &[(Proc, bool)]) -> Vec<i32> {
    let tree = marked_tree(procs);
    let tops: Vec<i32> = procs
        .iter()
        .filter(|(p, marked)| *marked && tree.contains(&p.pid) && !tree.contains(&p.ppid))
        .map(|(p, _)| p.pid)
        .collect();
    let below: Vec<i32> = tree.iter().copied().filter(|p| !tops.contains(p)).collect();
    if below.is_empty() {
        tops
    } else {
        below
    }
}

/// Every live process of `procs` that carries the marker, and all their live descendants.
pub(crate) fn marked_tree(procs: &[(Proc, bool)]) -> Vec<i32> {
    let all: Vec<Proc> = procs.iter().map(|(p, _)| *p).collect();
    let mut tree: Vec<i32> = Vec::new();
    for (p, marked) in procs {
        if *marked {
            if !p.dead && !tree.contains(&p.pid) {
                tree.push(p.pid);
            }
            for d in descendants(&all, p.pid) {
                if !tree.contains(&d.pid) {
                    tree.push(d.pid);
                }
            }
        }
    }
    tree
}

/// SIGSTOPs every process of the marked tree (see [`marked_tree`]) before a kill pass: a
/// stopped process cannot fork a replacement for a child killed now (a shell loop would
/// otherwise outrun the passes, its topmost process never left alone to be killed).
pub(crate) fn stop_marked_tree(procs: &[(Proc, bool)]) {
    for pid in marked_tree(procs) {
        if let Some((p, _)) = procs.iter().find(|(p, _)| p.pid == pid) {
            signal_as_owner(p, libc::SIGSTOP);
        }
    }
}

/// Puts this process in an audit session of its own, which every process it starts inherits
/// and none can leave: writing its login UID (`/proc/self/loginuid`, here `loginuid`, the user
/// the command runs as) makes the kernel give it a new session ID (`/proc/PID/sessionid`,
/// readable by all), and once the login UID is set, changing it needs `CAP_AUDIT_CONTROL`,
/// which no sandbox has (see `audit_set_loginuid` in the kernel's `kernel/audit.c`). It is
/// the membership a command cannot shed, where cgroups cannot be made per exec (cgroup v1,
/// a read-only `/sys/fs/cgroup`): `env -i`, `setsid`, double forks and the death of its
/// supervisor keep it. `None` where the kernel gives none: no audit support, gVisor, or a
/// login UID the container already had (the engine's daemon started from a login session).
pub(crate) fn join_audit_session(loginuid: u32) -> Option<u32> {
    let before = audit_session(rustix::process::getpid().as_raw_nonzero().get());
    std::fs::write("/proc/self/loginuid", loginuid.to_string()).ok()?;
    audit_session(rustix::process::getpid().as_raw_nonzero().get()).filter(|s| Some(*s) != before)
}

/// The audit session of `pid` (`/proc/PID/sessionid`); `None` when unset or unreadable.
pub(crate) fn audit_session(pid: i32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/sessionid"))
        .ok()?
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|s| *s != u32::MAX)
}

// The variable every process of an exec carries, its value unique to that exec, by which its
// tree is found when nothing else answers for it (the engine's exec; a supervisor that was
// killed): the contract's.
pub(crate) use crate::contract::MARKER_VAR;

/// Options of `h9sandbox agent kill-marked`, the engine path's in-container kill helper.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct KillMarkedArgs {
    /// The value of H9SANDBOX_EXEC_ID the exec's processes carry
    pub marker: String,
    /// The exec's audit session: its processes are those in it too, marked or not
    #[arg(long)]
    pub session: Option<u32>,
}

/// Kills an exec's processes found by their marker or their audit session (and all their
/// descendants), pass after pass ([`marked_kill_pass`]), each as its owner
/// ([`signal_as_owner`], [`environ_of_has`]) where this process runs as root, else as far as this
/// user may; returns 0, or 1 when some could not be signalled.
pub(crate) fn kill_marked(args: &KillMarkedArgs) -> i32 {
    let needle = format!("{MARKER_VAR}={}", args.marker);
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut failed = false;
    for _ in 0..200 {
        let procs: Vec<(Proc, bool)> = processes()
            .into_iter()
            .filter(|p| p.pid != me)
            .map(|p| {
                let of = args.session.is_some() && audit_session(p.pid) == args.session
                    || environ_of_has(&p, needle.as_bytes());
                (p, of)
            })
            .collect();
        let pass = marked_kill_pass(&procs);
        if pass.is_empty() {
            return i32::from(failed);
        }
        stop_marked_tree(&procs);
        failed = false;
        for pid in pass {
            if let Some((p, _)) = procs.iter().find(|(p, _)| p.pid == pid) {
                failed |= !signal_as_owner(p, libc::SIGKILL);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: i32, ppid: i32) -> Proc {
        Proc {
            pid,
            ppid,
            uid: 0,
            gid: 0,
            dead: false,
        }
    }

    #[test]
    fn the_top_of_a_marked_tree_goes_last() {
        // 10 is the wrapper (marked, parent 0); 11 the shell (marked); 12 cleared its
        // environment (unmarked, still under 11); 13 is a bystander; 14 a marked orphan of a
        // tree without subreaper (parent 1).
        let procs = [
            (p(1, 0), false),
            (p(10, 0), true),
            (p(11, 10), true),
            (p(12, 11), false),
            (p(13, 1), false),
            (p(14, 1), true),
        ];
        let mut pass = marked_kill_pass(&procs);
        pass.sort();
        assert_eq!(pass, [11, 12]);
        // Once nothing is under them, the tops.
        let procs = [(p(1, 0), false), (p(10, 0), true), (p(14, 1), true)];
        let mut pass = marked_kill_pass(&procs);
        pass.sort();
        assert_eq!(pass, [10, 14]);
        assert!(marked_kill_pass(&[(p(1, 0), false)]).is_empty());
    }
}
