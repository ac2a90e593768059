//! Nothing holds the fleet (docs/design.md §5.2): a draining node without progress for
//! `nodeProgressDeadline` gives up its slot, is reported Blocked with what it waits on, and queues
//! again behind the nodes that never stalled; it rests for the deadline unless one of its pods can
//! move.

use k8sm_api::{MaxConcurrentNodes, NodePhase};

use super::*;
use crate::testing::{NEW, apply, node, pdb, policy, replica_set};

/// One slot; `stuck` drains a pod of a Deployment that a budget of zero protects; `next` is a fresh
/// candidate.
fn one_slot_one_stuck_budget() -> ClusterView {
    let stuck = node("stuck")
        .marked(at(0))
        .admitted(at(1))
        .progressed(at(1), 1);
    one_slot_budget_zero(vec![stuck, node("next").marked(at(0))])
}

/// `nodes`, plus an upgraded node `up`; one drain slot; web-1 on `stuck` (web-2 and web-3 on `up`)
/// under a budget of zero.
fn one_slot_budget_zero(mut nodes: Vec<NodeView>) -> ClusterView {
    let rs = replica_set("shop", "web", 3);
    nodes.push(node("up").executor(NEW));
    let pods = vec![
        rs.pod("web-1", "stuck").label("app", "web"),
        rs.pod("web-2", "up").label("app", "web"),
        rs.pod("web-3", "up").label("app", "web"),
    ];
    let mut view = cluster(
        nodes,
        vec![rs],
        pods,
        vec![policy("p").with(|s| s.max_concurrent_nodes = MaxConcurrentNodes::count(1).unwrap())],
    );
    view.pdbs.push(pdb("shop", "web-pdb", &[("app", "web")], 0));
    view
}

#[test]
fn a_node_without_progress_keeps_its_slot_until_the_deadline() {
    let view = one_slot_one_stuck_budget();
    let plan = crate::plan(&view, at(10));
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(phase(&plan, "stuck"), NodePhase::Draining);
    assert_eq!(phase(&plan, "next"), NodePhase::Incompatible);
    assert_eq!(node_plan(&plan, "next").admission_position, Some(1));
    assert_eq!(
        plan.next_wake,
        Some(at(11)),
        "plan again when it would stall"
    );
}

#[test]
fn at_the_deadline_it_gives_up_its_slot_and_the_next_node_goes() {
    let mut view = one_slot_one_stuck_budget();
    let plan = crate::plan(&view, at(11));
    assert_eq!(summary(&plan), ["Stall stuck +uncordon"]);
    assert_eq!(phase(&plan, "stuck"), NodePhase::Blocked);
    let reasons = blocker_reasons(&plan, "stuck");
    assert_eq!(reasons, [Reason::Stalled, Reason::BlockedByPDB]);
    let stalled = &plan.actions[0];
    assert_eq!(stalled.reason, Reason::Stalled);
    assert!(
        stalled
            .message
            .contains("no pod left the node since 2026-01-01T00:01:00+00:00")
            && stalled.message.contains("PodDisruptionBudget shop/web-pdb"),
        "{}",
        stalled.message
    );
    assert!(
        plan.policy("p")
            .unwrap()
            .conditions
            .iter()
            .any(|c| c.reason == Reason::Stalled && c.nodes == ["stuck"])
    );
    apply(&mut view, &plan);
    // Next pass: the slot is free, the fresh node is admitted; the stalled one is reported Blocked,
    // queued.
    let next = plan_at(&view, 11);
    assert_eq!(summary(&next), ["Admit next +cordon"]);
    assert_eq!(phase(&next, "stuck"), NodePhase::Blocked);
    let stuck = node_plan(&next, "stuck");
    assert_eq!(stuck.admission_position, Some(1));
    assert_eq!(stuck.blockers[0].reason, Reason::Stalled);
    assert!(
        stuck
            .blockers
            .iter()
            .any(|b| b.reason == Reason::BlockedByPDB && b.pod.is_some()),
        "what it waits on is still reported: {:?}",
        stuck.blockers
    );
}

/// `stuck` stalled at minute 11 and is the only candidate left (`next` is upgraded already).
fn stalled_alone() -> ClusterView {
    let mut view = one_slot_one_stuck_budget();
    view.nodes[0] = view.nodes[0].clone().stalled(at(11));
    view.nodes[1] = node("next").executor(NEW);
    view
}

#[test]
fn a_stalled_node_whose_pods_cannot_move_rests_for_the_deadline_even_with_a_slot_free() {
    let mut view = stalled_alone();
    let plan = plan_at(&view, 12);
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(phase(&plan, "stuck"), NodePhase::Blocked);
    let stuck = node_plan(&plan, "stuck");
    assert_eq!(stuck.admission_position, Some(1));
    assert!(
        stuck.blockers[0]
            .message
            .contains("or from 2026-01-01T00:21:00+00:00 on"),
        "{:?}",
        stuck.blockers[0]
    );
    assert_eq!(
        plan.next_wake,
        Some(at(21)),
        "plan again when its rest ends"
    );
    // Rested: admitted again, although its pod still cannot move.
    let plan = plan_at(&view, 21);
    assert_eq!(summary(&plan), ["Admit stuck +cordon"]);
    assert!(plan.actions[0].message.contains("again, after it stalled"));
    apply(&mut view, &plan);
    // Its budget now allows one: the pod moves.
    view.pdbs[0].disruptions_allowed = 1;
    assert_eq!(summary(&plan_at(&view, 22)), ["Evict shop/web-1"]);
}

#[test]
fn a_stalled_node_is_admitted_again_as_soon_as_one_of_its_pods_can_move() {
    let mut view = stalled_alone();
    view.pdbs[0].disruptions_allowed = 1;
    let plan = plan_at(&view, 12);
    assert_eq!(summary(&plan), ["Admit stuck +cordon", "Evict shop/web-1"]);
}

/// A stalled node with only unmanaged pods waits on their timeout (30 minutes from its mark at
/// minute 0), not on an owner: it rests like one whose pods wait, and goes at once when the timeout
/// lets its pod be deleted.
#[test]
fn a_stalled_node_without_owned_pods_rests_until_its_pod_can_go() {
    let mut view = stalled_alone();
    view.pods.retain(|p| &*p.name != "web-1");
    view.pods
        .push(crate::testing::unmanaged_pod("shop", "lone", "stuck").into());
    view.policies[0].spec.unmanaged_pods.policy = k8sm_api::UnmanagedPodPolicy::DeleteAfterTimeout;
    view.policies[0].spec.unmanaged_pods.timeout = Some("30m".parse().unwrap());
    let plan = plan_at(&view, 12);
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(plan.next_wake, Some(at(21)));
    // Rested, it is admitted again and waits on the timeout.
    assert_eq!(summary(&plan_at(&view, 21)), ["Admit stuck +cordon"]);
    // Stalled again at 25: at 30 (and the clock skew allowance) the timeout lets the pod go, which
    // ends the rest at once.
    view.nodes[0] = view.nodes[0].clone().stalled(at(25));
    assert!(summary(&plan_at(&view, 30)).is_empty());
    assert_eq!(
        summary(&plan_at(&view, 31)),
        ["Admit stuck +cordon", "Delete shop/lone"]
    );
}

/// Evicted pods that took longer than the deadline to terminate stalled their node; once they are
/// gone, the node holds nothing but its DaemonSet pod and only needs its kamikaze. A stalled node
/// with nothing left to move goes at once instead of resting out the deadline
/// (docs/decisions/0008-defects-found-by-models-and-benchmarks.md).
#[test]
fn a_stalled_node_left_with_nothing_to_move_is_admitted_at_once() {
    let mut view = stalled_alone();
    let logs = crate::testing::daemon_set("shop", "logs");
    view.pods.retain(|p| &*p.name != "web-1");
    view.pods.push(logs.pod("logs-stuck", "stuck").into());
    view.owners.push(logs.into());
    let plan = plan_at(&view, 12);
    assert_eq!(summary(&plan), ["Admit stuck +cordon"]);
    // While its last pod is still terminating, it has something to wait on: it rests.
    let rs = replica_set("shop", "web", 3);
    view.pods
        .push(rs.pod("web-1", "stuck").terminating().into());
    assert!(summary(&plan_at(&view, 12)).is_empty());
}

#[test]
fn a_pod_moving_in_the_pass_is_progress_and_a_lower_count_is_recorded() {
    let rs = replica_set("shop", "web", 4);
    let nodes = vec![
        node("n1")
            .marked(at(0))
            .admitted(at(1))
            .progressed(at(1), 3),
        node("up").executor(NEW),
    ];
    let pods = vec![
        rs.pod("a", "n1"),
        rs.pod("b", "n1").terminating(),
        rs.pod("c", "up"),
        rs.pod("d", "up"),
    ];
    let view = cluster(nodes, vec![rs], pods, vec![policy("p")]);
    // Long past the deadline, but one pod left since the record (3 → 2): a record, no stall.
    let plan = plan_at(&view, 30);
    assert!(!summary(&plan).iter().any(|a| a.starts_with("Stall")));
    assert!(with_bookkeeping(&plan).contains(&"Progress n1 2".to_owned()));
}

#[test]
fn a_paused_policy_never_stalls_and_keeps_its_records_fresh() {
    let mut view = one_slot_one_stuck_budget();
    view.policies[0].spec.paused = true;
    let plan = plan_at(&view, 30);
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(with_bookkeeping(&plan), ["Progress stuck 1"]);
}

fn plan_at(view: &ClusterView, minute: i64) -> Plan {
    crate::plan(view, at(minute))
}

/// The last node of a fleet, admitted while its pods cannot move: no other change may come to wake
/// the controller, so the pass that admits it must itself ask to plan again at its deadline, or it
/// never stalls.
#[test]
fn a_node_admitted_with_nothing_to_move_asks_to_be_planned_again_at_its_deadline() {
    let view = one_slot_budget_zero(vec![node("stuck").marked(at(0))]);
    let plan = crate::plan(&view, at(10));
    assert_eq!(summary(&plan), ["Admit stuck +cordon"]);
    // The policy's default nodeProgressDeadline is 10 minutes (as in the tests above: progressed at
    // 1, stalls at 11).
    assert_eq!(
        plan.next_wake,
        Some(at(20)),
        "plan again when it would stall"
    );
}
