//! Lists of observed objects → the planner's [`ClusterView`]: plain field reads, no decisions.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use k8sm_api::ExecutorUpgradePolicy;
use k8sm_planner::{ClusterView, InFlightEviction};

use crate::node::node_view;
use crate::owner_views::OwnerViews;
use crate::pdb::pdb_view;
use crate::pin::volume_view;
use crate::pod::PodSource;
use crate::policy::policy_view;

/// Everything the planner reads, as lists of objects: from the controller's reflector stores, or from one-shot
/// `list` calls (the kubectl plugin), so that both plan over the same conversion. Pods are [`Pod`]s, or any type
/// that gives their view (the controller's cached pods, which keep the view they were converted to).
pub struct Objects<'a, P = Pod> {
    pub nodes: &'a [Arc<Node>],
    /// Every pod, bound to a node or not: the planner infers the size of a controller of a kind it does not know
    /// from its pods, including replacements not scheduled yet.
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

/// Builds the planner's input from lists of objects and the controller's evictions not yet visible in them. `owners`
/// holds the owners' views of the last build (the controller keeps it from pass to pass; a one-shot list passes a
/// new one).
pub fn from_objects<P: PodSource>(
    objects: &Objects<'_, P>,
    owners: &mut OwnerViews,
    in_flight: Vec<InFlightEviction>,
) -> ClusterView {
    ClusterView {
        nodes: objects.nodes.iter().map(|n| node_view(n)).collect(),
        pods: objects.pods.iter().map(|p| p.pod_view()).collect(),
        owners: owners.views(objects),
        pdbs: objects.pdbs.iter().map(|p| pdb_view(p)).collect(),
        policies: objects.policies.iter().map(|p| policy_view(p)).collect(),
        in_flight,
        // The controller's memory, not an object: it sets them itself.
        observed_sizes: Default::default(),
        volumes: objects
            .persistent_volumes
            .iter()
            .filter_map(|v| volume_view(v))
            .collect(),
        // A flag of the controller's, not an object.
        pace_by_room: false,
    }
}

#[cfg(test)]
#[path = "objects_tests.rs"]
mod tests;
