//! The controller's stores → the planner's [`ClusterView`], through the conversion it shares with the kubectl plugin
//! ([`k8sm_view`]).

use k8sm_planner::{ClusterView, InFlightEviction};
use k8sm_view::{Objects, OwnerViews, from_objects};

use crate::stores::Stores;

/// Builds the planner's input from the stores' current contents. `owners` is kept from pass to pass: the owners that
/// did not change since the last build keep their views.
pub fn build(
    stores: &Stores,
    owners: &mut OwnerViews,
    in_flight: Vec<InFlightEviction>,
) -> ClusterView {
    from_objects(
        &Objects {
            nodes: &stores.nodes.state(),
            pods: &stores.pods.state(),
            deployments: &stores.deployments.state(),
            replica_sets: &stores.replica_sets.state(),
            replication_controllers: &stores.replication_controllers.state(),
            stateful_sets: &stores.stateful_sets.state(),
            jobs: &stores.jobs.state(),
            pdbs: &stores.pdbs.state(),
            policies: &stores.policies.state(),
            persistent_volumes: &stores.persistent_volumes.state(),
        },
        owners,
        in_flight,
    )
}
