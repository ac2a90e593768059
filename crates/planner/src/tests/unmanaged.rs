//! Finished, Job and unmanaged pods on a draining node (docs/design.md §5.3).

use k8sm_api::{NodePhase, UnmanagedPodPolicy};

use super::{
    pods::{draining, elsewhere, unmanaged},
    *,
};
use crate::{
    Decision, PodPhase,
    testing::{job, pdb, policy, replica_set, unmanaged_pod},
};

#[test]
fn finished_pods_are_deleted_and_do_not_hold_the_node() {
    let jb = job("batch", "report");
    let pods = vec![
        jb.pod("done", "n1").phase(PodPhase::Succeeded),
        unmanaged_pod("ops", "crashed", "n1").phase(PodPhase::Failed),
    ];
    let plan = plan_now(&draining(vec![jb], pods, policy("p")));
    assert_eq!(
        summary(&plan),
        ["Delete batch/done", "Delete ops/crashed", "Kamikaze n1"]
    );
    assert!(
        plan.actions[..2]
            .iter()
            .all(|a| a.reason == Reason::DeletedFinishedPod)
    );
}

#[test]
fn a_job_pod_waits_for_completion() {
    let jb = job("batch", "report");
    let plan = plan_now(&draining(
        vec![jb.clone()],
        vec![jb.pod("r", "n1")],
        policy("p"),
    ));
    assert!(summary(&plan).is_empty());
    let (decision, reason, _) = pod_decision(&plan, "n1", "r");
    assert_eq!(
        (decision, reason),
        (Decision::Wait, Some(Reason::WaitingForJob))
    );
    assert_eq!(plan.next_wake, None, "no timeout: completion is an event");
}

/// [`k8sm_api::CLOCK_SKEW_ALLOWANCE`], as the plan's times count it.
fn skew() -> chrono::Duration {
    chrono::Duration::from_std(k8sm_api::CLOCK_SKEW_ALLOWANCE).unwrap()
}

#[test]
fn a_job_pod_past_the_unmanaged_timeout_is_handled_like_an_unmanaged_pod() {
    let jb = job("batch", "report");
    let pods = vec![jb.pod("r", "n1")];
    // Marked at 0, now is 60: a 30m timeout has expired, a 90m one has not.
    let expired = plan_now(&draining(
        vec![jb.clone()],
        pods.clone(),
        unmanaged(UnmanagedPodPolicy::DeleteAfterTimeout, Some("30m")),
    ));
    assert_eq!(summary(&expired), ["Delete batch/r"]);
    let pending = plan_now(&draining(
        vec![jb.clone()],
        pods.clone(),
        unmanaged(UnmanagedPodPolicy::DeleteAfterTimeout, Some("90m")),
    ));
    assert!(summary(&pending).is_empty());
    assert_eq!(pending.next_wake, Some(at(90) + skew()));
    let (_, _, message) = pod_decision(&pending, "n1", "r");
    assert!(message.contains("to complete, or until"), "{message}");
    let never = plan_now(&draining(
        vec![jb],
        pods,
        unmanaged(UnmanagedPodPolicy::Never, Some("30m")),
    ));
    assert_eq!(
        pod_decision(&never, "n1", "r").1,
        Some(Reason::BlockedUnmanagedPod)
    );
    assert_eq!(phase(&never, "n1"), NodePhase::Blocked);
}

#[test]
fn unmanaged_pods_are_deleted_at_once_under_delete() {
    let plan = plan_now(&draining(
        vec![],
        vec![unmanaged_pod("ops", "tool", "n1")],
        unmanaged(UnmanagedPodPolicy::Delete, None),
    ));
    assert_eq!(summary(&plan), ["Delete ops/tool"]);
    assert_eq!(
        plan.actions[0].message,
        "ops/tool on n1: delete unmanaged pod (no controller) (by eviction)"
    );
    // Through the Eviction API, which marks it DisruptionTarget; by a plain DELETE only where the
    // policy says not to go through the API.
    let through_api = |plan: &crate::Plan| match &plan.actions[0].kind {
        ActionKind::DeletePod { eviction_api, .. } => *eviction_api,
        other => panic!("{other:?}"),
    };
    assert!(through_api(&plan));
    let plain = plan_now(&draining(
        vec![],
        vec![unmanaged_pod("ops", "tool", "n1")],
        unmanaged(UnmanagedPodPolicy::Delete, None)
            .with(|s| s.respect_pod_disruption_budgets = false),
    ));
    assert!(!through_api(&plain));
    assert!(plain.actions[0].message.contains("plain DELETE"));
}

#[test]
fn unmanaged_pods_wait_while_an_owned_pod_of_the_node_waits_for_its_owner() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 8);
    pods.push(rs.pod("web-1", "n1"));
    pods.push(unmanaged_pod("ops", "tool", "n1"));
    let plan = plan_now(&draining(
        vec![rs],
        pods,
        unmanaged(UnmanagedPodPolicy::Delete, None),
    ));
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    let (decision, reason, message) = pod_decision(&plan, "n1", "tool");
    assert_eq!(
        (decision, reason),
        (Decision::Wait, Some(Reason::WaitingForOwner))
    );
    assert!(
        message.contains("once the node's workload and other-controller pods have left"),
        "{message}"
    );
}

#[test]
fn unmanaged_pods_wait_while_an_owned_pod_of_the_node_waits_for_a_budget() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 9);
    pods.push(rs.pod("web-1", "n1").label("app", "web"));
    pods.push(unmanaged_pod("ops", "tool", "n1"));
    let mut view = draining(vec![rs], pods, unmanaged(UnmanagedPodPolicy::Delete, None));
    view.pdbs.push(pdb("shop", "web-pdb", &[("app", "web")], 0));
    assert!(summary(&plan_now(&view)).is_empty());
}

#[test]
fn unmanaged_pods_go_once_the_last_workload_pod_has_left() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 9);
    pods.push(rs.pod("web-1", "n1"));
    pods.push(unmanaged_pod("ops", "tool", "n1"));
    let mut view = draining(vec![rs], pods, unmanaged(UnmanagedPodPolicy::Delete, None));
    // The eviction may still be refused (a budget, a webhook): the unmanaged pod waits for a later
    // pass.
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict shop/web-1"]);
    crate::testing::apply(&mut view, &plan);
    assert_eq!(summary(&plan_now(&view)), ["Delete ops/tool"]);
}

#[test]
fn other_controller_pods_go_after_workload_pods_and_before_unmanaged_pods() {
    let rs = replica_set("shop", "web", 10);
    let custom = crate::testing::owner(
        crate::OwnerKind::Other("CloneSet".into()),
        "shop",
        "clones",
        None,
    );
    let mut pods = elsewhere(&rs, 9);
    pods.extend(elsewhere(&custom, 3));
    pods.push(rs.pod("web-1", "n1"));
    pods.push(custom.pod("clone-1", "n1"));
    pods.push(unmanaged_pod("ops", "tool", "n1"));
    let mut view = draining(vec![rs], pods, unmanaged(UnmanagedPodPolicy::Delete, None));
    let mut order = Vec::new();
    for _ in 0..4 {
        let plan = plan_now(&view);
        order.push(summary(&plan));
        crate::testing::apply(&mut view, &plan);
        view.pods.retain(|p| !p.terminating);
    }
    assert_eq!(
        order,
        [
            vec!["Evict shop/web-1"],
            vec!["Evict shop/clone-1"],
            vec!["Delete ops/tool"],
            vec!["Kamikaze n1"],
        ]
    );
}

/// Evictions are pipelined: the controller plans again before an eviction is answered. Until the
/// answer, the pod may stay (a budget, a webhook refuses it), so the unmanaged pods of its node
/// wait; once accepted, they go.
#[test]
fn unmanaged_pods_wait_for_the_answer_of_the_last_workload_pods_eviction() {
    let rs = replica_set("shop", "web", 10);
    let mut pods = elsewhere(&rs, 9);
    pods.push(rs.pod("web-1", "n1"));
    pods.push(unmanaged_pod("ops", "tool", "n1"));
    let mut view = draining(
        vec![rs.clone()],
        pods,
        unmanaged(UnmanagedPodPolicy::Delete, None),
    );
    view.in_flight.push(crate::InFlightEviction {
        pod_uid: "shop/web-1".into(),
        owner_uid: Some(rs.uid.clone()),
        at: at(59),
        unanswered: true,
    });
    let plan = plan_now(&view);
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(
        pod_decision(&plan, "n1", "tool").1,
        Some(Reason::WaitingForOwner)
    );
    view.in_flight[0].unanswered = false;
    assert_eq!(summary(&plan_now(&view)), ["Delete ops/tool"]);
}

#[test]
fn unmanaged_pods_wait_for_the_timeout_under_delete_after_timeout() {
    let pods = vec![unmanaged_pod("ops", "tool", "n1")];
    let early = plan_now(&draining(
        vec![],
        pods.clone(),
        unmanaged(UnmanagedPodPolicy::DeleteAfterTimeout, Some("1h30m")),
    ));
    assert!(summary(&early).is_empty());
    let tool = node_plan(&early, "n1")
        .pods
        .iter()
        .find(|p| p.pod.name() == "tool")
        .unwrap();
    assert_eq!(
        (tool.decision, tool.reason, tool.until),
        (
            Decision::Wait,
            Some(Reason::WaitingForTimeout),
            Some(at(90) + skew())
        )
    );
    assert_eq!(
        early.next_wake,
        Some(at(90) + skew()),
        "requeue exactly when it becomes deletable"
    );
    assert_eq!(
        phase(&early, "n1"),
        NodePhase::Draining,
        "time resolves it: not Blocked"
    );
    // At exactly marked + timeout + the clock skew allowance it may go (another replica may have
    // marked it, by its own clock).
    let view = draining(
        vec![],
        pods,
        unmanaged(UnmanagedPodPolicy::DeleteAfterTimeout, Some("1h")),
    );
    let deadline = at(60) + skew();
    assert_eq!(summary(&crate::plan(&view, deadline)), ["Delete ops/tool"]);
    assert!(summary(&crate::plan(&view, deadline - chrono::Duration::seconds(1))).is_empty());
    assert!(summary(&crate::plan(&view, at(60))).is_empty());
}

#[test]
fn delete_after_timeout_without_a_readable_mark_time_needs_an_operator() {
    let mut view = draining(
        vec![],
        vec![unmanaged_pod("ops", "tool", "n1")],
        unmanaged(UnmanagedPodPolicy::DeleteAfterTimeout, Some("1m")),
    );
    view.nodes[0].incompatible_since = Some("garbage".into());
    let plan = plan_now(&view);
    // Nothing evicted or deleted; the node is handed back (docs/design.md §5.7).
    assert_eq!(summary(&plan), ["Stall n1 +uncordon"]);
    assert_eq!(
        pod_decision(&plan, "n1", "tool").1,
        Some(Reason::MalformedAnnotation)
    );
    assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
}

#[test]
fn delete_after_timeout_without_a_timeout_keeps_the_pods_and_reports_the_policy() {
    let plan = plan_now(&draining(
        vec![],
        vec![unmanaged_pod("ops", "tool", "n1")],
        unmanaged(UnmanagedPodPolicy::DeleteAfterTimeout, None),
    ));
    // Nothing evicted or deleted; the node is handed back (docs/design.md §5.7).
    assert_eq!(summary(&plan), ["Stall n1 +uncordon"]);
    assert_eq!(
        pod_decision(&plan, "n1", "tool").1,
        Some(Reason::InvalidPolicy)
    );
    let conditions = &plan.policy("p").unwrap().conditions;
    assert!(
        conditions
            .iter()
            .any(|c| c.reason == Reason::InvalidPolicy && c.message.contains("timeout"))
    );
}

#[test]
fn unmanaged_pods_block_the_node_under_never() {
    let plan = plan_now(&draining(
        vec![],
        vec![unmanaged_pod("ops", "tool", "n1")],
        policy("p"),
    ));
    // Nothing evicted or deleted; the node is handed back (docs/design.md §5.7).
    assert_eq!(summary(&plan), ["Stall n1 +uncordon"]);
    let (decision, reason, message) = pod_decision(&plan, "n1", "tool");
    assert_eq!(
        (decision, reason),
        (Decision::Block, Some(Reason::BlockedUnmanagedPod))
    );
    assert_eq!(
        message,
        "unmanaged pod (no controller): policy Never; delete it, or `kubectl k8sm force n1`"
    );
    assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
    let eta = plan.policy("p").unwrap().eta;
    assert_eq!((eta.nodes_blocked, eta.pods_left), (1, 1));
}

#[test]
fn an_other_controller_pod_that_is_not_ready_is_not_held_behind_workload_pods() {
    // The workload pod waits for its owner; the broker here is not Ready, so moving it costs
    // nothing, and holding it would keep its controller below its floor (and its pods on other
    // nodes waiting).
    let rs = replica_set("shop", "web", 10);
    let kafka = crate::testing::owner(
        crate::OwnerKind::Other("KafkaNodePool".into()),
        "k",
        "b",
        None,
    );
    let mut pods = elsewhere(&rs, 8);
    pods.push(rs.pod("web-1", "n1"));
    pods.extend(elsewhere(&kafka, 2));
    pods.push(kafka.pod("broker-sick", "n1").not_ready());
    pods.push(kafka.pod("broker-fine", "n1"));
    let plan = plan_now(&draining(vec![rs], pods, policy("p")));
    assert_eq!(summary(&plan), ["Evict k/broker-sick"]);
    let (_, _, message) = pod_decision(&plan, "n1", "broker-fine");
    assert_eq!(
        message,
        "wait: goes once the node's workload pods have left"
    );
}
