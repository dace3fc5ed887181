//! `h9sandbox cp SRC DST`: copy between a sandbox and this machine
//! ([`crate::sandbox::copy::copy`]); prints nothing (or what was copied, with `--format json`).

use anyhow::Result;

use super::output;
use super::{CpArgs, Format};
use crate::sandbox::copy::{copy, Side};
use crate::sandbox::Ctx;

/// Runs `cp`; returns 0.
pub(crate) async fn run(ctx: &Ctx, format: Format, args: &CpArgs) -> Result<i32> {
    let (src, dst) = (Side::parse(&args.src), Side::parse(&args.dst));
    // A signal ends the copy (its tool in the sandbox goes with the stream) and says so; what
    // arrived before stays, as with `docker cp` or `tar` interrupted.
    let copied = tokio::select! {
        biased;
        sig = crate::sandbox::interrupted() => {
            let partial = match args.dst.as_str() {
                "-" => "stdout got part of the stream".to_string(),
                dst => format!("{dst} may hold part of the copy: copy again, or remove it"),
            };
            return Err(anyhow::anyhow!("interrupted by {sig}; {partial}"));
        }
        r = copy(ctx, &src, &dst, args.user.as_deref()) => match r {
            // A reader of the stream that stopped early (`cp ID:D - | head`): its choice.
            Err(e) if args.dst == "-" && output::is_broken_pipe(&e) => return Ok(0),
            r => r?,
        },
    };
    if format == Format::Json {
        output::print_json(&copied)?;
    }
    Ok(0)
}
