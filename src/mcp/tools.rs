//! The MCP tools' interface: arguments (input schemas), results (output schemas), the tool list
//! with its descriptions and hints, and how a finished call or a failure becomes a protocol
//! result ([`Done`], [`tool_error`]). What the tools do is [`super::session`]'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;
use rmcp::handler::server::tool::schema_for_output;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::types::Network;

/// Lines `sandbox_read` returns when the call gives no `limit`.
pub(crate) const DEFAULT_READ_LINES: u64 = 2000;

/// Network mode of a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NetworkArg {
    /// Outbound network access (Docker's default bridge; no published ports).
    Bridge,
    /// No network at all, only loopback.
    None,
}

impl From<NetworkArg> for Network {
    fn from(n: NetworkArg) -> Network {
        match n {
            NetworkArg::Bridge => Network::Bridge,
            NetworkArg::None => Network::None,
        }
    }
}

/// Arguments of `sandbox_up`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpParams {
    /// Host directory mounted (at the same path) as the sandbox's work dir, where commands start
    /// and files are read and written; relative paths start at the server's default work dir.
    /// Default: the server's --workdir (for a sub-sandbox: its parent's work dir).
    #[serde(default)]
    pub workdir: Option<String>,
    /// Container image, e.g. "python:3.12-slim". Default: the server's --image, else the
    /// configured image.
    #[serde(default)]
    pub image: Option<String>,
    /// Name: 2 or more of letters, digits, '_', '.', '-'. Default: "h9sandbox-" and 12 hex
    /// digits of the ID.
    #[serde(default)]
    pub name: Option<String>,
    /// CPU limit in cores, e.g. 0.5 or 2. Default: configured (1).
    #[serde(default)]
    pub cpus: Option<f64>,
    /// Memory limit, e.g. "512m" or "2g". Default: configured ("512m").
    #[serde(default)]
    pub memory: Option<String>,
    /// Maximum number of processes. Default: configured (256).
    #[serde(default)]
    pub pids_limit: Option<u32>,
    /// "bridge" for outbound network access, "none" for no network. Default: configured
    /// ("bridge").
    #[serde(default)]
    pub network: Option<NetworkArg>,
    /// Make this a sub-sandbox of that sandbox (ID, ID prefix or name): it runs the parent's
    /// image in the parent's work dir, with the parent's limits, which cpus, memory, pids_limit
    /// and network may only tighten. It is removed with its parent.
    #[serde(default)]
    pub parent: Option<String>,
    /// Lease, e.g. "30m" or "2h": `h9sandbox reap` removes the sandbox this long after it
    /// started, even in the middle of this session (nothing renews it over MCP). Leave it out
    /// for a sandbox that lives as long as the session. Default: none.
    #[serde(default)]
    pub ttl: Option<String>,
    /// Keep the sandbox when this session ends. Default false: it is removed when the client
    /// disconnects (and by `h9sandbox reap` if the server dies).
    #[serde(default)]
    pub keep: bool,
}

/// Arguments of `sandbox_exec`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExecParams {
    /// Shell command line, run by `bash -c` (`sh -c` in images without bash) in the sandbox;
    /// pipes, `&&`, redirections and quotes work as in a shell. Standard input is empty. Give
    /// either this or argv.
    #[serde(default)]
    pub command: Option<String>,
    /// A program and its arguments, run exactly as given, without a shell (no quoting needed).
    /// Give either this or command.
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// Sandbox ID, unique ID prefix, or name. Default: this session's sandbox.
    #[serde(default)]
    pub id: Option<String>,
    /// Working directory: relative to the work dir, or absolute (any directory of the
    /// container). Default: the work dir.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Run as this user: a login name of the container (e.g. "root", "nobody"), or "UID" or
    /// "UID:GID". Default: the sandbox's user.
    #[serde(default)]
    pub user: Option<String>,
    /// Extra environment variables, e.g. {"RUST_LOG": "debug"}.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Seconds before the command's whole process tree is killed (the result then says
    /// timed_out, exit code 124); fractions allowed (0.5). At most the server's
    /// exec_timeout_secs (600 by default; 0, no limit, only when that is 0 too). Default: the
    /// sandbox's, within that ceiling.
    #[serde(default)]
    pub timeout_secs: Option<f64>,
    /// Bytes returned of each of stdout and stderr, at least 256 and at most the server's
    /// json_max_bytes (16 MiB by default): longer output keeps its first and last halves with a
    /// marker saying how many bytes were cut between them. Default: configured (30000).
    #[serde(default)]
    pub max_output_bytes: Option<u64>,
    /// Also return `output`: stdout and stderr together, chunk by chunk in the order the
    /// sandbox's agent read them (capped like each stream). Default: false.
    #[serde(default)]
    pub combined: bool,
}

/// Arguments of `sandbox_spawn`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpawnParams {
    /// Shell command line (bash -c), e.g. "python -m http.server 8000". Give either this or argv.
    #[serde(default)]
    pub command: Option<String>,
    /// A program and its arguments, run exactly as given. Give either this or command.
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// Sandbox ID, unique ID prefix, or name. Default: this session's sandbox.
    #[serde(default)]
    pub id: Option<String>,
    /// Working directory: relative to the work dir, or absolute (any directory of the
    /// container). Default: the work dir.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Run as this user: a login name of the container (e.g. "root", "nobody"), or "UID" or
    /// "UID:GID". Default: the sandbox's user.
    #[serde(default)]
    pub user: Option<String>,
    /// Extra environment variables, e.g. {"PORT": "8000"}.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Seconds before its whole process tree is killed; default: none (it runs until
    /// sandbox_kill or the sandbox's end). Fractions allowed (0.5).
    #[serde(default)]
    pub timeout_secs: Option<f64>,
}

/// Arguments of `sandbox_ps`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PsParams {
    /// Sandbox ID, unique ID prefix, or name. Default: this session's sandbox.
    #[serde(default)]
    pub id: Option<String>,
}

/// Arguments of `sandbox_logs`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LogsParams {
    /// The background command's handle (from sandbox_spawn or sandbox_ps).
    pub handle: String,
    /// Sandbox ID, unique ID prefix, or name. Default: this session's sandbox.
    #[serde(default)]
    pub id: Option<String>,
    /// Bytes returned of each of stdout and stderr (its start and end), at least 256. Default:
    /// configured (30000).
    #[serde(default)]
    pub max_output_bytes: Option<u64>,
}

/// Arguments of `sandbox_kill`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct KillParams {
    /// The background command's handle.
    pub handle: String,
    /// Sandbox ID, unique ID prefix, or name. Default: this session's sandbox.
    #[serde(default)]
    pub id: Option<String>,
}

/// Arguments of `sandbox_port_forward`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PortForwardParams {
    /// The port inside the sandbox (1-65535) that a server there listens on.
    pub port: std::num::NonZeroU16,
    /// The port on 127.0.0.1 of the server's machine to listen on. Default: a free one.
    #[serde(default)]
    pub local_port: Option<u16>,
    /// Sandbox ID, unique ID prefix, or name. Default: this session's sandbox.
    #[serde(default)]
    pub id: Option<String>,
}

/// Result of `sandbox_port_forward`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct PortForwardResult {
    /// The sandbox's ID.
    pub id: String,
    /// Where the server listens, `127.0.0.1:PORT`: connect there to reach `port` inside.
    pub address: String,
    /// The port inside the sandbox.
    pub port: u16,
}

/// Result of `sandbox_spawn`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct SpawnResult {
    /// The sandbox's ID.
    pub id: String,
    /// The handle sandbox_logs and sandbox_kill take.
    pub handle: String,
    /// Its process ID in the sandbox.
    pub pid: u32,
}

/// A background command, as `sandbox_ps` lists it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct ProcessInfo {
    /// Its handle.
    pub handle: String,
    /// Its process ID in the sandbox.
    pub pid: u32,
    /// The command, as given.
    pub command: String,
    /// Start time, seconds since the Unix epoch.
    pub started: u64,
    /// Its exit status once its own process has exited; null while it runs.
    pub exit_code: Option<i32>,
    /// Whether processes of its tree still run.
    pub running: bool,
}

/// Result of `sandbox_ps`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct PsResult {
    /// The sandbox's ID.
    pub id: String,
    /// Its background commands, oldest first.
    pub processes: Vec<ProcessInfo>,
}

/// Result of `sandbox_logs`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct LogsResult {
    /// The handle.
    pub handle: String,
    /// What it wrote to stdout (its start and end when long: see truncated).
    pub stdout: String,
    /// What it wrote to stderr (likewise).
    pub stderr: String,
    /// Whether bytes were cut from the middle of stdout or stderr.
    pub truncated: bool,
}

/// Result of `sandbox_kill`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct KillResult {
    /// The handle whose process tree is being killed.
    pub handle: String,
}

/// Arguments of `sandbox_read`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadParams {
    /// File: relative to the work dir, or absolute (outside the work dir: the container's file,
    /// read inside it as the sandbox's user).
    pub path: String,
    /// Sandbox ID, unique ID prefix, or name. Default: this session's sandbox.
    #[serde(default)]
    pub id: Option<String>,
    /// Number of the first line to return, 1-based. Default: 1.
    #[serde(default)]
    pub offset: Option<u64>,
    /// Maximum number of lines to return. Default: 2000. At most the configured number of bytes
    /// (30000) come back at once; `next_offset` says where to go on.
    #[serde(default)]
    pub limit: Option<u64>,
    /// Prefix every line with its number and a tab, as `cat -n` does. Default: false.
    #[serde(default)]
    pub line_numbers: bool,
}

/// Arguments of `sandbox_write`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteParams {
    /// File: relative to the work dir, or absolute (outside the work dir: the container's file,
    /// written inside it as the sandbox's user). It is created or replaced
    /// atomically (readers see the old or the new content, never half).
    pub path: String,
    /// The whole new content (text).
    pub content: String,
    /// Sandbox ID, unique ID prefix, or name. Default: this session's sandbox.
    #[serde(default)]
    pub id: Option<String>,
    /// Create missing parent directories. Default: true.
    #[serde(default = "yes")]
    pub parents: bool,
    /// Add `content` to the end of the existing file instead of replacing it. Default: false.
    #[serde(default)]
    pub append: bool,
    /// Create the file only: a tool error, and nothing written, when anything exists at `path`
    /// already (checked atomically). Default: false.
    #[serde(default)]
    pub no_clobber: bool,
}

fn yes() -> bool {
    true
}

/// Arguments of `sandbox_edit`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditParams {
    /// File: relative to the work dir, or absolute (outside the work dir: the container's file,
    /// edited inside it as the sandbox's user).
    pub path: String,
    /// Exact text to find, whitespace and line breaks included. It must occur exactly once,
    /// unless replace_all is true; give enough surrounding text to make it unique.
    pub old: String,
    /// Replacement text (may be empty).
    pub new: String,
    /// Replace every occurrence (at least one must exist). Default: false.
    #[serde(default)]
    pub replace_all: bool,
    /// Sandbox ID, unique ID prefix, or name. Default: this session's sandbox.
    #[serde(default)]
    pub id: Option<String>,
}

/// Arguments of `sandbox_list`: none.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListParams {}

/// Arguments of `sandbox_down`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DownParams {
    /// Sandbox ID, unique ID prefix, or name. Default: this session's sandbox.
    #[serde(default)]
    pub id: Option<String>,
}

/// A sandbox, as `sandbox_up` and `sandbox_list` describe it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct SandboxInfo {
    /// Sandbox ID (a UUID); a unique prefix of it, or the name, also name the sandbox.
    pub id: String,
    /// Name (also the container's name).
    pub name: String,
    /// Lifecycle state: Pending, Running, Stopping, Terminated or Failed.
    pub state: String,
    /// The container's state as the engine reports it (running, exited, missing, ...); only in
    /// sandbox_list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_state: Option<String>,
    /// The engine running it: docker, podman or local.
    pub engine: String,
    /// Whether it is a container; false for a local sandbox, whose commands run directly on the
    /// host without isolation.
    pub isolated: bool,
    /// Image it runs.
    pub image: String,
    /// Host directory mounted at the same path inside: where commands start, and what
    /// sandbox_read, sandbox_write and sandbox_edit work in.
    pub workdir: String,
    /// CPU limit in cores.
    pub cpus: f64,
    /// Memory limit.
    pub memory: String,
    /// Maximum number of processes.
    pub pids_limit: u32,
    /// Network: bridge (outbound access) or none.
    pub network: String,
    /// The sandbox it is a sub-sandbox of, if any.
    pub parent: Option<String>,
    /// End of its lease (RFC 3339), if it has one.
    pub expires_at: Option<String>,
    /// Creation time (RFC 3339).
    pub created_at: String,
    /// Whether tools called without `id` act on it.
    pub default: bool,
    /// Whether it is removed when this session ends.
    pub session_owned: bool,
    /// Why it failed, for a Failed sandbox.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Result of `sandbox_exec`: the sandbox's ID and the command's result, the same document as
/// `exec --format json`'s ([`crate::sandbox::exec::ExecResult`]); `interrupted` is
/// `"cancelled"` when the client cancelled the call.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct ExecResult {
    /// The sandbox's ID.
    pub id: String,
    /// The command's result.
    #[serde(flatten)]
    pub result: crate::sandbox::exec::ExecResult,
}

/// Result of `sandbox_read`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct ReadResult {
    /// Host path of the file (the sandbox sees the same path).
    pub path: String,
    /// The lines (with numbers when asked), each ending with a line break except perhaps the
    /// file's last.
    pub content: String,
    /// Number of the first line returned (1-based).
    pub first_line: u64,
    /// How many lines were returned.
    pub lines: u64,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// The offset to read on from, when lines are left; null at the end of the file.
    pub next_offset: Option<u64>,
    /// Whether the only line returned was cut short (it alone exceeds the byte cap).
    pub truncated: bool,
    /// Size of the file in bytes.
    pub size: u64,
}

/// Result of `sandbox_write`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct WriteResult {
    /// Host path of the file (the sandbox sees the same path).
    pub path: String,
    /// Bytes written.
    pub bytes_written: u64,
    /// Size of the file now.
    pub size: u64,
}

/// Result of `sandbox_edit`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct EditResult {
    /// Host path of the file (the sandbox sees the same path).
    pub path: String,
    /// Occurrences replaced.
    pub replacements: u64,
    /// Size of the file now.
    pub size: u64,
}

/// Result of `sandbox_list`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct ListResult {
    /// Every sandbox of this state directory (also those of other sessions and of the CLI),
    /// sub-sandboxes after their parent.
    pub sandboxes: Vec<SandboxInfo>,
    /// The ID tools called without `id` act on, if any.
    pub default: Option<String>,
}

/// One sandbox `sandbox_down` removed.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct RemovedInfo {
    /// Its ID.
    pub id: String,
    /// Its name.
    pub name: String,
}

/// Result of `sandbox_down`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct DownResult {
    /// The sandboxes removed: sub-sandboxes first, the one named last.
    pub removed: Vec<RemovedInfo>,
}

/// A tool whose arguments are `P` and whose structured result is `R`; `read_only`,
/// `destructive` and `idempotent` are hints for the client (it never reaches beyond the
/// sandboxes: not open-world).
pub(crate) fn tool<P: JsonSchema + 'static, R: JsonSchema + 'static>(
    name: &'static str,
    description: &'static str,
    (read_only, destructive, idempotent): (bool, bool, bool),
) -> Tool {
    let mut t = Tool::new(name, description, Arc::new(JsonObject::new())).with_input_schema::<P>();
    t.input_schema = tidy(&t.input_schema);
    t.with_raw_output_schema(tidy(&schema_for_output::<R>()))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(read_only)
                .destructive(destructive)
                .idempotent(idempotent)
                .open_world(false),
        )
}

/// `schema` with the line breaks of wrapped doc comments in its descriptions turned into spaces
/// (schemars keeps them; a model reads one line better).
fn tidy(schema: &JsonObject) -> Arc<JsonObject> {
    fn walk_map(map: &mut JsonObject) {
        for (k, v) in map.iter_mut() {
            match v {
                serde_json::Value::String(s) if k == "description" => *s = s.replace('\n', " "),
                v => walk(v),
            }
        }
    }
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => walk_map(map),
            serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut map = schema.clone();
    walk_map(&mut map);
    Arc::new(map)
}

/// A finished tool call: structured content and the text for clients that show only text.
pub(crate) struct Done {
    /// The result as JSON, described by the tool's output schema.
    pub structured: serde_json::Value,
    /// The result as text.
    pub text: String,
    /// A result that is still an error for the client (a timed-out command): the one-line
    /// reason, given first.
    pub error: Option<String>,
}

impl Done {
    /// The result `value` (serialized: errors only for a value that is no JSON) with `text`.
    pub(crate) fn new<T: Serialize>(value: &T, text: String) -> Result<Done> {
        Ok(Done {
            structured: serde_json::to_value(value)?,
            text,
            error: None,
        })
    }

    /// The protocol's result: an error result when [`Done::error`] is set, with that reason
    /// first.
    pub(crate) fn into_result(self) -> CallToolResult {
        let mut content = Vec::new();
        if let Some(e) = &self.error {
            // Its own line, also for clients that join the blocks.
            content.push(ContentBlock::text(format!("{e}\n")));
        }
        content.push(ContentBlock::text(self.text));
        let mut r = if self.error.is_some() {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        r.structured_content = Some(self.structured);
        r
    }
}

/// A tool error: the cause chain on one line.
pub(crate) fn tool_error(e: &anyhow::Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(one_line(&format!("{e:#}")))])
}

/// `text` with line breaks and tabs turned into spaces.
pub(crate) fn one_line(text: &str) -> String {
    text.split(['\n', '\r', '\t'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parses a tool's arguments; bad arguments are a tool error the model can correct, not a
/// protocol error (as the MCP specification recommends for input validation).
pub(crate) fn parse<T: DeserializeOwned>(tool: &str, args: Option<JsonObject>) -> Result<T> {
    serde_json::from_value(serde_json::Value::Object(args.unwrap_or_default())).map_err(|e| {
        Error::Usage(format!(
            "invalid arguments for {tool}: {e}; see the tool's input schema"
        ))
        .into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_with_defaults_filled_in() {
        let obj = |v: serde_json::Value| v.as_object().cloned();
        let w: WriteParams = parse(
            "sandbox_write",
            obj(serde_json::json!({"path": "a", "content": "b"})),
        )
        .unwrap();
        assert!(w.parents && !w.append && w.id.is_none());
        let r: ReadParams = parse("sandbox_read", obj(serde_json::json!({"path": "a"}))).unwrap();
        assert!(!r.line_numbers && r.offset.is_none());
        let _: ListParams = parse("sandbox_list", None).unwrap();
        let e = parse::<ExecParams>("sandbox_exec", obj(serde_json::json!({"cmd": "ls"})))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid arguments for sandbox_exec: unknown field `cmd`"),
            "{e}"
        );
        let e = parse::<UpParams>("sandbox_up", obj(serde_json::json!({"network": "host"})))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `host`"), "{e}");
    }

    #[test]
    fn errors_are_one_line_and_timeouts_stay_errors_with_their_result() {
        let e = anyhow::anyhow!("line one\nline two").context("outer");
        let r = tool_error(&e);
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.content.len(), 1);
        assert_eq!(
            r.content[0].as_text().unwrap().text,
            "outer: line one line two"
        );
        let mut d = Done::new(&serde_json::json!({"timed_out": true}), "output".into()).unwrap();
        d.error = Some("the command timed out".into());
        let r = d.into_result();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.content.len(), 2);
        assert_eq!(
            r.content[0].as_text().unwrap().text,
            "the command timed out\n"
        );
        assert_eq!(
            r.structured_content,
            Some(serde_json::json!({"timed_out": true}))
        );
    }
}
