//! The state directory is trusted only when nobody else can change it (issue 11, part 3), as
//! ssh's `StrictModes` trusts `~/.ssh`: owned by the invoking user, not writable by group or
//! others, not reached through a symlink, in a directory nobody else can swap it out of; its
//! files opened without following symlinks. And a record alone never turns a container sandbox
//! into a command on the host: the local engine runs only when the configuration allows it.
//!
//! The tests run as root; `setpriv` plays the other user (uid 1000). None needs Docker: every
//! refusal happens before an engine is asked.

use std::os::unix::fs::{chown, symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::common::*;
use serde_json::json;

/// A record of a Running sandbox on `engine` working in `workdir`, as `state.json` holds it.
fn planted_record(id: &str, engine: &str, workdir: &Path) -> serde_json::Value {
    let isolation = if engine == "local" {
        "none"
    } else {
        "container"
    };
    json!({
        "id": id, "name": format!("planted-{}", &id[..8]), "state": "Running",
        "engine": engine, "isolation": isolation,
        "container_id": if engine == "local" { json!(null) } else { json!("0123456789ab") },
        "image": TINY, "workdir": workdir,
        "limits": {"cpus": 0.5, "memory": "512m", "pids_limit": 256, "tmp_size": "256m", "network": "none"},
        "labels": {}, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
        "creator": {"pid": 1, "start_time": 1}, "parent": null, "bootstrap": null,
        "owner": null, "expires_at": null, "ttl_secs": null
    })
}

/// `state.json` holding `records`.
fn state_json(records: &[serde_json::Value]) -> String {
    json!({"version": 1, "sandboxes": records}).to_string()
}

const ID: &str = "aaaa1111-0000-4000-8000-000000000001";

/// The binary run by `env` with the state directory `state`.
fn h9(env: &TestEnv, state: &Path, args: &[&str]) -> Output {
    env.cmd()
        .env("H9SANDBOX_STATE_DIR", state)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Asserts that `out` is one refusal line of `code` naming `path` and containing `needle`.
fn assert_refused_naming(out: &Output, code: i32, path: &Path, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("h9sandbox: error: ")
            && err.contains(&path.display().to_string())
            && err.contains(needle),
        "expected {} and {needle:?}: {err}",
        path.display()
    );
}

#[test]
fn a_world_writable_state_dir_with_a_planted_local_record_is_refused() {
    let env = TestEnv::new();
    // A shared state directory, as the example configuration once suggested: mode 0777.
    let shared = env.root.path().join("shared-state");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(env.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // Another user (uid 1000) writes a record saying the sandbox is local, so that the victim's
    // next `exec` would run on the host, as the victim (root).
    let planted = state_json(&[planted_record(ID, "local", &env.workdir)]);
    let out = as_uid_1000(
        &shared,
        &["sh", "-c", &format!("printf '%s' '{planted}' > state.json")],
    );
    assert_ok(&out);
    let pwned = env.root.path().join("pwned");
    let out = h9(
        &env,
        &shared,
        &["exec", ID, "--", &format!("touch {}", pwned.display())],
    );
    assert_refused_naming(&out, 125, &shared, "chmod go-w");
    assert!(
        !pwned.exists(),
        "the planted record ran a command on the host"
    );
    // `ls` refuses the directory too (exit 1), and `reap` with it.
    assert_refused_naming(&h9(&env, &shared, &["ls"]), 1, &shared, "writable");
    assert_refused_naming(&h9(&env, &shared, &["reap"]), 1, &shared, "writable");
}

#[test]
fn a_state_file_written_by_another_user_is_refused() {
    let env = TestEnv::new();
    std::fs::write(
        env.state_dir.join("state.json"),
        state_json(&[planted_record(ID, "docker", &env.workdir)]),
    )
    .unwrap();
    chown(env.state_dir.join("state.json"), Some(1000), Some(1000)).unwrap();
    let file = env.state_dir.join("state.json");
    assert_refused_naming(
        &h9(&env, &env.state_dir, &["ls"]),
        1,
        &file,
        "owned by uid 1000",
    );
    // Group-writable, though ours: refused as well.
    chown(&file, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o664)).unwrap();
    assert_refused_naming(&h9(&env, &env.state_dir, &["ls"]), 1, &file, "chmod go-w");
}

#[test]
fn a_planted_state_lock_symlink_creates_nothing_elsewhere() {
    let env = TestEnv::new();
    std::fs::write(
        env.state_dir.join("state.json"),
        state_json(&[planted_record(ID, "docker", &env.workdir)]),
    )
    .unwrap();
    let target = env.root.path().join("made-by-renew");
    symlink(&target, env.state_dir.join("state.lock")).unwrap();
    let out = h9(&env, &env.state_dir, &["renew", ID, "--ttl", "1h"]);
    assert_refused_naming(&out, 1, &env.state_dir.join("state.lock"), "symlink");
    assert!(
        std::fs::symlink_metadata(&target).is_err(),
        "renew created {} through the planted symlink",
        target.display()
    );
    // And a state.json that is a symlink is not read through.
    std::fs::remove_file(env.state_dir.join("state.lock")).unwrap();
    let elsewhere = env.root.path().join("elsewhere.json");
    std::fs::rename(env.state_dir.join("state.json"), &elsewhere).unwrap();
    symlink(&elsewhere, env.state_dir.join("state.json")).unwrap();
    let out = h9(&env, &env.state_dir, &["ls"]);
    assert_refused_naming(&out, 1, &env.state_dir.join("state.json"), "symlink");
}

#[test]
fn a_state_dir_owned_by_another_user_is_refused() {
    let env = TestEnv::new();
    let theirs = env.root.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(
        theirs.join("state.json"),
        state_json(&[planted_record(ID, "docker", &env.workdir)]),
    )
    .unwrap();
    for p in [&theirs, &theirs.join("state.json")] {
        chown(p, Some(1000), Some(1000)).unwrap();
    }
    assert_refused_naming(&h9(&env, &theirs, &["ls"]), 1, &theirs, "owned by uid 1000");
    // The same for a user who is not root: uid 1000 refuses a directory of uid 1001.
    std::fs::set_permissions(env.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let other = env.root.path().join("other");
    std::fs::create_dir(&other).unwrap();
    chown(&other, Some(1001), Some(1001)).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("h9sandbox");
    let out = Command::new("setpriv")
        .args(["--reuid", "1000", "--regid", "1000", "--clear-groups", "--"])
        .arg(&bin)
        .args(["ls"])
        .current_dir(env.root.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.root.path())
        .env("H9SANDBOX_STATE_DIR", &other)
        .env("H9SANDBOX_ENGINE", "local")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_refused_naming(&out, 1, &other, "owned by uid 1001");
}

#[test]
fn a_state_dir_that_is_a_symlink_is_refused() {
    let env = TestEnv::new();
    let link = env.root.path().join("state-link");
    symlink(&env.state_dir, &link).unwrap();
    let out = h9(&env, &link, &["ls"]);
    assert_refused_naming(&out, 1, &link, "symlink");
}

#[test]
fn a_state_dir_in_a_directory_others_can_swap_it_out_of_is_refused() {
    let env = TestEnv::new();
    // World-writable without the sticky bit: anyone may rename the state directory away and put
    // their own in its place.
    let open = env.root.path().join("open");
    let state = open.join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = h9(&env, &state, &["ls"]);
    assert_refused_naming(&out, 1, &state, &open.display().to_string());
    assert!(stderr(&out).contains("sticky"), "{}", stderr(&out));
    // With the sticky bit (as /tmp has), only the owner may rename it: accepted.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert_ok(&h9(&env, &state, &["ls"]));
    // A missing state directory is created private (0700) and accepted.
    let fresh: PathBuf = env.root.path().join("fresh/deeper/state");
    assert_ok(&h9(&env, &fresh, &["ls"]));
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700);
}

#[test]
fn a_record_alone_cannot_make_a_container_sandbox_run_on_the_host() {
    let env = TestEnv::new();
    // The state directory is ours and safe; its record says "local" (a hand edit, a bug, a
    // restored backup): the configuration in force (docker, fallback = fail) does not allow
    // the local engine, so nothing runs on the host.
    std::fs::write(
        env.state_dir.join("state.json"),
        state_json(&[planted_record(ID, "local", &env.workdir)]),
    )
    .unwrap();
    let pwned = env.root.path().join("pwned");
    let touch = format!("touch {}", pwned.display());
    let out = env
        .cmd()
        .env("H9SANDBOX_ENGINE", "docker")
        .args(["exec", ID, "--", &touch])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.starts_with("h9sandbox: error: ") && err.contains("engine = \"local\""),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!pwned.exists(), "a record alone ran a command on the host");
    let out = env
        .cmd()
        .env("H9SANDBOX_ENGINE", "docker")
        .args(["bootstrap", ID, "--", &touch])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        !pwned.exists(),
        "a record alone ran a bootstrap on the host"
    );
    // Where the configuration allows the local engine (fallback = "local"), it runs.
    let out = env
        .cmd()
        .env("H9SANDBOX_ENGINE", "docker")
        .env("H9SANDBOX_FALLBACK", "local")
        .args(["exec", ID, "--", &touch])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(pwned.exists());
}

#[test]
fn a_user_config_file_others_can_write_is_refused() {
    let env = TestEnv::new();
    // Whoever can write the user's configuration chooses the engine binary h9sandbox runs.
    let pwned = env.root.path().join("pwned");
    let evil = env.root.path().join("evil.sh");
    std::fs::write(
        &evil,
        format!("#!/bin/sh\ntouch {}\nexit 1\n", pwned.display()),
    )
    .unwrap();
    std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = env.root.path().join(".config/h9sandbox");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.toml");
    std::fs::write(&file, format!("engine_bin = \"{}\"\n", evil.display())).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let up = || {
        env.cmd()
            .env_remove("H9SANDBOX_ENGINE")
            .arg("up")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    assert_refused_naming(&up(), 1, &file, "chmod go-w");
    assert!(
        !pwned.exists(),
        "a configuration others can write ran a program"
    );
    // Another user's file, even read-only.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    chown(&file, Some(1000), Some(1000)).unwrap();
    assert_refused_naming(&up(), 1, &file, "belongs to uid 1000");
    assert!(
        !pwned.exists(),
        "another user's configuration ran a program"
    );
    // Ours, and writable by us alone: read as usual (`ls` needs no engine here).
    chown(&file, Some(0), Some(0)).unwrap();
    assert_ok(&env.run(&["ls"]));
}
