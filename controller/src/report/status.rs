//! The policies' status: built from the plan (pure), written through the status subresource only
//! when it changed, so that writing status never wakes the controller into an endless loop.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use k8sm_api::pace;
use k8sm_api::text::bounded;
use k8sm_api::{
    DeletedNode, ExecutorUpgradePolicyStatus, MAX_MESSAGE, WindowState, WindowStatus,
    condition_types,
};
use k8sm_planner::{Decision, Plan, PolicyPlan, Reason};

use crate::Error;
use crate::report::status_lists::{self, Lists};
use k8sm_view::time::to_time;

/// Whether the policy's maintenance window is closed now.
fn window_closed(policy: &PolicyPlan) -> bool {
    matches!(policy.window, Some(WindowState::Closed { .. }))
}

/// The status of `policy` as this plan sees it. `previous` (the status the cluster holds, whichever
/// leader wrote it) keeps condition transition times, the ETA and the pace it is measured from
/// stable.
pub fn build(
    plan: &Plan,
    policy: &PolicyPlan,
    previous: Option<&ExecutorUpgradePolicyStatus>,
    now: DateTime<Utc>,
) -> ExecutorUpgradePolicyStatus {
    let nodes: Vec<_> = plan
        .nodes
        .iter()
        .filter(|n| n.policy == policy.policy)
        .collect();
    let lists = Lists::of(&nodes);
    let (pace, eta) = pace_and_eta(policy, previous, now);
    ExecutorUpgradePolicyStatus {
        conditions: conditions(policy, previous, now),
        observed_generation: policy.generation,
        upgraded: Some(policy.counts.upgraded()),
        counts: policy.counts,
        nodes: lists.nodes,
        omitted_nodes: Some(lists.omitted_nodes),
        blocked_pods: lists.blocked_pods,
        blocked_pods_total: Some(lists.blocked_pods_total),
        deleted_nodes: status_lists::deleted_nodes(&policy.deleted_nodes),
        eta,
        pace,
        window: policy.window.map(window_status),
    }
}

/// The policy's conditions, each with its last transition carried over from `previous`.
fn conditions(
    policy: &PolicyPlan,
    previous: Option<&ExecutorUpgradePolicyStatus>,
    now: DateTime<Utc>,
) -> Vec<Condition> {
    let stall = stall(policy);
    let mut conditions = vec![
        progressing(policy),
        upgraded(policy),
        paused(policy),
        conflict(policy),
        degraded(policy),
        ready(policy, stall.as_ref()),
        reconciling(policy, stall.as_ref()),
        stalled(stall.as_ref()),
    ];
    for condition in &mut conditions {
        transition(condition, previous, policy.generation, now);
    }
    conditions
}

fn progressing(policy: &PolicyPlan) -> Condition {
    // Outside its maintenance window a policy with nodes left waits for the window, not for an
    // operator.
    let window_opens = match policy.window {
        Some(WindowState::Closed { opens }) if policy.eta.nodes_remaining > 0 => Some(opens),
        _ => None,
    };
    condition(
        condition_types::PROGRESSING,
        policy.eta.nodes_remaining > 0 && !policy.paused && window_opens.is_none(),
        if policy.paused {
            "Paused"
        } else if window_opens.is_some() {
            "OutsideWindow"
        } else if policy.eta.nodes_remaining > 0 {
            "Upgrading"
        } else {
            "Idle"
        },
        &format!(
            "{} of {} selected nodes still to upgrade{}",
            policy.eta.nodes_remaining,
            policy.counts.total,
            window_opens.map_or_else(String::new, |opens| format!(
                "; the maintenance window opens at {}",
                opens.to_rfc3339()
            ))
        ),
    )
}

fn upgraded(policy: &PolicyPlan) -> Condition {
    condition(
        condition_types::UPGRADED,
        policy.eta.nodes_remaining == 0 && policy.counts.total > 0,
        // A policy without nodes has upgraded nothing: not "all compatible", which reads as done.
        if policy.counts.total == 0 {
            "NoNodesSelected"
        } else if policy.eta.nodes_remaining == 0 {
            "AllNodesCompatible"
        } else {
            "NodesRemaining"
        },
        &format!("{} upgraded", policy.counts.upgraded()),
    )
}

fn paused(policy: &PolicyPlan) -> Condition {
    // The planner's condition says who paused it: spec.paused, the annotation, or both.
    let message = policy
        .conditions
        .iter()
        .find(|c| c.reason == Reason::Paused)
        .map_or("", |c| c.message.as_str());
    condition(
        condition_types::PAUSED,
        policy.paused,
        if policy.paused { "Paused" } else { "Running" },
        if policy.paused { message } else { "" },
    )
}

/// Why the upgrade cannot go on without an operator (kstatus' Stalled): a problem of the policy
/// itself, or every node left waiting for an operator. A pause is not one: it is asked for.
fn stall(policy: &PolicyPlan) -> Option<(&'static str, String)> {
    let policy_problem = policy.conditions.iter().find(|c| match c.reason {
        Reason::InvalidPolicy | Reason::PolicyConflict | Reason::NoNodesSelected => true,
        // The pause annotation's (a node's has the node).
        Reason::MalformedAnnotation => c.nodes.is_empty(),
        _ => false,
    });
    if let Some(problem) = policy_problem {
        return Some((problem.reason.as_str(), problem.message.clone()));
    }
    let remaining = policy.eta.nodes_remaining;
    (remaining > 0 && policy.eta.nodes_blocked >= remaining && !policy.paused).then(|| {
        let message = format!(
            "each of the {remaining} nodes left waits for an operator: kubectl k8sm blocked \
             lists what holds them"
        );
        ("WaitingForOperator", message)
    })
}

/// kstatus' Ready: True once every selected node runs the target and nothing stalls.
fn ready(policy: &PolicyPlan, stall: Option<&(&'static str, String)>) -> Condition {
    let remaining = policy.eta.nodes_remaining;
    let (reason, message) = match stall {
        Some((reason, message)) => (*reason, message.clone()),
        None if remaining == 0 => (
            "AllNodesCompatible",
            format!("{} upgraded", policy.counts.upgraded()),
        ),
        None if policy.paused => ("Paused", format!("paused with {remaining} nodes left")),
        None => ("Upgrading", format!("{remaining} nodes left")),
    };
    condition(
        condition_types::READY,
        stall.is_none() && remaining == 0,
        reason,
        &message,
    )
}

/// kstatus' Reconciling: True while the controller works toward the target on its own, including
/// while it waits for the maintenance window.
fn reconciling(policy: &PolicyPlan, stall: Option<&(&'static str, String)>) -> Condition {
    let remaining = policy.eta.nodes_remaining;
    let working = stall.is_none() && remaining > 0 && !policy.paused;
    let reason = if working && window_closed(policy) {
        "OutsideWindow"
    } else if working {
        "Upgrading"
    } else if policy.paused && remaining > 0 {
        "Paused"
    } else if stall.is_some() {
        "Stalled"
    } else {
        "Idle"
    };
    let message = if working {
        format!(
            "{remaining} of {} selected nodes still to upgrade",
            policy.counts.total
        )
    } else {
        String::new()
    };
    condition(condition_types::RECONCILING, working, reason, &message)
}

/// kstatus' Stalled, from [`stall`].
fn stalled(stall: Option<&(&'static str, String)>) -> Condition {
    match stall {
        Some((reason, message)) => condition(condition_types::STALLED, true, reason, message),
        None => condition(condition_types::STALLED, false, "Progressing", ""),
    }
}

fn conflict(policy: &PolicyPlan) -> Condition {
    let conflict = policy
        .conditions
        .iter()
        .find(|c| c.reason == Reason::PolicyConflict);
    condition(
        condition_types::CONFLICT,
        conflict.is_some(),
        if conflict.is_some() {
            "PolicyConflict"
        } else {
            "NoConflict"
        },
        &conflict.map(|c| c.message.clone()).unwrap_or_default(),
    )
}

/// Degraded by every condition of the plan but a conflict, a pause, a closed window and an insecure
/// kamikaze, which have conditions or warnings of their own; its reason is the first one's.
fn degraded(policy: &PolicyPlan) -> Condition {
    let degrading = || {
        policy.conditions.iter().filter(|c| {
            !matches!(
                c.reason,
                Reason::PolicyConflict
                    | Reason::Paused
                    | Reason::OutsideWindow
                    | Reason::InsecureKamikaze
            )
        })
    };
    let problems: Vec<String> = degrading()
        .map(|c| format!("{}: {}", c.reason.as_str(), c.message))
        .collect();
    condition(
        condition_types::DEGRADED,
        !problems.is_empty(),
        degrading()
            .next()
            .map_or("AsExpected", |c| c.reason.as_str()),
        &problems.join("; "),
    )
}

/// The start of the pace and the ETA. The ETA is re-estimated only when progress was made, so a
/// steady state writes nothing; and there is none while nothing moves (paused, outside the
/// maintenance window, or a blocked node waiting for an operator).
fn pace_and_eta(
    policy: &PolicyPlan,
    previous: Option<&ExecutorUpgradePolicyStatus>,
    now: DateTime<Utc>,
) -> (Option<k8sm_api::PaceStart>, Option<Time>) {
    let remaining = policy.eta.nodes_remaining;
    let compatible = policy.counts.compatible;
    let pace = pace::pace_start(
        previous.and_then(|p| p.pace.as_ref()),
        compatible,
        remaining,
        now,
    );
    let moving = policy.eta.nodes_blocked == 0 && !policy.paused && !window_closed(policy);
    let counts_unchanged = previous.is_some_and(|p| p.counts == policy.counts);
    let eta = match (counts_unchanged, previous) {
        (true, Some(p)) if remaining > 0 && moving => p.eta.clone(),
        _ => pace
            .as_ref()
            .filter(|_| moving)
            .and_then(|start| pace::eta(start, compatible, remaining, now))
            .map(to_time),
    };
    (pace, eta)
}

fn window_status(state: WindowState) -> WindowStatus {
    match state {
        WindowState::Open { closes } => WindowStatus {
            open: true,
            opens_at: None,
            closes_at: Some(to_time(closes)),
        },
        WindowState::Closed { opens } => WindowStatus {
            open: false,
            opens_at: Some(to_time(opens)),
            closes_at: None,
        },
    }
}

/// A merge patch leaves out fields the status no longer has: they must be sent as null to be
/// removed.
pub(crate) fn with_explicit_nulls(
    status: &ExecutorUpgradePolicyStatus,
) -> Result<serde_json::Value, Error> {
    let mut value = serde_json::to_value(status)?;
    if let Some(object) = value.as_object_mut() {
        for key in [
            "conditions",
            "observedGeneration",
            "upgraded",
            "nodes",
            "omittedNodes",
            "blockedPods",
            "blockedPodsTotal",
            "deletedNodes",
            "eta",
            "pace",
            "window",
        ] {
            object.entry(key).or_insert(serde_json::Value::Null);
        }
    }
    Ok(value)
}

/// Keeps the previous transition time of `condition` while its status stays the same.
fn transition(
    condition: &mut Condition,
    previous: Option<&ExecutorUpgradePolicyStatus>,
    generation: Option<i64>,
    now: DateTime<Utc>,
) {
    let earlier = previous.and_then(|p| p.conditions.iter().find(|c| c.type_ == condition.type_));
    condition.last_transition_time = match earlier {
        Some(earlier) if earlier.status == condition.status => earlier.last_transition_time.clone(),
        _ => to_time(now),
    };
    condition.observed_generation = generation;
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

/// What the controller learnt while carrying out plans, that no plan can know: objects whose
/// actions keep being refused or failing ([`crate::memory::backoff`]), and watches that failed for
/// too long ([`crate::observe::watches`]).
#[derive(Debug, Default)]
pub struct Troubles {
    /// Pods (by UID) whose eviction or deletion was refused by a budget, or failed again and
    /// again: why.
    pub pods: HashMap<String, (Reason, String)>,
    /// Nodes (by name) whose writes failed again and again: why.
    pub nodes: HashMap<String, String>,
    /// Policies (by name) whose finalizer writes failed again and again: why.
    pub policies: HashMap<String, String>,
    /// Why the view counts as stale, while it does: the controller takes no action.
    pub stale_view: Option<String>,
}

/// Adds what the plan cannot know to the status (see [`Troubles`]). Pods whose eviction or deletion
/// keeps failing (or a budget refused: the plan judged the budget from its cached status, which
/// allowed it, e.g. a budget tightened while the disruption controller was down) are listed as
/// blocked, with the answer on their node's blockers; so are nodes whose writes keep failing.
/// Without this, such a node would read "Draining" with nothing blocking while every attempt fails;
/// the Events say why at each attempt. The Degraded condition says when the controller acts on
/// nothing because its view is stale, and when actions keep failing.
pub fn report_troubles(
    status: &mut ExecutorUpgradePolicyStatus,
    previous: Option<&ExecutorUpgradePolicyStatus>,
    plan: &Plan,
    policy: &PolicyPlan,
    troubles: &Troubles,
    now: DateTime<Utc>,
) {
    let mut failing: Vec<&str> = Vec::new();
    for node in plan.nodes.iter().filter(|n| n.policy == policy.policy) {
        if let Some(message) = troubles.nodes.get(&node.node) {
            failing.push(message);
            status_lists::add_blocker(status, node, message);
        }
        for pod_plan in node.pods.iter() {
            let Some((reason, message)) = troubles.pods.get(pod_plan.pod.uid()) else {
                continue;
            };
            // Only pods the plan still means to move (a surge move too): one it waits for is
            // reported as the plan says.
            if !matches!(
                pod_plan.decision,
                Decision::Evict | Decision::Move | Decision::Delete
            ) {
                continue;
            }
            if *reason == Reason::ActionFailed {
                failing.push(message);
            }
            status_lists::add_blocker(status, node, message);
            status_lists::add_blocked_pod(
                status,
                status_lists::blocked_pod(node, pod_plan, *reason, message),
            );
        }
    }
    failing.extend(troubles.policies.get(&policy.policy).map(String::as_str));

    let mut problems: Vec<(Reason, String)> = Vec::new();
    if let Some(stale) = &troubles.stale_view {
        problems.push((Reason::WatchFailing, stale.clone()));
    }
    if let Some(first) = failing.first() {
        let more = match failing.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        // An apiserver's answer (an admission webhook's, say) may quote anything: bounded like the
        // rest.
        let first = bounded(first, MAX_MESSAGE);
        problems.push((Reason::ActionFailed, format!("{first}{more}")));
    }
    if problems.is_empty() {
        return;
    }
    let Some(degraded) = status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == condition_types::DEGRADED)
    else {
        return;
    };
    // The controller's own troubles come first: while the view is stale, what the plan says may be
    // stale too.
    let mut messages: Vec<String> = problems
        .iter()
        .map(|(reason, message)| format!("{}: {message}", reason.as_str()))
        .collect();
    if degraded.status == "True" {
        messages.push(degraded.message.clone());
    }
    degraded.status = "True".to_owned();
    degraded.reason = problems[0].0.as_str().to_owned();
    degraded.message = messages.join("; ");
    transition(degraded, previous, policy.generation, now);
}

/// The deleted-node records to write: the plan's, as far as its actions were carried out. A record
/// the plan adds for a node whose deletion did not happen is left out (the next plan decides
/// again), and one the plan drops for a node whose completion did not happen is kept (so the next
/// plan completes it, and reports it, again).
pub fn executed_records(
    planned: &[DeletedNode],
    written: &[DeletedNode],
    unfinished: &HashSet<String>,
) -> Vec<DeletedNode> {
    let in_list = |list: &[DeletedNode], name: &str| list.iter().any(|r| r.name == name);
    let mut records: Vec<DeletedNode> = planned
        .iter()
        .filter(|r| in_list(written, &r.name) || !unfinished.contains(&r.name))
        .cloned()
        .collect();
    records.extend(
        written
            .iter()
            .filter(|r| !in_list(planned, &r.name) && unfinished.contains(&r.name))
            .cloned(),
    );
    records.sort_by(|a, b| a.name.cmp(&b.name));
    records
}

#[cfg(test)]
mod tests {
    use k8sm_api::NodePhase;
    use k8sm_planner::{EtaInputs, NodePlan, PodPlan, PolicyCondition};

    use super::*;

    fn policy_plan(total: u32, compatible: u32) -> PolicyPlan {
        let mut counts = k8sm_api::NodeCounts::default();
        for _ in 0..compatible {
            counts.add(NodePhase::Compatible);
        }
        for _ in compatible..total {
            counts.add(NodePhase::Incompatible);
        }
        PolicyPlan {
            policy: "p".into(),
            generation: Some(1),
            counts,
            slots: 1,
            slots_in_use: 0,
            paused: false,
            conditions: Vec::new(),
            eta: EtaInputs {
                nodes_remaining: total - compatible,
                ..EtaInputs::default()
            },
            deleting: false,
            deleted_nodes: Vec::new(),
            window: None,
        }
    }

    fn upgraded(status: &ExecutorUpgradePolicyStatus) -> (&str, &str) {
        let c = status
            .conditions
            .iter()
            .find(|c| c.type_ == condition_types::UPGRADED)
            .expect("an Upgraded condition");
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn deleted_node_records_follow_what_was_carried_out() {
        let record = |name: &str| DeletedNode {
            name: name.into(),
            uid: format!("uid-{name}"),
            executor_id: None,
            deleted_at: k8sm_view::time::to_time(Utc::now()),
            target: None,
        };
        let unfinished: HashSet<String> = ["added-failed", "completed-failed"]
            .into_iter()
            .map(String::from)
            .collect();
        let planned = [record("added"), record("added-failed"), record("kept")];
        let written = [
            record("kept"),
            record("completed"),
            record("completed-failed"),
        ];
        let names: Vec<String> = executed_records(&planned, &written, &unfinished)
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["added", "completed-failed", "kept"]);
    }

    /// Outside the maintenance window the status says when it opens, Progressing waits for it (not
    /// Degraded), and no ETA is reported or carried over: nothing moves, so the pace so far
    /// says nothing.
    #[test]
    fn outside_the_window_the_status_says_when_it_opens_and_gives_no_eta() {
        let now = Utc::now();
        let opens = now + chrono::Duration::hours(3);
        let mut policy = policy_plan(4, 1);
        policy.window = Some(WindowState::Closed { opens });
        policy.conditions.push(PolicyCondition {
            reason: Reason::OutsideWindow,
            message: "outside the maintenance window".into(),
            nodes: Vec::new(),
        });
        let mut previous = build(&Plan::default(), &policy_plan(4, 1), None, now);
        previous.eta = Some(to_time(now + chrono::Duration::minutes(5)));
        let status = build(&Plan::default(), &policy, Some(&previous), now);
        assert_eq!(status.eta, None, "no ETA carried over while closed");
        assert_eq!(
            status.window,
            Some(WindowStatus {
                open: false,
                opens_at: Some(to_time(opens)),
                closes_at: None,
            })
        );
        let progressing = status
            .conditions
            .iter()
            .find(|c| c.type_ == condition_types::PROGRESSING)
            .expect("a Progressing condition");
        assert_eq!(
            (progressing.status.as_str(), progressing.reason.as_str()),
            ("False", "OutsideWindow")
        );
        assert_eq!(degraded_says(&status).0, "False");
        // Even when progress was made while it was open: the count changed, the window is closed
        // now.
        let progressed = build(&Plan::default(), &policy_plan(4, 0), None, now);
        let later = now + chrono::Duration::minutes(10);
        assert_eq!(
            build(&Plan::default(), &policy, Some(&progressed), later).eta,
            None
        );
    }

    #[test]
    fn a_pause_or_a_blocked_node_drops_the_eta_though_no_count_changed() {
        let now = Utc::now();
        let mut previous = build(&Plan::default(), &policy_plan(4, 1), None, now);
        previous.eta = Some(to_time(now + chrono::Duration::minutes(5)));
        let mut paused = policy_plan(4, 1);
        paused.paused = true;
        assert_eq!(
            build(&Plan::default(), &paused, Some(&previous), now).eta,
            None
        );
        let mut blocked = policy_plan(4, 1);
        blocked.eta.nodes_blocked = 1;
        assert_eq!(
            build(&Plan::default(), &blocked, Some(&previous), now).eta,
            None
        );
        assert_eq!(
            build(&Plan::default(), &policy_plan(4, 1), Some(&previous), now).eta,
            previous.eta,
            "kept while nothing changed"
        );
    }

    /// A field the merge patch leaves out keeps its old value in the cluster, and the status then
    /// differs from the plan's at every pass: each field of the CRD's status must be sent, as
    /// null when absent.
    #[test]
    fn every_status_field_is_sent_even_when_absent() {
        use kube::CustomResourceExt;
        let crd = k8sm_api::ExecutorUpgradePolicy::crd();
        let fields: Vec<String> = crd
            .spec
            .versions
            .iter()
            .filter_map(|v| {
                v.schema
                    .as_ref()?
                    .open_api_v3_schema
                    .as_ref()?
                    .properties
                    .as_ref()
            })
            .filter_map(|p| p.get("status")?.properties.as_ref())
            .flat_map(|p| p.keys().cloned())
            .collect();
        assert!(fields.len() > 5, "the CRD's status fields: {fields:?}");
        let sent = with_explicit_nulls(&ExecutorUpgradePolicyStatus::default()).unwrap();
        for field in fields {
            assert!(
                sent.get(&field).is_some(),
                "{field} is not sent when absent"
            );
        }
    }

    /// The ETA is measured from the pace start in the status, so a new leader, which knows only
    /// what the cluster holds, estimates what the old one would have: no jump at a takeover.
    #[test]
    fn the_eta_survives_a_leader_change() {
        // A whole second: the status keeps times to the second.
        let t0 = DateTime::from_timestamp(Utc::now().timestamp(), 0).unwrap();
        let minutes = |m: i64| t0 + chrono::Duration::minutes(m);
        let started = build(&Plan::default(), &policy_plan(100, 0), None, t0);
        assert_eq!(started.eta, None, "nothing upgraded yet: no pace");
        let old_leader = build(
            &Plan::default(),
            &policy_plan(100, 20),
            Some(&started),
            minutes(40),
        );
        // 20 nodes in 40 minutes: 2 minutes per node, 80 left.
        assert_eq!(old_leader.eta, Some(to_time(minutes(40 + 160))));

        // The old leader is gone; the new one reads the status back from the apiserver and plans at
        // minute 60.
        let stored: ExecutorUpgradePolicyStatus =
            serde_json::from_value(serde_json::to_value(&old_leader).unwrap()).unwrap();
        let new_leader = build(
            &Plan::default(),
            &policy_plan(100, 30),
            Some(&stored),
            minutes(60),
        );
        // 30 nodes in 60 minutes since the upgrade began (not since the takeover): 70 left.
        assert_eq!(new_leader.eta, Some(to_time(minutes(60 + 140))));
        assert_eq!(
            new_leader.pace, started.pace,
            "measured from the same start"
        );

        let done = build(
            &Plan::default(),
            &policy_plan(100, 100),
            Some(&new_leader),
            minutes(200),
        );
        assert_eq!(
            (done.eta, done.pace),
            (None, None),
            "the next upgrade starts afresh"
        );
    }

    #[test]
    fn a_policy_without_nodes_is_not_reported_as_all_compatible() {
        let mut policy = policy_plan(0, 0);
        policy.conditions.push(PolicyCondition {
            reason: Reason::NoNodesSelected,
            message: "spec.nodeSelector \"pool=none\" selects none of the cluster's 3 nodes".into(),
            nodes: Vec::new(),
        });
        let status = build(&Plan::default(), &policy, None, Utc::now());
        assert_eq!(upgraded(&status), ("False", "NoNodesSelected"));
        assert_eq!(status.upgraded.as_deref(), Some("0/0"));
        assert_eq!(
            degraded_says(&status),
            (
                "True",
                "NoNodesSelected",
                "NoNodesSelected: spec.nodeSelector \"pool=none\" selects none of the cluster's 3 nodes"
            )
        );

        let done = build(&Plan::default(), &policy_plan(2, 2), None, Utc::now());
        assert_eq!(upgraded(&done), ("True", "AllNodesCompatible"));
        let busy = build(&Plan::default(), &policy_plan(2, 1), None, Utc::now());
        assert_eq!(upgraded(&busy), ("False", "NodesRemaining"));
    }

    /// kstatus reads Reconciling, then Stalled, then Ready: each state of an upgrade, and the
    /// (status, reason) of each of the three.
    #[test]
    fn kstatus_conditions_follow_the_upgrade() {
        let problem = |reason, nodes: &[&str]| PolicyCondition {
            reason,
            message: format!("{reason:?}"),
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
        };
        let with = |total, compatible, change: &dyn Fn(&mut PolicyPlan)| {
            let mut policy = policy_plan(total, compatible);
            change(&mut policy);
            policy
        };
        let closes = Utc::now() + chrono::Duration::hours(1);
        // (status, reason) of Ready, Reconciling and Stalled.
        type Expected = [(&'static str, &'static str); 3];
        let cases: Vec<(&str, PolicyPlan, Expected)> = vec![
            (
                "upgrading",
                with(4, 1, &|_| {}),
                [
                    ("False", "Upgrading"),
                    ("True", "Upgrading"),
                    ("False", "Progressing"),
                ],
            ),
            (
                "outside the window",
                with(4, 1, &|p| {
                    p.window = Some(WindowState::Closed { opens: closes })
                }),
                [
                    ("False", "Upgrading"),
                    ("True", "OutsideWindow"),
                    ("False", "Progressing"),
                ],
            ),
            (
                "paused",
                with(4, 1, &|p| p.paused = true),
                [
                    ("False", "Paused"),
                    ("False", "Paused"),
                    ("False", "Progressing"),
                ],
            ),
            (
                "done",
                with(4, 4, &|_| {}),
                [
                    ("True", "AllNodesCompatible"),
                    ("False", "Idle"),
                    ("False", "Progressing"),
                ],
            ),
            (
                "some nodes wait for an operator",
                with(4, 1, &|p| p.eta.nodes_blocked = 2),
                [
                    ("False", "Upgrading"),
                    ("True", "Upgrading"),
                    ("False", "Progressing"),
                ],
            ),
            (
                "every node left waits for an operator",
                with(4, 1, &|p| p.eta.nodes_blocked = 3),
                [
                    ("False", "WaitingForOperator"),
                    ("False", "Stalled"),
                    ("True", "WaitingForOperator"),
                ],
            ),
            (
                "paused, with every node left blocked",
                with(4, 1, &|p| {
                    p.eta.nodes_blocked = 3;
                    p.paused = true;
                }),
                [
                    ("False", "Paused"),
                    ("False", "Paused"),
                    ("False", "Progressing"),
                ],
            ),
            (
                "an invalid policy",
                with(4, 1, &|p| {
                    p.conditions.push(problem(Reason::InvalidPolicy, &[]))
                }),
                [
                    ("False", "InvalidPolicy"),
                    ("False", "Stalled"),
                    ("True", "InvalidPolicy"),
                ],
            ),
            (
                "a conflict",
                with(4, 1, &|p| {
                    p.conditions.push(problem(Reason::PolicyConflict, &["n"]))
                }),
                [
                    ("False", "PolicyConflict"),
                    ("False", "Stalled"),
                    ("True", "PolicyConflict"),
                ],
            ),
            (
                "no nodes selected",
                with(0, 0, &|p| {
                    p.conditions.push(problem(Reason::NoNodesSelected, &[]))
                }),
                [
                    ("False", "NoNodesSelected"),
                    ("False", "Stalled"),
                    ("True", "NoNodesSelected"),
                ],
            ),
            (
                "a malformed pause annotation",
                with(4, 1, &|p| {
                    p.paused = true;
                    p.conditions.push(problem(Reason::MalformedAnnotation, &[]));
                }),
                [
                    ("False", "MalformedAnnotation"),
                    ("False", "Paused"),
                    ("True", "MalformedAnnotation"),
                ],
            ),
            (
                "a node's malformed annotation",
                with(4, 1, &|p| {
                    p.conditions
                        .push(problem(Reason::MalformedAnnotation, &["n"]))
                }),
                [
                    ("False", "Upgrading"),
                    ("True", "Upgrading"),
                    ("False", "Progressing"),
                ],
            ),
        ];
        for (case, policy, expected) in cases {
            let status = build(&Plan::default(), &policy, None, Utc::now());
            let got = [
                condition_types::READY,
                condition_types::RECONCILING,
                condition_types::STALLED,
            ]
            .map(|type_| {
                let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
                assert_eq!(c.observed_generation, Some(1), "{case}: {type_}");
                (c.status.as_str(), c.reason.as_str())
            });
            assert_eq!(got, expected, "{case}: Ready, Reconciling, Stalled");
        }
    }

    /// A policy with node n1 draining, whose pods a and b the plan evicts.
    fn draining() -> (Plan, PolicyPlan) {
        use k8sm_planner::{OwnerKind, OwnerRef, PodClass, PodRef};
        let pod = |name: &str| PodPlan {
            pod: PodRef::new("shop", name, format!("uid-{name}")),
            owner: Some(OwnerRef {
                kind: OwnerKind::ReplicaSet,
                name: "vault-1".into(),
                uid: "rs".into(),
            }),
            class: PodClass::Owned,
            decision: Decision::Evict,
            reason: Some(Reason::Evicted),
            message: "evict: owner ReplicaSet vault-1 ready 1/1 → 0".into(),
            until: None,
        };
        let mut policy = policy_plan(2, 1);
        policy.counts = Default::default();
        policy.counts.add(NodePhase::Compatible);
        policy.counts.add(NodePhase::Draining);
        let plan = Plan {
            nodes: vec![NodePlan {
                node: "n1".into(),
                policy: "p".into(),
                phase: NodePhase::Draining,
                since: None,
                pods_left: 2,
                executor_id: None,
                ready: true,
                blockers: Vec::new(),
                admission_position: None,
                operator_pods: 0,
                pods: vec![pod("a"), pod("b")].into(),
            }],
            ..Plan::default()
        };
        (plan, policy)
    }

    fn degraded(status: &ExecutorUpgradePolicyStatus) -> &Condition {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == condition_types::DEGRADED)
            .expect("a Degraded condition")
    }

    /// The Degraded condition's status, reason and message.
    fn degraded_says(status: &ExecutorUpgradePolicyStatus) -> (&str, &str, &str) {
        let c = degraded(status);
        (c.status.as_str(), c.reason.as_str(), c.message.as_str())
    }

    #[test]
    fn an_eviction_refused_by_a_budget_is_reported_as_blocked() {
        let (plan, policy) = draining();
        let now = Utc::now();
        let mut status = build(&plan, &policy, None, now);
        assert!(
            status.blocked_pods.is_empty(),
            "the plan alone sees no blocker"
        );
        report_troubles(&mut status, None, &plan, &policy, &Troubles::default(), now);
        assert!(status.blocked_pods.is_empty());

        let why = "eviction refused by a PodDisruptionBudget: Cannot evict pod".to_owned();
        let troubles = Troubles {
            pods: HashMap::from([("uid-b".to_owned(), (Reason::BlockedByPDB, why.clone()))]),
            ..Troubles::default()
        };
        report_troubles(&mut status, None, &plan, &policy, &troubles, now);
        assert_eq!(status.blocked_pods.len(), 1);
        let blocked = &status.blocked_pods[0];
        assert_eq!(
            (
                blocked.name.as_str(),
                blocked.reason.as_str(),
                blocked.message.as_str()
            ),
            ("b", "BlockedByPDB", why.as_str())
        );
        assert_eq!(blocked.owner.as_deref(), Some("ReplicaSet/vault-1"));
        assert_eq!(status.blocked_pods_total, Some(1));
        assert_eq!(status.nodes[0].blockers, [why]);
        assert_eq!(
            degraded(&status).status,
            "False",
            "a budget is no trouble of the controller"
        );
    }

    #[test]
    fn actions_that_keep_failing_block_their_pod_or_node_and_degrade_the_policy() {
        let (plan, policy) = draining();
        let now = Utc::now();
        let mut status = build(&plan, &policy, None, now);
        let denied = "evict pod shop/a failed 3 times in a row: 403 Forbidden: denied; retrying with backoff";
        let kamikaze =
            "kamikaze node n1 failed 4 times in a row: connection refused; retrying with backoff";
        let troubles = Troubles {
            pods: HashMap::from([(
                "uid-a".to_owned(),
                (Reason::ActionFailed, denied.to_owned()),
            )]),
            nodes: HashMap::from([("n1".to_owned(), kamikaze.to_owned())]),
            ..Troubles::default()
        };
        report_troubles(&mut status, None, &plan, &policy, &troubles, now);
        let blocked: Vec<(&str, &str)> = status
            .blocked_pods
            .iter()
            .map(|p| (p.name.as_str(), p.reason.as_str()))
            .collect();
        assert_eq!(blocked, [("a", "ActionFailed")]);
        assert_eq!(status.nodes[0].blockers, [kamikaze, denied]);
        assert_eq!(
            degraded_says(&status),
            (
                "True",
                "ActionFailed",
                format!("ActionFailed: {kamikaze} (and 1 more)").as_str()
            )
        );
    }

    /// A surge move that keeps failing (RBAC without the surge component, say) degrades the policy
    /// like an eviction.
    #[test]
    fn a_move_that_keeps_failing_degrades_the_policy() {
        let (mut plan, policy) = draining();
        let mut pods = plan.nodes[0].pods.to_vec();
        pods[0].decision = Decision::Move;
        plan.nodes[0].pods = pods.into();
        let now = Utc::now();
        let mut status = build(&plan, &policy, None, now);
        let refused = "start a surge rollout failed 3 times in a row: 403 Forbidden: apply deploy/components/surge";
        let troubles = Troubles {
            pods: HashMap::from([(
                "uid-a".to_owned(),
                (Reason::ActionFailed, refused.to_owned()),
            )]),
            ..Troubles::default()
        };
        report_troubles(&mut status, None, &plan, &policy, &troubles, now);
        assert_eq!(
            degraded_says(&status),
            (
                "True",
                "ActionFailed",
                format!("ActionFailed: {refused}").as_str()
            )
        );
    }

    #[test]
    fn a_stale_view_degrades_every_policy_first_and_keeps_its_transition_time() {
        let (plan, policy) = draining();
        let t0 = Utc::now();
        let stale = "the watch of Pod objects has been failing since …".to_owned();
        let troubles = Troubles {
            stale_view: Some(stale.clone()),
            ..Troubles::default()
        };
        let mut first = build(&plan, &policy, None, t0);
        report_troubles(&mut first, None, &plan, &policy, &troubles, t0);
        let condition = degraded(&first);
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", "WatchFailing")
        );
        assert_eq!(condition.message, format!("WatchFailing: {stale}"));
        assert_eq!(condition.last_transition_time, to_time(t0));

        let t1 = t0 + chrono::Duration::seconds(30);
        let mut later = build(&plan, &policy, Some(&first), t1);
        report_troubles(&mut later, Some(&first), &plan, &policy, &troubles, t1);
        assert_eq!(
            degraded(&later).last_transition_time,
            to_time(t0),
            "still degraded since t0"
        );
        assert_eq!(
            later, first,
            "nothing changed: no status write at each pass"
        );

        let t2 = t1 + chrono::Duration::seconds(30);
        let mut recovered = build(&plan, &policy, Some(&later), t2);
        report_troubles(
            &mut recovered,
            Some(&later),
            &plan,
            &policy,
            &Troubles::default(),
            t2,
        );
        let condition = degraded(&recovered);
        assert_eq!(
            (
                condition.status.as_str(),
                condition.last_transition_time.clone()
            ),
            ("False", to_time(t2))
        );
    }
}
