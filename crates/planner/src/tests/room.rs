//! Admission paced by room: nodes are admitted past half the slots only while the nodes k8sm will
//! not drain can take the pods of every node in progress.

use std::sync::Arc;

use k8sm_api::MaxConcurrentNodes;

use super::*;
use crate::testing::{NEW, node, policy, replica_set};

/// Four marked nodes, each with two pods of 500m (1000m to place elsewhere per node) and room
/// enough of their own; one upgraded node with `free_millis` free; `max` slots. Its one owner may
/// lose half its pods at once: its chain is one wave, and the nodes' waves set the pace.
fn fleet(max: u32, free_millis: u64) -> ClusterView {
    let web = replica_set("shop", "web", 20);
    let mut nodes: Vec<NodeView> = (1..=4)
        .map(|i| node(&format!("n{i}")).marked(at(0)).allocatable(8000))
        .collect();
    nodes.push(node("upgraded").executor(NEW).allocatable(4000));
    let mut pods: Vec<PodView> = (1..=4)
        .flat_map(|i| {
            let web = &web;
            (1..=2).map(move |j| {
                web.pod(&format!("web-{i}-{j}"), &format!("n{i}"))
                    .requests(500)
            })
        })
        .collect();
    pods.push(web.pod("web-up-0", "upgraded").requests(4000 - free_millis));
    pods.extend((1..=11).map(|i| web.pod(&format!("web-up-{i}"), "upgraded")));
    let p = policy("p").with(|s| {
        s.max_concurrent_nodes = MaxConcurrentNodes::count(max).unwrap();
        s.owner_health_threshold = 50;
    });
    let mut view = cluster(nodes, vec![web], pods, vec![p]);
    view.pace_by_room = true;
    view
}

fn without_allocatable(mut view: ClusterView) -> ClusterView {
    for n in &mut view.nodes {
        n.allocatable = None;
    }
    view
}

fn names(list: &[&str]) -> std::collections::BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn past_half_the_slots_a_node_waits_until_nodes_that_stay_can_take_its_pods() {
    // Half of 4 slots go whatever the room (n1, n2: 2000m to place). n3 fits in 3500m free (3000m),
    // n4 does not.
    let plan = plan_now(&fleet(4, 3500));
    assert_eq!(admitted(&plan), names(&["n1", "n2", "n3"]));
    assert_eq!(blocker_reasons(&plan, "n4"), [Reason::WaitingForRoom]);
    let message = &node_plan(&plan, "n4").blockers[0].message;
    assert!(message.contains("3500m CPU"), "{message}");
    assert!(
        !Reason::WaitingForRoom.blocks(),
        "room frees up by itself: not blocked"
    );
    // 4000m free takes all four.
    assert_eq!(admitted(&plan_now(&fleet(4, 4000))).len(), 4);
}

/// Off by default: every slot fills whatever the room, as `kubectl drain` in parallel would.
#[test]
fn without_pacing_every_slot_fills_whatever_the_room() {
    let mut view = fleet(4, 0);
    view.pace_by_room = false;
    assert_eq!(admitted(&plan_now(&view)).len(), 4);
}

#[test]
fn half_the_slots_go_whatever_the_room() {
    let plan = plan_now(&fleet(4, 0));
    assert_eq!(admitted(&plan), names(&["n1", "n2"]));
    let plan = plan_now(&fleet(1, 0));
    assert_eq!(admitted(&plan), names(&["n1"]));
}

#[test]
fn where_the_owners_chains_set_the_pace_one_node_goes_whatever_the_room() {
    // At 95 % the owner may lose 1 of its 20 pods at once: 8 to move take 8 waves, against 1 wave
    // of nodes and 2 of growth to 4 slots.
    let mut view = fleet(4, 0);
    view.policies[0].spec.owner_health_threshold = 95;
    assert_eq!(admitted(&plan_now(&view)), names(&["n1"]));
    // At 90 % (2 at once, 4 waves), half the slots.
    view.policies[0].spec.owner_health_threshold = 90;
    assert_eq!(admitted(&plan_now(&view)), names(&["n1", "n2"]));
    // With room for all, all four.
    let mut view = fleet(4, 4000);
    view.policies[0].spec.owner_health_threshold = 95;
    assert_eq!(admitted(&plan_now(&view)).len(), 4);
}

#[test]
fn without_allocatable_resources_room_is_unknown_and_every_slot_fills() {
    let plan = plan_now(&without_allocatable(fleet(4, 0)));
    assert_eq!(admitted(&plan).len(), 4);
    assert!(plan.nodes.iter().all(|n| {
        !n.blockers
            .iter()
            .any(|b| b.reason == Reason::WaitingForRoom)
    }));
}

#[test]
fn pods_waiting_to_be_scheduled_take_room_first() {
    // 3500m free, less two pending pods of 500m: 2500m, which n3's 1000m does not fit beside n1's
    // and n2's 2000m.
    let mut view = fleet(4, 3500);
    let web = replica_set("shop", "web", 20);
    let pending = (1..=2).map(|i| {
        let mut pod = web.pod(&format!("web-pending-{i}"), "").requests(500);
        pod.node_name = None;
        Arc::new(pod)
    });
    view.pods.extend(pending);
    assert_eq!(admitted(&plan_now(&view)), names(&["n1", "n2"]));
}

#[test]
fn nodes_in_progress_hold_room_for_their_pods() {
    // n1 is in progress with its two pods (1000m to place): n2 goes as the floor's second, n3 fits
    // (3000m of 3500m) and n4 does not.
    let mut view = fleet(4, 3500);
    view.nodes[0] = view.nodes[0].clone().admitted(at(1));
    let plan = plan_now(&view);
    assert_eq!(admitted(&plan), names(&["n2", "n3"]));
    assert_eq!(blocker_reasons(&plan, "n4"), [Reason::WaitingForRoom]);
}

#[test]
fn cordoned_and_not_ready_nodes_have_no_room() {
    for edit in [
        (|n: &mut NodeView| n.unschedulable = true) as fn(&mut NodeView),
        |n: &mut NodeView| n.ready = false,
    ] {
        let mut view = fleet(4, 4000);
        edit(
            view.nodes
                .iter_mut()
                .find(|n| n.name == "upgraded")
                .unwrap(),
        );
        assert_eq!(admitted(&plan_now(&view)), names(&["n1", "n2"]));
    }
}

#[test]
fn a_node_whose_restart_is_overdue_does_not_count_among_those_room_never_holds_back() {
    // n1 was told to restart two hours ago and never came back (restartTimeout 10m): it keeps its
    // slot, but n2 and n3 still go as the floor of 4 slots (where room, 1500m, would take n2
    // alone), and n4 does not fit.
    let mut view = fleet(4, 1500);
    let hung = view.nodes[0].clone().admitted(at(-120)).kamikazed(at(-120));
    view.nodes[0] = hung;
    view.pods.retain(|p| p.node_name.as_deref() != Some("n1"));
    let plan = plan_now(&view);
    assert!(blocker_reasons(&plan, "n1").contains(&Reason::RestartOverdue));
    assert_eq!(admitted(&plan), names(&["n2", "n3"]));
    assert_eq!(blocker_reasons(&plan, "n4"), [Reason::WaitingForRoom]);
}
