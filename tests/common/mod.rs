//! Test harness for the integration tests: every test gets its own work directory and state
//! directory (so tests never see each other's sandboxes), runs the real binary against the real
//! Docker Engine, and removes every container of its state directory when it ends, even on
//! failure.
//!
//! Docker is required: without a reachable engine the tests fail when `CI` is set, and are
//! skipped with a loud message otherwise.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use assert_cmd::cargo::CommandCargoExt;

/// Small image: busybox + bash, built by scripts/build-test-images.sh.
pub const TINY: &str = "h9sandbox-test/tiny:latest";
/// busybox without bash.
pub const NOBASH: &str = "h9sandbox-test/nobash:latest";
/// Debian bookworm (debootstrap minbase).
pub const DEBIAN: &str = "h9sandbox-test/debian:bookworm";

/// Whether Docker answers; panics in CI when it does not.
pub fn docker_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let ok = Command::new("docker")
            .args(["image", "inspect", TINY])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            if std::env::var_os("CI").is_some() {
                panic!("CI is set but Docker (or the test image {TINY}) is unavailable: run scripts/build-test-images.sh");
            }
            eprintln!("SKIPPED: Docker or {TINY} unavailable (run scripts/build-test-images.sh); set CI=1 to make this fatal");
        }
        ok
    })
}

/// Skips the test (returns) when Docker is unavailable outside CI.
#[macro_export]
macro_rules! require_docker {
    () => {
        if !$crate::common::docker_available() {
            return;
        }
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

    /// The binary with this environment's state dir, the tiny image and the work dir as cwd.
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

    fn configure(&self, c: &mut Command) {
        c.current_dir(&self.workdir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.path())
            .env("H9SANDBOX_STATE_DIR", &self.state_dir)
            .env("H9SANDBOX_IMAGE", TINY)
            .env("H9SANDBOX_CPUS", "0.5")
            .env("H9SANDBOX_START_TIMEOUT_SECS", "60")
            .env("NO_COLOR", "1");
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

    /// Containers of this state directory, per `docker ps -a`.
    pub fn containers(&self) -> Vec<String> {
        docker_ps(&self.state_dir)
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.workdir.join(rel)
    }
}

/// IDs of all containers labelled with `state_dir`.
pub fn docker_ps(state_dir: &Path) -> Vec<String> {
    let out = Command::new("docker")
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

impl Drop for TestEnv {
    fn drop(&mut self) {
        let ids = docker_ps(&self.state_dir);
        if !ids.is_empty() {
            let _ = Command::new("docker")
                .args(["rm", "-f"])
                .args(&ids)
                .output();
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

/// `docker inspect --format FORMAT container`.
pub fn inspect(container: &str, format: &str) -> String {
    let out = Command::new("docker")
        .args(["inspect", "--format", format, container])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
