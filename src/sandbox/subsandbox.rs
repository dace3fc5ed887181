//! Sub-sandboxes (`up --parent`): a sub-agent's sandbox takes its parent's image, limits,
//! network and work dir, which explicit requests may only tighten ([`child_limits`],
//! [`child_workdir`]), never loosen; configuration defaults do not apply to it.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::create::UpRequest;
use super::workdir::resolve_workdir;
use crate::config::{parse_size, Config};
use crate::error::Error;
use crate::state::Record;
use crate::types::{Caps, Limits, Network};

/// Limits a sub-sandbox asks for with explicit flags (`None`: inherit the parent's).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Tighten {
    /// `--cpus`, in cores.
    pub cpus: Option<f64>,
    /// `--memory`, Docker notation.
    pub memory: Option<String>,
    /// `--pids-limit`.
    pub pids_limit: Option<u32>,
    /// `--network` (`allowlist` when only `--allow` is given).
    pub network: Option<Network>,
    /// `--allow`: a list no wider than the parent's.
    pub allow: Vec<String>,
    /// `--caps`.
    pub caps: Option<Caps>,
}

impl Tighten {
    /// The limits `req` gives explicitly (as flags), with the values the configuration (`cfg`,
    /// with [`UpRequest::config_flags`] applied) validated. Values from the file or environment
    /// do not count: a sub-sandbox inherits its parent's instead.
    pub(crate) fn explicit(req: &UpRequest, cfg: &Config) -> Tighten {
        Tighten {
            cpus: req.cpus.is_some().then_some(cfg.cpus),
            memory: req.memory.is_some().then(|| cfg.memory.clone()),
            pids_limit: req.pids_limit.is_some().then_some(cfg.pids_limit),
            network: req
                .network
                .or((!req.allow.is_empty()).then_some(Network::Allowlist)),
            allow: req.allow.clone(),
            caps: req.caps,
        }
    }
}

/// A sub-sandbox's limits: the parent's, tightened by `req`. Asking for more than the parent has
/// is [`Error::Refused`] naming the flag, the value and the parent's value.
pub(crate) fn child_limits(parent: &Limits, req: &Tighten) -> Result<Limits, Error> {
    let refuse = |flag: &str, asked: String, has: String| {
        Error::Refused(format!(
            "{flag} {asked} exceeds the parent's {has}; a sub-sandbox may only tighten its parent's limits (give at most {has}, or leave {flag} out to inherit it)"
        ))
    };
    let mut out = parent.clone();
    if let Some(c) = req.cpus {
        if c > parent.cpus + 1e-9 {
            return Err(refuse("--cpus", c.to_string(), parent.cpus.to_string()));
        }
        out.cpus = c;
    }
    if let Some(m) = &req.memory {
        let asked = parse_size(m).map_err(|e| Error::Usage(format!("--memory: {e}")))?;
        // A parent limit that does not parse (hand-edited file) cannot be compared: refuse.
        let has = parse_size(&parent.memory).unwrap_or(0);
        if asked > has {
            return Err(refuse("--memory", m.clone(), parent.memory.clone()));
        }
        out.memory = m.clone();
    }
    if let Some(p) = req.pids_limit {
        if p > parent.pids_limit {
            return Err(refuse(
                "--pids-limit",
                p.to_string(),
                parent.pids_limit.to_string(),
            ));
        }
        out.pids_limit = p;
    }
    if let Some(n) = req.network {
        if n.reach() > parent.network.reach() {
            return Err(Error::Refused(format!(
                "--network {n} would give network access the parent does not have (its network is {}); a sub-sandbox may only tighten its parent's limits (leave --network out)",
                parent.network
            )));
        }
        out.network = n;
        if n != Network::Allowlist {
            out.allow.clear();
        }
    }
    if !req.allow.is_empty() {
        if let Some(h) = req.allow.iter().find(|h| {
            parent.network == Network::Allowlist && !crate::agent::proxy::covers(&parent.allow, h)
        }) {
            return Err(Error::Refused(format!(
                "--allow {h} is not in the parent's allow list; a sub-sandbox may only tighten its parent's limits"
            )));
        }
        out.allow = req.allow.clone();
    }
    if let Some(c) = req.caps {
        if c == Caps::Standard && parent.caps == Caps::Minimal {
            return Err(Error::Refused(
                "--caps standard would give capabilities the parent does not have (its profile is minimal); a sub-sandbox may only tighten its parent's limits (leave --caps out)".into(),
            ));
        }
        out.caps = c;
    }
    Ok(out)
}

/// A sub-sandbox's work dir: the parent's, or `dir` when it is the parent's or inside it.
pub(crate) fn child_workdir(parent: &Record, dir: Option<&Path>) -> Result<PathBuf> {
    let Some(dir) = dir else {
        return resolve_workdir(Some(&parent.workdir));
    };
    let canon = resolve_workdir(Some(dir))?;
    if !canon.starts_with(&parent.workdir) {
        return Err(Error::Usage(format!(
            "--workdir {} is outside the parent's work dir {}; a sub-sandbox works in its parent's work dir or a directory inside it",
            canon.display(),
            parent.workdir.display()
        ))
        .into());
    }
    Ok(canon)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            cpus: 1.0,
            memory: "512m".into(),
            pids_limit: 100,
            tmp_size: "64m".into(),
            network: Network::Bridge,
            allow: Vec::new(),
            caps: Caps::Standard,
        }
    }

    #[test]
    fn children_inherit_and_may_only_tighten() {
        let p = limits();
        assert_eq!(child_limits(&p, &Tighten::default()).unwrap(), p);
        let tight = child_limits(
            &p,
            &Tighten {
                cpus: Some(0.5),
                memory: Some("0.5g".into()),
                pids_limit: Some(100),
                network: Some(Network::None),
                allow: Vec::new(),
                caps: Some(Caps::Minimal),
            },
        )
        .unwrap();
        assert_eq!(
            (
                tight.cpus,
                tight.memory.as_str(),
                tight.pids_limit,
                tight.network
            ),
            (0.5, "0.5g", 100, Network::None)
        );
        assert_eq!(tight.tmp_size, "64m");
        let err = |t: Tighten| child_limits(&p, &t).unwrap_err().to_string();
        let e = err(Tighten {
            memory: Some("1g".into()),
            ..Default::default()
        });
        assert!(
            e.starts_with("--memory 1g exceeds the parent's 512m"),
            "{e}"
        );
        let e = err(Tighten {
            cpus: Some(1.5),
            ..Default::default()
        });
        assert!(e.starts_with("--cpus 1.5 exceeds the parent's 1"), "{e}");
        let e = err(Tighten {
            pids_limit: Some(101),
            ..Default::default()
        });
        assert!(
            e.starts_with("--pids-limit 101 exceeds the parent's 100"),
            "{e}"
        );
        let closed = Limits {
            network: Network::None,
            ..limits()
        };
        let e = child_limits(
            &closed,
            &Tighten {
                network: Some(Network::Bridge),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--network bridge"), "{e}");
        // Under an allowlist parent: no bridge, and only a narrower list.
        let listed = Limits {
            network: Network::Allowlist,
            allow: vec!["*.debian.org".into()],
            ..limits()
        };
        let ask = |network: Option<Network>, allow: &[&str]| {
            child_limits(
                &listed,
                &Tighten {
                    network,
                    allow: allow.iter().map(|h| h.to_string()).collect(),
                    ..Default::default()
                },
            )
        };
        assert_eq!(ask(None, &[]).unwrap().allow, ["*.debian.org"]);
        let narrower = ask(Some(Network::Allowlist), &["deb.debian.org"]).unwrap();
        assert_eq!(narrower.allow, ["deb.debian.org"]);
        assert!(ask(Some(Network::Bridge), &[]).is_err());
        let e = ask(Some(Network::Allowlist), &["pypi.org"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--allow pypi.org is not in the parent's allow list"),
            "{e}"
        );
        assert!(ask(Some(Network::None), &[]).unwrap().allow.is_empty());
        assert_eq!(tight.caps, Caps::Minimal);
        let minimal = Limits {
            caps: Caps::Minimal,
            ..limits()
        };
        let e = child_limits(
            &minimal,
            &Tighten {
                caps: Some(Caps::Standard),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--caps standard"), "{e}");
    }
}
