//! Typed errors for the cases a caller must branch on, and the exit-code contract.
//!
//! Every other failure travels as an [`anyhow::Error`] with context written for the person reading
//! it. [`exit_code`] turns any error into the documented exit status: `1` for every subcommand but
//! `exec` (and `bootstrap`), which reserve the command's own statuses and use `125` for
//! h9sandbox's own failures, like `docker run` does.

use std::path::PathBuf;

/// Exit status of `exec` when the command ran past its timeout and its process tree was killed
/// (the convention of coreutils `timeout(1)`).
pub(crate) const EXIT_TIMEOUT: i32 = 124;
/// Exit status of `exec` when h9sandbox itself failed (unknown sandbox, engine down, container
/// gone), as `docker run` uses 125 for the daemon's own errors.
pub(crate) const EXIT_OWN_FAILURE: i32 = 125;
/// Exit status of every other subcommand on failure.
pub(crate) const EXIT_FAILURE: i32 = 1;
/// Exit status for malformed command lines (clap's convention), outside `exec`.
pub(crate) const EXIT_USAGE: i32 = 2;

/// Failures that callers (and tests) tell apart.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No record's ID, ID prefix or name matches, in the state directory `state_dir`.
    #[error("no sandbox matches '{query}' in the state directory {state_dir} (see `h9sandbox ls`; another HOME, XDG_STATE_HOME or H9SANDBOX_STATE_DIR, as in a CI job or under sudo, means another state directory)")]
    NotFound { query: String, state_dir: String },
    /// An ID prefix matches several records.
    #[error("'{prefix}' matches {count} sandboxes ({ids}); give more characters of the ID")]
    Ambiguous {
        prefix: String,
        count: usize,
        ids: String,
    },
    /// The container engine (its CLI or its daemon) cannot be reached.
    #[error("container engine `{bin}` unreachable: {reason}")]
    EngineUnavailable { bin: String, reason: String },
    /// The sandbox has a record but its container is gone or not running.
    #[error("sandbox {id} cannot run commands: {reason}; `h9sandbox down {id}` removes it")]
    ContainerGone { id: String, reason: String },
    /// The sandbox's container exists but does not run, or is paused; `hint` says what brings it
    /// back.
    #[error("sandbox {id} cannot run commands: {reason}; {hint}")]
    ContainerStopped {
        id: String,
        reason: String,
        hint: String,
    },
    /// The sandbox exists but is not (yet, or any more) in the Running state.
    #[error("sandbox {id} is {state}, not Running{detail}")]
    NotRunning {
        id: String,
        state: String,
        detail: String,
    },
    /// Another sandbox or container already uses the requested name.
    #[error(
        "the name '{0}' is already in use; choose another --name or `h9sandbox down {0}` first"
    )]
    NameInUse(String),
    /// The image is not present locally and could not be pulled.
    #[error("image '{image}' is not present locally and could not be pulled: {reason}; choose a local image (`--image`, `H9SANDBOX_IMAGE`; `docker image ls` lists them), build or load it locally (`docker build`, `docker load`), or check the registry")]
    ImageUnavailable { image: String, reason: String },
    /// A configuration value (file, environment or flag) is invalid.
    #[error("{origin}: {message}")]
    Config { origin: String, message: String },
    /// The state file exists but cannot be parsed.
    #[error("state file {path} is corrupt ({reason}); it was left untouched: fix it, or move it aside to start afresh (`h9sandbox reap` then finds the containers it listed)")]
    StateCorrupt { path: PathBuf, reason: String },
    /// A path argument leaves the sandbox work directory (`..` above it, an absolute symlink, a
    /// symlink that climbs out), as the kernel's `openat2(RESOLVE_BENEATH)` found.
    #[error("{0}")]
    PathEscape(String),
    /// `edit`'s text occurs `count` times in the file at `path`, not exactly once (or, with
    /// `--all`, not at all).
    #[error("{}", edit_match_message(path, *count))]
    EditMatch { path: String, count: usize },
    /// The state directory or one of its files could be changed by someone other than the
    /// invoking user (owner, mode, a symlink, a directory above it others can write), so its
    /// records cannot be trusted (the rule of ssh's `StrictModes`). `what` names the path,
    /// `fix` says what to do.
    #[error("refusing {what}: {problem}; {fix}")]
    UnsafeState {
        what: String,
        problem: String,
        fix: String,
    },
    /// `write --no-clobber` (MCP `no_clobber`): something exists at the path already, so nothing
    /// was written; checked atomically by the final rename (`RENAME_NOREPLACE`).
    #[error("{path} exists already; --no-clobber (MCP: no_clobber) leaves it as it is, and nothing was written")]
    Exists { path: String },
    /// The caller's own input is wrong, and asking differently fixes it (a check clap cannot
    /// make): a malformed value (a K=V, a size, a duration, a port spec, a name, a label, a
    /// `--mode`), a flag combination that does not go together (`--allow` with `--network none`,
    /// `--follow` with `--format json`, `cp` between two sandboxes), a path given as an argument
    /// that is missing, not a directory or outside the work dir (`--workdir`, `--cwd`,
    /// `--build`), a devcontainer.json that does not parse or names no image, a tool call's
    /// arguments that do not fit its schema.
    #[error("{0}")]
    Usage(String),
    /// The input is well-formed, but policy, a limit or the engine refuses it: a work dir in a
    /// credential directory, a sub-sandbox asking for more than its parent has, what an engine
    /// (swarm, local, copy mode, gVisor) or a sandbox made by an older h9sandbox cannot do, a
    /// project file that is a symlink or too large, a devcontainer.json that would loosen the
    /// hardening, a size limit exceeded (edit's, `copy_max_bytes`, `json_max_bytes`, what an MCP
    /// server grants), a count limit reached (an MCP session's forwards).
    #[error("{0}")]
    Refused(String),
    /// The sandbox side failed or said no: the in-container agent's failure replies and
    /// refusals, a channel that is lost or cannot be reached, a relay that failed, a sandbox or
    /// container not in the state the operation needs (not running, changed meanwhile, its work
    /// dir gone), what the sandbox reported about a file (not a regular file, a copy that failed
    /// in it), a tar stream from it that cannot be extracted.
    #[error("{0}")]
    Sandbox(String),
}

fn edit_match_message(path: &str, count: usize) -> String {
    if count == 0 {
        format!("the text to replace does not occur in {path}; check the old text (`--old`; MCP: `old`): it must match exactly, whitespace included")
    } else {
        format!("the text to replace occurs {count} times in {path}; give more surrounding text in the old text (`--old`; MCP: `old`) to make it unique, or replace every occurrence (`--all`; MCP: `replace_all`)")
    }
}

/// The exit status for an error raised by the subcommand `command` (`"exec"`, `"up"`, ...).
pub(crate) fn exit_code(command: &str, _err: &anyhow::Error) -> i32 {
    if reserves_child_statuses(command) {
        EXIT_OWN_FAILURE
    } else {
        EXIT_FAILURE
    }
}

/// Whether `command` passes the child's exit status through (so its own failures use 125).
pub(crate) fn reserves_child_statuses(command: &str) -> bool {
    matches!(command, "exec" | "bootstrap" | "run" | "shell")
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn usage_refused_and_sandbox_show_their_message_unchanged() {
        let m = "--cwd holds a NUL byte; give: \"x\" {0} 100%";
        assert_eq!(Error::Usage(m.into()).to_string(), m);
        assert_eq!(Error::Refused(m.into()).to_string(), m);
        assert_eq!(Error::Sandbox(m.into()).to_string(), m);
    }
}
