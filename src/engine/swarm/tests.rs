//! Unit tests of the swarm engine's argv builders and parsers.

use super::*;
use crate::engine::{AgentMount, AgentSetup, AppliedLimits, ShippedAgent, LABEL_ID, LABEL_MANAGED};
use crate::types::{Ids, Limits, Network};
use std::collections::BTreeMap;

fn spec() -> ContainerSpec {
    ContainerSpec {
        name: "h9sandbox-abc".into(),
        image: "debian:bookworm".into(),
        workdir: "/w, odd".into(),
        limits: Limits {
            cpus: 0.5,
            memory: "256m".into(),
            pids_limit: 40,
            tmp_size: "64m".into(),
            network: Network::Bridge,
            allow: Vec::new(),
            caps: crate::types::Caps::Minimal,
        },
        labels: BTreeMap::from([
            (LABEL_MANAGED.into(), "1".into()),
            (LABEL_ID.into(), "abc".into()),
        ]),
        user: Ids {
            uid: 1000,
            gid: 1000,
        },
        agent: AgentSetup::Shipped(ShippedAgent {
            image: "reg:5000/h9sandbox-agent:1-2".into(),
            secret: Secret(b"never in argv".to_vec()),
            listen: "0.0.0.0:7336".into(),
            publish: Some("0.0.0.0".into()),
            ready_timeout: Duration::from_secs(5),
        }),
        user_name: Some("me".into()),
        scratch_volume: "h9sandbox-abc".into(),
        runtime: None,
        proxy: None,
        env: vec![("A".into(), "b".into())],
        publish: Vec::new(),
        constraints: vec!["node.labels.gpu==true".into()],
    }
}

/// The values following each occurrence of `flag` in `a`.
fn values<'a>(a: &'a [String], flag: &str) -> Vec<&'a str> {
    a.windows(2)
        .filter(|w| w[0] == flag)
        .map(|w| w[1].as_str())
        .collect()
}

#[test]
fn a_service_is_one_hardened_task_with_limits_reserved_and_its_secret_as_a_file() {
    let a = service_create_args(&spec(), "h9sandbox-abc-channel", &RunOptions::default()).unwrap();
    assert_eq!(a[..4], ["service", "create", "--detach", "--quiet"]);
    assert_eq!(values(&a, "--restart-condition"), ["none"]);
    assert_eq!(values(&a, "--replicas"), ["1"]);
    assert_eq!(values(&a, "--user"), ["0:0", "1000:1000"]);
    assert_eq!(values(&a, "--cap-drop"), ["ALL"]);
    assert_eq!(
        values(&a, "--cap-add"),
        ["CAP_DAC_OVERRIDE", "CAP_SETUID", "CAP_SETGID"]
    );
    // Limits, and reservations equal to them: nodes are never oversubscribed.
    assert_eq!(values(&a, "--limit-cpu"), ["0.5"]);
    assert_eq!(values(&a, "--reserve-cpu"), ["0.5"]);
    assert_eq!(values(&a, "--limit-memory"), ["256m"]);
    assert_eq!(values(&a, "--reserve-memory"), ["256m"]);
    assert_eq!(values(&a, "--limit-pids"), ["40"]);
    // Labels on the service and on its task's container.
    assert_eq!(values(&a, "--label"), ["h9sandbox=1", "h9sandbox.id=abc"]);
    assert_eq!(
        values(&a, "--container-label"),
        ["h9sandbox=1", "h9sandbox.id=abc"]
    );
    assert_eq!(
        values(&a, "--secret"),
        ["source=h9sandbox-abc-channel,target=h9sandbox-channel,uid=0,gid=0,mode=0400"]
    );
    assert_eq!(
        values(&a, "--publish"),
        ["mode=host,target=7336,protocol=tcp"]
    );
    assert_eq!(values(&a, "--constraint"), ["node.labels.gpu==true"]);
    assert_eq!(
        values(&a, "--mount"),
        [
            "type=tmpfs,destination=/tmp,tmpfs-size=64m,tmpfs-mode=1777",
            "type=tmpfs,destination=/dev/shm,tmpfs-size=256m,tmpfs-mode=1777",
            "type=volume,destination=/var/tmp",
            "type=volume,\"destination=/w, odd\"",
        ]
    );
    assert_eq!(values(&a, "--env"), ["A=b", "TMPDIR=/var/tmp"]);
    let image = a
        .iter()
        .position(|w| w == "reg:5000/h9sandbox-agent:1-2")
        .unwrap();
    assert_eq!(
        a[image + 1..],
        [
            "agent",
            "init",
            "--user",
            "1000:1000",
            "--user-name",
            "me",
            "--secret-file",
            SECRET_PATH,
            "--channel",
            "0.0.0.0:7336"
        ]
    );
    assert!(!a.iter().any(|w| w.contains("never in argv")));
}

#[test]
fn the_rlimits_a_service_cannot_set_are_set_by_its_agent() {
    let options = RunOptions {
        ulimit_nofile: 1000,
        ulimit_nproc: 0,
    };
    let a = service_create_args(&spec(), "x", &options).unwrap();
    assert_eq!(values(&a, "--rlimit"), ["nofile=1000"]);
    assert!(!a.iter().any(|w| w == "--ulimit"));
    let options = RunOptions {
        ulimit_nofile: 0,
        ulimit_nproc: 50,
    };
    let a = service_create_args(&spec(), "x", &options).unwrap();
    assert_eq!(values(&a, "--rlimit"), ["nproc=50"]);
}

#[test]
fn what_a_service_cannot_express_is_refused() {
    let refused = |s: ContainerSpec| {
        service_create_args(&s, "x", &RunOptions::default())
            .unwrap_err()
            .to_string()
    };
    let mut s = spec();
    s.limits.network = Network::None;
    assert!(refused(s).contains("network = \"none\""));
    let mut s = spec();
    s.runtime = Some("runsc".into());
    assert!(refused(s).contains("runtime"));
    let mut s = spec();
    s.publish = vec![crate::types::Publish::parse("8000").unwrap()];
    assert!(refused(s).contains("--publish"));
    let mut s = spec();
    s.agent = AgentSetup::Mounted(AgentMount {
        root: "/r".into(),
        binary: "/b".into(),
        run_dir: "/d".into(),
    });
    assert!(refused(s).contains("copy"));
}

#[test]
fn a_task_is_read_with_its_node_ports_and_limits() {
    let json = r#"[{"ID":"t1","NodeID":"n1","Spec":{"Resources":{"Limits":{"NanoCPUs":500000000,"MemoryBytes":268435456,"Pids":40}}},
      "Status":{"State":"running","Message":"started","ContainerStatus":{"ExitCode":0},
      "PortStatus":{"Ports":[{"Protocol":"tcp","TargetPort":7336,"PublishedPort":30001,"PublishMode":"host"},
                             {"Protocol":"tcp","TargetPort":7336,"PublishedPort":30001,"PublishMode":"host"}]}}}]"#;
    let mut t = parse_task(json).unwrap();
    assert_eq!((t.state.as_str(), t.node_id.as_str()), ("running", "n1"));
    assert_eq!(t.ports, [(7336, 30001)]);
    t.node_addr = "10.0.0.7".into();
    let s = task_status(&t);
    assert!(s.running);
    assert_eq!(s.ports, [(7336, "10.0.0.7".to_string(), 30001)]);
    assert_eq!(
        s.applied.unwrap(),
        AppliedLimits {
            memory_bytes: 256 << 20,
            nano_cpus: 500_000_000,
            pids_limit: 40
        }
    );
    let pending = parse_task(
        r#"[{"Status":{"State":"pending","Err":"no suitable node (insufficient resources on 2 nodes)"}}]"#,
    )
    .unwrap();
    assert_eq!(task_status(&pending).status, "created");
    let failed =
        parse_task(r#"[{"Status":{"State":"failed","ContainerStatus":{"ExitCode":137}}}]"#)
            .unwrap();
    assert_eq!(
        (
            task_status(&failed).status.as_str(),
            task_status(&failed).exit_code
        ),
        ("exited", 137)
    );
}

#[test]
fn services_are_summarised_with_their_tasks_state() {
    let inspect = r#"[{"ID":"s1","Spec":{"Name":"h9sandbox-a","Labels":{"h9sandbox":"1","h9sandbox.id":"a","h9sandbox.state_dir":"/st"}}},
                      {"ID":"s2","Spec":{"Name":"h9sandbox-b","Labels":{"h9sandbox":"1","h9sandbox.id":"b","h9sandbox.state_dir":"/st"}}}]"#;
    let ps = "t1\th9sandbox-a.1\tnode-7\tRunning\tRunning 5 seconds ago\nt2\th9sandbox-b.1\t\tShutdown\tFailed 1 second ago\n";
    let s = parse_services(inspect, ps).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(
        (
            s[0].id.as_str(),
            s[0].state.as_str(),
            s[0].sandbox_id.as_deref()
        ),
        ("s1", "running", Some("a"))
    );
    assert_eq!(
        (s[1].state.as_str(), s[1].state_dir.as_deref()),
        ("exited", Some("/st"))
    );
    assert_eq!(
        (s[0].node.as_deref(), s[1].node.as_deref()),
        (Some("node-7"), None)
    );
    // A task the swarm gave up while it ran (its node went down) is lost, not running.
    let ps = "t1\th9sandbox-a.1\tnode-7\tShutdown\tRunning 5 minutes ago\n";
    let s = parse_services(inspect, ps).unwrap();
    assert_eq!(s[0].state, "lost");
    assert!(s[0].status.starts_with("task lost:"), "{}", s[0].status);
}

#[test]
fn the_biggest_free_node_is_the_one_with_most_memory_unreserved() {
    let nodes = r#"[
      {"ID":"aaaaaaaaaaaaaaaa","Description":{"Hostname":"a","Resources":{"NanoCPUs":4000000000,"MemoryBytes":8589934592}},"Status":{"State":"ready"},"Spec":{"Availability":"active"}},
      {"ID":"bbbbbbbbbbbbbbbb","Description":{"Hostname":"b","Resources":{"NanoCPUs":2000000000,"MemoryBytes":4294967296}},"Status":{"State":"ready"},"Spec":{"Availability":"active"}},
      {"ID":"cccccccccccccccc","Description":{"Hostname":"c","Resources":{"NanoCPUs":64000000000,"MemoryBytes":68719476736}},"Status":{"State":"down"},"Spec":{"Availability":"active"}}]"#;
    let tasks = r#"[
      {"NodeID":"aaaaaaaaaaaaaaaa","Spec":{"Resources":{"Reservations":{"NanoCPUs":3000000000,"MemoryBytes":6442450944}}}},
      {"NodeID":"bbbbbbbbbbbbbbbb","Spec":{"Resources":{"Reservations":{"NanoCPUs":500000000,"MemoryBytes":1073741824}}}}]"#;
    assert_eq!(
        biggest_free(nodes, tasks).as_deref(),
        Some("the biggest free node, b (bbbbbbbbbbbb), has 1.5 CPUs and 3072 MiB unreserved")
    );
    assert_eq!(biggest_free("[]", "[]"), None);
}

#[test]
fn a_placement_failure_names_what_was_asked_for() {
    let msg = placement_failure(
        &spec(),
        Duration::from_secs(5),
        "no suitable node (scheduling constraints not satisfied on 2 nodes)",
        Some("the biggest free node, b (bbbbbbbbbbbb), has 1 CPUs and 512 MiB unreserved"),
    );
    assert!(
        msg.contains("on 2 nodes); the biggest free node, b (bbbbbbbbbbbb), has 1 CPUs and 512 MiB unreserved; free resources"),
        "{msg}"
    );
    assert!(
        msg.starts_with("no node of the swarm ran the sandbox within 5s"),
        "{msg}"
    );
    assert!(
        msg.contains("0.5 CPUs and 256m of memory reserved, constraints node.labels.gpu==true"),
        "{msg}"
    );
    assert!(
        msg.contains("scheduling constraints not satisfied"),
        "{msg}"
    );
    assert!(!msg.contains('\n'));
}

#[test]
fn only_a_daemon_that_failed_to_start_a_task_is_worth_a_fresh_service() {
    // Docker 20.10's race on the secrets' tmpfs (moby/moby#48783): the daemon's words, as
    // elastic/elasticsearch#48406 quotes them in full, after the prefix the swarm's executor
    // puts before every failure to start a task's container (seen on the bed, below).
    let secrets = "starting container failed: unable to remount dir as readonly: mount tmpfs:/var/lib/h9-swarm/worker/data/containers/0a8d5b1bd3b3d4b5b8e6f0b7e2ab4f1bb2b6c8e7a6d2c4e6f9e3b5a1c7d9e2f4/mounts/secrets, flags: 0x21, data: uid=0,gid=0: device or resource busy";
    assert!(is_daemon_start_failure(secrets));
    let ended = |err: &str, removed| TaskEnded {
        state: "failed".into(),
        err: err.into(),
        reason: err.into(),
        removed,
    };
    assert!(ended(secrets, true).worth_once_more());
    // Nothing is made over what a failed removal left.
    assert!(!ended(secrets, false).worth_once_more());
    assert_eq!(
        ended(secrets, true).to_string(),
        format!("the sandbox's task ended (failed) before it ran: {secrets}")
    );
    // What the image or the command caused, never: as the two-node bed's worker (Docker
    // 20.10.24) reported them in `docker service ps --no-trunc` and the task's Status.Err.
    for err in [
        "",
        // The command ran and exited.
        "task: non-zero exit (1)",
        // No such executable in the image, or one that is not executable.
        r#"starting container failed: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "/nonexistent": stat /nonexistent: no such file or directory: unknown"#,
        r#"starting container failed: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "/etc/passwd": permission denied: unknown"#,
        // An image the node cannot get (rejected while preparing, before any start).
        "No such image: 127.0.0.1:5000/h9fix-nonexistent:1",
        // A binary of another architecture, as runc words it (not seen on this bed).
        r#"starting container failed: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "/arm": exec format error: unknown"#,
    ] {
        assert!(!is_daemon_start_failure(err), "{err}");
        assert!(!ended(err, true).worth_once_more(), "{err}");
    }
}

#[test]
fn the_newest_task_is_told_by_its_creation_time_whatever_its_fractions_digits() {
    let body = br#"[{"ID":"old","CreatedAt":"2026-12-04T05:51:44.12Z"},
                    {"ID":"new","CreatedAt":"2026-12-04T05:51:44.2Z"},
                    {"ID":"older","CreatedAt":"2026-12-04T05:51:43.999999999Z"}]"#;
    let t = newest_task(body).unwrap().unwrap();
    assert_eq!(t["ID"], "new");
    assert_eq!(newest_task(b"[]").unwrap(), None);
    assert!(newest_task(br#"{"message":"x"}"#).is_err());
    // A whole second with no fraction at all is before any fraction of it.
    let body = br#"[{"ID":"a","CreatedAt":"2026-12-04T05:51:44.000000001Z"},{"ID":"b","CreatedAt":"2026-12-04T05:51:44Z"}]"#;
    assert_eq!(newest_task(body).unwrap().unwrap()["ID"], "a");
}

#[test]
fn a_log_answer_is_read_through_its_frames_or_as_it_is() {
    let mut body = vec![1, 0, 0, 0, 0, 0, 0, 22];
    body.extend_from_slice(b"h9sandbox-agent ready\n");
    body.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 4]);
    body.extend_from_slice(b"err\n");
    assert_eq!(log_text(&body), "h9sandbox-agent ready\nerr\n");
    assert_eq!(
        log_text(b"h9sandbox-agent ready\n"),
        "h9sandbox-agent ready\n"
    );
    // A frame that claims more than was sent ends the text with what there is.
    let cut = [1, 0, 0, 0, 0, 0, 1, 0, b'h', b'i'];
    assert_eq!(log_text(&cut), "hi");
}

#[test]
fn the_apis_tasks_and_nodes_read_as_the_clients_ps_lines_newest_first() {
    let services: serde_json::Value = serde_json::from_str(
        r#"[{"ID":"svc1","Spec":{"Name":"h9sandbox-a","Labels":{"h9sandbox.id":"A"}}}]"#,
    )
    .unwrap();
    let tasks: serde_json::Value = serde_json::from_str(
        r#"[{"ID":"t-old","ServiceID":"svc1","Slot":1,"NodeID":"n1","CreatedAt":"2026-12-04T05:00:00.1Z",
             "DesiredState":"shutdown","Status":{"State":"failed"}},
            {"ID":"t-new","ServiceID":"svc1","Slot":1,"NodeID":"n2","CreatedAt":"2026-12-04T05:00:00.25Z",
             "DesiredState":"running","Status":{"State":"running"}}]"#,
    )
    .unwrap();
    let nodes: serde_json::Value = serde_json::from_str(
        r#"[{"ID":"n1","Description":{"Hostname":"one"}},{"ID":"n2","Description":{"Hostname":"two"}}]"#,
    )
    .unwrap();
    let ps = ps_lines(&services, &tasks, &nodes);
    assert_eq!(
        ps,
        "t-new\th9sandbox-a.1\ttwo\trunning\trunning\nt-old\th9sandbox-a.1\tone\tshutdown\tfailed\n"
    );
    let found = parse_services(&services.to_string(), &ps).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].state, "running");
    assert_eq!(found[0].node.as_deref(), Some("two"));
    assert_eq!(found[0].sandbox_id.as_deref(), Some("A"));
}

#[test]
fn the_apis_service_spec_says_what_the_clients_arguments_say() {
    let options = RunOptions::default();
    let a = service_create_args(&spec(), "h9sandbox-abc-channel", &options).unwrap();
    let b = service_create_body(&spec(), "h9sandbox-abc-channel", "sid", &options).unwrap();
    let c = &b["TaskTemplate"]["ContainerSpec"];
    assert_eq!(b["Name"], "h9sandbox-abc");
    assert_eq!(b["Labels"]["h9sandbox.id"], "abc");
    assert_eq!(c["Labels"], b["Labels"]);
    assert_eq!(b["Mode"]["Replicated"]["Replicas"], 1);
    assert_eq!(b["TaskTemplate"]["RestartPolicy"]["Condition"], "none");
    assert_eq!(c["User"], "0:0");
    assert_eq!(c["Init"], false);
    assert_eq!(c["Healthcheck"]["Test"][0], "NONE");
    assert_eq!(c["CapabilityDrop"][0], "ALL");
    let caps: Vec<&str> = c["CapabilityAdd"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(caps, values(&a, "--cap-add"));
    let r = &b["TaskTemplate"]["Resources"];
    assert_eq!(r["Limits"]["NanoCPUs"], 500_000_000u64);
    assert_eq!(r["Reservations"]["NanoCPUs"], 500_000_000u64);
    assert_eq!(r["Limits"]["MemoryBytes"], 256u64 << 20);
    assert_eq!(r["Reservations"]["MemoryBytes"], 256u64 << 20);
    assert_eq!(r["Limits"]["Pids"], 40);
    let m = &c["Mounts"];
    assert_eq!(m[0]["Target"], "/tmp");
    assert_eq!(m[0]["TmpfsOptions"]["SizeBytes"], 64u64 << 20);
    assert_eq!(m[0]["TmpfsOptions"]["Mode"], 0o1777);
    assert_eq!(m[1]["Target"], "/dev/shm");
    assert_eq!(m[2]["Target"], "/var/tmp");
    assert_eq!(m[3]["Target"], "/w, odd");
    assert_eq!(m.as_array().unwrap().len(), 4);
    assert_eq!(c["Dir"], "/w, odd");
    assert_eq!(c["Env"], serde_json::json!(["A=b", "TMPDIR=/var/tmp"]));
    let s = &c["Secrets"][0];
    assert_eq!(s["SecretID"], "sid");
    assert_eq!(s["SecretName"], "h9sandbox-abc-channel");
    assert_eq!(s["File"]["Name"], "h9sandbox-channel");
    assert_eq!(
        (s["File"]["UID"].clone(), s["File"]["Mode"].clone()),
        ("0".into(), 0o400.into())
    );
    let p = &b["EndpointSpec"]["Ports"][0];
    assert_eq!(
        (p["TargetPort"].clone(), p["PublishMode"].clone()),
        (7336.into(), "host".into())
    );
    assert_eq!(
        b["TaskTemplate"]["Placement"]["Constraints"][0],
        "node.labels.gpu==true"
    );
    // The agent's command line is the client's, word for word.
    assert_eq!(c["Command"][0], crate::contract::BIN);
    let image = a
        .iter()
        .position(|w| w == "reg:5000/h9sandbox-agent:1-2")
        .unwrap();
    let args: Vec<String> = c["Args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(a[image + 1..], args[..]);
    assert_eq!(c["Image"], "reg:5000/h9sandbox-agent:1-2");
    assert!(!b.to_string().contains("never in argv"));
    // What a service cannot express is refused here too.
    let mut none = spec();
    none.limits.network = Network::None;
    assert!(service_create_body(&none, "x", "sid", &options).is_err());
}
