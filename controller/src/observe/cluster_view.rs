//! The controller's stores → the planner's [`ClusterView`], through the conversion it shares with
//! the kubectl plugin ([`k8sm_view`]).

use std::sync::Arc;

use k8sm_planner::{ClusterView, NodeView, PdbView, PodView};
use k8sm_view::{Objects, OwnerViews, from_objects};

use crate::observe::cached_pod::CachedPod;
use crate::observe::mirror::Kept;
use crate::observe::stores::Stores;

/// What a view kept from pass to pass holds besides itself: the owners' views of the last pass, and
/// where each of the mirrored kinds' objects is in its vectors.
#[derive(Default)]
pub struct KeptView {
    owners: OwnerViews,
    pods: Kept<Arc<PodView>>,
    nodes: Kept<NodeView>,
    pdbs: Kept<PdbView>,
}

/// Brings `view` up to date with the stores' current contents: the pods, nodes and budgets that
/// changed since the last build, and the rest converted again (the owners that did not change keep
/// their views).
pub fn build(stores: &Stores, kept: &mut KeptView, view: &mut ClusterView) {
    let mirrors = &stores.mirrors;
    kept.pods
        .update(&mirrors.pods, || stores.pods.views(), &mut view.pods);
    kept.nodes
        .update_from_store(&mirrors.nodes, &stores.nodes, &mut view.nodes);
    kept.pdbs
        .update_from_store(&mirrors.pdbs, &stores.pdbs, &mut view.pdbs);
    let rest = from_objects(
        &Objects::<CachedPod> {
            deployments: &stores.deployments.state(),
            replica_sets: &stores.replica_sets.state(),
            replication_controllers: &stores.replication_controllers.state(),
            stateful_sets: &stores.stateful_sets.state(),
            jobs: &stores.jobs.state(),
            policies: &stores.policies.state(),
            persistent_volumes: &stores.persistent_volumes.state(),
            ..Objects::default()
        },
        &mut kept.owners,
        Vec::new(),
    );
    view.owners = rest.owners;
    view.policies = rest.policies;
    view.volumes = rest.volumes;
}
