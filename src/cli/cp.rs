//! `h9sandbox cp SRC DST`: copy between a sandbox and this machine
//! ([`crate::sandbox::copy::copy`]); prints nothing (or what was copied, with `--format json`).

use anyhow::Result;

use super::output;
use super::{CpArgs, Format};
use crate::sandbox::copy::{copy, Side};
use crate::sandbox::Ctx;

/// Runs `cp`; returns 0.
pub async fn run(ctx: &Ctx, format: Format, args: &CpArgs) -> Result<i32> {
    let (src, dst) = (Side::parse(&args.src), Side::parse(&args.dst));
    let copied = copy(ctx, &src, &dst, args.user.as_deref()).await?;
    if format == Format::Json {
        output::print_json(&copied)?;
    }
    Ok(0)
}
