//! Carrying out the planner's actions: precondition-safe patches of the contract keys, evictions,
//! deletions and kamikaze. Every mutation has a timeout; none decides anything.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, Preconditions};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use k8sm_api::{DeletedNode, ExecutorUpgradePolicy, KamikazeMechanism, keys};
use k8sm_planner::{Action, ActionKind, PodRef};

use crate::act::kamikaze_client::KamikazeClient;
use crate::act::kamikaze_token::KamikazeTokens;
use crate::act::node_patches::{self, rfc3339};
use crate::leadership::leader::Leadership;
use crate::{Error, leadership::write_params};
use k8sm_view::time::to_time;

/// Longest any single API call or kamikaze POST may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// Read-modify-write attempts on a policy's status before giving up for this pass.
const RECORD_ATTEMPTS: usize = 3;

/// What came of one action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It was carried out. For a node write: the node's resourceVersion afterwards (equal to the
    /// one before when the patch changed nothing), so the loop knows which version its cache
    /// must reach; likewise for a write to the policy (a deleted node recorded in its status).
    Done {
        node_version: Option<String>,
        policy_version: Option<String>,
        /// Likewise for a Deployment a surge move patched.
        deployment_version: Option<String>,
    },
    /// Nothing to do any more (the pod is gone, the node changed under us): the next plan sees the
    /// new state.
    Stale(String),
    /// The Eviction API refused because of a PodDisruptionBudget (HTTP 429): wait and try again.
    DisruptionBudget(String),
    /// The apiserver's priority and fairness refused the call (HTTP 429 without a budget's cause):
    /// it is overloaded; try again soon.
    Throttled(String),
}

impl Outcome {
    fn done() -> Self {
        Self::Done {
            node_version: None,
            policy_version: None,
            deployment_version: None,
        }
    }
}

/// What an eviction's 429 means: a budget's refusal carries the `DisruptionBudget` cause (the
/// Eviction API adds it to every refusal of a budget, as `kubectl drain` and the disruption tests
/// read it); without it, the apiserver's priority and fairness turned the request away before the
/// Eviction API saw it.
fn refusal(status: &kube::core::Status) -> Outcome {
    let budget = status
        .details
        .as_ref()
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == DISRUPTION_BUDGET_CAUSE));
    if budget {
        Outcome::DisruptionBudget(status.message.clone())
    } else {
        Outcome::Throttled(status.message.clone())
    }
}

/// The cause type of a budget's refusal (`policy/v1` `DisruptionBudgetCause`).
const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";

/// The cached objects an action is about, for its preconditions.
#[derive(Clone, Copy, Default)]
pub struct Cached<'a> {
    pub node: Option<&'a Node>,
    pub policy: Option<&'a ExecutorUpgradePolicy>,
    pub deployment: Option<&'a Deployment>,
}

#[derive(Clone)]
pub struct Executor {
    client: Client,
    kamikaze: Arc<KamikazeClient>,
    kamikaze_tokens: Arc<KamikazeTokens>,
    /// Checked right before every write.
    leadership: Leadership,
}

impl Executor {
    /// `kamikaze`: the `Http` kamikaze's client; `kamikaze_tokens`: its credential.
    pub fn new(
        client: Client,
        leadership: Leadership,
        kamikaze: KamikazeClient,
        kamikaze_tokens: KamikazeTokens,
    ) -> Self {
        Self {
            client,
            kamikaze: Arc::new(kamikaze),
            kamikaze_tokens: Arc::new(kamikaze_tokens),
            leadership,
        }
    }

    /// Executes `action`. `cached` holds the cached objects the action is about (its Node, the
    /// policy on whose behalf it is done, the Deployment a surge move patches), for
    /// resourceVersion preconditions.
    pub async fn execute(&self, action: &Action, cached: Cached<'_>) -> Result<Outcome, Error> {
        let Cached {
            node,
            policy,
            deployment,
        } = cached;
        let call = self.dispatch(action, node, policy, deployment);
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(result) => result,
            Err(_) => Err(Error::Other(format!(
                "{} timed out after {CALL_TIMEOUT:?}",
                action.reason.as_str()
            ))),
        }
    }

    async fn dispatch(
        &self,
        action: &Action,
        node: Option<&Node>,
        policy: Option<&ExecutorUpgradePolicy>,
        deployment: Option<&Deployment>,
    ) -> Result<Outcome, Error> {
        match &action.kind {
            ActionKind::AddFinalizer { .. } | ActionKind::RemoveFinalizer { .. } => {
                let add = matches!(action.kind, ActionKind::AddFinalizer { .. });
                self.finalizer(require_policy(policy)?, add).await
            }
            ActionKind::Evict { pod, eviction } => {
                if eviction.use_eviction_api {
                    self.evict(pod).await
                } else {
                    self.delete_pod(pod).await
                }
            }
            ActionKind::DeletePod { pod, eviction_api } => {
                if *eviction_api {
                    self.evict(pod).await
                } else {
                    self.delete_pod(pod).await
                }
            }
            ActionKind::Surge {
                pod,
                deployment: owner,
                at,
            } => match deployment {
                Some(cached) if cached.uid().as_deref() == Some(&*owner.uid) => {
                    self.surge(pod, cached, *at).await
                }
                _ => Ok(Outcome::Stale(format!(
                    "Deployment {}/{} is not in the cache as planned",
                    pod.namespace(),
                    owner.name
                ))),
            },
            ActionKind::Kamikaze {
                mechanism: KamikazeMechanism::DeleteNode,
                at,
                target,
                ..
            } => {
                let node = require(node)?;
                // Recorded first: once the Node is gone, nothing else remembers that it was told.
                let policy_version = match self
                    .record_deletion(require_policy(policy)?, node, *at, target.as_ref())
                    .await?
                {
                    Ok(version) => version,
                    Err(stale) => return Ok(stale),
                };
                match self.delete_node(node).await? {
                    Outcome::Done { .. } => Ok(Outcome::Done {
                        node_version: None,
                        policy_version,
                        deployment_version: None,
                    }),
                    other => Ok(other),
                }
            }
            ActionKind::Kamikaze {
                mechanism: KamikazeMechanism::Http,
                url,
                at,
                ..
            } => {
                let node = require(node)?;
                let url = url
                    .as_deref()
                    .ok_or_else(|| Error::Other("Http kamikaze without a URL".into()))?;
                self.post_kamikaze(node, url, kamikaze_body(*at)).await?;
                // Then the annotation records that it was sent.
                self.patch_node(node, node_patches::for_action(&action.kind, node)?)
                    .await
            }
            ActionKind::Mark { .. }
            | ActionKind::Admit { .. }
            | ActionKind::Progress { .. }
            | ActionKind::Stall { .. }
            | ActionKind::Cordon { .. }
            | ActionKind::Kamikaze { .. }
            | ActionKind::Complete { .. }
            | ActionKind::Release { .. } => {
                let node = require(node)?;
                self.patch_node(node, node_patches::for_action(&action.kind, node)?)
                    .await
            }
        }
    }

    /// A JSON merge patch carrying the cached resourceVersion: if the node changed since, the
    /// apiserver answers 409 and the next plan, made from the fresh node, decides again. Lists
    /// such as taints are replaced whole, so this precondition is what keeps a concurrent edit
    /// from being lost.
    async fn patch_node(&self, node: &Node, patch: Value) -> Result<Outcome, Error> {
        let api: Api<Node> = Api::all(self.client.clone());
        let name = node.name_any();
        self.leadership.ensure()?;
        match api
            .patch(&name, &write_params::patch(), &Patch::Merge(&patch))
            .await
        {
            Ok(patched) => Ok(Outcome::Done {
                node_version: patched.resource_version(),
                policy_version: None,
                deployment_version: None,
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

    /// Starts a surge rollout of `deployment` (as cached) to move `pod`: the pod template's
    /// restarted-at annotation changes, as `kubectl rollout restart` changes its own, and the
    /// move is recorded on the Deployment, in one patch conditional on the cached
    /// resourceVersion: a Deployment that changed since the plan (a rollout of its own started)
    /// is planned again from the fresh object.
    async fn surge(
        &self,
        pod: &PodRef,
        deployment: &Deployment,
        at: DateTime<Utc>,
    ) -> Result<Outcome, Error> {
        let name = deployment.name_any();
        let patch = json!({
            "metadata": {
                "resourceVersion": deployment.resource_version(),
                "annotations": {
                    keys::SURGE_MOVE_ANNOTATION: k8sm_planner::surge_move_record(at, pod.uid()),
                },
            },
            "spec": {"template": {"metadata": {"annotations": {
                keys::RESTARTED_AT_ANNOTATION: rfc3339(at),
            }}}},
        });
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), pod.namespace());
        self.leadership.ensure()?;
        match api
            .patch(&name, &write_params::patch(), &Patch::Merge(&patch))
            .await
        {
            Ok(patched) => Ok(Outcome::Done {
                node_version: None,
                policy_version: None,
                deployment_version: patched.resource_version(),
            }),
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {
                Ok(Outcome::Stale(format!(
                    "Deployment {}/{name} changed: {}",
                    pod.namespace(),
                    status.message
                )))
            }
            Err(source) => Err(Error::Action {
                action: "starting a surge rollout of",
                object: format!("Deployment {}/{name}", pod.namespace()),
                source,
            }),
        }
    }

    /// Adds or removes the policy finalizer, conditional on the cached resourceVersion (the list is
    /// replaced whole).
    async fn finalizer(&self, policy: &ExecutorUpgradePolicy, add: bool) -> Result<Outcome, Error> {
        let mut finalizers: Vec<String> = policy.finalizers().to_vec();
        finalizers.retain(|f| f != keys::POLICY_FINALIZER);
        if add {
            finalizers.push(keys::POLICY_FINALIZER.to_owned());
        }
        let patch = json!({
            "metadata": { "resourceVersion": policy.resource_version(), "finalizers": finalizers }
        });
        let api: Api<ExecutorUpgradePolicy> = Api::all(self.client.clone());
        let name = policy.name_any();
        self.leadership.ensure()?;
        match api
            .patch(&name, &write_params::patch(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(Outcome::done()),
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => Ok(
                Outcome::Stale(format!("policy {name} changed: {}", status.message)),
            ),
            Err(source) => Err(Error::Action {
                action: "patching the finalizers of policy",
                object: name,
                source,
            }),
        }
    }

    /// Records a node about to be deleted in the policy's `status.deletedNodes`, unless it is there
    /// already: read afresh and written conditional on that read (the list is replaced whole),
    /// retried on a conflict, so that two deletions of one pass, or a status write in between,
    /// never drop a record. `Ok(version)`: recorded (the policy's resourceVersion afterwards;
    /// `None` when it was there already); `Err(outcome)`: stop here, the node is not deleted.
    async fn record_deletion(
        &self,
        policy: &ExecutorUpgradePolicy,
        node: &Node,
        at: DateTime<Utc>,
        target: Option<&String>,
    ) -> Result<Result<Option<String>, Outcome>, Error> {
        let api: Api<ExecutorUpgradePolicy> = Api::all(self.client.clone());
        let policy_name = policy.name_any();
        let name = node.name_any();
        let uid = node.uid().unwrap_or_default();
        let record = DeletedNode {
            name: name.clone(),
            uid: uid.clone(),
            // Bounded as the planner records it: the status must not grow with a node's
            // annotations.
            executor_id: node
                .annotations()
                .get(keys::EXECUTOR_ID_ANNOTATION)
                .map(|id| k8sm_api::text::recorded_id(id).into_owned()),
            deleted_at: to_time(at),
            target: target.cloned(),
        };
        for _ in 0..RECORD_ATTEMPTS {
            let fresh = match api.get_opt(&policy_name).await {
                Ok(Some(fresh)) if fresh.metadata.deletion_timestamp.is_none() => fresh,
                Ok(_) => {
                    return Ok(Err(Outcome::Stale(format!(
                        "policy {policy_name} is gone or being deleted: node {name} is not deleted"
                    ))));
                }
                Err(source) => {
                    return Err(Error::Action {
                        action: "reading policy",
                        object: policy_name,
                        source,
                    });
                }
            };
            let mut records = fresh
                .status
                .as_ref()
                .map(|s| s.deleted_nodes.clone())
                .unwrap_or_default();
            if records.iter().any(|r| r.name == name && r.uid == uid) {
                return Ok(Ok(None));
            }
            records.retain(|r| r.name != name);
            records.push(record.clone());
            records.sort_by(|a, b| a.name.cmp(&b.name));
            let patch = json!({
                "metadata": { "resourceVersion": fresh.resource_version() },
                "status": { "deletedNodes": records },
            });
            self.leadership.ensure()?;
            match api
                .patch_status(&policy_name, &write_params::patch(), &Patch::Merge(&patch))
                .await
            {
                Ok(patched) => return Ok(Ok(patched.metadata.resource_version)),
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(source) => {
                    return Err(Error::Action {
                        action: "recording a deleted node in the status of policy",
                        object: policy_name,
                        source,
                    });
                }
            }
        }
        Ok(Err(Outcome::Stale(format!(
            "policy {policy_name} kept changing: node {name} is not recorded, so not deleted yet"
        ))))
    }

    async fn evict(&self, pod: &PodRef) -> Result<Outcome, Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), pod.namespace());
        let params = write_params::evict(uid_precondition(pod.uid()));
        self.leadership.ensure()?;
        match api.evict(pod.name(), &params).await {
            Ok(_) => Ok(Outcome::done()),
            Err(kube::Error::Api(status)) if status.code == 429 => Ok(refusal(&status)),
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
        let api: Api<Pod> = Api::namespaced(self.client.clone(), pod.namespace());
        self.leadership.ensure()?;
        match api.delete(pod.name(), &uid_precondition(pod.uid())).await {
            Ok(_) => Ok(Outcome::done()),
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
        self.leadership.ensure()?;
        match api.delete(&name, &params).await {
            Ok(_) => Ok(Outcome::done()),
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

    /// POSTs the kamikaze `body` (see [`kamikaze_body`]) to `url`, the agent of `node`, with a
    /// token the agent verifies (see [`crate::act::kamikaze_token`]).
    async fn post_kamikaze(&self, node: &Node, url: &str, body: String) -> Result<(), Error> {
        let token = self.kamikaze_tokens.token_for(node).await?;
        // Fenced as the API writes are (`crate::leadership::fence`): answered or abandoned within
        // the term.
        let timeout = self.leadership.write_timeout();
        self.leadership.ensure_for(timeout)?;
        let refused = tokio::time::timeout(timeout, self.kamikaze.post(url, &token, body))
            .await
            .map_err(|_| Error::Http {
                url: url.to_owned(),
                message: format!("no answer within the write timeout ({timeout:?})"),
            })??;
        match refused {
            None => Ok(()),
            Some(refusal) => Err(Error::Http {
                url: url.to_owned(),
                message: refusal.to_string(),
            }),
        }
    }
}

/// The body of the `Http` kamikaze: `{"kamikaze": "<RFC 3339>"}`, the exact value then written as
/// the kamikaze annotation. The agent records that value as obeyed before it restarts, so the
/// annotation is never obeyed a second time by an executor that comes back with its old ID.
fn kamikaze_body(at: DateTime<Utc>) -> String {
    json!({ "kamikaze": rfc3339(at) }).to_string()
}

fn require(node: Option<&Node>) -> Result<&Node, Error> {
    node.ok_or_else(|| Error::Other("the node is not in the cache".into()))
}

fn require_policy(policy: Option<&ExecutorUpgradePolicy>) -> Result<&ExecutorUpgradePolicy, Error> {
    policy.ok_or_else(|| Error::Other("the policy is not in the cache".into()))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An eviction's 429 as the apiserver sends it: a budget's (`policy/v1` adds the
    /// `DisruptionBudget` cause), or priority and fairness's (no cause).
    #[test]
    fn a_budgets_refusal_is_told_from_the_apiservers_throttling() {
        let budget: kube::core::Status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429, "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "details": {"causes": [{"reason": "DisruptionBudget",
                                    "message": "The disruption budget web needs 3 healthy pods and has 3 currently"}]}
        }))
        .unwrap();
        assert!(
            matches!(refusal(&budget), Outcome::DisruptionBudget(m) if m.contains("disruption budget"))
        );
        let throttled: kube::core::Status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429, "reason": "TooManyRequests",
            "message": "Too many requests, please try again later.",
            "details": {"retryAfterSeconds": 1}
        }))
        .unwrap();
        assert!(matches!(refusal(&throttled), Outcome::Throttled(_)));
    }

    #[test]
    fn the_http_kamikaze_body_carries_the_annotations_value() {
        let at = DateTime::parse_from_rfc3339("2026-11-29T17:00:00.123Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(kamikaze_body(at), r#"{"kamikaze":"2026-11-29T17:00:00Z"}"#);
    }
}
