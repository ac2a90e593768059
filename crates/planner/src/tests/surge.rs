//! Surge moves (`spec.workloads.surge: SingleReplica`): the only pod of a Deployment leaves its
//! draining node by a rollout that starts the new pod first; every case where that cannot be done
//! without downtime is evicted as before, and says why; a move that brings no new pod in time falls
//! back to eviction; a move under way never stalls its node silently.

use std::sync::Arc;

use k8sm_api::Surge;

use super::*;
use crate::testing::{deployment, node, policy, stateful_set};
use crate::{Decision, RolloutView};

// `now()` is at(60); the node progress deadline is the default, 10 minutes.

/// Deployment `solo` (1 replica, through ReplicaSet `solo-1a`) with its pod `solo-x` on w1 (marked,
/// admitted and cordoned at 50 minutes; its progress recorded at 55 minutes, 1 pod left), edited by
/// `edit`, under a policy whose surge setting is `surge`.
fn solo(surge: Surge, edit: impl FnOnce(&mut RolloutView)) -> ClusterView {
    let d = deployment("shop", "solo", 1).rollout(edit);
    let rs = d.replica_set("solo-1a");
    let pod = rs.pod("solo-x", "w1");
    cluster(
        vec![
            node("w1")
                .marked(at(0))
                .admitted(at(50))
                .progressed(at(55), 1),
        ],
        vec![d, rs],
        vec![pod],
        vec![policy("p").with(|s| s.workloads.surge = surge)],
    )
}

fn decision(plan: &Plan) -> (Decision, Option<Reason>, String) {
    pod_decision(plan, "w1", "solo-x")
}

#[test]
fn a_single_replica_deployment_moves_by_a_rollout_instead_of_an_eviction() {
    let plan = plan_now(&solo(Surge::SingleReplica, |_| {}));
    assert_eq!(summary(&plan), ["Surge shop/solo-x by solo"]);
    let (decision, reason, message) = decision(&plan);
    assert_eq!((decision, reason), (Decision::Move, Some(Reason::Moved)));
    assert!(message.contains("keeps 1/1 ready"), "{message}");
    let surge = plan.actions.iter().find(|a| a.reason == Reason::Moved);
    assert!(
        surge.is_some_and(
            |a| matches!(&a.kind, ActionKind::Surge { at, deployment, .. }
            if *at == now() && *deployment.uid == *"Deployment/shop/solo")
        ),
        "{plan:#?}"
    );
}

#[test]
fn without_surge_the_pod_is_evicted_and_the_deployment_annotation_chooses_for_itself() {
    let evicted = plan_now(&solo(Surge::Never, |_| {}));
    assert_eq!(summary(&evicted), ["Evict shop/solo-x"]);
    let opted_in = plan_now(&solo(Surge::Never, |r| {
        r.surge = Some("SingleReplica".into())
    }));
    assert_eq!(summary(&opted_in), ["Surge shop/solo-x by solo"]);
    let opted_out = plan_now(&solo(Surge::SingleReplica, |r| {
        r.surge = Some("Never".into())
    }));
    assert_eq!(summary(&opted_out), ["Evict shop/solo-x"]);
}

#[test]
fn a_malformed_annotation_leaves_the_policy_in_charge_and_is_said() {
    let plan = plan_now(&solo(Surge::SingleReplica, |r| {
        r.surge = Some("always".into())
    }));
    assert_eq!(summary(&plan), ["Surge shop/solo-x by solo"]);
    // Where the move cannot happen, the eviction's Event carries both reasons.
    let plan = plan_now(&solo(Surge::SingleReplica, |r| {
        r.surge = Some("always".into());
        r.rolling_update = false;
    }));
    let (_, _, message) = decision(&plan);
    assert!(
        message.contains("Recreate") && message.contains("\"always\""),
        "{message}"
    );
}

#[test]
fn strategies_that_cannot_keep_the_old_pod_until_the_new_one_is_ready_are_evicted_and_say_why() {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    type Edit = fn(&mut RolloutView);
    let cases: [(Edit, &str); 4] = [
        (|r| r.rolling_update = false, "strategy is Recreate"),
        (|r| r.paused = true, "paused"),
        (|r| r.max_surge = Some(IntOrString::Int(0)), "maxSurge 0"),
        (
            |r| r.max_unavailable = Some(IntOrString::String("100%".into())),
            "maxUnavailable 100%",
        ),
    ];
    for (edit, why) in cases {
        let plan = plan_now(&solo(Surge::SingleReplica, edit));
        assert_eq!(summary(&plan), ["Evict shop/solo-x"], "{why}");
        let (_, reason, message) = decision(&plan);
        assert_eq!(reason, Some(Reason::Evicted));
        assert!(
            message.contains(&format!("no surge move: its {why}"))
                || message.contains(&format!("no surge move: it is {why}")),
            "{why}: {message}"
        );
    }
}

#[test]
fn a_rollout_that_is_not_complete_is_waited_for_before_a_new_one_starts() {
    for edit in [
        (|r: &mut RolloutView| r.complete = false) as fn(&mut RolloutView),
        |r| {
            r.complete = false;
            r.surge_move = Some(crate::surge_move_record(at(1), "shop/someone-else"));
        },
    ] {
        let plan = plan_now(&solo(Surge::SingleReplica, edit));
        assert_eq!(summary(&plan), Vec::<String>::new());
        let (decision, reason, message) = decision(&plan);
        assert_eq!(
            (decision, reason),
            (Decision::Wait, Some(Reason::WaitingForOwner))
        );
        assert!(message.contains("last rollout is complete"), "{message}");
    }
}

#[test]
fn the_move_starts_once_the_node_is_cordoned_and_never_on_a_node_that_is_not() {
    // Admitted, its cordon not seen yet: the new pod could start on it.
    let mut view = solo(Surge::SingleReplica, |_| {});
    view.nodes[0].unschedulable = false;
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), Vec::<String>::new());
    assert_eq!(decision(&plan).1, Some(Reason::Moving));
    // A policy that does not cordon: evicted, saying why.
    view.policies[0].spec.cordon = false;
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict shop/solo-x"]);
    assert!(decision(&plan).2.contains("not cordoned"));
    // A node cordoned by someone else is cordoned all the same.
    view.nodes[0].unschedulable = true;
    view.nodes[0].cordoned_by_k8sm = false;
    assert_eq!(summary(&plan_now(&view)), ["Surge shop/solo-x by solo"]);
}

#[test]
fn only_the_ready_pod_of_a_single_replica_deployment_moves() {
    // Two replicas: the ordinary rule (one goes while the other stays Ready).
    let d = deployment("shop", "pair", 2);
    let rs = d.replica_set("pair-1a");
    let view = cluster(
        vec![node("w1").marked(at(0)).admitted(at(50))],
        vec![d, rs.clone()],
        vec![rs.pod("pair-a", "w1"), rs.pod("pair-b", "w2")],
        vec![policy("p").with(|s| s.workloads.surge = Surge::SingleReplica)],
    );
    assert_eq!(summary(&plan_now(&view)), ["Evict shop/pair-a"]);
    // A pod that is not Ready costs no readiness to evict.
    let mut view = solo(Surge::SingleReplica, |_| {});
    Arc::make_mut(&mut view.pods[0]).ready = false;
    assert_eq!(summary(&plan_now(&view)), ["Evict shop/solo-x"]);
    // A StatefulSet of one replica has no surge.
    let s = stateful_set("shop", "db", 1);
    let view = cluster(
        vec![node("w1").marked(at(0)).admitted(at(50))],
        vec![s.clone()],
        vec![s.pod("db-0", "w1")],
        vec![policy("p").with(|s| s.workloads.surge = Surge::SingleReplica)],
    );
    assert_eq!(summary(&plan_now(&view)), ["Evict shop/db-0"]);
}

#[test]
fn a_move_under_way_waits_and_its_node_keeps_its_slot() {
    // Started 5 minutes ago; the node's last progress record is 10 minutes old: without the move it
    // would stall.
    let view = solo(Surge::SingleReplica, |r| {
        r.complete = false;
        r.surge_move = Some(crate::surge_move_record(at(55), "shop/solo-x"));
    });
    let mut view = view;
    Arc::make_mut(&mut view.owners[0]).replacing = true;
    view.nodes[0] = view.nodes[0].clone().progressed(at(50), 1);
    let plan = plan_now(&view);
    assert!(
        summary(&plan).iter().all(|a| !a.starts_with("Stall")),
        "{:?}",
        summary(&plan)
    );
    assert_eq!(phase(&plan, "w1"), NodePhase::Draining);
    let (decision, reason, message) = decision(&plan);
    assert_eq!((decision, reason), (Decision::Wait, Some(Reason::Moving)));
    assert!(message.contains("evicted at"), "{message}");
    // The pass plans again when the move is due, at the latest.
    assert!(
        plan.next_wake.is_some_and(|w| w <= at(65)),
        "{:?}",
        plan.next_wake
    );
    // Waiting for the rollout is not blocked.
    assert!(!Reason::Moving.blocks());
}

#[test]
fn a_move_that_brings_no_pod_within_the_deadline_falls_back_to_eviction_and_says_so() {
    let mut view = solo(Surge::SingleReplica, |r| {
        r.complete = false;
        r.surge_move = Some(crate::surge_move_record(at(49), "shop/solo-x"));
    });
    Arc::make_mut(&mut view.owners[0]).replacing = true;
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict shop/solo-x"]);
    let (_, reason, message) = decision(&plan);
    assert_eq!(reason, Some(Reason::Evicted));
    assert!(
        message.contains("made no new pod available within nodeProgressDeadline 10m"),
        "{message}"
    );
}

#[test]
fn paused_a_move_waits_like_an_eviction() {
    let mut view = solo(Surge::SingleReplica, |_| {});
    view.policies[0].spec.paused = true;
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), Vec::<String>::new());
    let (decision, reason, message) = decision(&plan);
    assert_eq!((decision, reason), (Decision::Wait, Some(Reason::Paused)));
    assert!(message.starts_with("paused; would move"), "{message}");
}

/// The whole move, pass after pass, as the controllers would do it: the rollout starts, the new pod
/// becomes Ready on an upgraded node while the old one stays, the old one goes, and the node is
/// drained. Ready pods of the Deployment never drop to 0 (the oracle counts the generated pods, not
/// the plan).
#[test]
fn pass_after_pass_the_workload_keeps_a_ready_pod_and_the_node_drains() {
    let mut view = solo(Surge::SingleReplica, |_| {});
    view.nodes.push(node("up").executor(crate::testing::NEW));
    let ready = |view: &ClusterView| {
        view.pods
            .iter()
            .filter(|p| p.ready && !p.terminating)
            .count()
    };
    // 1: the rollout starts.
    let first = plan(&view, at(60));
    assert_eq!(summary(&first), ["Surge shop/solo-x by solo"]);
    crate::testing::apply(&mut view, &first);
    assert_eq!(ready(&view), 1);
    // 2: the new ReplicaSet's pod runs elsewhere, not Ready yet: the old pod waits.
    let new_rs = view.owners[0].replica_set("solo-2b");
    view.owners.push(new_rs.clone().into());
    let mut new_pod = new_rs.pod("solo-y", "up");
    new_pod.ready = false;
    view.pods.push(Arc::new(new_pod));
    let second = plan(&view, at(61));
    assert_eq!(summary(&second), Vec::<String>::new());
    assert_eq!(decision(&second).1, Some(Reason::Moving));
    // 3: the new pod is Ready; the Deployment controller deletes the old one.
    Arc::make_mut(view.pods.last_mut().unwrap()).ready = true;
    Arc::make_mut(&mut view.pods[0]).terminating = true;
    assert_eq!(ready(&view), 1);
    Arc::make_mut(&mut view.owners[0]).replacing = false;
    view.pods.remove(0);
    Arc::make_mut(&mut view.owners[0])
        .rollout
        .as_mut()
        .unwrap()
        .complete = true;
    // 4: nothing left: the node is drained and its executor told to restart.
    let last = plan(&view, at(62));
    assert_eq!(summary(&last), ["Kamikaze w1"]);
}
