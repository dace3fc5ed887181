//! The owner watcher (docs/guide.md, The owner watcher): a sandbox tied to a
//! process goes within seconds of that process's exit with nothing else running, never while
//! the owner lives, and the watcher never outlives its sandbox, holds none of its caller's
//! descriptors and survives a kill of its caller's process group.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::*;

/// A process to own sandboxes, killed (and reaped) on drop.
struct Owner(Child);

impl Owner {
    fn new() -> Owner {
        Owner(Command::new("sleep").arg("600").spawn().unwrap())
    }

    fn pid(&self) -> String {
        self.0.id().to_string()
    }

    fn end(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.end();
    }
}

/// The PIDs of the owner watchers of sandbox `id` (processes whose command line is
/// `h9sandbox __watch-owner ID …`).
fn watchers(id: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let words: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if words.get(1) == Some(&&b"__watch-owner"[..]) && words.get(2) == Some(&id.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// Field `n` (1-based, as proc(5) counts) of `/proc/PID/stat`.
fn stat_field(pid: u32, n: usize) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(n - 3).unwrap().to_string()
}

/// The one watcher of sandbox `id`, once it has detached (its parent is no longer `up`'s).
fn the_watcher(id: &str) -> u32 {
    let mut pid = 0;
    wait_until(Duration::from_secs(20), "the owner watcher", || {
        let w = watchers(id);
        // The processes of the double fork may still show for a moment: the first, in its
        // caller's session (ours), and the session leader between the two forks.
        let ours = stat_field(std::process::id(), 6);
        if w.len() == 1 && (stat_field(w[0], 6) == w[0].to_string() || stat_field(w[0], 6) == ours)
        {
            return false;
        }
        match w.as_slice() {
            [one] => {
                pid = *one;
                true
            }
            _ => false,
        }
    });
    pid
}

#[test]
fn a_sandbox_goes_within_seconds_of_its_owners_exit_and_never_before() {
    require_engine!();
    let env = TestEnv::new();
    let mut owner = Owner::new();
    // `$(…)` returns at once: the watcher holds no pipe of its caller.
    let out = wait_output(
        env.shell(&format!(
            "id=$(\"$H9\" up --owner-pid {}) && echo \"$id\"",
            owner.pid()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
        Duration::from_secs(60),
        "up --owner-pid in $(…)",
    );
    assert_ok(&out);
    let id = stdout(&out).trim().to_string();
    let w = the_watcher(&id);
    // Detached: a session of its own (not a session leader), no terminal, nothing of ours.
    let my_sid = stat_field(std::process::id(), 6);
    assert_ne!(stat_field(w, 6), my_sid, "the watcher shares our session");
    assert_ne!(
        stat_field(w, 6),
        w.to_string(),
        "the watcher leads its session"
    );
    assert_eq!(
        stat_field(w, 7),
        "0",
        "the watcher has a controlling terminal"
    );
    assert_eq!(
        std::fs::read_link(format!("/proc/{w}/cwd")).unwrap(),
        std::path::Path::new("/")
    );
    let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{w}/fd"))
        .unwrap()
        .flatten()
        .map(|e| {
            let target = std::fs::read_link(e.path()).unwrap_or_default();
            format!("{} {}", e.file_name().to_string_lossy(), target.display())
        })
        .collect();
    fds.sort();
    assert_eq!(
        &fds[..3],
        ["0 /dev/null", "1 /dev/null", "2 /dev/null"],
        "{fds:?}"
    );
    assert!(
        fds[3..]
            .iter()
            .all(|f| f.ends_with("anon_inode:[pidfd]") || f.ends_with("anon_inode:inotify")),
        "the watcher holds more than its pidfd and inotify: {fds:?}"
    );
    // While the owner lives, the sandbox stays: through state changes that wake the watcher
    // (a renew, another sandbox's up and down) and past a few of its looks.
    assert_ok(&env.run(&["renew", &id, "--ttl", "1h"]));
    let other = env.up(&[]);
    assert_ok(&env.run(&["down", &other]));
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(env.entry(&id)["state"], "Running");
    assert_ok(&env.run(&["exec", &id, "--", "true"]));
    // The owner exits: nothing else runs, and the sandbox goes within seconds.
    owner.end();
    wait_until(
        Duration::from_secs(20),
        "removal after the owner's exit",
        || env.ls_raw().is_empty() && env.containers().is_empty(),
    );
    env.assert_nothing_left("after the owner's exit");
    wait_until(Duration::from_secs(10), "the watcher's own exit", || {
        watchers(&id).is_empty()
    });
}

#[test]
fn a_watcher_never_outlives_its_sandbox() {
    require_engine!();
    let env = TestEnv::new();
    let owner = Owner::new();
    let id = env.up(&["--owner-pid", &owner.pid()]);
    the_watcher(&id);
    assert_ok(&env.run(&["down", &id]));
    wait_until(
        Duration::from_secs(10),
        "the watcher's exit after down",
        || watchers(&id).is_empty(),
    );
    // Nor its state directory.
    let env = TestEnv::new();
    let id = env.up(&["--owner-pid", &owner.pid()]);
    the_watcher(&id);
    let moved = env.root.path().join("state-moved-away");
    std::fs::rename(&env.state_dir, &moved).unwrap();
    wait_until(
        Duration::from_secs(10),
        "the watcher's exit after its state dir went",
        || watchers(&id).is_empty(),
    );
    std::fs::rename(&moved, &env.state_dir).unwrap();
    assert_ok(&env.run(&["down", &id]));
}

#[test]
fn the_watcher_survives_a_kill_of_its_callers_process_group() {
    require_engine!();
    let env = TestEnv::new();
    // A job whose shell owns the sandbox and then waits, all in one process group; the whole
    // group is killed with SIGKILL (a cancelled CI job, a killed terminal).
    let id_file = env.root.path().join("id");
    let mut job = env
        .shell(&format!(
            "\"$H9\" up --owner-pid $$ > {}.tmp && mv {0}.tmp {0} && exec sleep 600",
            id_file.display()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(60), "the job's up", || id_file.exists());
    let id = std::fs::read_to_string(&id_file)
        .unwrap()
        .trim()
        .to_string();
    let w = the_watcher(&id);
    signal_group(job.id(), "KILL");
    let _ = job.wait();
    // The watcher lives on, and removes the sandbox of its dead owner.
    wait_until(
        Duration::from_secs(20),
        "removal after the group's kill",
        || env.ls_raw().is_empty() && env.containers().is_empty(),
    );
    env.assert_nothing_left("after the group's kill");
    assert!(
        !watchers(&id).contains(&w) || {
            std::thread::sleep(Duration::from_secs(2));
            watchers(&id).is_empty()
        }
    );
}

#[test]
fn the_lease_bounds_a_watched_sandbox_and_renew_extends_it() {
    require_engine!();
    let env = TestEnv::new();
    let owner = Owner::new();
    // The owner lives on; the lease runs out: the watcher removes the sandbox, as reap would.
    let id = env.up(&["--owner-pid", &owner.pid(), "--ttl", "3s"]);
    assert_eq!(env.entry(&id)["state"], "Running");
    wait_until(
        Duration::from_secs(30),
        "removal at the lease's end",
        || env.ls_raw().is_empty() && env.containers().is_empty(),
    );
    wait_until(Duration::from_secs(10), "the watcher's exit", || {
        watchers(&id).is_empty()
    });
    // Renewed in time, it stays.
    let id = env.up(&["--owner-pid", &owner.pid(), "--ttl", "3s"]);
    assert_ok(&env.run(&["renew", &id, "--ttl", "1h"]));
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(env.entry(&id)["state"], "Running");
    assert_eq!(watchers(&id).len(), 1);
    assert_ok(&env.run(&["down", &id]));
}

#[test]
fn without_the_watcher_removal_waits_for_reap() {
    require_engine!();
    let env = TestEnv::without_owner_watcher();
    let mut owner = Owner::new();
    let id = env.up(&["--owner-pid", &owner.pid()]);
    assert!(watchers(&id).is_empty());
    owner.end();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(env.ls_raw().len(), 1);
    let out = env.run(&["reap", "--format", "json"]);
    assert_ok(&out);
    assert!(stdout(&out).contains("owner-dead"), "{}", stdout(&out));
    env.assert_nothing_left("after reap");
}

#[test]
fn run_and_an_mcp_session_are_owners_too() {
    require_engine!();
    let env = TestEnv::new();
    // `run` SIGKILLed mid-command: its sandbox goes without a reap.
    let marker = env.path("run-started");
    let run = env
        .cmd()
        .args([
            "run",
            "--",
            &format!("touch {}; sleep 600", marker.display()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(60), "run's command", || marker.exists());
    let id = env.ls_raw()[0]["id"].as_str().unwrap().to_string();
    assert_eq!(watchers(&id).len(), 1, "run's sandbox has no watcher");
    signal(run.id(), "KILL");
    let _ = wait_output(run, Duration::from_secs(10), "run after SIGKILL");
    wait_until(
        Duration::from_secs(20),
        "removal after run's SIGKILL",
        || env.ls_raw().is_empty() && env.containers().is_empty(),
    );
    env.assert_nothing_left("after run's SIGKILL");
    // `mcp --auto-up` SIGKILLed: the same.
    let mut server = env
        .cmd()
        .args(["mcp", "--auto-up"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _stdin = server.stdin.take();
    wait_until(Duration::from_secs(60), "the session's sandbox", || {
        let recs = env.ls_raw();
        recs.len() == 1
            && recs[0]["state"] == "Running"
            && !watchers(recs[0]["id"].as_str().unwrap()).is_empty()
    });
    signal(server.id(), "KILL");
    let _ = wait_output(server, Duration::from_secs(10), "mcp after SIGKILL");
    wait_until(
        Duration::from_secs(20),
        "removal after the server's SIGKILL",
        || env.ls_raw().is_empty() && env.containers().is_empty(),
    );
    env.assert_nothing_left("after the server's SIGKILL");
}
