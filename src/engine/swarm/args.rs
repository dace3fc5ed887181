//! The `docker service create` and secret argv of a sandbox service, built by pure functions
//! (compared exactly by the unit tests), and what a service cannot express, refused.

use anyhow::Result;

use super::*;
use crate::engine::docker::RunOptions;
use crate::engine::{AgentSetup, ContainerSpec, ShippedAgent, SCRATCH_DIR};
use crate::error::Error;
use crate::types::Network;

/// `s` as owned strings.
pub(super) fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

/// The swarm secret of sandbox service `service`.
pub(crate) fn secret_name(service: &str) -> String {
    format!("{service}-channel")
}

/// `docker service create` arguments for `spec` (a shipped agent's: [`AgentSetup::Shipped`]),
/// detached: one task, never restarted; labelled (service and container); limits as limits
/// and equal reservations; capabilities dropped but the profile's; the channel's secret
/// `secret` as a file for root only; the channel's port published in host mode on the task's
/// node; `/tmp` a tmpfs, the scratch dir and the work dir anonymous volumes (removed with the
/// task's container); the rlimits of `options` (configuration `ulimit_nofile`,
/// `ulimit_nproc`; 0: the node daemon's) set by the agent on PID 1 (`agent init --rlimit`),
/// inherited by every process. Errors: what a service cannot express ([`Error::Refused`]).
pub(crate) fn service_create_args(
    spec: &ContainerSpec,
    secret: &str,
    options: &RunOptions,
) -> Result<Vec<String>, Error> {
    let AgentSetup::Shipped(agent) = &spec.agent else {
        return Err(Error::Refused(
            "engine swarm cannot mount this machine's directories; its sandboxes copy the work dir (workdir_mode = \"copy\")".into(),
        ));
    };
    if spec.limits.network != Network::Bridge {
        return Err(network_refusal(spec.limits.network));
    }
    if let Some(r) = &spec.runtime {
        return Err(Error::Refused(format!(
            "runtime = \"{r}\": a swarm service cannot choose its OCI runtime (set it as the default runtime of the nodes' daemons instead); unset runtime"
        )));
    }
    if !spec.publish.is_empty() {
        return Err(Error::Refused(
            "--publish is not available on engine swarm yet; `h9sandbox port-forward ID PORT` reaches a port of the sandbox through its agent".into(),
        ));
    }
    let l = &spec.limits;
    let workdir = spec.workdir.to_string_lossy();
    let mut a = strings(&["service", "create", "--detach", "--quiet"]);
    a.extend(["--name".into(), spec.name.clone()]);
    for (k, v) in &spec.labels {
        a.extend(["--label".into(), format!("{k}={v}")]);
        a.extend(["--container-label".into(), format!("{k}={v}")]);
    }
    a.extend(strings(&[
        "--restart-condition",
        "none",
        "--replicas",
        "1",
        "--user",
        "0:0",
        "--no-healthcheck",
        // h9sandbox's agent is PID 1, never the engine's init (as the API's `Init: false`).
        "--init=false",
        "--no-resolve-image",
        "--cap-drop",
        "ALL",
    ]));
    for cap in l.caps.added() {
        a.extend(["--cap-add".into(), format!("CAP_{cap}")]);
    }
    let cpus = crate::types::format_cpus(l.cpus);
    a.extend([
        "--limit-cpu".into(),
        cpus.clone(),
        "--reserve-cpu".into(),
        cpus,
        "--limit-memory".into(),
        l.memory.clone(),
        "--reserve-memory".into(),
        l.memory.clone(),
        "--limit-pids".into(),
        l.pids_limit.to_string(),
        "--mount".into(),
        format!(
            "type=tmpfs,destination=/tmp,tmpfs-size={},tmpfs-mode=1777",
            l.tmp_size
        ),
        "--mount".into(),
        format!(
            "type=tmpfs,destination=/dev/shm,tmpfs-size={},tmpfs-mode=1777",
            l.memory
        ),
        "--mount".into(),
        format!("type=volume,destination={SCRATCH_DIR}"),
        "--mount".into(),
        format!(
            "type=volume,{}",
            crate::engine::docker::csv_field(format!("destination={workdir}"))
        ),
        "--workdir".into(),
        workdir.to_string(),
        "--secret".into(),
        format!("source={secret},target={SECRET_TARGET},uid=0,gid=0,mode=0400"),
        "--publish".into(),
        format!(
            "mode=host,target={},protocol=tcp",
            crate::contract::CHANNEL_PORT
        ),
    ]);
    for c in &spec.constraints {
        a.extend(["--constraint".into(), c.clone()]);
    }
    for (k, v) in &spec.env {
        a.extend(["--env".into(), format!("{k}={v}")]);
    }
    a.extend([
        "--env".into(),
        format!("TMPDIR={SCRATCH_DIR}"),
        "--entrypoint".into(),
        crate::contract::BIN.into(),
        agent.image.clone(),
    ]);
    a.extend(agent_args(spec, agent, options));
    Ok(a)
}

/// The arguments of the task's PID 1, h9sandbox's agent (`agent init`): the user, the
/// rlimits of `options`, where the secret is, where the channel listens.
fn agent_args(spec: &ContainerSpec, agent: &ShippedAgent, options: &RunOptions) -> Vec<String> {
    let mut a = vec![
        crate::contract::ARG.to_string(),
        "init".into(),
        "--user".into(),
        spec.user.to_string(),
    ];
    if let Some(n) = &spec.user_name {
        a.extend(["--user-name".into(), n.clone()]);
    }
    for (name, n) in [
        ("nofile", options.ulimit_nofile),
        ("nproc", options.ulimit_nproc),
    ] {
        if n > 0 {
            a.extend(["--rlimit".into(), format!("{name}={n}")]);
        }
    }
    a.extend([
        "--secret-file".into(),
        SECRET_PATH.into(),
        "--channel".into(),
        agent.listen.clone(),
    ]);
    a
}

/// The Engine API's `ServiceSpec` (`POST /services/create`) of the service that
/// [`service_create_args`] describes, word for word, for the secret of ID `secret_id` (the
/// API takes the ID where the client resolves a name). Errors: those of
/// [`service_create_args`], and a size that does not parse.
pub(crate) fn service_create_body(
    spec: &ContainerSpec,
    secret: &str,
    secret_id: &str,
    options: &RunOptions,
) -> Result<serde_json::Value, Error> {
    use serde_json::json;
    service_create_args(spec, secret, options)?;
    let AgentSetup::Shipped(agent) = &spec.agent else {
        unreachable!("service_create_args refuses a mounted agent");
    };
    let l = &spec.limits;
    let size = |what: &str, s: &str| {
        crate::config::parse_size(s).map_err(|e| Error::Refused(format!("{e} ({what})")))
    };
    let memory = size("memory of the sandbox", &l.memory)?;
    let tmp = size("tmp_size of the sandbox", &l.tmp_size)?;
    let nano_cpus = crate::engine::docker::api::nano_cpus(l.cpus);
    let workdir = spec.workdir.to_string_lossy();
    let labels: serde_json::Map<String, serde_json::Value> = spec
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let mut env: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    env.push(format!("TMPDIR={SCRATCH_DIR}"));
    let caps: Vec<String> = l.caps.added().iter().map(|c| format!("CAP_{c}")).collect();
    // 0o1777 and 0o400, as the client's `tmpfs-mode=1777` and `mode=0400`.
    let tmpfs = |target: &str, bytes: u64| {
        json!({ "Type": "tmpfs", "Target": target,
                "TmpfsOptions": { "SizeBytes": bytes, "Mode": 0o1777 } })
    };
    Ok(json!({
        "Name": spec.name,
        "Labels": labels,
        "TaskTemplate": {
            "ContainerSpec": {
                "Image": agent.image,
                "Labels": labels,
                "Command": [crate::contract::BIN],
                "Args": agent_args(spec, agent, options),
                "Env": env,
                "Dir": workdir,
                "User": "0:0",
                // h9sandbox's agent is PID 1, never the engine's init.
                "Init": false,
                "Healthcheck": { "Test": ["NONE"] },
                "CapabilityDrop": ["ALL"],
                "CapabilityAdd": caps,
                "Mounts": [
                    tmpfs("/tmp", tmp),
                    tmpfs("/dev/shm", memory),
                    { "Type": "volume", "Target": SCRATCH_DIR },
                    { "Type": "volume", "Target": workdir },
                ],
                "Secrets": [{
                    "File": { "Name": SECRET_TARGET, "UID": "0", "GID": "0", "Mode": 0o400 },
                    "SecretID": secret_id,
                    "SecretName": secret,
                }],
            },
            "Resources": {
                "Limits": { "NanoCPUs": nano_cpus, "MemoryBytes": memory, "Pids": l.pids_limit },
                "Reservations": { "NanoCPUs": nano_cpus, "MemoryBytes": memory },
            },
            "RestartPolicy": { "Condition": "none" },
            "Placement": { "Constraints": spec.constraints },
        },
        "Mode": { "Replicated": { "Replicas": 1 } },
        "EndpointSpec": {
            "Ports": [{ "Protocol": "tcp", "TargetPort": crate::contract::CHANNEL_PORT,
                        "PublishMode": "host" }],
        },
    }))
}

/// Why a sandbox with network `network` cannot run on a swarm.
pub(crate) fn network_refusal(network: Network) -> Error {
    Error::Refused(format!(
        "network = \"{network}\" is not available on engine swarm: {}; use --network bridge",
        match network {
            Network::None => "a swarm service cannot run without a network, and the agent's channel is a port published on its node",
            _ => "the allowlist's proxy shares a unix socket with the sandbox, so it must run on the sandbox's node, where h9sandbox cannot place a sidecar yet",
        }
    ))
}
