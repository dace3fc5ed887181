//! The documentation stays true (issue 23): every relative link and `#anchor` of README.md,
//! docs/, CONTRIBUTING.md, ARCHITECTURE.md and CHANGELOG.md resolves; every shell block they show
//! is marked, and the ones marked runnable run as written against the engine; ARCHITECTURE.md's
//! import table is the code's; every test they cite by name (`files::…`) exists. The markers, on the line before a block's opening fence:
//!
//! - `<!-- quick-start … -->`: the README's Quick start (run by `first_hour.rs` and `demo.sh`);
//! - `<!-- runnable -->`: run in an empty temporary work directory (`<!-- runnable: from the
//!   repository's root … -->`: at the repository's root), with `H9SANDBOX_IMAGE` the local
//!   Debian test image and a temporary `HOME` and state directory. It must exit 0 under `set -e`,
//!   print the text of every `# prints: TEXT` comment, and leave no sandbox and no container;
//! - `<!-- not-run: REASON -->`: shown, not run (a registry, another machine, root on the host's
//!   daemon, the test suite itself).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use crate::common::*;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The documentation's Markdown files, relative to the repository's root.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path.strip_prefix(repo()).unwrap().to_path_buf());
            }
        }
    }
    let mut files: Vec<PathBuf> = [
        "README.md",
        "CONTRIBUTING.md",
        "ARCHITECTURE.md",
        "CHANGELOG.md",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    walk(&repo().join("docs"), &mut files);
    files.sort();
    files
}

fn read(rel: &Path) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{}: {e}", rel.display()))
}

/// A fenced code block: its info string, its body, and the nearest non-blank line before its
/// opening fence (trimmed); `line` is the opening fence's line number (1-based).
struct Block {
    info: String,
    body: String,
    before: String,
    line: usize,
}

/// The lines outside fenced code blocks (with their numbers) and the blocks themselves.
fn split_fences(text: &str) -> (Vec<(usize, &str)>, Vec<Block>) {
    let mut prose = Vec::new();
    let mut blocks = Vec::new();
    let mut open: Option<(String, Block)> = None;
    let mut last_text = String::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        match &mut open {
            Some((fence, block)) => {
                if t.starts_with(fence.as_str()) && t.trim_end() == fence.as_str() {
                    blocks.push(std::mem::replace(
                        block,
                        Block {
                            info: String::new(),
                            body: String::new(),
                            before: String::new(),
                            line: 0,
                        },
                    ));
                    open = None;
                } else {
                    let indent = line.len() - t.len();
                    block
                        .body
                        .push_str(line.get(indent.min(line.len())..).unwrap_or(line));
                    block.body.push('\n');
                }
            }
            None if t.starts_with("```") => {
                let fence: String = t.chars().take_while(|&c| c == '`').collect();
                open = Some((
                    fence.clone(),
                    Block {
                        info: t[fence.len()..].trim().to_string(),
                        body: String::new(),
                        before: last_text.clone(),
                        line: i + 1,
                    },
                ));
            }
            None => {
                prose.push((i + 1, line));
                if !t.trim().is_empty() {
                    last_text = t.trim().to_string();
                }
            }
        }
    }
    assert!(open.is_none(), "an unclosed code fence");
    (prose, blocks)
}

/// `line` without its inline code spans (`` `…` ``, ``` `` … `` ```).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find('`') {
        out.push_str(&rest[..at]);
        let ticks = rest[at..].chars().take_while(|&c| c == '`').count();
        let after = &rest[at + ticks..];
        match after.find(&"`".repeat(ticks)) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// GitHub's anchor of a heading: its text without Markdown code marks, lower-cased, with
/// everything but letters, digits, `-`, `_` and spaces dropped and spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .replace('`', "")
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (a repeated one gets `-1`, `-2`, … as on GitHub).
fn anchors(text: &str) -> BTreeSet<String> {
    let (prose, _) = split_fences(text);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let s = slug(line[hashes..].trim());
            let n = seen.entry(s.clone()).or_insert(0);
            out.insert(if *n == 0 {
                s.clone()
            } else {
                format!("{s}-{n}")
            });
            *n += 1;
        }
    }
    out
}

/// The targets of the inline links `[text](target)` of a line (outside code spans).
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut out = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(
            after[..end]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string(),
        );
        rest = &after[end..];
    }
    out
}

/// `base`'s directory joined with `rel`, `.` and `..` resolved lexically; `None` when it leaves
/// the repository.
fn resolve(base: &Path, rel: &str) -> Option<PathBuf> {
    let joined = base.parent().unwrap().join(rel);
    let mut parts: Vec<Component> = Vec::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts.iter().collect())
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let files = markdown_files();
    assert!(files.iter().any(|f| f.starts_with("docs")), "{files:?}");
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = read(file);
        let (prose, _) = split_fences(&text);
        for (n, line) in prose {
            for target in link_targets(line) {
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let dest = if path.is_empty() {
                    file.clone()
                } else {
                    match resolve(file, path) {
                        Some(d) => d,
                        None => {
                            problems.push(format!(
                                "{}:{n}: {target} leaves the repository",
                                file.display()
                            ));
                            continue;
                        }
                    }
                };
                if !repo().join(&dest).exists() {
                    problems.push(format!(
                        "{}:{n}: {target}: no file {}",
                        file.display(),
                        dest.display()
                    ));
                    continue;
                }
                if let Some(anchor) = anchor {
                    if dest.extension().is_none_or(|e| e != "md") {
                        problems.push(format!(
                            "{}:{n}: {target}: an anchor into a file that is no Markdown",
                            file.display()
                        ));
                    } else if !anchors(&read(&dest)).contains(anchor) {
                        problems.push(format!(
                            "{}:{n}: {target}: {} has no heading with the anchor #{anchor}",
                            file.display(),
                            dest.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser broken?"
    );
    assert!(
        problems.is_empty(),
        "broken links:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_link_checker_knows_githubs_anchors() {
    assert_eq!(slug("`ps`, `logs`, `kill`"), "ps-logs-kill");
    assert_eq!(
        slug("Egress allowlist (`network = \"allowlist\"`)"),
        "egress-allowlist-network--allowlist"
    );
    assert_eq!(
        slug("Project files (`sandbox.toml`) and `trust`"),
        "project-files-sandboxtoml-and-trust"
    );
    assert_eq!(
        slug("Engines: Docker, Podman, local"),
        "engines-docker-podman-local"
    );
    let a = anchors("# A\n```sh\n# not a heading\n```\n## A\n#no\n");
    assert_eq!(a, BTreeSet::from(["a".to_string(), "a-1".to_string()]));
    assert_eq!(
        link_targets("see [x](a.md#b), `[y](not-a-link)` and [z](#c)"),
        ["a.md#b", "#c"]
    );
}

/// Shell blocks of the documentation: every one is marked.
fn shell_blocks() -> Vec<(PathBuf, Block)> {
    let mut out = Vec::new();
    for file in markdown_files() {
        let (_, blocks) = split_fences(&read(&file));
        for b in blocks {
            if matches!(
                b.info.as_str(),
                "sh" | "bash" | "shell" | "console" | "make"
            ) {
                out.push((file.clone(), b));
            }
        }
    }
    out
}

#[derive(Debug, PartialEq)]
enum Mark {
    QuickStart,
    Runnable { at_root: bool },
    NotRun,
}

fn mark(b: &Block) -> Option<Mark> {
    let m = b.before.strip_prefix("<!--")?.strip_suffix("-->")?.trim();
    if m.starts_with("quick-start") {
        Some(Mark::QuickStart)
    } else if m == "runnable" {
        Some(Mark::Runnable { at_root: false })
    } else if m.starts_with("runnable: from the repository's root") {
        Some(Mark::Runnable { at_root: true })
    } else if m
        .strip_prefix("not-run:")
        .is_some_and(|reason| reason.trim().len() > 10)
    {
        Some(Mark::NotRun)
    } else {
        None
    }
}

#[test]
fn every_shell_block_is_marked_runnable_or_not_run_with_a_reason() {
    let blocks = shell_blocks();
    let mut problems = Vec::new();
    for (file, b) in &blocks {
        match mark(b) {
            None => problems.push(format!(
                "{}:{}: a ```{} block without a marker on the line before it \
                 (`<!-- runnable -->` or `<!-- not-run: REASON -->`; see tests/it/docs.rs)",
                file.display(),
                b.line,
                b.info
            )),
            Some(Mark::Runnable { .. }) if b.info == "make" => problems.push(format!(
                "{}:{}: a make block cannot be marked runnable",
                file.display(),
                b.line
            )),
            Some(Mark::QuickStart) if file != Path::new("README.md") => problems.push(format!(
                "{}:{}: only the README has the quick-start block",
                file.display(),
                b.line
            )),
            _ => {}
        }
    }
    let runnable = |f: &str| {
        blocks
            .iter()
            .filter(|(file, b)| {
                file == Path::new(f) && matches!(mark(b), Some(Mark::Runnable { .. }))
            })
            .count()
    };
    assert!(
        runnable("docs/guide.md") >= 5,
        "the guide shows too few runnable examples"
    );
    assert!(
        blocks
            .iter()
            .any(|(_, b)| mark(b) == Some(Mark::QuickStart)),
        "README.md lost its quick-start block"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// What a runnable block's `# prints: TEXT` comments say it prints.
fn promised_output(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| {
            l.split_once("# prints: ")
                .map(|(_, t)| t.trim().to_string())
        })
        .collect()
}

#[test]
fn the_runnable_blocks_of_the_docs_run_as_written() {
    require_container!("the documentation's examples run containers");
    let blocks: Vec<(PathBuf, Block, bool)> = shell_blocks()
        .into_iter()
        .filter_map(|(f, b)| match mark(&b) {
            Some(Mark::Runnable { at_root }) => Some((f, b, at_root)),
            _ => None,
        })
        .collect();
    assert!(!blocks.is_empty());
    // Each block in a sandbox world of its own, all at once (they mostly wait on the engine).
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = blocks
            .iter()
            .map(|(file, b, at_root)| {
                s.spawn(move || {
                    let env = TestEnv::new();
                    let mut cmd = env.shell(&format!("set -e\n{}", b.body));
                    cmd.env("H9SANDBOX_IMAGE", DEBIAN).env("PATH", bin_dir());
                    if *at_root {
                        cmd.current_dir(repo());
                    }
                    let out = cmd.stdin(std::process::Stdio::null()).output().unwrap();
                    let (o, e) = (stdout(&out), stderr(&out));
                    let at = format!("{}:{}", file.display(), b.line);
                    let mut bad = Vec::new();
                    if !out.status.success() {
                        bad.push(format!("exited with {:?}", out.status.code()));
                    }
                    for text in promised_output(&b.body) {
                        if !o.contains(&text) {
                            bad.push(format!("did not print {text:?}"));
                        }
                    }
                    if !env.ls_raw().is_empty() {
                        bad.push(format!("left sandboxes behind: {:?}", env.ls_raw()));
                    }
                    if !env.containers().is_empty() {
                        bad.push(format!("left containers behind: {:?}", env.containers()));
                    }
                    (!bad.is_empty()).then(|| {
                        format!(
                            "{at}: {}\n--- block\n{}--- stdout\n{o}--- stderr\n{e}",
                            bad.join("; "),
                            b.body
                        )
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The top-level modules of `src/` each module imports (`crate::X` in code, not in comments or
/// in `#[cfg(test)]` parts), as `python3 module-graph.py src` reads them.
fn code_imports() -> BTreeMap<String, BTreeSet<String>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = repo().join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let top = |p: &Path| {
        let first = p.strip_prefix(&src).unwrap().components().next().unwrap();
        first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string()
    };
    let modules: BTreeSet<String> = files
        .iter()
        .map(|p| top(p))
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for file in &files {
        let m = top(file);
        let Some(set) = edges.get_mut(&m) else {
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let ident = |s: &str| -> String {
            s.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        };
        for (at, _) in code.match_indices("crate::") {
            let rest = &code[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                set.extend(group.split(',').map(|g| ident(g.trim())));
            } else {
                set.insert(ident(rest));
            }
        }
        set.retain(|t| t != &m && modules.contains(t));
    }
    edges
}

#[test]
fn the_architecture_table_lists_what_each_module_imports() {
    let code = code_imports();
    let text = read(Path::new("ARCHITECTURE.md"));
    let mut documented: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
        // The imports are the module names in code marks before the first `;` of the last cell.
        let imports: BTreeSet<String> = cells
            .last()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|t| code.contains_key(*t))
            .map(str::to_string)
            .collect();
        for module in cells[0].split('`').skip(1).step_by(2) {
            let name = module.trim_end_matches('/').trim_end_matches(".rs");
            documented.insert(name.to_string(), imports.clone());
        }
    }
    let mut problems = Vec::new();
    for (m, imports) in &code {
        match documented.get(m) {
            None => problems.push(format!("module `{m}` has no row")),
            Some(d) if d != imports => problems.push(format!(
                "`{m}` imports {:?}; the table says {:?}",
                imports, d
            )),
            Some(_) => {}
        }
    }
    for m in documented.keys().filter(|m| !code.contains_key(*m)) {
        problems.push(format!(
            "the table has a row for `{m}`, which is no module of src/"
        ));
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md's table is not the code's (update the table, and the diagram above it):\n  {}",
        problems.join("\n  ")
    );
}

/// Every test of `tests/it` by its path in the binary (`agent::pid_1_reaps_every_orphan_on_every_path`,
/// `remote::the_channel_answers_only_the_pinned_host_with_the_token`): a `#[test]` function's
/// name after its module's (a file `tests/it/a.rs` or `tests/it/a/mod.rs` is module `a`, and
/// `tests/it/a/b.rs` is `a::b`).
fn integration_tests() -> BTreeSet<String> {
    fn walk(dir: &Path, module: &str, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let inner = if module.is_empty() {
                stem.clone()
            } else {
                format!("{module}::{stem}")
            };
            if path.is_dir() {
                walk(&path, &inner, out);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let module = match stem.as_str() {
                "main" | "mod" => module.to_string(),
                _ => inner,
            };
            let text = std::fs::read_to_string(&path).unwrap();
            let mut after_test = false;
            for line in text.lines().map(str::trim) {
                if line == "#[test]" {
                    after_test = true;
                } else if after_test && line.starts_with("fn ") {
                    let name: String = line["fn ".len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    out.insert(format!("{module}::{name}"));
                    after_test = false;
                } else if after_test && !line.starts_with("#[") && !line.starts_with("//") {
                    after_test = false;
                }
            }
        }
    }
    let mut tests = BTreeSet::new();
    walk(&repo().join("tests/it"), "", &mut tests);
    tests
}

#[test]
fn every_test_the_documentation_names_exists() {
    let tests = integration_tests();
    assert!(
        tests.contains("docs::every_test_the_documentation_names_exists"),
        "{tests:?}"
    );
    let modules: BTreeSet<&str> = tests.iter().filter_map(|t| t.split("::").next()).collect();
    let mut missing = Vec::new();
    for rel in markdown_files() {
        let text = read(&rel);
        for (n, line) in text.lines().enumerate() {
            // Code spans: every second piece between backticks.
            for span in line.split('`').skip(1).step_by(2) {
                let parts: Vec<&str> = span.split("::").collect();
                let named_test = parts.len() >= 2
                    && modules.contains(parts[0])
                    && parts.iter().all(|p| {
                        !p.is_empty()
                            && p.chars()
                                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                    })
                    // A test's name is a sentence; `agent::main` is a module of the code.
                    && parts.last().unwrap().matches('_').count() >= 3;
                if named_test && !tests.contains(span) {
                    missing.push(format!("{}:{}: `{span}`", rel.display(), n + 1));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "tests named in the documentation that do not exist (renamed or moved?):\n{}",
        missing.join("\n")
    );
}
