//! The lists of a policy's status (nodes, blocked pods, deleted nodes), bounded at any fleet size.
//!
//! A status that listed every node not yet upgraded would pass etcd's object size limit (1.5 MiB)
//! at around 7,000 queued nodes, or with a few nodes that carry large annotations, and then stop
//! updating. So the status counts every node by phase but lists only what an operator looks at
//! (nodes blocked or in flight, blocked pods), most urgent first, at most [`MAX_NODES`] and
//! [`MAX_BLOCKED_PODS`] entries within a byte budget each; and every string that comes from node or
//! pod data is escaped and cut to a bound ([`k8sm_api::text`]).

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

/// How urgently an operator needs to see a node, most urgent first: it waits for an operator
/// (itself or one of its pods); it is blocked; it is in flight (holds a drain slot). `None`: not
/// listed (Compatible, or queued with nothing in its way: `counts.incompatible` counts those, and
/// `kubectl k8sm plan` shows the queue).
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

/// What a node waits for: each distinct line once, those that need an operator first, at most
/// [`MAX_BLOCKERS`]; and how many distinct lines were left out. (A node's pods often wait for the
/// same thing: one line says it.)
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

/// The entries of `status.blockedPods` (the most urgent: those that need an operator, then the
/// oldest), and the number of blocked pods in all.
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

/// Adds `message`, something the plan cannot know (an action that keeps failing, an eviction a
/// budget refused), to the blockers of `node`'s entry in `status.nodes`; a node that was not listed
/// is listed first, as it needs an operator's eye. The list keeps its bounds: the least urgent
/// entries make room, and are counted.
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

/// `status.deletedNodes`: the plan's records, with each executor ID in its bounded form (records
/// written by an earlier version may hold an oversized one; the planner compares bounded forms).
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

/// The first entries of `entries`, at most `max` of them and `budget` bytes of JSON together: an
/// entry that would pass the budget ends the list, so that the list keeps its order of urgency.
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
mod tests {
    //! Which nodes and pods a policy's status lists, in which order, and how much of their text.

    use k8sm_planner::testing::at;
    use k8sm_planner::{Blocker, Decision, OwnerKind, OwnerRef, PodClass, PodRef, Reason};

    use super::*;

    fn node(name: &str, phase: NodePhase, since: i64) -> NodePlan {
        NodePlan {
            node: name.to_owned(),
            policy: "p".into(),
            phase,
            since: Some(at(since)),
            pods_left: 0,
            executor_id: Some("sha256:old".into()),
            ready: true,
            blockers: Vec::new(),
            admission_position: None,
            operator_pods: 0,
            pods: Default::default(),
        }
    }

    fn with_blocker(mut node: NodePlan, reason: Reason, message: &str) -> NodePlan {
        node.blockers.push(Blocker {
            reason,
            message: message.into(),
            pod: None,
        });
        node
    }

    /// A pod of `node` that waits with `reason` (a Block decision when only an operator moves it).
    fn waiting_pod(node: &mut NodePlan, name: &str, reason: Reason, message: &str) {
        let pod = PodRef::new("shop", name.to_owned(), format!("uid-{name}"));
        let decision = if reason.needs_operator() {
            Decision::Block
        } else {
            Decision::Wait
        };
        node.blockers.push(Blocker {
            reason,
            message: message.into(),
            pod: Some(pod.clone()),
        });
        let mut pods = node.pods.to_vec();
        pods.push(PodPlan {
            pod,
            owner: Some(OwnerRef {
                kind: OwnerKind::ReplicaSet,
                name: "web".into(),
                uid: "rs".into(),
            }),
            class: PodClass::Owned,
            decision,
            reason: Some(reason),
            message: message.into(),
            until: None,
        });
        node.pods = pods.into();
        node.pods_left += 1;
    }

    fn names(lists: &Lists) -> Vec<&str> {
        lists.nodes.iter().map(|n| &*n.name).collect()
    }

    #[test]
    fn nodes_that_need_an_operator_come_first_then_blocked_then_in_flight_and_queued_ones_are_counted()
     {
        let plans = [
            node("upgraded", NodePhase::Compatible, 0),
            node("queued", NodePhase::Incompatible, 1),
            node("draining", NodePhase::Draining, 30),
            node("kamikazed", NodePhase::KamikazeSent, 20),
            with_blocker(
                node("stalled", NodePhase::Blocked, 40),
                Reason::Stalled,
                "stalled",
            ),
            with_blocker(
                node("overdue", NodePhase::KamikazeSent, 50),
                Reason::RestartOverdue,
                "kamikaze sent and the executor is not back",
            ),
            with_blocker(
                node("malformed", NodePhase::Incompatible, 10),
                Reason::MalformedAnnotation,
                "annotation is \"yesterday\"",
            ),
            with_blocker(
                node("paused-in-queue", NodePhase::Incompatible, 2),
                Reason::Paused,
                "paused: no node is admitted",
            ),
        ];
        let lists = Lists::of(&plans.iter().collect::<Vec<_>>());
        assert_eq!(
            names(&lists),
            ["malformed", "overdue", "stalled", "kamikazed", "draining"]
        );
        assert_eq!(lists.omitted_nodes, 2, "queued and paused-in-queue");
        assert_eq!(
            lists.nodes[1].blockers,
            ["kamikaze sent and the executor is not back"]
        );
    }

    #[test]
    fn a_draining_node_whose_pod_needs_an_operator_comes_before_other_nodes() {
        let mut opted_out = node("with-opted-out-pod", NodePhase::Draining, 30);
        waiting_pod(&mut opted_out, "pinned", Reason::BlockedOptOut, "opted out");
        let plans = [
            with_blocker(
                node("stalled", NodePhase::Blocked, 0),
                Reason::Stalled,
                "stalled",
            ),
            opted_out,
        ];
        let lists = Lists::of(&plans.iter().collect::<Vec<_>>());
        assert_eq!(names(&lists), ["with-opted-out-pod", "stalled"]);
    }

    #[test]
    fn at_most_max_nodes_are_listed_and_the_rest_counted() {
        let plans: Vec<NodePlan> = (0..(MAX_NODES + 50))
            .map(|i| node(&format!("n{i:04}"), NodePhase::Draining, i as i64))
            .chain((0..1000).map(|i| node(&format!("q{i:04}"), NodePhase::Incompatible, 0)))
            .collect();
        let lists = Lists::of(&plans.iter().collect::<Vec<_>>());
        assert_eq!(lists.nodes.len(), MAX_NODES);
        assert_eq!(lists.omitted_nodes, 50 + 1000);
        assert_eq!(lists.nodes[0].name, "n0000", "oldest first");
        assert_eq!(
            lists.nodes[MAX_NODES - 1].name,
            format!("n{:04}", MAX_NODES - 1)
        );
    }

    #[test]
    fn long_text_is_cut_and_fewer_nodes_are_listed_within_the_budget() {
        let huge = "\x1b[31m".repeat(40_000);
        let plans: Vec<NodePlan> = (0..MAX_NODES)
            .map(|i| {
                let mut n = node(&format!("n{i:04}"), NodePhase::Blocked, 0);
                n.executor_id = Some(huge.clone());
                for b in 0..(MAX_BLOCKERS + 3) {
                    n = with_blocker(n, Reason::Stalled, &format!("{b}{huge}"));
                }
                n
            })
            .collect();
        let lists = Lists::of(&plans.iter().collect::<Vec<_>>());
        let json = serde_json::to_vec(&lists.nodes).unwrap();
        assert!(json.len() <= NODES_BUDGET, "{} bytes", json.len());
        assert!(lists.nodes.len() < MAX_NODES, "the budget lists fewer");
        assert_eq!(
            lists.omitted_nodes as usize,
            MAX_NODES - lists.nodes.len(),
            "and counts the rest"
        );
        let first = &lists.nodes[0];
        let id = first.executor_id.as_deref().unwrap();
        assert!(id.len() <= MAX_EXECUTOR_ID, "{id}");
        assert!(
            id.starts_with("\\u{1b}[31m") && id.ends_with("bytes)"),
            "{id}"
        );
        assert_eq!(first.blockers.len(), MAX_BLOCKERS);
        assert_eq!(first.omitted_blockers, Some(3));
        for line in &first.blockers {
            assert!(line.len() <= MAX_MESSAGE, "{}", line.len());
            assert!(!line.chars().any(k8sm_api::text::is_unsafe), "{line}");
        }
    }

    #[test]
    fn blockers_are_listed_once_those_for_an_operator_first() {
        let mut n = node("n", NodePhase::Draining, 0);
        for pod in ["web-1", "web-2", "web-3"] {
            waiting_pod(
                &mut n,
                pod,
                Reason::WaitingForOwner,
                "wait: workload web 2/3 ready",
            );
        }
        waiting_pod(&mut n, "pinned", Reason::BlockedOptOut, "opted out");
        let lists = Lists::of(&[&n]);
        assert_eq!(
            lists.nodes[0].blockers,
            ["opted out", "wait: workload web 2/3 ready"]
        );
        assert_eq!(lists.nodes[0].omitted_blockers, None);
    }

    #[test]
    fn blocked_pods_that_need_an_operator_come_first_then_the_oldest() {
        let mut old = node("old", NodePhase::Draining, 0);
        waiting_pod(&mut old, "a-waits", Reason::WaitingForOwner, "wait");
        let mut recent = node("recent", NodePhase::Draining, 30);
        waiting_pod(&mut recent, "b-waits", Reason::BlockedByPDB, "budget");
        waiting_pod(
            &mut recent,
            "c-opted-out",
            Reason::BlockedOptOut,
            "opted out",
        );
        let mut moving = node("moving", NodePhase::Draining, 10);
        waiting_pod(
            &mut moving,
            "terminating",
            Reason::WaitingForTermination,
            "going",
        );
        let lists = Lists::of(&[&old, &recent, &moving]);
        let pods: Vec<&str> = lists.blocked_pods.iter().map(|p| &*p.name).collect();
        assert_eq!(pods, ["c-opted-out", "a-waits", "b-waits"]);
        assert_eq!(
            lists.blocked_pods_total, 3,
            "a terminating pod is not blocked"
        );
    }

    #[test]
    fn at_most_max_blocked_pods_are_listed_and_all_counted() {
        let mut n = node("n", NodePhase::Draining, 0);
        for i in 0..(MAX_BLOCKED_PODS * 3) {
            waiting_pod(
                &mut n,
                &format!("p{i:04}"),
                Reason::WaitingForOwner,
                &"m".repeat(5000),
            );
        }
        let lists = Lists::of(&[&n]);
        assert_eq!(lists.blocked_pods_total as usize, MAX_BLOCKED_PODS * 3);
        assert!(lists.blocked_pods.len() <= MAX_BLOCKED_PODS);
        let json = serde_json::to_vec(&lists.blocked_pods).unwrap();
        assert!(json.len() <= BLOCKED_PODS_BUDGET, "{} bytes", json.len());
        assert!(
            lists.blocked_pods[0]
                .message
                .ends_with("(truncated, 5000 bytes)")
        );
    }

    #[test]
    fn deleted_nodes_keep_a_bounded_executor_id() {
        let record = |id: &str| DeletedNodeRecord {
            name: "gone".into(),
            uid: "uid-gone".into(),
            executor_id: Some(id.to_owned()),
            deleted_at: at(0),
            target: None,
        };
        let huge = "x".repeat(200 * 1024);
        let written = deleted_nodes(&[record(&huge), record("sha256:old")]);
        let id = written[0].executor_id.as_deref().unwrap();
        assert!(id.len() <= MAX_EXECUTOR_ID, "{id}");
        assert_eq!(id, recorded_id(&huge));
        assert_eq!(written[1].executor_id.as_deref(), Some("sha256:old"));
    }

    /// A status with `lists`, as `build` makes it.
    fn status_of(lists: Lists) -> ExecutorUpgradePolicyStatus {
        ExecutorUpgradePolicyStatus {
            nodes: lists.nodes,
            omitted_nodes: Some(lists.omitted_nodes),
            blocked_pods: lists.blocked_pods,
            blocked_pods_total: Some(lists.blocked_pods_total),
            ..ExecutorUpgradePolicyStatus::default()
        }
    }

    #[test]
    fn a_node_whose_action_keeps_failing_is_listed_first_and_the_list_keeps_its_bounds() {
        let plans: Vec<NodePlan> = (0..MAX_NODES)
            .map(|i| node(&format!("n{i:04}"), NodePhase::Draining, i as i64))
            .chain([node("queued", NodePhase::Incompatible, 0)])
            .collect();
        let mut status = status_of(Lists::of(&plans.iter().collect::<Vec<_>>()));
        assert_eq!(status.omitted_nodes, Some(1));
        let why = "mark node queued failed 3 times in a row: 422 \x1b[31mInvalid";
        add_blocker(&mut status, &plans[MAX_NODES], why);
        assert_eq!(status.nodes.len(), MAX_NODES);
        assert_eq!(status.nodes[0].name, "queued");
        assert_eq!(
            status.nodes[0].blockers,
            ["mark node queued failed 3 times in a row: 422 \\u{1b}[31mInvalid"]
        );
        assert_eq!(
            status.nodes.last().map(|n| &*n.name),
            Some(format!("n{:04}", MAX_NODES - 2).as_str()),
            "the least urgent made room"
        );
        assert_eq!(status.omitted_nodes, Some(1), "and is counted");
        // Again: listed once.
        add_blocker(&mut status, &plans[MAX_NODES], why);
        assert_eq!(status.nodes[0].blockers.len(), 1);

        // Long answers for many nodes: the byte budget holds too.
        for (i, plan) in plans.iter().enumerate().take(60) {
            add_blocker(&mut status, plan, &format!("{i}{}", "x".repeat(5000)));
        }
        let json = serde_json::to_vec(&status.nodes).unwrap();
        assert!(json.len() <= NODES_BUDGET, "{} bytes", json.len());
        assert_eq!(
            status.omitted_nodes.unwrap() as usize + status.nodes.len(),
            MAX_NODES + 1,
            "every node listed or counted"
        );
    }

    #[test]
    fn a_pod_whose_action_keeps_failing_is_counted_and_listed_within_the_bounds() {
        let mut n = node("n", NodePhase::Draining, 0);
        waiting_pod(&mut n, "a", Reason::WaitingForOwner, "wait");
        let mut status = status_of(Lists::of(&[&n]));
        for i in 0..(MAX_BLOCKED_PODS * 2) {
            let pod = blocked_pod(&n, &n.pods[0], Reason::ActionFailed, &"y".repeat(2000 + i));
            add_blocked_pod(&mut status, pod);
        }
        assert_eq!(
            status.blocked_pods_total,
            Some(1 + 2 * MAX_BLOCKED_PODS as u32)
        );
        let json = serde_json::to_vec(&status.blocked_pods).unwrap();
        assert!(json.len() <= BLOCKED_PODS_BUDGET, "{} bytes", json.len());
    }
}
