//! h9sandbox: hardened, throw-away container sandboxes for AI agents, shell scripts and CI jobs.
//!
//! The binary is a thin wrapper around [`run`]. Modules, one per concern:
//! [`cli`] (clap types), [`config`] (layered configuration), [`state`] (the locked state file),
//! [`engine`] (the container engine behind the [`engine::Environment`] trait), [`lease`] (owner
//! processes, TTLs and the reaper's judgement), [`commands`] (one module per subcommand),
//! [`files`] (reading and writing inside a work dir, safe against planted symlinks), [`output`]
//! (JSON, tables, colour), [`progress`] (the spinner on stderr), [`mcp`] (the Model Context
//! Protocol server) and [`error`] (exit codes).

pub mod cli;
pub mod commands;
pub mod config;
pub mod engine;
pub mod error;
pub mod files;
pub mod lease;
pub mod mcp;
pub mod output;
pub mod progress;
pub mod report;
pub mod state;
pub mod types;

use clap::Parser;

/// Condenses clap's multi-line usage error into one line: the cause, clap's tip if any, and
/// where to read more.
fn one_line_usage_error(e: &clap::Error, sub: Option<&str>) -> String {
    let text = e.render().to_string();
    let cause = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let cause = cause.trim_start_matches("error: ");
    let help = match sub.filter(|s| cli::Cli::is_subcommand(s)) {
        Some(s) => format!("h9sandbox {s} --help"),
        None => "h9sandbox --help".into(),
    };
    format!("{cause}; see `{help}`")
}

/// Parses the command line, runs the subcommand and returns the process exit status.
pub fn run() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            let sub = args
                .iter()
                .skip(1)
                .map(|a| a.to_string_lossy())
                .find(|a| !a.starts_with('-'));
            if !e.use_stderr() {
                let _ = e.print(); // --help, --version
                return 0;
            }
            let code = if sub.as_deref().is_some_and(error::reserves_child_statuses) {
                error::EXIT_OWN_FAILURE
            } else {
                error::EXIT_USAGE
            };
            if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                let _ = e.print();
            } else {
                eprintln!(
                    "h9sandbox: error: {}",
                    one_line_usage_error(&e, sub.as_deref())
                );
            }
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
    let result = runtime.block_on(commands::dispatch(cli));
    if name == "mcp" {
        // Its input may be read by a blocking read on the runtime's thread pool, which nothing
        // can interrupt: waiting for it would keep a server told to stop (SIGTERM) alive.
        runtime.shutdown_background();
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("h9sandbox: error: {e:#}");
            error::exit_code(name, &e)
        }
    }
}
