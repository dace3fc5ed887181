//! The contract between h9sandbox's two sides: what the host side (`sandbox`, `engine`,
//! `channel`) and the in-container side (`agent`) must agree on, and nothing else. Both
//! import it; it imports nothing of the crate. Changing anything here changes what a sandbox
//! made by another h9sandbox understands: [`proto::VERSION`] says which.
//!
//! - [`proto`]: the exec agent's wire protocol (framing, messages, who a command runs as);
//! - [`simple`]: which command lines the agent runs without a shell;
//! - the fixed paths of h9sandbox's things in every container, and the names in them;
//! - the marker variable every process of a command carries;
//! - the file helper's exit statuses.

pub(crate) mod proto;
pub(crate) mod simple;
pub(crate) mod tls;

/// The directory of h9sandbox's things in every container (a read-only mount of its own where
/// the engine mounts host directories; a directory of the derived image otherwise).
pub(crate) const ROOT: &str = "/.h9sandbox";

/// Where the static h9sandbox binary is in every container (bind-mounted read-only, or
/// shipped in the derived image).
pub(crate) const BIN: &str = "/.h9sandbox/h9sandbox";

/// The first argument that selects the in-container entry points (`h9sandbox agent …`).
pub(crate) const ARG: &str = "agent";

/// Where the host's per-sandbox run directory is mounted (read-write) in the container.
pub(crate) const RUN_DIR: &str = "/.h9sandbox/run";
/// The agent's socket, in the run directory.
pub(crate) const SOCKET_FILE: &str = "agent.sock";
/// The token file the host writes before the container starts; read and deleted by the agent.
pub(crate) const TOKEN_FILE: &str = "token";
/// Written by the agent once its socket listens: `h9sandbox-agent <protocol version>`.
pub(crate) const READY_FILE: &str = "ready";
/// Where detached commands' output is kept (in the scratch volume), root-owned, mode 0700.
pub(crate) const LOG_DIR: &str = "/var/tmp/.h9sandbox-logs";

/// The port on the sandbox's loopback where PID 1 relays an allowlist sandbox's HTTP proxy
/// traffic.
pub(crate) const PROXY_PORT: u16 = 3128;
/// The directory of an allowlist sandbox's proxy socket, mounted read-only in the sandbox.
pub(crate) const PROXY_DIR: &str = "/.h9sandbox/proxy";
/// The proxy sidecar's socket, as the sandbox sees it.
pub(crate) const PROXY_RELAY_SOCKET: &str = "/.h9sandbox/proxy/proxy.sock";

/// Environment variable set on every process of a command (its value identifies the command),
/// so that its whole process tree (children inherit the environment) can be found and killed.
pub(crate) const MARKER_VAR: &str = "H9SANDBOX_EXEC_ID";

/// The port the agent's remote channel listens on in the container (TLS over TCP), published by
/// the engine on the daemon's host.
pub(crate) const CHANNEL_PORT: u16 = 7336;

/// Exit status of the file helper (`agent file …`): no such file.
pub(crate) const EXIT_NOT_FOUND: i32 = 10;
/// Exit status of the file helper: not a regular file (a directory, a FIFO, a device).
pub(crate) const EXIT_NOT_REGULAR: i32 = 11;
/// Exit status of the file helper: permission denied for its user.
pub(crate) const EXIT_DENIED: i32 = 12;
/// Exit status of the file helper: the file exceeds the size the host asked for.
pub(crate) const EXIT_TOO_LARGE: i32 = 13;
/// Exit status of the file helper: any other failure.
pub(crate) const EXIT_OTHER: i32 = 14;
/// Exit status of the file helper: `write --no-clobber` found something at the path; nothing was
/// written. Its message is `PATH exists`.
pub(crate) const EXIT_EXISTS: i32 = 15;
