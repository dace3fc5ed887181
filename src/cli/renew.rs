//! `h9sandbox renew`: extend a sandbox's lease ([`crate::sandbox::renew`]); print its new end
//! (RFC 3339 UTC), or the record with `--format json`.

use anyhow::Result;

use super::output;
use super::{Format, RenewArgs};
use crate::sandbox::{renew, Ctx};

/// Runs `renew`; prints the new end of the lease (or the record as JSON).
pub(crate) async fn run(ctx: &Ctx, format: Format, args: &RenewArgs) -> Result<i32> {
    let rec = renew::extend(ctx, &args.sandbox.id, args.ttl.as_deref())?;
    match format {
        Format::Json => output::print_json(&rec)?,
        Format::Table => output::print_line(rec.expires_at.as_deref().unwrap_or_default())?,
    }
    Ok(0)
}
