//! A record of every pod deletion in a namespace, from a watch: which pods were deleted (or started
//! terminating), and whether the apiserver marked each as deleted through the Eviction API. The
//! apiserver adds the condition `DisruptionTarget` with reason `EvictionByEvictionAPI` to a pod it
//! evicts, before deleting it, and never to a pod deleted with a plain DELETE: the one observable
//! difference between the two.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::watch_events::change;

/// What the watch saw of one deleted pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deletion {
    pub name: String,
    pub uid: String,
    /// The node it ran on.
    pub node: Option<String>,
    /// It carried `DisruptionTarget` / `EvictionByEvictionAPI`: the Eviction API deleted it.
    pub evicted: bool,
}

/// Follows the pods of a namespace that match a label selector and records each one deleted, until
/// dropped.
pub struct DeletionLog {
    deleted: Arc<Mutex<BTreeMap<String, Deletion>>>,
    task: JoinHandle<()>,
}

impl DeletionLog {
    /// Starts watching the pods of `namespace` that match `selector` (such as `app=cache`), and
    /// returns once the watch has listed them: every deletion from then on is seen.
    pub async fn start(client: &Client, namespace: &str, selector: &str) -> Self {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let deleted = Arc::new(Mutex::new(BTreeMap::new()));
        let config = watcher::Config::default().labels(selector);
        let log = deleted.clone();
        let (listed, listed_rx) = oneshot::channel();
        let mut listed = Some(listed);
        let task = tokio::spawn(async move {
            let mut events = watcher(pods, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                let Some((pod, gone)) = change(event, &mut listed) else {
                    continue;
                };
                if !gone && pod.metadata.deletion_timestamp.is_none() {
                    continue;
                }
                let uid = pod.uid().unwrap_or_default();
                let evicted = evicted_by_api(&pod);
                let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
                let entry = log.entry(uid.clone()).or_insert_with(|| Deletion {
                    name: pod.name_any(),
                    uid,
                    node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
                    evicted: false,
                });
                entry.evicted |= evicted;
            }
        });
        tokio::time::timeout(Duration::from_secs(120), listed_rx)
            .await
            .unwrap_or_else(|_| {
                panic!("the pods of {namespace} ({selector}) not listed after 120s")
            })
            .expect("the watch of deletions runs");
        Self { deleted, task }
    }

    /// Every pod deleted so far, by UID.
    pub fn deleted(&self) -> Vec<Deletion> {
        self.deleted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }
}

impl Drop for DeletionLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The apiserver's mark of an eviction through the Eviction API.
fn evicted_by_api(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter().any(|c| {
                c.type_ == "DisruptionTarget"
                    && c.status == "True"
                    && c.reason.as_deref() == Some("EvictionByEvictionAPI")
            })
        })
}
