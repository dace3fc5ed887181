//! What a new user meets in the first hour (issue 14): one shape for every diagnostic line,
//! messages that name what was killed and how to fix a value, durations wherever a time is
//! asked for, piped stdin without `-i`, `--env NAME`, `reap` and `ls -q`, the owner-PID warning,
//! and the README's Quick start run as written. Against the real engine, as `tests/it/core/`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;

/// Every line of `err` is a diagnostic of the one shape.
fn assert_shaped(err: &str) {
    for line in err.lines() {
        assert!(
            line.starts_with("h9sandbox: error: ")
                || line.starts_with("h9sandbox: warning: ")
                || line.starts_with("h9sandbox: note: "),
            "a diagnostic line of another shape: {line:?}\n{err}"
        );
    }
}

#[test]
fn a_timeout_takes_durations_and_says_what_was_killed() {
    require_engine!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    let started = Instant::now();
    let out = env.run(&["exec", &id, "--timeout", "0.5", "--", "sleep 60"]);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(15));
    let err = stderr(&out);
    assert_shaped(&err);
    assert!(
        err.contains("h9sandbox: error: the command timed out after 500ms")
            && err.contains("`sleep 60` and its whole process tree in sandbox")
            && err.contains("(exit 124)"),
        "{err}"
    );
    for t in ["1m", "30s", "500ms", "2"] {
        let out = env.run(&["exec", &id, "--timeout", t, "--", "true"]);
        assert_ok(&out);
    }
    let out = env.run(&["exec", &id, "--timeout", "soon", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("500ms, 30s, 1m"), "{}", stderr(&out));
}

#[test]
fn timeout_keys_take_durations_too() {
    require_engine!();
    let env = TestEnv::new();
    let cfg = env.root.path().join("c.toml");
    std::fs::write(&cfg, "exec_timeout_secs = \"1s\"\n").unwrap();
    let id = env.up(&["--config", cfg.to_str().unwrap()]);
    assert_eq!(env.entry(&id)["settings"]["exec_timeout_secs"], 1);
    let out = env.run(&["exec", &id, "--", "sleep 60"]);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    // From the environment: H9SANDBOX_EXEC_TIMEOUT_SECS=2m.
    let out = env
        .cmd()
        .env("H9SANDBOX_EXEC_TIMEOUT_SECS", "2m")
        .args(["up", "--format", "json"])
        .output()
        .unwrap();
    assert_ok(&out);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["settings"]["exec_timeout_secs"], 120);
}

#[test]
fn ctrl_c_during_exec_says_what_was_killed() {
    require_engine!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    // SIGINT at its default disposition, then inherited as ignored (`cmd &` in a script); sent
    // once the command runs in the sandbox, and as early as `exec` shows a sign of life (its
    // `-v` line, before anything reached the sandbox): the same kill of the whole tree.
    let mut round = 0;
    for early in [false, true] {
        for ignored in [false, true] {
            round += 1;
            let what = format!("exec (early: {early}, SIGINT ignored: {ignored})");
            let script = format!("sleep 7{round}; echo never");
            let mut cmd = env.cmd();
            cmd.args(["-v", "exec", &id, "--", &script])
                .stdin(Stdio::null())
                .stdout(Stdio::piped());
            if ignored {
                with_sigint_ignored(&mut cmd);
            }
            let mut child = Watched::spawn(&mut cmd);
            let sleep = format!("sleep 7{round}");
            if early {
                child.wait_line(Duration::from_secs(20), &what, |l| l.starts_with("+ "));
            } else {
                wait_until(Duration::from_secs(20), &what, || {
                    env.sandbox_processes(&id).contains(&sleep)
                });
            }
            signal(child.child.id(), "INT");
            let out = child.finish(Duration::from_secs(30), &what);
            assert_eq!(out.status.code(), Some(130), "{what}: {}", stderr(&out));
            let err = stderr(&out);
            // `-v` command lines (`+ …`) aside, every line is a diagnostic.
            let diagnostics: Vec<&str> = err.lines().filter(|l| !l.starts_with("+ ")).collect();
            assert_shaped(&diagnostics.join("\n"));
            assert!(
                err.contains(&format!("h9sandbox: error: interrupted by SIGINT: `{script}` and its whole process tree in sandbox"))
                    && err.contains("(exit 130)"),
                "{what}: {err}"
            );
            assert!(!env.sandbox_processes(&id).contains(&sleep), "{what}");
        }
    }
}

#[test]
fn value_errors_say_how_to_fix_them() {
    let env = TestEnv::new();
    let cfg = env.root.path().join("c.toml");
    std::fs::write(&cfg, "cpus = \"2\"\n").unwrap();
    let out = env.run(&["up", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_shaped(&err);
    assert!(
        err.contains("\"2\" is a string, not a number; write it without quotes: cpus = 2"),
        "{err}"
    );
    let out = env.run(&["up", "--memory", "512"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("'512' is 512 bytes") && err.contains("did you mean 512m?"),
        "{err}"
    );
    assert!(env.ls_raw().is_empty(), "a refused up left a record");
}

#[test]
fn cpus_above_the_host_are_lowered_with_a_warning() {
    require_container!("needs a container's CPU limit");
    let env = TestEnv::new();
    let ncpu = std::thread::available_parallelism().unwrap().get();
    let out = env.run(&["up", "--cpus", "4096"]);
    assert_ok(&out);
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "h9sandbox: warning: cpus = 4096 (flag --cpus) is more than this host's {ncpu} CPUs; using {ncpu}"
        )),
        "{err}"
    );
    let id = stdout(&out).trim().to_string();
    let nano = inspect(&env.container(&id), "{{.HostConfig.NanoCpus}}");
    assert_eq!(nano, (ncpu as u64 * 1_000_000_000).to_string());
}

#[test]
fn an_unknown_sandbox_names_the_state_directory() {
    let env = TestEnv::new();
    let out = env.run(&["exec", "nosuch", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    let err = stderr(&out);
    assert_shaped(&err);
    assert!(
        err.contains(&format!(
            "no sandbox matches 'nosuch' in the state directory {}",
            env.state_dir.display()
        )),
        "{err}"
    );
}

#[test]
fn a_mistyped_variable_names_the_key_and_where_keys_are_listed() {
    let env = TestEnv::new();
    let out = env
        .cmd()
        .env("H9SANDBOX_MEMROY", "1g")
        .args(["ls"])
        .output()
        .unwrap();
    assert_ok(&out);
    let err = stderr(&out);
    assert!(
        err.contains("environment variable H9SANDBOX_MEMROY is not a configuration key")
            && err.contains("did you mean H9SANDBOX_MEMORY?")
            && err.contains("man h9sandbox"),
        "{err}"
    );
    assert!(!err.contains("sandbox.toml.example"), "{err}");
    // And --help does list the variables it points at.
    let help = env.run(&["--help"]);
    assert!(stdout(&help).contains("H9SANDBOX_MEMORY"));
}

#[test]
fn piped_stdin_without_dash_i_is_warned_about_once() {
    require_engine!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    std::fs::write(env.root.path().join("in.txt"), "12345").unwrap();
    let warning = "h9sandbox: warning: standard input holds data, which the command does not read";
    // A pipe, and a file: not passed (as docker exec without -i), warned about once.
    for redirect in ["printf 12345 |", "< ../in.txt"] {
        let script = if redirect.starts_with('<') {
            format!("\"$H9\" exec {id} -- 'wc -c' {redirect}")
        } else {
            format!("{redirect} \"$H9\" exec {id} -- 'wc -c'")
        };
        let out = env.shell(&script).output().unwrap();
        assert_ok(&out);
        assert_eq!(stdout(&out).trim(), "0", "{redirect}");
        assert_eq!(
            stderr(&out).matches(warning).count(),
            1,
            "{redirect}: {}",
            stderr(&out)
        );
        assert_shaped(&stderr(&out));
    }
    // With -i it is passed, and nothing is said.
    let out = env
        .shell(&format!("\"$H9\" exec {id} -i -- 'wc -c' < ../in.txt"))
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(stdout(&out).trim(), "5");
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    // Nothing to read: no warning.
    let out = env
        .shell(&format!(
            "\"$H9\" exec {id} -- 'wc -c' < /dev/null; true | \"$H9\" exec {id} -- true"
        ))
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
}

#[test]
fn env_name_alone_passes_the_callers_value() {
    require_engine!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    let out = env
        .cmd()
        .env("FIRST_HOUR", "from the caller")
        .args([
            "exec",
            &id,
            "--env",
            "FIRST_HOUR",
            "-e",
            "OTHER=x",
            "--",
            "echo \"$FIRST_HOUR/$OTHER\"",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(stdout(&out), "from the caller/x\n");
    let out = env.run(&["exec", &id, "--env", "FIRST_HOUR", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    let err = stderr(&out);
    assert_shaped(&err);
    assert!(
        err.contains("--env FIRST_HOUR: FIRST_HOUR is not set in this environment"),
        "{err}"
    );
}

#[test]
fn completions_offer_the_live_sandboxes() {
    require_engine!();
    let env = TestEnv::new();
    let id = env.up(&["--name", "first-hour-box"]);
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("completions/h9sandbox.bash");
    // bash: the committed script, as a shell runs it on TAB after `h9sandbox exec `.
    let out = env
        .shell(&format!(
            "source {}; COMP_WORDS=(h9sandbox exec ''); COMP_CWORD=2; COMP_TYPE=9; \
             _clap_complete_h9sandbox h9sandbox '' exec; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .env("PATH", bin_dir())
        .output()
        .unwrap();
    assert_ok(&out);
    let text = stdout(&out);
    let words: Vec<&str> = text.lines().map(str::trim).collect();
    assert!(words.contains(&id.as_str()), "{words:?}");
    assert!(words.contains(&"first-hour-box"), "{words:?}");
    // Options still complete, and an argument that is no ID gets no sandbox.
    let out = env
        .shell(&format!(
            "source {}; COMP_WORDS=(h9sandbox exec --ti); COMP_CWORD=2; COMP_TYPE=9; \
             _clap_complete_h9sandbox h9sandbox --ti exec; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .env("PATH", bin_dir())
        .output()
        .unwrap();
    assert_eq!(stdout(&out).trim(), "--timeout", "{}", stderr(&out));
    // zsh and fish ask the binary the same way: each protocol gives the ID with its name.
    for (shell, index) in [("zsh", "2"), ("fish", "")] {
        let out = env
            .cmd()
            .env("H9SANDBOX_COMPLETE", shell)
            .env("_CLAP_COMPLETE_INDEX", index)
            .args(["--", "h9sandbox", "down", ""])
            .output()
            .unwrap();
        assert_ok(&out);
        let text = stdout(&out);
        assert!(
            text.lines()
                .any(|l| l.starts_with(&id) && l.contains("first-hour-box")),
            "{shell}: {text}"
        );
    }
}

#[test]
fn ls_quiet_prints_only_ids() {
    require_engine!();
    let env = TestEnv::new();
    let a = env.up(&[]);
    let b = env.up(&[]);
    let out = env.run(&["ls", "-q"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), format!("{a}\n{b}\n"));
    let out = env.run(&["ls", "--quiet", "--format", "json"]);
    assert_eq!(stdout(&out), format!("{a}\n{b}\n"));
}

#[test]
fn up_warns_when_the_owner_has_already_exited() {
    require_container!("needs a bootstrap in a container");
    let env = TestEnv::new();
    // The owner exits while `up` still runs its 2-second bootstrap.
    let out = env
        .shell("sleep 0.5 & \"$H9\" up --owner-pid $! --bootstrap 'sleep 2'")
        .output()
        .unwrap();
    assert_ok(&out);
    let err = stderr(&out);
    assert_shaped(&err);
    assert!(
        err.contains("has already exited, so its owner watcher removes the sandbox in a moment")
            && err.contains("--owner-pid $$PPID"),
        "{err}"
    );
    // And so it does, with nothing else running.
    wait_until(Duration::from_secs(20), "the owner watcher", || {
        env.ls_raw().is_empty()
    });
    // A live owner draws nothing.
    let out = env.run(&["up", "--owner-pid", "parent"]);
    assert_ok(&out);
    assert!(!stderr(&out).contains("already exited"), "{}", stderr(&out));
}

/// The guide's Makefile pattern (docs/guide.md, `up`): the fenced `make` block after the
/// `(makefile:` marker, its list-item indentation taken off.
fn makefile_block() -> String {
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide.md"),
    )
    .unwrap();
    let after = guide
        .split_once("(makefile: tests/it/first_hour.rs")
        .expect("docs/guide.md has a makefile marker")
        .1;
    let body = after.split_once("```make\n").unwrap().1;
    let body = body.split_once("```").unwrap().0;
    body.lines()
        .map(|l| l.trim_start())
        .filter(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `make test` with the guide's Makefile in the work dir of `env` (h9sandbox on `PATH`), in a
/// process group of its own, as a terminal runs a foreground job; `test.sh` is the command the
/// pattern runs in the sandbox.
fn make_with_the_readme_makefile(env: &TestEnv, test_sh: &str) -> std::process::Child {
    let makefile = makefile_block();
    assert!(makefile.contains("--owner-pid $$PPID"), "{makefile}");
    std::fs::write(env.path("Makefile"), makefile).unwrap();
    std::fs::write(env.path("test.sh"), test_sh).unwrap();
    std::fs::set_permissions(
        env.path("test.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    use std::os::unix::process::CommandExt;
    env.program("make")
        .args(["-s", "test"])
        .env("PATH", bin_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap()
}

#[test]
fn the_readme_makefile_pattern_leaves_nothing_on_pass_fail_and_ctrl_c() {
    require_engine!();
    // Pass: the recipe's command ran in the sandbox; make exits 0; the sandbox goes by itself.
    let env = TestEnv::new();
    let make = make_with_the_readme_makefile(&env, "#!/bin/sh\necho in-the-sandbox\n");
    let out = wait_output(make, Duration::from_secs(120), "make (pass)");
    assert_ok(&out);
    assert!(stdout(&out).contains("in-the-sandbox"), "{}", stdout(&out));
    wait_until(
        Duration::from_secs(20),
        "the sandbox of a make that passed",
        || env.ls_raw().is_empty() && env.containers().is_empty(),
    );
    env.assert_nothing_left("make (pass)");
    // Fail: a recipe fails, make exits 2; the same.
    let env = TestEnv::new();
    let make = make_with_the_readme_makefile(&env, "#!/bin/sh\necho failing >&2; exit 3\n");
    let out = wait_output(make, Duration::from_secs(120), "make (fail)");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    wait_until(
        Duration::from_secs(20),
        "the sandbox of a make that failed",
        || env.ls_raw().is_empty() && env.containers().is_empty(),
    );
    env.assert_nothing_left("make (fail)");
    // Ctrl-C: SIGINT to make's whole process group (the terminal's foreground job: make, the
    // recipe's shell, `h9sandbox exec`) once the command runs in the sandbox.
    let env = TestEnv::new();
    let make =
        make_with_the_readme_makefile(&env, "#!/bin/sh\ntouch started\nsleep 120\necho never\n");
    let pgid = make.id();
    wait_until(
        Duration::from_secs(120),
        "make's command in the sandbox",
        || env.path("started").exists(),
    );
    signal_group(pgid, "INT");
    let out = wait_output(make, Duration::from_secs(60), "make (Ctrl-C)");
    assert!(!out.status.success(), "make ignored Ctrl-C");
    assert!(!stdout(&out).contains("never"), "{}", stdout(&out));
    wait_until(
        Duration::from_secs(20),
        "the sandbox of an interrupted make",
        || env.ls_raw().is_empty() && env.containers().is_empty(),
    );
    env.assert_nothing_left("make (Ctrl-C)");
}

#[test]
fn reap_with_nothing_to_do_says_so_in_one_line() {
    require_container!("counts containers");
    let env = TestEnv::new();
    let out = env.run(&["reap"]);
    assert_ok(&out);
    assert_eq!(
        stdout(&out),
        format!(
            "nothing to reap: 0 sandbox records and 0 containers of {} looked at\n",
            env.state_dir.display()
        )
    );
    let _id = env.up(&[]);
    let out = env.run(&["reap", "--dry-run"]);
    assert_eq!(
        stdout(&out),
        format!(
            "nothing to reap: 1 sandbox record and 1 container of {} looked at, all in use\n",
            env.state_dir.display()
        )
    );
    // JSON keeps its documented shape: the array of what was removed (its length the count).
    let out = env.run(&["reap", "--format", "json"]);
    assert_eq!(stdout(&out).trim(), "[]");
}

#[test]
fn mcp_lists_the_auto_up_sandbox_while_it_is_still_being_made() {
    use std::io::{BufRead, BufReader, Write};
    require_container!("the MCP tests drive container sandboxes");
    let env = TestEnv::new();
    // A bootstrap keeps --auto-up busy for seconds after its record exists.
    let mut child = env
        .cmd()
        .env("H9SANDBOX_BOOTSTRAP_CMD", "sleep 5")
        .args(["mcp", "--auto-up"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| l.unwrap());
    let mut send = |v: serde_json::Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut answer = |id: u64| -> serde_json::Value {
        for line in lines.by_ref() {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["id"] == serde_json::json!(id) {
                return v;
            }
        }
        panic!("no answer to {id}");
    };
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "by-hand", "version": "0"}}}),
    );
    answer(0);
    send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let list = |id: u64| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                           "params": {"name": "sandbox_list", "arguments": {}}})
    };
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut id = 1;
    let listed = loop {
        send(list(id));
        let r = answer(id);
        let s = r["result"]["structuredContent"].clone();
        if let Some(first) = s["sandboxes"].as_array().and_then(|a| a.first()).cloned() {
            // Still being made: not yet the session's default.
            assert!(s["default"].is_null(), "{s}");
            break first;
        }
        assert!(
            Instant::now() < deadline,
            "sandbox_list never showed the --auto-up sandbox: {s}"
        );
        id += 1;
        std::thread::sleep(Duration::from_millis(100));
    };
    // Once made, it is the one the session uses.
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 900, "method": "tools/call",
        "params": {"name": "sandbox_exec", "arguments": {"command": "true", "timeout_secs": 0.5}}}),
    );
    assert_eq!(answer(900)["result"]["isError"], serde_json::json!(false));
    send(list(901));
    let s = answer(901)["result"]["structuredContent"].clone();
    assert_eq!(s["sandboxes"].as_array().unwrap().len(), 1, "{s}");
    assert_eq!(s["default"], listed["id"], "{s}");
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The README's Quick start block: the fenced block after the `<!-- quick-start` marker.
fn quick_start_block() -> String {
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    let after = readme
        .split_once("<!-- quick-start")
        .expect("README.md has a quick-start marker")
        .1;
    let body = after.split_once("```sh\n").unwrap().1;
    body.split_once("\n```").unwrap().0.to_string()
}

#[test]
fn the_readme_quick_start_runs_as_written() {
    require_container!("the Quick start runs a container");
    let env = TestEnv::new();
    let block = quick_start_block();
    assert!(block.contains("h9sandbox up"), "{block}");
    // As pasted into a shell at the repository's root, with h9sandbox on PATH; any failing line
    // fails the test.
    let out = env
        .shell(&format!("set -e\n{block}"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PATH", bin_dir())
        .output()
        .unwrap();
    assert_ok(&out);
    let text = stdout(&out);
    assert!(text.contains("PRETTY_NAME=\"Debian GNU/Linux 12"), "{text}");
    assert!(text.contains("\"exit_code\": 0"), "{text}");
    assert!(text.contains("exit 124"), "{text}");
    assert!(text.contains("Running"), "{text}");
    assert_shaped(
        &stderr(&out)
            .lines()
            .filter(|l| l.starts_with("h9sandbox"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    // `down` removed what `up` made.
    assert!(env.ls_raw().is_empty(), "{:?}", env.ls_raw());
    assert!(env.containers().is_empty(), "{:?}", env.containers());
}

#[test]
fn a_mistyped_option_after_the_sandbox_id_gets_a_suggestion() {
    let env = TestEnv::new();
    for (args, similar) in [
        (
            vec!["exec", "some-box", "--tiemout", "5", "--", "true"],
            "'--timeout'",
        ),
        (
            vec!["bootstrap", "some-box", "--tiemout=5", "--", "true"],
            "'--timeout'",
        ),
        (vec!["run", "--imgae", "x", "--", "true"], "'--image'"),
        (vec!["run", "--memroy", "1g", "--", "true"], "'--memory'"),
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        let err = stderr(&out);
        assert_shaped(&err);
        assert!(
            err.contains(&format!(
                "unknown option '{}'",
                args[if args[0] == "run" { 1 } else { 2 }]
            )) && err.contains(&format!("a similar option exists: {similar}")),
            "{args:?}: {err}"
        );
    }
    // Nothing close: no suggestion, the same shape.
    let err = stderr(&env.run(&["exec", "some-box", "--frobnicate", "--", "true"]));
    assert!(
        err.contains("unknown option '--frobnicate' (h9sandbox's options go before"),
        "{err}"
    );
    assert!(env.ls_raw().is_empty());
}

#[test]
fn configuration_mistakes_are_named_with_their_fix() {
    let env = TestEnv::new();
    // An unquoted text value in TOML.
    let file = env.root.path().join("c.toml");
    for (text, fix) in [
        ("memory = 1g\n", "write memory = \"1g\""),
        ("image = ubuntu:22.04\n", "write image = \"ubuntu:22.04\""),
        (
            "cpus = 1\nnetwork = none # no network\n",
            "write network = \"none\"",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let out = env.run(&["--config", file.to_str().unwrap(), "ls"]);
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert_shaped(&err);
        assert!(
            err.contains("is not valid TOML") && err.contains(fix),
            "{text:?}: {err}"
        );
    }
    // The user's own file, writable by its group, by others, or both: named as it is, with the
    // chmod that fixes exactly that.
    let dir = env.root.path().join(".config/h9sandbox");
    std::fs::create_dir_all(&dir).unwrap();
    let user_file = dir.join("config.toml");
    std::fs::write(&user_file, "cpus = 0.5\n").unwrap();
    for (mode, who, fix) in [
        (0o620, "writable by its group (mode 0620)", "chmod g-w"),
        (0o602, "writable by others (mode 0602)", "chmod o-w"),
        (
            0o622,
            "writable by group and others (mode 0622)",
            "chmod go-w",
        ),
    ] {
        std::fs::set_permissions(
            &user_file,
            std::os::unix::fs::PermissionsExt::from_mode(mode),
        )
        .unwrap();
        let out = env.run(&["ls"]);
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(err.contains(who) && err.contains(fix), "{mode:o}: {err}");
    }
}

#[test]
fn verbose_exec_shows_the_shell_that_really_runs() {
    require_container!("the shell is the image's");
    if agent_socket_unreachable() {
        return; // the engine's exec: `-v` shows its own command line
    }
    let env = TestEnv::new();
    for (image, shell) in [(TINY, "bash"), (NOBASH, "sh")] {
        let id = env.up(&["--image", image]);
        let out = env.run(&["-v", "exec", &id, "--", "echo hi"]);
        assert_ok(&out);
        assert!(
            stderr(&out).contains(&format!(
                "agent of {}) {shell} -c 'echo hi'",
                &id.replace('-', "")[..12]
            )),
            "{image}: {}",
            stderr(&out)
        );
        assert_ok(&env.run(&["down", &id]));
    }
}

#[test]
fn a_failed_run_bootstrap_points_at_nothing_that_is_gone() {
    require_container!("needs a bootstrap in a container");
    let env = TestEnv::new();
    let out = env.run(&["run", "--bootstrap", "exit 9", "--", "echo ran"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "ran\n");
    let err = stderr(&out);
    assert_shaped(&err);
    assert!(
        err.contains("bootstrap `exit 9` exited with status 9; the command runs without it"),
        "{err}"
    );
    assert!(!err.contains("ls --format json"), "{err}");
    env.assert_nothing_left("run");
}

#[test]
fn write_parents_under_a_regular_file_says_not_a_directory() {
    require_container!("writes inside the container too");
    let env = TestEnv::new();
    let id = env.up(&[]);
    std::fs::write(env.path("f"), "a file\n").unwrap();
    assert_ok(&env.run(&["exec", &id, "--", "echo x > /tmp/f"]));
    for (path, file) in [
        ("f/x", "f is not a directory"),
        ("f/y/x", "f is not a directory"),
        ("/tmp/f/x", "/tmp/f is not a directory"),
        ("/tmp/f/y/x", "/tmp/f is not a directory"),
    ] {
        let out = env
            .cmd()
            .args(["write", &id, path, "--parents"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                drop(c.stdin.take());
                c.wait_with_output()
            })
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{path}");
        let err = stderr(&out);
        assert_shaped(&err);
        assert!(err.contains(file), "{path}: {err}");
        assert!(
            !err.contains("File exists") && !err.contains("(status"),
            "{path}: {err}"
        );
    }
}
