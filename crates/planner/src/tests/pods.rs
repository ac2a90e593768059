//! Per-pod decisions on a draining node (docs/design.md §5.3): the health rule, budgets, Jobs,
//! unmanaged pods.

use k8sm_api::{NodePhase, UnmanagedPodPolicy, keys};

use super::*;
use crate::{
    Decision, InFlightEviction, OwnerKind,
    testing::{daemon_set, node, owner, pdb, policy, replica_set, stateful_set, unmanaged_pod},
};

/// One draining node `n1` (marked at 0, admitted at 1) plus an upgraded node `up` where other pods
/// run.
pub(super) fn draining(owners: Vec<OwnerView>, pods: Vec<PodView>, p: PolicyView) -> ClusterView {
    let nodes = vec![
        node("n1").marked(at(0)).admitted(at(1)),
        node("up").executor(crate::testing::NEW),
    ];
    cluster(nodes, owners, pods, vec![p])
}

pub(super) fn unmanaged(policy_: UnmanagedPodPolicy, timeout: Option<&str>) -> PolicyView {
    policy("p").with(|s| {
        s.unmanaged_pods.policy = policy_;
        s.unmanaged_pods.timeout = timeout.map(|t| t.parse().unwrap());
    })
}

/// `ready` ready pods of `rs` on `up`, named `up-<i>`.
pub(super) fn elsewhere(rs: &OwnerView, ready: usize) -> Vec<PodView> {
    (0..ready)
        .map(|i| rs.pod(&format!("{}-up-{i}", rs.name), "up"))
        .collect()
}

#[test]
fn evicts_a_pod_of_a_healthy_owner_with_the_sla_evidence() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 9);
    pods.push(rs.pod("web-1", "n1"));
    let plan = plan_now(&draining(vec![rs], pods, policy("p")));
    assert_eq!(summary(&plan), ["Evict shop/web-1"]);
    let (_, eviction) = plan.evictions().next().unwrap();
    assert_eq!(
        (
            eviction.ready_before,
            eviction.ready_after,
            eviction.desired,
            eviction.needed,
            eviction.threshold
        ),
        (10, 9, 10, 9, 90)
    );
    assert!(eviction.use_eviction_api);
    assert_eq!(plan.actions[0].reason, Reason::Evicted);
    assert_eq!(
        plan.actions[0].message,
        "shop/web-1 on n1: evict: workload ReplicaSet web ready 10/10 → 9 (threshold 90% needs 9)"
    );
}

#[test]
fn waits_while_the_owner_is_too_unhealthy_to_lose_a_pod() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 8);
    pods.push(rs.pod("web-down", "up").not_ready());
    pods.push(rs.pod("web-1", "n1"));
    let plan = plan_now(&draining(vec![rs], pods, policy("p")));
    assert!(summary(&plan).is_empty());
    let (decision, reason, message) = pod_decision(&plan, "n1", "web-1");
    assert_eq!(
        (decision, reason),
        (Decision::Wait, Some(Reason::WaitingForOwner))
    );
    assert_eq!(
        message,
        "wait: workload ReplicaSet web 9/10 ready, needs 9 (threshold 90%)"
    );
    assert_eq!(
        phase(&plan, "n1"),
        NodePhase::Draining,
        "an owner recovers by itself: not Blocked"
    );
}

#[test]
fn a_small_owner_moves_one_pod_at_a_time() {
    let sts = stateful_set("db", "pg", 3);
    let pods = (0..3).map(|i| sts.pod(&format!("pg-{i}"), "n1")).collect();
    let plan = plan_now(&draining(vec![sts], pods, policy("p")));
    assert_eq!(summary(&plan), ["Evict db/pg-0"]);
    let (_, eviction) = plan.evictions().next().unwrap();
    assert_eq!(
        (eviction.ready_before, eviction.ready_after, eviction.needed),
        (3, 2, 3)
    );
    let (_, _, message) = pod_decision(&plan, "n1", "pg-1");
    assert_eq!(
        message,
        "wait: workload StatefulSet pg 2/3 ready, 1 terminating or not replaced, needs 3 (threshold 90%)"
    );
}

#[test]
fn evictions_planned_in_the_same_pass_count_across_nodes() {
    // 20 replicas, threshold 90%: 18 must stay ready, so one pass evicts exactly two, wherever they
    // run.
    let rs = replica_set("shop", "web", 20);
    let nodes = (1..=4)
        .map(|i| node(&format!("n{i}")).marked(at(0)).admitted(at(i)))
        .collect();
    let pods = (0..20)
        .map(|i| rs.pod(&format!("w{i:02}"), &format!("n{}", i % 4 + 1)))
        .collect();
    let p = policy("p")
        .with(|s| s.max_concurrent_nodes = k8sm_api::MaxConcurrentNodes::count(4).unwrap());
    let plan = plan_now(&cluster(nodes, vec![rs], pods, vec![p]));
    let evictions: Vec<_> = plan
        .evictions()
        .map(|(_, e)| (e.ready_before, e.ready_after))
        .collect();
    assert_eq!(evictions, [(20, 19), (19, 18)]);
}

/// A pod stuck terminating (a finalizer, a dead kubelet) counts for nothing, as the disruption
/// controller counts it: its ReplicaSet replaced it, and it freezes none of the workload's pods on
/// other nodes.
#[test]
fn terminating_pods_of_the_owner_count_as_gone() {
    let rs = replica_set("shop", "web", 3);
    let pods = vec![
        rs.pod("old", "up").terminating(),
        rs.pod("a", "up"),
        rs.pod("b", "up"),
        rs.pod("c", "n1"),
    ];
    let plan = plan_now(&draining(vec![rs.clone()], pods, policy("p")));
    assert_eq!(summary(&plan), ["Evict shop/c"], "3/3 Ready: one may go");
    // Not replaced yet: 2/3 Ready, and the terminating pod does not count as Ready.
    let pods = vec![
        rs.pod("old", "up").terminating(),
        rs.pod("a", "up"),
        rs.pod("c", "n1"),
    ];
    assert!(summary(&plan_now(&draining(vec![rs], pods, policy("p")))).is_empty());
}

#[test]
fn an_eviction_in_flight_counts_even_when_its_pod_left_the_cache() {
    let rs = replica_set("shop", "web", 3);
    let mut view = draining(
        vec![rs.clone()],
        vec![rs.pod("a", "up"), rs.pod("b", "up"), rs.pod("c", "n1")],
        policy("p"),
    );
    let fully_ready = plan_now(&view);
    assert_eq!(summary(&fully_ready), ["Evict shop/c"]);
    view.in_flight.push(InFlightEviction {
        unanswered: false,
        pod_uid: "shop/evicted-earlier".into(),
        owner_uid: Some(rs.uid.clone()),
        at: at(59),
    });
    assert!(summary(&plan_now(&view)).is_empty());
}

#[test]
fn a_pod_already_terminating_or_in_flight_is_never_evicted_again() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 10);
    pods.push(rs.pod("going", "n1").terminating());
    pods.push(rs.pod("sent", "n1"));
    let mut view = draining(vec![rs], pods, policy("p"));
    view.in_flight.push(InFlightEviction {
        unanswered: false,
        pod_uid: "shop/sent".into(),
        owner_uid: None,
        at: at(59),
    });
    let plan = plan_now(&view);
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    for pod in ["going", "sent"] {
        assert_eq!(
            pod_decision(&plan, "n1", pod).1,
            Some(Reason::WaitingForTermination)
        );
    }
    assert_eq!(
        phase(&plan, "n1"),
        NodePhase::Draining,
        "no kamikaze before they are gone"
    );
}

#[test]
fn a_pod_of_an_owner_scaled_to_zero_waits_for_its_controller() {
    let rs = replica_set("shop", "old-rs", 0);
    let plan = plan_now(&draining(
        vec![rs.clone()],
        vec![rs.pod("leftover", "n1")],
        policy("p"),
    ));
    assert!(summary(&plan).is_empty());
    let (_, reason, message) = pod_decision(&plan, "n1", "leftover");
    assert_eq!(reason, Some(Reason::WaitingForOwner));
    assert!(message.contains("scaled to 0"), "{message}");
}

#[test]
fn a_pod_whose_owner_is_not_in_the_view_waits_for_the_garbage_collector() {
    // Its ReplicaSet is absent from the view: deleted (the garbage collector deletes or orphans the
    // pod soon), or so new that k8sm's cache has not seen it. Whatever the unmanaged-pod
    // policy, it is neither deleted (that could take a live owner below its threshold) nor
    // handed to the operator: it waits.
    let rs = replica_set("shop", "web", 3);
    let job = crate::testing::job("shop", "batch");
    let pods = vec![rs.pod("orphan", "n1"), job.pod("batch-1", "n1")];
    for policy_ in [
        UnmanagedPodPolicy::Delete,
        UnmanagedPodPolicy::Never,
        UnmanagedPodPolicy::DeleteAfterTimeout,
    ] {
        let timeout = (policy_ == UnmanagedPodPolicy::DeleteAfterTimeout).then_some("1m");
        let plan = plan_now(&draining(vec![], pods.clone(), unmanaged(policy_, timeout)));
        assert!(
            summary(&plan).is_empty(),
            "{policy_:?}: {:?}",
            summary(&plan)
        );
        assert_eq!(phase(&plan, "n1"), NodePhase::Draining, "{policy_:?}");
        for (pod, owner) in [("orphan", "ReplicaSet/web"), ("batch-1", "Job/batch")] {
            let (decision, reason, message) = pod_decision(&plan, "n1", pod);
            assert_eq!(
                (decision, reason, message),
                (
                    Decision::Wait,
                    Some(Reason::WaitingForOwner),
                    format!(
                        "wait: its controller {owner} is not in the cluster (deleted, or not seen yet): the garbage \
                         collector deletes or orphans the pod; if it stays, delete it by hand"
                    )
                ),
                "{policy_:?}"
            );
        }
    }
}

#[test]
fn a_pod_of_another_controller_kind_is_evicted_never_deleted_whatever_the_policy_says() {
    // k8sm does not watch VirtualMachineInstances: not finding one in the view does not mean it is
    // gone.
    let custom = owner(
        OwnerKind::Other("VirtualMachineInstance".into()),
        "vm",
        "box",
        None,
    );
    for respect_budgets in [true, false] {
        let p = unmanaged(UnmanagedPodPolicy::Delete, None)
            .with(|s| s.respect_pod_disruption_budgets = respect_budgets);
        let plan = plan_now(&draining(vec![], vec![custom.pod("virt", "n1")], p));
        assert_eq!(summary(&plan), ["Evict vm/virt"]);
        let (_, eviction) = plan.evictions().next().unwrap();
        assert!(
            eviction.use_eviction_api,
            "budgets apply to such pods always"
        );
        assert!(eviction.size_inferred);
        assert_eq!(
            plan.actions[0].message,
            "vm/virt on n1: evict: controller VirtualMachineInstance box (1 pods seen) ready 1/1 → 0 (threshold 90% needs 1)"
        );
        let node = node_plan(&plan, "n1");
        assert_eq!(node.pods[0].class, crate::PodClass::OtherController);
        let owner = node.pods[0].owner.as_ref().expect("the owner is reported");
        assert_eq!(owner.to_string(), "VirtualMachineInstance/box");
    }
}

#[test]
fn a_pod_whose_owner_is_being_deleted_is_unmanaged_and_says_so() {
    // Still in the view with a deletion timestamp (a finalizer holds it): it replaces nothing any
    // more, so its health is not judged, whatever its replicas say.
    let mut rs = replica_set("shop", "web", 3);
    let pods = vec![rs.pod("web-1", "n1"), rs.pod("web-2", "n1")];
    rs.exists = false;
    let never = plan_now(&draining(
        vec![rs.clone()],
        pods.clone(),
        unmanaged(UnmanagedPodPolicy::Never, None),
    ));
    assert_eq!(
        summary(&never),
        ["Stall n1 +uncordon"],
        "handed back, nothing deleted"
    );
    let (decision, reason, message) = pod_decision(&never, "n1", "web-1");
    assert_eq!(
        (decision, reason, message.as_str()),
        (
            Decision::Block,
            Some(Reason::BlockedUnmanagedPod),
            "unmanaged pod: its controller ReplicaSet/web is being deleted: policy Never; delete it, or `kubectl k8sm force n1`"
        )
    );
    let delete = plan_now(&draining(
        vec![rs],
        pods,
        unmanaged(UnmanagedPodPolicy::Delete, None),
    ));
    assert_eq!(summary(&delete), ["Delete shop/web-1", "Delete shop/web-2"]);
    assert_eq!(
        delete.actions[0].message,
        "shop/web-1 on n1: delete unmanaged pod: its controller ReplicaSet/web is being deleted (by eviction)"
    );
}

#[test]
fn pods_of_another_controller_kind_go_one_at_a_time_until_replaced() {
    // A Kafka-like set of three brokers: its size is taken from the pods k8sm sees.
    let kafka = owner(
        OwnerKind::Other("KafkaNodePool".into()),
        "kafka",
        "brokers",
        None,
    );
    let pods = vec![
        kafka.pod("broker-0", "n1"),
        kafka.pod("broker-1", "n1"),
        kafka.pod("broker-2", "up"),
    ];
    let view = draining(vec![], pods, policy("p"));
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict kafka/broker-0"]);
    let (decision, reason, message) = pod_decision(&plan, "n1", "broker-1");
    assert_eq!(
        (decision, reason),
        (Decision::Wait, Some(Reason::WaitingForOwner))
    );
    assert_eq!(
        message,
        "wait: controller KafkaNodePool brokers (3 pods seen) 2/3 ready, 1 terminating or not replaced, needs 3 (threshold 90%)"
    );
    // The evicted broker is gone and not replaced yet: its eviction in flight still counts, so the
    // controller is not taken for a healthy set of two.
    let mut gone = view.clone();
    gone.pods.retain(|p| &*p.name != "broker-0");
    gone.in_flight.push(InFlightEviction {
        unanswered: false,
        pod_uid: "kafka/broker-0".into(),
        owner_uid: Some(kafka.unseen_key()),
        at: at(59),
    });
    assert!(
        summary(&plan_now(&gone)).is_empty(),
        "{:?}",
        summary(&plan_now(&gone))
    );
    // Replaced (the controller dropped the entry once it saw three brokers again) and Ready: the
    // next one goes.
    let mut replaced = view.clone();
    replaced.pods.retain(|p| &*p.name != "broker-0");
    replaced.pods.push(kafka.pod("broker-0b", "up").into());
    assert_eq!(summary(&plan_now(&replaced)), ["Evict kafka/broker-1"]);
}

#[test]
fn a_budget_that_allows_no_disruption_blocks_with_its_name() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 9);
    pods.push(rs.pod("web-1", "n1").label("app", "web"));
    let mut view = draining(vec![rs], pods, policy("p"));
    view.pdbs.push(pdb("shop", "web-pdb", &[("app", "web")], 0));
    let plan = plan_now(&view);
    assert!(summary(&plan).is_empty());
    let (decision, reason, message) = pod_decision(&plan, "n1", "web-1");
    assert_eq!(
        (decision, reason),
        (Decision::Wait, Some(Reason::BlockedByPDB))
    );
    assert_eq!(
        message,
        "wait: PodDisruptionBudget shop/web-pdb allows no disruption now"
    );
    assert_eq!(
        phase(&plan, "n1"),
        NodePhase::Draining,
        "budgets recover by themselves"
    );
}

#[test]
fn evictions_planned_in_a_pass_are_counted_against_the_budget() {
    let rs = replica_set("shop", "web", 20);
    let mut pods = elsewhere(&rs, 17);
    pods.extend((1..=3).map(|i| rs.pod(&format!("web-{i}"), "n1").label("app", "web")));
    let mut view = draining(vec![rs], pods, policy("p"));
    view.pdbs.push(pdb("shop", "web-pdb", &[("app", "web")], 1));
    view.pdbs
        .push(pdb("other-ns", "web-pdb", &[("app", "web")], 0)); // another namespace: irrelevant
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict shop/web-1"]);
    assert_eq!(
        pod_decision(&plan, "n1", "web-2").1,
        Some(Reason::BlockedByPDB)
    );
}

/// The controller's conversion shares one copy of equal label sets across namespaces: a budget of
/// one namespace must still cover only that namespace's pods, whichever pod's budgets are looked up
/// first in the pass.
#[test]
fn pods_sharing_labels_across_namespaces_are_covered_by_their_own_namespaces_budgets() {
    let shop = replica_set("shop", "web", 10);
    let lab = replica_set("lab", "web", 10);
    let mut pods = elsewhere(&shop, 9);
    pods.extend(elsewhere(&lab, 9));
    pods.push(shop.pod("web-1", "n1").label("app", "web"));
    pods.push(lab.pod("web-1", "n1").label("app", "web"));
    let mut view = draining(vec![shop, lab], pods, policy("p"));
    let one_copy = std::sync::Arc::new([("app".to_owned(), "web".to_owned())].into());
    for pod in &mut view.pods {
        if *pod.labels == *one_copy {
            std::sync::Arc::make_mut(pod).labels = std::sync::Arc::clone(&one_copy);
        }
    }
    view.pdbs.push(pdb("shop", "web-pdb", &[("app", "web")], 0));
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict lab/web-1"]);
    let shop_pod = node_plan(&plan, "n1")
        .pods
        .iter()
        .find(|p| p.pod.namespace() == "shop")
        .expect("shop/web-1 is reported");
    assert_eq!(
        shop_pod.reason,
        Some(Reason::BlockedByPDB),
        "shop/web-1 waits on its namespace's budget"
    );
}

/// Pods that wait for the same thing share one message, written once per pass; a workload in the
/// same state says its own name.
#[test]
fn pods_waiting_on_one_workload_share_its_message() {
    let web = replica_set("shop", "web", 10);
    let api = replica_set("shop", "api", 10);
    let mut pods = elsewhere(&web, 7);
    pods.extend(elsewhere(&api, 7));
    for i in 1..=3 {
        pods.push(web.pod(&format!("web-{i}"), "n1"));
        pods.push(api.pod(&format!("api-{i}"), "n1"));
    }
    let plan = plan_now(&draining(vec![web, api], pods, policy("p")));
    assert_eq!(summary(&plan), ["Evict shop/api-1", "Evict shop/web-1"]);
    let message = |pod: &str| {
        let p = node_plan(&plan, "n1")
            .pods
            .iter()
            .find(|p| *p.pod.name() == *pod);
        std::sync::Arc::clone(&p.expect("reported").message)
    };
    assert_eq!(
        &*message("web-2"),
        "wait: workload ReplicaSet web 9/10 ready, 1 terminating or not replaced, needs 9 (threshold 90%)"
    );
    assert!(std::sync::Arc::ptr_eq(&message("web-2"), &message("web-3")));
    assert_eq!(
        &*message("api-3"),
        "wait: workload ReplicaSet api 9/10 ready, 1 terminating or not replaced, needs 9 (threshold 90%)"
    );
}

#[test]
fn budgets_are_ignored_when_the_policy_says_so() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 9);
    pods.push(rs.pod("web-1", "n1").label("app", "web"));
    let mut view = draining(
        vec![rs],
        pods,
        policy("p").with(|s| s.respect_pod_disruption_budgets = false),
    );
    view.pdbs.push(pdb("shop", "web-pdb", &[("app", "web")], 0));
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict shop/web-1"]);
    assert!(
        !plan.evictions().next().unwrap().1.use_eviction_api,
        "deleted, not evicted"
    );
}

#[test]
fn a_pod_covered_by_two_budgets_needs_an_operator() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 9);
    pods.push(rs.pod("web-1", "n1").label("app", "web"));
    let mut view = draining(vec![rs], pods, policy("p"));
    view.pdbs.push(pdb("shop", "a", &[("app", "web")], 5));
    view.pdbs.push(pdb("shop", "b", &[], 5)); // empty selector: the whole namespace
    let plan = plan_now(&view);
    let (decision, reason, message) = pod_decision(&plan, "n1", "web-1");
    assert_eq!(
        (decision, reason),
        (Decision::Block, Some(Reason::BlockedByPDB))
    );
    assert!(message.contains("shop/a, shop/b"), "{message}");
    assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
}

#[test]
fn a_budget_with_a_null_selector_covers_nothing() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 9);
    pods.push(rs.pod("web-1", "n1"));
    let mut view = draining(vec![rs], pods, policy("p"));
    view.pdbs.push(crate::PdbView {
        namespace: "shop".into(),
        name: "null".into(),
        selector: None,
        disruptions_allowed: 0,
        ..Default::default()
    });
    assert_eq!(summary(&plan_now(&view)), ["Evict shop/web-1"]);
}

#[test]
fn an_opted_out_pod_blocks_its_node() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 9);
    pods.push(
        rs.pod("precious", "n1")
            .annotation(keys::KARPENTER_DO_NOT_DISRUPT_ANNOTATION, "true"),
    );
    let plan = plan_now(&draining(vec![rs], pods, policy("p")));
    // Nothing evicted; the node is handed back (docs/design.md §5.7).
    assert_eq!(summary(&plan), ["Stall n1 +uncordon"]);
    assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
    let (decision, reason, message) = pod_decision(&plan, "n1", "precious");
    assert_eq!(
        (decision, reason),
        (Decision::Block, Some(Reason::BlockedOptOut))
    );
    assert!(
        message.contains("force n1 --include-opted-out"),
        "{message}"
    );
}

#[test]
fn a_node_with_opted_out_and_movable_pods_drains_what_it_can_first() {
    let rs = replica_set("shop", "web", 1);
    let pods = vec![
        rs.pod("movable", "n1"),
        unmanaged_pod("ops", "precious", "n1").label(keys::UPGRADE_OPT_OUT_LABEL, "true"),
    ];
    let plan = plan_now(&draining(vec![rs], pods, policy("p")));
    assert_eq!(summary(&plan), ["Evict shop/movable"]);
    assert_eq!(phase(&plan, "n1"), NodePhase::Draining);
}

#[test]
fn daemon_set_and_mirror_pods_are_ignored() {
    let ds = daemon_set("kube-system", "agent");
    let pods = vec![
        ds.pod("agent-1", "n1"),
        unmanaged_pod("kube-system", "etcd-n1", "n1").mirror(),
    ];
    let plan = plan_now(&draining(vec![ds], pods, policy("p")));
    assert_eq!(summary(&plan), ["Kamikaze n1"]);
    assert_eq!(node_plan(&plan, "n1").pods_left, 0);
    assert!(
        node_plan(&plan, "n1")
            .pods
            .iter()
            .all(|p| p.decision == Decision::Ignore)
    );
}

#[test]
fn the_threshold_of_the_pods_node_policy_applies() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 8);
    pods.push(rs.pod("web-1", "n1"));
    // 9/10 ready: 90% needs 9 after the eviction (wait), 80% needs 8 (evict).
    let strict = plan_now(&draining(vec![rs.clone()], pods.clone(), policy("p")));
    assert!(summary(&strict).is_empty());
    let lax = plan_now(&draining(
        vec![rs],
        pods,
        policy("p").with(|s| s.owner_health_threshold = 80),
    ));
    assert_eq!(summary(&lax), ["Evict shop/web-1"]);
}
