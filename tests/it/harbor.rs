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

use std::path::PathBuf;

use crate::common::*;

/// The Python interpreter with the suite's packages, or `None` (announced) outside CI.
fn python() -> Option<PathBuf> {
    venv_python(
        "H9TEST_HARBOR_PYTHON",
        "harbor-venv",
        "harbor, pytest, h9sandbox_harbor",
        "scripts/harbor-venv.sh",
    )
}

#[test]
fn harbor_trials_in_h9sandbox_reward_as_in_docker() {
    require_images!(DEBIAN);
    let Some(python) = python() else { return };
    let env = TestEnv::new();
    let (report, summary) = run_pytest(
        &env,
        &python,
        "integrations/harbor/tests",
        "the Harbor suite",
    );
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
