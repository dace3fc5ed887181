//! Integration tests of sub-sandboxes (`up --parent`): inheritance, tighten-only flags, the tree
//! in `ls`, and `down` of a parent taking its children first, against the real Docker Engine.

use std::process::Command;

use crate::common::*;

#[test]
fn a_sub_sandbox_inherits_its_parent_and_may_tighten() {
    require_docker!();
    let env = TestEnv::new();
    let parent = env.up(&[
        "--memory",
        "128m",
        "--pids-limit",
        "50",
        "--network",
        "none",
    ]);
    std::fs::create_dir(env.path("sub")).unwrap();
    // Environment defaults that are looser than the parent's limits do not apply to a child.
    let out = env
        .cmd()
        .args(["up", "--parent", &parent[..8], "--memory", "64m"])
        .env("H9SANDBOX_MEMORY", "1g")
        .env("H9SANDBOX_PIDS_LIMIT", "1000")
        .env("H9SANDBOX_NETWORK", "bridge")
        .output()
        .unwrap();
    assert_ok(&out);
    let child = stdout(&out).trim().to_string();
    let e = env.entry(&child);
    assert_eq!(e["parent"], parent.as_str());
    assert_eq!(e["role"], "sub-1");
    assert_eq!(e["image"], TINY);
    assert_eq!(e["workdir"], env.workdir.to_str().unwrap());
    assert_eq!(e["limits"]["memory"], "64m");
    assert_eq!(e["limits"]["pids_limit"], 50);
    assert_eq!(e["limits"]["network"], "none");
    assert_eq!(env.entry(&parent)["parent"], serde_json::Value::Null);
    assert_eq!(env.entry(&parent)["role"], "main");

    // The engine got the same: the tightened memory, the inherited rest, the parent label.
    let c = env.container(&child);
    assert_eq!(
        inspect(&c, "{{.HostConfig.Memory}}"),
        (64u64 << 20).to_string()
    );
    assert_eq!(inspect(&c, "{{.HostConfig.PidsLimit}}"), "50");
    assert_eq!(inspect(&c, "{{.HostConfig.NetworkMode}}"), "none");
    assert_eq!(inspect(&c, "{{.HostConfig.NanoCpus}}"), "500000000");
    assert_eq!(
        inspect(&c, "{{index .Config.Labels \"h9sandbox.parent\"}}"),
        parent
    );

    // A child of the child, in a directory inside the work dir.
    let grandchild = env.up(&["--parent", &child, "--workdir", "sub", "--cpus", "0.25"]);
    let e = env.entry(&grandchild);
    assert_eq!(e["role"], "sub-1.1");
    assert_eq!(e["workdir"], env.path("sub").to_str().unwrap());
    assert_eq!(e["limits"]["memory"], "64m");
    assert_eq!(e["limits"]["cpus"], 0.25);

    // ls shows the tree: parent first, children under it.
    let table = stdout(&env.run(&["ls"]));
    let rows: Vec<&str> = table.lines().collect();
    assert!(rows[0].contains("ROLE"), "{table}");
    assert!(rows[1].contains(" main "), "{table}");
    assert!(rows[2].contains("   sub-1 "), "{table}");
    assert!(rows[3].contains("     sub-1.1 "), "{table}");
}

#[test]
fn loosening_is_refused_naming_the_limit() {
    require_docker!();
    let env = TestEnv::new();
    let parent = env.up(&["--memory", "64m", "--pids-limit", "50", "--network", "none"]);
    let elsewhere = tempfile::tempdir().unwrap();
    let refused = |args: &[&str], says: &str| {
        let mut a = vec!["up", "--parent", &parent];
        a.extend_from_slice(args);
        let out = env.run(&a);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.starts_with("h9sandbox: error: ") && err.contains(says) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    };
    refused(&["--memory", "1g"], "--memory 1g exceeds the parent's 64m");
    refused(&["--cpus", "1"], "--cpus 1 exceeds the parent's 0.5");
    refused(
        &["--pids-limit", "51"],
        "--pids-limit 51 exceeds the parent's 50",
    );
    refused(&["--network", "bridge"], "--network bridge");
    refused(&["--image", DEBIAN], "differs from the parent's");
    refused(
        &["--workdir", elsewhere.path().to_str().unwrap()],
        "is outside the parent's work dir",
    );
    refused(&["--memory", "lots"], "--memory");
    // Nothing was recorded or created for the refused children.
    assert_eq!(env.ls().len(), 1);
    assert_eq!(env.containers().len(), 1);
}

#[test]
fn down_of_a_parent_downs_its_children_first() {
    require_docker!();
    let env = TestEnv::new();
    let parent = env.up(&[]);
    let a = env.up(&["--parent", &parent]);
    let b = env.up(&["--parent", &parent]);
    let a1 = env.up(&["--parent", &a]);
    let other = env.up(&[]);
    let roles: Vec<(String, String)> = env
        .ls()
        .iter()
        .map(|e| {
            (
                e["id"].as_str().unwrap().to_string(),
                e["role"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        (&parent, "main"),
        (&a, "sub-1"),
        (&a1, "sub-1.1"),
        (&b, "sub-2"),
        (&other, "main"),
    ];
    assert_eq!(
        roles,
        want.iter()
            .map(|(i, r)| (i.to_string(), r.to_string()))
            .collect::<Vec<_>>()
    );

    let out = env.run(&["down", &parent]);
    assert_ok(&out);
    // Deepest first, the named one last.
    let removed: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert_eq!(removed.len(), 4, "{removed:?}");
    assert_eq!(removed[0], a1);
    assert_eq!(removed[3], parent);
    let left: Vec<String> = env
        .ls()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(left, vec![other.clone()]);
    assert_eq!(env.containers().len(), 1);
}

#[test]
fn a_parent_whose_container_is_gone_gets_no_children() {
    require_docker!();
    let env = TestEnv::new();
    let parent = env.up(&[]);
    let c = env.container(&parent);
    assert!(Command::new("docker")
        .args(["rm", "-f", "-v", &c])
        .output()
        .unwrap()
        .status
        .success());
    let out = env.run(&["up", "--parent", &parent]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot create a sub-sandbox"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.ls().len(), 1);
    let out = env.run(&["up", "--parent", "ffffffff"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no sandbox matches"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_sub_sandbox_keeps_every_bound_its_parent_was_made_with() {
    require_docker!();
    let env = TestEnv::new();
    let with = |args: &[&str], vars: &[(&str, &str)]| {
        let mut c = env.cmd();
        c.args(args).stdin(std::process::Stdio::null());
        for (k, v) in vars {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = with(
        &["up"],
        &[
            ("H9SANDBOX_ULIMIT_NOFILE", "256"),
            ("H9SANDBOX_EXEC_TIMEOUT_SECS", "3"),
            ("H9SANDBOX_STOP_TIMEOUT_SECS", "1"),
            ("H9SANDBOX_BOOTSTRAP_TIMEOUT_SECS", "7"),
        ],
    );
    assert_ok(&out);
    let parent = stdout(&out).trim().to_string();
    // Looser values in the environment when the child is made, and after.
    let loose = [
        ("H9SANDBOX_ULIMIT_NOFILE", "20000"),
        ("H9SANDBOX_EXEC_TIMEOUT_SECS", "0"),
        ("H9SANDBOX_STOP_TIMEOUT_SECS", "30"),
        ("H9SANDBOX_BOOTSTRAP_TIMEOUT_SECS", "0"),
    ];
    let out = with(&["up", "--parent", &parent], &loose);
    assert_ok(&out);
    let child = stdout(&out).trim().to_string();
    let rec = env
        .ls_raw()
        .into_iter()
        .find(|r| r["id"] == child.as_str())
        .unwrap();
    let s = &rec["settings"];
    assert_eq!(
        (
            &s["exec_timeout_secs"],
            &s["stop_timeout_secs"],
            &s["bootstrap_timeout_secs"],
            &s["ulimit_nofile"]
        ),
        (
            &serde_json::json!(3),
            &serde_json::json!(1),
            &serde_json::json!(7),
            &serde_json::json!(256)
        ),
        "{rec}"
    );
    // The container got the parent's open-files limit, not the environment's.
    let out = with(&["exec", &child, "--", "ulimit -n"], &loose);
    assert_ok(&out);
    assert_eq!(stdout(&out), "256\n");
    // The parent's 3 s exec timeout holds, whatever the environment says now.
    let t = std::time::Instant::now();
    let out = with(&["exec", &child, "--", "sleep 20"], &loose);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(t.elapsed() < std::time::Duration::from_secs(15));
    // A looser flag is refused, naming the parent's value; nothing is made.
    let before = env.ls_raw().len();
    let out = with(
        &["up", "--parent", &parent, "--bootstrap-timeout", "100"],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--bootstrap-timeout 100 exceeds the parent's 7s"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.ls_raw().len(), before);
    assert_ok(&env.run(&["down", &parent]));
}
