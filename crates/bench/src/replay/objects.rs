//! The objects of a replayed fleet as the apiserver would send them: JSON built from the fleet's
//! compact truth, so that the harness itself holds a few bytes per pod and the process's memory is
//! the controller's caches'.

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};

use k8sm_api::{ExecutorUpgradePolicy, MaxConcurrentNodes, keys};
use k8sm_controller::CachedPod;

pub const OLD_EXECUTOR: &str = "sha256:0ld";
pub const NEW_EXECUTOR: &str = "sha256:new";
const NODE_LABEL: (&str, &str) = ("replay", "true");

/// Where a node is in its upgrade.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeStage {
    /// Marked incompatible, not admitted.
    Old,
    /// Admitted into a drain slot.
    Draining,
    /// Told to restart.
    Kamikaze,
    /// Running the new executor, k8sm's marks still on.
    Restarted,
    /// Completed: k8sm's marks gone.
    Upgraded,
}

/// A node as the fleet knows it.
pub struct NodeShape<'a> {
    pub index: usize,
    pub stage: NodeStage,
    pub marked_at: DateTime<Utc>,
    pub draining_since: Option<DateTime<Utc>>,
    pub cordoned: bool,
    /// The drain-progress annotation as k8sm last wrote it.
    pub progress: Option<&'a str>,
    pub kamikaze_at: Option<DateTime<Utc>>,
}

/// Where a pod is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodStage {
    /// Not scheduled yet.
    Pending,
    /// On a node, not Ready yet.
    Starting,
    Ready,
    /// Evicted: deletion timestamp set, still on its node.
    Terminating,
}

/// One owner: a Deployment with one ReplicaSet, and a PodDisruptionBudget at its bound.
pub struct OwnerShape<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub replicas: u32,
    pub ready: u32,
    /// The budget's `minAvailable`.
    pub min_available: u32,
}

pub struct PodShape<'a> {
    pub owner: &'a OwnerShape<'a>,
    /// Where the fleet keeps it: with `serial`, its UID.
    pub slot: u32,
    pub serial: u32,
    pub node: Option<&'a str>,
    pub stage: PodStage,
}

pub fn node_name(index: usize) -> String {
    format!("node-{index:05}")
}

pub fn node(shape: &NodeShape<'_>, resource_version: u64) -> Node {
    let index = shape.index;
    let name = node_name(index);
    let stage = shape.stage;
    let mut annotations = serde_json::Map::new();
    let mut labels = serde_json::Map::new();
    labels.insert(NODE_LABEL.0.into(), NODE_LABEL.1.into());
    labels.insert("kubernetes.io/hostname".into(), name.clone().into());
    let restarted = matches!(stage, NodeStage::Restarted | NodeStage::Upgraded);
    let executor = if restarted {
        NEW_EXECUTOR
    } else {
        OLD_EXECUTOR
    };
    annotations.insert(keys::EXECUTOR_ID_ANNOTATION.into(), executor.into());
    let mut taints = Vec::new();
    if stage != NodeStage::Upgraded {
        let marked_at = shape.marked_at.to_rfc3339();
        annotations.insert(
            keys::INCOMPATIBLE_EXECUTOR_ANNOTATION.into(),
            marked_at.into(),
        );
        annotations.insert(
            keys::MARKED_BY_ANNOTATION.into(),
            keys::MARKED_BY_VALUE.into(),
        );
        labels.insert(
            keys::INCOMPATIBLE_EXECUTOR_LABEL.into(),
            keys::INCOMPATIBLE_EXECUTOR_LABEL_VALUE.into(),
        );
        taints.push(json!({
            "key": keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY,
            "effect": keys::INCOMPATIBLE_EXECUTOR_TAINT_EFFECT,
        }));
    }
    if let Some(since) = shape.draining_since {
        annotations.insert(keys::DRAINING_ANNOTATION.into(), since.to_rfc3339().into());
    }
    if let Some(progress) = shape.progress {
        annotations.insert(keys::DRAIN_PROGRESS_ANNOTATION.into(), progress.into());
    }
    if shape.cordoned {
        annotations.insert(
            keys::CORDONED_BY_ANNOTATION.into(),
            keys::CORDONED_BY_VALUE.into(),
        );
        taints.push(json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}));
    }
    if let Some(at) = shape.kamikaze_at {
        annotations.insert(keys::KAMIKAZE_ANNOTATION.into(), at.to_rfc3339().into());
        annotations.insert(
            keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION.into(),
            OLD_EXECUTOR.into(),
        );
        annotations.insert(keys::KAMIKAZE_TARGET_ANNOTATION.into(), NEW_EXECUTOR.into());
    }
    let cordoned = shape.cordoned;
    typed(json!({
        "metadata": {
            "name": name,
            "uid": format!("node-uid-{index}"),
            "resourceVersion": resource_version.to_string(),
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {"unschedulable": cordoned, "taints": taints},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": format!("10.{}.{}.{}", index >> 16, (index >> 8) & 255, index & 255)},
                {"type": "Hostname", "address": name},
            ],
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "DiskPressure", "status": "False"},
                {"type": "PIDPressure", "status": "False"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            ],
            "nodeInfo": {"kubeletVersion": "v1.36.1", "containerRuntimeVersion": "containerd://2.1.0"},
        },
    }))
}

fn labels(owner: &OwnerShape<'_>) -> Value {
    json!({"app": owner.name, "pod-template-hash": "5d8f7c9b6"})
}

fn container() -> Value {
    json!({
        "name": "app",
        "image": "registry.example/app:1.0",
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5},
    })
}

fn template(owner: &OwnerShape<'_>) -> Value {
    json!({
        "metadata": {"labels": labels(owner)},
        "spec": {"containers": [container()], "terminationGracePeriodSeconds": 30},
    })
}

pub fn deployment(owner: &OwnerShape<'_>, resource_version: u64) -> Deployment {
    typed(json!({
        "metadata": {
            "name": owner.name,
            "namespace": owner.namespace,
            "uid": format!("deploy-uid-{}-{}", owner.namespace, owner.name),
            "resourceVersion": resource_version.to_string(),
            "generation": 1,
            "annotations": {"deployment.kubernetes.io/revision": "1"},
        },
        "spec": {
            "replicas": owner.replicas,
            "selector": {"matchLabels": {"app": owner.name}},
            "template": template(owner),
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
        },
        "status": {
            "observedGeneration": 1,
            "replicas": owner.replicas,
            "updatedReplicas": owner.replicas,
            "readyReplicas": owner.ready,
            "availableReplicas": owner.ready,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            ],
        },
    }))
}

fn replica_set_name(owner: &OwnerShape<'_>) -> String {
    format!("{}-5d8f7c9b6", owner.name)
}

fn replica_set_uid(owner: &OwnerShape<'_>) -> String {
    format!("rs-uid-{}-{}", owner.namespace, owner.name)
}

pub fn replica_set(owner: &OwnerShape<'_>, resource_version: u64) -> ReplicaSet {
    typed(json!({
        "metadata": {
            "name": replica_set_name(owner),
            "namespace": owner.namespace,
            "uid": replica_set_uid(owner),
            "resourceVersion": resource_version.to_string(),
            "generation": 1,
            "labels": labels(owner),
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": owner.name,
                "uid": format!("deploy-uid-{}-{}", owner.namespace, owner.name),
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "replicas": owner.replicas,
            "selector": {"matchLabels": labels(owner)},
            "template": template(owner),
        },
        "status": {
            "observedGeneration": 1,
            "replicas": owner.replicas,
            "fullyLabeledReplicas": owner.replicas,
            "readyReplicas": owner.ready,
            "availableReplicas": owner.ready,
        },
    }))
}

pub fn pdb(owner: &OwnerShape<'_>, resource_version: u64) -> PodDisruptionBudget {
    typed(json!({
        "metadata": {
            "name": owner.name,
            "namespace": owner.namespace,
            "uid": format!("pdb-uid-{}-{}", owner.namespace, owner.name),
            "resourceVersion": resource_version.to_string(),
            "generation": 1,
        },
        "spec": {
            "minAvailable": owner.min_available,
            "selector": {"matchLabels": {"app": owner.name}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
        "status": {
            "observedGeneration": 1,
            "currentHealthy": owner.ready,
            "desiredHealthy": owner.min_available,
            "expectedPods": owner.replicas,
            "disruptionsAllowed": owner.ready.saturating_sub(owner.min_available),
        },
    }))
}

fn pod_uid(slot: u32, serial: u32) -> String {
    format!("pod-{slot}-{serial}")
}

/// The slot and serial of the pod with this UID.
pub fn pod_of_uid(uid: &str) -> Option<(u32, u32)> {
    let (slot, serial) = uid.strip_prefix("pod-")?.split_once('-')?;
    Some((slot.parse().ok()?, serial.parse().ok()?))
}

/// The pod as its watch event's bytes would carry it, parsed as the controller's pod watch parses
/// it.
pub fn pod(shape: &PodShape<'_>, resource_version: u64, now: DateTime<Utc>) -> CachedPod {
    let owner = shape.owner;
    let name = format!("{}-{:x}", replica_set_name(owner), shape.serial);
    let now = now.to_rfc3339();
    let ready = if shape.stage == PodStage::Ready {
        "True"
    } else {
        "False"
    };
    let mut metadata = json!({
        "name": name,
        "generateName": format!("{}-", replica_set_name(owner)),
        "namespace": owner.namespace,
        "uid": pod_uid(shape.slot, shape.serial),
        "resourceVersion": resource_version.to_string(),
        "creationTimestamp": now,
        "labels": labels(owner),
        "ownerReferences": [{
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": replica_set_name(owner),
            "uid": replica_set_uid(owner),
            "controller": true,
            "blockOwnerDeletion": true,
        }],
    });
    if shape.stage == PodStage::Terminating {
        metadata["deletionTimestamp"] = now.clone().into();
        metadata["deletionGracePeriodSeconds"] = 30.into();
    }
    let mut spec = json!({
        "containers": [container()],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
    });
    let status = match shape.node {
        Some(node) => {
            spec["nodeName"] = node.into();
            json!({
                "phase": "Running",
                "hostIP": "10.0.0.1",
                "podIP": "10.244.0.1",
                "startTime": now,
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Initialized", "status": "True"},
                    {"type": "ContainersReady", "status": ready},
                    {"type": "Ready", "status": ready},
                ],
                "containerStatuses": [{
                    "name": "app",
                    "image": "registry.example/app:1.0",
                    "imageID": "registry.example/app@sha256:0000",
                    "containerID": "containerd://0000",
                    "ready": ready == "True",
                    "restartCount": 0,
                    "started": true,
                    "state": {"running": {"startedAt": now}},
                }],
            })
        }
        None => json!({
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }),
    };
    let bytes = serde_json::to_vec(&json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }))
    .expect("a pod serializes");
    serde_json::from_slice(&bytes).expect("the controller parses a pod")
}

pub fn policy(
    max_concurrent_nodes: MaxConcurrentNodes,
    resource_version: u64,
) -> ExecutorUpgradePolicy {
    typed(json!({
        "apiVersion": format!("{}/{}", keys::GROUP, keys::VERSION),
        "kind": "ExecutorUpgradePolicy",
        "metadata": {
            "name": "replay",
            "uid": "policy-uid",
            "resourceVersion": resource_version.to_string(),
            "generation": 1,
            "finalizers": [keys::POLICY_FINALIZER],
        },
        "spec": {
            "targetExecutorId": NEW_EXECUTOR,
            "nodeSelector": {"matchLabels": {NODE_LABEL.0: NODE_LABEL.1}},
            "maxConcurrentNodes": serde_json::to_value(max_concurrent_nodes).expect("serializes"),
            "ownerHealthThreshold": 90,
        },
    }))
}

fn typed<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a replayed object has the shape of its kind")
}
