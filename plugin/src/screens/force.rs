//! `force NODE`: which of a node's pods the operator may delete, from the live plan's decisions,
//! and the report of what was done.

use serde::Serialize;

use k8sm_api::NodePhase;
use k8sm_planner::{Decision, NodePlan, PodPlan, Reason};

use crate::render::{Palette, clean, count, table};

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForcedPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub reason: Reason,
    pub message: String,
}

/// The pods `force` deletes, and those it leaves alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForceSelection {
    pub node: String,
    pub phase: NodePhase,
    pub delete: Vec<ForcedPod>,
    /// Opted-out pods, left alone without `--include-opted-out`.
    pub opted_out_left: Vec<ForcedPod>,
    /// Pods stuck terminating, left alone without `--terminating`.
    pub terminating_left: Vec<ForcedPod>,
}

impl ForceSelection {
    /// Pods the planner blocks on an operator: unmanaged pods under policy Never (or past a timeout
    /// without one); with `include_opted_out`, opted-out pods; with `terminating`, pods stuck
    /// terminating (deleted with a grace period of 0, as `kubectl drain --force` users expect
    /// of a pod whose kubelet is gone). Pods that wait for owners, budgets or time are never
    /// forced: deleting them could break the SLA that k8sm exists to keep.
    pub fn new(node: &NodePlan, include_opted_out: bool, terminating: bool) -> Self {
        let blocked = |reason: Reason| {
            node.pods
                .iter()
                .filter(move |p| p.decision == Decision::Block && p.reason == Some(reason))
                .map(forced)
        };
        let opted_out: Vec<ForcedPod> = blocked(Reason::BlockedOptOut).collect();
        let mut delete: Vec<ForcedPod> = blocked(Reason::BlockedUnmanagedPod).collect();
        let opted_out_left = if include_opted_out {
            delete.extend(opted_out);
            Vec::new()
        } else {
            opted_out
        };
        let stuck: Vec<ForcedPod> = blocked(Reason::StuckTerminating).collect();
        let terminating_left = if terminating {
            delete.extend(stuck);
            Vec::new()
        } else {
            stuck
        };
        delete.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Self {
            node: node.node.clone(),
            phase: node.phase,
            delete,
            opted_out_left,
            terminating_left,
        }
    }

    /// What would be deleted, before the confirmation.
    pub fn render(&self, palette: Palette) -> String {
        let mut out = String::new();
        let opted_out = (!self.opted_out_left.is_empty()).then(|| {
            format!(
                "{} ({})",
                count(self.opted_out_left.len(), "opted-out pod", "opted-out pods"),
                names(&self.opted_out_left)
            )
        });
        if let (true, Some(opted_out)) = (self.delete.is_empty(), &opted_out) {
            out.push_str(&format!(
                "Nothing deleted on node {}: only {opted_out} blocks it; add --include-opted-out to delete opted-out pods too.\n",
                self.node
            ));
        } else if self.delete.is_empty() {
            out.push_str(&format!(
                "Nothing to force on node {} ({}): {}.\n",
                self.node,
                self.phase,
                match self.phase {
                    NodePhase::Draining | NodePhase::Drained | NodePhase::Blocked =>
                        "no pod waits for an operator",
                    _ => "it is not draining, so no pod blocks it",
                }
            ));
        } else {
            out.push_str(&format!(
                "Pods on node {} that only an operator can move:\n",
                palette.bold(&self.node)
            ));
            out.push_str(&pod_table(&self.delete, palette));
        }
        if let (false, Some(opted_out)) = (self.delete.is_empty(), &opted_out) {
            out.push_str(&format!(
                "Left alone: {opted_out}; add --include-opted-out to delete opted-out pods too.\n"
            ));
        }
        if !self.terminating_left.is_empty() {
            out.push_str(&format!(
                "Left alone: {} ({}); add --terminating to delete them with a grace period of 0 (a finalizer still \
                 holds a pod until what set it removes it).\n",
                count(self.terminating_left.len(), "pod stuck terminating", "pods stuck terminating"),
                names(&self.terminating_left)
            ));
        }
        out
    }

    /// The confirmation question.
    pub fn question(&self) -> String {
        format!(
            "Delete {} from node {}? Nothing recreates an unmanaged pod. [y/N]: ",
            count(self.delete.len(), "pod", "pods"),
            self.node
        )
    }
}

/// What came of one deletion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "result")]
pub enum Outcome {
    Deleted { pod: String },
    WouldDelete { pod: String },
    Gone { pod: String },
    Replaced { pod: String },
}

impl Outcome {
    pub fn line(&self) -> String {
        match self {
            Self::Deleted { pod } => format!("pod/{pod} deleted; Forced event recorded"),
            Self::WouldDelete { pod } => format!("pod/{pod} would be deleted (dry run)"),
            Self::Gone { pod } => format!("pod/{pod} is already gone"),
            Self::Replaced { pod } => {
                format!("pod/{pod} was replaced by a new pod of the same name: left alone")
            }
        }
    }
}

/// The note of the `Forced` Event, written before the deletion: who forces it, how, and what the
/// pod is blocking.
pub fn event_note(user: &str, node: &str, pod: &ForcedPod) -> String {
    let how = if pod.at_once() {
        format!("with a grace period of 0 by {user} with `kubectl k8sm force {node} --terminating`")
    } else {
        format!("by {user} with `kubectl k8sm force {node}`")
    };
    format!(
        "deletion forced {how}; it blocks the node's upgrade ({}: {})",
        pod.reason, pod.message
    )
}

impl ForcedPod {
    /// Deleted with a grace period of 0: a pod stuck terminating, whose grace period is over.
    pub fn at_once(&self) -> bool {
        self.reason == Reason::StuckTerminating
    }
}

fn forced(p: &PodPlan) -> ForcedPod {
    ForcedPod {
        namespace: p.pod.namespace().to_string(),
        name: p.pod.name().to_string(),
        uid: p.pod.uid().to_string(),
        reason: p.reason.unwrap_or(Reason::Forced),
        message: p.message.to_string(),
    }
}

fn names(pods: &[ForcedPod]) -> String {
    pods.iter()
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn pod_table(pods: &[ForcedPod], palette: Palette) -> String {
    let rows: Vec<Vec<String>> = pods
        .iter()
        .map(|p| {
            vec![
                format!("{}/{}", p.namespace, p.name),
                palette.red(p.reason.as_str()),
                clean(&p.message, true),
            ]
        })
        .collect();
    table(&["POD", "REASON", "WHY"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8sm_api::UnmanagedPodPolicy;
    use k8sm_planner::ClusterView;
    use k8sm_planner::testing::{at, node, policy, replica_set, unmanaged_pod};

    /// n1 is draining with an unmanaged pod, an opted-out pod, and an owned pod that waits for its
    /// owner.
    fn node_plan() -> NodePlan {
        let web = replica_set("shop", "web", 2);
        let view = ClusterView {
            nodes: vec![node("n1").marked(at(0)).admitted(at(1))],
            pods: k8sm_planner::testing::shared_pods([
                unmanaged_pod("ops", "debug", "n1"),
                unmanaged_pod("ops", "pinned", "n1")
                    .label(k8sm_api::keys::UPGRADE_OPT_OUT_LABEL, "true"),
                web.pod("web-1", "n1").not_ready(),
                web.pod("web-2", "n1"),
            ]),
            owners: vec![web.into()],
            policies: vec![
                policy("fleet").with(|s| s.unmanaged_pods.policy = UnmanagedPodPolicy::Never),
            ],
            ..ClusterView::default()
        };
        k8sm_planner::plan(&view, at(2)).node("n1").unwrap().clone()
    }

    fn pods(selection: &[ForcedPod]) -> Vec<&str> {
        selection.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn only_operator_blocked_unmanaged_pods_by_default() {
        let selection = ForceSelection::new(&node_plan(), false, false);
        assert_eq!(pods(&selection.delete), ["debug"]);
        assert_eq!(pods(&selection.opted_out_left), ["pinned"]);
        let text = selection.render(Palette::PLAIN);
        assert!(
            text.starts_with("Pods on node n1 that only an operator can move:\nPOD         REASON"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "Left alone: 1 opted-out pod (ops/pinned); add --include-opted-out to delete opted-out pods too.\n"
            ),
            "{text}"
        );
        assert_eq!(
            selection.question(),
            "Delete 1 pod from node n1? Nothing recreates an unmanaged pod. [y/N]: "
        );
    }

    #[test]
    fn opted_out_pods_only_with_the_flag_and_never_owned_pods() {
        let selection = ForceSelection::new(&node_plan(), true, false);
        assert_eq!(pods(&selection.delete), ["debug", "pinned"]);
        assert!(selection.opted_out_left.is_empty());
        assert!(!selection.render(Palette::PLAIN).contains("web-"));
    }

    #[test]
    fn opted_out_pods_alone_need_the_flag() {
        let mut plan = node_plan();
        plan.pods = plan
            .pods
            .iter()
            .filter(|p| p.pod.name() == "pinned")
            .cloned()
            .collect();
        let text = ForceSelection::new(&plan, false, false).render(Palette::PLAIN);
        assert_eq!(
            text,
            "Nothing deleted on node n1: only 1 opted-out pod (ops/pinned) blocks it; add --include-opted-out to delete opted-out pods too.\n"
        );
    }

    /// A pod stuck terminating is deleted with a grace period of 0 only with `--terminating`, and
    /// its Event says so.
    #[test]
    fn pods_stuck_terminating_need_the_flag_and_go_at_once() {
        let web = replica_set("shop", "web", 2);
        let mut zombie = web.pod("web-old", "n1").terminating();
        zombie.deletion = Some(at(0));
        zombie.finalizers = vec!["example.com/hold".into()];
        let view = ClusterView {
            nodes: vec![node("n1").marked(at(0)).admitted(at(1))],
            pods: k8sm_planner::testing::shared_pods([zombie]),
            owners: vec![web.into()],
            policies: vec![policy("fleet")],
            ..ClusterView::default()
        };
        let plan = k8sm_planner::plan(&view, at(5)).node("n1").unwrap().clone();
        let without = ForceSelection::new(&plan, false, false);
        assert!(without.delete.is_empty());
        assert_eq!(pods(&without.terminating_left), ["web-old"]);
        assert!(
            without.render(Palette::PLAIN).contains("add --terminating"),
            "{}",
            without.render(Palette::PLAIN)
        );
        let with = ForceSelection::new(&plan, false, true);
        assert_eq!(pods(&with.delete), ["web-old"]);
        assert!(with.delete[0].at_once());
        let note = event_note("admin", "n1", &with.delete[0]);
        assert!(
            note.starts_with("deletion forced with a grace period of 0 by admin with `kubectl k8sm force n1 --terminating`"),
            "{note}"
        );
    }

    #[test]
    fn a_node_that_is_not_draining_has_nothing_to_force() {
        let mut plan = node_plan();
        plan.phase = NodePhase::Incompatible;
        plan.pods = Default::default();
        let text = ForceSelection::new(&plan, true, false).render(Palette::PLAIN);
        assert_eq!(
            text,
            "Nothing to force on node n1 (Incompatible): it is not draining, so no pod blocks it.\n"
        );
    }

    #[test]
    fn outcomes_and_the_event_note() {
        let pod = ForceSelection::new(&node_plan(), false, false).delete[0].clone();
        let note = event_note("admin", "n1", &pod);
        assert!(
            note.starts_with(
                "deletion forced by admin with `kubectl k8sm force n1`; it blocks the node's upgrade (BlockedUnmanagedPod: "
            ),
            "{note}"
        );
        let lines: Vec<String> = [
            Outcome::Deleted {
                pod: "ops/debug".into(),
            },
            Outcome::WouldDelete {
                pod: "ops/debug".into(),
            },
            Outcome::Gone {
                pod: "ops/debug".into(),
            },
        ]
        .iter()
        .map(Outcome::line)
        .collect();
        assert_eq!(
            lines,
            [
                "pod/ops/debug deleted; Forced event recorded",
                "pod/ops/debug would be deleted (dry run)",
                "pod/ops/debug is already gone"
            ]
        );
    }
}
