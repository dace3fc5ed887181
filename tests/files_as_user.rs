//! The file commands act as the sandbox's user, whichever side serves them: what that user
//! cannot read is not read, what it cannot write is not written (the host side checks its
//! permission bits), and paths outside the work dir are the container's, served inside it as
//! that user.

mod common;

use std::io::Write;
use std::process::{Output, Stdio};

use common::*;

/// `args` with `input` on stdin.
fn run_stdin(env: &TestEnv, args: &[&str], input: &[u8]) -> Output {
    let mut child = env
        .cmd()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// A one-line error with exit status 1 that says `says`.
#[track_caller]
fn assert_refused(out: &Output, says: &str) {
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
    assert_refused(&out, "permission denied");
    assert_eq!(stdout(&out), "");
    assert_refused(
        &env.run(&["read", &id, "unreadable", "--format", "json"]),
        "permission denied",
    );
    assert_refused(
        &run_stdin(&env, &["write", &id, "readonly"], b"new"),
        "permission denied",
    );
    assert_refused(
        &run_stdin(&env, &["write", &id, "readonly", "--append"], b"new"),
        "permission denied",
    );
    assert_refused(
        &env.run(&["edit", &id, "readonly", "--old", "old", "--new", "new"]),
        "permission denied",
    );
    assert_eq!(
        std::fs::read_to_string(env.path("readonly")).unwrap(),
        "old\n"
    );
    assert_refused(
        &run_stdin(&env, &["write", &id, "closed/new"], b"x"),
        "permission denied",
    );
    assert!(!env.path("closed/new").exists());
    assert_refused(
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
