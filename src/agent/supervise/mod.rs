//! The supervisor of one command (`h9sandbox agent supervise`, started by the agent for each
//! exec): a child subreaper (`PR_SET_CHILD_SUBREAPER`, `prctl(2)`) that starts the command and
//! stays the ancestor of everything the command starts, so that the whole tree can be found and
//! killed however its processes try to leave it.
//!
//! A process that forks and exits, calls `setsid`, daemonizes or clears its environment stays a
//! descendant of its nearest subreaper: its orphans are reparented to the supervisor, not to the
//! container's PID 1. [`kill_tree`] walks `/proc` for the supervisor's descendants and SIGKILLs
//! them until none is left (a process forked meanwhile is found on the next pass).
//!
//! It runs as the container's root, so that the command (run as the sandbox's user) cannot signal
//! or trace it. It talks to the agent over a socket pair on descriptor 3 ([`Spec`] in,
//! [`Event`] out, [`Control`] in), with the framing of [`super::proto`]. The agent starts it
//! ahead of its command ([`Idle`]) and hands it the command's standard streams on that socket
//! before the spec; it passes them to the command and then points its own at `/dev/null`, so the
//! agent sees the end of the output when the last process of the tree holding it exits.

mod execve;
mod procs;

pub(crate) use execve::{Execve, Last, Report};
pub(crate) use procs::*;

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::BytesMut;
use serde::{Deserialize, Serialize};
use tokio_util::codec::{Decoder, Encoder};

use super::proto::{Codec, CommandLine, WinSize};

/// Added to the `errno` of a failed `chdir` into the command's working directory, to tell it from
/// a failed `exec` (reported as [`Event::Failed`] with status 125: the caller's mistake).
const CWD_ERRNO: i32 = 1 << 20;

/// Descriptor the supervisor's control socket arrives on.
pub(crate) const CONTROL_FD: i32 = 3;

/// Shell command lines longer than this go to the shell through a pipe (`bash /dev/fd/3`)
/// instead of its argument vector, whose strings the kernel limits to 128 KiB each.
pub(crate) const ARGV_SCRIPT_MAX: usize = 96 << 10;

/// What to run, sent by the agent as the first message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Spec {
    /// The command.
    pub command: CommandLine,
    /// Working directory.
    pub cwd: String,
    /// The whole environment of the command.
    pub env: Vec<(String, String)>,
    /// User ID to run as.
    pub uid: u32,
    /// Group ID to run as (no supplementary groups).
    pub gid: u32,
    /// Home directory to create (as the user) when missing.
    pub home: Option<String>,
    /// Run it on a new pseudo-terminal of this size ([`super::pty`]): its standard streams and
    /// controlling terminal, pumped to and from the supervisor's stdout and stdin.
    pub tty: Option<WinSize>,
}

/// What the supervisor reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Event {
    /// The command's process runs, with this PID, in this audit session ([`join_audit_session`];
    /// `None` where the kernel gave none); `program` is what was executed (the shell of a
    /// command line, the program of an argument vector).
    Started {
        pid: u32,
        session: Option<u32>,
        program: String,
    },
    /// It could not be started: 127 not found, 126 not executable, 125 its working directory
    /// cannot be entered or its user is unknown, with the reason.
    Failed { code: i32, message: String },
    /// Its own process ended with this status (128+N for signal N); `oom` when the kernel's OOM
    /// killer ended it ([`oom_kills`] went up while it ran, and it ended with 137: killed by
    /// SIGKILL, or a shell whose pipeline was); `signal` the signal that ended it, if one did.
    Exited {
        code: i32,
        oom: bool,
        signal: Option<i32>,
    },
    /// No process of the tree is left; the supervisor exits.
    Empty,
    /// Sent before the command exists: the audit session it will run in (`None` where the
    /// kernel gave none), so that a command killing its supervisor before [`Event::Started`]
    /// is still found by its session.
    Session { session: Option<u32> },
}

/// What the agent asks of a running supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Control {
    /// Kill every process of the tree.
    Kill,
    /// Send this signal to the command's process group.
    Signal(i32),
    /// Resize the command's terminal ([`Spec::tty`]).
    Resize(WinSize),
}

/// Reads one framed message from a blocking stream.
pub(crate) fn read_msg<T: for<'de> Deserialize<'de>>(
    r: &mut impl Read,
    buf: &mut BytesMut,
) -> std::io::Result<Option<T>> {
    let mut codec: Codec<T, ()> = Codec::default();
    loop {
        if let Some(m) = codec.decode(buf)? {
            return Ok(Some(m));
        }
        let mut chunk = [0u8; 8192];
        let n = r.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Writes one framed message to a blocking stream.
pub(crate) fn write_msg<T: Serialize>(w: &mut impl Write, msg: T) -> std::io::Result<()> {
    let mut codec: Codec<(), T> = Codec::default();
    let mut buf = BytesMut::new();
    codec.encode(msg, &mut buf)?;
    w.write_all(&buf)
}

/// A supervisor started ahead of its command (`h9sandbox agent supervise`, its standard streams
/// `/dev/null`, its control socket on [`CONTROL_FD`]), waiting for the command's standard
/// streams ([`Idle::hand_over`]) and then its [`Spec`]: the agent keeps one ready, so that a
/// command does not wait for the `execve` and start of this binary (about 1 ms, the larger part
/// of an exec through the agent). Until then it has done nothing but make itself not dumpable
/// and a subreaper: its audit session, the OOM count and everything else of a command are taken
/// after the spec arrives, as for a supervisor started for it.
#[derive(Debug)]
pub(crate) struct Idle {
    /// Its PID (a child of the agent, which reaps it).
    pub pid: i32,
    /// The agent's end of its control socket.
    ctl: UnixStream,
}

impl Idle {
    /// Starts one. Errors: the fork or exec failed (`EAGAIN` at the sandbox's process limit).
    pub(crate) fn start() -> std::io::Result<Idle> {
        let (ours, theirs) = UnixStream::pair()?;
        let theirs_fd = theirs.as_raw_fd();
        let mut cmd = std::process::Command::new("/proc/self/exe");
        cmd.args(["agent", "supervise"])
            .env_clear()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: dup2 is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(theirs_fd, CONTROL_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let pid = rustix::process::Pid::from_child(&cmd.spawn()?)
            .as_raw_nonzero()
            .get();
        Ok(Idle { pid, ctl: ours })
    }

    /// Whether it still waits, ready for a command: its control socket is open at its end and
    /// holds nothing from it, and it is not stopped (root in the sandbox, the supervisor's
    /// user, may `SIGSTOP` or kill it meanwhile). One that is stopped is killed (it is the
    /// agent's unreaped child, so its PID is still its own).
    pub(crate) fn usable(&self) -> bool {
        let mut fds = [libc::pollfd {
            fd: self.ctl.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: poll(2) of one valid descriptor, without waiting.
        if unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) } != 0 {
            return false;
        }
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next());
        match state {
            Some("S" | "R" | "D") => true,
            _ => {
                // SAFETY: kill(2) of the agent's own unreaped child.
                unsafe { libc::kill(self.pid, libc::SIGKILL) };
                false
            }
        }
    }

    /// Hands the command's standard streams over (`stdin` `None`: `/dev/null`, which the
    /// supervisor already has) as one byte, their count, carrying the descriptors
    /// (`SCM_RIGHTS`); returns the control socket, on which the [`Spec`] goes next. It never
    /// waits: the socket is empty. Errors: the supervisor is gone (`EPIPE`).
    pub(crate) fn hand_over(
        self,
        stdin: Option<std::os::fd::BorrowedFd<'_>>,
        stdout: std::os::fd::BorrowedFd<'_>,
        stderr: std::os::fd::BorrowedFd<'_>,
    ) -> std::io::Result<UnixStream> {
        use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
        let fds: Vec<std::os::fd::BorrowedFd<'_>> =
            stdin.into_iter().chain([stdout, stderr]).collect();
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err(std::io::Error::other("no room for the descriptors"));
        }
        // cast: two or three descriptors.
        #[allow(clippy::cast_possible_truncation)]
        let count = [fds.len() as u8];
        let sent = rustix::net::sendmsg(
            &self.ctl,
            &[std::io::IoSlice::new(&count)],
            &mut control,
            SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
        )?;
        if sent != 1 {
            return Err(std::io::Error::other(
                "the supervisor's socket took nothing",
            ));
        }
        Ok(self.ctl)
    }
}

/// The supervisor's side of [`Idle::hand_over`]: receives the command's standard streams on
/// the control socket and puts them on descriptors 0 to 2 (1 and 2 when two come).
fn receive_stdio(ctl: &UnixStream) -> std::io::Result<()> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut count = [0u8; 1];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        ctl,
        &mut [std::io::IoSliceMut::new(&mut count)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(r) = msg {
            fds.extend(r);
        }
    }
    if got.bytes != 1 || !(2..=3).contains(&fds.len()) || usize::from(count[0]) != fds.len() {
        return Err(std::io::Error::other(
            "expected the command's standard streams",
        ));
    }
    // Without stdin, stdout and stderr: the last ones.
    let targets = &[0, 1, 2][3 - fds.len()..];
    for (fd, target) in fds.iter().zip(targets) {
        // SAFETY: dup2(2) of a descriptor we own onto a standard stream.
        if unsafe { libc::dup2(fd.as_raw_fd(), *target) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn exit_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        255
    }
}

/// Waits for the command ([`Idle`]): its standard streams first, then its spec. Returns a
/// reader of the control socket with what it has buffered beyond the spec (a control message
/// sent right after it is kept), and the spec; `None` when the agent sent anything else.
fn await_command(ctl: &UnixStream) -> Option<(UnixStream, BytesMut, Spec)> {
    receive_stdio(ctl).ok()?;
    let mut buf = BytesMut::new();
    let mut reader = ctl.try_clone().ok()?;
    let spec: Spec = read_msg(&mut reader, &mut buf).ok()??;
    Some((reader, buf, spec))
}

/// Runs the supervisor; returns its own exit status (0 once the tree is gone).
pub(crate) fn run() -> i32 {
    if super::not_dumpable().is_err() {
        return 125;
    }
    // SAFETY: descriptor 3 is the control socket the agent passed (checked below).
    let ctl = unsafe { UnixStream::from_raw_fd(CONTROL_FD) };
    if ctl.peer_addr().is_err() {
        return 125;
    }
    // The command must not inherit the control socket.
    unsafe { libc::fcntl(CONTROL_FD, libc::F_SETFD, libc::FD_CLOEXEC) };
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let Some((reader, buf, spec)) = await_command(&ctl) else {
        return 125;
    };
    let writer = Arc::new(Mutex::new(ctl));
    let send = |w: &Arc<Mutex<UnixStream>>, e: Event| {
        let mut g = w.lock().unwrap_or_else(|e| e.into_inner());
        let _ = write_msg(&mut *g, e);
    };
    let oom_before = oom_kills();
    // Before the command exists: it inherits the session, and can never leave it.
    let session = join_audit_session(spec.uid);
    send(&writer, Event::Session { session });
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let main_pid = Arc::new(AtomicI32::new(0));
    let terminal: Arc<OnceLock<Arc<OwnedFd>>> = Arc::default();
    // Made before the command starts: at the sandbox's process limit a thread made after its
    // fork could fail, and leave a running command that nothing could stop.
    if let Err(e) = control_thread(
        me,
        reader,
        buf,
        Arc::clone(&main_pid),
        Arc::clone(&terminal),
    ) {
        let message = super::stats::at_process_limit(&e)
            .unwrap_or_else(|| format!("cannot start the command's control thread: {e}"));
        send(&writer, Event::Failed { code: 125, message });
        return 0;
    }
    let (main, program, master) = match spawn(&spec) {
        Ok(started) => started,
        Err((code, message)) => {
            send(&writer, Event::Failed { code, message });
            return 0;
        }
    };
    main_pid.store(main, Ordering::SeqCst);
    if let Some(m) = &master {
        let _ = terminal.set(Arc::clone(m));
    }
    // A terminal's pumps take our stdin and stdout (the agent's pipes) before they go.
    let pumps = match &master {
        Some(m) => match terminal_pumps(m) {
            Ok(p) => Some(p),
            Err(e) => {
                unsafe { libc::kill(main, libc::SIGKILL) };
                send(
                    &writer,
                    Event::Failed {
                        code: 125,
                        message: format!("cannot pass the terminal on: {e}"),
                    },
                );
                return 0;
            }
        },
        None => None,
    };
    // The tree holds the output pipes now; our copies would keep them open.
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
    send(
        &writer,
        Event::Started {
            // cast: a PID the kernel gave, 1 to 2^22.
            #[allow(clippy::cast_sign_loss)]
            pid: main as u32,
            session,
            program,
        },
    );
    let mut main_done = false;
    loop {
        let mut status = 0;
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == main {
            main_done = true;
            // What it wrote to its terminal last is passed on before its exit is told.
            if let Some(p) = &pumps {
                p.drain(std::time::Duration::from_secs(2));
            }
            // Killed (SIGKILL), or a shell reporting a child's SIGKILL (137), while the OOM
            // killer killed in this container.
            let oom = exit_code(status) == 128 + libc::SIGKILL
                && oom_kills()
                    .zip(oom_before)
                    .is_some_and(|(now, then)| now > then);
            send(
                &writer,
                Event::Exited {
                    code: exit_code(status),
                    oom,
                    signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
                },
            );
        } else if pid < 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            // ECHILD: the tree is gone.
            if !main_done {
                send(
                    &writer,
                    Event::Exited {
                        code: 255,
                        oom: false,
                        signal: None,
                    },
                );
            }
            send(&writer, Event::Empty);
            return 0;
        }
    }
}

/// Starts the thread that acts on the agent's requests on the control socket (`reader`, with
/// what `buf` holds of it) for the tree under `me`: kill it, signal the command's process group
/// (`main`, once started), resize its terminal (once it has one). The agent's end closing kills
/// the tree: nothing answers for it any more. Errors: the thread could not be made (`EAGAIN` at
/// the process limit).
fn control_thread(
    me: i32,
    mut reader: UnixStream,
    mut buf: BytesMut,
    main: Arc<AtomicI32>,
    terminal: Arc<OnceLock<Arc<OwnedFd>>>,
) -> std::io::Result<()> {
    std::thread::Builder::new().spawn(move || loop {
        match read_msg::<Control>(&mut reader, &mut buf) {
            Ok(Some(Control::Kill)) => kill_tree(me),
            // Delivered when the command's process group runs as our user (root); other
            // users' groups would need CAP_KILL.
            Ok(Some(Control::Signal(sig))) => {
                let main = main.load(Ordering::SeqCst);
                if main > 0 {
                    // SAFETY: kill(2) of the command's process group.
                    unsafe { libc::kill(-main, sig) };
                }
            }
            Ok(Some(Control::Resize(size))) => {
                if let Some(m) = terminal.get() {
                    super::pty::resize(m.as_fd(), size);
                }
            }
            // The agent is gone (or spoke nonsense): nothing answers for the tree any more.
            Ok(None) | Err(_) => {
                kill_tree(me);
                return;
            }
        }
    })?;
    Ok(())
}

/// The pumps of a terminal command's `master`: our stdin and stdout (the agent's pipes; stdin
/// only when it is no `/dev/null`) are moved to descriptors of their own first.
fn terminal_pumps(master: &Arc<OwnedFd>) -> std::io::Result<super::pty::Pumps> {
    let dup = |fd: i32| -> std::io::Result<OwnedFd> {
        // SAFETY: 0 and 1 are open (the agent passed them).
        let b = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        Ok(rustix::io::fcntl_dupfd_cloexec(b, 10)?)
    };
    let stdin_is_null = std::fs::metadata("/proc/self/fd/0")
        .ok()
        .zip(std::fs::metadata("/dev/null").ok())
        .is_some_and(|(a, b)| {
            use std::os::unix::fs::MetadataExt;
            (a.dev(), a.ino(), a.rdev()) == (b.dev(), b.ino(), b.rdev())
        });
    let input = if stdin_is_null { None } else { Some(dup(0)?) };
    super::pty::Pumps::start(Arc::clone(master), input, dup(1)?)
}

/// A started command: its PID, the program executed, and its terminal's master side
/// ([`Spec::tty`]).
type Started = (i32, String, Option<Arc<OwnedFd>>);

/// A command line run without its shell ([`crate::contract::simple`]): where its program may
/// be (the child tries each, as bash would look, [`Execve`]), its arguments, its `argv[0]` and
/// the variables bash would have given it (but `_`, the path of the program run, which the
/// child's [`Execve`] adds for each candidate); or bash's builtin `true` or `false` alone.
struct Direct {
    candidates: Vec<String>,
    args: Vec<String>,
    arg0: String,
    env: Vec<(String, String)>,
    /// The exit status of a builtin that starts no program ([`Last::Exit`]).
    builtin: Option<i32>,
}

/// Variables that change what bash does before or instead of running a simple command (a
/// startup file, options such as `xtrace`, exported functions, `PATH` entries to skip, the
/// directory it believes it is in), and those bash sets, resets or drops from what it passes on
/// (its own state, its prompts, `IFS`): with any of them set, the line goes to bash.
const SHELL_STEERING: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "EXECIGNORE",
    "PWD",
    "OLDPWD",
    "BASH_COMPAT",
    "BASH_XTRACEFD",
    "BASH",
    "BASHPID",
    "BASH_ARGC",
    "BASH_ARGV",
    "BASH_ARGV0",
    "BASH_COMMAND",
    "BASH_LINENO",
    "BASH_SOURCE",
    "BASH_SUBSHELL",
    "BASH_VERSINFO",
    "BASH_VERSION",
    "COMP_WORDBREAKS",
    "DIRSTACK",
    "EPOCHREALTIME",
    "EPOCHSECONDS",
    "FUNCNAME",
    "GROUPS",
    "HISTCMD",
    "IFS",
    "LINENO",
    "OPTERR",
    "OPTIND",
    "PIPESTATUS",
    "PPID",
    "PS1",
    "PS2",
    "PS4",
    "RANDOM",
    "SECONDS",
    "SRANDOM",
];

/// Whether resolving `path` (absolute) meets `/proc` at any step, its symbolic links followed
/// (at most 40, as the kernel's `ELOOP`; more counts as meeting it). The supervisor that looks
/// a program up is not the process that runs it: `/proc/self`, `/proc/thread-self` and a
/// process's `cwd` or `fd` there name other things in each, so such a program goes to bash.
fn through_proc(path: &std::path::Path) -> bool {
    use std::path::{Component, PathBuf};
    let mut pending: std::collections::VecDeque<std::ffi::OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut at = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            at.pop();
            continue;
        }
        at.push(&part);
        if at.starts_with("/proc") {
            return true;
        }
        if let Ok(target) = std::fs::read_link(&at) {
            links += 1;
            if links > 40 {
                return true;
            }
            at.pop();
            if target.is_absolute() {
                at = PathBuf::from("/");
            }
            for c in target.components().rev() {
                match c {
                    Component::Normal(n) => pending.push_front(n.to_os_string()),
                    Component::ParentDir => pending.push_front("..".into()),
                    _ => {}
                }
            }
        }
    }
    false
}

/// The places bash would look for `name` on `path` (absolute entries only), in its order, for
/// the child to try ([`Execve`]); `None` (bash decides) when one of them leads through `/proc`
/// ([`through_proc`]).
fn candidates_on(path: &str, name: &str) -> Option<Vec<String>> {
    path.split(':')
        .map(|d| std::path::Path::new(d).join(name))
        .map(|p| (!through_proc(&p)).then(|| p.to_string_lossy().into_owned()))
        .collect()
}

/// How `line` runs without `shell` when bash would only look its first word up on `PATH` and
/// `exec` it (bash's one-command `-c`, which replaces itself by the program): the same
/// candidates, arguments and `argv[0]`, and the variables bash adds (`PWD` the physical working
/// directory, `SHLVL` unchanged or 0; `_` the program's path, added by [`Execve`]); for `true`
/// or `false` alone, the builtin's status. `None` (the shell runs it) for a shell other than
/// bash, a line of [`crate::contract::simple::simple_words`]' `None`, an environment with
/// [`SHELL_STEERING`], an exported function (`BASH_FUNC_…`), a `SHLVL` other than 0 to 998,
/// no `PATH` (bash's default differs from [`super::wrap::SHELL_PATH`]) or one with an entry
/// that is not absolute, or a path through `/proc`.
fn without_shell(shell: &str, line: &str, spec: &Spec) -> Option<Direct> {
    if !shell.ends_with("/bash") {
        return None;
    }
    let words = crate::contract::simple::simple_words(line)?;
    if spec
        .env
        .iter()
        .any(|(k, _)| SHELL_STEERING.contains(&k.as_str()) || k.starts_with("BASH_FUNC_"))
    {
        return None;
    }
    let shlvl = match spec.env.iter().rev().find(|(k, _)| k == "SHLVL") {
        None => Some("0".to_string()),
        Some((_, v)) => match v.parse::<u16>() {
            Ok(n) if n <= 998 && n.to_string() == *v => None,
            _ => return None,
        },
    };
    let cwd = std::path::Path::new(&spec.cwd);
    if !cwd.is_absolute() || through_proc(cwd) {
        return None;
    }
    let builtin = match words[..] {
        ["true"] => Some(0),
        ["false"] => Some(1),
        _ => None,
    };
    let (_, path) = spec.env.iter().rev().find(|(k, _)| k == "PATH")?;
    let candidates = if builtin.is_some() {
        Vec::new()
    } else if words[0].contains('/') {
        if through_proc(&cwd.join(words[0])) {
            return None;
        }
        vec![words[0].to_string()]
    } else {
        if path.split(':').any(|d| !d.starts_with('/')) {
            return None;
        }
        candidates_on(path, words[0])?
    };
    let pwd = std::fs::canonicalize(&spec.cwd)
        .ok()?
        .into_os_string()
        .into_string()
        .ok()?;
    let mut env = spec.env.clone();
    env.push(("PWD".into(), pwd));
    env.extend(shlvl.map(|l| ("SHLVL".to_string(), l)));
    Some(Direct {
        candidates,
        args: words[1..].iter().map(|w| (*w).to_string()).collect(),
        arg0: words[0].to_string(),
        env,
        builtin,
    })
}

/// Where `program` (an `argv[0]`) may be, in the order `execvp(3)` looks: with a `/`, that
/// path; else `program` in each directory of `path` (`:`-separated), but never in the working
/// directory for an empty entry. Empty when there is no such place.
pub(crate) fn path_candidates<S: AsRef<[u8]>>(program: S, path: S) -> Vec<Vec<u8>> {
    let program = program.as_ref();
    if program.contains(&b'/') {
        return vec![program.to_vec()];
    }
    path.as_ref()
        .split(|b| *b == b':')
        .filter(|d| !d.is_empty())
        .map(|d| [d, b"/", program].concat())
        .collect()
}

/// The [`Execve`] of `argv` (its `[0]` first) at `candidates`, with `env` (a later value of a
/// name wins; sorted by name as std passes an environment), `_` set to each candidate's path
/// with `underscore` (bash's variable for the program it runs), telling `report`. `None`: a
/// NUL byte in any of them, or no candidate.
fn execve_at(
    candidates: &[String],
    argv: &[String],
    env: &[(String, String)],
    underscore: bool,
    report: Option<&Report>,
) -> Option<Execve> {
    let env: std::collections::BTreeMap<&str, &str> = env
        .iter()
        .filter(|(k, _)| !underscore || k != "_")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    Execve::of_bytes(
        candidates.iter().map(|c| c.as_bytes().to_vec()),
        argv.iter().map(|a| a.as_bytes().to_vec()),
        |c| {
            let mut env = env.clone();
            let c = String::from_utf8_lossy(c);
            if underscore {
                env.insert("_", &c);
            }
            env.iter()
                .map(|(k, v)| format!("{k}={v}").into_bytes())
                .collect()
        },
        report,
    )
}

/// The command that runs `program` with `args` and `env` as `spec`'s user, in its working
/// directory and its own session, its standard streams on `pty`'s terminal when it has one and
/// `script_fd` (the shell's script) as descriptor 3; with `itself`, the child does that last
/// ([`Last`]) in place of std's exec.
fn command(
    spec: &Spec,
    pty: Option<&super::pty::Pty>,
    script_fd: Option<i32>,
    program: &str,
    args: &[String],
    env: &[(String, String)],
    itself: Option<Last>,
) -> Result<std::process::Command, (i32, String)> {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(p) = pty {
        let side = || {
            p.slave
                .try_clone()
                .map(std::process::Stdio::from)
                .map_err(|e| (125, format!("cannot open a terminal in the sandbox: {e}")))
        };
        cmd.stdin(side()?).stdout(side()?).stderr(side()?);
    }
    let tty = pty.is_some();
    let me = (unsafe { libc::getuid() }, unsafe { libc::getgid() });
    if me != (spec.uid, spec.gid) {
        // As root, std drops the supplementary groups (setgroups(0)) before setuid.
        cmd.uid(spec.uid).gid(spec.gid);
    }
    let home = spec
        .home
        .as_ref()
        .and_then(|h| std::ffi::CString::new(h.as_bytes()).ok());
    let cwd = std::ffi::CString::new(spec.cwd.as_bytes())
        .map_err(|_| (125, "the working directory holds a NUL byte".to_string()))?;
    // SAFETY: only async-signal-safe calls (setsid, mkdir, chdir, dup2) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The terminal (its standard streams by now) becomes the new session's.
            if tty && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(h) = &home {
                libc::mkdir(h.as_ptr(), 0o700);
            }
            // Entered here, as the user (std's own `current_dir` would fail alike but could not
            // be told from a failed exec): the error travels offset by CWD_ERRNO.
            if libc::chdir(cwd.as_ptr()) < 0 {
                let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                return Err(std::io::Error::from_raw_os_error(CWD_ERRNO + errno));
            }
            if let Some(fd) = script_fd {
                if libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(x) = &itself {
                return Err(x.run());
            }
            Ok(())
        });
    }
    Ok(cmd)
}

/// Starts the command as `spec` says, in its own session (on a new terminal with
/// [`Spec::tty`], whose master is returned too); returns its PID and the program executed, or
/// the exit status a shell would give (127 not found, 126 cannot execute) with the reason. A
/// command line that needs no shell ([`without_shell`]) runs without one; when that program
/// cannot be executed (say, a script without `#!`), the shell runs the line after all, and
/// answers as it always did.
fn spawn(spec: &Spec) -> Result<Started, (i32, String)> {
    let path = spec
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| super::wrap::SHELL_PATH.into());
    let mut script_file: Option<(OwnedFd, String)> = None;
    let mut direct = None;
    let (program, args): (String, Vec<String>) = match &spec.command {
        CommandLine::Shell(line) => {
            let shell = super::wrap::shell().map_err(|why| (127, why))?;
            if line.len() > ARGV_SCRIPT_MAX {
                // In a memory file (`memfd_create(2)`, mode 0777 whoever made it), not a pipe:
                // the shell opens `/dev/fd/3` anew, which checks a pipe's owner and mode (the
                // supervisor's, 0600), so a command of another user could not read it.
                let fd = rustix::fs::memfd_create(
                    "h9sandbox-command",
                    rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
                )
                .map_err(|e| (125, format!("cannot make a memory file: {e}")))?;
                let mut f = std::fs::File::from(fd);
                f.write_all(line.as_bytes())
                    .map_err(|e| (125, format!("cannot write the command line: {e}")))?;
                // Sealed: the command cannot change the script its shell is reading.
                let _ = rustix::fs::fcntl_add_seals(
                    &f,
                    rustix::fs::SealFlags::WRITE
                        | rustix::fs::SealFlags::GROW
                        | rustix::fs::SealFlags::SHRINK
                        | rustix::fs::SealFlags::SEAL,
                );
                script_file = Some((OwnedFd::from(f), line.clone()));
                (shell, vec!["/dev/fd/3".into()])
            } else {
                direct = without_shell(&shell, line, spec);
                (shell, vec!["-c".into(), line.clone()])
            }
        }
        CommandLine::Argv(argv) => (argv[0].clone(), argv[1..].to_vec()),
    };
    let pty = match spec.tty {
        Some(size) => Some(
            super::pty::open_as(spec.uid, spec.gid, size)
                .map_err(|e| (125, format!("cannot open a terminal in the sandbox: {e}")))?,
        ),
        None => None,
    };
    let script_fd = script_file.as_ref().map(|(r, _)| r.as_raw_fd());
    let nul = |what: &str| {
        (
            126,
            format!("cannot run {what}: a NUL byte in its arguments or environment"),
        )
    };
    // Started as `cmd` says, the child's last step `last`; the program it ran, of `candidates`
    // by what it told `report` (the first without a report).
    let launch = |candidates: &[String],
                  args: &[String],
                  arg0: &str,
                  env: &[(String, String)],
                  last: Last,
                  report: Option<Report>| {
        let first = candidates.first().map_or(arg0, String::as_str);
        let mut cmd = command(spec, pty.as_ref(), script_fd, first, args, env, Some(last))?;
        cmd.arg0(arg0);
        let spawned = first_to_go_at_oom(|| cmd.spawn());
        drop(cmd);
        let ran = report
            .and_then(Report::ran)
            .and_then(|i| candidates.get(i))
            .map_or(first, String::as_str)
            .to_string();
        Ok::<_, (i32, String)>((spawned, ran))
    };
    let tried = match &direct {
        Some(d) => {
            let report = d.builtin.is_none().then(Report::new).and_then(Result::ok);
            let argv: Vec<String> = std::iter::once(d.arg0.clone())
                .chain(d.args.iter().cloned())
                .collect();
            let last = match d.builtin {
                Some(status) => Some(Last::Exit(status)),
                None => {
                    execve_at(&d.candidates, &argv, &d.env, true, report.as_ref()).map(Last::Exec)
                }
            };
            match last {
                Some(last) => Some(launch(
                    &d.candidates,
                    &d.args,
                    &d.arg0,
                    &d.env,
                    last,
                    report,
                )?),
                None => None,
            }
        }
        None => None,
    };
    // The command as asked (the shell and its line, or the argument vector), exec'd by the
    // child itself: an argument vector runs exactly that program, looked up by the child as
    // the command's user, never `/bin/sh` for a file the kernel will not run ([`Execve`]).
    let as_asked = || {
        let (candidates, arg0) = match &spec.command {
            CommandLine::Argv(argv) => {
                let candidates: Vec<String> = path_candidates(argv[0].as_bytes(), path.as_bytes())
                    .into_iter()
                    .map(|c| String::from_utf8_lossy(&c).into_owned())
                    .collect();
                if candidates.is_empty() {
                    return Err((127, format!("{}: command not found", argv[0])));
                }
                (candidates, argv[0].clone())
            }
            // `$0` of `bash -c` is `bash`, as a shell that looked it up on `PATH` starts it.
            CommandLine::Shell(_) => (
                vec![program.clone()],
                program.rsplit('/').next().unwrap_or(&program).to_string(),
            ),
        };
        let report = Report::new().ok();
        let argv: Vec<String> = std::iter::once(arg0.clone())
            .chain(args.iter().cloned())
            .collect();
        let last = execve_at(&candidates, &argv, &spec.env, false, report.as_ref())
            .ok_or_else(|| nul(&program))?;
        launch(
            &candidates,
            &args,
            &arg0,
            &spec.env,
            Last::Exec(last),
            report,
        )
    };
    let (spawned, program) = match tried {
        // Not executable after all: the shell runs the line. The directory or the process limit
        // would fail the shell's start alike.
        Some((Err(e), _))
            if e.raw_os_error().is_none_or(|n| n < CWD_ERRNO)
                && super::stats::at_process_limit(&e).is_none() =>
        {
            as_asked()?
        }
        Some(r) => r,
        None => as_asked()?,
    };
    match spawned {
        Ok(child) => Ok((
            rustix::process::Pid::from_child(&child)
                .as_raw_nonzero()
                .get(),
            program,
            pty.map(|p| Arc::new(p.master)),
        )),
        Err(e) => match e.raw_os_error() {
            Some(n) if n >= CWD_ERRNO => {
                let why = std::io::Error::from_raw_os_error(n - CWD_ERRNO);
                Err((
                    125,
                    format!(
                        "--cwd {}: uid {} cannot enter it in the container: {why}",
                        spec.cwd, spec.uid
                    ),
                ))
            }
            _ => {
                let code = if e.kind() == std::io::ErrorKind::NotFound {
                    127
                } else {
                    126
                };
                // No candidate there: said as a shell says it (the last one tried, when it is
                // there, failed for its `#!` interpreter).
                if let CommandLine::Argv(argv) = &spec.command {
                    if code == 127
                        && !argv[0].contains('/')
                        && std::fs::symlink_metadata(&program).is_err()
                    {
                        return Err((127, format!("{}: command not found", argv[0])));
                    }
                }
                match super::stats::at_process_limit(&e) {
                    Some(why) => Err((125, format!("cannot run {program}: {why}"))),
                    None => Err((code, format!("cannot run {program}: {e}"))),
                }
            }
        },
    }
}
