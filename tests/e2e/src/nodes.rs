//! What a Node says about its upgrade, as an operator reads it with `kubectl get node -o yaml`:
//! k8sm's annotations, label and taint (docs/design.md §3), the cordon, and a snapshot of
//! everything anyone may change on it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use kube::{Client, ResourceExt};

use k8sm_api::keys;

use crate::objects::get_node;

/// Prefix of every key of k8sm's contract (docs/design.md §3).
pub const K8SM_PREFIX: &str = "k8s.mesosphere.io/";

/// The Node object of a machine that died: `cluster`'s node `name` that no KWOK manages and no
/// simulated executor plays, reporting `executor_id`, Ready Unknown as the node lifecycle
/// controller leaves a node whose kubelet stopped posting. (Without a Ready condition the
/// controller removes the NoSchedule taint that Unknown brings until its startup grace period ends,
/// and meanwhile the scheduler may bind a pod there.)
pub fn dead_node(cluster: &k8sm_testcluster::TestCluster, name: &str, executor_id: &str) -> Node {
    let mut dead = cluster.kwok_node(name);
    let annotations = dead.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.remove(k8sm_testcluster::KWOK_NODE_ANNOTATION);
    annotations.insert(keys::EXECUTOR_ID_ANNOTATION.into(), executor_id.into());
    dead.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .remove("type");
    dead.status.get_or_insert_with(Default::default).conditions = Some(vec![NodeCondition {
        type_: "Ready".into(),
        status: "Unknown".into(),
        reason: Some("NodeStatusUnknown".into()),
        message: Some("Kubelet stopped posting node status.".into()),
        ..NodeCondition::default()
    }]);
    dead
}

pub fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.annotations().get(key).map(String::as_str)
}

pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.labels().get(key).map(String::as_str)
}

/// The node's Ready condition is True: its kubelet (KWOK, for a KWOK node) posts its status.
pub fn is_node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `spec.unschedulable`: cordoned.
pub fn is_cordoned(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

pub fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

/// The node carries k8sm's `incompatible-executor:PreferNoSchedule` taint.
pub fn has_k8sm_taint(node: &Node) -> bool {
    taints(node).iter().any(|t| {
        t.key == keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY
            && t.effect == keys::INCOMPATIBLE_EXECUTOR_TAINT_EFFECT
    })
}

/// Marked incompatible: k8sm's label, annotation and taint.
pub fn is_marked(node: &Node) -> bool {
    label(node, keys::INCOMPATIBLE_EXECUTOR_LABEL) == Some(keys::INCOMPATIBLE_EXECUTOR_LABEL_VALUE)
        && annotation(node, keys::INCOMPATIBLE_EXECUTOR_ANNOTATION).is_some()
        && has_k8sm_taint(node)
}

/// Whether `node` carries anything of an upgrade: one of k8sm's annotations but the executor ID,
/// its label or taint, or a cordon.
pub fn has_k8sm_state(node: &Node) -> bool {
    let k8sm_annotation = node
        .annotations()
        .keys()
        .any(|k| k.starts_with(K8SM_PREFIX) && k != keys::EXECUTOR_ID_ANNOTATION);
    k8sm_annotation
        || label(node, keys::INCOMPATIBLE_EXECUTOR_LABEL).is_some()
        || taints(node)
            .iter()
            .any(|t| t.key == keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY)
        || is_cordoned(node)
}

/// Every key of k8sm's group on the node, as `annotation <key>`, `label <key>` and `taint <key>`,
/// sorted: what `kubectl get node -o yaml | grep k8s.mesosphere.io` shows an operator.
pub fn k8sm_keys(node: &Node) -> Vec<String> {
    let mut found: Vec<String> = node
        .annotations()
        .keys()
        .filter(|k| k.starts_with(K8SM_PREFIX))
        .map(|k| format!("annotation {k}"))
        .chain(
            node.labels()
                .keys()
                .filter(|k| k.starts_with(K8SM_PREFIX))
                .map(|k| format!("label {k}")),
        )
        .chain(
            taints(node)
                .iter()
                .filter(|t| t.key.starts_with(K8SM_PREFIX))
                .map(|t| format!("taint {}", t.key)),
        )
        .collect();
    found.sort();
    found
}

/// What anyone can change on a Node that matters to an upgrade: its identity, annotations, labels,
/// taints and cordon. Leaves out what changes by itself (status and heartbeats, hence the
/// resourceVersion) and the taints of the node lifecycle controller (`node.kubernetes.io/*`), which
/// a loaded machine's late heartbeat can bring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeState {
    pub uid: String,
    pub annotations: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    /// `key=value:effect`
    pub taints: Vec<String>,
    pub unschedulable: bool,
}

impl NodeState {
    pub fn of(node: &Node) -> Self {
        Self {
            uid: node.uid().unwrap_or_default(),
            annotations: node.annotations().clone(),
            labels: node.labels().clone(),
            taints: taints(node)
                .iter()
                .filter(|t| !t.key.starts_with("node.kubernetes.io/"))
                .map(|t| {
                    format!(
                        "{}={}:{}",
                        t.key,
                        t.value.as_deref().unwrap_or_default(),
                        t.effect
                    )
                })
                .collect(),
            unschedulable: is_cordoned(node),
        }
    }

    pub async fn read(client: &Client, name: &str) -> Self {
        Self::of(&get_node(client, name).await)
    }

    /// The states of the nodes `names`, by name.
    pub async fn read_all(client: &Client, names: &[String]) -> BTreeMap<String, Self> {
        let mut states = BTreeMap::new();
        for name in names {
            states.insert(name.clone(), Self::read(client, name).await);
        }
        states
    }
}
