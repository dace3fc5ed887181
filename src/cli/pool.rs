//! `h9sandbox pool create|ls|fill|rm` and `up --pool`: warm pools ([`crate::sandbox::pool`]).
//!
//! The filler (`pool fill NAME --worker`) is this binary started with the pool's directory and
//! environment ([`pool::filler_command`]); it reads the pool's `up` options back from
//! `pools.json` and makes sandboxes with them as `up` does, marked as the pool's.

use std::sync::Arc;

use anyhow::{Context, Result};
use serde::Serialize;

use super::output;
use super::progress::CliReporter;
use super::{Format, GlobalArgs, PoolArgs, PoolCommand, PoolCreateArgs, UpArgs};
use crate::error::Error;
use crate::report::Silent;
use crate::sandbox::create::create;
use crate::sandbox::pool::{self, ClaimRequest, PoolDef};
use crate::sandbox::Ctx;
use crate::state::now_rfc3339;

/// Runs a `pool` subcommand; returns its exit status.
pub(crate) async fn run(
    ctx: &Ctx,
    global: &GlobalArgs,
    format: Format,
    progress: Arc<CliReporter>,
    args: &PoolArgs,
) -> Result<i32> {
    match &args.command {
        PoolCommand::Create(a) => create_pool(ctx, global, format, a).await,
        PoolCommand::Ls => list(ctx, format),
        PoolCommand::Fill(a) if a.worker => work(ctx, &a.name, progress).await,
        PoolCommand::Fill(a) => {
            let code = fill_foreground(ctx, &pool::get(ctx, &a.name)?).await?;
            match format {
                Format::Json => printed(ctx, format, &a.name, code),
                Format::Table => Ok(code),
            }
        }
        PoolCommand::Rm(a) => remove(ctx, format, &a.names).await,
    }
}

/// `up --pool NAME`: claims a sandbox of the pool and prints its ID (or record), as `up` does.
pub(crate) async fn claim(ctx: &Ctx, format: Format, args: &UpArgs, name: &str) -> Result<i32> {
    let rec = pool::claim(
        ctx,
        &ClaimRequest {
            pool: name.to_string(),
            owner_pid: args.owner_pid.clone(),
            ttl: args.ttl.clone(),
        },
    )
    .await?;
    if let Some(o) = rec.owner.filter(|o| !o.is_alive()) {
        ctx.reporter
            .warn(&super::up::owner_gone(&rec, o.pid, ctx.cfg.watch_owner));
    }
    match format {
        Format::Json => output::print_json(&rec)?,
        Format::Table => output::print_line(&rec.id.to_string())?,
    }
    Ok(0)
}

/// `pool create`: keeps the definition, then fills the pool (or starts its filler, with
/// `--no-wait`). When the first sandbox cannot be made, the definition is dropped again.
async fn create_pool(
    ctx: &Ctx,
    global: &GlobalArgs,
    format: Format,
    a: &PoolCreateArgs,
) -> Result<i32> {
    pool::check_name(&a.pool_name)?;
    let n = &a.pool_name;
    let refused = [
        (
            a.up.name.is_some() || a.up.reuse,
            "--name or --reuse: a pool's sandboxes are named by their IDs".to_string(),
        ),
        (
            a.up.parent.is_some(),
            "--parent: a pool's sandboxes are top-level sandboxes".to_string(),
        ),
        (
            a.up.owner_pid.is_some() || a.up.ttl.is_some(),
            format!("--owner-pid or --ttl: the claimant gives the owner and lease (`up --pool {n} --owner-pid PID --ttl 30m`)"),
        ),
        (
            a.up.pool.is_some(),
            "--pool: a pool is made of new sandboxes, not of another pool's".to_string(),
        ),
        // Every sandbox of the pool would ask for the same host port: one could have it.
        (
            a.size > 1 && a.up.publish.iter().any(|p| p.contains(':')),
            format!("--publish with a host port and --size {}: the pool's sandboxes cannot all have that one port; publish PORT alone (a free host port each), or use --size 1", a.size),
        ),
    ];
    if let Some((_, why)) = refused.iter().find(|(given, _)| *given) {
        return Err(Error::Usage(format!("pool create takes no {why}")).into());
    }
    // Read now as the filler will: a bad option fails here, not in the background, and the
    // configuration in force is kept for the fillers to check theirs against.
    let (_, made) = maker(
        global.config.as_deref(),
        &a.up,
        &a.pool_name,
        Arc::new(Silent),
    )?;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let def = PoolDef {
        name: a.pool_name.clone(),
        size: a.size,
        up: serde_json::to_value(&a.up).context("cannot keep up's options")?,
        config: global.config.clone(),
        cwd,
        env: pool::kept_env(),
        config_in_force: Some(pool::config_in_force(&made.cfg)),
        created_at: now_rfc3339(),
        last_error: None,
    };
    pool::add(ctx, def.clone())?;
    if a.no_wait {
        pool::spawn_filler(ctx, &def)?;
        return printed(ctx, format, &def.name, 0);
    }
    let code = fill_foreground(ctx, &def).await?;
    let state = ctx.store.load()?;
    if pool::waiting(&state, &def.name) == (0, 0) {
        // Not one sandbox: the pool is not kept (its filler said why on stderr).
        pool::remove_def(ctx, &def.name)?;
        return Ok(if code == 0 { 1 } else { code });
    }
    printed(ctx, format, &def.name, code)
}

/// Prints the pool `name` as `pool create` does (its name, or its `pool ls` entry as JSON) and
/// returns `code`.
fn printed(ctx: &Ctx, format: Format, name: &str, code: i32) -> Result<i32> {
    match format {
        Format::Json => {
            list_some(ctx, format, Some(name))?;
        }
        Format::Table => output::print_line(name)?,
    }
    Ok(code)
}

/// `pool fill NAME`: runs the pool's filler ([`pool::filler_command`]) with this process's
/// standard error and waits for it; returns its exit status.
async fn fill_foreground(ctx: &Ctx, def: &PoolDef) -> Result<i32> {
    let mut cmd = pool::filler_command(ctx, def)?;
    cmd.arg("--worker")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true);
    let status = cmd
        .status()
        .await
        .with_context(|| format!("cannot start the filler of pool {}", def.name))?;
    Ok(status.code().unwrap_or(1))
}

/// The request and the context a filler of pool `name` makes its sandboxes with: `up`'s
/// options `args` and the configuration layers of `config` (`--config`) and of this directory
/// and environment, as `up` would read them; warnings go to `reporter`.
fn maker(
    config: Option<&std::path::Path>,
    args: &UpArgs,
    name: &str,
    reporter: Arc<dyn crate::report::Reporter>,
) -> Result<(crate::sandbox::create::UpRequest, Ctx)> {
    let mut req = super::up::request_with_devcontainer(args)?;
    req.pool_member = Some(name.to_string());
    let layers = crate::sandbox::trust::layers_for_new_sandboxes(config, &*reporter)?;
    let made = Ctx::from_layers(&layers, &req.config_flags(), reporter)?;
    Ok((req, made))
}

/// The filler itself (`pool fill NAME --worker`): makes sandboxes for the pool with its `up`
/// options until as many wait as its size; returns at once when another filler holds the
/// pool's lock, and stops when the pool is removed. Exit status 1 when a sandbox could not be
/// made (the error is kept in the pool's definition).
async fn work(ctx: &Ctx, name: &str, progress: Arc<CliReporter>) -> Result<i32> {
    let mut first = true;
    loop {
        let Some(lock) = ctx.store.try_lock_named(&pool::lock_name(name))? else {
            if first {
                // `pool fill` run by hand while a filler works: nothing to do, but say why.
                ctx.reporter.note(&format!(
                    "pool {name}: another filler is at work; it fills the pool"
                ));
            }
            return Ok(0);
        };
        first = false;
        let def = pool::get(ctx, name)?;
        let args: UpArgs =
            serde_json::from_value(def.up.clone()).map_err(|e| Error::StateCorrupt {
                path: ctx.store.dir().join(pool::FILE),
                reason: format!("pool {name}'s up options do not parse: {e}"),
            })?;
        let (req, made) = maker(def.config.as_deref(), &args, name, progress.clone())?;
        if def.config_in_force.as_ref() != Some(&pool::config_in_force(&made.cfg)) {
            let why = format!(
                "the configuration in force is no longer the one pool {name} was made with (a sandbox.toml or user configuration file changed, or is no longer trusted); `h9sandbox pool rm {name}` and `pool create` it again"
            );
            pool::set_error(ctx, name, Some(why.clone()))?;
            return Err(Error::Refused(why).into());
        }
        loop {
            let Ok(def) = pool::get(ctx, name) else {
                return Ok(0);
            };
            let (ready, starting) = pool::waiting(&ctx.store.load()?, name);
            if ready + starting >= def.size {
                break;
            }
            match create(&made, &req).await {
                Ok(rec) => {
                    // Removed meanwhile (`pool rm`): this one is not wanted either, unless a
                    // claim took it already (then it is its claimant's).
                    if pool::get(ctx, name).is_err() {
                        if pool::take_back(ctx, rec.id)? {
                            let id = rec.id.to_string();
                            let _ = crate::sandbox::down::take_down(ctx, &[id], false).await;
                        }
                        return Ok(0);
                    }
                    pool::set_error(ctx, name, None)?;
                    ctx.reporter.note(&format!(
                        "pool {name}: sandbox {} ready ({}/{})",
                        rec.short_id(),
                        ready + 1,
                        def.size
                    ));
                }
                Err(e) => {
                    pool::set_error(ctx, name, Some(format!("{e:#}")))?;
                    return Err(e.context(format!("pool {name} could not make a sandbox")));
                }
            }
        }
        drop(lock);
        // A claim between the last count and the unlock saw the lock held and started no one:
        // look once more.
        let def = pool::get(ctx, name)?;
        let (ready, starting) = pool::waiting(&ctx.store.load()?, name);
        if ready + starting >= def.size {
            return Ok(0);
        }
    }
}

/// One pool as `pool ls` prints it.
#[derive(Serialize)]
struct Listed<'a> {
    #[serde(flatten)]
    def: &'a PoolDef,
    ready: u32,
    starting: u32,
    /// Whether a filler works on the pool now.
    filling: bool,
    /// The work dir of the pool's sandboxes (`up --workdir`, from the pool's directory).
    workdir: std::path::PathBuf,
}

/// The work dir of the pool `def`'s sandboxes: its `--workdir`, from the directory `pool
/// create` ran in (that directory without one).
fn workdir_of(def: &PoolDef) -> std::path::PathBuf {
    let given = def
        .up
        .get("workdir")
        .and_then(|w| w.as_str())
        .map(std::path::PathBuf::from);
    match given {
        Some(w) => def.cwd.join(w),
        None => def.cwd.clone(),
    }
}

/// `pool ls`.
fn list(ctx: &Ctx, format: Format) -> Result<i32> {
    list_some(ctx, format, None)
}

/// `pool ls` of every pool, or with `only` of that one (`pool create`, `pool fill`).
fn list_some(ctx: &Ctx, format: Format, only: Option<&str>) -> Result<i32> {
    let mut defs = pool::all(ctx)?;
    defs.retain(|d| only.is_none_or(|n| n == d.name));
    let state = ctx.store.load()?;
    let listed: Vec<Listed> = defs
        .iter()
        .map(|def| {
            let (ready, starting) = pool::waiting(&state, &def.name);
            Ok(Listed {
                def,
                ready,
                starting,
                filling: pool::filler_running(ctx, &def.name)?,
                workdir: workdir_of(def),
            })
        })
        .collect::<Result<_>>()?;
    if format == Format::Json {
        output::print_json(&listed)?;
        return Ok(0);
    }
    let mut t = output::table(
        &[
            "NAME",
            "SIZE",
            "READY",
            "STARTING",
            "FILLER",
            "WORK DIR",
            "LAST ERROR",
        ],
        output::colour_enabled(),
    );
    for l in &listed {
        t.add_row(vec![
            l.def.name.clone(),
            l.def.size.to_string(),
            l.ready.to_string(),
            l.starting.to_string(),
            if l.filling { "working" } else { "-" }.to_string(),
            l.workdir.display().to_string(),
            l.def
                .last_error
                .as_ref()
                .map_or_else(|| "-".into(), |e| format!("{} ({})", e.message, e.at)),
        ]);
    }
    output::print_table(&t)?;
    Ok(0)
}

/// What `pool rm` removed of one pool.
#[derive(Serialize)]
struct RemovedPool {
    name: String,
    removed: Vec<String>,
}

/// `pool rm NAME...`: each definition first (so that no filler makes more), then the sandboxes
/// waiting in it, whatever their state. Errors: a pool that does not exist (the others are
/// removed all the same), a sandbox that could not be removed.
async fn remove(ctx: &Ctx, format: Format, names: &[String]) -> Result<i32> {
    let mut out = Vec::new();
    let mut missing = Vec::new();
    let mut first_err = None;
    for name in names {
        if !pool::remove_def(ctx, name)? {
            missing.push(name.clone());
            continue;
        }
        // A filler at work finishes the sandbox it is making, finds the pool gone and removes
        // that one itself: wait for it, so that nothing it makes outlives the pool.
        let deadline = std::time::Instant::now()
            + std::time::Duration::from_secs(ctx.cfg.start_timeout_secs + 60);
        while pool::filler_running(ctx, name)? && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let ids: Vec<String> = ctx
            .store
            .load()?
            .sandboxes
            .iter()
            .filter(|r| r.waits_in_pool(Some(name)))
            .map(|r| r.id.to_string())
            .collect();
        let report = crate::sandbox::down::take_down(ctx, &ids, false).await?;
        if let Some(e) = report.error {
            first_err.get_or_insert(e);
        }
        out.push(RemovedPool {
            name: name.clone(),
            removed: report.removed.iter().map(|r| r.id.to_string()).collect(),
        });
    }
    match format {
        Format::Json => output::print_json(&out)?,
        Format::Table => {
            for p in &out {
                output::print_line(&p.name)?;
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if !missing.is_empty() {
        return Err(Error::Usage(format!(
            "no pool {} in the state directory {}; `h9sandbox pool ls` lists them",
            missing.join(", "),
            ctx.store.dir().display()
        ))
        .into());
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use super::*;
    use clap::Parser;

    /// The options a pool keeps come back as given: every field of `up`'s arguments survives
    /// the JSON of `pools.json`.
    #[test]
    fn up_options_survive_the_pool_definition() {
        let cli = Cli::try_parse_from([
            "h9sandbox",
            "up",
            "--workdir",
            "w",
            "--workdir-mode",
            "copy",
            "--engine",
            "docker",
            "--constraint",
            "a==b",
            "--placement-timeout",
            "9s",
            "--image",
            "i",
            "--cpus",
            "2",
            "--memory",
            "1g",
            "--pids-limit",
            "9",
            "--network",
            "none",
            "--runtime",
            "runc",
            "--caps",
            "minimal",
            "--label",
            "k=v",
            "--bootstrap",
            "true",
            "--bootstrap-required",
            "--bootstrap-timeout",
            "90s",
            "--user",
            "root",
            "--devcontainer",
            "dc",
            "-p",
            "8080",
        ])
        .unwrap();
        let Command::Up(args) = cli.command else {
            panic!("not up")
        };
        let kept = serde_json::to_value(&args).unwrap();
        let back: UpArgs = serde_json::from_value(kept.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), kept);
        assert_eq!(format!("{back:?}"), format!("{args:?}"));
        // A definition written by an older h9sandbox (fewer keys) still reads.
        let old: UpArgs = serde_json::from_str(r#"{"image": "i"}"#).unwrap();
        assert_eq!(old.image.as_deref(), Some("i"));
    }
}
