//! The integration tests, one binary (as uv's `tests/it` and just's `tests/lib.rs`): every area is
//! a module, so the suite builds once and its tests run in parallel in one process. A module is
//! chosen by filter: `cargo test --test it core::` runs the tests of `core.rs`.
//!
//! They drive the built binary against the real engine ([`common`] is the harness).

#[macro_use]
mod common;

mod agent;
mod bootstrap;
mod caps;
mod core;
mod deepagents;
mod devcontainer;
mod docs;
mod egress;
mod engines;
mod files;
mod files_as_user;
mod first_hour;
mod generated;
mod harbor;
mod inspect;
mod interactive;
mod lifecycle;
mod mcp;
mod owner;
mod pool;
mod progress;
mod project_file;
mod reap;
mod remote;
mod security;
mod state_dir;
mod subsandbox;
mod swarm;
