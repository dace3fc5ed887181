//! The project file `./sandbox.toml` usually lies in a work dir, which code in the sandbox can
//! write (issue 11, part 4). It is honoured only once a person trusted its exact content
//! (`h9sandbox trust`, as direnv and mise do), and only by `up` and `mcp`: the commands on an
//! existing sandbox use what `up` recorded plus the user's configuration, and never read it, so
//! nothing a sandbox writes there changes anything until a person acts.

use std::path::PathBuf;
use std::process::Stdio;

use crate::common::*;

/// Writes the user's configuration (`$HOME/.config/h9sandbox/config.toml`; HOME is the test's
/// root) with `text`.
fn user_config(env: &TestEnv, text: &str) {
    let dir = env.root.path().join(".config/h9sandbox");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// Runs `script` in sandbox `id` (as code in the sandbox would); asserts success.
fn inside(env: &TestEnv, id: &str, script: &str) {
    assert_ok(&env.run(&["exec", id, "--", script]));
}

#[test]
fn a_planted_project_file_cannot_raise_limits_open_the_network_or_bootstrap() {
    require_container!("a local sandbox applies no limits");
    let env = TestEnv::new();
    // The user's configuration says: no network.
    user_config(&env, "network = \"none\"\n");
    let id = env.up(&[]);
    // Code in the sandbox asks the next `up` from this directory for more.
    inside(
        &env,
        &id,
        "printf 'memory = \"100g\"\\npids_limit = 100000\\nnetwork = \"bridge\"\\nbootstrap_cmd = \"touch bootstrapped\"\\n' > sandbox.toml",
    );
    let out = env.cmd().arg("up").output().unwrap();
    assert_ok(&out);
    let err = stderr(&out);
    assert!(
        err.contains("ignoring ./sandbox.toml") && err.contains("h9sandbox trust"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let c = env.container(stdout(&out).trim());
    assert_eq!(
        inspect(&c, "{{.HostConfig.Memory}}"),
        (512u64 << 20).to_string()
    );
    assert_eq!(inspect(&c, "{{.HostConfig.PidsLimit}}"), "256");
    assert_eq!(inspect(&c, "{{.HostConfig.NetworkMode}}"), "none");
    assert!(
        !env.path("bootstrapped").exists(),
        "the sandbox's own bootstrap_cmd ran"
    );
}

#[test]
fn a_planted_bootstrap_cmd_is_not_what_bootstrap_runs() {
    require_container!("the planted command would run in a container");
    let env = TestEnv::new();
    let id = env.up(&[]);
    inside(
        &env,
        &id,
        "echo 'bootstrap_cmd = \"touch bootstrapped\"' > sandbox.toml",
    );
    // `bootstrap ID` without a command: nothing was configured or recorded, so it has none.
    let out = env.run(&["bootstrap", &id]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no command given"),
        "{}",
        stderr(&out)
    );
    assert!(
        !env.path("bootstrapped").exists(),
        "the sandbox's own bootstrap_cmd ran"
    );
}

#[test]
fn a_planted_exec_timeout_does_not_apply() {
    require_engine!();
    let env = TestEnv::new();
    // The user wants commands killed after 1 s.
    user_config(&env, "exec_timeout_secs = 1\n");
    let id = env.up(&[]);
    // The sandbox wants its commands to run forever.
    inside(&env, &id, "echo 'exec_timeout_secs = 0' > sandbox.toml");
    let out = env.run(&["exec", &id, "--", "sleep 6; echo survived"]);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(!stdout(&out).contains("survived"));
}

#[test]
fn commands_on_a_sandbox_use_what_up_recorded_not_the_current_directory() {
    require_engine!();
    let env = TestEnv::new();
    std::fs::write(
        env.path("sandbox.toml"),
        "exec_timeout_secs = 1\nstop_timeout_secs = 2\n",
    )
    .unwrap();
    assert_ok(&env.run(&["trust"]));
    let out = env.cmd().args(["up", "--json"]).output().unwrap();
    assert_ok(&out);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["settings"]["exec_timeout_secs"], 1, "{rec}");
    assert_eq!(rec["settings"]["stop_timeout_secs"], 2, "{rec}");
    let id = rec["id"].as_str().unwrap().to_string();
    // From another directory (no project file there), the recorded timeout still applies.
    let elsewhere = env.root.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = env
        .cmd()
        .current_dir(&elsewhere)
        .args(["exec", &id, "--", "sleep 6; echo survived"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    // The environment (the caller's own choice for this command) still beats the record.
    let out = env
        .cmd()
        .env("H9SANDBOX_EXEC_TIMEOUT_SECS", "0")
        .args(["exec", &id, "--", "sleep 2; echo survived"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(stdout(&out), "survived\n");
}

#[test]
fn nothing_in_a_project_file_makes_commands_on_a_sandbox_fail() {
    require_container!("`ls` warns about local sandboxes");
    let env = TestEnv::new();
    let id = env.up(&["--ttl", "1h"]);
    for planted in ["cpus = 1000\n", "garbage [[[\n", "no_such_key = 1\n"] {
        std::fs::write(env.path("sandbox.toml"), planted).unwrap();
        for args in [
            vec!["exec", id.as_str(), "--", "true"],
            vec!["ls"],
            vec!["renew", id.as_str()],
            vec!["reap"],
            vec!["read", id.as_str(), "sandbox.toml"],
        ] {
            let out = env.run(&args);
            assert_ok(&out);
            assert!(
                stderr(&out).is_empty(),
                "{args:?} with {planted:?}: {}",
                stderr(&out)
            );
        }
    }
    assert_ok(&env.run(&["down", &id]));
    let other = env.up(&[]);
    assert_ok(&env.run(&["down", "--all"]));
    assert!(env.ls_raw().iter().all(|r| r["id"] != other.as_str()));
    assert!(env.containers().is_empty());
}

#[test]
fn a_bad_value_only_up_uses_never_stops_commands_on_a_sandbox() {
    require_container!("`ls` warns about local sandboxes");
    let env = TestEnv::new();
    let id = env.up(&["--ttl", "1h"]);
    // In the environment, as in the issue (`export H9SANDBOX_CPUS=abc`), and in the user's own
    // configuration file (a --config file here).
    let file = env.root.path().join("bad.toml");
    std::fs::write(
        &file,
        "memory = \"1\"\npids_limit = 0\nuser = \"nobody-at-all\"\n",
    )
    .unwrap();
    let bad: [(&str, &str, &str); 2] = [
        ("H9SANDBOX_CPUS", "abc", "H9SANDBOX_CPUS"),
        ("H9SANDBOX_CONFIG", file.to_str().unwrap(), "memory"),
    ];
    for (var, value, named) in bad {
        for args in [
            vec!["exec", id.as_str(), "--", "true"],
            vec!["ls"],
            vec!["renew", id.as_str()],
            vec!["reap"],
            vec!["read", id.as_str(), "."],
            vec!["bootstrap", id.as_str(), "--", "true"],
        ] {
            let out = env.cmd().args(&args).env(var, value).output().unwrap();
            let err = stderr(&out);
            if args[0] == "read" {
                // `read .` fails for its own reason (a directory), not the variable's.
                assert!(err.contains("directory"), "{args:?} with {var}: {err}");
            } else {
                assert_ok(&out);
            }
            assert!(
                err.lines()
                    .any(|l| l.starts_with("h9sandbox: warning: ignoring ") && l.contains(named)),
                "{args:?} with {var}: {err}"
            );
            assert!(
                !err.contains("h9sandbox: error: environment variable"),
                "{err}"
            );
        }
        // The commands that make sandboxes refuse it, naming it.
        for args in [vec!["up"], vec!["run", "--", "true"]] {
            let out = env.cmd().args(&args).env(var, value).output().unwrap();
            assert!(!out.status.success(), "{args:?} with {var}");
            assert!(stderr(&out).contains(named), "{args:?}: {}", stderr(&out));
        }
        assert_eq!(env.ls_raw().len(), 1, "{var}");
    }
    // And the cleanup works with the variable set.
    let out = env
        .cmd()
        .args(["down", &id])
        .env("H9SANDBOX_CPUS", "abc")
        .output()
        .unwrap();
    assert_ok(&out);
    env.assert_nothing_left("down with H9SANDBOX_CPUS=abc");
}

#[test]
fn trust_honours_exactly_the_content_it_was_given() {
    require_container!("pids_limit is a container's");
    let env = TestEnv::new();
    let file = env.path("sandbox.toml");
    std::fs::write(&file, "pids_limit = 77\n").unwrap();
    let pids = |env: &TestEnv| -> (String, String) {
        let out = env.cmd().arg("up").output().unwrap();
        assert_ok(&out);
        let c = env.container(stdout(&out).trim());
        (inspect(&c, "{{.HostConfig.PidsLimit}}"), stderr(&out))
    };
    // Not trusted yet: ignored, with one warning line.
    let (p, err) = pids(&env);
    assert_eq!(p, "256");
    assert!(err.contains("not trusted"), "{err}");
    // Trusted: `trust` prints what it trusts, and `up` applies it.
    let out = env.run(&["trust"]);
    assert_ok(&out);
    assert!(
        stdout(&out).contains(file.to_str().unwrap()) && stdout(&out).contains("pids_limit = 77"),
        "{}",
        stdout(&out)
    );
    let (p, err) = pids(&env);
    assert_eq!(p, "77");
    assert!(err.is_empty(), "{err}");
    // Changed (by anyone): ignored again until trusted again.
    std::fs::write(&file, "pids_limit = 78\n").unwrap();
    let (p, err) = pids(&env);
    assert_eq!(p, "256");
    assert!(err.contains("changed since"), "{err}");
    assert_ok(&env.run(&["trust"]));
    assert_eq!(pids(&env).0, "78");
    let out = env.run(&["trust", "--list", "--format", "json"]);
    assert_ok(&out);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[0]["path"], file.to_str().unwrap(), "{listed}");
    assert_eq!(listed[0]["status"], "trusted", "{listed}");
    // Forgotten: ignored.
    assert_ok(&env.run(&["trust", "--forget"]));
    assert_eq!(pids(&env).0, "256");
    // A symlink named sandbox.toml (to a file trusted elsewhere) is never followed.
    let other = env.root.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("sandbox.toml"), "pids_limit = 79\n").unwrap();
    let out = env.cmd().current_dir(&other).arg("trust").output().unwrap();
    assert_ok(&out);
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(other.join("sandbox.toml"), &file).unwrap();
    let (p, err) = pids(&env);
    assert_eq!(p, "256");
    assert!(err.contains("symlink"), "{err}");
}

#[test]
fn trust_refuses_a_file_it_could_not_honour() {
    let env = TestEnv::new();
    let file: PathBuf = env.path("sandbox.toml");
    for (text, needle) in [
        (
            "engine_bin = \"/tmp/evil\"\n",
            "not allowed in a project's sandbox.toml",
        ),
        (
            "engine = \"local\"\n",
            "not allowed in a project's sandbox.toml",
        ),
        ("garbage [[[\n", "not valid TOML"),
        ("cpus = 0\n", "out of range"),
        ("colour = true\n", "unknown key `colour`"),
    ] {
        std::fs::write(&file, text).unwrap();
        let out = env.run(&["trust"]);
        assert_eq!(out.status.code(), Some(1), "{text}");
        let err = stderr(&out);
        assert!(err.contains(needle), "{text}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert!(!env.state_dir.join("trust.json").exists());
}
