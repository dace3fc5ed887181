//! h9sandbox: hardened, throw-away container sandboxes for AI agents, shell scripts and CI jobs.
//!
//! The binary is a thin wrapper around [`run`]. The layers, top to bottom (each module imports
//! only from the layers below it; see ARCHITECTURE.md):
//! - front ends: [`cli`] (the command line: clap types, one module per subcommand, rendering,
//!   the spinner) and [`mcp`] (the Model Context Protocol server), apart from each other;
//! - the core: [`sandbox`] (create, exec, bootstrap, files, list, down, reap, renew over a
//!   context, printing nothing);
//! - below it: [`engine`] (the container engine behind the [`engine::Environment`] trait),
//!   [`state`] (the locked state file), [`config`] (layered configuration), [`workdir_fs`] (reading
//!   and writing inside a work dir, safe against planted symlinks), [`lease`] (owner processes,
//!   TTLs and the reaper's judgement);
//! - [`channel`]: the host's end of the agent protocol (the ways the core reaches a sandbox's
//!   agent), below the core;
//! - the in-container side: [`agent`] (PID 1, the exec agent, the set-ID filter), importing
//!   nothing of the crate but the contract;
//! - [`contract`]: what both sides agree on (the agent protocol, the fixed paths in every
//!   container), importing nothing of the crate;
//! - leaves: [`types`] (plain shared types), [`error`] (typed errors and exit codes),
//!   [`report`] (the [`report::Reporter`] trait through which lower layers tell the front end
//!   what happens) and [`poll`] (waiting, with a deadline, for what nobody announces).
//!
//! The library's public surface is only what the binary and the integration tests need ([`run`],
//! the clap types, the configuration keys, the channel's keys); everything else is `pub(crate)`
//! (the `unreachable_pub` lint keeps it so). These docs are for developers of h9sandbox and are
//! built with `--document-private-items`, so public items may link to private ones.
#![allow(rustdoc::private_intra_doc_links)]

pub(crate) mod agent;
pub mod channel;
pub mod cli;
pub mod config;
pub(crate) mod contract;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod lease;
pub(crate) mod mcp;
pub(crate) mod poll;
pub(crate) mod report;
pub(crate) mod sandbox;
pub(crate) mod state;
pub(crate) mod types;
pub(crate) mod workdir_fs;

/// Parses the command line, runs the subcommand and returns the process exit status.
pub fn run() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Inside a sandbox container, the same binary is PID 1 and the exec wrapper.
    if let Some(code) = agent::main(&args) {
        return code;
    }
    // A sandbox's owner watcher, started by `up` (it forks: before any thread exists).
    if let Some(code) = sandbox::watch::main_if_asked(&args) {
        return code;
    }
    cli::run()
}
