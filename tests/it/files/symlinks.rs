//! Symlinks in the work dir: those that leave it are refused (to /etc, to /, to the parent, chains that climb out, to a host file), those that stay inside work, and a directory swapped for one mid-access never lets an access out.

use super::*;

#[test]
fn symlink_to_etc_is_refused() {
    require_docker!();
    if workdir_copied("the test changes or checks the host's side of the work dir, which a copied work dir never shares (cp is the way)") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    sh(&env, &id, "ln -s /etc esc");
    let passwd = std::fs::read("/etc/passwd").unwrap();
    let marker = format!("h9-pwned-{}", uuid_like());
    let _cleanup = EtcGuard(list_dir(Path::new("/etc")));
    // Writes go to a new name only, and edits look for text that is not there, so that even a
    // broken build could not damage the host's /etc/passwd.
    let mut outs = attack(&env, &id, &format!("esc/{marker}"), "x");
    for args in [
        vec!["read", &id, "esc/passwd"],
        vec!["read", &id, "esc/passwd", "--json"],
        vec!["edit", &id, "esc/passwd", "--old", &marker, "--new", "x"],
    ] {
        let out = env.run(&args);
        assert_path_refused(&out, &format!("{args:?}"));
        outs.push(out);
    }
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), passwd);
    assert!(!Path::new("/etc").join(&marker).exists());
    for o in &outs {
        assert!(
            !stdout(o).contains("root:x:0:0"),
            "host /etc/passwd was read"
        );
    }
    assert!(find_temps(Path::new("/etc")).is_empty());
    // The link itself is still the container's business: it sees its own /etc.
    assert!(sh(&env, &id, "cat esc/passwd").contains("root"));
}

#[test]
fn symlink_to_root_is_refused() {
    require_docker!();
    if workdir_copied("the test changes or checks the host's side of the work dir, which a copied work dir never shares (cp is the way)") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    let outside = Outside::plant(&env);
    sh(&env, &id, "ln -s / root");
    let path = format!("root/{}", outside.path_below_root());
    let outs = attack(&env, &id, &path, &outside.secret);
    outside.assert_untouched(&env, &outs.iter().collect::<Vec<_>>());
}

#[test]
fn symlink_to_parent_is_refused_and_so_is_dotdot() {
    require_docker!();
    if workdir_copied("the test changes or checks the host's side of the work dir, which a copied work dir never shares (cp is the way)") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    let outside = Outside::plant(&env);
    sh(&env, &id, "ln -s .. up && mkdir sub");
    let mut outs = attack(&env, &id, "up/canary.txt", &outside.secret);
    outs.extend(attack(&env, &id, "../canary.txt", &outside.secret));
    outs.extend(attack(&env, &id, "sub/../../canary.txt", &outside.secret));
    // An absolute path outside the work dir is the container's: the host's file of that path
    // is never read nor written (the container has none there: not found; a write makes the
    // container's own).
    let canary = outside.canary.to_str().unwrap().to_string();
    let read = env.run(&["read", &id, &canary]);
    assert_eq!(read.status.code(), Some(1), "{}", stderr(&read));
    assert!(stderr(&read).contains("No such file"), "{}", stderr(&read));
    let write = run_stdin(&env, &["write", &id, &canary, "--parents"], b"container's");
    assert_ok(&write);
    assert_eq!(sh(&env, &id, &format!("cat {canary}")), "container's");
    outs.extend([read, write]);
    outside.assert_untouched(&env, &outs.iter().collect::<Vec<_>>());
}

#[test]
fn relative_symlink_chain_that_climbs_out_is_refused() {
    require_docker!();
    if workdir_copied("the test changes or checks the host's side of the work dir, which a copied work dir never shares (cp is the way)") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    let outside = Outside::plant(&env);
    // a/b/link -> ../../c, and c -> .. : each link alone looks harmless.
    sh(
        &env,
        &id,
        "mkdir -p a/b && ln -s ../../c a/b/link && ln -s .. c",
    );
    let outs = attack(&env, &id, "a/b/link/canary.txt", &outside.secret);
    outside.assert_untouched(&env, &outs.iter().collect::<Vec<_>>());
}

#[test]
fn symlink_to_a_host_file_outside_is_refused() {
    require_docker!();
    if workdir_copied("the test changes or checks the host's side of the work dir, which a copied work dir never shares (cp is the way)") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    let outside = Outside::plant(&env);
    // The container cannot see the host's path, but may name it; a naive host-side open would
    // follow it. Absolute and relative forms, and a link to a link.
    let script = format!(
        "ln -s {} hostfile && ln -s ../canary.txt relfile && ln -s hostfile twice && ln -s {} hostdir",
        outside.canary.display(),
        outside.canary.parent().unwrap().display()
    );
    sh(&env, &id, &script);
    let mut outs = Vec::new();
    for p in ["hostfile", "relfile", "twice", "hostdir/canary.txt"] {
        outs.extend(attack(&env, &id, p, &outside.secret));
    }
    outside.assert_untouched(&env, &outs.iter().collect::<Vec<_>>());
    // The links are still links (never replaced by the refused writes).
    for p in ["hostfile", "relfile", "twice"] {
        assert!(std::fs::symlink_metadata(env.path(p))
            .unwrap()
            .file_type()
            .is_symlink());
    }
}

#[test]
fn symlinks_that_stay_inside_work() {
    require_docker!();
    if workdir_copied("the test changes or checks the host's side of the work dir, which a copied work dir never shares (cp is the way)") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    sh(
        &env,
        &id,
        "mkdir -p sub other && echo one > sub/f && ln -s sub/f link && ln -s sub dirlink \
         && ln -s ../sub/f other/back && ln -s $PWD/sub/f abslink && ln -s missing dangling",
    );
    let read = |p: &str| {
        let out = env.run(&["read", &id, p]);
        assert_ok(&out);
        stdout(&out)
    };
    assert_eq!(read("link"), "one\n");
    assert_eq!(read("dirlink/f"), "one\n");
    assert_eq!(read("other/back"), "one\n");
    // Writes and edits through an inside link change its target; the link stays a link.
    assert_ok(&run_stdin(&env, &["write", &id, "link"], b"two\n"));
    assert_eq!(sh(&env, &id, "cat sub/f"), "two\n");
    assert_ok(&env.run(&["edit", &id, "other/back", "--old", "two", "--new", "three"]));
    assert_ok(&run_stdin(
        &env,
        &["write", &id, "dirlink/f", "--append"],
        b"four\n",
    ));
    assert_eq!(sh(&env, &id, "cat sub/f"), "three\nfour\n");
    for p in ["link", "other/back", "dirlink"] {
        assert!(std::fs::symlink_metadata(env.path(p))
            .unwrap()
            .file_type()
            .is_symlink());
    }
    // A dangling inside link: writing creates its target.
    assert_ok(&run_stdin(&env, &["write", &id, "dangling"], b"made\n"));
    assert_eq!(sh(&env, &id, "cat missing"), "made\n");
    // Absolute links are refused even when they point inside (RESOLVE_BENEATH).
    assert_path_refused(&env.run(&["read", &id, "abslink"]), "absolute link inside");
}

#[test]
fn swapping_a_directory_for_a_symlink_never_lets_an_access_out() {
    require_docker!();
    if workdir_copied("the test changes or checks the host's side of the work dir, which a copied work dir never shares (cp is the way)") {
        return;
    }
    let env = TestEnv::new();
    let id = env.up(&[]);
    let outside = Outside::plant(&env);
    let rel = outside.path_below_root(); // e.g. tmp/h9testXYZ/canary.txt
    let rel_dir = Path::new(&rel)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    // Inside, `swap` mirrors the path to the canary with a harmless file; a loop in the
    // container keeps replacing it by a symlink to / and back, until the host creates `stop`.
    // (`rm -rf`: in the moments `swap` is missing, `write --parents` may create it anew.)
    let script = format!(
        "mkdir -p swap/{rel_dir} && echo inside > swap/{rel} && \
         (n=0; while [ ! -e stop ]; do mv -T swap parked; ln -s / swap; rm -rf swap; mv -T parked swap; n=$((n+1)); done; echo $n > swaps) \
         >/dev/null 2>&1 &"
    );
    sh(&env, &id, &script);
    let target = format!("swap/{rel}");
    let (mut ok, mut refused, mut outs) = (0, 0, Vec::new());
    for i in 0..500 {
        let read = env.run(&["read", &id, &target]);
        let write = if i % 2 == 0 {
            run_stdin(&env, &["write", &id, &target], b"written-by-host\n")
        } else {
            let deep = format!("swap/{rel_dir}/h9-made-{i}/f");
            run_stdin(&env, &["write", &id, &deep, "--parents"], b"x")
        };
        for o in [&read, &write] {
            if o.status.success() {
                ok += 1;
            } else if stderr(o).contains("refusing") {
                refused += 1;
            } else {
                // The moments `swap` did not exist at all.
                let e = stderr(o);
                assert!(
                    e.contains("No such file") || e.contains("does not exist in the work dir"),
                    "{e}"
                );
            }
        }
        if read.status.success() {
            assert!(
                ["inside\n", "written-by-host\n"].contains(&stdout(&read).as_str()),
                "{}",
                stdout(&read)
            );
        }
        outs.push(read);
        outs.push(write);
    }
    std::fs::write(env.path("stop"), "").unwrap();
    let swaps_file = env.path("swaps");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !swaps_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let swaps: u64 = std::fs::read_to_string(&swaps_file)
        .expect("the swapper ended")
        .trim()
        .parse()
        .unwrap();
    outside.assert_untouched(&env, &outs.iter().collect::<Vec<_>>());
    let made: Vec<_> = std::fs::read_dir(outside.canary.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("h9-made-"))
        .collect();
    assert!(made.is_empty(), "directories created outside: {made:?}");
    // The race really happened: both outcomes were seen while the container swapped.
    assert!(
        swaps > 0 && ok > 0 && refused > 0,
        "swaps {swaps}, ok {ok}, refused {refused}"
    );
    eprintln!("race: {swaps} swaps, {ok} accesses inside, {refused} refused");
}
