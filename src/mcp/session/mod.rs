//! One MCP session: its configuration, its default sandbox, the sandboxes it removes when it
//! ends, and the tools' work. Every tool calls the core the CLI subcommands call
//! ([`create::create`](crate::sandbox::create::create),
//! [`exec::execute`](crate::sandbox::exec::execute),
//! [`host_files::write_from`](crate::sandbox::host_files::write_from),
//! [`host_files::replace`](crate::sandbox::host_files::replace), [`list::entries`],
//! [`down::take_down`](crate::sandbox::down::take_down), and [`crate::workdir_fs::WorkDir`] for
//! reading), so the state file, path safety, timeouts that kill the process tree and exit codes
//! behave as on the command line, and a sandbox made here shows up in `h9sandbox ls`. What is
//! the session's own: which sandbox a call without `id` means, which sandboxes it removes when
//! it ends, results for a model, and output caps that keep the start and the end.

//!
//! The tools' work is split by what they act on: `sandboxes` (`sandbox_up`, `sandbox_list`,
//! `sandbox_down`), `commands` (`sandbox_exec` and the background commands), `file_ops`
//! (`sandbox_read`, `sandbox_write`, `sandbox_edit`) and `forwards` (`sandbox_port_forward`);
//! the one table of tools ([`tools`], `Session::dispatch`) stays here.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use tokio::sync::{watch, Semaphore};
use uuid::Uuid;

use super::tools::*;
use crate::config::Layers;
use crate::error::Error;
use crate::sandbox::{list, Ctx};
use crate::state::{Record, State};
use crate::types::Isolation;

/// Tool calls that may run at once (far more than a client sends); the session waits for all of
/// them to end by taking every permit.
const MAX_CALLS: u32 = 1 << 16;

/// What one MCP session has: its configuration, its default sandbox and the sandboxes it
/// removes when it ends.
pub(crate) struct Session {
    /// The configuration (with `mcp --image`), reporting to stderr (stdout is the protocol's).
    ctx: Ctx,
    /// The configuration layers below sandbox_up's arguments.
    layers: Layers,
    /// Work dir of sandboxes made without one.
    workdir: PathBuf,
    /// Whether the tools reach every sandbox of the state directory (`mcp --all-sandboxes`),
    /// not only the session's own ([`Session::scoped`]).
    all_sandboxes: bool,
    /// Mutable session state; never held across an await.
    state: Mutex<SessionState>,
    /// Turns true once the `--auto-up` attempt is over (`None`: no `--auto-up`).
    auto: Option<watch::Receiver<bool>>,
    auto_done: watch::Sender<bool>,
    /// One permit per tool call under way.
    calls: Arc<Semaphore>,
    /// Whether `sandbox_port_forward` is offered (`mcp --port-forward`).
    port_forward: bool,
    /// The forwards `sandbox_port_forward` started; never held across an await.
    forwards: Mutex<Forwards>,
    /// Turns true when the session ends: every forward stops.
    forwards_end: watch::Sender<bool>,
}

mod commands;
mod file_ops;
mod forwards;
mod sandboxes;

use forwards::Forwards;

#[derive(Debug, Default)]
struct SessionState {
    /// The sandbox tools use without `id`.
    default: Option<Uuid>,
    /// Sandboxes removed when the session ends.
    owned: Vec<Uuid>,
    /// Every sandbox the session made (kept ones too): with their sub-sandboxes, all the tools
    /// may act on unless `--all-sandboxes`.
    created: Vec<Uuid>,
    /// Why `--auto-up` failed, if it did.
    auto_error: Option<String>,
}

impl Session {
    /// A session whose configuration is `layers` (its context `ctx` built from them, see
    /// [`Ctx::from_layers`]), making sandboxes in `workdir` unless told otherwise; `auto_up`
    /// when [`Session::auto_up`] will make its first sandbox; `all_sandboxes` when its tools
    /// may act on every sandbox of the state directory, not only on those it made.
    pub(crate) fn new(
        ctx: Ctx,
        layers: Layers,
        workdir: PathBuf,
        auto_up: bool,
        all_sandboxes: bool,
        port_forward: bool,
    ) -> Session {
        let (tx, rx) = watch::channel(!auto_up);
        Session {
            ctx,
            layers,
            workdir,
            all_sandboxes,
            state: Mutex::new(SessionState::default()),
            auto: auto_up.then_some(rx),
            auto_done: tx,
            calls: Arc::new(Semaphore::new(MAX_CALLS as usize)),
            port_forward,
            forwards: Mutex::default(),
            forwards_end: watch::channel(false).0,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The configuration's context (for the server's own clean-up).
    pub(crate) fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// Makes the session's sandbox (`--auto-up`) as `sandbox_up` without arguments does, tied
    /// to this process (`--owner-pid`). A failure is warned about on stderr and kept for the
    /// tools to report.
    pub(crate) async fn auto_up(&self) {
        match self.up(UpParams::default()).await {
            Ok(done) => {
                if self.ctx.verbose() {
                    self.ctx.reporter.note(&format!("mcp: {}", done.text));
                }
            }
            Err(e) => {
                let why = one_line(&format!("{e:#}"));
                self.ctx
                    .reporter
                    .warn(&format!("mcp --auto-up could not create a sandbox: {why}"));
                self.state().auto_error = Some(why);
            }
        }
        let _ = self.auto_done.send(true);
    }

    /// Waits (at most `patience`) for the tool calls under way to end.
    pub(crate) async fn wait_for_calls(&self, patience: Duration) {
        let _ = tokio::time::timeout(patience, self.calls.acquire_many(MAX_CALLS)).await;
    }

    /// The sandboxes the session removes when it ends, forgetting them.
    pub(crate) fn take_owned(&self) -> Vec<Uuid> {
        std::mem::take(&mut self.state().owned)
    }

    /// The sandboxes the tools may act on: those the session made and their sub-sandboxes (made
    /// by anyone, e.g. `h9sandbox up --parent`), as `state` records them now, and those this
    /// server process is making right now (`creator`: the `--auto-up` sandbox while Pending, so
    /// that `sandbox_list` shows it and an agent does not make a second one); `None` with
    /// `--all-sandboxes` (every sandbox of the state directory).
    fn scope(&self, state: &State) -> Option<HashSet<Uuid>> {
        if self.all_sandboxes {
            return None;
        }
        let me = crate::state::ProcessRef::current();
        let mut created = self.state().created.clone();
        created.extend(
            state
                .sandboxes
                .iter()
                .filter(|r| r.creator == me)
                .map(|r| r.id),
        );
        let mut scope: HashSet<Uuid> = created.iter().copied().collect();
        for id in created {
            scope.extend(state.descendants(id).into_iter().flatten());
        }
        Some(scope)
    }

    /// `query` (ID, prefix or name) resolved among the sandboxes the session may act on
    /// ([`Session::scope`]), as a full ID the core resolves to that very sandbox. Another's
    /// sandbox is reported as unknown, as if it did not exist. With `--all-sandboxes`, `query`
    /// as it is.
    fn scoped(&self, query: &str) -> Result<String> {
        if self.all_sandboxes {
            return Ok(query.to_string());
        }
        let state = self.ctx.store.load()?;
        let scope = self.scope(&state).unwrap_or_default();
        let mine = State {
            version: state.version,
            dir: state.dir.clone(),
            sandboxes: state
                .sandboxes
                .into_iter()
                .filter(|r| scope.contains(&r.id))
                .collect(),
        };
        match mine.resolve(query) {
            Ok(r) => Ok(r.id.to_string()),
            Err(Error::NotFound { .. }) => Err(Error::Refused(format!(
                "no sandbox matches '{query}' among this session's (the server acts only on the sandboxes its session made and their sub-sandboxes, unless started with --all-sandboxes; see sandbox_list)"
            ))
            .into()),
            Err(e) => Err(e.into()),
        }
    }

    /// The sandbox a call means: `id`, else the session's default (waiting for `--auto-up`);
    /// either must be one the session may act on ([`Session::scoped`]).
    async fn target(&self, id: Option<String>) -> Result<String> {
        let q = self.default_target(id).await?;
        self.scoped(&q)
    }

    /// `id`, else the session's default (waiting for `--auto-up`).
    async fn default_target(&self, id: Option<String>) -> Result<String> {
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
            (None, Some(e)) => Err(Error::Usage(format!(
                "this session has no sandbox: the one --auto-up was to make failed ({e}); call sandbox_up, or pass id"
            ))
            .into()),
            (None, None) => Err(Error::Usage(
                "this session has no sandbox (none made yet, or it was removed); call sandbox_up, or pass the id of an existing one (sandbox_list)".into(),
            )
            .into()),
        }
    }

    fn info(&self, rec: &Record, entry: Option<&list::Entry>) -> SandboxInfo {
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

    /// Runs the tool `name` with `args` while holding one permit of the calls under way (so the
    /// shutdown can wait for it, [`Session::wait_for_calls`]); `cancelled` resolving kills a
    /// command under way. Every failure becomes a tool error.
    pub(crate) async fn call_tool(
        self: &Arc<Self>,
        name: &str,
        args: Option<JsonObject>,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> CallToolResult {
        let Ok(_permit) = self.calls.clone().acquire_owned().await else {
            return tool_error(&anyhow::anyhow!("the server is shutting down"));
        };
        self.call(name, args, cancelled).await
    }

    /// Runs the tool `name` with `args`; every failure becomes a tool error.
    async fn call(
        self: &Arc<Self>,
        name: &str,
        args: Option<JsonObject>,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> CallToolResult {
        let done = self.dispatch(name, args, cancelled).await;
        match done {
            Ok(d) => d.into_result(),
            Err(e) => {
                if self.ctx.verbose() {
                    self.ctx
                        .reporter
                        .note(&format!("mcp: {name} failed: {e:#}"));
                }
                tool_error(&e)
            }
        }
    }
}

/// The tools, in the order clients show them: name, arguments => structured result, the
/// session's method that runs it, the hints for the client (read-only, destructive, idempotent;
/// see [`tool`]), whether it is offered (`port_forward`: only with `mcp --port-forward`), and
/// the description a model reads. One list: [`tools`] lists them, [`Session::dispatch`] runs
/// them.
macro_rules! tool_table {
    ($cancelled:ident, $port_forward:ident; $(
        $name:literal: $params:ty => $result:ty, $method:ident $(($extra:ident))?,
        $hints:expr, $offered:expr, $desc:literal;
    )*) => {
        /// The tool list, in the order clients show it; `sandbox_port_forward` only when
        /// `port_forward` (the operator's `mcp --port-forward`).
        pub(crate) fn tools($port_forward: bool) -> Vec<Tool> {
            let mut all = Vec::new();
            $(
                if $offered {
                    all.push(tool::<$params, $result>($name, $desc, $hints));
                }
            )*
            all
        }

        impl Session {
            /// Runs the tool `name` with `args` (checked against its argument type first);
            /// `cancelled` resolving kills a command under way (`sandbox_exec`).
            async fn dispatch(
                self: &Arc<Self>,
                name: &str,
                args: Option<JsonObject>,
                $cancelled: impl std::future::Future<Output = ()>,
            ) -> Result<Done> {
                match name {
                    $(
                        $name => {
                            let p: $params = parse(name, args)?;
                            self.$method(p $(, $extra)?).await
                        }
                    )*
                    other => Err(Error::Usage(format!("unknown tool {other}")).into()),
                }
            }
        }
    };
}

tool_table! { cancelled, port_forward;
    "sandbox_up": UpParams => SandboxInfo, up, (false, false, false), true,
        "Start a new sandbox: a hardened, throw-away container with a host directory (the work dir) mounted at the same path. It becomes this session's default sandbox, which the other tools use when called without `id`. It is removed when the session ends, unless keep is true.";
    "sandbox_exec": ExecParams => ExecResult, exec(cancelled), (false, true, false), true,
        "Run a command in a sandbox (a shell command line, or an argv array run exactly) and return its exit code, stdout and stderr; a non-zero exit code is a normal result. The command starts in the work dir. A timeout kills its whole process tree (a tool error, with the output so far). Long output keeps its start and end, with a marker saying how many bytes were cut between them.";
    "sandbox_spawn": SpawnParams => SpawnResult, spawn, (false, false, false), true,
        "Start a command in a sandbox's background (a server, a watcher, a long build) and return at once with its handle; its output goes to log files (sandbox_logs), its whole process tree can be killed (sandbox_kill), and sandbox_ps lists such commands.";
    "sandbox_ps": PsParams => PsResult, ps, (true, false, true), true,
        "List the commands running in a sandbox's background (started with sandbox_spawn): handle, pid, command, start time, exit code once exited.";
    "sandbox_logs": LogsParams => LogsResult, logs, (true, false, true), true,
        "Return what a background command (sandbox_spawn) has written to stdout and stderr so far; long output keeps its start and end.";
    "sandbox_kill": KillParams => KillResult, kill, (false, true, true), true,
        "Kill a background command's whole process tree (sandbox_spawn).";
    "sandbox_read": ReadParams => ReadResult, read, (true, false, true), true,
        "Read lines of a text file in a sandbox's work dir: offset and limit in lines, optional cat -n style line numbers; next_offset says where to go on. Paths that leave the work dir are refused. Binary files are refused too: read those with sandbox_exec (e.g. base64).";
    "sandbox_write": WriteParams => WriteResult, write, (false, true, true), true,
        "Create or replace a text file in a sandbox's work dir, atomically (missing parent directories are created). Paths that leave the work dir are refused and touch nothing.";
    "sandbox_edit": EditParams => EditResult, edit, (false, true, false), true,
        "Replace exact text in a file of a sandbox's work dir: `old` must occur exactly once (or at least once with replace_all). The file is replaced atomically and keeps its mode and owner.";
    "sandbox_list": ListParams => ListResult, list, (true, false, true), true,
        "List the sandboxes (this session's and any others of the same state directory) with their real container state, and which one is this session's default.";
    "sandbox_down": DownParams => DownResult, down, (false, true, true), true,
        "Stop and remove a sandbox and its sub-sandboxes. Files in its work dir stay on the host; everything else in the sandbox is lost.";
    "sandbox_port_forward": PortForwardParams => PortForwardResult, port_forward, (false, false, false), port_forward,
        "Reach a server listening on a port inside a sandbox (a dev server started with sandbox_spawn, say) from this machine: returns the address on 127.0.0.1 that carries each connection to that port, on any network mode. It lasts until the sandbox or this session ends.";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_have_object_schemas_without_line_breaks() {
        let tools = tools(true);
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 12);
        assert_eq!(tools.len() - 1, super::tools(false).len());
        for t in &tools {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            assert_eq!(t.input_schema["additionalProperties"], false, "{}", t.name);
            assert!(t.output_schema.is_some(), "{}", t.name);
            let text = serde_json::to_string(&t).unwrap();
            assert!(!text.contains("\\n"), "{}: {text}", t.name);
        }
    }
}
