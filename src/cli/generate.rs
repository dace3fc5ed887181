//! `h9sandbox generate` (hidden): shell completion scripts (clap_complete) and man pages
//! (clap_mangen), generated from the very clap definition in [`crate::cli`], so they cannot drift
//! from the real command line. Copies are committed in `completions/` and `man/`;
//! `tests/generated.rs` fails when they are stale (`H9SANDBOX_BLESS=1 cargo test --test generated`
//! rewrites them).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

use super::output;
use super::{Cli, Generate, GenerateArgs};
use crate::error::Error;

/// The binary's name, as completions and man pages call it.
pub const BIN: &str = "h9sandbox";

/// The shells whose completion scripts are generated and committed.
pub const SHELLS: [Shell; 5] = [
    Shell::Bash,
    Shell::Zsh,
    Shell::Fish,
    Shell::Elvish,
    Shell::PowerShell,
];

/// Runs `generate`: a script on stdout, or files into a directory (their paths on stdout).
pub fn run(args: &GenerateArgs) -> Result<i32> {
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
                return Err(Error::Invalid(
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

/// Writes `shell`'s completion script to `out`.
pub fn completion(shell: Shell, out: &mut Vec<u8>) {
    clap_complete::generate(shell, &mut Cli::command(), BIN, out);
}

/// Writes every shell's completion script into `dir` (created when missing) under the shell's
/// conventional name (`h9sandbox.bash`, `_h9sandbox`, `h9sandbox.fish`, `h9sandbox.elv`,
/// `_h9sandbox.ps1`). Returns the paths written.
pub fn completions_into(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut cmd = Cli::command();
    SHELLS
        .iter()
        .map(|&shell| {
            clap_complete::generate_to(shell, &mut cmd, BIN, dir).with_context(|| {
                format!(
                    "cannot write the {shell} completions into {}",
                    dir.display()
                )
            })
        })
        .collect()
}

/// Writes the man pages into `dir` (created when missing): `h9sandbox.1` and one
/// `h9sandbox-SUB.1` per visible subcommand (and `h9sandbox-SUB-SUBSUB.1` below). Returns the
/// paths written.
pub fn man_pages_into(dir: &Path) -> Result<Vec<PathBuf>> {
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
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    fn walk(cmd: &clap::Command, parent: Option<&str>, out: &mut Vec<(String, Vec<u8>)>) {
        let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
        let subs: Vec<&clap::Command> =
            cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
        let mut see_also: Vec<String> = parent.map(|p| format!("{p}(1)")).into_iter().collect();
        see_also.extend(
            subs.iter()
                .map(|s| format!("{}(1)", s.get_display_name().unwrap_or(s.get_name()))),
        );
        out.push((format!("{name}.1"), man_page(cmd, &see_also)));
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

/// One man page: clap_mangen's sections (name, synopsis, description, options, subcommands),
/// then the `after_help` text split at blank lines into EXAMPLES (verbatim, so examples keep their
/// lines), EXIT STATUS and NOTES, then SEE ALSO.
fn man_page(cmd: &clap::Command, see_also: &[String]) -> Vec<u8> {
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
    let mut roff = Roff::new();
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
            roff.control("SH", ["EXIT STATUS"])
                .text([roman(status.trim())]);
        } else {
            roff.control("SH", ["NOTES"]).text([roman(block)]);
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
