//! The sandbox user inside the container: a name in `/etc/passwd` (so `whoami`, `id -un`, `~`
//! and tools that look the user up work) and a writable home directory.
//!
//! The container runs as root (h9sandbox's PID 1 needs to), and every command runs as the
//! sandbox's user. That user is often not in the image (the default is the owner of the work
//! dir, e.g. uid 1000): PID 1 adds a line for it to `/etc/passwd` (and its group to `/etc/group`)
//! before any command runs. Its home is the image's, when the image has the user and that
//! directory belongs to it; otherwise [`FALLBACK_HOME`], in the exec-capable scratch volume,
//! created by the command's wrapper as the user itself (root in the sandbox has no `CAP_CHOWN`,
//! so it could not give a directory away).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Home of a sandbox user that has no usable one in the image: in the scratch volume
/// (`/var/tmp`), which outlives `stop`/`start` and is removed with the sandbox.
pub(crate) const FALLBACK_HOME: &str = "/var/tmp/home";

/// The `uid:gid` a command runs as, for `run_as`: numeric IDs as they are; a login name looked up
/// in the container's `/etc/passwd` (`read_account_file`), with its primary group unless one is given
/// (`root` is 0:0 even in an image without the file). Errors: the name is unknown.
pub(crate) fn resolve(run_as: &super::proto::RunAs) -> Result<(u32, u32), String> {
    use super::proto::RunAs;
    match run_as {
        RunAs::Ids { uid, gid } => Ok((*uid, *gid)),
        RunAs::Name { name, gid } => {
            let entries = parse_passwd(&read_account_file("/etc/passwd"));
            match entries.iter().find(|e| &e.name == name) {
                Some(e) => Ok((e.uid, gid.unwrap_or(e.gid))),
                None if name == "root" => Ok((0, gid.unwrap_or(0))),
                None => Err(format!(
                    "--user {name}: no such user in the container's /etc/passwd; give a user it has, or numeric IDs (UID:GID)"
                )),
            }
        }
    }
}

/// One line of `/etc/passwd` (`passwd(5)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PasswdEntry {
    /// Login name.
    pub name: String,
    /// User ID.
    pub uid: u32,
    /// Primary group ID.
    pub gid: u32,
    /// Home directory.
    pub home: String,
}

/// Parses `/etc/passwd` text; malformed lines are skipped.
pub(crate) fn parse_passwd(text: &str) -> Vec<PasswdEntry> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            if f.len() < 7 || f[0].is_empty() {
                return None;
            }
            Some(PasswdEntry {
                name: f[0].to_string(),
                uid: f[2].parse().ok()?,
                gid: f[3].parse().ok()?,
                home: f[5].to_string(),
            })
        })
        .collect()
}

/// `(name, gid)` of every line of `/etc/group` text; malformed lines are skipped.
pub(crate) fn parse_group(text: &str) -> Vec<(String, u32)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            if f.len() < 3 || f[0].is_empty() {
                return None;
            }
            Some((f[0].to_string(), f[2].parse().ok()?))
        })
        .collect()
}

/// A login name for `uid` that no other user of `entries` has: `wanted` (the host user's name,
/// when it is a valid name), else `sandbox`, else `sandbox-UID`.
pub(crate) fn free_name(entries: &[PasswdEntry], wanted: Option<&str>, uid: u32) -> String {
    let taken = |n: &str| entries.iter().any(|e| e.name == n);
    let valid = |n: &&str| {
        !n.is_empty()
            && n.len() <= 32
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
            && !n.starts_with('-')
    };
    match wanted.filter(valid) {
        Some(n) if !taken(n) => n.to_string(),
        _ if !taken("sandbox") => "sandbox".into(),
        _ => format!("sandbox-{uid}"),
    }
}

/// Makes `uid:gid` known in the container's `/etc/passwd` and `/etc/group` (appending a line
/// when the image has none for it; `name` as the login name when free). Root needs nothing. Also
/// makes the scratch directory usable by every user (`1777`, as in common images), since an image
/// without `/var/tmp` gets a root-owned `0755` volume there. Runs as the container's root before
/// any command; errors are returned for PID 1 to report (it goes on without).
pub(crate) fn prepare(uid: u32, gid: u32, name: Option<&str>) -> std::io::Result<()> {
    if uid == 0 {
        return Ok(());
    }
    let scratch = Path::new("/var/tmp");
    if let Ok(m) = std::fs::metadata(scratch) {
        if m.uid() == 0 && m.mode() & 0o002 == 0 {
            std::fs::set_permissions(scratch, std::fs::Permissions::from_mode(0o1777))?;
        }
    }
    std::fs::create_dir_all("/etc")?;
    let passwd = read_account_file("/etc/passwd");
    let entries = parse_passwd(&passwd);
    if !entries.iter().any(|e| e.uid == uid) {
        let name = free_name(&entries, name, uid);
        append_line(
            Path::new("/etc/passwd"),
            &passwd,
            &format!("{name}:x:{uid}:{gid}:h9sandbox:{FALLBACK_HOME}:/bin/sh"),
        )?;
    }
    let group = read_account_file("/etc/group");
    let groups = parse_group(&group);
    if !groups.iter().any(|(_, g)| *g == gid) {
        let gname = if groups.iter().any(|(n, _)| n == "sandbox") {
            format!("sandbox-{gid}")
        } else {
            "sandbox".into()
        };
        append_line(
            Path::new("/etc/group"),
            &group,
            &format!("{gname}:x:{gid}:"),
        )?;
    }
    Ok(())
}

/// The most of an account file (`/etc/passwd`, `/etc/group`) that is read: far more than any
/// real one holds.
const ACCOUNTS_MAX: u64 = 4 << 20;

/// `path` as text, at most [`ACCOUNTS_MAX`] bytes; empty when it is missing, unreadable or not a
/// regular file. Root in the sandbox can put a FIFO or a device in its place, which must never
/// block or flood the agent (it reads these files for every command), or a symlink to a file it
/// should not stand for: `path` is opened only when its directory is a directory (not a
/// symlink), and never through a symlink of its own (`O_NOFOLLOW`).
fn read_account_file(path: &str) -> String {
    use std::io::Read;
    let mut text = String::new();
    let dir_ok = Path::new(path)
        .parent()
        .and_then(|d| std::fs::symlink_metadata(d).ok())
        .is_some_and(|m| m.is_dir());
    if !dir_ok {
        return text;
    }
    if let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
    {
        if f.metadata().is_ok_and(|m| m.is_file()) {
            let _ = f.take(ACCOUNTS_MAX).read_to_string(&mut text);
        }
    }
    text
}

fn append_line(path: &Path, old: &str, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let sep = if old.is_empty() || old.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    f.write_all(format!("{sep}{line}\n").as_bytes())
}

/// The home directory of `uid`: its `/etc/passwd` home when that directory exists and belongs
/// to it (or, for root, exists), else [`FALLBACK_HOME`] (created by [`ensure_home`]); for a user
/// the container's `/etc/passwd` does not know (`exec --user UID:GID`), `FALLBACK_HOME-UID`, so
/// that two users never share one.
pub(crate) fn home_of(uid: u32) -> PathBuf {
    let passwd = read_account_file("/etc/passwd");
    let Some(entry) = parse_passwd(&passwd).into_iter().find(|e| e.uid == uid) else {
        return PathBuf::from(match uid {
            0 => FALLBACK_HOME.to_string(),
            _ => format!("{FALLBACK_HOME}-{uid}"),
        });
    };
    let home = Some(PathBuf::from(entry.home)).filter(|h| h.is_absolute() && h != Path::new("/"));
    match home {
        Some(h)
            if std::fs::metadata(&h).is_ok_and(|m| m.is_dir() && (uid == 0 || m.uid() == uid)) =>
        {
            h
        }
        Some(h) if uid == 0 => h,
        _ => PathBuf::from(FALLBACK_HOME),
    }
}

/// Creates `home` (mode 0700) when missing, as the calling user; its parents as needed (mode
/// 0755). Errors are the caller's to ignore: a command still runs without its home.
pub(crate) fn ensure_home(home: &Path) -> std::io::Result<()> {
    if home.is_dir() {
        return Ok(());
    }
    if let Some(parent) = home.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(home) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_and_group_parse() {
        let p = parse_passwd(
            "root:x:0:0:root:/root:/bin/sh\nbad\nnode:x:1000:1000::/home/node:/bin/bash\n",
        );
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].name, "node");
        assert_eq!((p[1].uid, p[1].gid), (1000, 1000));
        assert_eq!(p[1].home, "/home/node");
        assert_eq!(
            parse_group("root:x:0:\nstaff:x:50:a,b\n"),
            vec![("root".to_string(), 0), ("staff".to_string(), 50)]
        );
    }

    #[test]
    fn names_are_free_and_valid() {
        let p = parse_passwd("root:x:0:0::/root:/bin/sh\nsandbox:x:5:5::/:/bin/sh\n");
        assert_eq!(free_name(&p, Some("alice"), 1000), "alice");
        assert_eq!(free_name(&p, Some("root"), 1000), "sandbox-1000");
        assert_eq!(free_name(&p, Some("a:b"), 1000), "sandbox-1000");
        assert_eq!(free_name(&[], None, 1000), "sandbox");
    }
}
