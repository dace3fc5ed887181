//! `up --devcontainer`: sandboxes made from devcontainer.json files in the shapes the Dev
//! Containers specification documents (an image, a Dockerfile build, a Docker Compose
//! configuration refused, lifecycle commands in their three forms) and one real file from a
//! public project (tests/fixtures/devcontainer), against the real Docker Engine. Their images are
//! built from the local test images (no registry): the Debian one, and the Python one
//! (`h9sandbox-test/python:bookworm`, scripts/build-test-images.sh).

use std::path::Path;

use crate::common::*;

/// Writes `text` to `rel` under `root`, making the directories.
fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Removes the image `.0` when dropped (the tests build images of their own), after the
/// containers of the test's state directory `.1` (a failed assertion leaves its sandbox
/// running, and an image in use is only untagged) and the derived images of it.
struct RemoveImage(String, std::path::PathBuf);

impl Drop for RemoveImage {
    fn drop(&mut self) {
        let label = format!("label=h9sandbox.state_dir={}", self.1.display());
        let ids = std::process::Command::new(cli())
            .args(["ps", "-aq", "--filter", &label])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
            .unwrap_or_default();
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if !ids.is_empty() {
            let _ = std::process::Command::new(cli())
                .args(["rm", "-f"])
                .args(&ids)
                .output();
        }
        // First its derived image (made with the work dir copied), which would keep it.
        let id = std::process::Command::new(cli())
            .args(["image", "inspect", "--format", "{{.Id}}", &self.0])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let short: String = id.trim_start_matches("sha256:").chars().take(12).collect();
        if !short.is_empty() {
            let refs = std::process::Command::new(cli())
                .args(["image", "ls", "h9sandbox-agent", "--format"])
                .arg("{{.Repository}}:{{.Tag}}")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
                .unwrap_or_default();
            let prefix = format!("h9sandbox-agent:{short}-");
            let derived: Vec<&str> = refs
                .split_whitespace()
                .filter(|r| r.starts_with(&prefix))
                .collect();
            if !derived.is_empty() {
                let _ = std::process::Command::new(cli())
                    .args(["image", "rm", "-f"])
                    .args(&derived)
                    .output();
            }
        }
        let _ = std::process::Command::new(cli())
            .args(["image", "rm", "-f", &self.0])
            .output();
    }
}

/// The image `up` ran for the sandbox `id`, removed when the guard is dropped.
fn built_image(env: &TestEnv, id: &str) -> RemoveImage {
    let image = env.entry(id)["image"].as_str().unwrap().to_string();
    assert!(image.starts_with("h9sandbox-devcontainer-"), "{image}");
    RemoveImage(image, env.state_dir.clone())
}

/// The file `rel` of the sandbox `id`'s work dir ("" when it has none), read in the sandbox
/// (`h9sandbox read`): the same with the work dir mounted or copied in.
fn read_in(env: &TestEnv, id: &str, rel: &str) -> String {
    let out = env.run(&["read", id, env.path(rel).to_str().unwrap()]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The warning lines of `stderr` about the devcontainer.json.
fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("h9sandbox: warning:") && l.contains("devcontainer.json: "))
        .collect()
}

#[test]
fn an_image_configuration_gives_env_user_and_lifecycle_commands() {
    require_images!(DEBIAN);
    let env = TestEnv::new();
    std::os::unix::fs::chown(&env.workdir, Some(1000), Some(1000)).unwrap();
    put(
        &env.workdir,
        ".devcontainer/devcontainer.json",
        &format!(
            r#"// The image shape of the specification, with comments and trailing commas.
{{
  "name": "image shape",
  "image": "{DEBIAN}",
  "containerEnv": {{ "GREETING": "hello from ${{localWorkspaceFolderBasename}}", }},
  "remoteEnv": {{ "PATH": "${{containerEnv:PATH}}:/opt/tools", "FROM_HOST": "${{localEnv:HOME}}" }},
  "remoteUser": "1000:1000",
  "postCreateCommand": {{ "one": "echo one > one.txt", "two": ["sh", "-c", "echo two > two.txt"] }},
  "postStartCommand": "id -u > uid.txt; echo \"$GREETING\" > greeting.txt",
  "forwardPorts": [3000, "db:5432"],
  "features": {{ "ghcr.io/devcontainers/features/node:1": {{}} }},
  "frobnicate": true,
  "customizations": {{ "vscode": {{ "extensions": ["ms-python.python"] }} }},
}}"#
        ),
    );
    let out = env.run(&["up", "--devcontainer"]);
    assert_ok(&out);
    let id = stdout(&out).trim().to_string();
    let err = stderr(&out);
    // One warning for what it does not honour, one for the ports; editors' keys draw none.
    let w = warnings(&err);
    assert_eq!(w.len(), 2, "{err}");
    for part in [
        "not honoured: features (ghcr.io/devcontainers/features/node:1",
        "frobnicate",
        "remoteEnv.FROM_HOST: ${localEnv:HOME}",
    ] {
        assert!(w[0].contains(part), "{part}: {}", w[0]);
    }
    assert!(!w[0].contains("customizations"), "{}", w[0]);
    assert!(
        w[1].contains("forwardPorts 3000, db:5432 recorded") && w[1].contains("not forwarded"),
        "{}",
        w[1]
    );
    // The lifecycle commands ran, as the remote user, in the work dir, in order.
    let read = |f: &str| read_in(&env, &id, f);
    assert_eq!(
        (read("one.txt"), read("two.txt"), read("uid.txt")),
        ("one\n".into(), "two\n".into(), "1000\n".into()),
        "{err}"
    );
    let base = env.workdir.file_name().unwrap().to_string_lossy();
    assert_eq!(read("greeting.txt"), format!("hello from {base}\n"));
    // Every command of the sandbox gets the environment and the user.
    let out = env.run(&[
        "exec",
        &id,
        "--",
        "echo $GREETING; echo $PATH; id -u; echo [$FROM_HOST]",
    ]);
    assert_ok(&out);
    let lines: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert_eq!(lines[0], format!("hello from {base}"));
    assert!(lines[1].ends_with(":/opt/tools"), "{}", lines[1]);
    assert_eq!((lines[2].as_str(), lines[3].as_str()), ("1000", "[]"));
    // The record keeps the file, the ports and the environment; the hardening is h9sandbox's.
    let rec = env.entry(&id);
    let dc = &rec["devcontainer"];
    assert_eq!(dc["forward_ports"], serde_json::json!(["3000", "db:5432"]));
    assert_eq!(dc["built"], false);
    assert!(dc["config"]
        .as_str()
        .unwrap()
        .ends_with(".devcontainer/devcontainer.json"));
    assert_eq!(rec["user"], "1000:1000");
    assert!(rec["bootstrap"]["cmd"]
        .as_str()
        .unwrap()
        .starts_with("# the lifecycle commands of"));
    let container = env.container(&id);
    assert_eq!(
        inspect(&container, "{{json .HostConfig.CapDrop}}"),
        "[\"ALL\"]"
    );
    assert!(inspect(&container, "{{json .HostConfig.SecurityOpt}}").contains("no-new-privileges"));
    assert!(inspect(&container, "{{json .Config.Env}}").contains("GREETING=hello from"));

    // The flags given beat the file: another user, and no bootstrap at all.
    let out = env.run(&["up", "--devcontainer", "--user", "0:0", "--bootstrap", ""]);
    assert_ok(&out);
    let id2 = stdout(&out).trim().to_string();
    let out = env.run(&["exec", &id2, "--", "id -u"]);
    assert_eq!(stdout(&out), "0\n");
    assert!(env.entry(&id2)["bootstrap"].is_null());
    assert_ok(&env.run(&["down", &id, &id2]));
}

#[test]
fn a_dockerfile_configuration_is_built_with_the_engine() {
    require_images!(DEBIAN);
    let env = TestEnv::new();
    put(
        &env.workdir,
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {DEBIAN}\nARG TOOL_VERSION=none\nRUN useradd -m -u 1234 -s /bin/sh dev && echo \"$TOOL_VERSION\" > /tool-version\n"
        ),
    );
    put(
        &env.workdir,
        ".devcontainer/devcontainer.json",
        r#"{
  "build": { "dockerfile": "Dockerfile", "context": "..", "args": { "TOOL_VERSION": "1.2.${devcontainerId}" } },
  "remoteUser": "dev",
  "workspaceFolder": "/workspaces/${localWorkspaceFolderBasename}",
  "onCreateCommand": "cat /tool-version > version.txt",
  "postCreateCommand": ["sh", "-c", "pwd -P > where.txt; echo $HOME > home.txt"],
  "runArgs": ["--init", "--network=none", "--memory", "128m", "-e", "FROM_RUN_ARGS=1"]
}"#,
    );
    std::os::unix::fs::chown(&env.workdir, Some(1234), Some(1234)).unwrap();
    let out = env.run(&["up", "--devcontainer", ".", "--format", "json"]);
    assert_ok(&out);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = rec["id"].as_str().unwrap().to_string();
    let _image = built_image(&env, &id);
    assert_eq!(rec["devcontainer"]["built"], true);
    assert_eq!(rec["user"], "1234:1234", "{}", stderr(&out));
    let read = |f: &str| read_in(&env, &id, f);
    assert!(read("version.txt").starts_with("1.2."), "{}", stderr(&out));
    assert_eq!(read("home.txt"), "/home/dev\n");
    assert_eq!(read("where.txt").trim(), env.workdir.to_str().unwrap());
    // The workspace folder reaches the work dir.
    let base = env
        .workdir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = env.run(&[
        "exec",
        &id,
        "--",
        &format!("cd /workspaces/{base} && pwd -P && echo $FROM_RUN_ARGS"),
    ]);
    assert_eq!(
        stdout(&out),
        format!("{}\n1\n", env.workdir.display()),
        "{}",
        stderr(&out)
    );
    // runArgs tightened the limits and the network; nothing else of Docker's was passed.
    let container = env.container(&id);
    assert_eq!(inspect(&container, "{{.HostConfig.NetworkMode}}"), "none");
    assert_eq!(
        inspect(&container, "{{.HostConfig.Memory}}"),
        (128u64 << 20).to_string()
    );
    assert_eq!(rec["limits"]["network"], "none");
    // The built image is labelled with its configuration.
    let label = inspect(
        rec["image"].as_str().unwrap(),
        "{{index .Config.Labels \"h9sandbox.devcontainer\"}}",
    );
    assert!(
        label.ends_with(".devcontainer/devcontainer.json"),
        "{label}"
    );
    assert_ok(&env.run(&["down", &id]));
}

#[test]
fn what_would_loosen_the_sandbox_is_refused_and_nothing_is_left() {
    require_images!(DEBIAN);
    let env = TestEnv::new();
    let image = |rest: &str| format!(r#"{{ "image": "{DEBIAN}", {rest} }}"#);
    let cases: Vec<(String, &str)> = vec![
        (
            r#"{ "dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/w" }"#.into(),
            "is a Docker Compose configuration (`dockerComposeFile`), which h9sandbox does not run",
        ),
        (
            image(r#""runArgs": ["--cap-add=SYS_PTRACE", "--security-opt", "seccomp=unconfined"]"#),
            "`runArgs` \"--cap-add SYS_PTRACE\" would loosen the sandbox's hardening",
        ),
        (
            image(r#""mounts": ["source=/,target=/host,type=bind"]"#),
            "`mounts` would loosen the sandbox's hardening",
        ),
        (image(r#""privileged": true"#), "`privileged` would loosen"),
        (
            r#"{ "build": { "dockerfile": "/etc/hostname", "context": "/" } }"#.into(),
            "lies outside the project folder",
        ),
        (
            image(r#""runArgs": ["--memory=64g"]"#),
            "`runArgs` --memory 64g is more than the sandbox's",
        ),
        ("{ \"image\": 'single quotes' }".into(), "is not valid JSON with comments"),
        // Looked up in the image (through a container made for it, removed again).
        (
            image(r#""remoteUser": "nosuchuser""#),
            "`remoteUser` nosuchuser is not a user of the image",
        ),
    ];
    for (text, why) in &cases {
        put(&env.workdir, ".devcontainer/devcontainer.json", text);
        let out = env.run(&["up", "--devcontainer"]);
        assert_eq!(out.status.code(), Some(1), "{text}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("h9sandbox: error: ") && err.contains(why),
            "{text}: {err}"
        );
    }
    // Nothing was recorded or created (the lookup's container is gone too).
    assert!(env.ls().is_empty());
    assert!(env.containers().is_empty());
    // No configuration at all: said so, with the places looked at.
    std::fs::remove_dir_all(env.path(".devcontainer")).unwrap();
    let out = env.run(&["up", "--devcontainer"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no devcontainer.json in"),
        "{}",
        stderr(&out)
    );
    // A sub-sandbox takes its parent's image: the flag is refused with --parent.
    let out = env.run(&["up", "--devcontainer", "--parent", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_real_projects_devcontainer_runs_its_post_create_command() {
    require_images!(PYTHON);
    let env = TestEnv::new();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/devcontainer/vscode-remote-try-python");
    for rel in [
        ".devcontainer/devcontainer.json",
        ".devcontainer/Dockerfile",
        "requirements.txt",
    ] {
        put(
            &env.workdir,
            rel,
            &std::fs::read_to_string(fixture.join(rel)).unwrap(),
        );
    }
    // The wheel requirements.txt names, made here (pip installs it offline).
    std::fs::create_dir(env.path("wheels")).unwrap();
    let made = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, zipfile\n\
             z = zipfile.ZipFile(sys.argv[1], 'w')\n\
             z.writestr('greeting.py', 'WORDS = \"installed by postCreateCommand\"\\n')\n\
             d = 'greeting-1.0.dist-info/'\n\
             z.writestr(d + 'METADATA', 'Metadata-Version: 2.1\\nName: greeting\\nVersion: 1.0\\n')\n\
             z.writestr(d + 'WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
             z.writestr(d + 'RECORD', '')\n\
             z.close()\n",
        )
        .arg(env.path("wheels/greeting-1.0-py3-none-any.whl"))
        .status()
        .unwrap();
    assert!(made.success());
    // As the file says: built with its argument, pip run as vscode (not root). --network none:
    // nothing of this test leaves the machine.
    let out = env.run(&[
        "up",
        "--devcontainer",
        "--network",
        "none",
        "--memory",
        "512m",
    ]);
    assert_ok(&out);
    let id = stdout(&out).trim().to_string();
    let _image = built_image(&env, &id);
    let err = stderr(&out);
    let w = warnings(&err);
    assert_eq!(w.len(), 2, "{err}");
    assert!(
        w[0].contains("not honoured: extensions; settings"),
        "{}",
        w[0]
    );
    assert!(w[1].contains("forwardPorts 9000 recorded"), "{}", w[1]);
    assert_eq!(env.entry(&id)["user"], "1000:1000");
    assert_eq!(env.entry(&id)["bootstrap"]["exit_code"], 0, "{err}");
    let out = env.run(&[
        "exec",
        &id,
        "--",
        "python3 -c 'import greeting, sys; print(greeting.WORDS); print(greeting.__file__)'",
    ]);
    assert_ok(&out);
    let text = stdout(&out);
    assert!(
        text.starts_with("installed by postCreateCommand\n/home/vscode/.local/"),
        "{text}"
    );
    assert_ok(&env.run(&["down", &id]));
}

#[test]
fn up_build_runs_the_image_of_a_directorys_dockerfile() {
    require_docker!();
    let env = TestEnv::new();
    let context = env.root.path().join("task env");
    put(
        &context,
        "Dockerfile",
        &format!("FROM {TINY}\nRUN echo built > /built\nWORKDIR /app\n"),
    );
    put(
        &context,
        "Dockerfile.other",
        &format!("FROM {TINY}\nRUN echo other > /built\n"),
    );
    let ctx = context.to_str().unwrap();
    // Without a network, the build has none either (-v shows the engine's command lines).
    let out = env.run(&["up", "-v", "--build", ctx, "--network", "none"]);
    assert_ok(&out);
    let id = stdout(&out).trim().to_string();
    let _image = RemoveImage(
        env.entry(&id)["image"].as_str().unwrap().to_string(),
        env.state_dir.clone(),
    );
    let err = stderr(&out);
    let build_line = err
        .lines()
        .find(|l| l.contains(" build --force-rm --tag h9sandbox-build-"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(build_line.contains("--network none"), "{build_line}");
    let out = env.run(&["exec", &id, "--", "cat /built"]);
    assert_eq!(stdout(&out), "built\n");
    // The same directory again: the same image name.
    let again = env.up(&["--build", ctx]);
    assert_eq!(env.entry(&again)["image"], env.entry(&id)["image"]);
    // Another Dockerfile of it: another image.
    let other = env.up(&[
        "--build",
        ctx,
        "--dockerfile",
        &format!("{ctx}/Dockerfile.other"),
    ]);
    let _other_image = RemoveImage(
        env.entry(&other)["image"].as_str().unwrap().to_string(),
        env.state_dir.clone(),
    );
    assert_ne!(env.entry(&other)["image"], env.entry(&id)["image"]);
    assert_eq!(
        stdout(&env.run(&["exec", &other, "--", "cat /built"])),
        "other\n"
    );
    // A failing build: its last lines, then one error; nothing is left.
    put(
        &context,
        "Dockerfile.bad",
        &format!("FROM {TINY}\nRUN echo step-output && exit 7\n"),
    );
    let out = env.run(&[
        "up",
        "--build",
        ctx,
        "--dockerfile",
        &format!("{ctx}/Dockerfile.bad"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("h9sandbox: note: build: ") && err.contains("step-output"),
        "{err}"
    );
    let last = err.lines().last().unwrap();
    assert!(
        last.starts_with("h9sandbox: error: `docker build` of h9sandbox-build-"),
        "{err}"
    );
    let dockerfile_bad = format!("{ctx}/Dockerfile.bad");
    // What the sandbox could not be is refused before anything is built: an allow list on
    // the bridge network, a port published from no network.
    for (flags, why) in [
        (
            ["--network", "bridge", "--allow", "example.com"],
            "--allow needs network allowlist",
        ),
        (["--network", "none", "--publish", "8080"], "--publish"),
    ] {
        let mut args = vec!["up", "-v", "--build", ctx, "--dockerfile", &dockerfile_bad];
        args.extend(flags);
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(!err.contains(" build "), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(why), "{err}");
    }
    assert_ok(&env.run(&["down", &id, &again, &other]));
    assert!(env.ls().is_empty());
}
