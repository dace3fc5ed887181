//! `runArgs`: the `docker run` options h9sandbox honours or refuses, and the limits they may
//! only tighten.

use anyhow::Result;

use super::parse::check_env_name;
use super::{Devcontainer, RunArgs};
use crate::error::Error;
use crate::types::Limits;

/// How one `runArgs` option is treated.
enum RunArg {
    /// Honoured: (takes a value).
    Honoured(bool),
    /// Would loosen the sandbox: refused.
    Loosens(bool),
}

/// The `docker run` options of `runArgs` h9sandbox knows: (names, how).
const RUN_ARGS: &[(&[&str], RunArg)] = &[
    (&["-e", "--env"], RunArg::Honoured(true)),
    (&["-l", "--label"], RunArg::Honoured(true)),
    (&["--network", "--net"], RunArg::Honoured(true)),
    (&["--cap-drop"], RunArg::Honoured(true)),
    (&["--security-opt"], RunArg::Honoured(true)),
    (&["-m", "--memory"], RunArg::Honoured(true)),
    (&["--cpus"], RunArg::Honoured(true)),
    (&["--pids-limit"], RunArg::Honoured(true)),
    (&["-p", "--publish"], RunArg::Honoured(true)),
    (
        &["--init", "--rm", "-i", "--interactive", "-t", "--tty"],
        RunArg::Honoured(false),
    ),
    (&["--privileged"], RunArg::Loosens(false)),
    (&["-P", "--publish-all"], RunArg::Loosens(false)),
    (
        &[
            "--cap-add",
            "--device",
            "--device-cgroup-rule",
            "-v",
            "--volume",
            "--mount",
            "--volumes-from",
            "--tmpfs",
            "--pid",
            "--ipc",
            "--uts",
            "--userns",
            "--cgroupns",
            "--cgroup-parent",
            "--group-add",
            "--sysctl",
            "--ulimit",
            "--runtime",
            "--memory-swap",
            "--env-file",
            "--gpus",
        ],
        RunArg::Loosens(true),
    ),
];

/// Parses `runArgs` (`--name=value` and `--name value` forms), keeping what h9sandbox honours
/// and adding `-p` ports to `ports`. Errors, naming the argument: one that would loosen the
/// sandbox, one h9sandbox does not support, a bad value.
pub(super) fn parse_run_args(
    words: &[String],
    name: &str,
    ports: &mut Vec<String>,
) -> Result<RunArgs> {
    let mut out = RunArgs::default();
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        let (opt, inline) = match word.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v.to_string())),
            _ => (word.as_str(), None),
        };
        let Some((_, how)) = RUN_ARGS.iter().find(|(names, _)| names.contains(&opt)) else {
            return Err(Error::Refused(format!(
                "{name}: `runArgs` {word:?} is not supported by h9sandbox (it honours --env, --label, --init, --network none, --cap-drop, --security-opt no-new-privileges, --memory, --cpus, --pids-limit and -p); remove it"
            ))
            .into());
        };
        let takes_value = match how {
            RunArg::Honoured(v) | RunArg::Loosens(v) => *v,
        };
        let value = if takes_value {
            match inline {
                Some(v) => Some(v),
                None => {
                    i += 1;
                    Some(words.get(i).cloned().ok_or_else(|| {
                        Error::Usage(format!("{name}: `runArgs` {word} needs a value"))
                    })?)
                }
            }
        } else {
            None
        };
        i += 1;
        let shown = match &value {
            Some(v) => format!("{opt} {v}"),
            None => opt.to_string(),
        };
        let loosens = || -> anyhow::Error {
            Error::Refused(format!(
                "{name}: `runArgs` {shown:?} would loosen the sandbox's hardening (h9sandbox keeps its own capabilities, seccomp, mounts, namespaces and limits); remove it to use this file with h9sandbox"
            ))
            .into()
        };
        if matches!(how, RunArg::Loosens(_)) {
            return Err(loosens());
        }
        let v = value.unwrap_or_default();
        let bad = |why: &str| -> anyhow::Error {
            Error::Usage(format!("{name}: `runArgs` {shown:?}: {why}")).into()
        };
        match opt {
            "-e" | "--env" => match v.split_once('=') {
                Some((k, val)) => {
                    check_env_name(k).map_err(|why| bad(&why))?;
                    out.env.push((k.to_string(), val.to_string()));
                }
                // `--env NAME` passes this host's value: not from a file the sandbox can write.
                None => return Err(Error::Refused(format!("{name}: `runArgs` {shown:?}: would copy this host's variable into the sandbox; give NAME=VALUE, or pass it to one command with `h9sandbox exec --env NAME`")).into()),
            },
            "-l" | "--label" => out.labels.push(v),
            "--network" | "--net" => match v.as_str() {
                "none" => out.network_none = true,
                // The sandbox's own network (bridge, none or the allowlist) stays.
                "bridge" | "default" => {}
                _ => return Err(loosens()),
            },
            // Every capability but the profile's is dropped already; dropping more is not
            // offered (the profiles are `minimal` and `standard`: `--caps`).
            "--cap-drop" => {}
            // h9sandbox sets no-new-privileges itself.
            "--security-opt" if is_no_new_privileges(&v) => {}
            "--security-opt" => return Err(loosens()),
            "-m" | "--memory" => {
                crate::config::parse_size(&v).map_err(|_| bad("not a size such as 512m"))?;
                out.memory = Some(v);
            }
            "--cpus" => {
                out.cpus = Some(
                    v.parse::<f64>()
                        .ok()
                        .filter(|c| *c > 0.0)
                        .ok_or_else(|| bad("not a number of CPUs"))?,
                )
            }
            "--pids-limit" => {
                out.pids_limit = Some(
                    v.parse::<u32>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| bad("not a positive number"))?,
                )
            }
            "-p" | "--publish" => {
                // [IP:][HOST:]CONTAINER[/PROTO]: the container's port is recorded.
                let container = v.rsplit(':').next().unwrap_or(&v);
                let container = container.split('/').next().unwrap_or(container);
                container
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| bad("not a port"))?;
                ports.push(container.to_string());
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Whether a `--security-opt` value is `no-new-privileges` (which every sandbox has).
fn is_no_new_privileges(v: &str) -> bool {
    matches!(
        v,
        "no-new-privileges" | "no-new-privileges:true" | "no-new-privileges=true"
    )
}

/// `limits` with `runArgs`' `--memory`, `--cpus`, `--pids-limit` and `--network none` of `dc`
/// applied: each may only tighten them (the sandbox's limits are h9sandbox's). Errors: a looser
/// one, naming it and the sandbox's value.
pub(crate) fn tighten(dc: &Devcontainer, limits: &mut Limits) -> Result<()> {
    let name = dc.config.display();
    let r = &dc.run_args;
    let looser = |what: &str, asked: String, have: String| -> anyhow::Error {
        Error::Refused(format!(
            "{name}: `runArgs` {what} {asked} is more than the sandbox's {have}: the limits stay h9sandbox's (raise them with up's flags or configuration, and drop it from runArgs)"
        ))
        .into()
    };
    if let Some(m) = &r.memory {
        let (asked, have) = (
            crate::config::parse_size(m).unwrap_or(u64::MAX),
            crate::config::parse_size(&limits.memory).unwrap_or(0),
        );
        if asked > have {
            return Err(looser("--memory", m.clone(), limits.memory.clone()));
        }
        limits.memory = m.clone();
    }
    if let Some(c) = r.cpus {
        if c > limits.cpus {
            return Err(looser(
                "--cpus",
                c.to_string(),
                crate::types::format_cpus(limits.cpus),
            ));
        }
        limits.cpus = c;
    }
    if let Some(n) = r.pids_limit {
        if n > limits.pids_limit {
            return Err(looser(
                "--pids-limit",
                n.to_string(),
                limits.pids_limit.to_string(),
            ));
        }
        limits.pids_limit = n;
    }
    if r.network_none {
        limits.network = crate::types::Network::None;
        limits.allow.clear();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::devcontainer::tests::{dir, parse_in};

    #[test]
    fn run_args_that_keep_the_hardening_are_honoured() {
        let (_d, p) = dir();
        let dc = parse_in(
            &p,
            r#"{ "image": "x", "forwardPorts": [3000, "db:5432"], "appPort": 8080,
                 "runArgs": ["--init", "-e", "K=V", "--label=team=ml", "--network", "none",
                             "--memory=256m", "--cpus", "0.5", "--pids-limit=64", "-p", "127.0.0.1:9000:9001/tcp",
                             "--cap-drop=NET_RAW", "--security-opt", "no-new-privileges"] }"#,
        )
        .unwrap();
        let r = &dc.run_args;
        assert_eq!(r.env, vec![("K".into(), "V".into())]);
        assert_eq!(r.labels, vec!["team=ml".to_string()]);
        assert!(r.network_none);
        assert_eq!(
            (r.memory.as_deref(), r.cpus, r.pids_limit),
            (Some("256m"), Some(0.5), Some(64))
        );
        assert_eq!(dc.forward_ports, ["3000", "db:5432", "8080", "9001"]);
        let mut limits = Limits {
            cpus: 1.0,
            memory: "512m".into(),
            pids_limit: 256,
            tmp_size: "64m".into(),
            network: crate::types::Network::Bridge,
            allow: vec![],
            caps: crate::types::Caps::Standard,
        };
        let before = limits.clone();
        tighten(&dc, &mut limits).unwrap();
        assert_eq!(
            (
                limits.memory.as_str(),
                limits.cpus,
                limits.pids_limit,
                limits.network
            ),
            ("256m", 0.5, 64, crate::types::Network::None)
        );
        // Looser than the sandbox's: refused, naming it.
        let mut small = Limits {
            memory: "128m".into(),
            ..before
        };
        let e = tighten(&dc, &mut small).unwrap_err().to_string();
        assert!(
            e.contains("`runArgs` --memory 256m is more than the sandbox's 128m"),
            "{e}"
        );
        // `--env NAME` would copy this host's value.
        let e = parse_in(&p, r#"{ "image": "x", "runArgs": ["--env", "HOME"] }"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("would copy this host's variable"), "{e}");
    }
}
