//! `h9sandbox mcp`: parse the server's arguments, load the configuration (with `--image`), and
//! serve the tools over stdio ([`crate::mcp::serve`]).

use anyhow::Result;

use super::{load_layers, Cli, McpArgs};
use crate::config::Origin;
use crate::mcp::{serve, McpOptions};
use crate::report::Stderr;

/// Runs `mcp`: serves until the client disconnects or a signal arrives; returns 0.
pub(crate) async fn run(cli: &Cli, args: &McpArgs) -> Result<i32> {
    let verbose = cli.global.verbose > 0;
    let mut layers = load_layers(cli, &Stderr { verbose })?;
    if let Some(image) = &args.image {
        layers.set_str("image", image, Origin::Flag("--image".into()))?;
    }
    serve(McpOptions {
        layers,
        workdir: args.workdir.clone(),
        auto_up: args.auto_up,
        all_sandboxes: args.all_sandboxes,
        port_forward: args.port_forward,
        verbose,
    })
    .await
}
