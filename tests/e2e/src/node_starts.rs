//! Whether k8sm ever started a node: a watch of the Nodes that records every revision at which one
//! was cordoned or carried a key k8sm writes only once it admits a node into a drain slot
//! (admission, progress, stall, kamikaze). A mark (the incompatible-executor annotation, label and
//! taint) is no start: k8sm marks every node it selects. A watch sees a cordon that a poll between
//! two looks would miss.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use k8sm_api::keys;

use crate::nodes::is_cordoned;
use crate::watch_events::change;

/// The node keys k8sm writes when it admits a node, and after.
pub const ADMISSION_KEYS: [&str; 6] = [
    keys::DRAINING_ANNOTATION,
    keys::CORDONED_BY_ANNOTATION,
    keys::DRAIN_PROGRESS_ANNOTATION,
    keys::STALLED_ANNOTATION,
    keys::KAMIKAZE_ANNOTATION,
    keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION,
];

/// What shows that `node` was started: `cordoned` and each admission key it carries. Empty: not
/// started.
pub fn signs_of_start(node: &Node) -> Vec<String> {
    let annotations = node.annotations();
    let cordon = is_cordoned(node).then(|| "cordoned".to_owned());
    cordon
        .into_iter()
        .chain(
            ADMISSION_KEYS
                .iter()
                .filter(|k| annotations.contains_key(**k))
                .map(|k| format!("annotation {k}")),
        )
        .collect()
}

/// Follows every Node, until dropped.
pub struct NodeStarts {
    /// Node → each change at which it looked started (the first few).
    seen: Arc<Mutex<BTreeMap<String, Vec<String>>>>,
    task: JoinHandle<()>,
}

impl NodeStarts {
    /// Starts watching, and returns once the watch has listed the nodes: every change from then on
    /// is seen.
    pub async fn start(client: &Client) -> Self {
        let seen = Arc::new(Mutex::new(BTreeMap::<String, Vec<String>>::new()));
        let nodes: Api<Node> = Api::all(client.clone());
        let record = seen.clone();
        let (listed, listed_rx) = oneshot::channel();
        let mut listed = Some(listed);
        let task = tokio::spawn(async move {
            let mut events = watcher(nodes, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                let Some((node, false)) = change(event, &mut listed) else {
                    continue;
                };
                let signs = signs_of_start(&node);
                if signs.is_empty() {
                    continue;
                }
                let mut seen = record.lock().unwrap_or_else(PoisonError::into_inner);
                let entries = seen.entry(node.name_any()).or_default();
                if entries.len() < 5 {
                    entries.push(format!(
                        "resourceVersion {}: {}",
                        node.resource_version().unwrap_or_default(),
                        signs.join(", ")
                    ));
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(120), listed_rx)
            .await
            .unwrap_or_else(|_| panic!("the nodes not listed after 120s"))
            .expect("the watch of nodes runs");
        Self { seen, task }
    }

    /// What was seen of `node` that shows it started (empty: never started).
    pub fn of(&self, node: &str) -> Vec<String> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(node)
            .cloned()
            .unwrap_or_default()
    }

    /// Panics naming each of `nodes` that was ever cordoned or admitted, and how.
    pub fn assert_never_started(&self, nodes: &[String]) {
        let started: Vec<String> = nodes
            .iter()
            .filter_map(|n| {
                let seen = self.of(n);
                (!seen.is_empty()).then(|| format!("{n}: {}", seen.join("; ")))
            })
            .collect();
        assert!(
            started.is_empty(),
            "nodes that only an operator can finish were started:\n{}",
            started.join("\n")
        );
    }
}

impl Drop for NodeStarts {
    fn drop(&mut self) {
        self.task.abort();
    }
}
