//! Warm pools (docs/guide.md, Warm pools): `pool create` makes sandboxes before they are asked
//! for, `up --pool` hands one out (its owner and lease the claimant's, a copied work dir's
//! content as it is at the claim) and the pool makes the next one; two claims never share a
//! sandbox, a dead one is never handed out, and `pool rm` leaves nothing of the pool.

use std::time::Duration;

use crate::common::*;

/// `pool ls --format json` as (ready, starting) of pool `name`; `None` when there is no such pool.
fn counts(env: &TestEnv, name: &str) -> Option<(u64, u64)> {
    let out = env.run(&["pool", "ls", "--format", "json"]);
    assert_ok(&out);
    let pools: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    pools.iter().find(|p| p["name"] == name).map(|p| {
        (
            p["ready"].as_u64().unwrap(),
            p["starting"].as_u64().unwrap(),
        )
    })
}

/// Waits until pool `name` holds `n` ready sandboxes.
fn wait_ready(env: &TestEnv, name: &str, n: u64) {
    wait_until(
        Duration::from_secs(120),
        &format!("pool {name} holds {n} ready sandboxes"),
        || counts(env, name).is_some_and(|(ready, _)| ready == n),
    );
}

/// `up --pool` with `args`; returns the record it printed.
fn claim(env: &TestEnv, name: &str, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["up", "--pool", name, "--format", "json"];
    a.extend_from_slice(args);
    let out = env.run(&a);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Removes the pool and every sandbox left, and checks nothing is.
fn clean_up(env: &TestEnv, name: &str) {
    env.assert(&["pool", "rm", name])
        .success()
        .stdout(format!("{name}\n"));
    assert_eq!(counts(env, name), None, "pool {name} is gone");
    assert_ok(&env.run(&["down", "--all"]));
    env.assert_nothing_left("after pool rm and down --all");
}

#[test]
fn a_pool_hands_out_a_ready_sandbox_with_the_work_dir_of_the_claim_and_makes_the_next() {
    require_container!("pools are of containers");
    if swarm_refuses("pools are tested on Docker") {
        return;
    }
    let env = TestEnv::new();
    std::fs::write(env.path("f.txt"), "when the pool was made\n").unwrap();
    env.assert(&[
        "pool",
        "create",
        "p",
        "--size",
        "2",
        "--workdir-mode",
        "copy",
    ])
    .success()
    .stdout("p\n");
    assert_eq!(counts(&env, "p"), Some((2, 0)));
    // Waiting in the pool: the pool's, not anyone's sandboxes yet.
    assert!(env.ls().is_empty(), "ls lists {:?}", env.ls());
    assert_eq!(env.containers().len(), 2, "{:?}", env.containers());

    std::fs::write(env.path("f.txt"), "at the claim\n").unwrap();
    let rec = claim(&env, "p", &["--ttl", "10m"]);
    let id = rec["id"].as_str().unwrap().to_string();
    assert_eq!(rec["pool"]["name"], "p");
    assert!(rec["pool"]["claimed_at"].is_string(), "{rec}");
    assert!(rec["expires_at"].is_string(), "the claim's lease: {rec}");
    assert_eq!(rec["ttl_secs"], 600);
    assert_eq!(rec["workdir_mode"], "copy");
    assert_eq!(rec["workdir"], env.workdir.to_str().unwrap());
    assert_eq!(sh(&env, &id, "cat f.txt"), "at the claim\n");
    // The host's directory is never changed by a copied sandbox.
    env.assert(&["exec", &id, "--", "echo mine > f.txt"])
        .success();
    assert_eq!(
        std::fs::read_to_string(env.path("f.txt")).unwrap(),
        "at the claim\n"
    );
    let listed: Vec<String> = env
        .ls()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, vec![id.clone()]);
    wait_ready(&env, "p", 2);
    // `pool fill` while another filler holds the pool's lock: nothing to do, and it says why.
    let held = std::fs::File::options()
        .read(true)
        .write(true)
        .open(env.state_dir.join("pool-p.lock"))
        .unwrap();
    // The filler that made the second one may still be on its way out.
    wait_until(Duration::from_secs(10), "the filler's lock", || {
        held.try_lock().is_ok()
    });
    env.assert(&["pool", "fill", "p"])
        .success()
        .stderr(predicates::str::contains("another filler is at work"));
    drop(held);

    // As hardened as a sandbox of a plain `up`.
    let plain = env.up(&["--workdir-mode", "copy"]);
    let fmt = "{{.HostConfig.CapDrop}} {{.HostConfig.CapAdd}} {{.HostConfig.SecurityOpt}} {{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} {{.HostConfig.PidsLimit}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.NetworkMode}}";
    assert_eq!(
        inspect(&env.container(&id), fmt),
        inspect(&env.container(&plain), fmt)
    );

    // `run --pool`: one command in a sandbox of the pool, removed after it.
    std::fs::write(env.path("f.txt"), "for run\n").unwrap();
    env.assert(&["run", "--pool", "p", "--", "cat f.txt"])
        .success()
        .stdout("for run\n");
    // `pool rm` removes what waits in the pool, and what its filler is making meanwhile; the
    // claimed sandbox is the claimant's.
    env.assert(&["pool", "rm", "p"]).success().stdout("p\n");
    let mut left = env.containers();
    left.sort();
    let mut want = [env.container(&id), env.container(&plain)];
    want.sort();
    assert_eq!(
        left.iter().map(|c| &c[..12]).collect::<Vec<_>>(),
        want.iter().map(|c| &c[..12]).collect::<Vec<_>>()
    );
    assert_ok(&env.run(&["down", "--all"]));
    env.assert_nothing_left("after pool rm and down --all");
}

#[test]
fn concurrent_claims_never_share_a_sandbox_and_a_dead_one_is_never_handed_out() {
    require_container!("pools are of containers");
    if swarm_refuses("pools are tested on Docker") || workdir_copied("a mounted pool") {
        return;
    }
    let env = TestEnv::new();
    std::fs::write(env.path("f.txt"), "shared\n").unwrap();
    env.assert(&["pool", "create", "m", "--size", "3"])
        .success();
    assert_eq!(counts(&env, "m"), Some((3, 0)));
    let waiting: Vec<(String, String)> = env
        .ls_raw()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["container_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(waiting.len(), 3);
    // One dies while it waits: removed behind h9sandbox's back.
    let (dead, dead_container) = &waiting[0];
    let out = std::process::Command::new(engine().cli().unwrap())
        .args(["rm", "-f", dead_container])
        .output()
        .unwrap();
    assert!(out.status.success());

    let children: Vec<_> = (0..3)
        .map(|_| {
            env.cmd()
                .args(["up", "--pool", "m"])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| wait_output(c, Duration::from_secs(300), "up --pool m"))
        .collect();
    let mut ids: Vec<String> = outs
        .iter()
        .map(|o| {
            assert_ok(o);
            stdout(o).trim().to_string()
        })
        .collect();
    let warned = outs
        .iter()
        .filter(|o| stderr(o).contains("does not answer"))
        .count();
    assert_eq!(warned, 1, "one claim found the dead sandbox: {outs:?}");
    assert!(
        !ids.contains(dead),
        "the dead sandbox {dead} was handed out"
    );
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "three claims, three sandboxes: {ids:?}");
    for id in &ids {
        // Each mounts the pool's work dir and runs.
        assert_eq!(sh(&env, id, "cat f.txt"), "shared\n");
    }
    wait_ready(&env, "m", 3);
    clean_up(&env, "m");
}

#[test]
fn pool_misuse_is_refused_in_one_line_and_a_pool_that_cannot_be_made_is_not_kept() {
    require_container!("pools are of containers");
    if swarm_refuses("pools are tested on Docker") {
        return;
    }
    let env = TestEnv::new();
    let one_line = |out: &std::process::Output, code: i32, has: &str| {
        assert_eq!(out.status.code(), Some(code), "{out:?}");
        let err = stderr(out);
        assert!(err.contains(has), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(out.stdout.is_empty(), "{out:?}");
    };
    one_line(
        &env.run(&["up", "--pool", "nosuch"]),
        1,
        "no pool nosuch in the state directory",
    );
    // The pool fixes what the sandbox is: clap refuses the mix (usage, exit 2).
    let out = env.run(&["up", "--pool", "p", "--memory", "1g"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("cannot be used with"), "{out:?}");
    one_line(
        &env.run(&["pool", "create", "Bad/Name"]),
        1,
        "invalid pool name",
    );
    one_line(
        &env.run(&["pool", "create", "p", "--ttl", "1m"]),
        1,
        "pool create takes no --owner-pid or --ttl",
    );
    one_line(
        &env.run(&[
            "pool",
            "create",
            "p",
            "--size",
            "2",
            "-p",
            "127.0.0.1:18099:80",
        ]),
        1,
        "cannot all have that one port",
    );
    one_line(&env.run(&["up", "--pool", "../x"]), 1, "invalid pool name");
    let out = env.run(&["pool", "create", "p", "--size", "0"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    one_line(
        &env.run(&["pool", "rm", "nosuch"]),
        1,
        "no pool nosuch in the state directory",
    );
    // The first sandbox cannot be made: nothing is kept, and the error is up's.
    let out = env.run(&[
        "pool",
        "create",
        "p",
        "--image",
        "h9sandbox-test/no-such-image:1",
    ]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stderr(&out).contains("no-such-image"),
        "the error names the image: {}",
        stderr(&out)
    );
    assert_eq!(counts(&env, "p"), None, "the pool is not kept");
    env.assert_nothing_left("after a pool that could not be made");
    // A name in use.
    env.assert(&["pool", "create", "p", "--size", "1"])
        .success();
    one_line(
        &env.run(&["pool", "create", "p", "--size", "1"]),
        1,
        "pool p exists",
    );
    clean_up(&env, "p");
}

#[test]
fn a_claim_waits_for_the_bootstrap_and_the_claimants_environment_never_shapes_the_pool() {
    require_container!("pools are of containers");
    if swarm_refuses("pools are tested on Docker") {
        return;
    }
    let env = TestEnv::new();
    env.assert(&[
        "pool",
        "create",
        "b",
        "--size",
        "1",
        "--no-wait",
        "--bootstrap",
        "sleep 2; touch /tmp/bootdone",
    ])
    .success()
    .stdout("b\n");
    // Claimed as soon as it is there, but never before its bootstrap has ended.
    let id = claim(&env, "b", &[])["id"].as_str().unwrap().to_string();
    env.assert(&["exec", &id, "--", "test -e /tmp/bootdone"])
        .success();
    // A claimant's variables reach neither the filler it starts nor the sandbox made then.
    let out = env
        .cmd()
        .args(["up", "--pool", "b"])
        .env("H9SANDBOX_MEMORY", "64m")
        .env("SANDBOX_BOOTSTRAP_CMD", "touch /tmp/from-a-claimant")
        .output()
        .unwrap();
    assert_ok(&out);
    wait_ready(&env, "b", 1);
    let next = claim(&env, "b", &[])["id"].as_str().unwrap().to_string();
    let plain = env.up(&[]);
    assert_eq!(
        inspect(&env.container(&next), "{{.HostConfig.Memory}}"),
        inspect(&env.container(&plain), "{{.HostConfig.Memory}}"),
    );
    env.assert(&[
        "exec",
        &next,
        "--",
        "test ! -e /tmp/from-a-claimant && test -e /tmp/bootdone",
    ])
    .success();

    // The user's configuration changes under the pool: its filler makes nothing unlike the
    // pool's, and a claim that waits for it fails at once, saying why. (The sandbox made
    // before the change is the pool's as it was: claimed first.)
    wait_ready(&env, "b", 1);
    let dir = env.root.path().join(".config/h9sandbox");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), "memory = \"128m\"\n").unwrap();
    claim(&env, "b", &[]);
    let started = std::time::Instant::now();
    let out = env.run(&["up", "--pool", "b"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr(&out).contains("no longer the one pool b was made with"),
        "{}",
        stderr(&out)
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the claim failed at once, not at its deadline"
    );
    let out = env.run(&["pool", "ls", "--format", "json"]);
    assert!(stdout(&out).contains("no longer the one pool b was made with"));
    std::fs::remove_file(dir.join("config.toml")).unwrap();
    clean_up(&env, "b");
}
