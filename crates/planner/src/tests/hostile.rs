//! Annotations that are huge or carry control characters (anyone who may write a Node's annotations
//! can put up to 256 KiB there): every message quotes them escaped and cut, the plan's report
//! carries no more of them than the status may hold, and decisions stay what they would be with
//! ordinary values. And the number of nodes deleted at once (each remembered in the status) is
//! bounded.

use k8sm_api::text::{MAX_QUOTED_VALUE, is_unsafe, recorded_id};
use k8sm_api::{
    KamikazeMechanism, MAX_DELETED_NODES, MAX_EXECUTOR_ID, MaxConcurrentNodes, NodePhase,
};

use super::*;
use crate::testing::{NEW, apply, node, policy};

/// 200 KiB that would clear a terminal, ring its bell and reverse its text.
fn hostile() -> String {
    let mut value = "\x1b[2J\x07\u{202e}evil\n".repeat(2048);
    value.push_str(&"x".repeat(200 * 1024 - value.len()));
    value
}

/// Every message of the plan and every blocker: at most about a kilobyte (Events cap notes at 1
/// kB), no control character.
fn assert_messages_are_safe(plan: &Plan) {
    let messages = plan
        .actions
        .iter()
        .map(|a| a.message.as_str())
        .chain(
            plan.nodes
                .iter()
                .flat_map(|n| n.blockers.iter().map(|b| &*b.message)),
        )
        .chain(
            plan.policies
                .iter()
                .flat_map(|p| p.conditions.iter().map(|c| c.message.as_str())),
        );
    for message in messages {
        assert!(message.len() <= 1000, "{} bytes: {message}", message.len());
        assert!(!message.chars().any(is_unsafe), "{message:?}");
    }
    for n in &plan.nodes {
        let id = n.executor_id.as_deref().unwrap_or_default();
        assert!(
            id.len() <= MAX_EXECUTOR_ID && !id.chars().any(is_unsafe),
            "{id:?}"
        );
    }
}

#[test]
fn a_huge_malformed_mark_is_quoted_cut_and_escaped() {
    let mut n1 = node("n1").marked(at(0));
    n1.incompatible_since = Some(hostile());
    let plan = plan_now(&cluster(vec![n1], vec![], vec![], vec![policy("p")]));
    assert_messages_are_safe(&plan);
    let blocker = &node_plan(&plan, "n1").blockers[0];
    assert_eq!(blocker.reason, Reason::MalformedAnnotation);
    assert!(
        blocker
            .message
            .contains("is \"\\u{1b}[2J\\u{7}\\u{202e}evil\\n"),
        "the start of the value, escaped: {}",
        blocker.message
    );
    assert!(
        blocker
            .message
            .contains("…(truncated, 204800 bytes), not an RFC 3339 time"),
        "{}",
        blocker.message
    );
    // Decided as with a short malformed value: it drains what it can.
    assert_eq!(phase(&plan, "n1"), NodePhase::Draining);
}

#[test]
fn a_huge_executor_id_is_quoted_in_the_mark_and_cut_in_the_report() {
    let plan = plan_now(&cluster(
        vec![node("n1").executor(&hostile())],
        vec![],
        vec![],
        vec![policy("p")],
    ));
    assert_messages_are_safe(&plan);
    let mark = &plan.actions[0];
    assert_eq!(mark.reason, Reason::Marked);
    assert!(
        mark.message.contains("…(truncated, 204800 bytes)"),
        "{}",
        mark.message
    );
    assert!(
        mark.message.len() < MAX_QUOTED_VALUE + 200,
        "{}",
        mark.message
    );
    let id = node_plan(&plan, "n1").executor_id.as_deref().unwrap();
    assert!(id.starts_with("\\u{1b}[2J\\u{7}\\u{202e}evil\\n"), "{id}");
}

#[test]
fn a_node_that_comes_back_with_a_huge_executor_id_is_reported_safely() {
    // Kamikaze sent while it ran an ordinary old executor; it comes back reporting 200 KiB of
    // garbage.
    let mut came_back = node("n1").marked(at(0)).admitted(at(1)).kamikazed(at(5));
    came_back.kamikaze = None;
    came_back.executor_id = Some(hostile());
    // And one whose huge ID it had before is still the one it reports.
    let mut unchanged = node("n2")
        .executor(&hostile())
        .marked(at(0))
        .admitted(at(1))
        .kamikazed(at(5));
    unchanged.kamikaze = None;
    let p = policy("p")
        .with(|s| s.max_concurrent_nodes = MaxConcurrentNodes::Count(2.try_into().unwrap()));
    let plan = plan_now(&cluster(
        vec![came_back, unchanged],
        vec![],
        vec![],
        vec![p],
    ));
    assert_messages_are_safe(&plan);
    for n in ["n1", "n2"] {
        assert_eq!(phase(&plan, n), NodePhase::Blocked, "{n}");
        assert_eq!(
            blocker_reasons(&plan, n),
            [Reason::UnexpectedExecutor],
            "{n}"
        );
    }
    assert!(
        node_plan(&plan, "n2").blockers[0]
            .message
            .contains("still running its old executor"),
        "{}",
        node_plan(&plan, "n2").blockers[0].message
    );
}

fn delete_node_policy(slots: u32) -> PolicyView {
    policy("p").with(|s| {
        s.kamikaze.mechanism = KamikazeMechanism::DeleteNode;
        s.max_concurrent_nodes = MaxConcurrentNodes::Count(slots.try_into().unwrap());
    })
}

#[test]
fn a_deleted_node_is_recorded_with_a_bounded_executor_id_and_recognised_when_it_comes_back() {
    let huge = hostile();
    let mut view = cluster(
        vec![node("n1").executor(&huge).marked(at(0)).admitted(at(1))],
        vec![],
        vec![],
        // No target: only a change of executor ID tells an upgrade.
        vec![delete_node_policy(1).with(|s| s.target_executor_id = None)],
    );
    let plan = plan_now(&view);
    assert_messages_are_safe(&plan);
    let records = &plan.policy("p").unwrap().deleted_nodes;
    assert_eq!(records.len(), 1);
    let recorded = records[0].executor_id.as_deref().unwrap();
    assert_eq!(recorded, recorded_id(&huge));
    assert!(recorded.len() <= MAX_EXECUTOR_ID, "{recorded}");
    apply(&mut view, &plan);

    // Back with the same huge ID, under a new UID: it came back wrong, not upgraded.
    let mut back = node("n1").executor(&huge);
    back.uid = "uid-n1-new".into();
    view.nodes.push(back);
    let plan = crate::plan(&view, at(62));
    assert_messages_are_safe(&plan);
    assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
    assert_eq!(blocker_reasons(&plan, "n1"), [Reason::UnexpectedExecutor]);

    // With another ID (as long): upgraded.
    view.nodes[0].executor_id = Some(format!("{huge}2"));
    let plan = crate::plan(&view, at(63));
    assert_eq!(phase(&plan, "n1"), NodePhase::Compatible);
    assert!(plan.policy("p").unwrap().deleted_nodes.is_empty());
}

#[test]
fn at_most_max_deleted_nodes_are_deleted_and_not_back_at_once() {
    let extra = 3;
    let count = MAX_DELETED_NODES + extra;
    let nodes: Vec<NodeView> = (0..count)
        .map(|i| node(&format!("n{i:04}")).marked(at(0)).admitted(at(1)))
        .collect();
    let slots = u32::try_from(count).unwrap();
    let mut view = cluster(nodes, vec![], vec![], vec![delete_node_policy(slots)]);
    let plan = plan_now(&view);
    assert_eq!(kamikazed(&plan).len(), MAX_DELETED_NODES);
    assert_eq!(
        plan.policy("p").unwrap().deleted_nodes.len(),
        MAX_DELETED_NODES
    );
    let waiting: Vec<&NodePlan> = plan
        .nodes
        .iter()
        .filter(|n| n.phase == NodePhase::Drained)
        .collect();
    assert_eq!(waiting.len(), extra);
    assert_eq!(waiting[0].blockers[0].reason, Reason::WaitingForSlot);
    assert!(
        waiting[0].blockers[0]
            .message
            .contains("at most 100 are deleted at once"),
        "{}",
        waiting[0].blockers[0].message
    );

    // One comes back upgraded: one more is deleted.
    apply(&mut view, &plan);
    let mut back = node("n0000").executor(NEW);
    back.uid = "uid-n0000-new".into();
    view.nodes.push(back);
    let plan = crate::plan(&view, at(62));
    let deleted = kamikazed(&plan);
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert_eq!(
        plan.policy("p").unwrap().deleted_nodes.len(),
        MAX_DELETED_NODES
    );
}

/// The nodes told to terminate (here: deleted) by the plan.
fn kamikazed(plan: &Plan) -> Vec<&str> {
    plan.actions
        .iter()
        .filter_map(|a| match &a.kind {
            ActionKind::Kamikaze { node, .. } => Some(node.as_str()),
            _ => None,
        })
        .collect()
}
