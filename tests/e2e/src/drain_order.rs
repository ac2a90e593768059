//! Whether every pod k8sm removed went from a node the cluster already showed admitted and
//! cordoned: the order docs/design.md §5.2 requires (a node is admitted into a drain slot, and
//! cordoned, before its pods move), which the controller's pipelined writes must keep. Changes are
//! ordered by etcd revision: watch streams of two kinds arrive in no common order, but the
//! revisions of one etcd are totally ordered.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8sm_api::keys::DRAINING_ANNOTATION;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::nodes::is_cordoned;
use crate::watch_events::change;

#[derive(Debug, Default)]
struct Seen {
    /// Node → the first revision at which it was admitted: it carries the draining annotation and
    /// (when `cordon`) is unschedulable.
    admitted: BTreeMap<String, u64>,
    /// Pod (namespace/name, UID) → its node and the revision at which it was removed: the first at
    /// which it carries a deletionTimestamp (or, deleted at once, its deletion).
    removed: BTreeMap<(String, String), (String, u64)>,
}

/// Follows the cluster's nodes and the pods of one namespace, until dropped.
pub struct DrainOrder {
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<JoinHandle<()>>,
}

/// A resourceVersion as the etcd revision it is (the apiserver's, backed by etcd, writes them so).
fn revision(object: &impl ResourceExt) -> u64 {
    let version = object.resource_version().unwrap_or_default();
    version
        .parse()
        .unwrap_or_else(|_| panic!("resourceVersion {version:?} is an etcd revision"))
}

impl DrainOrder {
    /// Starts watching, and returns once both watches have listed: every change from then on is
    /// seen. `cordon`: the policy cordons the nodes it admits.
    pub async fn start(client: &Client, namespace: &str, cordon: bool) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (nodes_listed, nodes_rx) = oneshot::channel();
        let (pods_listed, pods_rx) = oneshot::channel();

        let nodes: Api<Node> = Api::all(client.clone());
        let record = seen.clone();
        let mut listed = Some(nodes_listed);
        let node_task = tokio::spawn(async move {
            let mut events = watcher(nodes, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                let Some((node, false)) = change(event, &mut listed) else {
                    continue;
                };
                let draining = node.annotations().contains_key(DRAINING_ANNOTATION);
                if draining && (!cordon || is_cordoned(&node)) {
                    let mut seen = record.lock().unwrap_or_else(PoisonError::into_inner);
                    seen.admitted
                        .entry(node.name_any())
                        .or_insert_with(|| revision(&node));
                }
            }
        });

        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let record = seen.clone();
        let mut listed = Some(pods_listed);
        let pod_task = tokio::spawn(async move {
            let mut events = watcher(pods, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                let Some((pod, gone)) = change(event, &mut listed) else {
                    continue;
                };
                // A DaemonSet's pods stay on drained nodes: k8sm never removes them.
                let daemon = pod.owner_references().iter().any(|o| o.kind == "DaemonSet");
                let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
                let (Some(node), false) = (node, daemon) else {
                    continue;
                };
                if !gone && pod.metadata.deletion_timestamp.is_none() {
                    continue;
                }
                let key = (
                    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()),
                    pod.uid().unwrap_or_default(),
                );
                let mut seen = record.lock().unwrap_or_else(PoisonError::into_inner);
                seen.removed
                    .entry(key)
                    .or_insert_with(|| (node, revision(&pod)));
            }
        });

        for (what, listed) in [("nodes", nodes_rx), ("pods", pods_rx)] {
            tokio::time::timeout(Duration::from_secs(120), listed)
                .await
                .unwrap_or_else(|_| panic!("the {what} not listed after 120s"))
                .expect("the drain-order watch runs");
        }
        Self {
            seen,
            tasks: vec![node_task, pod_task],
        }
    }

    /// The pods removed so far.
    pub fn removed(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .removed
            .len()
    }

    /// Each pod removed before its node was shown admitted (and cordoned), with the revisions.
    pub fn out_of_order(&self) -> Vec<String> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.removed
            .iter()
            .filter_map(|((pod, _), (node, at))| match seen.admitted.get(node) {
                Some(admitted) if admitted < at => None,
                Some(admitted) => Some(format!(
                    "{pod} removed at revision {at}, its node {node} admitted only at {admitted}"
                )),
                None => Some(format!(
                    "{pod} removed at revision {at} from {node}, never seen admitted"
                )),
            })
            .collect()
    }
}

impl Drop for DrainOrder {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
