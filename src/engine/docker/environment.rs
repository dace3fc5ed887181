//! [`Docker`]'s implementation of [`Environment`]: each operation of the engine trait as the
//! client's argv (or, on the hot paths of a local daemon, the Engine API, [`super::via_api`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};

use super::agent_image::{read_regular, Copied};
use super::via_api::volume_summaries;
use super::*;
use crate::engine::is_gvisor;
use crate::engine::{
    spawn_exec, AgentSetup, BuildSpec, Capabilities, ContainerSpec, ContainerStatus,
    ContainerSummary, ContainerVerb, EngineExec, Environment, ExecFailure, ExecJudge, ExecSpec,
    ExecStdio, ImageConfig, Secret, SidecarSpec, SidecarSummary, VolumeSummary,
};
use crate::error::Error;
use crate::types::EngineKind;

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
            return Err(Error::Refused(format!(
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
            return Err(Error::Refused(format!(
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
        .map_err(Error::Refused)?;
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
            match crate::engine::marker::kill_marked(Some(pid), marker) {
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

    async fn container_file(
        &self,
        container: &str,
        path: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>> {
        // As a tar stream on the client's stdout, held at most to the bound (a sparse file
        // of terabytes in a small volume stops the copy at the bound, on no disk), and taken
        // only if it is one regular file.
        let cap = usize::try_from(max)
            .unwrap_or(usize::MAX)
            .saturating_add(64 << 10);
        let args = vec!["cp".into(), format!("{container}:{path}"), "-".into()];
        let out = crate::engine::bounded::bounded_output(&mut self.command(args), cap)
            .await
            .map_err(|e| self.spawn_error(e))?;
        if out.overflow.is_some() {
            return Err(anyhow!(
                "{path} of {container} holds more than {max} bytes, more than h9sandbox reads; it was not read"
            ));
        }
        if out.status.is_some_and(|s| !s.success()) {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if stderr.contains("Could not find the file")
                || stderr.contains("no such file")
                || is_no_such_container(&stderr)
            {
                return Ok(None);
            }
            return Err(anyhow!(
                "`{} cp` of {path} from {container} failed: {}",
                self.bin,
                first_error_line(stderr.trim())
            ));
        }
        let mut archive = tar::Archive::new(&out.stdout[..]);
        let Some(entry) = archive.entries()?.next() else {
            return Ok(None);
        };
        let entry = entry?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err(anyhow!("{path} of {container} is not a regular file"));
        }
        let mut content = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(entry, max), &mut content)?;
        Ok(Some(content))
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
            // The sandbox's ID label too: an anonymous volume (a copied work dir's) is named
            // after no sandbox.
            let mut asked: Vec<&str> = labels.iter().map(|(k, _)| *k).collect();
            asked.push(crate::engine::LABEL_ID);
            let mut format = "{{.Name}}".to_string();
            for k in &asked {
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
                    let have = asked
                        .iter()
                        .zip(fields)
                        .filter(|(_, v)| !v.is_empty() && *v != "<no value>")
                        .map(|(k, v)| (k.to_string(), v.to_string()))
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

    async fn ensure_image(&self, build: &crate::engine::image::ImageBuild) -> Result<()> {
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
