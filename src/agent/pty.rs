//! Pseudo-terminals of the exec agent's terminal commands ([`super::proto::Request::Terminal`]):
//! the supervisor ([`super::supervise`]) opens one as the command's user, makes it the command's
//! controlling terminal, and pumps bytes between the terminal's master side and the pipes the
//! agent reads and writes, so the agent runs a terminal command as any other (its output on the
//! stdout pipe, its keystrokes on the stdin pipe).
//!
//! The terminal is opened (`/dev/ptmx`, `ptmx(4)`) while the supervisor's effective user and
//! group are the command's: devpts gives the new `/dev/pts/N` to the opener, as `grantpt(3)`
//! would (which needs `CAP_CHOWN`, which no sandbox has). The command's side is opened from the
//! master (`TIOCGPTPEER`, Linux 4.13), never by a path a process of the sandbox could replace;
//! by its path only where the kernel lacks it.

use std::io::Write;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::mpsc;
use std::time::Duration;

use rustix::termios::Winsize;

use super::proto::WinSize;

/// A terminal's two sides.
pub(crate) struct Pty {
    /// The master side, kept by the supervisor.
    pub master: OwnedFd,
    /// The command's side (its standard streams and controlling terminal).
    pub slave: OwnedFd,
}

/// The kernel's window size for `size` (never zero).
pub(crate) fn winsize(size: WinSize) -> Winsize {
    let size = size.at_least_one();
    Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// Opens a new terminal of `size` owned by `uid`:`gid` (devpts's `gid=` mount option, `tty` in
/// Docker's and Podman's `/dev/pts`, wins over `gid`). Only for a single-threaded process
/// running as root: its effective IDs are the user's while the terminal is opened (`seteuid(2)`
/// changes every thread's in glibc). Errors: no `/dev/ptmx` (an image whose `/dev` has no pts),
/// or the IDs could not be switched.
pub(crate) fn open_as(uid: u32, gid: u32, size: WinSize) -> std::io::Result<Pty> {
    let me = unsafe { (libc::geteuid(), libc::getegid()) };
    let switch = me != (uid, gid);
    if switch {
        // The group first, while still root.
        if unsafe { libc::setegid(gid) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if unsafe { libc::seteuid(uid) } != 0 {
            let e = std::io::Error::last_os_error();
            unsafe { libc::setegid(me.1) };
            return Err(e);
        }
    }
    let opened = open_pair();
    if switch {
        // Back to root: a failure here leaves the supervisor without the rights it needs to
        // start the command as another user, which then fails and is reported.
        unsafe {
            libc::seteuid(me.0);
            libc::setegid(me.1);
        }
    }
    let pty = opened?;
    rustix::termios::tcsetwinsize(&pty.master, winsize(size))?;
    Ok(pty)
}

fn open_pair() -> std::io::Result<Pty> {
    use rustix::pty::OpenptFlags;
    let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
    let master = rustix::pty::openpt(flags)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let slave = match rustix::pty::ioctl_tiocgptpeer(&master, flags) {
        Ok(fd) => fd,
        // An older kernel (or gVisor): by its name, which the supervisor resolves at once.
        Err(_) => {
            let name = rustix::pty::ptsname(&master, Vec::new())?;
            rustix::fs::open(
                name.as_c_str(),
                rustix::fs::OFlags::RDWR
                    | rustix::fs::OFlags::NOCTTY
                    | rustix::fs::OFlags::CLOEXEC
                    | rustix::fs::OFlags::NOFOLLOW,
                rustix::fs::Mode::empty(),
            )?
        }
    };
    Ok(Pty { master, slave })
}

/// Resizes the terminal whose master is `master`; the kernel sends `SIGWINCH` to its
/// foreground process group.
pub(crate) fn resize(master: BorrowedFd<'_>, size: WinSize) {
    let _ = rustix::termios::tcsetwinsize(master, winsize(size));
}

/// The pumps between a terminal's master and the agent's pipes.
pub(crate) struct Pumps {
    /// Written once to ask the output pump to drain what the terminal holds.
    wake: OwnedFd,
    /// Answers each drain request.
    drained: mpsc::Receiver<()>,
}

impl Pumps {
    /// Starts the pumps: what the command writes to its terminal goes to `output` (the agent's
    /// stdout pipe) until no process holds the terminal any more; `input` (the agent's stdin
    /// pipe, when the host streams keystrokes) goes to the terminal until its end.
    pub(crate) fn start(
        master: std::sync::Arc<OwnedFd>,
        input: Option<OwnedFd>,
        output: OwnedFd,
    ) -> std::io::Result<Pumps> {
        let (wake_r, wake) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let (tx, drained) = mpsc::channel();
        let m = std::sync::Arc::clone(&master);
        // Threads made after the command's fork may fail at the process limit: an error then,
        // on which the supervisor kills the command.
        std::thread::Builder::new()
            .spawn(move || pump_out(&m, wake_r, std::fs::File::from(output), tx))?;
        if let Some(input) = input {
            std::thread::Builder::new()
                .spawn(move || pump_in(std::fs::File::from(input), &master))?;
        }
        Ok(Pumps { wake, drained })
    }

    /// Waits (at most `patience`) until the output pump has passed on everything the terminal
    /// held once it stays quiet for a moment: called when the command's own process has exited,
    /// before its exit is reported, so its last output is not lost.
    pub(crate) fn drain(&self, patience: Duration) {
        if rustix::io::write(&self.wake, b"d").is_ok() {
            let _ = self.drained.recv_timeout(patience);
        }
    }
}

/// How long the terminal must stay quiet for a drain to end.
const QUIET: Duration = Duration::from_millis(50);

fn pump_out(master: &OwnedFd, wake: OwnedFd, mut out: std::fs::File, drained: mpsc::Sender<()>) {
    use rustix::event::{PollFd, PollFlags};
    let mut buf = vec![0u8; 16 << 10];
    let mut draining = false;
    let mut out_ok = true;
    loop {
        // QUIET is 50 ms: it fits a timespec.
        let quiet = rustix::event::Timespec::try_from(QUIET).unwrap_or_default();
        let (m_ready, w_ready) = {
            let mut fds = [
                PollFd::new(master, PollFlags::IN),
                PollFd::new(&wake, PollFlags::IN),
            ];
            match rustix::event::poll(&mut fds, draining.then_some(&quiet)) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            }
            (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
        };
        if w_ready {
            let mut b = [0u8; 8];
            let _ = rustix::io::read(&wake, &mut b);
            draining = true;
        }
        if !m_ready {
            if draining && !w_ready {
                // Quiet for a moment: everything written before the exit has come through.
                draining = false;
                let _ = drained.send(());
            }
            continue;
        }
        match rustix::io::read(master, &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                // A gone reader (the caller left) only stops the passing on; the terminal is
                // still read, so no writer blocks on it.
                if out_ok && out.write_all(&buf[..n]).is_err() {
                    out_ok = false;
                }
            }
            Err(rustix::io::Errno::INTR) | Err(rustix::io::Errno::AGAIN) => {}
            // EIO: no process holds the terminal's other side any more.
            Err(_) => break,
        }
    }
    drop(out);
    let _ = drained.send(());
}

fn pump_in(mut input: std::fs::File, master: &OwnedFd) {
    use std::io::Read;
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            match rustix::io::write(master, rest) {
                Ok(k) => rest = &rest[k..],
                Err(rustix::io::Errno::INTR) | Err(rustix::io::Errno::AGAIN) => {}
                Err(_) => return,
            }
        }
    }
}
