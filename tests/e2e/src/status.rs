//! What a policy's status tells an operator (`kubectl get eup -o yaml`): its conditions and the
//! entry of each node that is not Compatible.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;

use k8sm_api::{ExecutorUpgradePolicy, NodeStatus};

/// The policy's condition of `type_`, if the controller wrote one.
pub fn condition<'a>(policy: &'a ExecutorUpgradePolicy, type_: &str) -> Option<&'a Condition> {
    policy
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// The policy's condition of `type_`, which the controller must have written.
pub fn required_condition<'a>(policy: &'a ExecutorUpgradePolicy, type_: &str) -> &'a Condition {
    condition(policy, type_).unwrap_or_else(|| {
        panic!(
            "policy {} has no {type_} condition: {:?}",
            policy.name_any(),
            policy.status.as_ref().map(|s| &s.conditions)
        )
    })
}

/// Whether the policy's condition of `type_` is True.
pub fn is_true(policy: &ExecutorUpgradePolicy, type_: &str) -> bool {
    condition(policy, type_).is_some_and(|c| c.status == "True")
}

/// The status entry of `node` (present while the node is not Compatible).
pub fn status_entry(policy: &ExecutorUpgradePolicy, node: &str) -> Option<NodeStatus> {
    policy
        .status
        .as_ref()?
        .nodes
        .iter()
        .find(|n| n.name == node)
        .cloned()
}
