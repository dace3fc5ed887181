//! The operations that go through the Engine API over the daemon's socket ([`super::api`]) in
//! place of a client process, where it answers: `create`, an image's ID, `list`; and the
//! label check of volume listings that does not trust the engine's filter.

use std::ffi::OsString;
use std::sync::Arc;

use anyhow::{anyhow, Result};

use super::*;
use crate::engine::{AgentSetup, ContainerSpec, ContainerSummary, VolumeSummary};
use crate::error::Error;

impl Docker {
    /// [`Environment::create`] through the Engine API (a mounted agent's container on a local
    /// daemon): `POST /containers/create` and `/start`, the same container as `args`' `docker
    /// run -d`, which `-v` shows first (a person can replay either). Its failures are worded and
    /// typed as the client's. `None`: not here (the client runs).
    pub(super) async fn create_api(
        &self,
        spec: &ContainerSpec,
        ulimits: &[String],
        args: &[String],
    ) -> Result<Option<Result<String>>> {
        let Some(api) = self.api() else {
            return Ok(None);
        };
        if !matches!(spec.agent, AgentSetup::Mounted(_)) || api.version().await.is_none() {
            return Ok(None);
        }
        let body = api::create_body(spec, ulimits)?;
        let create = format!("/containers/create?name={}", api::encode(&spec.name));
        let start = format!("/containers/{}/start", api::encode(&spec.name));
        if self.reporter.verbose() {
            let shown: Vec<OsString> = args.iter().map(Into::into).collect();
            self.reporter.command(&format!("+ {}", self.shown(&shown)));
            self.reporter.command(&format!(
                "  = {} && {}",
                api.curl_line("POST", &create, Some(&body)).await,
                api.curl_line("POST", &start, None).await
            ));
        }
        // Once sent, a create is seen through even when `up` is interrupted meanwhile (its
        // future dropped): the cleanup that follows ([`Environment::remove_labelled`]) waits
        // for it, so that it finds the container the daemon made.
        let guard = Arc::clone(&self.creating).read_owned().await;
        let (api, name) = (api.clone(), spec.name.clone());
        let task = tokio::spawn(async move {
            let _guard = guard;
            let t = api::REQUEST_TIMEOUT;
            let Some(made) = api.call("POST", &create, Some(&body), t).await? else {
                return Ok(None);
            };
            if !made.ok() {
                return Ok(Some(Err(made)));
            }
            let id = made.json("containers/create")?["Id"]
                .as_str()
                .map(str::to_string)
                .filter(|i| !i.is_empty())
                .ok_or_else(|| anyhow!("the Docker daemon created {name} but named no ID"))?;
            let path = format!("/containers/{}/start", api::encode(&id));
            match api.call("POST", &path, None, t).await? {
                Some(a) if a.ok() => Ok(Some(Ok(id))),
                Some(a) => Ok(Some(Err(a))),
                None => Err(anyhow!(
                    "the Docker daemon at {} went away between creating and starting {name}",
                    api.endpoint().describe()
                )),
            }
        });
        let outcome: Result<Option<std::result::Result<String, api::Answer>>> = task
            .await
            .map_err(|e| anyhow!("the container's create was lost: {e}"))?;
        Ok(outcome?.map(|r| r.map_err(|refused| self.run_failure(spec, &refused))))
    }

    /// The error of a refused `create` or `start` (`answer`), as the client's `run` failure
    /// means it: 404 of an image: [`Error::ImageUnavailable`]; 409: [`Error::NameInUse`]; an
    /// unknown runtime; else the daemon's message with the hint for a known cause.
    pub(super) fn run_failure(&self, spec: &ContainerSpec, answer: &api::Answer) -> anyhow::Error {
        let message = answer.as_client_error();
        if answer.not_found() && is_no_such_image(&message) {
            return Error::ImageUnavailable {
                image: spec.image.clone(),
                reason: "not present locally".into(),
            }
            .into();
        }
        if answer.conflict() && message.contains("is already in use") {
            return Error::NameInUse(spec.name.clone()).into();
        }
        if let Some(r) = spec
            .runtime
            .as_deref()
            .filter(|_| is_unknown_runtime(&message))
        {
            return unknown_runtime(&self.bin, r).into();
        }
        anyhow!(
            "`{} run` failed: {}{}",
            self.bin,
            message,
            run_failure_hint(&message)
        )
    }

    /// The ID of the image `reference` (`GET /images/{name}/json`), or the daemon's refusal
    /// (404: no such image); `None`: no API here.
    pub(super) async fn image_id_api(
        &self,
        reference: &str,
    ) -> Result<Option<std::result::Result<String, api::Answer>>> {
        let path = format!("/images/{}/json", api::encode_image(reference));
        let Some(a) = self.get("GET", &path).await? else {
            return Ok(None);
        };
        if !a.ok() {
            return Ok(Some(Err(a)));
        }
        let id = a.json("images/json")?["Id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Ok(Some(Ok(id)))
    }

    /// The containers carrying `labels` (`GET /containers/json?all=1`), as the engine filtered
    /// them; `None`: no API here ([`Docker::call`]).
    pub(super) async fn list_api(
        &self,
        labels: &[(&str, &str)],
    ) -> Result<Option<Vec<ContainerSummary>>> {
        let path = format!(
            "/containers/json?all=1&filters={}",
            api::label_filters(labels)
        );
        let Some(a) = self.get("GET", &path).await? else {
            return Ok(None);
        };
        if !a.ok() {
            return Err(self.api_failed("ps", &a));
        }
        api::parse_list_body(&a.body).map(Some)
    }
}

/// The volumes of `found` (names and labels) that carry every label of `labels`: the engine's
/// filter is not trusted (Podman 4 ORs repeated `label=` filters, which would hand over every
/// sandbox's volume).
pub(super) fn volume_summaries(
    found: Vec<(String, std::collections::BTreeMap<String, String>)>,
    labels: &[(&str, &str)],
) -> Vec<VolumeSummary> {
    found
        .into_iter()
        .filter(|(_, have)| {
            labels
                .iter()
                .all(|(k, v)| have.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(name, have)| VolumeSummary {
            // Our named volumes are named after their sandbox (`h9sandbox-<32 hex>`); an
            // anonymous one (a copied work dir's) carries the sandbox's ID label.
            sandbox_id: name
                .strip_prefix("h9sandbox-")
                .and_then(|h| uuid::Uuid::parse_str(h).ok())
                .or_else(|| {
                    let id = have.get(crate::engine::LABEL_ID)?;
                    uuid::Uuid::parse_str(id).ok()
                })
                .map(|u| u.to_string()),
            name,
        })
        .collect()
}
