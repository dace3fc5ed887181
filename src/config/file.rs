//! The configuration file: where it is looked for, whom it must belong to, and how it is read
//! (a regular file of at most [`CONFIG_MAX_BYTES`]).

use std::path::{Path, PathBuf};

use super::xdg_dir;
use crate::error::Error;

/// Where the configuration file is looked for (see [the module documentation](super)); `None`
/// when there is none. The project file is not among them: see
/// [`Layers::load_with_project`](super::Layers::load_with_project).
pub fn find_config_file(explicit: Option<&Path>) -> Result<Option<PathBuf>, Error> {
    Ok(config_files(explicit)?.pop())
}

/// The configuration file to read: `explicit` when given (it must exist), else the user's
/// `$XDG_CONFIG_HOME/h9sandbox/config.toml` when it exists.
pub(super) fn config_files(explicit: Option<&Path>) -> Result<Vec<PathBuf>, Error> {
    if let Some(p) = explicit {
        if !p.is_file() {
            return Err(Error::Config {
                origin: format!("config file {}", p.display()),
                message: "does not exist or is not a file; fix --config / H9SANDBOX_CONFIG".into(),
            });
        }
        return Ok(vec![p.to_path_buf()]);
    }
    let user = xdg_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("h9sandbox/config.toml"));
    Ok(user.filter(|p| p.is_file()).into_iter().collect())
}

/// Fails (with the reason and the fix) when the user's configuration file `path`, whose
/// metadata is `md`, belongs to someone other than the invoking user (effective uid) or root, or
/// is writable by group or others: whoever can write it chooses the programs h9sandbox runs.
pub(super) fn check_user_file(path: &Path, md: &std::fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    if md.uid() != me && md.uid() != 0 {
        return Err(format!(
            "refusing it: it belongs to uid {}, not to you (uid {me}), and whoever can write it chooses the programs h9sandbox runs (engine_bin); `chown {me} {}`, or pass it explicitly with --config",
            md.uid(),
            path.display()
        ));
    }
    let mode = md.mode() & 0o7777;
    if let Some(who) = crate::types::also_writable_by(mode) {
        let fix = match who {
            "its group" => "g-w",
            "others" => "o-w",
            _ => "go-w",
        };
        return Err(format!(
            "refusing it: it is writable by {who} (mode {mode:04o}), and whoever can write it chooses the programs h9sandbox runs (engine_bin); `chmod {fix} {}`",
            path.display()
        ));
    }
    Ok(())
}

/// The largest configuration file read (1 MiB; the example documenting every key is 6 KiB). A
/// project file lies in a work dir, where a sandbox can make a file of any apparent size.
pub const CONFIG_MAX_BYTES: u64 = 1 << 20;

/// The text of the configuration file `path`, and its metadata (of the file read, not of the
/// path again): a regular file (opened without blocking, so a FIFO planted there cannot hang us)
/// of at most [`CONFIG_MAX_BYTES`], in UTF-8.
pub(super) fn read_config_file(path: &Path) -> std::io::Result<(String, std::fs::Metadata)> {
    use std::io::{Error as IoError, ErrorKind, Read};
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let md = file.metadata()?;
    if !md.is_file() {
        return Err(IoError::new(
            ErrorKind::InvalidInput,
            "it is not a regular file",
        ));
    }
    let mut text = String::new();
    file.take(CONFIG_MAX_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > CONFIG_MAX_BYTES {
        return Err(IoError::new(
            ErrorKind::InvalidData,
            format!(
                "it is larger than {CONFIG_MAX_BYTES} bytes, more than a configuration file can be"
            ),
        ));
    }
    Ok((text, md))
}

#[cfg(test)]
mod tests {
    use crate::config::load::tests::load;
    use crate::config::Layers;

    #[test]
    fn oversized_and_special_config_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.toml");
        // A sparse file: what a sandbox can plant as ./sandbox.toml at no cost.
        std::fs::File::create(&big)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let err = Layers::load_with_env(Some(&big), |_| None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("larger than 1048576 bytes"), "{err}");
        let fifo = dir.path().join("fifo.toml");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let mut layers = Layers::load_with_env(None, |_| None).unwrap();
        let err = layers.merge_file(&fifo, true).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        let err = load(None, &[("H9SANDBOX_JSON_MAX_BYTES", "0")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("H9SANDBOX_JSON_MAX_BYTES"), "{err}");
        assert_eq!(load(None, &[]).unwrap().json_max_bytes, 16 << 20);
    }
}
