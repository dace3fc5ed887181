//! Unit tests of the Engine API's request builders and answer parsers ([`api`]), and of what
//! its refusals mean.

use super::*;

#[test]
fn the_api_is_used_only_for_a_daemon_on_a_local_socket() {
    use crate::types::Daemon;
    use std::path::PathBuf;
    let d = |host: Option<&str>, context: Option<&str>| Daemon {
        host: host.map(str::to_string),
        context: context.map(str::to_string),
        ..Daemon::default()
    };
    let local = Some(PathBuf::from(api::DEFAULT_SOCKET));
    assert_eq!(api::local_socket(&d(None, None), None), local);
    assert_eq!(api::local_socket(&d(None, Some("default")), None), local);
    assert_eq!(
        api::local_socket(&d(None, None), Some("default")),
        local,
        "the client's current context is the default one"
    );
    assert_eq!(
        api::local_socket(&d(Some("unix:///run/user/1000/docker.sock"), None), None),
        Some(PathBuf::from("/run/user/1000/docker.sock"))
    );
    // Anything else is the client's: another host, a named context (given, or the client's
    // current one), settings that fail the checks.
    for (daemon, current) in [
        (d(Some("tcp://127.0.0.2:23760"), None), None),
        (d(Some("ssh://me@box"), None), None),
        (d(None, Some("testbed")), None),
        (
            d(Some("unix:///var/run/docker.sock"), Some("testbed")),
            None,
        ),
        (d(None, None), Some("desktop-linux")),
        (d(Some("unix://relative.sock"), None), None),
        (d(Some("npipe:////./pipe/docker"), None), None),
        (d(Some(""), None), None),
    ] {
        assert_eq!(
            api::local_socket(&daemon, current),
            None,
            "{daemon:?} {current:?}"
        );
    }
    // A DOCKER_HOST or DOCKER_CONTEXT given wins over the client's current context.
    assert_eq!(
        api::local_socket(&d(Some("unix:///s.sock"), None), Some("remote")),
        Some(PathBuf::from("/s.sock"))
    );
    assert_eq!(
        api::local_socket(&d(None, Some("default")), Some("remote")),
        local
    );
}

#[test]
fn only_the_default_client_talks_to_the_api() {
    assert!(Docker::with_flavor(Flavor::Docker, "docker")
        .api()
        .is_some());
    for bin in ["/usr/local/bin/docker-wrapper", "/tmp/docker", "podman"] {
        assert!(
            Docker::with_flavor(Flavor::Docker, bin).api().is_none(),
            "{bin}"
        );
    }
    let remote = Docker::with_flavor(Flavor::Docker, "docker").daemon(crate::types::Daemon {
        host: Some("tcp://127.0.0.2:23760".into()),
        ..Default::default()
    });
    assert!(remote.api().is_none());
}

#[test]
fn the_api_version_is_the_daemons_at_most_ours() {
    assert_eq!(api::agreed_version(Some("1.41")), "v1.41");
    assert_eq!(api::agreed_version(Some("1.48")), "v1.44");
    assert_eq!(api::agreed_version(Some("2.0")), "v1.44");
    assert_eq!(api::agreed_version(Some("1.40")), "v1.40");
    assert_eq!(api::agreed_version(Some("garbage")), "v1.41");
    assert_eq!(api::agreed_version(None), "v1.41");
}

#[test]
fn paths_and_filters_are_encoded() {
    assert_eq!(api::encode("h9sandbox-abc.1_x"), "h9sandbox-abc.1_x");
    assert_eq!(api::encode("a b/c?d&e"), "a%20b%2Fc%3Fd%26e");
    assert_eq!(
        api::encode_image("registry:5000/team/img:1.0"),
        "registry%3A5000/team/img%3A1.0"
    );
    let f = api::label_filters(&[
        ("h9sandbox", "1"),
        ("h9sandbox.state_dir", "/s d"),
        ("k", ""),
    ]);
    let decoded = f
        .split('%')
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part.to_string()
            } else {
                let byte = u8::from_str_radix(&part[..2], 16).unwrap();
                format!("{}{}", byte as char, &part[2..])
            }
        })
        .collect::<String>();
    assert_eq!(
        decoded,
        r#"{"label":["h9sandbox=1","h9sandbox.state_dir=/s d","k"]}"#
    );
}

#[test]
fn the_create_body_is_the_same_container_as_docker_run() {
    let spec = ContainerSpec {
        labels: BTreeMap::from([
            (LABEL_MANAGED.to_string(), "1".to_string()),
            (LABEL_ID.to_string(), "abc".to_string()),
            (LABEL_STATE_DIR.to_string(), "/state".to_string()),
            ("mine".to_string(), "x".to_string()),
        ]),
        user: Ids {
            uid: 1000,
            gid: 1000,
        },
        user_name: Some("me".into()),
        env: vec![("A".into(), "b".into())],
        ..spec("/w")
    };
    let body = api::create_body(&spec, &[]).unwrap();
    let want = serde_json::json!({
        "Image": "ubuntu:22.04",
        "User": "0:0",
        "Labels": {"h9sandbox": "1", "h9sandbox.id": "abc", "h9sandbox.state_dir": "/state", "mine": "x"},
        "Env": ["A=b", "TMPDIR=/var/tmp"],
        "WorkingDir": "/w",
        "Entrypoint": ["/.h9sandbox/h9sandbox"],
        "Cmd": ["agent", "init", "--user", "1000:1000", "--user-name", "me"],
        "Healthcheck": {"Test": ["NONE"]},
        "ExposedPorts": {},
        "AttachStdin": false, "AttachStdout": false, "AttachStderr": false,
        "OpenStdin": false, "Tty": false,
        "HostConfig": {
            "CapDrop": ["ALL"],
            "CapAdd": ["CAP_DAC_OVERRIDE", "CAP_SETGID", "CAP_SETUID"],
            "RestartPolicy": {"Name": "no"},
            "SecurityOpt": ["no-new-privileges:true"],
            "PidsLimit": 256,
            "NanoCpus": 1_500_000_000u64,
            "Memory": 536_870_912u64,
            "ShmSize": 536_870_912u64,
            "Tmpfs": {"/tmp": "size=256m,nosuid,noexec,nodev"},
            "NetworkMode": "none",
            "Mounts": [
                {"Type": "volume", "Source": "h9sandbox-abc", "Target": "/var/tmp",
                 "VolumeOptions": {"Labels": {"h9sandbox": "1", "h9sandbox.id": "abc", "h9sandbox.state_dir": "/state"}}},
                {"Type": "bind", "Source": "/w", "Target": "/w", "ReadOnly": false},
                {"Type": "bind", "Source": "/state/mounts/abc", "Target": "/.h9sandbox", "ReadOnly": true},
                {"Type": "bind", "Source": "/opt/h9/h9sandbox", "Target": "/.h9sandbox/h9sandbox", "ReadOnly": true},
                {"Type": "bind", "Source": "/state/run/abc", "Target": "/.h9sandbox/run", "ReadOnly": false},
            ],
            "PortBindings": {},
        },
    });
    assert_eq!(body, want, "{body:#}");
    // Every value of the `docker run` line is in the body.
    let args = run_args(Flavor::Docker, &spec, &[]);
    let text = body.to_string();
    for w in [
        "256",
        "256m",
        "/.h9sandbox/run",
        "h9sandbox-abc",
        "1000:1000",
    ] {
        assert!(
            args.iter().any(|a| a.contains(w)) && text.contains(w),
            "{w}"
        );
    }
}

#[test]
fn the_create_body_carries_ports_rlimits_the_runtime_and_the_proxy() {
    let with_all = ContainerSpec {
        publish: vec![
            crate::types::Publish::parse("8000").unwrap(),
            crate::types::Publish::parse("0.0.0.0:8080:80").unwrap(),
        ],
        runtime: Some("runsc".into()),
        proxy: Some(crate::engine::MountSource::Host("/state/proxy/abc".into())),
        ..spec("/w")
    };
    let ulimits: Vec<String> = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=256:256"]
        .map(String::from)
        .to_vec();
    let b = api::create_body(&with_all, &ulimits).unwrap();
    let h = &b["HostConfig"];
    assert_eq!(
        h["PortBindings"],
        serde_json::json!({
            "8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}],
            "80/tcp": [{"HostIp": "0.0.0.0", "HostPort": "8080"}],
        })
    );
    assert_eq!(
        b["ExposedPorts"],
        serde_json::json!({"8000/tcp": {}, "80/tcp": {}})
    );
    assert_eq!(
        h["Ulimits"],
        serde_json::json!([
            {"Name": "nofile", "Soft": 1024, "Hard": 1024},
            {"Name": "nproc", "Soft": 256, "Hard": 256},
        ])
    );
    assert_eq!(h["Runtime"], "runsc");
    // gVisor: the host's pids cgroup is the ceiling, as on the command line.
    assert_eq!(h["PidsLimit"], gvisor_host_pids(256));
    let last = h["Mounts"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last,
        serde_json::json!({"Type": "bind", "Source": "/state/proxy/abc", "Target": "/.h9sandbox/proxy", "ReadOnly": true})
    );
    assert!(b["Env"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("HTTPS_PROXY=http://127.0.0.1:3128")));
    assert_eq!(
        b["Cmd"].as_array().unwrap().last().unwrap(),
        "--proxy-relay"
    );
    // A shipped agent's container is the client's to make (its secret goes on stdin).
    let shipped = ContainerSpec {
        agent: AgentSetup::Shipped(ShippedAgent {
            image: "h9sandbox-agent:x".into(),
            secret: Secret(vec![1]),
            listen: "0.0.0.0:7336".into(),
            publish: None,
            ready_timeout: std::time::Duration::from_secs(1),
        }),
        ..spec("/w")
    };
    assert!(api::create_body(&shipped, &[]).is_err());
}

fn answer(status: u16, body: &str) -> api::Answer {
    api::Answer {
        status,
        body: bytes::Bytes::from(body.to_string()),
    }
}

#[test]
fn refused_creates_mean_what_the_clients_messages_meant() {
    let d = Docker::with_flavor(Flavor::Docker, "docker");
    let s = spec("/w");
    let e = d.run_failure(
        &s,
        &answer(404, r#"{"message":"No such image: ubuntu:22.04"}"#),
    );
    assert!(
        matches!(e.downcast_ref::<Error>(), Some(Error::ImageUnavailable { image, .. }) if image == "ubuntu:22.04"),
        "{e:#}"
    );
    let e = d.run_failure(
        &s,
        &answer(
            409,
            r#"{"message":"Conflict. The container name \"/h9sandbox-abc\" is already in use by container \"f00\". You have to remove (or rename) that container to be able to reuse that name."}"#,
        ),
    );
    assert!(
        matches!(e.downcast_ref::<Error>(), Some(Error::NameInUse(n)) if n == "h9sandbox-abc"),
        "{e:#}"
    );
    // A 404 of something else (a network) is no missing image.
    let e = d.run_failure(&s, &answer(404, r#"{"message":"network h9 not found"}"#));
    assert_eq!(
        format!("{e:#}"),
        "`docker run` failed: Error response from daemon: network h9 not found"
    );
    let rt = ContainerSpec {
        runtime: Some("runsc".into()),
        ..spec("/w")
    };
    let e = d.run_failure(
        &rt,
        &answer(400, r#"{"message":"Unknown runtime specified runsc"}"#),
    );
    assert!(
        format!("{e:#}").contains("no OCI runtime named 'runsc'"),
        "{e:#}"
    );
    let e = d.run_failure(
        &s,
        &answer(
            500,
            r#"{"message":"failed to create task: error setting rlimit type 7"}"#,
        ),
    );
    assert!(
        format!("{e:#}")
            .starts_with("`docker run` failed: Error response from daemon: failed to create task")
            && format!("{e:#}").contains("lower ulimit_nofile"),
        "{e:#}"
    );
    // Not JSON: the body as text.
    assert_eq!(answer(502, " bad gateway\n").message(), "bad gateway");
    assert!(answer(304, "").ok() && answer(204, "").ok() && !answer(404, "").ok());
    // A daemon too new for our API version: the client is asked instead.
    assert!(answer(
        400,
        r#"{"message":"client version 1.44 is too old. Minimum supported API version is 1.50, please upgrade your client to a newer version"}"#
    )
    .version_refused());
    assert!(!answer(400, r#"{"message":"invalid mount config"}"#).version_refused());
}

#[test]
fn api_answers_parse_as_the_clients_output_did() {
    let list = r#"[{"Id":"f00","Names":["/h9sandbox-abc"],"State":"running","Status":"Up 2 seconds",
        "Labels":{"h9sandbox":"1","h9sandbox.id":"abc","h9sandbox.state_dir":"/s"}},
        {"Id":"ba2","Names":null,"State":"exited","Status":"Exited (0)","Labels":{"h9sandbox.id":""}}]"#;
    assert_eq!(
        api::parse_list_body(list.as_bytes()).unwrap(),
        [
            ContainerSummary {
                id: "f00".into(),
                name: "h9sandbox-abc".into(),
                state: "running".into(),
                status: "Up 2 seconds".into(),
                sandbox_id: Some("abc".into()),
                state_dir: Some("/s".into()),
                node: None,
            },
            ContainerSummary {
                id: "ba2".into(),
                name: String::new(),
                state: "exited".into(),
                status: "Exited (0)".into(),
                sandbox_id: None,
                state_dir: None,
                node: None,
            }
        ]
    );
    assert!(api::parse_list_body(b"[]").unwrap().is_empty());
    assert!(api::parse_list_body(b"{").is_err());
    let vols = r#"{"Volumes":[{"Name":"h9sandbox-1","Labels":{"h9sandbox":"1"}},{"Name":"v2","Labels":null}],"Warnings":null}"#;
    let got = api::parse_volumes_body(vols.as_bytes()).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].1.get("h9sandbox").map(String::as_str), Some("1"));
    assert!(got[1].1.is_empty());
    assert!(api::parse_volumes_body(br#"{"Volumes":null}"#)
        .unwrap()
        .is_empty());
    let inspect = r#"{"Id":"f00","State":{"Status":"running","Running":true,"ExitCode":0,"Error":"","OOMKilled":false,"Pid":42},
        "HostConfig":{"Memory":536870912,"NanoCpus":1500000000,"PidsLimit":256},
        "NetworkSettings":{"Ports":{"7336/tcp":[{"HostIp":"127.0.0.1","HostPort":"49153"}]}}}"#;
    let s = api::parse_inspect_body(inspect.as_bytes()).unwrap();
    assert!(s.running);
    assert_eq!(s.pid, 42);
    assert_eq!(
        s.applied,
        Some(AppliedLimits {
            memory_bytes: 536_870_912,
            nano_cpus: 1_500_000_000,
            pids_limit: 256
        })
    );
    assert_eq!(s.ports, [(7336, "127.0.0.1".to_string(), 49153)]);
}

#[test]
fn an_api_request_shows_as_a_curl_line() {
    let line = api::curl_line(
        &api::Endpoint::Unix("/var/run/docker.sock".into()),
        "POST",
        "/v1.41/containers/create?name=x",
        Some(&serde_json::json!({"Image": "it's"})),
    );
    assert_eq!(
        line,
        r#"curl --unix-socket /var/run/docker.sock -X POST 'http://localhost/v1.41/containers/create?name=x' -H 'Content-Type: application/json' -d '{"Image":"it'\''s"}'"#
    );
}

#[test]
fn a_tls_request_shows_as_a_curl_line_with_the_clients_files() {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = rcgen::CertificateParams::new(Vec::<String>::new())
        .unwrap()
        .self_signed(&ca_key)
        .unwrap();
    std::fs::write(
        dir.path().join("ca.pem"),
        super::super::api_tls::pem("CERTIFICATE", ca.der()),
    )
    .unwrap();
    let daemon = crate::types::Daemon {
        host: Some("tcp://127.0.0.2:23760".into()),
        tls_verify: Some("1".into()),
        cert_path: Some(dir.path().to_string_lossy().into_owned()),
        ..Default::default()
    };
    let endpoint = api::Endpoint::of(&daemon, None).expect("a verified tcp:// daemon");
    assert_eq!(endpoint.describe(), "tcp://127.0.0.2:23760");
    let line = api::curl_line(&endpoint, "GET", "/v1.41/_ping", None);
    assert_eq!(
        line,
        format!(
            "curl --cacert {}/ca.pem -X GET https://127.0.0.2:23760/v1.41/_ping",
            dir.path().display()
        )
    );
    // The client of such a daemon is asked through the API too.
    let engine = Docker::with_flavor(Flavor::Docker, "docker").daemon(daemon);
    assert!(engine.api().is_some());
}

#[test]
fn a_volume_is_a_sandboxs_by_its_name_or_by_its_id_label() {
    use std::collections::BTreeMap;
    let id = "3a51c110-bff8-44b4-be2a-9497ca5294fa";
    let labels = |extra: &[(&str, &str)]| -> BTreeMap<String, String> {
        [("h9sandbox", "1"), ("h9sandbox.state_dir", "/s")]
            .iter()
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let found = vec![
        // The scratch volume, named after its sandbox.
        (
            "h9sandbox-3a51c110bff844b4be2a9497ca5294fa".to_string(),
            labels(&[]),
        ),
        // A copied work dir's anonymous volume, labelled with its sandbox's ID.
        (
            "5ccbd0d85b87".to_string(),
            labels(&[(crate::engine::LABEL_ID, id)]),
        ),
        // Neither: an orphan whatever it is.
        (
            "5ccbd0d85b88".to_string(),
            labels(&[(crate::engine::LABEL_ID, "junk")]),
        ),
        // Another state directory's: not listed at all.
        ("h9sandbox-ffffffffffffffffffffffffffffffff".to_string(), {
            let mut l = labels(&[]);
            l.insert("h9sandbox.state_dir".into(), "/other".into());
            l
        }),
    ];
    let got = super::super::via_api::volume_summaries(
        found,
        &[("h9sandbox", "1"), ("h9sandbox.state_dir", "/s")],
    );
    let got: Vec<(&str, Option<&str>)> = got
        .iter()
        .map(|v| (v.name.as_str(), v.sandbox_id.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("h9sandbox-3a51c110bff844b4be2a9497ca5294fa", Some(id)),
            ("5ccbd0d85b87", Some(id)),
            ("5ccbd0d85b88", None),
        ]
    );
}

#[test]
fn a_client_line_carries_the_daemon_it_goes_to() {
    let args: Vec<std::ffi::OsString> = vec!["start".into(), "a b".into()];
    assert_eq!(
        Docker::with_flavor(Flavor::Docker, "docker").shown(&args),
        "docker start 'a b'"
    );
    let remote = Docker::with_flavor(Flavor::Docker, "docker").daemon(crate::types::Daemon {
        host: Some("tcp://127.0.0.2:23760".into()),
        tls_verify: Some("1".into()),
        cert_path: Some("/certs dir".into()),
        ..Default::default()
    });
    assert_eq!(
        remote.shown(&args),
        "DOCKER_HOST=tcp://127.0.0.2:23760 DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH='/certs dir' docker start 'a b'"
    );
    assert_eq!(
        Docker::with_flavor(Flavor::Podman, "podman").shown(&args),
        "podman start 'a b'"
    );
}

#[test]
fn a_daemons_message_is_one_line() {
    let a = api::Answer {
        status: 500,
        body: bytes::Bytes::from_static(b"{\"message\": \"first\\nsecond\\r\\n\"}"),
    };
    assert_eq!(a.message(), "first second");
    let a = api::Answer {
        status: 302,
        body: bytes::Bytes::from_static(b"moved\nthere\n"),
    };
    assert_eq!(
        a.as_client_error(),
        "Error response from daemon: moved there"
    );
}

#[test]
fn a_daemons_long_answer_is_quoted_in_part() {
    // A body of megabytes (a proxy's page, a log) is cut, at a character's boundary.
    let long = "é".repeat(4 << 20);
    let m = answer(500, &long).message();
    assert!(m.len() < api::MESSAGE_LIMIT + 40, "{}", m.len());
    assert!(m.starts_with("éé") && m.ends_with(&format!("… ({} bytes in all)", long.len())));
    let e = answer(200, &long).json("tasks").unwrap_err().to_string();
    assert!(e.len() < api::MESSAGE_LIMIT + 100, "{}", e.len());
    assert_eq!(answer(500, "short").message(), "short");
}

#[test]
fn api_versions_are_read_as_numbers() {
    assert_eq!(api::parse_version("1.41"), Some((1, 41)));
    assert_eq!(api::parse_version(" 1.9 "), Some((1, 9)));
    // A manager older than 1.41 would drop a service's capabilities: refused, naming both.
    use crate::engine::swarm::manager_new_enough;
    let e = manager_new_enough(api::parse_version("1.9").unwrap()).unwrap_err();
    assert!(
        e.to_string()
            .contains("Engine API 1.9, and engine swarm needs 1.41"),
        "{e}"
    );
    manager_new_enough((1, 41)).unwrap();
    manager_new_enough((2, 0)).unwrap();
    assert_eq!(api::parse_version("v1.41"), None);
    assert_eq!(api::parse_version("1"), None);
}
