//! What [`Swarm`] asks the manager through its Engine API ([`crate::engine::docker::api`],
//! over its socket or TLS) in place of a client process, where the API answers: a service's
//! task, its log and its secrets, removals, listings. Each returns `Ok(None)` where there is
//! no API (the client is asked instead, as before), `Ok(Some(None))` for a 404 (no such
//! service), and words the manager's other refusals as the client's (`` `docker VERB`
//! failed: ... ``).

use anyhow::Result;
use serde_json::{json, Value};

use super::*;
use crate::engine::docker::api::{self, Answer};
use crate::engine::{ContainerSpec, ContainerSummary};

/// The `filters` query value of `f` (a JSON object of arrays, as the Engine API takes it).
fn filters(f: Value) -> String {
    api::encode(&f.to_string())
}

impl Swarm {
    /// `method path` to the manager; `Ok(Some(None))`: 404. `verb` names the client's
    /// counterpart in a refusal (`service ps`).
    async fn ask(&self, method: &str, path: &str, verb: &str) -> Result<Option<Option<Answer>>> {
        let Some(a) = self.docker.get(method, path).await? else {
            return Ok(None);
        };
        if a.not_found() {
            return Ok(Some(None));
        }
        if !a.ok() {
            return Err(self.docker.api_failed(verb, &a));
        }
        Ok(Some(Some(a)))
    }

    /// Service `service`'s newest task, one request (`GET /tasks` filtered by service) and,
    /// with `addr` for a running task, a second for its node's address (`GET /nodes/{id}`); a
    /// task of state `new` while it has none.
    pub(super) async fn task_api(&self, service: &str, addr: bool) -> Result<Option<Option<Task>>> {
        let path = format!(
            "/tasks?filters={}",
            filters(json!({ "service": [service] }))
        );
        let a = match self.ask("GET", &path, "service ps").await? {
            Some(Some(a)) => a,
            other => return Ok(other.map(|_| None)),
        };
        let Some(found) = newest_task(&a.body)? else {
            return Ok(Some(Some(Task::default())));
        };
        let mut task = parse_task(&found.to_string())?;
        if addr && task.state == "running" && !task.node_id.is_empty() {
            let path = format!("/nodes/{}", api::encode(&task.node_id));
            let n = match self.ask("GET", &path, "node inspect").await? {
                Some(Some(n)) => n,
                None => return Ok(None),
                Some(None) => {
                    return Err(anyhow::anyhow!(
                        "`{} node inspect` failed: the node {} that runs service {service}'s task is no longer in the swarm",
                        self.bin(),
                        task.node_id
                    ))
                }
            };
            task.node_addr = n.json("nodes")?["Status"]["Addr"]
                .as_str()
                .unwrap_or_default()
                .to_string();
        }
        Ok(Some(Some(task)))
    }

    /// The last `lines` lines service `service`'s tasks logged (`GET /services/{id}/logs`, both
    /// streams, raw as `docker service logs --raw` prints them).
    pub(super) async fn logs_api(
        &self,
        service: &str,
        lines: usize,
    ) -> Result<Option<Option<String>>> {
        let path = format!(
            "/services/{}/logs?stdout=1&stderr=1&tail={lines}",
            api::encode(service)
        );
        Ok(self
            .ask("GET", &path, "service logs")
            .await?
            .map(|a| a.map(|a| log_text(&a.body))))
    }

    /// The names of the secrets service `service` uses (`GET /services/{id}`).
    pub(super) async fn secrets_of_api(
        &self,
        service: &str,
    ) -> Result<Option<Option<Vec<String>>>> {
        let path = format!("/services/{}", api::encode(service));
        let a = match self.ask("GET", &path, "service inspect").await? {
            Some(Some(a)) => a,
            other => return Ok(other.map(|_| None)),
        };
        let v = a.json("services")?;
        let names = v
            .pointer("/Spec/TaskTemplate/ContainerSpec/Secrets")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("SecretName")?.as_str().map(str::to_string))
            .collect();
        Ok(Some(Some(names)))
    }

    /// Removes service `service` (`DELETE /services/{id}`); `Some(false)`: there was none.
    pub(super) async fn remove_service_api(&self, service: &str) -> Result<Option<bool>> {
        let path = format!("/services/{}", api::encode(service));
        Ok(self
            .ask("DELETE", &path, "service rm")
            .await?
            .map(|a| a.is_some()))
    }

    /// One try at removing secret `name` (`DELETE /secrets/{id}`): `Some(Ok(()))` when it is
    /// gone (a missing one included), `Some(Err(refusal))` while the manager refuses (still in
    /// use by a service being removed).
    pub(super) async fn remove_secret_api(
        &self,
        name: &str,
    ) -> Result<Option<std::result::Result<(), String>>> {
        let path = format!("/secrets/{}", api::encode(name));
        let Some(a) = self.docker.get("DELETE", &path).await? else {
            return Ok(None);
        };
        Ok(Some(if a.ok() || a.not_found() {
            Ok(())
        } else {
            Err(a.as_client_error())
        }))
    }

    /// The IDs of the secrets labelled `key=value` (`GET /secrets` filtered by label).
    pub(super) async fn secrets_labelled_api(
        &self,
        key: &str,
        value: &str,
    ) -> Result<Option<Vec<String>>> {
        let f = filters(json!({ "label": [format!("{key}={value}")] }));
        let path = format!("/secrets?filters={f}");
        let Some(Some(a)) = self.ask("GET", &path, "secret ls").await? else {
            return Ok(None);
        };
        Ok(Some(ids_of(&a.json("secrets")?)))
    }

    /// The services carrying every label of `labels` (`GET /services` filtered by label), as
    /// `docker service inspect` gives them (a JSON array).
    pub(super) async fn services_api(&self, labels: &[(&str, &str)]) -> Result<Option<Value>> {
        let wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let path = format!("/services?filters={}", filters(json!({ "label": wanted })));
        let Some(Some(a)) = self.ask("GET", &path, "service ls").await? else {
            return Ok(None);
        };
        Ok(Some(a.json("services")?))
    }

    /// The summaries of the services carrying `labels` in three requests however many there
    /// are: the services, their tasks (`GET /tasks` filtered by those services), the nodes
    /// (for their host names, which `ls` shows).
    pub(super) async fn list_api(
        &self,
        labels: &[(&str, &str)],
    ) -> Result<Option<Vec<ContainerSummary>>> {
        let Some(services) = self.services_api(labels).await? else {
            return Ok(None);
        };
        let ids = ids_of(&services);
        if ids.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let path = format!("/tasks?filters={}", filters(json!({ "service": ids })));
        let Some(Some(tasks)) = self.ask("GET", &path, "service ps").await? else {
            return Ok(None);
        };
        let Some(Some(nodes)) = self.ask("GET", "/nodes", "node ls").await? else {
            return Ok(None);
        };
        let ps = ps_lines(&services, &tasks.json("tasks")?, &nodes.json("nodes")?);
        parse_services(&services.to_string(), &ps).map(Some)
    }

    /// Creates the secret `name` holding `secret`, labelled `labels` (`POST /secrets/create`,
    /// the secret base64 in its body, which `-v` shows without it); its ID. `Ok(None)`: no
    /// API here. Errors: the manager's refusal, worded as the client's.
    pub(super) async fn create_secret_api(
        &self,
        name: &str,
        secret: &Secret,
        labels: &[(String, String)],
    ) -> Result<Option<String>> {
        use base64::Engine as _;
        let labels: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let shown =
            json!({ "Name": name, "Labels": labels, "Data": "<the channel's secret, base64>" });
        let mut body = shown.clone();
        body["Data"] = Value::String(base64::engine::general_purpose::STANDARD.encode(&secret.0));
        let sent = self
            .docker
            .call_showing(
                "POST",
                "/secrets/create",
                Some(&body),
                Some(&shown),
                api::REQUEST_TIMEOUT,
            )
            .await;
        let a = match sent {
            Ok(Some(a)) => a,
            Ok(None) => return Ok(None),
            Err(e) => {
                // No answer, but the manager may have made it: removed if it is ours.
                self.remove_secret_if_labelled(name, &labels).await;
                return Err(e);
            }
        };
        if !a.ok() {
            let said = a.message();
            let e = self.docker.api_failed("secret create", &a);
            if said.contains("not a swarm manager") || said.contains("This node is not") {
                return Err(anyhow::anyhow!(
                    "{e} (engine swarm needs DOCKER_HOST or the context to name a swarm manager)"
                ));
            }
            return Err(e);
        }
        Ok(Some(id_of(&a, "secrets/create")?))
    }

    /// Removes secret `name` if it carries exactly `labels` (one that a creation whose answer
    /// was lost made), by its ID; another's of that name stays. Best effort: nothing is said.
    async fn remove_secret_if_labelled(&self, name: &str, labels: &serde_json::Map<String, Value>) {
        let path = format!("/secrets/{}", api::encode(name));
        let Ok(Some(Some(a))) = self.ask("GET", &path, "secret inspect").await else {
            return;
        };
        let Ok(v) = a.json("secrets") else { return };
        let ours = v.pointer("/Spec/Labels").and_then(Value::as_object) == Some(labels);
        if let (true, Some(id)) = (ours, v["ID"].as_str()) {
            let _ = self.remove_secret_api(id).await;
        }
    }

    /// Creates the service of `spec` (`POST /services/create` with [`service_create_body`]),
    /// its secret `secret` of ID `secret_id` made already; the service's ID. `Ok(None)`: no API
    /// here. Errors: the name taken ([`Error::NameInUse`]), the manager's other refusals.
    pub(super) async fn create_service_api(
        &self,
        spec: &ContainerSpec,
        secret: &str,
        secret_id: &str,
    ) -> Result<Option<String>> {
        let body = service_create_body(spec, secret, secret_id, self.docker.run_options())?;
        let Some(a) = self
            .docker
            .call_showing(
                "POST",
                "/services/create",
                Some(&body),
                Some(&body),
                api::REQUEST_TIMEOUT,
            )
            .await?
        else {
            return Ok(None);
        };
        if a.conflict() {
            return Err(crate::error::Error::NameInUse(spec.name.clone()).into());
        }
        if !a.ok() {
            return Err(self.docker.api_failed("service create", &a));
        }
        // What the client prints on stderr (`{"ID": …, "Warnings": […]}`), told the same way.
        if let Ok(v) = a.json("services/create") {
            for w in v["Warnings"].as_array().into_iter().flatten() {
                if let Some(w) = w.as_str() {
                    let w: String = w.chars().take(api::MESSAGE_LIMIT).collect();
                    self.docker.reporter_of().warn(&format!(
                        "the swarm manager: {}",
                        crate::report::printable(&w)
                    ));
                }
            }
        }
        Ok(Some(id_of(&a, "services/create")?))
    }
}

/// The non-empty `ID` of a creation's answer (`{"ID": "…"}`). Errors: there is none.
fn id_of(a: &Answer, what: &str) -> Result<String> {
    a.json(what)?["ID"]
        .as_str()
        .filter(|i| !i.is_empty())
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("the manager's answer to {what} has no ID"))
}

/// The `ID`s of a JSON array of the Engine API's objects.
fn ids_of(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o.get("ID")?.as_str().map(str::to_string))
        .collect()
}
