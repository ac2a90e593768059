//! Table tests of `pod_view`, from hand-written Pod objects.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::*;
use k8sm_planner::ControllerRef;

/// A pod `web-1` in namespace shop, with `metadata` merged over the defaults, and `spec` and `status` as given.
fn pod(metadata: Value, spec: Value, status: Value) -> Pod {
    let mut meta =
        json!({"name": "web-1", "namespace": "shop", "uid": "u-web-1", "labels": {"app": "web"}});
    for (key, value) in metadata.as_object().expect("an object") {
        meta[key] = value.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status
    }))
    .expect("a Pod")
}

fn rfc3339(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

#[test]
fn identity_labels_and_creation() {
    let view = pod_view(&pod(
        json!({"creationTimestamp": "2026-01-01T00:00:05Z"}),
        json!({"nodeName": "n1", "containers": []}),
        json!({}),
    ));
    assert_eq!(
        (&*view.namespace, &*view.name, &*view.uid),
        ("shop", "web-1", "u-web-1")
    );
    assert_eq!(view.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(view.node_name.as_deref(), Some("n1"));
    assert_eq!(view.created, Some(rfc3339("2026-01-01T00:00:05Z")));
    assert!(!view.terminating);
}

#[test]
fn an_unscheduled_pod_has_no_node() {
    let view = pod_view(&pod(
        json!({}),
        json!({"containers": []}),
        json!({"phase": "Pending"}),
    ));
    assert_eq!(view.node_name, None);
    assert_eq!(view.phase, PodPhase::Pending);
}

#[test]
fn phases() {
    for (phase, expected) in [
        (json!("Pending"), PodPhase::Pending),
        (json!("Running"), PodPhase::Running),
        (json!("Succeeded"), PodPhase::Succeeded),
        (json!("Failed"), PodPhase::Failed),
        (json!("Unknown"), PodPhase::Unknown),
        (Value::Null, PodPhase::Running),
    ] {
        let view = pod_view(&pod(json!({}), json!({}), json!({"phase": phase})));
        assert_eq!(view.phase, expected, "{phase}");
    }
}

#[test]
fn ready_is_the_ready_condition_true() {
    for (conditions, expected) in [
        (json!([{"type": "Ready", "status": "True"}]), true),
        (
            json!([{"type": "Ready", "status": "False"}, {"type": "ContainersReady", "status": "True"}]),
            false,
        ),
        (json!([{"type": "PodScheduled", "status": "True"}]), false),
        (json!([]), false),
    ] {
        let view = pod_view(&pod(
            json!({}),
            json!({}),
            json!({"conditions": conditions}),
        ));
        assert_eq!(view.ready, expected, "{conditions}");
    }
}

#[test]
fn the_controller_is_the_owner_reference_marked_controller() {
    let replica_set = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-6d4f", "uid": "rs1", "controller": true});
    let keeper = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "cm1"});
    let not_controller = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "old", "uid": "rs0", "controller": false});
    let web = Some(ControllerRef::new(
        "shop",
        "apps/v1",
        "ReplicaSet",
        "web-6d4f",
        "rs1",
    ));
    for (references, expected) in [
        (json!([keeper, replica_set]), web),
        (json!([keeper, not_controller]), None),
        (json!([]), None),
    ] {
        let view = pod_view(&pod(
            json!({"ownerReferences": references}),
            json!({}),
            json!({}),
        ));
        assert_eq!(
            view.controller.as_deref(),
            expected.as_ref(),
            "{references}"
        );
    }
}

#[test]
fn mirror_pods_and_annotations() {
    let view = pod_view(&pod(
        json!({"annotations": {"kubernetes.io/config.mirror": "abc", "karpenter.sh/do-not-disrupt": "true"}}),
        json!({}),
        json!({}),
    ));
    assert!(view.mirror);
    assert_eq!(
        view.annotations
            .get("karpenter.sh/do-not-disrupt")
            .map(String::as_str),
        Some("true")
    );
    assert!(!pod_view(&pod(json!({}), json!({}), json!({}))).mirror);
}

#[test]
fn a_deletion_timestamp_means_terminating() {
    let view = pod_view(&pod(
        json!({"deletionTimestamp": "2026-01-01T00:01:00Z"}),
        json!({}),
        json!({}),
    ));
    assert!(view.terminating);
}

/// The pods of one ReplicaSet share one copy of their labels and of their controller reference (the controller caches
/// tens of thousands of views); a pod with other labels gets its own.
#[test]
fn pods_of_one_controller_share_their_labels_and_reference() {
    let owned = |name: &str, labels: Value| {
        pod_view(&pod(
            json!({"name": name, "uid": format!("u-{name}"), "labels": labels, "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-6d4f", "uid": "rs-1", "controller": true}
            ]}),
            json!({"containers": []}),
            json!({}),
        ))
    };
    let (a, b) = (
        owned("web-a", json!({"app": "shared-labels-test"})),
        owned("web-b", json!({"app": "shared-labels-test"})),
    );
    assert!(Arc::ptr_eq(&a.labels, &b.labels));
    let (ra, rb) = (a.controller.unwrap(), b.controller.unwrap());
    assert!(Arc::ptr_eq(&ra, &rb));
    assert_eq!(ra.uid, "rs-1");
    let c = owned(
        "web-c",
        json!({"app": "shared-labels-test", "canary": "yes"}),
    );
    assert!(!Arc::ptr_eq(&a.labels, &c.labels));
    assert_eq!(c.labels.get("canary").map(String::as_str), Some("yes"));
}

/// The pods of one node share one copy of its name, and those of one namespace one copy of it: the planner reads
/// every pod's node on every pass, from one place per node.
#[test]
fn pods_of_one_node_share_its_name_and_namespace() {
    let on = |name: &str, namespace: &str, node: &str| {
        pod_view(&pod(
            json!({"name": name, "namespace": namespace, "uid": format!("u-{name}")}),
            json!({"nodeName": node, "containers": []}),
            json!({}),
        ))
    };
    let (a, b, c) = (
        on("a", "shared-names-test", "node-shared-names-test"),
        on("b", "shared-names-test", "node-shared-names-test"),
        on("c", "shared-names-test-2", "node-shared-names-test-2"),
    );
    let name = |p: &PodView| Arc::clone(p.node_name.as_ref().expect("bound"));
    assert!(Arc::ptr_eq(&name(&a), &name(&b)));
    assert!(Arc::ptr_eq(&a.namespace, &b.namespace));
    assert!(!Arc::ptr_eq(&name(&a), &name(&c)));
    assert_eq!(
        (&*c.namespace, c.node_name.as_deref()),
        ("shared-names-test-2", Some("node-shared-names-test-2"))
    );
    assert_eq!((&*a.name, &*a.uid), ("a", "u-a"));
}
