//! The Docker implementation of [`Environment`]: shells out to the `docker` CLI (or any
//! CLI-compatible client named by `engine_bin`) with argv vectors built by pure functions, which
//! the unit tests below compare exactly.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use tokio::process::Command;

use super::{
    ContainerSpec, ContainerStatus, ContainerSummary, Environment, ExecFailure, ExecSpec,
    EXEC_MARKER_VAR, LABEL_ID,
};
use crate::error::Error;

/// Capabilities added back after `--cap-drop all`: the minimum package managers need
/// (see `capabilities(7)`): DAC_OVERRIDE to write files they do not own, SETUID/SETGID to drop to
/// their service users.
pub const CAPS_ADDED: [&str; 3] = ["DAC_OVERRIDE", "SETUID", "SETGID"];

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

/// A Docker-CLI-compatible engine.
#[derive(Debug, Clone)]
pub struct Docker {
    bin: String,
    verbose: bool,
}

impl Docker {
    /// The engine whose client is `bin` (e.g. `docker`); with `verbose`, every command line run is
    /// printed to stderr.
    pub fn new(bin: impl Into<String>, verbose: bool) -> Docker {
        Docker {
            bin: bin.into(),
            verbose,
        }
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
        if self.verbose {
            eprintln!("+ {}", shell_line(&self.bin, &args));
        }
        let mut cmd = Command::new(&self.bin);
        cmd.args(&args).stdin(Stdio::null()).kill_on_drop(true);
        cmd
    }

    /// Runs the client to completion, capturing its output. Returns (exit status, stdout, stderr).
    async fn output(&self, args: Vec<String>) -> Result<(i32, String, String)> {
        let out = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .await
            .map_err(|e| self.spawn_error(e))?;
        let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let code = out.status.code().unwrap_or(-1);
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

    fn spawn_error(&self, e: std::io::Error) -> anyhow::Error {
        let reason = if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "`{}` was not found on PATH (is Docker installed?)",
                self.bin
            )
        } else {
            format!("cannot run `{}`: {e}", self.bin)
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
    fn kind(&self) -> &str {
        Path::new(&self.bin)
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| n.contains("podman"))
            .map(|_| "podman")
            .unwrap_or("docker")
    }

    async fn create(&self, spec: &ContainerSpec) -> Result<String> {
        let (code, stdout, stderr) = self.output(run_args(spec)).await?;
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
        Err(anyhow!(
            "`{} run` failed: {}",
            self.bin,
            first_error_line(&stderr)
        ))
    }

    async fn pull(&self, image: &str, timeout: Duration) -> Result<()> {
        let run = self.output(vec!["pull".into(), "--quiet".into(), image.into()]);
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
        parse_inspect_state(&stdout).map(Some)
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
        let out = self.checked(ps_args(labels)).await?;
        Ok(out.lines().filter_map(parse_ps_line).collect())
    }

    fn exec_command(&self, container: &str, spec: &ExecSpec) -> Command {
        self.command(exec_args(container, spec))
    }

    async fn kill_exec(&self, container: &str, marker: &str) -> Result<()> {
        self.checked(kill_args(container, marker)).await.map(|_| ())
    }

    fn exec_failure(&self, container: &str, head: &[u8], status: i32) -> Option<ExecFailure> {
        // `docker exec` reports its own failures with status 1 (daemon errors), 125, 126 or 127
        // (the OCI runtime could not start the process) and a message of its own on stderr.
        if !matches!(status, 1 | 125 | 126 | 127) {
            return None;
        }
        let text = String::from_utf8_lossy(head);
        let line = first_error_line(&text);
        if let Some(reason) = unreachable_reason(&text) {
            return Some(ExecFailure::EngineUnavailable(reason));
        }
        if !(text.starts_with("Error") || text.starts_with("OCI runtime")) {
            return None;
        }
        if is_no_such_container(&text) {
            return Some(ExecFailure::ContainerGone(format!(
                "its container {container} no longer exists (removed outside h9sandbox)"
            )));
        }
        if text.contains("is not running")
            || text.contains("is paused")
            || text.contains("is restarting")
        {
            return Some(ExecFailure::ContainerGone(format!(
                "its container {container} is not running (stopped or killed outside h9sandbox)"
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

/// `docker run` arguments for `spec`: hardened, labelled, detached, never pulling.
pub fn run_args(spec: &ContainerSpec) -> Vec<String> {
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
    // tini as PID 1 forwards SIGTERM to `sleep` and reaps zombies, so `down` does not wait out
    // the whole grace period (a bare `sleep` as PID 1 ignores SIGTERM).
    a.push("--init".into());
    a.extend(["--cap-drop".into(), "all".into()]);
    for cap in CAPS_ADDED {
        a.extend(["--cap-add".into(), cap.into()]);
    }
    a.extend([
        "--security-opt".into(),
        "no-new-privileges:true".into(),
        "--pids-limit".into(),
        l.pids_limit.to_string(),
        "--cpus".into(),
        format_cpus(l.cpus),
        "--memory".into(),
        l.memory.clone(),
        "--tmpfs".into(),
        format!("/tmp:size={},nosuid,noexec,nodev", l.tmp_size),
        "--network".into(),
        l.network.as_str().into(),
        "--mount".into(),
        bind_mount_arg(&workdir),
        "--workdir".into(),
        workdir.to_string(),
        "--pull".into(),
        "never".into(),
        spec.image.clone(),
        "sleep".into(),
        "infinity".into(),
    ]);
    a
}

/// `--mount` value binding `path` at the same path. `--mount` is parsed as one CSV record, so a
/// field holding `,` or `"` is quoted (RFC 4180); `:` and spaces need nothing, unlike `-v`.
pub fn bind_mount_arg(path: &str) -> String {
    let field = |f: String| {
        if f.contains([',', '"']) || f.starts_with(' ') || f.ends_with(' ') {
            format!("\"{}\"", f.replace('"', "\"\""))
        } else {
            f
        }
    };
    format!(
        "type=bind,{},{}",
        field(format!("source={path}")),
        field(format!("target={path}"))
    )
}

/// `--cpus` value: Docker accepts decimals; print without a useless fraction.
pub fn format_cpus(cpus: f64) -> String {
    let s = format!("{cpus:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `docker inspect` arguments printing the container's `.State` as JSON.
pub fn inspect_args(container: &str) -> Vec<String> {
    vec![
        "inspect".into(),
        "--type".into(),
        "container".into(),
        "--format".into(),
        "{{json .State}}".into(),
        container.into(),
    ]
}

/// `docker ps -a` arguments listing containers with every label in `labels`, one per line:
/// ID, name, state, status and sandbox ID separated by tabs.
pub fn ps_args(labels: &[(&str, &str)]) -> Vec<String> {
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
    a.push(format!(
        "{{{{.ID}}}}\t{{{{.Names}}}}\t{{{{.State}}}}\t{{{{.Status}}}}\t{{{{.Label \"{LABEL_ID}\"}}}}"
    ));
    a
}

/// `docker exec` arguments running `spec` in `container` through [`SHELL_WRAPPER`].
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
    a.push("-w".into());
    a.push(spec.cwd.to_string_lossy().into_owned());
    a.push(container.into());
    a.extend([
        "sh".into(),
        "-c".into(),
        SHELL_WRAPPER.into(),
        "h9sandbox".into(),
        spec.command.clone(),
    ]);
    a
}

/// `docker exec` arguments running [`KILL_SCRIPT`] for `marker`.
pub fn kill_args(container: &str, marker: &str) -> Vec<String> {
    vec![
        "exec".into(),
        container.into(),
        "sh".into(),
        "-c".into(),
        KILL_SCRIPT.into(),
        "h9sandbox-kill".into(),
        marker.into(),
    ]
}

fn parse_inspect_state(json: &str) -> Result<ContainerStatus> {
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
    }
    let s: State = serde_json::from_str(json.trim())
        .with_context(|| format!("cannot parse the engine's container state: {json}"))?;
    Ok(ContainerStatus {
        status: s.status,
        running: s.running,
        exit_code: s.exit_code,
        error: s.error,
        oom_killed: s.oom_killed,
    })
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
    let sandbox_id = f
        .next()
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "<no value>")
        .map(str::to_string);
    Some(ContainerSummary {
        id,
        name,
        state,
        status,
        sandbox_id,
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
    SIGNS
        .iter()
        .any(|s| stderr.contains(s))
        .then(|| first_error_line(stderr))
}

fn is_no_such_container(stderr: &str) -> bool {
    stderr.contains("No such container")
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

/// Renders `bin args...` as a line a POSIX shell would run unchanged.
pub fn shell_line(bin: &str, args: &[OsString]) -> String {
    std::iter::once(bin.to_string())
        .chain(args.iter().map(|a| a.to_string_lossy().into_owned()))
        .map(|w| shell_quote(&w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Quotes `w` for a POSIX shell when it holds anything but safe characters.
pub fn shell_quote(w: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,@+%^".contains(c);
    if !w.is_empty() && w.chars().all(safe) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Network;
    use crate::state::Limits;
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
            },
            labels: BTreeMap::from([("h9sandbox".into(), "1".into())]),
        }
    }

    #[test]
    fn run_args_are_hardened_and_exact() {
        let got = shell_line(
            "docker",
            &run_args(&spec("/w"))
                .into_iter()
                .map(Into::into)
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            got,
            "docker run -d --name h9sandbox-abc --label h9sandbox=1 --init --cap-drop all \
             --cap-add DAC_OVERRIDE --cap-add SETUID --cap-add SETGID \
             --security-opt no-new-privileges:true --pids-limit 256 --cpus 1.5 --memory 512m \
             --tmpfs /tmp:size=256m,nosuid,noexec,nodev --network none \
             --mount type=bind,source=/w,target=/w --workdir /w --pull never ubuntu:22.04 sleep infinity"
        );
    }

    #[test]
    fn bind_mount_quotes_commas_and_quotes_only() {
        assert_eq!(
            bind_mount_arg("/a b:c"),
            "type=bind,source=/a b:c,target=/a b:c"
        );
        assert_eq!(
            bind_mount_arg("/a,b"),
            r#"type=bind,"source=/a,b","target=/a,b""#
        );
        assert_eq!(
            bind_mount_arg(r#"/a"b"#),
            r#"type=bind,"source=/a""b","target=/a""b""#
        );
    }

    #[test]
    fn exec_args_mark_the_process_tree() {
        let spec = ExecSpec {
            command: "echo hi".into(),
            cwd: "/w/sub".into(),
            env: vec![("A".into(), "1".into())],
            interactive: false,
            marker: "m1".into(),
        };
        let a = exec_args("c1", &spec);
        assert_eq!(
            a[..8],
            [
                "exec",
                "-e",
                "H9SANDBOX_EXEC_ID=m1",
                "-e",
                "A=1",
                "-w",
                "/w/sub",
                "c1"
            ]
        );
        assert_eq!(a[8..10], ["sh", "-c"]);
        assert_eq!(a[11..], ["h9sandbox", "echo hi"]);
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
        let d = Docker::new("docker", false);
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
        assert!(matches!(stopped, Some(ExecFailure::ContainerGone(_))));
        let down = d.exec_failure("c", b"Cannot connect to the Docker daemon at unix:///x.sock. Is the docker daemon running?\n", 1);
        assert!(matches!(down, Some(ExecFailure::EngineUnavailable(_))));
        // A command that fails with its own message is the command's business.
        assert_eq!(d.exec_failure("c", b"grep: x: No such file\n", 1), None);
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
    fn shell_quoting_round_trips_through_sh() {
        let words = ["plain", "a b", "it's", "$HOME", "", "x;y"];
        let line = shell_line(
            "printf",
            &std::iter::once("%s\\n".into())
                .chain(words.iter().map(|w| (*w).into()))
                .collect::<Vec<_>>(),
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&line)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            words.iter().map(|w| format!("{w}\n")).collect::<String>()
        );
    }
}
