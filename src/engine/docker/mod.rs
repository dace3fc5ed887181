//! The container implementation of [`Environment`]: shells out to the `docker` CLI, or to
//! `podman` (or any CLI-compatible client named by `engine_bin`), with argv vectors built by pure
//! functions, which the unit tests below compare exactly.
//!
//! Docker and Podman share one code path; where Podman differs, a small function takes the
//! [`Flavor`]: `ps` output ([`ps_args`], [`parse_ps`]: Podman's template has no `.Label`, and its
//! `.State` is a human string, so Podman is asked for JSON), the explicit rlimits a daemonless
//! engine needs ([`ulimit_args`]), and its error messages ([`errors::exec_failure`]).
//!
//! Split along its seams: this file holds the engine itself ([`Docker`] and its
//! [`Environment`] implementation); [`args`] the argv builders, [`parse`] the parsers of what
//! the client prints, [`errors`] what its English error messages mean.

pub(crate) mod api;
pub(crate) mod args;
pub(crate) mod errors;
pub(crate) mod parse;
#[cfg(test)]
mod tests;

pub(crate) use args::*;
pub(crate) use errors::*;
pub(crate) use parse::*;

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use tokio::process::Command;

use super::shell::shell_line;
use super::{bounded_output, is_gvisor, ENGINE_OUTPUT_MAX};
use super::{
    spawn_exec, AgentSetup, BuildSpec, Capabilities, ContainerSpec, ContainerStatus,
    ContainerSummary, ContainerVerb, EngineExec, Environment, ExecFailure, ExecJudge, ExecSpec,
    ExecStdio, ImageConfig, Secret, ShippedAgent, SidecarSpec, SidecarSummary, VolumeSummary,
};
use crate::error::Error;
use crate::poll::{poll_until, Backoff};
use crate::report::{Reporter, Silent};
use crate::types::{Daemon, EngineKind};

/// Runs the user's command with bash when the image has it, else with sh.
/// Invoked as `sh -c SHELL_WRAPPER h9sandbox COMMAND`, so `$1` is the command.
pub(crate) const SHELL_WRAPPER: &str =
    r#"if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; fi; exec sh -c "$1""#;

/// Kills, with SIGKILL, every process whose environment holds `H9SANDBOX_EXEC_ID=$1`, repeating
/// until a pass finds none (so children forked meanwhile are caught too). POSIX sh, reading
/// `/proc/PID/environ`; works with dash, bash and busybox.
pub(crate) const KILL_SCRIPT: &str = r#"m="H9SANDBOX_EXEC_ID=$1"; n=0
while [ $n -lt 50 ]; do
  found=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$$" ] && continue
    if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "$m"; then
      kill -9 "$p" 2>/dev/null && found=1
    fi
  done
  [ -z "$found" ] && exit 0
  n=$((n+1))
done
exit 1"#;

/// Which Docker-CLI-compatible engine a [`Docker`] drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// Docker Engine: a daemon applies the container's rlimits from its own.
    Docker,
    /// Podman: no daemon; the client's process starts the OCI runtime, so the container's
    /// rlimits cannot exceed the client's hard limits.
    Podman,
}

/// Engine options of `run` beyond the sandbox's own limits (configuration keys
/// `ulimit_nofile`, `ulimit_nproc`; the OCI runtime is the container's, [`ContainerSpec::runtime`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RunOptions {
    /// Open-files rlimit (`--ulimit nofile=N:N`); 0 = automatic (see [`ulimit_args`]).
    pub ulimit_nofile: u64,
    /// Processes rlimit (`--ulimit nproc=N:N`); 0 = automatic (see [`ulimit_args`]).
    pub ulimit_nproc: u64,
}

/// The host's hard rlimits and kernel ceilings that bound a Podman container's rlimits.
/// `None` is unlimited (or unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct HostLimits {
    /// Our hard `RLIMIT_NOFILE` (`getrlimit(2)`).
    pub nofile_hard: Option<u64>,
    /// `/proc/sys/fs/nr_open`: no process may have more open files.
    pub nr_open: Option<u64>,
    /// Our hard `RLIMIT_NPROC`.
    pub nproc_hard: Option<u64>,
    /// `/proc/sys/kernel/pid_max`: Podman lowers its own `RLIMIT_NPROC` to it at start-up.
    pub pid_max: Option<u64>,
}

impl HostLimits {
    /// Reads them from `getrlimit(2)` and `/proc/sys`.
    pub(crate) fn read() -> HostLimits {
        use rustix::process::{getrlimit, Resource};
        let sysctl = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
        };
        HostLimits {
            nofile_hard: getrlimit(Resource::Nofile).maximum,
            nr_open: sysctl("/proc/sys/fs/nr_open"),
            nproc_hard: getrlimit(Resource::Nproc).maximum,
            pid_max: sysctl("/proc/sys/kernel/pid_max"),
        }
    }
}

/// A Docker-CLI-compatible engine.
#[derive(Clone)]
pub(crate) struct Docker {
    bin: String,
    flavor: Flavor,
    options: RunOptions,
    reporter: Arc<dyn Reporter>,
    /// The daemon every client command talks to (Docker only; Podman's are this machine's).
    daemon: Daemon,
    /// The daemon's Engine API, when it is a unix socket on this machine that the default
    /// client would reach too ([`api::local_socket`]); found once, on first use.
    api: Arc<std::sync::OnceLock<Option<api::Api>>>,
    /// Held (shared) by every Engine API create under way ([`Docker::create_api`]).
    creating: Arc<tokio::sync::RwLock<()>>,
}

impl std::fmt::Debug for Docker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Docker")
            .field("bin", &self.bin)
            .field("flavor", &self.flavor)
            .field("options", &self.options)
            .field("verbose", &self.reporter.verbose())
            .finish()
    }
}

impl Docker {
    /// The engine `flavor` whose client is `bin`.
    pub(crate) fn with_flavor(flavor: Flavor, bin: impl Into<String>) -> Docker {
        Docker {
            bin: bin.into(),
            flavor,
            options: RunOptions::default(),
            reporter: Arc::new(Silent),
            daemon: Daemon::default(),
            api: Arc::default(),
            creating: Arc::default(),
        }
    }

    /// The same engine, its client talking to `daemon` ([`Daemon`]): every command it runs gets
    /// exactly these `DOCKER_*` settings, the caller's own environment notwithstanding.
    pub(crate) fn daemon(mut self, daemon: Daemon) -> Docker {
        self.daemon = daemon;
        self.api = Arc::default();
        self
    }

    /// The Engine API of the daemon, when this engine talks to it directly: Docker, its default
    /// client `docker` (an `engine_bin` of one's own is run for every call, as it asks), a
    /// daemon on a unix socket of this machine ([`api::local_socket`]).
    fn api(&self) -> Option<&api::Api> {
        self.api
            .get_or_init(|| {
                if self.flavor != Flavor::Docker || self.bin != "docker" {
                    return None;
                }
                let current = if self.daemon.host.is_none() && self.daemon.context.is_none() {
                    api::client_current_context()
                } else {
                    None
                };
                api::local_socket(&self.daemon, current.as_deref()).map(api::Api::new)
            })
            .as_ref()
    }

    /// Sends `method path` (with its query; no version prefix) with `body` to the Engine API,
    /// showing it as a `curl` line with `-v`. `None`: no API here, or nothing answers at its
    /// socket: the caller runs the client (which then fails as it always did).
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        timeout: Duration,
    ) -> Result<Option<api::Answer>> {
        let Some(api) = self.api() else {
            return Ok(None);
        };
        if api.version().await.is_none() {
            return Ok(None);
        }
        if self.reporter.verbose() {
            self.reporter
                .command(&format!("+ {}", api.curl_line(method, path, body).await));
        }
        api.call(method, path, body, timeout).await
    }

    /// [`Docker::call`] with [`api::REQUEST_TIMEOUT`] and no body.
    async fn get(&self, method: &str, path: &str) -> Result<Option<api::Answer>> {
        self.call(method, path, None, api::REQUEST_TIMEOUT).await
    }

    /// The error of a failed API request, worded as the client's (`` `docker VERB` failed:
    /// Error response from daemon: ... ``).
    fn api_failed(&self, verb: &str, answer: &api::Answer) -> anyhow::Error {
        anyhow!("`{} {verb}` failed: {}", self.bin, answer.as_client_error())
    }

    /// The daemon its client talks to.
    pub(crate) fn daemon_settings(&self) -> &Daemon {
        &self.daemon
    }

    /// Gives the client command `cmd` exactly this engine's daemon settings (Docker; Podman's
    /// client reads none of them).
    fn point_at_daemon(&self, cmd: &mut std::process::Command) {
        if self.flavor == Flavor::Docker {
            // Settings that fail the checks (a forged record; `up` refuses them) never reach
            // the client: it is pointed at a socket that does not exist instead, so it fails as
            // an unreachable daemon does, and the message says why.
            if self.daemon.validate().is_err() {
                for name in Daemon::VARS {
                    cmd.env_remove(name);
                }
                cmd.env(
                    "DOCKER_HOST",
                    "unix:///nonexistent/h9sandbox-refused-invalid-daemon-settings",
                );
                return;
            }
            for (name, value) in Daemon::VARS.iter().zip(self.daemon.values()) {
                match value {
                    Some(v) => cmd.env(name, v),
                    None => cmd.env_remove(name),
                };
            }
        }
    }

    /// The same engine, showing every command line it runs to `reporter` when that is verbose
    /// ([`Reporter::command`]).
    pub(crate) fn reporter(mut self, reporter: Arc<dyn Reporter>) -> Docker {
        self.reporter = reporter;
        self
    }

    /// Who it reports to.
    pub(crate) fn reporter_of(&self) -> &Arc<dyn Reporter> {
        &self.reporter
    }

    /// The same engine, creating containers with `options`.
    pub(crate) fn options(mut self, options: RunOptions) -> Docker {
        self.options = options;
        self
    }

    /// The options containers are created with ([`Docker::options`]).
    pub(crate) fn run_options(&self) -> &RunOptions {
        &self.options
    }

    /// The daemon's host when it is not this machine's ([`super::daemon_host`], from
    /// `DOCKER_HOST` and `DOCKER_CONTEXT`; Podman here is always this machine's).
    fn daemon_elsewhere(&self) -> Option<String> {
        if self.flavor == Flavor::Podman {
            return None;
        }
        super::daemon_host(self.daemon.host.as_deref(), self.daemon.context.as_deref())
    }

    /// Which engine this is.
    pub(crate) fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The client binary.
    pub(crate) fn bin(&self) -> &str {
        &self.bin
    }

    /// The client command running `args` against this engine's daemon (shown with `-v`).
    pub(crate) fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        if self.reporter.verbose() {
            self.reporter
                .command(&format!("+ {}", shell_line(&self.bin, &args)));
        }
        let mut cmd = Command::new(&self.bin);
        cmd.args(&args).stdin(Stdio::null()).kill_on_drop(true);
        self.point_at_daemon(cmd.as_std_mut());
        cmd
    }

    /// Runs the client to completion, capturing its output, each stream at most
    /// [`ENGINE_OUTPUT_MAX`] bytes (more is an error: the client is killed). Returns (exit
    /// status, stdout, stderr).
    pub(crate) async fn output(&self, args: Vec<String>) -> Result<(i32, String, String)> {
        let what = args.first().cloned().unwrap_or_default();
        let out = bounded_output(&mut self.command(args), ENGINE_OUTPUT_MAX)
            .await
            .map_err(|e| self.spawn_error(e))?;
        if let Some(stream) = out.overflow {
            return Err(anyhow!(
                "`{} {what}` printed more than {ENGINE_OUTPUT_MAX} bytes on {stream}, more than h9sandbox holds; it was stopped",
                self.bin
            ));
        }
        let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let code = out.status.and_then(|s| s.code()).unwrap_or(-1);
        if code != 0 {
            if let Some(reason) = unreachable_reason(&stderr) {
                return Err(self.unavailable(reason).into());
            }
        }
        Ok((code, stdout, stderr))
    }

    /// As [`Docker::output`], failing on a non-zero status with the client's first error line.
    pub(crate) async fn checked(&self, args: Vec<String>) -> Result<String> {
        let what = args.first().cloned().unwrap_or_default();
        let (code, stdout, stderr) = self.output(args).await?;
        if code != 0 {
            return Err(anyhow!(
                "`{} {what}` failed: {}",
                self.bin,
                first_error_line(&stderr)
            ));
        }
        Ok(stdout)
    }

    /// Runs `args` (a shipped agent's `run`) attached ([`attached_run`]): hands PID 1 its
    /// secret and waits until it serves. Returns the container's ID, or the client's exit
    /// status and stderr when it ended before the agent served.
    async fn run_attached(
        &self,
        args: Vec<String>,
        agent: &ShippedAgent,
    ) -> Result<Result<String, (i32, String)>> {
        let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
        let cidfile = dir.path().join("cid");
        let mut cmd = self.command(attached_run(args, &cidfile.to_string_lossy()));
        if let Some(failed) = self
            .hand_secret(&mut cmd, &agent.secret, agent.ready_timeout)
            .await?
        {
            return Ok(Err(failed));
        }
        let id = std::fs::read_to_string(&cidfile)
            .with_context(|| format!("`{} run` wrote no container ID", self.bin))?;
        Ok(Ok(id.trim().to_string()))
    }

    /// Runs `cmd` (an attached `run` or `start` of a shipped agent's container) with `secret`
    /// on its standard input, reading the container's standard output until PID 1 says it
    /// serves (`h9sandbox-agent ready`), then ends the client (the container runs on). `None`
    /// once the agent serves; the client's exit status and stderr when it ended first.
    /// Errors: the agent did not serve within `ready`, the client could not be run.
    async fn hand_secret(
        &self,
        cmd: &mut Command,
        secret: &Secret,
        ready: Duration,
    ) -> Result<Option<(i32, String)>> {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| self.spawn_error(e))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A client that failed at once (no such image) closed it: its stderr tells.
            let _ = stdin.write_all(&secret.0).await;
            let _ = stdin.shutdown().await;
        }
        let stdout = child.stdout.take().context("the client's stdout")?;
        let mut stderr = child.stderr.take().context("the client's stderr")?;
        let served = async {
            // What the container prints is the sandbox's: at most a few lines are read.
            let mut lines = tokio::io::BufReader::new(stdout.take(64 << 10)).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.starts_with("h9sandbox-agent ready") {
                    return true;
                }
            }
            false
        };
        match tokio::time::timeout(ready, served).await {
            Ok(true) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                Ok(None)
            }
            Ok(false) => {
                let mut text = Vec::new();
                let _ = (&mut stderr).take(64 << 10).read_to_end(&mut text).await;
                let status = child.wait().await?;
                let text = String::from_utf8_lossy(&text).trim().to_string();
                if let Some(reason) = unreachable_reason(&text) {
                    return Err(self.unavailable(reason).into());
                }
                Ok(Some((status.code().unwrap_or(-1), text)))
            }
            Err(_) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                Err(anyhow!(
                    "the sandbox's agent did not say it serves within {}s",
                    ready.as_secs()
                ))
            }
        }
    }

    /// Copies `binary` into the created container `container` at [`crate::contract::BIN`] (a
    /// tar stream made here, on `cp -`'s standard input; the directory mode 0755, the file
    /// 0755, both root's).
    async fn put_binary(&self, container: &str, binary: &Path) -> Result<()> {
        let args = vec!["cp".to_string(), "-".to_string(), format!("{container}:/")];
        if self.reporter.verbose() {
            let shown: Vec<OsString> = args.iter().map(Into::into).collect();
            self.reporter.command(&format!(
                "+ (tar of {}) | {}",
                binary.display(),
                shell_line(&self.bin, &shown)
            ));
        }
        let mut client = std::process::Command::new(&self.bin);
        self.point_at_daemon(&mut client);
        let binary = binary.to_path_buf();
        let out = tokio::task::spawn_blocking(move || -> Result<std::process::Output> {
            let mut child = client
                .args(&args)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()?;
            let stdin = child.stdin.take().context("the client's stdin")?;
            let written = (|| -> std::io::Result<()> {
                let mut tar = tar::Builder::new(stdin);
                let mut dir = tar::Header::new_gnu();
                dir.set_entry_type(tar::EntryType::Directory);
                dir.set_mode(0o755);
                dir.set_size(0);
                dir.set_uid(0);
                dir.set_gid(0);
                tar.append_data(&mut dir, ".h9sandbox/", std::io::empty())?;
                let file = std::fs::File::open(&binary)?;
                let mut head = tar::Header::new_gnu();
                head.set_entry_type(tar::EntryType::Regular);
                head.set_mode(0o755);
                head.set_size(file.metadata()?.len());
                head.set_uid(0);
                head.set_gid(0);
                tar.append_data(&mut head, ".h9sandbox/h9sandbox", file)?;
                tar.into_inner()?;
                Ok(())
            })();
            let out = child.wait_with_output()?;
            written.with_context(|| format!("cannot copy {} into the image", binary.display()))?;
            Ok(out)
        })
        .await??;
        if !out.status.success() {
            return Err(anyhow!(
                "`{} cp` failed: {}",
                self.bin,
                first_error_line(&String::from_utf8_lossy(&out.stderr))
            ));
        }
        Ok(())
    }

    /// Polls `inspect` (10 ms doubling to 200 ms) until the container no longer exists.
    async fn wait_gone(&self, container: &str, timeout: Duration) -> Result<()> {
        let gone = poll_until(
            timeout,
            Backoff::doubling(Duration::from_millis(10), Duration::from_millis(200)),
            || async { anyhow::Ok(self.inspect(container).await?.is_none().then_some(())) },
        )
        .await?;
        gone.ok_or_else(|| {
            anyhow!(
                "container {container} is still being removed after {}s",
                timeout.as_secs()
            )
        })
    }

    /// Checks that the daemon has the OCI runtime `name` registered (`docker info`'s
    /// `.Runtimes`) and that it enforces the sandbox's limits: a runtime registered with
    /// `--ignore-cgroups` (gVisor's flag to leave the host's cgroups alone) would run the
    /// container without its memory, CPU and process limits, which the engine still reports as
    /// set, so it is refused. Errors: [`Error::Invalid`] naming `scripts/setup-gvisor.sh`.
    async fn check_runtime(&self, name: &str) -> Result<()> {
        let out = match self.get("GET", "/info").await? {
            Some(a) if a.ok() => a.json("info")?["Runtimes"].to_string(),
            Some(a) => return Err(self.api_failed("info", &a)),
            None => {
                self.checked(vec![
                    "info".into(),
                    "--format".into(),
                    "{{json .Runtimes}}".into(),
                ])
                .await?
            }
        };
        let runtimes: std::collections::BTreeMap<String, serde_json::Value> =
            serde_json::from_str(&out)
                .with_context(|| format!("cannot parse `{} info`'s runtimes: {out}", self.bin))?;
        let Some(rt) = runtimes.get(name) else {
            return Err(unknown_runtime(&self.bin, name).into());
        };
        let ignores_cgroups = rt["runtimeArgs"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some("--ignore-cgroups")));
        if ignores_cgroups {
            return Err(Error::Invalid(format!(
                "the OCI runtime '{name}' is registered with --ignore-cgroups, so the sandbox's memory, CPU and process limits would not be enforced; register it without that flag (scripts/setup-gvisor.sh does when the host allows)"
            ))
            .into());
        }
        Ok(())
    }

    fn spawn_error(&self, e: std::io::Error) -> anyhow::Error {
        let product = match self.flavor {
            Flavor::Docker => "Docker",
            Flavor::Podman => "Podman",
        };
        let reason = if e.kind() == std::io::ErrorKind::NotFound && self.bin.contains('/') {
            format!("{} does not exist; fix engine_bin", self.bin)
        } else if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "not found on PATH; install {product}, or set engine_bin to the engine's client"
            )
        } else {
            format!("cannot run it: {e}; check engine_bin")
        };
        self.unavailable(reason).into()
    }

    fn unavailable(&self, reason: String) -> Error {
        Error::EngineUnavailable {
            bin: self.bin.clone(),
            reason,
        }
    }
}

impl Docker {
    /// One attempt of [`Environment::image_file`]: a probe container of `image` created, `path`
    /// copied out of it into a temporary directory, the probe removed.
    async fn copy_out(&self, image: &str, path: &str, labels: &[(&str, &str)]) -> Result<Copied> {
        let (code, stdout, stderr) = self.output(probe_create_args(image, labels)).await?;
        if code != 0 {
            if is_no_such_image(&stderr) {
                return Err(Error::ImageUnavailable {
                    image: image.into(),
                    reason: "not present locally".into(),
                }
                .into());
            }
            return Err(anyhow!(
                "`{} create` of {image} (to read {path}) failed: {}",
                self.bin,
                first_error_line(&stderr)
            ));
        }
        let probe = stdout.lines().last().unwrap_or_default().to_string();
        let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
        let dest = dir.path().join("file");
        // Docker follows a symlink in the image with -L; Podman's cp has no such flag (a symlink
        // it copies as one is then refused by read_regular, never followed on the host).
        let mut args: Vec<String> = vec!["cp".into()];
        if self.flavor == Flavor::Docker {
            args.push("-L".into());
        }
        args.extend([
            format!("{probe}:{path}"),
            dest.to_string_lossy().into_owned(),
        ]);
        let copied = self.output(args).await;
        let _ = self.remove(&probe).await;
        let (code, _, stderr) = copied?;
        if code == 0 {
            return Ok(Copied::File(dest, dir));
        }
        if stderr.contains("Could not find the file") || stderr.contains("no such file") {
            return Ok(Copied::Missing);
        }
        if is_no_such_container(&stderr) {
            return Ok(Copied::Gone);
        }
        Err(anyhow!(
            "`{} cp` of {path} from {image} failed: {}",
            self.bin,
            first_error_line(&stderr)
        ))
    }
}

/// What one attempt of [`Docker::copy_out`] found.
enum Copied {
    /// The file, in its temporary directory (kept alive with it).
    File(std::path::PathBuf, tempfile::TempDir),
    /// The image has no such file.
    Missing,
    /// The probe container vanished before the copy.
    Gone,
}

impl Environment for Docker {
    fn kind(&self) -> EngineKind {
        match self.flavor {
            Flavor::Docker => EngineKind::Docker,
            Flavor::Podman => EngineKind::Podman,
        }
    }

    /// A daemon on this machine mounts its directories; Docker runs sidecars (the tested
    /// engine for them), Podman does not here.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            host_mounts: self.daemon_elsewhere().is_none(),
            sidecars: self.flavor == Flavor::Docker,
            isolated_networks: true,
            node_ports: false,
            lifecycle: true,
            engine_exec: true,
        }
    }

    fn remote_host(&self) -> Option<String> {
        self.daemon_elsewhere()
    }

    async fn run_sidecar(&self, spec: &SidecarSpec) -> Result<String> {
        if !self.capabilities().sidecars {
            return Err(Error::Invalid(format!(
                "{} runs no sidecar containers here ({})",
                self.kind(),
                spec.name
            ))
            .into());
        }
        self.checked(sidecar_run_args(spec, true)).await
    }

    async fn run_helper(&self, spec: &SidecarSpec) -> Result<String> {
        if !self.capabilities().sidecars {
            return Err(Error::Invalid(format!(
                "{} runs no helper containers here ({})",
                self.kind(),
                spec.name
            ))
            .into());
        }
        self.checked(sidecar_run_args(spec, false)).await
    }

    async fn list_sidecars(&self, of_label: &str, state_dir: &str) -> Result<Vec<SidecarSummary>> {
        if !self.capabilities().sidecars {
            return Ok(Vec::new());
        }
        let out = self.checked(sidecar_ps_args(of_label, state_dir)).await?;
        // The engine's filtering is checked, not trusted (as `list` does): only this state
        // directory's sidecars are returned.
        Ok(parse_sidecars(&out)
            .into_iter()
            .filter(|s| s.state_dir == state_dir && !s.of.is_empty())
            .collect())
    }

    async fn logs_tail(&self, container: &str, lines: usize) -> Result<String> {
        self.checked(vec![
            "logs".into(),
            "--tail".into(),
            lines.to_string(),
            container.into(),
        ])
        .await
    }

    async fn published_ports(&self, container: &str) -> Result<Vec<crate::types::PublishedPort>> {
        let out = self.checked(vec!["port".into(), container.into()]).await?;
        Ok(parse::parse_port(&out))
    }

    async fn create(&self, spec: &ContainerSpec) -> Result<String> {
        let runtime = spec.runtime.as_deref();
        // gVisor's kernel enforces the process limit as the rlimit (see gvisor_host_pids).
        let nproc = match (is_gvisor(runtime), self.options.ulimit_nproc) {
            (true, 0) => u64::from(spec.limits.pids_limit),
            (true, n) => n.min(u64::from(spec.limits.pids_limit)),
            (false, n) => n,
        };
        let extra = ulimit_args(
            self.flavor,
            self.options.ulimit_nofile,
            nproc,
            &HostLimits::read(),
        )
        .map_err(Error::Invalid)?;
        if let (Some(r), Flavor::Docker) = (runtime, self.flavor) {
            self.check_runtime(r).await?;
        }
        if self.flavor == Flavor::Podman {
            // Podman's --mount has no volume-label: the labelled volume is made first.
            self.checked(volume_create_args(spec)).await?;
        }
        let args = run_args(self.flavor, spec, &extra);
        if let Some(created) = self.create_api(spec, &extra, &args).await? {
            return created;
        }
        let (code, stdout, stderr) = match &spec.agent {
            AgentSetup::Mounted(_) => self.output(args).await?,
            AgentSetup::Shipped(s) => match self.run_attached(args, s).await? {
                Ok(id) => return Ok(id),
                Err((code, stderr)) => (code, String::new(), stderr),
            },
        };
        if code == 0 {
            return stdout
                .lines()
                .last()
                .map(str::to_string)
                .ok_or_else(|| anyhow!("`{} run` printed no container ID", self.bin));
        }
        if is_no_such_image(&stderr) {
            return Err(Error::ImageUnavailable {
                image: spec.image.clone(),
                reason: "not present locally".into(),
            }
            .into());
        }
        if stderr.contains("is already in use") {
            return Err(Error::NameInUse(spec.name.clone()).into());
        }
        if let Some(r) = runtime.filter(|_| is_unknown_runtime(&stderr)) {
            return Err(unknown_runtime(&self.bin, r).into());
        }
        Err(anyhow!(
            "`{} run` failed: {}{}",
            self.bin,
            first_error_line(&stderr),
            run_failure_hint(&stderr)
        ))
    }

    async fn pull(&self, image: &str, timeout: Duration) -> Result<()> {
        let run = self.output(vec![
            "pull".into(),
            "--quiet".into(),
            "--".into(),
            image.into(),
        ]);
        match tokio::time::timeout(timeout, run).await {
            Err(_) => Err(Error::ImageUnavailable {
                image: image.into(),
                reason: format!(
                    "the pull did not finish within {}s (pull_timeout_secs)",
                    timeout.as_secs()
                ),
            }
            .into()),
            Ok(Err(e)) => Err(e),
            Ok(Ok((0, _, _))) => Ok(()),
            Ok(Ok((_, _, stderr))) => Err(Error::ImageUnavailable {
                image: image.into(),
                reason: first_error_line(&stderr),
            }
            .into()),
        }
    }

    async fn inspect(&self, container: &str) -> Result<Option<ContainerStatus>> {
        let path = format!("/containers/{}/json", api::encode(container));
        if let Some(a) = self.get("GET", &path).await? {
            return match a.status {
                200 => api::parse_inspect_body(&a.body).map(Some),
                404 => Ok(None),
                _ => Err(self.api_failed("inspect", &a)),
            };
        }
        let (code, stdout, stderr) = self.output(inspect_args(container)).await?;
        if code != 0 {
            if is_no_such_container(&stderr) {
                return Ok(None);
            }
            return Err(anyhow!(
                "`{} inspect` failed: {}",
                self.bin,
                first_error_line(&stderr)
            ));
        }
        parse_inspect(&stdout).map(Some)
    }

    async fn stop(&self, container: &str, grace: Duration) -> Result<()> {
        let path = format!(
            "/containers/{}/stop?t={}",
            api::encode(container),
            grace.as_secs()
        );
        let timeout = grace + api::REQUEST_TIMEOUT;
        if let Some(a) = self.call("POST", &path, None, timeout).await? {
            // 304: not running; 404: no such container (nothing to stop either way).
            if a.ok() || a.not_found() {
                return Ok(());
            }
            return Err(self.api_failed("stop", &a));
        }
        let args = vec![
            "stop".into(),
            "-t".into(),
            grace.as_secs().to_string(),
            container.into(),
        ];
        let (code, _, stderr) = self.output(args).await?;
        if code != 0 && !is_no_such_container(&stderr) {
            return Err(anyhow!(
                "`{} stop` failed: {}",
                self.bin,
                first_error_line(&stderr)
            ));
        }
        Ok(())
    }

    async fn remove(&self, container: &str) -> Result<()> {
        let path = format!("/containers/{}?force=1&v=1", api::encode(container));
        if let Some(a) = self.get("DELETE", &path).await? {
            if a.ok() || a.not_found() {
                return Ok(());
            }
            if a.conflict() && is_removal_in_progress(&a.message()) {
                // Another process (a concurrent `down` or `reap`) is removing it: wait for that.
                return self.wait_gone(container, Duration::from_secs(30)).await;
            }
            return Err(self.api_failed("rm", &a));
        }
        let args = vec!["rm".into(), "-f".into(), "-v".into(), container.into()];
        let (code, _, stderr) = self.output(args).await?;
        if code != 0 && is_removal_in_progress(&stderr) {
            // Another process (a concurrent `down` or `reap`) is removing it: wait for that.
            return self.wait_gone(container, Duration::from_secs(30)).await;
        }
        if code != 0 && !is_no_such_container(&stderr) {
            return Err(anyhow!(
                "`{} rm` failed: {}",
                self.bin,
                first_error_line(&stderr)
            ));
        }
        Ok(())
    }

    async fn remove_labelled(&self, key: &str, value: &str) -> Result<usize> {
        // A create still under way (its `up` interrupted) first makes its container.
        let _settled = tokio::time::timeout(2 * api::REQUEST_TIMEOUT, self.creating.write()).await;
        if let Some(found) = self.list_api(&[(key, value)]).await? {
            for c in &found {
                self.remove(&c.id).await?;
            }
            return Ok(found.len());
        }
        let ids = self
            .checked(vec![
                "ps".into(),
                "-aq".into(),
                "--no-trunc".into(),
                "--filter".into(),
                format!("label={key}={value}"),
            ])
            .await?;
        let ids: Vec<&str> = ids.lines().filter(|l| !l.is_empty()).collect();
        for id in &ids {
            self.remove(id).await?;
        }
        Ok(ids.len())
    }

    async fn list(&self, labels: &[(&str, &str)]) -> Result<Vec<ContainerSummary>> {
        let mut found = match self.list_api(labels).await? {
            Some(found) => found,
            None => parse_ps(
                self.flavor,
                &self.checked(ps_args(self.flavor, labels)).await?,
            )?,
        };
        // The engine's filtering is checked, not trusted: how several filters combine differs
        // between engines and versions (Podman 4 ORs repeated `label=` filters of `volume ls`).
        found.retain(|c| summary_has_labels(c, labels));
        Ok(found)
    }

    fn exec(
        &self,
        container: &str,
        spec: &ExecSpec,
        stdio: ExecStdio,
    ) -> Result<EngineExec, Error> {
        let mut cmd = self.command(exec_args(container, spec));
        spawn_exec(
            &mut cmd,
            stdio,
            Arc::new(ClientJudge {
                flavor: self.flavor,
                container: container.to_string(),
            }),
            &self.bin,
        )
    }

    async fn kill_exec(&self, container: &str, spec: &ExecSpec) -> Result<()> {
        let marker = spec.marker.as_str();
        // From the host first: the container's own tools cannot interfere.
        let (code, pid, _) = self
            .output(vec![
                "inspect".into(),
                "--type".into(),
                "container".into(),
                "--format".into(),
                "{{.State.Pid}}".into(),
                container.into(),
            ])
            .await?;
        if let Some(pid) = pid.parse::<u32>().ok().filter(|p| code == 0 && *p > 0) {
            match super::marker::kill_marked(Some(pid), marker) {
                // Nothing found is also what the host sees of a gVisor sandbox, whose processes
                // live in its own kernel: the helper inside then looks (it finds nothing either
                // when all had ended).
                Ok(s) if s.failed == 0 && s.killed > 0 => return Ok(()),
                Ok(s) if s.failed == 0 => {}
                Ok(s) => {
                    return Err(anyhow!(
                        "{} of the command's processes could not be signalled",
                        s.failed
                    ))
                }
                // Not allowed to look (rootful engine, non-root caller) or not on this host
                // (remote engine): kill from inside the container instead.
                Err(_) => {}
            }
        }
        match tokio::time::timeout(
            Duration::from_secs(5),
            self.checked(kill_args(container, spec)),
        )
        .await
        {
            Ok(r) => r.map(|_| ()),
            Err(_) => Err(anyhow!(
                "the kill helper inside the container did not finish within 5s"
            )),
        }
    }

    async fn lifecycle(&self, verb: ContainerVerb, container: &str) -> Result<()> {
        let path = format!("/containers/{}/{}", api::encode(container), verb.as_str());
        if let Some(a) = self.get("POST", &path).await? {
            if a.ok() {
                return Ok(());
            }
            if a.not_found() {
                return Err(anyhow!(
                    "its container {container} no longer exists (removed outside h9sandbox)"
                ));
            }
            return Err(self.api_failed(verb.as_str(), &a));
        }
        let (code, _, stderr) = self
            .output(vec![verb.as_str().into(), container.into()])
            .await?;
        if code != 0 {
            if is_no_such_container(&stderr) {
                return Err(anyhow!(
                    "its container {container} no longer exists (removed outside h9sandbox)"
                ));
            }
            return Err(anyhow!(
                "`{} {}` failed: {}",
                self.bin,
                verb.as_str(),
                first_error_line(&stderr)
            ));
        }
        Ok(())
    }

    async fn commit(&self, container: &str, image: &str, changes: &[String]) -> Result<String> {
        let mut args: Vec<String> = vec!["commit".into()];
        for c in changes {
            args.extend(["--change".into(), c.clone()]);
        }
        args.extend([container.into(), image.into()]);
        self.checked(args).await
    }

    async fn agent_image(
        &self,
        image: &str,
        binary: &Path,
        build: &str,
        hint: Option<&str>,
    ) -> Result<String> {
        let id_of = |references: &[&str]| {
            let mut args = vec![
                "image".to_string(),
                "inspect".into(),
                "--format".into(),
                "{{.Id}}".into(),
            ];
            args.extend(references.iter().map(|r| r.to_string()));
            args
        };
        // Through the client, each lookup is a process of its own: the image's ID and the
        // derived image named last time are asked in one. It is the answer only when both
        // exist and that name is the one the image's ID gives now (a retagged image, a new
        // binary: the full lookup below).
        if let Some(hint) = hint.filter(|h| is_agent_image_tag(h) && self.api().is_none()) {
            let (code, out, _) = self.output(id_of(&[image, hint])).await?;
            let ids: Vec<&str> = out.lines().collect();
            if code == 0 && ids.len() == 2 && agent_image_tag(ids[0], build) == hint {
                return Ok(hint.to_string());
            }
        }
        let (code, id, stderr) = match self.image_id_api(image).await? {
            Some(Ok(id)) => (0, id, String::new()),
            Some(Err(a)) if a.not_found() => (1, String::new(), a.as_client_error()),
            Some(Err(a)) => return Err(self.api_failed("image inspect", &a)),
            None => self.output(id_of(&[image])).await?,
        };
        if code != 0 {
            if is_no_such_image(&stderr) || stderr.contains("No such object") {
                return Err(Error::ImageUnavailable {
                    image: image.into(),
                    reason: "not present locally".into(),
                }
                .into());
            }
            return Err(anyhow!(
                "`{} image inspect` failed: {}",
                self.bin,
                first_error_line(&stderr)
            ));
        }
        let tag = agent_image_tag(&id, build);
        let present = match self.image_id_api(&tag).await? {
            Some(found) => found.is_ok(),
            None => self.output(id_of(&[&tag])).await?.0 == 0,
        };
        if present {
            return Ok(tag);
        }
        // Made once per image and binary: a container of the image (never started), the
        // binary put in through the archive API, committed.
        let container = self
            .checked(vec![
                "create".into(),
                "--label".into(),
                format!("{LABEL_AGENT_IMAGE}=1"),
                "--entrypoint".into(),
                crate::contract::BIN.into(),
                "--".into(),
                image.into(),
            ])
            .await?;
        let made = match self.put_binary(&container, binary).await {
            Ok(()) => self
                .checked(vec![
                    "commit".into(),
                    "--change".into(),
                    format!("LABEL {LABEL_AGENT_IMAGE}={build}"),
                    container.clone(),
                    tag.clone(),
                ])
                .await
                .map(|_| ()),
            Err(e) => Err(e),
        };
        let _ = self.output(vec!["rm".into(), "-f".into(), container]).await;
        made.map(|()| tag)
    }

    async fn start_shipped(&self, container: &str, secret: &Secret, ready: Duration) -> Result<()> {
        let mut cmd = self.command(attached_start(container));
        match self.hand_secret(&mut cmd, secret, ready).await? {
            None => Ok(()),
            Some((_, stderr)) if is_no_such_container(&stderr) => Err(anyhow!(
                "its container {container} no longer exists (removed outside h9sandbox)"
            )),
            Some((_, stderr)) => Err(anyhow!(
                "`{} start` failed: {}",
                self.bin,
                first_error_line(&stderr)
            )),
        }
    }

    async fn image_config(&self, image: &str) -> Result<ImageConfig> {
        let path = format!("/images/{}/json", api::encode_image(image));
        if let Some(a) = self.get("GET", &path).await? {
            if !a.ok() {
                return Err(self.api_failed("image inspect", &a));
            }
            return parse_image_config(&a.json("images/json")?["Config"].to_string());
        }
        let out = self
            .checked(vec![
                "image".into(),
                "inspect".into(),
                "--format".into(),
                "{{json .Config}}".into(),
                image.into(),
            ])
            .await?;
        parse_image_config(&out)
    }

    async fn build(&self, spec: &BuildSpec, timeout: Duration) -> Result<()> {
        let run = self.output(build_args(spec));
        let (code, stdout, stderr) = match tokio::time::timeout(timeout, run).await {
            Err(_) => {
                return Err(anyhow!(
                    "building {} did not finish within {}s (pull_timeout_secs); raise it, or build the image yourself and give it as `image`",
                    spec.tag,
                    timeout.as_secs()
                ))
            }
            Ok(r) => r?,
        };
        if code == 0 {
            return Ok(());
        }
        // What the build printed last says which step failed and how.
        let all = format!("{stdout}\n{stderr}");
        let lines: Vec<&str> = all.lines().filter(|l| !l.trim().is_empty()).collect();
        for line in &lines[lines.len().saturating_sub(BUILD_TAIL_LINES)..] {
            self.reporter
                .note(&format!("build: {}", crate::report::printable(line)));
        }
        Err(anyhow!(
            "`{} build` of {} failed: {} (its last lines are above)",
            self.bin,
            spec.tag,
            first_error_line(if stderr.is_empty() { &stdout } else { &stderr })
        ))
    }

    async fn image_file(
        &self,
        image: &str,
        path: &str,
        max: u64,
        labels: &[(&str, &str)],
    ) -> Result<Option<Vec<u8>>> {
        // The probe carries its state directory's labels so that a reaper removes it if we die
        // meanwhile; a concurrent sweep may therefore remove it under us: then again.
        for attempt in 1.. {
            match self.copy_out(image, path, labels).await? {
                Copied::Gone if attempt < 3 => continue,
                Copied::Gone => {
                    return Err(anyhow!(
                        "the container made to read {path} out of {image} was removed each time (by a concurrent `h9sandbox reap`?); try again"
                    ))
                }
                Copied::Missing => return Ok(None),
                Copied::File(dest, _dir) => return read_regular(&dest, max).map(Some),
            }
        }
        unreachable!("the loop returns")
    }

    async fn list_volumes(&self, labels: &[(&str, &str)]) -> Result<Vec<VolumeSummary>> {
        let path = format!("/volumes?filters={}", api::label_filters(labels));
        if let Some(a) = self.get("GET", &path).await? {
            if !a.ok() {
                return Err(self.api_failed("volume ls", &a));
            }
            return Ok(volume_summaries(api::parse_volumes_body(&a.body)?, labels));
        }
        let mut args: Vec<String> = vec!["volume".into(), "ls".into(), "-q".into()];
        for (k, v) in labels {
            args.extend(["--filter".into(), format!("label={k}={v}")]);
        }
        if self.flavor == Flavor::Docker {
            // Docker's client prints the labels asked for beside each name: one process, and
            // the labels still checked here (label values hold no tab or newline: the state
            // directory's path is refused with a control character).
            args.retain(|a| a != "-q");
            let mut format = "{{.Name}}".to_string();
            for (k, _) in labels {
                format.push_str(&format!("\t{{{{.Label {k:?}}}}}"));
            }
            args.extend(["--format".into(), format]);
            let found = self
                .checked(args)
                .await?
                .lines()
                .filter(|l| !l.is_empty())
                .map(|line| {
                    let mut fields = line.split('\t');
                    let name = fields.next().unwrap_or_default().to_string();
                    let have = labels
                        .iter()
                        .zip(fields)
                        .filter(|(_, v)| !v.is_empty())
                        .map(|((k, _), v)| (k.to_string(), v.to_string()))
                        .collect();
                    (name, have)
                })
                .collect();
            return Ok(volume_summaries(found, labels));
        }
        let names: Vec<String> = self
            .checked(args)
            .await?
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        if names.is_empty() {
            return Ok(Vec::new());
        }
        // The filter is not trusted (Podman 4 ORs repeated `label=` filters, which would hand
        // over every sandbox's volume): each volume's labels are read back and checked.
        let mut args: Vec<String> = vec![
            "volume".into(),
            "inspect".into(),
            "--format".into(),
            "{{.Name}}\t{{json .Labels}}".into(),
        ];
        args.extend(names);
        let out = self.checked(args).await?;
        Ok(volume_summaries(parse_volume_labels(&out), labels))
    }

    async fn ensure_image(&self, build: &super::image::ImageBuild) -> Result<()> {
        if let Some(found) = self.image_id_api(&build.tag).await? {
            return match found {
                Ok(_) => Ok(()),
                Err(_) => self.build_image(build).await,
            };
        }
        let (code, _, _) = self
            .output(vec![
                "image".into(),
                "inspect".into(),
                "--format".into(),
                "{{.Id}}".into(),
                build.tag.clone(),
            ])
            .await?;
        if code == 0 {
            return Ok(());
        }
        self.build_image(build).await
    }

    async fn remove_volume(&self, name: &str) -> Result<()> {
        // Never `--force`: Podman's removes every container using the volume first.
        if let Some(a) = self
            .get("DELETE", &format!("/volumes/{}", api::encode(name)))
            .await?
        {
            if a.ok() || a.not_found() {
                return Ok(());
            }
            return Err(self.api_failed("volume rm", &a));
        }
        let (code, _, stderr) = self
            .output(vec!["volume".into(), "rm".into(), name.into()])
            .await?;
        if code != 0 && !stderr.contains("no such volume") && !stderr.contains("No such volume") {
            return Err(anyhow!(
                "`{} volume rm` failed: {}",
                self.bin,
                first_error_line(&stderr)
            ));
        }
        Ok(())
    }
}

impl Docker {
    /// Builds `build` ([`Environment::ensure_image`]): `build -q -t TAG -` with the context as a
    /// tar stream on stdin (Docker), or (Podman, whose `build -` takes a Containerfile, not a
    /// context) from the context unpacked in a temporary directory. The engine's output is held
    /// bounded.
    async fn build_image(&self, build: &super::image::ImageBuild) -> Result<()> {
        let mut args: Vec<String> =
            vec!["build".into(), "-q".into(), "-t".into(), build.tag.clone()];
        let _context_dir;
        let mut cmd = match self.flavor {
            Flavor::Docker => {
                args.push("-".into());
                let mut c = self.command(args);
                c.stdin(Stdio::piped());
                c
            }
            Flavor::Podman => {
                let dir = tempfile::tempdir().context("cannot make a build context")?;
                let mut tar = Vec::new();
                super::image::write_context(build, &mut tar).await?;
                tar::Archive::new(&tar[..])
                    .unpack(dir.path())
                    .context("cannot unpack the build context")?;
                args.push(dir.path().to_string_lossy().into_owned());
                _context_dir = dir;
                self.command(args)
            }
        };
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| self.spawn_error(e))?;
        let stdin = child.stdin.take();
        let feed = async {
            match stdin {
                Some(mut stdin) => {
                    let r = super::image::write_context(build, &mut stdin).await;
                    drop(stdin);
                    r
                }
                None => Ok(()),
            }
        };
        let (fed, out) = tokio::join!(feed, super::collect_bounded(child, ENGINE_OUTPUT_MAX));
        let out = out?;
        let code = out.status.and_then(|s| s.code()).unwrap_or(-1);
        if code != 0 {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(anyhow!(
                "`{} build` of {} failed: {}",
                self.bin,
                build.tag,
                first_error_line(&stderr)
            ));
        }
        fed.with_context(|| format!("cannot send {}'s build context to {}", build.tag, self.bin))?;
        // Another process may have built the same image meanwhile and taken the name last:
        // ours is then an unnamed copy nobody uses, removed (never by force).
        let ours = String::from_utf8_lossy(&out.stdout)
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix("sha256:").map(str::to_string));
        if let Some(ours) = ours {
            let (code, named, _) = self
                .output(vec![
                    "image".into(),
                    "inspect".into(),
                    "--format".into(),
                    "{{.Id}}".into(),
                    build.tag.clone(),
                ])
                .await?;
            if code == 0 && named.trim().trim_start_matches("sha256:") != ours {
                let _ = self
                    .output(vec!["image".into(), "rm".into(), format!("sha256:{ours}")])
                    .await;
            }
        }
        Ok(())
    }
}

impl Docker {
    /// [`Environment::create`] through the Engine API (a mounted agent's container on a local
    /// daemon): `POST /containers/create` and `/start`, the same container as `args`' `docker
    /// run -d`, which `-v` shows first (a person can replay either). Its failures are worded and
    /// typed as the client's. `None`: not here (the client runs).
    async fn create_api(
        &self,
        spec: &ContainerSpec,
        ulimits: &[String],
        args: &[String],
    ) -> Result<Option<Result<String>>> {
        let Some(api) = self.api() else {
            return Ok(None);
        };
        if !matches!(spec.agent, AgentSetup::Mounted(_)) || api.version().await.is_none() {
            return Ok(None);
        }
        let body = api::create_body(spec, ulimits)?;
        let create = format!("/containers/create?name={}", api::encode(&spec.name));
        let start = format!("/containers/{}/start", api::encode(&spec.name));
        if self.reporter.verbose() {
            let shown: Vec<OsString> = args.iter().map(Into::into).collect();
            self.reporter
                .command(&format!("+ {}", shell_line(&self.bin, &shown)));
            self.reporter.command(&format!(
                "  = {} && {}",
                api.curl_line("POST", &create, Some(&body)).await,
                api.curl_line("POST", &start, None).await
            ));
        }
        // Once sent, a create is seen through even when `up` is interrupted meanwhile (its
        // future dropped): the cleanup that follows ([`Environment::remove_labelled`]) waits
        // for it, so that it finds the container the daemon made.
        let guard = Arc::clone(&self.creating).read_owned().await;
        let (api, name) = (api.clone(), spec.name.clone());
        let task = tokio::spawn(async move {
            let _guard = guard;
            let t = api::REQUEST_TIMEOUT;
            let Some(made) = api.call("POST", &create, Some(&body), t).await? else {
                return Ok(None);
            };
            if !made.ok() {
                return Ok(Some(Err(made)));
            }
            let id = made.json("containers/create")?["Id"]
                .as_str()
                .map(str::to_string)
                .filter(|i| !i.is_empty())
                .ok_or_else(|| anyhow!("the Docker daemon created {name} but named no ID"))?;
            let path = format!("/containers/{}/start", api::encode(&id));
            match api.call("POST", &path, None, t).await? {
                Some(a) if a.ok() => Ok(Some(Ok(id))),
                Some(a) => Ok(Some(Err(a))),
                None => Err(anyhow!(
                    "the Docker daemon at unix://{} went away between creating and starting {name}",
                    api.socket().display()
                )),
            }
        });
        let outcome: Result<Option<std::result::Result<String, api::Answer>>> = task
            .await
            .map_err(|e| anyhow!("the container's create was lost: {e}"))?;
        Ok(outcome?.map(|r| r.map_err(|refused| self.run_failure(spec, &refused))))
    }

    /// The error of a refused `create` or `start` (`answer`), as the client's `run` failure
    /// means it: 404 of an image: [`Error::ImageUnavailable`]; 409: [`Error::NameInUse`]; an
    /// unknown runtime; else the daemon's message with the hint for a known cause.
    fn run_failure(&self, spec: &ContainerSpec, answer: &api::Answer) -> anyhow::Error {
        let message = answer.as_client_error();
        if answer.not_found() && is_no_such_image(&message) {
            return Error::ImageUnavailable {
                image: spec.image.clone(),
                reason: "not present locally".into(),
            }
            .into();
        }
        if answer.conflict() && message.contains("is already in use") {
            return Error::NameInUse(spec.name.clone()).into();
        }
        if let Some(r) = spec
            .runtime
            .as_deref()
            .filter(|_| is_unknown_runtime(&message))
        {
            return unknown_runtime(&self.bin, r).into();
        }
        anyhow!(
            "`{} run` failed: {}{}",
            self.bin,
            message,
            run_failure_hint(&message)
        )
    }

    /// The ID of the image `reference` (`GET /images/{name}/json`), or the daemon's refusal
    /// (404: no such image); `None`: no API here.
    async fn image_id_api(
        &self,
        reference: &str,
    ) -> Result<Option<std::result::Result<String, api::Answer>>> {
        let path = format!("/images/{}/json", api::encode_image(reference));
        let Some(a) = self.get("GET", &path).await? else {
            return Ok(None);
        };
        if !a.ok() {
            return Ok(Some(Err(a)));
        }
        let id = a.json("images/json")?["Id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Ok(Some(Ok(id)))
    }

    /// The containers carrying `labels` (`GET /containers/json?all=1`), as the engine filtered
    /// them; `None`: no API here ([`Docker::call`]).
    async fn list_api(&self, labels: &[(&str, &str)]) -> Result<Option<Vec<ContainerSummary>>> {
        let path = format!(
            "/containers/json?all=1&filters={}",
            api::label_filters(labels)
        );
        let Some(a) = self.get("GET", &path).await? else {
            return Ok(None);
        };
        if !a.ok() {
            return Err(self.api_failed("ps", &a));
        }
        api::parse_list_body(&a.body).map(Some)
    }
}

/// The volumes of `found` (names and labels) that carry every label of `labels`: the engine's
/// filter is not trusted (Podman 4 ORs repeated `label=` filters, which would hand over every
/// sandbox's volume).
fn volume_summaries(
    found: Vec<(String, std::collections::BTreeMap<String, String>)>,
    labels: &[(&str, &str)],
) -> Vec<VolumeSummary> {
    found
        .into_iter()
        .filter(|(_, have)| {
            labels
                .iter()
                .all(|(k, v)| have.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(name, _)| VolumeSummary {
            // Our volumes are named after their sandbox (`h9sandbox-<32 hex>`).
            sandbox_id: name
                .strip_prefix("h9sandbox-")
                .and_then(|h| uuid::Uuid::parse_str(h).ok())
                .map(|u| u.to_string()),
            name,
        })
        .collect()
}

/// What the Docker (Podman) client's exec failures mean ([`exec_failure`]).
struct ClientJudge {
    flavor: Flavor,
    container: String,
}

impl ExecJudge for ClientJudge {
    fn failure(&self, head: &[u8], status: i32) -> Option<ExecFailure> {
        exec_failure(self.flavor, &self.container, head, status)
    }

    fn may_be_engine_message(&self, chunk: &[u8]) -> bool {
        looks_like_engine_message(chunk)
    }
}

/// How many of a failed build's last output lines are shown.
const BUILD_TAIL_LINES: usize = 20;

/// The content of the regular file `path` (not followed if it is a symlink), at most `max`
/// bytes. Errors: it is not a regular file, or larger.
fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(anyhow!("{} is not a regular file", path.display()));
    }
    if meta.len() > max {
        return Err(anyhow!(
            "{} has {} bytes, more than the {max} read",
            path.display(),
            meta.len()
        ));
    }
    let mut v = Vec::new();
    f.take(max).read_to_end(&mut v)?;
    Ok(v)
}

/// The label of a derived image (its value: the build ID of the binary in it) and of the
/// container it is made from.
pub(crate) const LABEL_AGENT_IMAGE: &str = "h9sandbox.agent_image";

/// Whether `tag` has the shape of [`agent_image_tag`]'s names (`h9sandbox-agent:` and two runs
/// of 12 lowercase hex digits): what a cached name must be before it is handed to the client.
pub(crate) fn is_agent_image_tag(tag: &str) -> bool {
    let hex12 = |s: &str| {
        s.len() == 12
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    tag.strip_prefix("h9sandbox-agent:")
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(a, b)| hex12(a) && hex12(b))
}

/// The tag of the derived image of the image whose ID is `image_id` with the binary of build
/// `build`: `h9sandbox-agent:<12 hex digits of each>`.
pub(crate) fn agent_image_tag(image_id: &str, build: &str) -> String {
    let id = image_id.trim().trim_start_matches("sha256:");
    let short = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_hexdigit())
            .take(12)
            .collect::<String>()
            .to_ascii_lowercase()
    };
    format!("h9sandbox-agent:{}-{}", short(id), short(build))
}
