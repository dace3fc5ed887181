//! A sandbox's life between `up` and `down`: any image starts (its entrypoint, user, working dir
//! and command overridden on purpose, its environment kept), stop/start, pause/resume,
//! snapshot, a work dir replaced under a running sandbox, out-of-memory kills, the named scratch
//! volume, `down` of several with one unknown, `run`, and `up --reuse`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

#[test]
fn any_image_starts_its_config_handled_on_purpose() {
    require_container!("a local sandbox has no image");
    let env = TestEnv::new();
    let img = "h9sandbox-test/configured:latest";
    build_image(
        &env,
        img,
        &format!(
            "FROM {TINY}\nENV FOO=bar PATH=/opt/tools:/bin\nUSER 4321:4321\nWORKDIR /opt\n\
             ENTRYPOINT [\"/bin/sh\", \"-c\", \"exit 3\"]\nCMD [\"also-ignored\"]\n"
        ),
    );
    std::os::unix::fs::chown(&env.workdir, Some(1000), Some(1000)).unwrap();
    let id = env.up(&["--image", img]);
    // ENV kept (PATH and friends), USER replaced by the sandbox's user (the work dir's owner),
    // WORKDIR replaced by the work dir, ENTRYPOINT and CMD not run.
    let out = sh(&env, &id, "echo $FOO; echo $PATH; id -u; pwd");
    assert_eq!(
        out,
        format!("bar\n/opt/tools:/bin\n1000\n{}\n", env.workdir.display())
    );
    let c = env.container(&id);
    assert_eq!(inspect(&c, "{{.State.Running}}"), "true");
}

#[test]
fn a_work_dir_replaced_after_up_is_told_in_every_command() {
    require_container!("a local sandbox sees the host's directory as it is");
    if workdir_copied("a copied work dir is the sandbox's own: the host's may be replaced") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    std::fs::remove_dir_all(&env.workdir).unwrap();
    std::fs::create_dir(&env.workdir).unwrap();
    std::fs::write(env.path("f"), "new").unwrap();
    for (args, code) in [
        (vec!["exec", &id, "--", "true"], 125),
        (vec!["read", &id, "f"], 1),
        (vec!["bootstrap", &id, "--", "true"], 125),
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("was replaced since `up`") && err.contains("h9sandbox down"),
            "{args:?}: {err}"
        );
    }
    let e = env.entry(&id);
    assert_eq!(e["state"], "Failed");
    assert!(e["error"].as_str().unwrap().contains("was replaced"), "{e}");
    assert_ok(&env.run(&["down", &id]));
}

/// `up --name N --reuse` after the work dir was deleted and made again (a fresh clone) refuses,
/// naming the work dir and the fix, instead of handing back the old sandbox, which no longer
/// sees it (issue 22, item 8). Once that sandbox is gone, the same command makes a new one.
#[test]
fn up_reuse_refuses_a_sandbox_whose_work_dir_was_replaced() {
    require_container!("a local sandbox sees the host's directory as it is");
    if workdir_copied(
        "a copied work dir is the container's own; replacing the host's changes nothing it sees",
    ) {
        return;
    }
    let env = TestEnv::new();
    let a = env.up(&["--name", "fresh-clone", "--reuse"]);
    std::fs::remove_dir_all(&env.workdir).unwrap();
    std::fs::create_dir(&env.workdir).unwrap();
    let out = env.run(&["up", "--name", "fresh-clone", "--reuse"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "sandbox fresh-clone exists, but its work directory {} was replaced since it was made",
            env.workdir.display()
        )) && err.contains("`h9sandbox down fresh-clone` first"),
        "{err}"
    );
    // Nothing was made; `ls` shows the old sandbox Failed for its work dir, and `up --reuse`
    // still refuses it then.
    assert_eq!(env.ls().len(), 1);
    let e = env.entry(&a);
    assert_eq!(e["state"], "Failed", "{e}");
    let out = env.run(&["up", "--name", "fresh-clone", "--reuse"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("was replaced since it was made"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.ls().len(), 1);
    assert_ok(&env.run(&["down", "fresh-clone"]));
    let b = env.up(&["--name", "fresh-clone", "--reuse"]);
    assert_ne!(a, b);
    assert_ok(&env.run(&["exec", &b, "--", "true"]));
}

#[test]
fn stop_and_start_keep_the_container_and_its_scratch() {
    require_container!("a local sandbox has no container to stop");
    let env = TestEnv::new();
    let id = env.up(&[]);
    sh(
        &env,
        &id,
        "echo kept > /var/tmp/scratch; echo installed > /etc/tool",
    );
    assert_ok(&env.run(&["stop", &id]));
    assert_eq!(env.entry(&id)["state"], "Stopped");
    let out = env.run(&["exec", &id, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains(&format!("h9sandbox start {}", &id.replace('-', "")[..12])),
        "{}",
        stderr(&out)
    );
    assert_ok(&env.run(&["start", &id]));
    assert_eq!(
        sh(&env, &id, "cat /var/tmp/scratch /etc/tool"),
        "kept\ninstalled\n"
    );
    // Stopped behind h9sandbox's back (`docker stop`, a daemon restart): exec names `start`,
    // which brings it back, its agent too.
    let c = env.container(&id);
    assert_ok(
        &Command::new(cli())
            .args(["stop", "-t", "1", &c])
            .output()
            .unwrap(),
    );
    let out = env.run(&["exec", &id, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("h9sandbox start"), "{}", stderr(&out));
    assert!(env.entry(&id)["error"]
        .as_str()
        .unwrap()
        .contains("h9sandbox start"));
    assert_ok(&env.run(&["start", &id]));
    let out = env.run(&["-v", "exec", &id, "--", "cat", "/var/tmp/scratch"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "kept\n");
    if !exec_path_is_engine() {
        assert!(stderr(&out).contains("(agent of"), "{}", stderr(&out));
    }
}

#[test]
fn pause_and_resume_freeze_every_process() {
    require_container!("a local sandbox has no container to pause");
    let env = TestEnv::new();
    let id = env.up(&[]);
    let handle_out = env.run(&["exec", &id, "--", "sh -c 'i=0; while :; do i=$((i+1)); echo $i > /var/tmp/tick; sleep 0.05; done' > /dev/null 2>&1 & echo started"]);
    assert_ok(&handle_out);
    assert_ok(&env.run(&["pause", &id]));
    assert_eq!(env.entry(&id)["state"], "Paused");
    let c = env.container(&id);
    assert_eq!(inspect(&c, "{{.State.Paused}}"), "true");
    let out = env.run(&["exec", &id, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("is Paused"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("h9sandbox resume"),
        "{}",
        stderr(&out)
    );
    assert_ok(&env.run(&["resume", &id]));
    assert_eq!(env.entry(&id)["state"], "Running");
    // The loop goes on where it was.
    let a = sh(&env, &id, "cat /var/tmp/tick");
    std::thread::sleep(Duration::from_millis(300));
    let b = sh(&env, &id, "cat /var/tmp/tick");
    assert_ne!(a, b);
}

#[test]
fn a_snapshot_is_an_image_new_sandboxes_start_from() {
    require_container!("a local sandbox has no file system of its own");
    let env = TestEnv::new();
    let id = env.up(&[]);
    sh(
        &env,
        &id,
        "mkdir -p /opt/tool && echo v1 > /opt/tool/version; echo w > in-workdir",
    );
    let tag = format!("h9sandbox-test/snap-{}:v1", std::process::id());
    let out = env.run(&["snapshot", &id, "--tag", &tag, "--format", "json"]);
    assert_ok(&out);
    let snap: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(snap["image"], tag.as_str());
    // The image has the base image's own entrypoint and command, not h9sandbox's.
    let cfg = Command::new(cli())
        .args([
            "image",
            "inspect",
            "--format",
            "{{json .Config.Entrypoint}} {{json .Config.Cmd}}",
            &tag,
        ])
        .output()
        .unwrap();
    let cfg = stdout(&cfg);
    assert!(!cfg.contains("h9sandbox"), "{cfg}");
    assert!(cfg.contains("/bin/sh"), "{cfg}");
    let other = TestEnv::new();
    let id2 = other.up(&["--image", &tag]);
    assert_eq!(sh(&other, &id2, "cat /opt/tool/version"), "v1\n");
    // Not the work dir: that is the new sandbox's own.
    assert_eq!(sh(&other, &id2, "ls"), "");
    assert_ok(&other.run(&["down", &id2]));
    let _ = Command::new(cli()).args(["rmi", "-f", &tag]).output();
    let out = env.run(&["snapshot", &id, "--tag", "Bad Name"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn an_out_of_memory_kill_is_told() {
    require_container!("a local sandbox has no memory limit");
    let env = TestEnv::new();
    let id = env.up(&["--memory", "64m"]);
    let out = env.run(&["exec", &id, "--", "head -c 600m /dev/zero | tail"]);
    assert_eq!(out.status.code(), Some(137), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("OOM killer") && err.contains("64"), "{err}");
    if !exec_path_is_engine() {
        let out = env.run(&[
            "exec",
            &id,
            "--format",
            "json",
            "--",
            "head -c 600m /dev/zero | tail",
        ]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["oom_killed"], true, "{v}");
        assert_eq!(v["exit_code"], 137);
        // An ordinary exit 137 is no OOM kill.
        let out = env.run(&["exec", &id, "--format", "json", "--", "exit 137"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["oom_killed"], false, "{v}");
    }
}

#[test]
fn the_scratch_volume_is_named_labelled_and_never_leaked() {
    require_container!("a local sandbox has no volume");
    let env = TestEnv::new();
    let id = env.up(&[]);
    let volume = format!("h9sandbox-{}", id.replace('-', ""));
    let labels = Command::new(cli())
        .args(["volume", "inspect", "--format", "{{json .Labels}}", &volume])
        .output()
        .unwrap();
    assert_ok(&labels);
    let labels: serde_json::Value = serde_json::from_slice(&labels.stdout).unwrap();
    assert_eq!(labels["h9sandbox.id"], id.as_str());
    assert_eq!(
        labels["h9sandbox.state_dir"],
        env.state_dir.to_str().unwrap()
    );
    // Removed outside h9sandbox without -v: the volume stays, and `reap` removes it.
    let c = env.container(&id);
    assert_ok(&Command::new(cli()).args(["rm", "-f", &c]).output().unwrap());
    assert_ok(&env.run(&["reap"]));
    let left = Command::new(cli())
        .args(["volume", "ls", "-q", "--filter"])
        .arg(format!(
            "label=h9sandbox.state_dir={}",
            env.state_dir.display()
        ))
        .output()
        .unwrap();
    assert_eq!(stdout(&left), "");
    // `down` removes it too.
    let id = env.up(&[]);
    assert_ok(&env.run(&["down", &id]));
    let left = Command::new(cli())
        .args(["volume", "ls", "-q", "--filter"])
        .arg(format!("label=h9sandbox.id={id}"))
        .output()
        .unwrap();
    assert_eq!(stdout(&left), "");
}

#[test]
fn down_of_several_removes_every_one_it_finds() {
    require_engine!();
    let env = TestEnv::new();
    let a = env.up(&[]);
    let b = env.up(&[]);
    let out = env.run(&["down", &a, "no-such-sandbox", &b]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("no-such-sandbox"), "{err}");
    assert!(
        err.contains("every other sandbox named was removed"),
        "{err}"
    );
    assert_eq!(stdout(&out), format!("{a}\n{b}\n"));
    assert!(env.ls().is_empty());
    assert!(env.containers().is_empty());
}

#[test]
fn run_is_up_exec_down_and_leaves_nothing() {
    require_engine!();
    let env = TestEnv::new();
    let out = env.run(&[
        "run",
        "--memory",
        "128m",
        "--",
        "sh -c 'echo out; echo err >&2; exit 7'",
    ]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert_eq!(stdout(&out), "out\n");
    assert!(stderr(&out).contains("err"), "{}", stderr(&out));
    assert!(env.ls().is_empty());
    assert!(env.containers().is_empty());
    let out = env.run(&["run", "--format", "json", "--", "printf", "%s", "a b"]);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stdout"], "a b");
    assert_eq!(v["id"].as_str().unwrap().len(), 36);
    // A timeout, and SIGTERM while the command runs: removed all the same.
    let out = env.run(&["run", "--timeout", "1", "--", "sleep 60"]);
    assert_eq!(out.status.code(), Some(124));
    let child = env
        .cmd()
        .args(["run", "--", "sleep 60"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while env.ls_raw().iter().all(|r| r["state"] != "Running") {
        assert!(
            Instant::now() < deadline,
            "run never got its sandbox running"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    signal(child.id(), "TERM");
    let out = wait_output(child, Duration::from_secs(60), "run after SIGTERM");
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    assert!(env.ls().is_empty());
    assert!(env.containers().is_empty());
    // h9sandbox's own failure is 125.
    let out = env.run(&[
        "run",
        "--image",
        "h9sandbox-test/does-not-exist:1",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(125));
}

#[test]
fn up_reuse_is_idempotent_and_names_what_differs() {
    require_engine!();
    let env = TestEnv::new();
    let a = env.up(&["--name", "make-target", "--reuse"]);
    let b = env.up(&["--name", "make-target", "--reuse"]);
    assert_eq!(a, b);
    assert_eq!(env.ls().len(), 1);
    let out = env.run(&["up", "--name", "make-target", "--reuse", "--memory", "300m"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("memory 512m, not 300m"),
        "{}",
        stderr(&out)
    );
    // Without --reuse the name is taken.
    let out = env.run(&["up", "--name", "make-target"]);
    assert_eq!(out.status.code(), Some(1));
    // Concurrent first runs (parallel make targets) end with one sandbox.
    let children: Vec<_> = (0..3)
        .map(|_| {
            env.cmd()
                .args(["up", "--name", "parallel", "--reuse"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let ids: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert_ok(&out);
            stdout(&out).trim().to_string()
        })
        .collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
    assert_eq!(env.ls().len(), 2);
}

#[test]
fn run_refuses_a_mistyped_option_and_leaves_nothing_when_up_fails() {
    require_engine!();
    let env = TestEnv::new();
    // Taken for the command, a mistyped option would have made a sandbox with defaults.
    let out = env.run(&["run", "--memroy", "1g", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unknown option '--memroy'"),
        "{}",
        stderr(&out)
    );
    assert!(env.ls_raw().is_empty());
    // A sandbox that fails to start leaves no Failed record either.
    if engine() != Engine::Local {
        let out = env.run(&[
            "run",
            "--image",
            "h9sandbox-test/does-not-exist:1",
            "--",
            "true",
        ]);
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("could not be pulled"),
            "{}",
            stderr(&out)
        );
        assert!(env.ls_raw().is_empty(), "{:?}", env.ls_raw());
        assert!(env.containers().is_empty());
    }
}

#[test]
fn a_down_that_removes_nothing_prints_nothing() {
    let env = TestEnv::new();
    for format in ["table", "json"] {
        let out = env.run(&["down", "deadbeefdead", "--format", format]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert_eq!(stdout(&out), "", "{format}");
    }
}

#[test]
fn an_interrupted_up_leaves_nothing_whatever_its_sigint_disposition() {
    require_container!("a local `up` has no container start to interrupt");
    // The interruption lands between the proxy sidecar and the sandbox's own start.
    if engine() != Engine::Docker || gvisor() {
        return announce("it interrupts an allowlist up, which needs engine docker (not gVisor)");
    }
    let env = TestEnv::new();
    for ignored in [false, true] {
        let what = format!("up (SIGINT ignored: {ignored})");
        let mut cmd = env.cmd();
        cmd.args(["-v", "up", "--allow", "example.com"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        if ignored {
            with_sigint_ignored(&mut cmd);
        }
        let mut up = Watched::spawn(&mut cmd);
        // Ready: the proxy sidecar is being made (the run directory and token exist already),
        // then the sandbox's own `run -d` (attached, `run -i`, in copy mode): interrupted in the
        // middle of the start.
        up.wait_line(Duration::from_secs(60), &what, |l| {
            l.starts_with("+ ")
                && (l.contains(" run -d ") || l.contains(" run -i "))
                && !l.contains("--name h9sandbox-proxy-")
        });
        signal(up.child.id(), "INT");
        let out = up.finish(Duration::from_secs(60), &what);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{what}");
        assert!(
            stderr(&out).contains("h9sandbox: error: interrupted by SIGINT"),
            "{what}: {}",
            stderr(&out)
        );
        env.assert_nothing_left(&what);
    }
}

#[test]
fn an_interrupted_run_leaves_nothing_whatever_its_sigint_disposition() {
    require_engine!();
    if workdir_copied("it waits for a file the command makes in the shared work dir") {
        return;
    }
    let env = TestEnv::new();
    for ignored in [false, true] {
        let what = format!("run (SIGINT ignored: {ignored})");
        let marker = env.path(&format!("started-{ignored}"));
        let script = format!("touch {}; sleep 60", marker.display());
        let mut cmd = env.cmd();
        cmd.args(["run", "--", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if ignored {
            with_sigint_ignored(&mut cmd);
        }
        let child = cmd.spawn().unwrap();
        wait_until(Duration::from_secs(60), &what, || marker.exists());
        signal(child.id(), "INT");
        let out = wait_output(child, Duration::from_secs(60), &what);
        assert_eq!(out.status.code(), Some(130), "{what}: {}", stderr(&out));
        env.assert_nothing_left(&what);
    }
}

#[test]
fn a_run_interrupted_during_its_bootstrap_ends_as_the_signal_says_and_leaves_nothing() {
    require_engine!();
    if workdir_copied("it waits for a file the bootstrap makes in the shared work dir") {
        return;
    }
    let env = TestEnv::new();
    let what = "run interrupted in its bootstrap";
    let marker = env.path("bootstrapping");
    let mut cmd = env.cmd();
    cmd.args([
        "run",
        "--bootstrap",
        &format!("touch {}; sleep 60", marker.display()),
        "--",
        "echo never",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_until(Duration::from_secs(60), what, || marker.exists());
    signal(child.id(), "INT");
    let out = wait_output(child, Duration::from_secs(60), what);
    // As an interrupted command: 128 + SIGINT, not h9sandbox's own failure (125).
    assert_eq!(out.status.code(), Some(130), "{what}: {}", stderr(&out));
    assert!(
        stderr(&out).contains("interrupted by SIGINT during the bootstrap"),
        "{}",
        stderr(&out)
    );
    assert!(!stdout(&out).contains("never"), "{}", stdout(&out));
    env.assert_nothing_left(what);
}

#[test]
fn the_commands_processes_are_the_oom_killers_first_choice_not_the_agent() {
    require_container!("a local sandbox has no memory limit");
    if gvisor() {
        return announce("gVisor's OOM scores are its own");
    }
    let env = TestEnv::new();
    let id = env.up(&["--memory", "64m"]);
    for user in ["0", "1000"] {
        let out = env.run(&[
            "exec",
            "-u",
            user,
            &id,
            "--",
            "sh -c 'cat /proc/self/oom_score_adj'; cat /proc/1/oom_score_adj",
        ]);
        assert_ok(&out);
        let shown = stdout(&out);
        let v: Vec<i32> = shown.lines().map(|l| l.trim().parse().unwrap()).collect();
        assert_eq!(v.len(), 2, "{shown}");
        assert_eq!(v[0], 1000, "user {user}: the command's score, {shown}");
        assert!(
            v[1] < 1000,
            "user {user}: PID 1's score is the engine's, {shown}"
        );
    }
    // A command at the limit goes; the sandbox goes on serving.
    let out = env.run(&["exec", &id, "--", "head -c 600m /dev/zero | tail"]);
    assert_eq!(out.status.code(), Some(137), "{}", stderr(&out));
    assert_ok(&env.run(&["exec", &id, "--", "true"]));
}
