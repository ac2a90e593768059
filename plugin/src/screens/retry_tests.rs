//! Tests of `force --retry-kamikaze`'s decision: plans and hand-written objects in, the patch and the text out.

use k8sm_api::{KamikazeMechanism, NodePhase};
use k8sm_planner::testing::{OLD, at, node, policy};
use k8sm_planner::{ClusterView, DeletedNodeRecord, NodeView};
use serde_json::json;

use super::*;

/// The plan of n1 in `view` at 30 minutes.
fn node_plan(view: &ClusterView) -> NodePlan {
    k8sm_planner::plan(view, at(30))
        .node("n1")
        .expect("n1 is planned")
        .clone()
}

/// n1 came back from a kamikaze annotation still running its old executor: it acknowledged the kamikaze by
/// removing the annotation and keeps kamikaze-executor-id and kamikaze-obeyed.
fn came_back_unchanged() -> NodePlan {
    let n1 = NodeView {
        kamikaze: None,
        kamikaze_obeyed: true,
        ..node("n1").marked(at(0)).admitted(at(1)).kamikazed(at(5))
    };
    node_plan(&ClusterView {
        nodes: vec![n1],
        policies: vec![policy("fleet")],
        ..ClusterView::default()
    })
}

/// n1 was deleted as its kamikaze at 5 minutes, and a new Node n1 registered with its old executor.
fn came_back_after_delete() -> NodePlan {
    let mut fleet = policy("fleet").with(|s| s.kamikaze.mechanism = KamikazeMechanism::DeleteNode);
    fleet.deleted_nodes = vec![DeletedNodeRecord {
        name: "n1".into(),
        uid: "uid-old-n1".into(),
        executor_id: Some(OLD.into()),
        deleted_at: at(5),
        target: None,
    }];
    node_plan(&ClusterView {
        nodes: vec![node("n1")],
        policies: vec![fleet],
        ..ClusterView::default()
    })
}

fn node_object(annotations: serde_json::Value) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": "n1", "uid": "uid-n1", "resourceVersion": "812", "annotations": annotations}
    }))
    .unwrap()
}

fn policy_object(deleted: serde_json::Value) -> ExecutorUpgradePolicy {
    serde_json::from_value(json!({
        "apiVersion": "k8s.mesosphere.io/v1alpha1",
        "kind": "ExecutorUpgradePolicy",
        "metadata": {"name": "fleet", "resourceVersion": "77"},
        "spec": {"targetExecutorId": "sha256:new"},
        "status": {"deletedNodes": deleted}
    }))
    .unwrap()
}

#[test]
fn a_node_that_came_back_unchanged_loses_its_kamikaze_annotations() {
    let node = node_object(json!({
        "k8s.mesosphere.io/executor-id": "sha256:old",
        "k8s.mesosphere.io/kamikaze-executor-id": "sha256:old",
        "k8s.mesosphere.io/kamikaze-obeyed": "2026-01-01T00:05:00Z",
        "k8s.mesosphere.io/draining": "2026-01-01T00:01:00Z"
    }));
    let retry =
        RetryKamikaze::decide(&came_back_unchanged(), &node, &policy_object(json!([]))).unwrap();
    assert_eq!(
        retry.patch("RECORD"),
        json!({"metadata": {"resourceVersion": "812", "annotations": {
            "k8s.mesosphere.io/kamikaze-executor-id": null,
            "k8s.mesosphere.io/kamikaze-obeyed": null,
            "k8s.mesosphere.io/forced": "RECORD"
        }}}),
        "only the kamikaze record goes, with the record of what was forced, conditional on the Node read"
    );
    let text = retry.render(Palette::PLAIN);
    assert!(
        text.starts_with(
            "Node n1 came back from kamikaze with an unexpected executor:\n  came back from kamikaze still running its old executor sha256:old"
        ),
        "{text}"
    );
    assert!(
        text.ends_with(
            "Retrying removes the kamikaze record of node n1 (k8s.mesosphere.io/kamikaze-executor-id, \
             k8s.mesosphere.io/kamikaze-obeyed), so that k8sm drains the node and tells it to terminate once more.\n"
        ),
        "{text}"
    );
    assert!(
        retry
            .question()
            .starts_with("Remove the kamikaze record of node n1 ("),
        "{}",
        retry.question()
    );
}

#[test]
fn every_kamikaze_key_present_is_removed() {
    let node = node_object(json!({
        "k8s.mesosphere.io/kamikaze": "2026-01-01T00:05:00Z",
        "k8s.mesosphere.io/kamikaze-executor-id": "sha256:old",
        "k8s.mesosphere.io/kamikaze-target": "sha256:new",
        "k8s.mesosphere.io/kamikaze-obeyed": "2026-01-01T00:05:00Z"
    }));
    let retry =
        RetryKamikaze::decide(&came_back_unchanged(), &node, &policy_object(json!([]))).unwrap();
    let Change::NodeAnnotations { present, .. } = &retry.change else {
        panic!("{retry:?}")
    };
    assert_eq!(present, &KAMIKAZE_RECORD);
}

#[test]
fn a_node_deleted_as_its_kamikaze_leaves_the_policy_status() {
    let deleted = json!([
        {"name": "n0", "uid": "uid-old-n0", "deletedAt": "2026-01-01T00:04:00Z"},
        {"name": "n1", "uid": "uid-old-n1", "executorId": "sha256:old", "deletedAt": "2026-01-01T00:05:00Z"}
    ]);
    // The new Node carries no k8sm key: the record is the policy's.
    let node = node_object(json!({"k8s.mesosphere.io/executor-id": "sha256:old"}));
    let retry =
        RetryKamikaze::decide(&came_back_after_delete(), &node, &policy_object(deleted)).unwrap();
    assert_eq!(
        retry.patch("RECORD"),
        json!({
            "metadata": {"resourceVersion": "77"},
            "status": {"deletedNodes": [{"name": "n0", "uid": "uid-old-n0", "deletedAt": "2026-01-01T00:04:00Z"}]}
        }),
        "the other records stay, conditional on the policy read"
    );
    assert!(
        retry.render(Palette::PLAIN).contains(
            "Retrying removes node n1 from status.deletedNodes of ExecutorUpgradePolicy fleet"
        ),
        "{}",
        retry.render(Palette::PLAIN)
    );
    let note = retry.event_note("admin");
    assert!(
        note.starts_with(
            "kamikaze retried by admin with `kubectl k8sm force n1 --retry-kamikaze`: removed node n1 from \
             status.deletedNodes of ExecutorUpgradePolicy fleet; the node had come back wrong (UnexpectedExecutor: \
             came back after k8sm deleted it still running its old executor sha256:old"
        ),
        "{note}"
    );
}

#[test]
fn the_last_deleted_node_leaves_an_empty_list() {
    let deleted = json!([{"name": "n1", "uid": "uid-old-n1", "deletedAt": "2026-01-01T00:05:00Z"}]);
    let retry = RetryKamikaze::decide(
        &came_back_after_delete(),
        &node_object(json!({})),
        &policy_object(deleted),
    )
    .unwrap();
    assert_eq!(retry.patch("RECORD")["status"], json!({"deletedNodes": []}));
}

#[test]
fn a_node_that_did_not_come_back_wrong_is_refused() {
    // Told to terminate a minute ago, not back yet: its kamikaze record is there, and stays.
    let waiting = node_plan(&ClusterView {
        nodes: vec![node("n1").marked(at(0)).admitted(at(1)).kamikazed(at(29))],
        policies: vec![policy("fleet")],
        ..ClusterView::default()
    });
    assert_eq!(waiting.phase, NodePhase::KamikazeSent);
    let error = RetryKamikaze::decide(
        &waiting,
        &node_object(json!({
            "k8s.mesosphere.io/kamikaze": "2026-01-01T00:29:00Z",
            "k8s.mesosphere.io/kamikaze-executor-id": "sha256:old"
        })),
        &policy_object(json!([])),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "node \"n1\" cannot retry its kamikaze: it did not come back from kamikaze with an unexpected executor (it \
         is KamikazeSent); --retry-kamikaze only retries a node that `kubectl k8sm plan` reports UnexpectedExecutor"
    );
}

#[test]
fn without_a_record_there_is_nothing_to_retry() {
    let error = RetryKamikaze::decide(
        &came_back_unchanged(),
        &node_object(json!({"k8s.mesosphere.io/executor-id": "sha256:old"})),
        &policy_object(json!([{"name": "n7", "uid": "u7", "deletedAt": "2026-01-01T00:05:00Z"}])),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "node \"n1\" cannot retry its kamikaze: k8sm holds no kamikaze record of it (no \
         k8s.mesosphere.io/kamikaze-executor-id annotation, no entry in status.deletedNodes of \
         ExecutorUpgradePolicy fleet)"
    );
}

#[test]
fn outcomes() {
    let lines: Vec<String> = [
        RetryOutcome::Removed { node: "n1".into() },
        RetryOutcome::WouldRemove { node: "n1".into() },
        RetryOutcome::Changed { node: "n1".into() },
    ]
    .iter()
    .map(RetryOutcome::line)
    .collect();
    assert_eq!(
        lines,
        [
            "node/n1: kamikaze record removed, k8sm drains it and tells it to terminate once more; Forced event recorded",
            "node/n1: kamikaze record would be removed (dry run)",
            "node/n1: changed since it was read, nothing removed: run the command again to see where it stands",
        ]
    );
}
