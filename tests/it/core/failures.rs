//! What goes wrong around a sandbox: concurrent callers, a container killed or removed behind h9sandbox's back, a missing image, a name in use, a corrupt state file, bad configuration.

use super::*;

#[test]
fn concurrent_ups_both_get_records() {
    require_engine!();
    let env = TestEnv::new();
    let children: Vec<_> = (0..4)
        .map(|_| {
            env.cmd()
                .arg("up")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let ids: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert_ok(&out);
            stdout(&out).trim().to_string()
        })
        .collect();
    let listed = env.ls();
    for id in &ids {
        assert!(listed
            .iter()
            .any(|e| e["id"] == id.as_str() && e["state"] == "Running"));
    }
    assert_eq!(listed.len(), 4);
    // And `down --all` removes them all at once.
    assert_ok(&env.run(&["down", "--all"]));
    assert!(env.ls().is_empty() && env.containers().is_empty());
}

/// [`container_killed_or_removed_behind_our_back`] on a swarm: the task's container killed on
/// its node (told once the node reported it), then the service removed.
pub(super) fn killed_or_removed_behind_our_back_on_a_swarm(env: &TestEnv, id: &str, service: &str) {
    let (mut node, container) = swarm_container(service);
    assert_ok(&node.args(["kill", &container]).output().unwrap());
    wait_until(Duration::from_secs(30), "ls tells the killed task", || {
        env.entry(id)["state"] == "Failed"
    });
    assert_eq!(env.entry(id)["container_state"], "exited");
    let out = env.run(&["exec", id, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("not running"), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert_ok(
        &swarm_manager()
            .args(["service", "rm", service])
            .output()
            .unwrap(),
    );
    assert_eq!(env.entry(id)["container_state"], "missing");
    let out = env.run(&["exec", id, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("no longer exists"),
        "{}",
        stderr(&out)
    );
    assert_ok(&env.run(&["down", id]));
    assert!(env.ls().is_empty());
    env.assert_nothing_left("a service removed behind our back");
}

#[test]
fn container_killed_or_removed_behind_our_back() {
    require_container!("a local sandbox has no container to kill");
    let env = TestEnv::new();
    let id = env.up(&[]);
    let c = env.container(&id);
    if engine() == Engine::Swarm {
        return killed_or_removed_behind_our_back_on_a_swarm(&env, &id, &c);
    }
    std::process::Command::new(cli())
        .args(["kill", &c])
        .output()
        .unwrap();
    // Podman's kill returns before the container's exit is recorded; wait for it.
    std::process::Command::new(cli())
        .args(["wait", &c])
        .output()
        .unwrap();
    let e = env.entry(&id);
    assert_eq!(e["state"], "Failed");
    assert_eq!(e["container_state"], "exited");
    let out = env.run(&["exec", &id, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("not running"), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));

    std::process::Command::new(cli())
        .args(["rm", "-f", "-v", &c])
        .output()
        .unwrap();
    assert_eq!(env.entry(&id)["container_state"], "missing");
    let out = env.run(&["exec", &id, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("no longer exists"),
        "{}",
        stderr(&out)
    );
    assert_ok(&env.run(&["down", &id]));
    assert!(env.ls().is_empty());
}

#[test]
fn concurrent_down_of_one_sandbox_both_succeed() {
    require_engine!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    let a = env
        .cmd()
        .args(["down", &id])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let b = env
        .cmd()
        .args(["down", &id])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert_ok(&a.wait_with_output().unwrap());
    assert_ok(&b.wait_with_output().unwrap());
    assert!(env.containers().is_empty());
}

#[test]
fn missing_image_is_a_clear_error_and_leaves_nothing() {
    require_container!("a local sandbox has no image");
    let env = TestEnv::new();
    let started = Instant::now();
    let out = env.run(&["up", "--image", "h9sandbox-test/does-not-exist:1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("h9sandbox-test/does-not-exist:1") && err.contains("could not be pulled"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(started.elapsed() < Duration::from_secs(60));
    env.assert_nothing_left("a missing image");
}

#[test]
fn name_in_use_is_refused() {
    require_engine!();
    let env = TestEnv::new();
    let name = format!("h9t-{}", std::process::id());
    env.up(&["--name", &name]);
    let out = env.run(&["up", "--name", &name]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("already in use"), "{}", stderr(&out));
    // The name also names the sandbox.
    assert_ok(&env.run(&["exec", &name, "--", "true"]));
    assert_eq!(env.ls().len(), 1);
}

#[test]
fn corrupt_state_file_is_named_and_left_alone() {
    let env = TestEnv::new();
    let file = env.state_dir.join("state.json");
    std::fs::write(&file, "{ this is not json").unwrap();
    let out = env.run(&["ls"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(file.to_str().unwrap()) && err.contains("corrupt"),
        "{err}"
    );
    assert!(!err.contains("panicked"));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "{ this is not json"
    );
}

#[test]
fn bad_configuration_is_refused_with_file_key_and_reason() {
    let env = TestEnv::new();
    let dir = env.root.path().join(".config/h9sandbox");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.toml");
    std::fs::write(&file, "memory = \"lots\"\n").unwrap();
    let out = env.run(&["up"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(file.to_str().unwrap()) && err.contains("memory") && err.contains("'lots'"),
        "{err}"
    );
    std::fs::write(&file, "cpus = -1\n").unwrap();
    let out = env
        .cmd()
        .env_remove("H9SANDBOX_CPUS")
        .arg("up")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(
        err.contains("cpus") && err.contains("out of range"),
        "{err}"
    );
    std::fs::write(&file, "colour = true\n").unwrap();
    let err = stderr(&env.run(&["ls"]));
    assert!(err.contains("unknown key `colour`"), "{err}");
    std::fs::remove_file(&file).unwrap();
    let out = env.cmd().args(["up", "--memory", "2x"]).output().unwrap();
    assert!(stderr(&out).contains("--memory"), "{}", stderr(&out));
    assert!(env.ls().is_empty(), "a refused up left a record");
}
