//! Attacks from inside a sandbox (and from hostile input) that must not reach the host, found by
//! adversarial review; each test reproduces one.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::common::*;

#[test]
fn planted_project_config_cannot_choose_the_engine_binary() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    // Code in the sandbox writes a script and a sandbox.toml pointing engine_bin at it.
    let plant = "printf '#!/bin/sh\\ntouch \"$PWD/pwned\"\\nexec docker \"$@\"\\n' > evil.sh; chmod +x evil.sh; \
                 echo \"engine_bin = \\\"$PWD/evil.sh\\\"\" > sandbox.toml";
    assert_ok(&env.run(&["exec", &id, "--", plant]));
    assert!(env.path("sandbox.toml").exists());
    // Commands on the sandbox never read it; `up` ignores it (not trusted).
    assert_ok(&env.run(&["exec", &id, "--", "true"]));
    let out = env.run(&["up"]);
    assert_ok(&out);
    assert!(stderr(&out).contains("not trusted"), "{}", stderr(&out));
    // Nor can it be trusted: engine_bin acts on the host.
    let out = env.run(&["trust"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not allowed in a project's sandbox.toml"),
        "{}",
        stderr(&out)
    );
    assert!(
        !env.path("pwned").exists(),
        "the planted engine_bin ran on the host"
    );
    std::fs::remove_file(env.path("sandbox.toml")).unwrap();
}

#[test]
fn timeout_holds_when_the_container_tools_are_replaced() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    // Replace the tools an in-container kill helper would use with ones that hang.
    let sabotage = "for t in tr grep kill; do rm -f /bin/$t; printf '#!/bin/sh\\nexec sleep 100000\\n' > /bin/$t; chmod +x /bin/$t; done";
    assert_ok(&env.run(&["exec", &id, "--", sabotage]));
    let out = env.run(&["exec", &id, "--timeout", "2", "--", "sleep 500 & sleep 501"]);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("and its whole process tree in sandbox")
            && stderr(&out).contains("were killed (exit 124)"),
        "{}",
        stderr(&out)
    );
    let ps = stdout(&env.run(&["exec", &id, "--", "ps -o args"]));
    assert!(!ps.contains("sleep 50"), "left behind:\n{ps}");
}

#[test]
fn a_dead_reader_ends_the_command() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    // `head` exits after one line; the client dies of SIGPIPE; `yes` must not run on.
    let bin = assert_cmd::cargo::cargo_bin("h9sandbox");
    let sh = env.cmd();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' exec {id} -- 'yes' | head -n 1",
            bin.display()
        ))
        .envs(
            sh.get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .current_dir(&env.workdir)
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "y\n");
    std::thread::sleep(Duration::from_millis(500));
    let ps = stdout(&env.run(&["exec", &id, "--", "ps -o args"]));
    assert!(
        !ps.lines().any(|l| l.trim() == "yes"),
        "`yes` runs on:\n{ps}"
    );
}

#[test]
fn hostile_images_and_names_are_refused() {
    let env = TestEnv::new();
    let out = env.run(&["up", "--image=--privileged"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not an image reference"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["up", "--name", "deadbeef"]);
    assert!(
        stderr(&out).contains("look like sandbox IDs"),
        "{}",
        stderr(&out)
    );
    assert!(env.ls_raw().is_empty());
}

#[test]
fn control_characters_are_refused_in_labels_and_the_state_directory() {
    let env = TestEnv::new();
    // A label that would clear the terminal of whoever lists it, and forge a line.
    let out = env.run(&["up", "--label", "k=v\u{1b}[2J\nx"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("control character"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains('\u{1b}'), "{:?}", stderr(&out));
    assert!(env.ls_raw().is_empty());
    assert!(env.containers().is_empty());
    // A state directory whose path holds an escape and a newline (it ends up in every
    // container's labels): refused by every command, and never created.
    let odd = env.root.path().join("state\u{1b}[2J\nx");
    for args in [&["ls"][..], &["up"][..], &["reap"][..]] {
        let out = env
            .cmd()
            .env("H9SANDBOX_STATE_DIR", &odd)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("control character"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert!(!odd.exists());
}

#[test]
fn sensitive_work_directories_are_refused() {
    let env = TestEnv::new();
    for (dir, why) in [
        ("/etc", "system directory"),
        ("/proc", "the kernel's file system"),
        ("/var", "work directory /var"),
        (env.root.path().to_str().unwrap(), "your home directory"),
        (env.state_dir.to_str().unwrap(), "state directory"),
    ] {
        let out = env.run(&["up", "--workdir", dir]);
        assert_eq!(out.status.code(), Some(1), "{dir}");
        assert!(stderr(&out).contains(why), "{dir}: {}", stderr(&out));
    }
    assert!(env.ls_raw().is_empty());
}

#[test]
fn down_with_the_engine_unreachable_keeps_the_record_true() {
    require_docker!();
    let env = TestEnv::new();
    let host = env.daemon_link();
    let out = env
        .cmd()
        .env("DOCKER_HOST", &host)
        .arg("up")
        .output()
        .unwrap();
    assert_ok(&out);
    let id = stdout(&out).trim().to_string();
    env.daemon_away();
    let before = std::fs::read(env.state_dir.join("state.json")).unwrap();
    let out = env
        .cmd()
        .args(["down", &id])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let after: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.state_dir.join("state.json")).unwrap()).unwrap();
    let before: serde_json::Value = serde_json::from_slice(&before).unwrap();
    assert_eq!(
        after["sandboxes"][0]["state"],
        before["sandboxes"][0]["state"]
    );
    env.daemon_back();
    assert_eq!(env.entry(&id)["state"], "Running");
}

#[test]
fn planted_project_config_cannot_switch_to_the_local_engine() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    // From inside: ask for no isolation, and a bootstrap that would then run on the host.
    let plant =
        "printf 'engine = \"local\"\\nbootstrap_cmd = \"touch $PWD/pwned\"\\n' > sandbox.toml";
    assert_ok(&env.run(&["exec", &id, "--", plant]));
    let out = env
        .cmd()
        .env_remove("H9SANDBOX_ENGINE")
        .args(["up", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(stderr(&out).contains("not trusted"), "{}", stderr(&out));
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["engine"], "docker");
    let out = env.run(&["trust"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("key `engine`"), "{}", stderr(&out));
    assert!(
        !env.path("pwned").exists(),
        "the planted bootstrap ran on the host"
    );
    std::fs::remove_file(env.path("sandbox.toml")).unwrap();
}

#[test]
fn a_garbled_project_config_cannot_block_cleanup() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&[]);
    assert_ok(&env.run(&["exec", &id, "--", "echo 'garbage [' > sandbox.toml"]));
    // Commands on the sandbox never read it: they work, and say nothing about it.
    for args in [
        vec!["exec", id.as_str(), "--", "true"],
        vec!["ls"],
        vec!["reap"],
    ] {
        let out = env.run(&args);
        assert_ok(&out);
        assert!(stderr(&out).is_empty(), "{args:?}: {}", stderr(&out));
    }
    assert_ok(&env.run(&["down", &id]));
    assert!(env.containers().is_empty());
}

#[test]
fn a_work_dir_swapped_for_a_symlink_is_refused_by_the_file_commands() {
    require_docker!();
    let env = TestEnv::new();
    // A sandbox whose work dir lies inside a directory someone else (a parent sandbox) controls.
    let inner = env.path("inner");
    std::fs::create_dir(&inner).unwrap();
    let id = env.up(&["--workdir", inner.to_str().unwrap()]);
    let outside = env.root.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret"), "host secret\n").unwrap();
    // The controller swaps the directory for a symlink to somewhere else on the host.
    std::fs::rename(&inner, env.path("inner.real")).unwrap();
    std::os::unix::fs::symlink(&outside, &inner).unwrap();
    let out = env.run(&["read", &id, "secret"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!stdout(&out).contains("host secret"));
    assert!(stderr(&out).contains("symlink"), "{}", stderr(&out));
    let out = env
        .cmd()
        .args(["write", &id, "planted"])
        .stdin(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!outside.join("planted").exists());
}

#[test]
fn the_project_file_is_layered_over_the_users_configuration() {
    require_docker!();
    let env = TestEnv::new();
    let xdg = env.root.path().join("xdg");
    std::fs::create_dir_all(xdg.join("h9sandbox")).unwrap();
    std::fs::write(xdg.join("h9sandbox/config.toml"), "memory = \"300m\"\n").unwrap();
    std::fs::write(env.path("sandbox.toml"), "pids_limit = 77\n").unwrap();
    assert_ok(&env.run(&["trust"]));
    let out = env
        .cmd()
        .env("XDG_CONFIG_HOME", &xdg)
        .arg("up")
        .output()
        .unwrap();
    assert_ok(&out);
    let c = env.container(stdout(&out).trim());
    assert_eq!(
        inspect(&c, "{{.HostConfig.Memory}}"),
        (300u64 << 20).to_string()
    );
    assert_eq!(inspect(&c, "{{.HostConfig.PidsLimit}}"), "77");
}

#[test]
fn a_parent_swapping_a_childs_work_dir_cannot_make_it_mount_the_host() {
    require_docker!();
    let env = TestEnv::new();
    std::fs::create_dir(env.path("inner")).unwrap();
    let outside = env.root.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let parent = env.up(&[]);
    // The parent swaps `inner` for a symlink to a host directory, over and over.
    let swap = format!(
        "(while :; do mv inner D && ln -s {o} inner; usleep 20000; rm inner; mv D inner; usleep 20000; done) >/dev/null 2>&1 &",
        o = outside.display()
    );
    assert_ok(&env.run(&["exec", &parent, "--", &swap]));
    let mut started = 0;
    for i in 0..25 {
        let out = env.run(&["up", "--parent", &parent, "--workdir", "inner"]);
        if !out.status.success() {
            continue;
        }
        started += 1;
        let child = stdout(&out).trim().to_string();
        let _ = env.run(&["exec", &child, "--", &format!("echo x > probe-{i}")]);
    }
    let leaked: Vec<_> = std::fs::read_dir(&outside).unwrap().collect();
    assert!(
        leaked.is_empty(),
        "{} of {started} children mounted the host directory",
        leaked.len()
    );
}

#[test]
fn a_work_dir_holding_another_state_directory_is_refused() {
    require_docker!();
    let env = TestEnv::new();
    // Another session's state directory, with a live sandbox, inside our work dir.
    let victim_state = env.path("victim-state");
    let victim_work = env.root.path().join("victim-work");
    std::fs::create_dir_all(&victim_work).unwrap();
    let victim = |args: &[&str]| {
        env.cmd()
            .env("H9SANDBOX_STATE_DIR", &victim_state)
            .args(args)
            .output()
            .unwrap()
    };
    let out = victim(&["up", "--workdir", victim_work.to_str().unwrap()]);
    assert_ok(&out);
    let out = env.run(&["up"]);
    let removed = victim(&["down", "--all"]);
    assert_ok(&removed);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("contains the state directory"),
        "{}",
        stderr(&out)
    );
    assert!(
        env.containers().is_empty(),
        "the refused container was left"
    );
}

/// `up --workdir DIR` (with `env`'s configuration and `extra` environment); asserts it is
/// refused with exit 1 and one line naming `needle`, and that nothing was recorded.
fn refused_workdir(env: &TestEnv, dir: &Path, needle: &str, extra: &[(&str, &str)]) -> String {
    let out = env
        .cmd()
        .args(["up", "--workdir"])
        .arg(dir)
        .envs(extra.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{}: {err}", dir.display());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("h9sandbox: error: ") && err.contains(needle),
        "{}: {err}",
        dir.display()
    );
    assert!(env.ls_raw().is_empty());
    err
}

#[test]
fn work_dirs_that_lead_to_the_hosts_secrets_or_code_are_refused() {
    let env = TestEnv::new();
    let home = env.root.path(); // TestEnv's HOME
    std::fs::create_dir_all(home.join(".ssh/keys")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    std::fs::create_dir_all(home.join(".config/gcloud")).unwrap();
    // A dot-directory that is a symlink to somewhere outside the home.
    let dotfiles = tempfile::Builder::new().prefix("h9dot").tempdir().unwrap();
    std::fs::create_dir(dotfiles.path().join("aws")).unwrap();
    std::os::unix::fs::symlink(dotfiles.path().join("aws"), home.join(".aws")).unwrap();
    // Where host code and configuration live.
    let usr_local = tempfile::Builder::new()
        .prefix("h9test")
        .tempdir_in("/usr/local")
        .unwrap();
    let var_log = tempfile::Builder::new()
        .prefix("h9test")
        .tempdir_in("/var/log")
        .unwrap();
    let dot = "one of your home's dot-directories";
    for (dir, rule) in [
        (home.join(".ssh"), dot),
        (home.join(".ssh/keys"), dot),
        (home.join(".config/gcloud"), dot),
        (dotfiles.path().join("aws"), dot),
        (dotfiles.path().to_path_buf(), dot),
        (usr_local.path().to_path_buf(), "system directory /usr"),
        (var_log.path().to_path_buf(), "system directory /var"),
    ] {
        let err = refused_workdir(&env, &dir, rule, &[]);
        assert!(err.contains("allowed_workdirs"), "{err}");
    }
    // Another user's home (root's, when HOME is elsewhere, as here).
    if std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("root:") && l.split(':').nth(5) == Some("/root"))
    {
        refused_workdir(
            &env,
            Path::new("/root"),
            "the home directory /root of user root",
            &[],
        );
    }
    // The home itself, or a directory holding it, is never a work dir, whatever is allowed.
    let other_home = tempfile::Builder::new().prefix("h9home").tempdir().unwrap();
    let xdg = tempfile::Builder::new().prefix("h9xdg").tempdir().unwrap();
    std::fs::create_dir_all(xdg.path().join("h9sandbox")).unwrap();
    std::fs::write(
        xdg.path().join("h9sandbox/config.toml"),
        format!("allowed_workdirs = [\"{}\"]\n", other_home.path().display()),
    )
    .unwrap();
    let vars = [
        ("HOME", other_home.path().to_str().unwrap()),
        ("XDG_CONFIG_HOME", xdg.path().to_str().unwrap()),
    ];
    let err = refused_workdir(&env, other_home.path(), "your home directory", &vars);
    assert!(err.contains("cannot allow"), "{err}");
    assert!(!err.contains("allow it in"), "{err}");
    refused_workdir(&env, Path::new("/tmp"), "/tmp", &[]);
    assert_eq!(
        std::fs::read_to_string(home.join(".ssh/id_ed25519")).unwrap(),
        "PRIVATE KEY\n"
    );
}

#[test]
fn projects_under_home_and_directories_under_tmp_keep_working() {
    require_container!("the accepted work dirs are mounted into containers");
    let env = TestEnv::new();
    std::fs::create_dir_all(env.root.path().join(".ssh")).unwrap();
    // A project under HOME (TestEnv's work dir), and a directory under /tmp outside HOME.
    let id = env.up(&[]);
    assert_eq!(env.entry(&id)["workdir"], env.workdir.to_str().unwrap());
    let scratch = tempfile::Builder::new().prefix("h9wd").tempdir().unwrap();
    let id = env.up(&["--workdir", scratch.path().to_str().unwrap()]);
    assert_ok(&env.run(&["exec", &id, "--", "echo hi > made-here"]));
    assert!(scratch.path().join("made-here").exists());
    assert_ok(&env.run(&["down", "--all"]));
}

#[test]
fn only_the_users_own_configuration_can_allow_a_work_dir() {
    require_container!("the allowed work dir is mounted into a container");
    let env = TestEnv::new();
    let home = env.root.path();
    let usr_local = tempfile::Builder::new()
        .prefix("h9test")
        .tempdir_in("/usr/local")
        .unwrap();
    let allow = format!("allowed_workdirs = [\"{}\"]\n", usr_local.path().display());
    // Not from the project's sandbox.toml, which a sandbox can write: untrusted, it is ignored
    // (the work dir stays refused), and it cannot be trusted either.
    std::fs::write(env.path("sandbox.toml"), &allow).unwrap();
    let out = env
        .cmd()
        .args(["up", "--workdir"])
        .arg(usr_local.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("lies in the system directory /usr"),
        "{}",
        stderr(&out)
    );
    assert!(env.ls_raw().is_empty());
    let out = env.run(&["trust"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("allowed_workdirs") && stderr(&out).contains("sandbox.toml"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_file(env.path("sandbox.toml")).unwrap();
    // ...nor from the environment.
    let value = format!("[\"{}\"]", usr_local.path().display());
    let err = refused_workdir(
        &env,
        usr_local.path(),
        "H9SANDBOX_ALLOWED_WORKDIRS",
        &[("H9SANDBOX_ALLOWED_WORKDIRS", &value)],
    );
    assert!(err.contains("configuration file"), "{err}");
    // The user's own file allows it (and what lies inside it).
    std::fs::create_dir_all(home.join(".config/h9sandbox")).unwrap();
    std::fs::write(home.join(".config/h9sandbox/config.toml"), &allow).unwrap();
    std::fs::create_dir(usr_local.path().join("sub")).unwrap();
    for dir in [usr_local.path().to_path_buf(), usr_local.path().join("sub")] {
        let id = env.up(&["--workdir", dir.to_str().unwrap()]);
        assert_eq!(env.entry(&id)["workdir"], dir.to_str().unwrap());
    }
    assert_ok(&env.run(&["down", "--all"]));
    // It never allows what no configuration may: the state directory, /proc.
    std::fs::write(
        home.join(".config/h9sandbox/config.toml"),
        format!(
            "allowed_workdirs = [\"{}\", \"/proc\"]\n",
            env.state_dir.display()
        ),
    )
    .unwrap();
    refused_workdir(&env, &env.state_dir, "state directory", &[]);
    refused_workdir(&env, Path::new("/proc/self"), "/proc", &[]);
}

#[test]
fn an_image_healthcheck_never_runs_beside_the_set_id_filter() {
    require_container!("a local sandbox has no image");
    let env = TestEnv::new();
    // The engine's exec would run an image's HEALTHCHECK as the container's user (root), in
    // the work dir, outside PID 1's tree: without the set-ID filter.
    let ctx = env.root.path().join("hc-ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(
        ctx.join("Dockerfile"),
        format!("FROM {TINY}\nHEALTHCHECK --interval=1s CMD cp /bin/busybox ./s; chmod 4755 ./s\n"),
    )
    .unwrap();
    let img = "h9sandbox-test/healthcheck-setuid:latest";
    let out = std::process::Command::new(cli())
        .args(["build", "-q", "-t", img])
        .arg(&ctx)
        .output()
        .unwrap();
    assert_ok(&out);
    let id = env.up(&["--image", img]);
    std::thread::sleep(Duration::from_secs(3));
    if let Ok(m) = std::fs::metadata(env.path("s")) {
        assert_eq!(
            m.permissions().mode() & 0o6000,
            0,
            "the image's HEALTHCHECK left a set-UID file in the work dir"
        );
    }
    assert!(inspect(&env.container(&id), "{{json .Config.Healthcheck}}").contains("NONE"));
    assert_ok(&env.run(&["down", &id]));
}

/// `setpriv` arguments running a command as uid 1000 with the group of the engine's socket, as
/// a member of the `docker` group would (the common setup for a non-root user).
fn as_docker_user() -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let sock = std::fs::metadata("/var/run/docker.sock").expect("the Docker socket");
    vec![
        "--reuid".into(),
        "1000".into(),
        "--regid".into(),
        "1000".into(),
        "--groups".into(),
        sock.gid().to_string(),
        "--".into(),
    ]
}

#[test]
fn start_mounts_only_the_work_dir_up_checked_for_root_and_non_root() {
    require_docker!();
    if engine() != Engine::Docker {
        return announce("drives Docker through a wrapper client");
    }
    for non_root in [false, true] {
        let env = TestEnv::new();
        std::fs::set_permissions(env.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        // A stand-in home with a key and a start-up file, beside the project.
        let home = env.root.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
        std::fs::write(home.join(".bashrc"), "# mine\n").unwrap();
        let parent = env.root.path().join("parent");
        let work = parent.join("w");
        std::fs::create_dir_all(&work).unwrap();
        // The engine client used for `start` swaps the work dir for a symlink to the home right
        // before the engine mounts it, and back right after (the race a parent sandbox, which
        // can write the work dir's parent, wins): the host's checks before and after see the
        // real directory.
        let client = env.root.path().join("docker-racing");
        std::fs::write(
            &client,
            format!(
                "#!/bin/sh\nif [ \"$1\" = start ]; then\n  mv {w} {w}.real && ln -s {h} {w}\n  docker \"$@\"; rc=$?\n  rm {w} && mv {w}.real {w}\n  exit $rc\nfi\nexec docker \"$@\"\n",
                w = work.display(),
                h = home.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
        if non_root {
            for d in [&env.state_dir, &parent, &work, &home] {
                std::os::unix::fs::chown(d, Some(1000), Some(1000)).unwrap();
            }
        }
        let h9 = |args: &[&str], racing: bool| {
            let mut c = if non_root {
                let mut c = env.program("setpriv");
                c.args(as_docker_user())
                    .arg(assert_cmd::cargo::cargo_bin("h9sandbox"));
                c
            } else {
                env.cmd()
            };
            c.current_dir(&work).args(args).stdin(Stdio::null());
            if racing {
                c.env("H9SANDBOX_ENGINE_BIN", &client);
            }
            c.output().unwrap()
        };
        let out = h9(&["up", "--user", "root"], false);
        assert_ok(&out);
        let id = stdout(&out).trim().to_string();
        assert_ok(&h9(&["stop", &id], false));
        let out = h9(&["start", &id], true);
        assert_eq!(
            out.status.code(),
            Some(1),
            "non-root {non_root}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("mounted another directory"),
            "non-root {non_root}: {}",
            stderr(&out)
        );
        // What it started was stopped again, and the record says so.
        let ls: Vec<serde_json::Value> =
            serde_json::from_slice(&h9(&["ls", "--format", "json"], false).stdout).unwrap();
        let rec = ls.into_iter().find(|e| e["id"] == id.as_str()).unwrap();
        let c = rec["container_id"].as_str().unwrap();
        assert_eq!(
            inspect(c, "{{.State.Running}}"),
            "false",
            "non-root {non_root}"
        );
        assert_eq!(rec["state"], "Stopped", "non-root {non_root}: {rec}");
        assert!(
            rec["error"]
                .as_str()
                .unwrap_or("")
                .contains("mounted another directory"),
            "{rec}"
        );
        // Nothing of the home was reached, and an honest start works.
        assert_eq!(
            std::fs::read_to_string(home.join(".bashrc")).unwrap(),
            "# mine\n"
        );
        assert_ok(&h9(&["start", &id], false));
        let out = h9(&["exec", &id, "--", "ls -a"], false);
        assert_ok(&out);
        assert!(!stdout(&out).contains(".ssh"), "{}", stdout(&out));
        assert_ok(&h9(&["down", &id], false));
    }
}

#[test]
fn nothing_the_sandbox_leaves_in_its_run_dir_jams_start_or_outlives_down() {
    require_docker!();
    if engine() != Engine::Docker {
        return announce("runs the non-root host user against Docker's socket");
    }
    for non_root in [false, true] {
        let env = TestEnv::new();
        std::fs::set_permissions(env.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        if non_root {
            for d in [&env.state_dir, &env.workdir] {
                std::os::unix::fs::chown(d, Some(1000), Some(1000)).unwrap();
            }
        }
        let h9 = |args: &[&str]| {
            let mut c = if non_root {
                let mut c = env.program("setpriv");
                c.args(as_docker_user())
                    .arg(assert_cmd::cargo::cargo_bin("h9sandbox"));
                c
            } else {
                env.cmd()
            };
            c.args(args).stdin(Stdio::null()).output().unwrap()
        };
        let out = h9(&["up", "--user", "root"]);
        assert_ok(&out);
        let id = stdout(&out).trim().to_string();
        // Root in the sandbox fills the run directory: a directory where the next token goes,
        // a stale ready file's stand-in, a tree its host user cannot delete.
        let plant = "cd /.h9sandbox/run && mkdir token && echo x > token/f && rm -f ready && \
                     mkdir ready && mkdir -p junk/sub && echo y > junk/sub/f && chmod 0500 junk/sub && \
                     ln -s /etc/passwd link";
        assert_ok(&h9(&["exec", &id, "--", plant]));
        assert_ok(&h9(&["stop", &id]));
        let out = h9(&["start", &id]);
        assert_ok(&out);
        let out = h9(&["-v", "exec", &id, "--", "echo through the agent"]);
        assert_ok(&out);
        assert_eq!(stdout(&out), "through the agent\n");
        assert!(
            !stderr(&out).contains(" exec "),
            "went through the engine's exec: {}",
            stderr(&out)
        );
        assert_ok(&h9(&["exec", &id, "--", plant]));
        assert_ok(&h9(&["down", &id]));
        let left: Vec<String> = std::fs::read_dir(env.state_dir.join("run"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert!(left.is_empty(), "non-root {non_root}: left {left:?}");
    }
}
