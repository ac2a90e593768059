//! Handing nodes back (docs/design.md §5.2): the policy finalizer, a deleted policy, a node leaving
//! the selector, and the nodes deleted as their kamikaze (`status.deletedNodes`).

use k8sm_api::{KamikazeMechanism, NodePhase};

use super::*;
use crate::{
    DeletedNodeRecord,
    testing::{NEW, OLD, apply, node, policy},
};

#[test]
fn a_policy_without_its_finalizer_gets_it_before_anything_else() {
    let mut p = policy("p");
    p.has_finalizer = false;
    let mut view = cluster(vec![node("n1")], vec![], vec![], vec![p]);
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["AddFinalizer p"]);
    apply(&mut view, &plan);
    assert_eq!(summary(&plan_now(&view)), ["Mark n1 @", "Admit n1 +cordon"]);
}

#[test]
fn a_deleted_policy_hands_its_nodes_back_then_lets_go() {
    let mut p = policy("p");
    p.deleting = true;
    let mut external = node("external").admitted(at(1));
    // Marked by another component: the mark and its taint stay theirs.
    external.incompatible_since = Some(at(0).to_rfc3339());
    external.incompatible_label = true;
    external.has_k8sm_taint = true;
    let mut ours = node("ours").marked(at(0)).admitted(at(1)).kamikazed(at(2));
    ours.marked_by_k8sm = true;
    let mut operator_cordoned = node("operator").marked(at(0));
    operator_cordoned.marked_by_k8sm = true;
    operator_cordoned.unschedulable = true;
    let mut view = cluster(
        vec![external, ours, operator_cordoned, node("clean")],
        vec![],
        vec![],
        vec![p],
    );
    let plan = plan_now(&view);
    assert_eq!(
        summary(&plan),
        [
            "Release external +uncordon",
            "Release operator +unmark",
            "Release ours +uncordon +unmark",
        ]
    );
    assert!(
        plan.actions
            .iter()
            .all(|a| a.reason == Reason::Released && a.policy == "p")
    );
    assert!(
        plan.nodes.is_empty(),
        "a policy being deleted reports no node"
    );
    assert!(plan.policy("p").unwrap().deleting);
    apply(&mut view, &plan);
    assert_eq!(summary(&plan_now(&view)), ["RemoveFinalizer p"]);
    // What others set is left: the external mark, the operator's cordon.
    let by_name = |n: &str| view.nodes.iter().find(|x| x.name == n).unwrap().clone();
    assert!(by_name("external").incompatible_label && by_name("external").has_k8sm_taint);
    assert!(!by_name("external").unschedulable);
    assert!(by_name("operator").unschedulable && !by_name("operator").incompatible_label);
    assert!(!by_name("ours").unschedulable && by_name("ours").kamikaze.is_none());
}

#[test]
fn a_node_that_leaves_the_selector_is_handed_back_and_one_another_policy_takes_is_not() {
    let p = policy("p").selecting("pool", "a");
    let q = policy("q").selecting("pool", "b");
    let mut left = node("left").marked(at(0)).admitted(at(1));
    left.marked_by_k8sm = true;
    let mut moved = node("moved")
        .label("pool", "b")
        .marked(at(0))
        .admitted(at(1));
    moved.marked_by_k8sm = true;
    let view = cluster(vec![left, moved], vec![], vec![], vec![p, q]);
    let plan = plan_now(&view);
    assert_eq!(summary(&plan)[0], "Release left +uncordon +unmark");
    assert!(
        plan.actions[0]
            .message
            .starts_with("no policy selects the node any more")
    );
    assert!(
        !summary(&plan)
            .iter()
            .any(|a| a.contains("moved") && a.starts_with("Release"))
    );
}

fn delete_node_policy() -> PolicyView {
    policy("p").with(|s| s.kamikaze.mechanism = KamikazeMechanism::DeleteNode)
}

#[test]
fn a_deleted_node_is_recorded_and_holds_its_slot_until_it_comes_back() {
    let mut view = cluster(
        vec![
            node("n1").marked(at(0)).admitted(at(1)),
            node("n2").marked(at(0)),
        ],
        vec![],
        vec![],
        vec![delete_node_policy()],
    );
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Kamikaze n1"]);
    let records = &plan.policy("p").unwrap().deleted_nodes;
    assert_eq!(
        records,
        &[DeletedNodeRecord {
            name: "n1".into(),
            uid: "uid-n1".into(),
            executor_id: Some(OLD.into()),
            deleted_at: now(),
            target: Some(crate::testing::NEW.into()),
        }]
    );
    apply(&mut view, &plan);
    assert_eq!(view.nodes.len(), 1, "deleted");
    // Missing: counted, KamikazeSent, holding the only slot; never Upgraded.
    let plan = crate::plan(&view, at(65));
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(phase(&plan, "n1"), NodePhase::KamikazeSent);
    assert_eq!(phase(&plan, "n2"), NodePhase::Incompatible);
    let p = plan.policy("p").unwrap();
    assert_eq!(
        (p.counts.total, p.counts.compatible, p.slots_in_use),
        (2, 0, 1)
    );
    assert_eq!(p.deleted_nodes.len(), 1);
    // Past restartTimeout (10m): RestartOverdue, from the record.
    let overdue = crate::plan(&view, at(71));
    assert_eq!(blocker_reasons(&overdue, "n1"), [Reason::RestartOverdue]);
    assert!(
        overdue
            .policy("p")
            .unwrap()
            .conditions
            .iter()
            .any(|c| c.reason == Reason::RestartOverdue)
    );
    // Back with the target under a new UID: upgraded, the record dropped, the next node admitted.
    let mut back = node("n1").executor(NEW);
    back.uid = "uid-n1-new".into();
    view.nodes.push(back);
    let plan = crate::plan(&view, at(72));
    assert_eq!(summary(&plan), ["Complete n1", "Admit n2 +cordon"]);
    assert_eq!(plan.actions[0].reason, Reason::Upgraded);
    assert!(plan.policy("p").unwrap().deleted_nodes.is_empty());
}

#[test]
fn a_deleted_node_that_comes_back_with_its_old_executor_is_never_deleted_again() {
    let record = DeletedNodeRecord {
        name: "n1".into(),
        uid: "uid-n1".into(),
        executor_id: Some(OLD.into()),
        deleted_at: at(50),
        target: None,
    };
    let mut p = delete_node_policy();
    p.deleted_nodes = vec![record];
    let mut back = node("n1");
    back.uid = "uid-n1-new".into();
    let mut view = cluster(vec![back], vec![], vec![], vec![p]);
    for _ in 0..3 {
        let plan = plan_now(&view);
        assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
        assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
        assert_eq!(blocker_reasons(&plan, "n1"), [Reason::UnexpectedExecutor]);
        assert_eq!(plan.policy("p").unwrap().deleted_nodes.len(), 1);
        apply(&mut view, &plan);
    }
}

/// Deleted as its kamikaze toward a target that moved since (a hotfix release), the node comes back
/// on the target it was told about: it goes round again for the new target, where a third ID still
/// means it came back wrong.
#[test]
fn a_deleted_node_back_on_the_target_it_was_told_goes_round_again() {
    let told = "sha256:first-target";
    let record = DeletedNodeRecord {
        name: "n1".into(),
        uid: "uid-n1".into(),
        executor_id: Some(OLD.into()),
        deleted_at: at(50),
        target: Some(told.into()),
    };
    let mut p = delete_node_policy();
    p.deleted_nodes = vec![record];
    let mut back = node("n1").executor(told);
    back.uid = "uid-n1-new".into();
    let mut view = cluster(vec![back.clone()], vec![], vec![], vec![p.clone()]);
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Complete n1"]);
    assert!(plan.policy("p").unwrap().deleted_nodes.is_empty());
    apply(&mut view, &plan);
    view.policies[0].deleted_nodes.clear();
    assert_eq!(summary(&plan_now(&view)), ["Mark n1 @", "Admit n1 +cordon"]);
    // A third ID: came back wrong, as before.
    back.executor_id = Some("sha256:neither".into());
    let plan = plan_now(&cluster(vec![back], vec![], vec![], vec![p]));
    assert_eq!(blocker_reasons(&plan, "n1"), [Reason::UnexpectedExecutor]);
}

#[test]
fn a_node_still_there_after_its_deletion_is_deleted_again() {
    let mut p = delete_node_policy();
    p.deleted_nodes = vec![DeletedNodeRecord {
        name: "n1".into(),
        uid: "uid-n1".into(),
        executor_id: Some(OLD.into()),
        deleted_at: at(59),
        target: None,
    }];
    let view = cluster(
        vec![node("n1").marked(at(0)).admitted(at(1))],
        vec![],
        vec![],
        vec![p],
    );
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Kamikaze n1"]);
    assert_eq!(phase(&plan, "n1"), NodePhase::KamikazeSent);
}
