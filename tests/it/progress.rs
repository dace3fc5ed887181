//! Integration tests of what h9sandbox shows while it works: the spinner of `up` and `bootstrap`
//! (drawn on a terminal only, never in pipes or JSON mode) and `ls --watch`, against the real
//! Docker Engine. A terminal is provided by `script(1)` (util-linux), which runs the command on a
//! pseudo-terminal and copies everything it draws.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::*;

/// Runs the binary with `args` on a pseudo-terminal (stdin, stdout and stderr); returns all it
/// wrote there.
fn on_terminal(env: &TestEnv, args: &[&str]) -> String {
    let bin = assert_cmd::cargo::cargo_bin("h9sandbox");
    let line = std::iter::once(bin.to_str().unwrap())
        .chain(args.iter().copied())
        .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ");
    let out = env
        .cmd()
        .env("TERM", "xterm")
        .env("SHELL", "/bin/sh")
        .stdin(Stdio::null())
        .output_of(Command::new("script").args(["-qec", &line, "/dev/null"]));
    assert!(
        out.status.success(),
        "script(1) failed (is util-linux installed?): {}{}",
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// Lets `script` run with the environment `TestEnv::cmd` prepared for the binary.
trait OutputOf {
    fn output_of(&mut self, cmd: &mut Command) -> std::process::Output;
}

impl OutputOf for Command {
    fn output_of(&mut self, cmd: &mut Command) -> std::process::Output {
        cmd.env_clear();
        for (k, v) in self.get_envs() {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        if let Some(dir) = self.get_current_dir() {
            cmd.current_dir(dir);
        }
        cmd.stdin(Stdio::null()).output().unwrap()
    }
}

#[test]
fn spinner_shows_steps_on_a_terminal_only() {
    require_docker!();
    let env = TestEnv::new();
    // On a terminal: the bootstrap step is shown (with its elapsed time) and cleared; its output
    // and the ID stay.
    let screen = on_terminal(&env, &["up", "--bootstrap", "sleep 1; echo set up"]);
    assert!(
        screen.contains("bootstrap: sleep 1; echo set up ("),
        "no spinner step: {screen:?}"
    );
    assert!(screen.contains("set up\r\n"), "{screen:?}");
    let ids: Vec<serde_json::Value> = env.ls();
    assert_eq!(ids.len(), 1);
    assert!(screen.contains(ids[0]["id"].as_str().unwrap()));

    // JSON mode on a terminal: no spinner.
    let screen = on_terminal(
        &env,
        &[
            "up",
            "--format",
            "json",
            "--bootstrap",
            "sleep 1; echo set up",
        ],
    );
    assert!(!screen.contains("bootstrap: "), "{screen:?}");
    assert!(!screen.contains("\x1b["), "{screen:?}");

    // In pipes: nothing but the bootstrap's output on stderr, and the ID on stdout.
    let out = env.run(&["up", "--bootstrap", "sleep 1; echo set up"]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "set up\n");
    assert_eq!(stdout(&out).trim().len(), 36);
    let id = stdout(&out).trim().to_string();
    let out = env.run(&["bootstrap", &id, "--", "sleep 1; echo again"]);
    assert_ok(&out);
    assert_eq!(
        (stdout(&out).as_str(), stderr(&out).as_str()),
        ("again\n", "")
    );
}

/// Reads `child`'s stdout line by line on a thread.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits (up to a minute, against hangs) for a line satisfying `pred`.
fn wait_for(rx: &mpsc::Receiver<String>, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if pred(&l) => return l,
            Ok(_) => {}
            Err(e) => panic!("no line with {what}: {e}"),
        }
    }
}

fn interrupt_and_wait(child: &mut Child) -> Option<i32> {
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ls --watch ignored SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ls_watch_shows_changes_until_interrupted() {
    require_docker!();
    let env = TestEnv::new();
    let spawn = |args: &[&str]| {
        env.cmd()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut table = spawn(&["ls", "--watch", "--interval", "0.2"]);
    let mut json = spawn(&["ls", "--watch", "--interval", "0.2", "--format", "json"]);
    let (table_lines, json_lines) = (lines_of(&mut table), lines_of(&mut json));
    wait_for(&table_lines, "the header", |l| l.contains("ROLE"));
    wait_for(&json_lines, "an empty list", |l| l == "[]");

    let id = env.up(&[]);
    let short = &id.replace('-', "")[..12];
    // It may show Pending first; it shows Running as soon as it is.
    let row = wait_for(&table_lines, "the new sandbox running", |l| {
        l.contains(short) && l.contains("Running")
    });
    assert!(row.contains("main"), "{row}");
    assert!(!row.contains('\x1b'), "ANSI codes in a pipe: {row:?}");
    let doc = wait_for(&json_lines, "the new sandbox running", |l| {
        l.contains(&id) && l.contains("\"Running\"")
    });
    let list: Vec<serde_json::Value> = serde_json::from_str(&doc).unwrap();
    assert_eq!(list[0]["id"], id.as_str());

    assert_ok(&env.run(&["down", &id]));
    wait_for(&json_lines, "the empty list again", |l| l == "[]");

    assert_eq!(interrupt_and_wait(&mut table), Some(0));
    assert_eq!(interrupt_and_wait(&mut json), Some(0));
}
