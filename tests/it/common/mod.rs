//! Test harness for the integration tests: every test gets its own work directory and state
//! directory (so tests never see each other's sandboxes), runs the real binary against the real
//! engine, and removes everything of its state directory when it ends, even on failure: the
//! containers, or with the local engine the processes its sandboxes left running.
//!
//! The engine under test is `H9SANDBOX_TEST_ENGINE` (`docker`, the default, `podman`, `local`
//! or `swarm`), so one test module runs against each (`H9SANDBOX_TEST_ENGINE=podman cargo test
//! --test it core::`). `swarm` needs the two-node bed of scripts/swarm.sh (its environment
//! evaluated: `H9TEST_SWARM`, `H9TEST_SWARM_WORKER`, `H9SANDBOX_REGISTRY`): a sandbox is a
//! service whose one task's container runs on either node ([`swarm_container`]). Tests that need a container skip themselves under `local` with a printed reason
//! ([`require_container!`]). A container engine is required: without it (or without the test
//! image in it) the tests fail when `CI` is set, and are skipped with a loud message otherwise.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use assert_cmd::cargo::CommandCargoExt;

mod process;
mod python;
mod swarm;
pub(crate) use process::*;
pub(crate) use python::*;
pub(crate) use swarm::*;

/// The variable marking every process a local sandbox started with its state directory.
pub(crate) const STATE_MARK: &str = "H9SANDBOX_SANDBOX_STATE_DIR";

/// Small image: busybox + bash, built by scripts/build-test-images.sh.
pub(crate) const TINY: &str = "h9sandbox-test/tiny:latest";
/// busybox without bash.
pub(crate) const NOBASH: &str = "h9sandbox-test/nobash:latest";
/// Debian bookworm (debootstrap minbase).
pub(crate) const DEBIAN: &str = "h9sandbox-test/debian:bookworm";
/// The Debian image with Debian's python3 and pip (Deep Agents' file helpers, devcontainers).
pub(crate) const PYTHON: &str = "h9sandbox-test/python:bookworm";

/// An engine the suite runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    Docker,
    Podman,
    Local,
    /// A Docker Swarm (scripts/swarm.sh): sandboxes are services, their containers tasks on
    /// either node, their work dir always copied in.
    Swarm,
}

impl Engine {
    /// The value of `engine` (and of `H9SANDBOX_TEST_ENGINE`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Engine::Docker => "docker",
            Engine::Podman => "podman",
            Engine::Local => "local",
            Engine::Swarm => "swarm",
        }
    }

    /// The engine's command-line client; `None` for local.
    pub(crate) fn cli(self) -> Option<&'static str> {
        match self {
            Engine::Docker | Engine::Swarm => Some("docker"),
            Engine::Podman => Some("podman"),
            Engine::Local => None,
        }
    }
}

/// The engine under test: `H9SANDBOX_TEST_ENGINE`, `docker` when unset.
pub(crate) fn engine() -> Engine {
    match std::env::var("H9SANDBOX_TEST_ENGINE").as_deref() {
        Err(_) | Ok("") | Ok("docker") => Engine::Docker,
        Ok("podman") => Engine::Podman,
        Ok("local") => Engine::Local,
        Ok("swarm") => Engine::Swarm,
        Ok(other) => {
            panic!("H9SANDBOX_TEST_ENGINE={other}: expected docker, podman, local or swarm")
        }
    }
}

/// The OCI runtime under test: `H9SANDBOX_TEST_RUNTIME` (e.g. `runsc`, registered by
/// scripts/setup-gvisor.sh), passed to every command as `H9SANDBOX_RUNTIME`; `None` when unset
/// (the engine's default; `runc` with Podman). Only with a container engine.
pub(crate) fn runtime() -> Option<String> {
    match std::env::var("H9SANDBOX_TEST_RUNTIME").as_deref() {
        Err(_) | Ok("") => None,
        Ok(r) => {
            assert!(
                engine() != Engine::Local,
                "H9SANDBOX_TEST_RUNTIME={r} needs a container engine"
            );
            Some(r.to_string())
        }
    }
}

/// Whether the runtime under test is gVisor's `runsc` (see docs/security.md, gVisor, for what
/// differs there).
pub(crate) fn gvisor() -> bool {
    runtime().as_deref() == Some("runsc")
}

/// Whether the host reaches no sandbox's agent socket in this run: with `H9TEST_EXEC_PATH=engine`
/// (silently: every test runs the other way too), or under gVisor, whose unix sockets do not
/// cross a bind mount (announced as a skip: what needs the socket is unavailable there).
pub(crate) fn agent_socket_unreachable() -> bool {
    if exec_path_is_engine() {
        return true;
    }
    if gvisor() {
        announce("under gVisor the host cannot reach the agent's socket (commands go through the engine's exec)");
        return true;
    }
    false
}

/// The `HostConfig.PidsLimit` a sandbox with process limit `n` gets: `n`, or under gVisor the
/// host ceiling h9sandbox sets above it (64 + 16 × n; the limit itself is then the nproc
/// rlimit gVisor's kernel enforces).
pub(crate) fn host_pids_limit(n: u64) -> String {
    if gvisor() {
        (64 + 16 * n).to_string()
    } else {
        n.to_string()
    }
}

/// `H9TEST_WORKDIR_MODE` (`mount`, `copy`): how the sandboxes under test get their work dir;
/// `None` (unset): the engine's default.
pub(crate) fn workdir_mode() -> Option<&'static str> {
    match std::env::var("H9TEST_WORKDIR_MODE").as_deref() {
        Err(_) | Ok("") => None,
        Ok("mount") => Some("mount"),
        Ok("copy") => Some("copy"),
        Ok(other) => panic!("H9TEST_WORKDIR_MODE={other}: expected mount or copy"),
    }
}

/// Whether every sandbox under test has its work dir copied in: `H9TEST_WORKDIR_MODE=copy`, a
/// remote daemon (`DOCKER_HOST`), or engine swarm (which always copies).
pub(crate) fn copies_workdir() -> bool {
    workdir_mode() == Some("copy")
        || std::env::var_os("DOCKER_HOST").is_some()
        || engine() == Engine::Swarm
}

/// Whether the engine under test is swarm, announcing `reason` as the skip when it is: for a
/// test of what engine swarm refuses by design (docs/swarm.md, "What differs on a swarm").
pub(crate) fn swarm_refuses(reason: &str) -> bool {
    if engine() == Engine::Swarm {
        announce(&format!(
            "engine swarm refuses it by design (docs/swarm.md, What differs): {reason}"
        ));
        return true;
    }
    false
}

/// Whether the sandboxes under test have their work dir copied (no host mount): what a test of
/// the shared work dir cannot check there (announced as a skip).
pub(crate) fn workdir_copied(reason: &str) -> bool {
    if copies_workdir() {
        announce(&format!("the work dir is copied, not mounted: {reason}"));
        return true;
    }
    false
}

/// Whether `rel` exists in the work dir of sandbox `id` as the sandbox sees it: on the host when
/// it is mounted, asked inside the container when it is copied (a readiness mark a command made).
pub(crate) fn exists_in_workdir(env: &TestEnv, id: &str, rel: &str) -> bool {
    if copies_workdir() {
        env.run(&["exec", id, "--", "test", "-e", rel])
            .status
            .success()
    } else {
        env.path(rel).exists()
    }
}

/// What `-v` prints of the engine's command that makes a sandbox's container: `docker run -d`
/// (or Podman's), or under engine swarm `docker service create` (a service of one task).
pub(crate) fn create_command() -> &'static str {
    if engine() == Engine::Swarm {
        " service create "
    } else {
        " run -d "
    }
}

/// Whether `H9TEST_EXEC_PATH=engine` asks for commands through the engine's exec rather than
/// the sandbox's agent.
pub(crate) fn exec_path_is_engine() -> bool {
    match std::env::var("H9TEST_EXEC_PATH").as_deref() {
        Err(_) | Ok("") | Ok("agent") => false,
        Ok("engine") => true,
        Ok(other) => panic!("H9TEST_EXEC_PATH={other}: expected agent or engine"),
    }
}

/// The engine under test's client (`docker`, `podman`); panics for local.
pub(crate) fn cli() -> &'static str {
    engine()
        .cli()
        .expect("this test needs a container engine (use require_container!)")
}

/// Prints a line on the real stderr, past the test harness's capture, so skips are seen.
pub(crate) fn announce(msg: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("<test>")
        .to_string();
    let runtime = runtime().map(|r| format!(", {r}")).unwrap_or_default();
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test} [{}{runtime}]: {msg}",
        engine().name()
    );
}

/// Whether the engine under test answers with the test image; panics in CI when it does not.
/// Local needs nothing.
pub(crate) fn engine_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let Some(cli) = engine().cli() else {
            return true;
        };
        if engine() == Engine::Swarm && std::env::var_os("H9TEST_SWARM").is_none() {
            let why = "H9SANDBOX_TEST_ENGINE=swarm needs the swarm test bed: eval \"$(bash scripts/swarm.sh up)\"";
            if std::env::var_os("CI").is_some() {
                panic!("CI is set but {why}");
            }
            announce(&format!("{why}; set CI=1 to make this fatal"));
            return false;
        }
        let ok = Command::new(cli)
            .args(["image", "inspect", TINY])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            if std::env::var_os("CI").is_some() {
                panic!("CI is set but {cli} (or the test image {TINY} in it) is unavailable: run scripts/build-test-images.sh (and load the images into podman, see .ci/run)");
            }
            announce(&format!("{cli} or {TINY} unavailable (run scripts/build-test-images.sh); set CI=1 to make this fatal"));
        }
        ok
    })
}

/// Whether the engine under test has the test image `image` (one scripts/build-test-images.sh
/// builds besides [`TINY`]); panics in CI when it has not, is announced as a skip otherwise.
pub(crate) fn test_image_available(image: &str) -> bool {
    let Some(cli) = engine().cli() else {
        return true;
    };
    let ok = Command::new(cli)
        .args(["image", "inspect", image])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let why = format!("{cli} has no test image {image}: run scripts/build-test-images.sh");
        if std::env::var_os("CI").is_some() {
            panic!("CI is set but {why}");
        }
        announce(&format!("{why}; set CI=1 to make this fatal"));
    }
    ok
}

/// Skips the test (returns) when the engine under test is unavailable, or has not the test
/// images named, outside CI; fails it in CI.
#[macro_export]
macro_rules! require_images {
    ($($image:expr),+ $(,)?) => {
        $crate::require_engine!();
        $(
            if !$crate::common::test_image_available($image) {
                return;
            }
        )+
    };
}

/// Whether Docker answers (the engine under test, by default); panics in CI when it does not.
pub(crate) fn docker_available() -> bool {
    engine_available()
}

/// Skips the test (returns) when the engine under test is unavailable outside CI.
#[macro_export]
macro_rules! require_engine {
    () => {
        if !$crate::common::engine_available() {
            return;
        }
    };
}

/// The same as [`require_engine!`] (the name from before engines other than Docker existed).
#[macro_export]
macro_rules! require_docker {
    () => {
        $crate::require_engine!()
    };
}

/// Skips the test, printing `reason`, when the engine under test has no containers (local);
/// otherwise as [`require_engine!`].
#[macro_export]
macro_rules! require_container {
    ($reason:expr) => {
        if $crate::common::engine() == $crate::common::Engine::Local {
            $crate::common::announce($reason);
            return;
        }
        $crate::require_engine!();
    };
}

/// A work directory, a state directory and the binary configured to use them.
pub(crate) struct TestEnv {
    pub root: tempfile::TempDir,
    pub workdir: PathBuf,
    pub state_dir: PathBuf,
    /// Whether `up` starts owner watchers (config `watch_owner`, on by default).
    pub watch_owner: bool,
}

impl TestEnv {
    pub(crate) fn new() -> TestEnv {
        let root = tempfile::Builder::new().prefix("h9test").tempdir().unwrap();
        let workdir = root.path().join("work");
        let state_dir = root.path().join("state");
        std::fs::create_dir_all(&workdir).unwrap();
        std::fs::create_dir_all(&state_dir).unwrap();
        TestEnv {
            workdir: workdir.canonicalize().unwrap(),
            state_dir: state_dir.canonicalize().unwrap(),
            root,
            watch_owner: true,
        }
    }

    /// A [`TestEnv`] whose `up`s start no owner watcher (`H9SANDBOX_WATCH_OWNER=false`): for
    /// tests of `reap`'s own judgement of dead owners, which a watcher would otherwise race.
    pub(crate) fn without_owner_watcher() -> TestEnv {
        let mut env = TestEnv::new();
        env.watch_owner = false;
        env
    }

    /// The binary with this environment's state dir, the engine under test, the tiny image and
    /// the work dir as cwd. Podman runs with runc (crun refuses hybrid cgroup v1 hosts).
    pub(crate) fn cmd(&self) -> Command {
        let mut c = Command::cargo_bin("h9sandbox").unwrap();
        self.configure(&mut c);
        c
    }

    /// `bash -c SCRIPT` with the same environment as [`TestEnv::cmd`], and `$H9` naming the
    /// binary (for tests that need real processes running several commands).
    pub(crate) fn shell(&self, script: &str) -> Command {
        let mut c = Command::new("bash");
        self.configure(&mut c);
        c.env("H9", assert_cmd::cargo::cargo_bin("h9sandbox"))
            .arg("-c")
            .arg(script);
        c
    }

    /// `program` with the same environment as [`TestEnv::cmd`] (state dir, engine, image, work
    /// dir as cwd), for test drivers written in another language.
    pub(crate) fn program(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        self.configure(&mut c);
        c
    }

    fn configure(&self, c: &mut Command) {
        c.current_dir(&self.workdir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.path())
            .env("H9SANDBOX_STATE_DIR", &self.state_dir)
            .env("H9SANDBOX_ENGINE", engine().name())
            .env("H9SANDBOX_IMAGE", TINY)
            .env("H9SANDBOX_CPUS", "0.5")
            .env("H9SANDBOX_START_TIMEOUT_SECS", "60")
            .env("NO_COLOR", "1");
        if let Some(r) = runtime() {
            c.env("H9SANDBOX_RUNTIME", r);
        } else if engine() == Engine::Podman {
            c.env("H9SANDBOX_RUNTIME", "runc");
        }
        // `H9TEST_EXEC_PATH=engine` runs the suites with every command through the engine's
        // exec (the fallback where the agent's socket cannot be reached).
        if exec_path_is_engine() {
            c.env("H9SANDBOX_EXEC_AGENT", "false");
        }
        if !self.watch_owner {
            c.env("H9SANDBOX_WATCH_OWNER", "false");
        }
        // `H9TEST_WORKDIR_MODE=copy` runs the suites with every sandbox's work dir copied in
        // and every command over the remote channel (what a daemon on another machine gets).
        if let Some(mode) = workdir_mode() {
            c.env("H9SANDBOX_WORKDIR_MODE", mode);
        }
        // Engine swarm: the bed's registry (both nodes pull the agent's image from it), and a
        // placement deadline above a loaded machine's slowest task start.
        if engine() == Engine::Swarm {
            c.env(
                "H9SANDBOX_REGISTRY",
                std::env::var("H9SANDBOX_REGISTRY").unwrap_or_else(|_| "127.0.0.1:5000".into()),
            )
            .env("H9SANDBOX_PLACEMENT_TIMEOUT_SECS", "120");
        }
        // A remote daemon under test (scripts/testbed.sh): its address and TLS files.
        for var in [
            "DOCKER_HOST",
            "DOCKER_TLS_VERIFY",
            "DOCKER_CERT_PATH",
            "DOCKER_CONTEXT",
        ] {
            if let Some(v) = std::env::var_os(var) {
                c.env(var, v);
            }
        }
    }

    /// A unix socket path of this environment's own that leads to this machine's Docker daemon
    /// (a symlink to `/var/run/docker.sock`), as `DOCKER_HOST` (`unix://LINK`), for tests that
    /// take the daemon away from a sandbox: its record keeps that `DOCKER_HOST`, so removing
    /// the link ([`TestEnv::daemon_away`]) makes its daemon unreachable, and
    /// [`TestEnv::daemon_back`] brings it back.
    pub(crate) fn daemon_link(&self) -> String {
        let link = self.root.path().join("docker.sock");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/var/run/docker.sock", &link).unwrap();
        format!("unix://{}", link.display())
    }

    /// Removes the link of [`TestEnv::daemon_link`].
    pub(crate) fn daemon_away(&self) {
        std::fs::remove_file(self.root.path().join("docker.sock")).unwrap();
    }

    /// Makes the link of [`TestEnv::daemon_link`] again.
    pub(crate) fn daemon_back(&self) {
        self.daemon_link();
    }

    /// Runs the binary with `args`, stdin closed, and collects its output; one still running
    /// after [`RUN_PATIENCE`] is killed and fails the test ([`wait_output`]), never hangs it.
    #[track_caller]
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        let child = self
            .cmd()
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_output(
            child,
            RUN_PATIENCE,
            &format!("h9sandbox {}", args.join(" ")),
        )
    }

    /// Runs the binary with `args`, stdin closed, for assert_cmd's assertions:
    /// `env.assert(&["exec", &id, "--", "exit 3"]).code(3).stdout("")`, with predicates for
    /// the rest (`predicates::str::contains`). Killed past [`RUN_PATIENCE`], as [`TestEnv::run`].
    #[track_caller]
    pub(crate) fn assert(&self, args: &[&str]) -> assert_cmd::assert::Assert {
        let mut c = assert_cmd::Command::from_std(self.cmd());
        c.args(args).write_stdin(Vec::new()).timeout(RUN_PATIENCE);
        c.assert()
    }

    /// `up` with `args`; asserts success and returns the sandbox ID.
    #[track_caller]
    pub(crate) fn up(&self, args: &[&str]) -> String {
        let mut a = vec!["up"];
        a.extend_from_slice(args);
        let out = self.run(&a);
        assert_ok(&out);
        let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert_eq!(id.len(), 36, "up printed {id:?}");
        id
    }

    /// `ls --format json` as JSON values.
    pub(crate) fn ls(&self) -> Vec<serde_json::Value> {
        let out = self.run(&["ls", "--format", "json"]);
        assert_ok(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The records of state.json, without asking the engine (for tests that need no Docker).
    pub(crate) fn ls_raw(&self) -> Vec<serde_json::Value> {
        match std::fs::read(self.state_dir.join("state.json")) {
            Ok(b) => serde_json::from_slice::<serde_json::Value>(&b).unwrap()["sandboxes"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            Err(_) => vec![],
        }
    }

    /// The `ls` entry of sandbox `id`.
    pub(crate) fn entry(&self, id: &str) -> serde_json::Value {
        self.ls()
            .into_iter()
            .find(|e| e["id"] == id)
            .unwrap_or_else(|| panic!("{id} not listed"))
    }

    /// The container ID of sandbox `id`.
    pub(crate) fn container(&self, id: &str) -> String {
        self.entry(id)["container_id"].as_str().unwrap().to_string()
    }

    /// What the engine holds for this state directory: its containers (`ps -a`), or with the
    /// local engine the PIDs of processes its sandboxes started that still run.
    pub(crate) fn containers(&self) -> Vec<String> {
        match engine().cli() {
            Some(cli) => engine_ps(cli, &self.state_dir),
            None => local_processes(&[(STATE_MARK, self.state_dir.to_str().unwrap())])
                .into_iter()
                .map(|(pid, _)| pid.to_string())
                .collect(),
        }
    }

    /// The command lines of the processes running in sandbox `id`: `ps` inside its container,
    /// or the host processes marked with its name (local).
    pub(crate) fn sandbox_processes(&self, id: &str) -> String {
        match engine() {
            Engine::Local => {
                let name = self.entry(id)["name"].as_str().unwrap().to_string();
                local_processes(&[
                    (STATE_MARK, self.state_dir.to_str().unwrap()),
                    ("H9SANDBOX_SANDBOX", name.as_str()),
                ])
                .into_iter()
                .map(|(pid, cmdline)| format!("{pid} {cmdline}\n"))
                .collect()
            }
            _ => stdout(&self.run(&["exec", id, "--", "ps -o pid,args"])),
        }
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.workdir.join(rel)
    }
}

/// `PATH` with the directory of the built binary first, as a user who installed it has it (the
/// README's blocks and the completion scripts call `h9sandbox` by name).
pub(crate) fn bin_dir() -> String {
    let bin = assert_cmd::cargo::cargo_bin("h9sandbox");
    format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// IDs of all Docker containers labelled with `state_dir`.
pub(crate) fn docker_ps(state_dir: &Path) -> Vec<String> {
    engine_ps("docker", state_dir)
}

/// IDs of all containers of the engine client `cli` labelled with `state_dir`; under engine
/// swarm, of the services so labelled (a sandbox's container is its service's task).
pub(crate) fn engine_ps(cli: &str, state_dir: &Path) -> Vec<String> {
    if engine() == Engine::Swarm {
        return swarm_labelled("service", state_dir);
    }
    let out = Command::new(cli)
        .args(["ps", "-aq", "--filter"])
        .arg(format!("label=h9sandbox.state_dir={}", state_dir.display()))
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Host processes (PID, command line) whose environment holds every `var=value` of `marks`.
pub(crate) fn local_processes(marks: &[(&str, &str)]) -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
        if marks
            .iter()
            .all(|(k, v)| vars.contains(&format!("{k}={v}").as_bytes()))
        {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            // A zombie (or a process that just ended) has no command line left.
            if !cmdline.trim().is_empty() {
                found.push((pid, cmdline.trim().to_string()));
            }
        }
    }
    found
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if engine() == Engine::Swarm {
            // The services (their tasks' containers and volumes go with them, on their
            // nodes) and their secrets.
            for kind in ["service", "secret"] {
                let ids = swarm_labelled(kind, &self.state_dir);
                if !ids.is_empty() {
                    let _ = swarm_manager().args([kind, "rm"]).args(&ids).output();
                }
            }
        } else if let Some(cli) = engine().cli() {
            let ids = engine_ps(cli, &self.state_dir);
            if !ids.is_empty() {
                let _ = Command::new(cli)
                    .args(["rm", "-f", "-v"])
                    .args(&ids)
                    .output();
            }
            // Scratch volumes are named, so `rm -v` leaves them: removed by their label.
            let label = format!("label=h9sandbox.state_dir={}", self.state_dir.display());
            if let Ok(out) = Command::new(cli)
                .args(["volume", "ls", "-q", "--filter", &label])
                .output()
            {
                let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect();
                if !names.is_empty() {
                    let _ = Command::new(cli)
                        .args(["volume", "rm"])
                        .args(&names)
                        .output();
                }
            }
        }
        // Local sandboxes exist under every engine (engine = "local", the fallback).
        let marks = [(STATE_MARK, self.state_dir.to_str().unwrap())];
        for (pid, _) in local_processes(&marks) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).output();
        }
    }
}

/// `exec` of the shell command line `script` in sandbox `id`; asserts success and returns stdout.
#[track_caller]
pub(crate) fn sh(env: &TestEnv, id: &str, script: &str) -> String {
    let out = env.run(&["exec", id, "--", script]);
    assert_ok(&out);
    stdout(&out)
}

/// Runs the binary with `args`, feeding `input` on stdin (from a thread of its own, so that a
/// command that writes before it reads cannot deadlock with us), within [`RUN_PATIENCE`].
#[track_caller]
pub(crate) fn run_stdin(env: &TestEnv, args: &[&str], input: &[u8]) -> Output {
    let mut child = env
        .cmd()
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        let _ = stdin.write_all(&input);
    });
    let out = wait_output(
        child,
        RUN_PATIENCE,
        &format!("h9sandbox {}", args.join(" ")),
    );
    feeder.join().unwrap();
    out
}

/// Builds `tag` from `dockerfile` (context: an empty directory) with the engine under test (the
/// image is kept for the next run; building it again is a cache hit).
#[track_caller]
pub(crate) fn build_image(env: &TestEnv, tag: &str, dockerfile: &str) {
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

/// `argv` run by `setpriv` as uid/gid 1000 without supplementary groups, in `dir`, stdin closed.
pub(crate) fn as_uid_1000(dir: &Path, argv: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid", "1000", "--regid", "1000", "--clear-groups", "--"])
        .args(argv)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// Asserts a zero exit status, showing stderr otherwise.
#[track_caller]
pub(crate) fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asserts exit status `code` and a stderr that contains `says`, showing stderr otherwise.
#[track_caller]
pub(crate) fn assert_fails(out: &Output, code: i32, says: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(err.contains(says), "expected {says:?} in: {err}");
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `docker inspect --format FORMAT container` (or `podman inspect`, the engine under test).
/// Under engine swarm, `container` is a service: its task's container is inspected on the node
/// it runs on ([`swarm_container`]).
#[track_caller]
pub(crate) fn inspect(container: &str, format: &str) -> String {
    let mut c = Command::new(cli());
    let container = if engine() == Engine::Swarm {
        let (daemon, id) = swarm_container(container);
        c = daemon;
        id
    } else {
        container.to_string()
    };
    let out = c
        .args(["inspect", "--format", format, &container])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

impl TestEnv {
    /// Asserts that nothing of any sandbox is left in this state directory (`what` names the
    /// step, for the message): no record, no container (or local process), no scratch volume,
    /// and nothing in the run, token, mount-root and proxy directories.
    pub(crate) fn assert_nothing_left(&self, what: &str) {
        assert!(
            self.ls_raw().is_empty(),
            "{what}: records left: {:?}",
            self.ls_raw()
        );
        assert!(
            self.containers().is_empty(),
            "{what}: containers left: {:?}",
            self.containers()
        );
        if engine() == Engine::Swarm {
            let secrets = swarm_labelled("secret", &self.state_dir);
            assert!(
                secrets.is_empty(),
                "{what}: swarm secrets left: {secrets:?}"
            );
            // The nodes remove a removed service's task container (and its anonymous
            // volumes) on their own, within seconds: nothing of it is left on either.
            let label = format!("label=h9sandbox.state_dir={}", self.state_dir.display());
            wait_until(
                std::time::Duration::from_secs(60),
                &format!("{what}: the nodes remove the tasks' containers"),
                || {
                    [swarm_manager(), swarm_worker()]
                        .into_iter()
                        .all(|mut d| text_of(d.args(["ps", "-aq", "--filter", &label])).is_empty())
                },
            );
        } else if let Some(cli) = engine().cli() {
            let label = format!("label=h9sandbox.state_dir={}", self.state_dir.display());
            let out = Command::new(cli)
                .args(["volume", "ls", "-q", "--filter", &label])
                .output()
                .unwrap();
            assert!(
                String::from_utf8_lossy(&out.stdout).trim().is_empty(),
                "{what}: volumes left: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            let out = Command::new(cli)
                .args(["ps", "-aq", "--filter"])
                .arg(format!(
                    "label=h9sandbox.state_dir={}",
                    self.state_dir.display()
                ))
                .output()
                .unwrap();
            assert!(
                String::from_utf8_lossy(&out.stdout).trim().is_empty(),
                "{what}: containers (sidecars included) left: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        for dir in ["run", "tokens", "mounts", "proxy"] {
            let entries: Vec<String> = std::fs::read_dir(self.state_dir.join(dir))
                .map(|rd| {
                    rd.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            assert!(entries.is_empty(), "{what}: {dir}/ holds {entries:?}");
        }
    }
}

impl TestEnv {
    /// Whether commands reach a container's agent, in a message rather than as arguments of the
    /// engine's exec: a container engine, not `H9TEST_EXEC_PATH=engine`, not gVisor (a local
    /// sandbox's commands are arguments of its shell).
    pub(crate) fn agent_reachable(&self) -> bool {
        engine() != Engine::Local && !exec_path_is_engine() && !gvisor()
    }
}
