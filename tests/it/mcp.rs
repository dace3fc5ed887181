//! `h9sandbox mcp`, the Model Context Protocol server, driven by a client nobody here wrote: the
//! official MCP Python SDK (the `mcp` package from PyPI), through `tests/mcp_client.py`, against
//! the real engine. The client checks what it sees (tool list and schemas, results, tool errors);
//! these tests check what it cannot (containers, the state file, the host's files, the server's
//! stderr).
//!
//! The interpreter is `$H9TEST_MCP_PYTHON`, which `.ci/run` sets to the virtual environment
//! made by `scripts/mcp-venv.sh`; without it, `target/mcp-venv/bin/python` if that exists. When
//! neither has the `mcp` package, the tests fail if `CI` is set, and are skipped with a loud
//! message otherwise. One test speaks the protocol by hand and needs no Python.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

/// The Python interpreter that has the `mcp` package, or `None` (announced) outside CI.
fn python() -> Option<PathBuf> {
    static PYTHON: OnceLock<Option<PathBuf>> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            venv_python(
                "H9TEST_MCP_PYTHON",
                "mcp-venv",
                "mcp",
                "scripts/mcp-venv.sh",
            )
        })
        .clone()
}

/// Skips the test (returns) when the Python client cannot run outside CI.
macro_rules! require_python {
    () => {
        match python() {
            Some(p) => p,
            None => return,
        }
    };
}

/// What one run of the Python client left: its transcript and the server's stderr.
struct Run {
    transcript: Value,
    server_stderr: String,
}

/// Runs the client's `scenario` against the binary with `env`'s configuration; asserts that it
/// passed its own checks.
fn client(env: &TestEnv, python: &Path, scenario: &str) -> Run {
    let errlog = env.root.path().join(format!("server-{scenario}.log"));
    let unique = env
        .root
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = env
        .program(python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py"))
        .arg(scenario)
        .env("H9_BIN", assert_cmd::cargo::cargo_bin("h9sandbox"))
        .env("H9_WORKDIR", &env.workdir)
        .env("H9_ERRLOG", &errlog)
        .env("H9_UNIQUE", &unique)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let server_stderr = std::fs::read_to_string(&errlog).unwrap_or_default();
    assert!(
        out.status.success(),
        "mcp_client.py {scenario} failed ({:?})\n{}\nserver stderr:\n{server_stderr}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr),
    );
    let transcript = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "mcp_client.py {scenario} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    Run {
        transcript,
        server_stderr,
    }
}

/// The names of an object schema's properties, and of the required ones.
fn properties(schema: &Value) -> (Vec<String>, Vec<String>) {
    let mut props: Vec<String> = schema["properties"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    props.sort();
    let mut required: Vec<String> = schema["required"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    required.sort();
    (props, required)
}

#[test]
fn the_tools_are_listed_with_schemas_a_model_can_follow() {
    let python = require_python!();
    let env = TestEnv::new();
    let t = client(&env, &python, "tools").transcript;
    assert_eq!(t["server"], "h9sandbox");
    let tools = &t["tools"];
    let names: Vec<&String> = tools.as_object().unwrap().keys().collect();
    assert_eq!(names.len(), 11, "{names:?}");
    let expect = [
        (
            "sandbox_up",
            vec![
                "cpus",
                "image",
                "keep",
                "memory",
                "name",
                "network",
                "parent",
                "pids_limit",
                "ttl",
                "workdir",
            ],
            vec![],
        ),
        (
            "sandbox_exec",
            vec![
                "argv",
                "combined",
                "command",
                "cwd",
                "env",
                "id",
                "max_output_bytes",
                "timeout_secs",
                "user",
            ],
            vec![],
        ),
        (
            "sandbox_spawn",
            vec![
                "argv",
                "command",
                "cwd",
                "env",
                "id",
                "timeout_secs",
                "user",
            ],
            vec![],
        ),
        ("sandbox_ps", vec!["id"], vec![]),
        (
            "sandbox_logs",
            vec!["handle", "id", "max_output_bytes"],
            vec!["handle"],
        ),
        ("sandbox_kill", vec!["handle", "id"], vec!["handle"]),
        (
            "sandbox_read",
            vec!["id", "limit", "line_numbers", "offset", "path"],
            vec!["path"],
        ),
        (
            "sandbox_write",
            vec!["append", "content", "id", "no_clobber", "parents", "path"],
            vec!["content", "path"],
        ),
        (
            "sandbox_edit",
            vec!["id", "new", "old", "path", "replace_all"],
            vec!["new", "old", "path"],
        ),
        ("sandbox_list", vec![], vec![]),
        ("sandbox_down", vec!["id"], vec![]),
    ];
    for (name, props, required) in expect {
        let (p, r) = properties(&tools[name]["input"]);
        assert_eq!(p, props, "{name}'s arguments");
        assert_eq!(r, required, "{name}'s required arguments");
        // Unknown arguments are refused (a typo is told, not ignored).
        assert_eq!(
            tools[name]["input"]["additionalProperties"],
            json!(false),
            "{name}"
        );
    }
    let (p, _) = properties(&tools["sandbox_exec"]["output"]);
    for field in [
        "id",
        "exit_code",
        "stdout",
        "stderr",
        "duration_ms",
        "timed_out",
        "truncated",
        "stdout_bytes",
        "stderr_bytes",
        "oom_killed",
        "ended",
        "signal",
        "interrupted",
        "output",
    ] {
        assert!(p.contains(&field.to_string()), "exec result lacks {field}");
    }
    let (p, _) = properties(&tools["sandbox_read"]["output"]);
    assert!(p.contains(&"next_offset".to_string()), "{p:?}");
    for (name, read_only) in [
        ("sandbox_read", true),
        ("sandbox_list", true),
        ("sandbox_exec", false),
        ("sandbox_down", false),
    ] {
        assert_eq!(tools[name]["read_only"], json!(read_only), "{name}");
    }
    // The descriptions are single lines (wrapped doc comments are joined).
    let text = tools.to_string();
    assert!(!text.contains("\\n"), "a description keeps a line break");
}

#[test]
fn a_session_runs_commands_and_edits_files_in_its_sandbox() {
    require_container!("the MCP tests drive container sandboxes");
    if workdir_copied("it checks on the host the files the session edited through the bind mount (and asks for network none, which a swarm refuses)") {
        return;
    }
    let python = require_python!();
    let env = TestEnv::new();
    let run = client(&env, &python, "flow");
    let t = &run.transcript;
    // The edit reached the host's file, through the bind mount.
    assert_eq!(
        std::fs::read_to_string(env.path("notes/todo.txt")).unwrap(),
        "alpha\nBETA\nbeta2\ngamma\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.path("dup.txt")).unwrap(),
        "y and y"
    );
    // The escape attempts touched nothing.
    let unique = env.root.path().file_name().unwrap().to_string_lossy();
    for p in [
        env.root.path().join(format!("escaped-{unique}.txt")),
        PathBuf::from(format!("/tmp/escaped-{unique}.txt")),
    ] {
        assert!(!p.exists(), "{} was written", p.display());
    }
    let leftovers: Vec<_> = std::fs::read_dir(&env.workdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".h9tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    // sandbox_down removed the container and the record.
    assert_eq!(t["ls_after_down"], json!([]));
    assert!(env.containers().is_empty(), "{:?}", env.containers());
    assert!(env.ls_raw().is_empty());
    // The server's logs went to stderr (the client saw only protocol messages on stdout).
    assert!(
        run.server_stderr.contains("+ docker run") || run.server_stderr.contains("+ podman run"),
        "{}",
        run.server_stderr
    );
}

#[test]
fn closing_stdin_removes_the_auto_up_sandbox_but_not_a_kept_one() {
    require_container!("the MCP tests drive container sandboxes");
    let python = require_python!();
    let env = TestEnv::new();
    let run = client(&env, &python, "close");
    let t = &run.transcript;
    assert!(
        run.server_stderr
            .contains("mcp: shutting down: the client disconnected"),
        "{}",
        run.server_stderr
    );
    assert_eq!(t["server_after_close"], "gone");
    let ids: Vec<Value> = env.ls().into_iter().map(|e| e["id"].clone()).collect();
    assert_eq!(
        ids,
        vec![t["kept"].clone()],
        "only the kept sandbox is left"
    );
    assert_eq!(env.containers().len(), 1);
    assert_ok(&env.run(&["down", t["kept"].as_str().unwrap()]));
    assert!(env.containers().is_empty());
}

#[test]
fn reap_removes_the_sandbox_of_a_killed_server() {
    require_container!("the MCP tests drive container sandboxes");
    let python = require_python!();
    // Without the owner watcher (which removes it by itself: `owner::run_and_an_mcp_session_are_owners_too`).
    let env = TestEnv::without_owner_watcher();
    let t = client(&env, &python, "kill").transcript;
    let id = t["auto"].as_str().unwrap();
    // SIGKILL left it behind...
    assert_eq!(t["listed_after_kill"], json!([id]));
    assert_eq!(env.containers().len(), 1);
    // ...for reap, which tells its owner (the server) is dead.
    let out = env.run(&["reap", "--format", "json"]);
    assert_ok(&out);
    let reaped: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!(reaped[0]["id"], id);
    assert_eq!(reaped[0]["reason"], "owner-dead");
    assert!(env.containers().is_empty());
    assert!(env.ls_raw().is_empty());
}

#[test]
fn sigterm_removes_the_session_sandbox_while_a_command_runs() {
    require_container!("the MCP tests drive container sandboxes");
    let python = require_python!();
    let env = TestEnv::new();
    let run = client(&env, &python, "term");
    assert!(
        run.server_stderr.contains("mcp: shutting down: SIGTERM"),
        "{}",
        run.server_stderr
    );
    assert!(env.containers().is_empty(), "{:?}", env.containers());
    assert!(env.ls_raw().is_empty());
}

#[test]
fn sigint_inherited_as_ignored_still_ends_the_session_and_leaves_nothing() {
    require_container!("the MCP tests drive container sandboxes");
    let env = TestEnv::new();
    // Interrupted while --auto-up makes the sandbox (its `run -d`, or on a swarm its `service
    // create`, under way), then once it runs.
    for running in [false, true] {
        let what = format!("mcp --auto-up (SIGINT ignored, sandbox running: {running})");
        let mut cmd = env.cmd();
        cmd.args(["-v", "mcp", "--auto-up"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        with_sigint_ignored(&mut cmd);
        let mut server = Watched::spawn(&mut cmd);
        // stdin stays open: only the signal may end the session.
        let _stdin = server.child.stdin.take();
        server.wait_line(Duration::from_secs(60), &what, |l| {
            l.starts_with("+ ") && l.contains(create_command())
        });
        if running {
            wait_until(Duration::from_secs(60), &what, || {
                env.ls_raw().iter().any(|r| r["state"] == "Running")
            });
        }
        signal(server.child.id(), "INT");
        let out = server.finish(Duration::from_secs(60), &what);
        assert!(out.status.success(), "{what}: {}", stderr(&out));
        if running {
            assert!(
                stderr(&out).contains("mcp: shutting down: SIGINT"),
                "{what}: {}",
                stderr(&out)
            );
        }
        env.assert_nothing_left(&what);
    }
}

/// Sends one JSON-RPC message.
fn send(stdin: &mut impl Write, message: Value) {
    writeln!(stdin, "{message}").unwrap();
    stdin.flush().unwrap();
}

/// Reads lines until the response to request `id`; every line must be a JSON-RPC message.
fn response(lines: &mut impl Iterator<Item = String>, id: u64) -> Value {
    for line in lines {
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a line that is no JSON ({e}): {line:?}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        if v["id"] == json!(id) {
            return v;
        }
    }
    panic!("the server closed stdout before answering request {id}");
}

#[test]
fn stdout_carries_only_protocol_messages() {
    require_container!("the MCP tests drive container sandboxes");
    let env = TestEnv::new();
    let mut child = env
        .cmd()
        .args(["-v", "mcp", "--auto-up"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| l.unwrap());
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "by-hand", "version": "0"}}}),
    );
    let init = response(&mut lines, 1);
    assert_eq!(init["result"]["serverInfo"]["name"], "h9sandbox");
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    // A command writing to both streams, and a warning-prone call (a sandbox that does not exist).
    let call = |id: u64, name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}})
    };
    send(
        &mut stdin,
        call(
            2,
            "sandbox_exec",
            json!({"command": "echo to-stdout; echo to-stderr >&2; exit 3"}),
        ),
    );
    let r = response(&mut lines, 2);
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    let s = &r["result"]["structuredContent"];
    assert_eq!(
        (&s["exit_code"], &s["stdout"], &s["stderr"]),
        (&json!(3), &json!("to-stdout\n"), &json!("to-stderr\n"))
    );
    // Another user, another directory of the container.
    send(
        &mut stdin,
        call(
            5,
            "sandbox_exec",
            json!({"command": "echo $(id -u):$(id -g) $(pwd)", "user": "4321:99", "cwd": "/"}),
        ),
    );
    let r = response(&mut lines, 5);
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["stdout"],
        json!("4321:99 /\n"),
        "{r}"
    );
    // A file outside the work dir: the container's, served inside it.
    send(
        &mut stdin,
        call(
            6,
            "sandbox_write",
            json!({"path": "/tmp/from-mcp.txt", "content": "one\ntwo\n"}),
        ),
    );
    let r = response(&mut lines, 6);
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    send(
        &mut stdin,
        call(
            7,
            "sandbox_read",
            json!({"path": "/tmp/from-mcp.txt", "offset": 2}),
        ),
    );
    let r = response(&mut lines, 7);
    let s = &r["result"]["structuredContent"];
    assert_eq!(
        (&s["content"], &s["total_lines"], &s["path"]),
        (&json!("two\n"), &json!(2), &json!("/tmp/from-mcp.txt")),
        "{r}"
    );
    assert!(
        !Path::new("/tmp/from-mcp.txt").exists()
            || std::fs::read_to_string("/tmp/from-mcp.txt").unwrap() != "one\ntwo\n"
    );
    send(
        &mut stdin,
        call(3, "sandbox_down", json!({"id": "no-such-sandbox"})),
    );
    let r = response(&mut lines, 3);
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    send(&mut stdin, call(4, "no_such_tool", json!({})));
    let r = response(&mut lines, 4);
    assert!(r.get("error").is_some() || r["result"]["isError"] == json!(true));
    // Closing stdin ends the session: the rest of stdout must be protocol messages too.
    drop(stdin);
    for line in lines {
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a line that is no JSON ({e}): {line:?}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    // -v output, the engine's command lines, went to stderr.
    assert!(stderr.contains(create_command()), "{stderr}");
    assert!(env.containers().is_empty(), "{:?}", env.containers());
    assert!(env.ls_raw().is_empty());
}

#[test]
fn a_bad_work_dir_fails_at_start_with_one_line() {
    let env = TestEnv::new();
    let out = env.run(&["mcp", "--workdir", "/nonexistent/dir"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("h9sandbox: error: work directory /nonexistent/dir cannot be used"),
        "{err}"
    );
}

/// Lines of the server's stdout, read on a thread, so that a test can wait for a response with
/// a bound instead of hanging when none comes.
pub(crate) fn stdout_lines(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(l) = line else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next JSON-RPC message on `lines` that answers request `id` (`Value::Null`: a response
/// without an ID), waiting at most two minutes (the server used to never answer; this test must
/// fail, not hang). Every line must be a JSON-RPC message.
pub(crate) fn answer(lines: &std::sync::mpsc::Receiver<String>, id: Value) -> Value {
    loop {
        let line = lines
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("no answer to request {id} ({e})"));
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a line that is no JSON ({e}): {line:?}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        if v.get("id") == Some(&id) && (v.get("result").is_some() || v.get("error").is_some()) {
            return v;
        }
    }
}

#[test]
fn an_oversized_request_is_answered_with_an_error_naming_the_limit() {
    let env = TestEnv::new();
    let mut child = env
        .cmd()
        .args(["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = stdout_lines(child.stdout.take().unwrap());
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "by-hand", "version": "0"}}}),
    );
    answer(&lines, json!(1));
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    // 17 MiB of content: over the limit of 16 MiB per message.
    let big = "x".repeat(17 << 20);
    let call = |id: Value, content: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "sandbox_write",
                          "arguments": {"path": "big.txt", "content": content}}})
    };
    send(&mut stdin, call(json!(7), &big));
    let r = answer(&lines, json!(7));
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(r["error"]["code"], json!(-32600), "{r}");
    assert!(
        message.contains("16777216") && message.contains("16 MiB"),
        "{message}"
    );
    assert!(!env.path("big.txt").exists());
    // A string ID is answered with it; an ID the start of the message does not hold (it comes
    // after the 17 MiB), with a null ID.
    send(&mut stdin, call(json!("req-8"), &big));
    assert!(answer(&lines, json!("req-8"))["error"].is_object());
    let late = format!(
        r#"{{"jsonrpc": "2.0", "method": "tools/call", "params": {{"name": "sandbox_write", "arguments": {{"path": "b", "content": "{big}"}}}}, "id": 9}}"#
    );
    writeln!(stdin, "{late}").unwrap();
    stdin.flush().unwrap();
    assert!(answer(&lines, Value::Null)["error"]["message"]
        .as_str()
        .unwrap()
        .contains("16 MiB"));
    // The session goes on.
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 10, "method": "tools/list"}),
    );
    let r = answer(&lines, json!(10));
    assert_eq!(
        r["result"]["tools"].as_array().map(Vec::len),
        Some(11),
        "{r}"
    );
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_oversized_request_from_the_python_sdk_gets_an_error_not_silence() {
    let python = require_python!();
    let env = TestEnv::new();
    let t = client(&env, &python, "oversized").transcript;
    assert_eq!(t["error"]["code"], json!(-32600), "{t}");
    assert!(!env.path("big.txt").exists());
}

#[test]
fn a_session_acts_only_on_the_sandboxes_it_made() {
    require_container!("the MCP tests drive container sandboxes");
    if workdir_copied("it makes sub-sandboxes (--parent), which copy mode refuses, and checks the host's work dir for what a session must not reach") {
        return;
    }
    let python = require_python!();
    let env = TestEnv::new();
    let t = client(&env, &python, "scope").transcript;
    let foreign = t["foreign"].as_str().unwrap();
    let unique = env
        .root
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // Nothing the first session tried reached the script's sandbox.
    for name in [format!("pwned-{unique}"), format!("written-{unique}")] {
        assert!(!env.path(&name).exists(), "{name} was made");
    }
    let ids: Vec<Value> = env.ls().into_iter().map(|e| e["id"].clone()).collect();
    assert_eq!(
        ids,
        vec![json!(foreign)],
        "only the script's sandbox is left"
    );
    assert_ok(&env.run(&["down", foreign]));
}

#[test]
fn sandbox_up_cannot_leave_the_servers_work_dir() {
    require_container!("the MCP tests drive container sandboxes");
    let python = require_python!();
    let env = TestEnv::new();
    // Beside the server's work dir: the home's credentials and another directory; inside it, a
    // symlink pointing out (as code in a sandbox on that work dir could plant).
    let home = env.root.path();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    std::fs::create_dir_all(home.join("outside")).unwrap();
    std::fs::create_dir_all(env.path("sub")).unwrap();
    std::os::unix::fs::symlink(home.join("outside"), env.path("link-out")).unwrap();
    let t = client(&env, &python, "confine").transcript;
    for why in t["refused"].as_array().unwrap() {
        let why = why.as_str().unwrap();
        assert!(why.contains("outside this server's --workdir"), "{why}");
    }
    // Only the two sandboxes inside were made, and the session removed them when it ended.
    assert_eq!(t["made"].as_array().unwrap().len(), 2);
    assert!(env.containers().is_empty(), "{:?}", env.containers());
    assert!(env.ls_raw().is_empty());
}

#[test]
fn the_servers_exec_timeout_is_a_ceiling_for_clients() {
    require_container!("the MCP tests drive container sandboxes");
    let env = TestEnv::new();
    // A sandbox made outside the session with no timeout at all, and a server allowing 2 s.
    let id = env
        .cmd()
        .env("H9SANDBOX_EXEC_TIMEOUT_SECS", "0")
        .args(["up"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ok(&id);
    let id = stdout(&id).trim().to_string();
    let mut child = env
        .cmd()
        .env("H9SANDBOX_EXEC_TIMEOUT_SECS", "2")
        .args(["mcp", "--all-sandboxes"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = stdout_lines(child.stdout.take().unwrap());
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "by-hand", "version": "0"}}}),
    );
    answer(&lines, json!(1));
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let call = |n: u64, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
               "params": {"name": "sandbox_exec", "arguments": arguments}})
    };
    // No limit, or more than the server grants: refused, naming the ceiling; nothing ran.
    for (n, t) in [(2, json!(0)), (3, json!(3600))] {
        send(
            &mut stdin,
            call(
                n,
                json!({"id": id, "command": "touch ran; sleep 30", "timeout_secs": t}),
            ),
        );
        let r = answer(&lines, json!(n));
        assert_eq!(r["result"]["isError"], json!(true), "{r}");
        let text = r["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(text.contains("exec_timeout_secs"), "{r}");
        assert!(!env.path("ran").exists(), "timeout_secs {t} ran");
    }
    // No timeout given: the sandbox's own (none) is lowered to the server's 2 s.
    send(
        &mut stdin,
        call(4, json!({"id": id, "command": "sleep 30"})),
    );
    let r = answer(&lines, json!(4));
    let s = &r["result"]["structuredContent"];
    assert_eq!(
        (&s["timed_out"], &s["exit_code"]),
        (&json!(true), &json!(124)),
        "{r}"
    );
    // Within the ceiling: as asked.
    send(
        &mut stdin,
        call(
            5,
            json!({"id": id, "command": "echo fine", "timeout_secs": 1.5}),
        ),
    );
    let r = answer(&lines, json!(5));
    assert_eq!(
        r["result"]["structuredContent"]["stdout"],
        json!("fine\n"),
        "{r}"
    );
    drop(stdin);
    let _ = child.wait();
    assert_ok(&env.run(&["down", &id]));
}
