//! `h9sandbox exec`: run a command in a sandbox ([`crate::sandbox::exec`]), streaming its
//! output, or capturing it into a JSON document; exit with its status. With `--detach`, start it
//! in the background ([`crate::sandbox::background`]) and print its handle.

use anyhow::Result;

use super::output;
use super::{ExecArgs, Format};
use crate::error::Error;
use crate::sandbox::exec::{execute, ExecRequest, ExecResult, Sink};
use crate::sandbox::signals::Interruption;
use crate::sandbox::Ctx;
use crate::types::Signal;

/// What `exec` says on stderr when the kernel's OOM killer ended the command in sandbox `rec`.
pub(crate) fn oom_message(rec: &crate::state::Record) -> String {
    format!(
        "the command was killed by the kernel's OOM killer: sandbox {} ran out of memory (its limit is {}; `up --memory` sets a larger one)",
        rec.short_id(),
        rec.limits.memory
    )
}

/// The core's request for `exec`'s arguments. Errors: an `--env NAME` whose NAME is unset, a
/// `--command-file` that cannot be used ([`command_from_file`]).
pub(crate) fn request(args: &ExecArgs) -> Result<ExecRequest, Error> {
    let command = match &args.command_file {
        Some(f) => vec![command_from_file(f, args.interactive)?],
        None => args.command.clone(),
    };
    Ok(ExecRequest {
        id: args.sandbox.id.clone(),
        cwd: args.cwd.clone(),
        user: args.user.clone(),
        env: env_assignments(&args.env, |k| std::env::var_os(k))?,
        timeout: args.timeout,
        interactive: args.interactive,
        max_output: args.max_output,
        command,
        argv: false,
    })
}

/// The most bytes `--command-file` takes: what one request to the sandbox's agent carries.
const COMMAND_FILE_MAX: u64 = crate::sandbox::exec::COMMAND_MAX_BYTES as u64;

/// `exec --command-file FILE`: the file's content (`-`: our stdin's), one shell command line,
/// travelling to the sandbox's agent in a message rather than an argument vector, so it is not
/// bound by the kernel's 128 KiB per argument (`MAX_ARG_STRLEN`, execve(2)). Errors: the file
/// cannot be read, is empty, is not UTF-8 or holds a NUL byte, is larger than 4 MiB, or is `-`
/// together with `-i` (stdin cannot be both).
pub(crate) fn command_from_file(
    file: &std::path::Path,
    interactive: bool,
) -> Result<String, Error> {
    use std::io::Read;
    let stdin = file == std::path::Path::new("-");
    if stdin && interactive {
        return Err(Error::Usage(
            "--command-file - reads the command from stdin, which -i would also pass to it; give the command in a file, or leave -i out".into(),
        ));
    }
    let shown = if stdin {
        "stdin".to_string()
    } else {
        file.display().to_string()
    };
    let mut bytes = Vec::new();
    let read = if stdin {
        std::io::stdin()
            .lock()
            .take(COMMAND_FILE_MAX + 1)
            .read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(COMMAND_FILE_MAX + 1).read_to_end(&mut bytes))
    };
    read.map_err(|e| Error::Usage(format!("--command-file {shown}: cannot read it: {e}")))?;
    if bytes.len() as u64 > COMMAND_FILE_MAX {
        return Err(Error::Refused(format!(
            "--command-file {shown} holds more than the {} MiB one command may be; put the script in a file of the work dir and run that file",
            COMMAND_FILE_MAX >> 20
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        Error::Usage(format!(
            "--command-file {shown} is not UTF-8 text; a command line must be"
        ))
    })?;
    if text.trim().is_empty() {
        return Err(Error::Usage(format!(
            "--command-file {shown} is empty; give the command line to run"
        )));
    }
    if text.contains('\0') {
        return Err(Error::Usage(format!(
            "--command-file {shown} holds a NUL byte, which no command line can"
        )));
    }
    Ok(text)
}

/// `--env` words as the core takes them (`K=V`): a bare `NAME` takes the value NAME has in our
/// own environment, read through `lookup` (docker's `-e NAME` convention). Only the command line
/// does this: an MCP client never reads the server's environment. Errors: NAME is unset (or
/// not UTF-8).
pub(crate) fn env_assignments(
    raw: &[String],
    lookup: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Vec<String>, Error> {
    raw.iter()
        .map(|word| {
            if word.contains('=') {
                return Ok(word.clone());
            }
            match lookup(word).map(|v| v.into_string()) {
                Some(Ok(v)) => Ok(format!("{word}={v}")),
                Some(Err(_)) => Err(Error::Usage(format!(
                    "--env {word}: its value in this environment is not UTF-8; give --env {word}=VALUE"
                ))),
                None => Err(Error::Usage(format!(
                    "--env {word}: {word} is not set in this environment (a bare NAME passes your value of it, as `docker exec -e NAME` does); export {word} first, or give --env {word}=VALUE"
                ))),
            }
        })
        .collect()
}

/// The `h9sandbox: error: …` line for a command that its timeout or a signal to us ended
/// (what was killed, and the exit status), or `None` when it ended by itself. `command` is
/// the command as given.
pub(crate) fn ended_message(
    out: &crate::sandbox::exec::Outcome,
    timeout: Option<std::time::Duration>,
    rec: &crate::state::Record,
    command: &[String],
) -> Option<String> {
    let what = format!("`{}`", shorten(&command.join(" "), 60));
    let killed = if out.tree_killed {
        format!(
            "{what} and its whole process tree in sandbox {} were killed",
            rec.short_id()
        )
    } else {
        format!(
            "killing {what} and its process tree in sandbox {} failed (see above; `h9sandbox down {}` ends them)",
            rec.short_id(),
            rec.short_id()
        )
    };
    if out.timed_out {
        return Some(format!(
            "h9sandbox: error: the command timed out after {} (--timeout, else the sandbox's exec_timeout_secs): {killed} (exit {})",
            timeout.map_or("0s".into(), crate::types::show_duration),
            out.exit_code
        ));
    }
    let why = match out.interrupted? {
        Interruption::Signal(Signal::PIPE) => "our standard output was closed".to_string(),
        why => format!("interrupted by {why}"),
    };
    Some(format!(
        "h9sandbox: error: {why}: {killed} (exit {})",
        out.exit_code
    ))
}

/// `s` cut to at most `max` characters, with `…` where it was cut.
fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Watches for input on our standard input that a command run without `-i` leaves unread:
/// warns once (`h9sandbox: warning: …`) when stdin is a file or a pipe holding bytes. A pipe
/// nobody writes to, a terminal and `/dev/null` draw nothing.
#[derive(Debug, Default)]
pub(crate) struct UnreadStdin {
    warned: bool,
}

impl UnreadStdin {
    /// Looks now; warns the first time bytes wait on stdin.
    pub(crate) fn check(&mut self, interactive: bool) {
        if self.warned || interactive || !stdin_has_bytes() {
            return;
        }
        self.warned = true;
        crate::report::eprintln(
            "h9sandbox: warning: standard input holds data, which the command does not read: stdin is attached only with -i (as with `docker exec`); add -i to pass it",
        );
    }
}

/// Whether our stdin is a regular file with bytes after the current offset, or a pipe or
/// socket with bytes ready to read (`FIONREAD`).
fn stdin_has_bytes() -> bool {
    use rustix::fs::FileType;
    let fd = rustix::stdio::stdin();
    let Ok(st) = rustix::fs::fstat(fd) else {
        return false;
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => rustix::fs::seek(fd, rustix::fs::SeekFrom::Current(0))
            .is_ok_and(|pos| u64::try_from(st.st_size).is_ok_and(|size| pos < size)),
        FileType::Fifo | FileType::Socket => rustix::io::ioctl_fionread(fd).is_ok_and(|n| n > 0),
        _ => false,
    }
}

/// Refuses a command whose first word looks like an option: a mistyped or unknown option of
/// `sub` that clap's trailing argument took for the command (`exec ID --tiemout 5 -- true`),
/// naming the option of `sub` it is closest to, as clap does for the options before the ID.
pub(crate) fn refuse_option_as_command(sub: &str, command: &[String]) -> Result<()> {
    refuse_option(sub, command)
}

/// Refuses `--combined` outside `--format json` (where `output` has nowhere to go: the table
/// format forwards each stream as it comes), as clap's `requires` would for a flag of the
/// subcommand itself (`--format` is global, and may come from the configuration).
pub(crate) fn refuse_combined_without_json(
    sub: &str,
    combined: bool,
    format: Format,
) -> Result<()> {
    if combined && format != Format::Json {
        return Err(Error::Usage(format!(
            "--combined puts `output` in the JSON document and needs --format json; without it stdout and stderr already arrive as written; see `h9sandbox {sub} --help`"
        ))
        .into());
    }
    Ok(())
}

fn refuse_option(sub: &str, command: &[String]) -> Result<()> {
    let Some(opt) = command.first().filter(|w| w.starts_with('-')) else {
        return Ok(());
    };
    let tip = similar_option(sub, opt)
        .map(|o| format!("a similar option exists: '{o}'; "))
        .unwrap_or_default();
    Err(Error::Usage(format!(
        "unknown option '{opt}' ({tip}h9sandbox's options go before `--`, the command after it); see `h9sandbox {sub} --help`"
    ))
    .into())
}

/// The long option of subcommand `sub` (global ones included) closest to the word `opt`
/// (`--tiemout`, `--imgae=x`): at most two edits away, as clap's own suggestions.
fn similar_option(sub: &str, opt: &str) -> Option<String> {
    let word = opt.trim_start_matches('-');
    let word = word.split_once('=').map_or(word, |(w, _)| w);
    if word.is_empty() || !opt.starts_with("--") {
        return None;
    }
    let cli = super::Cli::tree();
    let cmd = cli.find_subcommand(sub)?;
    cmd.get_arguments()
        .chain(cli.get_arguments())
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long())
        .map(|l| (strsim::levenshtein(word, l), l))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, l)| format!("--{l}"))
}

/// Runs `exec`; returns the command's exit status.
pub(crate) async fn run(ctx: &Ctx, format: Format, args: &ExecArgs) -> Result<i32> {
    if args.tty {
        return super::terminal::exec(ctx, format, args).await;
    }
    refuse_option_as_command("exec", &args.command)?;
    refuse_combined_without_json("exec", args.combined, format)?;
    let req = request(args)?;
    // What `ended_message` calls the command.
    let named = match &args.command_file {
        Some(f) => vec![format!("--command-file {}", f.display())],
        None => args.command.clone(),
    };
    if args.detach {
        // A background command never reads our stdin either.
        UnreadStdin::default().check(false);
        let started = crate::sandbox::background::detach(ctx, &req).await?;
        match format {
            Format::Json => output::print_json(&started)?,
            Format::Table => output::print_line(&started.handle)?,
        }
        return Ok(0);
    }
    let sink = match format {
        Format::Json => Sink::Capture(args.max_output),
        Format::Table => Sink::Forward,
    };
    let mut unread = UnreadStdin::default();
    unread.check(args.interactive);
    let done = execute(ctx, &req, sink, std::future::pending()).await?;
    unread.check(args.interactive);
    let (out, timeout) = (&done.outcome, done.timeout);
    if let Some(line) = ended_message(out, timeout, &done.record, &named) {
        crate::report::eprintln(&line);
    }
    if out.oom_killed {
        ctx.reporter.warn(&oom_message(&done.record));
    }
    if format == Format::Json {
        output::print_json(&ExecResult::of(out, args.combined))?;
    }
    Ok(out.exit_code)
}
