//! Integration tests of what people and agents do with a sandbox besides one-shot commands
//! (issue 24): a terminal (`exec -t`, `shell`), driven as a person would through `script(1)` and
//! tmux; ports (`port-forward` through the agent, `up --publish` through the engine), reached by
//! a real client; and live stats (`stats`, `ls --stats`), checked against what the sandbox does.
//! Every test skips itself under the local engine (no agent, no container).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

mod mcp_forward;

/// Under gVisor a sandbox with a mounted work dir has no agent the host can reach or
/// authenticate: announced, the test is skipped ([`gvisor_refuses_them_for_a_mounted_work_dir`]).
fn mounted_under_gvisor() -> bool {
    if gvisor() {
        announce("under gVisor a mounted sandbox's agent cannot be reached or authenticated");
        return true;
    }
    false
}

/// `GET /` of the HTTP server at `addr`, the whole answer (busybox httpd closes after it).
fn http_get(addr: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    s.write_all(b"GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// `port-forward ID ARGS… --format json` started with its stderr piped: the process and the
/// JSON line it printed once it listens (the process is killed when that line is no JSON).
fn port_forward(
    env: &TestEnv,
    id: &str,
    args: &[&str],
) -> (std::process::Child, serde_json::Value) {
    let mut fwd = env
        .cmd()
        .args(["port-forward", id])
        .args(args)
        .args(["--format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(fwd.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let said: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| {
        let _ = fwd.kill();
        panic!("port-forward printed {line:?}: {e}")
    });
    (fwd, said)
}

/// Starts busybox's httpd in sandbox `id` on `listen` (`127.0.0.1:8000`, `8000`), serving
/// `/var/tmp/www` (the scratch dir: so in copy mode too), with `body` (one line, no quote) as its
/// index.html; waits until it answers inside.
fn serve(env: &TestEnv, id: &str, listen: &str, body: &str) {
    let line = body.trim_end_matches('\n');
    let out = env.run(&[
        "exec",
        id,
        "--",
        &format!("mkdir -p /var/tmp/www && echo '{line}' > /var/tmp/www/index.html"),
    ]);
    assert_ok(&out);
    let out = env.run(&[
        "exec",
        "-d",
        id,
        "--",
        &format!("httpd -f -p {listen} -h /var/tmp/www"),
    ]);
    assert_ok(&out);
    let port = listen.rsplit(':').next().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = env.run(&[
            "exec",
            id,
            "--",
            &format!("wget -q -O - http://127.0.0.1:{port}/index.html"),
        ]);
        if out.status.success() {
            assert_eq!(stdout(&out), body);
            return;
        }
        assert!(Instant::now() < deadline, "httpd never answered inside");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn port_forward_carries_connections_on_a_sandbox_without_network_and_ends_with_down() {
    require_container!("port forwarding needs the in-container agent");
    if mounted_under_gvisor() {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&["--network", "none"]);
    serve(&env, &id, "127.0.0.1:8000", "hello through the agent\n");

    // One forward to the server, one to a port nothing listens on; free local ports.
    let (mut fwd, said) = port_forward(&env, &id, &[":8000", ":8001"]);
    assert_eq!(said["id"], id.as_str());
    let forwards = said["forwards"].as_array().unwrap();
    assert_eq!(forwards.len(), 2, "{said}");
    let addr = forwards[0]["address"].as_str().unwrap().to_string();
    let closed = forwards[1]["address"].as_str().unwrap().to_string();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    assert_eq!(forwards[0]["port"], 8000);

    // Many connections at once, each answered in full.
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let a = addr.clone();
            std::thread::spawn(move || http_get(&a))
        })
        .collect();
    for h in handles {
        let got = h.join().unwrap().expect("a forwarded connection failed");
        assert!(got.starts_with("HTTP/1."), "{got}");
        assert!(got.ends_with("hello through the agent\n"), "{got}");
    }

    // Nothing listens on 8001 inside: the client's connection is reset (or closed), at once.
    let t = Instant::now();
    let mut s = TcpStream::connect(&closed).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        Ok(n) => panic!("a closed port answered {:?}", &buf[..n]),
    }
    assert!(t.elapsed() < Duration::from_secs(15), "a closed port hung");

    // ls lists the forwards, with the process that holds them.
    let e = env.entry(&id);
    let listed = e["forwards"].as_array().cloned().unwrap_or_default();
    assert_eq!(listed.len(), 2, "{e}");
    assert_eq!(listed[0]["address"], addr.as_str());
    assert_eq!(listed[0]["kind"], "port-forward");
    assert_eq!(listed[0]["pid"], fwd.id());
    let table = stdout(&env.run(&["ls"]));
    assert!(
        table.contains("PORTS") && table.contains(&format!("{addr}=>8000")),
        "{table}"
    );

    // down ends the forward: it exits 0, saying why, and stops listening.
    assert_ok(&env.run(&["down", &id]));
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = fwd.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = fwd.kill();
            panic!("port-forward outlived its sandbox's down");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    fwd.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{status:?}: {err}");
    assert!(TcpStream::connect(&addr).is_err(), "still listening");
    assert!(
        !env.state_dir.join("forwards").exists()
            || std::fs::read_dir(env.state_dir.join("forwards"))
                .unwrap()
                .next()
                .is_none(),
        "a registration was left behind"
    );
}

#[test]
fn port_forward_refuses_a_local_port_in_use_in_one_line() {
    require_container!("port forwarding needs the in-container agent");
    if mounted_under_gvisor() {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&["--network", "none"]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let out = env
        .cmd()
        .args([
            "port-forward",
            &id,
            &format!("{port}:8000"),
            "--timeout",
            "5",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("cannot listen on 127.0.0.1:{port}")) && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn publish_binds_loopback_by_default_and_is_recorded() {
    require_container!("publishing is the engine's");
    if mounted_under_gvisor() {
        return;
    }
    let env = TestEnv::new();
    // Refused where there is no network to publish on, naming port-forward instead.
    let out = env.run(&["up", "--network", "none", "--publish", "8000"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--publish needs network bridge")
            && stderr(&out).contains("port-forward"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["up", "--network", "bridge", "--publish", "1:2:3:4"]);
    assert!(!out.status.success());
    assert!(env.ls().is_empty());

    let id = env.up(&["--network", "bridge", "--publish", "8000"]);
    let e = env.entry(&id);
    let published = e["published"].as_array().cloned().unwrap_or_default();
    assert_eq!(published.len(), 1, "{e}");
    assert_eq!(published[0]["port"], 8000);
    let addr = published[0]["address"].as_str().unwrap().to_string();
    let host_port: u16 = addr.strip_prefix("127.0.0.1:").unwrap().parse().unwrap();
    assert!(host_port > 0);
    // The engine holds the binding as asked: loopback only, the port it picked.
    let bindings: serde_json::Value = serde_json::from_str(&inspect(
        &env.container(&id),
        "{{json .HostConfig.PortBindings}}",
    ))
    .unwrap();
    assert_eq!(bindings["8000/tcp"][0]["HostIp"], "127.0.0.1", "{bindings}");
    let ports: serde_json::Value = serde_json::from_str(&inspect(
        &env.container(&id),
        "{{json .NetworkSettings.Ports}}",
    ))
    .unwrap();
    assert_eq!(
        ports["8000/tcp"][0]["HostPort"],
        host_port.to_string(),
        "{ports}"
    );
    // A client on this host reaches the server inside, on every interface of the sandbox.
    serve(&env, &id, "0.0.0.0:8000", "published\n");
    let got = http_get(&addr).unwrap();
    assert!(got.ends_with("published\n"), "{got}");
    let table = stdout(&env.run(&["ls"]));
    assert!(table.contains(&format!("{addr}->8000")), "{table}");
    // --reuse tells a sandbox that publishes other ports apart.
    let named = env.up(&["--name", "pub", "--network", "bridge", "--publish", "8001"]);
    let out = env.run(&["up", "--name", "pub", "--network", "bridge", "--reuse"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("published ports 8001, not none"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&[
        "up",
        "--name",
        "pub",
        "--network",
        "bridge",
        "--publish",
        "8001",
        "--reuse",
    ]);
    assert_ok(&out);
    assert_eq!(stdout(&out).trim(), named);
    // A host port that is taken: one line naming the fix, and nothing left of the attempt.
    let before = env.ls().len();
    let out = env.run(&[
        "up",
        "--network",
        "bridge",
        "--publish",
        &format!("127.0.0.1:{host_port}:8000"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a host port --publish asked for is taken"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.ls().len(), before);
}

/// Runs `script` (a bash script, with `$H9` the binary and `$ID` the sandbox) on a pseudo-terminal
/// of `script(1)`, its input `input`; returns what the terminal showed and the exit status.
fn on_a_terminal(env: &TestEnv, id: &str, script: &str, input: &str) -> (String, Option<i32>) {
    let mut child = env
        .program("script")
        .args(["-qefc", script, "/dev/null"])
        .env("H9", assert_cmd::cargo::cargo_bin("h9sandbox"))
        .env("ID", id)
        .env("TERM", "xterm")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    // Typed slowly, as a person would, once the command had time to start.
    let typer = std::thread::spawn(move || {
        for chunk in input.split_inclusive('\n') {
            std::thread::sleep(Duration::from_millis(1500));
            if stdin.write_all(chunk.as_bytes()).is_err() {
                return;
            }
        }
        std::thread::sleep(Duration::from_secs(60));
    });
    let out = child.wait_with_output().unwrap();
    drop(typer);
    (
        String::from_utf8_lossy(&out.stdout).replace('\r', ""),
        out.status.code(),
    )
}

#[test]
fn exec_t_gives_the_command_a_terminal_of_our_size_and_restores_ours() {
    require_container!("a terminal needs the in-container agent");
    if mounted_under_gvisor() {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    // Without a terminal on our side, -t is refused in one line (as docker's is).
    let out = env.run(&["exec", "-t", &id, "--", "tty"]);
    // h9sandbox's own failure in exec is 125, as docker's.
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("terminal"), "{}", stderr(&out));
    // --force-tty gives one anyway, of 80x24.
    let out = env.run(&["exec", "-t", "--force-tty", &id, "--", "tty; stty size"]);
    assert_ok(&out);
    let text = stdout(&out).replace('\r', "");
    assert!(text.starts_with("/dev/pts/"), "{text}");
    assert!(text.contains("24 80"), "{text}");

    // On script's terminal, of 33 rows and 101 columns: the command sees a pts of that size,
    // its exit status comes back, and our terminal's mode is the same afterwards.
    let (screen, code) = on_a_terminal(
        &env,
        &id,
        r#"stty rows 33 cols 101; before=$(stty -g)
           "$H9" exec -it "$ID" -- 'tty; stty size; read -r line; echo "got [$line]"; exit 7'
           rc=$?; after=$(stty -g)
           [ "$before" = "$after" ] && echo mode-restored; echo "rc=$rc""#,
        "typed words\n",
    );
    assert!(screen.contains("/dev/pts/"), "{screen}");
    assert!(screen.contains("33 101"), "{screen}");
    assert!(screen.contains("got [typed words]"), "{screen}");
    assert!(screen.contains("mode-restored"), "{screen}");
    assert!(screen.contains("rc=7"), "{screen}");
    assert_eq!(code, Some(0), "{screen}");

    // Ctrl-C reaches the command as the terminal delivers it: a sleep ends with 130, and the
    // session, not h9sandbox, decides (exec -t waits for it).
    let (screen, _) = on_a_terminal(
        &env,
        &id,
        r#""$H9" exec -it "$ID" -- 'sleep 30'; echo "rc=$?""#,
        "\x03",
    );
    assert!(screen.contains("rc=130"), "{screen}");
}

/// A tmux server of its own (socket in the test's root), for a session run as a person would.
struct Tmux<'a> {
    env: &'a TestEnv,
    socket: std::path::PathBuf,
}

impl Tmux<'_> {
    fn cmd(&self, args: &[&str]) -> String {
        let out = self
            .env
            .program("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env("TERM", "xterm")
            .env("H9", assert_cmd::cargo::cargo_bin("h9sandbox"))
            .output()
            .unwrap();
        assert_ok(&out);
        stdout(&out)
    }

    fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "t"])
    }

    /// Waits until the screen shows `what`; panics with the screen otherwise.
    fn wait_for(&self, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if s.contains(what) {
                return s;
            }
            assert!(Instant::now() < deadline, "never showed {what:?}:\n{s}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let mut a = vec!["send-keys", "-t", "t"];
        a.extend_from_slice(keys);
        self.cmd(&a);
    }
}

impl Drop for Tmux<'_> {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

#[test]
fn shell_under_tmux_follows_resizes_and_delivers_ctrl_c() {
    require_container!("a terminal needs the in-container agent");
    if mounted_under_gvisor() {
        return;
    }
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but tmux is not installed (.ci/run installs it)"
        );
        announce("tmux is not installed; set CI=1 to make this fatal");
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    let tmux = Tmux {
        env: &env,
        socket: env.root.path().join("tmux.sock"),
    };
    tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "100",
        "-y",
        "30",
        &format!("\"$H9\" shell {id}; echo shell-ended=$?; sleep 60"),
    ]);
    tmux.keys(&["echo ready-$((6*7))", "Enter"]);
    tmux.wait_for("ready-42");
    tmux.keys(&["clear; tty; pwd; stty size", "Enter"]);
    let s = tmux.wait_for("30 100");
    assert!(s.contains("/dev/pts/"), "{s}");
    assert!(s.contains(env.workdir.to_str().unwrap()), "{s}");
    // A resize reaches the sandbox's terminal (SIGWINCH, then the new size).
    tmux.cmd(&["resize-window", "-t", "t", "-x", "120", "-y", "40"]);
    std::thread::sleep(Duration::from_millis(500));
    tmux.keys(&["clear; stty size", "Enter"]);
    tmux.wait_for("40 120");
    // Ctrl-C ends a sleep with 130, the shell lives on.
    tmux.keys(&["clear; sleep 30", "Enter"]);
    std::thread::sleep(Duration::from_millis(1000));
    tmux.keys(&["C-c"]);
    tmux.keys(&["echo rc=$?", "Enter"]);
    tmux.wait_for("rc=130");
    // Ctrl-\ ends one with SIGQUIT (131); Ctrl-Z stops one, as the shell's job control shows.
    tmux.keys(&["clear; sleep 30", "Enter"]);
    std::thread::sleep(Duration::from_millis(1000));
    tmux.keys(&["C-\\"]);
    tmux.keys(&["echo rc=$?", "Enter"]);
    tmux.wait_for("rc=131");
    tmux.keys(&["clear; sleep 31", "Enter"]);
    std::thread::sleep(Duration::from_millis(1000));
    tmux.keys(&["C-z"]);
    let s = tmux.wait_for("Stopped");
    assert!(s.contains("sleep 31"), "{s}");
    tmux.keys(&["clear; jobs; kill %1; wait; echo after-stop=$?", "Enter"]);
    tmux.wait_for("after-stop=");
    // top draws its screen and quits on q.
    tmux.keys(&["clear; top", "Enter"]);
    tmux.wait_for("PID");
    tmux.keys(&["q"]);
    tmux.keys(&["clear; echo back-from-top", "Enter"]);
    tmux.wait_for("back-from-top");
    // vi draws and quits.
    tmux.keys(&["clear; vi /tmp/x", "Enter"]);
    tmux.wait_for("/tmp/x");
    tmux.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(700));
    tmux.keys(&[":q!", "Enter"]);
    tmux.keys(&["clear; echo back-from-vi", "Enter"]);
    tmux.wait_for("back-from-vi");
    // The shell's exit status is the session's.
    tmux.keys(&["exit 3", "Enter"]);
    tmux.wait_for("shell-ended=3");
}

#[test]
fn stats_reports_sane_numbers_in_json_and_marks_a_sandbox_near_its_limit() {
    require_container!("stats come from the in-container agent");
    if mounted_under_gvisor() {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&["--memory", "256m", "--pids-limit", "40", "--cpus", "0.5"]);
    assert_ok(&env.run(&[
        "exec",
        &id,
        "--",
        "head -c 3000000 /dev/zero > /var/tmp/blob",
    ]));
    assert_ok(&env.run(&["exec", "-d", &id, "--", "while :; do :; done"]));
    std::thread::sleep(Duration::from_secs(1));
    let out = env.run(&["stats", &id, "--no-stream", "--format", "json"]);
    assert_ok(&out);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &rows[0];
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(r["id"], id.as_str());
    assert!(r["name"].is_string());
    let cpu = r["cpu_percent"].as_f64().unwrap_or_else(|| panic!("{r}"));
    // A busy loop under a 0.5-core limit: some of it (how much depends on who else uses this
    // machine's cores), never much more than all of it.
    assert!(cpu > 0.5 && cpu <= 130.0, "cpu {cpu}: {r}");
    assert_eq!(r["cpus"], 0.5);
    let cpu_seconds = r["cpu_seconds"].as_f64().unwrap();
    assert!(cpu_seconds > 0.0, "{r}");
    assert_eq!(r["memory"]["limit"], 256u64 << 20, "{r}");
    let used = r["memory"]["used"].as_u64().unwrap();
    assert!(used > 0 && used < 256 << 20, "{r}");
    assert!(r["memory"]["percent"].as_f64().unwrap() < 100.0, "{r}");
    assert!(r["pids"]["used"].as_u64().unwrap() >= 2, "{r}");
    assert_eq!(r["pids"]["limit"], 40, "{r}");
    assert!(
        r["disk"]["scratch_bytes"].as_u64().unwrap() >= 3_000_000,
        "{r}"
    );
    assert!(r["network"].is_object(), "{r}");
    assert_eq!(r["near_limit"], serde_json::json!([]), "{r}");
    // The CPU time goes on growing while the loop runs.
    std::thread::sleep(Duration::from_millis(500));
    let out = env.run(&["stats", &id, "--no-stream", "--format", "json"]);
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        again[0]["cpu_seconds"].as_f64().unwrap() > cpu_seconds,
        "{again}"
    );
    // The table names the columns docker stats has.
    let table = stdout(&env.run(&["stats", &id, "--no-stream"]));
    assert!(
        table.contains("MEM USAGE / LIMIT") && table.contains("256.0MiB"),
        "{table}"
    );
    // ls --stats: the same object under `stats`.
    let out = env.run(&["ls", "--stats", "--format", "json"]);
    assert_ok(&out);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &listed[0]["stats"];
    assert_eq!(s["memory"]["limit"], 256u64 << 20, "{listed}");
    assert!(s["cpu_percent"].is_number(), "{listed}");

    // Near the process limit: marked in stats and ls, before fork fails.
    assert_ok(&env.run(&[
        "exec",
        "-d",
        &id,
        "--",
        "for i in $(seq 34); do sleep 120 & done; wait",
    ]));
    std::thread::sleep(Duration::from_secs(2));
    let out = env.run(&["stats", &id, "--no-stream", "--format", "json"]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["near_limit"], serde_json::json!(["pids"]), "{rows}");
    let table = stdout(&env.run(&["ls", "--stats"]));
    assert!(table.contains("NEAR LIMIT: processes"), "{table}");
    // A stopped sandbox cannot be sampled: said, exit 1.
    assert_ok(&env.run(&["stop", &id]));
    let out = env.run(&["stats", &id, "--no-stream", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        rows[0]["error"].as_str().unwrap().contains("not Running"),
        "{rows}"
    );
}

#[test]
fn terminals_forwards_stats_and_publish_work_over_the_remote_channel() {
    require_container!("copy mode needs a container engine");
    if engine() != Engine::Docker {
        return announce("copy mode is Docker's");
    }
    let env = TestEnv::new();
    std::fs::write(env.path("big"), vec![7u8; 2_000_000]).unwrap();
    // Bridge: the channel's own port is published, and ours next to it.
    let id = env.up(&[
        "--workdir-mode",
        "copy",
        "--network",
        "bridge",
        "--publish",
        "8000",
    ]);
    let e = env.entry(&id);
    let published = e["published"].as_array().cloned().unwrap_or_default();
    assert_eq!(published.len(), 1, "only the port asked for is listed: {e}");
    assert_eq!(published[0]["port"], 8000);
    // busybox's httpd answers no request under gVisor's network stack (wget inside gets
    // EAGAIN): the server round trips are Docker's and Podman's here.
    let with_server = !gvisor();
    if with_server {
        serve(&env, &id, "0.0.0.0:8000", "over the channel\n");
        let got = http_get(published[0]["address"].as_str().unwrap()).unwrap();
        assert!(got.ends_with("over the channel\n"), "{got}");
    } else {
        announce("busybox httpd does not answer under gVisor: no server round trip");
    }
    // A terminal over the channel.
    let out = env.run(&[
        "exec",
        "-t",
        "--force-tty",
        &id,
        "--",
        "tty; stty size; exit 5",
    ]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let text = stdout(&out).replace('\r', "");
    assert!(
        text.starts_with("/dev/pts/") && text.contains("24 80"),
        "{text}"
    );
    // A forward over the channel.
    let (mut fwd, said) = port_forward(&env, &id, &[":8000", "--timeout", "60"]);
    let addr = said["forwards"][0]["address"].as_str().unwrap().to_string();
    let got = with_server.then(|| http_get(&addr));
    let _ = fwd.kill();
    let _ = fwd.wait();
    if let Some(got) = got {
        assert!(got.unwrap().ends_with("over the channel\n"));
    }
    // Stats tell the work dir's copy too.
    let out = env.run(&["stats", &id, "--no-stream", "--format", "json"]);
    assert_ok(&out);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let disk = &rows[0]["disk"];
    assert!(
        disk["workdir_bytes"].as_u64().unwrap() >= 2_000_000,
        "{rows}"
    );
    // gVisor's own cgroups are not the sandbox's: its memory is not told there.
    if !gvisor() {
        assert!(rows[0]["memory"]["used"].as_u64().unwrap() > 0, "{rows}");
    }

    // Network none: the channel through the engine's exec stream carries them as well.
    let quiet = env.up(&["--workdir-mode", "copy", "--network", "none"]);
    let out = env.run(&["stats", &quiet, "--no-stream", "--format", "json"]);
    assert_ok(&out);
    let out = env.run(&["exec", "-t", "--force-tty", &quiet, "--", "tty"]);
    assert_ok(&out);
    assert!(stdout(&out).starts_with("/dev/pts/"), "{}", stdout(&out));
}

#[test]
fn gvisor_refuses_them_for_a_mounted_work_dir() {
    require_container!("gVisor needs a container engine");
    if !gvisor() {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    for args in [
        vec!["exec", "-t", "--force-tty", id.as_str(), "--", "tty"],
        vec!["port-forward", id.as_str(), ":8000", "--timeout", "5"],
        vec!["stats", id.as_str(), "--no-stream"],
    ] {
        let out = env.run(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains("runs under gVisor") && err.contains("--workdir-mode copy"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn port_forward_ends_when_its_container_dies_behind_its_back() {
    require_container!("port forwarding needs the in-container agent");
    if mounted_under_gvisor() {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    let (fwd, said) = port_forward(&env, &id, &[":8000"]);
    let addr = said["forwards"][0]["address"].as_str().unwrap().to_string();
    // Killed with the engine's own client: h9sandbox's record still says Running.
    let out = Command::new(cli())
        .args(["kill", &env.container(&id)])
        .output()
        .unwrap();
    assert_ok(&out);
    let out = wait_output(
        fwd,
        Duration::from_secs(30),
        "port-forward of a killed container",
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(err.contains("container is exited"), "{err}");
    assert!(TcpStream::connect(&addr).is_err(), "still listening");
}

#[test]
fn force_tty_with_piped_input_ends_the_program_at_the_end_of_its_input() {
    require_container!("a terminal needs the in-container agent");
    if mounted_under_gvisor() {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    // A terminal's end of input is ^D at the start of a line (twice after a partial one).
    for (input, program, want) in [
        (&b"hi\n"[..], "cat", "hi"),
        (&b"partial"[..], "wc -c", "7"),
        (&b""[..], "cat", ""),
    ] {
        let mut child = env
            .cmd()
            .args(["exec", "-it", "--force-tty", &id, "--", program])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = wait_output(child, Duration::from_secs(30), program);
        assert_eq!(out.status.code(), Some(0), "{program}: {}", stderr(&out));
        assert!(stdout(&out).contains(want), "{program}: {:?}", stdout(&out));
    }
}

#[test]
fn shell_and_exec_t_without_a_terminal_are_refused_naming_their_own_options() {
    require_container!("a terminal needs the in-container agent");
    let env = TestEnv::new();
    let id = env.up(&[]);
    // Piped, as in a test: no terminal on either side.
    let out = env.run(&["shell", &id]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`shell` needs one"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("drop -t"), "{}", stderr(&out));
    let out = env.run(&["shell", &id, "--format", "json"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("h9sandbox exec ID --format json"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["exec", "-t", &id, "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("drop -t"), "{}", stderr(&out));
    // shell's own failures are 125, as exec's (its statuses are the shell's).
    let out = env.run(&["shell", "ffffffff"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let out = env.run(&["shell", &id, "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
}

#[test]
fn forward_registrations_come_only_from_our_own_files_and_signal_only_their_process() {
    require_engine!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    let dir = env.state_dir.join("forwards");
    // Made by a forward under the loosest umask: still ours alone.
    let mut fwd = env.shell(&format!(
        "umask 000; exec \"$H9\" port-forward {id} :8000 --format json"
    ));
    if engine() == Engine::Local {
        // No agent to forward to: refused, and nothing made.
        let out = fwd.output().unwrap();
        assert!(!out.status.success());
    } else {
        let mut fwd = fwd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(fwd.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{line}");
        let _ = fwd.kill();
        let _ = fwd.wait();
    }
    std::fs::create_dir_all(&dir).unwrap();
    // A victim, named by forged registrations: with no start time, with its real one in a file
    // of another user, and with an address carrying escape sequences; a FIFO beside them.
    let mut victim = Command::new("sleep").arg("300").spawn().unwrap();
    let start: u64 = {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", victim.id())).unwrap();
        let rest = &stat[stat.rfind(')').unwrap() + 1..];
        rest.split_whitespace().nth(19).unwrap().parse().unwrap()
    };
    let forged = |start: u64, address: &str| {
        serde_json::json!({"process": {"pid": victim.id(), "start_time": start},
            "kind": "port-forward",
            "forwards": [{"sandbox": id, "address": address, "port": 8000}]})
        .to_string()
    };
    std::fs::write(dir.join("1.json"), forged(0, "127.0.0.1:1")).unwrap();
    std::fs::write(dir.join("2.json"), forged(start, "127.0.0.1:2")).unwrap();
    std::os::unix::fs::chown(dir.join("2.json"), Some(1000), Some(1000)).unwrap();
    std::fs::write(
        dir.join("3.json"),
        forged(start + 1, "127.0.0.1:3\u{1b}]0;TITLE\u{7}"),
    )
    .unwrap();
    assert!(Command::new("mkfifo")
        .arg(dir.join("4.json"))
        .status()
        .unwrap()
        .success());
    // ls neither hangs on the FIFO nor prints what the files say.
    let out = env.run(&["ls"]);
    assert_ok(&out);
    assert!(!stdout(&out).contains('\u{1b}'), "{}", stdout(&out));
    assert!(!stdout(&out).contains("127.0.0.1:1"), "{}", stdout(&out));
    assert!(!stdout(&out).contains("127.0.0.1:2"), "{}", stdout(&out));
    // down signals none of them.
    assert_ok(&env.run(&["down", &id]));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        victim.try_wait().unwrap().is_none(),
        "down signalled a process a forged registration named"
    );
    let _ = victim.kill();
    let _ = victim.wait();
}

#[test]
fn a_forward_carries_a_bounded_number_of_connections_and_resets_the_rest() {
    require_container!("port forwarding needs the in-container agent");
    require_images!(PYTHON);
    if mounted_under_gvisor() {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&["--image", PYTHON, "--network", "none"]);
    // A server that holds every connection open without answering.
    let server = "import asyncio\nasync def hold(r, w):\n    await asyncio.sleep(600)\nasync def main():\n    s = await asyncio.start_server(hold, '127.0.0.1', 8000, backlog=1024)\n    await s.serve_forever()\nasyncio.run(main())\n";
    assert_ok(&run_stdin(
        &env,
        &["write", &id, "/var/tmp/hold.py"],
        server.as_bytes(),
    ));
    assert_ok(&env.run(&["exec", "-d", &id, "--", "python3 /var/tmp/hold.py"]));
    let (mut fwd, said) = port_forward(&env, &id, &[":8000"]);
    let addr = said["forwards"][0]["address"].as_str().unwrap().to_string();
    // Wait for the server: a connection it holds open stays open.
    wait_until(
        Duration::from_secs(30),
        "the server holds a connection",
        || {
            let Ok(mut s) = TcpStream::connect(&addr) else {
                return false;
            };
            s.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut b = [0u8; 1];
            matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut)
        },
    );
    let conns: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    let mut closed = 0;
    for mut s in conns {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut b = [0u8; 1];
        match s.read(&mut b) {
            Ok(0) => closed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => closed += 1,
            _ => {}
        }
    }
    // 256 carried at most (one is the readiness probe's, perhaps not yet gone): the rest reset.
    assert!(
        (44..=60).contains(&closed),
        "{closed} of 300 connections were closed"
    );
    let _ = fwd.kill();
    let _ = fwd.wait();
}
