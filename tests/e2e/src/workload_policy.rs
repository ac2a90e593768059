//! The policy of the workload tests (`tests/workloads.rs`, `tests/other_controllers.rs`): one drain
//! slot, a high owner-health threshold, and a `nodeProgressDeadline` short enough that a node whose
//! pods cannot move stalls within a test.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use k8sm_api::{ExecutorUpgradePolicySpec, UnmanagedPodPolicy, UnmanagedPods};

use crate::scenario::Scenario;

/// The owner-health threshold of the workload tests: high, so that each workload's bound is tight.
pub const THRESHOLD: u8 = 90;

/// Short, so that stalls happen within a test; long enough that a node that moves pods never
/// stalls.
pub const NODE_PROGRESS_DEADLINE: Duration = Duration::from_secs(20);

/// One drain slot, [`THRESHOLD`], `unmanaged`, and the short progress deadline.
pub fn workload_policy(
    scenario: &Scenario,
    unmanaged: UnmanagedPodPolicy,
) -> ExecutorUpgradePolicySpec {
    ExecutorUpgradePolicySpec {
        owner_health_threshold: THRESHOLD,
        unmanaged_pods: UnmanagedPods {
            policy: unmanaged,
            timeout: None,
        },
        node_progress_deadline: format!("{}s", NODE_PROGRESS_DEADLINE.as_secs())
            .parse()
            .expect("a duration"),
        ..scenario.policy_spec(1)
    }
}

/// A policy's `nodeSelector` that selects `node` alone (by its hostname label), as if the fleet's
/// other nodes were upgraded already.
pub fn only_node(node: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([(
            "kubernetes.io/hostname".to_owned(),
            node.to_owned(),
        )])),
        ..LabelSelector::default()
    }
}
