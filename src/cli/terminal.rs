//! `exec -t` and `shell`: a command on a terminal in the sandbox ([`crate::sandbox::terminal`]),
//! with our own terminal in raw mode while it runs, so every keystroke (Ctrl-C, Ctrl-Z, Ctrl-\
//! included) reaches the sandbox's terminal as a byte, and restored on every way out: the
//! command's end, an error, a signal (SIGINT, SIGTERM, SIGHUP end the session; SIGTSTP from
//! another process suspends it with the terminal restored, SIGCONT resumes it in raw mode),
//! and a panic. The window's size goes along at start and on every `SIGWINCH`.
//!
//! Without a terminal on our side, `-t` is refused (as `docker exec -t` is when its input is
//! none), unless `--force-tty`: the command then gets a terminal of 80x24 (or our stdout's size),
//! and our stdin, whatever it is, goes to it as keystrokes.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Mutex;

use anyhow::Result;
use rustix::termios::Termios;
use tokio::sync::mpsc;

use super::exec::{ended_message, env_assignments, oom_message, refuse_option_as_command};
use super::{ExecArgs, Format, ShellArgs};
use crate::contract::proto::WinSize;
use crate::error::Error;
use crate::sandbox::exec::ExecRequest;
use crate::sandbox::terminal::{Input, LOGIN_SHELL};
use crate::sandbox::Ctx;

/// `exec -t`.
pub(crate) async fn exec(ctx: &Ctx, format: Format, args: &ExecArgs) -> Result<i32> {
    refuse_option_as_command("exec", &args.command)?;
    let mut req = super::exec::request(args)?;
    req.env.insert(0, term_variable());
    // What `ended_message` calls the command.
    let named = match &args.command_file {
        Some(f) => vec![format!("--command-file {}", f.display())],
        None => args.command.clone(),
    };
    run(ctx, format, req, args.force_tty, &named, Front::ExecT).await
}

/// Which front end asked for the terminal, for messages that name its own options.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Front {
    /// `exec -t`.
    ExecT,
    /// `shell`.
    Shell,
}

/// `shell`.
pub(crate) async fn shell(ctx: &Ctx, format: Format, args: &ShellArgs) -> Result<i32> {
    let mut env = env_assignments(&args.env, |k| std::env::var_os(k))?;
    env.insert(0, term_variable());
    let req = ExecRequest {
        id: args.sandbox.id.clone(),
        cwd: args.cwd.clone(),
        user: args.user.clone(),
        env,
        // No timeout unless one is given: a session lasts as long as its user wants.
        timeout: Some(args.timeout.unwrap_or(std::time::Duration::ZERO)),
        interactive: true,
        max_output: 0,
        command: vec![LOGIN_SHELL.to_string()],
        argv: false,
    };
    run(
        ctx,
        format,
        req,
        false,
        &["shell".to_string()],
        Front::Shell,
    )
    .await
}

/// `TERM=` our own terminal's type (what programs in the sandbox draw for), `xterm` when we
/// have none, as `docker exec -t` sets; a later `--env TERM=…` replaces it.
fn term_variable() -> String {
    let term = std::env::var("TERM")
        .ok()
        .filter(|t| !t.is_empty() && t != "dumb" && t.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or_else(|| "xterm".into());
    format!("TERM={term}")
}

async fn run(
    ctx: &Ctx,
    format: Format,
    req: ExecRequest,
    force: bool,
    command: &[String],
    front: Front,
) -> Result<i32> {
    let refuse = |why: &str| -> anyhow::Error { Error::Usage(why.to_string()).into() };
    if format == Format::Json {
        return Err(refuse(match front {
            Front::ExecT => "--format json cannot hold a terminal's output (what a terminal shows is one stream of screen updates); drop -t to capture stdout and stderr",
            Front::Shell => "--format json cannot hold a terminal session (one stream of screen updates); `h9sandbox exec ID --format json -- COMMAND` captures a command's stdout and stderr",
        }));
    }
    let stdin_tty = rustix::termios::isatty(rustix::stdio::stdin());
    let stdout_tty = rustix::termios::isatty(rustix::stdio::stdout());
    if !force && ((req.interactive && !stdin_tty) || !stdout_tty) {
        let which = if req.interactive && !stdin_tty {
            "input"
        } else {
            "output"
        };
        return Err(refuse(&match front {
            Front::ExecT if which == "input" => "the input is not a terminal: -t with -i needs one (run it from a terminal, drop -t, or give --force-tty for a program that drives the terminal itself)".to_string(),
            Front::ExecT => "the output is not a terminal: -t needs one (drop -t to pass the output on as it is, or give --force-tty)".to_string(),
            Front::Shell => format!("the {which} is not a terminal: `shell` needs one (run it from a terminal; without one, `h9sandbox exec ID -- COMMAND` runs a command, and `exec -it --force-tty` gives a program a terminal of its own)"),
        }));
    }
    let size = window_size().unwrap_or(WinSize::DEFAULT);
    let (tx, rx) = mpsc::channel::<Input>(16);
    // Raw mode only where keystrokes are read from a terminal.
    let raw = if req.interactive && stdin_tty {
        Some(RawMode::enter()?)
    } else {
        None
    };
    let reader = if req.interactive {
        Some(InputThread::start(tx.clone())?)
    } else {
        None
    };
    let watcher = tokio::spawn(watch_window(tx, raw.is_some()));
    let mut stdout = tokio::io::stdout();
    let result = crate::sandbox::terminal::run(ctx, &req, size, rx, &mut stdout).await;
    watcher.abort();
    drop(reader);
    drop(raw);
    let done = result?;
    let out = &done.outcome;
    if let Some(line) = ended_message(out, done.timeout, &done.record, command) {
        crate::report::eprintln(&line);
    }
    if out.oom_killed {
        ctx.reporter.warn(&oom_message(&done.record));
    }
    Ok(out.exit_code)
}

/// Our window's size: stdout's terminal, else stdin's.
fn window_size() -> Option<WinSize> {
    [rustix::stdio::stdout(), rustix::stdio::stdin()]
        .into_iter()
        .find_map(|fd| rustix::termios::tcgetwinsize(fd).ok())
        .filter(|w| w.ws_row > 0 && w.ws_col > 0)
        .map(|w| WinSize {
            rows: w.ws_row,
            cols: w.ws_col,
        })
}

/// Sends our window's size on every `SIGWINCH`; with `raw`, also suspends on `SIGTSTP` (from
/// another process: in raw mode the keyboard's Ctrl-Z goes to the sandbox) with our terminal
/// restored, and comes back in raw mode.
async fn watch_window(tx: mpsc::Sender<Input>, raw: bool) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut winch) = signal(SignalKind::window_change()) else {
        return;
    };
    let mut tstp = if raw {
        signal(SignalKind::from_raw(libc::SIGTSTP)).ok()
    } else {
        None
    };
    loop {
        tokio::select! {
            _ = winch.recv() => {}
            Some(_) = async { match &mut tstp { Some(s) => s.recv().await, None => std::future::pending().await } } => {
                suspend();
            }
        }
        if let Some(size) = window_size() {
            if tx.send(Input::Resize(size)).await.is_err() {
                return;
            }
        }
    }
}

/// What our terminal was before raw mode, for [`RawMode`]'s restore and the panic hook.
static SAVED: Mutex<Option<Termios>> = Mutex::new(None);

/// Restores our terminal's saved mode, if raw mode is on.
fn restore() {
    if let Some(t) = SAVED.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        let _ = rustix::termios::tcsetattr(
            rustix::stdio::stdin(),
            rustix::termios::OptionalActions::Now,
            t,
        );
    }
}

/// Stops this process (as SIGTSTP would) with our terminal restored; raw again once continued.
fn suspend() {
    let saved = SAVED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let Some(saved) = saved else { return };
    let _ = rustix::termios::tcsetattr(
        rustix::stdio::stdin(),
        rustix::termios::OptionalActions::Now,
        &saved,
    );
    // SIGSTOP cannot be caught: this returns once SIGCONT arrives.
    unsafe { libc::raise(libc::SIGSTOP) };
    let mut raw = saved;
    raw.make_raw();
    let _ = rustix::termios::tcsetattr(
        rustix::stdio::stdin(),
        rustix::termios::OptionalActions::Now,
        &raw,
    );
}

/// Our terminal (stdin) in raw mode (`cfmakeraw(3)`: no echo, no line editing, no signals from
/// keys, no output processing) while it lives.
struct RawMode;

impl RawMode {
    /// Saves our terminal's mode and makes it raw; a panic from now on restores it first.
    fn enter() -> Result<RawMode> {
        let fd = rustix::stdio::stdin();
        let saved = rustix::termios::tcgetattr(fd)
            .map_err(|e| Error::Usage(format!("cannot read the terminal's mode: {e}")))?;
        let mut raw = saved.clone();
        raw.make_raw();
        *SAVED.lock().unwrap_or_else(|e| e.into_inner()) = Some(saved);
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        rustix::termios::tcsetattr(fd, rustix::termios::OptionalActions::Now, &raw)
            .map_err(|e| Error::Usage(format!("cannot put the terminal in raw mode: {e}")))?;
        Ok(RawMode)
    }
}

/// Terminal modes a program in the sandbox may have left on that would make our terminal
/// report to the caller's shell (mouse reports: 1000, 1002, 1003, 1006, 1015; focus events:
/// 1004; bracketed paste: 2004), turned off as the session ends (xterm's control sequences).
const MODES_OFF: &[u8] =
    b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?1004l\x1b[?2004l";

impl Drop for RawMode {
    fn drop(&mut self) {
        // The sandbox may have asked our terminal a question (a device attributes or a title
        // report) whose answer would land in the caller's shell as typed input: the modes
        // that report go off, the answers get a moment to arrive, and unread input is
        // discarded with the mode restored (TCSAFLUSH).
        if rustix::termios::isatty(rustix::stdio::stdout()) {
            let _ = rustix::io::write(rustix::stdio::stdout(), MODES_OFF);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        if let Some(t) = SAVED.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = rustix::termios::tcsetattr(
                rustix::stdio::stdin(),
                rustix::termios::OptionalActions::Flush,
                t,
            );
        }
        *SAVED.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Reads our stdin on a thread of its own into the channel, until its end or until dropped
/// (which wakes it at once: it never swallows a keystroke meant for the shell after us).
struct InputThread {
    wake: OwnedFd,
}

impl InputThread {
    fn start(tx: mpsc::Sender<Input>) -> Result<InputThread> {
        let (wake_r, wake) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        std::thread::spawn(move || read_input(rustix::stdio::stdin(), wake_r, tx));
        Ok(InputThread { wake })
    }
}

impl Drop for InputThread {
    fn drop(&mut self) {
        let _ = rustix::io::write(&self.wake, b"x");
    }
}

fn read_input(fd: BorrowedFd<'static>, wake: OwnedFd, tx: mpsc::Sender<Input>) {
    use rustix::event::{PollFd, PollFlags};
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let (ready, woken) = {
            let mut fds = [
                PollFd::new(&fd, PollFlags::IN),
                PollFd::new(&wake, PollFlags::IN),
            ];
            match rustix::event::poll(&mut fds, None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return,
            }
            (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
        };
        if woken {
            return;
        }
        if !ready {
            continue;
        }
        match rustix::io::read(fd.as_fd(), &mut buf) {
            Ok(0) => {
                let _ = tx.blocking_send(Input::End);
                return;
            }
            Ok(n) => {
                if tx.blocking_send(Input::Bytes(buf[..n].to_vec())).is_err() {
                    return;
                }
            }
            Err(rustix::io::Errno::INTR) | Err(rustix::io::Errno::AGAIN) => {}
            Err(_) => {
                let _ = tx.blocking_send(Input::End);
                return;
            }
        }
    }
}
