//! Warm pools: sandboxes made before they are asked for, so that `up --pool NAME` hands one out
//! at once instead of waiting for the engine to create and start a container.
//!
//! A pool is a definition in the state directory's `pools.json` ([`PoolDef`]: its name, how many
//! sandboxes it keeps ready, and `up`'s options, working directory and environment as they were
//! at `pool create`) and the sandboxes made for it, whose records say so ([`PoolTag`]). A filler
//! (`h9sandbox pool fill`, started by `pool create` and after each claim) makes sandboxes with
//! those options until as many wait as the pool's size; it holds the lock file
//! `pool-NAME.lock` while it works, so that one filler at a time works on a pool.
//!
//! A claim ([`claim`]) takes the first Running sandbox that waits in the pool under the state
//! lock (two claims never get the same one), gives it the caller's owner and lease, copies a
//! copied work dir's content in as it is then, and starts a filler to make the next one. With
//! no sandbox ready it waits for the filler, up to the configuration's start timeout.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::Ctx;
use crate::error::Error;
use crate::lease::{parse_owner, parse_ttl};
use crate::state::{now_rfc3339, Lifecycle, PoolTag, ProcessRef, Record, State};
use crate::types::WorkdirMode;

/// The file of the state directory holding the pools' definitions.
pub(crate) const FILE: &str = "pools.json";

/// The largest pool: each of its sandboxes is a running container.
pub(crate) const MAX_SIZE: u32 = 64;

/// The environment variables a pool's definition keeps, by prefix (those that choose the
/// configuration, its files, the state directory and the engine's daemon): a filler runs with
/// these and [`KEPT_ENV_NAMES`] of `pool create`'s environment and nothing else, so that it
/// makes its sandboxes as `pool create` would have, whoever starts it.
const KEPT_ENV: [&str; 4] = ["H9SANDBOX_", "SANDBOX_", "DOCKER_", "XDG_"];

/// The variables a pool's definition keeps by name (see [`KEPT_ENV`]): where the engine's
/// client is found, the user's files, an ssh agent for `DOCKER_HOST=ssh://`.
const KEPT_ENV_NAMES: [&str; 7] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "SSH_AUTH_SOCK",
    "NO_COLOR",
];

/// One pool, as `pools.json` keeps it (and `pool ls --format json` prints it, with counts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PoolDef {
    /// The pool's name: 1 to 63 of `a-z 0-9 . _ -`, starting with a letter or digit.
    pub name: String,
    /// How many sandboxes wait, ready, in the pool (1 to [`MAX_SIZE`]).
    pub size: u32,
    /// `up`'s options the sandboxes are made with, as the CLI keeps them (opaque here).
    pub up: serde_json::Value,
    /// `--config` as given to `pool create`, if any.
    #[serde(default)]
    pub config: Option<PathBuf>,
    /// The directory `pool create` ran in: relative paths of `up`'s options, the default work
    /// dir and the project's `sandbox.toml` are taken from there.
    pub cwd: PathBuf,
    /// The environment variables of `pool create` that name configuration ([`KEPT_ENV`]).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The configuration the pool's sandboxes are made with ([`config_in_force`]: every layer
    /// merged, the files, the environment and `up`'s options), as `pool create` found it: a
    /// filler that finds another one (a `sandbox.toml` or user configuration changed since, or
    /// no longer trusted) makes nothing and says so, rather than sandboxes unlike the pool's.
    #[serde(default)]
    pub config_in_force: Option<serde_json::Value>,
    /// When the pool was made, RFC 3339 UTC.
    pub created_at: String,
    /// Why the last filler failed to make a sandbox (one line), and when; cleared by the next
    /// sandbox made.
    #[serde(default)]
    pub last_error: Option<FillError>,
}

/// A filler's failure ([`PoolDef::last_error`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FillError {
    /// What failed, one line.
    pub message: String,
    /// When, RFC 3339 UTC.
    pub at: String,
}

/// The whole of `pools.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Pools {
    #[serde(default)]
    pools: Vec<PoolDef>,
}

/// Checks a pool's name. Errors: [`Error::Usage`] naming the rule.
pub(crate) fn check_name(name: &str) -> Result<(), Error> {
    let ok = (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "invalid pool name {name:?}: use 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit"
        )))
    }
}

/// The environment of this process that a pool's definition keeps ([`KEPT_ENV`]).
pub(crate) fn kept_env() -> BTreeMap<String, String> {
    std::env::vars()
        .filter(|(k, _)| {
            KEPT_ENV.iter().any(|p| k.starts_with(p)) || KEPT_ENV_NAMES.contains(&k.as_str())
        })
        .collect()
}

/// The configuration `cfg` as a pool compares it ([`PoolDef::config_in_force`]): every key but
/// the state directory (named to the filler by its path, the same directory however written).
pub(crate) fn config_in_force(cfg: &crate::config::Config) -> serde_json::Value {
    let mut v = serde_json::to_value(cfg).expect("the configuration serializes");
    if let Some(m) = v.as_object_mut() {
        m.remove("state_dir");
    }
    v
}

fn parse(bytes: Option<&[u8]>, ctx: &Ctx) -> Result<Pools> {
    let corrupt = |reason: String| Error::StateCorrupt {
        path: ctx.store.dir().join(FILE),
        reason,
    };
    let pools: Pools = match bytes {
        None => return Ok(Pools::default()),
        Some(b) => serde_json::from_slice(b)
            .map_err(|e| corrupt(format!("it is not a pools document: {e}")))?,
    };
    for p in &pools.pools {
        check_name(&p.name).map_err(|e| corrupt(format!("a pool's name: {e}")))?;
        if !(1..=MAX_SIZE).contains(&p.size) {
            return Err(corrupt(format!(
                "pool {} has size {}, not 1 to {MAX_SIZE}",
                p.name, p.size
            ))
            .into());
        }
    }
    Ok(pools)
}

/// Every pool of the state directory, in the order they were made. Errors: the file.
pub(crate) fn all(ctx: &Ctx) -> Result<Vec<PoolDef>> {
    Ok(parse(ctx.store.read_document(FILE)?.as_deref(), ctx)?.pools)
}

/// The pool `name`. Errors: [`Error::NotFound`]-like [`Error::Usage`] naming `pool ls`.
pub(crate) fn get(ctx: &Ctx, name: &str) -> Result<PoolDef> {
    all(ctx)?
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            Error::Usage(format!(
                "no pool {name} in the state directory {}; `h9sandbox pool create {name}` makes one (`h9sandbox pool ls` lists them)",
                ctx.store.dir().display()
            ))
            .into()
        })
}

/// Read-modify-write of the pools under the state lock; `f` returns whether it changed them.
fn update<T>(ctx: &Ctx, f: impl FnOnce(&mut Vec<PoolDef>) -> Result<(bool, T)>) -> Result<T> {
    ctx.store.update_document(FILE, |bytes| {
        let mut pools = parse(bytes.as_deref(), ctx)?;
        let (changed, out) = f(&mut pools.pools)?;
        let new = changed.then(|| {
            let mut json = serde_json::to_vec_pretty(&pools).expect("pools serialize");
            json.push(b'\n');
            json
        });
        Ok((new, out))
    })
}

/// Adds the pool `def`. Errors: a pool of that name exists.
pub(crate) fn add(ctx: &Ctx, def: PoolDef) -> Result<()> {
    update(ctx, |pools| {
        if pools.iter().any(|p| p.name == def.name) {
            return Err(Error::Refused(format!(
                "pool {} exists; `h9sandbox pool rm {}` first, or choose another name",
                def.name, def.name
            ))
            .into());
        }
        pools.push(def);
        Ok((true, ()))
    })
}

/// Removes the pool `name`'s definition; returns whether it was there.
pub(crate) fn remove_def(ctx: &Ctx, name: &str) -> Result<bool> {
    update(ctx, |pools| {
        let before = pools.len();
        pools.retain(|p| p.name != name);
        Ok((pools.len() != before, pools.len() != before))
    })
}

/// Records (or, with `None`, clears) the last failure of the pool `name`'s filler.
pub(crate) fn set_error(ctx: &Ctx, name: &str, message: Option<String>) -> Result<()> {
    update(ctx, |pools| {
        let Some(p) = pools.iter_mut().find(|p| p.name == name) else {
            return Ok((false, ()));
        };
        let new = message.map(|message| FillError {
            message,
            at: now_rfc3339(),
        });
        // Each failure is written with its time, the same message too: a claim waiting for
        // the filler it started tells that filler's failure by it.
        let changed = !(p.last_error.is_none() && new.is_none());
        p.last_error = new;
        Ok((changed, ()))
    })
}

/// The name of the lock file a filler of the pool `name` holds.
pub(crate) fn lock_name(name: &str) -> String {
    format!("pool-{name}.lock")
}

/// How many sandboxes of `state` wait in the pool `name`: (Running, starting). A starting one
/// is Pending with its `up` (the filler) alive.
pub(crate) fn waiting(state: &State, name: &str) -> (u32, u32) {
    let mut out = (0, 0);
    for r in state
        .sandboxes
        .iter()
        .filter(|r| r.waits_in_pool(Some(name)))
    {
        match r.state {
            Lifecycle::Running if is_ready(r) => out.0 += 1,
            Lifecycle::Running | Lifecycle::Pending if r.creator.is_alive() => out.1 += 1,
            _ => {}
        }
    }
    out
}

/// Whether `r` is made, started and bootstrapped for its pool ([`PoolTag::ready`]).
fn is_ready(r: &Record) -> bool {
    r.pool.as_ref().is_some_and(|p| p.ready)
}

/// Marks the pool's sandbox `id` ready to be claimed (by its filler, once `up`'s work is done,
/// bootstrap included) and returns its record. Errors: its record is gone.
pub(crate) fn mark_ready(ctx: &Ctx, id: uuid::Uuid) -> Result<Record> {
    ctx.store.update(|s| {
        let r = s.get_mut(id).ok_or_else(|| {
            Error::Sandbox(format!(
                "sandbox {id} was removed while it was being made for its pool"
            ))
        })?;
        if let Some(p) = r.pool.as_mut() {
            p.ready = true;
        }
        Ok(r.clone())
    })
}

/// Takes the pool's sandbox `id` back, unless a claim took it first: it is no longer ready, so
/// that no claim takes it while its filler removes it. Returns whether it was still waiting
/// (the caller may then remove it; otherwise it is its claimant's).
pub(crate) fn take_back(ctx: &Ctx, id: uuid::Uuid) -> Result<bool> {
    ctx.store.update(|s| {
        let Some(r) = s.get_mut(id).filter(|r| r.waits_in_pool(None)) else {
            return Ok(false);
        };
        if let Some(p) = r.pool.as_mut() {
            p.ready = false;
        }
        Ok(true)
    })
}

/// Whether a filler works on the pool `name` now (holds its lock).
pub(crate) fn filler_running(ctx: &Ctx, name: &str) -> Result<bool> {
    Ok(ctx.store.try_lock_named(&lock_name(name))?.is_none())
}

/// Starts a filler of the pool `def` in the background: `h9sandbox pool fill NAME --worker`
/// in the pool's directory, with the pool's environment and this state directory, detached
/// from the caller's terminal (a process group of its own, no standard streams). Returns once
/// it is spawned. Errors: the spawn failed.
pub(crate) fn spawn_filler(ctx: &Ctx, def: &PoolDef) -> Result<()> {
    let mut cmd = filler_command(ctx, def)?;
    cmd.arg("--worker")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0);
    cmd.spawn()
        .with_context(|| format!("cannot start the filler of pool {}", def.name))?;
    Ok(())
}

/// The command line of a filler of the pool `def` (`h9sandbox pool fill NAME`), with the pool's
/// directory and environment (the caller's replaced by the pool's, [`kept_env`]),
/// naming this state directory.
pub(crate) fn filler_command(ctx: &Ctx, def: &PoolDef) -> Result<tokio::process::Command> {
    let exe = std::env::current_exe().context("cannot find h9sandbox's own executable")?;
    let mut cmd = tokio::process::Command::new(exe);
    // Nothing of the caller's environment: a claimant's variables never shape the sandboxes
    // the next claimants get.
    cmd.env_clear()
        .envs(&def.env)
        .env("H9SANDBOX_STATE_DIR", ctx.store.dir())
        .current_dir(&def.cwd)
        .args(["pool", "fill", &def.name]);
    Ok(cmd)
}

/// Why the sandbox `rec`, just claimed, cannot be handed out (`None`: it can): its agent does
/// not answer (the container died or was removed while it waited), or its mounted work dir was
/// replaced since it was made (deleted and made again: the container still sees the old one).
async fn unusable(ctx: &Ctx, rec: &Record) -> Option<String> {
    if let Some(want) = rec.workdir_id {
        use std::os::unix::fs::MetadataExt;
        let have = std::fs::metadata(&rec.workdir).map(|m| [m.dev(), m.ino()]);
        if have.ok() != Some(want) {
            return Some(format!(
                "mounts {} as it was when the sandbox was made, and that directory was replaced or removed since",
                rec.workdir.display()
            ));
        }
    }
    match super::agent::connect(ctx, rec).await {
        Ok(_) => None,
        Err(e) => Some(format!("does not answer ({e})")),
    }
}

/// What `up --pool` asks besides the pool: the claimant's owner and lease.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClaimRequest {
    /// The pool's name.
    pub pool: String,
    /// `--owner-pid` ([`parse_owner`]).
    pub owner_pid: Option<String>,
    /// `--ttl` ([`parse_ttl`]).
    pub ttl: Option<String>,
}

/// `up --pool`: claims a sandbox of the pool `req.pool` and returns its record, Running, with
/// the caller's owner and lease (the lease starts now). A copied work dir gets the content of
/// its host directory as it is now; a filler is started to make the next sandbox. With none
/// ready, waits for the pool's filler (starting one when none works) up to `start_timeout_secs`.
/// Errors: no such pool, a bad owner or TTL, the filler's failure, the wait timed out, the copy
/// failed (the sandbox is then removed).
pub(crate) async fn claim(ctx: &Ctx, req: &ClaimRequest) -> Result<Record> {
    let owner = req.owner_pid.as_deref().map(parse_owner).transpose()?;
    let ttl_secs = req.ttl.as_deref().map(parse_ttl).transpose()?;
    check_name(&req.pool)?;
    let def = get(ctx, &req.pool)?;
    let began = now_rfc3339();
    let deadline = Instant::now() + Duration::from_secs(ctx.cfg.start_timeout_secs.max(1) + 30);
    let mut spawned = false;
    let rec = loop {
        let me = ProcessRef::current();
        let claimed = ctx.store.update(|s| {
            let Some(r) = s.sandboxes.iter_mut().find(|r| {
                r.waits_in_pool(Some(&req.pool)) && r.state == Lifecycle::Running && is_ready(r)
            }) else {
                return Ok(None);
            };
            let now = now_rfc3339();
            r.pool = Some(PoolTag {
                name: req.pool.clone(),
                claimed_at: Some(now.clone()),
                ready: true,
            });
            r.creator = me;
            r.owner = owner;
            r.ttl_secs = ttl_secs;
            r.start_lease(SystemTime::now())?;
            r.updated_at = now;
            Ok(Some(r.clone()))
        })?;
        if let Some(rec) = claimed {
            match unusable(ctx, &rec).await {
                None => break rec,
                Some(why) => {
                    // Never handed out: removed, and the next one is taken.
                    ctx.reporter.warn(&format!(
                        "pool {}: sandbox {} {why}; it is removed and another one taken",
                        req.pool,
                        rec.short_id()
                    ));
                    let _ = super::down::take_down(ctx, &[rec.id.to_string()], false).await;
                    continue;
                }
            }
        }
        let def = get(ctx, &req.pool)?;
        if !filler_running(ctx, &req.pool)? {
            if let Some(e) = def.last_error.as_ref().filter(|e| spawned && e.at >= began) {
                return Err(Error::Sandbox(format!(
                    "pool {} has no sandbox ready and its filler could not make one: {}",
                    req.pool, e.message
                ))
                .into());
            }
            spawn_filler(ctx, &def)?;
            spawned = true;
        }
        if Instant::now() >= deadline {
            return Err(Error::Sandbox(format!(
                "pool {} had no sandbox ready within {} s; `h9sandbox pool ls` shows what it holds and why",
                req.pool,
                ctx.cfg.start_timeout_secs + 30
            ))
            .into());
        }
        // A signal ends the wait at once, as it ends `up` (exit 128+N).
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(25)) => {}
            sig = super::interrupted() => {
                return Err(anyhow::anyhow!(
                    "interrupted by {sig} while waiting for a sandbox of pool {}",
                    req.pool
                ));
            }
        }
    };
    // The next one: the filler finds the pool one short (or exits at once when another works).
    if let Err(e) = spawn_filler(ctx, &def) {
        ctx.reporter.warn(&format!(
            "{e:#}; `h9sandbox pool fill {}` makes the pool's next sandbox",
            def.name
        ));
    }
    if rec.workdir_mode == WorkdirMode::Copy {
        let seeded = tokio::select! {
            r = super::copy::seed(ctx, &rec) => r.map(|_| ()),
            sig = super::interrupted() => Err(anyhow::anyhow!("interrupted by {sig}")),
        };
        if let Err(e) = seeded {
            let reason = format!("{e:#}; the sandbox was removed");
            return Err(super::create::abort(ctx, &rec, reason).await);
        }
    }
    if rec.owner.is_some() && ctx.cfg.watch_owner {
        if let Err(e) = super::watch::spawn(ctx, &rec) {
            ctx.reporter.warn(&format!(
                "{e:#}; the next `h9sandbox reap` or `up` removes sandbox {} once its owner has exited",
                rec.short_id()
            ));
        }
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tests::record;

    #[test]
    fn pool_names_are_short_lowercase_words() {
        for ok in ["p", "py-3.12", "eval_8", "0a"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Py", "-p", ".p", "a/b", "a b", &"x".repeat(64)] {
            let e = check_name(bad).unwrap_err().to_string();
            assert!(e.starts_with("invalid pool name"), "{bad}: {e}");
        }
    }

    #[test]
    fn only_unclaimed_running_or_live_pending_sandboxes_wait() {
        let tag = |name: &str, claimed: bool| {
            Some(PoolTag {
                name: name.into(),
                claimed_at: claimed.then(now_rfc3339),
                ready: true,
            })
        };
        let mut state = State::default();
        for (name, pool, lifecycle) in [
            ("ready", tag("p", false), Lifecycle::Running),
            ("ready2", tag("p", false), Lifecycle::Running),
            ("claimed", tag("p", true), Lifecycle::Running),
            ("other", tag("q", false), Lifecycle::Running),
            ("failed", tag("p", false), Lifecycle::Failed),
            ("starting", tag("p", false), Lifecycle::Pending),
            ("plain", None, Lifecycle::Running),
        ] {
            let mut r = record(name);
            r.pool = pool;
            r.state = lifecycle;
            r.creator = ProcessRef::current();
            state.sandboxes.push(r);
        }
        assert_eq!(waiting(&state, "p"), (2, 1));
        assert_eq!(waiting(&state, "q"), (1, 0));
        assert_eq!(waiting(&state, "none"), (0, 0));
        // A Pending one whose filler died is not coming.
        state.sandboxes[5].creator = ProcessRef {
            pid: u32::MAX,
            ..ProcessRef::current()
        };
        assert_eq!(waiting(&state, "p"), (2, 0));
    }
}
