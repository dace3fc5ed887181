//! `h9sandbox port-forward ID [LOCAL:]PORT…` ([`crate::sandbox::forward`]): listens, says where
//! (kubectl's `Forwarding from 127.0.0.1:8000 -> 8000` lines, or one JSON line with
//! `--format json`, printed once every listener is bound, so a caller may connect as soon as it
//! has read it), registers itself in the state directory, and forwards until Ctrl-C (or
//! SIGTERM, SIGHUP), `--timeout`, or its sandbox's end (`down`), each an ordinary end: exit 0.

use anyhow::Result;

use super::output;
use super::{Format, PortForwardArgs};
use crate::sandbox::forward::{self, Listening, RegisteredForward, Registry};
use crate::sandbox::Ctx;

/// Runs `port-forward`; returns 0 once it ended as asked.
pub(crate) async fn run(ctx: &Ctx, format: Format, args: &PortForwardArgs) -> Result<i32> {
    let forwarder = forward::bind(ctx, &args.sandbox.id, &args.ports, forward::Asker::Cli).await?;
    let bound = forwarder.bound();
    let id = forwarder.record.id;
    let _registry = Registry::new(
        ctx,
        "port-forward",
        bound
            .iter()
            .map(|b| RegisteredForward {
                sandbox: id,
                bound: b.clone(),
            })
            .collect(),
    )?;
    match format {
        Format::Json => output::print_line(&serde_json::to_string(&Listening {
            id,
            forwards: bound.clone(),
        })?)?,
        Format::Table => {
            for b in &bound {
                output::print_line(&format!("Forwarding from {} -> {}", b.address, b.port))?;
            }
        }
    }
    let timeout = args.timeout.filter(|t| !t.is_zero());
    let stop = async {
        let deadline = async {
            match timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            sig = crate::sandbox::interrupted() => format!("ended by {sig}"),
            _ = deadline => format!(
                "ended after {} (--timeout)",
                crate::types::show_duration(timeout.unwrap_or_default())
            ),
        }
    };
    let why = forwarder.serve(ctx, stop).await;
    ctx.reporter.note(&format!(
        "port forwarding to sandbox {}: {why}",
        &id.simple().to_string()[..12]
    ));
    Ok(0)
}
