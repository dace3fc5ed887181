//! The container implementation of [`Environment`]: shells out to the `docker` CLI, or to
//! `podman` (or any CLI-compatible client named by `engine_bin`), with argv vectors built by pure
//! functions, which the unit tests below compare exactly.
//!
//! Docker and Podman share one code path; where Podman differs, a small function takes the
//! [`Flavor`]: `ps` output ([`ps_args`], [`parse_ps`]: Podman's template has no `.Label`, and its
//! `.State` is a human string, so Podman is asked for JSON), the explicit rlimits a daemonless
//! engine needs ([`ulimit_args`]), and its error messages ([`Docker::exec_failure`]).

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use tokio::process::Command;

use super::shell::shell_line;
use super::{bounded_output, ENGINE_OUTPUT_MAX};
use super::{
    AppliedLimits, BuildSpec, CommandLine, ContainerSpec, ContainerStatus, ContainerSummary,
    ContainerVerb, Environment, ExecFailure, ExecSpec, ImageConfig, RunAs, VolumeSummary,
    EXEC_MARKER_VAR, LABEL_ID, LABEL_MANAGED, LABEL_STATE_DIR, SCRATCH_DIR,
};
use crate::agent;
use crate::error::Error;
use crate::report::{Reporter, Silent};
use crate::types::EngineKind;

/// Runs the user's command with bash when the image has it, else with sh.
/// Invoked as `sh -c SHELL_WRAPPER h9sandbox COMMAND`, so `$1` is the command.
pub const SHELL_WRAPPER: &str =
    r#"if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; fi; exec sh -c "$1""#;

/// Kills, with SIGKILL, every process whose environment holds `H9SANDBOX_EXEC_ID=$1`, repeating
/// until a pass finds none (so children forked meanwhile are caught too). POSIX sh, reading
/// `/proc/PID/environ`; works with dash, bash and busybox.
pub const KILL_SCRIPT: &str = r#"m="H9SANDBOX_EXEC_ID=$1"; n=0
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
pub enum Flavor {
    /// Docker Engine: a daemon applies the container's rlimits from its own.
    Docker,
    /// Podman: no daemon; the client's process starts the OCI runtime, so the container's
    /// rlimits cannot exceed the client's hard limits.
    Podman,
}

/// Engine options of `run` beyond the sandbox's own limits (configuration keys
/// `ulimit_nofile`, `ulimit_nproc`; the OCI runtime is the container's, [`ContainerSpec::runtime`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Open-files rlimit (`--ulimit nofile=N:N`); 0 = automatic (see [`ulimit_args`]).
    pub ulimit_nofile: u64,
    /// Processes rlimit (`--ulimit nproc=N:N`); 0 = automatic (see [`ulimit_args`]).
    pub ulimit_nproc: u64,
}

/// The host's hard rlimits and kernel ceilings that bound a Podman container's rlimits.
/// `None` is unlimited (or unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostLimits {
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
    pub fn read() -> HostLimits {
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
pub struct Docker {
    bin: String,
    flavor: Flavor,
    options: RunOptions,
    reporter: Arc<dyn Reporter>,
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
    /// The engine whose client is `bin` (e.g. `docker`), reporting to nobody until
    /// [`Docker::reporter`] says otherwise. A `bin` whose file name contains `podman` drives
    /// Podman.
    pub fn new(bin: impl Into<String>) -> Docker {
        let bin = bin.into();
        let flavor = if Path::new(&bin)
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.contains("podman"))
        {
            Flavor::Podman
        } else {
            Flavor::Docker
        };
        Docker::with_flavor(flavor, bin)
    }

    /// The engine `flavor` whose client is `bin`.
    pub fn with_flavor(flavor: Flavor, bin: impl Into<String>) -> Docker {
        Docker {
            bin: bin.into(),
            flavor,
            options: RunOptions::default(),
            reporter: Arc::new(Silent),
        }
    }

    /// The same engine, showing every command line it runs to `reporter` when that is verbose
    /// ([`Reporter::command`]).
    pub fn reporter(mut self, reporter: Arc<dyn Reporter>) -> Docker {
        self.reporter = reporter;
        self
    }

    /// The same engine, creating containers with `options`.
    pub fn options(mut self, options: RunOptions) -> Docker {
        self.options = options;
        self
    }

    /// Which engine this is.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The client binary.
    pub fn bin(&self) -> &str {
        &self.bin
    }

    fn command<I, S>(&self, args: I) -> Command
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
        cmd
    }

    /// Runs the client to completion, capturing its output, each stream at most
    /// [`ENGINE_OUTPUT_MAX`] bytes (more is an error: the client is killed). Returns (exit
    /// status, stdout, stderr).
    async fn output(&self, args: Vec<String>) -> Result<(i32, String, String)> {
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
    async fn checked(&self, args: Vec<String>) -> Result<String> {
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

    /// Runs the client with `args` (argv built by the caller's pure function, as
    /// `sandbox::egress` does for the proxy sidecar), returning its stdout. Errors: a non-zero
    /// exit, with the client's first error line.
    pub async fn run_client(&self, args: Vec<String>) -> Result<String> {
        self.checked(args).await
    }

    /// Polls `inspect` (10 ms doubling to 200 ms) until the container no longer exists.
    async fn wait_gone(&self, container: &str, timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut delay = Duration::from_millis(10);
        while self.inspect(container).await?.is_some() {
            if tokio::time::Instant::now() >= deadline {
                return Err(anyhow!(
                    "container {container} is still being removed after {}s",
                    timeout.as_secs()
                ));
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Checks that the daemon has the OCI runtime `name` registered (`docker info`'s
    /// `.Runtimes`) and that it enforces the sandbox's limits: a runtime registered with
    /// `--ignore-cgroups` (gVisor's flag to leave the host's cgroups alone) would run the
    /// container without its memory, CPU and process limits, which the engine still reports as
    /// set, so it is refused. Errors: [`Error::Invalid`] naming `scripts/setup-gvisor.sh`.
    async fn check_runtime(&self, name: &str) -> Result<()> {
        let out = self
            .checked(vec![
                "info".into(),
                "--format".into(),
                "{{json .Runtimes}}".into(),
            ])
            .await?;
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

impl Environment for Docker {
    fn kind(&self) -> EngineKind {
        match self.flavor {
            Flavor::Docker => EngineKind::Docker,
            Flavor::Podman => EngineKind::Podman,
        }
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
        let (code, stdout, stderr) = self.output(run_args(self.flavor, spec, &extra)).await?;
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
        let out = self.checked(ps_args(self.flavor, labels)).await?;
        let mut found = parse_ps(self.flavor, &out)?;
        // The engine's filtering is checked, not trusted: how several filters combine differs
        // between engines and versions (Podman 4 ORs repeated `label=` filters of `volume ls`).
        found.retain(|c| summary_has_labels(c, labels));
        Ok(found)
    }

    fn exec_command(&self, container: &str, spec: &ExecSpec) -> Command {
        self.command(exec_args(container, spec))
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

    async fn image_config(&self, image: &str) -> Result<ImageConfig> {
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
        let copied = self
            .output(vec![
                "cp".into(),
                "-L".into(),
                format!("{probe}:{path}"),
                dest.to_string_lossy().into_owned(),
            ])
            .await;
        let _ = self.remove(&probe).await;
        let (code, _, stderr) = copied?;
        if code != 0 {
            if stderr.contains("Could not find the file") || stderr.contains("no such file") {
                return Ok(None);
            }
            return Err(anyhow!(
                "`{} cp` of {path} from {image} failed: {}",
                self.bin,
                first_error_line(&stderr)
            ));
        }
        read_regular(&dest, max).map(Some)
    }

    async fn list_volumes(&self, labels: &[(&str, &str)]) -> Result<Vec<VolumeSummary>> {
        let mut args: Vec<String> = vec!["volume".into(), "ls".into(), "-q".into()];
        for (k, v) in labels {
            args.extend(["--filter".into(), format!("label={k}={v}")]);
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
        Ok(parse_volume_labels(&out)
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
            .collect())
    }

    async fn remove_volume(&self, name: &str) -> Result<()> {
        // Never `--force`: Podman's removes every container using the volume first.
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

    fn exec_failure(&self, container: &str, head: &[u8], status: i32) -> Option<ExecFailure> {
        // `docker exec` reports its own failures with status 1 (daemon errors), 125, 126 or 127
        // (the OCI runtime could not start the process) and a message of its own on stderr;
        // `podman exec` with 125, 126, 127, or 255 (container not running).
        let own = match self.flavor {
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
        if text.starts_with("unable to find user") || text.starts_with("Error: unable to find user")
        {
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
}

/// How many of a failed build's last output lines are shown.
const BUILD_TAIL_LINES: usize = 20;

/// `build` arguments for `spec`: never pulling a base image that is present (the engine's
/// default), removing the intermediate containers even of a failed step (`--force-rm`; the
/// classic builder keeps them otherwise), the build args, target, caches, network and labels,
/// then the context.
pub fn build_args(spec: &BuildSpec) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "build".into(),
        "--force-rm".into(),
        "--tag".into(),
        spec.tag.clone(),
        "--file".into(),
        spec.dockerfile.to_string_lossy().into_owned(),
    ];
    for (k, v) in &spec.args {
        a.extend(["--build-arg".into(), format!("{k}={v}")]);
    }
    if let Some(t) = &spec.target {
        a.extend(["--target".into(), t.clone()]);
    }
    for c in &spec.cache_from {
        a.extend(["--cache-from".into(), c.clone()]);
    }
    if spec.no_network {
        a.extend(["--network".into(), "none".into()]);
    }
    for (k, v) in &spec.labels {
        a.extend(["--label".into(), format!("{k}={v}")]);
    }
    a.extend(["--".into(), spec.context.to_string_lossy().into_owned()]);
    a
}

/// `create` arguments of the container [`Docker::image_file`] copies a file out of: never
/// started (its entrypoint need not exist), without a network, never pulling, labelled.
pub fn probe_create_args(image: &str, labels: &[(&str, &str)]) -> Vec<String> {
    let mut a: Vec<String> = vec!["create".into()];
    for (k, v) in labels {
        a.extend(["--label".into(), format!("{k}={v}")]);
    }
    a.extend([
        "--network".into(),
        "none".into(),
        "--entrypoint".into(),
        "/.h9sandbox-never-started".into(),
        "--pull".into(),
        "never".into(),
        "--".into(),
        image.into(),
    ]);
    a
}

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

/// The scratch volume's labels: the container's own h9sandbox labels (ID, state directory).
fn volume_labels(spec: &ContainerSpec) -> Vec<(String, String)> {
    [LABEL_MANAGED, LABEL_ID, LABEL_STATE_DIR]
        .iter()
        .filter_map(|k| spec.labels.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect()
}

/// `volume create` arguments making `spec`'s labelled scratch volume (Podman, whose `--mount`
/// cannot label the volume it creates).
pub fn volume_create_args(spec: &ContainerSpec) -> Vec<String> {
    let mut a: Vec<String> = vec!["volume".into(), "create".into()];
    for (k, v) in volume_labels(spec) {
        a.extend(["--label".into(), format!("{k}={v}")]);
    }
    a.push(spec.scratch_volume.clone());
    a
}

/// `--mount` value of the scratch volume: named after the sandbox, created with the container's
/// h9sandbox labels (Docker's `volume-label`; Podman gets them from [`volume_create_args`]).
fn scratch_mount_arg(flavor: Flavor, spec: &ContainerSpec) -> String {
    let mut fields = vec![
        "type=volume".to_string(),
        format!("source={}", spec.scratch_volume),
        format!("destination={SCRATCH_DIR}"),
    ];
    if flavor == Flavor::Docker {
        for (k, v) in volume_labels(spec) {
            fields.push(format!("volume-label={k}={v}"));
        }
    }
    fields
        .into_iter()
        .map(csv_field)
        .collect::<Vec<_>>()
        .join(",")
}

/// A field of `--mount`'s CSV record, quoted when it holds `,` or `"` (RFC 4180).
fn csv_field(f: String) -> String {
    if f.contains([',', '"']) || f.starts_with(' ') || f.ends_with(' ') {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f
    }
}

/// `docker run` arguments for `spec`: hardened, labelled, detached, never pulling. `extra`
/// (engine options: [`ulimit_args`]) and then [`runtime_args`] go before `--pull`. With gVisor
/// the host's `--pids-limit` is [`gvisor_host_pids`].
pub fn run_args(flavor: Flavor, spec: &ContainerSpec, extra: &[String]) -> Vec<String> {
    let l = &spec.limits;
    let workdir = spec.workdir.to_string_lossy();
    let mut a: Vec<String> = vec![
        "run".into(),
        "-d".into(),
        "--name".into(),
        spec.name.clone(),
    ];
    for (k, v) in &spec.labels {
        a.push("--label".into());
        a.push(format!("{k}={v}"));
    }
    // PID 1 is h9sandbox's agent, as root: it makes the sandbox's user known, installs the
    // set-ID filter that every process inherits, reaps zombies, exits at once on SIGTERM, and
    // runs each command as `spec.user` (the engine's exec passes `--user` itself).
    a.extend(["--user".into(), "0:0".into()]);
    a.extend(["--cap-drop".into(), "all".into()]);
    for cap in l.caps.added() {
        a.extend(["--cap-add".into(), (*cap).into()]);
    }
    a.extend([
        "--security-opt".into(),
        "no-new-privileges:true".into(),
        "--pids-limit".into(),
        if is_gvisor(spec.runtime.as_deref()) {
            gvisor_host_pids(l.pids_limit).to_string()
        } else {
            l.pids_limit.to_string()
        },
        "--cpus".into(),
        format_cpus(l.cpus),
        "--memory".into(),
        l.memory.clone(),
        "--tmpfs".into(),
        format!("/tmp:size={},nosuid,noexec,nodev", l.tmp_size),
        "--network".into(),
        l.network.engine_mode().into(),
        // The scratch dir: a volume of its own, removed with the sandbox.
        "--mount".into(),
        scratch_mount_arg(flavor, spec),
    ]);
    // Extra environment first: h9sandbox's own names below win.
    for (k, v) in &spec.env {
        a.extend(["--env".into(), format!("{k}={v}")]);
    }
    a.extend([
        "--env".into(),
        format!("TMPDIR={SCRATCH_DIR}"),
        "--mount".into(),
        bind_mount_arg(&workdir, &workdir, false),
        "--workdir".into(),
        workdir.to_string(),
        "--mount".into(),
        bind_mount_arg(&spec.agent.root.to_string_lossy(), agent::ROOT, true),
        "--mount".into(),
        bind_mount_arg(&spec.agent.binary.to_string_lossy(), agent::BIN, true),
        "--mount".into(),
        bind_mount_arg(
            &spec.agent.run_dir.to_string_lossy(),
            agent::server::RUN_DIR,
            false,
        ),
        "--entrypoint".into(),
        agent::BIN.into(),
    ]);
    if let Some(dir) = &spec.proxy {
        a.extend([
            "--mount".into(),
            bind_mount_arg(&dir.to_string_lossy(), agent::proxy::DIR, true),
        ]);
        for (k, v) in proxy_env() {
            a.extend(["--env".into(), format!("{k}={v}")]);
        }
    }
    a.extend(extra.iter().cloned());
    a.extend(runtime_args(spec.runtime.as_deref()));
    a.extend([
        "--pull".into(),
        "never".into(),
        "--".into(),
        spec.image.clone(),
        agent::ARG.into(),
        "init".into(),
        "--user".into(),
        spec.user.to_string(),
    ]);
    if let Some(n) = &spec.agent.user_name {
        a.extend(["--user-name".into(), n.clone()]);
    }
    if spec.proxy.is_some() {
        a.push("--proxy-relay".into());
    }
    a
}

/// The environment of every process of an allowlist sandbox: `HTTP_PROXY`, `HTTPS_PROXY` (and
/// their lower-case forms, which curl, apt and Python read) name the relay on its loopback;
/// `NO_PROXY`/`no_proxy` keep loopback direct.
pub fn proxy_env() -> Vec<(&'static str, String)> {
    let url = format!("http://127.0.0.1:{}", agent::proxy::PORT);
    let direct = "localhost,127.0.0.1,::1".to_string();
    vec![
        ("HTTP_PROXY", url.clone()),
        ("http_proxy", url.clone()),
        ("HTTPS_PROXY", url.clone()),
        ("https_proxy", url),
        ("NO_PROXY", direct.clone()),
        ("no_proxy", direct),
    ]
}

/// `--ulimit` arguments for the open-files and processes rlimits (`setrlimit(2)`), where
/// `nofile`/`nproc` of 0 mean automatic:
/// - Docker: the daemon, not this client, starts the container, so our limits say nothing
///   about what it can grant; automatic passes nothing (the daemon's defaults), a value is
///   passed as given.
/// - Podman: the client's own process starts the OCI runtime, which cannot raise an rlimit
///   above the client's hard limit; Podman's defaults (1048576 files, pid_max processes) exceed
///   it on many hosts ("error setting rlimit type 7: operation not permitted"). Automatic passes
///   the highest allowed value: the hard `RLIMIT_NOFILE` (at most `nr_open`) and the hard
///   `RLIMIT_NPROC` (at most `pid_max`, to which Podman lowers its own); a value above that is
///   refused here, with the reason, instead of by the runtime.
///
/// Errors: a configured value the host cannot grant (Podman).
pub fn ulimit_args(
    flavor: Flavor,
    nofile: u64,
    nproc: u64,
    host: &HostLimits,
) -> Result<Vec<String>, String> {
    let min = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let limits = [
        (
            "nofile",
            "ulimit_nofile",
            "`ulimit -Hn`, /proc/sys/fs/nr_open",
            nofile,
            min(host.nofile_hard, host.nr_open),
        ),
        (
            "nproc",
            "ulimit_nproc",
            "`ulimit -Hu`, /proc/sys/kernel/pid_max",
            nproc,
            min(host.nproc_hard, host.pid_max),
        ),
    ];
    let mut a = Vec::new();
    for (name, key, source, want, ceiling) in limits {
        let value = match (flavor, want, ceiling) {
            (Flavor::Docker, 0, _) | (Flavor::Podman, 0, None) => continue,
            (Flavor::Podman, 0, Some(c)) => c,
            (Flavor::Podman, w, Some(c)) if w > c => {
                return Err(format!(
                    "{key} = {w} exceeds this host's limit of {c} ({source}), which Podman cannot raise; lower {key}, or set 0 for the highest allowed"
                ));
            }
            (_, w, _) => w,
        };
        a.push("--ulimit".into());
        a.push(format!("{name}={value}:{value}"));
    }
    Ok(a)
}

/// `--runtime NAME` when an OCI runtime is configured (both engines accept it on `run`).
pub fn runtime_args(runtime: Option<&str>) -> Vec<String> {
    runtime
        .map(|r| vec!["--runtime".to_string(), r.to_string()])
        .unwrap_or_default()
}

/// Whether the OCI runtime `runtime` is gVisor: named `runsc`, or `runsc-` something (as
/// `runsc-kvm`), the names gVisor's documentation registers it under.
pub fn is_gvisor(runtime: Option<&str>) -> bool {
    runtime.is_some_and(|r| r == "runsc" || r.starts_with("runsc-"))
}

/// Host tasks gVisor's own processes take before the sandbox runs anything (the Sentry's and
/// the Gofer's threads: 38 measured with runsc 20221219, `--platform=ptrace`).
pub const GVISOR_HOST_TASKS_BASE: u64 = 64;
/// Host tasks each process inside a gVisor sandbox may take (with `--platform=ptrace` every
/// process of the sandbox is a host stub process with threads of its own, and the Sentry adds
/// threads as it serves them: about 11 each, measured).
pub const GVISOR_HOST_TASKS_PER_PROCESS: u64 = 16;

/// The host `--pids-limit` of a gVisor sandbox whose process limit is `pids`: the host's pids
/// cgroup counts every task of the gVisor sandbox (Sentry, Gofer, stub processes), not the
/// processes inside it, and a gVisor sandbox that reaches it dies whole. So the limit of the
/// sandbox's processes is the rlimit gVisor's kernel enforces (`--ulimit nproc=N:N`: a fork
/// past it fails with EAGAIN, as on Linux), and the host's cgroup is a ceiling above it
/// ([`GVISOR_HOST_TASKS_BASE`] + [`GVISOR_HOST_TASKS_PER_PROCESS`] × `pids`) that still stops
/// a runaway sandbox from exhausting the host's PIDs.
pub fn gvisor_host_pids(pids: u32) -> u64 {
    GVISOR_HOST_TASKS_BASE + GVISOR_HOST_TASKS_PER_PROCESS * u64::from(pids)
}

/// Whether `run`'s stderr says the engine has no runtime of the requested name (Docker:
/// "Unknown runtime specified", Podman: "OCI runtime ... not found").
fn is_unknown_runtime(stderr: &str) -> bool {
    stderr.contains("Unknown runtime specified")
        || stderr.contains("unknown or invalid runtime name")
        || (stderr.contains("OCI runtime") && stderr.contains("not found"))
}

fn unknown_runtime(bin: &str, name: &str) -> Error {
    let fix = if is_gvisor(Some(name)) {
        "run scripts/setup-gvisor.sh (as root) to install and register gVisor's runsc".to_string()
    } else {
        format!("register it in the engine's configuration (`{bin} info` lists its runtimes), or fix runtime / --runtime")
    };
    Error::Invalid(format!(
        "the container engine `{bin}` has no OCI runtime named '{name}' (runtime / --runtime); {fix}"
    ))
}

/// A hint for a `run` failure whose cause h9sandbox knows, starting with "; ", or "".
pub fn run_failure_hint(stderr: &str) -> &'static str {
    if stderr.contains("error setting rlimit") {
        "; an rlimit exceeds what the runtime may grant: lower ulimit_nofile / ulimit_nproc (0 = automatic)"
    } else if stderr.contains("crun") && stderr.contains("cgroup") {
        "; crun cannot use this host's cgroups: set runtime = \"runc\" (apt-get install runc)"
    } else {
        ""
    }
}

/// `--mount` value binding the host path `source` at `target` (read-only with `readonly`).
/// `--mount` is parsed as one CSV record, so a field holding `,` or `"` is quoted (RFC 4180);
/// `:` and spaces need nothing, unlike `-v`.
pub fn bind_mount_arg(source: &str, target: &str, readonly: bool) -> String {
    format!(
        "type=bind,{},{}{}",
        csv_field(format!("source={source}")),
        csv_field(format!("target={target}")),
        if readonly { ",readonly" } else { "" }
    )
}

/// `--cpus` value: Docker accepts decimals; print without a useless fraction.
pub fn format_cpus(cpus: f64) -> String {
    let s = format!("{cpus:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `docker inspect` arguments printing the container's `.State` and `.HostConfig` as one JSON
/// object (both engines name the fields alike).
pub fn inspect_args(container: &str) -> Vec<String> {
    vec![
        "inspect".into(),
        "--type".into(),
        "container".into(),
        "--format".into(),
        r#"{"State":{{json .State}},"HostConfig":{{json .HostConfig}}}"#.into(),
        container.into(),
    ]
}

/// `ps -a` arguments listing containers with every label in `labels`. Docker: one line per
/// container, ID, name, state, status and sandbox ID separated by tabs. Podman: a JSON array
/// (its template's `.State` is the human status and it has no `.Label`).
pub fn ps_args(flavor: Flavor, labels: &[(&str, &str)]) -> Vec<String> {
    let mut a: Vec<String> = vec!["ps".into(), "-a".into(), "--no-trunc".into()];
    for (k, v) in labels {
        a.push("--filter".into());
        a.push(if v.is_empty() {
            format!("label={k}")
        } else {
            format!("label={k}={v}")
        });
    }
    a.push("--format".into());
    a.push(match flavor {
        Flavor::Docker => format!(
            "{{{{.ID}}}}\t{{{{.Names}}}}\t{{{{.State}}}}\t{{{{.Status}}}}\t{{{{.Label \"{LABEL_ID}\"}}}}\t{{{{.Label \"{LABEL_STATE_DIR}\"}}}}"
        ),
        Flavor::Podman => "json".into(),
    });
    a
}

/// Parses the output of [`ps_args`].
pub fn parse_ps(flavor: Flavor, out: &str) -> Result<Vec<ContainerSummary>> {
    match flavor {
        Flavor::Docker => Ok(out.lines().filter_map(parse_ps_line).collect()),
        Flavor::Podman => parse_podman_ps(out),
    }
}

fn parse_podman_ps(json: &str) -> Result<Vec<ContainerSummary>> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Entry {
        id: String,
        #[serde(default)]
        names: Vec<String>,
        #[serde(default)]
        state: String,
        #[serde(default)]
        status: String,
        #[serde(default)]
        labels: Option<std::collections::BTreeMap<String, String>>,
    }
    if json.trim().is_empty() {
        return Ok(Vec::new());
    }
    let entries: Vec<Entry> = serde_json::from_str(json)
        .with_context(|| format!("cannot parse `podman ps` output: {json}"))?;
    Ok(entries
        .into_iter()
        .map(|e| ContainerSummary {
            id: e.id,
            name: e.names.into_iter().next().unwrap_or_default(),
            state: e.state,
            status: e.status,
            sandbox_id: e
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_ID).cloned())
                .filter(|s| !s.is_empty()),
            state_dir: e
                .labels
                .and_then(|mut l| l.remove(LABEL_STATE_DIR))
                .filter(|s| !s.is_empty()),
        })
        .collect())
}

/// `docker exec` arguments running `spec` in `container`: as `spec.user`, through the
/// in-container binary (`h9sandbox agent exec`, which installs the set-ID filter) when the
/// sandbox has one, else (sandboxes made before the agent) a shell command line through
/// [`SHELL_WRAPPER`] and an argument vector as it is.
pub fn exec_args(container: &str, spec: &ExecSpec) -> Vec<String> {
    let mut a: Vec<String> = vec!["exec".into()];
    if spec.interactive {
        a.push("-i".into());
    }
    a.push("-e".into());
    a.push(format!("{EXEC_MARKER_VAR}={}", spec.marker));
    for (k, v) in &spec.env {
        a.push("-e".into());
        a.push(format!("{k}={v}"));
    }
    // A current wrapper enters the directory itself, as the user ([`agent::wrap`]).
    let enters = spec.wrapped && spec.wrapper_enters;
    if !enters {
        a.push("-w".into());
        a.push(spec.cwd.to_string_lossy().into_owned());
    }
    // A name is looked up by the wrapper, started as root, as the agent does; else the engine
    // starts the command as the user.
    let by_name = match &spec.user {
        Some(u @ RunAs::Name { .. }) if enters => Some(u.to_string()),
        _ => None,
    };
    match (&spec.user, &by_name) {
        (_, Some(_)) => a.extend(["--user".into(), RunAs::ROOT.to_string()]),
        (Some(u), None) => a.extend(["--user".into(), u.to_string()]),
        (None, None) => {}
    }
    a.push(container.into());
    let wrapper = |a: &mut Vec<String>| {
        a.extend([agent::BIN.into(), agent::ARG.into(), "exec".into()]);
        if let Some(name) = &by_name {
            a.extend(["--user".into(), name.clone()]);
        }
        if enters {
            a.extend(["--cwd".into(), spec.cwd.to_string_lossy().into_owned()]);
        }
        if let Some(t) = spec.backstop {
            a.extend(["--timeout-ms".into(), t.as_millis().to_string()]);
        }
    };
    match (&spec.command, spec.wrapped) {
        (CommandLine::Shell(line), true) => {
            wrapper(&mut a);
            a.extend(["--shell".into(), "--".into(), line.clone()]);
        }
        (CommandLine::Argv(argv), true) => {
            wrapper(&mut a);
            a.push("--".into());
            a.extend(argv.iter().cloned());
        }
        (CommandLine::Shell(line), false) => a.extend([
            "sh".into(),
            "-c".into(),
            SHELL_WRAPPER.into(),
            "h9sandbox".into(),
            line.clone(),
        ]),
        (CommandLine::Argv(argv), false) => a.extend(argv.iter().cloned()),
    }
    a
}

/// `docker exec` arguments killing the processes of the exec `spec` from inside the container:
/// h9sandbox's own binary (`agent kill-marked`, which kills their descendants too), as the
/// exec's user (who may read their environments and signal them), where the sandbox has it;
/// else [`KILL_SCRIPT`], with the image's `sh`.
pub fn kill_args(container: &str, spec: &ExecSpec) -> Vec<String> {
    if spec.wrapped {
        let mut a: Vec<String> = vec!["exec".into()];
        if let Some(u) = &spec.user {
            a.extend(["--user".into(), u.to_string()]);
        }
        a.extend([
            container.into(),
            agent::BIN.into(),
            agent::ARG.into(),
            "kill-marked".into(),
            spec.marker.clone(),
        ]);
        return a;
    }
    vec![
        "exec".into(),
        container.into(),
        "sh".into(),
        "-c".into(),
        KILL_SCRIPT.into(),
        "h9sandbox-kill".into(),
        spec.marker.clone(),
    ]
}

/// Parses `docker image inspect --format '{{json .Config}}'`.
pub fn parse_image_config(json: &str) -> Result<ImageConfig> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Config {
        #[serde(default)]
        entrypoint: Option<Vec<String>>,
        #[serde(default)]
        cmd: Option<Vec<String>>,
        #[serde(default)]
        user: Option<String>,
        #[serde(default)]
        working_dir: Option<String>,
        #[serde(default)]
        env: Option<Vec<String>>,
    }
    let c: Option<Config> = serde_json::from_str(json.trim())
        .with_context(|| format!("cannot parse the image's configuration: {json}"))?;
    let c = c.unwrap_or(Config {
        entrypoint: None,
        cmd: None,
        user: None,
        working_dir: None,
        env: None,
    });
    Ok(ImageConfig {
        entrypoint: c.entrypoint.unwrap_or_default(),
        cmd: c.cmd.unwrap_or_default(),
        user: c.user.unwrap_or_default(),
        working_dir: c.working_dir.unwrap_or_default(),
        env: c.env.unwrap_or_default(),
    })
}

/// Parses the output of [`inspect_args`].
pub fn parse_inspect(json: &str) -> Result<ContainerStatus> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Inspect {
        state: State,
        host_config: Option<HostConfig>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct HostConfig {
        #[serde(default)]
        memory: Option<i64>,
        #[serde(default)]
        nano_cpus: Option<i64>,
        #[serde(default)]
        cpu_quota: Option<i64>,
        #[serde(default)]
        cpu_period: Option<i64>,
        #[serde(default)]
        pids_limit: Option<i64>,
        #[serde(default)]
        runtime: Option<String>,
        #[serde(default)]
        ulimits: Option<Vec<Ulimit>>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Ulimit {
        name: String,
        #[serde(default)]
        soft: i64,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct State {
        status: String,
        running: bool,
        #[serde(default)]
        exit_code: i64,
        #[serde(default)]
        error: String,
        #[serde(default, rename = "OOMKilled")]
        oom_killed: bool,
        #[serde(default)]
        pid: i64,
    }
    let i: Inspect = serde_json::from_str(json.trim())
        .with_context(|| format!("cannot parse the engine's container state: {json}"))?;
    let s = i.state;
    // Negative values (-1: unlimited, in some versions) count as no limit.
    let pos = |v: Option<i64>| v.filter(|v| *v > 0).map_or(0, |v| v as u64);
    let applied = i.host_config.map(|h| {
        let nano = pos(h.nano_cpus);
        let (quota, period) = (pos(h.cpu_quota), pos(h.cpu_period));
        AppliedLimits {
            memory_bytes: pos(h.memory),
            nano_cpus: if nano > 0 || quota == 0 || period == 0 {
                nano
            } else {
                quota * 1_000_000_000 / period
            },
            // gVisor: the limit of the sandbox's processes is the nproc rlimit its kernel
            // enforces; the host's cgroup is only a ceiling (see gvisor_host_pids).
            // (and counts only while that ceiling is in force).
            pids_limit: if is_gvisor(h.runtime.as_deref()) {
                let nproc = h.ulimits.iter().flatten().find(|u| u.name == "nproc");
                let nproc = pos(nproc.map(|u| u.soft));
                let ceiling = u32::try_from(nproc).map_or(u64::MAX, gvisor_host_pids);
                if nproc > 0 && pos(h.pids_limit) == ceiling {
                    nproc
                } else {
                    0
                }
            } else {
                pos(h.pids_limit)
            },
        }
    });
    Ok(ContainerStatus {
        status: s.status,
        running: s.running,
        exit_code: s.exit_code,
        error: s.error,
        oom_killed: s.oom_killed,
        applied,
        pid: u32::try_from(s.pid).unwrap_or(0),
    })
}

/// Whether `c` carries every `key=value` of `labels` that a summary holds (the sandbox ID and
/// the state directory; other labels are left to the engine's filter).
fn summary_has_labels(c: &ContainerSummary, labels: &[(&str, &str)]) -> bool {
    let holds = |have: &Option<String>, want: &str| match have {
        Some(h) => want.is_empty() || h == want,
        None => false,
    };
    labels.iter().all(|(k, v)| match *k {
        LABEL_STATE_DIR => holds(&c.state_dir, v),
        LABEL_ID => holds(&c.sandbox_id, v),
        _ => true,
    })
}

/// Parses `volume inspect --format '{{.Name}}\t{{json .Labels}}'`: one volume a line, its
/// name and labels (`null` or unparsable labels: none).
fn parse_volume_labels(out: &str) -> Vec<(String, std::collections::BTreeMap<String, String>)> {
    out.lines()
        .filter_map(|l| {
            let (name, json) = l.split_once('\t')?;
            let labels = serde_json::from_str::<Option<_>>(json.trim())
                .ok()
                .flatten()
                .unwrap_or_default();
            Some((name.to_string(), labels))
        })
        .collect()
}

fn parse_ps_line(line: &str) -> Option<ContainerSummary> {
    let mut f = line.split('\t');
    let id = f.next()?.to_string();
    if id.is_empty() {
        return None;
    }
    let name = f.next().unwrap_or_default().to_string();
    let state = f.next().unwrap_or_default().to_string();
    let status = f.next().unwrap_or_default().to_string();
    let mut label = || {
        f.next()
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "<no value>")
            .map(str::to_string)
    };
    let sandbox_id = label();
    let state_dir = label();
    Some(ContainerSummary {
        id,
        name,
        state,
        status,
        sandbox_id,
        state_dir,
    })
}

/// When the client's stderr says the daemon cannot be reached, the reason in one line.
pub fn unreachable_reason(stderr: &str) -> Option<String> {
    const SIGNS: [&str; 5] = [
        "Cannot connect to the Docker daemon",
        "error during connect",
        "Is the docker daemon running",
        "failed to connect to the docker API",
        "Cannot connect to Podman",
    ];
    SIGNS.iter().any(|s| stderr.contains(s)).then(|| {
        format!(
            "{} (start the daemon, or point DOCKER_HOST / engine_bin at a running engine)",
            first_error_line(stderr)
        )
    })
}

fn is_no_such_container(stderr: &str) -> bool {
    stderr.contains("No such container")
        || stderr.contains("no such container")
        || stderr.contains("No such object")
        || stderr.contains("no container with")
}

/// Whether `docker rm` failed because another client is already removing the container.
fn is_removal_in_progress(stderr: &str) -> bool {
    stderr.contains("is already in progress")
}

fn is_no_such_image(stderr: &str) -> bool {
    stderr.contains("No such image")
        || stderr.contains("Unable to find image")
        || stderr.contains("image not known")
}

/// The first meaningful line of a client's stderr, without the `docker: ` prefix.
pub fn first_error_line(stderr: &str) -> String {
    let line = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("WARNING"))
        .unwrap_or("(no message)");
    line.strip_prefix("docker: ").unwrap_or(line).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::AgentMount;
    use crate::types::{Ids, Limits, Network};
    use std::collections::BTreeMap;

    fn spec(workdir: &str) -> ContainerSpec {
        ContainerSpec {
            name: "h9sandbox-abc".into(),
            image: "ubuntu:22.04".into(),
            workdir: workdir.into(),
            limits: Limits {
                cpus: 1.5,
                memory: "512m".into(),
                pids_limit: 256,
                tmp_size: "256m".into(),
                network: Network::None,
                allow: Vec::new(),
                caps: crate::types::Caps::Minimal,
            },
            labels: BTreeMap::from([("h9sandbox".into(), "1".into())]),
            user: Ids::ROOT,
            agent: AgentMount {
                root: "/state/mounts/abc".into(),
                binary: "/opt/h9/h9sandbox".into(),
                run_dir: "/state/run/abc".into(),
                user_name: None,
            },
            scratch_volume: "h9sandbox-abc".into(),
            runtime: None,
            proxy: None,
            env: Vec::new(),
        }
    }

    #[test]
    fn run_args_are_hardened_and_exact() {
        let got = shell_line(
            "docker",
            &run_args(Flavor::Docker, &spec("/w"), &[])
                .into_iter()
                .map(Into::into)
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            got,
            "docker run -d --name h9sandbox-abc --label h9sandbox=1 --user 0:0 --cap-drop all \
             --cap-add DAC_OVERRIDE --cap-add SETUID --cap-add SETGID \
             --security-opt no-new-privileges:true --pids-limit 256 --cpus 1.5 --memory 512m \
             --tmpfs /tmp:size=256m,nosuid,noexec,nodev --network none \
             --mount type=volume,source=h9sandbox-abc,destination=/var/tmp,volume-label=h9sandbox=1 \
             --env TMPDIR=/var/tmp \
             --mount type=bind,source=/w,target=/w --workdir /w \
             --mount type=bind,source=/state/mounts/abc,target=/.h9sandbox,readonly \
             --mount type=bind,source=/opt/h9/h9sandbox,target=/.h9sandbox/h9sandbox,readonly \
             --mount type=bind,source=/state/run/abc,target=/.h9sandbox/run \
             --entrypoint /.h9sandbox/h9sandbox --pull never -- ubuntu:22.04 \
             agent init --user 0:0"
        );
    }

    #[test]
    fn build_args_are_exact_and_never_loosen_the_network() {
        let spec = BuildSpec {
            context: "/p".into(),
            dockerfile: "/p/.devcontainer/Dockerfile".into(),
            tag: "h9sandbox-devcontainer-p-0123:latest".into(),
            args: vec![("A".into(), "1 2".into())],
            target: Some("dev".into()),
            cache_from: vec!["base:1".into()],
            no_network: true,
            labels: BTreeMap::from([("h9sandbox.devcontainer".into(), "/p/x.json".into())]),
        };
        assert_eq!(
            build_args(&spec).join(" "),
            "build --force-rm --tag h9sandbox-devcontainer-p-0123:latest --file /p/.devcontainer/Dockerfile \
             --build-arg A=1 2 --target dev --cache-from base:1 --network none \
             --label h9sandbox.devcontainer=/p/x.json -- /p"
        );
        let plain = BuildSpec {
            no_network: false,
            ..spec
        };
        assert!(!build_args(&plain).contains(&"none".to_string()));
    }

    #[test]
    fn the_probe_container_is_labelled_offline_and_never_pulls() {
        assert_eq!(
            probe_create_args("img:1", &[("h9sandbox", "1")]).join(" "),
            "create --label h9sandbox=1 --network none --entrypoint /.h9sandbox-never-started --pull never -- img:1"
        );
    }

    #[test]
    fn extra_environment_goes_before_our_own() {
        let spec = ContainerSpec {
            env: vec![("TMPDIR".into(), "/mine".into()), ("A".into(), "b".into())],
            ..spec("/w")
        };
        let args = run_args(Flavor::Docker, &spec, &[]);
        let at = |w: &str| args.iter().position(|a| a == w).unwrap();
        assert!(at("TMPDIR=/mine") < at("TMPDIR=/var/tmp"), "{args:?}");
        assert!(args.contains(&"A=b".to_string()));
    }

    #[test]
    fn engine_options_go_before_pull() {
        let extra = vec!["--ulimit".to_string(), "nofile=10:10".into()];
        let spec = ContainerSpec {
            runtime: Some("runc".into()),
            ..spec("/w")
        };
        let a = run_args(Flavor::Docker, &spec, &extra);
        let at = a.iter().position(|w| w == "--pull").unwrap();
        assert_eq!(
            a[at - 4..at],
            ["--ulimit", "nofile=10:10", "--runtime", "runc"]
        );
        assert_eq!(
            a[at..],
            [
                "--pull",
                "never",
                "--",
                "ubuntu:22.04",
                "agent",
                "init",
                "--user",
                "0:0"
            ]
        );
    }

    #[test]
    fn gvisor_gets_a_host_ceiling_and_its_own_process_limit() {
        assert!(is_gvisor(Some("runsc")) && is_gvisor(Some("runsc-kvm")));
        assert!(!is_gvisor(Some("runc")) && !is_gvisor(Some("myrunsc")) && !is_gvisor(None));
        let spec = ContainerSpec {
            runtime: Some("runsc".into()),
            ..spec("/w")
        };
        let a = run_args(Flavor::Docker, &spec, &[]);
        let at = a.iter().position(|w| w == "--pids-limit").unwrap();
        assert_eq!(a[at + 1], (64 + 16 * 256).to_string());
        // What inspect reports as applied under gVisor is the nproc rlimit, not the ceiling.
        let json = r#"{"State":{"Status":"running","Running":true},"HostConfig":{"Memory":1,"NanoCpus":1,"PidsLimit":4160,"Runtime":"runsc","Ulimits":[{"Name":"nofile","Hard":9,"Soft":9},{"Name":"nproc","Hard":256,"Soft":256}]}}"#;
        assert_eq!(
            parse_inspect(json).unwrap().applied.unwrap().pids_limit,
            256
        );
        let json = json
            .replace("Soft\":256", "Soft\":0")
            .replace(r#""Soft":256"#, r#""Soft":0"#);
        assert_eq!(parse_inspect(&json).unwrap().applied.unwrap().pids_limit, 0);
        let runc = r#"{"State":{"Status":"running","Running":true},"HostConfig":{"PidsLimit":40,"Runtime":"runc","Ulimits":null}}"#;
        assert_eq!(parse_inspect(runc).unwrap().applied.unwrap().pids_limit, 40);
        assert!(is_unknown_runtime(
            "docker: Error response from daemon: Unknown runtime specified runsx."
        ));
        assert!(is_unknown_runtime(
            "Error: default OCI runtime \"runsx\" not found: invalid argument"
        ));
        assert!(unknown_runtime("docker", "runsc")
            .to_string()
            .contains("scripts/setup-gvisor.sh"));
    }

    #[test]
    fn ulimits_docker_passes_only_what_is_configured() {
        let host = HostLimits {
            nofile_hard: Some(20000),
            nr_open: Some(1048576),
            nproc_hard: Some(96365),
            pid_max: Some(32768),
        };
        assert_eq!(
            ulimit_args(Flavor::Docker, 0, 0, &host).unwrap(),
            Vec::<String>::new()
        );
        // The daemon grants them, not this client: no check against our limits.
        assert_eq!(
            ulimit_args(Flavor::Docker, 50000, 100, &host).unwrap(),
            [
                "--ulimit",
                "nofile=50000:50000",
                "--ulimit",
                "nproc=100:100"
            ]
        );
    }

    #[test]
    fn ulimits_podman_stay_within_the_hosts_hard_limits() {
        let host = HostLimits {
            nofile_hard: Some(20000),
            nr_open: Some(1048576),
            nproc_hard: Some(96365),
            pid_max: Some(32768),
        };
        // Automatic: the hard nofile limit, and nproc capped at pid_max (Podman lowers its own).
        assert_eq!(
            ulimit_args(Flavor::Podman, 0, 0, &host).unwrap(),
            [
                "--ulimit",
                "nofile=20000:20000",
                "--ulimit",
                "nproc=32768:32768"
            ]
        );
        assert_eq!(
            ulimit_args(Flavor::Podman, 1024, 512, &host).unwrap(),
            ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=512:512"]
        );
        let err = ulimit_args(Flavor::Podman, 20001, 0, &host).unwrap_err();
        assert!(
            err.starts_with("ulimit_nofile = 20001 exceeds this host's limit of 20000"),
            "{err}"
        );
        let err = ulimit_args(Flavor::Podman, 0, 40000, &host).unwrap_err();
        assert!(
            err.contains("ulimit_nproc = 40000") && err.contains("32768"),
            "{err}"
        );
        // An unlimited hard limit is bounded by the kernel's ceiling; none known: Podman decides.
        let open = HostLimits {
            nofile_hard: None,
            nr_open: Some(1048576),
            nproc_hard: None,
            pid_max: None,
        };
        assert_eq!(
            ulimit_args(Flavor::Podman, 0, 0, &open).unwrap(),
            ["--ulimit", "nofile=1048576:1048576"]
        );
    }

    #[test]
    fn runtime_is_passed_only_when_configured() {
        assert_eq!(runtime_args(None), Vec::<String>::new());
        assert_eq!(runtime_args(Some("runc")), ["--runtime", "runc"]);
    }

    #[test]
    fn run_failures_get_a_hint_when_the_cause_is_known() {
        assert!(run_failure_hint("Error: runc: ... error setting rlimit type 7: operation not permitted: OCI permission denied").contains("ulimit_nofile"));
        assert_eq!(run_failure_hint("Error: something else"), "");
    }

    #[test]
    fn inspect_reads_state_and_applied_limits_of_both_engines() {
        assert_eq!(
            inspect_args("c1"),
            [
                "inspect",
                "--type",
                "container",
                "--format",
                r#"{"State":{{json .State}},"HostConfig":{{json .HostConfig}}}"#,
                "c1"
            ]
        );
        // Docker 20.10.
        let s = parse_inspect(r#"{"State":{"Status":"running","Running":true,"Paused":false,"OOMKilled":false,"Dead":false,"Pid":4,"ExitCode":0,"Error":""},"HostConfig":{"Memory":268435456,"NanoCpus":500000000,"CpuQuota":0,"CpuPeriod":0,"PidsLimit":40}}"#).unwrap();
        assert!(s.running);
        assert_eq!(
            s.applied,
            Some(AppliedLimits {
                memory_bytes: 268435456,
                nano_cpus: 500000000,
                pids_limit: 40
            })
        );
        // Podman 4.3 (cgroup v1), which also has OciVersion, ConmonPid, ...; and limits given as
        // quota/period; and none at all (null, -1).
        let s = parse_inspect(r#"{"State":{"OciVersion":"1.0.2-dev","Status":"exited","Running":false,"OOMKilled":true,"ExitCode":137,"Error":"","ConmonPid":7},"HostConfig":{"Memory":0,"NanoCpus":0,"CpuQuota":150000,"CpuPeriod":100000,"PidsLimit":-1}}"#).unwrap();
        assert_eq!(
            (s.status.as_str(), s.exit_code, s.oom_killed),
            ("exited", 137, true)
        );
        assert_eq!(
            s.applied,
            Some(AppliedLimits {
                memory_bytes: 0,
                nano_cpus: 1_500_000_000,
                pids_limit: 0
            })
        );
        let s = parse_inspect(
            r#"{"State":{"Status":"created","Running":false},"HostConfig":{"PidsLimit":null}}"#,
        )
        .unwrap();
        assert_eq!(s.applied, Some(AppliedLimits::default()));
    }

    #[test]
    fn ps_differs_between_docker_and_podman() {
        let labels = [("h9sandbox", "1"), ("h9sandbox.state_dir", "/s")];
        let d = ps_args(Flavor::Docker, &labels);
        assert_eq!(
            d[..7],
            [
                "ps",
                "-a",
                "--no-trunc",
                "--filter",
                "label=h9sandbox=1",
                "--filter",
                "label=h9sandbox.state_dir=/s"
            ]
        );
        assert_eq!(
            d[7..],
            [
                "--format",
                "{{.ID}}\t{{.Names}}\t{{.State}}\t{{.Status}}\t{{.Label \"h9sandbox.id\"}}\t{{.Label \"h9sandbox.state_dir\"}}"
            ]
        );
        let p = ps_args(Flavor::Podman, &labels);
        assert_eq!(p[..7], d[..7]);
        assert_eq!(p[7..], ["--format", "json"]);
        let listed = parse_ps(
            Flavor::Podman,
            r#"[{"Id":"abc","Names":["h9sandbox-1"],"State":"exited","Status":"Exited (137) 2 seconds ago","Labels":{"h9sandbox":"1","h9sandbox.id":"uuid-1"}},
                {"Id":"def","Names":["other"],"State":"running","Status":"Up 1 second ago","Labels":null}]"#,
        )
        .unwrap();
        assert_eq!(
            listed,
            vec![
                ContainerSummary {
                    id: "abc".into(),
                    name: "h9sandbox-1".into(),
                    state: "exited".into(),
                    status: "Exited (137) 2 seconds ago".into(),
                    sandbox_id: Some("uuid-1".into()),
                    state_dir: None,
                },
                ContainerSummary {
                    id: "def".into(),
                    name: "other".into(),
                    state: "running".into(),
                    status: "Up 1 second ago".into(),
                    sandbox_id: None,
                    state_dir: None,
                },
            ]
        );
        assert!(parse_ps(Flavor::Podman, "").unwrap().is_empty());
        assert!(parse_ps(Flavor::Podman, "[]").unwrap().is_empty());
    }

    #[test]
    fn the_flavor_follows_the_binary_name() {
        assert_eq!(Docker::new("docker").kind(), EngineKind::Docker);
        assert_eq!(Docker::new("/usr/bin/podman").kind(), EngineKind::Podman);
        assert_eq!(
            Docker::with_flavor(Flavor::Podman, "/opt/p").kind(),
            EngineKind::Podman
        );
    }

    #[test]
    fn run_args_run_the_agent_as_root_for_the_user() {
        let mut spec = ContainerSpec {
            user: Ids {
                uid: 1000,
                gid: 100,
            },
            ..spec("/w")
        };
        spec.agent.user_name = Some("alice".into());
        let a = run_args(Flavor::Docker, &spec, &[]);
        let at = a.iter().position(|x| x == "--user").unwrap();
        assert_eq!(a[at + 1], "0:0");
        let image = a.iter().position(|x| x == "ubuntu:22.04").unwrap();
        assert_eq!(
            a[image + 1..],
            [
                "agent",
                "init",
                "--user",
                "1000:100",
                "--user-name",
                "alice"
            ]
        );
    }

    #[test]
    fn bind_mount_quotes_commas_and_quotes_only() {
        assert_eq!(
            bind_mount_arg("/a b:c", "/a b:c", false),
            "type=bind,source=/a b:c,target=/a b:c"
        );
        assert_eq!(
            bind_mount_arg("/a,b", "/a,b", false),
            r#"type=bind,"source=/a,b","target=/a,b""#
        );
        assert_eq!(
            bind_mount_arg(r#"/a"b"#, "/x", true),
            r#"type=bind,"source=/a""b",target=/x,readonly"#
        );
    }

    #[test]
    fn exec_args_mark_the_process_tree() {
        let spec = ExecSpec {
            command: CommandLine::Shell("echo hi".into()),
            cwd: "/w/sub".into(),
            env: vec![("A".into(), "1".into())],
            interactive: false,
            marker: "m1".into(),
            user: Some(RunAs::Ids {
                uid: 1000,
                gid: 1000,
            }),
            wrapped: true,
            wrapper_enters: true,
            backstop: None,
        };
        let a = exec_args("c1", &spec);
        assert_eq!(
            a,
            [
                "exec",
                "-e",
                "H9SANDBOX_EXEC_ID=m1",
                "-e",
                "A=1",
                "--user",
                "1000:1000",
                "c1",
                "/.h9sandbox/h9sandbox",
                "agent",
                "exec",
                "--cwd",
                "/w/sub",
                "--shell",
                "--",
                "echo hi"
            ]
        );
        let argv = ExecSpec {
            command: CommandLine::Argv(vec!["printf".into(), "%s\n".into(), "a b".into()]),
            ..spec.clone()
        };
        assert_eq!(
            exec_args("c1", &argv)[8..],
            [
                "/.h9sandbox/h9sandbox",
                "agent",
                "exec",
                "--cwd",
                "/w/sub",
                "--",
                "printf",
                "%s\n",
                "a b"
            ]
        );
        // An older sandbox's wrapper knows neither --cwd nor --user: the engine does both.
        let older = ExecSpec {
            user: Some(RunAs::parse("nobody").unwrap()),
            wrapper_enters: false,
            ..spec.clone()
        };
        let a = exec_args("c1", &older);
        assert_eq!(a[5..9], ["-w", "/w/sub", "--user", "nobody"]);
        assert!(!a.contains(&"--cwd".to_string()), "{a:?}");
        // A name goes to a current wrapper, started as root, which looks it up as the agent does.
        let named = ExecSpec {
            user: Some(RunAs::parse("nobody:50").unwrap()),
            ..spec.clone()
        };
        let a = exec_args("c1", &named);
        assert_eq!(a[5..7], ["--user", "0:0"]);
        assert_eq!(a[11..13], ["--user", "nobody:50"]);
        // Sandboxes made before the agent: the shell wrapper, the container's user, `-w`.
        let legacy = ExecSpec {
            user: None,
            wrapped: false,
            wrapper_enters: false,
            ..spec.clone()
        };
        let a = exec_args("c1", &legacy);
        assert_eq!(a[7..10], ["c1", "sh", "-c"]);
        assert_eq!(a[11..], ["h9sandbox", "echo hi"]);
        let legacy_argv = ExecSpec {
            user: None,
            wrapped: false,
            wrapper_enters: false,
            ..argv
        };
        assert_eq!(
            exec_args("c1", &legacy_argv)[7..],
            ["c1", "printf", "%s\n", "a b"]
        );
        let a = exec_args(
            "c1",
            &ExecSpec {
                interactive: true,
                ..spec
            },
        );
        assert_eq!(a[..2], ["exec", "-i"]);
    }

    #[test]
    fn cpus_are_printed_plainly() {
        assert_eq!(format_cpus(1.0), "1");
        assert_eq!(format_cpus(0.5), "0.5");
        assert_eq!(format_cpus(0.25), "0.25");
    }

    #[test]
    fn ps_lines_parse() {
        let s =
            parse_ps_line("abc\th9sandbox-1\texited\tExited (137) 2 seconds ago\tuuid-1").unwrap();
        assert_eq!(
            (s.state.as_str(), s.sandbox_id.as_deref()),
            ("exited", Some("uuid-1"))
        );
        let s = parse_ps_line("abc\tn\trunning\tUp\t").unwrap();
        assert_eq!(s.sandbox_id, None);
    }

    #[test]
    fn exec_failures_are_told_from_command_output() {
        let d = Docker::new("docker");
        let gone = d.exec_failure(
            "c",
            b"Error response from daemon: No such container: c\n",
            1,
        );
        assert!(matches!(gone, Some(ExecFailure::ContainerGone(_))));
        let stopped = d.exec_failure(
            "c",
            b"Error response from daemon: Container abc is not running\n",
            1,
        );
        assert!(matches!(stopped, Some(ExecFailure::ContainerStopped(_))));
        let down = d.exec_failure("c", b"Cannot connect to the Docker daemon at unix:///x.sock. Is the docker daemon running?\n", 1);
        assert!(matches!(down, Some(ExecFailure::EngineUnavailable(_))));
        let user = d.exec_failure(
            "c",
            b"unable to find user nosuch: no matching entries in passwd file\n",
            126,
        );
        assert!(matches!(user, Some(ExecFailure::Other(m)) if m.contains("--user")));
        let cwd = d.exec_failure("c", b"OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd (\"/x\") set in config.json failed: no such file or directory: unknown\n", 126);
        assert!(matches!(cwd, Some(ExecFailure::Other(m)) if m.contains("--cwd")));
        // A command that fails with its own message is the command's business.
        assert_eq!(d.exec_failure("c", b"grep: x: No such file\n", 1), None);
        // Podman's messages and statuses.
        let p = Docker::with_flavor(Flavor::Podman, "podman");
        let gone = p.exec_failure(
            "c",
            b"Error: no container with name or ID \"c\" found: no such container\n",
            125,
        );
        assert!(
            matches!(gone, Some(ExecFailure::ContainerGone(r)) if r.contains("no longer exists"))
        );
        let stopped = p.exec_failure(
            "c",
            b"Error: can only create exec sessions on running containers: container state improper\n",
            255,
        );
        assert!(
            matches!(stopped, Some(ExecFailure::ContainerStopped(r)) if r.contains("not running"))
        );
        // Status 1 is a command's own with Podman, even when it prints "Error".
        assert_eq!(p.exec_failure("c", b"Error: my script failed\n", 1), None);
        assert_eq!(
            d.exec_failure("c", b"Error response from daemon: No such container", 0),
            None
        );
    }

    #[test]
    fn concurrent_removal_is_recognised() {
        assert!(is_removal_in_progress(
            "Error response from daemon: removal of container 6269d49ded71 is already in progress"
        ));
        assert!(!is_removal_in_progress(
            "Error response from daemon: No such container: x"
        ));
    }

    #[test]
    fn listings_are_checked_against_the_labels_asked_for() {
        let c = |dir: Option<&str>| ContainerSummary {
            id: "c".into(),
            name: "n".into(),
            state: "running".into(),
            status: "Up".into(),
            sandbox_id: Some("s".into()),
            state_dir: dir.map(str::to_string),
        };
        let want = [(LABEL_MANAGED, "1"), (LABEL_STATE_DIR, "/a")];
        assert!(summary_has_labels(&c(Some("/a")), &want));
        assert!(!summary_has_labels(&c(Some("/b")), &want));
        assert!(!summary_has_labels(&c(None), &want));
        assert!(summary_has_labels(&c(Some("/b")), &[(LABEL_ID, "")]));
        assert!(!summary_has_labels(&c(Some("/b")), &[(LABEL_ID, "t")]));
        let v = parse_volume_labels(
            "va\t{\"h9sandbox\":\"1\",\"h9sandbox.state_dir\":\"/a\"}\nvb\tnull\nbad line\n",
        );
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].0, "va");
        assert_eq!(v[0].1.get(LABEL_STATE_DIR).map(String::as_str), Some("/a"));
        assert!(v[1].1.is_empty());
    }
}
