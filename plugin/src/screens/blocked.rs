//! `blocked`: every pod that keeps a draining node from finishing, from a live plan: why, and since when.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use k8sm_planner::{ClusterView, Plan, PodClass, Reason};

use crate::render::{Palette, age, clean, table};
use crate::screens::owner::owner_column;

/// Which namespaces to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Namespaces {
    All,
    One(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedPodRow {
    pub policy: String,
    pub node: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// "Kind/name" of the workload it counts for, or none for an unmanaged pod.
    pub owner: Option<String>,
    /// How the planner classes it: a workload's pod (`owned`), a pod of a controller of a kind k8sm does not know
    /// (`otherController`), a Job's, an unmanaged or an opted-out pod.
    pub class: PodClass,
    pub reason: Reason,
    /// Only an operator moves it ([`k8sm_planner::PodPlan::needs_operator`]); the other waits end by themselves.
    pub needs_operator: bool,
    pub message: String,
    /// Since the node started draining, or since the pod arrived if it came later.
    pub since: Option<DateTime<Utc>>,
    /// For waits that end by themselves at a known time.
    pub until: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedScreen {
    /// `None`: every namespace.
    pub namespace: Option<String>,
    pub pods: Vec<BlockedPodRow>,
}

impl BlockedScreen {
    pub fn from_plan(plan: &Plan, view: &ClusterView, namespaces: &Namespaces) -> Self {
        let created: HashMap<&str, DateTime<Utc>> = view
            .pods
            .iter()
            .filter_map(|p| Some((&*p.uid, p.created?)))
            .collect();
        // The planner names owners only of pods it judges by their owner; an opted-out pod has one all the same.
        let controllers: HashMap<&str, String> = view
            .pods
            .iter()
            .filter_map(|p| {
                let c = p.controller.as_ref()?;
                Some((&*p.uid, format!("{}/{}", c.kind, c.name)))
            })
            .collect();
        let mut pods: Vec<BlockedPodRow> = plan
            .nodes
            .iter()
            .flat_map(|node| node.pods.iter().map(move |pod| (node, pod)))
            .filter(|(_, pod)| pod.is_blocked())
            .filter(|(_, pod)| match namespaces {
                Namespaces::All => true,
                Namespaces::One(ns) => *pod.pod.namespace() == **ns,
            })
            .filter_map(|(node, pod)| Some((node, pod, pod.reason?)))
            .map(|(node, pod, reason)| {
                let arrived = created.get(pod.pod.uid()).copied();
                BlockedPodRow {
                    policy: node.policy.clone(),
                    node: node.node.clone(),
                    namespace: pod.pod.namespace().to_string(),
                    name: pod.pod.name().to_string(),
                    uid: pod.pod.uid().to_string(),
                    owner: pod
                        .owner
                        .as_ref()
                        .map(ToString::to_string)
                        .or_else(|| controllers.get(pod.pod.uid()).cloned()),
                    class: pod.class.clone(),
                    reason,
                    needs_operator: pod.needs_operator(),
                    message: pod.message.to_string(),
                    since: node.since.max(arrived),
                    until: pod.until,
                }
            })
            .collect();
        // Oldest first, like the policy's status: the longest wait is the most urgent.
        pods.sort_by(|a, b| {
            (a.since.is_none(), a.since, &a.node, &a.namespace, &a.name).cmp(&(
                b.since.is_none(),
                b.since,
                &b.node,
                &b.namespace,
                &b.name,
            ))
        });
        Self {
            namespace: match namespaces {
                Namespaces::All => None,
                Namespaces::One(ns) => Some(ns.clone()),
            },
            pods,
        }
    }

    pub fn render(&self, wide: bool, now: DateTime<Utc>, palette: Palette) -> String {
        if self.pods.is_empty() {
            return match &self.namespace {
                Some(ns) => format!("No blocked pods in namespace {ns}.\n"),
                None => "No blocked pods.\n".to_owned(),
            };
        }
        let mut headers = vec!["NODE"];
        if self.namespace.is_none() {
            headers.push("NAMESPACE");
        }
        headers.extend(["POD", "OWNER", "REASON", "SINCE"]);
        if wide {
            headers.extend(["POLICY", "UID"]);
        }
        headers.push("WHY");
        let rows: Vec<Vec<String>> = self
            .pods
            .iter()
            .map(|p| {
                let mut row = vec![clean(&p.node, wide)];
                if self.namespace.is_none() {
                    row.push(clean(&p.namespace, wide));
                }
                row.extend([
                    clean(&p.name, wide),
                    clean(&owner_column(&p.class, p.owner.as_deref()), wide),
                    reason_text(p, palette),
                    age(p.since, now),
                ]);
                if wide {
                    row.extend([clean(&p.policy, wide), clean(&p.uid, wide)]);
                }
                row.push(clean(
                    p.message.strip_prefix("wait: ").unwrap_or(&p.message),
                    wide,
                ));
                row
            })
            .collect();
        table(&headers, &rows)
    }
}

/// Operator-only blocks in red, waits that resolve by themselves in yellow.
fn reason_text(pod: &BlockedPodRow, palette: Palette) -> String {
    if pod.needs_operator {
        palette.red(pod.reason.as_str())
    } else {
        palette.yellow(pod.reason.as_str())
    }
}

#[cfg(test)]
#[path = "blocked_tests.rs"]
mod tests;
