//! h9sandbox's in-container side: PID 1 and the exec agent (its socket, its protocol, the set-ID
//! filter every process carries, the sandbox's user), tried as a user would and attacked from
//! inside the sandbox.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// `exec ID -- SCRIPT` (one word: a shell command line), asserting success; its stdout.
fn sh(env: &TestEnv, id: &str, script: &str) -> String {
    let out = env.run(&["exec", id, "--", script]);
    assert_ok(&out);
    stdout(&out)
}

/// The mode bits of `path` on the host.
fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn no_process_of_the_sandbox_can_make_a_set_id_file() {
    require_container!("a local sandbox runs on the host, without the filter");
    for user in ["root", "1000:1000"] {
        let env = TestEnv::new();
        std::os::unix::fs::chown(&env.workdir, Some(1000), Some(1000)).unwrap();
        let id = env.up(&["--user", user]);
        // Every way of setting the bits fails with EPERM; ordinary modes still work.
        let out = sh(
            &env,
            &id,
            "cp /bin/busybox s; chmod 4755 s; echo chmod=$?; chmod u+s s; echo u+s=$?; \
             chmod g+s s; echo g+s=$?; chmod 755 s; echo plain=$?; \
             mkdir d && chmod 2775 d; echo dir=$?",
        );
        for (what, want) in [
            ("chmod", 1),
            ("u+s", 1),
            ("g+s", 1),
            ("plain", 0),
            ("dir", 1),
        ] {
            assert!(
                out.contains(&format!("{what}={want}\n")),
                "{user}: {what}: {out}"
            );
        }
        // A process that left the exec's tree (setsid, in the background) carries the filter
        // too, and so does the engine's exec.
        sh(&env, &id, "setsid sh -c 'sleep 0.2; chmod 4755 s' & wait");
        let fallback = env
            .cmd()
            .env("H9SANDBOX_EXEC_AGENT", "false")
            .args(["exec", &id, "--", "chmod 6755 s; echo $?"])
            .output()
            .unwrap();
        assert_eq!(stdout(&fallback), "1\n", "{user}: {}", stderr(&fallback));
        std::thread::sleep(Duration::from_millis(500));
        for f in ["s", "t"] {
            if env.path(f).exists() {
                assert_eq!(mode(&env.path(f)) & 0o6000, 0, "{user}: {f} is set-ID");
            }
        }
        assert_eq!(mode(&env.path("d")) & 0o6000, 0);
        // PID 1 itself runs under the filter (two filters stacked on the engine's profile).
        if user == "root" {
            let status = sh(&env, &id, "grep -E '^Seccomp' /proc/1/status");
            assert!(status.contains("Seccomp:\t2"), "{status}");
        }
    }
    // The bits given when a file is created (open, install), in a full distribution.
    let env = TestEnv::new();
    let id = env.up(&["--image", DEBIAN, "--user", "root"]);
    let out = sh(
        &env,
        &id,
        "perl -MFcntl -e 'sysopen(F, \"o\", O_CREAT|O_WRONLY, 04755) or print \"open: $!\\n\"'; \
         install -m 4755 /bin/true i 2>/dev/null; echo install=$?",
    );
    assert!(out.contains("open: Operation not permitted"), "{out}");
    assert!(out.contains("install=1"), "{out}");
    for f in ["o", "i"] {
        if env.path(f).exists() {
            assert_eq!(mode(&env.path(f)) & 0o6000, 0, "{f} is set-ID");
        }
    }
}

#[test]
fn the_default_user_is_the_work_dirs_owner_with_a_name_and_a_home() {
    require_container!("a local sandbox runs as the invoking user");
    let env = TestEnv::new();
    std::os::unix::fs::chown(&env.workdir, Some(1000), Some(1000)).unwrap();
    let out = env.run(&["up", "--format", "json"]);
    assert_ok(&out);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["user"], "1000:1000");
    let id = rec["id"].as_str().unwrap();
    let out = sh(
        &env,
        id,
        "id -u; id -g; whoami; echo \"$HOME\"; (cd ~ && mkdir -p .cache/pip .npm && \
         touch .cache/pip/x && echo home-ok); touch made-here",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..2], ["1000", "1000"], "{out}");
    assert!(!lines[2].is_empty() && lines[2] != "1000", "no name: {out}");
    assert!(lines[3].starts_with('/') && lines[3] != "/", "HOME: {out}");
    assert_eq!(lines[4], "home-ok", "{out}");
    let m = std::fs::metadata(env.path("made-here")).unwrap();
    assert_eq!((m.uid(), m.gid()), (1000, 1000));
    // The bootstrap runs as root (package installs), still under the filter.
    let out = env.run(&[
        "bootstrap",
        id,
        "--",
        "id -u; chmod 4755 /bin/busybox; echo $?",
    ]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "0\n1\n");
}

#[test]
fn argv_arrives_exactly_and_one_word_is_a_shell_line() {
    require_engine!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    let args = [
        "exec", &id, "--", "printf", "%s|\\n", "one two", "it's", "\"q\"", "$HOME", "", "a\\b", "*",
    ];
    let out = env.run(&args);
    assert_ok(&out);
    assert_eq!(
        stdout(&out),
        "one two|\nit's|\n\"q\"|\n$HOME|\n|\na\\b|\n*|\n"
    );
    // One word is a command line for the shell.
    assert_eq!(sh(&env, &id, "printf '%s\\n' \"one two\" | wc -l"), "1\n");
    // A missing program is the command's failure, with a shell's status.
    let out = env.run(&["exec", &id, "--", "no-such-program", "x"]);
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert!(stderr(&out).contains("no-such-program"), "{}", stderr(&out));
}

#[test]
fn variables_with_dots_and_dashes_arrive_from_flags_and_the_image() {
    require_container!("a local sandbox has no image");
    let env = TestEnv::new();
    let img = "h9sandbox-test/dotted-env:latest";
    build_image(
        &env,
        img,
        &format!("FROM {TINY}\nENV spring.profiles.active=from-image\nENV A-B=dash\n"),
    );
    let id = env.up(&["--image", img]);
    let out = env.run(&[
        "exec",
        &id,
        "-e",
        "my.flag=from-cli",
        "-e",
        "X-Y=2",
        "--",
        "env",
    ]);
    assert_ok(&out);
    let seen = stdout(&out);
    for want in [
        "spring.profiles.active=from-image",
        "A-B=dash",
        "my.flag=from-cli",
        "X-Y=2",
    ] {
        assert!(seen.lines().any(|l| l == want), "{want} missing:\n{seen}");
    }
    // The shell line keeps them too (bash passes what it cannot name).
    let seen = sh(&env, &id, "env");
    assert!(seen.contains("spring.profiles.active=from-image"), "{seen}");
}

/// Builds `tag` from `dockerfile` (context: an empty directory) with the engine under test (the
/// image is kept for the next run; building it again is a cache hit).
fn build_image(env: &TestEnv, tag: &str, dockerfile: &str) {
    let dir = env
        .root
        .path()
        .join(format!("ctx-{}", tag.replace(['/', ':'], "_")));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("Dockerfile"), dockerfile).unwrap();
    let out = Command::new(cli())
        .args(["build", "-q", "-t", tag])
        .arg(&dir)
        .output()
        .unwrap();
    assert_ok(&out);
}

#[test]
fn a_from_scratch_image_with_one_static_program_starts_and_runs_it() {
    require_container!("a local sandbox has no image");
    let env = TestEnv::new();
    let ctx = env.root.path().join("scratch-ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(
        ctx.join("hello.c"),
        "#include <stdio.h>\nint main(int c, char **v) { for (int i = 1; i < c; i++) \
         printf(\"[%s]\", v[i]); printf(\"\\n\"); return 3; }\n",
    )
    .unwrap();
    let cc = Command::new("gcc")
        .args(["-static", "-O1", "-o"])
        .arg(ctx.join("hello"))
        .arg(ctx.join("hello.c"))
        .output()
        .expect("gcc (to build a static program) is needed");
    assert_ok(&cc);
    std::fs::write(ctx.join("Dockerfile"), "FROM scratch\nCOPY hello /hello\n").unwrap();
    let img = "h9sandbox-test/scratch-hello:latest";
    let out = Command::new(cli())
        .args(["build", "-q", "-t", img])
        .arg(&ctx)
        .output()
        .unwrap();
    assert_ok(&out);
    let id = env.up(&["--image", img]);
    let out = env.run(&["exec", &id, "--", "/hello", "a b", ""]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout(&out), "[a b][]\n");
    // No shell in the image: a command line cannot run, and says why.
    let out = env.run(&["exec", &id, "--", "echo hi"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(stderr(&out).contains("no shell"), "{}", stderr(&out));
    assert_ok(&env.run(&["down", &id]));
}

#[test]
fn a_caller_killed_during_a_timeout_leaves_nothing_running() {
    require_container!("a local sandbox's commands are the caller's own children");
    let env = TestEnv::new();
    let id = env.up(&[]);
    // The way Python's subprocess.run(timeout=...) ends a child: SIGKILL, no chance to clean up.
    let mut child = env
        .cmd()
        .args(["exec", &id, "--timeout", "3", "--", "sleep 296 & sleep 297"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let ps = env.sandbox_processes(&id);
    assert!(!ps.contains("sleep 29"), "still running 4 s later:\n{ps}");
}

#[test]
fn the_timeout_kills_descendants_that_left_the_tree() {
    require_engine!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    let out = env.run(&[
        "exec",
        &id,
        "--timeout",
        "1",
        "--",
        "setsid sleep 291 & (env -i sleep 292 &); (trap '' TERM HUP; sleep 293) & sleep 294",
    ]);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    // Killed at once through the agent; through the engine's exec, the in-container wrapper's
    // backstop takes the stragglers half a second later.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let ps = env.sandbox_processes(&id);
        let left: Vec<&str> = ["sleep 291", "sleep 292", "sleep 293", "sleep 294"]
            .into_iter()
            // Locally an env-cleared process loses the marker; the sandbox is no boundary.
            // Under gVisor (runsc 20221219) orphans go to PID 1, not to the command's subreaper,
            // so one that also cleared its environment cannot be told from another command's
            // (README, Isolation tiers); it lives until `down`.
            .filter(|s| !((engine() == Engine::Local || gvisor()) && *s == "sleep 292"))
            .filter(|s| ps.contains(s))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left:?} survived the timeout:\n{ps}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_background_child_holding_stdout_does_not_hold_exec() {
    require_engine!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    let t = Instant::now();
    let out = env.run(&["exec", &id, "--", "sleep 288 & echo started"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "started\n");
    // Not a timing assertion of h9sandbox's speed: only that it did not wait for the sleep.
    assert!(t.elapsed() < Duration::from_secs(60));
    assert!(env.sandbox_processes(&id).contains("sleep 288"));
}

#[test]
fn parallel_execs_never_mix_their_output() {
    require_engine!();
    let env = TestEnv::new();
    let id = env.up(&["--pids-limit", "200"]);
    let children: Vec<_> = (0..8)
        .map(|n| {
            env.cmd()
                .args([
                    "exec",
                    &id,
                    "--",
                    &format!(
                        "i=0; while [ $i -lt 2000 ]; do echo worker-{n}-line-$i; i=$((i+1)); done"
                    ),
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (n, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert_ok(&out);
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2000, "worker {n}");
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(*l, format!("worker-{n}-line-{i}"));
        }
    }
}

#[test]
fn detached_commands_are_listed_logged_and_killed() {
    require_container!("background commands are kept by the in-container agent");
    if agent_socket_unreachable() {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    let out = env.run(&[
        "exec",
        &id,
        "--detach",
        "--",
        "echo ready; echo oops >&2; sleep 287",
    ]);
    assert_ok(&out);
    let handle = stdout(&out).trim().to_string();
    assert_eq!(handle.len(), 8, "{handle}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = env.run(&["logs", &id, &handle]);
        assert_ok(&out);
        if stdout(&out) == "ready\n" && stderr(&out) == "oops\n" {
            break;
        }
        assert!(Instant::now() < deadline, "logs: {}", stdout(&out));
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = env.run(&["ps", &id, "--format", "json"]);
    assert_ok(&out);
    let list: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["handle"], handle.as_str());
    assert_eq!(list[0]["running"], true);
    assert!(stdout(&env.run(&["ps", &id])).contains(&handle));
    // `logs --follow` ends when the command's tree is gone.
    let follow = env
        .cmd()
        .args(["logs", &id, &handle, "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert_ok(&env.run(&["kill", &id, &handle]));
    let followed = follow.wait_with_output().unwrap();
    assert_ok(&followed);
    assert_eq!(stdout(&followed), "ready\n");
    let list: Vec<serde_json::Value> =
        serde_json::from_slice(&env.run(&["ps", &id, "--format", "json"]).stdout).unwrap();
    assert_eq!(list[0]["running"], false);
    assert!(!env.sandbox_processes(&id).contains("sleep 287"));
    let out = env.run(&["kill", &id, "00000000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no detached command 00000000"));
}

/// A sandbox running as root on the Debian image (perl, to speak to sockets from inside).
fn debian_root(env: &TestEnv) -> String {
    env.up(&["--image", DEBIAN, "--user", "root"])
}

#[test]
fn a_peer_inside_without_the_token_is_refused() {
    require_container!("no agent without a container");
    if exec_path_is_engine() {
        return;
    }
    let env = TestEnv::new();
    let id = debian_root(&env);
    // From inside, connect to the agent and ask it to run a command as root, with a wrong token
    // and with none (a Start frame first): postcard messages, each behind a 4-byte length (the
    // hello names protocol version 2).
    let perl = r#"
use IO::Socket::UNIX;
sub ask { my ($bytes) = @_;
  my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => "/.h9sandbox/run/agent.sock") or die "connect: $!";
  print $s pack("N", length $bytes) . $bytes; $s->flush;
  my $n = read($s, my $len, 4); return "closed" unless $n;
  read($s, my $body, unpack("N", $len)); return $body; }
print "wrong: ", ask("\x00\x02\x05guess"), "\n";
print "none: ", ask("\x01\x00\x04true\x01/\x00\x00\x00\x00\x00\x00"), "\n";
"#;
    let out = env.run(&["exec", &id, "--", "perl", "-e", perl]);
    assert_ok(&out);
    let said = stdout(&out);
    assert!(said.contains("wrong: \x01\x0bwrong token"), "{said:?}");
    assert!(said.contains("none: \x01\x0eexpected hello"), "{said:?}");
    // And the agent still serves the host.
    assert_eq!(sh(&env, &id, "echo fine"), "fine\n");
}

#[test]
fn a_socket_planted_in_the_run_dir_never_gets_the_hosts_connection() {
    require_container!("no agent without a container");
    if agent_socket_unreachable() {
        return;
    }
    let env = TestEnv::new();
    let id = debian_root(&env);
    // Inside: move the agent's socket aside and listen on its name, logging what arrives; then
    // the same with a symlink to a socket elsewhere.
    let plant = r#"
use IO::Socket::UNIX;
rename "/.h9sandbox/run/agent.sock", "/.h9sandbox/run/real.sock" or die "rename: $!";
my $l = IO::Socket::UNIX->new(Type => SOCK_STREAM, Local => "/.h9sandbox/run/agent.sock", Listen => 5) or die "listen: $!";
chmod 0666, "/.h9sandbox/run/agent.sock";
open(my $log, ">", "/var/tmp/heard") or die; close $log;
if (fork() == 0) { while (my $c = $l->accept) { my $got; $c->read($got, 4096); open(my $f, ">>", "/var/tmp/heard"); print $f "CONNECTION\n"; close $f; } exit 0; }
print "planted\n";
"#;
    let out = env.run(&["exec", &id, "--detach", "--", "perl", "-e", plant]);
    assert_ok(&out);
    std::thread::sleep(Duration::from_millis(500));
    // The host notices another socket and goes through the engine's exec instead, saying so.
    let out = env.run(&["exec", &id, "--", "cat /var/tmp/heard; echo via-engine"]);
    assert_ok(&out);
    assert_eq!(
        stdout(&out),
        "via-engine\n",
        "the planted socket heard the host"
    );
    assert!(
        stderr(&out).contains("was replaced inside the sandbox"),
        "{}",
        stderr(&out)
    );
    // A symlink in its place is never followed.
    let out = env.run(&[
        "exec",
        &id,
        "--",
        "rm /.h9sandbox/run/agent.sock && ln -s /var/run/docker.sock /.h9sandbox/run/agent.sock && echo linked",
    ]);
    assert_eq!(stdout(&out), "linked\n", "{}", stderr(&out));
    let out = env.run(&["exec", &id, "--", "echo", "still", "fine"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "still fine\n");
    assert!(
        stderr(&out).contains("was replaced inside the sandbox"),
        "{}",
        stderr(&out)
    );
}
