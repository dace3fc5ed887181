//! `sandbox_up`, `sandbox_list` and `sandbox_down`: making a sandbox within what the operator
//! granted, listing them, and removing them.

use std::sync::Arc;

use anyhow::Result;

use super::Session;
use crate::error::Error;
use crate::mcp::tools::*;
use crate::sandbox::create::{self, UpRequest};
use crate::sandbox::{down, list, Ctx};
use crate::types::Network;

impl Session {
    /// `sandbox_up`: [`create::create`] with a context built from the session's configuration
    /// and the call's limits, exactly as `up`'s flags would set them.
    pub(super) async fn up(&self, p: UpParams) -> Result<Done> {
        within_grant(&self.ctx.cfg, &p)?;
        let workdir = match (&p.workdir, &p.parent) {
            (Some(w), _) => Some(self.confined(w)?),
            (None, None) => Some(self.workdir.clone()),
            (None, Some(_)) => None,
        };
        let req = UpRequest {
            workdir,
            image: p.image,
            name: p.name,
            cpus: p.cpus.map(|c| c.to_string()),
            memory: p.memory,
            pids_limit: p.pids_limit.map(|n| n.to_string()),
            network: p.network.map(Network::from),
            runtime: None,
            allow: Vec::new(),
            caps: None,
            labels: Vec::new(),
            parent: p.parent,
            bootstrap: None,
            bootstrap_required: false,
            bootstrap_timeout: None,
            user: None,
            owner_pid: (!p.keep).then(|| std::process::id().to_string()),
            ttl: p.ttl,
            within: Some(self.workdir.clone()),
            reuse: false,
            one_command: false,
            devcontainer: None,
            build: None,
            // Publishing opens a port of this host: the operator's decision, not a client's
            // (sandbox_port_forward reaches a port on 127.0.0.1 instead).
            publish: Vec::new(),
            workdir_mode: None,
            engine: None,
            constraints: Vec::new(),
            placement_timeout: None,
            pool_member: None,
        };
        // A sub-sandbox shares its parent's work dir: only of a sandbox the session may reach.
        let req = UpRequest {
            parent: req.parent.as_deref().map(|q| self.scoped(q)).transpose()?,
            ..req
        };
        let ctx = Ctx::from_layers(
            &self.layers,
            &req.config_flags(),
            Arc::clone(&self.ctx.reporter),
        )?;
        let rec = create::create(&ctx, &req).await?;
        {
            let mut st = self.state();
            st.default = Some(rec.id);
            st.created.push(rec.id);
            if !p.keep {
                st.owned.push(rec.id);
            }
        }
        let info = self.info(&rec, None);
        let text = format!(
            "sandbox {} ({}) is {}: image {}, work dir {} (same path inside), {} CPU, {} memory, network {}{}; tools called without id now use it{}",
            info.id,
            info.name,
            info.state,
            info.image,
            info.workdir,
            info.cpus,
            info.memory,
            info.network,
            if info.isolated { "" } else { " (LOCAL: no container, commands run on the host)" },
            if p.keep { "; it outlives this session" } else { "; it is removed when this session ends" },
        );
        Done::new(&info, text)
    }

    /// `sandbox_list`: [`list::entries`].
    pub(super) async fn list(&self, _p: ListParams) -> Result<Done> {
        let entries = list::entries(&self.ctx).await?;
        let state = self.ctx.store.load()?;
        let scope = self.scope(&state);
        let sandboxes: Vec<SandboxInfo> = entries
            .iter()
            .filter(|e| scope.as_ref().is_none_or(|s| s.contains(&e.record.id)))
            .map(|e| self.info(&e.record, Some(e)))
            .collect();
        // One removed behind the session's back (`h9sandbox down`) is no default any more.
        let default = self
            .state()
            .default
            .filter(|d| state.sandboxes.iter().any(|r| r.id == *d))
            .map(|d| d.to_string());
        let mut text = if sandboxes.is_empty() {
            "no sandboxes".to_string()
        } else {
            String::new()
        };
        for s in &sandboxes {
            text.push_str(&format!(
                "{} {} {} ({}) {} {}{}\n",
                s.id,
                s.name,
                s.state,
                s.container_state.as_deref().unwrap_or("-"),
                s.image,
                s.workdir,
                if s.default { " [default]" } else { "" }
            ));
        }
        Done::new(&ListResult { sandboxes, default }, text)
    }

    /// `sandbox_down`: [`down::take_down`] of one sandbox (and its sub-sandboxes).
    pub(super) async fn down(&self, p: DownParams) -> Result<Done> {
        let id = self.target(p.id).await?;
        let mut report = down::take_down(&self.ctx, std::slice::from_ref(&id), false).await?;
        if let Some((_, e)) = report.unresolved.pop() {
            return Err(e.into());
        }
        {
            for r in &report.removed {
                self.end_forwards_of(r.id);
            }
            let mut st = self.state();
            for r in &report.removed {
                st.owned.retain(|o| *o != r.id);
                if st.default == Some(r.id) {
                    // Back to the newest sandbox this session still owns (the --auto-up one).
                    st.default = st.owned.last().copied();
                }
            }
        }
        if let Some(e) = report.error {
            return Err(e);
        }
        let result = DownResult {
            removed: report
                .removed
                .iter()
                .map(|r| RemovedInfo {
                    id: r.id.to_string(),
                    name: r.name.clone(),
                })
                .collect(),
        };
        let text = if result.removed.is_empty() {
            format!("sandbox {id} was already gone")
        } else {
            format!(
                "removed {}",
                result
                    .removed
                    .iter()
                    .map(|r| format!("{} ({})", r.id, r.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        Done::new(&result, text)
    }
}

/// Refuses a `sandbox_up` asking for more than the server's configuration gives (CPUs,
/// memory, processes, network): an MCP client gets what the operator granted, never more. It
/// may ask for less.
fn within_grant(cfg: &crate::config::Config, p: &UpParams) -> Result<(), Error> {
    let refuse = |what: &str, asked: String, has: String| {
        Error::Refused(format!(
            "{what} {asked} exceeds what this server grants ({has}, from its configuration); ask for at most {has}, or leave {what} out"
        ))
    };
    if let Some(c) = p.cpus {
        if !(c > 0.0 && c <= cfg.cpus + 1e-9) {
            return Err(refuse("cpus", c.to_string(), cfg.cpus.to_string()));
        }
    }
    if let Some(m) = &p.memory {
        let asked =
            crate::config::parse_size(m).map_err(|e| Error::Usage(format!("memory: {e}")))?;
        let has = crate::config::parse_size(&cfg.memory).unwrap_or(0);
        if asked > has {
            return Err(refuse("memory", m.clone(), cfg.memory.clone()));
        }
    }
    if let Some(n) = p.pids_limit {
        if n > cfg.pids_limit {
            return Err(refuse(
                "pids_limit",
                n.to_string(),
                cfg.pids_limit.to_string(),
            ));
        }
    }
    if let Some(n) = p.network {
        // `none`, or what the configuration says.
        let asked = Network::from(n);
        if asked != Network::None && asked != cfg.network {
            return Err(refuse(
                "network",
                asked.as_str().to_string(),
                cfg.network.as_str().to_string(),
            ));
        }
    }
    Ok(())
}
