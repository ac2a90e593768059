//! Admission that looks at owners: free slots go first to nodes whose pods can move now, so that
//! owners whose pods are bunched on a few nodes drain side by side instead of one behind the other
//! (a convoy behind full nodes whose pods all wait for their owner).

use std::collections::{BTreeMap, BTreeSet};

use k8sm_api::{MaxConcurrentNodes, NodePhase, UnmanagedPodPolicy};
use proptest::prelude::*;

use super::*;
use crate::testing::{NEW, node, policy, replica_set, unmanaged_pod};

fn max(n: u32) -> impl FnOnce(&mut k8sm_api::ExecutorUpgradePolicySpec) {
    move |s| s.max_concurrent_nodes = MaxConcurrentNodes::count(n).unwrap()
}

/// `owners` ReplicaSets, each with `nodes_each` nodes holding `per_node` of its pods and nothing
/// else: an owner's nodes are consecutive in name order (`o{owner}-n{node}`), as they are in
/// admission order when every node has the same number of pods and was marked at the same time.
struct Bunched {
    owners: usize,
    nodes_each: usize,
    per_node: usize,
    slots: u32,
}

impl Bunched {
    fn view(&self) -> ClusterView {
        let mut nodes = Vec::new();
        let mut owners = Vec::new();
        let mut pods = Vec::new();
        for o in 0..self.owners {
            let desired = u32::try_from(self.nodes_each * self.per_node).unwrap();
            let rs = replica_set("shop", &format!("web-{o}"), desired);
            for n in 0..self.nodes_each {
                let name = format!("o{o}-n{n}");
                for p in 0..self.per_node {
                    pods.push(rs.pod(&format!("web-{o}-{n}-{p}"), &name));
                }
                nodes.push(node(&name).marked(at(0)));
            }
            owners.push(rs);
        }
        cluster(nodes, owners, pods, vec![policy("p").with(max(self.slots))])
    }

    /// The owner whose pods run on `node`, from the naming of the scenario.
    fn owner_of(node: &str) -> &str {
        node.split('-').next().unwrap()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every owner is fully ready and has at most 10 replicas, so at threshold 90% each may lose
    /// exactly one pod now
    /// (docs/design.md §5.3: `ceil(0.9·d) = d` for `d <= 10`, so only "fully ready" allows one).
    /// With `slots` free slots, a
    /// pass that admits nodes of `min(slots, owners)` different owners moves that many pods;
    /// admitting several nodes
    /// of one owner moves only one of its pods and leaves the others' waiting (the convoy).
    #[test]
    fn free_slots_go_to_nodes_of_owners_that_can_lose_a_pod(
        owners in 2usize..6,
        nodes_each in 2usize..5,
        per_node in 1usize..3,
        slots in 2u32..6,
    ) {
        let scenario = Bunched { owners, nodes_each, per_node, slots };
        let plan = plan_now(&scenario.view());
        let movers = usize::try_from(slots).unwrap().min(owners);

        let evicted: Vec<&str> = plan.evictions().map(|(p, _)| p.name()).collect();
        prop_assert_eq!(evicted.len(), movers, "one pod of each of {} owners: {:?}", movers, evicted);
        let by_owner: BTreeSet<&str> = evicted.iter().map(|p| p.split('-').nth(1).unwrap()).collect();
        prop_assert_eq!(by_owner.len(), movers, "{:?}", evicted);

        // Every slot is used, and as many owners as can move have a node admitted.
        let admitted = admitted(&plan);
        prop_assert_eq!(admitted.len(), usize::try_from(slots).unwrap().min(owners * nodes_each));
        let owners_admitted: BTreeSet<&str> = admitted.iter().map(|n| Bunched::owner_of(n)).collect();
        prop_assert_eq!(owners_admitted.len(), movers, "{:?}", admitted);
    }

    /// The queue tells the truth about what is admitted next: once this pass's evictions are
    /// recorded, a queued node
    /// whose owner has no pod to lose any more comes after every queued node whose owner still has
    /// one.
    #[test]
    fn queued_nodes_of_owners_that_can_move_come_first(
        owners in 2usize..6,
        nodes_each in 2usize..4,
        slots in 1u32..4,
    ) {
        let scenario = Bunched { owners, nodes_each, per_node: 1, slots };
        let plan = plan_now(&scenario.view());
        let movers = usize::try_from(slots).unwrap().min(owners);
        // The owners that lose a pod in this pass: the first `movers` in name order (o0, o1, ...),
        // from the scenario.
        let moved: BTreeSet<String> = (0..movers).map(|o| format!("o{o}")).collect();
        let queue = queue(&plan);
        prop_assert_eq!(queue.len(), owners * nodes_each - usize::try_from(slots).unwrap());
        let positions: Vec<u32> = queue.iter().map(|(p, _)| *p).collect();
        prop_assert_eq!(positions, (1..=u32::try_from(queue.len()).unwrap()).collect::<Vec<_>>());
        // Owners with a pod to lose first (those that moved nothing in this pass), then the others.
        let can_move: Vec<bool> = queue.iter().map(|(_, n)| !moved.contains(Bunched::owner_of(n))).collect();
        let mut sorted = can_move.clone();
        sorted.sort_by_key(|c| !c);
        prop_assert_eq!(&can_move, &sorted, "{:?}", queue);
    }
}

#[test]
fn a_node_whose_owner_is_at_its_bound_waits_behind_one_whose_owner_is_not() {
    // Three owners of 3, each with two pods on its own node and the third on an upgraded node.
    // `a`'s third pod is not Ready: `a` has 2 of 3 Ready and may lose none of its Ready pods
    // (threshold 90% needs 3).
    let owners: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|o| replica_set("shop", o, 3))
        .collect();
    let mut pods = Vec::new();
    for rs in &owners {
        pods.push(rs.pod(&format!("{}-1", rs.name), &rs.name));
        pods.push(rs.pod(&format!("{}-2", rs.name), &rs.name));
        let third = rs.pod(&format!("{}-3", rs.name), "upgraded");
        pods.push(if rs.name == "a" {
            third.not_ready()
        } else {
            third
        });
    }
    let nodes = vec![
        node("a").marked(at(0)),
        node("b").marked(at(0)),
        node("c").marked(at(0)),
        node("upgraded").executor(NEW),
    ];
    let plan = plan_now(&cluster(
        nodes,
        owners,
        pods,
        vec![policy("p").with(max(1))],
    ));
    assert_eq!(summary(&plan), ["Admit b +cordon", "Evict shop/b-1"]);
    assert_eq!(
        queue(&plan),
        [(1, "c".to_owned()), (2, "a".to_owned())],
        "c's owner can lose a pod, a's cannot"
    );
    assert_eq!(phase(&plan, "a"), NodePhase::Incompatible);
}

#[test]
fn a_node_behind_a_budget_at_its_bound_waits_behind_one_that_can_move() {
    // Two owners of 20 (room for two evictions each), one covered by a budget that allows no
    // disruption.
    let guarded = replica_set("shop", "guarded", 20);
    let free = replica_set("shop", "free", 20);
    let mut pods: Vec<_> = (0..20)
        .map(|i| {
            let node = if i < 3 { "a" } else { "upgraded" };
            guarded.pod(&format!("g{i}"), node).label("app", "guarded")
        })
        .collect();
    pods.extend((0..20).map(|i| {
        let node = if i < 3 { "b" } else { "upgraded" };
        free.pod(&format!("f{i}"), node)
    }));
    let mut view = cluster(
        vec![
            node("a").marked(at(0)),
            node("b").marked(at(0)),
            node("upgraded").executor(NEW),
        ],
        vec![guarded, free],
        pods,
        vec![policy("p").with(max(1))],
    );
    view.pdbs = vec![crate::testing::pdb(
        "shop",
        "guarded-pdb",
        &[("app", "guarded")],
        0,
    )];
    let plan = plan_now(&view);
    assert_eq!(
        summary(&plan),
        ["Admit b +cordon", "Evict shop/f0", "Evict shop/f1"]
    );
    assert_eq!(queue(&plan), [(1, "a".to_owned())]);
}

#[test]
fn owners_do_not_override_stalls_or_operator_pods() {
    // `blocked` holds a pod of an owner at its bound (it cannot move now) but never stalled and
    // needs no operator; it still comes before `stalled` (which stalled before) and `operator`
    // (an unmanaged pod under policy Never), whose other pods could move now.
    let stuck = replica_set("shop", "stuck", 3);
    let healthy = replica_set("shop", "healthy", 20);
    let mut pods = vec![
        stuck.pod("s1", "blocked"),
        stuck.pod("s2", "upgraded"),
        stuck.pod("s3", "upgraded").not_ready(),
        healthy.pod("h-stalled", "stalled"),
        healthy.pod("h-operator", "operator"),
        unmanaged_pod("ops", "debug", "operator"),
    ];
    pods.extend((0..18).map(|i| healthy.pod(&format!("h{i}"), "upgraded")));
    let nodes = vec![
        node("blocked").marked(at(5)),
        node("stalled").marked(at(0)).stalled(at(1)),
        node("operator").marked(at(0)),
        node("upgraded").executor(NEW),
    ];
    let view = cluster(
        nodes,
        vec![stuck, healthy],
        pods,
        vec![policy("p").with(|s| {
            s.max_concurrent_nodes = MaxConcurrentNodes::count(1).unwrap();
            s.unmanaged_pods.policy = UnmanagedPodPolicy::Never;
        })],
    );
    let plan = plan_now(&view);
    assert_eq!(admitted(&plan), BTreeSet::from(["blocked".to_owned()]));
    let order: BTreeMap<u32, String> = queue(&plan).into_iter().collect();
    // The node with a pod only an operator can clear is not even queued: it is never started
    // (docs/design.md §5.7).
    assert_eq!(order.into_values().collect::<Vec<_>>(), ["stalled"]);
    assert_eq!(phase(&plan, "operator"), k8sm_api::NodePhase::Blocked);
}

/// The queue judges each node's available pods by their own workload: `b`'s owner may lose a pod
/// and `a`'s may not (one of its pods is Ready but not yet available), so `b` queues before `a`
/// though `a` comes first by name. Both owners set `minReadySeconds`, so neither is settled by its
/// Ready pods alone.
#[test]
fn the_queue_judges_available_pods_by_their_own_owner() {
    let available = |p: PodView| PodView {
        ready_changed: Some(now() - chrono::Duration::minutes(30)),
        ..p
    };
    let mut slow = replica_set("shop", "slow", 10);
    slow.min_ready_seconds = 60;
    let mut fast = replica_set("shop", "fast", 10);
    fast.min_ready_seconds = 60;
    let busy = replica_set("shop", "busy", 1);
    let mut pods = vec![
        PodView {
            ready_changed: Some(now() - chrono::Duration::seconds(10)),
            ..slow.pod("slow-new", "upgraded")
        },
        available(slow.pod("slow-a", "a")),
        available(fast.pod("fast-b", "b")),
        available(busy.pod("busy-0", "busy")),
    ];
    pods.extend((0..8).map(|i| available(slow.pod(&format!("slow-{i}"), "upgraded"))));
    pods.extend((0..9).map(|i| available(fast.pod(&format!("fast-{i}"), "upgraded"))));
    let nodes = vec![
        node("a").marked(at(0)),
        node("b").marked(at(0)),
        node("busy").marked(at(0)).admitted(at(1)),
        node("upgraded").executor(NEW),
    ];
    let view = cluster(
        nodes,
        vec![slow, fast, busy],
        pods,
        vec![policy("p").with(max(1))],
    );
    let plan = plan_now(&view);
    assert!(admitted(&plan).is_empty(), "{:?}", admitted(&plan));
    assert_eq!(
        queue(&plan),
        [(1, "b".to_owned()), (2, "a".to_owned())],
        "the node whose pod can move first"
    );
}
