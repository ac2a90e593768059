//! A cached pod converts to the same view as the whole Pod, and keeps nothing else the planner does not read.

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
            "finalizers": ["example.com/hold"],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                                            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}}}}}}]
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
fn a_cached_pod_keeps_everything_the_planner_reads() {
    let original: Pod = object(pod_json());
    assert!(
        original.metadata.managed_fields.is_some(),
        "the fixture has managed fields"
    );
    let cached: CachedPod = object(pod_json());
    let (before, after) = (k8sm_view::pod_view(&original), &*cached.view);
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
    // Of the metadata, only what kube's cache keys on and what the controller itself compares (its backoff keys a
    // pod by UID and resourceVersion): the rest is in the view or never read.
    let expected = ObjectMeta {
        name: original.metadata.name.clone(),
        namespace: original.metadata.namespace.clone(),
        uid: original.metadata.uid.clone(),
        resource_version: original.metadata.resource_version.clone(),
        ..ObjectMeta::default()
    };
    assert_eq!(cached.metadata, expected);
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
        assert_eq!(*cached.view, k8sm_view::pod_view(&pod), "{case}");
    }
}

/// A pod's requests are read from the slimmer copy as from the whole Pod: containers, init containers and sidecars,
/// pod-level requests and overhead.
#[test]
fn a_cached_pod_reads_what_the_scheduler_reserves_for_it() {
    let cases = [
        json!({"metadata": {"name": "plain", "namespace": "shop"},
               "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                                       {"name": "b", "resources": {"limits": {"cpu": "1"}}}]}}),
        json!({"metadata": {"name": "meshed", "namespace": "shop"},
               "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
                        "initContainers": [{"name": "proxy", "restartPolicy": "Always",
                                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
                                           {"name": "migrate", "resources": {"requests": {"cpu": "3"}}}],
                        "overhead": {"cpu": "10m"},
                        "resources": {"requests": {"memory": "2Gi"}}}}),
    ];
    for case in cases {
        let pod: Pod = object(case.clone());
        let cached: CachedPod = object(case.clone());
        assert_eq!(cached.view.requests, k8sm_view::requests_of(&pod), "{case}");
        assert!(cached.view.requests.cpu_millis > 0, "{case}");
    }
}

/// What may pin a pod to its node is read from the slimmer copy exactly as from the whole Pod: a hostname node
/// selector, the required node affinity (not the preferred one), and the claims of its volumes.
#[test]
fn a_cached_pod_reads_what_may_pin_it() {
    let mut value = pod_json();
    value["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "host-1", "disk": "ssd"});
    value["spec"]["affinity"] = json!({
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["host-1"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["host-2"]}]}}]
        },
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]}
    });
    value["spec"]["volumes"] = json!([
        {"name": "config", "configMap": {"name": "web"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}
    ]);
    let original: Pod = object(value.clone());
    let cached: CachedPod = object(value);
    let pins = cached.view.pins.as_deref().expect("pins");
    assert_eq!(
        cached.view.pins,
        k8sm_view::pod_view(&original).pins,
        "as read from the Pod"
    );
    assert_eq!(pins.hostname.as_deref(), Some("host-1"));
    let affinity = pins
        .affinity
        .as_ref()
        .expect("a required affinity naming nodes");
    assert_eq!(affinity.terms.len(), 2);
    assert_eq!(pins.claims, ["data-web-1", "web-1-scratch"]);
    // A pod with none of it has none.
    let plain: CachedPod = object(pod_json());
    assert_eq!(plain.view.pins, None);
}
