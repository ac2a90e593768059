//! A kind's objects as the planner reads them, kept in the pass's own view from one pass to the
//! next: the watch's events, converted as they arrive, are applied to the view by the next pass, so
//! that a pass costs the objects that changed, not every object cached.
//!
//! The cache stays the truth. After a relist, or for a new reader, the kind's part of the view is
//! rebuilt from the cache (the owners' kinds share one vector); in between, it is brought up to
//! date with the latest version of each object that changed.
//! An event goes into the cache and into the mirror under the mirror's lock, so that a pass that
//! finds a change in the cache finds it in the view it builds next: the loop waits for its own
//! writes in the cache and then plans on the view.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Resource;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::Event;

use k8sm_planner::{NodeView, OwnerKind, OwnerView, PdbView, PodView};

use crate::observe::cached_pod::CachedPod;

/// Keys come from the apiserver, where tenants name their objects: a hash seeded per process.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A converted object, and what identifies it in its store (its namespace and name).
pub trait Mirrored: Clone {
    type Key: Eq + Hash;
    fn key(&self) -> Self::Key;
}

impl Mirrored for Arc<PodView> {
    type Key = (Arc<str>, Arc<str>);
    fn key(&self) -> Self::Key {
        (Arc::clone(&self.namespace), Arc::clone(&self.name))
    }
}

impl Mirrored for NodeView {
    type Key = String;
    fn key(&self) -> Self::Key {
        self.name.clone()
    }
}

impl Mirrored for PdbView {
    type Key = (String, String);
    fn key(&self) -> Self::Key {
        (self.namespace.clone(), self.name.clone())
    }
}

/// Owners of every kind share one vector in the view: the kind is in the key.
impl Mirrored for Arc<OwnerView> {
    type Key = (OwnerKind, String, String);
    fn key(&self) -> Self::Key {
        (self.kind.clone(), self.namespace.clone(), self.name.clone())
    }
}

/// The watch's side: records the latest version of each object changed since the reader last took
/// them.
pub struct Mirror<K, V: Mirrored> {
    pending: Arc<Mutex<Pending<V>>>,
    convert: fn(&K) -> V,
    /// Whether a view in the reader's vector is of this mirror's objects: those a relist replaces
    /// (a vector may hold the views of several kinds, each of its own mirror).
    holds: fn(&V) -> bool,
}

impl<K, V: Mirrored> Clone for Mirror<K, V> {
    fn clone(&self) -> Self {
        Self {
            pending: Arc::clone(&self.pending),
            convert: self.convert,
            holds: self.holds,
        }
    }
}

struct Pending<V: Mirrored> {
    /// The reader the changes are kept for (0: none yet).
    reader: u64,
    /// The store was replaced (a relist), or the reader is new: it reads the whole store, and
    /// changes until then are in it.
    resync: bool,
    /// Per object changed, its latest version (`None`: deleted).
    changes: Map<V::Key, Option<V>>,
}

pub type PodMirror = Mirror<CachedPod, Arc<PodView>>;
pub type NodeMirror = Mirror<Node, NodeView>;
pub type PdbMirror = Mirror<PodDisruptionBudget, PdbView>;
pub type OwnerMirror<K> = Mirror<K, Arc<OwnerView>>;

pub fn pods() -> PodMirror {
    Mirror::new(|pod: &CachedPod| k8sm_view::PodSource::pod_view(pod))
}

pub fn nodes() -> NodeMirror {
    Mirror::new(k8sm_view::node_view)
}

pub fn pdbs() -> PdbMirror {
    Mirror::new(k8sm_view::pdb_view)
}

/// The mirrors of the owners' kinds, whose views share the view's `owners`.
#[derive(Clone)]
pub struct OwnerMirrors {
    pub deployments: OwnerMirror<Deployment>,
    pub replica_sets: OwnerMirror<ReplicaSet>,
    pub replication_controllers: OwnerMirror<ReplicationController>,
    pub stateful_sets: OwnerMirror<StatefulSet>,
    pub jobs: OwnerMirror<Job>,
}

impl Default for OwnerMirrors {
    fn default() -> Self {
        Self {
            deployments: Mirror::of_kind(
                |o| Arc::new(k8sm_view::deployment_view(o)),
                |v| v.kind == OwnerKind::Deployment,
            ),
            replica_sets: Mirror::of_kind(
                |o| Arc::new(k8sm_view::replica_set_view(o)),
                |v| v.kind == OwnerKind::ReplicaSet,
            ),
            replication_controllers: Mirror::of_kind(
                |o| Arc::new(k8sm_view::replication_controller_view(o)),
                |v| v.kind == OwnerKind::ReplicationController,
            ),
            stateful_sets: Mirror::of_kind(
                |o| Arc::new(k8sm_view::stateful_set_view(o)),
                |v| v.kind == OwnerKind::StatefulSet,
            ),
            jobs: Mirror::of_kind(
                |o| Arc::new(k8sm_view::job_view(o)),
                |v| v.kind == OwnerKind::Job,
            ),
        }
    }
}

impl<K, V: Mirrored> Mirror<K, V> {
    /// The mirror of a kind whose views have a vector of their own.
    fn new(convert: fn(&K) -> V) -> Self {
        Self::of_kind(convert, |_| true)
    }

    /// The mirror of a kind whose views share a vector with others: `holds` tells its own.
    fn of_kind(convert: fn(&K) -> V, holds: fn(&V) -> bool) -> Self {
        Self {
            pending: Arc::new(Mutex::new(Pending {
                reader: 0,
                resync: true,
                changes: Map::default(),
            })),
            convert,
            holds,
        }
    }

    /// Applies `event` to the cache with `apply` and records it, both under the mirror's lock: a
    /// reader that takes the changes after the cache shows this event takes it too. Converted
    /// before the lock is taken.
    pub fn apply(&self, event: &Event<K>, apply: impl FnOnce(&Event<K>)) {
        let change = match event {
            Event::Apply(object) => {
                let view = (self.convert)(object);
                Some((view.key(), Some(view)))
            }
            Event::Delete(object) => Some(((self.convert)(object).key(), None)),
            // The store keeps what it had until the list is complete.
            Event::Init | Event::InitApply(_) | Event::InitDone => None,
        };
        let mut pending = self.lock();
        apply(event);
        if let Event::InitDone = event {
            pending.resync = true;
            pending.changes.clear();
        } else if let Some((key, version)) = change
            // Without a reader, or with the whole store to read again, the change is read from
            // the store.
            && pending.reader != 0
            && !pending.resync
        {
            pending.changes.insert(key, version);
        }
    }

    /// What `reader` has not seen: whether to read the whole store again, and the changes (the
    /// latest version of each) since it last took them.
    fn take(&self, reader: u64) -> (bool, Map<V::Key, Option<V>>) {
        let mut pending = self.lock();
        if pending.reader != reader {
            pending.reader = reader;
            pending.resync = true;
        }
        let resync = std::mem::take(&mut pending.resync);
        (resync, std::mem::take(&mut pending.changes))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending<V>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The reader's side: where each object is in the view's vector, which it keeps up to date.
pub struct Kept<V: Mirrored> {
    reader: u64,
    slots: Map<V::Key, usize>,
}

impl<V: Mirrored> Default for Kept<V> {
    fn default() -> Self {
        static READERS: AtomicU64 = AtomicU64::new(1);
        Self {
            reader: READERS.fetch_add(1, Ordering::Relaxed),
            slots: Map::default(),
        }
    }
}

impl<V: Mirrored> Kept<V> {
    /// Brings `items` (the view's vector, which only this changes) up to date with what `mirror`
    /// recorded, or with the whole `store` after a relist or at the first update.
    pub fn update_from_store<K>(
        &mut self,
        mirror: &Mirror<K, V>,
        store: &Store<K>,
        items: &mut Vec<V>,
    ) where
        K: Resource + Clone + 'static,
        K::DynamicType: Eq + Hash + Clone,
    {
        let convert = mirror.convert;
        self.update(
            mirror,
            || store.state().iter().map(|o| convert(o)).collect(),
            items,
        );
    }

    /// Brings `items` up to date with what `mirror` recorded, or with `everything` (every object
    /// the cache holds, converted) after a relist or at the first update.
    pub fn update<K>(
        &mut self,
        mirror: &Mirror<K, V>,
        everything: impl FnOnce() -> Vec<V>,
        items: &mut Vec<V>,
    ) {
        let (resync, changes) = mirror.take(self.reader);
        if resync {
            // The mirror's views are replaced; those of other kinds stay, moved up.
            items.retain(|view| !(mirror.holds)(view));
            self.slots.clear();
            for (slot, view) in items.iter().enumerate() {
                self.slots.insert(view.key(), slot);
            }
            for view in everything() {
                self.put(items, view);
            }
        }
        for (key, version) in changes {
            match version {
                Some(view) => self.put(items, view),
                None => self.remove(items, &key),
            }
        }
    }

    fn put(&mut self, items: &mut Vec<V>, view: V) {
        // The key is taken from the new version, so that the old one's name is let go with it.
        let key = view.key();
        match self.slots.remove(&key) {
            Some(slot) => {
                items[slot] = view;
                self.slots.insert(key, slot);
            }
            None => {
                self.slots.insert(key, items.len());
                items.push(view);
            }
        }
    }

    fn remove(&mut self, items: &mut Vec<V>, key: &V::Key) {
        let Some(slot) = self.slots.remove(key) else {
            return;
        };
        items.swap_remove(slot);
        if let Some(moved) = items.get(slot) {
            self.slots.insert(moved.key(), slot);
        }
    }
}

/// The kinds whose views a pass keeps: those of which a large fleet holds the most objects.
#[derive(Clone)]
pub struct Mirrors {
    pub pods: PodMirror,
    pub nodes: NodeMirror,
    pub pdbs: PdbMirror,
    pub owners: OwnerMirrors,
}

impl Default for Mirrors {
    fn default() -> Self {
        Self {
            pods: pods(),
            nodes: nodes(),
            pdbs: pdbs(),
            owners: OwnerMirrors::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The kept view against kube's own reflector store, fed the same events.

    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::runtime::reflector::{self, store::Writer};
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Step {
        Apply(u8, u8),
        Delete(u8),
        /// A relist: `Init`, these objects as `InitApply`, and `InitDone` unless the list broke
        /// off.
        Relist(Vec<(u8, u8)>, bool),
        /// The reader brings its view up to date.
        Update,
        /// Another reader takes over (as after a new leader's first pass).
        NewReader,
    }

    fn node(name: u8, version: u8) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(format!("node-{name}")),
                labels: Some(BTreeMap::from([("v".to_owned(), version.to_string())])),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => (0..12u8, any::<u8>()).prop_map(|(n, v)| Step::Apply(n, v)),
            3 => (0..12u8).prop_map(Step::Delete),
            1 => (prop::collection::vec((0..12u8, any::<u8>()), 0..8), any::<bool>())
                .prop_map(|(objects, done)| Step::Relist(objects, done)),
            4 => Just(Step::Update),
            1 => Just(Step::NewReader),
        ]
    }

    /// The loop waits until the store shows its own write, then builds the view from the mirror:
    /// a change the store shows must be in the reader's next update, also while the watch's task
    /// is between taking it into the store and recording it.
    #[test]
    fn a_change_the_store_shows_is_in_the_next_update() {
        let (store, mut writer) = reflector::store::<Node>();
        let mirror = nodes();
        feed(&mut writer, &mirror, Event::Init);
        feed(&mut writer, &mirror, Event::InitApply(node(1, 1)));
        feed(&mut writer, &mirror, Event::InitDone);
        let mut kept = Kept::<NodeView>::default();
        let mut items = Vec::new();
        kept.update_from_store(&mirror, &store, &mut items);
        let (shown, in_store) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let watch = &mirror;
            scope.spawn(move || {
                watch.apply(&Event::Apply(node(1, 2)), |event| {
                    writer.apply_watcher_event(event);
                    shown.send(()).unwrap();
                    // The watch's task held up right after the store took the event in.
                    std::thread::sleep(std::time::Duration::from_millis(200));
                });
            });
            in_store.recv().unwrap();
            let cached = store.state()[0].metadata.labels.clone().unwrap_or_default();
            assert_eq!(cached["v"], "2", "the store shows it");
            kept.update_from_store(&mirror, &store, &mut items);
            assert_eq!(items[0].labels["v"], "2", "the view shows it too");
        });
    }

    /// The objects as the view and as the store hold them, by name.
    fn by_name(views: &[NodeView]) -> BTreeMap<String, BTreeMap<String, String>> {
        views
            .iter()
            .map(|v| (v.name.clone(), v.labels.clone()))
            .collect()
    }

    fn feed(writer: &mut Writer<Node>, mirror: &NodeMirror, event: Event<Node>) {
        mirror.apply(&event, |event| writer.apply_watcher_event(event));
    }

    proptest! {
        #[test]
        fn the_kept_view_holds_what_the_store_holds_after_every_update(
            steps in prop::collection::vec(step(), 1..60)
        ) {
            let (store, mut writer) = reflector::store::<Node>();
            let mirror = nodes();
            let mut kept = Kept::<NodeView>::default();
            let mut items = Vec::new();
            for step in steps.into_iter().chain([Step::Update]) {
                match step {
                    Step::Apply(n, v) => feed(&mut writer, &mirror, Event::Apply(node(n, v))),
                    Step::Delete(n) => feed(&mut writer, &mirror, Event::Delete(node(n, 0))),
                    Step::Relist(objects, done) => {
                        feed(&mut writer, &mirror, Event::Init);
                        for (n, v) in objects {
                            feed(&mut writer, &mirror, Event::InitApply(node(n, v)));
                        }
                        if done {
                            feed(&mut writer, &mirror, Event::InitDone);
                        }
                    }
                    Step::Update => {
                        kept.update_from_store(&mirror, &store, &mut items);
                        let truth: Vec<NodeView> =
                            store.state().iter().map(|n| k8sm_view::node_view(n)).collect();
                        prop_assert_eq!(by_name(&items), by_name(&truth));
                        prop_assert_eq!(items.len(), truth.len());
                    }
                    Step::NewReader => {
                        kept = Kept::default();
                        // What the last reader left is not the new one's: it starts from the store.
                        items.truncate(items.len() / 2);
                    }
                }
            }
        }
    }

    /// An owner of either kind that shares the view's `owners`: `replicas` is its version.
    fn owner(deployment: bool, name: u8, replicas: u8) -> (Option<Deployment>, Option<ReplicaSet>) {
        let metadata = ObjectMeta {
            name: Some(format!("owner-{name}")),
            namespace: Some("shop".to_owned()),
            uid: Some(format!("{deployment}-{name}")),
            ..ObjectMeta::default()
        };
        if deployment {
            let spec = k8s_openapi::api::apps::v1::DeploymentSpec {
                replicas: Some(i32::from(replicas)),
                ..Default::default()
            };
            (
                Some(Deployment {
                    metadata,
                    spec: Some(spec),
                    ..Default::default()
                }),
                None,
            )
        } else {
            let spec = k8s_openapi::api::apps::v1::ReplicaSetSpec {
                replicas: Some(i32::from(replicas)),
                ..Default::default()
            };
            (
                None,
                Some(ReplicaSet {
                    metadata,
                    spec: Some(spec),
                    ..Default::default()
                }),
            )
        }
    }

    fn convert<A, B>(event: Event<A>, f: impl Fn(A) -> B) -> Event<B> {
        match event {
            Event::Apply(o) => Event::Apply(f(o)),
            Event::Delete(o) => Event::Delete(f(o)),
            Event::Init => Event::Init,
            Event::InitApply(o) => Event::InitApply(f(o)),
            Event::InitDone => Event::InitDone,
        }
    }

    /// The owners by kind and name, with their version.
    fn owners_by_key(views: &[Arc<OwnerView>]) -> BTreeMap<(OwnerKind, String), Option<u32>> {
        views
            .iter()
            .map(|v| ((v.kind.clone(), v.name.clone()), v.desired))
            .collect()
    }

    proptest! {
        #[test]
        fn owners_of_two_kinds_in_one_vector_are_what_both_stores_hold_after_every_update(
            steps in prop::collection::vec((any::<bool>(), step()), 1..80)
        ) {
            let (deployments, mut deployment_writer) = reflector::store::<Deployment>();
            let (replica_sets, mut replica_set_writer) = reflector::store::<ReplicaSet>();
            let mirrors = OwnerMirrors::default();
            let mut kept = Kept::<Arc<OwnerView>>::default();
            let mut items = Vec::new();
            let mut feed = |deployment: bool, event: Event<(u8, u8)>| {
                let of = |(n, v): (u8, u8)| owner(deployment, n, v);
                match deployment {
                    true => {
                        let event = convert(event, |o| of(o).0.unwrap());
                        mirrors
                            .deployments
                            .apply(&event, |event| deployment_writer.apply_watcher_event(event));
                    }
                    false => {
                        let event = convert(event, |o| of(o).1.unwrap());
                        mirrors
                            .replica_sets
                            .apply(&event, |event| replica_set_writer.apply_watcher_event(event));
                    }
                }
            };
            for (deployment, step) in steps.into_iter().chain([(true, Step::Update)]) {
                match step {
                    Step::Apply(n, v) => feed(deployment, Event::Apply((n, v))),
                    Step::Delete(n) => feed(deployment, Event::Delete((n, 0))),
                    Step::Relist(objects, done) => {
                        feed(deployment, Event::Init);
                        for object in objects {
                            feed(deployment, Event::InitApply(object));
                        }
                        if done {
                            feed(deployment, Event::InitDone);
                        }
                    }
                    Step::Update => {
                        kept.update_from_store(&mirrors.deployments, &deployments, &mut items);
                        kept.update_from_store(&mirrors.replica_sets, &replica_sets, &mut items);
                        let truth: Vec<Arc<OwnerView>> = deployments
                            .state()
                            .iter()
                            .map(|d| Arc::new(k8sm_view::deployment_view(d)))
                            .chain(replica_sets.state().iter().map(|r| Arc::new(k8sm_view::replica_set_view(r))))
                            .collect();
                        prop_assert_eq!(owners_by_key(&items), owners_by_key(&truth));
                        prop_assert_eq!(items.len(), truth.len());
                    }
                    Step::NewReader => {
                        kept = Kept::default();
                        items.truncate(items.len() / 2);
                    }
                }
            }
        }
    }
}
