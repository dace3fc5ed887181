//! The owner watcher: a small detached process that removes a sandbox tied to a process
//! (`up --owner-pid`, `run`, an MCP session's sandboxes) within seconds of that process's exit,
//! even when nothing else of h9sandbox ever runs again, and when the sandbox's lease
//! (`up --ttl`) runs out.
//!
//! `up` starts it ([`spawn`]) once the sandbox is Running (after its bootstrap) as
//! `h9sandbox __watch-owner ID KEY=VALUE...`: stdin, stdout and stderr on `/dev/null` (it holds
//! none of the caller's pipes, so `id=$(h9sandbox up …)` and a Python `subprocess.run` return at
//! once), in a process group of its own. It then closes every other inherited descriptor (a
//! make jobserver's, a caller's `pass_fds`), forks, makes a session of its own (`setsid(2)`: no
//! controlling terminal, so neither Ctrl-C, a terminal hangup nor a kill of the caller's process
//! group reaches it) and forks again (a session leader could acquire a terminal), and moves to
//! `/`. `up` does not wait for any of that (a process spawn, well under a millisecond of its own).
//!
//! It waits on the owner with a pidfd (`pidfd_open(2)`, Linux 5.3; checked against the recorded
//! start time once opened, so a PID the kernel reused is never taken for the owner), and on the
//! state directory with inotify (every change of `state.json` is a rename into it), polling the
//! owner once a second where pidfds are missing and looking again at least every minute. It
//! ends as soon as the sandbox's record is gone (`down`, `reap`), the owner changed, or the state
//! directory went away, so it never outlives its sandbox. When the owner has exited, or the
//! lease ran out, it runs the same removal as `reap` for that one sandbox and its sub-sandboxes
//! ([`super::reap::sweep_sandbox`]), which re-checks the verdict under the state lock: a sandbox
//! whose owner is alive and whose lease runs is never removed (a `renew` in between wins). A
//! removal that fails (the engine unreachable) is retried for a few minutes, then left to
//! `reap`.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use uuid::Uuid;

use super::Ctx;
use crate::config::{Layers, Origin};
use crate::poll::{poll_until_blocking, Backoff};
use crate::state::{Lifecycle, ProcessRef, Record, Store};

/// The first argument that makes the binary an owner watcher (not a subcommand of the command
/// line: nobody types it).
pub(crate) const ARG: &str = "__watch-owner";

/// The configuration the watcher needs to remove a sandbox, passed by `up` as `KEY=VALUE`
/// arguments (the watcher reads no configuration file or environment of its own: it acts as
/// the `up` that started it was configured).
const KEYS: &[&str] = &["state_dir", "engine", "engine_bin", "fallback"];

/// How often a watcher without a pidfd looks at its owner.
const POLL_WITHOUT_PIDFD: Duration = Duration::from_secs(1);
/// How often a watcher looks at its sandbox's record even when nothing woke it.
const LOOK_AGAIN: Duration = Duration::from_secs(60);
/// How long a failing removal is retried before it is left to `reap`.
const RETRY_FOR: Duration = Duration::from_secs(300);

/// Starts the owner watcher of the sandbox `rec` (which has an owner), configured as `ctx`.
/// Returns once the process is spawned: the watcher detaches itself. Errors: the spawn failed.
pub(crate) fn spawn(ctx: &Ctx, rec: &Record) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find h9sandbox's own executable")?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg(ARG).arg(rec.id.to_string());
    let mut state_dir = OsString::from("state_dir=");
    state_dir.push(ctx.store.dir());
    cmd.arg(state_dir);
    cmd.arg(format!("engine={}", ctx.cfg.engine));
    if let Some(bin) = &ctx.cfg.engine_bin {
        cmd.arg(format!("engine_bin={bin}"));
    }
    cmd.arg(format!(
        "fallback={}",
        match ctx.cfg.fallback {
            crate::config::Fallback::Fail => "fail",
            crate::config::Fallback::Local => "local",
        }
    ));
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .current_dir("/")
        .process_group(0);
    // The first process exits at once (it forks the watcher); the runtime reaps it when dropped.
    cmd.spawn()
        .context("cannot start the sandbox's owner watcher")?;
    Ok(())
}

/// Runs the owner watcher when `args` (the whole command line) asks for it ([`ARG`]), and
/// returns its exit status; `None` otherwise. Call it first, while the process has one thread:
/// it forks.
pub(crate) fn main_if_asked(args: &[OsString]) -> Option<i32> {
    if args.get(1).map(|a| a.as_os_str()) != Some(OsStr::new(ARG)) {
        return None;
    }
    let id = args
        .get(2)
        .and_then(|a| a.to_str())
        .and_then(|a| Uuid::parse_str(a).ok());
    let keys: Vec<(String, OsString)> = args
        .get(3..)
        .unwrap_or_default()
        .iter()
        .filter_map(|a| {
            let bytes = a.as_bytes();
            let at = bytes.iter().position(|b| *b == b'=')?;
            let key = std::str::from_utf8(&bytes[..at]).ok()?;
            KEYS.contains(&key).then(|| {
                (
                    key.to_string(),
                    OsString::from_vec(bytes[at + 1..].to_vec()),
                )
            })
        })
        .collect();
    let Some(id) = id else {
        eprintln!("h9sandbox: error: {ARG} is for h9sandbox's own use: {ARG} ID KEY=VALUE...");
        return Some(2);
    };
    detach();
    Some(match watch(id, &keys) {
        Ok(()) => 0,
        Err(_) => 1,
    })
}

/// Closes every inherited descriptor above stderr, then forks, makes a new session and forks
/// again; the intermediate processes exit. Failures leave the watcher less detached, never
/// stopped.
fn detach() {
    close_inherited();
    // SAFETY: the process has a single thread here (the watcher runs before anything else), so
    // fork is safe; the parents only `_exit`.
    unsafe {
        if libc::fork() > 0 {
            libc::_exit(0);
        }
        libc::setsid();
        if libc::fork() > 0 {
            libc::_exit(0);
        }
    }
    let _ = std::env::set_current_dir("/");
}

/// Closes descriptors 3 and up (`close_range(2)`, Linux 5.9; else each one `/proc/self/fd`
/// lists).
fn close_inherited() {
    // SAFETY: close_range on descriptors this process does not use (nothing is open yet).
    let r = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    if r == 0 {
        return;
    }
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|fd| *fd > 2)
                .collect()
        })
        .unwrap_or_default();
    for fd in fds {
        // SAFETY: as above (the read_dir's own descriptor is closed already; EBADF is harmless).
        unsafe { libc::close(fd) };
    }
}

/// The value of `key` among the watcher's arguments.
fn value<'a>(keys: &'a [(String, OsString)], key: &str) -> Option<&'a OsString> {
    keys.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// Watches sandbox `id` of the state directory in `keys` until its record is gone, removing it
/// when its owner exits or its lease runs out.
fn watch(id: Uuid, keys: &[(String, OsString)]) -> Result<()> {
    let dir = PathBuf::from(value(keys, "state_dir").context("no state_dir")?);
    if !dir.is_dir() {
        return Ok(());
    }
    let store = Store::open(&dir)?;
    let Some(owner) = store.load()?.get(id).and_then(|r| r.owner) else {
        return Ok(());
    };
    let pidfd = i32::try_from(owner.pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
    let changes = state_changes(&dir);
    // Opened on the owner only if the process at the PID now is the recorded one (start time).
    let mut owner_gone = !owner.is_alive();
    loop {
        if owner_gone {
            return remove(id, keys, &store).map(|_| ());
        }
        let Ok(state) = store.load() else {
            return Ok(()); // the state directory went away, or became unreadable
        };
        let Some(rec) = state.get(id) else {
            return Ok(());
        };
        if rec.owner != Some(owner) {
            return Ok(());
        }
        let left = lease_left(rec);
        if left == Some(Duration::ZERO) {
            // Removed, or renewed meanwhile (then the next look finds the new end).
            if !remove(id, keys, &store)? {
                return Ok(()); // given up on: left to `reap`
            }
            continue;
        }
        let mut timeout = match pidfd {
            Some(_) => LOOK_AGAIN,
            None => POLL_WITHOUT_PIDFD,
        };
        if let Some(l) = left {
            timeout = timeout.min(l + Duration::from_millis(20));
        }
        let (exited, dir_gone) = wait(pidfd.as_ref(), changes.as_ref(), timeout);
        if dir_gone {
            return Ok(());
        }
        owner_gone = exited || !owner.is_alive();
    }
}

/// The inotify descriptor watching the state directory `dir` for a new `state.json` (renamed
/// into place, or written) and for the directory's own removal; `None` where inotify is
/// unavailable (then the minute's look is all).
fn state_changes(dir: &std::path::Path) -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
    let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
    inotify::add_watch(
        &fd,
        dir,
        WatchFlags::MOVED_TO
            | WatchFlags::CLOSE_WRITE
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR,
    )
    .ok()?;
    Some(fd)
}

/// Waits up to `timeout` for the owner's pidfd to turn readable (it exited) or the state
/// directory to change. Returns (the owner exited, the state directory is gone).
fn wait(
    pidfd: Option<&std::os::fd::OwnedFd>,
    changes: Option<&std::os::fd::OwnedFd>,
    timeout: Duration,
) -> (bool, bool) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = Vec::new();
    if let Some(p) = pidfd {
        fds.push(PollFd::new(p, PollFlags::IN));
    }
    if let Some(c) = changes {
        fds.push(PollFd::new(c, PollFlags::IN));
    }
    // Saturating: a timeout past i64::MAX seconds waits as long as one can.
    let ts = Timespec::try_from(timeout).unwrap_or(Timespec {
        tv_sec: i64::MAX,
        tv_nsec: 0,
    });
    if fds.is_empty() {
        std::thread::sleep(timeout);
        return (false, false);
    }
    if poll(&mut fds, Some(&ts)).is_err() {
        // EINTR and the like: look again (never spin: a short pause).
        std::thread::sleep(Duration::from_millis(100));
        return (false, false);
    }
    let exited = pidfd.is_some() && !fds[0].revents().is_empty();
    drop(fds);
    let dir_gone = changes.is_some_and(drained_says_gone);
    (exited, dir_gone)
}

/// Reads every pending inotify event of `fd`; whether one says the watched directory itself is
/// gone (removed, moved away, or the watch dropped).
fn drained_says_gone(fd: &std::os::fd::OwnedFd) -> bool {
    use rustix::fs::inotify::{ReadFlags, Reader};
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    let mut events = Reader::new(fd, &mut buf);
    let mut gone = false;
    while let Ok(e) = events.next() {
        gone |= e
            .events()
            .intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::IGNORED);
    }
    gone
}

/// How long the lease of `rec` still runs (`Duration::ZERO` once it ended); `None` without one.
fn lease_left(rec: &Record) -> Option<Duration> {
    let end = humantime::parse_rfc3339_weak(rec.expires_at.as_deref()?).ok()?;
    Some(
        end.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// Removes sandbox `id` as `reap` would (its owner exited, or its lease ran out), retrying a
/// failing removal for [`RETRY_FOR`]. Returns whether that is settled (`false`: given up on).
fn remove(id: Uuid, keys: &[(String, OsString)], store: &Store) -> Result<bool> {
    let settled = poll_until_blocking(
        RETRY_FOR,
        Backoff::doubling(Duration::from_secs(1), Duration::from_secs(30)),
        || anyhow::Ok(removed_or_answered_for(id, keys, store)?.then_some(())),
    )?;
    Ok(settled.is_some())
}

/// Runs `reap`'s removal of sandbox `id` once; whether the watcher's work is done: the record is
/// gone, someone else is removing it, or a live process answers for it again (a `renew` after
/// the lease ran out). `false`: the removal failed and may be tried again.
fn removed_or_answered_for(id: Uuid, keys: &[(String, OsString)], store: &Store) -> Result<bool> {
    let dir = store.dir().to_path_buf();
    if !dir.is_dir() {
        return Ok(true); // never made again by us
    }
    let mut layers = Layers::defaults();
    let origin = || Origin::Flag(format!("{ARG} (the owner watcher)"));
    for (k, v) in keys {
        layers.set_str(k, &v.to_string_lossy(), origin())?;
    }
    let ctx = Ctx::from_layers(&layers, &[], Arc::new(crate::report::Silent))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let _ = runtime.block_on(super::reap::sweep_sandbox(&ctx, id));
    let Ok(state) = store.load() else {
        return Ok(true);
    };
    let Some(rec) = state.get(id) else {
        return Ok(true);
    };
    let alive = |p: &ProcessRef| p.is_alive();
    Ok(match rec.state {
        Lifecycle::Stopping => rec.stopper.is_some_and(|p| p.is_alive()),
        _ => crate::lease::lease_reason(rec, &alive, SystemTime::now()).is_none(),
    })
}
