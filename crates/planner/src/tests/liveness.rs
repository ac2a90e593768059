//! Liveness (docs/design.md §5.7): broken workloads never hold a node, the Eviction API decides
//! where it may say yes, and a pod stuck terminating freezes none of its workload's other pods.
//! Each case fails on the rule it is about.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8sm_api::{MaxConcurrentNodes, NodePhase};

use super::pods::draining;
use super::*;
use crate::{
    OwnerKind, PdbView, UnhealthyPodEvictionPolicy,
    testing::{node, owner, pdb, policy, replica_set, unmanaged_pod},
};

/// A Deployment of 3 crash-looping for an hour (no pod Ready): its pod on a draining node goes, as
/// `kubectl drain` would evict it; the node is not held for as long as the workload stays broken.
#[test]
fn a_broken_workload_does_not_hold_its_node() {
    let rs = replica_set("shop", "web", 3);
    let pods = vec![
        rs.pod("web-a", "up").broken(),
        rs.pod("web-b", "up").broken(),
        rs.pod("web-c", "n1").broken(),
    ];
    let plan = plan_now(&draining(vec![rs], pods, policy("p")));
    assert_eq!(summary(&plan), ["Evict shop/web-c"]);
    let (_, eviction) = plan.evictions().next().unwrap();
    assert_eq!((eviction.ready_before, eviction.ready_after), (0, 0));
    assert!(
        plan.actions[0].message.contains("pod broken"),
        "{}",
        plan.actions[0].message
    );
}

/// A replacement still starting is not broken: below the floor it waits, and the plan wakes when it
/// would count as broken (nothing else may change before then).
#[test]
fn a_pod_not_ready_for_less_than_the_deadline_waits_and_the_plan_wakes_when_it_would_be_broken() {
    let rs = replica_set("shop", "web", 3);
    let starting_since = now() - chrono::Duration::minutes(3);
    let pods = vec![
        rs.pod("web-a", "up"),
        rs.pod("web-b", "up").broken(),
        rs.pod("web-c", "n1").not_ready_since(starting_since),
    ];
    let plan = plan_now(&draining(vec![rs], pods, policy("p")));
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    let (_, reason, message) = pod_decision(&plan, "n1", "web-c");
    assert_eq!(reason, Some(Reason::WaitingForOwner));
    assert!(message.contains("nodeProgressDeadline 10m"), "{message}");
    assert_eq!(
        plan.next_wake,
        Some(starting_since + chrono::Duration::minutes(10))
    );
}

/// A budget with `disruptionsAllowed: 0` and `unhealthyPodEvictionPolicy: AlwaysAllow`: the
/// Eviction API evicts a pod that is not Ready at once, so k8sm sends it.
#[test]
fn a_not_ready_pod_under_an_always_allow_budget_at_zero_is_evicted() {
    let rs = replica_set("shop", "web", 3);
    let pods = vec![
        rs.pod("web-a", "up").broken(),
        rs.pod("web-b", "up").broken(),
        rs.pod("web-c", "n1").broken(),
    ];
    let always = PdbView {
        unhealthy_pod_eviction_policy: UnhealthyPodEvictionPolicy::AlwaysAllow,
        desired_healthy: 3,
        current_healthy: 0,
        ..pdb("shop", "web", &[], 0)
    };
    let mut view = draining(vec![rs], pods, policy("p"));
    view.pdbs.push(always.clone());
    assert_eq!(summary(&plan_now(&view)), ["Evict shop/web-c"]);
    // The default policy, IfHealthyBudget, with the application disrupted: the API refuses, so k8sm
    // waits.
    view.pdbs[0] = PdbView {
        unhealthy_pod_eviction_policy: UnhealthyPodEvictionPolicy::IfHealthyBudget,
        ..always.clone()
    };
    let plan = plan_now(&view);
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    let (_, reason, _) = pod_decision(&plan, "n1", "web-c");
    assert_eq!(reason, Some(Reason::BlockedByPDB));
    // IfHealthyBudget with the application not disrupted: the API evicts a pod that is not Ready
    // freely.
    view.pdbs[0] = PdbView {
        unhealthy_pod_eviction_policy: UnhealthyPodEvictionPolicy::IfHealthyBudget,
        current_healthy: 3,
        ..always
    };
    assert_eq!(summary(&plan_now(&view)), ["Evict shop/web-c"]);
}

/// A pod of another controller (a KubeVirt VM's launcher, say) is asked for whatever its budget's
/// count says: the eviction webhook that migrates the VM answers the request itself. One such ask
/// per workload and pass, alone.
#[test]
fn a_pod_of_another_controller_is_asked_for_against_a_budget_at_zero_once_per_pass() {
    let vm = owner(
        OwnerKind::Other("VirtualMachineInstance".into()),
        "vms",
        "db",
        None,
    );
    let mut pods: Vec<PodView> = (0..4)
        .map(|i| vm.pod(&format!("launcher-{i}"), "n1"))
        .collect();
    pods.push(vm.pod("launcher-up", "up"));
    let mut view = draining(
        vec![],
        pods,
        policy("p").with(|s| s.owner_health_threshold = 50),
    );
    view.pdbs.push(pdb("vms", "db", &[], 0));
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict vms/launcher-0"]);
    assert!(
        plan.actions[0].message.contains("the Eviction API decides"),
        "{}",
        plan.actions[0].message
    );
    // The others wait for the budget the first one is asked for against.
    let (_, reason, message) = pod_decision(&plan, "n1", "launcher-1");
    assert_eq!(reason, Some(Reason::BlockedByPDB));
    assert!(message.contains("PodDisruptionBudget vms/db"), "{message}");
    // A node that only waits for a slot (here one that stalled before) asks for nothing: its pods
    // are reported as waiting for the budget.
    view.nodes[0] = node("n1").marked(at(0)).stalled(at(2));
    view.nodes.push(node("busy").marked(at(0)).admitted(at(1)));
    let mut pods: Vec<PodView> = view.pods.iter().map(|p| (**p).clone()).collect();
    pods.push(unmanaged_pod("ops", "tool", "busy"));
    view.pods = crate::testing::shared_pods(pods);
    view.policies[0] = policy("p").with(|s| {
        s.owner_health_threshold = 50;
        s.unmanaged_pods.policy = k8sm_api::UnmanagedPodPolicy::DeleteAfterTimeout;
        s.unmanaged_pods.timeout = Some("10h".parse().unwrap());
    });
    let queued = plan_now(&view);
    assert!(
        queued.evictions().next().is_none(),
        "{:?}",
        summary(&queued)
    );
    let (_, reason, _) = pod_decision(&queued, "n1", "launcher-0");
    assert_eq!(reason, Some(Reason::BlockedByPDB));
}

/// A workload of another controller whose budget is at zero because one of its pods is not Ready:
/// the Eviction API lets that pod go (the budget is not disrupted, `IfHealthyBudget`), and its
/// replacement gives the budget room for the others, as `kubectl drain` gets through. The ask for
/// a Ready pod of the workload, decided before it, must not hold it back: the answer to the ask
/// changes no count its eviction rests on.
#[test]
fn an_ask_against_a_budget_at_zero_holds_back_no_pod_that_is_not_ready() {
    let kafka = owner(
        OwnerKind::Other("KafkaNodePool".into()),
        "ns",
        "kafka",
        None,
    );
    let pods = vec![
        kafka.pod("kafka-a", "n1"),
        kafka.pod("kafka-b", "n1").broken(),
        kafka.pod("kafka-c", "up"),
        kafka.pod("kafka-d", "up"),
    ];
    let mut view = draining(
        vec![],
        pods,
        policy("p").with(|s| s.owner_health_threshold = 50),
    );
    view.pdbs.push(PdbView {
        desired_healthy: 3,
        current_healthy: 3,
        ..pdb("ns", "kafka", &[], 0)
    });
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict ns/kafka-a", "Evict ns/kafka-b"]);
    assert!(
        plan.actions[0].message.contains("the Eviction API decides"),
        "{}",
        plan.actions[0].message
    );
    // Its numbers do not rest on the ask, which the API may refuse: the record of the upgrade
    // then holds what happened.
    let numbers: Vec<(u32, u32)> = plan
        .evictions()
        .map(|(_, e)| (e.ready_before, e.ready_after))
        .collect();
    assert_eq!(numbers, [(3, 2), (3, 3)]);
    // A budget disrupted (fewer healthy than it needs): the API refuses the pod that is not Ready
    // too, so it waits for the budget.
    view.pdbs[0].current_healthy = 2;
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict ns/kafka-a"]);
    let (_, reason, _) = pod_decision(&plan, "n1", "kafka-b");
    assert_eq!(reason, Some(Reason::BlockedByPDB));
}

/// An eviction asked for against a budget at zero is likely refused: it is not progress, so a node
/// whose pod the API keeps refusing gives its slot up at `nodeProgressDeadline` like any node that
/// made none.
#[test]
fn an_eviction_asked_against_a_budget_at_zero_is_not_progress() {
    let vm = owner(
        OwnerKind::Other("VirtualMachineInstance".into()),
        "vms",
        "db",
        None,
    );
    let pods = vec![vm.pod("launcher-0", "n1"), vm.pod("launcher-up", "up")];
    let mut view = draining(vec![], pods, policy("p"));
    view.nodes[0].drain_progress = Some(format!("{} 1", at(1).to_rfc3339()));
    view.pdbs.push(pdb("vms", "db", &[], 0));
    let plan = plan_now(&view);
    assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
    assert!(
        blocker_reasons(&plan, "n1").contains(&Reason::Stalled),
        "{:?}",
        blocker_reasons(&plan, "n1")
    );
}

/// A node that is NotReady, or reports no executor ID, is never admitted and holds no slot: with
/// one slot, the fleet goes on without it. A node told to restart that is not back keeps its slot
/// (the brake on a bad executor).
#[test]
fn a_dead_node_holds_no_slot_but_a_restart_that_never_came_back_does() {
    let mut dead = node("dead").marked(at(0));
    dead.ready = false;
    let mut silent = node("silent").marked(at(0));
    silent.executor_id = None;
    let live = node("live").marked(at(5));
    let one = policy("p").with(|s| s.max_concurrent_nodes = MaxConcurrentNodes::count(1).unwrap());
    let view = cluster(vec![dead, silent, live], vec![], vec![], vec![one.clone()]);
    let plan = plan_now(&view);
    assert_eq!(admitted(&plan), BTreeSet::from(["live".to_owned()]));
    for name in ["dead", "silent"] {
        assert_eq!(phase(&plan, name), NodePhase::Blocked, "{name}");
        assert_eq!(
            blocker_reasons(&plan, name),
            [Reason::NodeNotReady],
            "{name}"
        );
        assert!(
            plan.actions.iter().all(|a| a.kind.node() != Some(name)),
            "{name}: {:?}",
            summary(&plan)
        );
    }
    // Told to restart, then NotReady and not back: it keeps the slot, and nothing else is admitted.
    let mut restarting = node("restarting")
        .marked(at(0))
        .admitted(at(1))
        .kamikazed(at(2));
    restarting.ready = false;
    let view = cluster(
        vec![restarting, node("live").marked(at(5))],
        vec![],
        vec![],
        vec![one],
    );
    let plan = plan_now(&view);
    assert!(admitted(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(phase(&plan, "restarting"), NodePhase::KamikazeSent);
}

/// A node with a pod only an operator can clear (a bare pod under `Never`) is never started: not
/// cordoned, and the workload pod beside it keeps running. Once the operator deletes the bare pod,
/// it is admitted like any other.
#[test]
fn a_node_only_an_operator_can_clear_is_never_started() {
    let rs = replica_set("shop", "web", 10);
    let mut pods: Vec<PodView> = (0..9).map(|i| rs.pod(&format!("w{i}"), "up")).collect();
    pods.push(rs.pod("web-here", "n1"));
    pods.push(unmanaged_pod("ops", "debug", "n1"));
    let nodes = vec![
        node("n1").marked(at(0)),
        node("up").executor(crate::testing::NEW),
    ];
    let mut view = cluster(nodes, vec![rs], pods, vec![policy("p")]);
    let plan = plan_now(&view);
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
    let reasons = blocker_reasons(&plan, "n1");
    assert!(
        reasons.contains(&Reason::BlockedUnmanagedPod),
        "{reasons:?}"
    );
    let (decision, _, message) = pod_decision(&plan, "n1", "debug");
    assert_eq!(decision, crate::Decision::Block);
    assert!(message.contains("kubectl k8sm force n1"), "{message}");
    // The operator deleted it.
    view.pods.retain(|p| &*p.name != "debug");
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Admit n1 +cordon", "Evict shop/web-here"]);
}

/// A pod terminating past its grace period by more than a minute is stuck (a finalizer, a dead
/// kubelet): a node holding one is not started, and says what holds it; one still within its grace
/// period is waited for, and the plan wakes when it would count as stuck.
#[test]
fn a_pod_stuck_terminating_keeps_its_node_from_being_started_and_says_what_holds_it() {
    let rs = replica_set("shop", "web", 3);
    let mut zombie = rs.pod("web-old", "n1").terminating();
    zombie.deletion = Some(now() - chrono::Duration::minutes(5));
    zombie.finalizers = vec!["example.com/backup".into()];
    let pods = vec![
        zombie.clone(),
        rs.pod("web-a", "up"),
        rs.pod("web-b", "up"),
        rs.pod("web-c", "up"),
    ];
    let nodes = vec![
        node("n1").marked(at(0)),
        node("up").executor(crate::testing::NEW),
    ];
    let view = cluster(nodes.clone(), vec![rs.clone()], pods, vec![policy("p")]);
    let plan = plan_now(&view);
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
    let (decision, reason, message) = pod_decision(&plan, "n1", "web-old");
    assert_eq!(
        (decision, reason),
        (crate::Decision::Block, Some(Reason::StuckTerminating))
    );
    assert!(message.contains("example.com/backup"), "{message}");
    assert!(
        message.contains("kubectl k8sm force n1 --terminating"),
        "{message}"
    );
    // Still within its grace period: the node is started and waits for it.
    let mut leaving = zombie;
    leaving.deletion = Some(now() + chrono::Duration::seconds(20));
    let view = cluster(
        nodes,
        vec![rs.clone()],
        vec![
            leaving,
            rs.pod("web-a", "up"),
            rs.pod("web-b", "up"),
            rs.pod("web-c", "up"),
        ],
        vec![policy("p")],
    );
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Admit n1 +cordon"]);
    assert_eq!(
        pod_decision(&plan, "n1", "web-old").1,
        Some(Reason::WaitingForTermination)
    );
    assert_eq!(plan.next_wake, Some(now() + chrono::Duration::seconds(80)));
}

/// The target moved while a node restarted (a hotfix release): back on the target it was told to
/// restart into, the node restarted as told and goes round again for the new one; back on any other
/// ID, it came back wrong (the brake on a broken executor release stays).
#[test]
fn a_node_back_on_the_target_it_was_told_goes_round_again_after_the_target_moved() {
    let first = "sha256:first-target";
    let hotfix = "sha256:hotfix";
    let mut back = node("n1").marked(at(0)).admitted(at(1)).kamikazed(at(2));
    back.kamikaze_target = Some(first.to_owned());
    back.kamikaze = None;
    back.kamikaze_obeyed = true;
    back.executor_id = Some(first.to_owned());
    let moved = policy("p").with(|s| s.target_executor_id = Some(hotfix.to_owned()));
    let mut view = cluster(vec![back.clone()], vec![], vec![], vec![moved.clone()]);
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Complete n1 +uncordon"]);
    assert!(
        plan.actions[0]
            .message
            .contains("the target it was told to restart into"),
        "{}",
        plan.actions[0].message
    );
    assert!(blocker_reasons(&plan, "n1").is_empty());
    // Round again: marked for the new target, admitted, drained (nothing on it) and told to restart
    // into it.
    crate::testing::apply(&mut view, &plan);
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Mark n1 @", "Admit n1 +cordon"]);
    // Back on a third ID: it came back wrong, and keeps its slot.
    let mut wrong = back;
    wrong.executor_id = Some("sha256:something-else".to_owned());
    let plan = plan_now(&cluster(vec![wrong], vec![], vec![], vec![moved]));
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(blocker_reasons(&plan, "n1"), [Reason::UnexpectedExecutor]);
}

/// `p`, Ready for 30 minutes: available whatever its workload's `minReadySeconds`.
fn available(p: PodView) -> PodView {
    PodView {
        ready_changed: Some(now() - chrono::Duration::minutes(30)),
        ..p
    }
}

/// With `minReadySeconds`, "Ready" in the rule means available (Ready for that long), as the
/// Deployment controller counts it: a replacement Ready for 10 s of 60 does not count yet, so the
/// workload's Ready pods on the draining node wait, and the plan wakes when it becomes available; a
/// pod not yet available itself moves as a pod that is not Ready does (its controller does not
/// count it either).
#[test]
fn with_min_ready_seconds_ready_means_available() {
    let mut rs = replica_set("shop", "web", 3);
    rs.min_ready_seconds = 60;
    let just = now() - chrono::Duration::seconds(10);
    let pods = vec![
        available(rs.pod("web-a", "up")),
        PodView {
            ready_changed: Some(just),
            ..rs.pod("web-new", "up")
        },
        available(rs.pod("web-c", "n1")),
    ];
    let plan = plan_now(&draining(vec![rs.clone()], pods, policy("p")));
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    let (_, reason, message) = pod_decision(&plan, "n1", "web-c");
    assert_eq!(reason, Some(Reason::WaitingForOwner));
    assert!(message.contains("2/3 ready"), "{message}");
    assert_eq!(plan.next_wake, Some(just + chrono::Duration::seconds(60)));
    // Once available: 3/3, one may go.
    let later = crate::plan(
        &draining(
            vec![rs.clone()],
            vec![
                available(rs.pod("web-a", "up")),
                available(rs.pod("web-new", "up")),
                available(rs.pod("web-c", "n1")),
            ],
            policy("p"),
        ),
        now(),
    );
    assert_eq!(summary(&later), ["Evict shop/web-c"]);
    // A pod on the node that is Ready but not yet available moves like one that is not Ready: 2
    // available of 3 is the floor.
    let pods = vec![
        available(rs.pod("web-a", "up")),
        available(rs.pod("web-b", "up")),
        PodView {
            ready_changed: Some(just),
            ..rs.pod("web-c", "n1")
        },
    ];
    let mut view = draining(vec![rs], pods, policy("p"));
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict shop/web-c"]);
    let (_, eviction) = plan.evictions().next().unwrap();
    assert_eq!((eviction.ready_before, eviction.ready_after), (2, 2));
    // A budget counts it Ready, as the Eviction API does: at zero it refuses, whatever
    // unhealthyPodEvictionPolicy says.
    view.pdbs.push(PdbView {
        current_healthy: 3,
        desired_healthy: 2,
        ..pdb("shop", "web", &[], 0)
    });
    let plan = plan_now(&view);
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(
        pod_decision(&plan, "n1", "web-c").1,
        Some(Reason::BlockedByPDB)
    );
}

/// A workload with no pod Ready and one broken is broken as a whole: a replacement of a
/// crash-looping pod, created a minute ago from the same template, goes at once instead of holding
/// its node for `nodeProgressDeadline`
/// (docs/decisions/0008-defects-found-by-models-and-benchmarks.md). With a pod Ready, a
/// replacement still starting is not churned.
#[test]
fn the_replacement_of_a_crash_looping_pod_is_broken_at_once() {
    let rs = replica_set("shop", "web", 3);
    let minute_ago = now() - chrono::Duration::minutes(1);
    let pods = vec![
        rs.pod("web-a", "up").broken(),
        rs.pod("web-b", "up").broken(),
        rs.pod("web-new", "n1").not_ready_since(minute_ago),
    ];
    let plan = plan_now(&draining(vec![rs.clone()], pods, policy("p")));
    assert_eq!(summary(&plan), ["Evict shop/web-new"]);
    // One Ready: the workload is not broken as a whole, and the replacement waits.
    let pods = vec![
        rs.pod("web-a", "up"),
        rs.pod("web-b", "up").broken(),
        rs.pod("web-new", "n1").not_ready_since(minute_ago),
    ];
    let plan = plan_now(&draining(vec![rs], pods, policy("p")));
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
}

/// A crash loop whose broken pods were all evicted already: its pods are replacements a minute old,
/// none Ready, and nothing on the pods says the workload was broken. Its Deployment does:
/// unavailable for an hour, it is broken as a whole, and a replacement goes at once, as `kubectl
/// drain` would evict it, instead of holding its node for `nodeProgressDeadline`. A Deployment
/// unavailable only since a minute (its pods evicted while healthy, say) is not: the replacement
/// waits, and the plan wakes when it would count as broken.
#[test]
fn replacements_of_a_crash_loop_go_once_their_deployment_is_unavailable_that_long() {
    let minute_ago = now() - chrono::Duration::minutes(1);
    let unavailable = |since| {
        let mut d = crate::testing::deployment("shop", "web", 2);
        if let Some(rollout) = d.rollout.as_mut() {
            rollout.unavailable_since = Some(since);
        }
        d
    };
    let broken = unavailable(now() - chrono::Duration::hours(1));
    let rs = broken.replica_set("web-1");
    let pods = vec![
        rs.pod("web-new-a", "up").not_ready_since(minute_ago),
        rs.pod("web-new-b", "n1").not_ready_since(minute_ago),
    ];
    let plan = plan_now(&draining(
        vec![broken, rs.clone()],
        pods.clone(),
        policy("p"),
    ));
    assert_eq!(summary(&plan), ["Evict shop/web-new-b"]);
    let restarted = unavailable(minute_ago);
    let plan = plan_now(&draining(vec![restarted, rs], pods, policy("p")));
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(
        plan.next_wake,
        Some(minute_ago + chrono::Duration::minutes(10))
    );
}

/// The room a draining node's Ready pods need elsewhere goes to them, not to replacements of broken
/// pods: a crash-looping StatefulSet's replacement is as broken as its pod, and once it has taken
/// the last room, the healthy workload's pods cannot move and the node never finishes (the messy
/// model's case 8271499481746269433,6,25,1,75,true: evicted 271 times over 12 hours). `up` has
/// 1000m free; web's two Ready pods on n1 need 1000m of it, db's broken pod 500m more.
pub(super) fn short_of_room(free_millis: u64) -> ClusterView {
    let web = replica_set("shop", "web", 4);
    let db = owner(OwnerKind::StatefulSet, "shop", "db", Some(2));
    let filler = replica_set("shop", "filler", 1);
    let pods = vec![
        web.pod("web-a", "up"),
        web.pod("web-b", "up"),
        web.pod("web-c", "n1").requests(500),
        web.pod("web-d", "n1").requests(500),
        db.pod("db-0", "up").broken(),
        db.pod("db-1", "n1").broken().requests(500),
        filler.pod("filler", "up").requests(4000 - free_millis),
    ];
    let nodes = vec![
        node("n1").marked(at(0)).admitted(at(1)).allocatable(4000),
        node("up").executor(crate::testing::NEW).allocatable(4000),
    ];
    let p = policy("p").with(|s| s.owner_health_threshold = 50);
    cluster(nodes, vec![web, db, filler], pods, vec![p])
}

#[test]
fn a_broken_pod_leaves_the_room_to_the_ready_pods_of_its_node() {
    let plan = plan_now(&short_of_room(1000));
    assert_eq!(summary(&plan), ["Evict shop/web-c", "Evict shop/web-d"]);
    let (decision, reason, message) = pod_decision(&plan, "n1", "db-1");
    assert_eq!(
        (decision, reason),
        (crate::Decision::Wait, Some(Reason::WaitingForRoom))
    );
    assert!(message.contains("1000m CPU"), "{message}");
    // With room for all three, the broken pod goes at once.
    let plan = plan_now(&short_of_room(1500));
    assert_eq!(
        summary(&plan),
        ["Evict shop/db-1", "Evict shop/web-c", "Evict shop/web-d"]
    );
}

/// Once the Ready pods of other workloads have left (terminating), the broken pod goes, whatever
/// the room: nothing else on the node needs it.
#[test]
fn a_broken_pod_goes_once_the_ready_pods_of_other_workloads_have_left() {
    let mut view = short_of_room(0);
    for pod in &mut view.pods {
        if pod.name.starts_with("web-c") || pod.name.starts_with("web-d") {
            *pod = Arc::new((**pod).clone().terminating());
        }
    }
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict shop/db-1"]);
}

/// Nor does it wait for a Ready pod of its own workload: that pod waits for the workload's health,
/// which the broken pod's move may restore (db needs 3 of 4 Ready and has 1: db-0, on n1).
#[test]
fn a_broken_pod_does_not_wait_for_the_ready_pods_of_its_own_workload() {
    let db = owner(OwnerKind::StatefulSet, "shop", "db", Some(4));
    let pods = vec![
        db.pod("db-0", "n1").requests(500),
        db.pod("db-1", "n1").broken().requests(500),
        db.pod("db-2", "up").broken(),
        db.pod("db-3", "up").broken(),
    ];
    let nodes = vec![
        node("n1").marked(at(0)).admitted(at(1)).allocatable(4000),
        node("up").executor(crate::testing::NEW).allocatable(0),
    ];
    let plan = plan_now(&cluster(nodes, vec![db], pods, vec![policy("p")]));
    assert_eq!(summary(&plan), ["Evict shop/db-1"]);
}

/// A StatefulSet creates a pod's replacement only once the pod is gone: the replacements of its
/// broken pods evicted in an earlier pass (terminating now) are not waiting to be scheduled yet,
/// but will take room all the same. With 1500m free, web's two Ready pods (1000m) and db-1's
/// terminating pod (500m) leave nothing for db-2.
#[test]
fn the_replacements_still_to_come_of_terminating_pods_count_against_the_room() {
    let mut view = short_of_room(1500);
    let db = owner(OwnerKind::StatefulSet, "shop", "db", Some(2));
    view.pods
        .push(Arc::new(db.pod("db-2", "n1").broken().requests(500)));
    for pod in &mut view.pods {
        if *pod.name == *"db-1" {
            *pod = Arc::new((**pod).clone().terminating());
        }
    }
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict shop/web-c", "Evict shop/web-d"]);
    assert_eq!(
        pod_decision(&plan, "n1", "db-2").1,
        Some(Reason::WaitingForRoom)
    );
}

/// The queue, which judges every queued node's pods against one ledger, reads a Ready pod that is
/// not yet available (its workload's `minReadySeconds`) as one that is not Ready, as admission
/// does: `b-moves`, whose only pod is such a pod of a workload at its floor, can move now and is
/// queued before `a-waits`, whose pod waits on its owner.
#[test]
fn the_queue_reads_a_pod_not_yet_available_as_not_ready() {
    let mut web = replica_set("shop", "web", 3);
    web.min_ready_seconds = 60;
    let db = replica_set("shop", "db", 3);
    let pods = vec![
        available(web.pod("web-a", "up")),
        available(web.pod("web-b", "up")),
        PodView {
            ready_changed: Some(now() - chrono::Duration::seconds(10)),
            ..web.pod("web-c", "b-moves")
        },
        db.pod("db-1", "busy"),
        db.pod("db-2", "a-waits"),
        db.pod("db-3", "up"),
    ];
    let nodes = vec![
        node("busy").marked(at(0)).admitted(at(1)),
        node("a-waits").marked(at(0)),
        node("b-moves").marked(at(0)),
        node("up").executor(crate::testing::NEW),
    ];
    let one_slot =
        policy("p").with(|s| s.max_concurrent_nodes = MaxConcurrentNodes::count(1).unwrap());
    let plan = plan_now(&cluster(nodes, vec![web, db], pods, vec![one_slot]));
    assert_eq!(summary(&plan), ["Evict shop/db-1"]);
    assert_eq!(
        queue(&plan),
        [(1, "b-moves".to_owned()), (2, "a-waits".to_owned())]
    );
}
