//! The command-line front end: the clap types ([`args`]), one thin module per subcommand (parse
//! and convert its arguments, call the [`crate::sandbox`] core, render a table or JSON, return
//! the exit status), the rendering ([`output`]) and the spinner ([`progress`]).
//!
//! [`run()`] is the whole program: it parses the command line (a malformed one is a one-line
//! error), starts the async runtime, runs the subcommand and turns its result into the exit
//! status ([`crate::error::exit_code`]), printing an error once, with its cause chain.

pub mod args;
pub(crate) mod background;
pub(crate) mod bootstrap;
pub(crate) mod cp;
pub(crate) mod down;
pub(crate) mod edit;
pub(crate) mod exec;
pub(crate) mod forward;
pub(crate) mod generate;
pub(crate) mod lifecycle;
pub(crate) mod ls;
pub(crate) mod mcp;
pub(crate) mod output;
pub(crate) mod pool;
pub(crate) mod progress;
pub(crate) mod read;
pub(crate) mod reap;
pub(crate) mod renew;
pub(crate) mod run;
pub(crate) mod stats;
pub(crate) mod terminal;
pub(crate) mod trust;
pub(crate) mod up;
pub(crate) mod write;

pub use args::*;

use std::sync::Arc;

use anyhow::Result;
use clap::Parser;

use crate::config::Layers;
use crate::error;
use crate::report::Reporter;
use crate::sandbox::Ctx;
use progress::CliReporter;

/// Parses the command line, runs the subcommand and returns the process exit status.
pub fn run() -> i32 {
    generate::complete_if_asked();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e, &args),
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
    let result = runtime.block_on(dispatch(cli));
    if name == "mcp" {
        // Its input may be read by a blocking read on the runtime's thread pool, which nothing
        // can interrupt: waiting for it would keep a server told to stop (SIGTERM) alive.
        runtime.shutdown_background();
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "h9sandbox: error: {}",
                crate::report::printable(&format!("{e:#}"))
            );
            error::exit_code(name, &e)
        }
    }
}

/// Reports clap's error `e` for the command line `args` (`--help` and `--version` print and
/// succeed) and returns the exit status: 2, or 125 for the subcommands that pass their command's
/// statuses through.
fn usage_error(e: &clap::Error, args: &[std::ffi::OsString]) -> i32 {
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
            one_line_usage_error(e, sub.as_deref())
        );
    }
    code
}

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
    let help = match sub.filter(|s| Cli::is_subcommand(s)) {
        Some(s) => format!("h9sandbox {s} --help"),
        None => "h9sandbox --help".into(),
    };
    format!("{cause}; see `{help}`")
}

/// Whether `command` promises to act on SIGINT, SIGTERM and SIGHUP (kill the command's tree,
/// remove a temporary file or a half-made sandbox, end a session): those catch them before they
/// do anything ([`crate::sandbox::signals::install`]). The others keep the default action, so
/// Ctrl-C simply ends them.
fn acts_on_signals(command: &Command) -> bool {
    match command {
        Command::Up(_)
        | Command::Run(_)
        | Command::Bootstrap(_)
        | Command::Write(_)
        | Command::Edit(_)
        | Command::Cp(_)
        | Command::PortForward(_)
        | Command::Mcp(_)
        | Command::Pool(_) => true,
        Command::Exec(a) => !a.detach,
        Command::Ls(a) => a.watch,
        Command::Logs(a) => a.follow,
        _ => false,
    }
}

/// Runs the parsed command line; returns the exit status.
async fn dispatch(cli: Cli) -> Result<i32> {
    if acts_on_signals(&cli.command) {
        // First, before the configuration is read or anything is created: a signal from now on
        // is never lost, nor does its default action kill us midway.
        crate::sandbox::signals::install();
    }
    let format = cli.global.format();
    let progress = Arc::new(CliReporter::new(format, cli.global.verbose > 0));
    let ctx = |flags: &[(&str, Option<String>, &str)]| -> Result<Ctx> {
        let layers = load_layers(&cli, &*progress)?;
        Ctx::from_layers(&layers, flags, progress.clone())
    };
    match &cli.command {
        Command::Up(a) if a.pool.is_some() => {
            pool::claim(&ctx(&[])?, format, a, a.pool.as_deref().unwrap_or_default()).await
        }
        Command::Up(a) => {
            let req = up::request_with_devcontainer(a)?;
            up::run(&ctx(&req.config_flags())?, format, &progress, &req).await
        }
        Command::Exec(a) => exec::run(&ctx(&[])?, format, a).await,
        Command::Shell(a) => terminal::shell(&ctx(&[])?, format, a).await,
        Command::PortForward(a) => forward::run(&ctx(&[])?, format, a).await,
        Command::Stats(a) => stats::run(&ctx(&[])?, format, a).await,
        Command::Ps(a) => background::ps(&ctx(&[])?, format, a).await,
        Command::Logs(a) => background::logs(&ctx(&[])?, format, a).await,
        Command::Kill(a) => background::kill(&ctx(&[])?, format, a).await,
        Command::Bootstrap(a) => {
            let timeout = a.timeout.map(|t| crate::types::ceil_secs(t).to_string());
            let ctx = ctx(&[("bootstrap_timeout_secs", timeout, "--timeout")])?;
            bootstrap::run(&ctx, format, &progress, a).await
        }
        Command::Down(a) => down::run(&ctx(&[])?, format, a).await,
        Command::Ls(a) => ls::run(&ctx(&[])?, format, a).await,
        // Needs neither configuration nor state: works anywhere, e.g. in a packaging script.
        Command::Generate(a) => generate::run(a),
        Command::Read(a) => read::run(&ctx(&[])?, format, a).await,
        Command::Write(a) => write::run(&ctx(&[])?, format, a).await,
        Command::Edit(a) => edit::run(&ctx(&[])?, format, a).await,
        Command::Reap(a) => reap::run(&ctx(&[])?, format, a).await,
        Command::Renew(a) => renew::run(&ctx(&[])?, format, a).await,
        Command::Cp(a) => cp::run(&ctx(&[])?, format, a).await,
        Command::Trust(a) => trust::run(&ctx(&[])?, format, a).await,
        Command::Pool(a) => pool::run(&ctx(&[])?, &cli.global, format, progress.clone(), a).await,
        Command::Stop(_)
        | Command::Start(_)
        | Command::Pause(_)
        | Command::Resume(_)
        | Command::Snapshot(_) => lifecycle::run(&ctx(&[])?, format, &cli.command).await,
        Command::Run(a) => {
            let req = run::up_request(a)?;
            run::run(&ctx(&req.config_flags())?, format, &progress, a, &req).await
        }
        Command::Mcp(a) => mcp::run(&cli, a).await,
    }
}

/// The configuration layers below the flags: file and environment (warning through `reporter`
/// about `H9SANDBOX_*` variables that are no configuration key). Only the subcommands that make
/// sandboxes (`up`, `mcp`) read the project file `./sandbox.toml`, and only a trusted one
/// ([`crate::sandbox::trust::layers_for_new_sandboxes`]): the commands on existing sandboxes use what `up`
/// recorded, and nothing a sandbox writes there can change or break them. For the same reason a
/// bad value of a key only new sandboxes use (`H9SANDBOX_CPUS=abc`) fails only the commands
/// that make sandboxes (`up`, `run`, `mcp`); the others warn and go on
/// ([`Layers::load_for_existing`]).
pub fn load_layers(cli: &Cli, reporter: &dyn Reporter) -> Result<Layers> {
    let explicit = cli.global.config.as_deref();
    let layers = match cli.command {
        Command::Up(_)
        | Command::Mcp(_)
        | Command::Pool(PoolArgs {
            command: PoolCommand::Create(_),
        }) => crate::sandbox::trust::layers_for_new_sandboxes(explicit, reporter)?,
        Command::Run(_) => Layers::load(explicit)?,
        _ => Layers::load_for_existing(explicit)?,
    };
    for w in &layers.warnings {
        reporter.warn(w);
    }
    for var in Layers::unknown_env_vars(std::env::vars().map(|(k, _)| k)) {
        let hint = nearest_key(&var)
            .map(|k| format!("did you mean {k}? "))
            .unwrap_or_default();
        reporter.warn(&format!(
            "environment variable {var} is not a configuration key; ignored ({hint}the variables are listed under Environment in `h9sandbox --help` and ENVIRONMENT in `man h9sandbox`)"
        ));
    }
    Ok(layers)
}

/// The `H9SANDBOX_*` variable closest to `var` (at most two edits away), for a typo's warning.
fn nearest_key(var: &str) -> Option<String> {
    crate::config::KEYS
        .iter()
        .map(|k| format!("H9SANDBOX_{}", k.name.to_ascii_uppercase()))
        .chain(std::iter::once("H9SANDBOX_CONFIG".to_string()))
        .map(|k| (strsim::levenshtein(var, &k), k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_mistyped_variable_is_matched_to_its_key() {
        assert_eq!(
            super::nearest_key("H9SANDBOX_MEMROY").as_deref(),
            Some("H9SANDBOX_MEMORY")
        );
        assert_eq!(super::nearest_key("H9SANDBOX_WHATEVER"), None);
    }
}
