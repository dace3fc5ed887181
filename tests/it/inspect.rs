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

use std::path::PathBuf;

use crate::common::*;

/// The Python interpreter with the suite's packages, or `None` (announced) outside CI.
fn python() -> Option<PathBuf> {
    venv_python(
        "H9TEST_INSPECT_PYTHON",
        "inspect-venv",
        "inspect_ai, pytest, h9sandbox_inspect",
        "scripts/inspect-venv.sh",
    )
}

#[test]
fn inspects_sandbox_self_check_passes_against_h9sandbox() {
    require_container!("Inspect's checks need a container (users, absolute paths)");
    let Some(python) = python() else { return };
    let env = TestEnv::new();
    let (report, summary) = run_pytest(
        &env,
        &python,
        "integrations/inspect/tests",
        "the self-check",
    );
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
