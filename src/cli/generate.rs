//! `h9sandbox generate` (hidden): shell completion scripts (clap_complete) and man pages
//! (clap_mangen), generated from the very clap definition in [`crate::cli`], so they cannot drift
//! from the real command line. Copies are committed in `completions/` and `man/`;
//! `tests/it/generated.rs` fails when they are stale (`H9SANDBOX_BLESS=1 cargo test --test it generated::`
//! rewrites them).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

use super::output;
use super::{Cli, Generate, GenerateArgs};
use crate::error::Error;

/// The binary's name, as completions and man pages call it.
pub(crate) const BIN: &str = "h9sandbox";

/// The shells whose completion scripts are generated and committed.
pub(crate) const SHELLS: [Shell; 5] = [
    Shell::Bash,
    Shell::Zsh,
    Shell::Fish,
    Shell::Elvish,
    Shell::PowerShell,
];

/// Runs `generate`: a script on stdout, or files into a directory (their paths on stdout).
pub(crate) fn run(args: &GenerateArgs) -> Result<i32> {
    let written = match &args.what {
        Generate::Completions { shell, all } => match (shell, all) {
            (Some(shell), _) => {
                let mut buf = Vec::new();
                completion(*shell, &mut buf);
                output::print_bytes(&buf)?;
                return Ok(0);
            }
            (None, Some(dir)) => completions_into(dir)?,
            (None, None) => {
                return Err(Error::Usage(
                    "give a SHELL or --all DIR (see `h9sandbox generate completions --help`)"
                        .into(),
                )
                .into())
            }
        },
        Generate::Man { dir } => man_pages_into(dir)?,
    };
    for p in written {
        output::print_line(&p.display().to_string())?;
    }
    Ok(0)
}

/// The environment variable that makes h9sandbox answer a shell's completion request instead of
/// running (clap_complete's `CompleteEnv`; the scripts in `completions/` set it).
pub(crate) const COMPLETE_VAR: &str = "H9SANDBOX_COMPLETE";

/// Answers a shell's completion request and exits when [`COMPLETE_VAR`] is set; returns at once
/// otherwise (one environment lookup).
pub(crate) fn complete_if_asked() {
    clap_complete::CompleteEnv::with_factory(Cli::command)
        .var(COMPLETE_VAR)
        .complete();
}

/// The sandboxes an ID argument may name, for completion: every record's full ID (described by
/// its name and state) and name, from the state file the configuration in force names (the
/// user's file or `$H9SANDBOX_CONFIG`, and the environment). Nothing when that fails or the
/// state directory does not exist (completion never creates it).
pub(crate) fn sandbox_candidates() -> Vec<clap_complete::engine::CompletionCandidate> {
    use clap_complete::engine::CompletionCandidate;
    let explicit = std::env::var_os("H9SANDBOX_CONFIG").map(PathBuf::from);
    let Ok(cfg) =
        crate::config::Layers::load_for_existing(explicit.as_deref()).and_then(|l| l.resolve())
    else {
        return vec![];
    };
    let Some(dir) = cfg.state_dir().ok().filter(|d| d.is_dir()) else {
        return vec![];
    };
    let Ok(state) = crate::state::Store::open(&dir).and_then(|s| s.load()) else {
        return vec![];
    };
    let mut out = Vec::new();
    for r in &state.sandboxes {
        out.push(
            CompletionCandidate::new(r.id.to_string())
                .help(Some(format!("{} ({})", r.name, r.state).into())),
        );
        out.push(CompletionCandidate::new(&r.name).help(Some(r.short_id().into())));
    }
    out
}

/// Writes `shell`'s completion script to `out`: the registration of clap_complete's dynamic
/// completion, which asks `h9sandbox` (on `PATH`) for the candidates at every TAB, with
/// [`COMPLETE_VAR`] set; so subcommands, options and the live sandboxes' IDs are always those of
/// the installed binary and state.
pub(crate) fn completion(shell: Shell, out: &mut Vec<u8>) {
    use clap_complete::env::{Bash, Elvish, EnvCompleter, Fish, Powershell, Zsh};
    let completer: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
        Shell::Elvish => &Elvish,
        _ => &Powershell,
    };
    completer
        .write_registration(COMPLETE_VAR, BIN, BIN, BIN, out)
        .expect("writing to memory cannot fail");
}

/// The conventional file name of `shell`'s completion script.
fn completion_file(shell: Shell) -> &'static str {
    match shell {
        Shell::Bash => "h9sandbox.bash",
        Shell::Zsh => "_h9sandbox",
        Shell::Fish => "h9sandbox.fish",
        Shell::Elvish => "h9sandbox.elv",
        _ => "_h9sandbox.ps1",
    }
}

/// Writes every shell's completion script into `dir` (created when missing) under the shell's
/// conventional name (`h9sandbox.bash`, `_h9sandbox`, `h9sandbox.fish`, `h9sandbox.elv`,
/// `_h9sandbox.ps1`). Returns the paths written.
pub(crate) fn completions_into(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    SHELLS
        .iter()
        .map(|&shell| {
            let path = dir.join(completion_file(shell));
            let mut buf = Vec::new();
            completion(shell, &mut buf);
            std::fs::write(&path, buf)
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(path)
        })
        .collect()
}

/// Writes the man pages into `dir` (created when missing): `h9sandbox.1` and one
/// `h9sandbox-SUB.1` per visible subcommand (and `h9sandbox-SUB-SUBSUB.1` below). Returns the
/// paths written.
pub(crate) fn man_pages_into(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut out = Vec::new();
    for (name, page) in man_pages() {
        let path = dir.join(name);
        std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
        out.push(path);
    }
    Ok(out)
}

/// Every man page: file name and roff text, sorted by name.
pub(crate) fn man_pages() -> Vec<(String, Vec<u8>)> {
    fn walk(cmd: &clap::Command, parent: Option<&str>, out: &mut Vec<(String, Vec<u8>)>) {
        let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
        let subs: Vec<&clap::Command> =
            cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
        let mut see_also: Vec<String> = parent.map(|p| format!("{p}(1)")).into_iter().collect();
        see_also.extend(
            subs.iter()
                .map(|s| format!("{}(1)", s.get_display_name().unwrap_or(s.get_name()))),
        );
        out.push((
            format!("{name}.1"),
            man_page(cmd, &see_also, parent.is_none()),
        ));
        for sub in subs {
            walk(sub, Some(&name), out);
        }
    }
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Building names every subcommand after its parent (`h9sandbox-up`), as the pages are named.
    cmd.build();
    let mut out = Vec::new();
    walk(&cmd, None, &mut out);
    out.sort();
    out
}

/// The EXIT STATUS of a page whose `--help` says nothing of it.
const EXIT_STATUS: &str = "0 on success, 1 on failure (one line on stderr: h9sandbox: error: CAUSE; FIX), 2 for a bad command line.";

/// The FILES section of h9sandbox(1).
const FILES: &[(&str, &str)] = &[
    ("$XDG_CONFIG_HOME/h9sandbox/config.toml", "your configuration file (~/.config/h9sandbox/config.toml when XDG_CONFIG_HOME is unset); yours alone (owner, not writable by others); --config or H9SANDBOX_CONFIG names another file, used instead"),
    ("./sandbox.toml", "a project's configuration, layered over yours by up and mcp only once you trusted its content (h9sandbox trust); it may not set engine, engine_bin, fallback, runtime, state_dir, docker_context, workdir_mode, registry or allowed_workdirs"),
    ("$XDG_STATE_HOME/h9sandbox/", "the state directory (~/.local/state/h9sandbox; config state_dir): state.json (the records), state.lock (the lock every update holds), trust.json (trusted project files), run/ID/ (each sandbox's agent socket and token); yours alone, mode 0700"),
];

/// The ENVIRONMENT section of h9sandbox(1): every variable h9sandbox reads.
fn environment() -> Vec<(String, String)> {
    use crate::config::{KEYS, USER_FILE_ONLY_KEYS};
    let mut vars = vec![
        (
            "H9SANDBOX_CONFIG".to_string(),
            "the configuration file, used alone (as --config)".to_string(),
        ),
        (
            COMPLETE_VAR.to_string(),
            "set by the completion scripts: answer the shell's completion request (bash, zsh, fish, elvish, powershell) instead of running".to_string(),
        ),
    ];
    for k in KEYS
        .iter()
        .filter(|k| !USER_FILE_ONLY_KEYS.contains(&k.name))
    {
        let fallback = k
            .unprefixed_env
            .map(|s| format!("; {s} when this one is unset"))
            .unwrap_or_default();
        vars.push((
            format!("H9SANDBOX_{}", k.name.to_ascii_uppercase()),
            format!(
                "configuration key {} (over the files, under the flags){fallback}",
                k.name
            ),
        ));
    }
    vars.extend(
        [
            ("H9SANDBOX_EXEC_ID, H9SANDBOX_SANDBOX, H9SANDBOX_SANDBOX_STATE_DIR", "set by h9sandbox on the processes of a local sandbox's commands (to find them again); not configuration"),
            ("SANDBOX_ENABLED", "false (0, no, off) selects engine local when H9SANDBOX_ENGINE is unset"),
            ("NO_COLOR", "set and not empty: no colours in tables"),
            ("HOME, XDG_CONFIG_HOME, XDG_STATE_HOME", "where the configuration file and the state directory are (see FILES); another HOME (CI, sudo) means another state directory"),
            ("DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH, DOCKER_CONTEXT", "the Docker daemon up makes a sandbox on (tcp:// with TLS, ssh://, unix://; a context, over the docker_context key): recorded with the sandbox and handed to the engine's client for every later command on it; a daemon not on this machine gets the work dir copied (docs/guide.md, Remote sandboxes)"),
            ("H9SANDBOX_CHANNEL_HOST", "the address the remote channel connects to, instead of the daemon's host (a published port reached another way)"),
            ("CONTAINER_HOST, XDG_RUNTIME_DIR, XDG_DATA_HOME, XDG_CACHE_HOME, SSH_AUTH_SOCK, TMUX, DBUS_SESSION_BUS_ADDRESS", "read by up (with DOCKER_HOST) to refuse a work dir holding the engine's or your session's sockets; Podman's client reads CONTAINER_HOST itself"),
            ("PATH", "where the engine's client (docker, podman) is found; with engine local, where commands are found"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string())),
    );
    vars
}

/// `page` with `...` after each positional argument of `cmd` that takes several values in its
/// SYNOPSIS (`<[LOCAL:]PORT>...`, `[IDS]...`), as `--help`'s usage line has it; clap_mangen
/// leaves it out.
fn repeatable_positionals(cmd: &clap::Command, page: Vec<u8>) -> Vec<u8> {
    let mut text = String::from_utf8(page).expect("clap_mangen writes UTF-8");
    for a in cmd.get_positionals() {
        if !matches!(a.get_action(), clap::ArgAction::Append) {
            continue;
        }
        let name = a
            .get_value_names()
            .and_then(|v| v.first())
            .map_or_else(|| a.get_id().as_str().to_uppercase(), |n| n.to_string());
        // The SYNOPSIS section only (an `override_usage` one says it already).
        let Some(from) = text.find(".SH SYNOPSIS") else {
            continue;
        };
        let to = text[from + 1..]
            .find(".SH ")
            .map_or(text.len(), |i| from + 1 + i);
        for (open, close) in [("<", ">"), ("[", "]")] {
            let plain = format!("{open}\\fI{name}\\fR{close}");
            if let Some(at) = text[from..to].find(&plain) {
                let end = from + at + plain.len();
                if !text[end..].starts_with("...") {
                    text.insert_str(end, "...");
                }
                break;
            }
        }
    }
    text.into_bytes()
}

/// One man page: clap_mangen's sections (name, synopsis, description, options, subcommands),
/// then the `after_help` text split at blank lines into EXAMPLES (verbatim, so examples keep their
/// lines), EXIT STATUS (a generic one when it says nothing of it) and NOTES, then, on the
/// top-level page (`top`), ENVIRONMENT and FILES, then SEE ALSO.
fn man_page(cmd: &clap::Command, see_also: &[String], top: bool) -> Vec<u8> {
    use roff::{bold, roman, Roff};
    let after = cmd
        .get_after_help()
        .map(|h| h.to_string())
        .unwrap_or_default();
    let version = cmd
        .get_version()
        .or(Cli::command().get_version())
        .unwrap_or_default()
        .to_string();
    let bare = cmd.clone().after_help(None::<&str>).version(None::<&str>);
    let mut page = Vec::new();
    clap_mangen::Man::new(bare)
        .source(format!("{BIN} {version}"))
        .render(&mut page)
        .expect("writing to memory cannot fail");
    let mut page = repeatable_positionals(cmd, page);
    let mut roff = Roff::new();
    let mut exit_status = false;
    for block in after
        .split("\n\n")
        .map(str::trim_end)
        .filter(|b| !b.trim().is_empty())
    {
        if let Some(examples) = block.strip_prefix("Examples:") {
            roff.control("SH", ["EXAMPLES"]).control("nf", []);
            for line in examples.lines().filter(|l| !l.trim().is_empty()) {
                roff.text([roman(line)]);
            }
            roff.control("fi", []);
        } else if let Some(status) = block.strip_prefix("Exit status:") {
            exit_status = true;
            roff.control("SH", ["EXIT STATUS"])
                .text([roman(status.trim())]);
        } else if block.starts_with("Environment:") {
            // The page's own ENVIRONMENT section below says it at length.
        } else {
            roff.control("SH", ["NOTES"]).text([roman(block)]);
        }
    }
    if !exit_status {
        roff.control("SH", ["EXIT STATUS"])
            .text([roman(EXIT_STATUS)]);
    }
    if top {
        roff.control("SH", ["ENVIRONMENT"]);
        for (var, what) in environment() {
            roff.control("TP", [])
                .text([bold(var.as_str())])
                .text([roman(what.as_str())]);
        }
        roff.control("SH", ["FILES"]);
        for (path, what) in FILES {
            roff.control("TP", [])
                .text([bold(*path)])
                .text([roman(*what)]);
        }
    }
    if !see_also.is_empty() {
        roff.control("SH", ["SEE ALSO"]);
        let mut inlines = Vec::new();
        for (i, page) in see_also.iter().enumerate() {
            if i > 0 {
                inlines.push(roman(", "));
            }
            inlines.push(bold(page.as_str()));
        }
        roff.text(inlines);
    }
    page.extend_from_slice(roff.to_roff().as_bytes());
    page
}

#[cfg(test)]
mod tests {
    use super::FILES;
    use crate::config::{HOST_SIDE_KEYS, USER_FILE_ONLY_KEYS};

    /// Every `[config: KEY; default: VALUE]` of a flag's help gives KEY's real default
    /// (`Config::default()`), so that `--help` cannot drift from the configuration reference.
    #[test]
    fn the_defaults_flags_name_are_the_configurations() {
        fn walk(cmd: &clap::Command, out: &mut Vec<(String, String)>) {
            for arg in cmd.get_arguments() {
                let help = arg.get_long_help().or(arg.get_help());
                let text = help.map(|h| h.to_string()).unwrap_or_default();
                out.push((format!("{} --{}", cmd.get_name(), arg.get_id()), text));
            }
            for sub in cmd.get_subcommands() {
                walk(sub, out);
            }
        }
        let defaults = toml::Table::try_from(crate::config::Config::default()).unwrap();
        let mut helps = Vec::new();
        walk(&crate::cli::Cli::tree(), &mut helps);
        let mut checked = 0;
        for (flag, help) in helps {
            let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
            let Some(at) = help.find("[config: ") else {
                continue;
            };
            let inner = &help[at + 9..help[at..].find(']').unwrap() + at];
            let Some((key, default)) = inner.split_once("; default: ") else {
                continue;
            };
            if default.contains(' ') {
                continue; // a rule in words ("mount where ..."), not a value
            }
            let want = match &defaults[key] {
                toml::Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            assert_eq!(default, want, "{flag}: its help's default of {key}");
            checked += 1;
        }
        assert!(checked >= 10, "only {checked} defaults found in the help");
    }

    /// The man page's FILES line on `./sandbox.toml` and `trust --help` name every key a project
    /// file may not set (the key tables are the truth; the texts are written by hand).
    #[test]
    fn the_texts_on_project_files_name_every_key_they_may_not_set() {
        let files = FILES
            .iter()
            .find(|(path, _)| *path == "./sandbox.toml")
            .unwrap()
            .1;
        let cmd = crate::cli::Cli::tree();
        let trust = cmd.find_subcommand("trust").unwrap();
        let help = trust
            .get_after_help()
            .unwrap()
            .to_string()
            .replace('\n', " ");
        for key in HOST_SIDE_KEYS.iter().chain(USER_FILE_ONLY_KEYS) {
            assert!(
                files.contains(key),
                "FILES of h9sandbox(1) leaves out {key}"
            );
            assert!(help.contains(key), "`trust --help` leaves out {key}");
        }
    }
}
