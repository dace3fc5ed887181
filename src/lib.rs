//! h9sandbox: hardened, throw-away container sandboxes for AI agents, shell scripts and CI jobs.
//!
//! The binary is a thin wrapper around [`run`]. Modules, one per concern:
//! [`cli`] (clap types), [`config`] (layered configuration), [`state`] (the locked state file),
//! [`engine`] (the container engine behind the [`engine::Environment`] trait), [`lease`] (owner
//! processes, TTLs and the reaper's judgement), [`commands`]
//! (one module per subcommand), [`output`] (JSON, tables, colour) and [`error`] (exit codes).

pub mod cli;
pub mod commands;
pub mod config;
pub mod engine;
pub mod error;
pub mod lease;
pub mod output;
pub mod state;

use clap::Parser;

/// Parses the command line, runs the subcommand and returns the process exit status.
pub fn run() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if !e.use_stderr() {
                0 // --help, --version
            } else if args
                .iter()
                .skip(1)
                .find(|a| !a.to_string_lossy().starts_with('-'))
                .is_some_and(|a| error::reserves_child_statuses(&a.to_string_lossy()))
            {
                error::EXIT_OWN_FAILURE
            } else {
                error::EXIT_USAGE
            };
            let _ = e.print();
            return code;
        }
    };
    let name = cli.command.name();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("h9sandbox: error: cannot start the async runtime: {e}");
            return error::exit_code(name, &e.into());
        }
    };
    match runtime.block_on(commands::dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("h9sandbox: error: {e:#}");
            error::exit_code(name, &e)
        }
    }
}
