//! Unit tests of the lease rules: reasons, claims, verdicts, parsers.

use super::*;

#[test]
fn reason_codes_print_as_in_json() {
    use Reason::*;
    for r in [
        Orphan,
        ContainerGone,
        OwnerDead,
        Expired,
        CreatorDead,
        StopperDead,
        ParentGone,
    ] {
        assert_eq!(serde_json::to_value(r).unwrap(), r.to_string());
    }
}

use crate::types::{EngineKind, Isolation, Limits, Network};
use std::time::UNIX_EPOCH;

const NOW_SECS: u64 = 1_700_000_000;
const ALIVE: u32 = 100;
const DEAD: u32 = 200;

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(NOW_SECS)
}

fn p(pid: u32) -> ProcessRef {
    ProcessRef { pid, start_time: 7 }
}

fn alive(p: &ProcessRef) -> bool {
    p.pid == ALIVE
}

fn at(offset: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(NOW_SECS.checked_add_signed(offset).unwrap());
    humantime::format_rfc3339_millis(t).to_string()
}

fn rec(n: u8, state: Lifecycle) -> Record {
    Record {
        id: Uuid::from_u128(n as u128 + 1),
        name: format!("s{n}"),
        state,
        container_id: (state != Lifecycle::Pending).then(|| format!("c{n}")),
        image: "img".into(),
        workdir: "/w".into(),
        limits: Limits {
            cpus: 1.0,
            memory: "512m".into(),
            pids_limit: 1,
            tmp_size: "1m".into(),
            network: Network::None,
            allow: Vec::new(),
            caps: crate::types::Caps::Minimal,
        },
        labels: Default::default(),
        created_at: at(-60),
        updated_at: at(-60),
        error: None,
        creator: p(ALIVE),
        owner: None,
        expires_at: None,
        ttl_secs: None,
        stopper: (state == Lifecycle::Stopping).then(|| p(ALIVE)),
        agent: None,
        workdir_id: None,
        runtime: None,
        devcontainer: None,
        pool: None,
        published: Vec::new(),
        workdir_mode: Default::default(),
        daemon: None,
        engine: EngineKind::Docker,
        isolation: Isolation::Container,
        parent: None,
        bootstrap: None,
        user: None,
        settings: None,
    }
}

fn container_of(r: &Record) -> ContainerSummary {
    ContainerSummary {
        id: r
            .container_id
            .clone()
            .unwrap_or_else(|| format!("c-{}", r.name)),
        name: r.name.clone(),
        state: "running".into(),
        status: "Up".into(),
        sandbox_id: Some(r.id.to_string()),
        state_dir: None,
        node: None,
    }
}

fn state(records: &[Record]) -> State {
    State {
        version: 1,
        dir: None,
        sandboxes: records.to_vec(),
    }
}

/// Judges records that were already there before the listing, with the given containers.
fn judge_settled(records: &[Record], containers: &[ContainerSummary]) -> Vec<Verdict> {
    let s = state(records);
    judge(&s, containers, &s, alive, now())
}

fn codes(v: &[Verdict]) -> Vec<(Option<String>, Action, Reason)> {
    v.iter()
        .map(|v| (v.id.clone(), v.action, v.reason))
        .collect()
}

#[test]
fn orphan_containers_are_those_without_a_record_after_the_listing() {
    let r = rec(1, Lifecycle::Running);
    let mut stray = container_of(&rec(2, Lifecycle::Running));
    stray.sandbox_id = Some("not-a-uuid".into());
    let mut unlabelled = container_of(&rec(3, Lifecycle::Running));
    unlabelled.sandbox_id = None;
    // A container without the ID label is still ours when a record names its container ID.
    let mut known_by_id = container_of(&r);
    known_by_id.sandbox_id = None;
    let v = judge_settled(std::slice::from_ref(&r), &[known_by_id, stray, unlabelled]);
    assert_eq!(
        codes(&v),
        vec![
            (
                Some("not-a-uuid".into()),
                Action::RemoveContainer,
                Reason::Orphan
            ),
            (None, Action::RemoveContainer, Reason::Orphan),
        ]
    );
    assert_eq!(v[0].container.as_deref(), Some("c2"));
    // A record dropped between the two reads is not an orphan's: whoever dropped it
    // (`down`, another `reap`) removed its container first. A later reap judges any rest.
    let v = judge(
        &state(std::slice::from_ref(&r)),
        &[container_of(&r)],
        &state(&[]),
        alive,
        now(),
    );
    assert!(v.is_empty(), "{v:?}");
    let v = judge(&state(&[]), &[container_of(&r)], &state(&[]), alive, now());
    assert_eq!(
        codes(&v),
        vec![(
            Some(r.id.to_string()),
            Action::RemoveContainer,
            Reason::Orphan
        )]
    );
}

#[test]
fn a_label_never_overrides_the_recorded_container_id() {
    let r = rec(1, Lifecycle::Running);
    let real = container_of(&r);
    let mut forged = container_of(&rec(2, Lifecycle::Running));
    forged.sandbox_id = Some(r.id.to_string());
    let records = std::slice::from_ref(&r);
    assert_eq!(claim_of(&real, records), Claim::Recorded(&r));
    assert_eq!(claim_of(&forged, records), Claim::Foreign(&r));
    // Next to the real container (listed before or after it), the forged one is an orphan
    // and the sandbox keeps its own.
    for listing in [
        vec![real.clone(), forged.clone()],
        vec![forged.clone(), real.clone()],
    ] {
        let v = judge_settled(records, &listing);
        assert_eq!(
            codes(&v),
            vec![(
                Some(r.id.to_string()),
                Action::RemoveContainer,
                Reason::Orphan
            )]
        );
        assert_eq!(v[0].container.as_deref(), Some("c2"));
        assert!(
            v[0].detail.contains("not its container (c1)"),
            "{}",
            v[0].detail
        );
    }
    // Its owner dead: the real container is removed, never the forged one in its place.
    let mut owned = r.clone();
    owned.owner = Some(p(DEAD));
    let v = judge_settled(
        std::slice::from_ref(&owned),
        &[forged.clone(), real.clone()],
    );
    let removed: Vec<_> = v.iter().map(|v| (v.reason, v.container.clone())).collect();
    assert!(
        removed.contains(&(Reason::OwnerDead, Some("c1".into()))),
        "{removed:?}"
    );
    assert!(
        removed.contains(&(Reason::Orphan, Some("c2".into()))),
        "{removed:?}"
    );
    // Without the real container: the record lost it, whatever carries its label.
    let v = judge_settled(records, &[forged.clone()]);
    let got: Vec<_> = v
        .iter()
        .map(|v| (v.action, v.reason, v.container.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Action::RemoveContainer, Reason::Orphan, Some("c2".into())),
            (Action::DropRecord, Reason::ContainerGone, None),
        ]
    );
    // A Pending record without a container ID yet: the label is all there is.
    let pending = rec(3, Lifecycle::Pending);
    let c = container_of(&pending);
    assert_eq!(
        claim_of(&c, std::slice::from_ref(&pending)),
        Claim::Label(&pending)
    );
    assert!(judge_settled(std::slice::from_ref(&pending), &[c]).is_empty());
}

#[test]
fn a_record_that_started_during_the_listing_is_not_container_gone() {
    // Pending before the listing, Running after it, container not listed (created after).
    let pending = rec(1, Lifecycle::Pending);
    let mut running = pending.clone();
    running.state = Lifecycle::Running;
    running.container_id = Some("c1".into());
    assert!(judge(
        &state(&[pending]),
        &[],
        &state(&[running.clone()]),
        alive,
        now()
    )
    .is_empty());
    // Not in the first read at all: same.
    assert!(judge(&state(&[]), &[], &state(&[running.clone()]), alive, now()).is_empty());
    // Running in both reads, and not listed: its container is really gone.
    let v = judge_settled(&[running.clone()], &[]);
    assert_eq!(
        codes(&v),
        vec![(
            Some(running.id.to_string()),
            Action::DropRecord,
            Reason::ContainerGone
        )]
    );
    assert_eq!(v[0].container, None);
}

#[test]
fn pending_is_judged_by_its_creator_only() {
    let mut r = rec(1, Lifecycle::Pending);
    r.owner = Some(p(DEAD));
    r.expires_at = Some(at(-10));
    assert!(judge_settled(&[r.clone()], &[]).is_empty());
    assert!(judge_settled(&[r.clone()], &[container_of(&r)]).is_empty());
    r.creator = p(DEAD);
    let v = judge_settled(&[r.clone()], &[]);
    assert_eq!(
        codes(&v),
        vec![(
            Some(r.id.to_string()),
            Action::DropRecord,
            Reason::CreatorDead
        )]
    );
    let v = judge_settled(&[r.clone()], &[container_of(&r)]);
    assert_eq!(
        codes(&v),
        vec![(Some(r.id.to_string()), Action::Remove, Reason::CreatorDead)]
    );
    assert_eq!(v[0].container.as_deref(), Some("c-s1"));
    assert!(v[0].detail.contains(&DEAD.to_string()), "{}", v[0].detail);
}

#[test]
fn owner_and_lease_decide_for_running_sandboxes() {
    let mut r = rec(1, Lifecycle::Running);
    let c = [container_of(&r)];
    assert!(judge_settled(&[r.clone()], &c).is_empty());
    r.owner = Some(p(ALIVE));
    r.expires_at = Some(at(1));
    assert!(judge_settled(&[r.clone()], &c).is_empty());
    r.expires_at = Some(at(0));
    assert_eq!(judge_settled(&[r.clone()], &c)[0].reason, Reason::Expired);
    r.expires_at = Some("soon".into());
    assert_eq!(judge_settled(&[r.clone()], &c)[0].reason, Reason::Expired);
    r.expires_at = None;
    r.owner = Some(p(DEAD));
    let v = judge_settled(&[r.clone()], &c);
    assert_eq!(
        codes(&v),
        vec![(Some(r.id.to_string()), Action::Remove, Reason::OwnerDead)]
    );
    assert_eq!(v[0].container.as_deref(), Some("c1"));
    // The creator of a Running sandbox does not matter.
    let mut r = rec(2, Lifecycle::Running);
    r.creator = p(DEAD);
    assert!(judge_settled(&[r.clone()], &[container_of(&r)]).is_empty());
    // A missing container wins over a dead owner: only the record is left to drop.
    r.owner = Some(p(DEAD));
    assert_eq!(judge_settled(&[r], &[])[0].reason, Reason::ContainerGone);
}

#[test]
fn failed_and_stopping_records() {
    let mut f = rec(1, Lifecycle::Failed);
    f.error = Some("boom".into());
    // `up` (alive) is still removing its container.
    assert!(judge_settled(&[f.clone()], &[container_of(&f)]).is_empty());
    let v = judge_settled(&[f.clone()], &[]);
    assert_eq!(v[0].reason, Reason::ContainerGone);
    assert!(v[0].detail.contains("boom"));
    f.creator = p(DEAD);
    assert_eq!(
        codes(&judge_settled(&[f.clone()], &[container_of(&f)])),
        vec![(Some(f.id.to_string()), Action::Remove, Reason::CreatorDead)]
    );

    let mut s = rec(2, Lifecycle::Stopping);
    s.owner = Some(p(DEAD));
    s.expires_at = Some(at(-1));
    // A live `down` is at work: nothing, container or not.
    assert!(judge_settled(&[s.clone()], &[container_of(&s)]).is_empty());
    assert!(judge_settled(&[s.clone()], &[]).is_empty());
    s.stopper = Some(p(DEAD));
    assert_eq!(
        judge_settled(&[s.clone()], &[container_of(&s)])[0].reason,
        Reason::StopperDead
    );
    assert_eq!(
        judge_settled(&[s.clone()], &[])[0].reason,
        Reason::ContainerGone
    );
    s.stopper = None;
    s.owner = None;
    s.expires_at = None;
    assert_eq!(
        judge_settled(&[s.clone()], &[container_of(&s)])[0].reason,
        Reason::StopperDead
    );
}

#[test]
fn still_holds_compares_with_the_record_as_it_is_now() {
    let mut r = rec(1, Lifecycle::Running);
    r.expires_at = Some(at(-1));
    let v = judge_settled(&[r.clone()], &[container_of(&r)]).remove(0);
    assert!(still_holds(&v, Some(&r), alive, now()));
    // Renewed in between.
    let mut renewed = r.clone();
    renewed.expires_at = Some(at(60));
    assert!(!still_holds(&v, Some(&renewed), alive, now()));
    // A live `down` took it over.
    let mut downing = r.clone();
    downing.state = Lifecycle::Stopping;
    downing.stopper = Some(p(ALIVE));
    assert!(!still_holds(&v, Some(&downing), alive, now()));
    // Gone already.
    assert!(!still_holds(&v, None, alive, now()));
    // An orphan holds while no record claims it: none has its label's ID, or the one that
    // has holds another container's ID (the label is forged or stray). A record without a
    // container ID (an `up` starting), or one holding this container, claims it.
    let mut o = container_of(&rec(9, Lifecycle::Running));
    o.sandbox_id = Some(r.id.to_string());
    let orphan = judge_settled(&[], &[o.clone()]).remove(0);
    assert!(still_holds(&orphan, None, alive, now()));
    assert!(still_holds(&orphan, Some(&r), alive, now()));
    let mut starting = r.clone();
    starting.state = Lifecycle::Pending;
    starting.container_id = None;
    assert!(!still_holds(&orphan, Some(&starting), alive, now()));
    let mut holding = r.clone();
    holding.container_id = Some(o.id.clone());
    assert!(!still_holds(&orphan, Some(&holding), alive, now()));
    // Container gone: holds unless a live `down` is at work.
    let gone = judge_settled(&[r.clone()], &[]).remove(0);
    assert_eq!(gone.reason, Reason::ContainerGone);
    assert!(still_holds(&gone, Some(&r), alive, now()));
    assert!(!still_holds(&gone, Some(&downing), alive, now()));
}

/// Every combination of lifecycle state, container presence, first-read state, creator,
/// owner, lease and stopper: the never-touch rules hold, everything abandoned is judged, and
/// judging again after carrying the verdicts out finds nothing.
#[test]
fn exhaustive_rules_and_idempotence() {
    use Lifecycle::*;
    let states = [Pending, Running, Stopping, Failed, Terminated];
    let procs = [None, Some(p(ALIVE)), Some(p(DEAD))];
    let leases = [None, Some(at(30)), Some(at(-30))];
    let mut records = Vec::new();
    let mut before = Vec::new();
    let mut listed = Vec::new();
    let mut n = 0u8;
    for &st in &states {
        for has_container in [false, true] {
            for first_read in 0..3 {
                for creator in [p(ALIVE), p(DEAD)] {
                    for owner in procs {
                        for lease in &leases {
                            for stopper in procs {
                                let mut r = rec(n, st);
                                n = n.wrapping_add(1);
                                r.id = Uuid::from_u128(records.len() as u128 + 1);
                                r.container_id = Some(format!("c{}", records.len()));
                                r.creator = creator;
                                r.owner = owner;
                                r.expires_at = lease.clone();
                                r.stopper = stopper.filter(|_| st == Stopping);
                                match first_read {
                                    0 => {}
                                    1 => {
                                        let mut b = r.clone();
                                        b.state = Pending;
                                        before.push(b);
                                    }
                                    _ => before.push(r.clone()),
                                }
                                if has_container {
                                    listed.push(container_of(&r));
                                }
                                records.push(r);
                            }
                        }
                    }
                }
            }
        }
    }
    let after = state(&records);
    let verdicts = judge(&state(&before), &listed, &after, alive, now());
    let listed_ids: HashSet<String> = listed.iter().filter_map(|c| c.sandbox_id.clone()).collect();
    for r in &records {
        let id = r.id.to_string();
        let v = verdicts
            .iter()
            .find(|v| v.id.as_deref() == Some(id.as_str()));
        let has_container = listed_ids.contains(&id);
        let settled = before.iter().any(|b| b.id == r.id && b.state != Pending);
        let owner_dead = r.owner.is_some_and(|o| !alive(&o));
        let expired = r.expires_at.as_deref() == Some(at(-30).as_str());
        let stopper_live = r.stopper.is_some_and(|s| alive(&s));
        let ctx = format!("{r:?} container={has_container} settled={settled} -> {v:?}");
        // Never touched.
        if r.state == Pending && alive(&r.creator) {
            assert!(v.is_none(), "live creator: {ctx}");
        }
        if r.state == Stopping && stopper_live {
            assert!(v.is_none(), "live stopper: {ctx}");
        }
        if matches!(r.state, Running | Terminated) && has_container && !owner_dead && !expired {
            assert!(v.is_none(), "live lease: {ctx}");
        }
        if r.state == Failed && has_container && alive(&r.creator) && !owner_dead && !expired {
            assert!(v.is_none(), "failing up still at work: {ctx}");
        }
        if !has_container && !settled && r.state != Pending {
            assert!(v.is_none(), "container may not be listed yet: {ctx}");
        }
        // Actions match what exists.
        if let Some(v) = v {
            let want = if has_container {
                Action::Remove
            } else {
                Action::DropRecord
            };
            assert_eq!(v.action, want, "{ctx}");
            assert_eq!(v.record.as_ref(), Some(r), "{ctx}");
        }
        // Everything abandoned is judged.
        let abandoned = match r.state {
            Pending => !alive(&r.creator),
            Stopping if stopper_live => false,
            _ if !has_container => settled,
            Stopping => true,
            Failed => owner_dead || expired || !alive(&r.creator),
            _ => owner_dead || expired,
        };
        assert_eq!(v.is_some(), abandoned, "{ctx}");
    }
    // No orphans among these: every container has its record.
    assert!(verdicts.iter().all(|v| v.reason != Reason::Orphan));

    // Carry the verdicts out, and judge again: nothing is left to do.
    let gone: HashSet<Option<String>> = verdicts.iter().map(|v| v.id.clone()).collect();
    let records2: Vec<Record> = records
        .iter()
        .filter(|r| !gone.contains(&Some(r.id.to_string())))
        .cloned()
        .collect();
    let listed2: Vec<ContainerSummary> = listed
        .iter()
        .filter(|c| !gone.contains(&c.sandbox_id))
        .cloned()
        .collect();
    let s2 = state(&records2);
    let again = judge(&s2, &listed2, &s2, alive, now());
    // Only what was waiting for the second read to settle may appear now.
    for v in &again {
        let r = v.record.as_ref().unwrap();
        assert!(
            !before.iter().any(|b| b.id == r.id && b.state != Pending),
            "second pass judged a settled record: {v:?}"
        );
    }
    let s3 = state(
        &records2
            .iter()
            .filter(|r| !again.iter().any(|v| v.record.as_ref() == Some(*r)))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let listed3: Vec<ContainerSummary> = listed2
        .iter()
        .filter(|c| !again.iter().any(|v| v.id == c.sandbox_id))
        .cloned()
        .collect();
    assert!(judge(&s3, &listed3, &s3, alive, now()).is_empty());
}

#[test]
fn ttl_and_owner_parse() {
    assert_eq!(parse_ttl("30m").unwrap(), 1800);
    assert_eq!(parse_ttl("1h 30m").unwrap(), 5400);
    assert_eq!(parse_ttl(" 2s ").unwrap(), 2);
    assert_eq!(parse_ttl("30").unwrap(), 30);
    assert_eq!(parse_ttl("1.5").unwrap(), 2);
    for bad in ["", "0s", "500ms", "soon", "-5m", "0.2"] {
        assert!(parse_ttl(bad).is_err(), "{bad}");
    }
    let me = parse_owner(&std::process::id().to_string()).unwrap();
    assert_eq!(me, ProcessRef::current());
    assert_eq!(
        parse_owner("parent").unwrap().pid,
        std::os::unix::process::parent_id()
    );
    for bad in ["0", "-1", "abc", "4294967295"] {
        let e = parse_owner(bad).unwrap_err().to_string();
        assert!(e.contains("--owner-pid"), "{bad}: {e}");
    }
}

#[test]
fn describe_shows_owner_and_time_left() {
    let mut r = rec(1, Lifecycle::Running);
    assert_eq!(describe(&r, alive, now()), "-");
    r.owner = Some(p(ALIVE));
    r.expires_at = Some(at(90));
    assert_eq!(describe(&r, alive, now()), "pid 100, 2m left");
    r.owner = Some(p(DEAD));
    r.expires_at = Some(at(-1));
    assert_eq!(describe(&r, alive, now()), "pid 200 (exited), expired");
}

#[test]
fn a_pool_sandbox_never_made_ready_goes_once_its_filler_is_gone() {
    let tag = |ready: bool, claimed: bool| {
        Some(crate::state::PoolTag {
            name: "p".into(),
            claimed_at: claimed.then(|| at(-1)),
            ready,
        })
    };
    let mut r = rec(1, Lifecycle::Running);
    r.pool = tag(false, false);
    r.creator = p(DEAD);
    let alive = |x: &ProcessRef| x.pid == ALIVE;
    let now = UNIX_EPOCH + Duration::from_secs(NOW_SECS);
    let (reason, detail) = lease_reason(&r, &alive, now).unwrap();
    assert_eq!(reason, Reason::CreatorDead);
    assert!(detail.contains("never ready"), "{detail}");
    // Its filler still at work, or made ready, or claimed: nothing to reap.
    r.creator = p(ALIVE);
    assert_eq!(lease_reason(&r, &alive, now), None);
    r.creator = p(DEAD);
    r.pool = tag(true, false);
    assert_eq!(lease_reason(&r, &alive, now), None);
    r.pool = tag(true, true);
    assert_eq!(lease_reason(&r, &alive, now), None);
}
