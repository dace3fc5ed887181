//! Many processes at once: workers, reapers and readers together, concurrent downs and reaps of one sandbox, twenty ups of one name, a lock holder killed with SIGKILL.

use super::*;

#[test]
fn stress_workers_reaper_and_reader_at_once() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    const WORKERS: usize = 8;
    const ROUNDS: usize = 10;
    // Each worker is a process; even ones own their sandboxes (--owner-pid $$), odd ones lease
    // them (--ttl 10m).
    let script = format!(
        r#"set -u
w=$1
if [ $((w % 2)) = 0 ]; then lease="--owner-pid $$"; else lease="--ttl 10m"; fi
for i in $(seq {ROUNDS}); do
  id=$("$H9" up $lease) || {{ echo "worker $w round $i: up failed" >&2; exit 1; }}
  "$H9" exec "$id" -- true || {{ echo "worker $w round $i: exec failed" >&2; exit 1; }}
  "$H9" exec "$id" -- "echo data-$w-$i > f-$w-$i" || {{ echo "worker $w round $i: write failed" >&2; exit 1; }}
  got=$("$H9" exec "$id" -- "cat f-$w-$i") || {{ echo "worker $w round $i: read failed" >&2; exit 1; }}
  [ "$got" = "data-$w-$i" ] || {{ echo "worker $w round $i: read back '$got'" >&2; exit 1; }}
  "$H9" down "$id" >/dev/null || {{ echo "worker $w round $i: down failed" >&2; exit 1; }}
done"#
    );
    let done = AtomicBool::new(false);
    let reads = AtomicUsize::new(0);
    let reaped_while_used = Mutex::new(Vec::new());
    let (failures, reap_runs, reader) = std::thread::scope(|scope| {
        // Parses state.json continuously: it must be a whole document at every moment.
        let reader = scope.spawn(|| -> Result<(), String> {
            let file = env.state_dir.join("state.json");
            while !done.load(Ordering::Relaxed) {
                match std::fs::read(&file) {
                    Ok(bytes) => {
                        serde_json::from_slice::<serde_json::Value>(&bytes)
                            .map_err(|e| format!("state.json did not parse: {e}"))?;
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
            Ok(())
        });
        // Reaps in a loop: every owner lives, so it must never find anything.
        let reaper = scope.spawn(|| -> Result<usize, String> {
            let mut runs = 0;
            while !done.load(Ordering::Relaxed) {
                let out = env.run(&["reap", "--format", "json"]);
                if !out.status.success() {
                    return Err(stderr(&out));
                }
                let v: Vec<serde_json::Value> =
                    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
                reaped_while_used.lock().unwrap().extend(v);
                runs += 1;
            }
            Ok(runs)
        });
        let workers: Vec<Child> = (0..WORKERS)
            .map(|w| {
                env.shell(&script)
                    .arg("worker")
                    .arg(w.to_string())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut failures = Vec::new();
        for w in workers {
            let out = w.wait_with_output().unwrap();
            if !out.status.success() || !out.stderr.is_empty() {
                failures.push(format!("{:?}: {}", out.status, stderr(&out)));
            }
        }
        done.store(true, Ordering::Relaxed);
        (
            failures,
            reaper.join().unwrap().expect("a reap failed"),
            reader.join().unwrap(),
        )
    });
    reader.expect("the reader failed");
    assert!(failures.is_empty(), "worker failures: {failures:#?}");
    let reaped = reaped_while_used.into_inner().unwrap();
    assert!(reaped.is_empty(), "reaped while in use: {reaped:?}");
    assert!(reap_runs > 0 && reads.load(Ordering::Relaxed) > 0);
    eprintln!(
        "stress: {reap_runs} reaps and {} state reads alongside the workers",
        reads.load(Ordering::Relaxed)
    );
    assert!(env.containers().is_empty(), "leaked containers");
    assert!(env.ls().is_empty());
    for w in 0..WORKERS {
        for i in 1..=ROUNDS {
            assert!(env.path(&format!("f-{w}-{i}")).is_file());
        }
    }
}

#[test]
fn concurrent_downs_and_reaps_of_one_abandoned_sandbox_all_succeed() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    for _ in 0..3 {
        let mut owner = sleeper();
        let id = env.up(&["--owner-pid", &owner.id().to_string()]);
        kill9(&mut owner);
        // Every one of them may find the container mid-removal by another: all must succeed.
        let children: Vec<Child> = (0..6)
            .map(|i| {
                let mut c = env.cmd();
                if i % 2 == 0 {
                    c.args(["down", &id]);
                } else {
                    c.arg("reap");
                }
                c.stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            // A `down` that comes after the record is gone reports an unknown sandbox.
            if !out.status.success() {
                assert!(
                    stderr(&out).contains("no sandbox matches"),
                    "{}",
                    stderr(&out)
                );
            }
        }
        assert!(env.containers().is_empty());
        assert!(env.ls().is_empty());
    }
}

#[test]
fn twenty_concurrent_ups_of_one_name_make_one_container() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    // Container names are global to the daemon: make this one unique to the test run.
    let name = format!("s1-{}", std::process::id());
    let children: Vec<Child> = (0..20)
        .map(|_| {
            env.cmd()
                .args(["up", "--name", &name])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let ok = outs.iter().filter(|o| o.status.success()).count();
    assert_eq!(ok, 1);
    for o in outs.iter().filter(|o| !o.status.success()) {
        assert_eq!(o.status.code(), Some(1));
        let err = stderr(o);
        assert!(
            err.contains(&format!("the name '{name}' is already in use"))
                && err.lines().count() == 1,
            "{err}"
        );
    }
    assert_eq!(env.containers().len(), 1);
    let listed = env.ls();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["name"], name.as_str());
    assert_eq!(listed[0]["state"], "Running");
}

#[test]
fn a_lock_holder_killed_with_sigkill_does_not_block_the_next_process() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    let lock = env.state_dir.join("state.lock");
    // util-linux flock(1) holds the lock; -o keeps it out of its child, so only it holds it.
    let mut holder = Command::new("flock")
        .arg("-o")
        .arg(&lock)
        .args(["sleep", "600"])
        .spawn()
        .unwrap();
    wait_for_lock_line(&lock, holder.id(), false);
    let up = env
        .cmd()
        .arg("up")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `up` waits for the lock (the kernel lists it as blocked) ...
    wait_for_lock_line(&lock, up.id(), true);
    let mut up = up;
    assert!(up.try_wait().unwrap().is_none());
    // ... until the holder dies.
    let sleep_pid = child_of(holder.id());
    kill9(&mut holder);
    let out = up.wait_with_output().unwrap();
    if let Some(pid) = sleep_pid {
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
    assert_ok(&out);
    assert_eq!(env.ls().len(), 1);
}
