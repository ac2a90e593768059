//! What the stores keep of each object: only what `k8sm_view` reads, so that memory stays small at thousands of
//! nodes and tens of thousands of pods (docs/design.md §8). Every trim keeps the object's view unchanged (see the tests).

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

/// Nodes: keep addresses, conditions and allocatable resources; drop images, volumes and daemon endpoints.
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

/// PersistentVolumes: the claim each is bound to and its node affinity (what may pin the claim's pods to a node);
/// its source, capacity, labels and status go.
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

/// Pod controllers: the planner reads their identity, controller reference, deletion and desired replicas. The pod
/// template (often most of the object), labels, annotations and status go.
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

/// A controller whose `spec.replicas` is its desired count: keep that, `spec.minReadySeconds` and the identity,
/// nothing else.
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

/// A ReplicaSet: what [`trim_replicated`] keeps, and its revision (which of a Deployment's ReplicaSets is the newest).
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

/// A StatefulSet: what [`trim_replicated`] keeps, and what tells whether its controller is replacing pods
/// (`k8sm_view::stateful_set_view`): its generation, update strategy, and revisions and counts of its status.
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

/// A Deployment: its desired count, what tells whether its controller is replacing pods and whether its last rollout
/// is complete (`k8sm_view::deployment_view`): its generation, whether it is paused, the observed generation, pod
/// counts, and progress and availability conditions of its status; and what a surge move needs: its strategy and
/// k8sm's annotations.
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

/// Jobs: a Job's pods wait for completion, which the planner reads from the pods; nothing of the Job but its
/// identity is read.
pub(crate) fn trim_job(job: &mut Job) {
    trim_owner_meta(&mut job.metadata);
    job.spec = None;
    job.status = None;
}

#[cfg(test)]
#[path = "trim_tests.rs"]
mod tests;
