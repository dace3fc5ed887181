//! Sandboxes without host mounts (`--workdir-mode copy`, what a daemon on another machine gets):
//! the work dir copied in, commands over the remote channel (TLS with pinned certificates and the
//! token), `cp` both ways, and the attacks on the channel and on `cp`. Against the engine under
//! test (a remote daemon: `DOCKER_HOST`, see scripts/testbed.sh).

use std::process::Command;

use crate::common::*;

/// `up --workdir-mode copy` with `args`; the sandbox's ID.
fn up_copied(env: &TestEnv, args: &[&str]) -> String {
    let mut a = vec!["--workdir-mode", "copy"];
    a.extend_from_slice(args);
    env.up(&a)
}

/// The `docker` client of the engine under test (it inherits `DOCKER_HOST` and its kin).
fn docker() -> Command {
    Command::new(cli())
}

/// The record of sandbox `id` as state.json holds it.
fn record(env: &TestEnv, id: &str) -> serde_json::Value {
    env.ls_raw()
        .into_iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no record of {id}"))
}

/// The host keys and token the state directory keeps for sandbox `id`.
fn keys_of(env: &TestEnv, id: &str) -> (h9sandbox::channel::tls::HostKeys, String) {
    let keys = std::fs::read(env.state_dir.join("keys").join(id)).unwrap();
    let token = std::fs::read_to_string(env.state_dir.join("tokens").join(id)).unwrap();
    (
        postcard::from_bytes(&keys).unwrap(),
        token.trim().to_string(),
    )
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_copied_work_dir_mounts_nothing_and_changes_the_host_only_by_cp() {
    require_container!("copy mode needs a container engine");
    if engine() != Engine::Docker {
        return announce("copy mode is Docker's (Podman runs no attached secret hand-over here)");
    }
    let env = TestEnv::new();
    std::fs::create_dir(env.path("sub")).unwrap();
    std::fs::write(env.path("sub/a.txt"), "from the host\n").unwrap();
    std::fs::write(env.path("run.sh"), "#!/bin/sh\necho ran\n").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", env.path("esc")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(env.path("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let id = up_copied(&env, &[]);
    let container = env.container(&id);
    // No bind mount of any kind: work dir, binary, run directory.
    let out = docker()
        .args([
            "inspect",
            "--format",
            "{{range .Mounts}}{{.Type}} {{end}}",
            &container,
        ])
        .output()
        .unwrap();
    let mounts = String::from_utf8(out.stdout).unwrap();
    assert!(!mounts.contains("bind"), "mounts: {mounts}");
    // The copy keeps content, modes and symlinks (not followed), and runs scripts.
    let out = env.run(&[
        "exec",
        &id,
        "--",
        "cat sub/a.txt; stat -c %a run.sh; readlink esc; ./run.sh; echo made > new.txt",
    ]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "from the host\n750\n/etc/passwd\nran\n");
    // The host's directory is never changed by the sandbox.
    assert!(!env.path("new.txt").exists());
    // read/write/edit act on the sandbox's copy.
    let out = env.run(&["read", &id, "new.txt"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "made\n");
    let mut w = env.cmd();
    let out = w
        .args(["write", &id, "sub/w.txt"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b"written\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert_ok(&out);
    assert!(!env.path("sub/w.txt").exists());
    assert_ok(&env.run(&[
        "edit",
        &id,
        "sub/w.txt",
        "--old",
        "written",
        "--new",
        "edited",
    ]));
    // cp out, both a directory and a directory's content, and in again.
    let dest = env.root.path().join("out");
    assert_ok(&env.run(&["cp", &format!("{id}:sub"), dest.to_str().unwrap()]));
    assert_eq!(
        std::fs::read_to_string(dest.join("w.txt")).unwrap(),
        "edited\n"
    );
    let all = env.root.path().join("all");
    assert_ok(&env.run(&["cp", &format!("{id}:."), all.to_str().unwrap()]));
    assert_eq!(
        std::fs::read_to_string(all.join("new.txt")).unwrap(),
        "made\n"
    );
    assert_eq!(
        std::fs::read_link(all.join("esc")).unwrap().to_str(),
        Some("/etc/passwd")
    );
    assert_ok(&env.run(&["cp", dest.to_str().unwrap(), &format!("{id}:/tmp/back")]));
    let out = env.run(&["exec", &id, "--", "cat /tmp/back/w.txt"]);
    assert_eq!(stdout(&out), "edited\n");
    assert_ok(&env.run(&["down", &id]));
    assert!(env.containers().is_empty());
}

#[test]
fn the_channel_answers_only_the_pinned_host_with_the_token() {
    require_container!("copy mode needs a container engine");
    if engine() != Engine::Docker {
        return announce("copy mode is Docker's");
    }
    let env = TestEnv::new();
    let a = up_copied(&env, &[]);
    let b = up_copied(&env, &[]);
    let address = |id: &str| {
        record(&env, id)["agent"]["channel"]["address"]
            .as_str()
            .expect("a published channel")
            .to_string()
    };
    let (keys_a, token_a) = keys_of(&env, &a);
    let (keys_b, token_b) = keys_of(&env, &b);
    let rt = tokio_runtime();
    use h9sandbox::channel::{tls, ConnectError};
    // The right keys and token: served.
    assert!(rt
        .block_on(tls::connect(&address(&a), &keys_a, &token_a))
        .is_ok());
    // A certificate the agent does not pin (another host's keys): refused in the handshake.
    let (stranger, _) = tls::generate(None, &token_a).unwrap();
    let wrong_cert = h9sandbox::channel::tls::HostKeys {
        agent_pin: keys_a.agent_pin.clone(),
        ..stranger
    };
    let r = rt
        .block_on(tls::connect(&address(&a), &wrong_cert, &token_a))
        .err();
    assert!(
        matches!(
            r,
            Some(ConnectError::Refused(_) | ConnectError::Unreachable(_))
        ),
        "{r:?}"
    );
    // The pinned certificate without the token: refused at the hello.
    let r = rt
        .block_on(tls::connect(&address(&a), &keys_a, &"0".repeat(64)))
        .err();
    assert!(
        matches!(&r, Some(ConnectError::Refused(why)) if why.contains("wrong token")),
        "{r:?}"
    );
    // Another sandbox's port with this one's keys: its agent is not the pinned one.
    let r = rt
        .block_on(tls::connect(&address(b.as_str()), &keys_a, &token_a))
        .err();
    assert!(matches!(r, Some(ConnectError::Refused(_))), "{r:?}");
    let _ = token_b;
    let _ = keys_b;
    // Plain bytes get nothing back: the handshake fails before the protocol.
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(address(&a)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(12)))
        .unwrap();
    let hello = [0u8, 0, 0, 5, 0, 3, 1, b'x', b'y'];
    let _ = s.write_all(&hello);
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap_or(0);
    // A TLS alert at most (content type 21), never a protocol frame.
    assert!(n == 0 || buf[0] == 21, "answered {:?}", &buf[..n]);
}

#[test]
fn a_hostile_tar_stream_from_the_sandbox_never_reaches_the_hosts_files() {
    require_container!("copy mode needs a container engine");
    if engine() != Engine::Docker {
        return announce("copy mode is Docker's");
    }
    let env = TestEnv::new();
    let id = up_copied(&env, &[]);
    let outside = env.root.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    // Root in the sandbox replaces the binary its `agent tar create` runs (in copy mode it is
    // in the container's own file system) with one that prints a hostile stream.
    let evil = {
        let mut b = tar::Builder::new(Vec::new());
        let mut add = |name: &str, kind: tar::EntryType, link: Option<&str>, data: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o4755);
            let raw = &mut h.as_old_mut().name;
            raw[..name.len()].copy_from_slice(name.as_bytes());
            if let Some(l) = link {
                h.set_link_name(l).unwrap();
            }
            h.set_cksum();
            b.append(&h, data).unwrap();
        };
        add("x/ok", tar::EntryType::Regular, None, b"fine");
        add(
            "x/lnk",
            tar::EntryType::Symlink,
            Some(outside.to_str().unwrap()),
            b"",
        );
        add("x/lnk/planted", tar::EntryType::Regular, None, b"bad");
        add(
            "x/../../outside/dotdot",
            tar::EntryType::Regular,
            None,
            b"bad",
        );
        b.into_inner().unwrap()
    };
    let mut w = env.cmd();
    let out = w
        .args(["write", &id, "/tmp/evil.tar"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(&evil)?;
            c.wait_with_output()
        })
        .unwrap();
    assert_ok(&out);
    let out = env.run(&[
        "exec",
        &id,
        "--user",
        "0",
        "--",
        "rm -f /.h9sandbox/h9sandbox && printf '#!/bin/sh\\ncat /tmp/evil.tar\\n' > /.h9sandbox/h9sandbox && chmod 755 /.h9sandbox/h9sandbox",
    ]);
    assert_ok(&out);
    let dest = env.root.path().join("dest");
    let out = env.run(&["cp", &format!("{id}:/anything"), dest.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("leads out of the destination"), "{err}");
    // Nothing was written outside, nor through the symlink.
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    assert!(!env.root.path().join("outside/dotdot").exists());
}

#[test]
fn a_connection_lost_mid_command_is_told_not_taken_for_its_exit() {
    require_container!("copy mode needs a container engine");
    if engine() != Engine::Docker {
        return announce("copy mode is Docker's");
    }
    let env = TestEnv::new();
    let id = up_copied(&env, &[]);
    let container = env.container(&id);
    let mut child = env
        .cmd()
        .args(["exec", &id, "--", "echo started; sleep 60"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "started\n");
    assert!(docker()
        .args(["kill", &container])
        .status()
        .unwrap()
        .success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "exec did not end");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(125), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("h9sandbox: error: "), "{err}");
    // In words a person can act on (not the TLS library's note with its URL).
    assert!(
        err.contains("connection closed before it answered"),
        "{err}"
    );
    assert!(!err.contains("https://"), "{err}");
}

#[test]
fn a_copied_sandbox_starts_again_with_a_new_agent_key() {
    require_container!("copy mode needs a container engine");
    if engine() != Engine::Docker {
        return announce("copy mode is Docker's");
    }
    let env = TestEnv::new();
    let id = up_copied(&env, &[]);
    assert_ok(&env.run(&["exec", &id, "--", "echo kept > k"]));
    let before = record(&env, &id)["agent"]["channel"]["fingerprint"].clone();
    assert_ok(&env.run(&["stop", &id]));
    assert_ok(&env.run(&["start", &id]));
    let after = record(&env, &id)["agent"]["channel"]["fingerprint"].clone();
    assert_ne!(before, after, "a new key pair at start");
    let out = env.run(&["exec", &id, "--", "cat k"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "kept\n");
}

#[test]
fn a_network_none_sandbox_is_reached_through_the_engines_exec_stream() {
    require_container!("copy mode needs a container engine");
    if engine() != Engine::Docker {
        return announce("copy mode is Docker's");
    }
    let env = TestEnv::new();
    let id = up_copied(&env, &["--network", "none"]);
    // No port of its own: the channel is relayed through the engine's exec.
    assert!(record(&env, &id)["agent"]["channel"]["address"].is_null());
    let out = env.run(&["exec", &id, "--", "cat /proc/net/route | wc -l; exit 7"]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert_eq!(stdout(&out), "1\n", "no route but the header");
    let out = env.run(&["exec", &id, "--timeout", "1", "--", "sleep 30"]);
    assert_eq!(out.status.code(), Some(124));
}

/// The second daemon of `scripts/testbed.sh` (`H9TEST_TESTBED_HOST`, `H9TEST_TESTBED_CERTS`, as
/// `.ci/run` exports them; else the script's defaults while its daemon runs): its `DOCKER_*`
/// settings, or `None` (announced; a failure under CI).
fn testbed() -> Option<[(&'static str, String); 3]> {
    let running = std::path::Path::new("/run/h9-testbed/docker.pid").exists();
    let default = |var: &str, value: &str| {
        std::env::var(var).or_else(|e| running.then(|| value.to_string()).ok_or(e))
    };
    match (
        default("H9TEST_TESTBED_HOST", "tcp://127.0.0.2:23760"),
        default("H9TEST_TESTBED_CERTS", "/var/lib/h9-testbed/certs/client"),
    ) {
        (Ok(host), Ok(certs)) => Some([
            ("DOCKER_HOST", host),
            ("DOCKER_TLS_VERIFY", "1".into()),
            ("DOCKER_CERT_PATH", certs),
        ]),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but H9TEST_TESTBED_HOST/H9TEST_TESTBED_CERTS are not: start the second daemon with scripts/testbed.sh up (.ci/run does)"
            );
            announce("no second daemon (H9TEST_TESTBED_HOST): bash scripts/testbed.sh up");
            None
        }
    }
}

#[test]
fn a_sandbox_keeps_the_daemon_it_was_made_on_whatever_the_environment_says_later() {
    require_container!("the daemon belongs to a container engine");
    if engine() != Engine::Docker {
        return announce("DOCKER_HOST is the Docker client's");
    }
    let Some(bed) = testbed() else { return };
    let env = TestEnv::new();
    std::fs::write(env.path("a.txt"), "carried\n").unwrap();
    let mut up = env.cmd();
    up.args(["up", "--image", DEBIAN]);
    for (k, v) in &bed {
        up.env(k, v);
    }
    let out = up.output().unwrap();
    assert_ok(&out);
    let remote = stdout(&out).trim().to_string();
    // Whatever fails below, the testbed's container goes (TestEnv cleans the daemon in force).
    struct Down<'a>(&'a TestEnv, String);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            let _ = self.0.run(&["down", &self.1]);
        }
    }
    let _down = Down(&env, remote.clone());
    // Later commands with no DOCKER_HOST at all (this machine's daemon in force) still reach
    // it: the record names its daemon.
    let bare = |args: &[&str]| {
        let mut c = env.cmd();
        for (k, _) in &bed {
            c.env_remove(k);
        }
        c.args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = bare(&["exec", &remote, "--", "cat a.txt"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "carried\n");
    let rec = record(&env, &remote);
    assert_eq!(rec["daemon"]["host"], bed[0].1.as_str(), "{rec}");
    assert_eq!(
        rec["workdir_mode"], "copy",
        "a daemon elsewhere copies: {rec}"
    );
    // A sandbox on this machine's daemon beside it; ls checks each on its own daemon, and
    // shows where each runs.
    let local = {
        let out = bare(&["up"]);
        assert_ok(&out);
        stdout(&out).trim().to_string()
    };
    let out = bare(&["ls", "--format", "json"]);
    assert_ok(&out);
    let all: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    for r in &all {
        assert_eq!(r["state"], "Running", "every sandbox is running: {r}");
    }
    let out = bare(&["ls"]);
    let table = stdout(&out);
    let line = table
        .lines()
        .find(|l| l.contains(&remote.replace('-', "")[..12]))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains(&format!("docker at {}", bed[0].1)), "{table}");
    // The container is on the testbed's daemon, not on this machine's.
    let on = |testbed: bool| {
        let mut c = docker();
        for (k, v) in &bed {
            if testbed {
                c.env(k, v);
            } else {
                c.env_remove(k);
            }
        }
        let out = c
            .args([
                "ps",
                "-aq",
                "--filter",
                &format!("label=h9sandbox.id={remote}"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert!(!on(true).is_empty(), "not on the testbed");
    assert!(on(false).is_empty(), "on this machine's daemon too");
    // A reap with this machine's daemon in force leaves the remote sandbox alone: it is judged
    // against its own daemon's listing.
    let out = bare(&["reap"]);
    assert_ok(&out);
    let out = bare(&["exec", &remote, "--", "true"]);
    assert_ok(&out);
    // With DOCKER_HOST pointing elsewhere, the local one is still this machine's.
    let mut c = env.cmd();
    for (k, v) in &bed {
        c.env(k, v);
    }
    let out = c.args(["exec", &local, "--", "true"]).output().unwrap();
    assert_ok(&out);
    let out = bare(&["down", &remote, &local]);
    assert_ok(&out);
    assert!(on(true).is_empty(), "left on the testbed");
}

#[test]
fn a_symlink_an_earlier_cp_left_at_the_destination_is_never_written_through() {
    require_container!("copy mode needs a container engine");
    if engine() != Engine::Docker {
        return announce("copy mode is Docker's");
    }
    let env = TestEnv::new();
    let id = up_copied(&env, &["--image", DEBIAN]);
    let outside = env.root.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let dest = env.root.path().join("result");
    // The sandbox's stock agent copies a symlink as a symlink: the first cp leaves one at the
    // destination, pointing wherever the sandbox likes.
    let link = format!("ln -s {} /srv/out", outside.display());
    assert_ok(&env.run(&["exec", &id, "--", &link]));
    assert_ok(&env.run(&["cp", &format!("{id}:/srv/out"), dest.to_str().unwrap()]));
    assert!(std::fs::symlink_metadata(&dest)
        .unwrap()
        .file_type()
        .is_symlink());
    // The next cp to the same destination, of a directory with a file, in both of docker cp's
    // forms: refused, nothing written where the link points.
    assert_ok(&env.run(&[
        "exec",
        &id,
        "--",
        "rm /srv/out; mkdir /srv/out; echo planted > /srv/out/authorized_keys",
    ]));
    for src in [format!("{id}:/srv/out/."), format!("{id}:/srv/out")] {
        let out = env.run(&["cp", &src, dest.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{src}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("is a symbolic link"),
            "{}",
            stderr(&out)
        );
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    }
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "something was written through the link"
    );
}

#[test]
fn cp_of_a_directorys_content_into_an_existing_directory_copies_the_content() {
    require_container!("copy mode needs a container engine");
    if engine() != Engine::Docker {
        return announce("copy mode is Docker's");
    }
    let env = TestEnv::new();
    let id = up_copied(&env, &["--image", DEBIAN]);
    let src = env.root.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("a"), "A").unwrap();
    assert_ok(&env.run(&["exec", &id, "--", "mkdir /srv/d"]));
    // docker cp's `SRC/.`: the content of SRC into the existing directory, not SRC itself.
    let dot = format!("{}/.", src.display());
    assert_ok(&env.run(&["cp", &dot, &format!("{id}:/srv/d")]));
    let out = env.run(&["exec", &id, "--", "cat /srv/d/a; test ! -e /srv/d/src"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "A");
    // Into a directory that does not exist (its parent does): it is made, with the content.
    assert_ok(&env.run(&["cp", &dot, &format!("{id}:/srv/new")]));
    let out = env.run(&["exec", &id, "--", "cat /srv/new/a; test ! -e /srv/new/src"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "A");
    // Its parent must exist, as with docker cp.
    let out = env.run(&["cp", &dot, &format!("{id}:/srv/no/such")]);
    assert!(!out.status.success(), "{}", stdout(&out));
}

/// The testbed's sshd (`scripts/testbed.sh`, where openssh-server is installed): the
/// `ssh://` address of the daemon behind it and the directory of its client files, or `None`
/// (announced; a failure under CI, whose `.ci/run` installs openssh-server).
fn testbed_ssh() -> Option<(String, std::path::PathBuf)> {
    let pid = std::path::Path::new("/run/h9-testbed/sshd.pid");
    let dir = std::path::PathBuf::from("/var/lib/h9-testbed/ssh");
    if pid.exists() && dir.join("ssh_config").exists() {
        return Some(("ssh://root@127.0.0.2:2222".to_string(), dir));
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but the testbed has no sshd: install openssh-server and run scripts/testbed.sh up (.ci/run does)"
    );
    announce(
        "no sshd beside the second daemon: install openssh-server, then bash scripts/testbed.sh up",
    );
    None
}

#[test]
fn a_daemon_reached_over_ssh_runs_a_copied_sandbox_end_to_end() {
    require_container!("the daemon belongs to a container engine");
    if engine() != Engine::Docker {
        return announce("DOCKER_HOST is the Docker client's");
    }
    let Some((host, dir)) = testbed_ssh() else {
        return;
    };
    let env = TestEnv::new();
    // The client's ssh settings, as a user's ~/.ssh/config would hold them: ssh reads the
    // account's home, not $HOME, so an `ssh` first on PATH passes them with -F.
    let bin = env.root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let ssh = bin.join("ssh");
    std::fs::write(
        &ssh,
        format!(
            "#!/bin/sh\nexec /usr/bin/ssh -F {} \"$@\"\n",
            dir.join("ssh_config").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::fs::write(env.path("in.txt"), "over ssh\n").unwrap();
    let run = |args: &[&str]| {
        let mut c = env.cmd();
        c.env("DOCKER_HOST", &host)
            .env("PATH", &path)
            .env_remove("DOCKER_TLS_VERIFY")
            .env_remove("DOCKER_CERT_PATH")
            .env_remove("DOCKER_CONTEXT")
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        wait_output(c.spawn().unwrap(), RUN_PATIENCE, &args.join(" "))
    };
    let out = run(&["up"]);
    assert_ok(&out);
    let id = stdout(&out).trim().to_string();
    struct Down<'a>(&'a dyn Fn(&[&str]) -> std::process::Output, String);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            let _ = (self.0)(&["down", &self.1]);
        }
    }
    let _down = Down(&run, id.clone());
    let rec = record(&env, &id);
    assert_eq!(rec["daemon"]["host"], host.as_str(), "{rec}");
    assert_eq!(
        rec["workdir_mode"], "copy",
        "a daemon over ssh copies: {rec}"
    );
    // The work dir was copied in; a command's status and streams come back over the channel.
    let out = run(&[
        "exec",
        &id,
        "--",
        "cat in.txt; echo made > out.txt; echo err >&2; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout(&out), "over ssh\n");
    assert_eq!(stderr(&out), "err\n");
    assert!(
        !env.path("out.txt").exists(),
        "the host's work dir is untouched"
    );
    // cp brings a file back; the container is on the daemon behind ssh, not on this machine's.
    let dest = env.root.path().join("back");
    let out = run(&["cp", &format!("{id}:out.txt"), dest.to_str().unwrap()]);
    assert_ok(&out);
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "made\n");
    let container = rec["container_id"].as_str().unwrap().to_string();
    let here = std::process::Command::new("docker")
        .env_remove("DOCKER_HOST")
        .env_remove("DOCKER_CONTEXT")
        .env_remove("DOCKER_TLS_VERIFY")
        .env_remove("DOCKER_CERT_PATH")
        .args([
            "ps",
            "-aq",
            "--no-trunc",
            "--filter",
            &format!("id={container}"),
        ])
        .output()
        .unwrap();
    assert_eq!(stdout(&here).trim(), "", "not on this machine's daemon");
    let out = run(&["down", &id]);
    assert_ok(&out);
    let there = std::process::Command::new("docker")
        .args([
            "-H",
            "unix:///run/h9-testbed/docker.sock",
            "ps",
            "-aq",
            "--filter",
        ])
        .arg(format!("id={container}"))
        .output()
        .unwrap();
    assert_eq!(
        stdout(&there).trim(),
        "",
        "removed on the daemon behind ssh"
    );
}

#[test]
fn up_through_a_daemons_client_asks_for_the_image_and_its_derived_image_in_one_call() {
    require_container!("the derived image is a container engine's");
    if engine() != Engine::Docker {
        return announce("the derived image's lookup through the client is Docker's");
    }
    let Some(bed) = testbed() else { return };
    let env = TestEnv::new();
    let on_bed = |args: &[&str]| {
        let mut c = docker();
        c.envs(bed.iter().map(|(k, v)| (k, v)));
        let out = c.args(args).output().unwrap();
        assert_ok(&out);
        stdout(&out).trim().to_string()
    };
    // An image name of this test's own, which it points at another image halfway.
    let image = format!("h9test-hint-{}:t", std::process::id());
    on_bed(&["tag", DEBIAN, &image]);
    // Whatever fails below, the name goes again (the images it named stay: the test bed's).
    struct Untag(Vec<(&'static str, String)>, String);
    impl Drop for Untag {
        fn drop(&mut self) {
            let mut c = docker();
            c.envs(self.0.iter().map(|(k, v)| (*k, v)));
            let _ = c.args(["rmi", &self.1]).output();
        }
    }
    let _untag = Untag(bed.to_vec(), image.clone());
    // The client itself, named by its path (`engine_bin`): every call a process of its own, as
    // for a daemon whose API is not asked directly (ssh://, a context, plain tcp://).
    let bin = which(cli());
    let shown = format!("+ {bin} ");
    let lookup = format!("+ {bin} image inspect");
    // `-v` lines of the image lookups of one `up` (each a client process), and the sandbox's
    // /etc/os-release's first line; the client processes of that `up` in all, too.
    let calls = std::cell::RefCell::new(Vec::new());
    let up = |what: &str| -> (Vec<String>, String) {
        let mut c = env.cmd();
        c.envs(bed.iter().map(|(k, v)| (k, v)))
            .env("H9SANDBOX_ENGINE_BIN", &bin);
        let out = c.args(["-v", "up", "--image", &image]).output().unwrap();
        assert_ok(&out);
        let id = stdout(&out).trim().to_string();
        let lines: Vec<String> = stderr(&out)
            .lines()
            .map(without_settings)
            .filter(|l| l.starts_with(&shown))
            .collect();
        let lookups = lines
            .iter()
            .filter(|l| l.starts_with(&lookup))
            .cloned()
            .collect();
        *calls.borrow_mut() = lines;
        let mut c = env.cmd();
        c.envs(bed.iter().map(|(k, v)| (k, v)))
            .env("H9SANDBOX_ENGINE_BIN", &bin);
        let os = c
            .args(["exec", &id, "--", "head -n 1 /etc/os-release || echo none"])
            .output()
            .unwrap();
        assert_ok(&os);
        let mut c = env.cmd();
        c.envs(bed.iter().map(|(k, v)| (k, v)))
            .env("H9SANDBOX_ENGINE_BIN", &bin);
        assert_ok(&c.args(["down", &id]).output().unwrap());
        eprintln!("{what}: {lookups:?}");
        (lookups, stdout(&os))
    };
    let (first, os) = up("first");
    assert_eq!(
        first.len(),
        2,
        "the image, then its derived image: {first:?}"
    );
    assert!(os.contains("Debian"), "{os}");
    let (second, os) = up("second");
    assert_eq!(second.len(), 1, "one call for both: {second:?}");
    assert!(
        second[0].contains(&image) && second[0].contains("h9sandbox-agent:"),
        "{second:?}"
    );
    assert!(os.contains("Debian"), "{os}");
    // One listing of the daemon's sandboxes serves the sweep and the check of other state
    // directories; the volumes are listed with their labels, none inspected one by one.
    let calls = calls.borrow().clone();
    let count = |p: &str| calls.iter().filter(|l| l.starts_with(p)).count();
    assert_eq!(count(&format!("+ {bin} ps ")), 1, "{calls:#?}");
    assert_eq!(count(&format!("+ {bin} volume inspect")), 0, "{calls:#?}");
    // The name now names another image: the derived image of the old one is not used.
    on_bed(&["tag", TINY, &image]);
    let (third, os) = up("retagged");
    assert!(
        third.len() >= 2,
        "the hint failed, the full lookup followed: {third:?}"
    );
    assert_eq!(os, "none\n", "the tiny image has no /etc/os-release");
    // A hint that is no derived image's name is never handed to the client.
    let cache = env.state_dir.join("agent-images.json");
    let text = std::fs::read_to_string(&cache).unwrap();
    let tag = text
        .split('"')
        .find(|s| s.starts_with("h9sandbox-agent:"))
        .unwrap()
        .to_string();
    std::fs::write(&cache, text.replace(&tag, "--format=x")).unwrap();
    let (fourth, os) = up("bad hint");
    assert!(
        fourth.iter().all(|l| !l.contains("--format=x")),
        "{fourth:?}"
    );
    assert_eq!(os, "none\n");
}

/// A `-v` line without the daemon's settings that lead it (`+ DOCKER_HOST=… docker ps` is
/// `+ docker ps`).
fn without_settings(line: &str) -> String {
    let Some(rest) = line.strip_prefix("+ ") else {
        return line.to_string();
    };
    let mut words: Vec<&str> = rest.split(' ').collect();
    while words.first().is_some_and(|w| {
        w.split_once('=')
            .is_some_and(|(k, _)| k.starts_with("DOCKER_") && !k.contains('/'))
    }) {
        words.remove(0);
    }
    format!("+ {}", words.join(" "))
}

/// The absolute path of the program `name` on `PATH`.
fn which(name: &str) -> String {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| panic!("no {name} on PATH"))
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_verified_tcp_daemon_is_asked_through_its_api_over_tls() {
    require_container!("the Engine API is a container engine's");
    if engine() != Engine::Docker || cli() != "docker" {
        return announce("the Engine API over TLS is Docker's, asked by its default client");
    }
    let Some(bed) = testbed() else { return };
    let env = TestEnv::new();
    let on_bed = |args: &[&str]| {
        let mut c = env.cmd();
        c.envs(bed.iter().map(|(k, v)| (k, v)));
        c.args(args).output().unwrap()
    };
    // The first `up` of an image on a daemon builds its derived image (the client's create,
    // cp and commit, once); the second is what every later `up` asks.
    let out = on_bed(&["up", "--workdir-mode", "copy"]);
    assert_ok(&out);
    assert_ok(&on_bed(&["down", stdout(&out).trim()]));
    let out = on_bed(&["-v", "up", "--workdir-mode", "copy"]);
    assert_ok(&out);
    let id = stdout(&out).trim().to_string();
    let err = stderr(&out);
    let certs = &bed[2].1;
    // The lookups and the inspect are requests a person can replay with the client's files;
    // only the attached `run` (the agent's secret on its standard input) is the client's.
    let curl =
        format!("+ curl --cacert {certs}/ca.pem --cert {certs}/cert.pem --key {certs}/key.pem -X ");
    assert!(
        err.lines()
            .any(|l| l.starts_with(&curl) && l.contains("/images/")),
        "{err}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with(&curl) && l.contains("/containers/") && l.contains("/json")),
        "{err}"
    );
    // The client's lines name the daemon as it is given the client, ready to paste.
    let settings = format!(
        "+ DOCKER_HOST={} DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH={certs} docker ",
        bed[0].1
    );
    let clients: Vec<&str> = err.lines().filter(|l| l.contains(" docker ")).collect();
    assert!(!clients.is_empty(), "{err}");
    assert!(
        clients
            .iter()
            .all(|l| l.starts_with(&format!("{settings}run "))),
        "{clients:#?}"
    );
    let out = on_bed(&["exec", &id, "--", "echo hi"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "hi\n");
    let out = on_bed(&["-v", "down", &id]);
    assert_ok(&out);
    let err = stderr(&out);
    assert!(
        err.lines()
            .any(|l| l.starts_with(&curl) && l.contains("DELETE")),
        "{err}"
    );
    assert!(!err.contains(" docker "), "{err}");
    let mut c = docker();
    c.envs(bed.iter().map(|(k, v)| (k, v)));
    let out = c
        .args(["ps", "-aq", "--filter"])
        .arg(format!(
            "label=h9sandbox.state_dir={}",
            env.state_dir.display()
        ))
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "", "nothing left on the second daemon");
}

#[test]
fn a_daemon_whose_certificate_the_ca_does_not_vouch_for_is_never_asked() {
    require_container!("the Engine API is a container engine's");
    if engine() != Engine::Docker || cli() != "docker" {
        return announce("the Engine API over TLS is Docker's, asked by its default client");
    }
    let Some(bed) = testbed() else { return };
    let env = TestEnv::new();
    // The client's own certificate and key, and a CA of another's making.
    let certs = env.path("certs");
    std::fs::create_dir(&certs).unwrap();
    for f in ["cert.pem", "key.pem"] {
        std::fs::copy(std::path::Path::new(&bed[2].1).join(f), certs.join(f)).unwrap();
    }
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=another CA", "-keyout"])
        .arg(certs.join("ca-key.pem"))
        .arg("-out")
        .arg(certs.join("ca.pem"))
        .output()
        .unwrap();
    assert_ok(&made);
    let mut c = env.cmd();
    c.env("DOCKER_HOST", &bed[0].1)
        .env("DOCKER_TLS_VERIFY", "1")
        .env("DOCKER_CERT_PATH", &certs);
    let out = c
        .args(["-v", "up", "--workdir-mode", "copy"])
        .output()
        .unwrap();
    let err = stderr(&out);
    // The handshake failed: nothing was asked of the daemon directly, and the client, asked
    // instead, refused it as well, with its own words.
    assert!(!out.status.success(), "{err}");
    assert!(!err.contains("+ curl"), "{err}");
    assert!(err.contains("certificate") || err.contains("x509"), "{err}");
    assert!(env.ls().is_empty(), "{:?}", env.ls());
}

#[test]
fn a_sub_sandbox_of_a_copied_parent_is_refused_before_anything_is_made() {
    require_container!("copy mode needs a container engine");
    if swarm_refuses("a swarm sandbox has no sub-sandboxes") {
        return;
    }
    let env = TestEnv::new();
    let parent = up_copied(&env, &[]);
    let before = env.containers().len();
    // Without --workdir-mode (the child would otherwise get this machine's directory, not the
    // parent's copy), with an image of its own (the refusal comes before what it inherits).
    for extra in [vec![], vec!["--image", DEBIAN]] {
        let mut args = vec!["up", "--parent", &parent];
        args.extend(extra.iter().copied());
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("has its work dir copied in") && err.contains("--workdir-mode mount"),
            "{err}"
        );
    }
    assert_eq!(env.containers().len(), before);
    assert_eq!(env.ls().len(), 1);
}

#[test]
fn reap_removes_the_work_dir_copy_of_a_container_removed_without_its_volumes() {
    require_container!("copy mode needs a container engine");
    if swarm_refuses("a swarm sandbox's volumes go with its service") {
        return;
    }
    if engine() != Engine::Docker {
        announce("Podman's --mount cannot label the volume it makes: checked on Docker");
        return;
    }
    let env = TestEnv::new();
    let id = up_copied(&env, &[]);
    let label = format!("label=h9sandbox.state_dir={}", env.state_dir.display());
    let volumes = || {
        let out = docker()
            .args(["volume", "ls", "-q", "--filter", &label])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out).lines().map(String::from).collect::<Vec<_>>()
    };
    // The scratch volume and the work dir's copy.
    assert_eq!(volumes().len(), 2, "{:?}", volumes());
    // A live sandbox's volumes, the anonymous copy of its work dir included, are its own: the
    // sweep asks the engine to remove neither.
    let out = env.run(&["-v", "reap"]);
    assert_ok(&out);
    let err = stderr(&out);
    let removals: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("-X DELETE") || l.contains(" volume rm "))
        .collect();
    assert!(removals.is_empty(), "{removals:#?}");
    // Removed behind h9sandbox's back, without -v: both volumes stay until `reap`.
    let rm = docker()
        .args(["rm", "-f", &env.container(&id)])
        .output()
        .unwrap();
    assert!(rm.status.success(), "{}", stderr(&rm));
    assert_eq!(volumes().len(), 2, "{:?}", volumes());
    assert_ok(&env.run(&["reap"]));
    assert!(env.ls().is_empty());
    assert!(volumes().is_empty(), "reap left {:?}", volumes());
}
