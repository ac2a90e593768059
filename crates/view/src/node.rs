//! Node → [`NodeView`]: the contract keys of docs/design.md §3 as found, the cordon, the address, the Ready condition and
//! the allocatable resources.

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use k8sm_api::keys;
use k8sm_planner::NodeView;

use crate::meta::annotation;

pub fn node_view(node: &Node) -> NodeView {
    let meta = &node.metadata;
    let labels = node.labels().clone();
    let status = node.status.as_ref();
    NodeView {
        name: node.name_any(),
        uid: node.uid().unwrap_or_default(),
        incompatible_label: labels.contains_key(keys::INCOMPATIBLE_EXECUTOR_LABEL),
        labels,
        executor_id: annotation(meta, keys::EXECUTOR_ID_ANNOTATION),
        incompatible_since: annotation(meta, keys::INCOMPATIBLE_EXECUTOR_ANNOTATION),
        has_k8sm_taint: has_k8sm_taint(node),
        draining_since: annotation(meta, keys::DRAINING_ANNOTATION),
        kamikaze: annotation(meta, keys::KAMIKAZE_ANNOTATION),
        kamikaze_executor_id: annotation(meta, keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION),
        kamikaze_target: annotation(meta, keys::KAMIKAZE_TARGET_ANNOTATION),
        cordoned_by_k8sm: annotation(meta, keys::CORDONED_BY_ANNOTATION).as_deref()
            == Some(keys::CORDONED_BY_VALUE),
        marked_by_k8sm: annotation(meta, keys::MARKED_BY_ANNOTATION).as_deref()
            == Some(keys::MARKED_BY_VALUE),
        drain_progress: annotation(meta, keys::DRAIN_PROGRESS_ANNOTATION),
        stalled_since: annotation(meta, keys::STALLED_ANNOTATION),
        forced: annotation(meta, keys::FORCED_ANNOTATION),
        // The executor writes the kamikaze it obeyed; any value (even a malformed one) means it obeyed one.
        kamikaze_obeyed: annotation(meta, keys::KAMIKAZE_OBEYED_ANNOTATION).is_some(),
        unschedulable: node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        internal_ip: status
            .and_then(|s| s.addresses.as_ref())
            .and_then(|addresses| addresses.iter().find(|a| a.type_ == "InternalIP"))
            .map(|a| a.address.clone()),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        allocatable: status
            .and_then(|s| s.allocatable.as_ref())
            .map(crate::allocatable),
    }
}

fn has_k8sm_taint(node: &Node) -> bool {
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
    taints.is_some_and(|taints| {
        taints.iter().any(|t| {
            t.key == keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY
                && t.effect == keys::INCOMPATIBLE_EXECUTOR_TAINT_EFFECT
        })
    })
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
