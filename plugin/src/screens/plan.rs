//! `plan`: a dry run of the planner over live state — the order in which nodes go, and for every
//! pod of a draining node what happens to it now and why. The same function the controller runs, so
//! the prediction is exact for the state it was made from.

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
    /// For a node that waits for a drain slot: its place in the admission queue, from 1 (admitted
    /// next).
    pub queue_position: Option<u32>,
    /// Pods on the node that only an operator can move; the queue puts such nodes after the
    /// others.
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
    /// Why nothing is admitted or restarted now: the maintenance window is closed (and when it
    /// opens).
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
    #[cfg(test)]
    pub fn evictions(&self) -> Vec<String> {
        self.nodes
            .iter()
            .flat_map(|n| n.pods.iter())
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
    /// Whether the node gets a section of its own: it has pods to show, or waits on something that
    /// blocks it.
    fn has_details(&self) -> bool {
        !self.pods.is_empty() || self.blockers.iter().any(|b| b.reason.blocks())
    }
}

/// Table order: slot holders, most advanced first; then Blocked nodes without a place in the queue;
/// then the admission queue, in the planner's order; then nodes that are never admitted (opted
/// out); then those done.
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

/// The decision in words, then why: "evict now: owner …", "wait: owner web 8/10 ready, needs 9",
/// "never: opted out".
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
mod tests {
    //! Rendering tests of `plan`: a cluster view in, the planner's verdict as text out.

    use super::*;
    use crate::screens::fixtures::stuck_cluster;
    use k8sm_api::UnmanagedPodPolicy;
    use k8sm_planner::ClusterView;
    use k8sm_planner::testing::{NEW, OLD, at, node, policy, replica_set, unmanaged_pod};

    /// Four nodes before the upgrade starts. n1: two pods of `web` (2 replicas: one may go at a
    /// time) and the only pod of `api`; n2: an unmanaged pod under policy Never; n3 and n4:
    /// three pods of `fill` each.
    fn cluster() -> ClusterView {
        let web = replica_set("shop", "web", 2);
        let api = replica_set("shop", "api", 1);
        let fill = replica_set("shop", "fill", 6);
        let mut pods = vec![
            web.pod("web-1", "n1"),
            web.pod("web-2", "n1"),
            api.pod("api-1", "n1"),
            unmanaged_pod("ops", "debug", "n2"),
        ];
        for i in 1..=6 {
            pods.push(fill.pod(&format!("fill-{i}"), if i <= 3 { "n3" } else { "n4" }));
        }
        ClusterView {
            nodes: ["n1", "n2", "n3", "n4"].map(node).to_vec(),
            pods: k8sm_planner::testing::shared_pods(pods),
            owners: vec![web.into(), api.into(), fill.into()],
            policies: vec![
                policy("fleet").with(|s| s.unmanaged_pods.policy = UnmanagedPodPolicy::Never),
            ],
            ..ClusterView::default()
        }
    }

    fn view_of(cluster: &ClusterView, now: DateTime<Utc>) -> PlanScreen {
        let plan = k8sm_planner::plan(cluster, now);
        PlanScreen::new(&plan, "fleet", (Some(NEW.into()), true), now)
    }

    #[test]
    fn the_first_wave_of_a_new_target() {
        let view = view_of(&cluster(), at(0));
        // `fill` (6 replicas, one may go at a time) has 6 waves to go, `web` 2: the one slot goes
        // to a node of the longest chain, in the pass that marks the nodes as in every
        // later one; n3 before n4 by name.
        assert_eq!(view.evictions(), ["shop/fill-1"]);
        let order: Vec<(&str, Option<u32>, Option<u32>, u32)> = view
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.order, n.queue_position, n.operator_pods))
            .collect();
        // n2 has the fewest pods but needs an operator: it is never started (Blocked, no place in
        // the queue), and the table shows it before the queue.
        assert_eq!(
            order,
            [
                ("n3", Some(1), None, 0),
                ("n2", Some(2), None, 1),
                ("n1", Some(3), Some(1), 0),
                ("n4", Some(4), Some(2), 0)
            ]
        );
        let text = view.render(false, Palette::PLAIN);
        let expected = "Dry run of policy fleet at 2026-01-01T00:00:00Z, target sha256:new (as if `kubectl k8sm upgrade start` set it now)
Drain slots: 1, 1 in use after this pass
This pass: mark 4 nodes, admit or cordon 1 node, evict 1 pod

ORDER   NODE   PHASE          PODS LEFT   NEXT
1       n3     Draining       3           admitted now; pods: 1 evict, 2 wait
2       n2     Blocked        1           blocked: BlockedUnmanagedPod; pods: 1 need an operator
3       n1     Incompatible   3           waits for a drain slot; place 1 in the queue
4       n4     Incompatible   3           waits for a drain slot; place 2 in the queue

n3 (Draining):
  POD           OWNER             DECISION
  shop/fill-1   ReplicaSet/fill   evict now: workload ReplicaSet fill ready 6/6 → 5 (threshold 90% needs 6)
  shop/fill-2   ReplicaSet/fill   wait: workload ReplicaSet fill 5/6 ready, 1 terminating or not replaced, needs 6 (threshold 90%)
  shop/fill-3   ReplicaSet/fill   wait: workload ReplicaSet fill 5/6 ready, 1 terminating or not replaced, needs 6 (threshold 90%)

n2 (Blocked):
  not started while a pod on it needs an operator (1 in all): not cordoned, nothing evicted; admitted like any other node once they are cleared
  POD         OWNER   DECISION
  ops/debug   none    never: unmanaged pod (no controller): policy Never; delete it, or `kubectl k8sm force n2`
";
        assert_eq!(text, expected);
    }

    #[test]
    fn operator_blocks_read_never() {
        // n2 alone is left: it is admitted and its unmanaged pod needs an operator.
        let mut cluster = cluster();
        cluster
            .pods
            .retain(|p| p.node_name.as_deref() == Some("n2"));
        cluster.nodes.retain(|n| n.name == "n2");
        let view = view_of(&cluster, at(0));
        let pod = &view.nodes[0].pods[0];
        assert_eq!(pod.decision, Decision::Block);
        assert!(
            pod.summary
                .starts_with("never: unmanaged pod (no controller): policy Never"),
            "{}",
            pod.summary
        );
        let text = view.render(false, Palette::PLAIN);
        assert!(text.contains("pods: 1 need an operator"), "{text}");
    }

    #[test]
    fn nothing_left_to_do() {
        let mut cluster = cluster();
        for n in &mut cluster.nodes {
            *n = n.clone().executor(NEW);
        }
        let view = view_of(&cluster, at(0));
        assert!(view.evictions().is_empty());
        let text = view.render(false, Palette::PLAIN);
        assert!(text.contains("This pass: nothing to do"), "{text}");
        assert!(
            text.ends_with("All 4 selected nodes run the target executor: nothing to do.\n"),
            "{text}"
        );
    }

    #[test]
    fn without_a_target_plan_suggests_one() {
        let mut cluster = cluster();
        cluster.policies[0].spec.target_executor_id = None;
        let now = at(0);
        let plan = k8sm_planner::plan(&cluster, now);
        let view = PlanScreen::new(&plan, "fleet", (None, false), now);
        assert_eq!(
            view.render(false, Palette::PLAIN),
            "Dry run of policy fleet at 2026-01-01T00:00:00Z, target none
Drain slots: 1, 0 in use after this pass
This pass: nothing to do

No target executor ID and no node marked by another component: 4 selected nodes are left alone.
Add --to ID to see what `kubectl k8sm upgrade start --to ID` would do.
"
        );
    }

    #[test]
    fn a_paused_policy_says_what_it_would_do() {
        let mut cluster = cluster();
        cluster.nodes = cluster
            .nodes
            .into_iter()
            .map(|n| {
                if n.name == "n1" {
                    n.marked(at(0)).admitted(at(1))
                } else {
                    n
                }
            })
            .collect();
        cluster.policies[0].spec.paused = true;
        let view = view_of(&cluster, at(2));
        assert!(view.evictions().is_empty());
        let text = view.render(false, Palette::PLAIN);
        assert!(text.contains("PAUSED: nothing moves"), "{text}");
        assert!(!text.contains("Problem"), "the pause is no problem: {text}");
        assert!(text.contains("wait: paused; would evict"), "{text}");
    }

    #[test]
    fn ignored_pods_only_in_wide() {
        let mut cluster = cluster();
        let agent = k8sm_planner::testing::daemon_set("kube-system", "agent");
        // On n3, the node admitted first (see `the_first_wave_of_a_new_target`).
        cluster.pods.push(agent.pod("agent-n3", "n3").into());
        cluster.owners.push(agent.into());
        let view = view_of(&cluster, at(0));
        assert!(!view.render(false, Palette::PLAIN).contains("agent-n3"));
        let wide = view.render(true, Palette::PLAIN);
        assert!(
            wide.contains("ignore: DaemonSet pod: restarts with the node"),
            "{wide}"
        );
    }

    #[test]
    fn summaries_lead_with_the_decision() {
        assert_eq!(
            summary(
                Decision::Wait,
                "wait: owner ReplicaSet web 8/10 ready, needs 9"
            ),
            "wait: owner ReplicaSet web 8/10 ready, needs 9"
        );
        assert_eq!(
            summary(Decision::Delete, "delete unmanaged pod (no controller)"),
            "delete now: unmanaged pod (no controller)"
        );
        assert_eq!(
            summary(
                Decision::Block,
                "opted out by k8s.mesosphere.io/upgrade-opt-out"
            ),
            "never: opted out by k8s.mesosphere.io/upgrade-opt-out"
        );
        assert_eq!(summary(Decision::Evict, ""), "evict now");
    }

    #[test]
    fn json_carries_decisions_and_reasons() {
        let value = serde_json::to_value(view_of(&cluster(), at(0))).unwrap();
        assert_eq!(value["policy"], "fleet");
        assert_eq!(value["nodes"][0]["name"], "n3");
        assert_eq!(value["nodes"][0]["pods"][0]["decision"], "Evict");
        assert_eq!(value["nodes"][0]["pods"][0]["reason"], "Evicted");
        assert_eq!(value["nodes"][0]["pods"][2]["reason"], "WaitingForOwner");
        assert_eq!(value["simulatedTarget"], true);
    }

    #[test]
    fn stalled_and_came_back_wrong_nodes_are_blocked_and_say_why() {
        let view = view_of(&stuck_cluster(), at(22));
        let rows: Vec<(&str, NodePhase, Option<u32>, &str)> = view
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.phase, n.queue_position, n.next.as_str()))
            .collect();
        assert_eq!(
            rows,
            [
                ("n3", NodePhase::Draining, None, "pods: 1 evict"),
                (
                    "n5",
                    NodePhase::Blocked,
                    None,
                    "blocked: UnexpectedExecutor"
                ),
                (
                    "n1",
                    NodePhase::Blocked,
                    Some(1),
                    "blocked: Stalled; place 1 in the queue; pods: 2 wait"
                ),
                ("n4", NodePhase::Compatible, None, "done"),
            ]
        );
        let text = view.render(false, Palette::PLAIN);
        let section = |node: &str| {
            let start = text
                .find(&format!("\n{node} ("))
                .unwrap_or_else(|| panic!("{node}: {text}"));
            text[start + 1..].split("\n\n").next().unwrap().to_owned()
        };
        let expected = [
        ("n5", format!("n5 (Blocked):\n  came back from kamikaze still running its old executor {OLD}")),
        ("n5", "kubectl k8sm force n5 --retry-kamikaze".to_owned()),
        ("n1", "n1 (Blocked):\n  stalled at 2026-01-01T00:20:00+00:00".to_owned()),
        ("n1", "shop/web-1   ReplicaSet/web   wait: workload ReplicaSet web 1/2 ready".to_owned()),
        ("n1", "shop/api-1   ReplicaSet/api   wait: waits for a drain slot; would evict".to_owned()),
        (
            "n3",
            "data/kafka-0   KafkaNodePool/kafka (other controller)   evict now: controller KafkaNodePool kafka (2 pods \
             seen) ready 2/2 → 1 (threshold 90% needs 2) (PodDisruptionBudget data/kafka allows no disruption now: the \
             Eviction API decides)"
                .to_owned(),
        ),
    ];
        for (node, text) in expected {
            let section = section(node);
            assert!(section.contains(&text), "{node}: {text}\n{section}");
        }
    }

    #[test]
    fn operator_only_node_blockers_are_red_and_waits_yellow() {
        let view = view_of(&stuck_cluster(), at(22));
        let text = view.render(false, Palette::COLOR);
        assert!(text.contains("  \x1b[31mcame back from kamikaze"), "{text}");
        assert!(text.contains("  \x1b[33mstalled at"), "{text}");
    }
}
