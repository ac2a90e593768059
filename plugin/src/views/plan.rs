//! `plan`: a dry run of the planner over live state — the order in which nodes go, and for every pod of a draining
//! node what happens to it now and why. The same function the controller runs, so the prediction is exact for the
//! state it was made from.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Serialize;

use k8sm_api::{MaxConcurrentNodes, NodePhase};
use k8sm_planner::{ActionKind, ClusterView, Decision, NodePlan, Plan, PodPlan, Reason};

use crate::render::{Palette, count, table, timestamp};

/// The planner's verdict on one pod, for a human.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub owner: Option<String>,
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
    /// What happens to the node in this pass.
    pub next: String,
    pub blockers: Vec<String>,
    pub pods: Vec<PlannedPod>,
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
pub struct PlanView {
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
    pub problems: Vec<String>,
}

/// Nodes of `policy` that hold pods only an operator can move. The admission queue puts them last; the planner only
/// surveys pods of admitted nodes, so this asks it what it would decide with every node admitted.
pub fn need_operator(view: &ClusterView, policy: &str, now: DateTime<Utc>) -> HashSet<String> {
    let mut all_in = view.clone();
    for p in all_in.policies.iter_mut().filter(|p| p.name == policy) {
        p.spec.max_concurrent_nodes = MaxConcurrentNodes::Percent(100);
        p.spec.paused = false;
    }
    k8sm_planner::plan(&all_in, now)
        .nodes
        .into_iter()
        .filter(|n| n.policy == policy && n.pods.iter().any(|p| p.decision == Decision::Block))
        .map(|n| n.node)
        .collect()
}

impl PlanView {
    /// The view of `policy`'s part of `plan`. `need_operator` comes from [`need_operator`].
    pub fn new(
        plan: &Plan,
        policy: &str,
        target: (Option<String>, bool),
        need_operator: &HashSet<String>,
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
        nodes.sort_by_cached_key(|n| order_key(n, need_operator));
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
                    next: next(n, node_actions.get(n.node.as_str()).map_or(&[][..], |a| a)),
                    blockers: n
                        .blockers
                        .iter()
                        .filter(|b| b.pod.is_none())
                        .map(|b| b.message.clone())
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
            problems: summary.map_or_else(Vec::new, |s| {
                // The pause has its own line.
                s.conditions
                    .iter()
                    .filter(|c| c.reason != Reason::Paused)
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
            self.target_executor_id.as_deref().unwrap_or("none")
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
        for problem in &self.problems {
            out.push_str(&format!("Problem: {}\n", palette.red(problem)));
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
                    n.name.clone(),
                    palette.phase(n.phase),
                    n.pods_left.to_string(),
                    n.next.clone(),
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
        for node in upgrading.iter().filter(|n| !n.pods.is_empty()) {
            out.push_str(&format!(
                "\n{} ({}):\n",
                palette.bold(&node.name),
                node.phase
            ));
            for blocker in &node.blockers {
                out.push_str(&format!("  {}\n", palette.red(blocker)));
            }
            let rows: Vec<Vec<String>> = node
                .pods
                .iter()
                .filter(|p| wide || p.decision != Decision::Ignore)
                .map(|p| {
                    vec![
                        format!("{}/{}", p.namespace, p.name),
                        p.owner.clone().unwrap_or_else(|| "none".into()),
                        decision_colour(p.decision, &p.summary, palette),
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

/// Node order: slot holders in the planner's holder order, then Blocked nodes, then the admission queue (easiest
/// first: no operator-only pods, fewest pods, marked earliest, name), then nodes that are done.
fn order_key(
    n: &NodePlan,
    need_operator: &HashSet<String>,
) -> (u8, bool, u32, bool, Option<DateTime<Utc>>, String) {
    let group = match n.phase {
        NodePhase::KamikazeSent => 0,
        NodePhase::Drained => 1,
        NodePhase::Draining => 2,
        NodePhase::Blocked => 3,
        NodePhase::Incompatible => 4,
        NodePhase::Compatible => 5,
    };
    let queued = n.phase == NodePhase::Incompatible;
    (
        group,
        queued && need_operator.contains(&n.node),
        if queued { n.pods_left } else { 0 },
        n.since.is_none(),
        n.since,
        n.node.clone(),
    )
}

/// What happens to a node in this pass.
fn next(n: &NodePlan, actions: &[&ActionKind]) -> String {
    let admitted_now = actions
        .iter()
        .any(|a| matches!(a, ActionKind::Admit { .. }));
    let kamikaze_now = actions
        .iter()
        .any(|a| matches!(a, ActionKind::Kamikaze { .. }));
    let count = |d: Decision| n.pods.iter().filter(|p| p.decision == d).count();
    let moves: Vec<String> = [
        (count(Decision::Evict), "evict"),
        (count(Decision::Delete), "delete"),
        (count(Decision::Wait), "wait"),
        (count(Decision::Block), "need an operator"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    let mut parts = Vec::new();
    if admitted_now {
        parts.push("admitted now".to_owned());
    }
    match n.phase {
        NodePhase::KamikazeSent if kamikaze_now => parts.push("kamikaze now".into()),
        NodePhase::KamikazeSent => parts.push("waits for its executor to restart".into()),
        NodePhase::Incompatible => parts.push(n.blockers.first().map_or_else(
            || "waits for a drain slot".to_owned(),
            |b| b.message.clone(),
        )),
        NodePhase::Compatible => parts.push("done".into()),
        NodePhase::Drained => parts.push("drained; kamikaze next".into()),
        NodePhase::Draining | NodePhase::Blocked => {}
    }
    if !moves.is_empty() {
        parts.push(format!("pods: {}", moves.join(", ")));
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join("; ")
    }
}

fn planned_pod(p: &PodPlan) -> PlannedPod {
    PlannedPod {
        namespace: p.pod.namespace.clone(),
        name: p.pod.name.clone(),
        uid: p.pod.uid.clone(),
        owner: p.owner.as_ref().map(ToString::to_string),
        decision: p.decision,
        reason: p.reason,
        summary: summary(p.decision, &p.message),
    }
}

/// The decision in words, then why: "evict now: owner …", "wait: owner web 8/10 ready, needs 9", "never: opted out".
pub fn summary(decision: Decision, message: &str) -> String {
    let detail = ["wait: ", "evict: ", "delete "]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix))
        .unwrap_or(message);
    let verb = match decision {
        Decision::Evict => "evict now",
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

fn decision_colour(decision: Decision, text: &str, palette: Palette) -> String {
    match decision {
        Decision::Evict | Decision::Delete => palette.green(text),
        Decision::Wait => palette.yellow(text),
        Decision::Block => palette.red(text),
        Decision::Ignore => palette.dim(text),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
