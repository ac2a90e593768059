//! The strategies that draw one random cluster (see `draw`); [`super::build`] turns a draw into a
//! view and its record of truth.

use proptest::prelude::*;

use super::{
    build::build,
    draw::{Loose, NodeGen, PodGen, PolicyGen, Shape, WorkloadGen},
    truth::World,
};
use crate::tests::support::arb_kind;

prop_compose! {
    fn arb_node()(
        upgraded in prop::bool::weighted(0.25),
        stage in prop_oneof![1 => Just(0u8), 2 => Just(1), 6 => Just(2), 1 => Just(3)],
        pool in 0u8..3,
        tier_c in prop::bool::weighted(0.15),
        opted_out in prop::bool::weighted(0.04),
    ) -> NodeGen {
        NodeGen { upgraded, stage, pool, tier_c, opted_out }
    }
}

prop_compose! {
    fn arb_policy()(
        threshold in prop_oneof![Just(90u8), Just(100), Just(50), Just(75), 1u8..=100],
        max_concurrent in 1u32..=6,
        respect_pdbs in prop::bool::weighted(0.7),
        unmanaged in 0u8..3,
        long_timeout in any::<bool>(),
        paused in prop::bool::weighted(0.15),
        cordon in any::<bool>(),
        finalizer in prop::bool::weighted(0.95),
    ) -> PolicyGen {
        PolicyGen {
            threshold,
            max_concurrent,
            respect_pdbs,
            unmanaged,
            long_timeout,
            paused,
            cordon,
            finalizer,
        }
    }
}

fn arb_shape() -> impl Strategy<Value = Shape> {
    // Rollouts weigh more than steady Deployments: they are where judging a ReplicaSet alone goes
    // wrong.
    prop_oneof![
        1 => Just(Shape::Steady),
        2 => Just(Shape::Rolling),
        2 => Just(Shape::Paused),
        2 => Just(Shape::Stuck),
        1 => Just(Shape::Surge),
    ]
}

prop_compose! {
    fn arb_pod()(
        node in 0usize..8,
        ready in prop::bool::weighted(0.85),
        broken in prop::bool::weighted(0.5),
        terminating in prop::bool::weighted(0.06),
        opted_out in prop::bool::weighted(0.03),
        finished in prop::bool::weighted(0.04),
        unscheduled in prop::bool::weighted(0.04),
        set in 0usize..3,
    ) -> PodGen {
        PodGen { node, ready, broken, terminating, opted_out, finished, unscheduled, set }
    }
}

prop_compose! {
    fn arb_workload()(
        kind in arb_kind(arb_shape()),
        desired in prop_oneof![1 => Just(0u32), 3 => 1u32..4, 4 => 1u32..13],
        replicas_unset in prop::bool::weighted(0.05),
        delta in -2i64..=2,
        sets in 1usize..=3,
        pods in prop::collection::vec(arb_pod(), 16),
        ops_namespace in any::<bool>(),
        gold in prop::bool::weighted(0.2),
        budget in prop::option::weighted(
            0.35,
            prop_oneof![2 => Just(0i32), 2 => Just(1), 1 => -1i32..4],
        ),
    ) -> WorkloadGen {
        WorkloadGen {
            kind,
            desired,
            replicas_unset,
            delta,
            sets,
            pods,
            ops_namespace,
            gold,
            budget,
        }
    }
}

/// A loose pod: its node, what it is, and whether it is opted out.
fn arb_loose() -> impl Strategy<Value = (usize, Loose, bool)> {
    let kind = prop_oneof![
        3 => Just(Loose::Unmanaged),
        1 => Just(Loose::UnmanagedFinished),
        1 => Just(Loose::DaemonSet),
        1 => Just(Loose::Job),
        1 => Just(Loose::JobFinished),
        1 => Just(Loose::Mirror),
    ];
    (0usize..8, kind, prop::bool::weighted(0.1))
}

prop_compose! {
    /// A random cluster of up to 8 nodes under three policies, up to 7 workloads of every kind with
    /// budgets, loose pods, and evictions in flight, shaped like real clusters: Deployments of one
    /// to three ReplicaSets (steady, mid-rollout, a paused 2+2, a rollout stuck with its new pods
    /// Pending and unscheduled, surge above `d`), bare ReplicaSets, ReplicationControllers,
    /// StatefulSets, controllers of kinds k8sm does not watch (absent from the view's owners),
    /// ReplicaSets of such a controller (an Argo `Rollout`), pods not Ready, terminating, opted
    /// out, finished or unscheduled, evictions in flight with and without their pod, budgets
    /// allowing -1 to 3 (one of them over several workloads), unmanaged, Job, DaemonSet and mirror
    /// pods, three policies (one of which overlaps the others), paused policies and a policy
    /// without its finalizer; and with or without a limit on the controller's calls.
    pub(super) fn arb_world()(
        nodes in prop::collection::vec(arb_node(), 1..=8),
        policies in [arb_policy(), arb_policy(), arb_policy()],
        workloads in prop::collection::vec(arb_workload(), 0..=7),
        loose in prop::collection::vec(arb_loose(), 0..=6),
        in_flight in prop::collection::vec(0usize..500, 0..=4),
        gone in prop::collection::vec((0usize..8, 1u32..=2), 0..=2),
        gold_budget in prop::option::weighted(0.3, -1i32..3),
        calls in prop::option::weighted(0.4, (0usize..6, 0usize..4)),
    ) -> World {
        let mut world = build(nodes, policies, workloads, loose, in_flight, gone, gold_budget);
        world.view.calls = calls.map(|(limit, running)| crate::Calls {
            limit,
            running,
            ..crate::Calls::default()
        });
        world
    }
}
