//! The lists of a policy's status (nodes, blocked pods, deleted nodes), bounded at any fleet size.
//!
//! A status that listed every node not yet upgraded would pass etcd's object size limit (1.5 MiB) at around 7,000
//! queued nodes, or with a few nodes that carry large annotations, and then stop updating. So the status counts every
//! node by phase but lists only what an operator looks at (nodes blocked or in flight, blocked pods), most urgent
//! first, at most [`MAX_NODES`] and [`MAX_BLOCKED_PODS`] entries within a byte budget each; and every string that
//! comes from node or pod data is escaped and cut to a bound ([`k8sm_api::text`]).

use chrono::{DateTime, Utc};
use k8sm_api::text::{bounded, recorded_id};
use k8sm_api::{
    BLOCKED_PODS_BUDGET, BlockedPod, DeletedNode, ExecutorUpgradePolicyStatus, MAX_BLOCKED_PODS,
    MAX_BLOCKERS, MAX_EXECUTOR_ID, MAX_MESSAGE, MAX_NAME, MAX_NODES, NODES_BUDGET, NodePhase,
    NodeStatus,
};
use k8sm_planner::{DeletedNodeRecord, NodePlan, PodPlan, Reason};
use serde::Serialize;

use k8sm_view::time::to_time;

/// The node and pod lists of one policy's status.
#[derive(Debug, Default)]
pub struct Lists {
    /// The most urgent nodes (see [`urgency`]).
    pub nodes: Vec<NodeStatus>,
    /// Nodes that are not Compatible and not in `nodes`.
    pub omitted_nodes: u32,
    /// The most urgent blocked pods.
    pub blocked_pods: Vec<BlockedPod>,
    /// Every blocked pod, listed or not.
    pub blocked_pods_total: u32,
}

impl Lists {
    /// The lists of a policy whose nodes are `nodes`.
    pub fn of(nodes: &[&NodePlan]) -> Self {
        let listed = node_entries(nodes);
        let upgrading = nodes
            .iter()
            .filter(|n| n.phase != NodePhase::Compatible)
            .count();
        let (blocked_pods, blocked_pods_total) = blocked_pods(nodes);
        Self {
            omitted_nodes: count(upgrading.saturating_sub(listed.len())),
            nodes: listed,
            blocked_pods,
            blocked_pods_total,
        }
    }
}

/// How urgently an operator needs to see a node, most urgent first: it waits for an operator (itself or one of its
/// pods); it is blocked; it is in flight (holds a drain slot). `None`: not listed (Compatible, or queued with
/// nothing in its way: `counts.incompatible` counts those, and `kubectl k8sm plan` shows the queue).
fn urgency(node: &NodePlan) -> Option<u8> {
    if node.needs_operator() {
        Some(0)
    } else if node.is_blocked() {
        Some(1)
    } else if node.in_flight() {
        Some(2)
    } else {
        None
    }
}

/// The entries of `status.nodes`: the most urgent nodes, each group oldest first, while they fit.
fn node_entries(nodes: &[&NodePlan]) -> Vec<NodeStatus> {
    let mut candidates: Vec<(u8, &NodePlan)> = nodes
        .iter()
        .filter_map(|n| Some((urgency(n)?, *n)))
        .collect();
    candidates.sort_by(|(ua, a), (ub, b)| {
        (ua, a.since.is_none(), a.since, &a.node).cmp(&(ub, b.since.is_none(), b.since, &b.node))
    });
    within_budget(
        candidates.into_iter().map(|(_, n)| node_entry(n)),
        MAX_NODES,
        NODES_BUDGET,
    )
}

fn node_entry(node: &NodePlan) -> NodeStatus {
    let (blockers, omitted) = blocker_lines(node);
    NodeStatus {
        name: bounded(&node.node, MAX_NAME).into_owned(),
        phase: node.phase,
        since: node.since.map(to_time),
        pods_left: node.pods_left,
        blockers,
        omitted_blockers: (omitted > 0).then_some(omitted),
        executor_id: node
            .executor_id
            .as_deref()
            .map(|id| bounded(id, MAX_EXECUTOR_ID).into_owned()),
    }
}

/// What a node waits for: each distinct line once, those that need an operator first, at most [`MAX_BLOCKERS`];
/// and how many distinct lines were left out. (A node's pods often wait for the same thing: one line says it.)
fn blocker_lines(node: &NodePlan) -> (Vec<String>, u32) {
    let mut distinct: Vec<(bool, &str)> = Vec::new();
    for blocker in &node.blockers {
        if !distinct.iter().any(|(_, m)| **m == *blocker.message) {
            distinct.push((!blocker.reason.needs_operator(), &blocker.message));
        }
    }
    // Stable: within each kind, the planner's order (the node's own blockers before its pods').
    distinct.sort_by_key(|(later, _)| *later);
    let omitted = count(distinct.len().saturating_sub(MAX_BLOCKERS));
    let lines = distinct
        .into_iter()
        .take(MAX_BLOCKERS)
        .map(|(_, m)| bounded(m, MAX_MESSAGE).into_owned())
        .collect();
    (lines, omitted)
}

/// The entries of `status.blockedPods` (the most urgent: those that need an operator, then the oldest), and the
/// number of blocked pods in all.
fn blocked_pods(nodes: &[&NodePlan]) -> (Vec<BlockedPod>, u32) {
    let mut blocked: Vec<(&NodePlan, &PodPlan)> = nodes
        .iter()
        .flat_map(|node| node.pods.iter().map(move |pod| (*node, pod)))
        .filter(|(_, pod)| pod.is_blocked() && pod.reason.is_some())
        .collect();
    let total = count(blocked.len());
    blocked.sort_by(|a, b| pod_key(a).cmp(&pod_key(b)));
    let entries = blocked.into_iter().filter_map(|(node, pod)| {
        let reason = pod.reason?;
        Some(blocked_pod(node, pod, reason, &pod.message))
    });
    (
        within_budget(entries, MAX_BLOCKED_PODS, BLOCKED_PODS_BUDGET),
        total,
    )
}

/// Those that need an operator first, then the oldest (their node's since), then by node and pod.
fn pod_key<'a>(
    (node, pod): &(&'a NodePlan, &'a PodPlan),
) -> (bool, bool, Option<DateTime<Utc>>, &'a str, &'a str, &'a str) {
    (
        !pod.needs_operator(),
        node.since.is_none(),
        node.since,
        &node.node,
        pod.pod.namespace(),
        pod.pod.name(),
    )
}

/// Adds `message`, something the plan cannot know (an action that keeps failing, an eviction a budget refused), to
/// the blockers of `node`'s entry in `status.nodes`; a node that was not listed is listed first, as it needs an
/// operator's eye. The list keeps its bounds: the least urgent entries make room, and are counted.
pub fn add_blocker(status: &mut ExecutorUpgradePolicyStatus, node: &NodePlan, message: &str) {
    let line = bounded(message, MAX_MESSAGE).into_owned();
    let counted = |phase: NodePhase| u32::from(phase != NodePhase::Compatible);
    match status.nodes.iter_mut().find(|n| n.name == node.node) {
        Some(entry) if entry.blockers.contains(&line) => return,
        Some(entry) => entry.blockers.push(line),
        None => {
            let mut entry = node_entry(node);
            entry.blockers.insert(0, line);
            status.omitted_nodes = status
                .omitted_nodes
                .map(|n| n.saturating_sub(counted(node.phase)));
            status.nodes.insert(0, entry);
        }
    }
    while status.nodes.len() > MAX_NODES || json_len(&status.nodes) > NODES_BUDGET {
        let Some(last) = status.nodes.pop() else {
            break;
        };
        status.omitted_nodes = Some(status.omitted_nodes.unwrap_or(0) + counted(last.phase));
    }
}

/// Counts `pod` in `status.blockedPodsTotal`, and lists it while the list keeps its bounds.
pub fn add_blocked_pod(status: &mut ExecutorUpgradePolicyStatus, pod: BlockedPod) {
    status.blocked_pods_total = Some(status.blocked_pods_total.unwrap_or(0) + 1);
    if status.blocked_pods.len() < MAX_BLOCKED_PODS
        && json_len(&status.blocked_pods) + json_len(&pod) < BLOCKED_PODS_BUDGET
    {
        status.blocked_pods.push(pod);
    }
}

fn json_len<T: Serialize>(value: &T) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX / 2, |json| json.len())
}

/// `status.deletedNodes`: the plan's records, with each executor ID in its bounded form (records written by an
/// earlier version may hold an oversized one; the planner compares bounded forms).
pub fn deleted_nodes(records: &[DeletedNodeRecord]) -> Vec<DeletedNode> {
    records
        .iter()
        .map(|record| {
            let mut node = k8sm_view::deleted_node_status(record);
            node.executor_id = node.executor_id.map(|id| recorded_id(&id).into_owned());
            node
        })
        .collect()
}

/// The first entries of `entries`, at most `max` of them and `budget` bytes of JSON together: an entry that would
/// pass the budget ends the list, so that the list keeps its order of urgency.
fn within_budget<T: Serialize>(
    entries: impl Iterator<Item = T>,
    max: usize,
    budget: usize,
) -> Vec<T> {
    let mut out = Vec::new();
    let mut used = 0;
    for entry in entries.take(max) {
        // The entry and the comma before the next.
        let size = serde_json::to_vec(&entry).map_or(budget, |json| json.len() + 1);
        if used + size > budget {
            break;
        }
        used += size;
        out.push(entry);
    }
    out
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A pod of `node` in `status.blockedPods`, its strings escaped and bounded.
pub(crate) fn blocked_pod(
    node: &NodePlan,
    pod_plan: &PodPlan,
    reason: Reason,
    message: &str,
) -> BlockedPod {
    let name = |text: &str| bounded(text, MAX_NAME).into_owned();
    BlockedPod {
        node: name(&node.node),
        namespace: name(pod_plan.pod.namespace()),
        name: name(pod_plan.pod.name()),
        // "Kind/name": a kind and a name of at most 253 bytes each.
        owner: pod_plan
            .owner
            .as_ref()
            .map(|o| bounded(&o.to_string(), 2 * MAX_NAME + 1).into_owned()),
        class: Some(pod_plan.class.as_str().to_owned()),
        reason: reason.as_str().to_owned(),
        message: bounded(message, MAX_MESSAGE).into_owned(),
        since: node.since.map(to_time),
    }
}

#[cfg(test)]
#[path = "status_lists_tests.rs"]
mod tests;
