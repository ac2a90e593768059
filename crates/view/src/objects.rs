//! The lists of observed objects that the planner's input is built from.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use k8sm_api::ExecutorUpgradePolicy;

/// Everything the planner reads, as lists of objects: from the controller's reflector stores, or
/// from one-shot `list` calls (the kubectl plugin), so that both plan over the same conversion.
/// Pods are [`Pod`]s, or any type that gives their view (the controller's cached pods, which keep
/// the view they were converted to).
pub struct Objects<'a, P = Pod> {
    pub nodes: &'a [Arc<Node>],
    /// Every pod, bound to a node or not: the planner infers the size of a controller of a kind it
    /// does not know from its pods, including replacements not scheduled yet.
    pub pods: &'a [Arc<P>],
    pub deployments: &'a [Arc<Deployment>],
    pub replica_sets: &'a [Arc<ReplicaSet>],
    pub replication_controllers: &'a [Arc<ReplicationController>],
    pub stateful_sets: &'a [Arc<StatefulSet>],
    pub jobs: &'a [Arc<Job>],
    pub pdbs: &'a [Arc<PodDisruptionBudget>],
    pub policies: &'a [Arc<ExecutorUpgradePolicy>],
    /// PersistentVolumes: those bound to a claim with a node affinity may pin its pods to a node.
    pub persistent_volumes: &'a [Arc<PersistentVolume>],
}

impl<P> Default for Objects<'_, P> {
    fn default() -> Self {
        Self {
            nodes: &[],
            pods: &[],
            deployments: &[],
            replica_sets: &[],
            replication_controllers: &[],
            stateful_sets: &[],
            jobs: &[],
            pdbs: &[],
            policies: &[],
            persistent_volumes: &[],
        }
    }
}
