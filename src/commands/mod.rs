//! One module per subcommand, and the context they share ([`Ctx`]).

pub mod bootstrap;
pub mod down;
pub mod edit;
pub mod exec;
pub mod generate;
pub mod ls;
pub mod mcp;
pub mod read;
pub mod reap;
pub mod renew;
pub mod up;
pub mod write;

use std::sync::Arc;

use anyhow::Result;

use crate::cli::{Cli, Command, Format};
use crate::config::{Config, Layers, Origin};
use crate::engine::{AnyEngine, EngineKind, Environment};
use crate::files::WorkDir;
use crate::progress::CliReporter;
use crate::report::Reporter;
use crate::state::{Record, Store};

impl Command {
    /// The subcommand's name, as typed.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Up(_) => "up",
            Command::Exec(_) => "exec",
            Command::Bootstrap(_) => "bootstrap",
            Command::Down(_) => "down",
            Command::Ls(_) => "ls",
            Command::Generate(_) => "generate",
            Command::Read(_) => "read",
            Command::Write(_) => "write",
            Command::Edit(_) => "edit",
            Command::Reap(_) => "reap",
            Command::Renew(_) => "renew",
            Command::Mcp(_) => "mcp",
        }
    }
}

/// What every subcommand works with: the configuration, the state store, the engine, the format.
pub struct Ctx {
    /// Effective configuration.
    pub cfg: Config,
    /// The state file of `cfg.state_dir`.
    pub store: Store,
    /// The configured engine (config `engine`), which `up` creates sandboxes with. Commands on
    /// an existing sandbox use [`Ctx::engine_for`] its record instead.
    pub engine: AnyEngine,
    /// Output format.
    pub format: Format,
    /// `-v` count.
    pub verbose: u8,
    /// Where warnings, notes, steps and `-v` command lines go.
    pub reporter: Arc<dyn Reporter>,
}

impl Ctx {
    /// Loads the configuration (with `flags` as the top layer: key, value, flag name) and opens
    /// the state store.
    pub fn new(cli: &Cli, flags: &[(&str, Option<String>, &str)]) -> Result<Ctx> {
        let reporter = Arc::new(CliReporter::new(
            cli.global.format(),
            cli.global.verbose > 0,
        ));
        let layers = Ctx::load_layers(cli, &*reporter)?;
        Ctx::from_layers(
            &layers,
            flags,
            cli.global.format(),
            cli.global.verbose,
            reporter,
        )
    }

    /// The configuration layers below the flags: file and environment (warning on stderr about
    /// `H9SANDBOX_*` variables that are no configuration key). The commands that clean up load a
    /// project file leniently ([`Layers::load_lenient`]).
    pub fn load_layers(cli: &Cli, reporter: &dyn Reporter) -> Result<Layers> {
        // The commands that clean up must work whatever a sandbox wrote into ./sandbox.toml.
        let cleanup = matches!(
            cli.command,
            Command::Down(_) | Command::Reap(_) | Command::Ls(_) | Command::Renew(_)
        );
        let layers = if cleanup {
            Layers::load_lenient(cli.global.config.as_deref(), reporter)?
        } else {
            Layers::load(cli.global.config.as_deref())?
        };
        for var in Layers::unknown_env_vars(std::env::vars().map(|(k, _)| k)) {
            reporter.warn(&format!(
                "environment variable {var} is not a configuration key; ignored (see sandbox.toml.example)"
            ));
        }
        Ok(layers)
    }

    /// The context of `layers` with `flags` on top (key, value, flag name), `format` and `-v`
    /// count `verbose`. Front ends that create several contexts from one configuration (the MCP
    /// server: one per `sandbox_up` with its own limits) load the layers once.
    pub fn from_layers(
        layers: &Layers,
        flags: &[(&str, Option<String>, &str)],
        format: Format,
        verbose: u8,
        reporter: Arc<dyn Reporter>,
    ) -> Result<Ctx> {
        let mut layers = layers.clone();
        for (key, value, flag) in flags {
            if let Some(v) = value {
                layers.set_str(key, v, Origin::Flag((*flag).to_string()))?;
            }
        }
        let cfg = layers.resolve()?;
        let store = Store::open(&cfg.state_dir()?)?;
        let engine = AnyEngine::for_kind(cfg.engine, &cfg, store.dir(), &reporter);
        Ok(Ctx {
            cfg,
            store,
            engine,
            format,
            verbose,
            reporter,
        })
    }

    /// The engine `kind`: the configured one, or another as [`AnyEngine::for_kind`] builds it.
    pub fn engine_of(&self, kind: EngineKind) -> AnyEngine {
        if kind == self.engine.kind() {
            self.engine.clone()
        } else {
            AnyEngine::for_kind(kind, &self.cfg, self.store.dir(), &self.reporter)
        }
    }

    /// The engine that runs the sandbox `rec` (the one it was created with), so that a local
    /// sandbox is never sent to a container engine, nor a container to another engine.
    pub fn engine_for(&self, rec: &Record) -> AnyEngine {
        self.engine_of(rec.engine)
    }

    /// The value of the state-directory label of this store's containers.
    pub fn state_label(&self) -> String {
        self.store.dir().to_string_lossy().into_owned()
    }
}

/// The record of sandbox `query` (ID, prefix or name) and a handle on its work dir, for the file
/// commands. The container need not run: they work on the host side of the bind mount.
pub fn workdir_of(ctx: &Ctx, query: &str) -> Result<(Record, WorkDir)> {
    let state = ctx.store.load()?;
    let rec = state.resolve(query)?.clone();
    let wd = WorkDir::open(&rec.workdir)?;
    Ok((rec, wd))
}

/// Catches `SIGXFSZ` while the returned handle lives. Past `RLIMIT_FSIZE` (`ulimit -f`) the
/// kernel sends it, and its default action would kill us with a temporary file left behind;
/// caught, the write fails with `EFBIG` instead and is cleaned up (see `setrlimit(2)`).
pub fn catch_file_size_signal() -> Option<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{signal, SignalKind};
    signal(SignalKind::from_raw(rustix::process::Signal::XFSZ.as_raw())).ok()
}

/// Runs the parsed command line; returns the exit status.
pub async fn dispatch(cli: Cli) -> Result<i32> {
    match &cli.command {
        Command::Up(a) => up::run(&Ctx::new(&cli, &up::config_flags(a))?, a).await,
        Command::Exec(a) => exec::run(&Ctx::new(&cli, &[])?, a).await,
        Command::Bootstrap(a) => {
            let ctx = Ctx::new(
                &cli,
                &[(
                    "bootstrap_timeout_secs",
                    a.timeout.map(|t| t.to_string()),
                    "--timeout",
                )],
            )?;
            bootstrap::run(&ctx, a).await
        }
        Command::Down(a) => down::run(&Ctx::new(&cli, &[])?, a).await,
        Command::Ls(a) => ls::run(&Ctx::new(&cli, &[])?, a).await,
        // Needs neither configuration nor state: works anywhere, e.g. in a packaging script.
        Command::Generate(a) => generate::run(a),
        Command::Read(a) => read::run(&Ctx::new(&cli, &[])?, a).await,
        Command::Write(a) => write::run(&Ctx::new(&cli, &[])?, a).await,
        Command::Edit(a) => edit::run(&Ctx::new(&cli, &[])?, a).await,
        Command::Reap(a) => reap::run(&Ctx::new(&cli, &[])?, a).await,
        Command::Renew(a) => renew::run(&Ctx::new(&cli, &[])?, a).await,
        Command::Mcp(a) => mcp::run(&cli, a).await,
    }
}
