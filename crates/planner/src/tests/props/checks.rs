//! The checks of one plan, each judged against the generated truth and never against the plan's own
//! account of an eviction: (a) the SLA rule, (b) controllers of kinds k8sm does not know, (c) the
//! Eviction API, (d) unmanaged pods, (e) budgets.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use k8sm_api::UnmanagedPodPolicy;
use proptest::prelude::*;

use super::truth::{PodOf, World};
use crate::{
    ActionKind, Plan,
    tests::oracle::{self, Evicted},
};

/// Every pod a plan evicts must be one it may touch at all; returns the plan's evictions per
/// workload key.
pub(super) fn evictions_by_workload(
    world: &World,
    plan: &Plan,
) -> Result<BTreeMap<String, Vec<Evicted>>, TestCaseError> {
    let truth = &world.truth;
    let admitted_now: BTreeSet<&str> = plan
        .actions
        .iter()
        .filter_map(|a| match &a.kind {
            ActionKind::Admit { node, .. } => Some(node.as_str()),
            _ => None,
        })
        .collect();
    let mut by_workload: BTreeMap<String, Vec<Evicted>> = BTreeMap::new();
    for (pod_ref, _) in plan.evictions() {
        let Some(pod) = truth.pods.get(pod_ref.uid()) else {
            return Err(TestCaseError::fail(format!(
                "{pod_ref} evicted: no such pod"
            )));
        };
        let what = truth.describe(pod_ref.uid());
        let PodOf::Workload(key) = &pod.of else {
            return Err(TestCaseError::fail(format!(
                "{what} evicted: only workload pods are"
            )));
        };
        let Some(node) = pod.node.as_deref() else {
            return Err(TestCaseError::fail(format!(
                "{what} evicted: it is on no node"
            )));
        };
        let n = &truth.nodes[node];
        let Some(p) = truth.policy_of(node) else {
            return Err(TestCaseError::fail(format!(
                "{what} evicted: no single policy selects its node"
            )));
        };
        prop_assert!(p.acts, "{what} evicted: policy {} is paused", p.name);
        prop_assert!(
            pod.staying() && !pod.opted_out,
            "{what} evicted, but it is finished, going or opted out: {pod:?}"
        );
        prop_assert!(
            !n.upgraded && !n.opted_out && (n.stage == 2 || admitted_now.contains(node)),
            "{what} evicted from a node that is not draining: {n:?}"
        );
        by_workload.entry(key.clone()).or_default().push(Evicted {
            ready: pod.ready,
            broken: pod.broken || (!pod.ready && truth.broken_as_a_whole(key)),
            threshold: p.threshold,
        });
    }
    Ok(by_workload)
}

/// (a) No workload loses more than the rule allows, counting every eviction of the plan and those
/// in flight.
pub(super) fn check_sla(world: &World, plan: &Plan) -> Result<(), TestCaseError> {
    for (key, evicted) in evictions_by_workload(world, plan)? {
        let w = world.truth.workload(&key);
        if let Err(e) = oracle::check(w, &evicted) {
            return Err(TestCaseError::fail(format!(
                "{}: {e}",
                world.truth.workloads[&key].what
            )));
        }
    }
    Ok(())
}

/// (b) A controller of a kind k8sm does not know loses one pod per plan unless its threshold allows
/// more.
pub(super) fn check_other_controllers_one_at_a_time(
    world: &World,
    plan: &Plan,
) -> Result<(), TestCaseError> {
    for (key, evicted) in evictions_by_workload(world, plan)? {
        if !world.truth.is_unknown_kind(&key) {
            continue;
        }
        let w = world.truth.workload(&key);
        // The most lenient threshold among its pods' nodes allows the most.
        let t = evicted.iter().map(|e| e.threshold).min().unwrap();
        let (most_ready, not_ready_may_go) = oracle::most_evictions(w, t);
        let ready = evicted.iter().filter(|e| e.ready).count();
        // Broken pods may always go: moving them costs no readiness.
        let not_ready = evicted.iter().filter(|e| !e.ready && !e.broken).count();
        prop_assert!(
            ready <= most_ready as usize && (not_ready == 0 || not_ready_may_go),
            "{} ({w:?}) lost {ready} Ready and {not_ready} not-Ready pods in one plan; threshold {t} allows at most \
             {most_ready} Ready ones{}",
            world.truth.workloads[&key].what,
            if not_ready_may_go {
                ""
            } else {
                " and no not-Ready one"
            }
        );
    }
    Ok(())
}

/// (c) Pods of controllers k8sm does not know are never deleted directly: always through the
/// Eviction API. Pods of known workloads are evicted too, through the API exactly when their node's
/// policy respects budgets.
pub(super) fn check_eviction_api(world: &World, plan: &Plan) -> Result<(), TestCaseError> {
    let truth = &world.truth;
    for pod in plan.deletions() {
        let Some(p) = truth.pods.get(pod.uid()) else {
            continue;
        };
        if let PodOf::Workload(_) = &p.of {
            prop_assert!(
                p.finished,
                "{} deleted directly (DeletePod)",
                truth.describe(pod.uid())
            );
        }
    }
    for (pod, e) in plan.evictions() {
        let Some(p) = truth.pods.get(pod.uid()) else {
            continue;
        };
        let expected = truth.through_api(p);
        prop_assert!(
            e.use_eviction_api == expected,
            "{} evicted {}: {}",
            truth.describe(pod.uid()),
            if e.use_eviction_api {
                "through the Eviction API"
            } else {
                "by a plain delete"
            },
            match &p.of {
                PodOf::Workload(key) if truth.is_unknown_kind(key) => {
                    "a controller of a kind k8sm does not know is always evicted through the Eviction API"
                }
                _ => "its node's policy says otherwise (respectPodDisruptionBudgets)",
            }
        );
    }
    Ok(())
}

/// (d) Unmanaged pods (and Job pods past the timeout) are deleted only once no workload or
/// other-controller pod is left on their node (terminating pods and evictions in flight have left;
/// an eviction in this plan has not), and only as the unmanaged-pod policy allows. DaemonSet and
/// mirror pods are never touched; finished pods are deleted unless opted out.
pub(super) fn check_unmanaged(
    world: &World,
    plan: &Plan,
    now: DateTime<Utc>,
) -> Result<(), TestCaseError> {
    let truth = &world.truth;
    for pod_ref in plan.deletions() {
        let Some(pod) = truth.pods.get(pod_ref.uid()) else {
            return Err(TestCaseError::fail(format!(
                "{pod_ref} deleted: no such pod"
            )));
        };
        let what = truth.describe(pod_ref.uid());
        prop_assert!(
            !pod.terminating && !pod.in_flight && !pod.opted_out,
            "{what} deleted, but it is going or opted out"
        );
        prop_assert!(
            !matches!(pod.of, PodOf::DaemonSet | PodOf::Mirror),
            "{what} deleted"
        );
        prop_assert!(
            pod.finished || !matches!(pod.of, PodOf::Workload(_)),
            "{what} deleted directly: workload and other-controller pods are evicted, never deleted"
        );
        let Some(node) = pod.node.as_deref() else {
            return Err(TestCaseError::fail(format!(
                "{what} deleted: it is on no node"
            )));
        };
        let p = truth.policy_of(node);
        prop_assert!(
            p.is_some_and(|p| p.acts),
            "{what} deleted on a node no acting policy holds"
        );
        if pod.finished {
            continue;
        }
        let p = p.unwrap();
        let left: Vec<&String> = truth
            .pods
            .iter()
            .filter(|(_, o)| {
                o.node.as_deref() == Some(node)
                    && matches!(o.of, PodOf::Workload(_))
                    && o.staying()
                    && !o.opted_out
            })
            .map(|(uid, _)| uid)
            .collect();
        prop_assert!(
            left.is_empty(),
            "{what} deleted while workload or other-controller pods are left on {node}: {left:?}"
        );
        let marked = truth.nodes[node].marked.unwrap_or(now);
        let expired = now >= marked + p.timeout;
        let allowed = match (&pod.of, p.unmanaged) {
            (_, UnmanagedPodPolicy::Never) => false,
            (PodOf::Job, _) => expired,
            (_, UnmanagedPodPolicy::Delete) => true,
            (_, UnmanagedPodPolicy::DeleteAfterTimeout) => expired,
        };
        prop_assert!(
            allowed,
            "{what} deleted under {:?} (timeout {}, marked {marked})",
            p.unmanaged,
            p.timeout
        );
    }
    Ok(())
}

/// (e) The evictions of Ready pods of known workloads through the Eviction API that a budget covers
/// never exceed its disruptionsAllowed (k8sm predicts those); a pod that is not Ready, or of a
/// controller of another kind, may be asked for whatever the count (the API decides:
/// `unhealthyPodEvictionPolicy`, an eviction webhook). A pod that two budgets cover is never
/// evicted through the API (the apiserver refuses it).
pub(super) fn check_budgets(world: &World, plan: &Plan) -> Result<(), TestCaseError> {
    let truth = &world.truth;
    let through_api: Vec<&str> = plan
        .evictions()
        .filter(|(pod, _)| {
            truth
                .pods
                .get(pod.uid())
                .is_some_and(|p| truth.through_api(p))
        })
        .map(|(pod, _)| pod.uid())
        .collect();
    let predicted = |uid: &str| {
        let pod = &truth.pods[uid];
        pod.ready && matches!(&pod.of, PodOf::Workload(key) if !truth.is_unknown_kind(key))
    };
    for budget in &truth.budgets {
        let covered: Vec<&&str> = through_api
            .iter()
            .filter(|uid| budget.covers.contains(**uid) && predicted(uid))
            .collect();
        prop_assert!(
            covered.len() <= budget.allowed.max(0) as usize,
            "budget {} allows {} disruptions; the plan evicts {covered:?}",
            budget.name,
            budget.allowed
        );
    }
    for uid in through_api {
        let covering: Vec<&str> = truth
            .budgets
            .iter()
            .filter(|b| b.covers.contains(uid))
            .map(|b| &*b.name)
            .collect();
        prop_assert!(
            covering.len() < 2,
            "{} evicted through the API under two budgets {covering:?}",
            truth.describe(uid)
        );
    }
    Ok(())
}
