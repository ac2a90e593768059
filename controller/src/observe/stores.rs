//! Observation: one reflector per kind the planner needs, with stored objects trimmed to what it
//! reads, and one merged stream that fires whenever any of them changes (the controller is
//! event-driven, not a polling loop) or one of their watches fails or recovers ([`WatchHealth`]).

use std::pin::Pin;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::{self, error::TrySendError};

use k8sm_api::ExecutorUpgradePolicy;

use crate::memory::reaction::Reaction;
use crate::observe::cached_pod::CachedPod;
use crate::observe::deliveries::{Deliveries, Delivery};
use crate::observe::mirror::{Mirror, Mirrored, Mirrors, PodMirror};
use crate::observe::pod_store::{PodStore, pod_store};
use crate::observe::trim::{
    trim_deployment, trim_job, trim_meta, trim_node, trim_persistent_volume, trim_replica_set,
    trim_replication_controller, trim_stateful_set,
};
use crate::observe::watches::{WATCH_SILENCE, WatchHealth};

/// The pause before a failed watch starts again, after its first failure in a row; it doubles up to
/// [`MAX_RESTART_DELAY`]. Short: a watch that failed once (an apiserver restarting) usually works
/// again at once.
const FIRST_RESTART_DELAY: Duration = Duration::from_millis(500);
/// The longest pause between two starts of a failing watch: how late, at worst, its recovery is
/// noticed.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(8);
/// How long the apiserver keeps each watch open before it ends it; the watcher then resumes it
/// where it was. The response of each resumed watch shows that the path to the apiserver works,
/// which bookmarks cannot show on a quiet collection: the apiserver sends a bookmark only once its
/// watch cache has moved past what the watch has seen.
pub const WATCH_TIMEOUT: Duration = Duration::from_secs(45);

/// Sets the server's timeout of a watch request to [`WATCH_TIMEOUT`]. kube's watcher asks for its
/// own `timeout` and gives a watch up once it has yielded nothing for that long plus 5 s, which
/// would resume a stalled watch silently (or, with its default of 290 s, leave it stalled for 295
/// s). The watches ask for no timeout (`timeoutSeconds=0`, which turns kube's own check off) and
/// this sets the server's, so that the silence bound is [`WATCH_SILENCE`] and a stalled watch is
/// seen, reported and started afresh.
pub fn with_watch_timeout<B>(mut request: http::Request<B>) -> http::Request<B> {
    let uri = request.uri();
    let Some(query) = uri.query() else {
        return request;
    };
    let watch = query.split('&').any(|p| p == "watch=true");
    if !watch || !query.split('&').any(|p| p == "timeoutSeconds=0") {
        return request;
    }
    let query: Vec<String> = query
        .split('&')
        .map(|p| match p {
            "timeoutSeconds=0" => format!("timeoutSeconds={}", WATCH_TIMEOUT.as_secs()),
            other => other.to_owned(),
        })
        .collect();
    let path_and_query = format!("{}?{}", uri.path(), query.join("&"));
    let mut parts = uri.clone().into_parts();
    if let Ok(path_and_query) = path_and_query.parse() {
        parts.path_and_query = Some(path_and_query);
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    request
}

/// Read-only caches of everything the planner looks at.
#[derive(Clone)]
pub struct Stores {
    pub nodes: Store<Node>,
    /// Pods, as much of them as the planner reads.
    pub pods: PodStore,
    pub deployments: Store<Deployment>,
    pub replica_sets: Store<ReplicaSet>,
    pub replication_controllers: Store<ReplicationController>,
    pub stateful_sets: Store<StatefulSet>,
    pub jobs: Store<Job>,
    pub pdbs: Store<PodDisruptionBudget>,
    pub policies: Store<ExecutorUpgradePolicy>,
    /// PersistentVolumes, as much of them as may pin a pod to a node (their claim and node
    /// affinity).
    pub persistent_volumes: Store<PersistentVolume>,
    /// Which watches are failing, since when and why.
    pub health: WatchHealth,
    /// When each watch last delivered something: a response started, an event or a bookmark.
    pub deliveries: Deliveries,
    /// The path of the pods' collection, under which [`Self::deliveries`] records the pod watch.
    pub pods_path: String,
    /// The changes of the kinds whose views a pass keeps, converted as they arrive.
    pub mirrors: Mirrors,
}

/// A stream that yields `()` when any watched object changed since it was last polled (changes are
/// coalesced), and ends when the watches end.
pub type Changes = Pin<Box<dyn Stream<Item = ()> + Send>>;

impl Stores {
    /// Starts the reflectors in a task of their own (so it must be called within the Tokio
    /// runtime), on `client`, whose responses `deliveries` records ([`Deliveries::layer`]).
    /// `reaction` stamps the pods it sees become Ready.
    pub fn start(client: &Client, deliveries: Deliveries, reaction: Reaction) -> (Self, Changes) {
        let mut changes: Vec<Changes> = Vec::new();
        let health = WatchHealth::default();
        let mut watches = Watches {
            client,
            health: &health,
            deliveries: &deliveries,
            changes: &mut changes,
        };
        let pods_path = Api::<CachedPod>::all(client.clone())
            .resource_url()
            .to_owned();
        let mirrors = Mirrors::default();
        let replica_sets =
            watches.reflect_mirrored(trim_replica_set, mirrors.owners.replica_sets.clone());
        let owners = replica_sets.clone();
        let pods = watches.reflect_pods(
            move |pods, event| {
                // Live changes only: a relist replaces the store at its end, with no moment a pod
                // became Ready.
                if let watcher::Event::Apply(pod) = event {
                    reaction.observe_pod(pods, &owners, pod);
                }
            },
            mirrors.pods.clone(),
        );
        let stores = Self {
            nodes: watches.reflect_mirrored(trim_node, mirrors.nodes.clone()),
            pods,
            deployments: watches
                .reflect_mirrored(trim_deployment, mirrors.owners.deployments.clone()),
            replica_sets,
            replication_controllers: watches.reflect_mirrored(
                trim_replication_controller,
                mirrors.owners.replication_controllers.clone(),
            ),
            stateful_sets: watches
                .reflect_mirrored(trim_stateful_set, mirrors.owners.stateful_sets.clone()),
            jobs: watches.reflect_mirrored(trim_job, mirrors.owners.jobs.clone()),
            pdbs: watches.reflect_mirrored(trim_meta, mirrors.pdbs.clone()),
            policies: watches.reflect(trim_meta),
            persistent_volumes: watches.reflect(trim_persistent_volume),
            health: health.clone(),
            deliveries: deliveries.clone(),
            pods_path,
            mirrors,
        };
        (stores, drive(futures::stream::select_all(changes)))
    }

    /// Waits until every store holds a complete initial list.
    pub async fn wait_until_ready(&self) {
        // A store's writer lives inside the change stream, which outlives this call: these never
        // fail.
        let _ = self.nodes.wait_until_ready().await;
        self.pods.wait_until_ready().await;
        let _ = self.deployments.wait_until_ready().await;
        let _ = self.replica_sets.wait_until_ready().await;
        let _ = self.replication_controllers.wait_until_ready().await;
        let _ = self.stateful_sets.wait_until_ready().await;
        let _ = self.jobs.wait_until_ready().await;
        let _ = self.pdbs.wait_until_ready().await;
        let _ = self.policies.wait_until_ready().await;
        let _ = self.persistent_volumes.wait_until_ready().await;
    }
}

impl crate::report::events::Uids for Stores {
    fn node(&self, name: &str) -> Option<String> {
        self.nodes.get(&ObjectRef::new(name))?.uid()
    }

    fn policy(&self, name: &str) -> Option<String> {
        self.policies.get(&ObjectRef::new(name))?.uid()
    }
}

/// Polls the reflectors in a task of their own, so that the stores keep up with the watches while a
/// pass awaits the API. Polled only between passes, a watch advanced by about one read per pass: on
/// a busy cluster (hundreds of pod updates a second while nodes drain) the stores fell seconds
/// behind, and so did every eviction that waited for a replacement to become Ready.
fn drive(mut watches: impl Stream<Item = ()> + Send + Unpin + 'static) -> Changes {
    let (sender, mut receiver) = mpsc::channel::<()>(1);
    tokio::spawn(async move {
        while watches.next().await.is_some() {
            // Full: a change is already signalled and not yet seen; this one is seen with it.
            if let Err(TrySendError::Closed(())) = sender.try_send(()) {
                return;
            }
        }
    });
    Box::pin(futures::stream::poll_fn(move |cx| receiver.poll_recv(cx)))
}

/// What each new reflector needs: the client, where to report its health, and where to signal its
/// changes.
struct Watches<'a> {
    client: &'a Client,
    health: &'a WatchHealth,
    deliveries: &'a Deliveries,
    changes: &'a mut Vec<Changes>,
}

impl Watches<'_> {
    fn reflect<K>(&mut self, trim: fn(&mut K)) -> Store<K>
    where
        K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
    {
        self.reflect_with(trim, |writer, event| writer.apply_watcher_event(event))
    }

    /// Like [`Watches::reflect`], and `mirror` records each event as the store takes it in.
    fn reflect_mirrored<K, V>(&mut self, trim: fn(&mut K), mirror: Mirror<K, V>) -> Store<K>
    where
        K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
        V: Mirrored + Send + 'static,
        V::Key: Send,
    {
        self.reflect_with(trim, move |writer, event| {
            mirror.apply(event, |event| writer.apply_watcher_event(event));
        })
    }

    /// The pods, into the controller's own cache ([`PodStore`]; they are cut down while they are
    /// parsed, so nothing is left to trim): `observe` sees each event with the cache as it was
    /// right before the event is applied to it, and `mirror` records it as the cache takes it in.
    fn reflect_pods(
        &mut self,
        observe: impl Fn(&PodStore, &watcher::Event<CachedPod>) + Send + 'static,
        mirror: PodMirror,
    ) -> PodStore {
        let (reader, mut writer) = pod_store();
        let before = reader.clone();
        let events = restarting_watch(
            Api::all(self.client.clone()),
            |_| {},
            self.health(<CachedPod as k8s_openapi::Resource>::KIND),
        );
        // As kube's reflector: every item signals a change, a failure too (see `reflect_with`).
        let stream = events.map(move |event| {
            if let Ok(event) = event {
                observe(&before, &event);
                mirror.apply(&event, |event| writer.apply(event));
            }
        });
        self.changes.push(Box::pin(stream));
        reader
    }

    /// Where a watch of `kind` reports how it is doing.
    fn health(&self, kind: &str) -> Health {
        Health {
            watches: self.health.clone(),
            deliveries: self.deliveries.clone(),
            kind: kind.to_owned(),
        }
    }

    /// A store fed by a watch of `K`, each (trimmed) event applied to it by `apply`, as kube's
    /// reflector applies it.
    fn reflect_with<K>(
        &mut self,
        trim: fn(&mut K),
        mut apply: impl FnMut(&mut Writer<K>, &watcher::Event<K>) + Send + 'static,
    ) -> Store<K>
    where
        K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
    {
        let (reader, mut writer) = reflector::store();
        let kind = K::kind(&Default::default()).into_owned();
        let events = restarting_watch(Api::all(self.client.clone()), trim, self.health(&kind));
        // A failure signals a change too: the loop must learn when a watch starts failing (to stop
        // acting once it has failed for too long) as it learns of its recovery (a complete
        // list, which changes the store).
        let stream = events.map(move |event| {
            if let Ok(event) = event {
                apply(&mut writer, &event);
            }
        });
        self.changes.push(Box::pin(stream));
        reader
    }
}

/// Where a watch reports how it is doing.
#[derive(Clone)]
struct Health {
    watches: WatchHealth,
    deliveries: Deliveries,
    /// The kind watched, such as `Pod`.
    kind: String,
}

/// A watcher that starts afresh, with a complete list, after any error (after a pause that grows
/// while it keeps failing), or once it has delivered nothing for [`WATCH_SILENCE`]. kube's watcher
/// resumes a failed watch where it was, and a resumed watch says nothing until the next change: a
/// quiet cluster would never tell that the watch works again, and a stale view would stop the
/// controller for ever. A fresh start ends its list with `InitDone`, the proof that the store is
/// current again; until then, the reflector keeps the store as it last was.
fn restarting_watch<K>(
    api: Api<K>,
    trim: fn(&mut K),
    health: Health,
) -> impl futures::Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let path = api.resource_url().to_owned();
    // No client-side timeout: see `with_watch_timeout`.
    let config = watcher::Config::default().timeout(0);
    let start = move || watcher(api.clone(), config.clone()).modify(trim).boxed();
    let first = start();
    // When the stream started: a start counts as a delivery, for as long as it has delivered
    // nothing since.
    let started = Delivery::now();
    futures::stream::unfold(
        (first, 0u32, None::<Duration>, started),
        move |(mut stream, failures, pause, mut started)| {
            let (start, health, path) = (start.clone(), health.clone(), path.clone());
            async move {
                if let Some(pause) = pause {
                    tokio::time::sleep(pause).await;
                    stream = start();
                    started = Delivery::now();
                }
                // Silent since its last delivery, or since it started if it has delivered nothing
                // since.
                let silent_since = || {
                    health
                        .deliveries
                        .last(&path)
                        .filter(|d| d.at > started.at)
                        .unwrap_or(started)
                };
                let mut since = silent_since();
                let event = loop {
                    let deadline = tokio::time::Instant::from_std(since.at + WATCH_SILENCE);
                    match tokio::time::timeout_at(deadline, stream.next()).await {
                        Ok(event) => break event?,
                        // A resumed watch, or bookmarks, which kube's watcher does not yield: it
                        // works.
                        Err(_) if silent_since().at > since.at => since = silent_since(),
                        Err(_) => {
                            let kind = &health.kind;
                            tracing::warn!(
                                %kind,
                                "watch delivered nothing for {WATCH_SILENCE:?}; starting it again with a fresh list"
                            );
                            health.watches.silent(kind, (since.at, since.wall));
                            // A fresh start, announced as one: the loop wakes to find the view
                            // stale.
                            return Some((
                                Ok(watcher::Event::Init),
                                (start(), failures, None, Delivery::now()),
                            ));
                        }
                    }
                };
                let failures = match &event {
                    Ok(
                        watcher::Event::InitDone
                        | watcher::Event::Apply(_)
                        | watcher::Event::Delete(_),
                    ) => {
                        health.watches.succeeded(&health.kind);
                        0
                    }
                    Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => failures,
                    Err(error) => {
                        let kind = &health.kind;
                        tracing::warn!(%kind, %error, "watch failed; starting it again");
                        health.watches.failed(
                            kind,
                            &error.to_string(),
                            (Instant::now(), chrono::Utc::now()),
                        );
                        let pause = restart_delay(failures);
                        return Some((event, (stream, failures + 1, Some(pause), started)));
                    }
                };
                Some((event, (stream, failures, None, started)))
            }
        },
    )
}

/// The pause before starting a watch again after `failures` earlier failures in a row.
fn restart_delay(failures: u32) -> Duration {
    FIRST_RESTART_DELAY
        .saturating_mul(1 << failures.min(8))
        .min(MAX_RESTART_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_without_a_timeout_get_the_server_timeout_and_nothing_else_changes() {
        let uri = |u: &str| {
            with_watch_timeout(http::Request::get(u).body(()).unwrap())
                .uri()
                .to_string()
        };
        assert_eq!(
            uri(
                "/api/v1/pods?&watch=true&timeoutSeconds=0&allowWatchBookmarks=true&resourceVersion=7"
            ),
            "/api/v1/pods?&watch=true&timeoutSeconds=45&allowWatchBookmarks=true&resourceVersion=7"
        );
        for unchanged in [
            "/api/v1/pods?&watch=true&timeoutSeconds=290&resourceVersion=7",
            "/api/v1/pods?&limit=500&timeoutSeconds=0",
            "/api/v1/pods",
        ] {
            assert_eq!(uri(unchanged), unchanged);
        }
    }

    #[test]
    fn a_failing_watch_starts_again_ever_later_up_to_a_bound() {
        let delays: Vec<u128> = (0..7).map(|n| restart_delay(n).as_millis()).collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 8000, 8000, 8000]);
        assert_eq!(restart_delay(u32::MAX), MAX_RESTART_DELAY);
    }
}
