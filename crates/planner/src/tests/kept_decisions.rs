//! A planner that keeps the decisions of its draining nodes from pass to pass decides a node again
//! as soon as something its decisions read changed (docs/design.md §8): each test plans a view with
//! one [`Planner`], changes one thing the waits read, and checks that the next pass acts on it as a
//! fresh plan does.

use k8sm_api::MaxConcurrentNodes;

use super::*;
use crate::testing::{NEW, node, pdb, policy, replica_set};
use crate::{Calls, Decision, Planner};

/// Workloads `w0`…`w4` of 4 replicas, labelled `app=w{i}`: one pod of each on the draining node
/// `a`, the others on the upgraded node `up`.
fn fleet() -> ClusterView {
    let draining = node("a").marked(at(0)).admitted(at(1)).progressed(at(1), 5);
    let (mut owners, mut pods) = (Vec::new(), Vec::new());
    for i in 0..5 {
        let rs = replica_set("shop", &format!("w{i}"), 4);
        let app = format!("w{i}");
        pods.push(rs.pod(&format!("w{i}-a"), "a").label("app", &app));
        for j in 1..4 {
            pods.push(rs.pod(&format!("w{i}-up{j}"), "up").label("app", &app));
        }
        owners.push(rs);
    }
    let max = MaxConcurrentNodes::count(1).unwrap();
    cluster(
        vec![draining, node("up").executor(NEW)],
        owners,
        pods,
        vec![policy("p").with(|s| s.max_concurrent_nodes = max)],
    )
}

/// Plans `before` twice (the planner's memory settles: the first pass numbers the budgets'
/// answers, which the second may number again), then `after`, with one planner; the last plan,
/// which must be a fresh one's.
fn after_a_pass_of(before: &ClusterView, after: &ClusterView) -> Plan {
    after_passes_of(2, before, after)
}

fn after_passes_of(passes: usize, before: &ClusterView, after: &ClusterView) -> Plan {
    let mut planner = Planner::default();
    for _ in 0..passes {
        let first = planner.plan(before, now());
        assert!(
            first.evictions().next().is_none(),
            "the passes before only wait: {:#?}",
            first.actions
        );
    }
    let second = planner.plan(after, now());
    assert_eq!(second, plan_now(after));
    second
}

fn evicted(plan: &Plan) -> Vec<String> {
    plan.evictions()
        .map(|(pod, _)| pod.name().to_owned())
        .collect()
}

#[test]
fn a_call_that_frees_up_ends_the_kept_wait() {
    let mut view = fleet();
    view.calls = Some(Calls {
        limit: 1,
        running: 1,
        ..Calls::default()
    });
    let mut freed = view.clone();
    freed.calls.as_mut().expect("set").running = 0;
    let plan = after_a_pass_of(&view, &freed);
    assert_eq!(evicted(&plan), ["w0-a"]);
}

#[test]
fn an_edited_policy_decides_its_nodes_again() {
    // With a pod of each workload not Ready, 3 of 4 are: at 75 %, at the floor, every pod waits.
    let mut view = fleet();
    for pod in &mut view.pods {
        if pod.name.ends_with("-up1") {
            *pod = std::sync::Arc::new(PodView::clone(pod).not_ready());
        }
    }
    view.policies[0].spec.owner_health_threshold = 75;
    let mut edited = view.clone();
    edited.policies[0].spec.owner_health_threshold = 50;
    let plan = after_a_pass_of(&view, &edited);
    assert_eq!(evicted(&plan).len(), 5);
}

#[test]
fn a_budget_replaced_under_another_name_is_the_one_reported() {
    let mut view = fleet();
    view.pdbs = vec![pdb("shop", "old", &[("app", "w0")], 0)];
    view.calls = Some(Calls {
        limit: 0,
        ..Calls::default()
    });
    let mut replaced = view.clone();
    replaced.pdbs = vec![pdb("shop", "new", &[("app", "w0")], 0)];
    // After one pass: the budgets' answers, numbered again, still name the same positions.
    let plan = after_passes_of(1, &view, &replaced);
    let (decision, reason, message) = pod_decision(&plan, "a", "w0-a");
    assert_eq!(
        (decision, reason),
        (Decision::Wait, Some(Reason::BlockedByPDB))
    );
    assert!(message.contains("shop/new"), "{message}");
}

#[test]
fn a_budget_that_lets_pods_not_ready_go_again_is_read_again() {
    // A pod not Ready uses up a disruption of a budget under `IfHealthyBudget` while the budget is
    // not healthy: w0-a waits for its budget, which allows none.
    let mut view = fleet();
    for pod in &mut view.pods {
        if &*pod.name == "w0-a" {
            *pod = std::sync::Arc::new(PodView::clone(pod).not_ready());
        }
    }
    let mut budget = pdb("shop", "w0", &[("app", "w0")], 0);
    budget.desired_healthy = 3;
    budget.current_healthy = 2;
    view.pdbs = vec![budget];
    view.calls = Some(Calls {
        limit: 0,
        ..Calls::default()
    });
    let first = Planner::default().plan(&view, now());
    assert_eq!(
        pod_decision(&first, "a", "w0-a").1,
        Some(Reason::BlockedByPDB)
    );
    // Healthy again: the pod goes freely, and only a call holds it.
    let mut healthy = view.clone();
    healthy.pdbs[0].current_healthy = 3;
    let plan = after_a_pass_of(&view, &healthy);
    assert_eq!(
        pod_decision(&plan, "a", "w0-a").1,
        Some(Reason::WaitingForCall)
    );
}

#[test]
fn a_workload_broken_as_a_whole_since_an_earlier_time_is_read_again() {
    // w0's pods are all not Ready, since a minute ago on `a`, since two on `up`: not broken yet,
    // and below its floor, its pod waits; no call is free for the others.
    let mut view = fleet();
    for pod in &mut view.pods {
        if pod.name.starts_with("w0-") {
            let since = if pod.name.ends_with("-a") { 59 } else { 58 };
            *pod = std::sync::Arc::new(PodView::clone(pod).not_ready_since(at(since)));
        }
    }
    view.calls = Some(Calls {
        limit: 0,
        ..Calls::default()
    });
    let (_, reason, _) = pod_decision(&plan_now(&view), "a", "w0-a");
    assert_eq!(reason, Some(Reason::WaitingForOwner));
    // One of them replaced by a pod not Ready since long ago: the workload, none of whose pods is
    // Ready, is broken as a whole, and its pod may go (its health reads the same).
    let mut broken = view.clone();
    for pod in &mut broken.pods {
        if &*pod.name == "w0-up1" {
            let mut replaced = PodView::clone(pod).not_ready_since(at(1));
            replaced.name = "w0-up1-replaced".into();
            replaced.uid = "shop/w0-up1-replaced".into();
            *pod = std::sync::Arc::new(replaced);
        }
    }
    let plan = after_a_pass_of(&view, &broken);
    assert_eq!(
        pod_decision(&plan, "a", "w0-a").1,
        Some(Reason::WaitingForCall)
    );
}

#[test]
fn a_broken_pod_that_waited_for_room_is_judged_again_when_room_frees_up() {
    // 1000m free, which web's two Ready pods on `n1` need, db's broken pod 500m more
    // (`liveness::short_of_room`). No call is free: every pod waits.
    let mut view = super::liveness::short_of_room(1000);
    view.calls = Some(Calls {
        limit: 0,
        ..Calls::default()
    });
    assert_eq!(
        pod_decision(&plan_now(&view), "n1", "db-1").1,
        Some(Reason::WaitingForRoom)
    );
    // 500m more free: the filler pod on `up` replaced by a smaller one, `n1`'s pods the same.
    let mut roomy = view.clone();
    for pod in &mut roomy.pods {
        if &*pod.name == "filler" {
            *pod = std::sync::Arc::new(PodView::clone(pod).requests(2500));
        }
    }
    let plan = after_a_pass_of(&view, &roomy);
    assert_eq!(
        pod_decision(&plan, "n1", "db-1").1,
        Some(Reason::WaitingForCall)
    );
}
