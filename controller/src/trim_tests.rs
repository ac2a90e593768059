//! Trimmed objects convert to the same views as untrimmed ones, and lose what the planner never reads.

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::*;
use k8s_openapi::api::core::v1::Pod;

fn object<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a valid object")
}

fn pod_json() -> Value {
    json!({
        "metadata": {
            "name": "web-1", "generateName": "web-", "namespace": "shop", "uid": "u1",
            "resourceVersion": "42", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1,
            "labels": {"app": "web"},
            "annotations": {
                "karpenter.sh/do-not-disrupt": "true",
                "sidecar.istio.io/status": "{\"a large\": \"blob\"}",
                "kubectl.kubernetes.io/last-applied-configuration": "{}"
            },
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "keep-alive", "uid": "cm1"},
                                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs1",
                                 "controller": true, "blockOwnerDeletion": true}],
            "finalizers": ["example.com/hold"]
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]},
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.1",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:02Z"}
            ]
        }
    })
}

#[test]
fn a_trimmed_pod_keeps_everything_the_planner_reads() {
    let original: Pod = object(pod_json());
    let mut trimmed: CachedPod = object(pod_json());
    trim_pod(&mut trimmed);
    let (before, after) = (
        k8sm_view::pod_view(&original),
        k8sm_view::pod_view(&trimmed),
    );
    assert_eq!(after.ready, before.ready);
    assert!(after.ready);
    assert_eq!(after.phase, before.phase);
    assert_eq!(after.node_name, before.node_name);
    assert_eq!(after.node_name.as_deref(), Some("n1"));
    assert_eq!(after.controller, before.controller);
    assert_eq!(after.labels, before.labels);
    assert_eq!(after.created, before.created);
    assert_eq!(
        after.annotations.keys().collect::<Vec<_>>(),
        ["karpenter.sh/do-not-disrupt"],
        "only the annotations the planner reads"
    );
    assert_eq!(trimmed.metadata.generate_name, None);
    assert_eq!(trimmed.metadata.finalizers, None);
    let references = trimmed
        .metadata
        .owner_references
        .as_ref()
        .expect("references");
    assert_eq!(references.len(), 1, "only the controller's reference");
    assert_eq!(references[0].block_owner_deletion, None);
    // What the controller itself reads of a cached pod: its identity and version (backoff), its node.
    assert_eq!(trimmed.metadata.uid, original.metadata.uid);
    assert_eq!(
        trimmed.metadata.resource_version,
        original.metadata.resource_version
    );
}

#[test]
fn a_cached_pod_reads_what_a_pod_reads_whatever_is_missing_or_not_ready() {
    let cases = [
        json!({"metadata": {"name": "new", "namespace": "shop"}}),
        json!({"metadata": {"name": "pending", "namespace": "shop"}, "spec": {"containers": []},
               "status": {"phase": "Pending"}}),
        json!({"metadata": {"name": "not-ready", "namespace": "shop", "deletionTimestamp": "2026-01-01T00:00:05Z"},
               "spec": {"nodeName": "n2"},
               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"},
                                                             {"type": "ContainersReady", "status": "True"}]}}),
        json!({"metadata": {"name": "done", "namespace": "shop"}, "spec": {"nodeName": "n2"},
               "status": {"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "True"}]}}),
    ];
    for case in cases {
        let pod: Pod = object(case.clone());
        let cached: CachedPod = object(case.clone());
        assert_eq!(
            k8sm_view::pod_view(&cached),
            k8sm_view::pod_view(&pod),
            "{case}"
        );
    }
}

/// A pod template, as a controller's spec carries it: most of the object.
fn template() -> Value {
    json!({
        "metadata": {"labels": {"app": "web"}, "annotations": {"checksum/config": "abc"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}],
                                 "resources": {"requests": {"cpu": "100m"}}}]}
    })
}

/// Metadata as the apiserver returns it, with what the stores need not keep; `replicas` and the rest of the spec.
fn controller(api_version: &str, kind: &str, spec: Value, status: Value) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": "web-6d4f", "namespace": "shop", "uid": format!("uid-{kind}"), "resourceVersion": "42",
            "generation": 7, "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionTimestamp": "2026-01-01T01:00:00Z", "finalizers": ["foregroundDeletion"],
            "labels": {"app": "web", "pod-template-hash": "6d4f"},
            "annotations": {"deployment.kubernetes.io/revision": "3",
                            "kubectl.kubernetes.io/last-applied-configuration": "{\"a large\": \"blob\"}"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d1", "controller": true,
                 "blockOwnerDeletion": true},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "cm1"}
            ],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
        },
        "spec": spec,
        "status": status
    })
}

/// `trim` keeps the view of `value` (of kind `K`) as it was, and the trimmed object is smaller.
fn assert_trim_keeps_view<K>(
    value: Value,
    trim: fn(&mut K),
    view: fn(&K) -> k8sm_planner::OwnerView,
) where
    K: DeserializeOwned + serde::Serialize + Clone,
{
    let original: K = object(value);
    let mut trimmed = original.clone();
    trim(&mut trimmed);
    let size = |o: &K| serde_json::to_string(o).unwrap().len();
    assert_eq!(view(&trimmed), view(&original));
    let kept = serde_json::to_value(&trimmed).unwrap();
    assert_eq!(kept["status"], Value::Null, "status dropped: {kept}");
    assert_eq!(
        kept["spec"]["template"]["spec"]["containers"],
        Value::Null,
        "template dropped: {kept}"
    );
    assert_eq!(
        kept["metadata"]["labels"],
        Value::Null,
        "labels dropped: {kept}"
    );
    assert_eq!(
        kept["metadata"]["managedFields"],
        Value::Null,
        "managed fields dropped: {kept}"
    );
    assert!(size(&trimmed) * 2 < size(&original), "{kept}");
}

#[test]
fn trimmed_controllers_convert_to_the_same_views() {
    let selector = json!({"matchLabels": {"app": "web"}});
    let replicated = json!({"replicas": 3, "selector": selector, "template": template()});
    let rc = json!({"replicas": 3, "selector": {"app": "web"}, "template": template()});
    let sts = json!({"replicas": 3, "selector": selector, "serviceName": "web", "template": template(),
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]});
    let job = json!({"completions": 1, "template": template()});
    let status =
        json!({"replicas": 3, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 7});
    assert_trim_keeps_view(
        controller("apps/v1", "Deployment", replicated.clone(), status.clone()),
        trim_deployment,
        k8sm_view::deployment_view,
    );
    assert_trim_keeps_view(
        controller("apps/v1", "ReplicaSet", replicated, status.clone()),
        trim_replica_set,
        k8sm_view::replica_set_view,
    );
    assert_trim_keeps_view(
        controller("v1", "ReplicationController", rc, status.clone()),
        trim_replication_controller,
        k8sm_view::replication_controller_view,
    );
    assert_trim_keeps_view(
        controller("apps/v1", "StatefulSet", sts, status),
        trim_stateful_set,
        k8sm_view::stateful_set_view,
    );
    assert_trim_keeps_view(
        controller(
            "batch/v1",
            "Job",
            job,
            json!({"active": 1, "startTime": "2026-01-01T00:00:00Z"}),
        ),
        trim_job,
        k8sm_view::job_view,
    );
}

#[test]
fn replicas_left_unset_stay_unset() {
    let mut deployment: Deployment = object(controller(
        "apps/v1",
        "Deployment",
        json!({"selector": {}, "template": template()}),
        json!({}),
    ));
    trim_deployment(&mut deployment);
    assert_eq!(
        deployment.spec.and_then(|s| s.replicas),
        None,
        "the apiserver default applies: 1"
    );
}
