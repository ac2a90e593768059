//! Observation: one reflector per kind the planner needs, with stored objects trimmed to what it reads, and one
//! merged stream that fires whenever any of them changes (the controller is event-driven, not a polling loop).

use std::pin::Pin;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::{self, error::TrySendError};

use k8sm_api::ExecutorUpgradePolicy;

use crate::trim::{
    trim_deployment, trim_job, trim_meta, trim_node, trim_pod, trim_replica_set,
    trim_replication_controller, trim_stateful_set,
};

/// Read-only caches of everything the planner looks at.
#[derive(Clone)]
pub struct Stores {
    pub nodes: Store<Node>,
    pub pods: Store<Pod>,
    pub deployments: Store<Deployment>,
    pub replica_sets: Store<ReplicaSet>,
    pub replication_controllers: Store<ReplicationController>,
    pub stateful_sets: Store<StatefulSet>,
    pub jobs: Store<Job>,
    pub pdbs: Store<PodDisruptionBudget>,
    pub policies: Store<ExecutorUpgradePolicy>,
}

/// A stream that yields `()` when any watched object changed since it was last polled (changes are coalesced), and
/// ends when the watches end.
pub type Changes = Pin<Box<dyn Stream<Item = ()> + Send>>;

impl Stores {
    /// Starts the reflectors in a task of their own (so it must be called within the Tokio runtime).
    pub fn start(client: &Client) -> (Self, Changes) {
        let mut changes: Vec<Changes> = Vec::new();
        let stores = Self {
            nodes: reflect(Api::all(client.clone()), trim_node, &mut changes),
            pods: reflect(Api::all(client.clone()), trim_pod, &mut changes),
            deployments: reflect(Api::all(client.clone()), trim_deployment, &mut changes),
            replica_sets: reflect(Api::all(client.clone()), trim_replica_set, &mut changes),
            replication_controllers: reflect(
                Api::all(client.clone()),
                trim_replication_controller,
                &mut changes,
            ),
            stateful_sets: reflect(Api::all(client.clone()), trim_stateful_set, &mut changes),
            jobs: reflect(Api::all(client.clone()), trim_job, &mut changes),
            pdbs: reflect(Api::all(client.clone()), trim_meta, &mut changes),
            policies: reflect(Api::all(client.clone()), trim_meta, &mut changes),
        };
        (stores, drive(futures::stream::select_all(changes)))
    }

    /// Waits until every store holds a complete initial list.
    pub async fn wait_until_ready(&self) {
        // A store's writer lives inside the change stream, which outlives this call: these never fail.
        let _ = self.nodes.wait_until_ready().await;
        let _ = self.pods.wait_until_ready().await;
        let _ = self.deployments.wait_until_ready().await;
        let _ = self.replica_sets.wait_until_ready().await;
        let _ = self.replication_controllers.wait_until_ready().await;
        let _ = self.stateful_sets.wait_until_ready().await;
        let _ = self.jobs.wait_until_ready().await;
        let _ = self.pdbs.wait_until_ready().await;
        let _ = self.policies.wait_until_ready().await;
    }
}

impl crate::events::Uids for Stores {
    fn node(&self, name: &str) -> Option<String> {
        self.nodes.get(&ObjectRef::new(name))?.uid()
    }

    fn policy(&self, name: &str) -> Option<String> {
        self.policies.get(&ObjectRef::new(name))?.uid()
    }
}

/// Polls the reflectors in a task of their own, so that the stores keep up with the watches while a pass awaits the
/// API. Polled only between passes, a watch advanced by about one read per pass: on a busy cluster (hundreds of pod
/// updates a second while nodes drain) the stores fell seconds behind, and so did every eviction that waited for a
/// replacement to become Ready.
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

fn reflect<K>(api: Api<K>, trim: fn(&mut K), changes: &mut Vec<Changes>) -> Store<K>
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let kind = K::kind(&Default::default()).into_owned();
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(trim),
    )
    .filter_map(move |event| {
        let kind = kind.clone();
        async move {
            match event {
                Ok(_) => Some(()),
                Err(error) => {
                    // The watcher retries with backoff; the store keeps its last good state meanwhile.
                    tracing::warn!(%kind, %error, "watch failed; retrying");
                    None
                }
            }
        }
    });
    changes.push(Box::pin(stream));
    reader
}
