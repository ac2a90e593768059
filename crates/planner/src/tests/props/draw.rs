//! What the generator draws for one random cluster: nodes, policies, workloads of every kind in
//! every rollout state, loose pods, evictions in flight and budgets.

use crate::tests::support;

#[derive(Clone, Debug)]
pub(super) struct NodeGen {
    pub(super) upgraded: bool,
    /// 0 unmarked, 1 marked, 2 admitted, 3 kamikaze sent.
    pub(super) stage: u8,
    /// 0 pool `a`, 1 pool `b`, 2 no pool.
    pub(super) pool: u8,
    /// Labelled `tier=c`, which policy `c` selects: with a pool too, two policies claim the node.
    pub(super) tier_c: bool,
    pub(super) opted_out: bool,
}

#[derive(Clone, Debug)]
pub(super) struct PolicyGen {
    pub(super) threshold: u8,
    pub(super) max_concurrent: u32,
    pub(super) respect_pdbs: bool,
    /// 0 Delete, 1 Never, 2 DeleteAfterTimeout.
    pub(super) unmanaged: u8,
    /// Timeout 2h (not expired at planning time) instead of 30m (expired for every node marked
    /// before).
    pub(super) long_timeout: bool,
    pub(super) paused: bool,
    pub(super) cordon: bool,
    pub(super) finalizer: bool,
}

/// The state of a Deployment's rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    /// One ReplicaSet.
    Steady,
    /// Pods spread over two or three ReplicaSets at random.
    Rolling,
    /// Paused half-way: half the pods in the old ReplicaSet, half in the new one, all Ready.
    Paused,
    /// The new ReplicaSet's pods are Pending and unscheduled; the old one was scaled down by
    /// maxUnavailable.
    Stuck,
    /// One or two pods above `d`, over two ReplicaSets, all Ready.
    Surge,
}

pub(super) type Kind = support::Kind<Shape>;

#[derive(Clone, Debug)]
pub(super) struct PodGen {
    pub(super) node: usize,
    pub(super) ready: bool,
    /// Not Ready for longer than `nodeProgressDeadline` (when not Ready).
    pub(super) broken: bool,
    pub(super) terminating: bool,
    pub(super) opted_out: bool,
    pub(super) finished: bool,
    pub(super) unscheduled: bool,
    /// Which of the workload's ReplicaSets, for a rollout.
    pub(super) set: usize,
}

#[derive(Clone, Debug)]
pub(super) struct WorkloadGen {
    pub(super) kind: Kind,
    pub(super) desired: u32,
    /// `spec.replicas` unset: the apiserver default, 1.
    pub(super) replicas_unset: bool,
    /// Pods beyond (or short of) `desired`.
    pub(super) delta: i64,
    pub(super) sets: usize,
    pub(super) pods: Vec<PodGen>,
    pub(super) ops_namespace: bool,
    /// Labelled `tier=gold`, which one budget covers across workloads.
    pub(super) gold: bool,
    pub(super) budget: Option<i32>,
}

/// A pod of no workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Loose {
    Unmanaged,
    UnmanagedFinished,
    DaemonSet,
    Job,
    JobFinished,
    Mirror,
}
