//! The container implementation of [`Environment`]: shells out to the `docker` CLI, or to
//! `podman` (or any CLI-compatible client named by `engine_bin`), with argv vectors built by pure
//! functions, which the unit tests below compare exactly.
//!
//! Docker and Podman share one code path; where Podman differs, a small function takes the
//! [`Flavor`]: `ps` output ([`ps_args`], [`parse_ps`]: Podman's template has no `.Label`, and its
//! `.State` is a human string, so Podman is asked for JSON), the explicit rlimits a daemonless
//! engine needs ([`ulimit_args`]), and its error messages ([`errors::exec_failure`]).
//!
//! Split along its seams: this file holds the engine itself ([`Docker`]: its daemon, client
//! processes and their failures); [`environment`] its [`Environment`] implementation, [`args`]
//! the argv builders, [`parse`] the parsers of what the client prints, [`errors`] what its
//! English error messages mean, [`api`] the Engine API client and [`via_api`] what goes
//! through it, [`build`] image builds, [`agent_image`] the derived image with the agent.

mod agent_image;
pub(crate) mod api;
pub(crate) mod api_tls;
pub(crate) mod args;
mod build;
mod environment;
pub(crate) mod errors;
pub(crate) mod parse;
#[cfg(test)]
mod tests;
mod via_api;

pub(crate) use agent_image::{agent_image_tag, is_agent_image_tag, LABEL_AGENT_IMAGE};
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
use super::{bounded_output, ENGINE_OUTPUT_MAX};
use super::{Environment, Secret, ShippedAgent};
use crate::error::Error;
use crate::poll::{poll_until, Backoff};
use crate::report::{Reporter, Silent};
use crate::types::Daemon;

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
/// `ulimit_nofile`, `ulimit_nproc`; the OCI runtime is the container's, [`ContainerSpec::runtime`](super::ContainerSpec::runtime)).
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
    /// The daemon's Engine API, when it is a unix socket on this machine, or `tcp://` with TLS
    /// verified, that the default client would reach too ([`api::Endpoint::of`]); found once,
    /// on first use.
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
    /// daemon on a unix socket of this machine or at `tcp://` with `DOCKER_TLS_VERIFY`
    /// ([`api::Endpoint::of`]).
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
                api::Endpoint::of(&self.daemon, current.as_deref()).map(api::Api::new)
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
        self.call_showing(method, path, body, body, timeout).await
    }

    /// [`Docker::call`] that sends `body` but shows `shown` on its `-v` line: a body with a
    /// secret in it (`POST /secrets/create`) is shown with the secret left out.
    pub(crate) async fn call_showing(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        shown: Option<&serde_json::Value>,
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
                .command(&format!("+ {}", api.curl_line(method, path, shown).await));
        }
        api.call(method, path, body, timeout).await
    }

    /// The Engine API version agreed with the daemon (`(1, 44)`: the lower of the daemon's and
    /// [`api::MAX_API_VERSION`]); `None` where no API answers (the client is asked instead).
    pub(crate) async fn api_version(&self) -> Option<(u32, u32)> {
        api::parse_version(self.api()?.version().await?.trim_start_matches('v'))
    }

    /// [`Docker::call`] with [`api::REQUEST_TIMEOUT`] and no body.
    pub(crate) async fn get(&self, method: &str, path: &str) -> Result<Option<api::Answer>> {
        self.call(method, path, None, api::REQUEST_TIMEOUT).await
    }

    /// The error of a failed API request, worded as the client's (`` `docker VERB` failed:
    /// Error response from daemon: ... ``).
    pub(crate) fn api_failed(&self, verb: &str, answer: &api::Answer) -> anyhow::Error {
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

    /// The client command line of `args` as `-v` shows it, ready to paste: prefixed with this
    /// engine's daemon settings (`DOCKER_HOST=… DOCKER_TLS_VERIFY=… docker …`) when it has
    /// any, which the client gets whatever the caller's environment says
    /// ([`Docker::point_at_daemon`]).
    pub(crate) fn shown(&self, args: &[OsString]) -> String {
        let line = shell_line(&self.bin, args);
        if self.flavor != Flavor::Docker {
            return line;
        }
        let mut settings = String::new();
        for (name, value) in Daemon::VARS.iter().zip(self.daemon.values()) {
            if let Some(v) = value {
                settings.push_str(&format!("{name}={} ", crate::engine::shell::shell_quote(v)));
            }
        }
        settings + &line
    }

    /// The client command running `args` against this engine's daemon (shown with `-v`).
    pub(crate) fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        if self.reporter.verbose() {
            self.reporter.command(&format!("+ {}", self.shown(&args)));
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
                self.shown(&shown)
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
    /// set, so it is refused. Errors: [`Error::Refused`] naming `scripts/setup-gvisor.sh`.
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
            return Err(Error::Refused(format!(
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
