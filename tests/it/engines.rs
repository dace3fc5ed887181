//! Integration tests of what differs between engines: a local sandbox says it has no isolation,
//! the unprefixed switch `SANDBOX_ENABLED=false`, the fallback when the engine is unreachable, and every
//! command using the engine a sandbox was created with. The shared lifecycle runs against each
//! engine in `tests/core.rs`.

use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// An engine client that does not exist: the engine is unreachable.
const MISSING_BIN: &str = "/nonexistent/h9sandbox-test/docker";

/// Our effective user ID, as `id -u` prints it.
fn uid() -> String {
    let out = Command::new("id").arg("-u").output().unwrap();
    stdout(&out).trim().to_string()
}

/// Command lines of the host processes that local sandboxes of `env` left running.
fn local_left(env: &TestEnv) -> String {
    local_processes(&[(STATE_MARK, env.state_dir.to_str().unwrap())])
        .into_iter()
        .map(|(_, c)| c + "\n")
        .collect()
}

/// `args` run with `engine = "local"` in force, as every command on a local sandbox that runs
/// something needs (a record alone never runs a command on the host).
fn run_local(env: &TestEnv, args: &[&str]) -> std::process::Output {
    env.cmd()
        .env("H9SANDBOX_ENGINE", "local")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn up_local(env: &TestEnv) -> (String, String) {
    let out = env
        .cmd()
        .env("H9SANDBOX_ENGINE", "local")
        .arg("up")
        .output()
        .unwrap();
    assert_ok(&out);
    (stdout(&out).trim().to_string(), stderr(&out))
}

#[test]
fn a_local_sandbox_says_it_has_no_isolation() {
    let env = TestEnv::new();
    let (id, err) = up_local(&env);
    assert_eq!(id.len(), 36, "{id}");
    assert!(
        err.starts_with("h9sandbox: warning: sandbox ")
            && err.contains("isolation: none")
            && err.contains("directly on this host"),
        "{err}"
    );
    let out = env
        .cmd()
        .env("H9SANDBOX_ENGINE", "local")
        .args(["up", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&rec["engine"], &rec["isolation"], &rec["state"]),
        (&"local".into(), &"none".into(), &"Running".into())
    );
    assert!(rec["container_id"].is_null());

    // ls warns too, and shows the engine; JSON has isolation none and no container.
    let out = env.run(&["ls"]);
    assert_ok(&out);
    assert!(
        stderr(&out).contains("2 sandbox(es) listed are local"),
        "{}",
        stderr(&out)
    );
    let table = stdout(&out);
    let header = table.lines().next().unwrap();
    assert!(header.contains("ENGINE"), "{table}");
    assert_eq!(table.lines().filter(|l| l.contains(" local ")).count(), 2);
    let e = env.entry(&id);
    assert_eq!(
        (&e["isolation"], &e["container_state"]),
        (&"none".into(), &"none".into())
    );

    // Commands run on the host, as us, in the work dir, with the sandbox's name in the
    // environment.
    let out = run_local(
        &env,
        &["exec", &id, "--", "id -u; pwd; echo $H9SANDBOX_SANDBOX"],
    );
    assert_ok(&out);
    assert_eq!(
        stdout(&out),
        format!(
            "{}\n{}\n{}\n",
            uid(),
            env.workdir.display(),
            e["name"].as_str().unwrap()
        )
    );
    // exec itself adds nothing to the command's stderr.
    let out = run_local(&env, &["exec", &id, "--", "echo err >&2"]);
    assert_eq!(stderr(&out), "err\n");
    // Where the configuration in force allows no local engine, the record alone runs nothing.
    let out = env
        .cmd()
        .env("H9SANDBOX_ENGINE", "docker")
        .args(["exec", &id, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("recorded as local"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn down_ends_what_a_local_sandbox_left_running() {
    let env = TestEnv::new();
    let (id, _) = up_local(&env);
    let (other, _) = up_local(&env);
    // Background and daemonized processes outlive the exec, as they would in a container.
    assert_ok(&run_local(
        &env,
        &[
            "exec",
            &id,
            "--",
            "nohup sleep 311 >/dev/null 2>&1 & setsid sleep 312 >/dev/null 2>&1 &",
        ],
    ));
    assert_ok(&run_local(
        &env,
        &["exec", &other, "--", "nohup sleep 313 >/dev/null 2>&1 &"],
    ));
    // A background job may still be between its fork and its exec when the exec returns (its
    // command line and environment are unreadable then): wait until each is seen.
    wait_until(Duration::from_secs(10), "the background sleeps", || {
        let before = local_left(&env);
        before.contains("sleep 311") && before.contains("sleep 312") && before.contains("sleep 313")
    });
    let out = env.run(&["down", &id]);
    assert_ok(&out);
    assert_eq!(stdout(&out).trim(), id);
    // The other sandbox's process is untouched; this one's are gone.
    // A killed process may take a moment to leave the process table.
    wait_until(
        Duration::from_secs(5),
        "this sandbox's processes to end",
        || local_left(&env).lines().count() == 1,
    );
    let left = local_left(&env);
    assert!(left.contains("sleep 313"), "{left}");
    assert_eq!(env.ls().len(), 1);
    assert_ok(&env.run(&["down", &other]));
    wait_until(
        Duration::from_secs(5),
        "the other sandbox's process to end",
        || local_left(&env).is_empty(),
    );
}

#[test]
fn sandbox_enabled_false_selects_local() {
    let env = TestEnv::new();
    let out = env
        .cmd()
        .env_remove("H9SANDBOX_ENGINE")
        .env("SANDBOX_ENABLED", "false")
        .args(["up", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["engine"], "local");
    assert!(stderr(&out).contains("isolation: none"), "{}", stderr(&out));
    let out = env
        .cmd()
        .env_remove("H9SANDBOX_ENGINE")
        .env("SANDBOX_ENABLED", "perhaps")
        .arg("up")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("SANDBOX_ENABLED") && stderr(&out).contains("'perhaps'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn unreachable_engine_fails_by_default() {
    let env = TestEnv::new();
    let out = env
        .cmd()
        .env("H9SANDBOX_ENGINE", "docker")
        .env("H9SANDBOX_ENGINE_BIN", MISSING_BIN)
        .arg("up")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        (err.starts_with("h9sandbox: error: container engine ") && err.contains(" unreachable: "))
            && err.contains(MISSING_BIN)
            && err.contains("fallback = \"local\""),
        "{err}"
    );
    // Nothing was created, so nothing is on record: the state file is as before `up`.
    let out = env
        .cmd()
        .env("H9SANDBOX_ENGINE", "docker")
        .env("H9SANDBOX_ENGINE_BIN", MISSING_BIN)
        .args(["ls", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed, serde_json::json!([]));
}

#[test]
fn fallback_local_creates_a_local_sandbox_loudly() {
    let env = TestEnv::new();
    let broken = |c: &mut Command| {
        c.env("H9SANDBOX_ENGINE", "docker")
            .env("H9SANDBOX_ENGINE_BIN", MISSING_BIN)
            .env("H9SANDBOX_FALLBACK", "local");
    };
    let mut c = env.cmd();
    broken(&mut c);
    let out = c.args(["up", "--json"]).output().unwrap();
    assert_ok(&out);
    let err = stderr(&out);
    assert!(
        err.contains("docker is unreachable")
            && err.contains("fallback = \"local\"")
            && err.contains("WITHOUT A CONTAINER"),
        "{err}"
    );
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = rec["id"].as_str().unwrap().to_string();
    assert_eq!(
        (&rec["engine"], &rec["isolation"]),
        (&"local".into(), &"none".into())
    );
    // Every later command uses the record's engine: none of them needs Docker.
    let mut c = env.cmd();
    broken(&mut c);
    let out = c
        .args(["exec", &id, "--", "echo ran; exit 3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ran\n");
    let mut c = env.cmd();
    broken(&mut c);
    let out = c.args(["ls", "--json"]).output().unwrap();
    assert_ok(&out);
    let mut c = env.cmd();
    broken(&mut c);
    assert_ok(&c.args(["down", &id]).output().unwrap());
    assert!(env.ls().is_empty());
}

#[test]
fn a_docker_daemon_that_is_down_is_unreachable_too() {
    if Command::new("docker").arg("--version").output().is_err() {
        announce("needs the docker client (its daemon is pointed at a socket that does not exist)");
        return;
    }
    let env = TestEnv::new();
    let down = |c: &mut Command| {
        c.env("H9SANDBOX_ENGINE", "docker").env(
            "DOCKER_HOST",
            format!("unix://{}/no-daemon.sock", env.root.path().display()),
        );
    };
    let mut c = env.cmd();
    down(&mut c);
    let out = c.arg("up").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        (err.starts_with("h9sandbox: error: container engine ") && err.contains(" unreachable: "))
            && err.contains("no-daemon.sock"),
        "{err}"
    );
    let mut c = env.cmd();
    down(&mut c);
    let out = c
        .env("H9SANDBOX_FALLBACK", "local")
        .args(["up", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(
        stderr(&out).contains("docker is unreachable"),
        "{}",
        stderr(&out)
    );
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["isolation"], "none");
}

#[test]
fn commands_use_the_engine_the_sandbox_was_created_with() {
    require_container!("this test mixes a container sandbox with a local one");
    let env = TestEnv::new();
    let in_container = env.up(&[]);
    let (local, _) = up_local(&env);
    // Configured for local now: the container sandbox still runs in its container...
    // PID 1 of a sandbox's container is h9sandbox's agent (`/.h9sandbox/h9sandbox agent init`).
    let probe = "grep -q h9sandbox /proc/1/cmdline && echo container || echo host";
    let out = env
        .cmd()
        .env("H9SANDBOX_ENGINE", "local")
        .args(["exec", &in_container, "--", probe])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(stdout(&out), "container\n");
    // ...and configured for an unreachable container engine with the local fallback, the local
    // one on the host.
    let out = env
        .cmd()
        .env("H9SANDBOX_ENGINE_BIN", MISSING_BIN)
        .env("H9SANDBOX_FALLBACK", "local")
        .args(["exec", &local, "--", probe])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(stdout(&out), "host\n");
    // ls reconciles both, each with its own engine.
    let listed = env.ls();
    let state = |id: &str| {
        let e = listed.iter().find(|e| e["id"] == id).unwrap();
        (
            e["engine"].as_str().unwrap().to_string(),
            e["container_state"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(
        state(&in_container),
        (engine().name().to_string(), "running".to_string())
    );
    assert_eq!(state(&local), ("local".to_string(), "none".to_string()));
    // down --all under the local configuration removes the container as well.
    let out = env
        .cmd()
        .env("H9SANDBOX_ENGINE", "local")
        .args(["down", "--all"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(env.ls().is_empty());
    assert!(env.containers().is_empty(), "container left behind");
}

/// `text` with every run of 8 or more hex digits and dashes (IDs) as `ID`.
fn without_ids(text: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    for ch in text.chars().chain(std::iter::once(' ')) {
        if ch.is_ascii_hexdigit() || ch == '-' {
            run.push(ch);
            continue;
        }
        let hex = run.chars().filter(char::is_ascii_hexdigit).count();
        out.push_str(if hex >= 8 { "ID" } else { &run });
        run.clear();
        out.push(ch);
    }
    out.pop();
    out
}

/// The `+ ` lines (what was asked of the engine) of a `-v` run's stderr.
fn engine_lines(out: &std::process::Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| l.starts_with("+ "))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_local_docker_daemon_is_asked_through_its_api_with_the_clients_errors() {
    if engine() != Engine::Docker || std::env::var_os("DOCKER_HOST").is_some() {
        announce("the Engine API is used for a Docker daemon on this machine's socket only");
        return;
    }
    require_engine!();
    let env = TestEnv::new();
    // `up`: the create shown as the equivalent `docker run` and as the API requests it was;
    // everything else asked (listings, volumes, inspect) is an API request too.
    let out = env.run(&["-v", "up"]);
    assert_ok(&out);
    let id = stdout(&out).trim().to_string();
    let err = stderr(&out);
    let lines = engine_lines(&out);
    assert!(
        lines.iter().any(|l| l.starts_with("+ docker run -d ")),
        "{err}"
    );
    assert!(
        err.lines().any(|l| l.starts_with("  = curl --unix-socket ")
            && l.contains("/containers/create?name=")
            && l.contains("/start")),
        "{err}"
    );
    // Under gVisor the mount check reads the host's mark through the engine's exec (no agent
    // socket the host can trust there): the one client process `up` still runs.
    assert!(
        lines.iter().all(|l| l.starts_with("+ docker run -d ")
            || l.starts_with("+ curl --unix-socket ")
            || (gvisor() && l.starts_with("+ docker exec "))),
        "{err}"
    );
    assert!(
        lines.iter().any(|l| l.contains("/containers/json?all=1"))
            && lines
                .iter()
                .any(|l| l.contains("/json") && l.contains("-X GET")),
        "{err}"
    );
    // `down`: stop, remove, the volume: three requests, no client.
    let out = env.run(&["-v", "down", &id]);
    assert_ok(&out);
    let lines = engine_lines(&out);
    assert_eq!(lines.len(), 3, "{}", stderr(&out));
    assert!(
        lines[0].contains("-X POST")
            && lines[0].contains("/stop?t=")
            && lines[1].contains("-X DELETE")
            && lines[1].contains("?force=1&v=1")
            && lines[2].contains("-X DELETE")
            && lines[2].contains("/volumes/h9sandbox-"),
        "{lines:?}"
    );
    assert!(env.containers().is_empty());

    // The errors are the client's, with its exit codes: the same through the API as through
    // the client (a client named by its path is run for every call, as `engine_bin` asks).
    let client = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v docker"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    assert!(client.starts_with('/'), "{client}");
    let mut seen = Vec::new();
    for bin in ["docker", client.as_str()] {
        let h9 = |args: &[&str]| {
            env.cmd()
                .env("H9SANDBOX_ENGINE_BIN", bin)
                .args(args)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap()
        };
        let via_api = bin == "docker";
        // A missing image: the create's 404 is the client's "No such image" (a pull is tried,
        // and fails), one line, exit 1, nothing left.
        let out = h9(&["-v", "up", "--image", "h9sandbox-test/does-not-exist:1"]);
        assert_eq!(out.status.code(), Some(1), "{bin}: {}", stderr(&out));
        let last = stderr(&out).lines().last().unwrap_or_default().to_string();
        assert!(
            last.starts_with("h9sandbox: error: ")
                && last.contains("h9sandbox-test/does-not-exist:1")
                && last.contains("could not be pulled"),
            "{bin}: {}",
            stderr(&out)
        );
        assert_eq!(
            engine_lines(&out)
                .iter()
                .any(|l| l.starts_with("+ curl --unix-socket ")),
            via_api,
            "{bin}: {}",
            stderr(&out)
        );
        env.assert_nothing_left(&format!("a missing image ({bin})"));
        // A container removed behind h9sandbox's back: its commands say so (125), `down`
        // still succeeds and leaves nothing.
        let id = env.up(&[]);
        let c = env.container(&id);
        assert_ok(
            &Command::new("docker")
                .args(["rm", "-f", "-v", &c])
                .output()
                .unwrap(),
        );
        let gone = h9(&["exec", &id, "--", "true"]);
        assert_eq!(gone.status.code(), Some(125), "{bin}: {}", stderr(&gone));
        assert!(
            stderr(&gone).contains("no longer exists"),
            "{}",
            stderr(&gone)
        );
        let stopped = h9(&["stop", &id]);
        let down = h9(&["down", &id]);
        assert_ok(&down);
        assert!(env.ls().is_empty(), "{bin}");
        seen.push((
            without_ids(&last),
            without_ids(&stderr(&gone)),
            stopped.status.code(),
            without_ids(&stderr(&stopped)),
        ));
    }
    assert_eq!(
        seen[0], seen[1],
        "the API's errors differ from the client's"
    );
}
