//! The last step of a command's child, in place of std's exec: the program looked up and
//! `execve(2)`d by the child itself, after it has become the command's user and entered its
//! working directory, so that the kernel checks each candidate with the user's credentials at
//! the moment it runs it (no look by the supervisor, as root, that a planted symlink could
//! change afterwards); or, for bash's builtin `true` and `false` alone, the status bash -c
//! would exit with.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

/// What the child does last. Built before the fork: nothing in [`Last::run`] allocates.
pub(crate) enum Last {
    /// The first of the candidates the kernel runs ([`Execve`]).
    Exec(Execve),
    /// A builtin of the shell that starts no program: the child exits with this status
    /// (`true` 0, `false` 1, as bash's builtins do).
    Exit(i32),
}

impl Last {
    /// Replaces or ends this process; returns only the error of the last candidate tried.
    /// Async-signal-safe: for the child between fork and exec.
    pub(crate) fn run(&self) -> std::io::Error {
        match self {
            Last::Exec(x) => x.exec(),
            // SAFETY: _exit(2) is async-signal-safe and ends the child here.
            Last::Exit(status) => unsafe { libc::_exit(*status) },
        }
    }
}

/// A program with `argv` and `envp`, tried at each candidate path in turn as `execvp(3)` and
/// bash do (a candidate that is not there, `ENOENT` from a path that does not exist or
/// `ENOTDIR`, or that the user may not run, `EACCES`, is passed over), but never with
/// `/bin/sh` for a file the kernel refuses (`ENOEXEC`): that error, as every other, ends the
/// search and reaches the parent. Before each try the child writes the candidate's index
/// (a `u16`, native byte order) to a [`Report`]'s pipe when it has one, so that the parent
/// knows which one runs.
pub(crate) struct Execve {
    _strings: Vec<CString>,
    candidates: Vec<*const libc::c_char>,
    argv: Vec<*const libc::c_char>,
    /// Each candidate's environment (they may differ in `_`, the program's path, as bash sets it).
    envps: Vec<Vec<*const libc::c_char>>,
    /// The write end of the [`Report`]'s pipe, which the parent keeps open until the start.
    report: Option<i32>,
}

// SAFETY: the pointers point into `_strings`' heap buffers, which it owns and never changes.
unsafe impl Send for Execve {}
unsafe impl Sync for Execve {}

impl Execve {
    /// `candidates` (paths, in the order tried; at most 65 536), with `argv` (its `[0]` first)
    /// and, for each candidate, `envp` of it (`NAME=VALUE` each), all as bytes, telling `report`
    /// each candidate tried. `None`: a NUL byte in any of them, or no candidate.
    pub(crate) fn of_bytes(
        candidates: impl Iterator<Item = Vec<u8>>,
        argv: impl Iterator<Item = Vec<u8>>,
        envp: impl Fn(&[u8]) -> Vec<Vec<u8>>,
        report: Option<&Report>,
    ) -> Option<Execve> {
        let cstrings = |v: Vec<Vec<u8>>| -> Option<Vec<CString>> {
            v.into_iter().map(|c| CString::new(c).ok()).collect()
        };
        let candidates: Vec<Vec<u8>> = candidates.collect();
        if candidates.is_empty() || candidates.len() > usize::from(u16::MAX) + 1 {
            return None;
        }
        let envps: Vec<Vec<CString>> = candidates
            .iter()
            .map(|c| cstrings(envp(c)))
            .collect::<Option<_>>()?;
        let candidates = cstrings(candidates)?;
        let argv = cstrings(argv.collect())?;
        let nul = std::iter::once(std::ptr::null());
        let ptrs = |v: &[CString]| v.iter().map(|s| s.as_ptr()).collect::<Vec<_>>();
        let candidate_ptrs = ptrs(&candidates);
        let argv_ptrs = ptrs(&argv).into_iter().chain(nul.clone()).collect();
        let envp_ptrs = envps
            .iter()
            .map(|e| ptrs(e).into_iter().chain(nul.clone()).collect())
            .collect();
        let mut strings = candidates;
        strings.extend(argv);
        strings.extend(envps.into_iter().flatten());
        Some(Execve {
            _strings: strings,
            candidates: candidate_ptrs,
            argv: argv_ptrs,
            envps: envp_ptrs,
            report: report.map(|r| r.write.as_raw_fd()),
        })
    }

    /// Tries each candidate (see [`Execve`]); returns only the error that ended the search:
    /// the first that is not a candidate's absence or refusal, else `EACCES` when a candidate
    /// was refused, else `ENOENT`. A candidate that exists but fails with `ENOENT` (a `#!`
    /// line naming an interpreter that is not there) ends the search, as bash runs the first
    /// file it finds. Async-signal-safe: for the child between fork and exec.
    fn exec(&self) -> std::io::Error {
        let mut refused = false;
        for (i, (p, envp)) in self.candidates.iter().zip(&self.envps).enumerate() {
            if let Some(w) = self.report {
                let idx = u16::try_from(i).unwrap_or(u16::MAX).to_ne_bytes();
                // SAFETY: write(2) of two bytes from a live buffer.
                unsafe { libc::write(w, idx.as_ptr().cast(), 2) };
            }
            // SAFETY: NUL-terminated strings and NULL-terminated arrays that `self` owns.
            unsafe { libc::execve(*p, self.argv.as_ptr(), envp.as_ptr()) };
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                // SAFETY: access(2) of a NUL-terminated path.
                Some(libc::ENOENT) if unsafe { libc::access(*p, libc::F_OK) } == 0 => return e,
                Some(libc::ENOENT | libc::ENOTDIR) => {}
                Some(libc::EACCES) => refused = true,
                _ => return e,
            }
        }
        std::io::Error::from_raw_os_error(if refused { libc::EACCES } else { libc::ENOENT })
    }
}

/// The pipe on which a child tells which of its [`Execve`]'s candidates it tries, made with
/// `O_CLOEXEC` (the child's successful exec closes its end). Kept by the parent until the
/// child has started.
pub(crate) struct Report {
    read: OwnedFd,
    write: OwnedFd,
}

impl Report {
    /// A new pipe. Errors: `pipe2(2)`'s (`EMFILE`).
    pub(crate) fn new() -> std::io::Result<Report> {
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        Ok(Report { read, write })
    }

    /// After the child's start (its exec, or its end): the index of the candidate it ran (the
    /// last it told), or `None` when it told none. Closes the write end first, so that the
    /// read ends with the child's.
    pub(crate) fn ran(self) -> Option<usize> {
        use std::io::Read;
        drop(self.write);
        let mut got = Vec::new();
        std::fs::File::from(self.read).read_to_end(&mut got).ok()?;
        let last = got.chunks_exact(2).last()?;
        Some(usize::from(u16::from_ne_bytes([last[0], last[1]])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;

    /// Runs `sh -c 'exit 7'` (as whichever candidate runs) through [`Last::run`]: its exit
    /// status or the error that ended the search, and the candidate told.
    fn run_with(candidates: &[&std::path::Path]) -> (std::io::Result<i32>, Option<usize>) {
        let report = Report::new().unwrap();
        let x = Execve::of_bytes(
            candidates
                .iter()
                .map(|c| c.as_os_str().as_encoded_bytes().to_vec()),
            [b"x".to_vec(), b"-c".to_vec(), b"exit 7".to_vec()].into_iter(),
            |_| Vec::new(),
            Some(&report),
        )
        .expect("made");
        let last = Last::Exec(x);
        let mut cmd = std::process::Command::new("/nonexistent");
        // SAFETY: only async-signal-safe calls in the child.
        unsafe { cmd.pre_exec(move || Err(last.run())) };
        let out = cmd
            .spawn()
            .and_then(|mut c| c.wait())
            .map(|s| s.code().unwrap_or(-1));
        drop(cmd);
        (out, report.ran())
    }

    fn file(d: &std::path::Path, name: &str, text: &str, mode: u32) -> std::path::PathBuf {
        let p = d.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn the_first_candidate_there_runs_and_is_told() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("missing/sh");
        let (code, ran) = run_with(&[&missing, "/bin/sh".as_ref()]);
        assert_eq!(code.unwrap(), 7);
        assert_eq!(ran, Some(1));
    }

    #[test]
    fn a_file_the_kernel_refuses_ends_the_search_with_its_error() {
        let d = tempfile::tempdir().unwrap();
        let script = file(d.path(), "noshebang", "exit 3\n", 0o755);
        let (code, ran) = run_with(&[&script, "/bin/sh".as_ref()]);
        assert_eq!(code.unwrap_err().raw_os_error(), Some(libc::ENOEXEC));
        assert_eq!(ran, Some(0));
        // A missing interpreter: ENOENT from a file that is there.
        let bad = file(d.path(), "bad", "#!/no/such/interpreter\n", 0o755);
        let (code, ran) = run_with(&[&bad, "/bin/sh".as_ref()]);
        assert_eq!(code.unwrap_err().raw_os_error(), Some(libc::ENOENT));
        assert_eq!(ran, Some(0));
    }

    #[test]
    fn a_refused_candidate_is_passed_over_and_told_when_none_runs() {
        let d = tempfile::tempdir().unwrap();
        // No execute bit: refused even to root.
        let plain = file(d.path(), "plain", "#!/bin/sh\n", 0o644);
        let (code, ran) = run_with(&[&plain, "/bin/sh".as_ref()]);
        assert_eq!(code.unwrap(), 7);
        assert_eq!(ran, Some(1));
        let (code, _) = run_with(&[&plain, &d.path().join("none")]);
        assert_eq!(code.unwrap_err().raw_os_error(), Some(libc::EACCES));
        let (code, ran) = run_with(&[&d.path().join("none")]);
        assert_eq!(code.unwrap_err().raw_os_error(), Some(libc::ENOENT));
        assert_eq!(ran, Some(0));
    }

    #[test]
    fn a_builtin_exits_with_its_status() {
        for (status, want) in [(0, 0), (1, 1)] {
            let last = Last::Exit(status);
            let mut cmd = std::process::Command::new("/nonexistent");
            // SAFETY: only async-signal-safe calls in the child.
            unsafe { cmd.pre_exec(move || Err(last.run())) };
            let code = cmd.spawn().unwrap().wait().unwrap().code();
            assert_eq!(code, Some(want));
        }
    }
}
