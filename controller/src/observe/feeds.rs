//! Caches fed by hand instead of by watches: the replay harness's input. Each event is trimmed as
//! the watch trims it and applied as the reflector applies it, so the stores hold what the
//! controller's would.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Resource;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher::Event;

use k8sm_api::ExecutorUpgradePolicy;

use crate::observe::cached_pod::CachedPod;
use crate::observe::deliveries::Deliveries;
use crate::observe::mirror::{Mirror, Mirrored, Mirrors};
use crate::observe::pod_store::{PodWriter, pod_store};
use crate::observe::stores::Stores;
use crate::observe::trim::{
    trim_deployment, trim_meta, trim_node, trim_replica_set, trim_stateful_set,
};
use crate::observe::watches::WatchHealth;

/// The writing ends of [`Stores::fed`]'s caches, for the kinds a replayed fleet holds. The other
/// kinds' caches stay empty and complete.
pub struct Feeds {
    nodes: Writer<Node>,
    pods: PodWriter,
    deployments: Writer<Deployment>,
    replica_sets: Writer<ReplicaSet>,
    stateful_sets: Writer<StatefulSet>,
    pdbs: Writer<PodDisruptionBudget>,
    policies: Writer<ExecutorUpgradePolicy>,
    mirrors: Mirrors,
}

impl Stores {
    /// Caches that no watch feeds: [`Feeds`] does.
    pub fn fed() -> (Self, Feeds) {
        let (nodes, node_writer) = reflector::store();
        let (pods, pod_writer) = pod_store();
        let (deployments, deployment_writer) = reflector::store();
        let (replica_sets, replica_set_writer) = reflector::store();
        let (stateful_sets, stateful_set_writer) = reflector::store();
        let (pdbs, pdb_writer) = reflector::store();
        let (policies, policy_writer) = reflector::store();
        let mirrors = Mirrors::default();
        let stores = Self {
            nodes,
            pods,
            deployments,
            replica_sets,
            replication_controllers: reflector::store().0,
            stateful_sets,
            jobs: reflector::store().0,
            pdbs,
            policies,
            persistent_volumes: reflector::store().0,
            health: WatchHealth::default(),
            deliveries: Deliveries::default(),
            pods_path: CachedPod::url_path(&(), None),
            mirrors: mirrors.clone(),
        };
        let feeds = Feeds {
            nodes: node_writer,
            pods: pod_writer,
            deployments: deployment_writer,
            replica_sets: replica_set_writer,
            stateful_sets: stateful_set_writer,
            pdbs: pdb_writer,
            policies: policy_writer,
            mirrors,
        };
        (stores, feeds)
    }
}

impl Feeds {
    pub fn node(&mut self, event: Event<Node>) {
        apply(&self.mirrors.nodes, &mut self.nodes, event, trim_node);
    }

    /// A pod as the watch delivers it: the JSON of a Pod, parsed into the cache's own type.
    pub fn pod(&mut self, event: Event<CachedPod>) {
        let pods = &mut self.pods;
        self.mirrors.pods.apply(&event, |event| pods.apply(event));
    }

    pub fn deployment(&mut self, event: Event<Deployment>) {
        apply(
            &self.mirrors.owners.deployments,
            &mut self.deployments,
            event,
            trim_deployment,
        );
    }

    pub fn replica_set(&mut self, event: Event<ReplicaSet>) {
        apply(
            &self.mirrors.owners.replica_sets,
            &mut self.replica_sets,
            event,
            trim_replica_set,
        );
    }

    pub fn stateful_set(&mut self, event: Event<StatefulSet>) {
        apply(
            &self.mirrors.owners.stateful_sets,
            &mut self.stateful_sets,
            event,
            trim_stateful_set,
        );
    }

    pub fn pdb(&mut self, event: Event<PodDisruptionBudget>) {
        apply(&self.mirrors.pdbs, &mut self.pdbs, event, trim_meta);
    }

    pub fn policy(&mut self, event: Event<ExecutorUpgradePolicy>) {
        self.policies
            .apply_watcher_event(&trimmed(event, trim_meta));
    }

    /// Ends each cache's first list: what was given as `InitApply` becomes its content, as at the
    /// end of a watch's first list.
    pub fn listed(&mut self) {
        let mirrors = &self.mirrors;
        mirrors
            .nodes
            .apply(&Event::InitDone, |e| self.nodes.apply_watcher_event(e));
        mirrors.pods.apply(&Event::InitDone, |e| self.pods.apply(e));
        let owners = &mirrors.owners;
        owners.deployments.apply(&Event::InitDone, |e| {
            self.deployments.apply_watcher_event(e)
        });
        owners.replica_sets.apply(&Event::InitDone, |e| {
            self.replica_sets.apply_watcher_event(e)
        });
        owners.stateful_sets.apply(&Event::InitDone, |e| {
            self.stateful_sets.apply_watcher_event(e)
        });
        mirrors
            .pdbs
            .apply(&Event::InitDone, |e| self.pdbs.apply_watcher_event(e));
        self.policies.apply_watcher_event(&Event::InitDone);
    }
}

/// Applies `event`, trimmed, to the cache and its mirror, as the watch does.
fn apply<K, V: Mirrored>(
    mirror: &Mirror<K, V>,
    writer: &mut Writer<K>,
    event: Event<K>,
    trim: fn(&mut K),
) where
    K: Resource + Clone,
    K::DynamicType: Clone + Eq + std::hash::Hash + Default,
{
    mirror.apply(&trimmed(event, trim), |e| writer.apply_watcher_event(e));
}

/// `event` with its object trimmed, as the watch trims it.
fn trimmed<K>(event: Event<K>, trim: fn(&mut K)) -> Event<K> {
    match event {
        Event::Apply(mut object) => {
            trim(&mut object);
            Event::Apply(object)
        }
        Event::InitApply(mut object) => {
            trim(&mut object);
            Event::InitApply(object)
        }
        other => other,
    }
}
