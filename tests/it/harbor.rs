//! h9sandbox's Harbor environment (`integrations/harbor`) run by Harbor itself (the `harbor`
//! package on PyPI, the Terminal-Bench framework, pinned in `scripts/harbor-venv.sh`), through
//! pytest, against the real engine: real trials of a task shipped in
//! `integrations/harbor/tests/tasks` with Harbor's reference-solution agent (`oracle`, no
//! model) and its do-nothing agent (`nop`), whose rewards must be the ones Harbor's own docker
//! environment gives (run in the same test), plus the environment's methods one by one.
//!
//! The interpreter is `$H9TEST_HARBOR_PYTHON`, which `.ci/run` sets to the virtual environment
//! made by `scripts/harbor-venv.sh`; without it, `target/harbor-venv/bin/python` if that exists.
//! When neither has `harbor`, `pytest` and the environment, the test fails if `CI` is set, and
//! is skipped with a loud message otherwise.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::*;

/// The Python interpreter with Harbor, pytest and the environment, or `None` (announced)
/// outside CI.
fn python() -> Option<PathBuf> {
    let candidate = std::env::var_os("H9TEST_HARBOR_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/harbor-venv/bin/python")
        });
    let works = Command::new(&candidate)
        .args(["-c", "import harbor, pytest, h9sandbox_harbor"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        return Some(candidate);
    }
    let why = format!(
        "{} cannot import harbor, pytest and h9sandbox_harbor; run scripts/harbor-venv.sh (or set H9TEST_HARBOR_PYTHON)",
        candidate.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("CI is set but {why}");
    }
    announce(&format!("{why}; set CI=1 to make this fatal"));
    None
}

#[test]
fn harbor_trials_in_h9sandbox_reward_as_in_docker() {
    require_images!(DEBIAN);
    let Some(python) = python() else { return };
    let env = TestEnv::new();
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations/harbor/tests");
    let out = env
        .program(&python)
        .env("H9SANDBOX_BIN", assert_cmd::cargo::cargo_bin("h9sandbox"))
        .args(["-m", "pytest", "-q", "-rfEX", "-p", "no:cacheprovider"])
        .arg(&suite)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let report = format!("{}{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "the Harbor suite failed:\n{report}");
    let summary = report
        .lines()
        .rev()
        .find(|l| l.contains(" passed"))
        .unwrap_or_else(|| panic!("no summary:\n{report}"));
    for bad in ["failed", "error", "xpassed", "skipped", "xfailed"] {
        assert!(!summary.contains(bad), "{summary}\n{report}");
    }
    let passed: usize = summary
        .trim_matches(|c: char| !c.is_ascii_digit())
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    // Two trial comparisons (oracle, nop) and six tests of the environment's methods.
    assert!(passed >= 8, "{summary}");
    // Nothing of the sandboxes is left.
    assert!(env.containers().is_empty(), "{:?}", env.containers());
}
