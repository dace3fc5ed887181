//! Leases, `reap`, crashes and many processes at once, against the real Docker Engine: nothing
//! leaks when processes are SIGKILLed, and nothing a live process answers for is ever removed.
//!
//! `issues show 4` asks for `write`/`read` in the stress loop; those subcommands come from another
//! issue, so the loop writes and reads a file through `exec` instead.

use std::collections::HashSet;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use crate::common::*;
use serde::Deserialize;

mod concurrency;

/// One entry of `reap --format json`; unknown fields are refused, so the shape is pinned.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reaped {
    id: Option<String>,
    name: String,
    container: Option<String>,
    action: String,
    reason: String,
    detail: String,
}

fn reap(env: &TestEnv, args: &[&str]) -> Vec<Reaped> {
    let mut a = vec!["reap", "--format", "json"];
    a.extend_from_slice(args);
    let out = env.run(&a);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A process to own sandboxes: `sleep 600`, killed with SIGKILL by [`kill9`].
fn sleeper() -> Child {
    Command::new("sleep").arg("600").spawn().unwrap()
}

fn kill9(child: &mut Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `(pid, start time)` of a process, as h9sandbox records it (field 22 of /proc/PID/stat).
fn process_ref(pid: u32) -> serde_json::Value {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    let start: u64 = rest.split_whitespace().nth(19).unwrap().parse().unwrap();
    serde_json::json!({ "pid": pid, "start_time": start })
}

/// state.json, parsed; a missing file (nothing was ever written) is an empty state.
fn read_state(env: &TestEnv) -> serde_json::Value {
    match std::fs::read(env.state_dir.join("state.json")) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            serde_json::json!({ "version": 1, "sandboxes": [] })
        }
        Err(e) => panic!("cannot read state.json: {e}"),
    }
}

fn write_state(env: &TestEnv, state: &serde_json::Value) {
    std::fs::write(
        env.state_dir.join("state.json"),
        serde_json::to_vec_pretty(state).unwrap(),
    )
    .unwrap();
}

/// Whether a live (non-zombie) process is in process group `pgid`.
fn group_alive(pgid: u32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            return false;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        // f[0] is the state (field 3), f[2] the process group (field 5).
        f.len() > 2 && f[0] != "Z" && f[0] != "X" && f[2] == pgid.to_string()
    })
}

/// Waits until every process of group `pgid` has ended (the `docker` clients a killed `up` left
/// running finish their request to the daemon, then exit).
fn wait_group_gone(pgid: u32) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while group_alive(pgid) {
        assert!(Instant::now() < deadline, "process group {pgid} lingers");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A pseudo-random number in 0..n (xorshift seeded by the clock; no dependency needed).
fn random_below(seed: &mut u64, n: u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed % n
}

#[test]
fn sigkill_during_up_then_reap_leaves_nothing() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    // cast: a seed; the low 64 bits of the nanoseconds will do.
    #[allow(clippy::cast_possible_truncation)]
    let mut seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut finished_before_kill = 0;
    let mut reasons = std::collections::BTreeMap::new();
    for round in 0..30 {
        // The agent that owns the sandbox and the `up` it runs die together, as when a CI job
        // is cancelled; the `up` is its own process group so its orphaned docker clients can be
        // waited for.
        let mut agent = sleeper();
        let mut up = env
            .cmd()
            .args(["up", "--owner-pid", &agent.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = up.id();
        std::thread::sleep(Duration::from_millis(random_below(&mut seed, 800)));
        up.kill().unwrap();
        let finished = up.wait().unwrap().code().is_some();
        if finished {
            finished_before_kill += 1;
        }
        kill9(&mut agent);
        // A reap racing the killed `up`'s docker clients still in flight must not fail; what
        // they create after its listing is left for the next one.
        let mut reaped = reap(&env, &[]);
        wait_group_gone(pgid);

        reaped.extend(reap(&env, &[]));
        // A create the killed `up` sent over the Engine API is finished by the daemon after
        // that `up` is gone (no client process of it is left to wait for): until no container
        // has appeared for a second, what appears is reaped.
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut quiet_since = Instant::now();
        while !finished
            && quiet_since.elapsed() < Duration::from_secs(1)
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(100));
            if !env.containers().is_empty() {
                reaped.extend(reap(&env, &[]));
                quiet_since = Instant::now();
            }
        }
        assert!(
            env.containers().is_empty(),
            "round {round}: containers left after reap {reaped:?}"
        );
        let state = read_state(&env);
        assert_eq!(
            state["sandboxes"].as_array().unwrap().len(),
            0,
            "round {round}: records left after reap {reaped:?}: {state}"
        );
        for r in &reaped {
            assert!(
                ["orphan", "creator-dead", "owner-dead"].contains(&r.reason.as_str()),
                "round {round}: {r:?}"
            );
            *reasons
                .entry(format!("{} {}", r.action, r.reason))
                .or_insert(0) += 1;
        }
        // No half-written state file is left behind either, nor an agent's run directory,
        // token or mount root (their parent directories stay, empty).
        for f in std::fs::read_dir(&env.state_dir).unwrap() {
            let f = f.unwrap();
            let name = f.file_name().to_string_lossy().into_owned();
            assert!(
                ["state.json", "state.lock", "run", "tokens", "mounts"].contains(&name.as_str()),
                "round {round}: {name}"
            );
            if f.path().is_dir() {
                let left: Vec<_> = std::fs::read_dir(f.path()).unwrap().collect();
                assert!(left.is_empty(), "round {round}: {name}: {left:?}");
            }
        }
        // Running it twice is a no-op.
        assert!(reap(&env, &[]).is_empty(), "round {round}");
    }
    eprintln!(
        "{finished_before_kill} of 30 `up`s had finished before the kill; reaped: {reasons:?}"
    );
}

#[test]
fn reap_removes_exactly_the_dead_owners_sandbox() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    let mut a = sleeper();
    let mut b = sleeper();
    let id_a = env.up(&["--owner-pid", &a.id().to_string()]);
    let id_b = env.up(&["--owner-pid", &b.id().to_string()]);
    assert_eq!(env.entry(&id_a)["owner"], process_ref(a.id()));
    // Both owners live: nothing to do.
    assert!(reap(&env, &[]).is_empty());

    kill9(&mut a);
    // A dry run reports without acting.
    let dry = reap(&env, &["--dry-run"]);
    assert_eq!(dry.len(), 1, "{dry:?}");
    assert_eq!(env.containers().len(), 2);
    assert_eq!(env.ls().len(), 2);
    let table = stdout(&env.run(&["ls"]));
    assert!(
        table.contains(&format!("pid {} (exited)", a.id())),
        "{table}"
    );

    let reaped = reap(&env, &[]);
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    let r = &reaped[0];
    assert_eq!(r.id.as_deref(), Some(id_a.as_str()));
    assert_eq!(
        (r.action.as_str(), r.reason.as_str()),
        ("remove", "owner-dead")
    );
    assert!(r.detail.contains(&a.id().to_string()), "{}", r.detail);
    assert!(r.name.starts_with("h9sandbox-"));
    assert!(r.container.is_some());
    let listed = env.ls();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], id_b.as_str());
    assert_eq!(listed[0]["container_state"], "running");
    assert_eq!(env.containers().len(), 1);
    assert_ok(&env.run(&["exec", &id_b, "--", "true"]));
    assert!(reap(&env, &[]).is_empty());
    kill9(&mut b);
}

#[test]
fn owner_parent_is_the_calling_shell() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    // The shell stays the parent (`; exit 0` keeps bash from exec'ing h9sandbox in its place).
    let shell = env
        .shell(r#""$H9" up --owner-pid parent --format json; exit 0"#)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let shell_pid = shell.id();
    let out = shell.wait_with_output().unwrap();
    assert_ok(&out);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["owner"]["pid"], shell_pid);
    // The shell has exited, so the sandbox is abandoned.
    let reaped = reap(&env, &[]);
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!(reaped[0].id.as_deref(), rec["id"].as_str());
    assert_eq!(reaped[0].reason, "owner-dead");
    assert!(env.containers().is_empty());
}

#[test]
fn lease_expires_and_renew_extends_it() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    let out = env.run(&["up", "--ttl", "2s", "--format", "json"]);
    assert_ok(&out);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["ttl_secs"], 2);
    let id = rec["id"].as_str().unwrap().to_string();
    let end = |v: &serde_json::Value| {
        humantime::parse_rfc3339(v["expires_at"].as_str().unwrap()).unwrap()
    };
    let first_end = end(&rec);

    // Renewed without --ttl: the same 2 s, from now.
    std::thread::sleep(Duration::from_millis(1100));
    let out = env.run(&["renew", &id, "--format", "json"]);
    assert_ok(&out);
    let renewed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(end(&renewed) > first_end, "{renewed}");
    assert_eq!(renewed["ttl_secs"], 2);

    // A long lease is not reaped.
    let out = env.run(&["renew", &id[..8], "--ttl", "1h"]);
    assert_ok(&out);
    assert!(stdout(&out).trim().ends_with('Z'), "{}", stdout(&out));
    assert!(reap(&env, &[]).is_empty());

    // A short one is, once it has run out.
    assert_ok(&env.run(&["renew", &id, "--ttl", "1s"]));
    let deadline = end(&env.entry(&id));
    while SystemTime::now() <= deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let reaped = reap(&env, &[]);
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!(reaped[0].reason, "expired");
    assert!(env.ls().is_empty() && env.containers().is_empty());
    // Nothing left to renew.
    assert_eq!(env.run(&["renew", &id]).status.code(), Some(1));
}

#[test]
fn lease_flags_are_checked_before_anything_happens() {
    let env = TestEnv::without_owner_watcher();
    let dead = {
        let mut c = sleeper();
        let pid = c.id();
        kill9(&mut c);
        pid
    };
    for (args, needle) in [
        (
            vec!["up", "--owner-pid", &dead.to_string()],
            "no running process",
        ),
        (vec!["up", "--owner-pid", "me"], "--owner-pid"),
        (vec!["up", "--ttl", "soon"], "--ttl"),
        (vec!["up", "--ttl", "0s"], "at least 1s"),
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains(needle) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
    assert!(!env.state_dir.join("state.json").exists());
}

#[test]
fn renew_refuses_sandboxes_without_lease_or_not_running() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    let id = env.up(&[]);
    let out = env.run(&["renew", &id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--ttl"), "{}", stderr(&out));
    assert_ok(&env.run(&["renew", &id, "--ttl", "10m"]));
    assert_eq!(env.entry(&id)["ttl_secs"], 600);
    // A sandbox being removed cannot be renewed.
    let mut state = read_state(&env);
    state["sandboxes"][0]["state"] = "Stopping".into();
    write_state(&env, &state);
    let out = env.run(&["renew", &id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("Stopping"), "{}", stderr(&out));
}

#[test]
fn pending_record_of_a_live_creator_is_spared() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    // Two sandboxes; their records are made to look like `up`s still in progress whose
    // creator is a live process: one whose container exists already, one before `docker run`.
    let with_container = env.up(&[]);
    let without = env.up(&[]);
    assert_ok(&env.cmd().args(["down", &without]).output().unwrap());
    let creator = sleeper();
    let mut state = read_state(&env);
    let mut ghost = state["sandboxes"][0].clone();
    ghost["id"] = "00000000-0000-4000-8000-00000000abcd".into();
    ghost["name"] = "ghost-pending".into();
    state["sandboxes"].as_array_mut().unwrap().push(ghost);
    for r in state["sandboxes"].as_array_mut().unwrap() {
        r["state"] = "Pending".into();
        r["creator"] = process_ref(creator.id());
        if r["id"] != with_container.as_str() {
            r["container_id"] = serde_json::Value::Null;
        }
    }
    write_state(&env, &state);
    assert!(reap(&env, &[]).is_empty());
    assert_eq!(env.containers().len(), 1);
    assert_eq!(env.ls().len(), 2);

    // The creator dies: both are abandoned.
    let mut creator = creator;
    kill9(&mut creator);
    let mut reaped = reap(&env, &[]);
    reaped.sort_by(|a, b| a.action.cmp(&b.action));
    assert_eq!(reaped.len(), 2, "{reaped:?}");
    assert_eq!(
        (reaped[0].action.as_str(), reaped[0].reason.as_str()),
        ("drop-record", "creator-dead")
    );
    assert_eq!(reaped[0].name, "ghost-pending");
    assert_eq!(reaped[0].container, None);
    assert_eq!(
        (reaped[1].action.as_str(), reaped[1].reason.as_str()),
        ("remove", "creator-dead")
    );
    assert_eq!(reaped[1].id.as_deref(), Some(with_container.as_str()));
    assert!(env.ls().is_empty() && env.containers().is_empty());
}

#[test]
fn other_state_directories_are_never_touched() {
    require_docker!();
    let a = TestEnv::without_owner_watcher();
    let b = TestEnv::without_owner_watcher();
    // In B: a sandbox whose owner died, and an orphan (a container whose record is gone).
    let mut owner = sleeper();
    b.up(&["--owner-pid", &owner.id().to_string()]);
    let orphan = b.up(&[]);
    let mut state = read_state(&b);
    state["sandboxes"]
        .as_array_mut()
        .unwrap()
        .retain(|r| r["id"] != orphan.as_str());
    write_state(&b, &state);
    kill9(&mut owner);
    assert_eq!(reap(&b, &["--dry-run"]).len(), 2);

    // A's reap, and A's `up` (which reaps too), leave B alone.
    let kept = a.up(&[]);
    assert!(reap(&a, &[]).is_empty());
    assert_eq!(b.containers().len(), 2);
    assert_eq!(a.containers().len(), 1);

    let mut reaped: Vec<String> = reap(&b, &[]).into_iter().map(|r| r.reason).collect();
    reaped.sort();
    assert_eq!(reaped, ["orphan", "owner-dead"]);
    assert!(b.containers().is_empty());
    assert_eq!(a.ls()[0]["id"], kept.as_str());
}

#[test]
fn up_reaps_alongside_its_own_start_unless_disabled() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    let mut owner = sleeper();
    let doomed = env.up(&["--owner-pid", &owner.id().to_string()]);
    kill9(&mut owner);
    // reap_on_up = false: nothing is reaped.
    let out = env
        .cmd()
        .env("H9SANDBOX_REAP_ON_UP", "false")
        .arg("up")
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(env.ls().len(), 2);
    // By default `up` reaps the abandoned sandbox, and never its own Pending record.
    let out = env.run(&["-v", "up"]);
    assert_ok(&out);
    let err = stderr(&out);
    assert!(
        err.contains("reaped h9sandbox-") && err.contains("has exited"),
        "{err}"
    );
    let ids: HashSet<String> = env
        .ls()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(!ids.contains(&doomed));
    assert_eq!(env.containers().len(), 2);
}

#[test]
fn container_removed_behind_our_back_is_cleaned_by_down_and_reap() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    let a = env.up(&[]);
    let b = env.up(&[]);
    for id in [&a, &b] {
        let c = env.container(id);
        assert!(Command::new("docker")
            .args(["rm", "-f", "-v", &c])
            .output()
            .unwrap()
            .status
            .success());
    }
    let out = env.run(&["exec", &a, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    let err = stderr(&out);
    assert!(
        err.contains("no longer exists") && err.lines().count() == 1,
        "{err}"
    );
    let listed = env.ls();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|e| e["container_state"] == "missing"));
    let table = stdout(&env.run(&["ls"]));
    assert!(table.contains(&a.replace('-', "")[..12]), "{table}");

    assert_ok(&env.run(&["down", &a]));
    let reaped = reap(&env, &[]);
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!(reaped[0].id.as_deref(), Some(b.as_str()));
    assert_eq!(
        (reaped[0].action.as_str(), reaped[0].reason.as_str()),
        ("drop-record", "container-gone")
    );
    assert!(env.ls().is_empty());
    assert!(reap(&env, &[]).is_empty());
}

#[test]
fn failed_records_without_container_are_reaped() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    // A failed `up` leaves no record any more; one that could not remove its container does,
    // Failed: made here by hand (the container then went anyway).
    let id = env.up(&[]);
    let c = env.container(&id);
    assert_ok(
        &Command::new("docker")
            .args(["rm", "-f", &c])
            .output()
            .unwrap(),
    );
    let file = env.state_dir.join("state.json");
    let mut state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    state["sandboxes"][0]["state"] = "Failed".into();
    state["sandboxes"][0]["error"] = "the image could not be pulled (a test's)".into();
    std::fs::write(&file, serde_json::to_vec(&state).unwrap()).unwrap();
    assert_eq!(env.ls()[0]["state"], "Failed");
    let reaped = reap(&env, &[]);
    assert_eq!(reaped.len(), 1);
    assert_eq!(reaped[0].reason, "container-gone");
    assert!(
        reaped[0].detail.contains("could not be pulled"),
        "{}",
        reaped[0].detail
    );
    assert!(env.ls().is_empty());
}

#[test]
fn engine_unreachable_fails_fast_and_changes_nothing() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    // The sandbox's daemon is reached through a link of the test's own, which then goes away:
    // the record keeps the daemon it was made on.
    let host = env.daemon_link();
    let out = env
        .cmd()
        .env("DOCKER_HOST", &host)
        .args(["up", "--ttl", "1h"])
        .output()
        .unwrap();
    assert_ok(&out);
    let id = stdout(&out).trim().to_string();
    env.daemon_away();
    let file = env.state_dir.join("state.json");
    let before = std::fs::read(&file).unwrap();
    let cases: [(&[&str], i32); 7] = [
        (&["up"], 1),
        (&["up", "--name", "x-unreachable"], 1),
        (&["down", &id], 1),
        (&["down", "--all"], 1),
        (&["ls"], 1),
        (&["reap"], 1),
        (&["reap", "--dry-run"], 1),
    ];
    for (args, code) in cases {
        let out = env
            .cmd()
            .env("DOCKER_HOST", &host)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.lines().count() == 1
                && err.starts_with("h9sandbox: error: container engine ")
                && err.contains(" unreachable: "),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty() || args.contains(&"down"), "{args:?}");
        assert_eq!(
            std::fs::read(&file).unwrap(),
            before,
            "{args:?} changed the state file"
        );
    }
    // `exec` goes through the sandbox's own agent, which needs no engine: it still works.
    let out = env
        .cmd()
        .env("DOCKER_HOST", &host)
        .args(["exec", &id, "--", "echo", "still here"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(stdout(&out), "still here\n");
    assert_eq!(std::fs::read(&file).unwrap(), before);
    // `renew` only touches the state file, so a heartbeat keeps the lease while the daemon is away.
    let out = env
        .cmd()
        .env("DOCKER_HOST", &host)
        .args(["renew", &id])
        .output()
        .unwrap();
    assert_ok(&out);
    // And with the engine back, everything is as it was.
    env.daemon_back();
    assert_eq!(env.entry(&id)["state"], "Running");
    assert_ok(&env.run(&["exec", &id, "--", "true"]));
}

/// Waits until /proc/locks shows `pid` holding (or, with `blocked`, waiting for) a lock on `path`.
fn wait_for_lock_line(path: &Path, pid: u32, blocked: bool) {
    use std::os::unix::fs::MetadataExt;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(meta) = std::fs::metadata(path) {
            let inode = format!(":{} ", meta.ino());
            let locks = std::fs::read_to_string("/proc/locks").unwrap();
            let found = locks.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let waiting = f.get(1) == Some(&"->");
                let pid_field = if waiting { f.get(5) } else { f.get(4) };
                waiting == blocked
                    && pid_field == Some(&pid.to_string().as_str())
                    && format!("{l} ").contains(&inode)
            });
            if found {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "pid {pid} never {} the lock",
            if blocked { "waited for" } else { "held" }
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The PID of a child of `pid`, if it has one.
fn child_of(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
fn sandboxes_of_other_engines_are_judged_by_their_own() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    // A local sandbox next to a container one, in one state directory.
    let local = String::from_utf8(
        env.cmd()
            .env("H9SANDBOX_ENGINE", "local")
            .arg("up")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    assert_eq!(local.len(), 36, "local up failed");
    let contained = env.up(&[]);
    // A reap through the container engine must not take the local one for a lost container.
    assert!(reap(&env, &[]).is_empty());
    let ids: Vec<String> = env
        .ls()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert!(ids.contains(&local) && ids.contains(&contained), "{ids:?}");
    // Its lease still ends it.
    let out = env
        .cmd()
        .env("H9SANDBOX_ENGINE", "local")
        .args(["up", "--ttl", "1s"])
        .output()
        .unwrap();
    assert_ok(&out);
    let short_lived = stdout(&out).trim().to_string();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let reaped = reap(&env, &[]);
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!(reaped[0].id.as_deref(), Some(short_lived.as_str()));
}

#[test]
fn sub_sandboxes_are_reaped_with_their_parent() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    let mut owner = sleeper();
    let parent = env.up(&["--owner-pid", &owner.id().to_string()]);
    let child = env.up(&["--parent", &parent]);
    let grandchild = env.up(&["--parent", &child]);
    assert!(reap(&env, &[]).is_empty());
    kill9(&mut owner);
    let reaped = reap(&env, &[]);
    let ids: Vec<&str> = reaped.iter().filter_map(|r| r.id.as_deref()).collect();
    for id in [&parent, &child, &grandchild] {
        assert!(ids.contains(&id.as_str()), "{id} not reaped: {reaped:?}");
    }
    assert!(reaped
        .iter()
        .any(|r| r.reason == "parent-gone" && r.id.as_deref() == Some(grandchild.as_str())));
    assert!(env.ls().is_empty());
    assert!(env.containers().is_empty());
}

/// `docker run -d` of the tiny image with `labels`; returns the container's full ID.
fn docker_run_labelled(labels: &[String]) -> String {
    let mut c = Command::new("docker");
    c.args(["run", "-d"]);
    for l in labels {
        c.args(["--label", l]);
    }
    let out = c.args([TINY, "sleep", "600"]).output().unwrap();
    assert_ok(&out);
    stdout(&out).trim().to_string()
}

#[test]
fn a_forged_label_never_stands_in_for_a_sandboxs_container() {
    require_container!("forged labels are about containers");
    if engine() != Engine::Docker {
        announce("the forged container is made with docker");
        return;
    }
    let env = TestEnv::without_owner_watcher();
    let id = env.up(&[]);
    let real = env.container(&id);
    // Someone with access to the engine starts a container carrying the sandbox's labels...
    let forged = docker_run_labelled(&[
        "h9sandbox=1".into(),
        format!("h9sandbox.id={id}"),
        format!("h9sandbox.state_dir={}", env.state_dir.display()),
    ]);
    // ...and removes the sandbox's real container behind h9sandbox's back.
    assert_ok(
        &Command::new("docker")
            .args(["rm", "-f", "-v", &real])
            .output()
            .unwrap(),
    );
    // `ls` matches by the recorded container ID: the sandbox's container is missing, and the
    // label match with another ID is reported, in JSON and as a warning.
    let e = env.entry(&id);
    assert_eq!(e["container_state"], "missing", "{e}");
    assert_eq!(e["state"], "Failed", "{e}");
    assert_eq!(e["container_id"], real.as_str());
    assert_eq!(e["foreign_containers"], serde_json::json!([forged]), "{e}");
    let out = env.run(&["ls"]);
    assert_ok(&out);
    let err = stderr(&out);
    assert!(
        err.starts_with("h9sandbox: warning: ")
            && err.contains(&forged[..12])
            && err.contains(&real[..12])
            && err.lines().count() == 1,
        "{err}"
    );
    // `reap` never treats the forged container as the sandbox's: the record has lost its
    // container, and the forged one, labelled with this state directory but no record's
    // container, is an orphan.
    let mut reaped = reap(&env, &[]);
    reaped.sort_by(|a, b| a.action.cmp(&b.action));
    assert_eq!(reaped.len(), 2, "{reaped:?}");
    assert_eq!(
        (
            reaped[0].id.as_deref(),
            reaped[0].container.as_deref(),
            reaped[0].action.as_str(),
            reaped[0].reason.as_str()
        ),
        (Some(id.as_str()), None, "drop-record", "container-gone")
    );
    assert_eq!(
        (
            reaped[1].container.as_deref(),
            reaped[1].action.as_str(),
            reaped[1].reason.as_str()
        ),
        (Some(forged.as_str()), "remove-container", "orphan")
    );
    assert!(
        reaped[1].detail.contains(&real[..12]),
        "{}",
        reaped[1].detail
    );
    assert!(env.containers().is_empty(), "{:?}", env.containers());
    assert!(env.ls_raw().is_empty());
}

#[test]
fn a_forged_label_next_to_the_real_container_changes_nothing_but_itself() {
    require_container!("forged labels are about containers");
    if engine() != Engine::Docker {
        announce("the forged container is made with docker");
        return;
    }
    let env = TestEnv::without_owner_watcher();
    let mut owner = sleeper();
    let id = env.up(&["--owner-pid", &owner.id().to_string()]);
    let real = env.container(&id);
    let forged = docker_run_labelled(&[
        "h9sandbox=1".into(),
        format!("h9sandbox.id={id}"),
        format!("h9sandbox.state_dir={}", env.state_dir.display()),
    ]);
    let e = env.entry(&id);
    assert_eq!(
        (&e["state"], &e["container_state"]),
        (&serde_json::json!("Running"), &serde_json::json!("running"))
    );
    assert_eq!(e["foreign_containers"], serde_json::json!([forged]));
    // The live sandbox is spared; only the forged container goes.
    let reaped = reap(&env, &[]);
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!(
        (reaped[0].container.as_deref(), reaped[0].reason.as_str()),
        (Some(forged.as_str()), "orphan")
    );
    assert_eq!(env.containers(), vec![real[..12].to_string()]);
    // Its owner dies: reap removes the real container, never picks the label instead.
    kill9(&mut owner);
    let reaped = reap(&env, &[]);
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!(
        (reaped[0].container.as_deref(), reaped[0].reason.as_str()),
        (Some(real.as_str()), "owner-dead")
    );
    assert!(env.containers().is_empty());
}

#[test]
fn a_sandbox_whose_daemon_is_gone_hides_nothing_else_and_down_forget_drops_it() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    // Settings naming no daemon: `up` fails with one line and leaves no record.
    let out = env
        .cmd()
        .env("DOCKER_CONTEXT", "no-such-context")
        .arg("up")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(env.ls().is_empty(), "a failed up left a record");
    // A sandbox on a daemon that then goes away (its record keeps the daemon), and one here.
    let host = env.daemon_link();
    let out = env
        .cmd()
        .env("DOCKER_HOST", &host)
        .arg("up")
        .output()
        .unwrap();
    assert_ok(&out);
    let gone = stdout(&out).trim().to_string();
    let here = env.up(&[]);
    env.daemon_away();
    // ls and reap still work for the rest: the lost daemon's sandbox is shown as recorded.
    let out = env.run(&["ls", "--format", "json"]);
    assert_ok(&out);
    assert!(
        stderr(&out).contains("cannot check the sandboxes of"),
        "{}",
        stderr(&out)
    );
    let all: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let state_of = |id: &str| {
        all.iter()
            .find(|r| r["id"] == id)
            .map(|r| r["container_state"].clone())
    };
    assert_eq!(state_of(&gone), Some("unknown".into()));
    assert_eq!(state_of(&here), Some("running".into()));
    assert_ok(&env.run(&["reap"]));
    assert_eq!(
        env.ls_raw().len(),
        2,
        "reap judged the unreachable daemon's sandbox"
    );
    // down keeps the record true while the daemon cannot be reached; --forget drops it.
    let out = env.run(&["down", &gone]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = env.run(&["down", "--forget", &gone]);
    assert_ok(&out);
    assert!(
        stderr(&out).contains("forgetting sandbox"),
        "{}",
        stderr(&out)
    );
    let left: Vec<String> = env
        .ls_raw()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(left, std::slice::from_ref(&here));
    // Its container (on this machine's daemon after all) is TestEnv's to clean up.
    env.daemon_back();
    assert_ok(&env.run(&["down", &here]));
}
