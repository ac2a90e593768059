//! The SLA watcher's plumbing: one watch per kind of object it follows, each feeding the shared
//! state.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::objects::Tracked;
use super::state::State;

/// Watches the pods, Deployments, ReplicaSets, ReplicationControllers and StatefulSets of
/// `namespace`.
pub fn spawn(client: &Client, namespace: &str, state: &Arc<Mutex<State>>) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(follow::<Pod>(client, namespace, state)),
        tokio::spawn(follow::<Deployment>(client, namespace, state)),
        tokio::spawn(follow::<ReplicaSet>(client, namespace, state)),
        tokio::spawn(follow::<ReplicationController>(client, namespace, state)),
        tokio::spawn(follow::<StatefulSet>(client, namespace, state)),
    ]
}

fn follow<K>(
    client: &Client,
    namespace: &str,
    state: &Arc<Mutex<State>>,
) -> impl Future<Output = ()> + Send + 'static
where
    K: Tracked + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: DeserializeOwned + Sync,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let state = state.clone();
    async move {
        // The watcher retries with a backoff on its own; an error only says that it did.
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            if let Ok(event) = event {
                let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                state.observe(event, Instant::now());
            }
        }
    }
}
