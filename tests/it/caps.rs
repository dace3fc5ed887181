//! Capability profiles (`caps = "minimal" | "standard"`, `up --caps`): what root in the sandbox
//! may do, tried as a package install does it, and read back from the container the engine made.

use crate::common::*;

/// The capabilities the engine gave sandbox `id`'s container (`HostConfig.CapAdd`), sorted.
fn cap_add(env: &TestEnv, id: &str) -> Vec<String> {
    let json = inspect(&env.container(id), "{{json .HostConfig.CapAdd}}");
    let mut caps: Vec<String> = serde_json::from_str(&json).unwrap();
    for c in &mut caps {
        if let Some(name) = c.strip_prefix("CAP_") {
            *c = name.to_string();
        }
    }
    caps.sort();
    caps
}

const MINIMAL: [&str; 3] = ["DAC_OVERRIDE", "SETGID", "SETUID"];
const STANDARD: [&str; 6] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "SETGID",
    "SETUID",
];

/// Installs tcpdump, whose post-install script adds the system user `tcpdump` (adduser,
/// groupadd, chown), from Debian's mirror; prints `apt=STATUS` and the user's IDs when it exists.
const INSTALL: &str = "apt-get update -qq >/dev/null 2>&1; \
    apt-get install -y -q --no-install-recommends tcpdump >/var/tmp/apt.log 2>&1; \
    echo apt=$?; id -u tcpdump 2>/dev/null || echo no-user";

#[test]
fn the_standard_profile_lets_root_add_users_and_the_minimal_one_does_not() {
    require_container!("a local sandbox has no capabilities to choose");
    // The default is standard.
    let env = TestEnv::new();
    let id = env.up(&["--image", DEBIAN, "--user", "root"]);
    assert_eq!(cap_add(&env, &id), STANDARD);
    assert_eq!(env.entry(&id)["limits"]["caps"], "standard");
    let out = env.run(&[
        "exec",
        &id,
        "--",
        "groupadd h9grp && useradd -r -g h9grp h9usr && id -gn h9usr",
    ]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "h9grp\n");
    // A command of another user has no capability at all.
    let out = env.run(&[
        "exec",
        &id,
        "-u",
        "1000",
        "--",
        "grep",
        "^CapEff",
        "/proc/self/status",
    ]);
    assert_eq!(
        stdout(&out),
        "CapEff:\t0000000000000000\n",
        "{}",
        stderr(&out)
    );
    // The set-ID filter still holds for root with CHOWN, FOWNER and FSETID.
    let out = env.run(&["exec", &id, "--", "cp /bin/true /var/tmp/s && chmod 4755 /var/tmp/s; chown 0:0 /var/tmp/s; stat -c %a /var/tmp/s"]);
    assert_eq!(stdout(&out), "755\n", "{}", stderr(&out));

    let env = TestEnv::new();
    let id = env.up(&["--image", DEBIAN, "--user", "root", "--caps", "minimal"]);
    assert_eq!(cap_add(&env, &id), MINIMAL);
    assert_eq!(env.entry(&id)["limits"]["caps"], "minimal");
    let out = env.run(&["exec", &id, "--", "groupadd h9grp"]);
    assert_ne!(out.status.code(), Some(0), "groupadd worked without CHOWN");
}

#[test]
fn a_package_that_adds_a_system_user_installs_with_standard_only() {
    require_container!("a local sandbox has no capabilities to choose");
    for (caps, works) in [("standard", true), ("minimal", false)] {
        let env = TestEnv::new();
        let id = env.up(&["--image", DEBIAN, "--user", "root", "--caps", caps]);
        let out = env.run(&["exec", &id, "--timeout", "600", "--", INSTALL]);
        assert_ok(&out);
        let said = stdout(&out);
        if works {
            assert!(said.starts_with("apt=0\n"), "{caps}: {said}");
            assert!(!said.contains("no-user"), "{caps}: {said}");
        } else {
            assert!(!said.starts_with("apt=0\n"), "{caps}: {said}");
            assert!(said.ends_with("no-user\n"), "{caps}: {said}");
        }
    }
}

#[test]
fn a_trusted_project_file_may_narrow_the_profile_but_not_widen_it() {
    require_container!("a local sandbox has no capabilities to choose");
    let env = TestEnv::new();
    std::fs::write(env.path("sandbox.toml"), "caps = \"minimal\"\n").unwrap();
    assert_ok(&env.run(&["trust"]));
    let id = env.up(&["--image", DEBIAN]);
    assert_eq!(cap_add(&env, &id), MINIMAL);
    // A flag is the caller's own choice: it widens again.
    let id = env.up(&["--image", DEBIAN, "--caps", "standard"]);
    assert_eq!(cap_add(&env, &id), STANDARD);
    // Over a user's minimal, a trusted project's standard is refused.
    let config = env.root.path().join(".config/h9sandbox/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "caps = \"minimal\"\n").unwrap();
    std::fs::write(env.path("sandbox.toml"), "caps = \"standard\"\n").unwrap();
    assert_ok(&env.run(&["trust"]));
    let out = env.run(&["up", "--image", DEBIAN]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("may only narrow"), "{}", stderr(&out));
    // Without the project file, the user's minimal holds.
    std::fs::remove_file(env.path("sandbox.toml")).unwrap();
    let id = env.up(&["--image", DEBIAN]);
    assert_eq!(cap_add(&env, &id), MINIMAL);
}
