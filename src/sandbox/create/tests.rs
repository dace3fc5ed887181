//! Unit tests of `up`: the plan, names, labels, the record's differences.

use super::plan::*;
use super::*;
use crate::engine::LABEL_MANAGED;
use crate::types::EngineKind;

#[test]
fn names_follow_the_engine_rule() {
    assert!(validate_name("ci-job_4.2").is_ok());
    for bad in [
        "",
        "a",
        "-x",
        "a b",
        "a/b",
        "é1",
        "cafe",
        "05f7096d-da1b",
        "deadbeef",
    ] {
        assert!(validate_name(bad).is_err(), "{bad}");
    }
}

/// A context on the local engine (no container engine needed), with its own state
/// directory, and a work dir; both in the returned temporary directory.
fn local_ctx() -> (tempfile::TempDir, Ctx, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let state = dir.path().join("state");
    std::fs::write(
        &config,
        format!(
            "engine = \"local\"\nreap_on_up = false\nstate_dir = {:?}\n",
            state.to_str().unwrap()
        ),
    )
    .unwrap();
    let layers = crate::config::Layers::load_with_env(Some(&config), |_| None).unwrap();
    let ctx = Ctx::from_layers(&layers, &[], std::sync::Arc::new(crate::report::Silent)).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let work = work.canonicalize().unwrap();
    (dir, ctx, work)
}

#[tokio::test]
async fn the_steps_plan_record_and_fail_a_pending_sandbox() {
    let (_dir, ctx, work) = local_ctx();
    let req = UpRequest {
        workdir: Some(work.clone()),
        name: Some("job-1".into()),
        labels: vec!["k=v".into()],
        ..Default::default()
    };
    let plan = resolve_spec(&ctx, &req).await.unwrap();
    let r = &plan.record;
    assert_eq!(
        (r.state, r.engine, &r.name),
        (Lifecycle::Pending, EngineKind::Local, &"job-1".to_string())
    );
    assert_eq!((&r.workdir, &plan.spec.workdir), (&work, &work));
    assert_eq!(plan.spec.labels[LABEL_ID], r.id.to_string());
    assert_eq!(plan.spec.labels[LABEL_MANAGED], "1");
    assert_eq!(plan.spec.labels["k"], "v");
    assert_eq!(r.limits, configured_limits(&ctx.cfg));
    record_pending(&ctx, &plan).unwrap();
    // The name is taken now: a second sandbox of that name is refused before it is recorded.
    let again = resolve_spec(&ctx, &req).await.unwrap();
    let e = record_pending(&ctx, &again).unwrap_err();
    assert!(matches!(e.downcast_ref(), Some(Error::NameInUse(_))), "{e}");
    // A failed start leaves nothing: its record is dropped, and the name free again.
    let e = fail_pending(&ctx, &plan, &plan.engine, anyhow::anyhow!("boom")).await;
    assert_eq!(e.to_string(), "boom");
    assert!(ctx.store.load().unwrap().sandboxes.is_empty());
    record_pending(&ctx, &again).unwrap();
}

#[tokio::test]
async fn a_local_sandbox_is_created_running() {
    let (_dir, ctx, work) = local_ctx();
    let req = UpRequest {
        workdir: Some(work.clone()),
        ttl: Some("1h".into()),
        ..Default::default()
    };
    let rec = create(&ctx, &req).await.unwrap();
    assert_eq!(
        (rec.state, rec.isolation),
        (Lifecycle::Running, Isolation::None)
    );
    assert_eq!(
        (rec.container_id.as_deref(), rec.ttl_secs),
        (None, Some(3600))
    );
    assert!(rec.name.starts_with("h9sandbox-") && rec.expires_at.is_some());
    assert_eq!(ctx.store.load().unwrap().sandboxes, vec![rec]);
    // A work dir that does not exist is refused before anything is recorded.
    let bad = UpRequest {
        workdir: Some(work.join("missing")),
        ..Default::default()
    };
    assert!(create(&ctx, &bad).await.is_err());
    assert_eq!(ctx.store.load().unwrap().sandboxes.len(), 1);
}

#[test]
fn labels_parse_and_reserve_our_namespace() {
    let l = parse_labels(&["a=1".into(), "b=x=y".into(), "c=".into()]).unwrap();
    assert_eq!(l["b"], "x=y");
    assert_eq!(l["c"], "");
    for bad in [
        "novalue",
        "=v",
        "h9sandbox=2",
        "h9sandbox.id=x",
        "k=v\u{1b}[2J\nx",
        "k\t=v",
        "k=\u{7f}",
    ] {
        assert!(parse_labels(&[bad.into()]).is_err(), "{bad}");
    }
}
