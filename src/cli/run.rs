//! `h9sandbox run`: create a sandbox, run one command in it, remove it, whatever happens (the
//! `docker run --rm` of sandboxes); exit with the command's status.

use anyhow::Result;

use super::output;
use super::progress::CliReporter;
use super::{Format, RunArgs};
use crate::sandbox::create::create;
use crate::sandbox::down::take_down;
use crate::sandbox::exec::ExecResult;
use crate::sandbox::exec::{execute, ExecRequest, Sink};
use crate::sandbox::Ctx;

/// `run --format json` document: the sandbox's ID and the command's result.
#[derive(Debug, serde::Serialize)]
pub(crate) struct RunJson {
    /// The sandbox's ID (removed by now).
    pub id: String,
    /// The command's result, as `exec --format json` gives it.
    #[serde(flatten)]
    pub exec: ExecResult,
}

/// The `up` request of `run`: `args`' up options, tied to this process unless told otherwise
/// (so that `reap` removes the sandbox if `run` is killed with SIGKILL).
pub(crate) fn up_request(args: &RunArgs) -> anyhow::Result<crate::sandbox::create::UpRequest> {
    let mut req = super::up::request_with_devcontainer(&args.up)?;
    req.one_command = true;
    if req.owner_pid.is_none() {
        req.owner_pid = Some(std::process::id().to_string());
    }
    Ok(req)
}

/// Removes the Failed records this process made: a `run` leaves nothing behind, not even the
/// record of a sandbox that failed to start (which `up` keeps to show why).
async fn drop_my_failed_records(ctx: &Ctx) {
    let me = crate::state::ProcessRef::current();
    let Ok(state) = ctx.store.load() else {
        return;
    };
    let ids: Vec<String> = state
        .sandboxes
        .iter()
        .filter(|r| r.creator == me && r.state == crate::state::Lifecycle::Failed)
        .map(|r| r.id.to_string())
        .collect();
    if !ids.is_empty() {
        if let Err(e) = take_down(ctx, &ids, false).await {
            ctx.reporter.warn(&format!(
                "{e:#}; `h9sandbox reap` removes the failed sandbox"
            ));
        }
    }
}

/// Runs `run` (`ctx` built with the configuration flags of `req`, its [`up_request`]); returns
/// the command's exit status.
pub(crate) async fn run(
    ctx: &Ctx,
    format: Format,
    progress: &CliReporter,
    args: &RunArgs,
    req: &crate::sandbox::create::UpRequest,
) -> Result<i32> {
    super::exec::refuse_option_as_command("run", &args.command)?;
    super::exec::refuse_combined_without_json("run", args.combined, format)?;
    let env = super::exec::env_assignments(&args.env, |k| std::env::var_os(k))?;
    let created = match &args.up.pool {
        // A sandbox of a warm pool: claimed at once, removed after the command as any.
        Some(pool) => {
            let claim = crate::sandbox::pool::ClaimRequest {
                pool: pool.clone(),
                owner_pid: req.owner_pid.clone(),
                ttl: req.ttl.clone(),
            };
            crate::sandbox::pool::claim(ctx, &claim).await
        }
        None => create(ctx, req).await,
    };
    progress.finish();
    let rec = match created {
        Ok(rec) => rec,
        Err(e) => {
            drop_my_failed_records(ctx).await;
            // A signal that stopped `up` midway (say, during the bootstrap) ends `run` as it
            // would have ended the command: 128+N, not 125 (the sandbox is gone either way).
            if let Some(sig) = crate::sandbox::signals::received() {
                crate::report::eprintln(&format!("h9sandbox: error: {e:#}"));
                return Ok(sig.exit_status());
            }
            return Err(e);
        }
    };
    let req = ExecRequest {
        id: rec.id.to_string(),
        cwd: args.cwd.clone(),
        user: None,
        env,
        timeout: args.timeout,
        interactive: args.interactive,
        max_output: args.max_output,
        command: args.command.clone(),
        argv: false,
    };
    let sink = match format {
        Format::Json => Sink::Capture(args.max_output),
        Format::Table => Sink::Forward,
    };
    let mut unread = super::exec::UnreadStdin::default();
    unread.check(args.interactive);
    let done = execute(ctx, &req, sink, std::future::pending()).await;
    unread.check(args.interactive);
    // Removed whatever happened to the command.
    let removed = take_down(ctx, &[rec.id.to_string()], false).await;
    let done = done?;
    let out = &done.outcome;
    if let Some(line) = super::exec::ended_message(out, done.timeout, &done.record, &args.command) {
        crate::report::eprintln(&line);
    }
    if out.oom_killed {
        ctx.reporter.warn(&super::exec::oom_message(&done.record));
    }
    if format == Format::Json {
        output::print_json(&RunJson {
            id: rec.id.to_string(),
            exec: ExecResult::of(out, args.combined),
        })?;
    }
    match removed {
        Ok(r) => {
            if let Some(e) = r.error {
                ctx.reporter.warn(&format!(
                    "{e:#}; `h9sandbox reap` removes the sandbox (its owner, this process, has exited)"
                ));
            }
        }
        Err(e) => ctx.reporter.warn(&format!("{e:#}")),
    }
    Ok(out.exit_code)
}
