//! Carrying out the planner's actions: precondition-safe patches of the contract keys, evictions, deletions and
//! kamikaze. Every mutation has a timeout; none decides anything.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use kube::api::{DeleteParams, EvictParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client, ResourceExt};
use serde_json::{Map, Value, json};

use k8sm_api::{KamikazeMechanism, keys};
use k8sm_planner::{Action, ActionKind, PodRef};

use crate::Error;

/// Longest any single API call or kamikaze POST may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// What came of one action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It was carried out. For a node write: the node's resourceVersion afterwards (equal to the one before when
    /// the patch changed nothing), so the loop knows which version its cache must reach.
    Done { node_version: Option<String> },
    /// Nothing to do any more (the pod is gone, the node changed under us): the next plan sees the new state.
    Stale(String),
    /// The Eviction API refused because of a PodDisruptionBudget (HTTP 429): wait and try again.
    DisruptionBudget(String),
}

#[derive(Clone)]
pub struct Executor {
    client: Client,
    http: reqwest::Client,
}

impl Executor {
    pub fn new(client: Client) -> Result<Self, Error> {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(|e| Error::Other(format!("building the kamikaze HTTP client: {e}")))?;
        Ok(Self { client, http })
    }

    /// Executes `action`. `node` is the cached Node the action is about, for resourceVersion preconditions.
    pub async fn execute(&self, action: &Action, node: Option<&Node>) -> Result<Outcome, Error> {
        let call = self.dispatch(action, node);
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(result) => result,
            Err(_) => Err(Error::Other(format!(
                "{} timed out after {CALL_TIMEOUT:?}",
                action.reason.as_str()
            ))),
        }
    }

    async fn dispatch(&self, action: &Action, node: Option<&Node>) -> Result<Outcome, Error> {
        match &action.kind {
            ActionKind::Mark {
                incompatible_since, ..
            } => {
                let node = require(node)?;
                let mut patch = node_patch(node);
                put(
                    &mut patch,
                    &["metadata", "labels", keys::INCOMPATIBLE_EXECUTOR_LABEL],
                    json!(keys::INCOMPATIBLE_EXECUTOR_LABEL_VALUE),
                );
                if let Some(since) = incompatible_since {
                    put(
                        &mut patch,
                        &[
                            "metadata",
                            "annotations",
                            keys::INCOMPATIBLE_EXECUTOR_ANNOTATION,
                        ],
                        json!(rfc3339(*since)),
                    );
                }
                if !has_our_taint(node) {
                    let mut taints = taints(node);
                    taints.push(Taint {
                        key: keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY.to_owned(),
                        effect: keys::INCOMPATIBLE_EXECUTOR_TAINT_EFFECT.to_owned(),
                        ..Taint::default()
                    });
                    put(
                        &mut patch,
                        &["spec", "taints"],
                        serde_json::to_value(taints)?,
                    );
                }
                self.patch_node(node, patch).await
            }
            ActionKind::Admit { at, cordon, .. } => {
                let node = require(node)?;
                let mut patch = node_patch(node);
                put(
                    &mut patch,
                    &["metadata", "annotations", keys::DRAINING_ANNOTATION],
                    json!(rfc3339(*at)),
                );
                if *cordon {
                    cordon_patch(node, &mut patch);
                }
                self.patch_node(node, patch).await
            }
            ActionKind::Cordon { .. } => {
                let node = require(node)?;
                let mut patch = node_patch(node);
                cordon_patch(node, &mut patch);
                self.patch_node(node, patch).await
            }
            ActionKind::Evict { pod, eviction } => {
                if eviction.use_eviction_api {
                    self.evict(pod).await
                } else {
                    self.delete_pod(pod).await
                }
            }
            ActionKind::DeletePod { pod } => self.delete_pod(pod).await,
            ActionKind::Kamikaze {
                mechanism,
                url,
                executor_id,
                at,
                ..
            } => {
                let node = require(node)?;
                match mechanism {
                    KamikazeMechanism::DeleteNode => self.delete_node(node).await,
                    KamikazeMechanism::Http | KamikazeMechanism::Annotation => {
                        if *mechanism == KamikazeMechanism::Http {
                            let url = url.as_deref().ok_or_else(|| {
                                Error::Other("Http kamikaze without a URL".into())
                            })?;
                            self.post(url, kamikaze_body(*at)).await?;
                        }
                        // The annotation is the record that kamikaze was sent (and, for Annotation, the message).
                        let mut patch = node_patch(node);
                        put(
                            &mut patch,
                            &["metadata", "annotations", keys::KAMIKAZE_ANNOTATION],
                            json!(rfc3339(*at)),
                        );
                        put(
                            &mut patch,
                            &[
                                "metadata",
                                "annotations",
                                keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION,
                            ],
                            json!(executor_id.clone().unwrap_or_default()),
                        );
                        self.patch_node(node, patch).await
                    }
                }
            }
            ActionKind::Complete { uncordon, .. } => {
                let node = require(node)?;
                let mut patch = node_patch(node);
                put(
                    &mut patch,
                    &["metadata", "labels", keys::INCOMPATIBLE_EXECUTOR_LABEL],
                    Value::Null,
                );
                for key in [
                    keys::INCOMPATIBLE_EXECUTOR_ANNOTATION,
                    keys::KAMIKAZE_ANNOTATION,
                    keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION,
                    keys::DRAINING_ANNOTATION,
                    keys::CORDONED_BY_ANNOTATION,
                ] {
                    put(&mut patch, &["metadata", "annotations", key], Value::Null);
                }
                if has_our_taint(node) {
                    let rest: Vec<Taint> = taints(node)
                        .into_iter()
                        .filter(|t| !is_our_taint(t))
                        .collect();
                    put(&mut patch, &["spec", "taints"], serde_json::to_value(rest)?);
                }
                if *uncordon {
                    put(&mut patch, &["spec", "unschedulable"], json!(false));
                }
                self.patch_node(node, patch).await
            }
        }
    }

    /// A JSON merge patch carrying the cached resourceVersion: if the node changed since, the apiserver answers 409
    /// and the next plan, made from the fresh node, decides again. Lists such as taints are replaced whole, so this
    /// precondition is what keeps a concurrent edit from being lost.
    async fn patch_node(&self, node: &Node, patch: Value) -> Result<Outcome, Error> {
        let api: Api<Node> = Api::all(self.client.clone());
        let name = node.name_any();
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(patched) => Ok(Outcome::Done {
                node_version: patched.resource_version(),
            }),
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => Ok(
                Outcome::Stale(format!("node {name} changed: {}", status.message)),
            ),
            Err(source) => Err(Error::Action {
                action: "patching node",
                object: name,
                source,
            }),
        }
    }

    async fn evict(&self, pod: &PodRef) -> Result<Outcome, Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let params = EvictParams {
            delete_options: Some(uid_precondition(&pod.uid)),
            ..EvictParams::default()
        };
        match api.evict(&pod.name, &params).await {
            Ok(_) => Ok(Outcome::Done { node_version: None }),
            Err(kube::Error::Api(status)) if status.code == 429 => {
                Ok(Outcome::DisruptionBudget(status.message.clone()))
            }
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                Ok(Outcome::Stale(format!(
                    "pod {pod} is gone or was replaced: {}",
                    status.message
                )))
            }
            Err(source) => Err(Error::Action {
                action: "evicting",
                object: pod.to_string(),
                source,
            }),
        }
    }

    async fn delete_pod(&self, pod: &PodRef) -> Result<Outcome, Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        match api.delete(&pod.name, &uid_precondition(&pod.uid)).await {
            Ok(_) => Ok(Outcome::Done { node_version: None }),
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                Ok(Outcome::Stale(format!(
                    "pod {pod} is gone or was replaced: {}",
                    status.message
                )))
            }
            Err(source) => Err(Error::Action {
                action: "deleting",
                object: pod.to_string(),
                source,
            }),
        }
    }

    async fn delete_node(&self, node: &Node) -> Result<Outcome, Error> {
        let api: Api<Node> = Api::all(self.client.clone());
        let name = node.name_any();
        let params = uid_precondition(&node.uid().unwrap_or_default());
        match api.delete(&name, &params).await {
            Ok(_) => Ok(Outcome::Done { node_version: None }),
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                Ok(Outcome::Stale(format!(
                    "node {name} is gone or was replaced: {}",
                    status.message
                )))
            }
            Err(source) => Err(Error::Action {
                action: "deleting node",
                object: name,
                source,
            }),
        }
    }

    /// POSTs the kamikaze `body` (see [`kamikaze_body`]) to `url`.
    async fn post(&self, url: &str, body: String) -> Result<(), Error> {
        let response = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| Error::Http {
                url: url.to_owned(),
                message: e.to_string(),
            })?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(Error::Http {
                url: url.to_owned(),
                message: format!("answered {}", response.status()),
            })
        }
    }
}

/// The body of the `Http` kamikaze: `{"kamikaze": "<RFC 3339>"}`, the exact value then written as the kamikaze
/// annotation. The agent records that value as obeyed before it restarts, so the annotation is never obeyed a
/// second time by an executor that comes back with its old ID.
fn kamikaze_body(at: DateTime<Utc>) -> String {
    json!({ "kamikaze": rfc3339(at) }).to_string()
}

fn require(node: Option<&Node>) -> Result<&Node, Error> {
    node.ok_or_else(|| Error::Other("the node is not in the cache".into()))
}

fn uid_precondition(uid: &str) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

fn node_patch(node: &Node) -> Value {
    json!({ "metadata": { "resourceVersion": node.resource_version() } })
}

/// Cordons, recording that k8sm did it — unless an operator had cordoned the node already: then k8sm must not
/// claim it, or it would uncordon a node the operator wants cordoned.
fn cordon_patch(node: &Node, patch: &mut Value) {
    let already = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    if !already {
        put(patch, &["spec", "unschedulable"], json!(true));
        put(
            patch,
            &["metadata", "annotations", keys::CORDONED_BY_ANNOTATION],
            json!(keys::CORDONED_BY_VALUE),
        );
    }
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

fn is_our_taint(taint: &Taint) -> bool {
    taint.key == keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY
        && taint.effect == keys::INCOMPATIBLE_EXECUTOR_TAINT_EFFECT
}

fn has_our_taint(node: &Node) -> bool {
    taints(node).iter().any(is_our_taint)
}

pub fn rfc3339(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Sets `value` at `path` in a JSON object, creating the objects on the way.
fn put(target: &mut Value, path: &[&str], value: Value) {
    let (last, parents) = path.split_last().expect("a non-empty path");
    let mut cursor = target;
    for key in parents {
        if !cursor.get(*key).is_some_and(Value::is_object) {
            cursor[*key] = Value::Object(Map::new());
        }
        cursor = &mut cursor[*key];
    }
    cursor[*last] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_builds_nested_objects_and_keeps_siblings() {
        let mut patch = json!({ "metadata": { "resourceVersion": "7" } });
        put(&mut patch, &["metadata", "annotations", "a/b"], json!("x"));
        put(&mut patch, &["metadata", "annotations", "c"], Value::Null);
        put(&mut patch, &["spec", "unschedulable"], json!(true));
        assert_eq!(
            patch,
            json!({
                "metadata": { "resourceVersion": "7", "annotations": { "a/b": "x", "c": null } },
                "spec": { "unschedulable": true }
            })
        );
    }

    #[test]
    fn cordon_does_not_claim_a_node_an_operator_cordoned() {
        let node = Node {
            spec: Some(k8s_openapi::api::core::v1::NodeSpec {
                unschedulable: Some(true),
                ..Default::default()
            }),
            ..Node::default()
        };
        let mut patch = json!({});
        cordon_patch(&node, &mut patch);
        assert_eq!(patch, json!({}));

        let mut patch = json!({});
        cordon_patch(&Node::default(), &mut patch);
        assert_eq!(patch["spec"]["unschedulable"], json!(true));
        assert_eq!(
            patch["metadata"]["annotations"][keys::CORDONED_BY_ANNOTATION],
            json!("k8sm")
        );
    }

    #[test]
    fn the_http_kamikaze_body_carries_the_annotations_value() {
        let at = DateTime::parse_from_rfc3339("2026-11-29T17:00:00.123Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(kamikaze_body(at), r#"{"kamikaze":"2026-11-29T17:00:00Z"}"#);
    }

    #[test]
    fn timestamps_are_rfc3339_utc_seconds() {
        let t = DateTime::parse_from_rfc3339("2026-11-29T17:00:00.123Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(rfc3339(t), "2026-11-29T17:00:00Z");
    }
}
