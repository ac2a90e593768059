//! ExecutorUpgradePolicy → [`PolicyView`]: its spec, whether it is being deleted and still holds k8sm's finalizer,
//! and the nodes it deleted as their kamikaze (`status.deletedNodes`, the only status the planner reads back).

use kube::ResourceExt;

use k8sm_api::{DeletedNode, ExecutorUpgradePolicy, keys};
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
#[path = "policy_tests.rs"]
mod tests;
