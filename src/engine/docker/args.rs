//! The argv builders of the Docker-CLI-compatible engines: pure functions from a spec to the
//! client's arguments, compared exactly by the unit tests (`super::tests`).

use super::{Flavor, HostLimits, KILL_SCRIPT, SHELL_WRAPPER};
use crate::contract as agent;
use crate::engine::{
    is_gvisor, AgentSetup, BuildSpec, CommandLine, ContainerSpec, ExecSpec, MountSource, RunAs,
    SidecarSpec, EXEC_MARKER_VAR, LABEL_ID, LABEL_MANAGED, LABEL_STATE_DIR, SCRATCH_DIR,
};
use crate::types::format_cpus;

/// `build` arguments for `spec`: never pulling a base image that is present (the engine's
/// default), removing the intermediate containers even of a failed step (`--force-rm`; the
/// classic builder keeps them otherwise), the build args, target, caches, network and labels,
/// then the context.
pub(crate) fn build_args(spec: &BuildSpec) -> Vec<String> {
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

/// `create` arguments of the container [`Environment::image_file`](crate::engine::Environment::image_file) copies a file out of: never
/// started (its entrypoint need not exist), without a network, never pulling, labelled.
pub(crate) fn probe_create_args(image: &str, labels: &[(&str, &str)]) -> Vec<String> {
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

/// The scratch volume's labels: the container's own h9sandbox labels (ID, state directory).
pub(super) fn volume_labels(spec: &ContainerSpec) -> Vec<(String, String)> {
    [LABEL_MANAGED, LABEL_ID, LABEL_STATE_DIR]
        .iter()
        .filter_map(|k| spec.labels.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect()
}

/// `volume create` arguments making `spec`'s labelled scratch volume (Podman, whose `--mount`
/// cannot label the volume it creates).
pub(crate) fn volume_create_args(spec: &ContainerSpec) -> Vec<String> {
    let mut a: Vec<String> = vec!["volume".into(), "create".into()];
    for (k, v) in volume_labels(spec) {
        a.extend(["--label".into(), format!("{k}={v}")]);
    }
    a.push(spec.scratch_volume.clone());
    a
}

/// `--mount` value of the scratch volume: named after the sandbox, created with the container's
/// h9sandbox labels (Docker's `volume-label`; Podman gets them from [`volume_create_args`]).
pub(super) fn scratch_mount_arg(flavor: Flavor, spec: &ContainerSpec) -> String {
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
pub(crate) fn csv_field(f: String) -> String {
    if f.contains([',', '"']) || f.starts_with(' ') || f.ends_with(' ') {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f
    }
}

/// `docker run` arguments for `spec`: hardened, labelled, detached (a shipped agent's run is
/// attached instead: [`attached_run`]), never pulling. `extra`
/// (engine options: [`ulimit_args`]) and then [`runtime_args`] go before `--pull`. With gVisor
/// the host's `--pids-limit` is [`gvisor_host_pids`].
pub(crate) fn run_args(flavor: Flavor, spec: &ContainerSpec, extra: &[String]) -> Vec<String> {
    let l = &spec.limits;
    let workdir = spec.workdir.to_string_lossy();
    let mut a: Vec<String> = vec!["run".into(), "-d".into()];
    a.extend(["--name".into(), spec.name.clone()]);
    for (k, v) in &spec.labels {
        a.push("--label".into());
        a.push(format!("{k}={v}"));
    }
    // PID 1 is h9sandbox's agent, as root: it makes the sandbox's user known, installs the
    // set-ID filter that every process inherits, reaps zombies, exits at once on SIGTERM, and
    // runs each command as `spec.user` (the engine's exec passes `--user` itself).
    a.extend(["--user".into(), "0:0".into()]);
    // An image's HEALTHCHECK would be run by the engine's exec, outside PID 1's tree and
    // without the set-ID filter, as root: none.
    a.push("--no-healthcheck".into());
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
        // `/dev/shm` as large as the memory limit (its pages count against it anyway), not the
        // engine's 64 MiB, which PyTorch's data loaders and browsers outgrow.
        "--shm-size".into(),
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
    a.extend(["--env".into(), format!("TMPDIR={SCRATCH_DIR}")]);
    match &spec.agent {
        AgentSetup::Mounted(m) => a.extend([
            "--mount".into(),
            bind_mount_arg(&workdir, &workdir, false),
            "--workdir".into(),
            workdir.to_string(),
            "--mount".into(),
            bind_mount_arg(&m.root.to_string_lossy(), agent::ROOT, true),
            "--mount".into(),
            bind_mount_arg(&m.binary.to_string_lossy(), agent::BIN, true),
            "--mount".into(),
            bind_mount_arg(&m.run_dir.to_string_lossy(), agent::RUN_DIR, false),
        ]),
        // Nothing of this machine: the work dir is a volume of its own (removed with the
        // container, `rm -v`), so that it is neither in the noexec `/tmp` tmpfs nor in the
        // scratch volume when its path lies there; `up` copies the host's into it.
        // Labelled like the scratch volume, so that `reap` finds it when the container went
        // without its volumes (`docker rm` without `-v`).
        AgentSetup::Shipped(s) => {
            let mut fields = vec!["type=volume".to_string(), format!("destination={workdir}")];
            if flavor == Flavor::Docker {
                for (k, v) in volume_labels(spec) {
                    fields.push(format!("volume-label={k}={v}"));
                }
            }
            a.extend([
                "--mount".into(),
                fields
                    .into_iter()
                    .map(csv_field)
                    .collect::<Vec<_>>()
                    .join(","),
                "--workdir".into(),
                workdir.to_string(),
            ]);
            if let Some(ip) = &s.publish {
                a.extend(["--publish".into(), format!("{ip}::{}", agent::CHANNEL_PORT)]);
            }
        }
    }
    a.extend(["--entrypoint".into(), agent::BIN.into()]);
    for p in &spec.publish {
        a.extend(["--publish".into(), p.engine_arg()]);
    }
    if let Some(dir) = &spec.proxy {
        a.extend(["--mount".into(), mount_arg(dir, agent::PROXY_DIR, true)]);
        for (k, v) in proxy_env() {
            a.extend(["--env".into(), format!("{k}={v}")]);
        }
    }
    a.extend(extra.iter().cloned());
    a.extend(runtime_args(spec.runtime.as_deref()));
    let image = match &spec.agent {
        AgentSetup::Mounted(_) => spec.image.clone(),
        AgentSetup::Shipped(s) => s.image.clone(),
    };
    a.extend([
        "--pull".into(),
        "never".into(),
        "--".into(),
        image,
        agent::ARG.into(),
        "init".into(),
        "--user".into(),
        spec.user.to_string(),
    ]);
    if let Some(n) = &spec.user_name {
        a.extend(["--user-name".into(), n.clone()]);
    }
    if let AgentSetup::Shipped(s) = &spec.agent {
        a.extend([
            "--secret-stdin".into(),
            "--channel".into(),
            s.listen.clone(),
        ]);
    }
    if spec.proxy.is_some() {
        a.push("--proxy-relay".into());
    }
    a
}

/// `run_args` of a shipped agent's container made attached: in place of `-d`, its standard input
/// open once (`-i`, the secret for PID 1), standard input and output attached (`-a`, PID 1 says
/// when it serves), signals not passed on (the client is killed once the agent serves; the
/// container runs on), and the container's ID written to `cidfile` (an attached `run` prints
/// none).
pub(crate) fn attached_run(mut args: Vec<String>, cidfile: &str) -> Vec<String> {
    if args.get(1).map(String::as_str) == Some("-d") {
        args.splice(
            1..2,
            [
                "-i".to_string(),
                "--sig-proxy=false".into(),
                "-a".into(),
                "stdin".into(),
                "-a".into(),
                "stdout".into(),
                "--cidfile".into(),
                cidfile.into(),
            ],
        );
    }
    args
}

/// `start` arguments that hand a shipped agent its secret again: attached as [`attached_run`].
pub(crate) fn attached_start(container: &str) -> Vec<String> {
    vec!["start".into(), "-a".into(), "-i".into(), container.into()]
}

/// The environment of every process of an allowlist sandbox: `HTTP_PROXY`, `HTTPS_PROXY` (and
/// their lower-case forms, which curl, apt and Python read) name the relay on its loopback;
/// `NO_PROXY`/`no_proxy` keep loopback direct.
pub(crate) fn proxy_env() -> Vec<(&'static str, String)> {
    let url = format!("http://127.0.0.1:{}", agent::PROXY_PORT);
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
pub(crate) fn ulimit_args(
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
pub(crate) fn runtime_args(runtime: Option<&str>) -> Vec<String> {
    runtime
        .map(|r| vec!["--runtime".to_string(), r.to_string()])
        .unwrap_or_default()
}

/// Host tasks gVisor's own processes take before the sandbox runs anything (the Sentry's and
/// the Gofer's threads: 38 measured with runsc 20221219, `--platform=ptrace`).
pub(crate) const GVISOR_HOST_TASKS_BASE: u64 = 64;
/// Host tasks each process inside a gVisor sandbox may take (with `--platform=ptrace` every
/// process of the sandbox is a host stub process with threads of its own, and the Sentry adds
/// threads as it serves them: about 11 each, measured).
pub(crate) const GVISOR_HOST_TASKS_PER_PROCESS: u64 = 16;

/// The host `--pids-limit` of a gVisor sandbox whose process limit is `pids`: the host's pids
/// cgroup counts every task of the gVisor sandbox (Sentry, Gofer, stub processes), not the
/// processes inside it, and a gVisor sandbox that reaches it dies whole. So the limit of the
/// sandbox's processes is the rlimit gVisor's kernel enforces (`--ulimit nproc=N:N`: a fork
/// past it fails with EAGAIN, as on Linux), and the host's cgroup is a ceiling above it
/// ([`GVISOR_HOST_TASKS_BASE`] + [`GVISOR_HOST_TASKS_PER_PROCESS`] × `pids`) that still stops
/// a runaway sandbox from exhausting the host's PIDs.
pub(crate) fn gvisor_host_pids(pids: u32) -> u64 {
    GVISOR_HOST_TASKS_BASE + GVISOR_HOST_TASKS_PER_PROCESS * u64::from(pids)
}

/// `--mount` value binding the host path `source` at `target` (read-only with `readonly`).
/// `--mount` is parsed as one CSV record, so a field holding `,` or `"` is quoted (RFC 4180);
/// `:` and spaces need nothing, unlike `-v`.
pub(crate) fn bind_mount_arg(source: &str, target: &str, readonly: bool) -> String {
    format!(
        "type=bind,{},{}{}",
        csv_field(format!("source={source}")),
        csv_field(format!("target={target}")),
        if readonly { ",readonly" } else { "" }
    )
}

/// `--mount` value mounting `source` at `target`: [`bind_mount_arg`] for a host path; for a
/// [`TmpfsVolume`](crate::engine::TmpfsVolume), `type=volume` with the `local` driver's tmpfs
/// options and the volume's labels, which the engine applies when this mount makes the volume
/// (Docker's `volume-opt`, `volume-label`).
pub(crate) fn mount_arg(source: &MountSource, target: &str, readonly: bool) -> String {
    let v = match source {
        MountSource::Host(p) => return bind_mount_arg(&p.to_string_lossy(), target, readonly),
        MountSource::Volume(v) => v,
    };
    let mut fields = vec![
        "type=volume".to_string(),
        format!("source={}", v.name),
        format!("target={target}"),
        "volume-driver=local".into(),
    ];
    for (k, o) in v.driver_options() {
        fields.push(format!("volume-opt={k}={o}"));
    }
    for (k, l) in &v.labels {
        fields.push(format!("volume-label={k}={l}"));
    }
    if readonly {
        fields.push("readonly".into());
    }
    fields
        .into_iter()
        .map(csv_field)
        .collect::<Vec<_>>()
        .join(",")
}

/// `docker inspect` arguments printing the container's `.State` and `.HostConfig` as one JSON
/// object (both engines name the fields alike).
pub(crate) fn inspect_args(container: &str) -> Vec<String> {
    vec![
        "inspect".into(),
        "--type".into(),
        "container".into(),
        "--format".into(),
        r#"{"State":{{json .State}},"HostConfig":{{json .HostConfig}},"Ports":{{json .NetworkSettings.Ports}}}"#.into(),
        container.into(),
    ]
}

/// `ps -a` arguments listing containers with every label in `labels`. Docker: one line per
/// container, ID, name, state, status and sandbox ID separated by tabs. Podman: a JSON array
/// (its template's `.State` is the human status and it has no `.Label`).
pub(crate) fn ps_args(flavor: Flavor, labels: &[(&str, &str)]) -> Vec<String> {
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

/// `docker exec` arguments running `spec` in `container`: as `spec.user`, through the
/// in-container binary (`h9sandbox agent exec`, which installs the set-ID filter) when the
/// sandbox has one, else (sandboxes made before the agent) a shell command line through
/// [`SHELL_WRAPPER`] and an argument vector as it is.
pub(crate) fn exec_args(container: &str, spec: &ExecSpec) -> Vec<String> {
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
    // A current wrapper enters the directory itself, as the user ([`crate::agent::wrap`]).
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
pub(crate) fn kill_args(container: &str, spec: &ExecSpec) -> Vec<String> {
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

/// `docker run` arguments of the sidecar `spec`: hardened, labelled, never pulling; detached
/// (`-d`), or (`detach` false) attached and removed at its end (`--rm`).
pub(crate) fn sidecar_run_args(spec: &SidecarSpec, detach: bool) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "run".into(),
        if detach { "-d" } else { "--rm" }.into(),
        "--name".into(),
        spec.name.clone(),
    ];
    for (k, v) in &spec.labels {
        a.extend(["--label".into(), format!("{k}={v}")]);
    }
    a.extend([
        "--network".into(),
        spec.network.clone(),
        "--read-only".into(),
        "--cap-drop".into(),
        "all".into(),
    ]);
    for cap in &spec.caps {
        a.extend(["--cap-add".into(), cap.clone()]);
    }
    a.extend([
        "--security-opt".into(),
        "no-new-privileges:true".into(),
        "--user".into(),
        spec.user.to_string(),
        "--memory".into(),
        spec.memory.clone(),
        "--pids-limit".into(),
        spec.pids_limit.to_string(),
        "--cpus".into(),
        format_cpus(spec.cpus),
        // An image's HEALTHCHECK would run beside the sidecar's program: none.
        "--no-healthcheck".into(),
    ]);
    for m in &spec.mounts {
        a.extend([
            "--mount".into(),
            mount_arg(&m.source, &m.target, m.readonly),
        ]);
    }
    a.extend([
        "--entrypoint".into(),
        spec.entrypoint.clone(),
        "--pull".into(),
        "never".into(),
        "--".into(),
        spec.image.clone(),
    ]);
    a.extend(spec.args.iter().cloned());
    a
}

/// `ps -a` arguments listing the sidecars carrying the label `of_label` (any value) and the
/// state directory `state_dir`: ID, the `of_label` value and the state directory, tab-separated.
pub(crate) fn sidecar_ps_args(of_label: &str, state_dir: &str) -> Vec<String> {
    vec![
        "ps".into(),
        "-a".into(),
        "--no-trunc".into(),
        "--filter".into(),
        format!("label={of_label}"),
        "--filter".into(),
        format!("label={LABEL_STATE_DIR}={state_dir}"),
        "--format".into(),
        format!("{{{{.ID}}}}\t{{{{.Label \"{of_label}\"}}}}\t{{{{.Label \"{LABEL_STATE_DIR}\"}}}}"),
    ]
}
