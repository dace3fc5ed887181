//! `h9sandbox stop`, `start`, `pause`, `resume` and `snapshot`
//! ([`crate::sandbox::lifecycle`]): print the sandbox's ID (the record with `--format json`), or
//! for `snapshot` the image made.

use anyhow::Result;

use super::output;
use super::{Command, Format};
use crate::sandbox::lifecycle;
use crate::sandbox::Ctx;

/// Runs one of the lifecycle subcommands in `command`; returns 0.
pub(crate) async fn run(ctx: &Ctx, format: Format, command: &Command) -> Result<i32> {
    let rec = match command {
        Command::Stop(a) => lifecycle::stop(ctx, &a.sandbox.id).await?,
        Command::Start(a) => lifecycle::start(ctx, &a.sandbox.id).await?,
        Command::Pause(a) => lifecycle::pause(ctx, &a.sandbox.id).await?,
        Command::Resume(a) => lifecycle::resume(ctx, &a.sandbox.id).await?,
        Command::Snapshot(a) => {
            let snap = lifecycle::snapshot(ctx, &a.sandbox.id, &a.tag).await?;
            match format {
                Format::Json => output::print_json(&snap)?,
                Format::Table => output::print_line(&snap.image)?,
            }
            return Ok(0);
        }
        other => unreachable!("{} is no lifecycle subcommand", other.name()),
    };
    match format {
        Format::Json => output::print_json(&rec)?,
        Format::Table => output::print_line(&rec.id.to_string())?,
    }
    Ok(0)
}
