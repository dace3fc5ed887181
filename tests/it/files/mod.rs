//! Integration tests of `read`, `write` and `edit`: they work on the host side of the bind mount,
//! so every test here plants real symlinks from inside a real container and checks, on the host,
//! that nothing outside the work dir was read, created or changed. Also: ownership (`user`),
//! atomicity on failure and on SIGINT.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use serde::Deserialize;

mod symlinks;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadJson {
    path: String,
    size: u64,
    content: Option<String>,
    content_base64: Option<String>,
    truncated: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteJson {
    path: String,
    bytes_written: u64,
    size: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EditJson {
    path: String,
    replacements: usize,
}

/// Asserts a refusal: exit status 1 and one line on stderr saying the path leads out.
fn assert_path_refused(out: &Output, what: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{what}: {err}");
    assert!(
        err.starts_with("h9sandbox: error: refusing ") && err.trim_end().lines().count() == 1,
        "{what}: {err}"
    );
    assert!(
        err.contains("outside the sandbox's work dir") || err.contains("symlink loop"),
        "{what}: {err}"
    );
}

/// Everything outside the work dir that a test plants and watches: a canary file next to the
/// work dir (in the test's temporary root, which the container cannot see), and a snapshot of
/// that root's files outside `work/`.
struct Outside {
    canary: PathBuf,
    secret: String,
    before: Vec<(PathBuf, u64, i64)>,
}

impl Outside {
    fn plant(env: &TestEnv) -> Outside {
        let secret = format!("CANARY-{}", uuid_like());
        let canary = env.root.path().canonicalize().unwrap().join("canary.txt");
        std::fs::write(&canary, &secret).unwrap();
        let before = outside_files(env);
        Outside {
            canary,
            secret,
            before,
        }
    }

    /// The canary's path relative to `/` (for paths through a symlink to `/`).
    fn path_below_root(&self) -> String {
        self.canary.to_str().unwrap()[1..].to_string()
    }

    /// Asserts the canary is untouched, nothing appeared or changed outside the work dir, and
    /// `output` does not hold the canary's content.
    fn assert_untouched(&self, env: &TestEnv, outputs: &[&Output]) {
        assert_eq!(std::fs::read_to_string(&self.canary).unwrap(), self.secret);
        assert_eq!(
            outside_files(env),
            self.before,
            "files outside the work dir changed"
        );
        for o in outputs {
            assert!(
                !stdout(o).contains(&self.secret) && !stderr(o).contains(&self.secret),
                "the canary was read: {}",
                stdout(o)
            );
        }
        let leftovers = find_temps(&env.workdir);
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }
}

fn uuid_like() -> String {
    format!(
        "{:x}{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// (path, size, mtime) of every file and directory under the test root, outside `work/` and
/// `state/`.
fn outside_files(env: &TestEnv) -> Vec<(PathBuf, u64, i64)> {
    let mut out = Vec::new();
    let root = env.root.path().canonicalize().unwrap();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p == env.workdir || p == env.state_dir {
                continue;
            }
            let m = std::fs::symlink_metadata(&p).unwrap();
            out.push((p.clone(), m.size(), m.mtime_nsec()));
            if m.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Temporary files of writes left anywhere under `dir`.
fn find_temps(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let e = e.unwrap();
            let p = e.path();
            if e.file_name().to_string_lossy().starts_with(".h9tmp-") {
                found.push(p.clone());
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            }
        }
    }
    found
}

/// Tries `read` (table and JSON), `write` (plain, --append, --parents into a new directory)
/// and `edit` through `path` (and `new_dir`/x for --parents); every one must be refused.
fn attack(env: &TestEnv, id: &str, path: &str, old: &str) -> Vec<Output> {
    let mut outs = vec![
        env.run(&["read", id, path]),
        env.run(&["read", id, path, "--format", "json"]),
        run_stdin(env, &["write", id, path], b"pwned"),
        run_stdin(env, &["write", id, path, "--append"], b"pwned"),
        env.run(&["edit", id, path, "--old", old, "--new", "pwned"]),
        env.run(&["edit", id, path, "--old", old, "--new", "pwned", "--all"]),
    ];
    let parent = Path::new(path).parent().unwrap().to_str().unwrap();
    if !parent.is_empty() {
        let deep = format!("{parent}/h9-made-{}/x", uuid_like());
        outs.push(run_stdin(env, &["write", id, &deep, "--parents"], b"pwned"));
    }
    for (i, o) in outs.iter().enumerate() {
        assert_path_refused(o, &format!("attack #{i} through {path}"));
    }
    outs
}

#[test]
fn read_write_edit_round_trip_the_bytes_the_container_sees() {
    require_docker!();
    if workdir_copied("the test changes or checks the host's side of the work dir, which a copied work dir never shares (cp is the way)") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);

    // write from stdin, JSON report; the container sees the same bytes.
    let out = run_stdin(
        &env,
        &["write", &id, "notes.txt", "--format", "json"],
        b"alpha\n",
    );
    assert_ok(&out);
    let w: WriteJson = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(w.path, env.path("notes.txt").to_str().unwrap());
    assert_eq!((w.bytes_written, w.size), (6, 6));
    assert_eq!(sh(&env, &id, "cat notes.txt"), "alpha\n");
    let mode = std::fs::metadata(env.path("notes.txt")).unwrap().mode();
    assert_eq!(mode & 0o777, 0o644);

    // --append, and absolute paths inside the work dir.
    let abs = env.path("notes.txt");
    let out = run_stdin(
        &env,
        &["write", &id, abs.to_str().unwrap(), "--append", "--json"],
        b"beta\n",
    );
    assert_ok(&out);
    let w: WriteJson = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((w.bytes_written, w.size), (5, 11));
    let out = env.run(&["read", &id, abs.to_str().unwrap()]);
    assert_ok(&out);
    assert_eq!(out.stdout, b"alpha\nbeta\n");

    // Binary content, all 256 byte values, from a host file, with --parents and --mode.
    let bin: Vec<u8> = (0..4096u32)
        .map(|i| u8::try_from((i + 128) % 256).unwrap())
        .collect();
    let src = env.root.path().join("src.bin");
    std::fs::write(&src, &bin).unwrap();
    let out = env.run(&[
        "write",
        &id,
        "deep/er/data.bin",
        "--from",
        src.to_str().unwrap(),
        "--parents",
        "--mode",
        "750",
    ]);
    assert_ok(&out);
    assert!(out.stdout.is_empty(), "write is quiet: {}", stdout(&out));
    assert_eq!(std::fs::read(env.path("deep/er/data.bin")).unwrap(), bin);
    assert_eq!(
        std::fs::metadata(env.path("deep/er/data.bin"))
            .unwrap()
            .mode()
            & 0o777,
        0o750
    );
    let host_sum = sh(&env, &id, "sha256sum deep/er/data.bin | cut -d' ' -f1");
    let out = env.run(&["read", &id, "deep/er/data.bin"]);
    assert_ok(&out);
    assert_eq!(out.stdout, bin);
    // Without --parents a missing directory is an error that says what to do.
    let out = run_stdin(&env, &["write", &id, "nope/x"], b"x");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--parents"), "{}", stderr(&out));

    // read --format json: text as content, binary as content_base64; --max-bytes caps.
    let out = env.run(&["read", &id, "notes.txt", "--format", "json"]);
    let r: ReadJson = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r.path, abs.to_str().unwrap());
    assert_eq!(
        (r.size, r.content.as_deref(), r.truncated),
        (11, Some("alpha\nbeta\n"), false)
    );
    assert!(r.content_base64.is_none());
    let out = env.run(&[
        "read",
        &id,
        "deep/er/data.bin",
        "--json",
        "--max-bytes",
        "3",
    ]);
    let r: ReadJson = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((r.size, r.truncated, r.content), (4096, true, None));
    assert_eq!(r.content_base64.as_deref(), Some("gIGC"));
    let out = env.run(&["read", &id, "deep/er/data.bin", "--max-bytes", "300"]);
    assert_eq!(out.stdout, &bin[..300]);
    // The container computed the same digest of what the host wrote.
    let out = Command::new("sha256sum")
        .arg(env.path("deep/er/data.bin"))
        .output()
        .unwrap();
    assert!(stdout(&out).starts_with(host_sum.trim()));

    // edit: exactly one occurrence, or --all; the count is named otherwise.
    let out = env.run(&["edit", &id, "notes.txt", "--old", "a", "--new", "A"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("occurs 3 times"), "{}", stderr(&out));
    let out = env.run(&["edit", &id, "notes.txt", "--old", "gamma", "--new", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("does not occur"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(env.path("notes.txt")).unwrap(),
        "alpha\nbeta\n"
    );
    let out = env.run(&[
        "edit",
        &id,
        "notes.txt",
        "--old",
        "beta\n",
        "--new",
        "-b-\n",
    ]);
    assert_ok(&out);
    assert_eq!(
        stdout(&out).trim(),
        format!("replaced 1 occurrence in {}", abs.display())
    );
    let out = env.run(&[
        "edit",
        &id,
        "notes.txt",
        "--old",
        "a",
        "--new",
        "A",
        "--all",
        "--json",
    ]);
    assert_ok(&out);
    let e: EditJson = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (e.path.as_str(), e.replacements),
        (abs.to_str().unwrap(), 2)
    );
    assert_eq!(sh(&env, &id, "cat notes.txt"), "AlphA\n-b-\n");

    // Not regular files, directories, unknown sandboxes.
    sh(&env, &id, "mkdir -p adir && mkfifo fifo");
    for args in [
        vec!["read", &id, "adir"],
        vec!["read", &id, "."],
        vec!["read", &id, "fifo"],
        vec!["write", &id, "adir"],
        vec!["write", &id, "adir/"],
        vec!["edit", &id, "fifo", "--old", "a", "--new", "b"],
        vec!["read", "ffffffff", "notes.txt"],
        vec!["read", &id, "missing.txt"],
    ] {
        let out = run_stdin(&env, &args, b"x");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out).trim_end().lines().count(),
            1,
            "{}",
            stderr(&out)
        );
    }
    assert!(find_temps(&env.workdir).is_empty());
}

fn list_dir(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

/// Should a broken build ever let a write through into the host's /etc, removes what it made
/// (our own `h9-*` names only) when the test ends, so a failing run leaves no litter.
struct EtcGuard(BTreeSet<PathBuf>);

impl Drop for EtcGuard {
    fn drop(&mut self) {
        for p in list_dir(Path::new("/etc")).difference(&self.0) {
            let name = p.file_name().unwrap().to_string_lossy();
            if name.starts_with("h9-pwned-") || name.starts_with("h9-made-") {
                let _ = std::fs::remove_dir_all(p).or_else(|_| std::fs::remove_file(p));
            }
        }
    }
}

#[test]
fn failed_writes_keep_the_old_content() {
    require_docker!();
    if workdir_copied("the test changes or checks the host's side of the work dir, which a copied work dir never shares (cp is the way)") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    std::fs::write(env.path("f"), "old\n").unwrap();
    // Too large: a file-size limit makes the write fail midway with EFBIG (SIGXFSZ ignored, as
    // a full disk fails with ENOSPC).
    let big = env.root.path().join("big");
    std::fs::write(&big, vec![b'x'; 1 << 20]).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("h9sandbox");
    let out = Command::new("bash")
        .args([
            "-c",
            "trap '' XFSZ; ulimit -f 64; exec \"$BIN\" write \"$ID\" f --from \"$BIG\"",
        ])
        .current_dir(&env.workdir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("BIN", &bin)
        .env("ID", &id)
        .env("BIG", &big)
        .env("H9SANDBOX_STATE_DIR", &env.state_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("keeps its old content") && stderr(&out).contains("too large"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(env.path("f")).unwrap(), "old\n");
    // An unreadable source, a bad mode: nothing is touched.
    let out = env.run(&["write", &id, "f", "--from", "/nonexistent/x"]);
    assert_eq!(out.status.code(), Some(1));
    let out = run_stdin(&env, &["write", &id, "f", "--mode", "4755"], b"new");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--mode"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(env.path("f")).unwrap(), "old\n");
    assert!(find_temps(&env.workdir).is_empty());
    assert_eq!(sh(&env, &id, "ls -A"), "f\n");
}

#[test]
fn write_no_clobber_never_replaces_anything_even_racing() {
    require_docker!();
    if workdir_copied("it checks the host's work dir for the temporary file of a write, which a copied work dir's write makes in the container") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    let write = |path: &str, content: &str| {
        run_stdin(
            &env,
            &["write", &id, path, "--no-clobber"],
            content.as_bytes(),
        )
    };
    // A new file is made; an existing one is left alone (exit 1, saying so).
    assert_ok(&write("new.txt", "first\n"));
    let out = write("new.txt", "second\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("new.txt exists already; --no-clobber"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(env.path("new.txt")).unwrap(),
        "first\n"
    );
    // Anything at the name counts, a dangling symlink too (as O_CREAT | O_EXCL).
    std::os::unix::fs::symlink("nowhere", env.path("dangling")).unwrap();
    assert_eq!(write("dangling", "x").status.code(), Some(1));
    assert!(!env.path("nowhere").exists());
    assert!(find_temps(&env.workdir).is_empty());
    // Inside the container the same.
    assert_ok(&write("/tmp/made.txt", "one\n"));
    let out = write("/tmp/made.txt", "two\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("/tmp/made.txt exists already"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sh(&env, &id, "cat /tmp/made.txt"), "one\n");
    // Racing writers of one new name: exactly one wins, whole; none replaces another.
    for place in ["race.txt", "/tmp/race.txt"] {
        let writers: Vec<_> = (0..8)
            .map(|i| {
                let mut c = env
                    .cmd()
                    .args(["write", &id, place, "--no-clobber"])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                // A writer that finds the name taken may fail before it reads its stdin
                // (a broken pipe here): its exit status tells.
                let _ = c
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(format!("writer {i}\n").as_bytes());
                c
            })
            .collect();
        let outs: Vec<_> = writers
            .into_iter()
            .map(|c| wait_output(c, Duration::from_secs(60), "a racing write"))
            .collect();
        let won: Vec<usize> = (0..8).filter(|i| outs[*i].status.success()).collect();
        assert_eq!(
            won.len(),
            1,
            "{place}: {:?}",
            outs.iter().map(stderr).collect::<Vec<_>>()
        );
        let content = if place.starts_with('/') {
            sh(&env, &id, &format!("cat {place}"))
        } else {
            std::fs::read_to_string(env.path(place)).unwrap()
        };
        assert_eq!(content, format!("writer {}\n", won[0]), "{place}");
    }
    // The losers' temporary files are gone, on both sides.
    assert!(
        find_temps(&env.workdir).is_empty(),
        "{:?}",
        find_temps(&env.workdir)
    );
    assert!(!sh(&env, &id, "ls -a /tmp").contains(".h9tmp-"));
    // --append cannot go with it.
    let out = run_stdin(
        &env,
        &["write", &id, "new.txt", "--no-clobber", "--append"],
        b"x",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// One `write` of sandbox `id` interrupted by SIGINT as soon as its temporary file appeared
/// (its stdin still open), started with SIGINT at its default disposition or, `ignored`,
/// inherited as ignored (a background job of a non-interactive shell). Whatever the moment,
/// the signal is acted on: exit 1 with the reason, the old content kept, no temporary file.
fn write_interrupted_at_its_temporary_file(env: &TestEnv, id: &str, ignored: bool, round: usize) {
    let what = format!("write round {round} (SIGINT ignored: {ignored})");
    let mut cmd = env.cmd();
    cmd.args(["write", id, "f"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if ignored {
        with_sigint_ignored(&mut cmd);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"partial new content").unwrap();
    stdin.flush().unwrap();
    // Ready once the temporary file exists: signal at once, while stdin is still open.
    let deadline = Instant::now() + Duration::from_secs(30);
    while find_temps(&env.workdir).is_empty() {
        assert!(
            Instant::now() < deadline,
            "{what}: no temporary file appeared"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    signal(child.id(), "INT");
    let out = wait_output(child, Duration::from_secs(30), &what);
    drop(stdin);
    assert_eq!(out.status.code(), Some(1), "{what}: {}", stderr(&out));
    assert!(
        stderr(&out).contains("interrupted by SIGINT; the file keeps its old content"),
        "{what}: {}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(env.path("f")).unwrap(), "old\n");
    assert!(
        find_temps(&env.workdir).is_empty(),
        "{what}: {:?}",
        find_temps(&env.workdir)
    );
}

#[test]
fn interrupted_write_removes_its_temporary_file() {
    require_docker!();
    if workdir_copied("it waits for the temporary file in the host's work dir, which a copied work dir's write makes in the container") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    std::fs::write(env.path("f"), "old\n").unwrap();
    // Several rounds each: the race was with the moment the temporary file is made.
    for round in 0..8 {
        write_interrupted_at_its_temporary_file(&env, &id, false, round);
        write_interrupted_at_its_temporary_file(&env, &id, true, round);
    }
}

#[test]
fn an_interrupted_cp_ends_its_tool_in_the_sandbox_and_says_so() {
    require_container!("a local sandbox's cp runs no tool in a container");
    let env = TestEnv::new();
    let id = env.up(&[]);
    let tools = || sh(&env, &id, "ps -o args 2>/dev/null || ps").contains("agent tar");
    for ignored in [false, true] {
        let what = format!("cp from stdin (SIGINT ignored: {ignored})");
        // Its stdin stays open and empty: the extraction in the sandbox waits for the stream.
        let mut cmd = env.cmd();
        cmd.args(["cp", "-", &format!("{id}:/tmp")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if ignored {
            with_sigint_ignored(&mut cmd);
        }
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        wait_until(Duration::from_secs(60), &what, tools);
        signal(child.id(), "INT");
        let out = wait_output(child, Duration::from_secs(30), &what);
        drop(stdin);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("interrupted by SIGINT;")
                && stderr(&out).contains("may hold part of the copy"),
            "{what}: {}",
            stderr(&out)
        );
        wait_until(
            Duration::from_secs(20),
            &format!("{what}: its tool gone"),
            || !tools(),
        );
    }
}

#[test]
fn numeric_user_owns_files_made_in_the_sandbox_and_written_by_the_host() {
    require_docker!();
    if workdir_copied("the test changes or checks the host's side of the work dir, which a copied work dir never shares (cp is the way)") {
        return;
    }
    let env = TestEnv::new();
    std::os::unix::fs::chown(&env.workdir, Some(1000), Some(1000)).unwrap();
    let out = env
        .cmd()
        .args(["up", "--json"])
        .env("H9SANDBOX_USER", "1000:1000")
        .output()
        .unwrap();
    assert_ok(&out);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["user"], "1000:1000");
    let id = rec["id"].as_str().unwrap().to_string();
    // The container runs as root (h9sandbox's PID 1), every command as the sandbox's user.
    assert_eq!(inspect(&env.container(&id), "{{.Config.User}}"), "0:0");
    assert_eq!(sh(&env, &id, "id -u; id -g"), "1000\n1000\n");
    sh(&env, &id, "mkdir made && echo x > made/f");
    assert_ok(&run_stdin(&env, &["write", &id, "written.txt"], b"w"));
    assert_ok(&run_stdin(
        &env,
        &["write", &id, "p/q/r.txt", "--parents"],
        b"w",
    ));
    for p in ["made", "made/f", "written.txt", "p", "p/q", "p/q/r.txt"] {
        let m = std::fs::metadata(env.path(p)).unwrap();
        assert_eq!((m.uid(), m.gid()), (1000, 1000), "{p}");
    }
    // The sandbox's user can change what the host wrote, and the host's uid 1000 can delete
    // what the sandbox made.
    sh(&env, &id, "echo more >> written.txt && rm p/q/r.txt");
    let out = as_uid_1000(&env.workdir, &["rm", "-r", "made", "written.txt", "p"]);
    assert_ok(&out);
    assert_eq!(std::fs::read_dir(&env.workdir).unwrap().count(), 0);
    // An existing file keeps its owner when the host replaces it (one the sandbox's user may
    // write: the file commands act with its rights, see tests/files_as_user.rs).
    std::fs::write(env.path("rootfile"), "r").unwrap();
    std::fs::set_permissions(
        env.path("rootfile"),
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    assert_ok(&run_stdin(&env, &["write", &id, "rootfile"], b"R"));
    assert_eq!(std::fs::metadata(env.path("rootfile")).unwrap().uid(), 0);
}

#[test]
fn host_user_as_non_root_can_delete_what_the_sandbox_made() {
    require_docker!();
    if workdir_copied("the test changes or checks the host's side of the work dir, which a copied work dir never shares (cp is the way)") {
        return;
    }
    let env = TestEnv::new();
    // Run h9sandbox itself as uid 1000, with the docker socket's group so it reaches the daemon.
    let sock_gid = std::fs::metadata("/var/run/docker.sock").unwrap().gid();
    for p in [env.root.path(), &env.workdir, &env.state_dir] {
        std::os::unix::fs::chown(p, Some(1000), Some(1000)).unwrap();
    }
    let bin = assert_cmd::cargo::cargo_bin("h9sandbox");
    let h9 = |args: &[&str], input: Option<&[u8]>| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", "1000", "--regid", "1000", "--groups"])
            .arg(sock_gid.to_string())
            .arg("--")
            .arg(&bin)
            .args(args)
            .current_dir(&env.workdir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", env.root.path())
            .env("H9SANDBOX_STATE_DIR", &env.state_dir)
            .env("H9SANDBOX_IMAGE", TINY)
            .env("H9SANDBOX_CPUS", "0.5")
            .env("H9SANDBOX_USER", "host")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.unwrap_or_default()).unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let out = h9(&["up", "--json"], None);
    assert_ok(&out);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["user"], "1000:1000");
    let id = rec["id"].as_str().unwrap().to_string();
    let out = h9(
        &[
            "exec",
            &id,
            "--",
            "id -u && mkdir -p made/deeper && echo x > made/deeper/f",
        ],
        None,
    );
    assert_ok(&out);
    assert_eq!(stdout(&out), "1000\n");
    let out = h9(&["write", &id, "made/w.txt"], Some(b"w"));
    assert_ok(&out);
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    for p in ["made", "made/deeper/f", "made/w.txt"] {
        let m = std::fs::metadata(env.path(p)).unwrap();
        assert_eq!((m.uid(), m.gid()), (1000, 1000), "{p}");
    }
    let out = as_uid_1000(&env.workdir, &["rm", "-r", "made"]);
    assert_ok(&out);
    assert!(!env.path("made").exists());
    // By default the sandbox runs as the work dir's owner: what it makes is theirs.
    let owned_env = TestEnv::new();
    std::fs::set_permissions(
        owned_env.root.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    std::os::unix::fs::chown(&owned_env.workdir, Some(1000), Some(1000)).unwrap();
    let oid = owned_env.up(&[]);
    sh(&owned_env, &oid, "mkdir made && echo x > made/f");
    assert_eq!(
        std::fs::metadata(owned_env.path("made/f")).unwrap().uid(),
        1000
    );
    assert_ok(&as_uid_1000(&owned_env.workdir, &["rm", "-r", "made"]));
    // Under `--user root`, what the sandbox makes is root's: uid 1000 cannot delete it.
    let root_env = TestEnv::new();
    // uid 1000 may pass through the test's root (which holds root's state directory, so it must
    // stay root's: another owner could swap the state directory).
    std::fs::set_permissions(
        root_env.root.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    std::os::unix::fs::chown(&root_env.workdir, Some(1000), Some(1000)).unwrap();
    let rid = root_env.up(&["--user", "root"]);
    sh(&root_env, &rid, "mkdir made && echo x > made/f");
    assert_eq!(std::fs::metadata(root_env.path("made/f")).unwrap().uid(), 0);
    let out = as_uid_1000(&root_env.workdir, &["rm", "-r", "made"]);
    assert!(!out.status.success(), "uid 1000 deleted root's files");
}

/// The peak resident memory (KiB) of `cmd`, run under GNU time (`/usr/bin/time -v`), with its
/// output; `None` for the peak where GNU time is not installed.
fn with_peak_memory(env: &TestEnv, args: &[&str]) -> (Output, Option<u64>) {
    let time = Path::new("/usr/bin/time");
    if !time.exists() {
        return (env.run(args), None);
    }
    let report = env.root.path().join("time.txt");
    let out = env
        .program(time)
        .arg("-v")
        .arg("-o")
        .arg(&report)
        .arg(assert_cmd::cargo::cargo_bin("h9sandbox"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    let peak = text
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|n| n.trim().parse().ok());
    (out, peak)
}

#[test]
fn a_json_read_of_a_huge_sparse_file_fails_without_holding_it() {
    require_container!("the sparse file is made inside a container");
    let env = TestEnv::new();
    let id = env.up(&[]);
    // 1 GiB that takes no disk: read as JSON, it would cost gigabytes of host memory.
    sh(&env, &id, "truncate -s 1G big && printf 'small\\n' > small");
    let (out, peak) = with_peak_memory(&env, &["read", &id, "big", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("h9sandbox: error: ")
            && err.contains("1073741824 bytes")
            && err.contains("json_max_bytes")
            && err.contains("plain `h9sandbox read`"),
        "{err}"
    );
    if let Some(kib) = peak {
        assert!(kib < 64 * 1024, "read held {kib} KiB");
    }
    // Plain `read` streams it; --max-bytes takes its start; small files read as before.
    let out = env.run(&["read", &id, "big", "--max-bytes", "4096"]);
    assert_ok(&out);
    assert_eq!(out.stdout, vec![0u8; 4096]);
    let out = env.run(&["read", &id, "big", "--format", "json", "--max-bytes", "3"]);
    assert_ok(&out);
    let j: ReadJson = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (j.size, j.content.as_deref(), j.truncated),
        (1 << 30, Some("\0\0\0"), true)
    );
    let out = env.run(&["read", &id, "small", "--format", "json"]);
    assert_ok(&out);
    let j: ReadJson = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j.content.as_deref(), Some("small\n"));
    // The cap is a configuration key, so a caller can raise (or lower) it.
    let out = env
        .cmd()
        .args(["read", &id, "small", "--format", "json"])
        .env("H9SANDBOX_JSON_MAX_BYTES", "4")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("json_max_bytes = 4"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_edit_that_would_blow_a_planted_file_up_is_refused() {
    require_container!("the file is planted inside a container");
    if workdir_copied("the test changes or checks the host's side of the work dir, which a copied work dir never shares (cp is the way)") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    // 1 MiB of `a`: replacing every `a` with 100 bytes would make 100 MiB.
    sh(&env, &id, "head -c 1048576 /dev/zero | tr '\\0' a > f");
    let new = "b".repeat(100);
    let (out, peak) = with_peak_memory(
        &env,
        &["edit", &id, "f", "--old", "a", "--new", &new, "--all"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("edit's limit") && err.contains("104857600 bytes"),
        "{err}"
    );
    if let Some(kib) = peak {
        assert!(kib < 64 * 1024, "edit held {kib} KiB");
    }
    assert_eq!(std::fs::metadata(env.path("f")).unwrap().len(), 1 << 20);
    assert!(find_temps(&env.workdir).is_empty());
    // Within the limit it works, and writes exactly the replacement.
    let out = env.run(&["edit", &id, "f", "--old", "a", "--new", "bc", "--all"]);
    assert_ok(&out);
    let text = std::fs::read(env.path("f")).unwrap();
    assert_eq!(text.len(), 2 << 20);
    assert!(text.chunks(2).all(|c| c == b"bc"));
}
