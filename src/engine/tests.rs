//! Unit tests of the engine layer's shared parts (the daemon's settings, the delegation).

use std::sync::Arc;

use super::*;
use crate::report::Reporter;

#[test]
fn the_daemon_comes_from_the_clients_settings_and_is_checked() {
    use crate::types::Daemon;
    let mut cfg = crate::config::Config::default();
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    assert_eq!(super::current_daemon(&cfg, env(&[])), Daemon::default());
    cfg.docker_context = Some("builder".into());
    let d = super::current_daemon(&cfg, env(&[("DOCKER_HOST", "")]));
    assert_eq!(
        d.context.as_deref(),
        Some("builder"),
        "the key when the variable is unset"
    );
    assert_eq!(d.describe(), "context builder");
    let d = super::current_daemon(
        &cfg,
        env(&[
            ("DOCKER_HOST", "tcp://10.0.0.5:2376"),
            ("DOCKER_CONTEXT", "other"),
            ("DOCKER_TLS_VERIFY", "1"),
            ("DOCKER_CERT_PATH", "/certs"),
        ]),
    );
    assert_eq!(
        d.context.as_deref(),
        Some("other"),
        "the variable wins over the key"
    );
    assert_eq!(
        d.describe(),
        "tcp://10.0.0.5:2376",
        "DOCKER_HOST wins over a context"
    );
    assert_eq!(d.validate(), Ok(()));
    for bad in [
        "ssh://-oProxyCommand=x",
        "http://x",
        "tcp://a\nb",
        "ssh://u@-x",
    ] {
        let d = Daemon {
            host: Some(bad.into()),
            ..Daemon::default()
        };
        assert!(d.validate().is_err(), "{bad} passed");
    }
    assert!(Daemon {
        host: Some("ssh://me@builder:22".into()),
        ..Daemon::default()
    }
    .validate()
    .is_ok());
}

#[test]
fn a_daemon_elsewhere_is_told_from_the_clients_settings() {
    assert_eq!(daemon_host(None, None), None);
    assert_eq!(daemon_host(Some(""), Some("default")), None);
    assert_eq!(daemon_host(Some("unix:///run/docker.sock"), None), None);
    assert_eq!(
        daemon_host(Some("tcp://127.0.0.2:2376"), None).as_deref(),
        Some("127.0.0.2")
    );
    assert_eq!(
        daemon_host(Some("ssh://me@builder:2222"), None).as_deref(),
        Some("builder")
    );
    assert_eq!(
        daemon_host(Some("tcp://[fd00::1]:2376"), None).as_deref(),
        Some("fd00::1")
    );
    assert_eq!(daemon_host(None, Some("ci")).as_deref(), Some("ci"));
}

#[test]
fn the_marks_are_not_taken_for_mistyped_configuration() {
    for var in [EXEC_MARKER_VAR, LOCAL_SANDBOX_VAR, LOCAL_STATE_DIR_VAR] {
        assert!(crate::config::OTHER_ENV.contains(&var), "{var}");
    }
}

use crate::types::Network;

#[tokio::test]
async fn output_past_the_cap_stops_the_process() {
    let sh = |script: &str| {
        let mut c = tokio::process::Command::new("sh");
        c.arg("-c").arg(script);
        c
    };
    let out = bounded_output(&mut sh("echo out; echo err >&2; exit 3"), 64)
        .await
        .unwrap();
    assert_eq!(
        (
            out.status.and_then(|s| s.code()),
            &out.stdout[..],
            &out.stderr[..],
            out.overflow
        ),
        (Some(3), &b"out\n"[..], &b"err\n"[..], None)
    );
    // Endless output on either stream: at most the cap is held, and the process is killed
    // (`yes` would otherwise run forever).
    let out = bounded_output(&mut sh("yes"), 1000).await.unwrap();
    assert_eq!(
        (out.overflow, out.stdout.len(), out.status),
        (Some("stdout"), 1000, None)
    );
    let out = bounded_output(&mut sh("echo fine; yes >&2"), 1000)
        .await
        .unwrap();
    assert_eq!((out.overflow, out.stderr.len()), (Some("stderr"), 1000));
}

fn limits() -> Limits {
    Limits {
        cpus: 0.5,
        memory: "256m".into(),
        pids_limit: 40,
        tmp_size: "64m".into(),
        network: Network::None,
        allow: Vec::new(),
        caps: crate::types::Caps::Minimal,
    }
}

#[test]
fn applied_limits_must_match_what_was_asked() {
    let ok = AppliedLimits {
        memory_bytes: 256 << 20,
        nano_cpus: 500_000_000,
        pids_limit: 40,
    };
    assert_eq!(ok.check(&limits()), Ok(()));
    // Rounding of the CPU quota by the engine is tolerated.
    let rounded = AppliedLimits {
        nano_cpus: 499_999_000,
        ..ok
    };
    assert_eq!(rounded.check(&limits()), Ok(()));
    // An engine that dropped limits (cgroup v1 rootless Podman) is refused, naming each.
    let none = AppliedLimits::default();
    let err = none.check(&limits()).unwrap_err();
    assert!(
        err.starts_with("the engine did not apply memory 256m (engine reports none), cpus 0.5 (engine reports none), pids_limit 40 (engine reports none);"),
        "{err}"
    );
    let err = AppliedLimits {
        pids_limit: 2048,
        ..ok
    }
    .check(&limits())
    .unwrap_err();
    assert!(
        err.starts_with("the engine did not apply pids_limit 40 (engine reports 2048);"),
        "{err}"
    );
}

#[test]
fn records_pick_their_engine_and_binary() {
    let mut cfg = Config {
        engine: EngineKind::Podman,
        engine_bin: Some("/opt/podman".into()),
        ..Config::default()
    };
    let dir = Path::new("/state");
    let silent: Arc<dyn Reporter> = Arc::new(crate::report::Silent);
    let e = AnyEngine::for_kind(EngineKind::Podman, &cfg, dir, &silent);
    assert!(matches!(&e, AnyEngine::Docker(d) if d.bin() == "/opt/podman"));
    // Another engine than the configured one runs by its own name.
    let e = AnyEngine::for_kind(EngineKind::Docker, &cfg, dir, &silent);
    assert!(matches!(&e, AnyEngine::Docker(d) if d.bin() == "docker"));
    assert!(matches!(
        AnyEngine::for_kind(EngineKind::Local, &cfg, dir, &silent),
        AnyEngine::Local(_)
    ));
    cfg.engine_bin = None;
    let e = AnyEngine::for_kind(EngineKind::Podman, &cfg, dir, &silent);
    assert!(matches!(&e, AnyEngine::Docker(d) if d.bin() == "podman"));
    assert_eq!(e.kind(), EngineKind::Podman);
}
