//! Marking, completion and node selection: which nodes a policy touches, and how their marks come
//! and go.

use k8sm_api::{NodePhase, keys};

use super::*;
use crate::{
    ActionKind,
    testing::{NEW, OLD, apply, labels_selector, node, policy, replica_set},
};

#[test]
fn marks_a_selected_node_whose_executor_differs_from_the_target() {
    let view = cluster(vec![node("n1")], vec![], vec![], vec![policy("p")]);
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Mark n1 @", "Admit n1 +cordon"]);
    let mark = &plan.actions[0];
    assert_eq!(mark.reason, Reason::Marked);
    assert_eq!(mark.policy, "p");
    assert!(
        mark.message.contains(OLD) && mark.message.contains(NEW),
        "{}",
        mark.message
    );
    assert!(
        matches!(mark.kind, ActionKind::Mark { incompatible_since: Some(t), .. } if t == now())
    );
    assert_eq!(phase(&plan, "n1"), NodePhase::Draining);
}

#[test]
fn leaves_a_node_running_the_target_alone() {
    let view = cluster(
        vec![node("n1").executor(NEW)],
        vec![],
        vec![],
        vec![policy("p")],
    );
    let plan = plan_now(&view);
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(phase(&plan, "n1"), NodePhase::Compatible);
    assert_eq!(plan.policy("p").unwrap().counts.compatible, 1);
}

#[test]
fn marks_a_node_that_reports_no_executor_id() {
    let mut n1 = node("n1");
    n1.executor_id = None;
    let plan = plan_now(&cluster(vec![n1], vec![], vec![], vec![policy("p")]));
    assert_eq!(summary(&plan)[0], "Mark n1 @");
    assert_eq!(
        plan.actions[0].message,
        format!(
            "marked incompatible: annotation {} is missing (the node reports no executor), not the target {NEW}",
            keys::EXECUTOR_ID_ANNOTATION
        )
    );
}

#[test]
fn the_mark_quotes_a_garbage_or_empty_executor_id_as_found() {
    let nodes = vec![
        node("garbage").executor("sha256:garbage\n"),
        node("empty").executor(""),
        node("blank").executor("  "),
    ];
    let plan = plan_now(&cluster(nodes, vec![], vec![], vec![policy("p")]));
    let key = keys::EXECUTOR_ID_ANNOTATION;
    let marked = |name: &str| {
        plan.actions
            .iter()
            .find(|a| a.reason == Reason::Marked && a.kind.node() == Some(name))
            .unwrap_or_else(|| panic!("{name} is marked: {:?}", summary(&plan)))
            .message
            .clone()
    };
    assert_eq!(
        marked("garbage"),
        format!(
            "marked incompatible: annotation {key} is \"sha256:garbage\\n\", not the target {NEW}"
        )
    );
    for name in ["empty", "blank"] {
        assert_eq!(
            marked(name),
            format!(
                "marked incompatible: annotation {key} is empty (the node reports no executor), not the target {NEW}"
            )
        );
    }
}

#[test]
fn without_a_target_unmarked_nodes_are_left_alone() {
    let p = policy("p").with(|s| s.target_executor_id = None);
    let plan = plan_now(&cluster(vec![node("n1")], vec![], vec![], vec![p]));
    assert!(summary(&plan).is_empty());
    assert_eq!(phase(&plan, "n1"), NodePhase::Compatible);
}

#[test]
fn without_a_target_a_node_marked_by_someone_else_is_drained() {
    let p = policy("p").with(|s| s.target_executor_id = None);
    let view = cluster(vec![node("n1").marked(at(0))], vec![], vec![], vec![p]);
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Admit n1 +cordon"]);
    assert_eq!(
        node_plan(&plan, "n1").since,
        Some(now()),
        "since the admission"
    );
}

#[test]
fn a_mark_set_by_hand_is_completed() {
    // Label only: the time of marking is unknown, so it starts now.
    let mut label_only = node("a");
    label_only.incompatible_label = true;
    // Annotation only: the label (for server-side watches) and the taint are added, the time kept.
    let mut annotation_only = node("b");
    annotation_only.incompatible_since = Some(at(5).to_rfc3339());
    let p = policy("p").with(|s| s.target_executor_id = None);
    let plan = plan_now(&cluster(
        vec![label_only, annotation_only],
        vec![],
        vec![],
        vec![p],
    ));
    let marks: Vec<_> = summary(&plan)
        .into_iter()
        .filter(|s| s.starts_with("Mark"))
        .collect();
    assert_eq!(marks, ["Mark a @", "Mark b"]);
    assert!(
        plan.actions
            .iter()
            .any(|a| a.message.contains("adding the label and taint"))
    );
    assert_eq!(
        node_plan(&plan, "b").since,
        Some(now()),
        "b was admitted now"
    );
}

#[test]
fn a_malformed_mark_is_reported_and_never_panics() {
    let mut n1 = node("n1").marked(at(0));
    n1.incompatible_since = Some("last tuesday".into());
    let rs = replica_set("shop", "web", 1);
    let view = cluster(
        vec![n1],
        vec![rs.clone()],
        vec![rs.pod("web-1", "n1")],
        vec![policy("p")],
    );
    let plan = plan_now(&view);
    assert!(blocker_reasons(&plan, "n1").contains(&Reason::MalformedAnnotation));
    // The node still drains what it can.
    assert_eq!(summary(&plan), ["Admit n1 +cordon", "Evict shop/web-1"]);
    let conditions = &plan.policy("p").unwrap().conditions;
    let malformed = conditions
        .iter()
        .find(|c| c.reason == Reason::MalformedAnnotation)
        .expect("a MalformedAnnotation condition");
    assert_eq!(malformed.nodes, ["n1"]);
    assert_eq!(
        malformed.message, "1 node(s) carry unreadable k8sm annotations: n1",
        "the condition names the node"
    );
    let blocker = &node_plan(&plan, "n1").blockers[0];
    assert_eq!(
        blocker.message,
        format!(
            "annotation {} is \"last tuesday\", not an RFC 3339 time: fix or remove it",
            keys::INCOMPATIBLE_EXECUTOR_ANNOTATION
        )
        .into()
    );
}

#[test]
fn an_upgraded_node_is_completed_and_uncordoned() {
    let n1 = node("n1")
        .marked(at(0))
        .admitted(at(1))
        .kamikazed(at(2))
        .executor(NEW);
    let plan = plan_now(&cluster(vec![n1], vec![], vec![], vec![policy("p")]));
    assert_eq!(summary(&plan), ["Complete n1 +uncordon"]);
    assert_eq!(plan.actions[0].reason, Reason::Upgraded);
    assert_eq!(phase(&plan, "n1"), NodePhase::Compatible);
}

#[test]
fn completion_uncordons_only_what_k8sm_cordoned() {
    let mut n1 = node("n1").marked(at(0)).kamikazed(at(2)).executor(NEW);
    n1.draining_since = Some(at(1).to_rfc3339());
    n1.unschedulable = true; // cordoned by an operator, not by k8sm
    let plan = plan_now(&cluster(vec![n1], vec![], vec![], vec![policy("p")]));
    assert_eq!(summary(&plan), ["Complete n1"]);
}

#[test]
fn an_obsolete_mark_on_a_node_already_at_the_target_is_removed() {
    let n1 = node("n1").marked(at(0)).executor(NEW);
    let plan = plan_now(&cluster(vec![n1], vec![], vec![], vec![policy("p")]));
    assert_eq!(summary(&plan), ["Complete n1"]);
    assert!(
        plan.actions[0].message.contains("obsolete"),
        "{}",
        plan.actions[0].message
    );
}

#[test]
fn without_a_target_a_restart_is_a_new_executor_id_after_kamikaze() {
    let p = policy("p").with(|s| s.target_executor_id = None);
    let mut back = node("back")
        .marked(at(0))
        .admitted(at(1))
        .kamikazed(at(2))
        .executor("sha256:v2");
    back.kamikaze = None; // the executor clears it on restart
    let plan = plan_now(&cluster(vec![back], vec![], vec![], vec![p]));
    assert_eq!(summary(&plan), ["Complete back +uncordon"]);
    assert_eq!(plan.actions[0].reason, Reason::Upgraded);
}

#[test]
fn an_executor_that_came_back_with_its_old_id_is_reported_and_never_told_again() {
    for target in [None, Some(NEW)] {
        let p = policy("p").with(|s| s.target_executor_id = target.map(str::to_owned));
        // It obeyed, came back still running OLD, and acknowledged the kamikaze by removing its
        // annotation.
        let mut n1 = node("n1").marked(at(0)).admitted(at(1)).kamikazed(at(2));
        n1.kamikaze = None;
        n1.kamikaze_obeyed = true;
        let mut view = cluster(vec![n1, node("n2").marked(at(0))], vec![], vec![], vec![p]);
        for _ in 0..3 {
            let plan = plan_now(&view);
            assert!(
                summary(&plan).is_empty(),
                "{target:?}: {:?}",
                summary(&plan)
            );
            assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
            assert_eq!(
                blocker_reasons(&plan, "n1"),
                [Reason::UnexpectedExecutor],
                "{target:?}"
            );
            let message = &node_plan(&plan, "n1").blockers[0].message;
            assert!(
                message.contains(&format!("still running its old executor {OLD}"))
                    && message.contains("kubectl k8sm force n1 --retry-kamikaze"),
                "{message}"
            );
            // It keeps its slot: a broken executor build stops at maxConcurrentNodes nodes.
            assert_eq!(phase(&plan, "n2"), NodePhase::Incompatible);
            apply(&mut view, &plan);
        }
        // The operator retries: the kamikaze record goes, and the node is told once more.
        view.nodes[0].kamikaze_executor_id = None;
        view.nodes[0].kamikaze_obeyed = false;
        assert_eq!(summary(&plan_now(&view)), ["Kamikaze n1"], "{target:?}");
    }
}

#[test]
fn a_node_that_came_back_with_a_third_executor_is_reported_and_never_told_again() {
    // Restarted as v2 (an old target, or a broken build) while the target is NEW.
    let n1 = node("n1")
        .marked(at(0))
        .admitted(at(1))
        .kamikazed(at(2))
        .executor("sha256:v2");
    let mut view = cluster(vec![n1], vec![], vec![], vec![policy("p")]);
    for _ in 0..3 {
        let plan = plan_now(&view);
        assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
        assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
        assert_eq!(blocker_reasons(&plan, "n1"), [Reason::UnexpectedExecutor]);
        let message = &node_plan(&plan, "n1").blockers[0].message;
        assert!(
            message.contains(
                "as sha256:v2, neither its old executor sha256:old nor the target sha256:new"
            ),
            "{message}"
        );
        let condition = &plan.policy("p").unwrap().conditions;
        assert!(
            condition
                .iter()
                .any(|c| c.reason == Reason::UnexpectedExecutor && c.nodes == ["n1"]),
            "{condition:?}"
        );
        apply(&mut view, &plan);
    }
    // Fixed by the operator: it reports the target, and is upgraded.
    view.nodes[0].executor_id = Some(NEW.to_owned());
    assert_eq!(summary(&plan_now(&view)), ["Complete n1 +uncordon"]);
}

#[test]
fn a_mark_removed_by_someone_else_stops_the_upgrade_of_that_node() {
    let p = policy("p").with(|s| s.target_executor_id = None);
    let n1 = node("n1").admitted(at(1)); // marked before, mark removed since
    let plan = plan_now(&cluster(vec![n1], vec![], vec![], vec![p]));
    assert_eq!(summary(&plan), ["Complete n1 +uncordon"]);
    assert_eq!(plan.actions[0].reason, Reason::Released);
}

#[test]
fn with_a_target_a_removed_mark_is_put_back() {
    let rs = replica_set("shop", "web", 1);
    let n1 = node("n1").admitted(at(1));
    let plan = plan_now(&cluster(
        vec![n1],
        vec![rs.clone()],
        vec![rs.pod("w", "n1")],
        vec![policy("p")],
    ));
    assert_eq!(summary(&plan), ["Mark n1 @", "Evict shop/w"]);
}

#[test]
fn an_opted_out_node_is_never_marked_nor_drained() {
    let rs = replica_set("shop", "web", 3);
    let free = node("free").opted_out();
    let draining = node("draining").opted_out().marked(at(0)).admitted(at(1));
    let other = node("other").marked(at(0));
    let view = cluster(
        vec![free, draining, other],
        vec![rs.clone()],
        vec![rs.pod("a", "draining"), rs.pod("b", "free")],
        vec![policy("p")],
    );
    let plan = plan_now(&view);
    // Neither opted-out node gets an action, and the admitted one gives its slot to `other`.
    assert_eq!(summary(&plan), ["Admit other +cordon"]);
    assert_eq!(phase(&plan, "free"), NodePhase::Incompatible);
    assert_eq!(phase(&plan, "draining"), NodePhase::Blocked);
    for name in ["free", "draining"] {
        assert_eq!(
            blocker_reasons(&plan, name),
            [Reason::BlockedOptOut],
            "{name}"
        );
        assert!(
            node_plan(&plan, name).blockers[0]
                .message
                .contains(keys::UPGRADE_OPT_OUT_LABEL)
        );
    }
}

#[test]
fn only_nodes_matching_the_selector_are_selected() {
    let nodes = vec![
        node("a").label("pool", "web"),
        node("b").label("pool", "db"),
        node("c"),
    ];
    let p = policy("p").selecting("pool", "web").with(|s| {
        s.max_concurrent_nodes = k8sm_api::MaxConcurrentNodes::count(10).unwrap();
    });
    let plan = plan_now(&cluster(nodes, vec![], vec![], vec![p]));
    assert_eq!(summary(&plan), ["Mark a @", "Admit a +cordon"]);
    assert_eq!(plan.nodes.len(), 1);
    assert_eq!(plan.policy("p").unwrap().counts.total, 1);
}

#[test]
fn a_node_selected_by_two_policies_is_left_alone_and_reported_on_both() {
    let nodes = vec![
        node("shared").label("pool", "web"),
        node("mine").label("pool", "db"),
    ];
    let web = policy("web").selecting("pool", "web");
    let all = policy("all");
    let plan = plan_now(&cluster(nodes, vec![], vec![], vec![web, all]));
    assert_eq!(summary(&plan), ["Mark mine @", "Admit mine +cordon"]);
    assert!(plan.node("shared").is_none());
    for (name, other) in [("web", "all"), ("all", "web")] {
        let conflict = plan
            .policy(name)
            .unwrap()
            .conditions
            .iter()
            .find(|c| c.reason == Reason::PolicyConflict);
        let conflict = conflict.unwrap_or_else(|| panic!("{name} reports the conflict"));
        assert_eq!(conflict.nodes, ["shared"]);
        assert_eq!(
            conflict.message,
            format!(
                "1 node(s) (shared) also selected by policy {other}: neither policy acts on them; make the nodeSelectors disjoint"
            )
        );
    }
}

/// A node that a second policy starts to select mid-drain is handed back: neither policy acts on
/// it, so neither may leave it cordoned and marked.
#[test]
fn a_node_that_becomes_shared_mid_drain_is_handed_back() {
    let mut draining = node("shared")
        .label("pool", "web")
        .marked(at(0))
        .admitted(at(1));
    draining.marked_by_k8sm = true;
    let web = policy("web").selecting("pool", "web");
    let all = policy("all");
    let plan = plan_now(&cluster(vec![draining], vec![], vec![], vec![web, all]));
    assert_eq!(summary(&plan), ["Release shared +uncordon +unmark"]);
    let released = &plan.actions[0];
    assert_eq!(released.reason, Reason::Released);
    assert!(
        released
            .message
            .starts_with("policies all and web select the node: neither acts on it"),
        "{}",
        released.message
    );
    assert!(
        plan.policy("web")
            .unwrap()
            .conditions
            .iter()
            .any(|c| c.reason == Reason::PolicyConflict && c.nodes == ["shared"])
    );
}

#[test]
fn a_conflict_names_at_most_five_of_the_shared_nodes() {
    let nodes: Vec<NodeView> = (0..7).map(|i| node(&format!("n{i}"))).collect();
    let plan = plan_now(&cluster(
        nodes,
        vec![],
        vec![],
        vec![policy("a"), policy("b")],
    ));
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    let conflict = plan
        .policy("a")
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.reason == Reason::PolicyConflict)
        .expect("a conflict");
    assert_eq!(conflict.nodes.len(), 7);
    assert_eq!(
        conflict.message,
        "7 node(s) (n0, n1, n2, n3, n4 and 2 more) also selected by policy b: neither policy acts on them; make the nodeSelectors disjoint"
    );
}

#[test]
fn an_invalid_selector_selects_nothing_and_says_why() {
    let mut selector = labels_selector(&[]);
    selector.match_expressions = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
            key: "pool".into(),
            operator: "Equals".into(),
            values: Some(vec!["web".into()]),
        },
    ]);
    let p = policy("p").with(|s| s.node_selector = selector);
    let plan = plan_now(&cluster(vec![node("n1")], vec![], vec![], vec![p]));
    assert!(summary(&plan).is_empty());
    let conditions = &plan.policy("p").unwrap().conditions;
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0].reason, Reason::InvalidPolicy);
    assert!(
        conditions[0].message.contains("spec.nodeSelector"),
        "{}",
        conditions[0].message
    );
}

#[test]
fn a_policy_that_selects_no_node_says_so() {
    let p = policy("p").selecting("pool", "none");
    let plan = plan_now(&cluster(
        vec![node("n1"), node("n2")],
        vec![],
        vec![],
        vec![p],
    ));
    assert!(summary(&plan).is_empty());
    let policy_plan = plan.policy("p").unwrap();
    assert_eq!(policy_plan.counts.total, 0);
    let conditions: Vec<_> = policy_plan
        .conditions
        .iter()
        .map(|c| (c.reason, c.message.as_str()))
        .collect();
    assert_eq!(
        conditions,
        [(
            Reason::NoNodesSelected,
            "spec.nodeSelector \"pool=none\" selects none of the cluster's 2 nodes"
        )]
    );
}

#[test]
fn a_policy_in_a_cluster_without_nodes_says_so() {
    let plan = plan_now(&cluster(vec![], vec![], vec![], vec![policy("p")]));
    let conditions: Vec<_> = plan
        .policy("p")
        .unwrap()
        .conditions
        .iter()
        .map(|c| (c.reason, c.message.as_str()))
        .collect();
    assert_eq!(
        conditions,
        [(Reason::NoNodesSelected, "the cluster has no nodes")]
    );
}
