//! One MCP session: its configuration, its default sandbox, the sandboxes it removes when it
//! ends, and the tools' work. Every tool calls the core the CLI subcommands call
//! ([`create::create`], [`exec::execute`], [`host_files::write_from`], [`host_files::replace`],
//! [`list::entries`], [`down::take_down`], and [`crate::workdir_fs::WorkDir`] for reading), so the
//! state file, path safety, timeouts that kill the process tree and exit codes behave as on the
//! command line, and a sandbox made here shows up in `h9sandbox ls`. What is the session's own:
//! which sandbox a call without `id` means, which sandboxes it removes when it ends, results for
//! a model, and output caps that keep the start and the end.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use tokio::sync::{watch, Semaphore};
use uuid::Uuid;

use super::tools::*;
use crate::config::{Layers, MIN_MCP_OUTPUT};
use crate::error::Error;
use crate::sandbox::create::{self, UpRequest};
use crate::sandbox::exec::{self, ExecRequest};
use crate::sandbox::forward::{self, PortSpec, RegisteredForward, Registry};
use crate::sandbox::{background, container_files, down, host_files, list, workdir_of, Ctx};
use crate::state::{Record, State};
use crate::types::{Isolation, Network};

/// Tool calls that may run at once (far more than a client sends); the session waits for all of
/// them to end by taking every permit.
const MAX_CALLS: u32 = 1 << 16;

/// What one MCP session has: its configuration, its default sandbox and the sandboxes it
/// removes when it ends.
pub struct Session {
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

/// How many ports one MCP session may forward at once.
const MAX_SESSION_FORWARDS: usize = 32;

/// The session's port forwards: each serving in a task of its own, all registered in the state
/// directory as this process's (kind `mcp`: `ls` shows them; `down` leaves them to end with
/// their sandbox).
#[derive(Default)]
struct Forwards {
    /// The registered forwards, each with the key its task removes it by.
    live: Vec<(u64, RegisteredForward)>,
    /// The registration, while there is a forward.
    registry: Option<Registry>,
    /// The forwards' tasks.
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// What ends each forward at once (`sandbox_down` of its sandbox), by key, with its sandbox.
    stops: Vec<(u64, Uuid, tokio::sync::oneshot::Sender<()>)>,
    /// The key of the next forward.
    next: u64,
}

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
    pub fn new(
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

    /// Whether the session offers `sandbox_port_forward` (`mcp --port-forward`).
    pub fn offers_port_forward(&self) -> bool {
        self.port_forward
    }

    fn forwards(&self) -> std::sync::MutexGuard<'_, Forwards> {
        self.forwards.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends every forward of the session and waits (a few seconds at most) for their tasks;
    /// their registration goes with the last.
    pub async fn end_forwards(&self) {
        let _ = self.forwards_end.send(true);
        let tasks = std::mem::take(&mut self.forwards().tasks);
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
        let mut f = self.forwards();
        f.live.clear();
        f.registry = None;
    }

    /// Registers `fwd` in the state directory with the session's other forwards; returns its
    /// key. Errors: the state directory cannot be written.
    fn register_forward(&self, fwd: RegisteredForward) -> Result<u64> {
        let mut f = self.forwards();
        let key = f.next;
        f.next += 1;
        f.live.push((key, fwd));
        let all: Vec<RegisteredForward> = f.live.iter().map(|(_, r)| r.clone()).collect();
        let written = match &mut f.registry {
            Some(r) => r.set(all),
            None => Registry::new(&self.ctx, "mcp", all).map(|r| f.registry = Some(r)),
        };
        if let Err(e) = written {
            f.live.retain(|(k, _)| *k != key);
            return Err(e);
        }
        Ok(key)
    }

    /// Ends at once the forwards of `sandbox` (their tasks unregister them).
    fn end_forwards_of(&self, sandbox: Uuid) {
        let mut f = self.forwards();
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut f.stops)
            .into_iter()
            .partition(|(_, s, _)| *s == sandbox);
        f.stops = rest;
        for (_, _, stop) in mine {
            let _ = stop.send(());
        }
    }

    /// Forgets the forward `key` (its task ended), and the registration with the last one.
    fn unregister_forward(&self, key: u64) {
        let mut f = self.forwards();
        f.live.retain(|(k, _)| *k != key);
        f.stops.retain(|(k, _, _)| *k != key);
        let all: Vec<RegisteredForward> = f.live.iter().map(|(_, r)| r.clone()).collect();
        if all.is_empty() {
            f.registry = None;
        } else if let Some(r) = &mut f.registry {
            let _ = r.set(all);
        }
    }

    /// `sandbox_port_forward`: [`forward::bind`] one listener, served in a task of its own
    /// until its sandbox is gone or the session ends ([`Session::end_forwards`]).
    async fn port_forward(self: &Arc<Self>, p: PortForwardParams) -> Result<Done> {
        if !self.port_forward {
            return Err(Error::Invalid(
                "this MCP server does not forward ports; its operator offers it with `h9sandbox mcp --port-forward`".into(),
            )
            .into());
        }
        if p.local_port.is_some_and(|l| l != 0 && l < 1024) {
            return Err(Error::Invalid(
                "local_port below 1024 is refused (the server's privileged ports are not a client's to take); give one from 1024 up, or none for a free one".into(),
            )
            .into());
        }
        if self.forwards().live.len() >= MAX_SESSION_FORWARDS {
            return Err(Error::Invalid(format!(
                "this session forwards {MAX_SESSION_FORWARDS} ports already, the most one session may; end a sandbox (sandbox_down) to end its forwards"
            ))
            .into());
        }
        if *self.forwards_end.borrow() {
            return Err(anyhow::anyhow!("the server is shutting down"));
        }
        let id = self.target(p.id).await?;
        let spec = PortSpec {
            local: p.local_port.unwrap_or(0),
            remote: p.port.get(),
        };
        let forwarder = forward::bind(&self.ctx, &id, &[spec], forward::Asker::Mcp).await?;
        let sandbox = forwarder.record.id;
        let Some(bound) = forwarder.bound().into_iter().next() else {
            return Err(anyhow::anyhow!("no listener was bound"));
        };
        let key = self.register_forward(RegisteredForward {
            sandbox,
            bound: bound.clone(),
        })?;
        let session = Arc::clone(self);
        let mut end = self.forwards_end.subscribe();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        self.forwards().stops.push((key, sandbox, stop_tx));
        let task = tokio::spawn(async move {
            let stop = async move {
                tokio::select! {
                    _ = end.wait_for(|ended| *ended) => "the session ended".to_string(),
                    _ = stop_rx => "its sandbox was taken down".to_string(),
                }
            };
            let why = forwarder.serve(session.ctx(), stop).await;
            if session.ctx.verbose() {
                session.ctx.reporter.note(&format!(
                    "mcp: port forwarding to sandbox {}: {why}",
                    &sandbox.simple().to_string()[..12]
                ));
            }
            session.unregister_forward(key);
        });
        self.forwards().tasks.push(task);
        let text = format!(
            "{} carries connections to port {} of sandbox {}",
            bound.address,
            bound.port,
            &sandbox.simple().to_string()[..12]
        );
        Done::new(
            &PortForwardResult {
                id: sandbox.to_string(),
                address: bound.address,
                port: bound.port,
            },
            text,
        )
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
    pub async fn wait_for_calls(&self, patience: Duration) {
        let _ = tokio::time::timeout(patience, self.calls.acquire_many(MAX_CALLS)).await;
    }

    /// The sandboxes the session removes when it ends, forgetting them.
    pub fn take_owned(&self) -> Vec<Uuid> {
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
            Err(Error::NotFound { .. }) => Err(Error::Invalid(format!(
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

    /// `sandbox_up`: [`create::create`] with a context built from the session's configuration
    /// and the call's limits, exactly as `up`'s flags would set them.
    async fn up(&self, p: UpParams) -> Result<Done> {
        within_grant(&self.ctx.cfg, &p)?;
        let workdir = match (&p.workdir, &p.parent) {
            (Some(w), _) => Some(self.confined(w)?),
            (None, None) => Some(self.workdir.clone()),
            (None, Some(_)) => None,
        };
        let req = UpRequest {
            workdir,
            image: p.image,
            name: p.name,
            cpus: p.cpus.map(|c| c.to_string()),
            memory: p.memory,
            pids_limit: p.pids_limit.map(|n| n.to_string()),
            network: p.network.map(Network::from),
            runtime: None,
            allow: Vec::new(),
            caps: None,
            labels: Vec::new(),
            parent: p.parent,
            bootstrap: None,
            bootstrap_required: false,
            bootstrap_timeout: None,
            user: None,
            owner_pid: (!p.keep).then(|| std::process::id().to_string()),
            ttl: p.ttl,
            within: Some(self.workdir.clone()),
            reuse: false,
            one_command: false,
            devcontainer: None,
            build: None,
            // Publishing opens a port of this host: the operator's decision, not a client's
            // (sandbox_port_forward reaches a port on 127.0.0.1 instead).
            publish: Vec::new(),
            workdir_mode: None,
            engine: None,
            constraints: Vec::new(),
            placement_timeout: None,
        };
        // A sub-sandbox shares its parent's work dir: only of a sandbox the session may reach.
        let req = UpRequest {
            parent: req.parent.as_deref().map(|q| self.scoped(q)).transpose()?,
            ..req
        };
        let ctx = Ctx::from_layers(
            &self.layers,
            &req.config_flags(),
            Arc::clone(&self.ctx.reporter),
        )?;
        let rec = create::create(&ctx, &req).await?;
        {
            let mut st = self.state();
            st.default = Some(rec.id);
            st.created.push(rec.id);
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

    /// The directory a `sandbox_up` `workdir` names, which must lie inside the server's
    /// `--workdir`: relative to it, or absolute inside it, resolved beneath it by the kernel
    /// (`openat2(RESOLVE_BENEATH)`, [`crate::workdir_fs::WorkDir::dir_path`]), so `..`, an absolute
    /// path elsewhere and a symlink leading out are refused whatever the sandboxes there plant.
    /// [`create::create`] checks the result again (`within`) and opens it through no symlink.
    fn confined(&self, w: &str) -> Result<PathBuf> {
        let root = crate::workdir_fs::WorkDir::open(&self.workdir)?;
        root.dir_path(std::path::Path::new(w)).map_err(|e| match e.downcast_ref::<Error>() {
            Some(Error::PathEscape(_)) => Error::Invalid(format!(
                "workdir {w:?} leads outside this server's --workdir {}; give a directory inside it (relative to it, or absolute inside it)",
                self.workdir.display()
            ))
            .into(),
            _ => e.context(format!("workdir {w:?} cannot be used")),
        })
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
        // The sandbox's output fills up to this much host memory per stream: the client may ask
        // for at most what the server's operator allows.
        let most = self
            .ctx
            .cfg
            .json_max_bytes
            .max(self.ctx.cfg.mcp_max_output_bytes);
        if max > most {
            return Err(Error::Invalid(format!(
                "max_output_bytes {max} is more than this server holds per stream ({most}, its json_max_bytes); give at most that"
            ))
            .into());
        }
        let p_combined = p.combined;
        let (command, argv) = command_words(p.command, p.argv)?;
        let id = self.target(p.id).await?;
        let timeout = self.exec_timeout(&id, timeout_of(p.timeout_secs)?)?;
        let req = ExecRequest {
            id,
            cwd: p.cwd.map(PathBuf::from),
            user: p.user,
            env: env_assignments(p.env)?,
            timeout: Some(timeout),
            interactive: false,
            max_output: usize::try_from(max).unwrap_or(usize::MAX),
            command,
            argv,
        };
        let stop = async {
            cancelled.await;
            crate::sandbox::signals::Interruption::Cancelled
        };
        let done = exec::execute(
            &self.ctx,
            &req,
            exec::Sink::CaptureEnds(req.max_output),
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
            oom_killed: out.oom_killed,
            ended: out.ended().to_string(),
            signal: out.signal_name(),
            output: p_combined.then(|| out.combined.text_ends().0),
        };
        let mut text = format!(
            "exit code {} in {} ms{}{}",
            result.exit_code,
            result.duration_ms,
            if result.oom_killed {
                format!(
                    " (killed by the kernel's OOM killer: the sandbox's memory limit is {})",
                    done.record.limits.memory
                )
            } else {
                String::new()
            },
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
                "the command timed out after {} and {}; exit code 124",
                done.timeout
                    .map_or("0s".into(), crate::types::show_duration),
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

    /// The timeout of a `sandbox_exec` on sandbox `id` asking for `asked` (`None`: the
    /// sandbox's default, [`Ctx::settings_for`]; zero: none). The server's `exec_timeout_secs`
    /// is a ceiling, as its other limits are: a client asking for more (or for none, `0`) is
    /// refused, and a sandbox's longer default is lowered to it. Zero when neither bounds the
    /// command (the server's is 0). Errors: [`Error::Invalid`] naming the ceiling.
    fn exec_timeout(
        &self,
        id: &str,
        asked: Option<std::time::Duration>,
    ) -> Result<std::time::Duration> {
        use std::time::Duration;
        let ceiling = Duration::from_secs(self.ctx.cfg.exec_timeout_secs);
        if let Some(t) = asked {
            if !ceiling.is_zero() && (t.is_zero() || t > ceiling) {
                let what = if t.is_zero() {
                    "0 (no limit)".to_string()
                } else {
                    crate::types::show_duration(t)
                };
                return Err(Error::Invalid(format!(
                    "timeout_secs {what} exceeds what this server grants ({}, its exec_timeout_secs); give at most {}, or leave timeout_secs out",
                    crate::types::show_duration(ceiling),
                    ceiling.as_secs()
                ))
                .into());
            }
            return Ok(t);
        }
        let state = self.ctx.store.load()?;
        let rec = state.resolve(id)?;
        let default = Duration::from_secs(self.ctx.settings_for(rec).exec_timeout_secs);
        Ok(match (default.is_zero(), ceiling.is_zero()) {
            (_, true) => default,
            (true, false) => ceiling,
            (false, false) => default.min(ceiling),
        })
    }

    /// `sandbox_spawn`: [`background::detach`].
    async fn spawn(&self, p: SpawnParams) -> Result<Done> {
        let (command, argv) = command_words(p.command, p.argv)?;
        let req = ExecRequest {
            id: self.target(p.id).await?,
            cwd: p.cwd.map(PathBuf::from),
            user: p.user,
            env: env_assignments(p.env)?,
            timeout: timeout_of(p.timeout_secs)?,
            interactive: false,
            max_output: 0,
            command,
            argv,
        };
        let s = background::detach(&self.ctx, &req).await?;
        let text = format!(
            "started in the background as {} (pid {}); see sandbox_logs and sandbox_kill",
            s.handle, s.pid
        );
        Done::new(
            &SpawnResult {
                id: s.id,
                handle: s.handle,
                pid: s.pid,
            },
            text,
        )
    }

    /// `sandbox_ps`: [`background::list`].
    async fn ps(&self, p: PsParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let (rec, list) = background::list(&self.ctx, &id).await?;
        let processes: Vec<ProcessInfo> = list
            .into_iter()
            .map(|d| ProcessInfo {
                handle: d.handle,
                pid: d.pid,
                command: d.command,
                started: d.started,
                exit_code: d.exit_code,
                running: d.running,
            })
            .collect();
        let mut text = if processes.is_empty() {
            "no background commands".to_string()
        } else {
            String::new()
        };
        for p in &processes {
            text.push_str(&format!(
                "{} pid {} {} {}\n",
                p.handle,
                p.pid,
                match (p.running, p.exit_code) {
                    (true, None) => "running".to_string(),
                    (_, c) => format!("exited {}", c.unwrap_or(255)),
                },
                p.command
            ));
        }
        Done::new(
            &PsResult {
                id: rec.id.to_string(),
                processes,
            },
            text,
        )
    }

    /// `sandbox_logs`: [`background::logs`], capped like `sandbox_exec`'s output.
    async fn logs(&self, p: LogsParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        // Held in memory: at most what the server's operator allows per stream.
        let most = self
            .ctx
            .cfg
            .json_max_bytes
            .max(self.ctx.cfg.mcp_max_output_bytes);
        let max = p
            .max_output_bytes
            .unwrap_or(self.ctx.cfg.mcp_max_output_bytes)
            .clamp(MIN_MCP_OUTPUT, most);
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        let (mut out, mut err) = (exec::Capture::ends(max), exec::Capture::ends(max));
        let mut collect = |s: crate::report::Stream, b: &[u8]| match s {
            crate::report::Stream::Stdout => out.push(b),
            crate::report::Stream::Stderr => err.push(b),
        };
        background::logs(
            &self.ctx,
            &id,
            &p.handle,
            false,
            background::LogSink::Collect(&mut collect),
        )
        .await?;
        let (stdout, cut_out) = out.captured().text_ends();
        let (stderr, cut_err) = err.captured().text_ends();
        let mut text = String::new();
        for (name, s) in [("stdout", &stdout), ("stderr", &stderr)] {
            if !s.is_empty() {
                text.push_str(&format!("--- {name} ---\n{s}\n"));
            }
        }
        if text.is_empty() {
            text = format!("{} has written nothing yet", p.handle);
        }
        Done::new(
            &LogsResult {
                handle: p.handle,
                stdout,
                stderr,
                truncated: cut_out > 0 || cut_err > 0,
            },
            text,
        )
    }

    /// `sandbox_kill`: [`background::kill`].
    async fn kill(&self, p: KillParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        background::kill(&self.ctx, &id, &p.handle).await?;
        let text = format!("the process tree of {} is being killed", p.handle);
        Done::new(&KillResult { handle: p.handle }, text)
    }

    /// `sandbox_read`: [`crate::workdir_fs::WorkDir::read_lines`], on a blocking thread.
    async fn read(&self, p: ReadParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let (rec, wd) = workdir_of(&self.ctx, &id)?;
        let max = usize::try_from(self.ctx.cfg.mcp_max_output_bytes).unwrap_or(usize::MAX);
        let first = p.offset.unwrap_or(1).max(1);
        let limit = p.limit.unwrap_or(DEFAULT_READ_LINES);
        let path = PathBuf::from(&p.path);
        let lines = match container_files::place(&rec, &path, false) {
            container_files::Place::WorkDir => {
                let wd = wd.open()?;
                tokio::task::spawn_blocking(move || wd.read_lines(&path, first, limit, max))
                    .await??
            }
            container_files::Place::Container(path) => {
                self.read_in_container(&rec, &path, first, limit, max)
                    .await?
            }
        };
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

    /// The lines `sandbox_read` returns of the container's file `path` (outside the work dir):
    /// its first bytes (at most `json_max_bytes`, and the scan's own limit), read inside the
    /// container as the sandbox's user ([`container_files::read`]), scanned as on the host side.
    async fn read_in_container(
        &self,
        rec: &crate::state::Record,
        path: &std::path::Path,
        first: u64,
        limit: u64,
        max: usize,
    ) -> Result<crate::workdir_fs::Lines> {
        let cap = self
            .ctx
            .cfg
            .json_max_bytes
            .min(crate::workdir_fs::SCAN_MAX_BYTES);
        let mut bytes = Vec::new();
        let mut out = |b: &[u8]| -> Result<()> {
            bytes.extend_from_slice(b);
            Ok(())
        };
        let user = container_files::acting(rec, None)?;
        let size =
            container_files::read(&self.ctx, rec, user, path, Some(cap), None, &mut out).await?;
        let mut lines =
            crate::workdir_fs::scan_lines(std::io::Cursor::new(bytes), first, limit, max)?;
        lines.path = path.to_path_buf();
        lines.size = size;
        Ok(lines)
    }

    /// `sandbox_write`: [`host_files::write_from`] with `write`'s options for the sandbox (or, for a
    /// path outside the work dir, [`container_files::write`]).
    async fn write(&self, p: WriteParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let (rec, wd) = workdir_of(&self.ctx, &id)?;
        if p.no_clobber && p.append {
            return Err(Error::Invalid("no_clobber and append exclude each other".into()).into());
        }
        let mut opts = host_files::options(&rec, None, p.parents, p.append);
        opts.no_clobber = p.no_clobber;
        let data = std::io::Cursor::new(p.content.into_bytes());
        let path = PathBuf::from(&p.path);
        let (path, bytes_written, size) = match container_files::place(&rec, &path, false) {
            container_files::Place::WorkDir => {
                let w = host_files::write_from(&self.ctx, wd.open()?, path, data, opts).await?;
                (w.path, w.bytes_written, w.size)
            }
            container_files::Place::Container(path) => {
                let user = container_files::acting(&rec, None)?;
                let w = container_files::write(&self.ctx, &rec, user, &path, Box::new(data), &opts)
                    .await?;
                (w.path, w.bytes_written, w.size)
            }
        };
        let result = WriteResult {
            path: path.display().to_string(),
            bytes_written,
            size,
        };
        let text = format!(
            "wrote {} bytes to {} (now {} bytes)",
            result.bytes_written, result.path, result.size
        );
        Done::new(&result, text)
    }

    /// `sandbox_edit`: [`host_files::replace`].
    async fn edit(&self, p: EditParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let (rec, wd) = workdir_of(&self.ctx, &id)?;
        let path = PathBuf::from(&p.path);
        let result = match container_files::place(&rec, &path, false) {
            container_files::Place::WorkDir => {
                let e =
                    host_files::replace(&self.ctx, wd.open()?, path, p.old, p.new, p.replace_all)
                        .await?;
                EditResult {
                    path: e.path.display().to_string(),
                    replacements: e.replacements as u64,
                    size: e.size,
                }
            }
            container_files::Place::Container(path) => {
                let user = container_files::acting(&rec, None)?;
                let (count, size) = container_files::edit(
                    &self.ctx,
                    &rec,
                    user,
                    &path,
                    p.old.as_bytes(),
                    p.new.as_bytes(),
                    p.replace_all,
                )
                .await?;
                EditResult {
                    path: path.display().to_string(),
                    replacements: count as u64,
                    size,
                }
            }
        };
        let text = format!(
            "replaced {} occurrence{} in {}",
            result.replacements,
            if result.replacements == 1 { "" } else { "s" },
            result.path
        );
        Done::new(&result, text)
    }

    /// `sandbox_list`: [`list::entries`].
    async fn list(&self, _p: ListParams) -> Result<Done> {
        let entries = list::entries(&self.ctx).await?;
        let state = self.ctx.store.load()?;
        let scope = self.scope(&state);
        let sandboxes: Vec<SandboxInfo> = entries
            .iter()
            .filter(|e| scope.as_ref().is_none_or(|s| s.contains(&e.record.id)))
            .map(|e| self.info(&e.record, Some(e)))
            .collect();
        // One removed behind the session's back (`h9sandbox down`) is no default any more.
        let default = self
            .state()
            .default
            .filter(|d| state.sandboxes.iter().any(|r| r.id == *d))
            .map(|d| d.to_string());
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
        let mut report = down::take_down(&self.ctx, std::slice::from_ref(&id), false).await?;
        if let Some((_, e)) = report.unresolved.pop() {
            return Err(e.into());
        }
        {
            for r in &report.removed {
                self.end_forwards_of(r.id);
            }
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

    /// Runs the tool `name` with `args` while holding one permit of the calls under way (so the
    /// shutdown can wait for it, [`Session::wait_for_calls`]); `cancelled` resolving kills a
    /// command under way. Every failure becomes a tool error.
    pub async fn call_tool(
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
        pub fn tools($port_forward: bool) -> Vec<Tool> {
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
                    other => Err(Error::Invalid(format!("unknown tool {other}")).into()),
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

/// A tool's command as [`ExecRequest`] takes it: `command` (one shell command line) or `argv`
/// (an argument vector, run exactly), exactly one of them. Returns (words, argv?).
fn command_words(
    command: Option<String>,
    argv: Option<Vec<String>>,
) -> Result<(Vec<String>, bool)> {
    match (command, argv) {
        (Some(c), None) => Ok((vec![c], false)),
        (None, Some(a)) if !a.is_empty() => Ok((a, true)),
        (None, Some(_)) => Err(Error::Invalid("argv is empty; give the program and its arguments".into()).into()),
        (None, None) => Err(Error::Invalid("give the command: command (a shell command line) or argv (a program and its arguments)".into()).into()),
        (Some(_), Some(_)) => Err(Error::Invalid("give either command or argv, not both".into()).into()),
    }
}

/// A tool's `env` object as `K=V` assignments. Errors: a name holding `=`.
fn env_assignments(env: Option<std::collections::BTreeMap<String, String>>) -> Result<Vec<String>> {
    env.unwrap_or_default()
        .into_iter()
        .map(|(k, v)| {
            if k.contains('=') {
                Err(Error::Invalid(format!("invalid env name '{k}': it contains '='")).into())
            } else {
                Ok(format!("{k}={v}"))
            }
        })
        .collect()
}

/// A tool's `timeout_secs` (seconds, fractions allowed) as a duration. Errors: a negative or
/// non-finite number.
fn timeout_of(secs: Option<f64>) -> Result<Option<std::time::Duration>, Error> {
    secs.map(|s| {
        std::time::Duration::try_from_secs_f64(s).map_err(|_| {
            Error::Invalid(format!(
                "timeout_secs {s} is not a number of seconds >= 0 (0 = no limit)"
            ))
        })
    })
    .transpose()
}

/// Refuses a `sandbox_up` asking for more than the server's configuration gives (CPUs,
/// memory, processes, network): an MCP client gets what the operator granted, never more. It
/// may ask for less.
fn within_grant(cfg: &crate::config::Config, p: &UpParams) -> Result<(), Error> {
    let refuse = |what: &str, asked: String, has: String| {
        Error::Invalid(format!(
            "{what} {asked} exceeds what this server grants ({has}, from its configuration); ask for at most {has}, or leave {what} out"
        ))
    };
    if let Some(c) = p.cpus {
        if !(c > 0.0 && c <= cfg.cpus + 1e-9) {
            return Err(refuse("cpus", c.to_string(), cfg.cpus.to_string()));
        }
    }
    if let Some(m) = &p.memory {
        let asked =
            crate::config::parse_size(m).map_err(|e| Error::Invalid(format!("memory: {e}")))?;
        let has = crate::config::parse_size(&cfg.memory).unwrap_or(0);
        if asked > has {
            return Err(refuse("memory", m.clone(), cfg.memory.clone()));
        }
    }
    if let Some(n) = p.pids_limit {
        if n > cfg.pids_limit {
            return Err(refuse(
                "pids_limit",
                n.to_string(),
                cfg.pids_limit.to_string(),
            ));
        }
    }
    if let Some(n) = p.network {
        // `none`, or what the configuration says.
        let asked = Network::from(n);
        if asked != Network::None && asked != cfg.network {
            return Err(refuse(
                "network",
                asked.as_str().to_string(),
                cfg.network.as_str().to_string(),
            ));
        }
    }
    Ok(())
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
