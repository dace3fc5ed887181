//! Running the binary and other processes with a deadline each, and signalling them: no test can hang.

use super::*;

/// How long one run of the binary may take in a test ([`TestEnv::run`]): past the slowest real
/// case (a bootstrap installing packages from Debian's mirror, a build of a derived image on a
/// loaded 2-core machine), so that only a hang reaches it.
pub(crate) const RUN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(600);

/// Waits for `child` to exit within `within` and collects what it printed on its piped stdout
/// and stderr. Past the deadline the child is killed and the test fails naming `what`, so a
/// child that ignores a signal (or waits on a pipe nobody closes) fails the test instead of
/// hanging it.
#[track_caller]
pub(crate) fn wait_output(
    mut child: std::process::Child,
    within: std::time::Duration,
    what: &str,
) -> Output {
    use std::io::Read;
    use std::sync::mpsc;
    use std::time::Instant;
    fn drain<R: Read + Send + 'static>(r: Option<R>) -> mpsc::Receiver<Vec<u8>> {
        let (tx, rx) = mpsc::channel();
        match r {
            Some(mut r) => {
                std::thread::spawn(move || {
                    let mut b = Vec::new();
                    let _ = r.read_to_end(&mut b);
                    let _ = tx.send(b);
                });
            }
            None => {
                let _ = tx.send(Vec::new());
            }
        }
        rx
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let err = err
                .recv_timeout(std::time::Duration::from_secs(2))
                .unwrap_or_default();
            panic!(
                "{what}: still running after {within:?}; killed it (stderr: {})",
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // Output held open by a process the child left behind is a failure too, not a hang.
    let patience = std::time::Duration::from_secs(10);
    let stdout = out
        .recv_timeout(patience)
        .unwrap_or_else(|_| panic!("{what}: exited, but its stdout stayed open"));
    let stderr = err
        .recv_timeout(patience)
        .unwrap_or_else(|_| panic!("{what}: exited, but its stderr stayed open"));
    Output {
        status,
        stdout,
        stderr,
    }
}

/// Waits until `ready` holds, polling every 20 ms, for at most `within`; fails the test naming
/// `what` otherwise. For tests that must not signal a process before it said it is ready.
#[track_caller]
pub(crate) fn wait_until(within: std::time::Duration, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + within;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not ready after {within:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Sends signal `sig` (`"INT"`, `"TERM"`, ...) to process `pid` with kill(1); asserts it was sent.
#[track_caller]
pub(crate) fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {pid} failed");
}

/// Makes `cmd` start with SIGINT ignored, as a background job of a non-interactive shell does
/// (`sh -c 'cmd &'`, POSIX 2.11).
pub(crate) fn with_sigint_ignored(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal(2) is async-signal-safe; the closure runs in the child before exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            Ok(())
        })
    }
}

/// A child whose stderr is read line by line as it comes, so that a test can wait for the line
/// that says the child is ready (a `-v` command line, say) before it signals it.
pub(crate) struct Watched {
    pub child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Watched {
    /// Spawns `cmd` with its stderr piped (and read here); stdout as `cmd` says.
    pub(crate) fn spawn(cmd: &mut Command) -> Watched {
        use std::io::BufRead;
        let mut child = cmd.stderr(std::process::Stdio::piped()).spawn().unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines() {
                let Ok(l) = line else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Watched {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits (at most `within`) for a line of stderr satisfying `pred`, and returns it; fails
    /// the test naming `what` when none comes (or stderr closes first).
    pub(crate) fn wait_line(
        &mut self,
        within: std::time::Duration,
        what: &str,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if pred(&l) {
                        return l;
                    }
                }
                Err(e) => {
                    let _ = self.child.kill();
                    panic!(
                        "{what}: no such line on stderr ({e}); it printed:\n{}",
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Waits for the child to exit within `within` (see [`wait_output`]); its stderr holds
    /// every line, those already seen included.
    pub(crate) fn finish(mut self, within: std::time::Duration, what: &str) -> Output {
        let out = wait_output(
            {
                let mut c = self.child;
                c.stderr = None;
                c
            },
            within,
            what,
        );
        let patience = std::time::Duration::from_secs(10);
        let deadline = std::time::Instant::now() + patience;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
            {
                Ok(l) => self.seen.push(l),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    panic!("{what}: exited, but its stderr stayed open")
                }
            }
        }
        let mut stderr = self.seen.join("\n").into_bytes();
        if !stderr.is_empty() {
            stderr.push(b'\n');
        }
        Output {
            status: out.status,
            stdout: out.stdout,
            stderr,
        }
    }
}

/// Sends signal `sig` to every process of the process group `pgid`, as a terminal's Ctrl-C
/// reaches its foreground job (`kill -SIG -PGID`).
pub(crate) fn signal_group(pgid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), "--", &format!("-{pgid}")])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} -- -{pgid} failed");
}
