//! Unit tests of the Docker engine's argv builders, parsers and error messages.

mod engine_api;

use super::*;
use crate::engine::{
    is_gvisor, AgentMount, AgentSetup, AppliedLimits, BuildSpec, CommandLine, ContainerSpec,
    ContainerSummary, ExecFailure, ExecSpec, RunAs, Secret, ShippedAgent, LABEL_ID, LABEL_MANAGED,
    LABEL_STATE_DIR,
};
use crate::types::format_cpus;
use crate::types::EngineKind;
use crate::types::{Ids, Limits, Network};
use std::collections::BTreeMap;

fn spec(workdir: &str) -> ContainerSpec {
    ContainerSpec {
        name: "h9sandbox-abc".into(),
        image: "ubuntu:22.04".into(),
        workdir: workdir.into(),
        limits: Limits {
            cpus: 1.5,
            memory: "512m".into(),
            pids_limit: 256,
            tmp_size: "256m".into(),
            network: Network::None,
            allow: Vec::new(),
            caps: crate::types::Caps::Minimal,
        },
        labels: BTreeMap::from([("h9sandbox".into(), "1".into())]),
        user: Ids::ROOT,
        agent: AgentSetup::Mounted(AgentMount {
            root: "/state/mounts/abc".into(),
            binary: "/opt/h9/h9sandbox".into(),
            run_dir: "/state/run/abc".into(),
        }),
        user_name: None,
        scratch_volume: "h9sandbox-abc".into(),
        runtime: None,
        proxy: None,
        env: Vec::new(),
        publish: Vec::new(),
        constraints: Vec::new(),
    }
}

#[test]
fn published_ports_are_asked_for_and_read_back() {
    let spec = ContainerSpec {
        publish: vec![
            crate::types::Publish::parse("8000").unwrap(),
            crate::types::Publish::parse("0.0.0.0:8080:80").unwrap(),
        ],
        ..spec("/w")
    };
    let a = run_args(Flavor::Docker, &spec, &[]);
    let at = a.iter().position(|w| w == "--publish").unwrap();
    assert_eq!(
        a[at..at + 4],
        [
            "--publish",
            "127.0.0.1::8000/tcp",
            "--publish",
            "0.0.0.0:8080:80/tcp"
        ]
    );
    // `docker port` of Docker 20.10 (IPv6 as :::), and of newer clients and Podman.
    let out = "8000/tcp -> 127.0.0.1:49153\n80/tcp -> 0.0.0.0:8080\n80/tcp -> :::8080\n\
               53/udp -> 0.0.0.0:53\n81/tcp -> [::1]:8081\ngarbage\n";
    let got: Vec<(String, u16)> = super::parse::parse_port(out)
        .into_iter()
        .map(|p| (p.address, p.port))
        .collect();
    assert_eq!(
        got,
        [
            ("127.0.0.1:49153".to_string(), 8000),
            ("0.0.0.0:8080".to_string(), 80),
            ("[::]:8080".to_string(), 80),
            ("[::1]:8081".to_string(), 81)
        ]
    );
}

#[test]
fn run_args_are_hardened_and_exact() {
    let got = shell_line(
        "docker",
        &run_args(Flavor::Docker, &spec("/w"), &[])
            .into_iter()
            .map(Into::into)
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        got,
        "docker run -d --name h9sandbox-abc --label h9sandbox=1 --user 0:0 --no-healthcheck --cap-drop all \
         --cap-add DAC_OVERRIDE --cap-add SETUID --cap-add SETGID \
         --security-opt no-new-privileges:true --pids-limit 256 --cpus 1.5 --memory 512m --shm-size 512m \
         --tmpfs /tmp:size=256m,nosuid,noexec,nodev --network none \
         --mount type=volume,source=h9sandbox-abc,destination=/var/tmp,volume-label=h9sandbox=1 \
         --env TMPDIR=/var/tmp \
         --mount type=bind,source=/w,target=/w --workdir /w \
         --mount type=bind,source=/state/mounts/abc,target=/.h9sandbox,readonly \
         --mount type=bind,source=/opt/h9/h9sandbox,target=/.h9sandbox/h9sandbox,readonly \
         --mount type=bind,source=/state/run/abc,target=/.h9sandbox/run \
         --entrypoint /.h9sandbox/h9sandbox --pull never -- ubuntu:22.04 \
         agent init --user 0:0"
    );
}

#[test]
fn build_args_are_exact_and_never_loosen_the_network() {
    let spec = BuildSpec {
        context: "/p".into(),
        dockerfile: "/p/.devcontainer/Dockerfile".into(),
        tag: "h9sandbox-devcontainer-p-0123:latest".into(),
        args: vec![("A".into(), "1 2".into())],
        target: Some("dev".into()),
        cache_from: vec!["base:1".into()],
        no_network: true,
        labels: BTreeMap::from([("h9sandbox.devcontainer".into(), "/p/x.json".into())]),
    };
    assert_eq!(
        build_args(&spec).join(" "),
        "build --force-rm --tag h9sandbox-devcontainer-p-0123:latest --file /p/.devcontainer/Dockerfile \
         --build-arg A=1 2 --target dev --cache-from base:1 --network none \
         --label h9sandbox.devcontainer=/p/x.json -- /p"
    );
    let plain = BuildSpec {
        no_network: false,
        ..spec
    };
    assert!(!build_args(&plain).contains(&"none".to_string()));
}

#[test]
fn the_probe_container_is_labelled_offline_and_never_pulls() {
    assert_eq!(
        probe_create_args("img:1", &[("h9sandbox", "1")]).join(" "),
        "create --label h9sandbox=1 --network none --entrypoint /.h9sandbox-never-started --pull never -- img:1"
    );
}

#[test]
fn extra_environment_goes_before_our_own() {
    let spec = ContainerSpec {
        env: vec![("TMPDIR".into(), "/mine".into()), ("A".into(), "b".into())],
        ..spec("/w")
    };
    let args = run_args(Flavor::Docker, &spec, &[]);
    let at = |w: &str| args.iter().position(|a| a == w).unwrap();
    assert!(at("TMPDIR=/mine") < at("TMPDIR=/var/tmp"), "{args:?}");
    assert!(args.contains(&"A=b".to_string()));
}

#[test]
fn engine_options_go_before_pull() {
    let extra = vec!["--ulimit".to_string(), "nofile=10:10".into()];
    let spec = ContainerSpec {
        runtime: Some("runc".into()),
        ..spec("/w")
    };
    let a = run_args(Flavor::Docker, &spec, &extra);
    let at = a.iter().position(|w| w == "--pull").unwrap();
    assert_eq!(
        a[at - 4..at],
        ["--ulimit", "nofile=10:10", "--runtime", "runc"]
    );
    assert_eq!(
        a[at..],
        [
            "--pull",
            "never",
            "--",
            "ubuntu:22.04",
            "agent",
            "init",
            "--user",
            "0:0"
        ]
    );
}

#[test]
fn gvisor_gets_a_host_ceiling_and_its_own_process_limit() {
    assert!(is_gvisor(Some("runsc")) && is_gvisor(Some("runsc-kvm")));
    assert!(!is_gvisor(Some("runc")) && !is_gvisor(Some("myrunsc")) && !is_gvisor(None));
    let spec = ContainerSpec {
        runtime: Some("runsc".into()),
        ..spec("/w")
    };
    let a = run_args(Flavor::Docker, &spec, &[]);
    let at = a.iter().position(|w| w == "--pids-limit").unwrap();
    assert_eq!(a[at + 1], (64 + 16 * 256).to_string());
    // What inspect reports as applied under gVisor is the nproc rlimit, not the ceiling.
    let json = r#"{"State":{"Status":"running","Running":true},"HostConfig":{"Memory":1,"NanoCpus":1,"PidsLimit":4160,"Runtime":"runsc","Ulimits":[{"Name":"nofile","Hard":9,"Soft":9},{"Name":"nproc","Hard":256,"Soft":256}]}}"#;
    assert_eq!(
        parse_inspect(json).unwrap().applied.unwrap().pids_limit,
        256
    );
    let json = json
        .replace("Soft\":256", "Soft\":0")
        .replace(r#""Soft":256"#, r#""Soft":0"#);
    assert_eq!(parse_inspect(&json).unwrap().applied.unwrap().pids_limit, 0);
    let runc = r#"{"State":{"Status":"running","Running":true},"HostConfig":{"PidsLimit":40,"Runtime":"runc","Ulimits":null}}"#;
    assert_eq!(parse_inspect(runc).unwrap().applied.unwrap().pids_limit, 40);
    assert!(is_unknown_runtime(
        "docker: Error response from daemon: Unknown runtime specified runsx."
    ));
    assert!(is_unknown_runtime(
        "Error: default OCI runtime \"runsx\" not found: invalid argument"
    ));
    assert!(unknown_runtime("docker", "runsc")
        .to_string()
        .contains("scripts/setup-gvisor.sh"));
}

#[test]
fn ulimits_docker_passes_only_what_is_configured() {
    let host = HostLimits {
        nofile_hard: Some(20000),
        nr_open: Some(1048576),
        nproc_hard: Some(96365),
        pid_max: Some(32768),
    };
    assert_eq!(
        ulimit_args(Flavor::Docker, 0, 0, &host).unwrap(),
        Vec::<String>::new()
    );
    // The daemon grants them, not this client: no check against our limits.
    assert_eq!(
        ulimit_args(Flavor::Docker, 50000, 100, &host).unwrap(),
        [
            "--ulimit",
            "nofile=50000:50000",
            "--ulimit",
            "nproc=100:100"
        ]
    );
}

#[test]
fn ulimits_podman_stay_within_the_hosts_hard_limits() {
    let host = HostLimits {
        nofile_hard: Some(20000),
        nr_open: Some(1048576),
        nproc_hard: Some(96365),
        pid_max: Some(32768),
    };
    // Automatic: the hard nofile limit, and nproc capped at pid_max (Podman lowers its own).
    assert_eq!(
        ulimit_args(Flavor::Podman, 0, 0, &host).unwrap(),
        [
            "--ulimit",
            "nofile=20000:20000",
            "--ulimit",
            "nproc=32768:32768"
        ]
    );
    assert_eq!(
        ulimit_args(Flavor::Podman, 1024, 512, &host).unwrap(),
        ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=512:512"]
    );
    let err = ulimit_args(Flavor::Podman, 20001, 0, &host).unwrap_err();
    assert!(
        err.starts_with("ulimit_nofile = 20001 exceeds this host's limit of 20000"),
        "{err}"
    );
    let err = ulimit_args(Flavor::Podman, 0, 40000, &host).unwrap_err();
    assert!(
        err.contains("ulimit_nproc = 40000") && err.contains("32768"),
        "{err}"
    );
    // An unlimited hard limit is bounded by the kernel's ceiling; none known: Podman decides.
    let open = HostLimits {
        nofile_hard: None,
        nr_open: Some(1048576),
        nproc_hard: None,
        pid_max: None,
    };
    assert_eq!(
        ulimit_args(Flavor::Podman, 0, 0, &open).unwrap(),
        ["--ulimit", "nofile=1048576:1048576"]
    );
}

#[test]
fn runtime_is_passed_only_when_configured() {
    assert_eq!(runtime_args(None), Vec::<String>::new());
    assert_eq!(runtime_args(Some("runc")), ["--runtime", "runc"]);
}

#[test]
fn run_failures_get_a_hint_when_the_cause_is_known() {
    assert!(run_failure_hint("Error: runc: ... error setting rlimit type 7: operation not permitted: OCI permission denied").contains("ulimit_nofile"));
    assert_eq!(run_failure_hint("Error: something else"), "");
}

#[test]
fn inspect_reads_state_and_applied_limits_of_both_engines() {
    assert_eq!(
        inspect_args("c1"),
        [
            "inspect",
            "--type",
            "container",
            "--format",
            r#"{"State":{{json .State}},"HostConfig":{{json .HostConfig}},"Ports":{{json .NetworkSettings.Ports}}}"#,
            "c1"
        ]
    );
    // Docker 20.10.
    let s = parse_inspect(r#"{"State":{"Status":"running","Running":true,"Paused":false,"OOMKilled":false,"Dead":false,"Pid":4,"ExitCode":0,"Error":""},"HostConfig":{"Memory":268435456,"NanoCpus":500000000,"CpuQuota":0,"CpuPeriod":0,"PidsLimit":40}}"#).unwrap();
    assert!(s.running);
    assert_eq!(
        s.applied,
        Some(AppliedLimits {
            memory_bytes: 268435456,
            nano_cpus: 500000000,
            pids_limit: 40
        })
    );
    // Podman 4.3 (cgroup v1), which also has OciVersion, ConmonPid, ...; and limits given as
    // quota/period; and none at all (null, -1).
    let s = parse_inspect(r#"{"State":{"OciVersion":"1.0.2-dev","Status":"exited","Running":false,"OOMKilled":true,"ExitCode":137,"Error":"","ConmonPid":7},"HostConfig":{"Memory":0,"NanoCpus":0,"CpuQuota":150000,"CpuPeriod":100000,"PidsLimit":-1}}"#).unwrap();
    assert_eq!(
        (s.status.as_str(), s.exit_code, s.oom_killed),
        ("exited", 137, true)
    );
    assert_eq!(
        s.applied,
        Some(AppliedLimits {
            memory_bytes: 0,
            nano_cpus: 1_500_000_000,
            pids_limit: 0
        })
    );
    let s = parse_inspect(
        r#"{"State":{"Status":"created","Running":false},"HostConfig":{"PidsLimit":null}}"#,
    )
    .unwrap();
    assert_eq!(s.applied, Some(AppliedLimits::default()));
}

#[test]
fn ps_differs_between_docker_and_podman() {
    let labels = [("h9sandbox", "1"), ("h9sandbox.state_dir", "/s")];
    let d = ps_args(Flavor::Docker, &labels);
    assert_eq!(
        d[..7],
        [
            "ps",
            "-a",
            "--no-trunc",
            "--filter",
            "label=h9sandbox=1",
            "--filter",
            "label=h9sandbox.state_dir=/s"
        ]
    );
    assert_eq!(
        d[7..],
        [
            "--format",
            "{{.ID}}\t{{.Names}}\t{{.State}}\t{{.Status}}\t{{.Label \"h9sandbox.id\"}}\t{{.Label \"h9sandbox.state_dir\"}}"
        ]
    );
    let p = ps_args(Flavor::Podman, &labels);
    assert_eq!(p[..7], d[..7]);
    assert_eq!(p[7..], ["--format", "json"]);
    let listed = parse_ps(
        Flavor::Podman,
        r#"[{"Id":"abc","Names":["h9sandbox-1"],"State":"exited","Status":"Exited (137) 2 seconds ago","Labels":{"h9sandbox":"1","h9sandbox.id":"uuid-1"}},
            {"Id":"def","Names":["other"],"State":"running","Status":"Up 1 second ago","Labels":null}]"#,
    )
    .unwrap();
    assert_eq!(
        listed,
        vec![
            ContainerSummary {
                id: "abc".into(),
                name: "h9sandbox-1".into(),
                state: "exited".into(),
                status: "Exited (137) 2 seconds ago".into(),
                sandbox_id: Some("uuid-1".into()),
                state_dir: None,
                node: None,
            },
            ContainerSummary {
                id: "def".into(),
                name: "other".into(),
                state: "running".into(),
                status: "Up 1 second ago".into(),
                sandbox_id: None,
                state_dir: None,
                node: None,
            },
        ]
    );
    assert!(parse_ps(Flavor::Podman, "").unwrap().is_empty());
    assert!(parse_ps(Flavor::Podman, "[]").unwrap().is_empty());
}

#[test]
fn the_kind_follows_the_flavor() {
    assert_eq!(
        Docker::with_flavor(Flavor::Docker, "docker").kind(),
        EngineKind::Docker
    );
    assert_eq!(
        Docker::with_flavor(Flavor::Podman, "/opt/p").kind(),
        EngineKind::Podman
    );
}

#[test]
fn run_args_run_the_agent_as_root_for_the_user() {
    let mut spec = ContainerSpec {
        user: Ids {
            uid: 1000,
            gid: 100,
        },
        ..spec("/w")
    };
    spec.user_name = Some("alice".into());
    let a = run_args(Flavor::Docker, &spec, &[]);
    let at = a.iter().position(|x| x == "--user").unwrap();
    assert_eq!(a[at + 1], "0:0");
    let image = a.iter().position(|x| x == "ubuntu:22.04").unwrap();
    assert_eq!(
        a[image + 1..],
        [
            "agent",
            "init",
            "--user",
            "1000:100",
            "--user-name",
            "alice"
        ]
    );
}

#[test]
fn bind_mount_quotes_commas_and_quotes_only() {
    assert_eq!(
        bind_mount_arg("/a b:c", "/a b:c", false),
        "type=bind,source=/a b:c,target=/a b:c"
    );
    assert_eq!(
        bind_mount_arg("/a,b", "/a,b", false),
        r#"type=bind,"source=/a,b","target=/a,b""#
    );
    assert_eq!(
        bind_mount_arg(r#"/a"b"#, "/x", true),
        r#"type=bind,"source=/a""b",target=/x,readonly"#
    );
}

#[test]
fn exec_args_mark_the_process_tree() {
    let spec = ExecSpec {
        command: CommandLine::Shell("echo hi".into()),
        cwd: "/w/sub".into(),
        env: vec![("A".into(), "1".into())],
        interactive: false,
        marker: "m1".into(),
        user: Some(RunAs::Ids {
            uid: 1000,
            gid: 1000,
        }),
        wrapped: true,
        wrapper_enters: true,
        backstop: None,
    };
    let a = exec_args("c1", &spec);
    assert_eq!(
        a,
        [
            "exec",
            "-e",
            "H9SANDBOX_EXEC_ID=m1",
            "-e",
            "A=1",
            "--user",
            "1000:1000",
            "c1",
            "/.h9sandbox/h9sandbox",
            "agent",
            "exec",
            "--cwd",
            "/w/sub",
            "--shell",
            "--",
            "echo hi"
        ]
    );
    let argv = ExecSpec {
        command: CommandLine::Argv(vec!["printf".into(), "%s\n".into(), "a b".into()]),
        ..spec.clone()
    };
    assert_eq!(
        exec_args("c1", &argv)[8..],
        [
            "/.h9sandbox/h9sandbox",
            "agent",
            "exec",
            "--cwd",
            "/w/sub",
            "--",
            "printf",
            "%s\n",
            "a b"
        ]
    );
    // An older sandbox's wrapper knows neither --cwd nor --user: the engine does both.
    let older = ExecSpec {
        user: Some(RunAs::parse("nobody").unwrap()),
        wrapper_enters: false,
        ..spec.clone()
    };
    let a = exec_args("c1", &older);
    assert_eq!(a[5..9], ["-w", "/w/sub", "--user", "nobody"]);
    assert!(!a.contains(&"--cwd".to_string()), "{a:?}");
    // A name goes to a current wrapper, started as root, which looks it up as the agent does.
    let named = ExecSpec {
        user: Some(RunAs::parse("nobody:50").unwrap()),
        ..spec.clone()
    };
    let a = exec_args("c1", &named);
    assert_eq!(a[5..7], ["--user", "0:0"]);
    assert_eq!(a[11..13], ["--user", "nobody:50"]);
    // Sandboxes made before the agent: the shell wrapper, the container's user, `-w`.
    let legacy = ExecSpec {
        user: None,
        wrapped: false,
        wrapper_enters: false,
        ..spec.clone()
    };
    let a = exec_args("c1", &legacy);
    assert_eq!(a[7..10], ["c1", "sh", "-c"]);
    assert_eq!(a[11..], ["h9sandbox", "echo hi"]);
    let legacy_argv = ExecSpec {
        user: None,
        wrapped: false,
        wrapper_enters: false,
        ..argv
    };
    assert_eq!(
        exec_args("c1", &legacy_argv)[7..],
        ["c1", "printf", "%s\n", "a b"]
    );
    let a = exec_args(
        "c1",
        &ExecSpec {
            interactive: true,
            ..spec
        },
    );
    assert_eq!(a[..2], ["exec", "-i"]);
}

#[test]
fn cpus_are_printed_plainly() {
    assert_eq!(format_cpus(1.0), "1");
    assert_eq!(format_cpus(0.5), "0.5");
    assert_eq!(format_cpus(0.25), "0.25");
}

#[test]
fn ps_lines_parse() {
    let s = parse_ps_line("abc\th9sandbox-1\texited\tExited (137) 2 seconds ago\tuuid-1").unwrap();
    assert_eq!(
        (s.state.as_str(), s.sandbox_id.as_deref()),
        ("exited", Some("uuid-1"))
    );
    let s = parse_ps_line("abc\tn\trunning\tUp\t").unwrap();
    assert_eq!(s.sandbox_id, None);
}

#[test]
fn exec_failures_are_told_from_command_output() {
    let d = Flavor::Docker;
    let gone = exec_failure(
        d,
        "c",
        b"Error response from daemon: No such container: c\n",
        1,
    );
    assert!(matches!(gone, Some(ExecFailure::ContainerGone(_))));
    let stopped = exec_failure(
        d,
        "c",
        b"Error response from daemon: Container abc is not running\n",
        1,
    );
    assert!(matches!(stopped, Some(ExecFailure::ContainerStopped(_))));
    let down = exec_failure(
        d,
        "c",
        b"Cannot connect to the Docker daemon at unix:///x.sock. Is the docker daemon running?\n",
        1,
    );
    assert!(matches!(down, Some(ExecFailure::EngineUnavailable(_))));
    let user = exec_failure(
        d,
        "c",
        b"unable to find user nosuch: no matching entries in passwd file\n",
        126,
    );
    assert!(matches!(user, Some(ExecFailure::Other(m)) if m.contains("--user")));
    let cwd = exec_failure(d, "c", b"OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd (\"/x\") set in config.json failed: no such file or directory: unknown\n", 126);
    assert!(matches!(cwd, Some(ExecFailure::Other(m)) if m.contains("--cwd")));
    // A command that fails with its own message is the command's business.
    assert_eq!(exec_failure(d, "c", b"grep: x: No such file\n", 1), None);
    // Podman's messages and statuses.
    let p = Flavor::Podman;
    let gone = exec_failure(
        p,
        "c",
        b"Error: no container with name or ID \"c\" found: no such container\n",
        125,
    );
    assert!(matches!(gone, Some(ExecFailure::ContainerGone(r)) if r.contains("no longer exists")));
    let stopped = exec_failure(
        p,
        "c",
        b"Error: can only create exec sessions on running containers: container state improper\n",
        255,
    );
    assert!(matches!(stopped, Some(ExecFailure::ContainerStopped(r)) if r.contains("not running")));
    // Status 1 is a command's own with Podman, even when it prints "Error".
    assert_eq!(exec_failure(p, "c", b"Error: my script failed\n", 1), None);
    assert_eq!(
        exec_failure(d, "c", b"Error response from daemon: No such container", 0),
        None
    );
}

#[test]
fn concurrent_removal_is_recognised() {
    assert!(is_removal_in_progress(
        "Error response from daemon: removal of container 6269d49ded71 is already in progress"
    ));
    assert!(!is_removal_in_progress(
        "Error response from daemon: No such container: x"
    ));
}

#[test]
fn listings_are_checked_against_the_labels_asked_for() {
    let c = |dir: Option<&str>| ContainerSummary {
        id: "c".into(),
        name: "n".into(),
        state: "running".into(),
        status: "Up".into(),
        sandbox_id: Some("s".into()),
        state_dir: dir.map(str::to_string),
        node: None,
    };
    let want = [(LABEL_MANAGED, "1"), (LABEL_STATE_DIR, "/a")];
    assert!(summary_has_labels(&c(Some("/a")), &want));
    assert!(!summary_has_labels(&c(Some("/b")), &want));
    assert!(!summary_has_labels(&c(None), &want));
    assert!(summary_has_labels(&c(Some("/b")), &[(LABEL_ID, "")]));
    assert!(!summary_has_labels(&c(Some("/b")), &[(LABEL_ID, "t")]));
    let v = parse_volume_labels(
        "va\t{\"h9sandbox\":\"1\",\"h9sandbox.state_dir\":\"/a\"}\nvb\tnull\nbad line\n",
    );
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].0, "va");
    assert_eq!(v[0].1.get(LABEL_STATE_DIR).map(String::as_str), Some("/a"));
    assert!(v[1].1.is_empty());
}

#[test]
fn sidecars_are_hardened_labelled_and_listed_by_their_label() {
    use crate::engine::{MountSource, SidecarMount, SidecarSpec, SidecarSummary, LABEL_PROXY_OF};
    let spec = SidecarSpec {
        name: "h9sandbox-proxy-abc".into(),
        labels: BTreeMap::from([
            (LABEL_PROXY_OF.to_string(), "id-1".to_string()),
            (LABEL_STATE_DIR.to_string(), "/s".to_string()),
        ]),
        network: "bridge".into(),
        user: Ids {
            uid: 1000,
            gid: 1000,
        },
        caps: Vec::new(),
        memory: "64m".into(),
        pids_limit: 64,
        cpus: 0.5,
        mounts: vec![
            SidecarMount {
                source: MountSource::Host("/opt/h9".into()),
                target: "/.h9sandbox/h9sandbox".into(),
                readonly: true,
            },
            SidecarMount {
                source: MountSource::Host("/s/proxy/id-1".into()),
                target: "/.h9sandbox/proxy".into(),
                readonly: false,
            },
        ],
        entrypoint: "/.h9sandbox/h9sandbox".into(),
        image: "img".into(),
        args: vec!["agent".into(), "proxy".into()],
    };
    let got = shell_line(
        "docker",
        &sidecar_run_args(&spec, true)
            .into_iter()
            .map(Into::into)
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        got,
        "docker run -d --name h9sandbox-proxy-abc --label h9sandbox.proxy_of=id-1 \
         --label h9sandbox.state_dir=/s --network bridge --read-only --cap-drop all \
         --security-opt no-new-privileges:true --user 1000:1000 --memory 64m --pids-limit 64 \
         --cpus 0.5 --no-healthcheck --mount type=bind,source=/opt/h9,target=/.h9sandbox/h9sandbox,readonly \
         --mount type=bind,source=/s/proxy/id-1,target=/.h9sandbox/proxy \
         --entrypoint /.h9sandbox/h9sandbox --pull never -- img agent proxy"
    );
    let ps = sidecar_ps_args(LABEL_PROXY_OF, "/s");
    assert_eq!(
        ps[3..7],
        [
            "--filter",
            "label=h9sandbox.proxy_of",
            "--filter",
            "label=h9sandbox.state_dir=/s"
        ]
    );
    assert_eq!(
        parse_sidecars("c1\tid-1\t/s\nc2\t<no value>\t/s\nbad\n"),
        vec![
            SidecarSummary {
                id: "c1".into(),
                of: "id-1".into(),
                state_dir: "/s".into()
            },
            SidecarSummary {
                id: "c2".into(),
                of: String::new(),
                state_dir: "/s".into()
            },
        ]
    );
}

#[test]
fn a_shipped_agent_mounts_nothing_of_this_machine_and_gets_its_secret_on_stdin() {
    let mut spec = spec("/w");
    spec.agent = AgentSetup::Shipped(ShippedAgent {
        image: "h9sandbox-agent:aaa-bbb".into(),
        secret: Secret(b"never in argv".to_vec()),
        listen: "0.0.0.0:7336".into(),
        publish: Some("127.0.0.1".into()),
        ready_timeout: std::time::Duration::from_secs(5),
    });
    let a = attached_run(run_args(Flavor::Docker, &spec, &[]), "/tmp/x/cid");
    let line = a.join(" ");
    assert!(
        line.starts_with("run -i --sig-proxy=false -a stdin -a stdout --cidfile /tmp/x/cid --name h9sandbox-abc "),
        "{line}"
    );
    assert!(!line.contains("type=bind"), "no host mount: {line}");
    assert!(!line.contains("never in argv"), "{line}");
    assert!(
        line.contains(
            " --workdir /w --publish 127.0.0.1::7336 --entrypoint /.h9sandbox/h9sandbox "
        ),
        "{line}"
    );
    assert!(
        line.ends_with("-- h9sandbox-agent:aaa-bbb agent init --user 0:0 --secret-stdin --channel 0.0.0.0:7336"),
        "{line}"
    );
    assert_eq!(format!("{:?}", Secret(vec![1, 2, 3])), "Secret(3 bytes)");
    assert_eq!(
        agent_image_tag("sha256:C4D23E2EA027ffff", "02a5a52516ac07c8"),
        "h9sandbox-agent:c4d23e2ea027-02a5a52516ac"
    );
    // Only a name of that shape, from the cache, is handed to the client.
    assert!(is_agent_image_tag(
        "h9sandbox-agent:c4d23e2ea027-02a5a52516ac"
    ));
    for bad in [
        "--format=x",
        "h9sandbox-agent:c4d23e2ea027-02a5a52516a",
        "h9sandbox-agent:C4D23E2EA027-02a5a52516ac",
        "h9sandbox-agent:c4d23e2ea027-02a5a52516ac ",
        "other:c4d23e2ea027-02a5a52516ac",
        "h9sandbox-agent:c4d23e2ea027",
    ] {
        assert!(!is_agent_image_tag(bad), "{bad}");
    }
    // The published channel is read back from inspect.
    let s = parse_inspect(r#"{"State":{"Status":"running","Running":true},"HostConfig":{},"Ports":{"7336/tcp":[{"HostIp":"127.0.0.1","HostPort":"49153"}],"80/udp":null}}"#).unwrap();
    assert_eq!(s.ports, vec![(7336, "127.0.0.1".to_string(), 49153)]);
}

#[test]
fn every_client_command_gets_exactly_the_sandboxs_daemon_settings() {
    use crate::types::Daemon;
    let d = Docker::with_flavor(Flavor::Docker, "docker").daemon(Daemon {
        host: Some("tcp://127.0.0.2:23760".into()),
        tls_verify: Some("1".into()),
        ..Daemon::default()
    });
    let cmd = d.command(["ps"]);
    let envs: Vec<(String, Option<String>)> = cmd
        .as_std()
        .get_envs()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.map(|v| v.to_string_lossy().into_owned()),
            )
        })
        .collect();
    let get = |k: &str| envs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(
        get("DOCKER_HOST"),
        Some(Some("tcp://127.0.0.2:23760".into()))
    );
    assert_eq!(get("DOCKER_TLS_VERIFY"), Some(Some("1".into())));
    // Unset ones are removed, so the caller's own environment cannot redirect the client.
    assert_eq!(get("DOCKER_CONTEXT"), Some(None));
    assert_eq!(get("DOCKER_CERT_PATH"), Some(None));
    // Podman's client reads none of them: nothing is set.
    let p = Docker::with_flavor(Flavor::Podman, "podman").command(["ps"]);
    assert_eq!(p.as_std().get_envs().count(), 0);
}

#[test]
fn settings_that_fail_the_checks_never_reach_the_client() {
    use crate::types::Daemon;
    let d = Docker::with_flavor(Flavor::Docker, "docker").daemon(Daemon {
        host: Some("ssh://-oProxyCommand=touch /tmp/x".into()),
        ..Daemon::default()
    });
    let cmd = d.command(["ps"]);
    let host: Vec<String> = cmd
        .as_std()
        .get_envs()
        .filter(|(k, _)| *k == "DOCKER_HOST")
        .filter_map(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
        .collect();
    assert_eq!(
        host,
        ["unix:///nonexistent/h9sandbox-refused-invalid-daemon-settings"]
    );
}

#[test]
fn a_tmpfs_volume_mount_carries_its_owner_mode_size_and_labels_in_one_csv_record() {
    use crate::engine::{MountSource, TmpfsVolume};
    let v = TmpfsVolume {
        name: "h9sandbox-proxy-abc-sock".into(),
        owner: Ids {
            uid: 65534,
            gid: 65534,
        },
        mode: 0o711,
        size: 65536,
        labels: BTreeMap::from([("h9sandbox.id".to_string(), "id-1".to_string())]),
    };
    // The `o=` option holds commas: quoted as one CSV field, as `--mount` parses it.
    assert_eq!(
        super::args::mount_arg(&MountSource::Volume(v.clone()), "/.h9sandbox/proxy", true),
        "type=volume,source=h9sandbox-proxy-abc-sock,target=/.h9sandbox/proxy,\
         volume-driver=local,volume-opt=type=tmpfs,volume-opt=device=tmpfs,\
         \"volume-opt=o=uid=65534,gid=65534,mode=711,size=65536\",\
         volume-label=h9sandbox.id=id-1,readonly"
    );
    assert_eq!(
        super::args::mount_arg(&MountSource::Host("/s/p".into()), "/p", false),
        "type=bind,source=/s/p,target=/p"
    );
}
