//! Acting as another user on the calling thread alone, for the kills PID 1 and a supervisor
//! make as the owner of each process: the container grants no `CAP_KILL` (nor
//! `CAP_SYS_PTRACE`, which reading another user's `/proc/PID/environ` needs), and at the
//! sandbox's process limit no helper process running as that user can be started. A thread can
//! still switch its own credentials.
//!
//! The kernel keeps credentials per thread; glibc's `setresuid`/`setresgid` change every thread
//! of the process (POSIX semantics, by signalling each), while the raw system calls change only
//! the caller's (see `setresuid(2)` and `nptl(7)`, "C library/kernel differences"). Only the
//! effective (and so the file-system) IDs change: the real and saved IDs stay 0. That is what
//! keeps the user out of the switched thread: `kill(2)` lets a sender signal a thread whose real
//! or saved UID is the sender's real or effective UID (`kill_ok_by_cred` in the kernel's
//! `kernel/signal.c`), so with the real UID switched too, that user's processes could signal
//! PID 1's worker (and PID 1's handlers end the sandbox on SIGTERM) or SIGKILL a supervisor,
//! during every kill made as them. A thread's effective capabilities go while its effective UID
//! is not 0 and come back from its permitted set when it is 0 again (`capabilities(7)`,
//! "Effect of user ID changes on capabilities"). The set-ID filter ([`super::seccomp`]) does
//! not touch these calls.
//!
//! What the user can still do to the switched thread, for as long as it is switched:
//! `setpriority(2)`, `sched_setscheduler(2)`, `sched_setaffinity(2)` and `ioprio_set(2)` accept
//! a caller whose effective UID is the target's effective UID. A lowered priority slows that
//! thread's kills of the user's own processes (the host's kill through the engine, a new
//! process, and `down` remain); it grants nothing.

/// Runs `f` on this thread with effective UID `uid` and GID `gid`, the real and saved IDs kept
/// (the file-system IDs follow the effective ones: `kill(2)` compares the effective UID with
/// the target's real and saved UIDs, the `ptrace` access check of `/proc/PID/environ` the
/// file-system IDs with all of the target's), every signal blocked meanwhile, and switches back. Errors: this
/// thread's saved set-user-ID is not 0 (the agent was not started as root), or the kernel
/// refused (`EPERM` without `CAP_SETUID`/`CAP_SETGID`). When switching back fails (it cannot,
/// with the saved IDs kept), the process aborts rather than go on as that user.
pub(crate) fn as_user<T>(uid: u32, gid: u32, f: impl FnOnce() -> T) -> std::io::Result<T> {
    let (old_uid, old_gid) = (ids(libc::SYS_getresuid)?, ids(libc::SYS_getresgid)?);
    if old_uid[2] != 0 {
        return Err(std::io::Error::from_raw_os_error(libc::EPERM));
    }
    let mut old_mask = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigfillset and pthread_sigmask on sets owned here.
    unsafe {
        let mut all = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigfillset(all.as_mut_ptr());
        libc::pthread_sigmask(libc::SIG_BLOCK, all.as_ptr(), old_mask.as_mut_ptr());
    }
    let restore_mask = || {
        // SAFETY: the mask saved above.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, old_mask.as_ptr(), std::ptr::null_mut())
        };
    };
    // The group first: changing it needs CAP_SETGID, effective only while the UID is 0.
    if let Err(e) = set(libc::SYS_setresgid, [old_gid[0], gid, old_gid[2]]) {
        restore_mask();
        return Err(e);
    }
    if let Err(e) = set(libc::SYS_setresuid, [old_uid[0], uid, old_uid[2]]) {
        let back = set(libc::SYS_setresgid, old_gid);
        restore_mask();
        back.unwrap_or_else(|_| std::process::abort());
        return Err(e);
    }
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    if set(libc::SYS_setresuid, old_uid).is_err() || set(libc::SYS_setresgid, old_gid).is_err() {
        // A thread left as another user would do root's later work as that user.
        std::process::abort();
    }
    restore_mask();
    out.map_err(|_| std::io::Error::other("panicked as another user"))
}

/// The real, effective and saved IDs from `getresuid(2)`/`getresgid(2)` (`call`).
fn ids(call: libc::c_long) -> std::io::Result<[u32; 3]> {
    let mut v = [0u32; 3];
    let (a, b, c) = (&raw mut v[0], &raw mut v[1], &raw mut v[2]);
    // SAFETY: three valid pointers to u32 (uid_t and gid_t are u32 on Linux).
    if unsafe { libc::syscall(call, a, b, c) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(v)
}

/// The raw `setresuid(2)`/`setresgid(2)` (`call`) of this thread alone.
fn set(call: libc::c_long, [r, e, s]: [u32; 3]) -> std::io::Result<()> {
    // SAFETY: a plain system call with integer arguments.
    if unsafe { libc::syscall(call, r, e, s) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_threads_credentials_stay_as_they_were() {
        // Whoever runs the tests: switching to our own IDs is always allowed, and what the
        // closure sees is this thread's; elsewhere nothing changes.
        let (uid, gid) = (unsafe { libc::getuid() }, unsafe { libc::getgid() });
        if ids(libc::SYS_getresuid).unwrap()[2] != 0 {
            assert!(as_user(uid, gid, || ()).is_err(), "only with saved UID 0");
            return;
        }
        // A thread made before: it inherits nothing of the switch (a thread made during it
        // would inherit the switched credentials, as clone(2) copies the caller's).
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let (tell, told) = std::sync::mpsc::channel();
        let other = std::thread::spawn(move || {
            while asked.recv().is_ok() {
                let _ = tell.send(unsafe { libc::geteuid() });
            }
        });
        let seen = as_user(65534, 65534, || {
            ask.send(()).unwrap();
            let other = told.recv().unwrap();
            (
                ids(libc::SYS_getresuid).unwrap(),
                ids(libc::SYS_getresgid).unwrap(),
                other,
            )
        })
        .unwrap();
        drop(ask);
        other.join().unwrap();
        // Only the effective IDs switch: with the real and saved UIDs kept (root's), the user
        // 65534's processes may not signal this thread meanwhile.
        let (u, g) = (
            ids(libc::SYS_getresuid).unwrap(),
            ids(libc::SYS_getresgid).unwrap(),
        );
        assert_eq!(
            seen,
            ([u[0], 65534, u[2]], [g[0], 65534, g[2]], unsafe {
                libc::geteuid()
            })
        );
        assert_eq!(unsafe { libc::geteuid() }, uid);
        assert_eq!(unsafe { libc::getegid() }, gid);
    }
}
