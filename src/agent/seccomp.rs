//! The set-ID filter: a seccomp-BPF program stacked on top of the engine's own profile in every
//! process of a sandbox, so that nothing in it can create a set-user-ID or set-group-ID file.
//!
//! Without a user namespace, root in the container is root on the host: a set-UID root binary
//! left in the work dir (`cp /bin/bash s && chmod 4755 s`) would give any host user who reaches it
//! euid 0. Dropping `CAP_FSETID` is not enough (the owner of a file may always set S_ISUID on it),
//! so the mode bits themselves are filtered (see `seccomp(2)`, `chmod(2)`, `open(2)`):
//!
//! - `chmod`, `fchmod`, `fchmodat`, `fchmodat2`, and `open`, `openat`, `creat`, `mknod`,
//!   `mknodat` whose mode argument holds `S_ISUID` or `S_ISGID` fail with `EPERM`; every other
//!   call of them (ordinary modes, opening without those bits) passes untouched;
//! - `openat2` and the `io_uring` calls fail with `ENOSYS`: their modes live in memory the filter
//!   cannot read (an `open_how` struct, a ring of requests), and callers fall back to `openat`
//!   and plain system calls on `ENOSYS`;
//! - the x32 ABI's numbers of the same calls (bit 30 set, same architecture value) are filtered
//!   alike, and system calls of another architecture (32-bit `int 0x80`) end the process, which
//!   is how `seccompiler` guards a filter's architecture.
//!
//! The filter is installed with `PR_SET_NO_NEW_PRIVS` (Docker's `no-new-privileges` sets it
//! already) and inherited across `fork` and `execve`: the in-container PID 1 installs it on all
//! its threads, and the exec wrapper on itself before `execve`, so every process of the sandbox
//! carries it whatever the user.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// `S_ISUID` and `S_ISGID` (`inode(7)`).
const SET_ID_BITS: [u64; 2] = [0o4000, 0o2000];

/// Bit 30 marks a system call number of the x32 ABI on x86_64.
#[cfg(target_arch = "x86_64")]
const X32_BIT: i64 = 0x4000_0000;

/// The system calls that take a mode, with the index of their mode argument.
fn mode_calls() -> Vec<(i64, u8)> {
    let mut calls = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        // fchmodat2(2), Linux 6.6: the same number on every architecture.
        (452, 2),
        (libc::SYS_openat, 3),
        (libc::SYS_mknodat, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_chmod, 1),
        (libc::SYS_open, 2),
        (libc::SYS_creat, 1),
        (libc::SYS_mknod, 1),
    ]);
    calls
}

/// The system calls whose arguments the filter cannot inspect: `openat2` (its mode is in a
/// struct in memory) and the `io_uring` calls (requests in shared memory).
fn uninspectable_calls() -> Vec<i64> {
    vec![
        libc::SYS_openat2,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ]
}

/// The numbers of `nr` a process can call: itself, and on x86_64 its x32 twin.
fn with_abis(nr: i64) -> Vec<i64> {
    #[cfg(target_arch = "x86_64")]
    return vec![nr, nr | X32_BIT];
    #[cfg(not(target_arch = "x86_64"))]
    vec![nr]
}

/// The compiled filters, in the order they are installed. Errors: an architecture
/// `seccompiler` does not support (only x86_64 and aarch64 are built).
pub(crate) fn programs() -> Result<Vec<BpfProgram>, seccompiler::Error> {
    let arch = std::env::consts::ARCH.try_into()?;
    let mut modes: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (nr, arg) in mode_calls() {
        let rules = SET_ID_BITS
            .iter()
            .map(|&bit| {
                SeccompRule::new(vec![SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(bit),
                    bit,
                )?])
            })
            .collect::<Result<Vec<_>, _>>()?;
        for n in with_abis(nr) {
            modes.insert(n, rules.clone());
        }
    }
    let set_id = SeccompFilter::new(
        modes,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    let blind: BTreeMap<i64, Vec<SeccompRule>> = uninspectable_calls()
        .into_iter()
        .flat_map(with_abis)
        .map(|n| (n, Vec::new()))
        .collect();
    let unfiltered = SeccompFilter::new(
        blind,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;
    Ok(vec![set_id.try_into()?, unfiltered.try_into()?])
}

/// Installs `programs` on the calling thread only (for a process about to `execve`, which is
/// single-threaded then). Async-signal-safe: two `prctl`/`seccomp` calls per program, no
/// allocation, so it may run between `fork` and `execve`.
pub(crate) fn install(programs: &[BpfProgram]) -> std::io::Result<()> {
    for p in programs {
        seccompiler::apply_filter(p).map_err(to_io)?;
    }
    Ok(())
}

/// Installs `programs` on every thread of this process (`SECCOMP_FILTER_FLAG_TSYNC`).
pub(crate) fn install_all_threads(programs: &[BpfProgram]) -> std::io::Result<()> {
    for p in programs {
        seccompiler::apply_filter_all_threads(p).map_err(to_io)?;
    }
    Ok(())
}

fn to_io(e: seccompiler::Error) -> std::io::Error {
    match e {
        seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => e,
        other => std::io::Error::other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile() {
        let p = programs().unwrap();
        assert_eq!(p.len(), 2);
        assert!(p.iter().all(|p| !p.is_empty()));
    }

    /// Runs `f` in a forked child that first installs the filter, and returns its exit code
    /// (the child reports `f`'s result as its exit status). The filter never touches the test
    /// process itself.
    fn in_filtered_child(f: impl FnOnce() -> i32) -> i32 {
        let progs = programs().unwrap();
        // SAFETY: the child only makes system calls and exits.
        match unsafe { libc::fork() } {
            0 => {
                let code = if install(&progs).is_ok() { f() } else { 99 };
                unsafe { libc::_exit(code) }
            }
            pid => {
                let mut status = 0;
                unsafe { libc::waitpid(pid, &mut status, 0) };
                libc::WEXITSTATUS(status)
            }
        }
    }

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    #[test]
    fn set_id_modes_are_refused_and_ordinary_ones_pass() {
        use std::os::unix::ffi::OsStrExt;
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        let path = std::ffi::CString::new(f.as_os_str().as_bytes()).unwrap();
        let new = std::ffi::CString::new(d.path().join("n").as_os_str().as_bytes()).unwrap();
        let code = in_filtered_child(|| unsafe {
            if libc::chmod(path.as_ptr(), 0o755) != 0 {
                return 1;
            }
            if libc::chmod(path.as_ptr(), 0o4755) == 0 || errno() != libc::EPERM {
                return 2;
            }
            if libc::chmod(path.as_ptr(), 0o2755) == 0 || errno() != libc::EPERM {
                return 3;
            }
            let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
            if fd < 0 {
                return 4;
            }
            if libc::fchmod(fd, 0o6755) == 0 || errno() != libc::EPERM {
                return 5;
            }
            let made = libc::open(new.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o4755);
            if made >= 0 || errno() != libc::EPERM {
                return 6;
            }
            let made = libc::open(new.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644);
            if made < 0 {
                return 7;
            }
            if libc::syscall(libc::SYS_openat2, libc::AT_FDCWD, path.as_ptr(), 0, 0) != -1
                || errno() != libc::ENOSYS
            {
                return 8;
            }
            0
        });
        assert_eq!(code, 0);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o7777,
            0o755
        );
    }
}
