//! Property tests over random clusters: the SLA invariant of one plan, determinism, and pause.

use std::collections::BTreeMap;

use k8sm_api::{MaxConcurrentNodes, UnmanagedPodPolicy};
use proptest::prelude::*;

use super::*;
use crate::{
    ActionKind, InFlightEviction, PodPhase, sla_floor,
    testing::{NEW, node, pdb, policy, replica_set, unmanaged_pod},
};

/// A node: upgraded already, how far it is (0 unmarked, 1 marked, 2 admitted, 3 kamikaze sent), pool b, opted out.
type NodeGen = (bool, u8, bool, bool);
/// A replicated owner: desired replicas, how many pods it has beyond (or short of) them, and its pods (node index,
/// ready, terminating, opted out). Pod counts stay close to `desired`, where the health rule is decided.
type OwnerGen = (u32, i64, Vec<(usize, bool, bool, bool)>);
/// A policy: threshold, maxConcurrentNodes, respect budgets, unmanaged policy, paused, cordon.
type PolicyGen = (u8, u32, bool, u8, bool, bool);

fn arb_node() -> impl Strategy<Value = NodeGen> {
    (
        any::<bool>(),
        0u8..4,
        any::<bool>(),
        prop::bool::weighted(0.05),
    )
}

fn arb_owner() -> impl Strategy<Value = OwnerGen> {
    let pod = (
        0usize..8,
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.08),
        prop::bool::weighted(0.03),
    );
    (
        prop_oneof![1 => Just(0u32), 20 => 1u32..30],
        -3i64..=2,
        prop::collection::vec(pod, 32),
    )
}

fn arb_policy() -> impl Strategy<Value = PolicyGen> {
    (
        1u8..=100,
        1u32..=8,
        any::<bool>(),
        0u8..3,
        prop::bool::weighted(0.2),
        any::<bool>(),
    )
}

fn build_policy(
    name: &str,
    pool: &str,
    (t, max, pdbs, unmanaged, paused, cordon): PolicyGen,
) -> PolicyView {
    policy(name).selecting("pool", pool).with(|s| {
        s.owner_health_threshold = t;
        s.max_concurrent_nodes = MaxConcurrentNodes::count(max).unwrap();
        s.respect_pod_disruption_budgets = pdbs;
        s.unmanaged_pods.policy = [
            UnmanagedPodPolicy::Delete,
            UnmanagedPodPolicy::Never,
            UnmanagedPodPolicy::DeleteAfterTimeout,
        ][usize::from(unmanaged)];
        s.unmanaged_pods.timeout = Some("30m".parse().unwrap());
        s.paused = paused;
        s.cordon = cordon;
    })
}

prop_compose! {
    /// A random cluster of up to 8 nodes in two pools (one policy each), up to 6 ReplicaSets with budgets, some
    /// unmanaged and finished pods, and evictions in flight.
    fn arb_cluster()(
        nodes in prop::collection::vec(arb_node(), 1..8),
        owners in prop::collection::vec(arb_owner(), 0..6),
        loose in prop::collection::vec((0usize..8, any::<bool>()), 0..4),
        a in arb_policy(),
        b in arb_policy(),
        budgets in prop::collection::vec((0usize..6, 0i32..3), 0..3),
        in_flight in prop::collection::vec(0usize..200, 0..4),
    ) -> ClusterView {
        let nodes: Vec<NodeView> = nodes
            .into_iter()
            .enumerate()
            .map(|(i, (upgraded, stage, pool_b, opted_out))| {
                let mut n = node(&format!("n{i}")).label("pool", if pool_b { "b" } else { "a" });
                if upgraded { n = n.executor(NEW); }
                if stage >= 1 { n = n.marked(at(i64::try_from(i).unwrap())); }
                if stage >= 2 { n = n.admitted(at(10)); }
                if stage >= 3 { n = n.kamikazed(at(20)); }
                if opted_out { n = n.opted_out(); }
                n
            })
            .collect();
        let node_name = |i: usize| format!("n{}", i % nodes.len());
        let mut view = ClusterView {
            nodes: nodes.clone(),
            policies: vec![build_policy("a", "a", a), build_policy("b", "b", b)], ..Default::default() };
        for (k, (desired, delta, pods)) in owners.into_iter().enumerate() {
            let count = usize::try_from((i64::from(desired) + delta).max(0)).unwrap();
            let rs = replica_set("ns", &format!("rs{k}"), desired);
            let app = format!("rs{k}");
            for (j, (n, ready, terminating, opted_out)) in pods.into_iter().take(count).enumerate() {
                let mut pod = rs.pod(&format!("rs{k}-{j}"), &node_name(n)).label("app", &app);
                pod.ready = ready;
                pod.terminating = terminating;
                if opted_out { pod = pod.label(k8sm_api::keys::UPGRADE_OPT_OUT_LABEL, "true"); }
                view.pods.push(pod);
            }
            view.owners.push(rs);
        }
        for (i, (n, finished)) in loose.into_iter().enumerate() {
            let pod = unmanaged_pod("ns", &format!("loose-{i}"), &node_name(n));
            view.pods.push(if finished { pod.phase(PodPhase::Failed) } else { pod });
        }
        for (k, allowed) in budgets {
            view.pdbs.push(pdb("ns", &format!("pdb-rs{k}"), &[("app", &format!("rs{k}"))], allowed));
        }
        let pod_count = view.pods.len();
        for i in in_flight {
            if pod_count > 0 {
                let pod = &view.pods[i % pod_count];
                let owner_uid = pod.controller.as_ref().map(|c| c.uid.clone());
                view.in_flight.push(InFlightEviction { pod_uid: pod.uid.clone(), owner_uid, at: at(59) });
            }
        }
        view
    }
}

/// Ready pods of each owner that are neither terminating nor being evicted.
fn ready_by_owner(view: &ClusterView) -> BTreeMap<String, u32> {
    let going: Vec<&str> = view.in_flight.iter().map(|e| e.pod_uid.as_str()).collect();
    let mut out = BTreeMap::new();
    for pod in &view.pods {
        if let Some(c) = &pod.controller {
            let count = out.entry(c.uid.clone()).or_insert(0);
            if pod.ready && !pod.terminating && !going.contains(&pod.uid.as_str()) {
                *count += 1;
            }
        }
    }
    out
}

/// Shuffles a vector with a seeded xorshift, so a failing case can be replayed.
fn shuffle<T>(items: &mut [T], seed: &mut u64) {
    for i in (1..items.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let j = usize::try_from(*seed % (i as u64 + 1)).unwrap();
        items.swap(i, j);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// (1) One plan never takes an owner below `min(ceil(t*d), d-1)` ready pods, and every eviction satisfies the
    /// rule before it: room above the threshold, or a fully ready owner.
    #[test]
    fn a_single_plan_never_breaks_the_sla(view in arb_cluster()) {
        let plan = plan_now(&view);
        let before = ready_by_owner(&view);
        let mut evicted_ready: BTreeMap<String, u32> = BTreeMap::new();
        let mut floor: BTreeMap<String, u32> = BTreeMap::new();
        for (pod_ref, e) in plan.evictions() {
            let pod = view.pods.iter().find(|p| p.uid == pod_ref.uid).unwrap();
            if pod.ready {
                prop_assert!(e.ready_before > e.needed || e.ready_before >= e.desired, "{pod_ref}: {e:?}");
            } else {
                prop_assert!(e.ready_before >= sla_floor(e.threshold, e.desired), "{pod_ref}: {e:?}");
            }
            prop_assert!(e.ready_after >= sla_floor(e.threshold, e.desired), "{pod_ref}: {e:?}");
            prop_assert!(!pod.terminating && view.in_flight.iter().all(|f| f.pod_uid != pod.uid), "{pod_ref} is already going");
            prop_assert!(!pod.labels.contains_key(k8sm_api::keys::UPGRADE_OPT_OUT_LABEL), "{pod_ref} opted out");
            *evicted_ready.entry(e.owner.uid.clone()).or_default() += u32::from(pod.ready);
            let f = floor.entry(e.owner.uid.clone()).or_insert(u32::MAX);
            *f = (*f).min(sla_floor(e.threshold, e.desired));
        }
        for (owner, evicted) in evicted_ready {
            let after = before[&owner] - evicted;
            prop_assert!(after >= floor[&owner], "owner {owner}: {} ready, {evicted} evicted, floor {}", before[&owner], floor[&owner]);
        }
    }

    /// (3) The order of the view's vectors does not matter.
    #[test]
    fn shuffling_the_view_gives_the_same_plan(view in arb_cluster(), seed in 1u64..) {
        let plan = plan_now(&view);
        let mut shuffled = view.clone();
        let mut seed = seed;
        shuffle(&mut shuffled.nodes, &mut seed);
        shuffle(&mut shuffled.pods, &mut seed);
        shuffle(&mut shuffled.owners, &mut seed);
        shuffle(&mut shuffled.pdbs, &mut seed);
        shuffle(&mut shuffled.policies, &mut seed);
        shuffle(&mut shuffled.in_flight, &mut seed);
        prop_assert_eq!(plan_now(&shuffled), plan);
    }

    /// (4) A paused policy never evicts, deletes, admits, cordons or sends kamikaze.
    #[test]
    fn paused_policies_never_disrupt(mut view in arb_cluster()) {
        for p in &mut view.policies {
            p.spec.paused = true;
        }
        let plan = plan_now(&view);
        for action in &plan.actions {
            prop_assert!(
                matches!(
                    action.kind,
                    ActionKind::Mark { .. } | ActionKind::Complete { .. } | ActionKind::Progress { .. }
                ),
                "{action:?}"
            );
        }
    }

    /// Planning never panics and always reports every singly-selected node once, whatever the input.
    #[test]
    fn every_selected_node_is_reported_once(view in arb_cluster()) {
        let plan = plan_now(&view);
        let mut seen = std::collections::BTreeSet::new();
        for n in &plan.nodes {
            prop_assert!(seen.insert(n.node.clone()), "{} twice", n.node);
        }
        for p in &plan.policies {
            prop_assert!(p.slots_in_use <= p.slots, "{p:?}");
            prop_assert_eq!(p.counts.total as usize, plan.nodes.iter().filter(|n| n.policy == p.policy).count());
        }
    }
}
