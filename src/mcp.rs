//! The Model Context Protocol server behind `h9sandbox mcp`: seven tools (`sandbox_up`,
//! `sandbox_exec`, `sandbox_read`, `sandbox_write`, `sandbox_edit`, `sandbox_list`,
//! `sandbox_down`) that agents take from a subprocess over stdio, built on the official Rust SDK
//! (`rmcp`).
//!
//! Every tool calls the library functions the CLI subcommands call ([`up::create`],
//! [`exec::execute`], [`crate::files::WorkDir`] through [`write::write_from`] and
//! [`edit::replace`], [`ls::entries`], [`down::take_down`]), so the state file, path safety,
//! timeouts that kill the process tree and exit codes behave as on the command line, and a
//! sandbox made here shows up in `h9sandbox ls`. What is the server's own: the session (which
//! sandbox a call without `id` means, which sandboxes the session removes when it ends),
//! JSON schemas and results for a model, and output caps that keep the start and the end.
//!
//! Results carry structured content (described by each tool's output schema) and a short text
//! for clients that show only text. Failures are tool errors (`isError`) with a one-line reason,
//! never a crashed server or a protocol error; a command's non-zero exit status is a normal
//! result. Nothing here writes to stdout: the protocol owns it (see `commands::mcp`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use rmcp::handler::server::tool::schema_for_output;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::sync::{watch, Semaphore};
use uuid::Uuid;

use crate::cli::{ExecArgs, Format, UpArgs};
use crate::commands::{down, edit, exec, ls, up, write, Ctx};
use crate::config::{Layers, Network, MIN_MCP_OUTPUT};
use crate::engine::Isolation;
use crate::error::Error;
use crate::output;
use crate::state::Record;

/// Lines `sandbox_read` returns when the call gives no `limit`.
pub const DEFAULT_READ_LINES: u64 = 2000;

/// Tool calls that may run at once (far more than a client sends); the session waits for all of
/// them to end by taking every permit.
const MAX_CALLS: u32 = 1 << 16;

/// What the server tells a client about itself in `initialize`.
const INSTRUCTIONS: &str = "\
Hardened, throw-away Docker sandboxes. Run shell commands with sandbox_exec instead of on the host; \
read and change files of the sandbox's work dir with sandbox_read, sandbox_write and sandbox_edit. \
The work dir is a host directory mounted at the same path in the sandbox: files there persist, the \
rest of the sandbox's file system is thrown away with it. Every tool takes an optional `id`; without \
it, it acts on this session's sandbox (made at start with --auto-up, or by the last sandbox_up). \
Sandboxes made in this session are removed when it ends, unless sandbox_up was given keep=true.";

// ---------------------------------------------------------------------------------------------
// Arguments (input schemas) and results (output schemas).

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
pub struct UpParams {
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
pub struct ExecParams {
    /// Shell command line, run by `bash -c` (`sh -c` in images without bash) in the sandbox;
    /// pipes, `&&`, redirections and quotes work as in a shell. Standard input is empty.
    pub command: String,
    /// Sandbox ID, unique ID prefix, or name. Default: this session's sandbox.
    #[serde(default)]
    pub id: Option<String>,
    /// Working directory: relative to the work dir, or absolute inside it. Default: the work dir.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Extra environment variables, e.g. {"RUST_LOG": "debug"}.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Seconds before the command's whole process tree is killed (the result then says
    /// timed_out, exit code 124); 0 = no limit. Default: configured (600).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Bytes returned of each of stdout and stderr, at least 256: longer output keeps its first
    /// and last halves with a marker saying how many bytes were cut between them. Default:
    /// configured (30000).
    #[serde(default)]
    pub max_output_bytes: Option<u64>,
}

/// Arguments of `sandbox_read`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {
    /// File: relative to the work dir, or absolute inside it.
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
pub struct WriteParams {
    /// File: relative to the work dir, or absolute inside it. It is created or replaced
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
}

fn yes() -> bool {
    true
}

/// Arguments of `sandbox_edit`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditParams {
    /// File: relative to the work dir, or absolute inside it.
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
pub struct ListParams {}

/// Arguments of `sandbox_down`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DownParams {
    /// Sandbox ID, unique ID prefix, or name. Default: this session's sandbox.
    #[serde(default)]
    pub id: Option<String>,
}

/// A sandbox, as `sandbox_up` and `sandbox_list` describe it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SandboxInfo {
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

/// Result of `sandbox_exec`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ExecResult {
    /// The sandbox's ID.
    pub id: String,
    /// The command's exit status (128+N when killed by signal N; 124 when it timed out).
    pub exit_code: i32,
    /// Standard output (capped: see truncated).
    pub stdout: String,
    /// Standard error (capped: see truncated).
    pub stderr: String,
    /// Wall-clock milliseconds from start to exit.
    pub duration_ms: u64,
    /// Whether the timeout killed the command's process tree.
    pub timed_out: bool,
    /// Whether bytes were cut from the middle of stdout or stderr.
    pub truncated: bool,
    /// Bytes the command wrote to stdout in all.
    pub stdout_bytes: u64,
    /// Bytes the command wrote to stderr in all.
    pub stderr_bytes: u64,
}

/// Result of `sandbox_read`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReadResult {
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
pub struct WriteResult {
    /// Host path of the file (the sandbox sees the same path).
    pub path: String,
    /// Bytes written.
    pub bytes_written: u64,
    /// Size of the file now.
    pub size: u64,
}

/// Result of `sandbox_edit`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EditResult {
    /// Host path of the file (the sandbox sees the same path).
    pub path: String,
    /// Occurrences replaced.
    pub replacements: u64,
    /// Size of the file now.
    pub size: u64,
}

/// Result of `sandbox_list`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ListResult {
    /// Every sandbox of this state directory (also those of other sessions and of the CLI),
    /// sub-sandboxes after their parent.
    pub sandboxes: Vec<SandboxInfo>,
    /// The ID tools called without `id` act on, if any.
    pub default: Option<String>,
}

/// One sandbox `sandbox_down` removed.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RemovedInfo {
    /// Its ID.
    pub id: String,
    /// Its name.
    pub name: String,
}

/// Result of `sandbox_down`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DownResult {
    /// The sandboxes removed: sub-sandboxes first, the one named last.
    pub removed: Vec<RemovedInfo>,
}

// ---------------------------------------------------------------------------------------------
// The tools.

/// A tool whose arguments are `P` and whose structured result is `R`; `read_only`,
/// `destructive` and `idempotent` are hints for the client (it never reaches beyond the
/// sandboxes: not open-world).
fn tool<P: JsonSchema + 'static, R: JsonSchema + 'static>(
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

/// The tool list, in the order clients show it.
pub fn tools() -> Vec<Tool> {
    vec![
        tool::<UpParams, SandboxInfo>(
            "sandbox_up",
            "Start a new sandbox: a hardened, throw-away container with a host directory (the work dir) mounted at the same path. It becomes this session's default sandbox, which the other tools use when called without `id`. It is removed when the session ends, unless keep is true.",
            (false, false, false),
        ),
        tool::<ExecParams, ExecResult>(
            "sandbox_exec",
            "Run a shell command in a sandbox and return its exit code, stdout and stderr; a non-zero exit code is a normal result. The command starts in the work dir. A timeout kills its whole process tree (a tool error, with the output so far). Long output keeps its start and end, with a marker saying how many bytes were cut between them.",
            (false, true, false),
        ),
        tool::<ReadParams, ReadResult>(
            "sandbox_read",
            "Read lines of a text file in a sandbox's work dir: offset and limit in lines, optional cat -n style line numbers; next_offset says where to go on. Paths that leave the work dir are refused. Binary files are refused too: read those with sandbox_exec (e.g. base64).",
            (true, false, true),
        ),
        tool::<WriteParams, WriteResult>(
            "sandbox_write",
            "Create or replace a text file in a sandbox's work dir, atomically (missing parent directories are created). Paths that leave the work dir are refused and touch nothing.",
            (false, true, true),
        ),
        tool::<EditParams, EditResult>(
            "sandbox_edit",
            "Replace exact text in a file of a sandbox's work dir: `old` must occur exactly once (or at least once with replace_all). The file is replaced atomically and keeps its mode and owner.",
            (false, true, false),
        ),
        tool::<ListParams, ListResult>(
            "sandbox_list",
            "List the sandboxes (this session's and any others of the same state directory) with their real container state, and which one is this session's default.",
            (true, false, true),
        ),
        tool::<DownParams, DownResult>(
            "sandbox_down",
            "Stop and remove a sandbox and its sub-sandboxes. Files in its work dir stay on the host; everything else in the sandbox is lost.",
            (false, true, true),
        ),
    ]
}

/// A finished tool call: structured content and the text for clients that show only text.
struct Done {
    structured: serde_json::Value,
    text: String,
    /// A result that is still an error for the client (a timed-out command): the one-line
    /// reason, given first.
    error: Option<String>,
}

impl Done {
    fn new<T: Serialize>(value: &T, text: String) -> Result<Done> {
        Ok(Done {
            structured: serde_json::to_value(value)?,
            text,
            error: None,
        })
    }

    fn into_result(self) -> CallToolResult {
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
fn tool_error(e: &anyhow::Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(one_line(&format!("{e:#}")))])
}

/// `text` with line breaks and tabs turned into spaces.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r', '\t'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parses a tool's arguments; bad arguments are a tool error the model can correct, not a
/// protocol error (as the MCP specification recommends for input validation).
fn parse<T: DeserializeOwned>(tool: &str, args: Option<JsonObject>) -> Result<T> {
    serde_json::from_value(serde_json::Value::Object(args.unwrap_or_default())).map_err(|e| {
        Error::Invalid(format!(
            "invalid arguments for {tool}: {e}; see the tool's input schema"
        ))
        .into()
    })
}

// ---------------------------------------------------------------------------------------------
// The session.

/// What one MCP session has: its configuration, its default sandbox and the sandboxes it
/// removes when it ends.
pub struct Session {
    /// The configuration (with `mcp --image`), output format JSON so that no spinner is drawn.
    ctx: Ctx,
    /// The configuration layers below sandbox_up's arguments.
    layers: Layers,
    /// Work dir of sandboxes made without one.
    workdir: PathBuf,
    /// Mutable session state; never held across an await.
    state: Mutex<SessionState>,
    /// Turns true once the `--auto-up` attempt is over (`None`: no `--auto-up`).
    auto: Option<watch::Receiver<bool>>,
    auto_done: watch::Sender<bool>,
    /// One permit per tool call under way.
    calls: Arc<Semaphore>,
}

#[derive(Debug, Default)]
struct SessionState {
    /// The sandbox tools use without `id`.
    default: Option<Uuid>,
    /// Sandboxes removed when the session ends.
    owned: Vec<Uuid>,
    /// Why `--auto-up` failed, if it did.
    auto_error: Option<String>,
}

impl Session {
    /// A session whose configuration is `layers` (its context `ctx` built from them, see
    /// [`Ctx::from_layers`]), making sandboxes in `workdir` unless told otherwise; `auto_up`
    /// when [`Session::auto_up`] will make its first sandbox.
    pub fn new(ctx: Ctx, layers: Layers, workdir: PathBuf, auto_up: bool) -> Session {
        let (tx, rx) = watch::channel(!auto_up);
        Session {
            ctx,
            layers,
            workdir,
            state: Mutex::new(SessionState::default()),
            auto: auto_up.then_some(rx),
            auto_done: tx,
            calls: Arc::new(Semaphore::new(MAX_CALLS as usize)),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The configuration's context (for the server's own clean-up).
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// Makes the session's sandbox (`--auto-up`) as `sandbox_up` without arguments does, tied
    /// to this process (`--owner-pid`). A failure is warned about on stderr and kept for the
    /// tools to report.
    pub async fn auto_up(&self) {
        match self.up(UpParams::default()).await {
            Ok(done) => {
                if self.ctx.verbose > 0 {
                    output::note(&format!("mcp: {}", done.text));
                }
            }
            Err(e) => {
                let why = one_line(&format!("{e:#}"));
                output::warn(&format!("mcp --auto-up could not create a sandbox: {why}"));
                self.state().auto_error = Some(why);
            }
        }
        let _ = self.auto_done.send(true);
    }

    /// Waits (at most `patience`) for the tool calls under way to end.
    pub async fn wait_for_calls(&self, patience: Duration) {
        let _ = tokio::time::timeout(patience, self.calls.acquire_many(MAX_CALLS)).await;
    }

    /// The sandboxes the session removes when it ends, forgetting them.
    pub fn take_owned(&self) -> Vec<Uuid> {
        std::mem::take(&mut self.state().owned)
    }

    /// The sandbox a call means: `id`, else the session's default (waiting for `--auto-up`).
    async fn target(&self, id: Option<String>) -> Result<String> {
        if let Some(id) = id.filter(|i| !i.trim().is_empty()) {
            return Ok(id);
        }
        if let Some(rx) = &self.auto {
            let mut rx = rx.clone();
            let _ = rx.wait_for(|done| *done).await;
        }
        let st = self.state();
        match (st.default, &st.auto_error) {
            (Some(d), _) => Ok(d.to_string()),
            (None, Some(e)) => Err(Error::Invalid(format!(
                "this session has no sandbox: the one --auto-up was to make failed ({e}); call sandbox_up, or pass id"
            ))
            .into()),
            (None, None) => Err(Error::Invalid(
                "this session has no sandbox (none made yet, or it was removed); call sandbox_up, or pass the id of an existing one (sandbox_list)".into(),
            )
            .into()),
        }
    }

    fn info(&self, rec: &Record, entry: Option<&ls::Entry>) -> SandboxInfo {
        let st = self.state();
        SandboxInfo {
            id: rec.id.to_string(),
            name: rec.name.clone(),
            state: rec.state.to_string(),
            container_state: entry.map(|e| e.container_state.clone()),
            engine: rec.engine.to_string(),
            isolated: rec.isolation != Isolation::None,
            image: rec.image.clone(),
            workdir: rec.workdir.display().to_string(),
            cpus: rec.limits.cpus,
            memory: rec.limits.memory.clone(),
            pids_limit: rec.limits.pids_limit,
            network: rec.limits.network.to_string(),
            parent: rec.parent.map(|p| p.to_string()),
            expires_at: rec.expires_at.clone(),
            created_at: rec.created_at.clone(),
            default: st.default == Some(rec.id),
            session_owned: st.owned.contains(&rec.id),
            error: rec.error.clone(),
        }
    }

    /// `sandbox_up`: [`up::create`] with a context built from the session's configuration and
    /// the call's limits, exactly as `up`'s flags would set them.
    async fn up(&self, p: UpParams) -> Result<Done> {
        let workdir = match (&p.workdir, &p.parent) {
            (Some(w), _) => Some(self.workdir.join(w)),
            (None, None) => Some(self.workdir.clone()),
            (None, Some(_)) => None,
        };
        let args = UpArgs {
            workdir,
            image: p.image,
            name: p.name,
            cpus: p.cpus.map(|c| c.to_string()),
            memory: p.memory,
            pids_limit: p.pids_limit.map(|n| n.to_string()),
            network: p.network.map(Network::from),
            labels: Vec::new(),
            parent: p.parent,
            bootstrap: None,
            bootstrap_required: false,
            bootstrap_timeout: None,
            user: None,
            owner_pid: (!p.keep).then(|| std::process::id().to_string()),
            ttl: p.ttl,
        };
        let ctx = Ctx::from_layers(
            &self.layers,
            &up::config_flags(&args),
            Format::Json,
            self.ctx.verbose,
            Arc::clone(&self.ctx.reporter),
        )?;
        let rec = up::create(&ctx, &args).await?;
        {
            let mut st = self.state();
            st.default = Some(rec.id);
            if !p.keep {
                st.owned.push(rec.id);
            }
        }
        let info = self.info(&rec, None);
        let text = format!(
            "sandbox {} ({}) is {}: image {}, work dir {} (same path inside), {} CPU, {} memory, network {}{}; tools called without id now use it{}",
            info.id,
            info.name,
            info.state,
            info.image,
            info.workdir,
            info.cpus,
            info.memory,
            info.network,
            if info.isolated { "" } else { " (LOCAL: no container, commands run on the host)" },
            if p.keep { "; it outlives this session" } else { "; it is removed when this session ends" },
        );
        Done::new(&info, text)
    }

    /// `sandbox_exec`: [`exec::execute`] capturing both streams' start and end; a client's
    /// cancellation kills the command's process tree as a signal would.
    async fn exec(
        &self,
        p: ExecParams,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> Result<Done> {
        let max = p
            .max_output_bytes
            .unwrap_or(self.ctx.cfg.mcp_max_output_bytes);
        if max < MIN_MCP_OUTPUT {
            return Err(Error::Invalid(format!(
                "max_output_bytes {max} is too small; give at least {MIN_MCP_OUTPUT}"
            ))
            .into());
        }
        let mut env = Vec::new();
        for (k, v) in p.env.unwrap_or_default() {
            if k.contains('=') {
                return Err(
                    Error::Invalid(format!("invalid env name '{k}': it contains '='")).into(),
                );
            }
            env.push(format!("{k}={v}"));
        }
        let args = ExecArgs {
            id: self.target(p.id).await?,
            cwd: p.cwd.map(PathBuf::from),
            env,
            timeout: p.timeout_secs,
            interactive: false,
            max_output: usize::try_from(max).unwrap_or(usize::MAX),
            command: vec![p.command],
        };
        let stop = async {
            cancelled.await;
            "cancelled"
        };
        let done = exec::execute(
            &self.ctx,
            &args,
            exec::Sink::CaptureEnds(args.max_output),
            stop,
        )
        .await?;
        let out = &done.outcome;
        let (stdout, cut_out) = out.stdout.text_ends();
        let (stderr, cut_err) = out.stderr.text_ends();
        let result = ExecResult {
            id: done.record.id.to_string(),
            exit_code: out.exit_code,
            stdout,
            stderr,
            duration_ms: out.duration.as_millis() as u64,
            timed_out: out.timed_out,
            truncated: cut_out > 0 || cut_err > 0,
            stdout_bytes: out.stdout.total,
            stderr_bytes: out.stderr.total,
        };
        let mut text = format!(
            "exit code {} in {} ms{}",
            result.exit_code,
            result.duration_ms,
            if result.truncated {
                " (output cut in the middle: see the marker)"
            } else {
                ""
            }
        );
        for (name, s) in [("stdout", &result.stdout), ("stderr", &result.stderr)] {
            if !s.is_empty() {
                text.push_str(&format!("\n--- {name} ---\n{s}"));
                if !s.ends_with('\n') {
                    text.push('\n');
                }
            }
        }
        let error = out.timed_out.then(|| {
            format!(
                "the command timed out after {}s and {}; exit code 124",
                done.timeout.map_or(0, |t| t.as_secs()),
                if out.tree_killed {
                    "its process tree was killed"
                } else {
                    "killing its process tree failed (see the server's stderr)"
                }
            )
        });
        let mut d = Done::new(&result, text)?;
        d.error = error;
        Ok(d)
    }

    /// `sandbox_read`: [`crate::files::WorkDir::read_lines`], on a blocking thread.
    async fn read(&self, p: ReadParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let (_, wd) = crate::commands::workdir_of(&self.ctx, &id)?;
        let max = usize::try_from(self.ctx.cfg.mcp_max_output_bytes).unwrap_or(usize::MAX);
        let first = p.offset.unwrap_or(1).max(1);
        let limit = p.limit.unwrap_or(DEFAULT_READ_LINES);
        let path = PathBuf::from(&p.path);
        let lines =
            tokio::task::spawn_blocking(move || wd.read_lines(&path, first, limit, max)).await??;
        if lines.binary {
            return Err(Error::Invalid(format!(
                "{} is a binary file ({} bytes, NUL bytes in it), not text; read it with sandbox_exec, e.g. `base64 {}` or `xxd {} | head`",
                lines.path.display(),
                lines.size,
                p.path,
                p.path
            ))
            .into());
        }
        let count = lines.lines.len() as u64;
        let mut content = String::new();
        for (i, l) in lines.lines.iter().enumerate() {
            let text = String::from_utf8_lossy(l);
            if p.line_numbers {
                content.push_str(&format!("{:>6}\t{text}", lines.first + i as u64));
            } else {
                content.push_str(&text);
            }
            // The file's last line keeps its missing line break missing.
            let last_of_file = lines.first + i as u64 == lines.total;
            if !(last_of_file && lines.open_end) || lines.cut {
                content.push('\n');
            }
        }
        let last = lines.first + count.saturating_sub(1);
        let next_offset = (count > 0 && last < lines.total).then_some(last + 1);
        let result = ReadResult {
            path: lines.path.display().to_string(),
            content,
            first_line: lines.first,
            lines: count,
            total_lines: lines.total,
            next_offset,
            truncated: lines.cut,
            size: lines.size,
        };
        let mut text = result.content.clone();
        if count == 0 {
            text = if lines.total == 0 {
                format!("{} is empty", result.path)
            } else {
                format!(
                    "{} has {} lines; offset {first} is past its end",
                    result.path, lines.total
                )
            };
        } else if let Some(n) = next_offset {
            text.push_str(&format!(
                "[lines {first}-{last} of {}{}; call sandbox_read with offset {n} for more]\n",
                lines.total,
                if lines.cut { ", the last one cut" } else { "" },
            ));
        }
        Done::new(&result, text)
    }

    /// `sandbox_write`: [`write::write_from`] with `write`'s options for the sandbox.
    async fn write(&self, p: WriteParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let (rec, wd) = crate::commands::workdir_of(&self.ctx, &id)?;
        let opts = write::options(&rec, None, p.parents, p.append);
        let data = std::io::Cursor::new(p.content.into_bytes());
        let w = write::write_from(wd, PathBuf::from(&p.path), data, opts).await?;
        let result = WriteResult {
            path: w.path.display().to_string(),
            bytes_written: w.bytes_written,
            size: w.size,
        };
        let text = format!(
            "wrote {} bytes to {} (now {} bytes)",
            result.bytes_written, result.path, result.size
        );
        Done::new(&result, text)
    }

    /// `sandbox_edit`: [`edit::replace`].
    async fn edit(&self, p: EditParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let (_, wd) = crate::commands::workdir_of(&self.ctx, &id)?;
        let e = edit::replace(wd, PathBuf::from(&p.path), p.old, p.new, p.replace_all).await?;
        let result = EditResult {
            path: e.path.display().to_string(),
            replacements: e.replacements as u64,
            size: e.size,
        };
        let text = format!(
            "replaced {} occurrence{} in {}",
            result.replacements,
            if result.replacements == 1 { "" } else { "s" },
            result.path
        );
        Done::new(&result, text)
    }

    /// `sandbox_list`: [`ls::entries`].
    async fn list(&self, _p: ListParams) -> Result<Done> {
        let entries = ls::entries(&self.ctx).await?;
        let sandboxes: Vec<SandboxInfo> = entries
            .iter()
            .map(|e| self.info(&e.record, Some(e)))
            .collect();
        let default = self.state().default.map(|d| d.to_string());
        let mut text = if sandboxes.is_empty() {
            "no sandboxes".to_string()
        } else {
            String::new()
        };
        for s in &sandboxes {
            text.push_str(&format!(
                "{} {} {} ({}) {} {}{}\n",
                s.id,
                s.name,
                s.state,
                s.container_state.as_deref().unwrap_or("-"),
                s.image,
                s.workdir,
                if s.default { " [default]" } else { "" }
            ));
        }
        Done::new(&ListResult { sandboxes, default }, text)
    }

    /// `sandbox_down`: [`down::take_down`] of one sandbox (and its sub-sandboxes).
    async fn down(&self, p: DownParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let report = down::take_down(&self.ctx, std::slice::from_ref(&id), false).await?;
        {
            let mut st = self.state();
            for r in &report.removed {
                st.owned.retain(|o| *o != r.id);
                if st.default == Some(r.id) {
                    // Back to the newest sandbox this session still owns (the --auto-up one).
                    st.default = st.owned.last().copied();
                }
            }
        }
        if let Some(e) = report.error {
            return Err(e);
        }
        let result = DownResult {
            removed: report
                .removed
                .iter()
                .map(|r| RemovedInfo {
                    id: r.id.to_string(),
                    name: r.name.clone(),
                })
                .collect(),
        };
        let text = if result.removed.is_empty() {
            format!("sandbox {id} was already gone")
        } else {
            format!(
                "removed {}",
                result
                    .removed
                    .iter()
                    .map(|r| format!("{} ({})", r.id, r.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        Done::new(&result, text)
    }

    /// Runs the tool `name` with `args`; every failure becomes a tool error.
    async fn call(
        &self,
        name: &str,
        args: Option<JsonObject>,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> CallToolResult {
        let done = match name {
            "sandbox_up" => match parse(name, args) {
                Ok(p) => self.up(p).await,
                Err(e) => Err(e),
            },
            "sandbox_exec" => match parse(name, args) {
                Ok(p) => self.exec(p, cancelled).await,
                Err(e) => Err(e),
            },
            "sandbox_read" => match parse(name, args) {
                Ok(p) => self.read(p).await,
                Err(e) => Err(e),
            },
            "sandbox_write" => match parse(name, args) {
                Ok(p) => self.write(p).await,
                Err(e) => Err(e),
            },
            "sandbox_edit" => match parse(name, args) {
                Ok(p) => self.edit(p).await,
                Err(e) => Err(e),
            },
            "sandbox_list" => match parse(name, args) {
                Ok(p) => self.list(p).await,
                Err(e) => Err(e),
            },
            "sandbox_down" => match parse(name, args) {
                Ok(p) => self.down(p).await,
                Err(e) => Err(e),
            },
            other => Err(Error::Invalid(format!("unknown tool {other}")).into()),
        };
        match done {
            Ok(d) => d.into_result(),
            Err(e) => {
                if self.ctx.verbose > 0 {
                    output::note(&format!("mcp: {name} failed: {e:#}"));
                }
                tool_error(&e)
            }
        }
    }
}

/// The MCP server: a handle on the [`Session`] that rmcp's service drives.
#[derive(Clone)]
pub struct Server {
    session: Arc<Session>,
}

impl Server {
    /// The server of `session`.
    pub fn new(session: Arc<Session>) -> Server {
        Server { session }
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("h9sandbox", env!("CARGO_PKG_VERSION"))
                    .with_title("h9sandbox")
                    .with_description(env!("CARGO_PKG_DESCRIPTION")),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Ok(_permit) = self.session.calls.clone().acquire_owned().await else {
            return Ok(tool_error(&anyhow::anyhow!("the server is shutting down")).into());
        };
        let ct = context.ct.clone();
        let result = self
            .session
            .call(&request.name, request.arguments, ct.cancelled_owned())
            .await;
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_have_object_schemas_without_line_breaks() {
        let tools = tools();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 7);
        for t in &tools {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            assert_eq!(t.input_schema["additionalProperties"], false, "{}", t.name);
            assert!(t.output_schema.is_some(), "{}", t.name);
            let text = serde_json::to_string(&t).unwrap();
            assert!(!text.contains("\\n"), "{}: {text}", t.name);
        }
    }

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
