//! `force NODE --retry-kamikaze`: what to remove so that k8sm tells a node that came back from kamikaze with the
//! wrong executor to terminate once more, decided from the live plan and the objects just read; and the report.
//!
//! k8sm sends a node kamikaze once (docs/design.md §5.2). The record of that kamikaze is on the Node (its kamikaze,
//! kamikaze-executor-id and kamikaze-obeyed annotations), or, for a node deleted as its kamikaze (mechanism
//! DeleteNode), in the policy's `status.deletedNodes`. Without the record the node is a marked node like any other:
//! admitted, drained, and told once more.

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use serde::Serialize;
use serde_json::{Value, json};

use k8sm_api::{DeletedNode, ExecutorUpgradePolicy, keys};
use k8sm_planner::{NodePlan, Reason};

use crate::error::Error;
use crate::render::{Palette, clean};

/// The node annotations that record a kamikaze.
pub const KAMIKAZE_RECORD: [&str; 4] = [
    keys::KAMIKAZE_ANNOTATION,
    keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION,
    keys::KAMIKAZE_TARGET_ANNOTATION,
    keys::KAMIKAZE_OBEYED_ANNOTATION,
];

/// What `--retry-kamikaze` changes, and why it may.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryKamikaze {
    pub node: String,
    pub policy: String,
    /// What the planner reports about the node (its `UnexpectedExecutor` blocker).
    pub reported: String,
    pub change: Change,
}

/// The record to remove, with the resourceVersion the removal is conditional on (a concurrent change is a 409, and
/// nothing is removed).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "remove")]
pub enum Change {
    /// The Node's kamikaze annotations.
    NodeAnnotations {
        resource_version: String,
        present: Vec<String>,
    },
    /// The node's entry in the policy's `status.deletedNodes`; `remaining` are the other entries.
    DeletedNode {
        resource_version: String,
        remaining: Vec<DeletedNode>,
    },
}

impl RetryKamikaze {
    /// Decides what to remove for the node of `plan`, given its Node and the policy as just read. Refuses a node
    /// whose plan does not report `UnexpectedExecutor`, or of which k8sm holds no kamikaze record.
    pub fn decide(
        plan: &NodePlan,
        node: &Node,
        policy: &ExecutorUpgradePolicy,
    ) -> Result<Self, Error> {
        let refuse = |why: String| Error::CannotRetryKamikaze {
            node: plan.node.clone(),
            why,
        };
        let Some(blocker) = plan
            .blockers
            .iter()
            .find(|b| b.reason == Reason::UnexpectedExecutor)
        else {
            return Err(refuse(format!(
                "it did not come back from kamikaze with an unexpected executor (it is {}); --retry-kamikaze only \
                 retries a node that `kubectl k8sm plan` reports {}",
                plan.phase,
                Reason::UnexpectedExecutor
            )));
        };
        let change = deleted_node(&plan.node, policy)
            .or_else(|| node_annotations(node))
            .ok_or_else(|| {
                refuse(format!(
                    "k8sm holds no kamikaze record of it (no {} annotation, no entry in status.deletedNodes of \
                     ExecutorUpgradePolicy {})",
                    keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION,
                    policy.name_any()
                ))
            })?;
        Ok(Self {
            node: plan.node.clone(),
            policy: plan.policy.clone(),
            reported: blocker.message.to_string(),
            change,
        })
    }

    /// The JSON merge patch: of the Node, or of the policy's status subresource. `forced`: the node's record of what
    /// was forced ([`keys::FORCED_ANNOTATION`]), written in the same patch as the removal when that is the Node's.
    pub fn patch(&self, forced: &str) -> Value {
        match &self.change {
            Change::NodeAnnotations {
                resource_version,
                present,
            } => {
                let mut annotations: serde_json::Map<String, Value> =
                    present.iter().map(|k| (k.clone(), Value::Null)).collect();
                annotations.insert(keys::FORCED_ANNOTATION.to_owned(), json!(forced));
                json!({"metadata": {"resourceVersion": resource_version, "annotations": annotations}})
            }
            Change::DeletedNode {
                resource_version,
                remaining,
            } => json!({
                "metadata": {"resourceVersion": resource_version},
                "status": {"deletedNodes": remaining}
            }),
        }
    }

    /// What will be removed, before the confirmation.
    pub fn render(&self, palette: Palette) -> String {
        format!(
            "Node {} came back from kamikaze with an unexpected executor:\n  {}\nRetrying removes {}, so that k8sm \
             drains the node and tells it to terminate once more.\n",
            palette.bold(&self.node),
            palette.red(&clean(&self.reported, true)),
            self.what()
        )
    }

    /// The confirmation question.
    pub fn question(&self) -> String {
        format!(
            "Remove {}? Fix the node's executor first, or it comes back wrong again. [y/N]: ",
            self.what()
        )
    }

    /// The note of the `Forced` Event: who retried, how, and what the node had reported.
    pub fn event_note(&self, user: &str) -> String {
        format!(
            "kamikaze retried by {user} with `kubectl k8sm force {} --retry-kamikaze`: removed {}; the node had come \
             back wrong ({}: {})",
            self.node,
            self.what(),
            Reason::UnexpectedExecutor,
            self.reported
        )
    }

    /// The record, in words.
    fn what(&self) -> String {
        match &self.change {
            Change::NodeAnnotations { present, .. } => {
                format!(
                    "the kamikaze record of node {} ({})",
                    self.node,
                    present.join(", ")
                )
            }
            Change::DeletedNode { .. } => format!(
                "node {} from status.deletedNodes of ExecutorUpgradePolicy {}",
                self.node, self.policy
            ),
        }
    }
}

/// The node's entry in `status.deletedNodes`, if it has one: the node was deleted as its kamikaze.
fn deleted_node(node: &str, policy: &ExecutorUpgradePolicy) -> Option<Change> {
    let deleted = &policy.status.as_ref()?.deleted_nodes;
    deleted
        .iter()
        .any(|d| d.name == node)
        .then(|| Change::DeletedNode {
            resource_version: policy.resource_version().unwrap_or_default(),
            remaining: deleted.iter().filter(|d| d.name != node).cloned().collect(),
        })
}

/// The node's kamikaze annotations, if it carries any.
fn node_annotations(node: &Node) -> Option<Change> {
    let present: Vec<String> = KAMIKAZE_RECORD
        .into_iter()
        .filter(|key| node.annotations().contains_key(*key))
        .map(str::to_owned)
        .collect();
    (!present.is_empty()).then(|| Change::NodeAnnotations {
        resource_version: node.resource_version().unwrap_or_default(),
        present,
    })
}

/// What came of the retry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "result")]
pub enum RetryOutcome {
    Removed {
        node: String,
    },
    WouldRemove {
        node: String,
    },
    /// The object changed since it was read (a 409): nothing was removed.
    Changed {
        node: String,
    },
}

impl RetryOutcome {
    pub fn line(&self) -> String {
        match self {
            Self::Removed { node } => format!(
                "node/{node}: kamikaze record removed, k8sm drains it and tells it to terminate once more; Forced event recorded"
            ),
            Self::WouldRemove { node } => {
                format!("node/{node}: kamikaze record would be removed (dry run)")
            }
            Self::Changed { node } => format!(
                "node/{node}: changed since it was read, nothing removed: run the command again to see where it stands"
            ),
        }
    }
}

#[cfg(test)]
#[path = "retry_tests.rs"]
mod tests;
