//! The controller's pod cache: each pod's view (shared with the passes) and its resourceVersion, by
//! namespace and name, applied from the pod watch's events as kube's reflector applies them (a list
//! replaces the cache only once complete).
//!
//! kube's store would keep, beside each view, a whole `ObjectMeta` and a key holding the pod's
//! name, namespace, UID and resourceVersion again: the bulk of a large fleet's memory
//! (docs/decisions/0003-fleet-scale.md).

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use kube::ResourceExt;
use kube::runtime::watcher::Event;
use tokio::sync::watch;

use k8sm_planner::PodView;

use crate::observe::cached_pod::CachedPod;

/// Keys are names from the apiserver, which tenants choose: a hash seeded per process.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Pods by namespace, then by name: found by the `&str`s a caller holds, and each namespace's name
/// stored once.
type Pods = Map<Arc<str>, Map<Arc<str>, Cached>>;

/// One pod as cached.
#[derive(Clone, Debug)]
pub struct Cached {
    pub view: Arc<PodView>,
    /// `metadata.resourceVersion`: a backoff on the pod ends once it changes.
    pub resource_version: Box<str>,
}

/// A read handle, shared with the writer that the watch drives.
#[derive(Clone)]
pub struct PodStore {
    pods: Arc<RwLock<Pods>>,
    /// True once a first list is complete.
    ready: watch::Receiver<bool>,
}

/// The writing end: owned by the pod watch (or by the replay harness).
pub struct PodWriter {
    pods: Arc<RwLock<Pods>>,
    /// The list being received since the last `Init`, until its `InitDone`.
    listing: Option<Pods>,
    ready: watch::Sender<bool>,
}

/// An empty cache, and its writer.
pub fn pod_store() -> (PodStore, PodWriter) {
    let pods = Arc::new(RwLock::new(Pods::default()));
    let (ready, ready_rx) = watch::channel(false);
    let store = PodStore {
        pods: Arc::clone(&pods),
        ready: ready_rx,
    };
    let writer = PodWriter {
        pods,
        listing: None,
        ready,
    };
    (store, writer)
}

impl PodStore {
    /// The pod of that namespace and name, if cached.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Cached> {
        let pods = self.pods.read().unwrap_or_else(PoisonError::into_inner);
        pods.get(namespace)?.get(name).cloned()
    }

    /// The view of the pod of that namespace and name, if cached (no copy of its version).
    pub fn view(&self, namespace: &str, name: &str) -> Option<Arc<PodView>> {
        let pods = self.pods.read().unwrap_or_else(PoisonError::into_inner);
        Some(Arc::clone(&pods.get(namespace)?.get(name)?.view))
    }

    /// Every cached pod's view.
    pub fn views(&self) -> Vec<Arc<PodView>> {
        let pods = self.pods.read().unwrap_or_else(PoisonError::into_inner);
        pods.values()
            .flat_map(|names| names.values().map(|c| Arc::clone(&c.view)))
            .collect()
    }

    /// How many pods are cached.
    pub fn len(&self) -> usize {
        let pods = self.pods.read().unwrap_or_else(PoisonError::into_inner);
        pods.values().map(Map::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until a first list is complete.
    pub async fn wait_until_ready(&self) {
        let mut ready = self.ready.clone();
        // The writer lives as long as the watch; if it is gone, nothing will come.
        let _ = ready.wait_for(|ready| *ready).await;
    }
}

impl PodWriter {
    /// Applies `event` as kube's reflector applies it to its store.
    pub fn apply(&mut self, event: &Event<CachedPod>) {
        match event {
            Event::Apply(pod) => {
                insert(
                    &mut self.pods.write().unwrap_or_else(PoisonError::into_inner),
                    pod,
                );
            }
            Event::Delete(pod) => {
                let mut pods = self.pods.write().unwrap_or_else(PoisonError::into_inner);
                let namespace = &*pod.view.namespace;
                if let Some(names) = pods.get_mut(namespace) {
                    names.remove(&*pod.view.name);
                    if names.is_empty() {
                        pods.remove(namespace);
                    }
                }
            }
            Event::Init => self.listing = Some(Pods::default()),
            Event::InitApply(pod) => insert(self.listing.get_or_insert_with(Pods::default), pod),
            Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                let replaced = {
                    let mut pods = self.pods.write().unwrap_or_else(PoisonError::into_inner);
                    std::mem::replace(&mut *pods, listed)
                };
                // The old pods are let go outside the lock: readers need not wait for a fleet's
                // worth of frees.
                drop(replaced);
                self.ready.send_replace(true);
            }
        }
    }
}

fn insert(pods: &mut Pods, pod: &CachedPod) {
    let view = &pod.view;
    let cached = Cached {
        view: Arc::clone(view),
        resource_version: pod.resource_version().unwrap_or_default().into(),
    };
    let names = match pods.get_mut(&*view.namespace) {
        Some(names) => names,
        None => pods.entry(Arc::clone(&view.namespace)).or_default(),
    };
    // Keyed by the new version's name, so that the old version's copy is let go.
    names.remove(&*view.name);
    names.insert(Arc::clone(&view.name), cached);
}

#[cfg(test)]
mod tests {
    //! The pod cache against kube's own reflector store, fed the same events.

    use std::collections::BTreeMap;

    use futures::FutureExt;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::runtime::reflector::{self, store::Writer};
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Step {
        Apply(u8, u8, u8),
        Delete(u8, u8),
        Init,
        InitApply(u8, u8, u8),
        InitDone,
    }

    fn pod(namespace: u8, name: u8, version: u8) -> CachedPod {
        let (namespace, name) = (format!("ns-{namespace}"), format!("pod-{name}"));
        CachedPod {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                resource_version: Some(version.to_string()),
                ..ObjectMeta::default()
            },
            view: Arc::new(PodView {
                namespace: namespace.into(),
                name: name.into(),
                ..PodView::default()
            }),
        }
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => (0..3u8, 0..6u8, any::<u8>()).prop_map(|(ns, n, v)| Step::Apply(ns, n, v)),
            3 => (0..3u8, 0..6u8).prop_map(|(ns, n)| Step::Delete(ns, n)),
            1 => Just(Step::Init),
            3 => (0..3u8, 0..6u8, any::<u8>()).prop_map(|(ns, n, v)| Step::InitApply(ns, n, v)),
            1 => Just(Step::InitDone),
        ]
    }

    /// Namespace, name and resourceVersion of every pod, with the address of its view.
    type Contents = BTreeMap<(String, String), (String, usize)>;

    fn of_reflector(store: &reflector::Store<CachedPod>) -> Contents {
        store
            .state()
            .iter()
            .map(|p| {
                let key = (p.namespace().unwrap_or_default(), p.name_any());
                (
                    key,
                    (
                        p.resource_version().unwrap_or_default(),
                        Arc::as_ptr(&p.view).addr(),
                    ),
                )
            })
            .collect()
    }

    fn of_pod_store(store: &PodStore) -> Contents {
        store
            .views()
            .iter()
            .map(|view| {
                let cached = store
                    .get(&view.namespace, &view.name)
                    .expect("found by its name");
                assert!(Arc::ptr_eq(&cached.view, view));
                assert!(Arc::ptr_eq(
                    &store.view(&view.namespace, &view.name).expect("found"),
                    view
                ));
                let key = (view.namespace.to_string(), view.name.to_string());
                (
                    key,
                    (
                        cached.resource_version.to_string(),
                        Arc::as_ptr(view).addr(),
                    ),
                )
            })
            .collect()
    }

    proptest! {
        #[test]
        fn the_pod_cache_holds_what_kubes_store_holds_after_every_event(
            steps in prop::collection::vec(step(), 1..80)
        ) {
            let (truth, mut truth_writer): (_, Writer<CachedPod>) = reflector::store();
            let (store, mut writer) = pod_store();
            for step in steps {
                let event = match step {
                    Step::Apply(ns, n, v) => Event::Apply(pod(ns, n, v)),
                    Step::Delete(ns, n) => Event::Delete(pod(ns, n, 0)),
                    Step::Init => Event::Init,
                    Step::InitApply(ns, n, v) => Event::InitApply(pod(ns, n, v)),
                    Step::InitDone => Event::InitDone,
                };
                truth_writer.apply_watcher_event(&event);
                writer.apply(&event);
                prop_assert_eq!(of_pod_store(&store), of_reflector(&truth));
                prop_assert_eq!(store.len(), truth.state().len());
                prop_assert_eq!(*store.ready.borrow(), matches!(truth.wait_until_ready().now_or_never(), Some(Ok(()))));
            }
        }
    }
}
