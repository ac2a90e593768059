//! `force NODE --retry-kamikaze`: what to remove so that k8sm tells a node that came back from
//! kamikaze with the wrong executor to terminate once more, decided from the live plan and the
//! objects just read; and the report.
//!
//! k8sm sends a node kamikaze once (docs/design.md §5.2). The record of that kamikaze is on the
//! Node (its kamikaze, kamikaze-executor-id and kamikaze-obeyed annotations), or, for a node
//! deleted as its kamikaze (mechanism DeleteNode), in the policy's `status.deletedNodes`. Without
//! the record the node is a marked node like any other: admitted, drained, and told once more.

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

/// The record to remove, with the resourceVersion the removal is conditional on (a concurrent
/// change is a 409, and nothing is removed).
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
    /// Decides what to remove for the node of `plan`, given its Node and the policy as just read.
    /// Refuses a node whose plan does not report `UnexpectedExecutor`, or of which k8sm holds
    /// no kamikaze record.
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

    /// The JSON merge patch: of the Node, or of the policy's status subresource. `forced`: the
    /// node's record of what was forced ([`keys::FORCED_ANNOTATION`]), written in the same
    /// patch as the removal when that is the Node's.
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
mod tests {
    //! Tests of `force --retry-kamikaze`'s decision: plans and hand-written objects in, the patch
    //! and the text out.

    use k8sm_api::{KamikazeMechanism, NodePhase};
    use k8sm_planner::testing::{OLD, at, node, policy};
    use k8sm_planner::{ClusterView, DeletedNodeRecord, NodeView};
    use serde_json::json;

    use super::*;

    /// The plan of n1 in `view` at 30 minutes.
    fn node_plan(view: &ClusterView) -> NodePlan {
        k8sm_planner::plan(view, at(30))
            .node("n1")
            .expect("n1 is planned")
            .clone()
    }

    /// n1 came back from a kamikaze annotation still running its old executor: it acknowledged the
    /// kamikaze by removing the annotation and keeps kamikaze-executor-id and kamikaze-obeyed.
    fn came_back_unchanged() -> NodePlan {
        let n1 = NodeView {
            kamikaze: None,
            kamikaze_obeyed: true,
            ..node("n1").marked(at(0)).admitted(at(1)).kamikazed(at(5))
        };
        node_plan(&ClusterView {
            nodes: vec![n1],
            policies: vec![policy("fleet")],
            ..ClusterView::default()
        })
    }

    /// n1 was deleted as its kamikaze at 5 minutes, and a new Node n1 registered with its old
    /// executor.
    fn came_back_after_delete() -> NodePlan {
        let mut fleet =
            policy("fleet").with(|s| s.kamikaze.mechanism = KamikazeMechanism::DeleteNode);
        fleet.deleted_nodes = vec![DeletedNodeRecord {
            name: "n1".into(),
            uid: "uid-old-n1".into(),
            executor_id: Some(OLD.into()),
            deleted_at: at(5),
            target: None,
        }];
        node_plan(&ClusterView {
            nodes: vec![node("n1")],
            policies: vec![fleet],
            ..ClusterView::default()
        })
    }

    fn node_object(annotations: serde_json::Value) -> Node {
        serde_json::from_value(json!({
        "metadata": {"name": "n1", "uid": "uid-n1", "resourceVersion": "812", "annotations": annotations}
    }))
    .unwrap()
    }

    fn policy_object(deleted: serde_json::Value) -> ExecutorUpgradePolicy {
        serde_json::from_value(json!({
            "apiVersion": "k8s.mesosphere.io/v1alpha1",
            "kind": "ExecutorUpgradePolicy",
            "metadata": {"name": "fleet", "resourceVersion": "77"},
            "spec": {"targetExecutorId": "sha256:new"},
            "status": {"deletedNodes": deleted}
        }))
        .unwrap()
    }

    #[test]
    fn a_node_that_came_back_unchanged_loses_its_kamikaze_annotations() {
        let node = node_object(json!({
            "k8s.mesosphere.io/executor-id": "sha256:old",
            "k8s.mesosphere.io/kamikaze-executor-id": "sha256:old",
            "k8s.mesosphere.io/kamikaze-obeyed": "2026-01-01T00:05:00Z",
            "k8s.mesosphere.io/draining": "2026-01-01T00:01:00Z"
        }));
        let retry = RetryKamikaze::decide(&came_back_unchanged(), &node, &policy_object(json!([])))
            .unwrap();
        assert_eq!(
            retry.patch("RECORD"),
            json!({"metadata": {"resourceVersion": "812", "annotations": {
                "k8s.mesosphere.io/kamikaze-executor-id": null,
                "k8s.mesosphere.io/kamikaze-obeyed": null,
                "k8s.mesosphere.io/forced": "RECORD"
            }}}),
            "only the kamikaze record goes, with the record of what was forced, conditional on the Node read"
        );
        let text = retry.render(Palette::PLAIN);
        assert!(
        text.starts_with(
            "Node n1 came back from kamikaze with an unexpected executor:\n  came back from kamikaze still running its old executor sha256:old"
        ),
        "{text}"
    );
        assert!(
        text.ends_with(
            "Retrying removes the kamikaze record of node n1 (k8s.mesosphere.io/kamikaze-executor-id, \
             k8s.mesosphere.io/kamikaze-obeyed), so that k8sm drains the node and tells it to terminate once more.\n"
        ),
        "{text}"
    );
        assert!(
            retry
                .question()
                .starts_with("Remove the kamikaze record of node n1 ("),
            "{}",
            retry.question()
        );
    }

    #[test]
    fn every_kamikaze_key_present_is_removed() {
        let node = node_object(json!({
            "k8s.mesosphere.io/kamikaze": "2026-01-01T00:05:00Z",
            "k8s.mesosphere.io/kamikaze-executor-id": "sha256:old",
            "k8s.mesosphere.io/kamikaze-target": "sha256:new",
            "k8s.mesosphere.io/kamikaze-obeyed": "2026-01-01T00:05:00Z"
        }));
        let retry = RetryKamikaze::decide(&came_back_unchanged(), &node, &policy_object(json!([])))
            .unwrap();
        let Change::NodeAnnotations { present, .. } = &retry.change else {
            panic!("{retry:?}")
        };
        assert_eq!(present, &KAMIKAZE_RECORD);
    }

    #[test]
    fn a_node_deleted_as_its_kamikaze_leaves_the_policy_status() {
        let deleted = json!([
            {"name": "n0", "uid": "uid-old-n0", "deletedAt": "2026-01-01T00:04:00Z"},
            {"name": "n1", "uid": "uid-old-n1", "executorId": "sha256:old", "deletedAt": "2026-01-01T00:05:00Z"}
        ]);
        // The new Node carries no k8sm key: the record is the policy's.
        let node = node_object(json!({"k8s.mesosphere.io/executor-id": "sha256:old"}));
        let retry =
            RetryKamikaze::decide(&came_back_after_delete(), &node, &policy_object(deleted))
                .unwrap();
        assert_eq!(
            retry.patch("RECORD"),
            json!({
                "metadata": {"resourceVersion": "77"},
                "status": {"deletedNodes": [{"name": "n0", "uid": "uid-old-n0", "deletedAt": "2026-01-01T00:04:00Z"}]}
            }),
            "the other records stay, conditional on the policy read"
        );
        assert!(
            retry.render(Palette::PLAIN).contains(
                "Retrying removes node n1 from status.deletedNodes of ExecutorUpgradePolicy fleet"
            ),
            "{}",
            retry.render(Palette::PLAIN)
        );
        let note = retry.event_note("admin");
        assert!(
        note.starts_with(
            "kamikaze retried by admin with `kubectl k8sm force n1 --retry-kamikaze`: removed node n1 from \
             status.deletedNodes of ExecutorUpgradePolicy fleet; the node had come back wrong (UnexpectedExecutor: \
             came back after k8sm deleted it still running its old executor sha256:old"
        ),
        "{note}"
    );
    }

    #[test]
    fn the_last_deleted_node_leaves_an_empty_list() {
        let deleted =
            json!([{"name": "n1", "uid": "uid-old-n1", "deletedAt": "2026-01-01T00:05:00Z"}]);
        let retry = RetryKamikaze::decide(
            &came_back_after_delete(),
            &node_object(json!({})),
            &policy_object(deleted),
        )
        .unwrap();
        assert_eq!(retry.patch("RECORD")["status"], json!({"deletedNodes": []}));
    }

    #[test]
    fn a_node_that_did_not_come_back_wrong_is_refused() {
        // Told to terminate a minute ago, not back yet: its kamikaze record is there, and stays.
        let waiting = node_plan(&ClusterView {
            nodes: vec![node("n1").marked(at(0)).admitted(at(1)).kamikazed(at(29))],
            policies: vec![policy("fleet")],
            ..ClusterView::default()
        });
        assert_eq!(waiting.phase, NodePhase::KamikazeSent);
        let error = RetryKamikaze::decide(
            &waiting,
            &node_object(json!({
                "k8s.mesosphere.io/kamikaze": "2026-01-01T00:29:00Z",
                "k8s.mesosphere.io/kamikaze-executor-id": "sha256:old"
            })),
            &policy_object(json!([])),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "node \"n1\" cannot retry its kamikaze: it did not come back from kamikaze with an unexpected executor (it \
         is KamikazeSent); --retry-kamikaze only retries a node that `kubectl k8sm plan` reports UnexpectedExecutor"
        );
    }

    #[test]
    fn without_a_record_there_is_nothing_to_retry() {
        let error = RetryKamikaze::decide(
            &came_back_unchanged(),
            &node_object(json!({"k8s.mesosphere.io/executor-id": "sha256:old"})),
            &policy_object(
                json!([{"name": "n7", "uid": "u7", "deletedAt": "2026-01-01T00:05:00Z"}]),
            ),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "node \"n1\" cannot retry its kamikaze: k8sm holds no kamikaze record of it (no \
         k8s.mesosphere.io/kamikaze-executor-id annotation, no entry in status.deletedNodes of \
         ExecutorUpgradePolicy fleet)"
        );
    }

    #[test]
    fn outcomes() {
        let lines: Vec<String> = [
            RetryOutcome::Removed { node: "n1".into() },
            RetryOutcome::WouldRemove { node: "n1".into() },
            RetryOutcome::Changed { node: "n1".into() },
        ]
        .iter()
        .map(RetryOutcome::line)
        .collect();
        assert_eq!(
            lines,
            [
                "node/n1: kamikaze record removed, k8sm drains it and tells it to terminate once more; Forced event recorded",
                "node/n1: kamikaze record would be removed (dry run)",
                "node/n1: changed since it was read, nothing removed: run the command again to see where it stands",
            ]
        );
    }
}
