//! The controller's stores → the planner's [`ClusterView`], through the conversions it shares with
//! the kubectl plugin ([`k8sm_view`]).

use std::sync::Arc;

use k8sm_planner::{ClusterView, NodeView, OwnerView, PdbView, PodView};
use k8sm_view::{policy_view, volume_view};

use crate::observe::mirror::Kept;
use crate::observe::stores::Stores;

/// What a view kept from pass to pass holds besides itself: where each of the mirrored kinds'
/// objects is in its vectors.
#[derive(Default)]
pub struct KeptView {
    owners: Kept<Arc<OwnerView>>,
    pods: Kept<Arc<PodView>>,
    nodes: Kept<NodeView>,
    pdbs: Kept<PdbView>,
}

/// Brings `view` up to date with the stores' current contents: the pods, nodes, budgets and owners
/// that changed since the last build, and the policies and volumes (a few) converted again.
pub fn build(stores: &Stores, kept: &mut KeptView, view: &mut ClusterView) {
    let mirrors = &stores.mirrors;
    kept.pods
        .update(&mirrors.pods, || stores.pods.views(), &mut view.pods);
    kept.nodes
        .update_from_store(&mirrors.nodes, &stores.nodes, &mut view.nodes);
    kept.pdbs
        .update_from_store(&mirrors.pdbs, &stores.pdbs, &mut view.pdbs);
    let owners = &mirrors.owners;
    let kept_owners = &mut kept.owners;
    kept_owners.update_from_store(&owners.deployments, &stores.deployments, &mut view.owners);
    kept_owners.update_from_store(&owners.replica_sets, &stores.replica_sets, &mut view.owners);
    kept_owners.update_from_store(
        &owners.replication_controllers,
        &stores.replication_controllers,
        &mut view.owners,
    );
    kept_owners.update_from_store(
        &owners.stateful_sets,
        &stores.stateful_sets,
        &mut view.owners,
    );
    kept_owners.update_from_store(&owners.jobs, &stores.jobs, &mut view.owners);
    view.policies = stores
        .policies
        .state()
        .iter()
        .map(|p| policy_view(p))
        .collect();
    view.volumes = stores
        .persistent_volumes
        .state()
        .iter()
        .filter_map(|v| volume_view(v))
        .collect();
}
