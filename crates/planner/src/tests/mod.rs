//! Tests of the whole planner: one named test per rule (grouped by concern), and property tests.

mod admission;
mod calls;
mod classification;
mod convoy;
mod critical_path;
mod handback;
mod hostile;
mod identity;
mod kept_decisions;
mod lifecycle;
mod liveness;
mod marking;
mod oracle;
mod pinned;
mod pods;
mod props;
mod room;
mod sim;
mod stall;
mod support;
mod surge;
mod unmanaged;
mod window;
mod workloads;

use chrono::{DateTime, Utc};
use k8sm_api::NodePhase;

use crate::{
    ActionKind, ClusterView, NodePlan, NodeView, OwnerView, Plan, PodView, PolicyView, Reason,
    plan, testing::at,
};

/// The time at which most tests plan: an hour after [`crate::testing::t0`].
fn now() -> DateTime<Utc> {
    at(60)
}

/// A cluster of these objects.
fn cluster(
    nodes: Vec<NodeView>,
    owners: Vec<OwnerView>,
    pods: Vec<PodView>,
    policies: Vec<PolicyView>,
) -> ClusterView {
    ClusterView {
        nodes,
        pods: crate::testing::shared_pods(pods),
        owners: crate::testing::shared_owners(owners),
        policies,
        ..ClusterView::default()
    }
}

/// The nodes a plan admits.
fn admitted(plan: &Plan) -> std::collections::BTreeSet<String> {
    plan.actions
        .iter()
        .filter_map(|a| match &a.kind {
            ActionKind::Admit { node, .. } => Some(node.clone()),
            _ => None,
        })
        .collect()
}

/// The queued nodes, by their place in the admission queue.
fn queue(plan: &Plan) -> Vec<(u32, String)> {
    let mut queued: Vec<(u32, String)> = plan
        .nodes
        .iter()
        .filter_map(|n| n.admission_position.map(|p| (p, n.node.clone())))
        .collect();
    queued.sort();
    queued
}

/// The actions of a plan that the operator sees (every one but the bookkeeping of progress
/// records), one short line each, in order. `with_bookkeeping` lists them all.
fn summary(plan: &Plan) -> Vec<String> {
    with_bookkeeping(plan)
        .into_iter()
        .filter(|line| !line.starts_with("Progress "))
        .collect()
}

fn with_bookkeeping(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .map(|a| match &a.kind {
            ActionKind::Mark {
                node,
                incompatible_since,
                ..
            } => format!(
                "Mark {node}{}",
                if incompatible_since.is_some() {
                    " @"
                } else {
                    ""
                }
            ),
            ActionKind::Admit { node, cordon, .. } => {
                format!("Admit {node}{}", if *cordon { " +cordon" } else { "" })
            }
            ActionKind::Cordon { node } => format!("Cordon {node}"),
            ActionKind::Evict { pod, .. } => format!("Evict {pod}"),
            ActionKind::Surge {
                pod, deployment, ..
            } => format!("Surge {pod} by {}", deployment.name),
            ActionKind::DeletePod { pod, .. } => format!("Delete {pod}"),
            ActionKind::Kamikaze { node, .. } => format!("Kamikaze {node}"),
            ActionKind::Complete { node, uncordon } => {
                format!(
                    "Complete {node}{}",
                    if *uncordon { " +uncordon" } else { "" }
                )
            }
            ActionKind::Release {
                node,
                uncordon,
                remove_mark,
            } => format!(
                "Release {node}{}{}",
                if *uncordon { " +uncordon" } else { "" },
                if *remove_mark { " +unmark" } else { "" }
            ),
            ActionKind::Progress {
                node, pods_left, ..
            } => format!("Progress {node} {pods_left}"),
            ActionKind::Stall { node, uncordon, .. } => {
                format!("Stall {node}{}", if *uncordon { " +uncordon" } else { "" })
            }
            ActionKind::AddFinalizer { policy } => format!("AddFinalizer {policy}"),
            ActionKind::RemoveFinalizer { policy } => format!("RemoveFinalizer {policy}"),
        })
        .collect()
}

/// The plan of a node, which must exist.
fn node_plan<'p>(plan: &'p Plan, name: &str) -> &'p NodePlan {
    plan.node(name)
        .unwrap_or_else(|| panic!("no plan for node {name}: {plan:#?}"))
}

/// The phase of a node.
fn phase(plan: &Plan, name: &str) -> NodePhase {
    node_plan(plan, name).phase
}

/// The reasons of a node's blockers.
fn blocker_reasons(plan: &Plan, name: &str) -> Vec<Reason> {
    node_plan(plan, name)
        .blockers
        .iter()
        .map(|b| b.reason)
        .collect()
}

/// The decision reason and message of one pod (by name) on a node.
fn pod_decision(plan: &Plan, node: &str, pod: &str) -> (crate::Decision, Option<Reason>, String) {
    let p = node_plan(plan, node)
        .pods
        .iter()
        .find(|p| *p.pod.name() == *pod)
        .unwrap_or_else(|| panic!("no decision for pod {pod} on {node}: {plan:#?}"));
    (p.decision, p.reason, p.message.to_string())
}

/// Plans at [`now`].
fn plan_now(view: &ClusterView) -> Plan {
    plan(view, now())
}
