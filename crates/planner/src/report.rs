//! Folding passes and executed actions into the upgrade runs' records ([`k8sm_api::report`]): pure, so that what the
//! report says is tested against generated truth; the controller stores the records.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use k8sm_api::NodePhase;
use k8sm_api::report::{FORCED_KEPT, ForcedRecord, NodeRecord, UpgradeReport, WorkloadRecord};

use crate::{Action, ActionKind, ClusterView, Plan, objects::workload, rules::health::sla_floor};

/// The runs the controller keeps, by policy name.
pub type Runs = BTreeMap<String, UpgradeReport>;

/// Folds one pass (its view and plan, at `now`) into `runs`: a policy with a new target starts a new run; each node
/// of a run records when it was admitted, told to restart and back (from its own annotations, so that a run picked
/// up after a restart keeps the times) and what an operator forced on it; the workloads a run disrupted are observed
/// until they are whole again; a run whose nodes all run the target is finished. Returns the policies whose record changed, and those whose run was
/// replaced by a new one (with the record they had). Only the policies `known` says yes to: the caller may not know
/// yet where a policy's run stands (its stored record not read back yet).
pub fn observe(
    runs: &mut Runs,
    view: &ClusterView,
    plan: &Plan,
    now: DateTime<Utc>,
    known: impl Fn(&str, &str) -> bool,
) -> Observed {
    let mut observed = Observed::default();
    let mut counted: Option<(HashMap<String, u32>, HashMap<String, u32>)> = None;
    let desired: HashMap<&str, u32> = view
        .owners
        .iter()
        .filter_map(|o| Some((o.uid.as_str(), o.desired?)))
        .collect();
    let nodes: HashMap<&str, &crate::NodeView> =
        view.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    for policy in &view.policies {
        let Some(target) = policy.spec.target_executor_id.as_deref() else {
            continue;
        };
        if policy.deleting || !known(&policy.name, target) {
            continue;
        }
        let name = policy.name.as_str();
        let fresh = runs
            .get(name)
            .is_none_or(|run| run.target_executor_id != target);
        let run = runs.entry(name.to_owned()).or_insert_with(|| {
            UpgradeReport::new(name, target, policy.spec.owner_health_threshold, now)
        });
        if run.target_executor_id != target {
            let old = std::mem::replace(
                run,
                UpgradeReport::new(name, target, policy.spec.owner_health_threshold, now),
            );
            observed.superseded.push(old);
        }
        // Whether the record changed, found as it is changed: comparing whole copies would copy a large fleet's
        // record every pass.
        let mut changed = fresh;
        for node in plan.nodes.iter().filter(|n| n.policy == name) {
            let seen = nodes.get(node.node.as_str());
            if let Some(forced) = seen
                .and_then(|n| n.forced.as_deref())
                .and_then(|v| ForcedRecord::parse(&node.node, v))
                && !run.forced.contains(&forced)
            {
                changed = true;
                run.forced.push(forced);
                if run.forced.len() > FORCED_KEPT {
                    run.forced.remove(0);
                }
            }
            let annotation = |value: Option<&String>| {
                value
                    .and_then(|v| DateTime::parse_from_rfc3339(v).ok())
                    .map(|t| t.with_timezone(&Utc))
            };
            match node.phase {
                NodePhase::Compatible => {
                    if let Some(record) = run.nodes.get_mut(&node.node)
                        && record.upgraded.is_none()
                    {
                        record.upgraded = Some(now);
                        changed = true;
                    }
                }
                phase => {
                    let record = run.nodes.entry(node.node.clone()).or_default();
                    let before = record.clone();
                    // Back in the run (a node marked again): its return is not recorded any more.
                    record.upgraded = None;
                    if matches!(
                        phase,
                        NodePhase::Draining | NodePhase::Drained | NodePhase::KamikazeSent
                    ) && let Some(at) = annotation(seen.and_then(|n| n.draining_since.as_ref()))
                    {
                        record.admitted = Some(at);
                    }
                    if phase == NodePhase::KamikazeSent {
                        record.kamikaze = annotation(seen.and_then(|n| n.kamikaze.as_ref()))
                            .or(record.kamikaze)
                            .or(Some(now));
                    }
                    changed |= *record != before;
                }
            }
        }
        let recovering: Vec<String> = run
            .workloads
            .iter()
            .filter(|(_, w)| w.recovering)
            .map(|(k, _)| k.clone())
            .collect();
        if !recovering.is_empty() {
            let (ready, available) = counted.get_or_insert_with(|| {
                (
                    workload::ready_pods_by_workload(view),
                    workload::available_pods_by_workload(view, now),
                )
            });
            // An unknown kind's size as the planner infers it now, not as it was at the eviction: a pod terminating
            // then (a failure's, its replacement already there) counted in the size, and would keep the workload
            // "recovering" for good.
            let inferred = workload::inferred_sizes(
                view,
                recovering
                    .iter()
                    .map(|key| run.workloads[key].uid.as_str())
                    .filter(|uid| !desired.contains_key(uid)),
            );
            for key in recovering {
                let w = run.workloads.get_mut(&key).expect("listed above");
                let before = w.clone();
                let now_ready = ready.get(&w.uid).copied().unwrap_or(0);
                let now_available = available.get(&w.uid).copied().unwrap_or(0);
                if let Some(&d) = desired.get(w.uid.as_str()).or_else(|| inferred.get(&w.uid)) {
                    w.desired = d;
                    w.bound = sla_floor(run.threshold, d);
                }
                w.min_ready = w.min_ready.min(now_ready);
                w.min_available = Some(w.min_counted().min(now_available));
                w.recovering = now_available < w.desired;
                changed |= *w != before;
            }
        }
        let counts = plan.policy(name).map(|p| p.counts);
        let all_upgraded = counts.is_some_and(|c| c.total > 0 && c.compatible == c.total)
            && run.nodes.values().all(|n| n.upgraded.is_some());
        let finished = run.finished;
        run.finished = match (all_upgraded, run.finished) {
            (true, None) => Some(now),
            (true, Some(at)) => Some(at),
            (false, _) => None,
        };
        if finished.is_none() && run.finished.is_some() {
            observed.finished.insert(name.to_owned());
        }
        if changed || run.finished != finished {
            run.updated = now;
            observed.changed.insert(name.to_owned());
        }
    }
    observed
}

/// What [`observe`] found.
#[derive(Debug, Default)]
pub struct Observed {
    /// Policies whose record changed.
    pub changed: BTreeSet<String>,
    /// Records of runs that a new target replaced, as they were.
    pub superseded: Vec<UpgradeReport>,
    /// Policies whose run finished in this pass.
    pub finished: BTreeSet<String>,
}

/// Records an action the controller carried out, at `now`, in its policy's run (if it has one). `node`: the node
/// of a pod action (the pod's node, from the controller's cache). Whether the record changed.
pub fn record(runs: &mut Runs, action: &Action, node: Option<&str>, now: DateTime<Utc>) -> bool {
    let Some(run) = runs.get_mut(&action.policy) else {
        return false;
    };
    let counted = !matches!(
        action.kind,
        ActionKind::Progress { .. }
            | ActionKind::AddFinalizer { .. }
            | ActionKind::RemoveFinalizer { .. }
    );
    if counted {
        *run.actions
            .entry(action.reason.as_str().to_owned())
            .or_default() += 1;
    }
    let node = node.or(action.kind.node()).map(str::to_owned);
    fn entry<'r>(run: &'r mut UpgradeReport, node: Option<&String>) -> Option<&'r mut NodeRecord> {
        Some(run.nodes.entry(node?.clone()).or_default())
    }
    let node = node.as_ref();
    match &action.kind {
        ActionKind::Admit { at, .. } => {
            if let Some(n) = entry(run, node) {
                n.admitted = Some(*at);
            }
        }
        ActionKind::Kamikaze { at, .. } => {
            if let Some(n) = entry(run, node) {
                n.kamikaze = Some(*at);
            }
        }
        ActionKind::Stall { .. } => {
            if let Some(n) = entry(run, node) {
                n.stalls += 1;
            }
        }
        ActionKind::DeletePod { .. } => {
            if let Some(n) = entry(run, node) {
                n.deletions += 1;
            }
        }
        ActionKind::Evict { pod, eviction } => {
            if let Some(n) = entry(run, node) {
                n.evictions += 1;
            }
            let owner = &eviction.owner;
            disrupted(
                run,
                &owner.uid,
                owner.kind.as_str(),
                pod.namespace(),
                &owner.name,
                eviction.desired,
                (
                    eviction.ready_after + eviction.warming_after,
                    eviction.ready_after,
                ),
            );
        }
        ActionKind::Surge {
            pod, deployment, ..
        } => {
            if let Some(n) = entry(run, node) {
                n.moves += 1;
            }
            // The old pod stays Ready until the new one is: nothing lost when it starts.
            disrupted(
                run,
                &deployment.uid,
                "Deployment",
                pod.namespace(),
                &deployment.name,
                1,
                (1, 1),
            );
        }
        _ => {}
    }
    run.updated = now;
    true
}

/// A workload lost a pod (or started moving one) and has `ready_after` Ready pods of `desired`, `available_after` of
/// them available: recorded, and observed until whole again.
fn disrupted(
    run: &mut UpgradeReport,
    uid: &str,
    kind: &str,
    namespace: &str,
    name: &str,
    desired: u32,
    (ready_after, available_after): (u32, u32),
) {
    let threshold = run.threshold;
    let w = run
        .workloads
        .entry(WorkloadRecord::key(kind, namespace, name))
        .or_insert_with(|| WorkloadRecord {
            uid: uid.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            desired,
            bound: sla_floor(threshold, desired),
            min_ready: ready_after,
            min_available: Some(available_after),
            disruptions: 0,
            recovering: true,
        });
    w.uid = uid.to_owned();
    w.desired = desired;
    w.bound = sla_floor(threshold, desired);
    w.min_ready = w.min_ready.min(ready_after);
    w.min_available = Some(w.min_counted().min(available_after));
    w.disruptions += 1;
    w.recovering = true;
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
