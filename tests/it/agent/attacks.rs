//! Attacks on the agent from inside the sandbox: set-ID files, tracing it, peers without the token, planted sockets, FIFOs and tokens, a swapped binary.

use super::*;

/// The mode bits of `path` on the host.
pub(super) fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// A sandbox running as root on the Debian image (perl, to speak to sockets from inside).
pub(super) fn debian_root(env: &TestEnv) -> String {
    env.up(&["--image", DEBIAN, "--user", "root"])
}

/// Runs `cmd` to its end or kills it after `limit`; the output, or `None` when it had to be
/// killed (it hung).
pub(super) fn within(mut cmd: Command, limit: Duration) -> Option<std::process::Output> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(child.wait_with_output().unwrap())
}

#[test]
fn no_process_of_the_sandbox_can_make_a_set_id_file() {
    require_container!("a local sandbox runs on the host, without the filter");
    if workdir_copied("it checks on the host what the sandbox left in the work dir") {
        return;
    }
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
fn no_command_can_trace_or_read_h9sandbox_in_the_container() {
    require_container!("a local sandbox has no agent");
    let env = TestEnv::new();
    // Root in the sandbox has PID 1's and the supervisors' user and capabilities: only their
    // being not dumpable keeps it from ptrace and from their memory and environment in /proc.
    if gvisor() {
        announce("gVisor's own /proc lets root read a process's environ and maps whatever its dumpable flag (see docs/security.md, Isolation tiers)");
        return;
    }
    let id = env.up(&["--user", "root"]);
    let out = sh(
        &env,
        &id,
        "for p in 1 $PPID; do cat /proc/$p/environ >/dev/null 2>&1; echo environ=$?; \
         cat /proc/$p/maps >/dev/null 2>&1; echo maps=$?; done; \
         sleep 5 & cat /proc/$!/environ >/dev/null; echo child=$?; kill $!",
    );
    assert_eq!(
        out, "environ=1\nmaps=1\nenviron=1\nmaps=1\nchild=0\n",
        "the agent's processes can be read from inside"
    );
}

#[test]
fn a_peer_inside_without_the_token_is_refused() {
    require_container!("no agent without a container");
    if workdir_copied("it attacks the agent's socket in the run directory, which a copied sandbox does not have (remote:: attacks its channel)") {
        return;
    }
    if exec_path_is_engine() {
        return;
    }
    let env = TestEnv::new();
    let id = debian_root(&env);
    // From inside, connect to the agent and ask it to run a command as root, with a wrong token
    // and with none (a Start frame first): postcard messages, each behind a 4-byte length (the
    // hello names protocol version 4).
    let perl = r#"
use IO::Socket::UNIX;
sub ask { my ($bytes) = @_;
  my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => "/.h9sandbox/run/agent.sock") or die "connect: $!";
  print $s pack("N", length $bytes) . $bytes; $s->flush;
  my $n = read($s, my $len, 4); return "closed" unless $n;
  read($s, my $body, unpack("N", $len)); return $body; }
print "wrong: ", ask("\x00\x04\x05guess"), "\n";
print "none: ", ask("\x01\x00\x04true\x01/\x00\x00\x00\x00\x00\x00\x00"), "\n";
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
    if workdir_copied(
        "it plants a socket in the run directory, which a copied sandbox does not have",
    ) {
        return;
    }
    if agent_socket_unreachable() {
        return;
    }
    let env = TestEnv::new();
    let id = debian_root(&env);
    // Inside: move the agent's socket aside and listen on its name, logging what arrives; then
    // the same with a symlink to a socket elsewhere.
    let plant = r#"
use IO::Socket::UNIX;
open(my $log, ">", "/var/tmp/heard") or die; close $log;
rename "/.h9sandbox/run/agent.sock", "/.h9sandbox/run/real.sock" or die "rename: $!";
my $l = IO::Socket::UNIX->new(Type => SOCK_STREAM, Local => "/.h9sandbox/run/agent.sock.new", Listen => 5) or die "listen: $!";
chmod 0666, "/.h9sandbox/run/agent.sock.new";
rename "/.h9sandbox/run/agent.sock.new", "/.h9sandbox/run/agent.sock" or die "rename: $!";
if (fork() == 0) { while (my $c = $l->accept) { my $got; $c->read($got, 4096); open(my $f, ">>", "/var/tmp/heard"); print $f "CONNECTION\n"; close $f; } exit 0; }
print "planted\n";
"#;
    let out = env.run(&["exec", &id, "--detach", "--", "perl", "-e", plant]);
    assert_ok(&out);
    // Planted once the listening socket has the agent's name (the run dir is this machine's):
    // the log exists by then, and the socket listens.
    let full = env.entry(&id)["id"].as_str().unwrap().to_string();
    let run_dir = env.state_dir.join("run").join(&full);
    wait_until(Duration::from_secs(30), "the planted socket", || {
        run_dir.join("real.sock").exists() && run_dir.join("agent.sock").exists()
    });
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

#[test]
fn fifos_planted_for_the_agent_never_hang_it() {
    require_container!("background commands are kept by the in-container agent");
    if agent_socket_unreachable() {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&["--user", "root"]);
    let out = env.run(&["exec", &id, "--detach", "--", "sleep 286"]);
    assert_ok(&out);
    let handle = stdout(&out).trim().to_string();
    // Root in the sandbox swaps the command's log for a FIFO (no writer, no reader): opening it
    // would block the agent's only thread, and every later command with it.
    sh(
        &env,
        &id,
        &format!(
            "mkdir -p -m 700 /var/tmp/.h9sandbox-logs && cd /var/tmp/.h9sandbox-logs && rm -f {handle}.out && mkfifo {handle}.out && echo ok"
        ),
    );
    let mut logs = env.cmd();
    logs.args(["logs", &id, &handle]);
    let out = within(logs, Duration::from_secs(20)).expect("`logs` hung on a planted FIFO");
    assert!(!out.status.success(), "a FIFO passed for a log");
    let mut exec = env.cmd();
    exec.args(["exec", &id, "--", "echo alive"]);
    let out = within(exec, Duration::from_secs(20)).expect("the agent hung after `logs`");
    assert_eq!(stdout(&out), "alive\n", "{}", stderr(&out));
    // The account files the agent reads for every command it starts.
    sh(
        &env,
        &id,
        "rm -f /etc/passwd /etc/group && mkfifo /etc/passwd /etc/group && echo ok",
    );
    let mut exec = env.cmd();
    // (argv mode: a shell would itself wait on the FIFO for its user's entry)
    exec.args(["exec", &id, "--", "/bin/busybox", "echo", "still alive"]);
    let out = within(exec, Duration::from_secs(20)).expect("the agent hung on /etc/passwd");
    assert_eq!(stdout(&out), "still alive\n", "{}", stderr(&out));
}

#[test]
fn a_user_inside_cannot_make_the_agent_run_a_command_as_root() {
    require_container!("no agent without a container");
    if workdir_copied("it reaches the agent through the run directory's socket, which a copied sandbox does not have") {
        return;
    }
    if exec_path_is_engine() {
        return;
    }
    let env = TestEnv::new();
    std::os::unix::fs::chown(&env.workdir, Some(1000), Some(1000)).unwrap();
    let id = env.up(&["--image", DEBIAN]);
    // The run dir is the invoker's, 0700: a sandbox user of another uid cannot even reach the
    // socket. The default user is the invoker's own uid, which can: open it up as for that one.
    let full = env.entry(&id)["id"].as_str().unwrap().to_string();
    let run_dir = env.state_dir.join("run").join(&full);
    let out = env.run(&[
        "exec",
        &id,
        "--",
        "test -x /.h9sandbox/run || echo unreachable",
    ]);
    assert_eq!(stdout(&out), "unreachable\n", "{}", stderr(&out));
    std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    // As the sandbox's user (uid 1000): look for the token wherever it could be, then ask the
    // agent to run `touch /var/tmp/by-root` as root (0:0), with a guessed token, with an empty
    // one, and with none (the Start first).
    let perl = r#"
use IO::Socket::UNIX;
$SIG{PIPE} = "IGNORE";
for my $f ("/.h9sandbox/run/token", "/proc/1/environ", "/proc/1/cmdline", "/proc/1/mem") {
  if (open(my $h, "<", $f)) { my $n = read($h, my $b, 4096); print "read $f\n" if $n && $b =~ /[0-9a-f]{64}/; }
}
my $start = "\x01\x00\x15touch /var/tmp/by-root\x01/\x00\x00\x00\x00\x00\x00\x00";
sub ask { my @frames = @_;
  my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => "/.h9sandbox/run/agent.sock") or die "connect: $!";
  print $s pack("N", length $_) . $_ for @frames; $s->flush;
  my $all = ""; while (read($s, my $len, 4) == 4) { read($s, my $body, unpack("N", $len)); $all .= "[$body]"; }
  return $all; }
print "guess: ", ask("\x00\x04\x40" . ("0" x 64), $start), "\n";
print "empty: ", ask("\x00\x04\x00", $start), "\n";
print "none: ", ask($start), "\n";
print "uid: $<\n";
"#;
    let out = env.run(&["exec", &id, "--", "perl", "-e", perl]);
    assert_ok(&out);
    let said = stdout(&out);
    assert!(!said.contains("read "), "the token was found: {said:?}");
    assert!(said.contains("guess: [\x01\x0bwrong token]\n"), "{said:?}");
    assert!(said.contains("empty: [\x01\x0bwrong token]\n"), "{said:?}");
    assert!(
        said.contains("none: [\x01\x0eexpected hello]\n"),
        "{said:?}"
    );
    assert!(said.contains("uid: 1000\n"), "{said:?}");
    std::thread::sleep(Duration::from_millis(300));
    let out = env.run(&[
        "exec",
        &id,
        "-u",
        "root",
        "--",
        "test ! -e /var/tmp/by-root && echo none",
    ]);
    assert_eq!(
        stdout(&out),
        "none\n",
        "a command ran as root: {}",
        stderr(&out)
    );
    // The agent's own binary, run by the user, gives no way up either.
    let out = env.run(&[
        "exec",
        &id,
        "--",
        "/.h9sandbox/h9sandbox agent init --user 0:0; id -u",
    ]);
    assert_eq!(
        stdout(&out).lines().last(),
        Some("1000"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn root_in_the_sandbox_cannot_swap_the_binary_the_engines_exec_starts() {
    require_container!("a local sandbox has no in-container binary");
    if workdir_copied("in copy mode /.h9sandbox is in the container's own file system, not a read-only mount (README, Remote sandboxes)") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&["--user", "root"]);
    // Renaming the directory of the mounts (a mount point: EBUSY) or writing into it (read-only)
    // would let the next `docker exec` start a program of the sandbox's, without the set-ID
    // filter.
    let out = sh(
        &env,
        &id,
        "mv /.h9sandbox /.h9x 2>/dev/null; echo mv=$?; \
         cp /bin/busybox /.h9sandbox/h9sandbox 2>/dev/null; echo cp=$?; \
         mkdir /.h9sandbox/x 2>/dev/null; echo mkdir=$?",
    );
    assert_eq!(out, "mv=1\ncp=1\nmkdir=1\n");
    let fallback = env
        .cmd()
        .env("H9SANDBOX_EXEC_AGENT", "false")
        .args([
            "exec",
            &id,
            "--",
            "cp /bin/busybox s; chmod 4755 s; echo $?",
        ])
        .output()
        .unwrap();
    assert_eq!(stdout(&fallback), "1\n", "{}", stderr(&fallback));
    assert_eq!(mode(&env.path("s")) & 0o6000, 0);
}

#[test]
fn a_token_planted_for_a_restart_outside_h9sandbox_is_never_served() {
    require_container!("no agent without a container");
    if agent_socket_unreachable()
        || workdir_copied("a shipped agent has no run directory: its key lives in its PID 1 only")
    {
        return;
    }
    let env = TestEnv::new();
    std::os::unix::fs::chown(&env.workdir, Some(1000), Some(1000)).unwrap();
    let id = env.up(&["--image", DEBIAN]);
    let full = env.entry(&id)["id"].as_str().unwrap().to_string();
    let run_dir = env.state_dir.join("run").join(&full);
    // Root in the sandbox (the host user's uid could, with user = owner) leaves a token of its
    // own where the host hands its over; then the container is restarted behind h9sandbox's
    // back (`docker restart`, a restart policy), which hands over nothing.
    let planted = "0".repeat(64);
    assert_ok(&env.run(&[
        "exec",
        &id,
        "-u",
        "root",
        "--",
        &format!("printf {planted} > /.h9sandbox/run/token"),
    ]));
    let c = env.container(&id);
    let out = Command::new(cli())
        .args(["restart", "-t", "1", &c])
        .output()
        .unwrap();
    assert_ok(&out);
    std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    // As the sandbox's user (uid 1000), through whatever path still works: ask the agent with
    // the planted token to run `touch /var/tmp/by-root` as root.
    let perl = format!(
        r#"
use IO::Socket::UNIX;
$SIG{{PIPE}} = "IGNORE";
my $start = "\x01\x00\x15touch /var/tmp/by-root\x01/\x00\x00\x00\x00\x00\x00\x00";
my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => "/.h9sandbox/run/agent.sock") or do {{ print "no agent\n"; exit 0 }};
print $s pack("N", length $_) . $_ for ("\x00\x03\x40{planted}", $start); $s->flush;
my $all = ""; while (read($s, my $len, 4) == 4) {{ read($s, my $body, unpack("N", $len)); $all .= "[$body]"; }}
print "said: $all\n";
"#
    );
    let out = env.run(&["exec", &id, "--", "perl", "-e", &perl]);
    assert_ok(&out);
    // A welcome (`[\0\x03]`, protocol 3) would mean the agent took the planted token and
    // would run what that peer asks, as root.
    assert!(
        !stdout(&out).starts_with("said: [\0\x03]"),
        "the agent welcomed a peer with the planted token: {:?}",
        stdout(&out)
    );
    std::thread::sleep(Duration::from_millis(300));
    let out = env.run(&[
        "exec",
        &id,
        "-u",
        "root",
        "--",
        "test ! -e /var/tmp/by-root && echo none",
    ]);
    assert_eq!(
        stdout(&out),
        "none\n",
        "the agent served the planted token: a command ran as root"
    );
}
