//! The generated world and the record of truth the generator keeps of it (which workload each pod
//! counts for, each workload's `d`, each node's policy, what each budget covers), from which every
//! oracle of the properties is computed.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use k8sm_api::UnmanagedPodPolicy;

use super::draw::Shape;
use crate::{ClusterView, tests::oracle};

/// A generated cluster: the view the planner sees, and the generator's record of it.
#[derive(Clone, Debug)]
pub(super) struct World {
    pub(super) view: ClusterView,
    pub(super) truth: Truth,
}

/// What the generator decided, from which every oracle is computed: which workload each pod counts
/// for, each workload's `d`, which policy (and so which threshold) each node has, what each budget
/// covers. Never the plan's own account of an eviction (`Eviction::desired`, `threshold`,
/// `ready_before`).
#[derive(Clone, Debug, Default)]
pub(super) struct Truth {
    /// Workloads by key (the UID the generator gave the top-level controller).
    pub(super) workloads: BTreeMap<String, WorkloadTruth>,
    /// Every pod, by UID.
    pub(super) pods: BTreeMap<String, PodTruth>,
    pub(super) nodes: BTreeMap<String, NodeTruth>,
    pub(super) policies: Vec<PolicyTruth>,
    pub(super) budgets: Vec<BudgetTruth>,
    /// Evictions in flight whose pod is gone, per workload key.
    pub(super) gone: BTreeMap<String, u32>,
}

#[derive(Clone, Debug)]
pub(super) struct WorkloadTruth {
    /// Such as `Deployment shop/w3 (Stuck, 2 ReplicaSets)`.
    pub(super) what: String,
    /// `spec.replicas` (defaulted) of a kind k8sm knows; `None` for a controller of another kind.
    pub(super) desired: Option<u32>,
    /// Its ReplicaSets, for a Deployment or a Rollout.
    pub(super) replica_sets: usize,
    /// The state of its rollout, for a Deployment.
    pub(super) shape: Option<Shape>,
}

/// What a pod counts for: a workload (by key), or none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PodOf {
    Workload(String),
    Unmanaged,
    Job,
    DaemonSet,
    Mirror,
}

#[derive(Clone, Debug)]
pub(super) struct PodTruth {
    pub(super) namespace: String,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) of: PodOf,
    pub(super) node: Option<String>,
    pub(super) ready: bool,
    /// Not Ready for longer than its policy's `nodeProgressDeadline`.
    pub(super) broken: bool,
    pub(super) terminating: bool,
    pub(super) in_flight: bool,
    pub(super) finished: bool,
    pub(super) opted_out: bool,
}

impl PodTruth {
    /// Still there to be moved: neither finished nor on its way out.
    pub(super) fn staying(&self) -> bool {
        !self.finished && !self.terminating && !self.in_flight
    }
}

#[derive(Clone, Debug)]
pub(super) struct NodeTruth {
    /// The policy (index) when exactly one policy selects the node.
    pub(super) policy: Option<usize>,
    pub(super) upgraded: bool,
    pub(super) stage: u8,
    pub(super) opted_out: bool,
    /// When it was marked (`None`: not marked before this pass).
    pub(super) marked: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug)]
pub(super) struct PolicyTruth {
    pub(super) name: &'static str,
    pub(super) threshold: u8,
    /// Neither paused nor without its finalizer.
    pub(super) acts: bool,
    pub(super) respect_pdbs: bool,
    pub(super) unmanaged: UnmanagedPodPolicy,
    pub(super) timeout: Duration,
}

#[derive(Clone, Debug)]
pub(super) struct BudgetTruth {
    pub(super) name: String,
    pub(super) allowed: i32,
    pub(super) covers: BTreeSet<String>,
}

impl Truth {
    /// A workload's `d`, Ready and going counts, from the generated pods (docs/design.md §5.3).
    pub(super) fn workload(&self, key: &str) -> oracle::Truth {
        let (mut seen, mut ready, mut going) = (0u32, 0u32, 0u32);
        for pod in self.pods.values() {
            if pod.of != PodOf::Workload(key.to_owned()) || pod.finished {
                continue;
            }
            seen += 1;
            // Terminating on its own: gone, as the disruption controller counts it.
            if pod.in_flight {
                going += 1;
            } else if pod.ready && !pod.terminating {
                ready += 1;
            }
        }
        let gone = self.gone.get(key).copied().unwrap_or(0);
        oracle::Truth {
            desired: self.workloads[key].desired.unwrap_or(seen + gone),
            ready,
            going: going + gone,
        }
    }

    /// No pod of the workload Ready, and one of its live pods broken: its other pods, of the same
    /// template, are broken too.
    pub(super) fn broken_as_a_whole(&self, key: &str) -> bool {
        let mine = |p: &&PodTruth| p.of == PodOf::Workload(key.to_owned());
        self.workload(key).ready == 0
            && self
                .pods
                .values()
                .filter(mine)
                .any(|p| p.broken && !p.terminating && !p.in_flight && !p.finished)
    }

    /// A controller of a kind k8sm does not know: its `d` is not in the view.
    pub(super) fn is_unknown_kind(&self, key: &str) -> bool {
        self.workloads[key].desired.is_none()
    }

    /// The node's policy, if exactly one selects it.
    pub(super) fn policy_of(&self, node: &str) -> Option<&PolicyTruth> {
        self.nodes[node].policy.map(|i| &self.policies[i])
    }

    /// The node's policy, if the node was admitted before this pass (and not told to terminate) and
    /// the policy acts.
    pub(super) fn draining(&self, node: &str) -> Option<&PolicyTruth> {
        let n = &self.nodes[node];
        let admitted = n.stage == 2 && !n.upgraded && !n.opted_out;
        self.policy_of(node).filter(|p| admitted && p.acts)
    }

    /// Whether an eviction of `pod` goes through the Eviction API: always for a controller of
    /// another kind, else as the policy of its node says.
    pub(super) fn through_api(&self, pod: &PodTruth) -> bool {
        let unknown = matches!(&pod.of, PodOf::Workload(key) if self.is_unknown_kind(key));
        unknown
            || pod
                .node
                .as_deref()
                .and_then(|n| self.policy_of(n))
                .is_some_and(|p| p.respect_pdbs)
    }

    /// A pod for a failure message: its UID, what it counts for, and its node.
    pub(super) fn describe(&self, uid: &str) -> String {
        let pod = &self.pods[uid];
        let of = match &pod.of {
            PodOf::Workload(key) => self.workloads[key].what.clone(),
            other => format!("{other:?}"),
        };
        format!("pod {uid} of {of} on {:?}", pod.node)
    }
}
