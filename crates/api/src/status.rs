//! The status of an `ExecutorUpgradePolicy`: what the controller observed and why nodes wait
//! (docs/design.md §5.1, §5.2).
//!
//! Written only by the controller. Everything here can be re-derived from the cluster, so the
//! status is a report, not state: losing it loses nothing but the start of the ETA's measurement
//! (`pace`), which begins again.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// The status is bounded at any fleet size, far below etcd's object size limit (1.5 MiB by default):
// it counts every node by phase, but lists only the nodes and pods an operator must look at, a
// bounded number of each, and every string that comes from node or pod data is cut to a bound (see
// `crate::text`). The worst case (every list full, every string at its bound) is about 64 KiB of
// nodes + 64 KiB of blocked pods + 50 KiB of deleted nodes + a few KiB of conditions; a test builds
// the status of 10,000 nodes with oversized annotations to check it.

/// Most entries in `status.nodes`; the controller keeps the most urgent ones and counts the rest in
/// `status.omittedNodes`.
pub const MAX_NODES: usize = 100;

/// Most entries in `status.blockedPods`; the controller keeps the most urgent ones and counts them
/// all in `status.blockedPodsTotal`.
pub const MAX_BLOCKED_PODS: usize = 100;

/// Most blockers listed per node (each distinct line once); the rest are counted in
/// `omittedBlockers`.
pub const MAX_BLOCKERS: usize = 5;

/// Bytes of JSON that the entries of `status.nodes` may take together: fewer than [`MAX_NODES`] are
/// listed when their text is long.
pub const NODES_BUDGET: usize = 64 * 1024;

/// Bytes of JSON that the entries of `status.blockedPods` may take together.
pub const BLOCKED_PODS_BUDGET: usize = 64 * 1024;

/// Longest message or blocker line in the status, in bytes (as Events: the Events API caps notes at
/// 1 kB).
pub const MAX_MESSAGE: usize = 1000;

/// Longest executor ID in the status, in bytes; a longer one (no real executor ID is) is cut, with
/// a marker.
pub const MAX_EXECUTOR_ID: usize = 128;

/// Longest name in the status (a Kubernetes object name is at most 253 bytes; an owner is
/// "Kind/name").
pub const MAX_NAME: usize = 253;

/// Most nodes that a policy with kamikaze mechanism DeleteNode keeps deleted at once (each is
/// remembered in `status.deletedNodes` until it comes back): a drained node waits for room before
/// it is deleted.
pub const MAX_DELETED_NODES: usize = 100;

/// Condition types that the controller sets on a policy.
pub mod condition_types {
    /// True while selected nodes are incompatible and the upgrade moves forward (or waits on a
    /// blocked node).
    pub const PROGRESSING: &str = "Progressing";
    /// True when every selected node runs the target executor.
    pub const UPGRADED: &str = "Upgraded";
    /// True when another policy selects some of the same nodes; neither policy acts on those nodes.
    pub const CONFLICT: &str = "Conflict";
    /// True while `spec.paused` or the pause annotation stops evictions, deletions and kamikaze.
    pub const PAUSED: &str = "Paused";
    /// True when something needs attention: a malformed annotation, a node without the address its
    /// kamikaze URL needs, an overdue restart, a policy that selects no node; actions that keep
    /// failing (`ActionFailed`); a watch failing for longer than the controller's bound
    /// (`WatchFailing`), during which it takes no action at all.
    pub const DEGRADED: &str = "Degraded";
    /// kstatus' Ready: True when every selected node runs the target and nothing stalls.
    pub const READY: &str = "Ready";
    /// kstatus' Reconciling: True while the controller works toward the target on its own (not
    /// while paused or stalled).
    pub const RECONCILING: &str = "Reconciling";
    /// kstatus' Stalled: True when the upgrade cannot go on without an operator (a policy that is
    /// invalid, conflicts or selects nothing, or every node left waiting for an operator).
    pub const STALLED: &str = "Stalled";
}

/// Observed state of an ExecutorUpgradePolicy.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
// The apiserver serves a policy no controller has written yet as observed at generation 0, so that
// kstatus (Flux, kpt, Argo CD's wait) reads it InProgress rather than Current.
#[schemars(extend("default" = {"observedGeneration": 0}))]
pub struct ExecutorUpgradePolicyStatus {
    /// Latest observations of the upgrade, one per type: Progressing, Upgraded, Paused, Conflict,
    /// Degraded, and kstatus' Ready, Reconciling and Stalled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// The metadata.generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Selected nodes that run the target executor, of all selected nodes, such as "12/20".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgraded: Option<String>,

    /// Number of selected nodes in each phase.
    #[serde(default)]
    pub counts: NodeCounts,

    /// The selected nodes an operator looks at, with their phase and what they wait for, most
    /// urgent first: nodes that wait for an operator, then other blocked nodes, then nodes in
    /// flight (Draining, Drained, KamikazeSent), each group oldest first. At most 100 (fewer
    /// when their text is long). Nodes queued for a drain slot are only counted
    /// (counts.incompatible; `kubectl k8sm plan` shows the queue); omittedNodes counts every node
    /// that is not Compatible and not listed here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    #[schemars(length(max = MAX_NODES))]
    pub nodes: Vec<NodeStatus>,

    /// Selected nodes that are not Compatible and have no entry in nodes: nodes queued for a drain
    /// slot, and those beyond the first 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted_nodes: Option<u32>,

    /// Pods that keep a draining node from finishing and that need an operator or time: those that
    /// need an operator first, then oldest first. At most 100 (fewer when their text is long);
    /// blockedPodsTotal counts them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_BLOCKED_PODS))]
    pub blocked_pods: Vec<BlockedPod>,

    /// Number of blocked pods, including those left out of blockedPods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_pods_total: Option<u32>,

    /// Nodes that k8sm deleted (kamikaze mechanism DeleteNode) and that have not come back with
    /// the target executor yet. Kept until a node of that name reports the target executor ID,
    /// so that a node that never re-registers is still counted, reported RestartOverdue after
    /// restartTimeout, and never told to terminate twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub deleted_nodes: Vec<DeletedNode>,

    /// Estimated time at which every selected node runs the target executor, from the pace so far.
    /// Absent while there is too little to go on, or while blocked nodes wait for an operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta: Option<Time>,

    /// Where the ETA's pace is measured from: when the upgrade was first seen with nodes left, and
    /// how many nodes ran the target then. Kept here so that the ETA survives a leader change
    /// (a new leader goes on from the same start); absent while no node is left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<PaceStart>,

    /// Where the maintenance window (spec.window) stands: open until closesAt, or closed until
    /// opensAt. Absent without a window, or with one that cannot be read (see the Degraded
    /// condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowStatus>,
}

/// The start of an upgrade's pace, from which its ETA is estimated.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PaceStart {
    /// When the upgrade was first seen with nodes left (or a new target made fewer nodes
    /// compatible).
    pub since: Time,
    /// How many selected nodes ran the target then.
    pub compatible: u32,
}

/// Where the maintenance window stands.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WindowStatus {
    /// Whether nodes may be admitted and executors told to restart now.
    pub open: bool,
    /// When the window opens next (while it is closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opens_at: Option<Time>,
    /// When it closes (while it is open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closes_at: Option<Time>,
}

/// Number of selected nodes in each phase.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodeCounts {
    /// All nodes that the policy selects.
    #[serde(default)]
    pub total: u32,
    /// Nodes that run the target executor.
    #[serde(default)]
    pub compatible: u32,
    /// Nodes marked incompatible that wait for a drain slot.
    #[serde(default)]
    pub incompatible: u32,
    /// Nodes being drained.
    #[serde(default)]
    pub draining: u32,
    /// Nodes with no pods left that matter, about to be sent kamikaze.
    #[serde(default)]
    pub drained: u32,
    /// Nodes told to terminate their executor, waiting for it to come back in the target version.
    #[serde(default)]
    pub kamikaze_sent: u32,
    /// Draining nodes whose remaining pods all wait for an operator.
    #[serde(default)]
    pub blocked: u32,
}

impl NodeCounts {
    /// Counts `phase` once more, and the total too.
    pub fn add(&mut self, phase: NodePhase) {
        self.total += 1;
        *self.slot(phase) += 1;
    }

    /// The count of one phase.
    pub fn get(&self, phase: NodePhase) -> u32 {
        match phase {
            NodePhase::Compatible => self.compatible,
            NodePhase::Incompatible => self.incompatible,
            NodePhase::Draining => self.draining,
            NodePhase::Drained => self.drained,
            NodePhase::KamikazeSent => self.kamikaze_sent,
            NodePhase::Blocked => self.blocked,
        }
    }

    fn slot(&mut self, phase: NodePhase) -> &mut u32 {
        match phase {
            NodePhase::Compatible => &mut self.compatible,
            NodePhase::Incompatible => &mut self.incompatible,
            NodePhase::Draining => &mut self.draining,
            NodePhase::Drained => &mut self.drained,
            NodePhase::KamikazeSent => &mut self.kamikaze_sent,
            NodePhase::Blocked => &mut self.blocked,
        }
    }

    /// The text of `status.upgraded` and of the Upgraded printer column: compatible nodes of all,
    /// such as "12/20".
    pub fn upgraded(&self) -> String {
        format!("{}/{}", self.compatible, self.total)
    }
}

/// Where a selected node is in its upgrade.
#[derive(
    JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
pub enum NodePhase {
    /// Runs the target executor (or no target is set and nothing marked it).
    Compatible,
    /// Marked incompatible; waits for a drain slot.
    Incompatible,
    /// Admitted into a drain slot and cordoned; its pods are being evicted.
    Draining,
    /// Only DaemonSet, mirror and finished pods left.
    Drained,
    /// Told to terminate its executor; waits for it to come back with the target executor ID.
    KamikazeSent,
    /// Draining, but every remaining pod waits for something only an operator can resolve; it gave
    /// up its slot.
    Blocked,
}

impl NodePhase {
    /// Every phase, in upgrade order.
    pub const ALL: [Self; 6] = [
        Self::Compatible,
        Self::Incompatible,
        Self::Draining,
        Self::Drained,
        Self::KamikazeSent,
        Self::Blocked,
    ];

    /// The name used in the API, in Events and as a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Compatible => "Compatible",
            Self::Incompatible => "Incompatible",
            Self::Draining => "Draining",
            Self::Drained => "Drained",
            Self::KamikazeSent => "KamikazeSent",
            Self::Blocked => "Blocked",
        }
    }
}

impl fmt::Display for NodePhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One selected node that is not Compatible.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// Node name.
    pub name: String,
    /// Phase: Incompatible, Draining, Drained, KamikazeSent or Blocked.
    pub phase: NodePhase,
    /// When the node entered this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// Pods still to be moved or deleted before the node is drained.
    #[serde(default)]
    pub pods_left: u32,
    /// What the node waits for, one short line each, such as "wait: PodDisruptionBudget
    /// shop/web-pdb allows no disruption now": each distinct line once, those that need an
    /// operator first, at most 5.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blockers: Vec<String>,
    /// Distinct blocker lines left out of blockers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted_blockers: Option<u32>,
    /// Executor ID that the node reports now (its "k8s.mesosphere.io/executor-id" annotation; one
    /// longer than 128 bytes is cut, and control characters are escaped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_id: Option<String>,
}

/// A node that k8sm deleted as its kamikaze (mechanism DeleteNode), remembered until it comes back
/// upgraded.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeletedNode {
    /// Node name: the node that comes back registers under the same name.
    pub name: String,
    /// UID of the deleted Node object: a Node of that name with another UID is the one that came
    /// back.
    pub uid: String,
    /// Executor ID the node reported when it was deleted (absent when it reported none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_id: Option<String>,
    /// When k8sm deleted it.
    pub deleted_at: Time,
    /// The target executor ID it was told to restart into, as recorded (absent without a target):
    /// a node back on it after the target moved restarted as told, and goes round again for
    /// the new target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// A pod that keeps a draining node from finishing.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BlockedPod {
    /// Node the pod runs on.
    pub node: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// The workload the pod counts for as "Kind/name", such as "Deployment/web" for a pod of one
    /// of its ReplicaSets; absent for an unmanaged pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// How k8sm classes the pod: Owned (a pod of a Deployment, ReplicaSet, ReplicationController
    /// or StatefulSet), OtherController (a pod of a controller of a kind k8sm does not know,
    /// such as an operator's custom resource: evicted one at a time through the Eviction API
    /// only), Job, Unmanaged or OptedOut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Why it blocks, in one word, such as WaitingForOwner, BlockedByPDB, BlockedUnmanagedPod or
    /// BlockedOptOut.
    pub reason: String,
    /// What it waits for and how to resolve it.
    #[serde(default)]
    pub message: String,
    /// Since when it has blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_names_are_the_api_names() {
        for phase in NodePhase::ALL {
            let json = serde_json::to_string(&phase).unwrap();
            assert_eq!(json, format!("\"{phase}\""));
            assert_eq!(serde_json::from_str::<NodePhase>(&json).unwrap(), phase);
        }
        assert_eq!(NodePhase::KamikazeSent.to_string(), "KamikazeSent");
    }

    #[test]
    fn counts_add_up() {
        let mut counts = NodeCounts::default();
        for phase in [
            NodePhase::Compatible,
            NodePhase::Compatible,
            NodePhase::Draining,
            NodePhase::Blocked,
        ] {
            counts.add(phase);
        }
        assert_eq!(counts.total, 4);
        assert_eq!(counts.get(NodePhase::Compatible), 2);
        assert_eq!(counts.get(NodePhase::Draining), 1);
        assert_eq!(counts.get(NodePhase::Blocked), 1);
        assert_eq!(counts.get(NodePhase::KamikazeSent), 0);
        assert_eq!(counts.upgraded(), "2/4");
    }

    #[test]
    fn status_round_trips_in_camel_case() {
        let json = serde_json::json!({
            "observedGeneration": 3,
            "upgraded": "1/2",
            "counts": {"total": 2, "compatible": 1, "kamikazeSent": 1},
            "nodes": [{"name": "n1", "phase": "KamikazeSent", "podsLeft": 0, "since": "2026-01-02T03:04:05Z"}],
            "blockedPods": [{"node": "n2", "namespace": "ns", "name": "p", "reason": "BlockedOptOut", "message": "m"}],
            "eta": "2026-01-02T04:00:00Z",
        });
        let status: ExecutorUpgradePolicyStatus = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(status.counts.kamikaze_sent, 1);
        assert_eq!(status.nodes[0].phase, NodePhase::KamikazeSent);
        let back = serde_json::to_value(&status).unwrap();
        assert_eq!(back["counts"]["kamikazeSent"], 1);
        assert_eq!(back["nodes"][0]["since"], "2026-01-02T03:04:05Z");
        assert_eq!(back["blockedPods"][0]["reason"], "BlockedOptOut");
        assert_eq!(back["eta"], json["eta"]);
    }
}
