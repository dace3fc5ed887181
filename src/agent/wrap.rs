//! The wrapper of every command an engine runs in a sandbox (`h9sandbox agent exec`), used where
//! commands go through the engine's own exec (`docker exec`): processes the engine's exec starts
//! do not descend from PID 1 and would not inherit its filter otherwise. It installs the set-ID
//! filter ([`super::seccomp`]) on itself, gives a non-root user a usable `HOME`
//! ([`super::user`]), and runs the command:
//!
//! It stays as the command's supervisor: a child subreaper (as [`super::supervise`]) that exits
//! with the command's status, says on stderr when the kernel's OOM killer ended it, and, with
//! `--timeout-ms`, kills the command's whole tree once the time is up. The host kills the tree at
//! its own timeout; this is the backstop for when the host's process was killed before it could
//! (the engine's exec does not end a command whose client died).

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use super::{seccomp, user};

/// Directories searched for the shell of a command line, whatever the command's own `PATH`: a
/// shell planted in a directory the sandbox's user can write (the work dir, `~/.local/bin`) must
/// never be what a root command line (a bootstrap) runs.
pub(crate) const SHELL_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Options of `h9sandbox agent exec`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ExecArgs {
    /// Run the one argument as a shell command line: `bash -c`, or `sh -c` without bash
    #[arg(long)]
    pub shell: bool,
    /// Kill the command's whole process tree after this many milliseconds (exit 124)
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
    // Help text, not rustdoc: `NAME[:GID]` is no link.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// Run as this user of the container's /etc/passwd, NAME[:GID] (the engine's exec starts
    /// this wrapper as root then; exit 125 when there is no such user)
    #[arg(long, value_name = "NAME[:GID]")]
    pub user: Option<String>,
    /// Enter this directory, as the command's user, first (exit 125 when it cannot)
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<std::path::PathBuf>,
    /// The program and its arguments (with --shell: one command line)
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

fn fail(code: i32, msg: &str) -> i32 {
    let _ = writeln!(std::io::stderr(), "h9sandbox: error: {msg}");
    code
}

fn warn(msg: &str) {
    let _ = writeln!(std::io::stderr(), "h9sandbox: warning: {msg}");
}

/// The shell for a command line (bash, else sh, from [`SHELL_PATH`]), or the reason there is
/// none.
pub(crate) fn shell() -> Result<String, String> {
    find_on(SHELL_PATH, "bash")
        .or_else(|| find_on(SHELL_PATH, "sh"))
        .ok_or_else(|| {
            "no shell (bash or sh) in the image; pass the command as separate words to run it without one"
                .to_string()
        })
}

/// The first executable file `name` in the directories of `path`.
pub(crate) fn find_on(path: &str, name: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    path.split(':').filter(|d| !d.is_empty()).find_map(|d| {
        let p = std::path::Path::new(d).join(name);
        std::fs::metadata(&p)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .then(|| p.to_string_lossy().into_owned())
    })
}

/// Runs the command; returns its exit status (with `--timeout-ms`), or only when it could not
/// be started (126 when it cannot be run, 127 when it is not found, as shells do; 125 for our
/// own failure).
pub(crate) fn run(args: &ExecArgs) -> i32 {
    // The command's OOM score ([`super::supervise::first_to_go_at_oom`]), raised first: once
    // this process is not dumpable, or has become the user, its `/proc/self` is root's and
    // closed to it (the engine may start it as the user). The wrapper shares the score: on
    // this path it is the command's subreaper, not the sandbox's agent.
    let _ = std::fs::write(
        "/proc/self/oom_score_adj",
        super::supervise::COMMAND_OOM_SCORE_ADJ,
    );
    // The timeout's backstop must not be traced by the command it watches.
    if let Err(e) = super::not_dumpable() {
        return fail(125, &format!("cannot make the wrapper not dumpable: {e}"));
    }
    let progs = match seccomp::programs() {
        Ok(p) => p,
        Err(e) => return fail(125, &format!("cannot build the set-ID filter: {e}")),
    };
    if let Err(e) = seccomp::install(&progs) {
        return fail(125, &format!("cannot install the set-ID filter: {e}"));
    }
    if let Some(name) = &args.user {
        if let Err(why) = become_user(name) {
            return fail(125, &why);
        }
    }
    let uid = rustix::process::getuid().as_raw();
    // The command's audit session, which none of its processes can leave (the host's kill at
    // its timeout and this wrapper's backstop find them by it).
    let _ = super::supervise::join_audit_session(uid);
    // Entered here, as the user, rather than by the engine, which enters it before it drops to
    // the user (runc) and reports its failure as the command's output: the same check and the
    // same error as through the agent.
    if let Some(dir) = &args.cwd {
        if let Err(e) = std::env::set_current_dir(dir) {
            return fail(
                125,
                &format!(
                    "--cwd {}: uid {uid} cannot enter it in the container: {e}",
                    dir.display()
                ),
            );
        }
    }
    let usable = std::env::var_os("HOME")
        .as_deref()
        .is_some_and(|h| h != "/" && std::path::Path::new(h).is_dir());
    if !usable {
        let home = user::home_of(uid);
        let _ = user::ensure_home(&home);
        // Single-threaded here: nothing else reads the environment.
        std::env::set_var("HOME", &home);
    }
    let (program, argv): (OsString, Vec<OsString>) = if args.shell {
        let line = args.command.join(std::ffi::OsStr::new(" "));
        match shell() {
            Ok(sh) => (sh.into(), vec!["-c".into(), line]),
            Err(why) => return fail(127, &why),
        }
    } else {
        (args.command[0].clone(), args.command[1..].to_vec())
    };
    let mut cmd = std::process::Command::new(&program);
    cmd.args(&argv);
    // Exec'd by the child itself, as through the agent (never `/bin/sh` for a file the kernel
    // will not run), `$0` of `bash -c` being `bash`.
    use std::os::unix::ffi::OsStrExt;
    let arg0 = if args.shell {
        std::path::Path::new(&program)
            .file_name()
            .unwrap_or(program.as_os_str())
            .to_os_string()
    } else {
        program.clone()
    };
    // Looked up on `PATH` as through the agent ([`SHELL_PATH`] without one), by the child,
    // as the command's user: never a file of that name in the cwd for an empty entry, and a
    // name with no place to look is not found.
    let path = std::env::var_os("PATH").unwrap_or_else(|| SHELL_PATH.into());
    let candidates = super::supervise::path_candidates(program.as_bytes(), path.as_bytes());
    if candidates.is_empty() {
        return not_started(&program, &std::io::ErrorKind::NotFound.into());
    }
    let env: Vec<Vec<u8>> = std::env::vars_os()
        .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
        .collect();
    let Some(itself) = super::supervise::Execve::of_bytes(
        candidates.into_iter(),
        std::iter::once(&arg0)
            .chain(&argv)
            .map(|a| a.as_bytes().to_vec()),
        |_| env.clone(),
        None,
    ) else {
        return fail(125, "the command's environment holds a NUL byte");
    };
    supervise(
        cmd,
        &program,
        super::supervise::Last::Exec(itself),
        args.timeout_ms.map(Duration::from_millis),
    )
}

/// Looks `spec` (`NAME[:GID]`) up as the agent does ([`user::resolve`]) and drops to that user
/// and group, without supplementary groups (as through the agent). Errors: the reason.
fn become_user(spec: &str) -> Result<(), String> {
    let run_as = super::proto::RunAs::parse(spec).map_err(|why| format!("--user: {why}"))?;
    let (uid, gid) = user::resolve(&run_as)?;
    // SAFETY: plain system calls; single-threaded here.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setgid(gid) != 0
            || libc::setuid(uid) != 0
        {
            return Err(format!(
                "cannot become {uid}:{gid}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

fn not_started(program: &OsString, e: &std::io::Error) -> i32 {
    let code = match e.kind() {
        std::io::ErrorKind::NotFound => 127,
        _ => 126,
    };
    let what = match e.kind() {
        std::io::ErrorKind::NotFound => "command not found".to_string(),
        _ => e.to_string(),
    };
    fail(code, &format!("{}: {what}", program.to_string_lossy()))
}

/// Starts `cmd` in a session of its own under this process as subreaper, waits for it, and
/// kills its whole tree once `timeout` has passed; returns its exit status (124 on timeout).
/// When the kernel's OOM killer ended it, says so on stderr (naming the container's limit).
fn supervise(
    mut cmd: std::process::Command,
    program: &OsString,
    itself: super::supervise::Last,
    timeout: Option<Duration>,
) -> i32 {
    let oom_before = super::supervise::oom_kills();
    use std::sync::atomic::{AtomicBool, Ordering};
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Err(itself.run())
        });
    }
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let fired = std::sync::Arc::new(AtomicBool::new(false));
    let timer = std::sync::Arc::clone(&fired);
    // The timer is made before the fork: at the sandbox's process limit a thread made after it
    // could fail, and leave a command without its timeout. It waits for the command's start.
    let (started, start_seen) = std::sync::mpsc::channel::<()>();
    if let Some(timeout) = timeout {
        let made = std::thread::Builder::new().spawn(move || {
            if start_seen.recv().is_err() {
                return;
            }
            std::thread::sleep(timeout);
            timer.store(true, Ordering::SeqCst);
            super::supervise::kill_tree(me);
        });
        if let Err(e) = made {
            let why = super::stats::at_process_limit(&e).unwrap_or_else(|| e.to_string());
            return fail(125, &format!("cannot start the timeout's thread: {why}"));
        }
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return not_started(program, &e),
    };
    let _ = started.send(());
    let main = rustix::process::Pid::from_child(&child)
        .as_raw_nonzero()
        .get();
    loop {
        let mut status = 0;
        // Every child: the command, and orphans of its tree reparented to us.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == main {
            // Leftover children of the command stay (a server started with `&`); they are
            // reparented to PID 1 when we exit.
            if fired.load(Ordering::SeqCst) {
                return 124;
            }
            let killed = (libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL)
                || (libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 128 + libc::SIGKILL);
            if killed
                && super::supervise::oom_kills()
                    .zip(oom_before)
                    .is_some_and(|(now, then)| now > then)
            {
                let limit = super::supervise::memory_limit()
                    .map(|b| format!(" (the sandbox's memory limit is {} MiB)", b >> 20))
                    .unwrap_or_default();
                warn(&format!(
                    "the command was killed by the kernel's OOM killer: the sandbox ran out of memory{limit}"
                ));
            }
            return if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
        }
        if pid < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 255;
        }
    }
}
