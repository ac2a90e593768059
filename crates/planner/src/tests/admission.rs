//! Drain slots: how many nodes drain at once, in which order, and how admission is re-derived from
//! the nodes.

use k8sm_api::{MaxConcurrentNodes, NodePhase, UnmanagedPodPolicy};

use super::*;
use crate::testing::{node, policy, replica_set, unmanaged_pod};

fn max(n: u32) -> impl FnOnce(&mut k8sm_api::ExecutorUpgradePolicySpec) {
    move |s| s.max_concurrent_nodes = MaxConcurrentNodes::count(n).unwrap()
}

fn admitted(plan: &Plan) -> Vec<String> {
    summary(plan)
        .into_iter()
        .filter(|s| s.starts_with("Admit"))
        .collect()
}

#[test]
fn admits_at_most_max_concurrent_nodes() {
    let nodes = (1..=5)
        .map(|i| node(&format!("n{i}")).marked(at(i)))
        .collect();
    let plan = plan_now(&cluster(
        nodes,
        vec![],
        vec![],
        vec![policy("p").with(max(2))],
    ));
    assert_eq!(admitted(&plan), ["Admit n1 +cordon", "Admit n2 +cordon"]);
    let p = plan.policy("p").unwrap();
    assert_eq!((p.slots, p.slots_in_use), (2, 2));
    assert_eq!(p.counts.incompatible, 3);
    assert_eq!(p.counts.draining, 2);
}

#[test]
fn a_percentage_of_the_selected_nodes_is_rounded_up() {
    let nodes = (1..=5)
        .map(|i| node(&format!("n{i}")).marked(at(i)))
        .collect();
    let p = policy("p").with(|s| s.max_concurrent_nodes = MaxConcurrentNodes::percent(30).unwrap());
    let plan = plan_now(&cluster(nodes, vec![], vec![], vec![p]));
    assert_eq!(admitted(&plan).len(), 2, "30% of 5 is 1.5, rounded up");
}

#[test]
fn admission_order_is_easiest_first_then_marked_time_then_name() {
    let rs = replica_set("shop", "web", 20);
    let nodes = vec![
        node("blocker").marked(at(0)),
        node("big").marked(at(0)),
        node("small-late").marked(at(9)),
        node("small-early-b").marked(at(1)),
        node("small-early-a").marked(at(1)),
    ];
    let mut pods = vec![
        unmanaged_pod("shop", "lonely", "blocker"), // Never: needs an operator
        rs.pod("b1", "big"),
        rs.pod("b2", "big"),
        rs.pod("b3", "big"),
        rs.pod("l1", "small-late"),
        rs.pod("eb", "small-early-b"),
        rs.pod("ea", "small-early-a"),
    ];
    pods.extend((0..14).map(|i| rs.pod(&format!("elsewhere-{i}"), "upgraded")));
    let mut view = cluster(nodes, vec![rs], pods, vec![policy("p").with(max(5))]);
    view.nodes
        .push(node("upgraded").executor(crate::testing::NEW));
    let plan = plan_now(&view);
    // The node with a pod only an operator can clear is never started (docs/design.md §5.7), though
    // a slot is free.
    assert_eq!(
        admitted(&plan),
        [
            "Admit big +cordon",
            "Admit small-early-a +cordon",
            "Admit small-early-b +cordon",
            "Admit small-late +cordon",
        ],
        "actions are sorted by node; the order shows in the evictions"
    );
    assert_eq!(phase(&plan, "blocker"), NodePhase::Blocked);
    // 20 ready, threshold 90% needs 18: exactly two evictions, given to the easiest nodes first.
    let evicted: Vec<_> = plan
        .evictions()
        .map(|(p, _)| p.name().to_string())
        .collect();
    assert_eq!(evicted, ["ea", "eb"]);

    // With one slot, the easiest node alone is admitted.
    let mut one = view.clone();
    one.policies = vec![policy("p").with(max(1))];
    assert_eq!(admitted(&plan_now(&one)), ["Admit small-early-a +cordon"]);
}

#[test]
fn admission_is_re_derived_from_the_draining_annotation_or_the_cordon() {
    // After a controller restart nothing is remembered: the slot holders are read from the nodes.
    let mut by_cordon_only = node("a").marked(at(0));
    by_cordon_only.cordoned_by_k8sm = true;
    by_cordon_only.unschedulable = true;
    let mut by_annotation_only = node("b").marked(at(0));
    by_annotation_only.draining_since = Some(at(1).to_rfc3339());
    let waiting = node("c").marked(at(0));
    let rs = replica_set("shop", "web", 1);
    let pods = vec![rs.pod("w", "a"), rs.pod("x", "b")];
    let view = cluster(
        vec![by_cordon_only, by_annotation_only, waiting],
        vec![rs],
        pods,
        vec![policy("p").with(max(2))],
    );
    let plan = plan_now(&view);
    assert!(admitted(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(phase(&plan, "a"), NodePhase::Draining);
    assert_eq!(phase(&plan, "b"), NodePhase::Draining);
    assert_eq!(phase(&plan, "c"), NodePhase::Incompatible);
}

#[test]
fn without_cordon_admission_only_sets_the_draining_annotation() {
    let p = policy("p").with(|s| s.cordon = false);
    let plan = plan_now(&cluster(
        vec![node("n1").marked(at(0))],
        vec![],
        vec![],
        vec![p],
    ));
    assert_eq!(summary(&plan), ["Admit n1"]);
    assert_eq!(plan.actions[0].reason, Reason::Admitted);
}

#[test]
fn a_node_cordoned_by_an_operator_is_admitted_without_claiming_the_cordon() {
    let mut n1 = node("n1").marked(at(0));
    n1.unschedulable = true;
    let plan = plan_now(&cluster(vec![n1], vec![], vec![], vec![policy("p")]));
    assert_eq!(
        summary(&plan),
        ["Admit n1"],
        "k8sm must never uncordon it later"
    );
}

#[test]
fn an_admitted_node_that_lost_its_cordon_is_cordoned_when_the_policy_cordons() {
    let mut n1 = node("n1").marked(at(0));
    n1.draining_since = Some(at(1).to_rfc3339());
    let rs = replica_set("shop", "web", 1);
    let plan = plan_now(&cluster(
        vec![n1],
        vec![rs.clone()],
        vec![rs.pod("w", "n1")],
        vec![policy("p")],
    ));
    assert_eq!(summary(&plan), ["Cordon n1", "Evict shop/w"]);
}

#[test]
fn a_blocked_node_gives_up_its_slot_and_is_revisited() {
    let stuck = node("stuck").marked(at(0)).admitted(at(1));
    let next = node("next").marked(at(2));
    let pods = vec![unmanaged_pod("ops", "debug", "stuck")];
    let mut view = cluster(vec![stuck, next], vec![], pods, vec![policy("p")]);
    let plan = plan_now(&view);
    // Handed back: its slot given up and its cordon lifted, so it costs nothing while it waits for
    // the operator.
    assert_eq!(
        summary(&plan),
        ["Admit next +cordon", "Stall stuck +uncordon"]
    );
    assert_eq!(phase(&plan, "stuck"), NodePhase::Blocked);
    assert_eq!(
        blocker_reasons(&plan, "stuck"),
        [Reason::BlockedUnmanagedPod]
    );
    assert_eq!(plan.policy("p").unwrap().counts.blocked, 1);
    // Handed back, it is not started again while the pod is there.
    let mut handed_back = view.clone();
    crate::testing::apply(&mut handed_back, &plan);
    handed_back.nodes.retain(|n| n.name == "stuck");
    let again = plan_now(&handed_back);
    assert!(summary(&again).is_empty(), "{:?}", summary(&again));
    assert_eq!(phase(&again, "stuck"), NodePhase::Blocked);
    let stuck = &handed_back.nodes[0];
    assert!(!stuck.unschedulable && !stuck.cordoned_by_k8sm);

    // Once the operator changes the policy to Delete, the blocked node is revisited and proceeds.
    view.policies =
        vec![policy("p").with(|s| s.unmanaged_pods.policy = UnmanagedPodPolicy::Delete)];
    let plan = plan_now(&view);
    assert!(
        summary(&plan).contains(&"Delete ops/debug".to_owned()),
        "{:?}",
        summary(&plan)
    );
}

#[test]
fn a_node_with_kamikaze_sent_keeps_its_slot_until_it_is_back() {
    let gone = node("gone").marked(at(0)).admitted(at(1)).kamikazed(at(2));
    let next = node("next").marked(at(0));
    let plan = plan_now(&cluster(
        vec![gone, next],
        vec![],
        vec![],
        vec![policy("p")],
    ));
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(phase(&plan, "gone"), NodePhase::KamikazeSent);
    // 58 minutes after kamikaze, past the default restartTimeout of 10m: overdue, reported, and
    // still holding.
    assert_eq!(blocker_reasons(&plan, "gone"), [Reason::RestartOverdue]);
    let conditions = &plan.policy("p").unwrap().conditions;
    assert!(
        conditions
            .iter()
            .any(|c| c.reason == Reason::RestartOverdue && c.nodes == ["gone"])
    );
}

#[test]
fn lowering_max_concurrent_nodes_stops_the_excess_drains() {
    let rs = replica_set("shop", "web", 3);
    let nodes = (1..=3)
        .map(|i| node(&format!("n{i}")).marked(at(0)).admitted(at(i)))
        .collect();
    let pods = (1..=3)
        .map(|i| rs.pod(&format!("w{i}"), &format!("n{i}")))
        .collect();
    let plan = plan_now(&cluster(
        nodes,
        vec![rs],
        pods,
        vec![policy("p").with(max(1))],
    ));
    assert_eq!(summary(&plan), ["Evict shop/w1"], "n1 was admitted first");
    for name in ["n2", "n3"] {
        assert_eq!(phase(&plan, name), NodePhase::Draining);
        assert_eq!(
            blocker_reasons(&plan, name),
            [Reason::WaitingForSlot],
            "{name}"
        );
    }
}

/// Admitted nodes that share an owner which may lose one pod: its eviction goes to the node it
/// leaves closest to drained, not to the one admitted first. Found on a real cluster: three nodes
/// admitted a millisecond apart, the first one also holding a pod whose eviction an admission
/// policy refuses for ever; the shared owner's one eviction went to that node, its replacement
/// found every node cordoned, and nothing moved until a node stalled. The node with nothing else on
/// it drains, comes back upgraded and takes the replacement.
#[test]
fn a_shared_owners_eviction_goes_to_the_node_closest_to_drained() {
    // 3 replicas at the default threshold: one may go at a time.
    let web = replica_set("shop", "web", 3);
    let guarded = replica_set("shop", "guarded", 1);
    let api = replica_set("shop", "api", 1);
    let nodes = vec![
        node("n1").marked(at(0)).admitted(at(1)),
        node("n2").marked(at(0)).admitted(at(2)),
        node("n3").marked(at(0)).admitted(at(3)),
    ];
    let pods = vec![
        guarded.pod("g", "n1"),
        web.pod("w1", "n1"),
        api.pod("a", "n2"),
        web.pod("w2", "n2"),
        web.pod("w3", "n3"),
    ];
    let plan = plan_now(&cluster(
        nodes,
        vec![web, guarded, api],
        pods,
        vec![policy("p").with(max(3))],
    ));
    let web_evictions: Vec<String> = summary(&plan)
        .into_iter()
        .filter(|s| s.starts_with("Evict shop/w"))
        .collect();
    assert_eq!(
        web_evictions,
        ["Evict shop/w3"],
        "n3 holds nothing else; n1 and n2 were admitted before it"
    );
}

#[test]
fn paused_policies_admit_nothing() {
    let p = policy("p").with(|s| s.paused = true);
    let plan = plan_now(&cluster(vec![node("n1")], vec![], vec![], vec![p]));
    assert_eq!(
        summary(&plan),
        ["Mark n1 @"],
        "marking continues while paused"
    );
    assert_eq!(phase(&plan, "n1"), NodePhase::Incompatible);
    assert_eq!(blocker_reasons(&plan, "n1"), [Reason::Paused]);
}
