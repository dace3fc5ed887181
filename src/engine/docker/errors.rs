//! What the Docker-CLI-compatible clients' English error messages mean: h9sandbox's own typed
//! errors ([`crate::error::Error`], [`crate::engine::ExecFailure`]) from the client's stderr and
//! exit status. Nothing outside this engine reads the client's text.

use super::Flavor;
use crate::engine::{is_gvisor, ExecFailure};
use crate::error::Error;

/// Whether `run`'s stderr says the engine has no runtime of the requested name (Docker:
/// "Unknown runtime specified", Podman: "OCI runtime ... not found").
pub(super) fn is_unknown_runtime(stderr: &str) -> bool {
    stderr.contains("Unknown runtime specified")
        || stderr.contains("unknown or invalid runtime name")
        || (stderr.contains("OCI runtime") && stderr.contains("not found"))
}

pub(super) fn unknown_runtime(bin: &str, name: &str) -> Error {
    let fix = if is_gvisor(Some(name)) {
        "run scripts/setup-gvisor.sh (as root) to install and register gVisor's runsc".to_string()
    } else {
        format!("register it in the engine's configuration (`{bin} info` lists its runtimes), or fix runtime / --runtime")
    };
    Error::Refused(format!(
        "the container engine `{bin}` has no OCI runtime named '{name}' (runtime / --runtime); {fix}"
    ))
}

/// A hint for a `run` failure whose cause h9sandbox knows, starting with "; ", or "".
pub(crate) fn run_failure_hint(stderr: &str) -> &'static str {
    if stderr.contains("error setting rlimit") {
        "; an rlimit exceeds what the runtime may grant: lower ulimit_nofile / ulimit_nproc (0 = automatic)"
    } else if stderr.contains("port is already allocated")
        || stderr.contains("address already in use")
    {
        "; a host port --publish asked for is taken: give another (--publish HOST_PORT:PORT), or let the engine pick a free one (--publish PORT)"
    } else if stderr.contains("crun") && stderr.contains("cgroup") {
        "; crun cannot use this host's cgroups: set runtime = \"runc\" (apt-get install runc)"
    } else {
        ""
    }
}

/// When the client's stderr says the daemon cannot be reached as its settings name it (down,
/// unknown context, TLS files missing, TLS expected or refused), the reason in one line.
pub(crate) fn unreachable_reason(stderr: &str) -> Option<String> {
    const SIGNS: [&str; 9] = [
        "Cannot connect to the Docker daemon",
        "error during connect",
        "Is the docker daemon running",
        "failed to connect to the docker API",
        "Cannot connect to Podman",
        // DOCKER_CONTEXT naming no context, DOCKER_CERT_PATH without the files.
        "unable to resolve docker endpoint",
        // A TLS port spoken to without DOCKER_TLS_VERIFY, or a certificate refused.
        "Client sent an HTTP request to an HTTPS server",
        "x509:",
        "remote error: tls",
    ];
    SIGNS.iter().any(|s| stderr.contains(s)).then(|| {
        format!(
            "{} (start the daemon, or fix DOCKER_HOST, DOCKER_CONTEXT, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH, or engine_bin; an existing sandbox keeps the daemon settings it was made with)",
            first_error_line(stderr)
        )
    })
}

pub(super) fn is_no_such_container(stderr: &str) -> bool {
    stderr.contains("No such container")
        || stderr.contains("no such container")
        || stderr.contains("No such object")
        || stderr.contains("no container with")
}

/// Whether `docker rm` failed because another client is already removing the container.
pub(super) fn is_removal_in_progress(stderr: &str) -> bool {
    stderr.contains("is already in progress")
}

pub(super) fn is_no_such_image(stderr: &str) -> bool {
    stderr.contains("No such image")
        || stderr.contains("Unable to find image")
        || stderr.contains("image not known")
}

/// The first meaningful line of a client's stderr, without the `docker: ` prefix.
pub(crate) fn first_error_line(stderr: &str) -> String {
    let line = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("WARNING"))
        .unwrap_or("(no message)");
    line.strip_prefix("docker: ").unwrap_or(line).to_string()
}

/// Turns the first bytes `head` a `docker exec` (`podman exec`) client wrote to stderr, with its
/// exit `status`, into h9sandbox's own failure when they show that the engine, not the command,
/// failed; `None` when they are the command's own.
pub(crate) fn exec_failure(
    flavor: Flavor,
    container: &str,
    head: &[u8],
    status: i32,
) -> Option<ExecFailure> {
    // `docker exec` reports its own failures with status 1 (daemon errors), 125, 126 or 127
    // (the OCI runtime could not start the process) and a message of its own on stderr;
    // `podman exec` with 125, 126, 127, or 255 (container not running).
    let own = match flavor {
        Flavor::Docker => matches!(status, 1 | 125 | 126 | 127),
        Flavor::Podman => matches!(status, 125 | 126 | 127 | 255),
    };
    if !own {
        return None;
    }
    let text = String::from_utf8_lossy(head);
    let line = first_error_line(&text);
    if let Some(reason) = unreachable_reason(&text) {
        return Some(ExecFailure::EngineUnavailable(reason));
    }
    // `exec --user NAME` the container's /etc/passwd does not know.
    if text.starts_with("unable to find user") || text.starts_with("Error: unable to find user") {
        return Some(ExecFailure::Other(format!(
            "--user: {line}; give a user the container has, or numeric IDs (UID:GID)"
        )));
    }
    if !(text.starts_with("Error") || text.starts_with("OCI runtime")) {
        return None;
    }
    if is_no_such_container(&text) {
        return Some(ExecFailure::ContainerGone(format!(
            "its container {container} no longer exists (removed outside h9sandbox)"
        )));
    }
    if text.contains("is paused") {
        return Some(ExecFailure::ContainerPaused(format!(
            "its container {container} was paused outside h9sandbox"
        )));
    }
    if text.contains("is not running")
        || text.contains("is restarting")
        || text.contains("can only create exec sessions on running containers")
    {
        return Some(ExecFailure::ContainerStopped(format!(
            "its container {container} is not running (stopped outside h9sandbox: `docker stop`, a daemon restart, a reboot)"
        )));
    }
    if text.contains("chdir to cwd") {
        return Some(ExecFailure::Other(format!(
            "--cwd: the command's user cannot enter it in the container: {line}"
        )));
    }
    if text.contains("OCI runtime exec failed") || text.contains("executable file not found") {
        return Some(ExecFailure::Other(format!(
            "the engine could not start the command: {line} (does the image have /bin/sh?)"
        )));
    }
    if text.starts_with("Error response from daemon") {
        return Some(ExecFailure::Other(line));
    }
    None
}

/// Whether the first chunk of an exec's stderr may be the client's own message (to be held back
/// until the exit status tells).
pub(crate) fn looks_like_engine_message(chunk: &[u8]) -> bool {
    const PREFIXES: [&[u8]; 6] = [
        b"Error",
        b"unable to find user",
        b"OCI runtime",
        b"Cannot connect",
        b"error during connect",
        b"failed to connect",
    ];
    PREFIXES.iter().any(|p| chunk.starts_with(p))
}
