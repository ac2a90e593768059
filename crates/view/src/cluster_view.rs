//! Lists of observed objects → the planner's [`ClusterView`]: plain field reads, no decisions.

use k8sm_planner::{ClusterView, InFlightEviction};

use crate::node::node_view;
use crate::objects::Objects;
use crate::owner_views::OwnerViews;
use crate::pdb::pdb_view;
use crate::pin::volume_view;
use crate::pod::PodSource;
use crate::policy::policy_view;

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
#[path = "cluster_view_tests.rs"]
mod tests;
