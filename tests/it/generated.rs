//! The committed generated files match the code they were generated from: the shell
//! completions in `completions/`, the man pages in `man/`, the `--help` text of every
//! (sub)command in `tests/snapshots/help/` (all from `src/cli/args/`), and the key table of
//! `docs/reference/configuration.md` (from `KEYS` in `src/config/keys.rs`). A change there makes these
//! tests fail until the files are regenerated with the one command
//!
//!     H9SANDBOX_BLESS=1 cargo test --test it generated::
//!
//! (which rewrites them, removing files of commands that no longer exist) and committed.
//! No Docker needed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use assert_cmd::cargo::CommandCargoExt;

const BLESS: &str = "H9SANDBOX_BLESS=1 cargo test --test it generated::";

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn blessing() -> bool {
    std::env::var("H9SANDBOX_BLESS").is_ok_and(|v| v == "1")
}

/// The binary with a clean, terminal-less environment (help wraps at clap's default 100 columns).
fn h9sandbox(args: &[&str]) -> Vec<u8> {
    let out = Command::cargo_bin("h9sandbox")
        .unwrap()
        .args(args)
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "h9sandbox {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn read_dir(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap())
                .filter(|e| e.file_type().unwrap().is_file())
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Compares `dir` with `want` file by file; with H9SANDBOX_BLESS=1 makes `dir` equal to `want`.
fn check(dir: &Path, want: BTreeMap<String, Vec<u8>>) {
    let have = read_dir(dir);
    if blessing() {
        std::fs::create_dir_all(dir).unwrap();
        for name in have.keys().filter(|n| !want.contains_key(*n)) {
            std::fs::remove_file(dir.join(name)).unwrap();
        }
        for (name, bytes) in &want {
            if have.get(name) != Some(bytes) {
                std::fs::write(dir.join(name), bytes).unwrap();
            }
        }
        return;
    }
    let mut problems = Vec::new();
    for (name, bytes) in &want {
        match have.get(name) {
            None => problems.push(format!("{name} is missing")),
            Some(h) if h != bytes => {
                let (h, w) = (String::from_utf8_lossy(h), String::from_utf8_lossy(bytes));
                let line = h
                    .lines()
                    .zip(w.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or_else(|| h.lines().count().min(w.lines().count()));
                problems.push(format!(
                    "{name} is stale (first difference at line {}: committed {:?}, generated {:?})",
                    line + 1,
                    h.lines().nth(line).unwrap_or(""),
                    w.lines().nth(line).unwrap_or("")
                ));
            }
            Some(_) => {}
        }
    }
    for name in have.keys().filter(|n| !want.contains_key(*n)) {
        problems.push(format!("{name} is no longer generated"));
    }
    assert!(
        problems.is_empty(),
        "{} does not match the command line:\n  {}\nrun `{BLESS}` and commit the result",
        dir.display(),
        problems.join("\n  ")
    );
}

fn generated_into(args: &[&str]) -> BTreeMap<String, Vec<u8>> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let mut a = args.to_vec();
    a.push(dir.to_str().unwrap());
    h9sandbox(&a);
    read_dir(&dir)
}

#[test]
fn committed_completions_are_up_to_date() {
    let want = generated_into(&["generate", "completions", "--all"]);
    assert_eq!(want.len(), 5, "{:?}", want.keys());
    // `generate completions SHELL` prints the same script.
    assert_eq!(
        h9sandbox(&["generate", "completions", "bash"]),
        want["h9sandbox.bash"]
    );
    check(&repo("completions"), want);
}

#[test]
fn committed_man_pages_are_up_to_date() {
    let want = generated_into(&["generate", "man"]);
    for page in ["h9sandbox.1", "h9sandbox-up.1", "h9sandbox-bootstrap.1"] {
        assert!(want.contains_key(page), "{page} missing: {:?}", want.keys());
    }
    // The hidden `generate` gets no page; every page shows its examples.
    assert!(!want.keys().any(|k| k.contains("generate")));
    for (name, page) in &want {
        let text = String::from_utf8_lossy(page);
        assert!(text.contains(".SH EXAMPLES"), "{name} lacks examples");
    }
    check(&repo("man"), want);
}

/// Every (sub)command's path below the top level, hidden ones included, without `help`.
fn command_paths() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(prefix.clone());
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let mut p = prefix.clone();
            p.push(sub.get_name().to_string());
            walk(sub, p, out);
        }
    }
    let mut out = Vec::new();
    walk(&h9sandbox::cli::Cli::tree(), Vec::new(), &mut out);
    out
}

#[test]
fn help_text_matches_the_snapshots() {
    let want: BTreeMap<String, Vec<u8>> = command_paths()
        .into_iter()
        .map(|path| {
            let name = std::iter::once("h9sandbox".to_string())
                .chain(path.iter().cloned())
                .collect::<Vec<_>>()
                .join("-");
            let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
            args.push("--help");
            (format!("{name}.txt"), h9sandbox(&args))
        })
        .collect();
    check(&repo("tests/snapshots/help"), want);
}

#[test]
fn every_command_shows_examples() {
    fn walk(cmd: &clap::Command, name: String) {
        let after = cmd
            .get_after_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        assert!(
            after.contains("Examples:\n  "),
            "`{name} --help` shows no examples: add an after_help starting with `Examples:`"
        );
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            walk(sub, format!("{name} {}", sub.get_name()));
        }
    }
    walk(&h9sandbox::cli::Cli::tree(), "h9sandbox".into());
}

/// The key table of `docs/reference/configuration.md`: one row per key of
/// `h9sandbox::config::KEYS`, with its default from `Config::default()`, its type, its
/// environment variables, the layers closed to it, and its `doc`.
fn configuration_keys_table() -> String {
    use h9sandbox::config::{Config, Kind, HOST_SIDE_KEYS, KEYS, USER_FILE_ONLY_KEYS};
    let defaults = toml::Table::try_from(Config::default()).unwrap();
    let code = |s: &str| format!("`{s}`");
    let mut out =
        String::from("| key | default | type | environment | meaning |\n|---|---|---|---|---|\n");
    for key in KEYS {
        assert!(
            !key.doc.trim().is_empty() && !key.doc.contains('\n'),
            "configuration key {} needs a one-line doc in src/config/keys.rs (KEYS)",
            key.name
        );
        let default = match defaults.get(key.name) {
            Some(v) => code(&v.to_string()),
            None => "(unset)".to_string(),
        };
        let kind = match key.kind {
            Kind::Str => "string".to_string(),
            Kind::Int => "integer".to_string(),
            Kind::Secs => "seconds, or a duration (`90s`, `10m`, `1.5h`)".to_string(),
            Kind::Float => "number".to_string(),
            Kind::Path => "path".to_string(),
            Kind::Bool => "`true` or `false`".to_string(),
            Kind::PathList => "list of absolute paths".to_string(),
            Kind::HostList => "list of host names and `*.domain`".to_string(),
            Kind::OneOf(values) => {
                let v: Vec<String> = values.iter().map(|v| code(&format!("\"{v}\""))).collect();
                format!("one of {}", v.join(", "))
            }
        };
        let user_file_only = USER_FILE_ONLY_KEYS.contains(&key.name);
        let env = if user_file_only {
            "none (an error)".to_string()
        } else {
            let mut env = code(&format!("H9SANDBOX_{}", key.name.to_ascii_uppercase()));
            if let Some(seed) = key.unprefixed_env {
                env.push_str(&format!(", else {}", code(seed)));
            }
            env
        };
        let mut meaning = key.doc.replace('|', "\\|");
        if user_file_only {
            meaning.push_str(
                " **Only in your own configuration file** (or a `--config` file): in a project's \
                 `sandbox.toml` or the environment it is an error.",
            );
        } else if HOST_SIDE_KEYS.contains(&key.name) {
            meaning.push_str(" **Not in a project's `sandbox.toml`** (it acts on the host).");
        }
        out.push_str(&format!(
            "| {} | {default} | {kind} | {env} | {meaning} |\n",
            code(key.name)
        ));
    }
    out
}

/// Replaces (blessing) or compares the lines between `<!-- BEGIN GENERATED {what}` and
/// `<!-- END GENERATED {what}` of the committed file `rel` with `want`.
fn check_region(rel: &str, what: &str, want: &str) {
    let path = repo(rel);
    let text = std::fs::read_to_string(&path).unwrap();
    let begin = format!("<!-- BEGIN GENERATED {what}");
    let end = format!("<!-- END GENERATED {what}");
    let start = text
        .find(&begin)
        .and_then(|at| text[at..].find('\n').map(|nl| at + nl + 1))
        .unwrap_or_else(|| panic!("{rel} lacks the line {begin} …"));
    let stop = start
        + text[start..]
            .find(&end)
            .unwrap_or_else(|| panic!("{rel} lacks the line {end} … after {begin}"));
    let have = &text[start..stop];
    if blessing() {
        if have != want {
            std::fs::write(&path, format!("{}{want}{}", &text[..start], &text[stop..])).unwrap();
        }
        return;
    }
    if have != want {
        let line = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
        panic!(
            "the {what} of {rel} are stale (first difference at table line {}: committed {:?}, \
             generated {:?}); run `{BLESS}` and commit the result",
            line + 1,
            have.lines().nth(line).unwrap_or(""),
            want.lines().nth(line).unwrap_or("")
        );
    }
}

#[test]
fn the_configuration_reference_lists_every_key_of_the_code() {
    let table = configuration_keys_table();
    for key in h9sandbox::config::KEYS {
        assert!(table.contains(&format!("| `{}` |", key.name)));
    }
    check_region("docs/reference/configuration.md", "keys", &table);
}

/// The help says what the commands do now (issue 22, item 6): `--user`'s default among its
/// values, no internal module named to a user, `run` among the commands that pass a status
/// through, and the file commands reaching the container's files beside the work dir's.
#[test]
fn help_text_is_true_to_the_commands() {
    let text = |args: &[&str]| String::from_utf8(h9sandbox(args)).unwrap();
    for cmd in ["up", "run"] {
        let help = text(&[cmd, "--help"]);
        assert!(
            help.contains("owner (the work dir's owner, the default), root, host"),
            "`{cmd} --help` leaves out --user's default:\n{help}"
        );
        assert!(
            !help.contains("sandbox::") && !help.contains("engine::"),
            "`{cmd} --help` names an internal module:\n{help}"
        );
    }
    let top = text(&["--help"]);
    assert!(
        top.contains("`exec`, `run`, `bootstrap` and `shell` pass the\ncommand's status through"),
        "{top}"
    );
    for one_liner in [
        "refusing paths that leave it",
        "paths leaving the work dir are refused",
        "Replace a file of the sandbox's work dir",
        "Replace text in a file of the sandbox's work dir",
    ] {
        assert!(!top.contains(one_liner), "still says {one_liner:?}:\n{top}");
    }
    assert!(
        top.contains("in its work dir or anywhere in the container"),
        "{top}"
    );
}
