//! Integration tests of bootstrap commands (`bootstrap`, `up --bootstrap`, the `bootstrap_*`
//! configuration) and of the exec-capable scratch directory `TMPDIR` points at, against the real
//! Docker Engine.

use std::process::Command;

use crate::common::*;

#[test]
fn bootstrap_streams_records_and_passes_the_status_through() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    let out = env.run(&[
        "bootstrap",
        &id[..8],
        "--",
        "echo out; echo err >&2; pwd > where.txt; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout(&out), "out\n");
    assert_eq!(stderr(&out), "err\n");
    // It ran in the work dir, and the record shows it.
    assert_eq!(
        std::fs::read_to_string(env.path("where.txt"))
            .unwrap()
            .trim(),
        env.workdir.to_str().unwrap()
    );
    let b = &env.entry(&id)["bootstrap"];
    assert_eq!(
        b["cmd"], "echo out; echo err >&2; pwd > where.txt; exit 3",
        "{b}"
    );
    assert_eq!(b["exit_code"], 3);
    assert_eq!(b["timed_out"], false);
    assert!(b["duration_ms"].is_u64(), "{b}");
    assert!(b["finished_at"].as_str().unwrap().ends_with('Z'), "{b}");

    // JSON mode: the command's output goes to stderr, the result to stdout.
    let out = env.run(&["bootstrap", &id, "--format", "json", "--", "echo hi"]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "hi\n");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["id"], id.as_str());
    assert_eq!(doc["cmd"], "echo hi");
    assert_eq!(doc["exit_code"], 0);
    assert_eq!(env.entry(&id)["bootstrap"]["cmd"], "echo hi");

    // Its own timeout kills the tree: 124, recorded as timed out.
    let out = env.run(&["bootstrap", &id, "--timeout", "1", "--", "sleep 300"]);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(stderr(&out).contains("timed out"), "{}", stderr(&out));
    let b = &env.entry(&id)["bootstrap"];
    assert_eq!(
        (b["exit_code"].as_i64(), b["timed_out"].as_bool()),
        (Some(124), Some(true))
    );

    // h9sandbox's own failures are 125, with one line on stderr.
    let out = env.run(&["bootstrap", "ffffffff", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("no sandbox matches"),
        "{}",
        stderr(&out)
    );
    // Without a command it re-runs the recorded one; with nothing recorded nor configured, 125.
    assert_ok(&env.run(&["bootstrap", &id, "--", "echo once >> again.txt"]));
    assert_ok(&env.run(&["bootstrap", &id]));
    assert_eq!(
        std::fs::read_to_string(env.path("again.txt")).unwrap(),
        "once\nonce\n"
    );
    let fresh = env.up(&[]);
    let out = env.run(&["bootstrap", &fresh]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("no bootstrap_cmd configured"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        env.run(&["bootstrap", &id, "--bogus"]).status.code(),
        Some(125)
    );

    // A container removed behind our back: 125, one line, and the record says why.
    let c = env.container(&id);
    assert!(Command::new("docker")
        .args(["rm", "-f", "-v", &c])
        .output()
        .unwrap()
        .status
        .success());
    let out = env.run(&["bootstrap", &id, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    let err = stderr(&out);
    assert!(
        err.starts_with("h9sandbox: error: sandbox ")
            && err.contains("no longer exists")
            && err.lines().count() == 1,
        "{err}"
    );
    let b = &env.entry(&id)["bootstrap"];
    assert_eq!(b["exit_code"], 125);
    assert!(
        b["error"].as_str().unwrap().contains("no longer exists"),
        "{b}"
    );
}

#[test]
fn tmpdir_is_an_exec_capable_scratch_dir_removed_with_the_sandbox() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    // A bootstrap that writes a script to $TMPDIR and runs it works ...
    let out = env.run(&[
        "bootstrap",
        &id,
        "--",
        "printf '#!/bin/sh\\necho ran from $TMPDIR\\n' > \"$TMPDIR/s\" && chmod +x \"$TMPDIR/s\" && \"$TMPDIR/s\"",
    ]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "ran from /var/tmp\n");
    // ... while /tmp stays noexec (126), and the scratch dir is not in the work dir.
    let out = env.run(&[
        "exec",
        &id,
        "--",
        "printf '#!/bin/sh\\necho ran\\n' > /tmp/s && chmod +x /tmp/s && /tmp/s",
    ]);
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
    assert!(std::fs::read_dir(&env.workdir).unwrap().next().is_none());
    // Every exec sees TMPDIR too.
    let out = env.run(&["exec", &id, "--", "echo $TMPDIR; ls $TMPDIR"]);
    assert_eq!(stdout(&out), "/var/tmp\ns\n");

    // The scratch dir is an anonymous volume that goes with the container.
    let c = env.container(&id);
    let volume = inspect(
        &c,
        "{{range .Mounts}}{{if eq .Destination \"/var/tmp\"}}{{.Name}}{{end}}{{end}}",
    );
    assert!(!volume.is_empty(), "no volume at /var/tmp");
    let volume_exists = || {
        Command::new("docker")
            .args(["volume", "inspect", &volume])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(volume_exists());
    assert_ok(&env.run(&["down", &id]));
    assert!(!volume_exists(), "volume {volume} outlived its sandbox");
}

#[test]
fn up_bootstrap_is_fail_open_by_default() {
    require_docker!();
    let env = TestEnv::new();
    let out = env.run(&["up", "--bootstrap", "echo setting up; exit 7"]);
    assert_ok(&out);
    // stdout carries only the ID; the bootstrap's output and the warning go to stderr.
    let id = stdout(&out).trim().to_string();
    assert_eq!(id.len(), 36, "{id:?}");
    let err = stderr(&out);
    assert!(err.contains("setting up"), "{err}");
    assert!(
        err.contains("warning: bootstrap `echo setting up; exit 7` exited with status 7"),
        "{err}"
    );
    let e = env.entry(&id);
    assert_eq!(e["state"], "Running");
    assert_eq!(e["bootstrap"]["exit_code"], 7);
    assert_ok(&env.run(&["exec", &id, "--", "true"]));
}

#[test]
fn up_bootstrap_required_fails_closed_and_removes_the_container() {
    require_docker!();
    let env = TestEnv::new();
    let out = env.run(&["up", "--bootstrap", "exit 7", "--bootstrap-required"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert!(
        err.starts_with("h9sandbox: error: bootstrap `exit 7` exited with status 7")
            && err.contains("removed")
            && err.lines().count() == 1,
        "{err}"
    );
    // Nothing is left: no container, no record (the error line says it all).
    env.assert_nothing_left("a failed required bootstrap");
    // A timeout fails it the same way (configured through the environment this time).
    let out = env
        .cmd()
        .args(["up", "--bootstrap", "sleep 300", "--bootstrap-timeout", "1"])
        .env("H9SANDBOX_BOOTSTRAP_REQUIRED", "true")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("timed out after 1s"),
        "{}",
        stderr(&out)
    );
    env.assert_nothing_left("a required bootstrap that timed out");
}

#[test]
fn bootstrap_command_from_the_unprefixed_environment_variables() {
    require_docker!();
    let env = TestEnv::new();
    let out = env
        .cmd()
        .args(["up", "--format", "json"])
        .env("SANDBOX_BOOTSTRAP_CMD", "echo \"$TMPDIR\" > boot.txt")
        .env("SANDBOX_BOOTSTRAP_TIMEOUT_SECS", "120")
        .output()
        .unwrap();
    assert_ok(&out);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["bootstrap"]["exit_code"], 0, "{rec}");
    assert_eq!(
        std::fs::read_to_string(env.path("boot.txt")).unwrap(),
        "/var/tmp\n"
    );
    // `bootstrap ID` without a command runs the configured one again; `--bootstrap ''` disables it.
    std::fs::remove_file(env.path("boot.txt")).unwrap();
    let id = rec["id"].as_str().unwrap();
    let out = env
        .cmd()
        .args(["bootstrap", id])
        .env("SANDBOX_BOOTSTRAP_CMD", "echo again > boot.txt")
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(
        std::fs::read_to_string(env.path("boot.txt")).unwrap(),
        "again\n"
    );
    let out = env
        .cmd()
        .args(["up", "--bootstrap", "", "--format", "json"])
        .env("SANDBOX_BOOTSTRAP_CMD", "exit 9")
        .output()
        .unwrap();
    assert_ok(&out);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(rec["bootstrap"].is_null(), "{rec}");
}

/// A real installer: apt-get on Debian, from the bridge network, building nothing in /tmp.
#[test]
fn bootstrap_installs_a_debian_package_with_apt() {
    require_docker!();
    let env = TestEnv::new();
    let out = env.run(&[
        "up",
        "--image",
        DEBIAN,
        "--bootstrap-required",
        "--bootstrap",
        "apt-get update -q && apt-get install -y -q --no-install-recommends hello",
    ]);
    assert_ok(&out);
    let id = stdout(&out).trim().to_string();
    let out = env.run(&["exec", &id, "--", "hello"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "Hello, world!\n");
    assert_eq!(env.entry(&id)["bootstrap"]["exit_code"], 0);
}
