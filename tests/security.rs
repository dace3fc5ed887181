//! Attacks from inside a sandbox (and from hostile input) that must not reach the host, found by
//! adversarial review; each test reproduces one.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;

#[test]
fn planted_project_config_cannot_choose_the_engine_binary() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    // Code in the sandbox writes a script and a sandbox.toml pointing engine_bin at it.
    let plant = "printf '#!/bin/sh\\ntouch \"$PWD/pwned\"\\nexec docker \"$@\"\\n' > evil.sh; chmod +x evil.sh; \
                 echo \"engine_bin = \\\"$PWD/evil.sh\\\"\" > sandbox.toml";
    assert_ok(&env.run(&["exec", &id, "--", plant]));
    assert!(env.path("sandbox.toml").exists());
    // Commands on the sandbox never read it; `up` ignores it (not trusted).
    assert_ok(&env.run(&["exec", &id, "--", "true"]));
    let out = env.run(&["up"]);
    assert_ok(&out);
    assert!(stderr(&out).contains("not trusted"), "{}", stderr(&out));
    // Nor can it be trusted: engine_bin acts on the host.
    let out = env.run(&["trust"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not allowed in a project's sandbox.toml"),
        "{}",
        stderr(&out)
    );
    assert!(
        !env.path("pwned").exists(),
        "the planted engine_bin ran on the host"
    );
    std::fs::remove_file(env.path("sandbox.toml")).unwrap();
}

#[test]
fn timeout_holds_when_the_container_tools_are_replaced() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    // Replace the tools an in-container kill helper would use with ones that hang.
    let sabotage = "for t in tr grep kill; do rm -f /bin/$t; printf '#!/bin/sh\\nexec sleep 100000\\n' > /bin/$t; chmod +x /bin/$t; done";
    assert_ok(&env.run(&["exec", &id, "--", sabotage]));
    let out = env.run(&["exec", &id, "--timeout", "2", "--", "sleep 500 & sleep 501"]);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("process tree was killed"),
        "{}",
        stderr(&out)
    );
    let ps = stdout(&env.run(&["exec", &id, "--", "ps -o args"]));
    assert!(!ps.contains("sleep 50"), "left behind:\n{ps}");
}

#[test]
fn a_dead_reader_ends_the_command() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    // `head` exits after one line; the client dies of SIGPIPE; `yes` must not run on.
    let bin = assert_cmd::cargo::cargo_bin("h9sandbox");
    let sh = env.cmd();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' exec {id} -- 'yes' | head -n 1",
            bin.display()
        ))
        .envs(
            sh.get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .current_dir(&env.workdir)
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "y\n");
    std::thread::sleep(Duration::from_millis(500));
    let ps = stdout(&env.run(&["exec", &id, "--", "ps -o args"]));
    assert!(
        !ps.lines().any(|l| l.trim() == "yes"),
        "`yes` runs on:\n{ps}"
    );
}

#[test]
fn hostile_images_and_names_are_refused() {
    let env = TestEnv::new();
    let out = env.run(&["up", "--image=--privileged"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not an image reference"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["up", "--name", "deadbeef"]);
    assert!(
        stderr(&out).contains("look like sandbox IDs"),
        "{}",
        stderr(&out)
    );
    assert!(env.ls_raw().is_empty());
}

#[test]
fn sensitive_work_directories_are_refused() {
    let env = TestEnv::new();
    for (dir, why) in [
        ("/etc", "system directory"),
        ("/proc", "system directory"),
        ("/var", "work directory /var"),
        (env.root.path().to_str().unwrap(), "state directory"),
    ] {
        let out = env.run(&["up", "--workdir", dir]);
        assert_eq!(out.status.code(), Some(1), "{dir}");
        assert!(stderr(&out).contains(why), "{dir}: {}", stderr(&out));
    }
    assert!(env.ls_raw().is_empty());
}

#[test]
fn down_with_the_engine_unreachable_keeps_the_record_true() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    let before = std::fs::read(env.state_dir.join("state.json")).unwrap();
    let out = env
        .cmd()
        .env("DOCKER_HOST", "unix:///nonexistent.sock")
        .args(["down", &id])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let after: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.state_dir.join("state.json")).unwrap()).unwrap();
    let before: serde_json::Value = serde_json::from_slice(&before).unwrap();
    assert_eq!(
        after["sandboxes"][0]["state"],
        before["sandboxes"][0]["state"]
    );
    assert_eq!(env.entry(&id)["state"], "Running");
}

#[test]
fn planted_project_config_cannot_switch_to_the_local_engine() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    // From inside: ask for no isolation, and a bootstrap that would then run on the host.
    let plant =
        "printf 'engine = \"local\"\\nbootstrap_cmd = \"touch $PWD/pwned\"\\n' > sandbox.toml";
    assert_ok(&env.run(&["exec", &id, "--", plant]));
    let out = env
        .cmd()
        .env_remove("H9SANDBOX_ENGINE")
        .args(["up", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(stderr(&out).contains("not trusted"), "{}", stderr(&out));
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["engine"], "docker");
    let out = env.run(&["trust"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("key `engine`"), "{}", stderr(&out));
    assert!(
        !env.path("pwned").exists(),
        "the planted bootstrap ran on the host"
    );
    std::fs::remove_file(env.path("sandbox.toml")).unwrap();
}

#[test]
fn a_garbled_project_config_cannot_block_cleanup() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    assert_ok(&env.run(&["exec", &id, "--", "echo 'garbage [' > sandbox.toml"]));
    // Commands on the sandbox never read it: they work, and say nothing about it.
    for args in [
        vec!["exec", id.as_str(), "--", "true"],
        vec!["ls"],
        vec!["reap"],
    ] {
        let out = env.run(&args);
        assert_ok(&out);
        assert!(stderr(&out).is_empty(), "{args:?}: {}", stderr(&out));
    }
    assert_ok(&env.run(&["down", &id]));
    assert!(env.containers().is_empty());
}

#[test]
fn a_work_dir_swapped_for_a_symlink_is_refused_by_the_file_commands() {
    require_docker!();
    let env = TestEnv::new();
    // A sandbox whose work dir lies inside a directory someone else (a parent sandbox) controls.
    let inner = env.path("inner");
    std::fs::create_dir(&inner).unwrap();
    let id = env.up(&["--workdir", inner.to_str().unwrap()]);
    let outside = env.root.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret"), "host secret\n").unwrap();
    // The controller swaps the directory for a symlink to somewhere else on the host.
    std::fs::rename(&inner, env.path("inner.real")).unwrap();
    std::os::unix::fs::symlink(&outside, &inner).unwrap();
    let out = env.run(&["read", &id, "secret"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!stdout(&out).contains("host secret"));
    assert!(stderr(&out).contains("symlink"), "{}", stderr(&out));
    let out = env
        .cmd()
        .args(["write", &id, "planted"])
        .stdin(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!outside.join("planted").exists());
}

#[test]
fn the_project_file_is_layered_over_the_users_configuration() {
    require_docker!();
    let env = TestEnv::new();
    let xdg = env.root.path().join("xdg");
    std::fs::create_dir_all(xdg.join("h9sandbox")).unwrap();
    std::fs::write(xdg.join("h9sandbox/config.toml"), "memory = \"300m\"\n").unwrap();
    std::fs::write(env.path("sandbox.toml"), "pids_limit = 77\n").unwrap();
    assert_ok(&env.run(&["trust"]));
    let out = env
        .cmd()
        .env("XDG_CONFIG_HOME", &xdg)
        .arg("up")
        .output()
        .unwrap();
    assert_ok(&out);
    let c = env.container(stdout(&out).trim());
    assert_eq!(
        inspect(&c, "{{.HostConfig.Memory}}"),
        (300u64 << 20).to_string()
    );
    assert_eq!(inspect(&c, "{{.HostConfig.PidsLimit}}"), "77");
}

#[test]
fn a_parent_swapping_a_childs_work_dir_cannot_make_it_mount_the_host() {
    require_docker!();
    let env = TestEnv::new();
    std::fs::create_dir(env.path("inner")).unwrap();
    let outside = env.root.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let parent = env.up(&[]);
    // The parent swaps `inner` for a symlink to a host directory, over and over.
    let swap = format!(
        "(while :; do mv inner D && ln -s {o} inner; usleep 20000; rm inner; mv D inner; usleep 20000; done) >/dev/null 2>&1 &",
        o = outside.display()
    );
    assert_ok(&env.run(&["exec", &parent, "--", &swap]));
    let mut started = 0;
    for i in 0..25 {
        let out = env.run(&["up", "--parent", &parent, "--workdir", "inner"]);
        if !out.status.success() {
            continue;
        }
        started += 1;
        let child = stdout(&out).trim().to_string();
        let _ = env.run(&["exec", &child, "--", &format!("echo x > probe-{i}")]);
    }
    let leaked: Vec<_> = std::fs::read_dir(&outside).unwrap().collect();
    assert!(
        leaked.is_empty(),
        "{} of {started} children mounted the host directory",
        leaked.len()
    );
}

#[test]
fn a_work_dir_holding_another_state_directory_is_refused() {
    require_docker!();
    let env = TestEnv::new();
    // Another session's state directory, with a live sandbox, inside our work dir.
    let victim_state = env.path("victim-state");
    let victim_work = env.root.path().join("victim-work");
    std::fs::create_dir_all(&victim_work).unwrap();
    let victim = |args: &[&str]| {
        env.cmd()
            .env("H9SANDBOX_STATE_DIR", &victim_state)
            .args(args)
            .output()
            .unwrap()
    };
    let out = victim(&["up", "--workdir", victim_work.to_str().unwrap()]);
    assert_ok(&out);
    let out = env.run(&["up"]);
    let removed = victim(&["down", "--all"]);
    assert_ok(&removed);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("contains the state directory"),
        "{}",
        stderr(&out)
    );
    assert!(
        env.containers().is_empty(),
        "the refused container was left"
    );
}
