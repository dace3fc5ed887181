//! The Python environments of the integration tests (MCP's SDK, Inspect, Deep Agents, Harbor) and pytest runs in them.

use super::*;

/// The Python interpreter of a test's virtual environment: `$VAR`, else
/// `target/<venv>/bin/python`, when it can import `modules` (comma-separated, as Python's
/// `import` takes them); else `None`, announced, or a failure under CI naming `script` (which
/// makes that environment).
pub(crate) fn venv_python(var: &str, venv: &str, modules: &str, script: &str) -> Option<PathBuf> {
    let candidate = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join(venv)
            .join("bin/python")
    });
    let works = Command::new(&candidate)
        .args(["-c", &format!("import {modules}")])
        .stdin(std::process::Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        return Some(candidate);
    }
    let why = format!(
        "{} cannot import {modules}; run {script} (or set {var})",
        candidate.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("CI is set but {why}");
    }
    announce(&format!("{why}; set CI=1 to make this fatal"));
    None
}

/// Runs the pytest suite `suite` (a directory of this repository) with `python` in `env`'s
/// environment and `H9SANDBOX_BIN` naming the built binary; asserts it passed (`what` names it)
/// and returns its whole output and its summary line (`N passed[, M xfailed] in S s`).
pub(crate) fn run_pytest(
    env: &TestEnv,
    python: &Path,
    suite: &str,
    what: &str,
) -> (String, String) {
    let out = env
        .program(python)
        .env("H9SANDBOX_BIN", assert_cmd::cargo::cargo_bin("h9sandbox"))
        .args(["-m", "pytest", "-q", "-rfEX", "-p", "no:cacheprovider"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(suite))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let report = format!("{}{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "{what} failed:\n{report}");
    let summary = report
        .lines()
        .rev()
        .find(|l| l.contains(" passed"))
        .unwrap_or_else(|| panic!("no summary:\n{report}"))
        .to_string();
    (report, summary)
}
