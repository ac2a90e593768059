//! ExecutorUpgradePolicy → [`PolicyView`]: its spec, whether it is being deleted and still holds
//! k8sm's finalizer, and the nodes it deleted as their kamikaze (`status.deletedNodes`, the only
//! status the planner reads back).

use kube::ResourceExt;

use k8sm_api::{DeletedNode, ExecutorUpgradePolicy, PauseAnnotation, keys};
use k8sm_planner::{DeletedNodeRecord, PolicyView};

use crate::time::{from_time, to_time};

pub fn policy_view(policy: &ExecutorUpgradePolicy) -> PolicyView {
    let deleted = policy.status.as_ref().map(|s| s.deleted_nodes.as_slice());
    PolicyView {
        name: policy.name_any(),
        generation: policy.metadata.generation,
        spec: policy.spec.clone(),
        deleting: policy.metadata.deletion_timestamp.is_some(),
        has_finalizer: policy
            .finalizers()
            .iter()
            .any(|f| f == keys::POLICY_FINALIZER),
        deleted_nodes: deleted
            .unwrap_or_default()
            .iter()
            .map(deleted_node_record)
            .collect(),
        pause_annotation: PauseAnnotation::of(policy.annotations()),
    }
}

/// One entry of `status.deletedNodes`, as the planner reads it.
pub fn deleted_node_record(node: &DeletedNode) -> DeletedNodeRecord {
    DeletedNodeRecord {
        name: node.name.clone(),
        uid: node.uid.clone(),
        executor_id: node.executor_id.clone(),
        deleted_at: from_time(&node.deleted_at),
        target: node.target.clone(),
    }
}

/// The entry of `status.deletedNodes` that records `record`: what the controller writes back.
pub fn deleted_node_status(record: &DeletedNodeRecord) -> DeletedNode {
    DeletedNode {
        name: record.name.clone(),
        uid: record.uid.clone(),
        executor_id: record.executor_id.clone(),
        deleted_at: to_time(record.deleted_at),
        target: record.target.clone(),
    }
}

#[cfg(test)]
mod tests {
    //! Table tests of `policy_view`, from hand-written ExecutorUpgradePolicy objects.

    use chrono::{DateTime, Utc};
    use serde_json::{Value, json};

    use super::*;

    /// A policy `fleet` with `metadata` merged over the defaults, and `status` if given.
    fn policy(metadata: Value, status: Option<Value>) -> ExecutorUpgradePolicy {
        let mut meta = json!({"name": "fleet", "generation": 3});
        for (key, value) in metadata.as_object().expect("an object") {
            meta[key] = value.clone();
        }
        let mut object = json!({
            "apiVersion": "k8s.mesosphere.io/v1alpha1",
            "kind": "ExecutorUpgradePolicy",
            "metadata": meta,
            "spec": {"targetExecutorId": "sha256:new", "nodeProgressDeadline": "5m"}
        });
        if let Some(status) = status {
            object["status"] = status;
        }
        serde_json::from_value(object).expect("a policy")
    }

    fn rfc3339(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    #[test]
    fn name_generation_and_spec() {
        let view = policy_view(&policy(json!({}), None));
        assert_eq!(view.name, "fleet");
        assert_eq!(view.generation, Some(3));
        assert_eq!(view.spec.target_executor_id.as_deref(), Some("sha256:new"));
        assert_eq!(view.spec.node_progress_deadline.to_string(), "5m");
    }

    #[test]
    fn deleting_is_a_deletion_timestamp() {
        for (metadata, deleting) in [
            (json!({}), false),
            (
                json!({"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["k8s.mesosphere.io/release-nodes"]}),
                true,
            ),
        ] {
            assert_eq!(
                policy_view(&policy(metadata.clone(), None)).deleting,
                deleting,
                "{metadata}"
            );
        }
    }

    #[test]
    fn has_finalizer_is_k8sm_s_finalizer_among_others() {
        for (finalizers, expected) in [
            (json!(["k8s.mesosphere.io/release-nodes"]), true),
            (
                json!(["example.com/backup", "k8s.mesosphere.io/release-nodes"]),
                true,
            ),
            (json!(["example.com/backup"]), false),
            (json!([]), false),
            (Value::Null, false),
        ] {
            let view = policy_view(&policy(json!({"finalizers": finalizers}), None));
            assert_eq!(view.has_finalizer, expected, "{finalizers}");
        }
    }

    #[test]
    fn deleted_nodes_come_from_the_status() {
        let status = json!({
            "deletedNodes": [
                {"name": "n1", "uid": "old-n1", "executorId": "sha256:old", "deletedAt": "2026-01-01T00:10:00Z"},
                {"name": "n2", "uid": "old-n2", "deletedAt": "2026-01-01T00:12:30.5Z"}
            ]
        });
        let view = policy_view(&policy(json!({}), Some(status)));
        assert_eq!(
            view.deleted_nodes,
            [
                DeletedNodeRecord {
                    name: "n1".into(),
                    uid: "old-n1".into(),
                    executor_id: Some("sha256:old".into()),
                    deleted_at: rfc3339("2026-01-01T00:10:00Z"),
                    target: None,
                },
                DeletedNodeRecord {
                    name: "n2".into(),
                    uid: "old-n2".into(),
                    executor_id: None,
                    deleted_at: rfc3339("2026-01-01T00:12:30.5Z"),
                    target: None,
                },
            ]
        );
        for (status, what) in [
            (None, "no status"),
            (Some(json!({"observedGeneration": 3})), "none deleted"),
        ] {
            assert!(
                policy_view(&policy(json!({}), status))
                    .deleted_nodes
                    .is_empty(),
                "{what}"
            );
        }
    }

    #[test]
    fn a_record_written_back_reads_the_same() {
        let record = DeletedNodeRecord {
            name: "n1".into(),
            uid: "old-n1".into(),
            executor_id: None,
            deleted_at: rfc3339("2026-01-01T00:10:00Z"),
            target: None,
        };
        let written = deleted_node_status(&record);
        assert_eq!(
            serde_json::to_value(&written).unwrap(),
            json!({"name": "n1", "uid": "old-n1", "deletedAt": "2026-01-01T00:10:00Z"})
        );
        assert_eq!(deleted_node_record(&written), record);
    }
}
