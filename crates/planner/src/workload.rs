//! Workloads (DESIGN.md §2): the top-level owner whose health is judged for a pod — a Deployment over all its
//! ReplicaSets, a ReplicationController, a StatefulSet, a ReplicaSet without a Deployment, or, for a pod of a
//! controller of any other kind, that controller.
//!
//! A Deployment mid-rollout has pods in two or more ReplicaSets; judging each ReplicaSet alone finds each "fully
//! ready" and lets both lose a pod at once. Judged as one workload, it loses at most what its own bound allows.

use crate::{OwnerKind, OwnerView, view::ControllerRef};

/// The workload a pod counts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Workload<'a> {
    /// UID: the key of its health in the ledger.
    pub(crate) uid: &'a str,
    /// Kind as written in owner references, such as `Deployment` or `KafkaNodePool`.
    pub(crate) kind: &'a str,
    /// Name, in the pod's namespace.
    pub(crate) name: &'a str,
    /// `spec.replicas` of a kind k8sm knows; `None` for a controller of another kind, whose size k8sm infers from
    /// the pods it sees (see `health`).
    pub(crate) desired: Option<u32>,
}

impl<'a> Workload<'a> {
    /// A workload whose object the view holds.
    pub(crate) fn of_owner(owner: &'a OwnerView) -> Self {
        Self {
            uid: &owner.uid,
            kind: owner.kind.as_str(),
            name: &owner.name,
            // The apiserver defaults `replicas` to 1.
            desired: Some(owner.desired.unwrap_or(1)),
        }
    }

    /// A controller of a kind k8sm does not know, from a controller reference.
    pub(crate) fn of_other(controller: &'a ControllerRef) -> Self {
        Self {
            uid: &controller.uid,
            kind: &controller.kind,
            name: &controller.name,
            desired: None,
        }
    }

    /// Whether k8sm knows its desired count (a Deployment, ReplicaSet, ReplicationController or StatefulSet).
    pub(crate) fn is_known(&self) -> bool {
        self.desired.is_some()
    }
}

impl std::fmt::Display for Workload<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// The UID of the workload that a pod with controller `controller_uid` counts for, given the owners in the view: a
/// ReplicaSet with a controller of its own (a Deployment, or an operator's kind such as an Argo Rollout) counts for
/// that controller; every other controller counts for itself.
pub(crate) fn workload_uid<'a>(controller_uid: &'a str, owner: Option<&'a OwnerView>) -> &'a str {
    match owner {
        Some(owner) if owner.kind == OwnerKind::ReplicaSet => owner
            .controller
            .as_ref()
            .map_or(controller_uid, |c| c.uid.as_str()),
        _ => controller_uid,
    }
}

/// Pods neither finished nor terminating, bound to a node or not, per workload UID: what the controller compares
/// with an eviction's [`crate::Eviction::replaced_at`] to tell that a controller of another kind replaced the pod
/// k8sm evicted.
pub fn live_pods_by_workload(view: &crate::ClusterView) -> std::collections::HashMap<String, u32> {
    let owners: std::collections::HashMap<&str, &OwnerView> =
        view.owners.iter().map(|o| (o.uid.as_str(), o)).collect();
    let mut live = std::collections::HashMap::new();
    for pod in &view.pods {
        let Some(controller) = &pod.controller else {
            continue;
        };
        if pod.terminating || pod.phase.is_finished() {
            continue;
        }
        let owner = owners.get(controller.uid.as_str()).copied();
        *live
            .entry(workload_uid(&controller.uid, owner).to_owned())
            .or_default() += 1;
    }
    live
}
