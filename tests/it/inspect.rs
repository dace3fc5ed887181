//! Inspect's own sandbox conformance suite (`inspect_ai.util._sandbox.self_check`, from the
//! `inspect_ai` package on PyPI) run against h9sandbox's Inspect provider
//! (`integrations/inspect`), through pytest, against the real engine: every check passes, or is
//! one of the documented exceptions of `integrations/inspect/tests/test_self_check.py` (strict:
//! an exception that starts passing fails too).
//!
//! The interpreter is `$H9TEST_INSPECT_PYTHON`, which `.ci/run` sets to the virtual environment
//! made by `scripts/inspect-venv.sh`; without it, `target/inspect-venv/bin/python` if that
//! exists. When neither has `inspect_ai`, `pytest` and the provider, the test fails if `CI` is
//! set, and is skipped with a loud message otherwise.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::*;

/// The Python interpreter with Inspect, pytest and the provider, or `None` (announced) outside
/// CI.
fn python() -> Option<PathBuf> {
    let candidate = std::env::var_os("H9TEST_INSPECT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/inspect-venv/bin/python")
        });
    let works = Command::new(&candidate)
        .args(["-c", "import inspect_ai, pytest, h9sandbox_inspect"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        return Some(candidate);
    }
    let why = format!(
        "{} cannot import inspect_ai, pytest and h9sandbox_inspect; run scripts/inspect-venv.sh (or set H9TEST_INSPECT_PYTHON)",
        candidate.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("CI is set but {why}");
    }
    announce(&format!("{why}; set CI=1 to make this fatal"));
    None
}

#[test]
fn inspects_sandbox_self_check_passes_against_h9sandbox() {
    require_container!("Inspect's checks need a container (users, absolute paths)");
    let Some(python) = python() else { return };
    let env = TestEnv::new();
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations/inspect/tests");
    let out = env
        .program(&python)
        .env("H9SANDBOX_BIN", assert_cmd::cargo::cargo_bin("h9sandbox"))
        .args(["-m", "pytest", "-q", "-rfEX", "-p", "no:cacheprovider"])
        .arg(&suite)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let report = format!("{}{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "the self-check failed:\n{report}");
    // The summary line: "N passed[, M xfailed] in S s"; nothing failed, nothing errored.
    let summary = report
        .lines()
        .rev()
        .find(|l| l.contains(" passed"))
        .unwrap_or_else(|| panic!("no summary:\n{report}"));
    for bad in ["failed", "error", "xpassed", "skipped"] {
        assert!(!summary.contains(bad), "{summary}\n{report}");
    }
    let passed: usize = summary
        .trim_matches(|c: char| !c.is_ascii_digit())
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    // Inspect 0.3.285 has 44 checks; the provider's own registration test is one more.
    assert!(passed >= 40, "{summary}");
}
