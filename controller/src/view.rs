//! Observed objects → the planner's [`ClusterView`]: plain field reads, no decisions.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use k8sm_api::{ExecutorUpgradePolicy, keys};
use k8sm_planner::{
    ClusterView, ControllerRef, InFlightEviction, NodeView, OwnerKind, OwnerView, PdbView,
    PodPhase, PodView, PolicyView,
};

use crate::stores::Stores;
use crate::time::from_timestamp;

/// Everything the planner reads, as lists of objects: from the controller's stores, or from one-shot `list` calls
/// (the kubectl plugin), so that both plan over the same conversion.
#[derive(Default)]
pub struct Objects<'a> {
    pub nodes: &'a [Arc<Node>],
    pub pods: &'a [Arc<Pod>],
    pub replica_sets: &'a [Arc<ReplicaSet>],
    pub replication_controllers: &'a [Arc<ReplicationController>],
    pub stateful_sets: &'a [Arc<StatefulSet>],
    pub jobs: &'a [Arc<Job>],
    pub pdbs: &'a [Arc<PodDisruptionBudget>],
    pub policies: &'a [Arc<ExecutorUpgradePolicy>],
}

/// Builds the planner's input from the stores' current contents.
pub fn build(stores: &Stores, in_flight: Vec<InFlightEviction>) -> ClusterView {
    from_objects(
        &Objects {
            nodes: &stores.nodes.state(),
            pods: &stores.pods.state(),
            replica_sets: &stores.replica_sets.state(),
            replication_controllers: &stores.replication_controllers.state(),
            stateful_sets: &stores.stateful_sets.state(),
            jobs: &stores.jobs.state(),
            pdbs: &stores.pdbs.state(),
            policies: &stores.policies.state(),
        },
        in_flight,
    )
}

/// Builds the planner's input from lists of objects.
pub fn from_objects(objects: &Objects<'_>, in_flight: Vec<InFlightEviction>) -> ClusterView {
    let mut owners: Vec<OwnerView> = Vec::new();
    owners.extend(objects.replica_sets.iter().map(|rs| {
        owner(
            OwnerKind::ReplicaSet,
            &rs.metadata,
            rs.spec.as_ref().and_then(|s| s.replicas),
        )
    }));
    owners.extend(objects.replication_controllers.iter().map(|rc| {
        owner(
            OwnerKind::ReplicationController,
            &rc.metadata,
            rc.spec.as_ref().and_then(|s| s.replicas),
        )
    }));
    owners.extend(objects.stateful_sets.iter().map(|sts| {
        owner(
            OwnerKind::StatefulSet,
            &sts.metadata,
            sts.spec.as_ref().and_then(|s| s.replicas),
        )
    }));
    owners.extend(objects.jobs.iter().map(|job| job_owner(job)));
    ClusterView {
        nodes: objects.nodes.iter().map(|n| node_view(n)).collect(),
        pods: objects
            .pods
            .iter()
            .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
            .map(|p| pod_view(p))
            .collect(),
        owners,
        pdbs: objects.pdbs.iter().map(|p| pdb_view(p)).collect(),
        policies: objects.policies.iter().map(|p| policy_view(p)).collect(),
        in_flight,
    }
}

fn annotation(meta: &ObjectMeta, key: &str) -> Option<String> {
    meta.annotations.as_ref()?.get(key).cloned()
}

pub fn node_view(node: &Node) -> NodeView {
    let meta = &node.metadata;
    let labels = node.labels().clone();
    let spec = node.spec.as_ref();
    let status = node.status.as_ref();
    NodeView {
        name: node.name_any(),
        incompatible_label: labels.contains_key(keys::INCOMPATIBLE_EXECUTOR_LABEL),
        labels,
        executor_id: annotation(meta, keys::EXECUTOR_ID_ANNOTATION),
        incompatible_since: annotation(meta, keys::INCOMPATIBLE_EXECUTOR_ANNOTATION),
        has_k8sm_taint: spec.and_then(|s| s.taints.as_ref()).is_some_and(|taints| {
            taints.iter().any(|t| {
                t.key == keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY
                    && t.effect == keys::INCOMPATIBLE_EXECUTOR_TAINT_EFFECT
            })
        }),
        draining_since: annotation(meta, keys::DRAINING_ANNOTATION),
        kamikaze: annotation(meta, keys::KAMIKAZE_ANNOTATION),
        kamikaze_executor_id: annotation(meta, keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION),
        cordoned_by_k8sm: annotation(meta, keys::CORDONED_BY_ANNOTATION).as_deref()
            == Some(keys::CORDONED_BY_VALUE),
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        internal_ip: status
            .and_then(|s| s.addresses.as_ref())
            .and_then(|addresses| addresses.iter().find(|a| a.type_ == "InternalIP"))
            .map(|a| a.address.clone()),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
    }
}

pub fn pod_view(pod: &Pod) -> PodView {
    let meta = &pod.metadata;
    let status = pod.status.as_ref();
    let annotations: BTreeMap<String, String> = pod.annotations().clone();
    PodView {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
        node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        labels: pod.labels().clone(),
        mirror: annotations.contains_key("kubernetes.io/config.mirror"),
        annotations,
        controller: meta
            .owner_references
            .as_ref()
            .and_then(|refs| refs.iter().find(|r| r.controller == Some(true)))
            .map(|r| ControllerRef {
                kind: r.kind.clone(),
                name: r.name.clone(),
                uid: r.uid.clone(),
            }),
        phase: match status.and_then(|s| s.phase.as_deref()) {
            Some("Pending") => PodPhase::Pending,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            Some("Unknown") => PodPhase::Unknown,
            _ => PodPhase::Running,
        },
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        terminating: meta.deletion_timestamp.is_some(),
        created: meta
            .creation_timestamp
            .as_ref()
            .map(|t| from_timestamp(&t.0)),
    }
}

fn owner(kind: OwnerKind, meta: &ObjectMeta, replicas: Option<i32>) -> OwnerView {
    OwnerView {
        kind,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        // The apiserver defaults replicas to 1; a negative count cannot be stored.
        desired: Some(replicas.unwrap_or(1).max(0) as u32),
        exists: meta.deletion_timestamp.is_none(),
    }
}

fn job_owner(job: &Job) -> OwnerView {
    OwnerView {
        desired: None,
        ..owner(OwnerKind::Job, &job.metadata, None)
    }
}

fn pdb_view(pdb: &PodDisruptionBudget) -> PdbView {
    PdbView {
        namespace: pdb.namespace().unwrap_or_default(),
        name: pdb.name_any(),
        selector: pdb.spec.as_ref().and_then(|s| s.selector.clone()),
        disruptions_allowed: pdb
            .status
            .as_ref()
            .and_then(|s| s.disruptions_allowed)
            .unwrap_or(0),
    }
}

fn policy_view(policy: &ExecutorUpgradePolicy) -> PolicyView {
    PolicyView {
        name: policy.name_any(),
        generation: policy.metadata.generation,
        spec: policy.spec.clone(),
    }
}
