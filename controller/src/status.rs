//! The policies' status: built from the plan (pure), written through the status subresource only when it changed,
//! so that writing status never wakes the controller into an endless loop.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use k8sm_api::{
    BlockedPod, ExecutorUpgradePolicy, ExecutorUpgradePolicyStatus, MAX_BLOCKED_PODS, NodePhase,
    NodeStatus, condition_types,
};
use k8sm_planner::{Plan, PolicyPlan, Reason};

use crate::Error;
use crate::time::to_time;

/// Measures each policy's pace (upgraded nodes per second since this controller first saw it) for the ETA.
#[derive(Debug, Default)]
pub struct Pace {
    first_seen: HashMap<String, (DateTime<Utc>, u32)>,
}

impl Pace {
    fn eta(&mut self, policy: &PolicyPlan, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let remaining = policy.eta.nodes_remaining;
        let compatible = policy.counts.compatible;
        if remaining == 0 {
            // Nothing to do: the next upgrade's pace is measured from when it starts.
            self.first_seen.remove(&policy.policy);
            return None;
        }
        let (start, start_compatible) = *self
            .first_seen
            .entry(policy.policy.clone())
            .or_insert((now, compatible));
        if policy.eta.nodes_blocked > 0 || policy.paused {
            return None;
        }
        let done = compatible.saturating_sub(start_compatible);
        let elapsed = (now - start).num_milliseconds();
        if done == 0 || elapsed <= 0 {
            return None;
        }
        let per_node_ms = elapsed / i64::from(done);
        Some(now + chrono::Duration::milliseconds(per_node_ms * i64::from(remaining)))
    }
}

/// The status of `policy` as this plan sees it. `previous` keeps condition transition times and the ETA stable.
pub fn build(
    plan: &Plan,
    policy: &PolicyPlan,
    previous: Option<&ExecutorUpgradePolicyStatus>,
    eta: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> ExecutorUpgradePolicyStatus {
    let nodes: Vec<_> = plan
        .nodes
        .iter()
        .filter(|n| n.policy == policy.policy)
        .collect();
    let mut blocked: Vec<BlockedPod> = Vec::new();
    for node in &nodes {
        for pod_plan in &node.pods {
            let Some(reason) = pod_plan.reason.filter(|r| is_blocking(*r)) else {
                continue;
            };
            blocked.push(BlockedPod {
                node: node.node.clone(),
                namespace: pod_plan.pod.namespace.clone(),
                name: pod_plan.pod.name.clone(),
                owner: pod_plan.owner.as_ref().map(|o| o.to_string()),
                reason: reason.as_str().to_owned(),
                message: pod_plan.message.clone(),
                since: node.since.map(to_time),
            });
        }
    }
    let blocked_total = blocked.len() as u32;
    blocked.truncate(MAX_BLOCKED_PODS);

    let mut conditions = vec![
        condition(
            condition_types::PROGRESSING,
            policy.eta.nodes_remaining > 0 && !policy.paused,
            if policy.paused {
                "Paused"
            } else if policy.eta.nodes_remaining > 0 {
                "Upgrading"
            } else {
                "Idle"
            },
            &format!(
                "{} of {} selected nodes still to upgrade",
                policy.eta.nodes_remaining, policy.counts.total
            ),
        ),
        condition(
            condition_types::UPGRADED,
            policy.eta.nodes_remaining == 0 && policy.counts.total > 0,
            if policy.eta.nodes_remaining == 0 {
                "AllNodesCompatible"
            } else {
                "NodesRemaining"
            },
            &format!("{} upgraded", policy.counts.upgraded()),
        ),
        condition(
            condition_types::PAUSED,
            policy.paused,
            if policy.paused { "Paused" } else { "Running" },
            if policy.paused {
                "spec.paused is true: no eviction, deletion or kamikaze"
            } else {
                ""
            },
        ),
    ];
    let conflict = policy
        .conditions
        .iter()
        .find(|c| c.reason == Reason::PolicyConflict);
    conditions.push(condition(
        condition_types::CONFLICT,
        conflict.is_some(),
        if conflict.is_some() {
            "PolicyConflict"
        } else {
            "NoConflict"
        },
        &conflict.map(|c| c.message.clone()).unwrap_or_default(),
    ));
    let problems: Vec<String> = policy
        .conditions
        .iter()
        .filter(|c| !matches!(c.reason, Reason::PolicyConflict | Reason::Paused))
        .map(|c| format!("{}: {}", c.reason.as_str(), c.message))
        .collect();
    conditions.push(condition(
        condition_types::DEGRADED,
        !problems.is_empty(),
        policy
            .conditions
            .iter()
            .find(|c| !matches!(c.reason, Reason::PolicyConflict | Reason::Paused))
            .map_or("AsExpected", |c| c.reason.as_str()),
        &problems.join("; "),
    ));
    for condition in &mut conditions {
        let earlier =
            previous.and_then(|p| p.conditions.iter().find(|c| c.type_ == condition.type_));
        condition.last_transition_time = match earlier {
            Some(earlier) if earlier.status == condition.status => {
                earlier.last_transition_time.clone()
            }
            _ => to_time(now),
        };
        condition.observed_generation = policy.generation;
    }

    let counts_unchanged = previous.is_some_and(|p| p.counts == policy.counts);
    ExecutorUpgradePolicyStatus {
        conditions,
        observed_generation: policy.generation,
        upgraded: Some(policy.counts.upgraded()),
        counts: policy.counts,
        nodes: nodes
            .iter()
            .filter(|n| n.phase != NodePhase::Compatible)
            .map(|n| NodeStatus {
                name: n.node.clone(),
                phase: n.phase,
                since: n.since.map(to_time),
                pods_left: n.pods_left,
                blockers: n.blockers.iter().map(|b| b.message.clone()).collect(),
                executor_id: n.executor_id.clone(),
            })
            .collect(),
        blocked_pods: blocked,
        blocked_pods_total: Some(blocked_total),
        // Re-estimate only when progress was made, so a steady state writes nothing.
        eta: match (counts_unchanged, previous) {
            (true, Some(p)) if policy.eta.nodes_remaining > 0 => p.eta.clone(),
            _ => eta.map(to_time),
        },
    }
}

/// A merge patch leaves out fields the status no longer has: they must be sent as null to be removed.
fn with_explicit_nulls(status: &ExecutorUpgradePolicyStatus) -> Result<serde_json::Value, Error> {
    let mut value = serde_json::to_value(status)?;
    if let Some(object) = value.as_object_mut() {
        for key in [
            "conditions",
            "observedGeneration",
            "upgraded",
            "nodes",
            "blockedPods",
            "blockedPodsTotal",
            "eta",
        ] {
            object.entry(key).or_insert(serde_json::Value::Null);
        }
    }
    Ok(value)
}

/// Reasons for which a pod is listed in `status.blockedPods` (and reported by an Event when it starts waiting).
pub(crate) fn is_blocking(reason: Reason) -> bool {
    matches!(
        reason,
        Reason::WaitingForOwner
            | Reason::BlockedByPDB
            | Reason::BlockedUnmanagedPod
            | Reason::BlockedOptOut
    )
}

fn condition(type_: &str, status: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        last_transition_time: to_time(DateTime::<Utc>::UNIX_EPOCH),
        observed_generation: None,
    }
}

/// Writes each policy's status when it differs from what the cluster holds.
pub struct StatusWriter {
    api: Api<ExecutorUpgradePolicy>,
    pace: Pace,
}

impl StatusWriter {
    pub fn new(client: Client) -> Self {
        Self {
            api: Api::all(client),
            pace: Pace::default(),
        }
    }

    pub async fn write(
        &mut self,
        plan: &Plan,
        current: &HashMap<String, Option<ExecutorUpgradePolicyStatus>>,
        now: DateTime<Utc>,
    ) -> Result<(), Error> {
        for policy in &plan.policies {
            let previous = current.get(&policy.policy).and_then(Option::as_ref);
            let eta = self.pace.eta(policy, now);
            let status = build(plan, policy, previous, eta, now);
            if previous == Some(&status) {
                continue;
            }
            let patch = json!({ "status": with_explicit_nulls(&status)? });
            match self
                .api
                .patch_status(
                    &policy.policy,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {}
                // Deleted meanwhile: nothing to report on.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(source) => {
                    return Err(Error::Action {
                        action: "writing status of",
                        object: policy.policy.clone(),
                        source,
                    });
                }
            }
        }
        Ok(())
    }
}
