//! `h9sandbox up`: create a sandbox ([`crate::sandbox::create`]) and print its ID, or its record
//! with `--format json`. On a terminal (table format) a spinner on stderr shows the step `up` is
//! at.

use anyhow::Result;

use super::output;
use super::progress::CliReporter;
use super::{Format, UpArgs};
use crate::sandbox::create::{create, UpRequest};
use crate::sandbox::Ctx;

/// The core's request for `up`'s arguments.
pub(crate) fn request(args: &UpArgs) -> UpRequest {
    UpRequest {
        workdir: args.workdir.clone(),
        image: args.image.clone(),
        name: args.name.clone(),
        cpus: args.cpus.clone(),
        memory: args.memory.clone(),
        pids_limit: args.pids_limit.clone(),
        network: args.network,
        allow: args.allow.clone(),
        runtime: args.runtime.clone(),
        caps: args.caps,
        labels: args.labels.clone(),
        parent: args.parent.clone(),
        bootstrap: args.bootstrap.clone(),
        bootstrap_required: args.bootstrap_required,
        bootstrap_timeout: args.bootstrap_timeout.map(crate::types::ceil_secs),
        user: args.user.clone(),
        owner_pid: args.owner_pid.clone(),
        ttl: args.ttl.clone(),
        within: None,
        reuse: args.reuse,
        one_command: false,
        devcontainer: None,
        build: None,
        publish: args.publish.clone(),
        workdir_mode: args.workdir_mode,
        engine: args.engine.clone(),
        constraints: args.constraints.clone(),
        placement_timeout: args.placement_timeout.clone(),
        pool_member: None,
    }
}

/// [`request`], with the devcontainer.json of `--devcontainer` read and applied
/// ([`crate::sandbox::devcontainer::apply`]), and the build of `--build` named
/// ([`crate::sandbox::build::spec_for`]: its image is the sandbox's).
pub(crate) fn request_with_devcontainer(args: &UpArgs) -> Result<UpRequest> {
    let mut req = request(args);
    if let Some(path) = &args.devcontainer {
        crate::sandbox::devcontainer::apply(&mut req, path.as_deref())?;
    }
    if let Some(dir) = &args.build {
        let spec = crate::sandbox::build::spec_for(dir, args.dockerfile.as_deref())?;
        req.image = Some(spec.tag.clone());
        req.build = Some(spec);
    }
    Ok(req)
}

/// The warning when the owner process (`--owner-pid`) of the new sandbox `rec` has exited
/// before `up` returned: its owner watcher removes it at once (`watched`), or else the next
/// `reap` (or anyone's `up`).
pub(crate) fn owner_gone(rec: &crate::state::Record, pid: u32, watched: bool) -> String {
    let fate = match watched {
        true => "so its owner watcher removes the sandbox in a moment",
        false => "so the next `h9sandbox reap` or `up` removes the sandbox",
    };
    format!(
        "the owner of sandbox {} (--owner-pid, PID {pid}) has already exited, {fate}; give the PID of a process that outlives its use (in a Makefile recipe, make's own: --owner-pid $$PPID), or use --ttl",
        rec.short_id()
    )
}

/// Runs `up` (`ctx` built with [`UpRequest::config_flags`] of `req`); clears the spinner of
/// `progress`, prints the ID (or the record as JSON) and returns 0.
pub(crate) async fn run(
    ctx: &Ctx,
    format: Format,
    progress: &CliReporter,
    req: &UpRequest,
) -> Result<i32> {
    let created = create(ctx, req).await;
    progress.finish();
    let rec = created?;
    if let Some(o) = rec.owner.filter(|o| !o.is_alive()) {
        ctx.reporter
            .warn(&owner_gone(&rec, o.pid, ctx.cfg.watch_owner));
    }
    match format {
        Format::Json => output::print_json(&rec)?,
        Format::Table => output::print_line(&rec.id.to_string())?,
    }
    Ok(0)
}
