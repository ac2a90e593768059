//! What the stores keep of each object: only what `k8sm_view` reads, so that memory stays small at
//! thousands of nodes and tens of thousands of pods (docs/design.md §8). Every trim keeps the
//! object's view unchanged (see the tests).

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentSpec, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
    StatefulSet, StatefulSetSpec, StatefulSetStatus,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    Node, NodeStatus, ObjectReference, PersistentVolume, PersistentVolumeSpec,
    ReplicationController, ReplicationControllerSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8sm_api::keys;
use kube::Resource;

/// Managed fields and the last-applied annotation are the bulk of most objects and never read.
pub(crate) fn trim_meta<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// Nodes: keep addresses, conditions and allocatable resources; drop images, volumes and daemon
/// endpoints.
pub(crate) fn trim_node(node: &mut Node) {
    trim_meta(node);
    if let Some(status) = node.status.take() {
        node.status = Some(NodeStatus {
            addresses: status.addresses,
            conditions: status.conditions,
            allocatable: status.allocatable,
            ..NodeStatus::default()
        });
    }
}

/// PersistentVolumes: the claim each is bound to and its node affinity (what may pin the claim's
/// pods to a node); its source, capacity, labels and status go.
pub(crate) fn trim_persistent_volume(volume: &mut PersistentVolume) {
    let meta = &mut volume.metadata;
    *meta = ObjectMeta {
        name: meta.name.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        ..ObjectMeta::default()
    };
    volume.status = None;
    volume.spec = volume.spec.take().map(|spec| PersistentVolumeSpec {
        claim_ref: spec.claim_ref.map(|claim| ObjectReference {
            namespace: claim.namespace,
            name: claim.name,
            ..ObjectReference::default()
        }),
        node_affinity: spec.node_affinity,
        ..PersistentVolumeSpec::default()
    });
}

/// Pod controllers: the planner reads their identity, controller reference, deletion and desired
/// replicas. The pod template (often most of the object), labels, annotations and status go.
fn trim_owner_meta(meta: &mut ObjectMeta) {
    *meta = ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        owner_references: meta.owner_references.take(),
        deletion_timestamp: meta.deletion_timestamp.take(),
        ..ObjectMeta::default()
    };
}

/// A controller whose `spec.replicas` is its desired count: keep that, `spec.minReadySeconds` and
/// the identity, nothing else.
macro_rules! trim_replicated {
    ($name:ident, $kind:ty, $spec:ident) => {
        pub(crate) fn $name(object: &mut $kind) {
            trim_owner_meta(&mut object.metadata);
            let spec = object.spec.as_ref();
            object.spec = Some($spec {
                replicas: spec.and_then(|s| s.replicas),
                min_ready_seconds: spec.and_then(|s| s.min_ready_seconds),
                ..$spec::default()
            });
            object.status = None;
        }
    };
}

/// A ReplicaSet: what [`trim_replicated`] keeps, and its revision (which of a Deployment's
/// ReplicaSets is the newest).
pub(crate) fn trim_replica_set(replica_set: &mut ReplicaSet) {
    let revision = replica_set
        .metadata
        .annotations
        .as_mut()
        .and_then(|a| a.remove(k8sm_view::REVISION_ANNOTATION));
    trim_replicated_set(replica_set);
    replica_set.metadata.annotations = revision.map(|r| {
        std::collections::BTreeMap::from([(k8sm_view::REVISION_ANNOTATION.to_owned(), r)])
    });
}

/// A StatefulSet: what [`trim_replicated`] keeps, and what tells whether its controller is
/// replacing pods (`k8sm_view::stateful_set_view`): its generation, update strategy, and revisions
/// and counts of its status.
pub(crate) fn trim_stateful_set(stateful_set: &mut StatefulSet) {
    let generation = stateful_set.metadata.generation;
    let update_strategy = stateful_set
        .spec
        .as_mut()
        .and_then(|s| s.update_strategy.take());
    let status = stateful_set.status.take();
    trim_replicated_stateful_set(stateful_set);
    stateful_set.metadata.generation = generation;
    if let Some(spec) = stateful_set.spec.as_mut() {
        spec.update_strategy = update_strategy;
    }
    stateful_set.status = status.map(|status| StatefulSetStatus {
        observed_generation: status.observed_generation,
        replicas: status.replicas,
        ready_replicas: status.ready_replicas,
        updated_replicas: status.updated_replicas,
        current_revision: status.current_revision,
        update_revision: status.update_revision,
        ..StatefulSetStatus::default()
    });
}

/// A Deployment: its desired count, what tells whether its controller is replacing pods and whether
/// its last rollout is complete (`k8sm_view::deployment_view`): its generation, whether it is
/// paused, the observed generation, pod counts, and progress and availability conditions of its
/// status; and what a surge move needs: its strategy and k8sm's annotations.
pub(crate) fn trim_deployment(deployment: &mut Deployment) {
    let generation = deployment.metadata.generation;
    let annotations = deployment.metadata.annotations.take().map(|mut all| {
        all.retain(|key, _| key == keys::SURGE_ANNOTATION || key == keys::SURGE_MOVE_ANNOTATION);
        all
    });
    trim_owner_meta(&mut deployment.metadata);
    deployment.metadata.generation = generation;
    deployment.metadata.annotations = annotations.filter(|a| !a.is_empty());
    let spec = deployment.spec.take();
    deployment.spec = Some(DeploymentSpec {
        replicas: spec.as_ref().and_then(|s| s.replicas),
        min_ready_seconds: spec.as_ref().and_then(|s| s.min_ready_seconds),
        progress_deadline_seconds: spec.as_ref().and_then(|s| s.progress_deadline_seconds),
        paused: spec.as_ref().and_then(|s| s.paused),
        strategy: spec.and_then(|s| s.strategy),
        ..DeploymentSpec::default()
    });
    deployment.status = deployment.status.take().map(|status| DeploymentStatus {
        observed_generation: status.observed_generation,
        replicas: status.replicas,
        updated_replicas: status.updated_replicas,
        available_replicas: status.available_replicas,
        conditions: status.conditions.map(|all| {
            all.into_iter()
                .filter(|c| c.type_ == "Progressing" || c.type_ == "Available")
                .map(|c| DeploymentCondition {
                    type_: c.type_,
                    status: c.status,
                    reason: c.reason,
                    last_transition_time: c.last_transition_time,
                    ..DeploymentCondition::default()
                })
                .collect()
        }),
        ..DeploymentStatus::default()
    });
}
trim_replicated!(trim_replicated_set, ReplicaSet, ReplicaSetSpec);
trim_replicated!(
    trim_replication_controller,
    ReplicationController,
    ReplicationControllerSpec
);
trim_replicated!(trim_replicated_stateful_set, StatefulSet, StatefulSetSpec);

/// Jobs: a Job's pods wait for completion, which the planner reads from the pods; nothing of the
/// Job but its identity is read.
pub(crate) fn trim_job(job: &mut Job) {
    trim_owner_meta(&mut job.metadata);
    job.spec = None;
    job.status = None;
}

#[cfg(test)]
mod tests {
    //! Trimmed objects convert to the same views as untrimmed ones, and lose what the planner never
    //! reads.

    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::*;

    fn object<K: DeserializeOwned>(value: Value) -> K {
        serde_json::from_value(value).expect("a valid object")
    }

    /// A pod template, as a controller's spec carries it: most of the object.
    fn template() -> Value {
        json!({
            "metadata": {"labels": {"app": "web"}, "annotations": {"checksum/config": "abc"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}],
                                     "args": ["--config=/etc/web/config.yaml", "--listen=:8080", "--log-format=json"],
                                     "resources": {"requests": {"cpu": "100m"}}}]}
        })
    }

    /// Metadata as the apiserver returns it, with what the stores need not keep; `replicas` and the
    /// rest of the spec.
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
                                "k8s.mesosphere.io/surge": "SingleReplica",
                                "k8s.mesosphere.io/surge-move": "2026-01-01T00:00:00Z uid-1",
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
        assert_eq!(
            kept["status"]["collisionCount"],
            Value::Null,
            "status not read dropped: {kept}"
        );
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
        let replicated = json!({"replicas": 3, "minReadySeconds": 10, "selector": selector, "template": template()});
        let deployment = json!({"replicas": 3, "minReadySeconds": 10, "progressDeadlineSeconds": 120,
                            "selector": selector, "template": template()});
        let rc = json!({"replicas": 3, "minReadySeconds": 10, "selector": {"app": "web"}, "template": template()});
        let sts = json!({"replicas": 3, "minReadySeconds": 10, "selector": selector, "serviceName": "web",
                     "template": template(),
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]});
        let job = json!({"completions": 1, "template": template()});
        let status = json!({"replicas": 3, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 7,
                        "collisionCount": 1});
        // Mid-update, every replica Ready: its controller is about to replace a pod.
        let sts_status = json!({"replicas": 3, "readyReplicas": 3, "updatedReplicas": 1, "observedGeneration": 7,
                            "currentRevision": "web-1", "updateRevision": "web-2", "collisionCount": 1});
        assert!(
            k8sm_view::stateful_set_view(&object(controller(
                "apps/v1",
                "StatefulSet",
                sts.clone(),
                sts_status.clone()
            )))
            .replacing
        );
        assert_trim_keeps_view(
            controller("apps/v1", "Deployment", deployment, status.clone()),
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
            controller("apps/v1", "StatefulSet", sts, sts_status),
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

    /// Whether a Deployment's controller is replacing pods survives the trim in every state: a
    /// rollout with old pods left, one paused half-way, a generation not observed yet, and a
    /// rollout complete.
    #[test]
    fn a_trimmed_deployment_still_tells_a_rollout_under_way() {
        let spec = |paused: bool| json!({"replicas": 4, "paused": paused, "selector": {"matchLabels": {"app": "web"}}, "template": template()});
        let status = |observed: i64, replicas: i32, updated: i32| {
            json!({"observedGeneration": observed, "replicas": replicas, "updatedReplicas": updated,
               "readyReplicas": replicas, "availableReplicas": replicas})
        };
        // The fixture's generation is 7.
        let cases = [
            ("old pods left", spec(false), status(7, 5, 2), true),
            ("paused half-way", spec(true), status(7, 4, 2), false),
            (
                "generation not observed",
                spec(false),
                status(6, 4, 4),
                true,
            ),
            ("complete", spec(false), status(7, 4, 4), false),
        ];
        // What a surge move reads: the strategy, k8sm's annotations, availability and the progress
        // deadline.
        let surge = |strategy: Value| {
            let mut spec = spec(false);
            spec["strategy"] = strategy;
            spec
        };
        let mut timed_out = status(7, 4, 4);
        timed_out["conditions"] = json!([
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "long"},
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "long",
             "lastUpdateTime": "2026-01-01T00:00:00Z"}
        ]);
        let mut unavailable = status(7, 4, 4);
        unavailable["availableReplicas"] = json!(3);
        unavailable["conditions"] = json!([
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "long",
             "lastTransitionTime": "2026-01-01T00:00:00Z", "lastUpdateTime": "2026-01-01T00:00:00Z"}
        ]);
        let cases = cases.into_iter().chain([
        ("recreate", surge(json!({"type": "Recreate"})), status(7, 4, 4), false),
        (
            "surge bounds",
            surge(json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%", "maxUnavailable": 0}})),
            status(7, 4, 4),
            false,
        ),
        ("past its progress deadline", spec(false), timed_out, false),
        ("not all available", spec(false), unavailable, false),
    ]);
        for (case, spec, status, replacing) in cases {
            let original: Deployment = object(controller("apps/v1", "Deployment", spec, status));
            let mut trimmed = original.clone();
            trim_deployment(&mut trimmed);
            assert_eq!(
                k8sm_view::deployment_view(&original).replacing,
                replacing,
                "{case}"
            );
            assert_eq!(
                k8sm_view::deployment_view(&trimmed),
                k8sm_view::deployment_view(&original),
                "{case}"
            );
        }
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

    /// A trimmed PersistentVolume keeps its claim and node affinity (its view is the same) and
    /// loses the rest.
    #[test]
    fn a_trimmed_persistent_volume_keeps_what_may_pin_a_pod() {
        let volume = || -> PersistentVolume {
            object(json!({
                "metadata": {"name": "local-1", "uid": "pv1", "resourceVersion": "7",
                             "labels": {"disk": "ssd"}, "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"},
                             "finalizers": ["kubernetes.io/pv-protection"]},
                "spec": {
                    "capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "local", "local": {"path": "/mnt/disks/ssd1"},
                    "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "shop", "name": "data-db-0",
                                 "uid": "pvc1", "resourceVersion": "5"},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["host-1"]}]}]}}
                },
                "status": {"phase": "Bound"}
            }))
        };
        let mut trimmed = volume();
        trim_persistent_volume(&mut trimmed);
        let view = k8sm_view::volume_view(&trimmed);
        assert_eq!(view, k8sm_view::volume_view(&volume()));
        assert_eq!(view.map(|v| v.claim_name), Some("data-db-0".to_owned()));
        let spec = trimmed.spec.as_ref().unwrap();
        assert_eq!(
            (
                spec.local.as_ref(),
                spec.capacity.as_ref(),
                trimmed.status.as_ref()
            ),
            (None, None, None)
        );
        assert_eq!(trimmed.metadata.labels, None);
    }

    /// A trimmed Node converts to the same view, allocatable resources included, and loses its
    /// images.
    #[test]
    fn a_trimmed_node_keeps_its_view() {
        let node: Node = object(json!({
            "metadata": {"name": "n1", "uid": "u1", "labels": {"kubernetes.io/hostname": "n1"},
                         "annotations": {"k8s.mesosphere.io/executor-id": "v1"}},
            "spec": {"unschedulable": true},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "conditions": [{"type": "Ready", "status": "True"}],
                "allocatable": {"cpu": "3800m", "memory": "15Gi", "pods": "110"},
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "images": [{"names": ["registry.example/app:1"], "sizeBytes": 123456789}]
            }
        }));
        let mut trimmed = node.clone();
        trim_node(&mut trimmed);
        let view = k8sm_view::node_view(&trimmed);
        assert_eq!(view, k8sm_view::node_view(&node));
        assert_eq!(view.allocatable.map(|a| a.cpu_millis), Some(3800));
        let status = trimmed.status.expect("status kept");
        assert_eq!((status.images, status.capacity), (None, None));
    }
}
