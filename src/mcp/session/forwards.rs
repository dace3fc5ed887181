//! `sandbox_port_forward`: the session's port forwards, registered in the state directory and
//! ended with their sandbox or the session.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use uuid::Uuid;

use super::Session;
use crate::error::Error;
use crate::mcp::tools::*;
use crate::sandbox::forward::{self, PortSpec, RegisteredForward, Registry};

/// How many ports one MCP session may forward at once.
const MAX_SESSION_FORWARDS: usize = 32;

/// The session's port forwards: each serving in a task of its own, all registered in the state
/// directory as this process's (kind `mcp`: `ls` shows them; `down` leaves them to end with
/// their sandbox).
#[derive(Default)]
pub(super) struct Forwards {
    /// The registered forwards, each with the key its task removes it by.
    live: Vec<(u64, RegisteredForward)>,
    /// The registration, while there is a forward.
    registry: Option<Registry>,
    /// The forwards' tasks.
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// What ends each forward at once (`sandbox_down` of its sandbox), by key, with its sandbox.
    stops: Vec<(u64, Uuid, tokio::sync::oneshot::Sender<()>)>,
    /// The key of the next forward.
    next: u64,
}

impl Session {
    /// Whether the session offers `sandbox_port_forward` (`mcp --port-forward`).
    pub(crate) fn offers_port_forward(&self) -> bool {
        self.port_forward
    }

    fn forwards(&self) -> std::sync::MutexGuard<'_, Forwards> {
        self.forwards.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends every forward of the session and waits (a few seconds at most) for their tasks;
    /// their registration goes with the last.
    pub(crate) async fn end_forwards(&self) {
        let _ = self.forwards_end.send(true);
        let tasks = std::mem::take(&mut self.forwards().tasks);
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
        let mut f = self.forwards();
        f.live.clear();
        f.registry = None;
    }

    /// Registers `fwd` in the state directory with the session's other forwards; returns its
    /// key. Errors: the state directory cannot be written.
    fn register_forward(&self, fwd: RegisteredForward) -> Result<u64> {
        let mut f = self.forwards();
        let key = f.next;
        f.next += 1;
        f.live.push((key, fwd));
        let all: Vec<RegisteredForward> = f.live.iter().map(|(_, r)| r.clone()).collect();
        let written = match &mut f.registry {
            Some(r) => r.set(all),
            None => Registry::new(&self.ctx, "mcp", all).map(|r| f.registry = Some(r)),
        };
        if let Err(e) = written {
            f.live.retain(|(k, _)| *k != key);
            return Err(e);
        }
        Ok(key)
    }

    /// Ends at once the forwards of `sandbox` (their tasks unregister them).
    pub(super) fn end_forwards_of(&self, sandbox: Uuid) {
        let mut f = self.forwards();
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut f.stops)
            .into_iter()
            .partition(|(_, s, _)| *s == sandbox);
        f.stops = rest;
        for (_, _, stop) in mine {
            let _ = stop.send(());
        }
    }

    /// Forgets the forward `key` (its task ended), and the registration with the last one.
    fn unregister_forward(&self, key: u64) {
        let mut f = self.forwards();
        f.live.retain(|(k, _)| *k != key);
        f.stops.retain(|(k, _, _)| *k != key);
        let all: Vec<RegisteredForward> = f.live.iter().map(|(_, r)| r.clone()).collect();
        if all.is_empty() {
            f.registry = None;
        } else if let Some(r) = &mut f.registry {
            let _ = r.set(all);
        }
    }

    /// `sandbox_port_forward`: [`forward::bind`] one listener, served in a task of its own
    /// until its sandbox is gone or the session ends ([`Session::end_forwards`]).
    pub(super) async fn port_forward(self: &Arc<Self>, p: PortForwardParams) -> Result<Done> {
        if !self.port_forward {
            return Err(Error::Refused(
                "this MCP server does not forward ports; its operator offers it with `h9sandbox mcp --port-forward`".into(),
            )
            .into());
        }
        if p.local_port.is_some_and(|l| l != 0 && l < 1024) {
            return Err(Error::Refused(
                "local_port below 1024 is refused (the server's privileged ports are not a client's to take); give one from 1024 up, or none for a free one".into(),
            )
            .into());
        }
        if self.forwards().live.len() >= MAX_SESSION_FORWARDS {
            return Err(Error::Refused(format!(
                "this session forwards {MAX_SESSION_FORWARDS} ports already, the most one session may; end a sandbox (sandbox_down) to end its forwards"
            ))
            .into());
        }
        if *self.forwards_end.borrow() {
            return Err(anyhow::anyhow!("the server is shutting down"));
        }
        let id = self.target(p.id).await?;
        let spec = PortSpec {
            local: p.local_port.unwrap_or(0),
            remote: p.port.get(),
        };
        let forwarder = forward::bind(&self.ctx, &id, &[spec], forward::Asker::Mcp).await?;
        let sandbox = forwarder.record.id;
        let Some(bound) = forwarder.bound().into_iter().next() else {
            return Err(anyhow::anyhow!("no listener was bound"));
        };
        let key = self.register_forward(RegisteredForward {
            sandbox,
            bound: bound.clone(),
        })?;
        let session = Arc::clone(self);
        let mut end = self.forwards_end.subscribe();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        self.forwards().stops.push((key, sandbox, stop_tx));
        let task = tokio::spawn(async move {
            let stop = async move {
                tokio::select! {
                    _ = end.wait_for(|ended| *ended) => "the session ended".to_string(),
                    _ = stop_rx => "its sandbox was taken down".to_string(),
                }
            };
            let why = forwarder.serve(session.ctx(), stop).await;
            if session.ctx.verbose() {
                session.ctx.reporter.note(&format!(
                    "mcp: port forwarding to sandbox {}: {why}",
                    &sandbox.simple().to_string()[..12]
                ));
            }
            session.unregister_forward(key);
        });
        self.forwards().tasks.push(task);
        let text = format!(
            "{} carries connections to port {} of sandbox {}",
            bound.address,
            bound.port,
            &sandbox.simple().to_string()[..12]
        );
        Done::new(
            &PortForwardResult {
                id: sandbox.to_string(),
                address: bound.address,
                port: bound.port,
            },
            text,
        )
    }
}
