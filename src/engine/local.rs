//! The local implementation of [`Environment`]: no container at all. Commands run directly on
//! the host, as the invoking user, in the work directory, exactly as they would without
//! h9sandbox (`engine = "local"`, which `SANDBOX_ENABLED=false` also selects).
//!
//! What stays the same as with a container: the record, the ID, `exec`'s exit statuses, streams,
//! JSON and timeout, the work-directory checks. What does not exist: isolation, the image,
//! resource limits, network restrictions, capabilities; `up` and `ls` say so.
//!
//! Finding a command's processes: every `exec` runs in its own process group
//! (`setpgid(2)` via `process_group(0)`) and carries the marker variables [`EXEC_MARKER_VAR`],
//! [`LOCAL_SANDBOX_VAR`] and [`LOCAL_STATE_DIR_VAR`] in its environment, which children inherit.
//! Killing an exec kills every process of our user whose `/proc/PID/environ` holds its marker,
//! and the process groups they lead or belong to (daemonized processes leave the group but keep
//! the environment; processes that clear their environment stay in the group). `down` kills
//! every process that carries the sandbox's name and state directory.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rustix::process::{kill_process, kill_process_group, Pid, Signal};
use tokio::process::Command;

use super::shell::{shell_line, shell_quote};
use super::{
    spawn_exec, BuildSpec, Capabilities, CommandLine, CommandOwnsAll, ContainerSpec,
    ContainerStatus, ContainerSummary, ContainerVerb, EngineExec, Environment, ExecSpec, ExecStdio,
    ImageConfig, Secret, SidecarSpec, SidecarSummary, VolumeSummary, EXEC_MARKER_VAR,
    LOCAL_SANDBOX_VAR, LOCAL_STATE_DIR_VAR,
};
use crate::error::Error;
use crate::poll::{poll_until, Backoff};
use crate::report::{Reporter, Silent};
use crate::types::EngineKind;

/// The host as an engine, for sandboxes of one state directory.
#[derive(Clone)]
pub(crate) struct Local {
    state_dir: PathBuf,
    reporter: Arc<dyn Reporter>,
}

impl std::fmt::Debug for Local {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Local")
            .field("state_dir", &self.state_dir)
            .field("verbose", &self.reporter.verbose())
            .finish()
    }
}

impl Local {
    /// The local engine for sandboxes recorded in `state_dir`, reporting to nobody until
    /// [`Local::reporter`] says otherwise.
    pub(crate) fn new(state_dir: &Path) -> Local {
        Local {
            state_dir: state_dir.to_path_buf(),
            reporter: Arc::new(Silent),
        }
    }

    /// The same engine, showing every command it starts to `reporter` when that is verbose
    /// ([`Reporter::command`]).
    pub(crate) fn reporter(mut self, reporter: Arc<dyn Reporter>) -> Local {
        self.reporter = reporter;
        self
    }

    fn state_label(&self) -> String {
        self.state_dir.to_string_lossy().into_owned()
    }

    /// The `var=value` pairs that mark every process of the sandbox `name`.
    fn sandbox_marks(&self, name: &str) -> [(String, String); 2] {
        [
            (LOCAL_SANDBOX_VAR.to_string(), name.to_string()),
            (LOCAL_STATE_DIR_VAR.to_string(), self.state_label()),
        ]
    }

    /// Ends every process marked with all of `marks`: SIGTERM, then after `grace` (if any is
    /// left) SIGKILL, repeated until a pass finds none.
    async fn end_marked(&self, marks: &[(String, String)], grace: Duration) -> Result<()> {
        if !grace.is_zero() && signal_marked(marks, Signal::TERM) > 0 {
            // Whether they all went within the grace or not, what is left gets SIGKILL.
            let _: Result<Option<()>, Infallible> =
                poll_until(grace, Backoff::fixed(Duration::from_millis(20)), || async {
                    Ok(marked_processes(marks).is_empty().then_some(()))
                })
                .await;
        }
        kill_marked(marks).await
    }
}

impl Environment for Local {
    fn kind(&self) -> EngineKind {
        EngineKind::Local
    }

    /// The host's own directories, nothing beside.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            host_mounts: true,
            sidecars: false,
            isolated_networks: true,
            node_ports: false,
            lifecycle: true,
            engine_exec: true,
        }
    }

    fn remote_host(&self) -> Option<String> {
        None
    }

    async fn run_sidecar(&self, spec: &SidecarSpec) -> Result<String> {
        Err(Error::Refused(format!(
            "the local engine runs no containers, so no sidecar ({}) either",
            spec.name
        ))
        .into())
    }

    async fn run_helper(&self, spec: &SidecarSpec) -> Result<String> {
        self.run_sidecar(spec).await
    }

    async fn list_sidecars(&self, _of: &str, _state_dir: &str) -> Result<Vec<SidecarSummary>> {
        Ok(Vec::new())
    }

    async fn logs_tail(&self, _container: &str, _lines: usize) -> Result<String> {
        Ok(String::new())
    }

    /// A local sandbox's ports are this host's own: nothing is published.
    async fn published_ports(&self, _container: &str) -> Result<Vec<crate::types::PublishedPort>> {
        Ok(Vec::new())
    }

    /// Checks the work directory; starts nothing. Returns the sandbox name.
    async fn create(&self, spec: &ContainerSpec) -> Result<String> {
        if !spec.workdir.is_dir() {
            return Err(Error::Usage(format!(
                "work directory {} is not a directory; pass an existing --workdir",
                spec.workdir.display()
            ))
            .into());
        }
        Ok(spec.name.clone())
    }

    /// Nothing to pull: there is no image.
    async fn pull(&self, _image: &str, _timeout: Duration) -> Result<()> {
        Ok(())
    }

    /// Always running: the host is.
    async fn inspect(&self, _container: &str) -> Result<Option<ContainerStatus>> {
        Ok(Some(ContainerStatus {
            status: "running".into(),
            running: true,
            exit_code: 0,
            error: String::new(),
            oom_killed: false,
            applied: None,
            pid: 0,
            ports: Vec::new(),
        }))
    }

    /// Ends the sandbox's leftover processes (background and daemonized ones of earlier execs):
    /// SIGTERM, SIGKILL after `grace`.
    async fn stop(&self, container: &str, grace: Duration) -> Result<()> {
        self.end_marked(&self.sandbox_marks(container), grace).await
    }

    /// Kills the sandbox's leftover processes.
    async fn remove(&self, container: &str) -> Result<()> {
        kill_marked(&self.sandbox_marks(container)).await
    }

    /// Local sandboxes have no labelled objects; nothing to remove.
    async fn remove_labelled(&self, _key: &str, _value: &str) -> Result<usize> {
        Ok(0)
    }

    /// Local sandboxes have no containers.
    async fn list(&self, _labels: &[(&str, &str)]) -> Result<Vec<ContainerSummary>> {
        Ok(Vec::new())
    }

    /// `sh -c WRAPPER h9sandbox COMMAND` on the host (bash when installed, as in a container), in
    /// `spec.cwd`, with our environment plus `spec.env` and the marker variables, in a process
    /// group of its own. An interactive command whose standard input is a terminal stays in our
    /// group, since a background group reading the terminal would be stopped (`SIGTTIN`).
    fn exec(
        &self,
        container: &str,
        spec: &ExecSpec,
        stdio: ExecStdio,
    ) -> Result<EngineExec, Error> {
        use std::io::IsTerminal;
        let args = local_exec_args(spec);
        if self.reporter.verbose() {
            let rest: Vec<std::ffi::OsString> = args[1..].iter().map(Into::into).collect();
            self.reporter.command(&format!(
                "+ cd {} && {}",
                shell_quote(&spec.cwd.to_string_lossy()),
                shell_line(&args[0], &rest)
            ));
        }
        let mut cmd = Command::new(&args[0]);
        cmd.args(&args[1..])
            .current_dir(&spec.cwd)
            .env(EXEC_MARKER_VAR, &spec.marker)
            .kill_on_drop(true);
        for (k, v) in self.sandbox_marks(container) {
            cmd.env(k, v);
        }
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        if !(spec.interactive && std::io::stdin().is_terminal()) {
            cmd.process_group(0);
        }
        spawn_exec(&mut cmd, stdio, Arc::new(CommandOwnsAll), &args[0])
    }

    /// Kills every process carrying the exec's marker, and their process groups.
    async fn kill_exec(&self, _container: &str, spec: &ExecSpec) -> Result<()> {
        kill_marked(&[(EXEC_MARKER_VAR.to_string(), spec.marker.clone())]).await
    }

    /// A local sandbox has no container to start, pause or thaw.
    async fn lifecycle(&self, verb: ContainerVerb, container: &str) -> Result<()> {
        Err(Error::Refused(format!(
            "sandbox {container} is local (no container): there is nothing to {}; `h9sandbox down` and `up` make a new one",
            verb.as_str()
        ))
        .into())
    }

    /// A local sandbox has no container file system to commit.
    async fn commit(&self, container: &str, _image: &str, _changes: &[String]) -> Result<String> {
        Err(Error::Refused(format!(
            "sandbox {container} is local (no container): it has no file system of its own to snapshot"
        ))
        .into())
    }

    /// Local sandboxes have no images.
    async fn image_config(&self, _image: &str) -> Result<ImageConfig> {
        Ok(ImageConfig::default())
    }

    /// Local sandboxes have no images to build.
    async fn build(&self, spec: &BuildSpec, _timeout: Duration) -> Result<()> {
        Err(Error::Refused(format!(
            "cannot build {}: engine = \"local\" has no images; use a container engine (docker or podman)",
            spec.tag
        ))
        .into())
    }

    /// Local sandboxes have no containers.
    async fn container_file(
        &self,
        _container: &str,
        _path: &str,
        _max: u64,
    ) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    /// Local sandboxes have no images.
    async fn image_file(
        &self,
        _image: &str,
        _path: &str,
        _max: u64,
        _labels: &[(&str, &str)],
    ) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    async fn agent_image(
        &self,
        _image: &str,
        _binary: &Path,
        _build: &str,
        _hint: Option<&str>,
    ) -> Result<String> {
        Err(Error::Refused("the local engine has no images".into()).into())
    }

    async fn start_shipped(&self, container: &str, _s: &Secret, _r: Duration) -> Result<()> {
        self.lifecycle(ContainerVerb::Start, container).await
    }

    /// Local sandboxes have no volumes.
    async fn list_volumes(&self, _labels: &[(&str, &str)]) -> Result<Vec<VolumeSummary>> {
        Ok(Vec::new())
    }

    /// Local sandboxes have no volumes.
    async fn remove_volume(&self, _name: &str) -> Result<()> {
        Ok(())
    }

    async fn ensure_image(&self, build: &super::image::ImageBuild) -> Result<()> {
        Err(crate::error::Error::Refused(format!(
            "the local engine has no images (needed: {})",
            build.tag
        ))
        .into())
    }
}

/// The host command line running `spec`: `sh -c WRAPPER h9sandbox COMMAND`, as `docker exec` runs
/// it in a container ([`super::docker::SHELL_WRAPPER`]: bash when installed, else sh); an
/// argument vector as it is.
pub(crate) fn local_exec_args(spec: &ExecSpec) -> Vec<String> {
    match &spec.command {
        CommandLine::Shell(line) => vec![
            "sh".into(),
            "-c".into(),
            super::docker::SHELL_WRAPPER.into(),
            "h9sandbox".into(),
            line.clone(),
        ],
        CommandLine::Argv(argv) => argv.clone(),
    }
}

/// A process found by [`marked_processes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Marked {
    pid: i32,
    pgid: Option<i32>,
}

/// Whether the NUL-separated `environ` holds every `var=value` of `marks`, exactly.
pub(crate) fn environ_has(environ: &[u8], marks: &[(String, String)]) -> bool {
    marks.iter().all(|(k, v)| {
        let want = format!("{k}={v}");
        environ.split(|b| *b == 0).any(|e| e == want.as_bytes())
    })
}

/// Processes of our effective user (but this one) whose environment holds all of `marks`.
fn marked_processes(marks: &[(String, String)]) -> Vec<Marked> {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let uid = rustix::process::geteuid().as_raw();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me || pid <= 1 {
            continue;
        }
        let path = entry.path();
        if std::fs::metadata(&path).map(|m| m.uid()).ok() != Some(uid) {
            continue;
        }
        let Ok(environ) = std::fs::read(path.join("environ")) else {
            continue;
        };
        if environ_has(&environ, marks) {
            let pgid = Pid::from_raw(pid)
                .and_then(|p| rustix::process::getpgid(Some(p)).ok())
                .map(|p| p.as_raw_nonzero().get());
            found.push(Marked { pid, pgid });
        }
    }
    found
}

/// Sends `sig` to every marked process and to the process groups they belong to (never to our
/// own group). Returns how many processes were marked.
fn signal_marked(marks: &[(String, String)], sig: Signal) -> usize {
    let procs = marked_processes(marks);
    let own_group = rustix::process::getpgrp().as_raw_nonzero().get();
    let groups: BTreeSet<i32> = procs
        .iter()
        .filter_map(|p| p.pgid)
        .filter(|g| *g != own_group && *g > 1)
        .collect();
    for g in groups {
        if let Some(g) = Pid::from_raw(g) {
            let _ = kill_process_group(g, sig);
        }
    }
    for p in &procs {
        if let Some(pid) = Pid::from_raw(p.pid) {
            let _ = kill_process(pid, sig);
        }
    }
    procs.len()
}

/// SIGKILLs marked processes until a pass finds none (children forked meanwhile are caught by
/// the next pass), at most 50 passes.
async fn kill_marked(marks: &[(String, String)]) -> Result<()> {
    for _ in 0..50 {
        if signal_marked(marks, Signal::KILL) == 0 {
            return Ok(());
        }
        // Let the kernel reap them before looking again.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let left = marked_processes(marks);
    if left.is_empty() {
        return Ok(());
    }
    Err(anyhow::anyhow!(
        "{} process(es) survived 50 rounds of SIGKILL (PIDs {})",
        left.len(),
        left.iter()
            .map(|p| p.pid.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .context("cannot end the sandbox's processes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn environ_matching_is_exact_and_needs_every_mark() {
        let env = b"PATH=/bin\0H9SANDBOX_EXEC_ID=abc\0H9SANDBOX_SANDBOX=s1\0";
        assert!(environ_has(env, &marks(&[("H9SANDBOX_EXEC_ID", "abc")])));
        assert!(environ_has(
            env,
            &marks(&[("H9SANDBOX_EXEC_ID", "abc"), ("H9SANDBOX_SANDBOX", "s1")])
        ));
        // A prefix, a longer value or a missing second mark do not match.
        assert!(!environ_has(env, &marks(&[("H9SANDBOX_EXEC_ID", "ab")])));
        assert!(!environ_has(env, &marks(&[("H9SANDBOX_SANDBOX", "s")])));
        assert!(!environ_has(
            env,
            &marks(&[
                ("H9SANDBOX_EXEC_ID", "abc"),
                ("H9SANDBOX_SANDBOX_STATE_DIR", "/x")
            ])
        ));
    }

    #[test]
    fn exec_args_use_the_same_shell_wrapper_as_containers() {
        let spec = ExecSpec {
            command: CommandLine::Shell("echo hi".into()),
            cwd: "/w".into(),
            env: vec![],
            interactive: false,
            marker: "m".into(),
            user: None,
            wrapped: false,
            wrapper_enters: false,
            backstop: None,
        };
        assert_eq!(
            local_exec_args(&spec),
            [
                "sh",
                "-c",
                super::super::docker::SHELL_WRAPPER,
                "h9sandbox",
                "echo hi"
            ]
        );
    }

    #[tokio::test]
    async fn kill_exec_ends_a_daemonized_process_and_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let local = Local::new(dir.path());
        let spec = ExecSpec {
            command: CommandLine::Shell("setsid sleep 297 & sleep 298 & echo started; wait".into()),
            cwd: dir.path().to_path_buf(),
            env: vec![],
            interactive: false,
            marker: uuid::Uuid::new_v4().simple().to_string(),
            user: None,
            wrapped: false,
            wrapper_enters: false,
            backstop: None,
        };
        let mut child = local.exec("sb", &spec, ExecStdio::PIPED).unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut buf = [0u8; 8];
        use tokio::io::AsyncReadExt;
        let n = out.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"started\n");
        let marks = [(EXEC_MARKER_VAR.to_string(), spec.marker.clone())];
        let sandbox = local.sandbox_marks("sb");
        // The shell and both sleeps (one of them in a session of its own), found by the exec's
        // marks and by the sandbox's, eventually: setsid(1) may fork once more for a moment, and a
        // process in the middle of execve(2) can be missed by one scan, so both counts are taken
        // in the same poll.
        let counts = || {
            (
                marked_processes(&marks).len(),
                marked_processes(&sandbox).len(),
            )
        };
        let seen: Result<Option<(usize, usize)>, Infallible> = poll_until(
            Duration::from_secs(10),
            Backoff::fixed(Duration::from_millis(10)),
            || async { Ok(Some(counts()).filter(|&c| c == (3, 3))) },
        )
        .await;
        assert_eq!(seen.unwrap().unwrap_or_else(counts), (3, 3));
        local.kill_exec("sb", &spec).await.unwrap();
        let end = child.wait().await.unwrap();
        assert_ne!(end.code, 0);
        assert!(marked_processes(&marks).is_empty());
    }
}
