//! Observation: one reflector per kind the planner needs, with stored objects trimmed to what it reads, and one
//! merged stream that fires whenever any of them changes (the controller is event-driven, not a polling loop).

use std::pin::Pin;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    Node, NodeStatus, Pod, PodCondition, PodSpec, PodStatus, ReplicationController,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::{self, error::TrySendError};

use k8sm_api::ExecutorUpgradePolicy;
use k8sm_planner::POD_ANNOTATIONS_READ;

/// Read-only caches of everything the planner looks at.
#[derive(Clone)]
pub struct Stores {
    pub nodes: Store<Node>,
    pub pods: Store<Pod>,
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
            replica_sets: reflect(Api::all(client.clone()), trim_meta, &mut changes),
            replication_controllers: reflect(Api::all(client.clone()), trim_meta, &mut changes),
            stateful_sets: reflect(Api::all(client.clone()), trim_meta, &mut changes),
            jobs: reflect(Api::all(client.clone()), trim_meta, &mut changes),
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
        let _ = self.replica_sets.wait_until_ready().await;
        let _ = self.replication_controllers.wait_until_ready().await;
        let _ = self.stateful_sets.wait_until_ready().await;
        let _ = self.jobs.wait_until_ready().await;
        let _ = self.pdbs.wait_until_ready().await;
        let _ = self.policies.wait_until_ready().await;
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

/// Managed fields and the last-applied annotation are the bulk of most objects and never read.
fn trim_meta<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// Pods are the most numerous objects: keep only what the planner reads (`view::pod_view`): the node, the phase,
/// the Ready condition, and the annotations it looks at.
fn trim_pod(pod: &mut Pod) {
    trim_meta(pod);
    let meta = &mut pod.metadata;
    meta.generate_name = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|key, _| POD_ANNOTATIONS_READ.contains(&key.as_str()));
    }
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    pod.spec = Some(PodSpec {
        node_name,
        ..PodSpec::default()
    });
    if let Some(status) = pod.status.take() {
        let ready = status
            .conditions
            .into_iter()
            .flatten()
            .filter(|c| c.type_ == "Ready")
            .map(|c| PodCondition {
                type_: c.type_,
                status: c.status,
                ..PodCondition::default()
            })
            .collect();
        pod.status = Some(PodStatus {
            phase: status.phase,
            conditions: Some(ready),
            ..PodStatus::default()
        });
    }
}

/// Nodes: keep addresses and conditions; drop images, volumes and daemon endpoints.
fn trim_node(node: &mut Node) {
    trim_meta(node);
    if let Some(status) = node.status.take() {
        node.status = Some(NodeStatus {
            addresses: status.addresses,
            conditions: status.conditions,
            ..NodeStatus::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web-1", "generateName": "web-", "namespace": "shop", "uid": "u1",
                "labels": {"app": "web"},
                "annotations": {
                    "karpenter.sh/do-not-disrupt": "true",
                    "sidecar.istio.io/status": "{\"a large\": \"blob\"}",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}"
                },
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs1",
                                     "controller": true}]
            },
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]},
            "status": {
                "phase": "Running",
                "podIP": "10.0.0.1",
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:02Z"}
                ]
            }
        }))
        .expect("a pod")
    }

    #[test]
    fn a_trimmed_pod_keeps_everything_the_planner_reads() {
        let original = pod();
        let mut trimmed = original.clone();
        trim_pod(&mut trimmed);
        let (before, after) = (view::pod_view(&original), view::pod_view(&trimmed));
        assert_eq!(after.ready, before.ready);
        assert_eq!(after.phase, before.phase);
        assert_eq!(after.node_name, before.node_name);
        assert_eq!(after.controller, before.controller);
        assert_eq!(after.labels, before.labels);
        assert_eq!(
            after.annotations.keys().collect::<Vec<_>>(),
            ["karpenter.sh/do-not-disrupt"],
            "only the annotations the planner reads"
        );
        assert!(
            trimmed
                .spec
                .as_ref()
                .is_some_and(|s| s.containers.is_empty())
        );
        let status = trimmed.status.as_ref().expect("status");
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
        assert_eq!(status.pod_ip, None);
        assert_eq!(trimmed.metadata.generate_name, None);
    }
}
