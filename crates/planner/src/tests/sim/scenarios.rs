//! The scenarios the simulation runs: workloads of every kind (Deployments in every rollout state),
//! budgets, pods that never become Ready, the policy's threshold and concurrency, and whether the
//! run is healthy, holds a stuck workload, or meets failures k8sm does not cause; and which
//! workloads are stuck, from the scenario alone.

use proptest::prelude::*;

use crate::tests::{
    oracle,
    support::{self, Direct, arb_kind},
};

/// Where a Deployment's rollout stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rollout {
    /// One ReplicaSet, no rollout.
    Steady,
    /// Under way: pods in the old and the new ReplicaSet, some new ones not Ready yet.
    Under,
    /// Paused half-way: half the pods in each ReplicaSet; the Deployment controller does nothing.
    Paused,
    /// The new ReplicaSet's pods are never schedulable; the old one is scaled down by
    /// maxUnavailable.
    Stuck,
    /// Starts at this step, in the middle of the upgrade.
    StartsAt(usize),
}

pub(super) type Kind = support::Kind<Rollout>;

#[derive(Clone, Debug)]
pub(super) struct WorkloadSpec {
    pub(super) kind: Kind,
    pub(super) desired: u32,
    /// `minAvailable` of its budget.
    pub(super) min_available: Option<u32>,
    /// Pods that never become Ready (a crash loop); their replacements are healthy.
    pub(super) never_ready: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// No workload is stuck: every node must be upgraded.
    Healthy,
    /// At least one workload is stuck: every other node must be upgraded.
    Stuck,
    /// Failures k8sm does not cause, stuck workloads allowed: only the SLA invariants are checked.
    Failures,
}

#[derive(Clone, Debug)]
pub(super) struct Scenario {
    pub(super) mode: Mode,
    pub(super) old_nodes: usize,
    pub(super) workloads: Vec<WorkloadSpec>,
    pub(super) unmanaged: usize,
    pub(super) threshold: u8,
    pub(super) max_concurrent: u32,
    pub(super) cordon: bool,
    /// The policy moves single-replica Deployments by surge rollouts (`spec.workloads.surge:
    /// SingleReplica`).
    pub(super) surge: bool,
    /// The controller forgets the size it remembers of an unknown kind 30 minutes after its last
    /// eviction (as `controller/src/memory/in_flight.rs` does).
    pub(super) age_out: bool,
    pub(super) seed: u64,
}

fn arb_rollout() -> impl Strategy<Value = Rollout> {
    prop_oneof![
        3 => Just(Rollout::Steady),
        2 => Just(Rollout::Under),
        1 => Just(Rollout::Paused),
        2 => Just(Rollout::Stuck),
        2 => (0usize..12).prop_map(Rollout::StartsAt),
    ]
}

prop_compose! {
    fn arb_workload()(
        kind in arb_kind(arb_rollout()),
        // One replica often: the shape surge moves are about.
        desired in prop_oneof![1 => Just(1u32), 4 => 1u32..10],
        min_available in prop::option::weighted(0.3, 0u32..10),
        never_ready in prop_oneof![3 => Just(0u32), 1 => 1u32..3],
    ) -> WorkloadSpec {
        let rolls = matches!(kind, Kind::Deployment(r) if r != Rollout::Steady);
        WorkloadSpec {
            kind,
            desired,
            // At most d - 1 here: a budget that allows nothing is made on purpose, in
            // `Mode::Stuck`.
            min_available: min_available.map(|m| m.min(desired - 1)),
            // Crash loops in workloads that do not roll out, so that what is stuck stays simple to
            // tell.
            never_ready: if rolls { 0 } else { never_ready.min(desired) },
        }
    }
}

prop_compose! {
    pub(super) fn arb_scenario(mode: Mode)(
        // Stuck workloads get nodes of their own, and the others need one too.
        old_nodes in if mode == Mode::Stuck { 2usize..6 } else { 1usize..6 },
        workloads in prop::collection::vec(arb_workload(), 1..5),
        unmanaged in 0usize..3,
        threshold in prop_oneof![Just(90u8), Just(100), Just(50), 1u8..=100],
        max_concurrent in prop_oneof![2 => Just(1u32), 1 => 2u32..4],
        cordon in prop::bool::weighted(0.8),
        surge in prop::bool::ANY,
        seed in 1u64..,
        // Which kind of stuck workload, in `Mode::Stuck`.
        how in 0usize..3,
    ) -> Scenario {
        let mut s = Scenario {
            mode,
            old_nodes,
            workloads,
            unmanaged,
            threshold,
            max_concurrent,
            cordon,
            surge,
            age_out: false,
            seed,
        };
        match mode {
            Mode::Healthy => {
                for w in &mut s.workloads {
                    if stuck(w, threshold, surge && cordon) {
                        *w = WorkloadSpec {
                            kind: Kind::Deployment(Rollout::Steady),
                            never_ready: 0,
                            ..w.clone()
                        };
                    }
                    if stuck(w, threshold, surge && cordon) {
                        w.min_available = None;
                    }
                }
            }
            Mode::Stuck => s.workloads.push(stuck_workload(how, threshold, surge && cordon)),
            Mode::Failures => {}
        }
        s
    }
}

/// A workload that can never move a pod at threshold `t`, of one of three kinds.
fn stuck_workload(how: usize, t: u8, surge: bool) -> WorkloadSpec {
    let mut w = match how {
        // A budget that allows nothing.
        0 => WorkloadSpec {
            kind: Kind::Operator,
            desired: 3,
            min_available: Some(3),
            never_ready: 0,
        },
        // Pods that never become Ready, one more than the bound can spare.
        1 => {
            let d = 4;
            WorkloadSpec {
                kind: Kind::Direct(Direct::ReplicaSet),
                desired: d,
                min_available: None,
                never_ready: d - oracle::bound(t, d) + 1,
            }
        }
        // A rollout whose new pods are never schedulable.
        _ => WorkloadSpec {
            kind: Kind::Deployment(Rollout::Stuck),
            desired: 8,
            min_available: None,
            never_ready: 0,
        },
    };
    if !stuck(&w, t, surge) {
        // At a threshold this low a stuck rollout still moves one pod at a time: hold it with its
        // budget.
        w.min_available = Some(w.desired);
    }
    w
}

/// `(maxSurge, maxUnavailable)` of a Deployment of `d`: the defaults, 25% rounded up and down.
pub(super) fn surge_and_unavailable(d: u32) -> (u32, u32) {
    (d.div_ceil(4), d / 4)
}

/// Whether a workload can never move one of its pods at threshold `t`, whatever the upgrade does: a
/// budget that allows nothing; pods that never become Ready that the Eviction API will not let go
/// (a disrupted budget), or whose workload, whole again, its budget cannot spare a pod of; or a
/// stuck rollout whose Ready pods are at its bound (or held by its budget). Pods that never become
/// Ready are broken once not Ready for `nodeProgressDeadline`: they go whatever the workload's
/// Ready count, and their replacements become Ready. With `surge` (asked for, on nodes that
/// are cordoned), a single-replica Deployment whose rollout is stuck too: its pod moves by a new
/// rollout only once the last one is complete.
pub(super) fn stuck(w: &WorkloadSpec, t: u8, surge: bool) -> bool {
    let d = w.desired;
    if surge && d == 1 && w.kind == Kind::Deployment(Rollout::Stuck) {
        return true;
    }
    let budget_spares = |ready: u32| w.min_available.is_none_or(|m| ready > m);
    if w.never_ready > 0 {
        // The Eviction API lets a pod that is not Ready go freely while its budget is not disrupted
        // (and asks for a healthy pod), else while it allows a disruption.
        let ready = d - w.never_ready;
        let api_lets_them_go = w
            .min_available
            .is_none_or(|m| (m > 0 && ready >= m) || ready > m);
        return !api_lets_them_go || !budget_spares(d);
    }
    let ready = match w.kind {
        Kind::Deployment(Rollout::Stuck) => d - surge_and_unavailable(d).1,
        _ => d,
    };
    let room = ready > oracle::needed(t, d) || ready >= d;
    !budget_spares(ready) || !room
}
