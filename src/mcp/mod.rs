//! The MCP front end: `h9sandbox mcp` serves the sandbox tools (`sandbox_up`, `sandbox_exec`,
//! `sandbox_read`, `sandbox_write`, `sandbox_edit`, `sandbox_list`, `sandbox_down`) to an AI
//! agent over the Model Context Protocol on stdin and stdout, built on the official Rust SDK
//! (`rmcp`). [`tools`](mod@tools) holds the tools' schemas and results, [`session`] what they do (through
//! the [`crate::sandbox`] core, as the CLI does); this module runs the server.
//!
//! Results carry structured content (described by each tool's output schema) and a short text
//! for clients that show only text. Failures are tool errors (`isError`) with a one-line reason,
//! never a crashed server or a protocol error; a command's non-zero exit status is a normal
//! result.
//!
//! stdout belongs to the protocol alone. Before anything else runs, the protocol's two
//! descriptors are moved off 0 and 1 ([`take_stdio`]): descriptor 1 then points at stderr and
//! descriptor 0 at `/dev/null`, so that nothing else (a warning printed by mistake, a child
//! process inheriting them) can write into the protocol stream or read from it. Warnings and
//! `-v` output go to stderr ([`crate::report::Stderr`]).
//!
//! Lifecycle: with `--auto-up` the session's sandbox is created alongside the protocol's start
//! (the client's `initialize` does not wait for it; tools called without `id` do). The server
//! ends when the client closes stdin, or on SIGTERM, SIGINT or SIGHUP: it then waits briefly for
//! tool calls under way (their commands' process trees are killed, as by `exec`'s signals),
//! removes the sandboxes the session made (`--auto-up`, `sandbox_up` without `keep`) and exits 0.
//! Those sandboxes carry the server's PID as their owner (`up --owner-pid`), so `reap` removes
//! them when the server was killed (SIGKILL) before it could.

pub(crate) mod framing;
pub(crate) mod session;
pub(crate) mod tools;

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::config::Layers;
use crate::report::{Reporter, Stderr};
use crate::sandbox::workdir::{resolve_workdir, WorkdirRule};
use crate::sandbox::{down, interrupted, Ctx};
use session::tools;
pub(crate) use session::Session;

/// How the server is started (`h9sandbox mcp`'s arguments and configuration).
#[derive(Debug, Clone)]
pub(crate) struct McpOptions {
    /// The configuration layers (file, environment, `--image`) below each `sandbox_up`'s
    /// arguments.
    pub layers: Layers,
    /// Work dir of sandboxes made without one, and where relative work dirs start (default: the
    /// current directory).
    pub workdir: Option<PathBuf>,
    /// Make the session's sandbox at start (`--auto-up`).
    pub auto_up: bool,
    /// Let the tools act on every sandbox of the state directory (`--all-sandboxes`), not only
    /// on those the session made and their sub-sandboxes.
    pub all_sandboxes: bool,
    /// Offer `sandbox_port_forward` (`--port-forward`): listeners on this machine's loopback
    /// are the operator's to grant, not the client's to take.
    pub port_forward: bool,
    /// Whether `-v` was given: engine command lines and the server's notes go to stderr.
    pub verbose: bool,
}

/// What the server tells a client about itself in `initialize`.
const INSTRUCTIONS: &str = "\
Hardened, throw-away Docker sandboxes. Run shell commands with sandbox_exec instead of on the host; \
read and change files of the sandbox's work dir with sandbox_read, sandbox_write and sandbox_edit. \
The work dir is a host directory mounted at the same path in the sandbox: files there persist, the \
rest of the sandbox's file system is thrown away with it. Every tool takes an optional `id`; without \
it, it acts on this session's sandbox (made at start with --auto-up, or by the last sandbox_up). \
The tools reach the sandboxes made in this session and their sub-sandboxes (sandbox_list shows them). \
Sandboxes made in this session are removed when it ends, unless sandbox_up was given keep=true.";

/// How long the shutdown waits for tool calls under way to end (a killed command's clean-up
/// takes a few seconds at most) before it removes the session's sandboxes anyway.
const CALLS_PATIENCE: Duration = Duration::from_secs(10);

/// The protocol's input stream.
type Input = Pin<Box<dyn AsyncRead + Send>>;
/// The protocol's output stream.
type Output = Pin<Box<dyn AsyncWrite + Send>>;

/// Serves the tools until the client disconnects or a signal arrives, then removes the session's
/// sandboxes; returns 0. Errors: the configuration or work dir is unusable, the protocol's
/// handshake failed, the session's sandboxes could not be removed.
pub(crate) async fn serve(options: McpOptions) -> Result<i32> {
    let reporter: Arc<dyn Reporter> = Arc::new(Stderr {
        verbose: options.verbose,
    });
    let ctx = Ctx::from_layers(&options.layers, &[], reporter)?;
    let workdir = resolve_workdir(options.workdir.as_deref())?;
    // Every sandbox of the session lies in it: refuse at once one no sandbox may use.
    WorkdirRule::for_host(&ctx).check(&workdir)?;
    let (input, output) = take_stdio()?;
    let auto_up = options.auto_up;
    let session = Arc::new(Session::new(
        ctx,
        options.layers,
        workdir,
        auto_up,
        options.all_sandboxes,
        options.port_forward,
    ));

    let auto = async {
        if auto_up {
            session.auto_up().await;
        }
    };
    // Boxed, so that dropping it below really drops the service (and cancels its calls).
    // Messages over the limit are answered with an error by the guard, not dropped by rmcp.
    let guarded = framing::guard(input, output, Arc::clone(&session.ctx().reporter));
    let writer = guarded.writer;
    let transport = AsyncRwTransport::new_server(guarded.input, guarded.output)
        .with_max_line_length(framing::MAX_MESSAGE_BYTES + 2);
    let mut serve = Box::pin(async {
        let service = Server::new(Arc::clone(&session))
            .serve(transport)
            .await
            .context("the MCP handshake failed")?;
        service
            .waiting()
            .await
            .context("the MCP service stopped unexpectedly")
    });
    let stop = interrupted();
    tokio::pin!(auto, stop);
    let mut auto_done = !auto_up;
    let ended = loop {
        tokio::select! {
            _ = &mut auto, if !auto_done => auto_done = true,
            r = &mut serve => break r.map(|reason| format!("the client disconnected ({reason:?})")),
            sig = &mut stop => break Ok(sig.to_string()),
        }
    };
    // Dropping the service cancels the calls under way (their commands are killed), and ends
    // rmcp's output: what it wrote reaches stdout before the session's sandboxes go.
    drop(serve);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    let ctx = session.ctx();
    if ctx.verbose() {
        match &ended {
            Ok(why) => ctx.reporter.note(&format!("mcp: shutting down: {why}")),
            Err(e) => ctx.reporter.note(&format!("mcp: shutting down: {e:#}")),
        }
    }
    if !auto_done {
        // An `up` under way finishes (or, on a signal, gives up and cleans up by itself).
        auto.await;
    }
    session.wait_for_calls(CALLS_PATIENCE).await;
    session.end_forwards().await;
    let owned: Vec<String> = session
        .take_owned()
        .iter()
        .map(|id| id.to_string())
        .collect();
    if !owned.is_empty() {
        let report = down::take_down(session.ctx(), &owned, false).await?;
        if let Some(e) = report.error {
            return Err(e.context(
                "could not remove the session's sandboxes; `h9sandbox reap` removes them (their owner, this server, has exited)",
            ));
        }
    }
    // A failed handshake (garbage on stdin, or stdin closed before `initialize`) fails.
    ended.map(|_| 0)
}

/// The MCP server: a handle on the [`Session`] that rmcp's service drives.
#[derive(Clone)]
pub(crate) struct Server {
    session: Arc<Session>,
}

impl Server {
    /// The server of `session`.
    pub(crate) fn new(session: Arc<Session>) -> Server {
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
        Ok(ListToolsResult::with_all_items(tools(
            self.session.offers_port_forward(),
        )))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools(self.session.offers_port_forward())
            .into_iter()
            .find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let ct = context.ct.clone();
        let result = self
            .session
            .call_tool(&request.name, request.arguments, ct.cancelled_owned())
            .await;
        Ok(result.into())
    }
}

/// Moves the protocol's streams off descriptors 0 and 1: returns stdin and stdout as async
/// streams on descriptors of their own (close-on-exec), then points descriptor 1 at stderr and
/// descriptor 0 at `/dev/null`. Pipes (as MCP clients use) are read and written without
/// blocking, through the runtime's reactor, on their own open file descriptions (reopened via
/// `/proc/self/fd`, so `O_NONBLOCK` never reaches anyone else sharing them); anything else (a
/// file, a terminal, a socket) through blocking reads and writes on the runtime's thread pool.
pub(crate) fn take_stdio() -> Result<(Input, Output)> {
    let dup = |fd: std::os::fd::BorrowedFd<'_>| -> Result<OwnedFd> {
        rustix::io::fcntl_dupfd_cloexec(fd, 3).context("cannot duplicate a standard stream")
    };
    let input = dup(std::io::stdin().as_fd())?;
    let output = dup(std::io::stdout().as_fd())?;
    let null = File::open("/dev/null").context("cannot open /dev/null")?;
    rustix::stdio::dup2_stdin(&null).context("cannot redirect stdin")?;
    rustix::stdio::dup2_stdout(std::io::stderr().as_fd()).context("cannot redirect stdout")?;

    let input: Input = match fifo_reopened(&input, false) {
        Some(fd) => Box::pin(tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?),
        None => Box::pin(tokio::fs::File::from_std(File::from(input))),
    };
    let output: Output = match fifo_reopened(&output, true) {
        Some(fd) => Box::pin(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?),
        None => Box::pin(tokio::fs::File::from_std(File::from(output))),
    };
    Ok((input, output))
}

/// `fd` reopened non-blocking on an open file description of its own, when it is a pipe.
fn fifo_reopened(fd: &OwnedFd, write: bool) -> Option<OwnedFd> {
    use rustix::fs::{FileType, Mode, OFlags};
    let st = rustix::fs::fstat(fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Fifo {
        return None;
    }
    let access = if write {
        OFlags::WRONLY
    } else {
        OFlags::RDONLY
    };
    rustix::fs::open(
        format!("/proc/self/fd/{}", fd.as_raw_fd()),
        access | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}
