//! `plan`: a dry run of the planner over live state — the order in which nodes go, and for every pod of a draining
//! node what happens to it now and why. The same function the controller runs, so the prediction is exact for the
//! state it was made from.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use k8sm_api::NodePhase;
use k8sm_planner::{ActionKind, Blocker, Decision, NodePlan, Plan, PodClass, PodPlan, Reason};

use crate::render::{Palette, clean, count, table, timestamp};
use crate::screens::owner::owner_column;

/// The planner's verdict on one pod, for a human.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// "Kind/name" of the workload it counts for, or its Job.
    pub owner: Option<String>,
    /// How the planner classes it (`otherController`: a controller of a kind k8sm does not know).
    pub class: PodClass,
    pub decision: Decision,
    pub reason: Option<Reason>,
    /// "evict now: …", "wait: …", "never: …".
    pub summary: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedNode {
    /// 1 is the first node to finish; nodes that already run the target have none.
    pub order: Option<u32>,
    pub name: String,
    /// The phase once this pass's actions are done.
    pub phase: NodePhase,
    pub pods_left: u32,
    /// For a node that waits for a drain slot: its place in the admission queue, from 1 (admitted next).
    pub queue_position: Option<u32>,
    /// Pods on the node that only an operator can move; the queue puts such nodes after the others.
    pub operator_pods: u32,
    /// What happens to the node in this pass.
    pub next: String,
    /// What the node itself waits for (its pods' waits are in `pods`).
    pub blockers: Vec<PlannedBlocker>,
    pub pods: Vec<PlannedPod>,
}

/// Something a node itself waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedBlocker {
    pub reason: Reason,
    pub message: String,
}

/// An action of this pass: the Event the controller would record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedAction {
    pub reason: Reason,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanScreen {
    pub policy: String,
    pub at: DateTime<Utc>,
    pub target_executor_id: Option<String>,
    /// The target is the one given with `--to`, not (yet) the policy's.
    pub simulated_target: bool,
    pub paused: bool,
    pub slots: u32,
    pub slots_in_use: u32,
    /// Nodes still to upgrade, in order; then those that run the target already.
    pub nodes: Vec<PlannedNode>,
    pub actions: Vec<PlannedAction>,
    /// Why nothing is admitted or restarted now: the maintenance window is closed (and when it opens).
    pub outside_window: Option<String>,
    pub problems: Vec<String>,
}

impl PlanScreen {
    /// The view of `policy`'s part of `plan`.
    pub fn new(
        plan: &Plan,
        policy: &str,
        target: (Option<String>, bool),
        now: DateTime<Utc>,
    ) -> Self {
        let summary = plan.policy(policy);
        let actions: Vec<_> = plan.actions.iter().filter(|a| a.policy == policy).collect();
        let mut node_actions: BTreeMap<&str, Vec<&ActionKind>> = BTreeMap::new();
        for action in &actions {
            if let Some(node) = action.kind.node() {
                node_actions.entry(node).or_default().push(&action.kind);
            }
        }
        let mut nodes: Vec<&NodePlan> = plan.nodes.iter().filter(|n| n.policy == policy).collect();
        nodes.sort_by_key(|n| table_key(n));
        let mut order = 0;
        let nodes = nodes
            .into_iter()
            .map(|n| {
                let upgrading = n.phase != NodePhase::Compatible;
                order += u32::from(upgrading);
                PlannedNode {
                    order: upgrading.then_some(order),
                    name: n.node.clone(),
                    phase: n.phase,
                    pods_left: n.pods_left,
                    queue_position: n.admission_position,
                    operator_pods: n.operator_pods,
                    next: next(n, node_actions.get(n.node.as_str()).map_or(&[][..], |a| a)),
                    blockers: node_blockers(n)
                        .map(|b| PlannedBlocker {
                            reason: b.reason,
                            message: b.message.to_string(),
                        })
                        .collect(),
                    pods: n.pods.iter().map(planned_pod).collect(),
                }
            })
            .collect();
        Self {
            policy: policy.to_owned(),
            at: now,
            target_executor_id: target.0,
            simulated_target: target.1,
            paused: summary.is_some_and(|s| s.paused),
            slots: summary.map_or(0, |s| s.slots),
            slots_in_use: summary.map_or(0, |s| s.slots_in_use),
            nodes,
            actions: actions
                .iter()
                .map(|a| PlannedAction {
                    reason: a.reason,
                    message: a.message.clone(),
                })
                .collect(),
            outside_window: summary.and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.reason == Reason::OutsideWindow)
                    .map(|c| c.message.clone())
            }),
            problems: summary.map_or_else(Vec::new, |s| {
                // The pause and the window have their own lines.
                s.conditions
                    .iter()
                    .filter(|c| !matches!(c.reason, Reason::Paused | Reason::OutsideWindow))
                    .map(|c| format!("{}: {}", c.reason, c.message))
                    .collect()
            }),
        }
    }

    /// The pods this pass evicts, as "namespace/name".
    pub fn evictions(&self) -> Vec<String> {
        self.nodes
            .iter()
            .flat_map(|n| &n.pods)
            .filter(|p| p.decision == Decision::Evict)
            .map(|p| format!("{}/{}", p.namespace, p.name))
            .collect()
    }

    pub fn render(&self, wide: bool, palette: Palette) -> String {
        let mut out = format!(
            "Dry run of policy {} at {}, target {}",
            palette.bold(&self.policy),
            timestamp(self.at),
            clean(self.target_executor_id.as_deref().unwrap_or("none"), true)
        );
        if self.simulated_target {
            out.push_str(" (as if `kubectl k8sm upgrade start` set it now)");
        }
        out.push('\n');
        out.push_str(&format!(
            "Drain slots: {}, {} in use after this pass{}\n",
            self.slots,
            self.slots_in_use,
            if self.paused {
                palette.yellow("; PAUSED: nothing moves")
            } else {
                String::new()
            }
        ));
        out.push_str(&format!("This pass: {}\n", self.pass_summary()));
        if let Some(window) = &self.outside_window {
            out.push_str(&format!(
                "Window: {}\n",
                palette.yellow(&clean(window, wide))
            ));
        }
        for problem in &self.problems {
            out.push_str(&format!(
                "Problem: {}\n",
                palette.red(&clean(problem, wide))
            ));
        }
        let upgrading: Vec<&PlannedNode> =
            self.nodes.iter().filter(|n| n.order.is_some()).collect();
        let done = self.nodes.len() - upgrading.len();
        out.push('\n');
        if upgrading.is_empty() && self.target_executor_id.is_none() {
            out.push_str(&format!(
                "No target executor ID and no node marked by another component: {} left alone.\n\
                 Add --to ID to see what `kubectl k8sm upgrade start --to ID` would do.\n",
                count(done, "selected node is", "selected nodes are")
            ));
            return out;
        }
        if upgrading.is_empty() {
            out.push_str(&format!(
                "All {} run the target executor: nothing to do.\n",
                count(done, "selected node", "selected nodes")
            ));
            return out;
        }
        let rows: Vec<Vec<String>> = upgrading
            .iter()
            .map(|n| {
                vec![
                    n.order.map(|o| o.to_string()).unwrap_or_default(),
                    clean(&n.name, wide),
                    palette.phase(n.phase),
                    n.pods_left.to_string(),
                    clean(&n.next, wide),
                ]
            })
            .collect();
        out.push_str(&table(
            &["ORDER", "NODE", "PHASE", "PODS LEFT", "NEXT"],
            &rows,
        ));
        if done > 0 {
            out.push_str(&format!(
                "{} the target executor already.\n",
                count(done, "more node runs", "more nodes run")
            ));
        }
        for node in upgrading.iter().filter(|n| n.has_details()) {
            out.push_str(&format!(
                "\n{} ({}):\n",
                palette.bold(&clean(&node.name, wide)),
                node.phase
            ));
            for blocker in node.blockers.iter().filter(|b| b.reason.blocks()) {
                out.push_str(&format!("  {}\n", blocker_colour(blocker, wide, palette)));
            }
            if node.pods.is_empty() {
                continue;
            }
            let rows: Vec<Vec<String>> = node
                .pods
                .iter()
                .filter(|p| wide || p.decision != Decision::Ignore)
                .map(|p| {
                    vec![
                        clean(&format!("{}/{}", p.namespace, p.name), wide),
                        clean(&owner_column(&p.class, p.owner.as_deref()), wide),
                        decision_colour(p.decision, &clean(&p.summary, wide), palette),
                    ]
                })
                .collect();
            if rows.is_empty() {
                out.push_str(
                    "  only pods that restart with the node (DaemonSet, mirror, finished)\n",
                );
                continue;
            }
            for line in table(&["POD", "OWNER", "DECISION"], &rows).lines() {
                out.push_str(&format!("  {line}\n"));
            }
        }
        out
    }

    /// "mark 4 nodes, admit node-0000, evict 2 pods" — what the controller would do right now.
    fn pass_summary(&self) -> String {
        let count = |reasons: &[Reason]| {
            self.actions
                .iter()
                .filter(|a| reasons.contains(&a.reason))
                .count()
        };
        let parts: Vec<String> = [
            (count(&[Reason::Marked]), "mark", "node"),
            (
                count(&[Reason::Cordoned, Reason::Admitted]),
                "admit or cordon",
                "node",
            ),
            (count(&[Reason::Evicted]), "evict", "pod"),
            (count(&[Reason::Moved]), "move by a rollout", "pod"),
            (
                count(&[Reason::DeletedUnmanagedPod, Reason::DeletedFinishedPod]),
                "delete",
                "pod",
            ),
            (count(&[Reason::KamikazeSent]), "kamikaze", "node"),
            (
                count(&[Reason::Upgraded, Reason::Released]),
                "complete",
                "node",
            ),
        ]
        .into_iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, verb, noun)| format!("{verb} {n} {noun}{}", if n == 1 { "" } else { "s" }))
        .collect();
        if parts.is_empty() {
            "nothing to do".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

impl PlannedNode {
    /// Whether the node gets a section of its own: it has pods to show, or waits on something that blocks it.
    fn has_details(&self) -> bool {
        !self.pods.is_empty() || self.blockers.iter().any(|b| b.reason.blocks())
    }
}

/// Table order: slot holders, most advanced first; then Blocked nodes without a place in the queue; then the
/// admission queue, in the planner's order; then nodes that are never admitted (opted out); then those done.
fn table_key(n: &NodePlan) -> (u8, Option<u32>, Option<DateTime<Utc>>, &str) {
    let group = match (n.phase, n.admission_position) {
        (_, Some(_)) => 4,
        (NodePhase::KamikazeSent, None) => 0,
        (NodePhase::Drained, None) => 1,
        (NodePhase::Draining, None) => 2,
        (NodePhase::Blocked, None) => 3,
        (NodePhase::Incompatible, None) => 5,
        (NodePhase::Compatible, None) => 6,
    };
    (group, n.admission_position, n.since, &n.node)
}

/// What the node itself waits for, as opposed to its pods.
fn node_blockers(n: &NodePlan) -> impl Iterator<Item = &Blocker> {
    n.blockers.iter().filter(|b| b.pod.is_none())
}

/// What happens to a node in this pass: what is done to it, where it stands, and what its pods do.
fn next(n: &NodePlan, actions: &[&ActionKind]) -> String {
    let admitted_now = actions
        .iter()
        .any(|a| matches!(a, ActionKind::Admit { .. }));
    let mut parts = Vec::new();
    if admitted_now {
        parts.push("admitted now".to_owned());
    }
    parts.extend(standing(n, actions));
    parts.extend(queue(n));
    parts.extend(pod_moves(n));
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join("; ")
    }
}

/// Where the node stands in its phase.
fn standing(n: &NodePlan, actions: &[&ActionKind]) -> Option<String> {
    let kamikaze_now = actions
        .iter()
        .any(|a| matches!(a, ActionKind::Kamikaze { .. }));
    let blocked_by = node_blockers(n).find(|b| b.reason.blocks());
    Some(match n.phase {
        NodePhase::KamikazeSent if kamikaze_now => "kamikaze now".into(),
        NodePhase::KamikazeSent => "waits for its executor to restart".into(),
        NodePhase::Incompatible => blocked_by.map_or_else(
            || "waits for a drain slot".to_owned(),
            |b| b.message.to_string(),
        ),
        NodePhase::Blocked => blocked_by.map_or_else(
            || "blocked".to_owned(),
            |b| format!("blocked: {}", b.reason),
        ),
        NodePhase::Compatible => "done".into(),
        NodePhase::Drained => "drained; kamikaze next".into(),
        NodePhase::Draining => return None,
    })
}

/// A queued node's place, and the pods that will need an operator once it is admitted.
fn queue(n: &NodePlan) -> Vec<String> {
    let mut parts = Vec::new();
    if let Some(position) = n.admission_position {
        parts.push(format!("place {position} in the queue"));
    }
    // The pods of an admitted node say so themselves; a queued node's pods are not decided yet.
    if n.operator_pods > 0 && n.pods.is_empty() {
        let pods = count(n.operator_pods as usize, "pod needs", "pods need");
        parts.push(format!("{pods} an operator"));
    }
    parts
}

/// "pods: 2 evict, 1 wait": the decisions of this pass on the node's pods.
fn pod_moves(n: &NodePlan) -> Option<String> {
    let decided = |d: Decision| n.pods.iter().filter(|p| p.decision == d).count();
    let moves: Vec<String> = [
        (decided(Decision::Evict), "evict"),
        (decided(Decision::Move), "move by a rollout"),
        (decided(Decision::Delete), "delete"),
        (decided(Decision::Wait), "wait"),
        (decided(Decision::Block), "need an operator"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    (!moves.is_empty()).then(|| format!("pods: {}", moves.join(", ")))
}

fn planned_pod(p: &PodPlan) -> PlannedPod {
    PlannedPod {
        namespace: p.pod.namespace().to_string(),
        name: p.pod.name().to_string(),
        uid: p.pod.uid().to_string(),
        owner: p.owner.as_ref().map(ToString::to_string),
        class: p.class.clone(),
        decision: p.decision,
        reason: p.reason,
        summary: summary(p.decision, &p.message),
    }
}

/// The decision in words, then why: "evict now: owner …", "wait: owner web 8/10 ready, needs 9", "never: opted out".
pub fn summary(decision: Decision, message: &str) -> String {
    let detail = ["wait: ", "evict: ", "move: ", "delete "]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix))
        .unwrap_or(message);
    let verb = match decision {
        Decision::Evict => "evict now",
        Decision::Move => "move now",
        Decision::Delete => "delete now",
        Decision::Wait => "wait",
        Decision::Block => "never",
        Decision::Ignore => "ignore",
    };
    if detail.is_empty() {
        verb.to_owned()
    } else {
        format!("{verb}: {detail}")
    }
}

/// Red for what only an operator resolves, yellow for waits that end by themselves.
fn blocker_colour(blocker: &PlannedBlocker, wide: bool, palette: Palette) -> String {
    let message = clean(&blocker.message, wide);
    if blocker.reason.needs_operator() {
        palette.red(&message)
    } else {
        palette.yellow(&message)
    }
}

fn decision_colour(decision: Decision, text: &str, palette: Palette) -> String {
    match decision {
        Decision::Evict | Decision::Move | Decision::Delete => palette.green(text),
        Decision::Wait => palette.yellow(text),
        Decision::Block => palette.red(text),
        Decision::Ignore => palette.dim(text),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
