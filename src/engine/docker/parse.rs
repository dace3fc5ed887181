//! Parsers of what the Docker-CLI-compatible clients print (`ps`, `inspect`, `image inspect`,
//! `volume inspect`), for both flavours. What they print is checked, never trusted.

use anyhow::{Context, Result};

use super::args::gvisor_host_pids;
use super::Flavor;
use crate::engine::{
    is_gvisor, AppliedLimits, ContainerStatus, ContainerSummary, ImageConfig, SidecarSummary,
    LABEL_ID, LABEL_STATE_DIR,
};

/// Parses the output of [`super::args::ps_args`].
pub(crate) fn parse_ps(flavor: Flavor, out: &str) -> Result<Vec<ContainerSummary>> {
    match flavor {
        Flavor::Docker => Ok(out.lines().filter_map(parse_ps_line).collect()),
        Flavor::Podman => parse_podman_ps(out),
    }
}

pub(super) fn parse_podman_ps(json: &str) -> Result<Vec<ContainerSummary>> {
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
            node: None,
        })
        .collect())
}
/// Parses `docker image inspect --format '{{json .Config}}'`.
pub(crate) fn parse_image_config(json: &str) -> Result<ImageConfig> {
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

/// Parses the output of [`super::args::inspect_args`].
pub(crate) fn parse_inspect(json: &str) -> Result<ContainerStatus> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Inspect {
        state: State,
        host_config: Option<HostConfig>,
        #[serde(default)]
        ports: Option<std::collections::BTreeMap<String, Option<Vec<Binding>>>>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Binding {
        #[serde(default)]
        host_ip: String,
        #[serde(default)]
        host_port: String,
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
    let pos = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok()).unwrap_or(0);
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
        // `"7336/tcp": [{"HostIp": "0.0.0.0", "HostPort": "49153"}]`.
        ports: i
            .ports
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.strip_suffix("/tcp")?.parse::<u16>().ok()?, v?)))
            .flat_map(|(port, bindings)| {
                bindings
                    .into_iter()
                    .filter_map(move |b| Some((port, b.host_ip, b.host_port.parse::<u16>().ok()?)))
            })
            .collect(),
    })
}

/// Whether `c` carries every `key=value` of `labels` that a summary holds (the sandbox ID and
/// the state directory; other labels are left to the engine's filter).
pub(crate) fn summary_has_labels(c: &ContainerSummary, labels: &[(&str, &str)]) -> bool {
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
pub(super) fn parse_volume_labels(
    out: &str,
) -> Vec<(String, std::collections::BTreeMap<String, String>)> {
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

pub(super) fn parse_ps_line(line: &str) -> Option<ContainerSummary> {
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
        node: None,
    })
}

/// What `docker port C` (and `podman port C`) prints, one binding a line: `80/tcp ->
/// 127.0.0.1:49153` (`[::1]:49153`, or `:::49153` from older clients, for IPv6). Lines of
/// other protocols, and lines that do not parse, are left out.
pub(crate) fn parse_port(out: &str) -> Vec<crate::types::PublishedPort> {
    out.lines()
        .filter_map(|l| {
            let (inside, host) = l.split_once(" -> ")?;
            let port = inside.trim().strip_suffix("/tcp")?.parse::<u16>().ok()?;
            let host = host.trim();
            let address = match host.strip_prefix(":::") {
                Some(p) => format!("[::]:{p}"),
                None => host.to_string(),
            };
            address
                .parse::<std::net::SocketAddr>()
                .ok()
                .map(|_| crate::types::PublishedPort { address, port })
        })
        .collect()
}

/// Parses the output of [`super::args::sidecar_ps_args`]; lines without three fields are
/// skipped.
pub(crate) fn parse_sidecars(out: &str) -> Vec<SidecarSummary> {
    out.lines()
        .filter_map(|line| {
            let mut f = line.split('\t');
            let (id, of, dir) = (f.next()?, f.next()?, f.next()?);
            let clean = |s: &str| {
                let s = s.trim();
                if s == "<no value>" {
                    String::new()
                } else {
                    s.to_string()
                }
            };
            (!id.is_empty()).then(|| SidecarSummary {
                id: id.to_string(),
                of: clean(of),
                state_dir: clean(dir),
            })
        })
        .collect()
}
