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
