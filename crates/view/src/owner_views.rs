//! Owner objects → their shared views, converted once per version of each object: the controller
//! builds a view every pass, and of a large fleet's thousands of owners almost none changed since
//! the last (docs/decisions/0006-controller-memory.md). A store replaces an object's [`Arc`] for
//! each watch event and never changes it in place, so the `Arc`'s address stands for one version
//! while it is held: views of the objects seen in the last build are found again by it and shared,
//! and the planner reads memory it read before.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ReplicationController;

use k8sm_planner::OwnerView;

use crate::objects::Objects;
use crate::owner::{
    deployment_view, job_view, replica_set_view, replication_controller_view, stateful_set_view,
};

/// The owners' views of the last build, per kind. A default value keeps nothing: each build
/// converts every owner (what a one-shot list, such as the plugin's, needs).
#[derive(Default)]
pub struct OwnerViews {
    deployments: Kept<Deployment>,
    replica_sets: Kept<ReplicaSet>,
    replication_controllers: Kept<ReplicationController>,
    stateful_sets: Kept<StatefulSet>,
    jobs: Kept<Job>,
}

impl OwnerViews {
    /// The views of every owner in `objects`, reusing those of the objects seen in the last call;
    /// what is kept is then exactly this call's objects.
    pub(crate) fn views<P>(&mut self, objects: &Objects<'_, P>) -> Vec<Arc<OwnerView>> {
        let mut views = Vec::with_capacity(
            objects.deployments.len()
                + objects.replica_sets.len()
                + objects.replication_controllers.len()
                + objects.stateful_sets.len()
                + objects.jobs.len(),
        );
        self.deployments
            .views(objects.deployments, deployment_view, &mut views);
        self.replica_sets
            .views(objects.replica_sets, replica_set_view, &mut views);
        self.replication_controllers.views(
            objects.replication_controllers,
            replication_controller_view,
            &mut views,
        );
        self.stateful_sets
            .views(objects.stateful_sets, stateful_set_view, &mut views);
        self.jobs.views(objects.jobs, job_view, &mut views);
        views
    }
}

/// Keys are addresses, made by the allocator: nothing to defend against, so a fast fixed-seed hash.
type ByAddress<V> = HashMap<usize, V, foldhash::fast::FixedState>;

/// Objects of one kind with their views, by the address of the object (held, so that the address is
/// not reused while its view is kept).
struct Kept<K> {
    views: ByAddress<(Arc<K>, Arc<OwnerView>)>,
    /// The map of the build before last, emptied: the next build fills it, so that a pass
    /// allocates no map.
    spare: ByAddress<(Arc<K>, Arc<OwnerView>)>,
}

impl<K> Default for Kept<K> {
    fn default() -> Self {
        Self {
            views: ByAddress::default(),
            spare: ByAddress::default(),
        }
    }
}

impl<K> Kept<K> {
    fn views(
        &mut self,
        objects: &[Arc<K>],
        convert: fn(&K) -> OwnerView,
        out: &mut Vec<Arc<OwnerView>>,
    ) {
        let mut next = std::mem::take(&mut self.spare);
        next.reserve(objects.len());
        for object in objects {
            let address = Arc::as_ptr(object).addr();
            let view = match self.views.remove(&address) {
                Some((_, view)) => view,
                None => Arc::new(convert(object)),
            };
            out.push(Arc::clone(&view));
            next.insert(address, (Arc::clone(object), view));
        }
        // What is left of the last build is of objects gone: released here.
        self.spare = std::mem::replace(&mut self.views, next);
        self.spare.clear();
    }
}

#[cfg(test)]
mod tests {
    //! Tests of `OwnerViews`: an owner's view is converted once per version of the object, and only
    //! the objects of the last build are kept.

    use serde_json::json;

    use super::*;

    fn replica_set(name: &str, replicas: i32) -> Arc<ReplicaSet> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}")},
                "spec": {"replicas": replicas, "selector": {}}
            }))
            .expect("a valid ReplicaSet"),
        )
    }

    fn views(kept: &mut OwnerViews, replica_sets: &[Arc<ReplicaSet>]) -> Vec<Arc<OwnerView>> {
        kept.views(&Objects::<()> {
            replica_sets,
            ..Objects::default()
        })
    }

    #[test]
    fn an_unchanged_object_keeps_its_view_and_a_new_version_gets_a_new_one() {
        let mut kept = OwnerViews::default();
        let (web, db) = (replica_set("web", 3), replica_set("db", 1));
        let first = views(&mut kept, &[Arc::clone(&web), Arc::clone(&db)]);
        assert_eq!(first[0].desired, Some(3));
        // The store replaces an object's Arc for each watch event: web scaled to 5 is a new object.
        let web_scaled = replica_set("web", 5);
        let second = views(&mut kept, &[Arc::clone(&db), Arc::clone(&web_scaled)]);
        assert!(Arc::ptr_eq(&second[0], &first[1]), "db did not change");
        assert!(!Arc::ptr_eq(&second[1], &first[0]));
        assert_eq!(second[1].desired, Some(5));
        // Views of the same objects in a new build are the same views.
        let third = views(&mut kept, &[Arc::clone(&db), Arc::clone(&web_scaled)]);
        assert!(Arc::ptr_eq(&third[0], &second[0]) && Arc::ptr_eq(&third[1], &second[1]));
    }

    #[test]
    fn an_object_gone_is_not_kept() {
        let mut kept = OwnerViews::default();
        let web = replica_set("web", 3);
        views(&mut kept, &[Arc::clone(&web)]);
        assert_eq!(Arc::strong_count(&web), 2, "held while its view is kept");
        assert!(views(&mut kept, &[]).is_empty());
        assert_eq!(
            Arc::strong_count(&web),
            1,
            "released once gone from the store"
        );
    }

    #[test]
    fn a_fresh_keeper_converts_every_owner() {
        let web = replica_set("web", 3);
        let one = views(&mut OwnerViews::default(), &[Arc::clone(&web)]);
        let two = views(&mut OwnerViews::default(), &[Arc::clone(&web)]);
        assert!(!Arc::ptr_eq(&one[0], &two[0]));
        assert_eq!(one, two);
    }
}
