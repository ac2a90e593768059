//! Table tests of the owner views, from hand-written controller objects.

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::*;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8sm_planner::ControllerRef;

/// An object of `kind` named web in namespace shop, with `metadata` merged over the defaults and `spec`.
fn object<K: DeserializeOwned>(api_version: &str, kind: &str, metadata: Value, spec: Value) -> K {
    let mut meta = json!({"name": "web", "namespace": "shop", "uid": format!("uid-{kind}")});
    for (key, value) in metadata.as_object().expect("an object") {
        meta[key] = value.clone();
    }
    serde_json::from_value(
        json!({"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}),
    )
    .expect("a valid object")
}

/// Each kind's view of an object with `metadata` and `spec`.
fn views(metadata: Value, spec: Value) -> Vec<OwnerView> {
    let (m, s) = (metadata, spec);
    vec![
        deployment_view(&object("apps/v1", "Deployment", m.clone(), s.clone())),
        replica_set_view(&object("apps/v1", "ReplicaSet", m.clone(), s.clone())),
        replication_controller_view(&object("v1", "ReplicationController", m.clone(), s.clone())),
        stateful_set_view(&object("apps/v1", "StatefulSet", m.clone(), s.clone())),
        job_view(&object("batch/v1", "Job", m, s)),
    ]
}

#[test]
fn kinds_and_identity() {
    let kinds: Vec<(OwnerKind, String, String, String)> = views(json!({}), json!({}))
        .into_iter()
        .map(|o| (o.kind, o.namespace, o.name, o.uid))
        .collect();
    let expected =
        |kind: OwnerKind, uid: &str| (kind, "shop".to_owned(), "web".to_owned(), uid.to_owned());
    assert_eq!(
        kinds,
        [
            expected(OwnerKind::Deployment, "uid-Deployment"),
            expected(OwnerKind::ReplicaSet, "uid-ReplicaSet"),
            expected(
                OwnerKind::ReplicationController,
                "uid-ReplicationController"
            ),
            expected(OwnerKind::StatefulSet, "uid-StatefulSet"),
            expected(OwnerKind::Job, "uid-Job"),
        ]
    );
}

#[test]
fn desired_is_spec_replicas_defaulting_to_one_and_none_for_jobs() {
    for (spec, replicated) in [
        (json!({"replicas": 4}), Some(4)),
        (json!({"replicas": 0}), Some(0)),
        (json!({}), Some(1)),
        (json!({"replicas": -3}), Some(0)),
    ] {
        let desired: Vec<Option<u32>> = views(json!({}), spec.clone())
            .iter()
            .map(|o| o.desired)
            .collect();
        assert_eq!(
            desired,
            [replicated, replicated, replicated, replicated, None],
            "{spec}"
        );
    }
}

#[test]
fn a_deletion_timestamp_means_the_owner_replaces_nothing() {
    for (metadata, exists) in [
        (json!({}), true),
        (json!({"deletionTimestamp": "2026-01-01T00:00:00Z"}), false),
    ] {
        for view in views(metadata.clone(), json!({})) {
            assert_eq!(view.exists, exists, "{} {metadata}", view.kind);
        }
    }
}

#[test]
fn the_controller_is_the_controlling_owner_reference() {
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d1", "controller": true});
    let rollout = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "web", "uid": "r1", "controller": true});
    let plain = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "cm1"});
    // Resolved in the holder's namespace: an owner reference names nothing elsewhere.
    let reference = |api_version: &str, kind: &str, uid: &str| {
        ControllerRef::new("shop", api_version, kind, "web", uid)
    };
    for (references, expected) in [
        (
            json!([deployment]),
            Some(reference("apps/v1", "Deployment", "d1")),
        ),
        (
            json!([plain, rollout]),
            Some(reference("argoproj.io/v1alpha1", "Rollout", "r1")),
        ),
        (json!([plain]), None),
        (Value::Null, None),
    ] {
        for view in views(json!({"ownerReferences": references}), json!({})) {
            assert_eq!(view.controller, expected, "{} {references}", view.kind);
        }
    }
}

/// A Deployment of one replica with `strategy`, `annotations` and `status` (generation 3).
fn single(strategy: Value, annotations: Value, status: Value) -> RolloutView {
    let mut object: Deployment = object(
        "apps/v1",
        "Deployment",
        json!({"generation": 3, "annotations": annotations}),
        json!({"replicas": 1, "strategy": strategy, "selector": {}, "template": {}}),
    );
    object.status = serde_json::from_value(status).expect("a status");
    deployment_view(&object)
        .rollout
        .expect("a Deployment has a rollout")
}

fn done() -> Value {
    json!({"observedGeneration": 3, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1, "readyReplicas": 1})
}

#[test]
fn a_deployment_tells_its_strategy_and_k8sm_s_annotations_other_kinds_have_no_rollout() {
    let r = single(
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "0%"}}),
        json!({
            keys::SURGE_ANNOTATION: "SingleReplica",
            keys::SURGE_MOVE_ANNOTATION: "2026-01-01T00:00:00Z uid-1",
        }),
        done(),
    );
    assert!(r.rolling_update && r.complete && !r.paused);
    assert_eq!(r.max_surge, Some(IntOrString::Int(1)));
    assert_eq!(r.max_unavailable, Some(IntOrString::String("0%".into())));
    assert_eq!(r.surge.as_deref(), Some("SingleReplica"));
    assert_eq!(r.surge_move.as_deref(), Some("2026-01-01T00:00:00Z uid-1"));
    let recreate = single(json!({"type": "Recreate"}), json!({}), done());
    assert!(!recreate.rolling_update);
    // No strategy written: the apiserver's default, RollingUpdate 25%/25%.
    let default = single(Value::Null, json!({}), done());
    assert!(default.rolling_update && default.max_surge.is_none());
    for view in views(json!({}), json!({})).into_iter().skip(1) {
        assert_eq!(view.rollout, None, "{}", view.kind);
    }
}

/// `kubectl rollout status`: observed, not timed out, every replica updated and available, no old one left.
#[test]
fn a_rollout_is_complete_only_by_kubectl_rollout_status_s_test() {
    assert!(single(Value::Null, json!({}), done()).complete);
    let mut not = Vec::new();
    for (field, value) in [
        ("observedGeneration", json!(2)),
        ("updatedReplicas", json!(0)),
        ("replicas", json!(2)),
        ("availableReplicas", json!(0)),
    ] {
        let mut status = done();
        status[field] = value;
        not.push((field, status));
    }
    let mut timed_out = done();
    timed_out["conditions"] =
        json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]);
    not.push(("progress deadline", timed_out));
    not.push(("no status", Value::Null));
    for (why, status) in not {
        assert!(!single(Value::Null, json!({}), status).complete, "{why}");
    }
}

/// A Deployment of 4 rolling out (generation observed, 5 pods of which 1 updated), with `conditions`.
fn rolling_deployment(conditions: Value) -> OwnerView {
    let mut object: Deployment = object(
        "apps/v1",
        "Deployment",
        json!({"generation": 2}),
        json!({"replicas": 4}),
    );
    object.status = serde_json::from_value(json!({
        "observedGeneration": 2, "replicas": 5, "updatedReplicas": 1, "readyReplicas": 4,
        "availableReplicas": 4, "conditions": conditions
    }))
    .expect("a status");
    deployment_view(&object)
}

/// A rollout stuck past its progress deadline replaces a pod only as a new one becomes available: no longer
/// "replacing", so its pods move within the headroom of its Ready count.
#[test]
fn a_rollout_past_its_progress_deadline_is_not_replacing() {
    let progressing =
        json!([{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}]);
    assert!(rolling_deployment(progressing).replacing);
    let stuck =
        json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]);
    assert!(!rolling_deployment(stuck).replacing);
}

/// A StatefulSet of 3 with `spec` merged over a rolling update, and `status`.
fn stateful(spec: Value, status: Value) -> OwnerView {
    let mut base = json!({"replicas": 3});
    for (key, value) in spec.as_object().expect("an object") {
        base[key] = value.clone();
    }
    let mut object: StatefulSet = object("apps/v1", "StatefulSet", json!({"generation": 2}), base);
    object.status = serde_json::from_value(status).expect("a status");
    stateful_set_view(&object)
}

/// A StatefulSet's controller deletes the next old pod of a rolling update once every replica is Ready: k8sm adds
/// no eviction then. While one is not Ready (a bad image), or once the partition is reached, it replaces nothing.
#[test]
fn a_stateful_set_replaces_while_its_update_goes_on_with_every_replica_ready() {
    let status = |updated: i32, ready: i32| {
        json!({"observedGeneration": 2, "replicas": 3, "readyReplicas": ready, "updatedReplicas": updated,
               "currentRevision": "web-1", "updateRevision": "web-2"})
    };
    assert!(stateful(json!({}), status(1, 3)).replacing);
    assert!(
        !stateful(json!({}), status(1, 2)).replacing,
        "stuck on a pod that is not Ready"
    );
    let done = json!({"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3,
                      "currentRevision": "web-2", "updateRevision": "web-2"});
    assert!(!stateful(json!({}), done).replacing);
    let partition =
        json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}});
    assert!(
        !stateful(partition.clone(), status(1, 3)).replacing,
        "partition reached"
    );
    assert!(stateful(partition, status(0, 3)).replacing);
    let on_delete = json!({"updateStrategy": {"type": "OnDelete"}});
    assert!(!stateful(on_delete, status(1, 3)).replacing);
    let unobserved = json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3,
                            "currentRevision": "web-2", "updateRevision": "web-2"});
    assert!(stateful(json!({}), unobserved).replacing);
}

/// `spec.minReadySeconds` of every replicated kind: its pods count as available once Ready for that long.
#[test]
fn min_ready_seconds_is_read_for_every_replicated_kind() {
    let read: Vec<u32> = views(json!({}), json!({"minReadySeconds": 30}))
        .iter()
        .map(|o| o.min_ready_seconds)
        .collect();
    assert_eq!(read, [30, 30, 30, 30, 0]);
    let unset: Vec<u32> = views(json!({}), json!({}))
        .iter()
        .map(|o| o.min_ready_seconds)
        .collect();
    assert_eq!(unset, [0; 5]);
}

#[test]
fn a_replica_set_tells_its_revision_and_a_deployment_its_progress_deadline() {
    let with_revision = |revision: &str| {
        let metadata = json!({"annotations": {REVISION_ANNOTATION: revision}});
        replica_set_view(&object("apps/v1", "ReplicaSet", metadata, json!({}))).revision
    };
    assert_eq!(with_revision("12"), 12);
    assert_eq!(with_revision("not a number"), 0);
    let unset = views(json!({}), json!({}));
    assert!(unset.iter().all(|v| v.revision == 0));
    let deadline = |spec: Value| {
        let view = deployment_view(&object("apps/v1", "Deployment", json!({}), spec));
        view.rollout.map(|r| r.progress_deadline_seconds)
    };
    assert_eq!(deadline(json!({"progressDeadlineSeconds": 120})), Some(120));
    assert_eq!(deadline(json!({})), Some(600), "the apiserver's default");
}

/// A Deployment's Available condition, False since its last transition: how long it has been unavailable.
#[test]
fn a_deployment_tells_since_when_it_is_unavailable() {
    let since = |conditions: Value| {
        rolling_deployment(conditions)
            .rollout
            .and_then(|r| r.unavailable_since)
    };
    let unavailable = json!([{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                              "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
    assert_eq!(
        since(unavailable),
        Some("2026-01-01T00:00:00Z".parse().unwrap())
    );
    let available = json!([{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
    assert_eq!(since(available), None);
    assert_eq!(since(json!([])), None);
}
