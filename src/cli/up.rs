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
pub fn request(args: &UpArgs) -> UpRequest {
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
        labels: args.labels.clone(),
        parent: args.parent.clone(),
        bootstrap: args.bootstrap.clone(),
        bootstrap_required: args.bootstrap_required,
        bootstrap_timeout: args.bootstrap_timeout,
        user: args.user.clone(),
        owner_pid: args.owner_pid.clone(),
        ttl: args.ttl.clone(),
        within: None,
        reuse: args.reuse,
    }
}

/// Runs `up` (`ctx` built with [`UpRequest::config_flags`] of `req`); clears the spinner of
/// `progress`, prints the ID (or the record as JSON) and returns 0.
pub async fn run(
    ctx: &Ctx,
    format: Format,
    progress: &CliReporter,
    req: &UpRequest,
) -> Result<i32> {
    let created = create(ctx, req).await;
    progress.finish();
    let rec = created?;
    match format {
        Format::Json => output::print_json(&rec)?,
        Format::Table => output::print_line(&rec.id.to_string())?,
    }
    Ok(0)
}
