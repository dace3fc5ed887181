//! The wrapper of every command an engine runs in a sandbox (`h9sandbox agent exec`), used where
//! commands go through the engine's own exec (`docker exec`): it installs the set-ID filter
//! ([`super::seccomp`]) on itself, gives a non-root user a usable `HOME` ([`super::user`]), and
//! replaces itself with the command (`execvp(3)`), so nothing of it stays between the engine and
//! the command. Processes started by the engine's exec do not descend from PID 1 and would not
//! inherit its filter otherwise.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;

use super::{seccomp, user};

/// Options of `h9sandbox agent exec`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExecArgs {
    /// Run the one argument as a shell command line: `bash -c`, or `sh -c` without bash
    #[arg(long)]
    pub shell: bool,
    /// The program and its arguments (with --shell: one command line)
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

fn fail(code: i32, msg: &str) -> i32 {
    let _ = writeln!(std::io::stderr(), "h9sandbox: {msg}");
    code
}

/// Runs the command in place of this process; returns only when that failed (126 when the
/// program cannot be run, 127 when it is not found, as shells do; 125 for our own failure).
pub fn run(args: &ExecArgs) -> i32 {
    let progs = match seccomp::programs() {
        Ok(p) => p,
        Err(e) => return fail(125, &format!("cannot build the set-ID filter: {e}")),
    };
    if let Err(e) = seccomp::install(&progs) {
        return fail(125, &format!("cannot install the set-ID filter: {e}"));
    }
    let uid = rustix::process::getuid().as_raw();
    let home_env = std::env::var_os("HOME");
    let usable = home_env
        .as_deref()
        .is_some_and(|h| h != "/" && std::path::Path::new(h).is_dir());
    if !usable {
        let home = user::home_of(uid);
        let _ = user::ensure_home(&home);
        // SAFETY: single-threaded (nothing else runs in this process).
        std::env::set_var("HOME", &home);
    }
    let (program, argv): (OsString, Vec<OsString>) = if args.shell {
        let line = args.command.join(std::ffi::OsStr::new(" "));
        let shell = if on_path("bash") { "bash" } else { "sh" };
        (shell.into(), vec!["-c".into(), line])
    } else {
        (args.command[0].clone(), args.command[1..].to_vec())
    };
    let e = std::process::Command::new(&program).args(&argv).exec();
    let code = match e.kind() {
        std::io::ErrorKind::NotFound => 127,
        _ => 126,
    };
    fail(
        code,
        &format!("cannot run {}: {e}", program.to_string_lossy()),
    )
}

/// Whether `name` is an executable file in a directory of `PATH`.
fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            std::fs::metadata(d.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}
