//! Renewing a lease (`renew`): extend a sandbox's lease to `ttl` from now (the TTL given to `up`,
//! or a new one, which then becomes the sandbox's TTL). One locked update of the state file; no
//! engine call, so an agent's heartbeat keeps working while the daemon restarts.

use std::time::SystemTime;

use anyhow::Result;

use super::Ctx;
use crate::error::Error;
use crate::lease::parse_ttl;
use crate::state::{Lifecycle, Record};

/// Renews the lease of the sandbox `query` (ID, prefix or name) as `renew` does: it then ends
/// `ttl` (e.g. `2h`, which becomes its TTL) or its own TTL from now. One locked update of the
/// state file, no engine call. Returns the updated record. Errors: as [`renew`], a malformed
/// `ttl`, an unknown sandbox.
pub(crate) fn extend(ctx: &Ctx, query: &str, ttl: Option<&str>) -> Result<Record> {
    let ttl = ttl.map(parse_ttl).transpose()?;
    ctx.store.update(|s| {
        let i = s.resolve_index(query)?;
        renew(&mut s.sandboxes[i], ttl, SystemTime::now())?;
        Ok(s.sandboxes[i].clone())
    })
}

/// Renews `r`'s lease at `now`, with `ttl` seconds (which becomes its TTL) or its own TTL.
/// Errors: the sandbox has no TTL and none is given; it is not Pending or Running (a Stopping
/// one is being removed, a Failed one is past saving).
pub(crate) fn renew(r: &mut Record, ttl: Option<u64>, now: SystemTime) -> Result<(), Error> {
    if !matches!(r.state, Lifecycle::Pending | Lifecycle::Running) {
        return Err(Error::NotRunning {
            id: r.short_id(),
            state: r.state.to_string(),
            detail: "; only a Pending or Running sandbox can be renewed".into(),
        });
    }
    let Some(secs) = ttl.or(r.ttl_secs) else {
        return Err(Error::Usage(format!(
            "sandbox {} has no lease to renew; give one with `h9sandbox renew {} --ttl DURATION`",
            r.short_id(),
            r.short_id()
        )));
    };
    r.ttl_secs = Some(secs);
    r.start_lease(now)?;
    r.updated_at = crate::state::now_rfc3339();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn record(state: Lifecycle, ttl: Option<u64>) -> Record {
        let mut r: Record = serde_json::from_value(serde_json::json!({
            "id": "aaaa1111-0000-4000-8000-000000000000",
            "name": "n", "state": "Running", "image": "i", "workdir": "/w",
            "limits": {"cpus": 1.0, "memory": "512m", "pids_limit": 1, "tmp_size": "1m", "network": "none"},
            "created_at": "2023-11-14T22:13:00Z", "updated_at": "2023-11-14T22:13:00Z",
            "creator": {"pid": 1, "start_time": 1}
        }))
        .unwrap();
        r.state = state;
        r.ttl_secs = ttl;
        r
    }

    #[test]
    fn renew_restarts_the_lease_from_now() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut r = record(Lifecycle::Running, Some(60));
        renew(&mut r, None, now).unwrap();
        assert_eq!(r.expires_at.as_deref(), Some("2023-11-14T22:14:20.000Z"));
        // --ttl replaces the TTL for later renewals.
        renew(&mut r, Some(3600), now).unwrap();
        assert_eq!(
            (r.ttl_secs, r.expires_at.as_deref()),
            (Some(3600), Some("2023-11-14T23:13:20.000Z"))
        );
        // A sandbox without a lease gets one only with --ttl.
        let mut r = record(Lifecycle::Pending, None);
        assert!(matches!(
            renew(&mut r, None, now),
            Err(Error::Usage(m)) if m.contains("--ttl")
        ));
        renew(&mut r, Some(5), now).unwrap();
        assert_eq!(r.ttl_secs, Some(5));
        for state in [Lifecycle::Stopping, Lifecycle::Failed] {
            let mut r = record(state, Some(60));
            assert!(matches!(
                renew(&mut r, None, now),
                Err(Error::NotRunning { .. })
            ));
            assert_eq!(r.expires_at, None);
        }
    }
}
