//! LangChain's standard sandbox suite (`SandboxIntegrationTests` of the `langchain-tests`
//! package on PyPI) run against h9sandbox's Deep Agents backend (`integrations/deepagents`,
//! over `deepagents`' `BaseSandbox`), through pytest, against the real engine, with the versions
//! pinned in `scripts/deepagents-venv.sh`; plus the provider side (create, list, get, delete),
//! timeouts and commands past the kernel's 128 KiB argument limit. Every test passes, or is
//! one where the suite and the pinned deepagents disagree with each other, listed with the
//! reason in `integrations/deepagents/tests/test_standard.py` (strict: one that starts passing
//! fails the run).
//!
//! The interpreter is `$H9TEST_DEEPAGENTS_PYTHON`, which `.ci/run` sets to the virtual
//! environment made by `scripts/deepagents-venv.sh`; without it,
//! `target/deepagents-venv/bin/python` if that exists. When neither has the packages, the test
//! fails if `CI` is set, and is skipped with a loud message otherwise.

use std::path::PathBuf;

use crate::common::*;

/// The Python interpreter with the suite's packages, or `None` (announced) outside CI.
fn python() -> Option<PathBuf> {
    venv_python(
        "H9TEST_DEEPAGENTS_PYTHON",
        "deepagents-venv",
        "deepagents, langchain_tests, pytest, h9sandbox_deepagents",
        "scripts/deepagents-venv.sh",
    )
}

#[test]
fn langchains_sandbox_suite_passes_against_h9sandbox() {
    require_container!("the suite's file helpers run python3 in a container");
    require_images!(PYTHON);
    let Some(python) = python() else { return };
    let env = TestEnv::new();
    let (report, summary) = run_pytest(&env, &python, "integrations/deepagents/tests", "the suite");
    for bad in ["failed", "error", "xpassed", "skipped"] {
        assert!(
            !summary.replace("xfailed", "").contains(bad),
            "{summary}\n{report}"
        );
    }
    let words: Vec<&str> = summary
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect();
    let count = |what: &str| -> usize {
        words
            .windows(2)
            .find(|w| w[1] == what)
            .and_then(|w| w[0].parse().ok())
            .unwrap_or(0)
    };
    // langchain-tests 1.1.9 has 86 tests; 7 are where it and deepagents 0.7.32 disagree; the
    // backend's own tests add 2.
    assert!(count("passed") >= 75, "{summary}");
    assert!(count("xfailed") <= 7, "{summary}");
    assert!(env.containers().is_empty(), "{:?}", env.containers());
}
