//! The file commands act as the sandbox's user, whichever side serves them: what that user
//! cannot read is not read, what it cannot write is not written (the host side checks its
//! permission bits), and paths outside the work dir are the container's, served inside it as
//! that user.

use std::io::Write;
use std::process::{Output, Stdio};

use crate::common::*;

/// A one-line error with exit status 1 that says `says`.
#[track_caller]
fn assert_fails_saying(out: &Output, says: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("h9sandbox: error: "), "{err}");
    assert!(err.to_lowercase().contains(says), "{err}");
}

/// A Debian sandbox whose user is uid 1000 (the work dir's owner).
fn sandbox_of_1000(env: &TestEnv) -> String {
    std::os::unix::fs::chown(&env.workdir, Some(1000), Some(1000)).unwrap();
    env.up(&["--image", DEBIAN])
}

#[test]
fn work_dir_files_are_read_and_written_with_the_sandbox_users_rights() {
    require_container!("a local sandbox's user is the invoking user");
    let env = TestEnv::new();
    let id = sandbox_of_1000(&env);
    let setup = "echo secret > unreadable && chmod 0200 unreadable; \
                 echo old > readonly && chmod 0444 readonly; \
                 mkdir closed && echo in > closed/f && chmod 0555 closed; \
                 echo mine > mine";
    assert_ok(&env.run(&["exec", &id, "--", setup]));
    // This test runs as root on the host, which could read and write them all.
    let out = env.run(&["read", &id, "unreadable"]);
    assert_fails_saying(&out, "permission denied");
    assert_eq!(stdout(&out), "");
    assert_fails_saying(
        &env.run(&["read", &id, "unreadable", "--format", "json"]),
        "permission denied",
    );
    assert_fails_saying(
        &run_stdin(&env, &["write", &id, "readonly"], b"new"),
        "permission denied",
    );
    assert_fails_saying(
        &run_stdin(&env, &["write", &id, "readonly", "--append"], b"new"),
        "permission denied",
    );
    assert_fails_saying(
        &env.run(&["edit", &id, "readonly", "--old", "old", "--new", "new"]),
        "permission denied",
    );
    assert_eq!(
        std::fs::read_to_string(env.path("readonly")).unwrap(),
        "old\n"
    );
    assert_fails_saying(
        &run_stdin(&env, &["write", &id, "closed/new"], b"x"),
        "permission denied",
    );
    assert!(!env.path("closed/new").exists());
    assert_fails_saying(
        &run_stdin(&env, &["write", &id, "closed/f"], b"x"),
        "permission denied",
    );
    // What the user may, it does.
    let out = env.run(&["read", &id, "closed/f"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "in\n");
    assert_ok(&run_stdin(&env, &["write", &id, "mine"], b"new\n"));
    assert_eq!(std::fs::read_to_string(env.path("mine")).unwrap(), "new\n");
    // The same files, as the container's commands see them (the same rights).
    let out = env.run(&["exec", &id, "--", "cat unreadable; echo > readonly"]);
    assert_ne!(out.status.code(), Some(0));
}

#[test]
fn a_root_sandbox_reads_and_writes_everything_in_its_work_dir() {
    require_container!("a local sandbox's user is the invoking user");
    let env = TestEnv::new();
    let id = env.up(&["--image", DEBIAN, "--user", "root"]);
    assert_ok(&env.run(&["exec", &id, "--", "echo s > f && chmod 0000 f"]));
    let out = env.run(&["read", &id, "f"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "s\n");
}

/// `args` through the agent, or (`engine`) through the engine's exec, with `input` on stdin.
fn via(env: &TestEnv, engine: bool, args: &[&str], input: &[u8]) -> Output {
    let mut c = env.cmd();
    if engine {
        c.env("H9SANDBOX_EXEC_AGENT", "false");
    }
    let mut child = c
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn files_outside_the_work_dir_are_the_containers_both_ways_as_the_sandbox_user() {
    require_container!("a local sandbox has no container to serve them");
    let env = TestEnv::new();
    let id = sandbox_of_1000(&env);
    let canary = format!(
        "/tmp/{}-canary",
        env.root.path().file_name().unwrap().to_string_lossy()
    );
    for engine in [false, true] {
        let path = if engine { "engine" } else { "agent" };
        let ok = |args: &[&str], input: &[u8]| {
            let out = via(&env, engine, args, input);
            assert_ok(&out);
            stdout(&out)
        };
        // Read anywhere, as the sandbox's user.
        assert!(
            ok(&["read", &id, "/etc/os-release"], b"").contains("Debian"),
            "{path}"
        );
        let json: serde_json::Value = serde_json::from_str(&ok(
            &["read", &id, "/etc/os-release", "--format", "json"],
            b"",
        ))
        .unwrap();
        assert_eq!(json["path"], "/etc/os-release");
        assert!(json["content"]
            .as_str()
            .unwrap()
            .starts_with("PRETTY_NAME="));
        assert_eq!(
            ok(&["read", &id, "/etc/os-release", "--max-bytes", "6"], b""),
            "PRETTY"
        );
        // Write /tmp, read it back through exec; it is the user's, and never the host's /tmp.
        ok(&["write", &id, &canary], b"hello\n");
        assert!(
            !std::path::Path::new(&canary).exists(),
            "{path}: the host's /tmp was written"
        );
        assert_eq!(
            ok(
                &[
                    "exec",
                    &id,
                    "--",
                    &format!("cat {canary}; stat -c %u {canary}")
                ],
                b""
            ),
            "hello\n1000\n",
            "{path}"
        );
        ok(&["write", &id, &canary, "--append"], b"more\n");
        assert_eq!(ok(&["read", &id, &canary], b""), "hello\nmore\n", "{path}");
        assert_eq!(
            ok(
                &["edit", &id, &canary, "--old", "more", "--new", "less"],
                b""
            ),
            format!("replaced 1 occurrence in {canary}\n")
        );
        assert_eq!(
            ok(&["exec", &id, "--", &format!("cat {canary}")], b""),
            "hello\nless\n"
        );
        ok(
            &[
                "write",
                &id,
                "/var/tmp/deep/er/f",
                "--parents",
                "--mode",
                "600",
            ],
            b"x",
        );
        assert_eq!(
            ok(
                &["exec", &id, "--", "stat -c '%a %U' /var/tmp/deep/er/f"],
                b""
            ),
            "600 sandbox\n"
        );
        // Another user's home: root's, with --user root, and refused to the sandbox's user.
        assert!(!ok(&["read", &id, "/root/.bashrc", "--user", "root"], b"").is_empty());
        assert_fails_saying(
            &via(&env, engine, &["read", &id, "/root/.bashrc"], b""),
            "permission denied",
        );
        // The same errors as on the host side.
        assert_fails_saying(
            &via(&env, engine, &["read", &id, "/no/such"], b""),
            "no such file",
        );
        assert_fails_saying(
            &via(&env, engine, &["read", &id, "/etc"], b""),
            "a directory",
        );
        assert_fails_saying(
            &via(&env, engine, &["read", &id, "/etc/shadow"], b""),
            "permission denied",
        );
        assert_fails_saying(
            &via(&env, engine, &["write", &id, "/etc/passwd"], b"x"),
            "permission denied",
        );
        // A read-only file in a directory the user may write is not replaced.
        ok(
            &[
                "exec",
                &id,
                "--",
                "echo ro > /var/tmp/ro && chmod 444 /var/tmp/ro",
            ],
            b"",
        );
        assert_fails_saying(
            &via(&env, engine, &["write", &id, "/var/tmp/ro"], b"new"),
            "permission denied",
        );
        assert_eq!(ok(&["read", &id, "/var/tmp/ro"], b""), "ro\n", "{path}");
        ok(&["exec", &id, "--", "rm -f /var/tmp/ro"], b"");
    }
    let out = env.run(&[
        "exec",
        &id,
        "-u",
        "root",
        "--",
        "grep -c '^root:' /etc/passwd",
    ]);
    assert_eq!(stdout(&out), "1\n");
}
