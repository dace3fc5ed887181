//! One module per subcommand, and the context they share ([`Ctx`]).

pub mod down;
pub mod exec;
pub mod ls;
pub mod reap;
pub mod renew;
pub mod up;

use anyhow::Result;

use crate::cli::{Cli, Command, Format};
use crate::config::{Config, Layers, Origin};
use crate::engine::Docker;
use crate::state::Store;

impl Command {
    /// The subcommand's name, as typed.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Up(_) => "up",
            Command::Exec(_) => "exec",
            Command::Down(_) => "down",
            Command::Ls(_) => "ls",
            Command::Reap(_) => "reap",
            Command::Renew(_) => "renew",
        }
    }
}

/// What every subcommand works with: the configuration, the state store, the engine, the format.
pub struct Ctx {
    /// Effective configuration.
    pub cfg: Config,
    /// The state file of `cfg.state_dir`.
    pub store: Store,
    /// The container engine.
    pub engine: Docker,
    /// Output format.
    pub format: Format,
    /// `-v` count.
    pub verbose: u8,
}

impl Ctx {
    /// Loads the configuration (with `flags` as the top layer: key, value, flag name) and opens
    /// the state store.
    pub fn new(cli: &Cli, flags: &[(&str, Option<String>, &str)]) -> Result<Ctx> {
        let mut layers = Layers::load(cli.global.config.as_deref())?;
        for (key, value, flag) in flags {
            if let Some(v) = value {
                layers.set_str(key, v, Origin::Flag((*flag).to_string()))?;
            }
        }
        let cfg = layers.resolve()?;
        let store = Store::open(&cfg.state_dir()?)?;
        let engine = Docker::new(cfg.engine_bin.clone(), cli.global.verbose > 0);
        Ok(Ctx {
            cfg,
            store,
            engine,
            format: cli.global.format(),
            verbose: cli.global.verbose,
        })
    }

    /// The value of the state-directory label of this store's containers.
    pub fn state_label(&self) -> String {
        self.store.dir().to_string_lossy().into_owned()
    }
}

/// Runs the parsed command line; returns the exit status.
pub async fn dispatch(cli: Cli) -> Result<i32> {
    match &cli.command {
        Command::Up(a) => {
            let ctx = Ctx::new(
                &cli,
                &[
                    ("image", a.image.clone(), "--image"),
                    ("cpus", a.cpus.clone(), "--cpus"),
                    ("memory", a.memory.clone(), "--memory"),
                    ("pids_limit", a.pids_limit.clone(), "--pids-limit"),
                    ("network", a.network.map(|n| n.to_string()), "--network"),
                ],
            )?;
            up::run(&ctx, a).await
        }
        Command::Exec(a) => exec::run(&Ctx::new(&cli, &[])?, a).await,
        Command::Down(a) => down::run(&Ctx::new(&cli, &[])?, a).await,
        Command::Ls(a) => ls::run(&Ctx::new(&cli, &[])?, a).await,
        Command::Reap(a) => reap::run(&Ctx::new(&cli, &[])?, a).await,
        Command::Renew(a) => renew::run(&Ctx::new(&cli, &[])?, a).await,
    }
}
