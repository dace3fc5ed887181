//! Test harness for the integration tests: every test gets its own work directory and state
//! directory (so tests never see each other's sandboxes), runs the real binary against the real
//! engine, and removes everything of its state directory when it ends, even on failure: the
//! containers, or with the local engine the processes its sandboxes left running.
//!
//! The engine under test is `H9SANDBOX_TEST_ENGINE` (`docker`, the default, `podman` or
//! `local`), so one test module runs against each (`H9SANDBOX_TEST_ENGINE=podman cargo test
//! --test it core::`). Tests that need a container skip themselves under `local` with a printed reason
//! ([`require_container!`]). A container engine is required: without it (or without the test
//! image in it) the tests fail when `CI` is set, and are skipped with a loud message otherwise.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use assert_cmd::cargo::CommandCargoExt;

/// The variable marking every process a local sandbox started with its state directory.
pub const STATE_MARK: &str = "H9SANDBOX_SANDBOX_STATE_DIR";

/// Small image: busybox + bash, built by scripts/build-test-images.sh.
pub const TINY: &str = "h9sandbox-test/tiny:latest";
/// busybox without bash.
pub const NOBASH: &str = "h9sandbox-test/nobash:latest";
/// Debian bookworm (debootstrap minbase).
pub const DEBIAN: &str = "h9sandbox-test/debian:bookworm";

/// An engine the suite runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Docker,
    Podman,
    Local,
}

impl Engine {
    /// The value of `engine` (and of `H9SANDBOX_TEST_ENGINE`).
    pub fn name(self) -> &'static str {
        match self {
            Engine::Docker => "docker",
            Engine::Podman => "podman",
            Engine::Local => "local",
        }
    }

    /// The engine's command-line client; `None` for local.
    pub fn cli(self) -> Option<&'static str> {
        match self {
            Engine::Docker => Some("docker"),
            Engine::Podman => Some("podman"),
            Engine::Local => None,
        }
    }
}

/// The engine under test: `H9SANDBOX_TEST_ENGINE`, `docker` when unset.
pub fn engine() -> Engine {
    match std::env::var("H9SANDBOX_TEST_ENGINE").as_deref() {
        Err(_) | Ok("") | Ok("docker") => Engine::Docker,
        Ok("podman") => Engine::Podman,
        Ok("local") => Engine::Local,
        Ok(other) => panic!("H9SANDBOX_TEST_ENGINE={other}: expected docker, podman or local"),
    }
}

/// The OCI runtime under test: `H9SANDBOX_TEST_RUNTIME` (e.g. `runsc`, registered by
/// scripts/setup-gvisor.sh), passed to every command as `H9SANDBOX_RUNTIME`; `None` when unset
/// (the engine's default; `runc` with Podman). Only with a container engine.
pub fn runtime() -> Option<String> {
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
pub fn gvisor() -> bool {
    runtime().as_deref() == Some("runsc")
}

/// Whether the host reaches no sandbox's agent socket in this run: with `H9TEST_EXEC_PATH=engine`
/// (silently: every test runs the other way too), or under gVisor, whose unix sockets do not
/// cross a bind mount (announced as a skip: what needs the socket is unavailable there).
pub fn agent_socket_unreachable() -> bool {
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
pub fn host_pids_limit(n: u64) -> String {
    if gvisor() {
        (64 + 16 * n).to_string()
    } else {
        n.to_string()
    }
}

/// `H9TEST_WORKDIR_MODE` (`mount`, `copy`): how the sandboxes under test get their work dir;
/// `None` (unset): the engine's default.
pub fn workdir_mode() -> Option<&'static str> {
    match std::env::var("H9TEST_WORKDIR_MODE").as_deref() {
        Err(_) | Ok("") => None,
        Ok("mount") => Some("mount"),
        Ok("copy") => Some("copy"),
        Ok(other) => panic!("H9TEST_WORKDIR_MODE={other}: expected mount or copy"),
    }
}

/// Whether the sandboxes under test have their work dir copied (no host mount): what a test of
/// the shared work dir cannot check there (announced as a skip).
pub fn workdir_copied(reason: &str) -> bool {
    if workdir_mode() == Some("copy") || std::env::var_os("DOCKER_HOST").is_some() {
        announce(&format!("the work dir is copied, not mounted: {reason}"));
        return true;
    }
    false
}

/// Whether `H9TEST_EXEC_PATH=engine` asks for commands through the engine's exec rather than
/// the sandbox's agent.
pub fn exec_path_is_engine() -> bool {
    match std::env::var("H9TEST_EXEC_PATH").as_deref() {
        Err(_) | Ok("") | Ok("agent") => false,
        Ok("engine") => true,
        Ok(other) => panic!("H9TEST_EXEC_PATH={other}: expected agent or engine"),
    }
}

/// The engine under test's client (`docker`, `podman`); panics for local.
pub fn cli() -> &'static str {
    engine()
        .cli()
        .expect("this test needs a container engine (use require_container!)")
}

/// Prints a line on the real stderr, past the test harness's capture, so skips are seen.
pub fn announce(msg: &str) {
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
pub fn engine_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let Some(cli) = engine().cli() else {
            return true;
        };
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

/// Whether Docker answers (the engine under test, by default); panics in CI when it does not.
pub fn docker_available() -> bool {
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
pub struct TestEnv {
    pub root: tempfile::TempDir,
    pub workdir: PathBuf,
    pub state_dir: PathBuf,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let root = tempfile::Builder::new().prefix("h9test").tempdir().unwrap();
        let workdir = root.path().join("work");
        let state_dir = root.path().join("state");
        std::fs::create_dir_all(&workdir).unwrap();
        std::fs::create_dir_all(&state_dir).unwrap();
        TestEnv {
            workdir: workdir.canonicalize().unwrap(),
            state_dir: state_dir.canonicalize().unwrap(),
            root,
        }
    }

    /// The binary with this environment's state dir, the engine under test, the tiny image and
    /// the work dir as cwd. Podman runs with runc (crun refuses hybrid cgroup v1 hosts).
    pub fn cmd(&self) -> Command {
        let mut c = Command::cargo_bin("h9sandbox").unwrap();
        self.configure(&mut c);
        c
    }

    /// `bash -c SCRIPT` with the same environment as [`TestEnv::cmd`], and `$H9` naming the
    /// binary (for tests that need real processes running several commands).
    pub fn shell(&self, script: &str) -> Command {
        let mut c = Command::new("bash");
        self.configure(&mut c);
        c.env("H9", assert_cmd::cargo::cargo_bin("h9sandbox"))
            .arg("-c")
            .arg(script);
        c
    }

    /// `program` with the same environment as [`TestEnv::cmd`] (state dir, engine, image, work
    /// dir as cwd), for test drivers written in another language.
    pub fn program(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
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
        // `H9TEST_WORKDIR_MODE=copy` runs the suites with every sandbox's work dir copied in
        // and every command over the remote channel (what a daemon on another machine gets).
        if let Some(mode) = workdir_mode() {
            c.env("H9SANDBOX_WORKDIR_MODE", mode);
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

    /// Runs the binary with `args`, stdin closed.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd()
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    /// `up` with `args`; asserts success and returns the sandbox ID.
    pub fn up(&self, args: &[&str]) -> String {
        let mut a = vec!["up"];
        a.extend_from_slice(args);
        let out = self.run(&a);
        assert_ok(&out);
        let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert_eq!(id.len(), 36, "up printed {id:?}");
        id
    }

    /// `ls --format json` as JSON values.
    pub fn ls(&self) -> Vec<serde_json::Value> {
        let out = self.run(&["ls", "--format", "json"]);
        assert_ok(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The records of state.json, without asking the engine (for tests that need no Docker).
    pub fn ls_raw(&self) -> Vec<serde_json::Value> {
        match std::fs::read(self.state_dir.join("state.json")) {
            Ok(b) => serde_json::from_slice::<serde_json::Value>(&b).unwrap()["sandboxes"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            Err(_) => vec![],
        }
    }

    /// The `ls` entry of sandbox `id`.
    pub fn entry(&self, id: &str) -> serde_json::Value {
        self.ls()
            .into_iter()
            .find(|e| e["id"] == id)
            .unwrap_or_else(|| panic!("{id} not listed"))
    }

    /// The container ID of sandbox `id`.
    pub fn container(&self, id: &str) -> String {
        self.entry(id)["container_id"].as_str().unwrap().to_string()
    }

    /// What the engine holds for this state directory: its containers (`ps -a`), or with the
    /// local engine the PIDs of processes its sandboxes started that still run.
    pub fn containers(&self) -> Vec<String> {
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
    pub fn sandbox_processes(&self, id: &str) -> String {
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

    pub fn path(&self, rel: &str) -> PathBuf {
        self.workdir.join(rel)
    }
}

/// `PATH` with the directory of the built binary first, as a user who installed it has it (the
/// README's blocks and the completion scripts call `h9sandbox` by name).
pub fn bin_dir() -> String {
    let bin = assert_cmd::cargo::cargo_bin("h9sandbox");
    format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// IDs of all Docker containers labelled with `state_dir`.
pub fn docker_ps(state_dir: &Path) -> Vec<String> {
    engine_ps("docker", state_dir)
}

/// IDs of all containers of the engine client `cli` labelled with `state_dir`.
pub fn engine_ps(cli: &str, state_dir: &Path) -> Vec<String> {
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
pub fn local_processes(marks: &[(&str, &str)]) -> Vec<(u32, String)> {
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
        if let Some(cli) = engine().cli() {
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

/// Asserts a zero exit status, showing stderr otherwise.
pub fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `docker inspect --format FORMAT container` (or `podman inspect`, the engine under test).
pub fn inspect(container: &str, format: &str) -> String {
    let out = Command::new(cli())
        .args(["inspect", "--format", format, container])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
