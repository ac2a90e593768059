//! Helpers of the lifecycle tests (`tests/lifecycle.rs`): what an operator reads about a node's upgrade — k8sm's keys
//! on the Node, Events counted by occurrence, the policy's conditions — and what an operator does by hand: restart
//! the node agents, retry a kamikaze, register a node again.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};

use k8sm_api::{ExecutorUpgradePolicy, keys};

use crate::binaries::{ChildGuard, binary};
use crate::scenario::Scenario;

/// Prefix of every key of k8sm's contract (DESIGN.md §3).
pub const K8SM_PREFIX: &str = "k8s.mesosphere.io/";

/// The `reportingController` of the controller's Events.
pub const CONTROLLER: &str = "k8sm-controller";

/// KWOK manages the nodes that carry this annotation (see crates/testcluster), so a node created by hand needs it.
pub const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

// ---------------------------------------------------------------------------------------------------------------
// Nodes
// ---------------------------------------------------------------------------------------------------------------

/// The Node `name`, or `None` when there is no such Node.
pub async fn get_node(client: &Client, name: &str) -> Option<Node> {
    Api::<Node>::all(client.clone())
        .get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading node {name}: {e}"))
}

/// The Node `name`, which must exist.
pub async fn node(client: &Client, name: &str) -> Node {
    get_node(client, name)
        .await
        .unwrap_or_else(|| panic!("node {name} does not exist"))
}

/// Merge-patches a Node, as `kubectl patch --type=merge` does.
pub async fn patch_node(client: &Client, name: &str, patch: serde_json::Value) {
    Api::<Node>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching node {name}: {e}"));
}

pub fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.annotations().get(key).map(String::as_str)
}

pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.labels().get(key).map(String::as_str)
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

/// Every key of k8sm's group on the node, as `annotation <key>`, `label <key>` and `taint <key>`, sorted: what
/// `kubectl get node -o yaml | grep k8s.mesosphere.io` shows an operator.
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

/// What anyone can change on a Node that matters to an upgrade: its identity, annotations, labels, taints and
/// cordon. Leaves out what changes by itself (status and heartbeats, hence the resourceVersion) and the taints of
/// the node lifecycle controller (`node.kubernetes.io/*`), which a loaded machine's late heartbeat can bring.
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
        Self::of(&node(client, name).await)
    }
}

/// A Node that KWOK manages and makes Ready, built like crates/testcluster's nodes: what a machine that registers
/// again looks like. `annotations` come on top of KWOK's.
pub fn kwok_node(name: &str, annotations: &[(&str, &str)]) -> Node {
    let labels = BTreeMap::from(
        [
            ("kubernetes.io/hostname", name),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("type", "kwok"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned())),
    );
    let mut all_annotations = BTreeMap::from([
        (KWOK_NODE_ANNOTATION.to_owned(), "fake".to_owned()),
        ("node.alpha.kubernetes.io/ttl".to_owned(), "0".to_owned()),
    ]);
    all_annotations.extend(
        annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let resources = BTreeMap::from(
        [("cpu", "64"), ("memory", "256Gi"), ("pods", "110")]
            .map(|(k, v)| (k.to_owned(), Quantity(v.to_owned()))),
    );
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels),
            annotations: Some(all_annotations),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(resources.clone()),
            capacity: Some(resources),
            ..NodeStatus::default()
        }),
    }
}

/// Creates a Node, as a machine does when it registers.
pub async fn register_node(client: &Client, node: &Node) -> Node {
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), node)
        .await
        .unwrap_or_else(|e| panic!("creating node {}: {e}", node.name_any()))
}

// ---------------------------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------------------------

/// How many times an Event happened: the Events API folds repeats of one Event (same object, reason, note and type,
/// within minutes) into one object with a `series`, so counting objects would undercount a repeat.
pub fn occurrences(event: &Event) -> u32 {
    event
        .series
        .as_ref()
        .map_or(1, |s| u32::try_from(s.count.max(1)).unwrap_or(1))
}

/// The controller's Events about the object of `kind` named `name` (a Node, a Pod in any namespace, or a policy),
/// with `reason` if given.
pub async fn events_about(
    client: &Client,
    kind: &str,
    name: &str,
    reason: Option<&str>,
) -> Vec<Event> {
    Api::<Event>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("events can be listed")
        .items
        .into_iter()
        .filter(|e| e.reporting_controller.as_deref() == Some(CONTROLLER))
        .filter(|e| reason.is_none_or(|r| e.reason.as_deref() == Some(r)))
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .collect()
}

/// How many times the controller reported `reason` about a Node, Pod or policy (see [`occurrences`]).
pub async fn times(client: &Client, kind: &str, name: &str, reason: &str) -> u32 {
    events_about(client, kind, name, Some(reason))
        .await
        .iter()
        .map(occurrences)
        .sum()
}

/// Every reason the controller reported about an object, with how many times: a fingerprint of everything it did
/// to the object and every wait it reported.
pub async fn event_history(client: &Client, kind: &str, name: &str) -> BTreeMap<String, u32> {
    let mut history = BTreeMap::new();
    for event in events_about(client, kind, name, None).await {
        *history
            .entry(event.reason.clone().unwrap_or_default())
            .or_default() += occurrences(&event);
    }
    history
}

/// When an Event last happened: the series' last observation, else its eventTime, else its creation.
pub fn event_time(event: &Event) -> DateTime<Utc> {
    let ts = event
        .series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or_else(|| event.event_time.as_ref().map(|t| t.0))
        .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .expect("an Event has a time");
    DateTime::from_timestamp(ts.as_second(), ts.subsec_nanosecond().max(0) as u32)
        .expect("a representable time")
}

/// When an Event first happened: its eventTime, else its creation.
pub fn event_first_time(event: &Event) -> DateTime<Utc> {
    let ts = event
        .event_time
        .as_ref()
        .map(|t| t.0)
        .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .expect("an Event has a time");
    DateTime::from_timestamp(ts.as_second(), ts.subsec_nanosecond().max(0) as u32)
        .expect("a representable time")
}

pub fn note(event: &Event) -> &str {
    event.note.as_deref().unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------------------------
// The policy
// ---------------------------------------------------------------------------------------------------------------

/// The policy's condition of `type_`, if the controller wrote one.
pub fn condition<'a>(policy: &'a ExecutorUpgradePolicy, type_: &str) -> Option<&'a Condition> {
    policy
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// Whether the policy's condition of `type_` is True.
pub fn is_true(policy: &ExecutorUpgradePolicy, type_: &str) -> bool {
    condition(policy, type_).is_some_and(|c| c.status == "True")
}

// ---------------------------------------------------------------------------------------------------------------
// What an operator does
// ---------------------------------------------------------------------------------------------------------------

/// Replaces the scenario's simulated executors (`k8sm-agent simulate`) by a new agent process with the same base
/// flags as [`Scenario::start`] plus `extra`: the operator rolled out a fixed executor build. The old agent is
/// stopped first; the log goes on in the same file.
pub fn restart_agent(scenario: &mut Scenario, restart_delay: &str, extra: &[String]) {
    scenario.agent.kill_with(nix::sys::signal::Signal::SIGTERM);
    let log = scenario.agent.log.clone();
    // The same flags as Scenario::start_with_options.
    let args: Vec<String> = [
        "simulate".to_owned(),
        format!("--kubeconfig={}", scenario.cluster.kubeconfig().display()),
        format!("--new-executor-id={}", scenario.new_id),
        format!("--initial-executor-id={}", scenario.old_id),
        format!("--restart-delay={restart_delay}"),
        "--selector=type=kwok".to_owned(),
    ]
    .into_iter()
    .chain(extra.iter().cloned())
    .collect();
    scenario.agent = ChildGuard::spawn("k8sm-agent", &binary("k8sm-agent"), &args, &log);
}

/// The operator retries a node's kamikaze: `kubectl k8sm force NODE --retry-kamikaze --yes`, which removes k8sm's
/// record of it, so that k8sm tells the node once more. Returns what the plugin printed.
pub fn retry_kamikaze(scenario: &Scenario, node_name: &str) -> String {
    let out = crate::plugin::k8sm_ok(
        &scenario.cluster,
        &["force", node_name, "--retry-kamikaze", "--yes"],
    );
    assert!(out.contains("kamikaze record removed"), "{out}");
    out
}

/// Lines of the agent's log that mention `node` and contain `word`.
pub fn agent_log_lines(scenario: &Scenario, node: &str, word: &str) -> Vec<String> {
    std::fs::read_to_string(&scenario.agent.log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(node) && l.contains(word))
        .map(str::to_owned)
        .collect()
}
