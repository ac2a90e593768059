//! Critical-path-aware admission: among the nodes whose pods can move now, a free slot goes first
//! to a node holding a pod of the owner with the longest remaining chain (waves of what its bound
//! lets it lose at once), so that the longest chain, which bounds the whole upgrade from below,
//! never waits for a slot behind short ones.

use std::collections::BTreeSet;

use k8sm_api::MaxConcurrentNodes;

use super::*;
use crate::testing::{NEW, node, policy, replica_set};

/// The fixture: `heavy` nodes each holding one pod of `long` (a ReplicaSet of `heavy` replicas, all
/// on them) and `smalls_per_heavy` pods of small workloads, and `light` nodes each holding one pod
/// of a small workload. Every small workload is a ReplicaSet of 2 with its other pod on an upgraded
/// node: one pod to move, one wave.
///
/// At the default threshold of 90%, `long` with `d = heavy` replicas may lose `d - min(ceil(0.9·d),
/// d - 1) = 1` pod at a time (for `2 <= d <= 10`), and has `heavy` pods to move: a chain of `heavy`
/// waves. By the key alone (fewest pods first) every light node (1 pod) comes before every heavy
/// node (`1 + smalls_per_heavy` pods).
struct Fixture {
    heavy: usize,
    smalls_per_heavy: usize,
    light: usize,
    slots: u32,
    /// Extra marked nodes each holding only a pod of `long` (named after the heavy ones).
    long_only: usize,
    /// Whether the old nodes carry the mark already; if not, the pass marks them (the first pass
    /// of an upgrade).
    marked: bool,
}

impl Fixture {
    fn heavy_name(i: usize) -> String {
        format!("a-heavy-{i}")
    }

    fn light_name(i: usize) -> String {
        format!("b-light-{i}")
    }

    fn long_only_name(i: usize) -> String {
        format!("c-long-only-{i}")
    }

    fn view(&self) -> ClusterView {
        let desired = u32::try_from(self.heavy + self.long_only).unwrap();
        let long = replica_set("shop", "long", desired);
        let mut owners = Vec::new();
        let mut pods = Vec::new();
        let mut nodes = vec![node("upgraded").executor(NEW)];
        let old = |name: &str| {
            let n = node(name);
            if self.marked { n.marked(at(0)) } else { n }
        };
        let small = |on: &str, owners: &mut Vec<_>, pods: &mut Vec<_>| {
            let rs = replica_set("shop", &format!("small-{}", owners.len()), 2);
            pods.push(rs.pod(&format!("{}-a", rs.name), on));
            pods.push(rs.pod(&format!("{}-b", rs.name), "upgraded"));
            owners.push(rs);
        };
        for i in 0..self.heavy {
            let name = Self::heavy_name(i);
            pods.push(long.pod(&format!("long-{i}"), &name));
            for _ in 0..self.smalls_per_heavy {
                small(&name, &mut owners, &mut pods);
            }
            nodes.push(old(&name));
        }
        for i in 0..self.light {
            let name = Self::light_name(i);
            small(&name, &mut owners, &mut pods);
            nodes.push(old(&name));
        }
        for i in 0..self.long_only {
            let name = Self::long_only_name(i);
            pods.push(long.pod(&format!("long-only-{i}"), &name));
            nodes.push(old(&name));
        }
        owners.push(long);
        let slots = self.slots;
        cluster(
            nodes,
            owners,
            pods,
            vec![
                policy("p").with(move |s| {
                    s.max_concurrent_nodes = MaxConcurrentNodes::count(slots).unwrap()
                }),
            ],
        )
    }
}

/// The queued nodes, in queue order.
fn queue_order(plan: &Plan) -> Vec<String> {
    queue(plan).into_iter().map(|(_, n)| n).collect()
}

const SIX_ON_TWO: Fixture = Fixture {
    heavy: 6,
    smalls_per_heavy: 3,
    light: 4,
    slots: 2,
    long_only: 0,
    marked: true,
};

#[test]
fn a_free_slot_goes_to_a_node_of_the_longest_chain_before_lighter_nodes_of_short_ones() {
    let plan = plan_now(&SIX_ON_TWO.view());
    let heavy: BTreeSet<String> = (0..SIX_ON_TWO.heavy).map(Fixture::heavy_name).collect();
    let admitted = admitted(&plan);
    assert_eq!(admitted.len(), 2, "{admitted:?}");
    assert!(
        admitted.iter().any(|n| heavy.contains(n)),
        "a node holding a pod of `long` (chain 6) is admitted: {admitted:?}"
    );
    // And `long` moves one pod now, the one its bound allows.
    let long_evicted = plan
        .evictions()
        .filter(|(p, _)| p.name().starts_with("long-"))
        .count();
    assert_eq!(long_evicted, 1);
}

#[test]
fn the_pass_that_marks_the_nodes_already_ranks_them_by_their_chains() {
    // The first pass of an upgrade: no node carries the mark yet, the pass marks every old node and
    // admits into the free slots at once. The pods on nodes it is marking are still to move:
    // `long` has a chain of 6 here as in any later pass, and its node gets a slot before the
    // lighter nodes of one-wave owners.
    let fixture = Fixture {
        marked: false,
        ..SIX_ON_TWO
    };
    let plan = plan_now(&fixture.view());
    let marked = plan
        .actions
        .iter()
        .filter(|a| matches!(a.kind, ActionKind::Mark { .. }))
        .count();
    assert_eq!(marked, fixture.heavy + fixture.light, "the pass marks them");
    let heavy: BTreeSet<String> = (0..fixture.heavy).map(Fixture::heavy_name).collect();
    let admitted = admitted(&plan);
    assert!(
        admitted.iter().any(|n| heavy.contains(n)),
        "a node holding a pod of `long` (chain 6) is admitted: {admitted:?}"
    );
    assert_eq!(queue_order(&plan)[0], Fixture::heavy_name(2));
}

#[test]
fn the_queue_puts_nodes_of_the_longest_chain_first_among_those_that_can_move() {
    let plan = plan_now(&SIX_ON_TWO.view());
    // Every node can move a pod (each heavy node has small pods that may go; each light node is a
    // small pod), so the queue is: the heavy nodes not admitted (chain 6), in key order (same
    // pods, same mark time: by name), then the light ones (no chain), by name. Both slots go to
    // heavy nodes (chain first, then name): the first two by name.
    let mut expected: Vec<String> = (2..SIX_ON_TWO.heavy).map(Fixture::heavy_name).collect();
    expected.extend((0..SIX_ON_TWO.light).map(Fixture::light_name));
    assert_eq!(queue_order(&plan), expected);
    assert_eq!(
        admitted(&plan),
        BTreeSet::from([Fixture::heavy_name(0), Fixture::heavy_name(1)])
    );
}

#[test]
fn a_long_chain_that_cannot_move_now_stays_behind_nodes_that_can() {
    // The long-only nodes hold nothing but pods of `long`, which goes one at a time. They have the
    // fewest pods, so one is admitted first (chain and key alike); then `long` may lose no
    // other pod in this pass: the other long-only node cannot move, and comes after every node
    // that can, whatever its chain.
    let fixture = Fixture {
        heavy: 2,
        smalls_per_heavy: 2,
        light: 2,
        slots: 2,
        long_only: 2,
        marked: true,
    };
    let plan = plan_now(&fixture.view());
    // `long` has 4 replicas, 4 pods to move, one at a time: chain 4 for every heavy and long-only
    // node. By key, the long-only nodes (1 pod) come first, then by name.
    assert_eq!(
        admitted(&plan),
        BTreeSet::from([Fixture::long_only_name(0), Fixture::heavy_name(0)])
    );
    assert_eq!(
        queue_order(&plan),
        [
            Fixture::heavy_name(1),
            Fixture::light_name(0),
            Fixture::light_name(1),
            Fixture::long_only_name(1),
        ]
    );
}
