//! Workloads judged at the top level (docs/design.md §2, §5.3): Deployments over all their
//! ReplicaSets, rollouts stuck or paused, ReplicationControllers, and pods that are not Ready.

use super::*;
use crate::{
    Decision,
    testing::{NEW, deployment, node, policy, replica_set, replication_controller},
};

/// `n1` draining, `up` upgraded, the rest as given.
fn draining(owners: Vec<OwnerView>, pods: Vec<PodView>) -> ClusterView {
    let nodes = vec![
        node("n1").marked(at(0)).admitted(at(1)),
        node("up").executor(NEW),
    ];
    cluster(nodes, owners, pods, vec![policy("p")])
}

#[test]
fn a_deployment_stuck_mid_rollout_loses_no_pod() {
    // Deployment of 4: the old ReplicaSet has 3 Ready, the new one 2 pods that cannot start
    // (unscheduled). Its bound at threshold 90 is min(ceil(3.6), 3) = 3, and it has 3 Ready:
    // nothing may go. Judged alone, the old ReplicaSet (3 of 3) looked fully ready.
    let web = deployment("shop", "web", 4);
    let (old, new) = (web.replica_set("web-old"), web.replica_set("web-new"));
    let mut pending = new.pod("web-new-1", "n1").not_ready();
    pending.node_name = None;
    let mut pending_2 = new.pod("web-new-2", "n1").not_ready();
    pending_2.node_name = None;
    let pods = vec![
        old.pod("web-old-1", "n1"),
        old.pod("web-old-2", "up"),
        old.pod("web-old-3", "up"),
        pending,
        pending_2,
    ];
    let plan = plan_now(&draining(vec![web, old, new], pods));
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    let (decision, reason, message) = pod_decision(&plan, "n1", "web-old-1");
    assert_eq!(
        (decision, reason),
        (Decision::Wait, Some(Reason::WaitingForOwner))
    );
    assert_eq!(
        message,
        "wait: workload Deployment web 3/4 ready, needs 4 (threshold 90%)"
    );
    let owner = node_plan(&plan, "n1").pods[0].owner.clone().unwrap();
    assert_eq!(owner.to_string(), "Deployment/web");
}

/// A Deployment whose controller is replacing pods (a rollout under way) loses no Ready pod to
/// k8sm, however much room its count leaves: its controller deletes old pods as new ones become
/// available, reacting to the same readiness changes, and an eviction on top could take it below
/// its floor before either saw the other's deletion
/// (docs/decisions/0008-defects-found-by-models-and-benchmarks.md). A pod that is not
/// Ready still goes: moving it costs no readiness. The same Deployment once the rollout is complete
/// moves what its bound allows.
#[test]
fn a_deployment_rolling_out_keeps_its_ready_pods_until_the_rollout_is_complete() {
    let mut web = deployment("shop", "web", 4);
    web.replacing = true;
    let (old, new) = (web.replica_set("web-old"), web.replica_set("web-new"));
    // 5 Ready of 4 desired (a surge pod): by the count alone two may go at threshold 50.
    let pods = vec![
        old.pod("web-old-1", "n1"),
        old.pod("web-old-2", "n1"),
        old.pod("web-old-3", "up"),
        new.pod("web-new-1", "up"),
        new.pod("web-new-2", "up"),
        new.pod("web-new-3", "n1").not_ready(),
    ];
    let at_half = |owners: Vec<OwnerView>| {
        let mut view = draining(owners, pods.clone());
        view.policies[0].spec.owner_health_threshold = 50;
        view
    };
    let plan = plan_now(&at_half(vec![web.clone(), old.clone(), new.clone()]));
    assert_eq!(summary(&plan), ["Evict shop/web-new-3"]);
    for ready in ["web-old-1", "web-old-2"] {
        let (decision, reason, message) = pod_decision(&plan, "n1", ready);
        assert_eq!(
            (decision, reason),
            (Decision::Wait, Some(Reason::WaitingForOwner)),
            "{ready}"
        );
        assert_eq!(
            message,
            "wait: Deployment web is rolling out (its controller is replacing pods itself); goes once the \
             rollout is complete"
        );
    }
    web.replacing = false;
    let plan = plan_now(&at_half(vec![web, old, new]));
    assert_eq!(
        summary(&plan),
        [
            "Evict shop/web-new-3",
            "Evict shop/web-old-1",
            "Evict shop/web-old-2"
        ]
    );
}

/// A rollout is in progress while its newest ReplicaSet starts pods or sees them become Ready. One
/// stuck on a bad image made neither for longer than its `progressDeadlineSeconds`: it replaces
/// nothing any more, and its pods move within the headroom of its Ready count, although its
/// Progressing condition may say it progresses (the Deployment controller counts a replacement of
/// an old pod becoming Ready as progress, for `progressDeadlineSeconds` more). Control: a new pod
/// started within the deadline is a rollout in progress, and the plan wakes when its deadline
/// passes.
#[test]
fn a_rollout_whose_newest_replica_set_made_no_progress_within_its_deadline_is_stuck() {
    let mut web = deployment("shop", "web", 4);
    web.replacing = true;
    let mut old = web.replica_set("web-old");
    old.revision = 1;
    let mut new = web.replica_set("web-new");
    new.revision = 2;
    let with_new_pod_started = |started: DateTime<Utc>| {
        let mut stuck = new.pod("web-new-1", "up").not_ready();
        stuck.created = Some(started);
        let pods = vec![
            old.pod("web-old-1", "n1"),
            old.pod("web-old-2", "n1"),
            old.pod("web-old-3", "up"),
            old.pod("web-old-4", "up"),
            stuck,
        ];
        plan_now(&draining(vec![web.clone(), old.clone(), new.clone()], pods))
    };
    // 4 Ready, bound 3 at threshold 90: one may go, once the rollout is stuck.
    let stuck = with_new_pod_started(now() - chrono::Duration::seconds(601));
    assert_eq!(summary(&stuck), ["Evict shop/web-old-1"]);
    let started = now() - chrono::Duration::seconds(300);
    let rolling = with_new_pod_started(started);
    assert!(summary(&rolling).is_empty(), "{:?}", summary(&rolling));
    let (_, reason, message) = pod_decision(&rolling, "n1", "web-old-1");
    assert_eq!(reason, Some(Reason::WaitingForOwner));
    assert!(message.contains("is rolling out"), "{message}");
    assert!(
        rolling
            .next_wake
            .is_some_and(|w| w <= started + chrono::Duration::seconds(600)),
        "{:?}",
        rolling.next_wake
    );
}

/// Admission judges a free slot by the same rule: a node whose only pods are Ready pods of a
/// Deployment rolling out cannot move anything now, so the slot goes to a node that can, although
/// by pod count the rolling one comes first (and a rolling Deployment's node that stalled keeps
/// resting instead of being admitted again at once).
#[test]
fn admission_counts_the_ready_pods_of_a_rolling_deployment_as_unable_to_move() {
    let mut web = deployment("shop", "web", 4);
    web.replacing = true;
    let (old, new) = (web.replica_set("web-old"), web.replica_set("web-new"));
    let api = replica_set("shop", "api", 4);
    let pods = vec![
        old.pod("web-old-1", "a-rolling"),
        old.pod("web-old-2", "up"),
        new.pod("web-new-1", "up"),
        new.pod("web-new-2", "up"),
        new.pod("web-new-3", "up"),
        api.pod("api-1", "b-other"),
        api.pod("api-2", "b-other"),
        api.pod("api-3", "up"),
        api.pod("api-4", "up"),
    ];
    let nodes = vec![
        node("a-rolling").marked(at(0)),
        node("b-other").marked(at(0)),
        node("up").executor(NEW),
    ];
    let one_slot = policy("p").with(|s| {
        s.max_concurrent_nodes = k8sm_api::MaxConcurrentNodes::count(1).unwrap();
        s.owner_health_threshold = 50;
    });
    let plan = plan_now(&cluster(
        nodes,
        vec![web, old, new, api],
        pods,
        vec![one_slot],
    ));
    assert_eq!(
        admitted(&plan),
        std::collections::BTreeSet::from(["b-other".to_owned()])
    );
}

#[test]
fn a_paused_two_plus_two_rollout_loses_one_pod_at_a_time() {
    let web = deployment("shop", "web", 4);
    let (old, new) = (web.replica_set("web-old"), web.replica_set("web-new"));
    let pods = vec![
        old.pod("web-old-1", "n1"),
        old.pod("web-old-2", "n1"),
        new.pod("web-new-1", "n1"),
        new.pod("web-new-2", "n1"),
    ];
    let view = draining(vec![web, old, new], pods);
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict shop/web-new-1"]);
    let (_, eviction) = plan.evictions().next().unwrap();
    assert_eq!(
        (
            eviction.owner.to_string(),
            eviction.ready_before,
            eviction.ready_after,
            eviction.desired
        ),
        ("Deployment/web".to_owned(), 4, 3, 4)
    );
}

#[test]
fn a_deployment_with_surge_room_moves_what_its_bound_allows() {
    // 10 desired, 11 Ready across two ReplicaSets (maxSurge): two may go at threshold 90 (11 - 2 =
    // 9).
    let web = deployment("shop", "web", 10);
    let (old, new) = (web.replica_set("web-old"), web.replica_set("web-new"));
    let mut pods: Vec<PodView> = (0..6).map(|i| old.pod(&format!("o{i}"), "up")).collect();
    pods.extend((0..3).map(|i| new.pod(&format!("n{i}"), "up")));
    pods.push(old.pod("o-here", "n1"));
    pods.push(new.pod("n-here", "n1"));
    pods.push(new.pod("n-here-2", "n1"));
    let plan = plan_now(&draining(vec![web, old, new], pods));
    assert_eq!(summary(&plan).len(), 3, "{:?}", summary(&plan));
    let after: Vec<u32> = plan.evictions().map(|(_, e)| e.ready_after).collect();
    assert_eq!(after, [11, 10, 9]);
}

#[test]
fn a_replica_set_whose_deployment_is_unseen_waits() {
    let web = deployment("shop", "web", 2);
    let rs = web.replica_set("web-1");
    let plan = plan_now(&draining(vec![rs.clone()], vec![rs.pod("p", "n1")]));
    assert!(summary(&plan).is_empty());
    let (decision, _, message) = pod_decision(&plan, "n1", "p");
    assert_eq!(decision, Decision::Wait);
    assert!(
        message.contains("Deployment/web is not in the cluster"),
        "{message}"
    );
}

#[test]
fn replication_controllers_are_workloads() {
    let rc = replication_controller("legacy", "frontend", 3);
    let pods = vec![rc.pod("f1", "n1"), rc.pod("f2", "n1"), rc.pod("f3", "up")];
    let plan = plan_now(&draining(vec![rc], pods));
    assert_eq!(summary(&plan), ["Evict legacy/f1"]);
    let (decision, reason, _) = pod_decision(&plan, "n1", "f2");
    assert_eq!(
        (decision, reason),
        (Decision::Wait, Some(Reason::WaitingForOwner))
    );
}

#[test]
fn a_pod_that_is_not_ready_moves_when_it_is_the_only_one_missing() {
    // 10 desired, 9 Ready elsewhere, the 10th crash-looping here: at threshold 90 a Ready pod could
    // never go (9 - 1 < 9, not fully ready), but moving this one costs nothing and keeps the
    // node from stalling.
    let rs = replica_set("shop", "web", 10);
    let mut pods: Vec<PodView> = (0..9).map(|i| rs.pod(&format!("w{i}"), "up")).collect();
    pods.push(rs.pod("crashing", "n1").not_ready());
    let plan = plan_now(&draining(vec![rs.clone()], pods.clone()));
    assert_eq!(summary(&plan), ["Evict shop/crashing"]);
    let (_, eviction) = plan.evictions().next().unwrap();
    assert_eq!((eviction.ready_before, eviction.ready_after), (9, 9));
    assert!(
        plan.actions[0].message.contains("pod not Ready"),
        "{}",
        plan.actions[0].message
    );

    // With another replica missing too, the workload is below its floor: the pod may be about to
    // recover.
    pods[0] = pods[0].clone().not_ready();
    let plan = plan_now(&draining(vec![rs], pods));
    assert!(summary(&plan).is_empty());
    let (_, _, message) = pod_decision(&plan, "n1", "crashing");
    assert!(message.contains("below its floor 9"), "{message}");
}

#[test]
fn a_single_replica_whose_pod_is_not_ready_moves() {
    let rs = replica_set("shop", "solo", 1);
    let plan = plan_now(&draining(
        vec![rs.clone()],
        vec![rs.pod("solo", "n1").not_ready()],
    ));
    assert_eq!(summary(&plan), ["Evict shop/solo"]);
}

#[test]
fn workloads_of_two_nodes_share_one_ledger() {
    // Two draining nodes each hold a pod of the same Deployment (old and new ReplicaSet): only one
    // goes.
    let web = deployment("shop", "web", 3);
    let (old, new) = (web.replica_set("web-old"), web.replica_set("web-new"));
    let nodes = vec![
        node("n1").marked(at(0)).admitted(at(1)),
        node("n2").marked(at(0)).admitted(at(1)),
        node("up").executor(NEW),
    ];
    let pods = vec![old.pod("a", "n1"), new.pod("b", "n2"), new.pod("c", "up")];
    let p = policy("p")
        .with(|s| s.max_concurrent_nodes = k8sm_api::MaxConcurrentNodes::count(2).unwrap());
    let plan = plan_now(&cluster(nodes, vec![web, old, new], pods, vec![p]));
    assert_eq!(summary(&plan), ["Evict shop/a"]);
}

#[test]
fn a_shared_wait_message_quotes_its_own_policys_deadline() {
    // One workload below its floor, with a pod not Ready on a draining node of each of two
    // policies that share the threshold but not `nodeProgressDeadline`: each pod's wait quotes
    // the deadline that decides when it goes, its own policy's.
    let rs = replica_set("shop", "web", 10);
    let mut pods: Vec<PodView> = (0..7).map(|i| rs.pod(&format!("w{i}"), "up")).collect();
    pods.push(rs.pod("a", "a1").not_ready());
    pods.push(rs.pod("b", "b1").not_ready());
    let nodes = vec![
        node("a1").label("pool", "a").marked(at(0)).admitted(at(1)),
        node("b1").label("pool", "b").marked(at(0)).admitted(at(1)),
        node("up").executor(NEW),
    ];
    let deadline = |text: &str| text.parse().expect("a valid duration");
    let policies = vec![
        policy("pa")
            .selecting("pool", "a")
            .with(|s| s.node_progress_deadline = deadline("10m")),
        policy("pb")
            .selecting("pool", "b")
            .with(|s| s.node_progress_deadline = deadline("25m")),
    ];
    let plan = plan_now(&cluster(nodes, vec![rs], pods, policies));
    for (node, pod, quoted) in [("a1", "a", "10m"), ("b1", "b", "25m")] {
        let (decision, _, message) = pod_decision(&plan, node, pod);
        assert_eq!(decision, Decision::Wait, "{message}");
        assert!(message.contains("below its floor"), "{message}");
        assert!(
            message.ends_with(&format!("nodeProgressDeadline {quoted}")),
            "{node}: {message}"
        );
    }
}
