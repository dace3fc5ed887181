//! `network = "allowlist"`: the sandbox has no route out, reaches allowed hosts through its proxy
//! sidecar (HTTP and CONNECT), gets 403 for the rest, every decision is logged, and the sidecar
//! goes with the sandbox (`down`, `reap`). Needs Docker and Debian's mirror (deb.debian.org)
//! reachable from Docker's bridge, as the bootstrap tests do.

use std::process::Command;

use crate::common::*;

/// The sidecar containers (`ps -a`) serving sandbox `id`.
fn sidecars(id: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=h9sandbox.proxy_of={id}"),
        ])
        .output()
        .unwrap();
    stdout(&out).lines().map(String::from).collect()
}

/// The volumes (`volume ls`) of sandbox `id`'s proxy: its socket and log in copy mode, none
/// with a mounted work dir (a directory of the state directory holds them).
fn proxy_volumes(id: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "volume",
            "ls",
            "-q",
            "--filter",
            &format!("label=h9sandbox.proxy_of={id}"),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).lines().map(String::from).collect()
}

/// A raw request to the proxy through the sandbox's loopback relay (never to an outside
/// address): the status line it answers.
fn ask_proxy(env: &TestEnv, id: &str, request: &str) -> String {
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/3128; printf '{request}' >&3; head -1 <&3");
    let out = env.run(&["exec", id, "--", &script]);
    assert_ok(&out);
    stdout(&out).trim().to_string()
}

#[test]
fn an_allowlist_sandbox_reaches_allowed_hosts_only_and_logs_every_decision() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&["--image", DEBIAN, "--allow", "deb.debian.org"]);
    let rec = env.entry(&id);
    assert_eq!(rec["limits"]["network"], "allowlist");
    assert_eq!(
        rec["limits"]["allow"],
        serde_json::json!(["deb.debian.org"])
    );

    // No route out: no default route (Destination 00000000), only loopback, and the container
    // has no network of its own.
    let route = stdout(&env.run(&["exec", &id, "--", "cat /proc/net/route"]));
    assert!(route.starts_with("Iface"), "{route}");
    assert!(
        !route
            .lines()
            .skip(1)
            .any(|l| l.split_whitespace().nth(1) == Some("00000000")),
        "a default route:\n{route}"
    );
    assert_eq!(
        inspect(&env.container(&id), "{{.HostConfig.NetworkMode}}"),
        "none"
    );

    // Every process gets the proxy variables, in both cases.
    let vars = stdout(&env.run(&["exec", &id, "--", "env"]));
    for v in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"] {
        assert!(
            vars.contains(&format!("{v}=http://127.0.0.1:3128\n")),
            "{vars}"
        );
    }
    for v in ["NO_PROXY", "no_proxy"] {
        assert!(
            vars.contains(&format!("{v}=localhost,127.0.0.1,::1\n")),
            "{vars}"
        );
    }

    // The allowed mirror works through the proxy, as apt reads http_proxy.
    let out = env.run(&["exec", &id, "--", "apt-get update"]);
    assert_ok(&out);
    assert!(stdout(&out).contains("deb.debian.org"), "{}", stdout(&out));

    // Off the list: 403, for HTTP and for CONNECT; a name that merely ends like an allowed one
    // is off the list too.
    assert_eq!(
        ask_proxy(
            &env,
            &id,
            "GET http://example.com/ HTTP/1.1\\r\\nHost: example.com\\r\\n\\r\\n"
        ),
        "HTTP/1.1 403 Forbidden"
    );
    assert_eq!(
        ask_proxy(
            &env,
            &id,
            "CONNECT example.com:443 HTTP/1.1\\r\\nHost: example.com:443\\r\\n\\r\\n"
        ),
        "HTTP/1.1 403 Forbidden"
    );
    assert_eq!(
        ask_proxy(
            &env,
            &id,
            "CONNECT evildeb.debian.org.example.com:443 HTTP/1.1\\r\\n\\r\\n"
        ),
        "HTTP/1.1 403 Forbidden"
    );
    // The Host header cannot send an allowed host's request to another site on the same front
    // end: the proxy sets it from the target, so both answers are the same.
    let right = ask_proxy(
        &env,
        &id,
        "GET http://deb.debian.org/ HTTP/1.1\\r\\nHost: deb.debian.org\\r\\nConnection: close\\r\\n\\r\\n",
    );
    let fronted = ask_proxy(
        &env,
        &id,
        "GET http://deb.debian.org/ HTTP/1.1\\r\\nHost: example.com\\r\\nConnection: close\\r\\n\\r\\n",
    );
    assert_eq!(fronted, right);
    // A CONNECT without a valid port is refused, not taken for 443.
    for target in ["deb.debian.org", "deb.debian.org:99999"] {
        assert_eq!(
            ask_proxy(&env, &id, &format!("CONNECT {target} HTTP/1.1\\r\\n\\r\\n")),
            "HTTP/1.1 400 Bad Request",
            "{target}"
        );
    }
    // The proxy is no server: a request in origin form is refused.
    assert_eq!(
        ask_proxy(
            &env,
            &id,
            "GET / HTTP/1.1\\r\\nHost: deb.debian.org\\r\\n\\r\\n"
        ),
        "HTTP/1.1 400 Bad Request"
    );

    // Every decision, with its bytes.
    let out = env.run(&["logs", &id, "--network", "--format", "json"]);
    assert_ok(&out);
    let log: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let fetched: u64 = log
        .iter()
        .filter(|e| e["host"] == "deb.debian.org" && e["decision"] == "allowed")
        .map(|e| e["bytes_in"].as_u64().unwrap())
        .sum();
    assert!(fetched > 10_000, "{log:?}");
    let denied: Vec<_> = log.iter().filter(|e| e["decision"] == "denied").collect();
    assert_eq!(denied.len(), 3, "{log:?}");
    assert!(denied
        .iter()
        .any(|e| e["host"] == "example.com" && e["method"] == "CONNECT" && e["port"] == 443));
    assert!(log.iter().any(|e| e["decision"] == "bad"), "{log:?}");
    let table = stdout(&env.run(&["logs", &id, "--network"]));
    assert!(
        table.contains("example.com") && table.contains("denied"),
        "{table}"
    );

    // The sidecar is hardened.
    let proxy = sidecars(&id);
    assert_eq!(proxy.len(), 1);
    let p = &proxy[0];
    assert_eq!(inspect(p, "{{.HostConfig.ReadonlyRootfs}}"), "true");
    assert!(inspect(p, "{{json .HostConfig.CapDrop}}")
        .to_lowercase()
        .contains("all"));
    assert_eq!(inspect(p, "{{json .HostConfig.CapAdd}}"), "null");
    assert!(inspect(p, "{{json .HostConfig.SecurityOpt}}").contains("no-new-privileges"));
    assert_eq!(
        inspect(p, "{{index .Config.Labels \"h9sandbox.state_dir\"}}"),
        env.state_dir.to_str().unwrap()
    );
    // It is not taken for a container of the sandbox.
    assert_eq!(env.entry(&id)["foreign_containers"], serde_json::json!([]));
    // In copy mode nothing of this machine is mounted into either container: the socket is in
    // a volume both mount (the sandbox read-only), the log in one of the sidecar's alone.
    if copies_workdir() {
        for c in [&env.container(&id), p] {
            let mounts = inspect(c, "{{json .Mounts}}");
            assert!(!mounts.contains("\"bind\""), "{c}: {mounts}");
        }
        let mut volumes = proxy_volumes(&id);
        volumes.sort();
        assert_eq!(volumes.len(), 2, "{volumes:?}");
        let sandbox_mounts = inspect(&env.container(&id), "{{json .Mounts}}");
        assert!(sandbox_mounts.contains(&volumes[1]), "{sandbox_mounts}");
        assert!(!sandbox_mounts.contains(&volumes[0]), "{sandbox_mounts}");
        assert_eq!(inspect(p, "{{.Config.User}}"), "65534:65534");
        // The log is in the sidecar's memory: a sidecar that no longer runs is said so, never
        // taken for an empty log.
        let stopped = Command::new("docker")
            .args(["stop", "-t", "1", p])
            .output()
            .unwrap();
        assert!(stopped.status.success(), "{}", stderr(&stopped));
        let out = env.run(&["logs", &id, "--network"]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
        assert!(stderr(&out).contains("does not run"), "{}", stderr(&out));
    }

    assert_ok(&env.run(&["down", &id]));
    assert!(sidecars(&id).is_empty(), "down left the sidecar");
    assert!(
        proxy_volumes(&id).is_empty(),
        "down left the proxy's volumes"
    );
    assert!(!env.state_dir.join("proxy").join(&id).exists());
}

#[test]
fn reap_removes_the_sidecar_of_an_abandoned_sandbox() {
    require_docker!();
    let env = TestEnv::without_owner_watcher();
    let mut owner = Command::new("sleep").arg("300").spawn().unwrap();
    let id = env.up(&[
        "--network",
        "allowlist",
        "--owner-pid",
        &owner.id().to_string(),
    ]);
    assert_eq!(sidecars(&id).len(), 1);
    // With an empty list nothing gets through.
    let out = env.run(&[
        "exec",
        &id,
        "--",
        "exec 3<>/dev/tcp/127.0.0.1/3128; printf 'CONNECT deb.debian.org:443 HTTP/1.1\\r\\n\\r\\n' >&3; head -1 <&3",
    ]);
    assert_eq!(stdout(&out).trim(), "HTTP/1.1 403 Forbidden");
    owner.kill().unwrap();
    owner.wait().unwrap();
    assert_ok(&env.run(&["reap"]));
    assert!(env.ls().is_empty());
    assert!(sidecars(&id).is_empty(), "reap left the sidecar");
    assert!(
        proxy_volumes(&id).is_empty(),
        "reap left the proxy's volumes"
    );
}

#[test]
fn reap_removes_a_sidecar_whose_sandbox_has_no_record() {
    require_docker!();
    let env = TestEnv::new();
    let id = env.up(&["--allow", "*.debian.org"]);
    // The record vanishes (a state file moved aside, an `up` killed at the wrong moment): the
    // container is reaped as an orphan, and so is its sidecar.
    let state = env.state_dir.join("state.json");
    std::fs::rename(&state, env.state_dir.join("state.json.aside")).unwrap();
    // And what a `down` killed after the sidecar went leaves: a proxy directory of no sandbox.
    let stray = env
        .state_dir
        .join("proxy/6f1c1d3e-0000-4000-8000-000000000000/sock");
    std::fs::create_dir_all(&stray).unwrap();
    assert_ok(&env.run(&["reap"]));
    assert!(
        !stray.parent().unwrap().exists(),
        "reap left a stray proxy directory"
    );
    assert!(sidecars(&id).is_empty(), "reap left the orphan sidecar");
    assert!(
        proxy_volumes(&id).is_empty(),
        "reap left the proxy's volumes"
    );
    assert!(env.containers().is_empty());
}

#[test]
fn allowlist_flags_and_configuration_are_checked() {
    require_docker!();
    let env = TestEnv::new();
    for (args, why) in [
        (vec!["up", "--allow", "http://x/"], "is not a host name"),
        (
            vec!["up", "--allow", "a.org", "--network", "bridge"],
            "--allow needs network allowlist",
        ),
        (
            vec!["up", "--allow", "a.org", "--runtime", "runsc"],
            "does not work under gVisor",
        ),
        (vec!["up", "--allow", ""], "names no host"),
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(stderr(&out).contains(why), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    }
    assert!(env.containers().is_empty());
    // A configuration's list without the allowlist network restricts nothing: said, not silent.
    let mut c = env.cmd();
    c.env("H9SANDBOX_ALLOW", "deb.debian.org")
        .env("H9SANDBOX_NETWORK", "bridge")
        .arg("up")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = wait_output(c.spawn().unwrap(), RUN_PATIENCE, "up with allow and bridge");
    assert_ok(&out);
    assert!(
        stderr(&out).contains("the configuration's allow list (deb.debian.org) is not used"),
        "{}",
        stderr(&out)
    );
    let bridge = stdout(&out).trim().to_string();
    assert_eq!(env.entry(&bridge)["limits"]["network"], "bridge");
    assert_ok(&env.run(&["down", &bridge]));
    // A sub-sandbox of an allowlist sandbox may not get the bridge (copy mode has no
    // sub-sandboxes).
    let id = env.up(&["--allow", "deb.debian.org"]);
    if !copies_workdir() {
        let out = env.run(&["up", "--parent", &id, "--network", "bridge"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(&out).contains("would give network access"),
            "{}",
            stderr(&out)
        );
    }
    let out = env.run(&["logs", &id, "--network", "--format", "json"]);
    assert_ok(&out);
    assert_eq!(stdout(&out).trim(), "[]");
}

/// Builds `h9sandbox-test/nss-planted`: the Debian test image with an NSS module of its own
/// (`libnss_evil.so.2`, named first for `hosts` in `/etc/nsswitch.conf`) whose constructor writes
/// `/.h9sandbox/proxy/pwned` wherever it is loaded (in the proxy sidecar, that directory is the
/// host's `<state dir>/proxy/<id>/`): what a sandbox can plant and snapshot, or an MCP client
/// name.
fn nss_planted_image(env: &TestEnv) -> &'static str {
    let ctx = env.root.path().join("nss-ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(
        ctx.join("evil.c"),
        "#include <fcntl.h>\n#include <unistd.h>\n\
         __attribute__((constructor)) static void planted(void) {\n\
           int fd = open(\"/.h9sandbox/proxy/pwned\", O_WRONLY | O_CREAT, 0644);\n\
           if (fd >= 0) { write(fd, \"ran\\n\", 4); close(fd); }\n\
         }\n\
         int _nss_evil_gethostbyname2_r(void) { return 0; }\n\
         int _nss_evil_gethostbyname4_r(void) { return 0; }\n",
    )
    .unwrap();
    let cc = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(ctx.join("libnss_evil.so.2"))
        .arg(ctx.join("evil.c"))
        .output()
        .expect("gcc (to build a shared library) is needed");
    assert_ok(&cc);
    std::fs::write(ctx.join("nsswitch.conf"), "hosts: evil files dns\n").unwrap();
    std::fs::write(
        ctx.join("Dockerfile"),
        format!(
            "FROM {DEBIAN}\nCOPY libnss_evil.so.2 /lib/x86_64-linux-gnu/libnss_evil.so.2\n\
             COPY nsswitch.conf /etc/nsswitch.conf\n"
        ),
    )
    .unwrap();
    let img = "h9sandbox-test/nss-planted:latest";
    let out = Command::new("docker")
        .args(["build", "-q", "-t", img])
        .arg(&ctx)
        .output()
        .unwrap();
    assert_ok(&out);
    img
}

#[test]
fn the_proxy_runs_nothing_of_the_sandboxs_image() {
    require_docker!();
    let env = TestEnv::new();
    let image = nss_planted_image(&env);
    let id = env.up(&["--image", image, "--allow", "localhost"]);
    let sidecar = sidecars(&id).pop().expect("no sidecar");
    // An allowed name makes the proxy resolve it (`localhost`: from /etc/hosts, no query leaves
    // the machine); port 9 of the sidecar's own loopback answers nothing.
    let status = ask_proxy(
        &env,
        &id,
        "CONNECT localhost:9 HTTP/1.1\\r\\nHost: localhost:9\\r\\n\\r\\n",
    );
    assert!(status.contains(" 502 "), "{status}");
    let dir = env.state_dir.join("proxy").join(&id);
    assert!(
        !dir.join("pwned").exists(),
        "the sandbox image's NSS module ran in the proxy sidecar"
    );
    // The sidecar's image is h9sandbox's runtime image: the binary alone, labelled as ours;
    // its environment is the engine's default PATH and nothing else.
    let img = inspect(&sidecar, "{{.Config.Image}}");
    assert!(img.starts_with("h9sandbox-runtime:"), "{img}");
    let files = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "c=$(docker create {img}) && docker export $c | tar -t; docker rm $c >/dev/null"
        ))
        .output()
        .unwrap();
    let listed: Vec<String> = stdout(&files)
        .lines()
        // What the engine adds to every container: mount points and its own files.
        .filter(|l| {
            !l.ends_with('/')
                && !["dev/", "etc/", "proc/", "sys/"]
                    .iter()
                    .any(|p| l.starts_with(p))
                && *l != ".dockerenv"
        })
        .map(String::from)
        .collect();
    assert_eq!(listed, ["h9sandbox"], "{}", stdout(&files));
    let label = Command::new("docker")
        .args([
            "image",
            "inspect",
            "--format",
            "{{index .Config.Labels \"h9sandbox.runtime\"}}",
            &img,
        ])
        .output()
        .unwrap();
    assert_eq!(stdout(&label).trim().len(), 64, "{}", stdout(&label));
    let envs = inspect(&sidecar, "{{json .Config.Env}}");
    let envs: Vec<String> = serde_json::from_str(&envs).unwrap();
    assert!(
        envs.iter().all(|e| e.starts_with("PATH=")),
        "the sidecar's environment: {envs:?}"
    );
    assert!(inspect(&sidecar, "{{json .Config.Healthcheck}}").contains("NONE"));
    // The decision was logged as any other.
    let log = stdout(&env.run(&["logs", &id, "--network", "--format", "json"]));
    assert!(log.contains("\"failed\""), "{log}");
    assert_ok(&env.run(&["down", &id]));
}

#[test]
fn start_brings_a_stopped_proxy_back() {
    require_docker!();
    let env = TestEnv::new();
    // An empty list: the proxy answers every request with 403 itself, nothing leaves.
    let id = env.up(&["--network", "allowlist"]);
    let connect = "CONNECT deb.debian.org:443 HTTP/1.1\\r\\n\\r\\n";
    assert_eq!(ask_proxy(&env, &id, connect), "HTTP/1.1 403 Forbidden");
    let proxy = sidecars(&id);
    let stop = |c: &str| {
        let out = Command::new("docker")
            .args(["stop", "-t", "1", c])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    // The proxy alone stopped (outside h9sandbox): the sandbox still runs, `start` repairs it.
    stop(&proxy[0]);
    assert_ok(&env.run(&["start", &id]));
    assert_eq!(inspect(&proxy[0], "{{.State.Running}}"), "true");
    assert_eq!(ask_proxy(&env, &id, connect), "HTTP/1.1 403 Forbidden");
    // Both stopped, as a daemon's restart leaves them: `start` brings both back.
    assert_ok(&env.run(&["stop", &id]));
    stop(&proxy[0]);
    assert_ok(&env.run(&["start", &id]));
    assert_eq!(ask_proxy(&env, &id, connect), "HTTP/1.1 403 Forbidden");
    // Gone: `start` says so, in one line.
    let rm = Command::new("docker")
        .args(["rm", "-f", &proxy[0]])
        .output()
        .unwrap();
    assert!(rm.status.success(), "{}", stderr(&rm));
    let out = env.run(&["start", &id]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("is gone"), "{}", stderr(&out));
}

#[test]
fn a_flood_of_connections_and_huge_request_heads_never_ends_the_proxy_or_its_log() {
    require_docker!();
    let env = TestEnv::new();
    // An empty list: the proxy answers every request itself, nothing leaves.
    let id = env.up(&["--image", DEBIAN, "--network", "allowlist"]);
    let connect = "CONNECT deb.debian.org:443 HTTP/1.1\\r\\n\\r\\n";
    assert_eq!(ask_proxy(&env, &id, connect), "HTTP/1.1 403 Forbidden");
    // 400 connections held open, each sending 400 KB of a request line that never ends, and a
    // request whose method and host are far longer than any name (an attacker's review ran the
    // 64 MiB sidecar out of memory this way, its log lost with it).
    let flood = r#"
use IO::Socket::INET;
$SIG{PIPE} = 'IGNORE';
my @held;
for (1..400) {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1:3128') or last;
    $s->blocking(0);
    push @held, $s;
}
for my $round (1..7) {
    for my $s (@held) { syswrite($s, 'A' x 65536); }
}
my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1:3128') or die "no proxy: $!";
print $s ('M' x 5000) . ' http://' . ('h' x 9000) . "/ HTTP/1.1\r\n\r\n";
my $line = <$s>;
print scalar(@held), " held; ", $line // "closed\n";
"#;
    let out = env.run(&["exec", &id, "--", "perl", "-e", flood]);
    assert_ok(&out);
    let said = stdout(&out);
    assert!(said.starts_with("400 held"), "{said}");
    let proxy = sidecars(&id);
    assert_eq!(inspect(&proxy[0], "{{.State.Running}}"), "true");
    assert_eq!(inspect(&proxy[0], "{{.State.OOMKilled}}"), "false");
    // It still answers, and every decision it logged is bounded.
    assert_eq!(ask_proxy(&env, &id, connect), "HTTP/1.1 403 Forbidden");
    let out = env.run(&["logs", &id, "--network", "--format", "json"]);
    assert_ok(&out);
    let log: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(log.len() >= 2, "{log:?}");
    for e in &log {
        assert!(e["host"].as_str().unwrap().len() <= 253, "{e}");
        assert!(e["method"].as_str().unwrap().len() <= 32, "{e}");
    }
}
