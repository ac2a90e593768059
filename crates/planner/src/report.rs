//! Folding passes and executed actions into the upgrade runs' records ([`k8sm_api::report`]): pure,
//! so that what the report says is tested against generated truth; the controller stores the
//! records.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use k8sm_api::NodePhase;
use k8sm_api::report::{FORCED_KEPT, ForcedRecord, NodeRecord, UpgradeReport, WorkloadRecord};

use crate::{
    Action, ActionKind, ClusterView, NodePlan, NodeView, Plan, PolicyView, objects::workload,
    rules::health::sla_floor,
};

/// The runs the controller keeps, by policy name.
pub type Runs = BTreeMap<String, UpgradeReport>;

/// Folds one pass (its view and plan, at `now`) into `runs`: a policy with a new target starts a
/// new run; each node of a run records when it was admitted, told to restart and back (from its own
/// annotations, so that a run picked up after a restart keeps the times) and what an operator
/// forced on it; the workloads a run disrupted are observed until they are whole again; a run whose
/// nodes all run the target is finished. Returns the policies whose record changed, and those whose
/// run was replaced by a new one (with the record they had). Only the policies `known` says yes to:
/// the caller may not know yet where a policy's run stands (its stored record not read back yet).
pub fn observe(
    runs: &mut Runs,
    view: &ClusterView,
    plan: &Plan,
    now: DateTime<Utc>,
    known: impl Fn(&str, &str) -> bool,
) -> Observed {
    let mut observed = Observed::default();
    let mut pass = Pass::new(view, plan, now);
    for policy in &view.policies {
        let Some(target) = policy.spec.target_executor_id.as_deref() else {
            continue;
        };
        if policy.deleting || !known(&policy.name, target) {
            continue;
        }
        let (run, fresh) = current_run(runs, policy, target, now, &mut observed);
        // Whether the record changed, found as it is changed: comparing whole copies would copy a
        // large fleet's record every pass.
        let mut changed = fresh;
        changed |= pass.fold_nodes(run, &policy.name);
        changed |= pass.observe_recovering(run);
        pass.finish(run, &policy.name, changed, &mut observed);
    }
    observed
}

/// The run of `policy` for `target`, and whether it is new: one is started where the policy has
/// none, or has one for another target (which `observed` keeps, as it was).
fn current_run<'r>(
    runs: &'r mut Runs,
    policy: &PolicyView,
    target: &str,
    now: DateTime<Utc>,
    observed: &mut Observed,
) -> (&'r mut UpgradeReport, bool) {
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
    (run, fresh)
}

/// What [`observe`] reads of one pass, for every policy.
struct Pass<'p> {
    view: &'p ClusterView,
    plan: &'p Plan,
    now: DateTime<Utc>,
    /// The owners' desired sizes, by UID.
    desired: HashMap<&'p str, u32>,
    /// The view's nodes, by name.
    nodes: HashMap<&'p str, &'p NodeView>,
    /// The Ready and the available pods of each workload, counted when a run first has a workload
    /// recovering.
    counted: Option<(HashMap<String, u32>, HashMap<String, u32>)>,
}

impl<'p> Pass<'p> {
    fn new(view: &'p ClusterView, plan: &'p Plan, now: DateTime<Utc>) -> Self {
        Self {
            view,
            plan,
            now,
            desired: view
                .owners
                .iter()
                .filter_map(|o| Some((o.uid.as_str(), o.desired?)))
                .collect(),
            nodes: view.nodes.iter().map(|n| (n.name.as_str(), n)).collect(),
            counted: None,
        }
    }

    /// Folds the reports of the policy `name`'s nodes into `run`. Whether the record changed.
    fn fold_nodes(&self, run: &mut UpgradeReport, name: &str) -> bool {
        let mut changed = false;
        for node in self.plan.nodes.iter().filter(|n| n.policy == name) {
            let seen = self.nodes.get(node.node.as_str()).copied();
            changed |= record_forced(run, node, seen);
            changed |= record_phase(run, node, seen, self.now);
        }
        changed
    }

    /// Observes the workloads `run` disrupted that are not whole again: their size, the fewest
    /// Ready and available pods seen, and whether they still recover. Whether the record changed.
    fn observe_recovering(&mut self, run: &mut UpgradeReport) -> bool {
        let recovering: Vec<String> = run
            .workloads
            .iter()
            .filter(|(_, w)| w.recovering)
            .map(|(k, _)| k.clone())
            .collect();
        if recovering.is_empty() {
            return false;
        }
        let (ready, available) = self.counted.get_or_insert_with(|| {
            (
                workload::ready_pods_by_workload(self.view),
                workload::available_pods_by_workload(self.view, self.now),
            )
        });
        // An unknown kind's size as the planner infers it now, not as it was at the eviction: a pod
        // terminating then (a failure's, its replacement already there) counted in the size, and
        // would keep the workload "recovering" for good.
        let inferred = workload::inferred_sizes(
            self.view,
            recovering
                .iter()
                .map(|key| run.workloads[key].uid.as_str())
                .filter(|uid| !self.desired.contains_key(uid)),
        );
        let mut changed = false;
        for key in recovering {
            let w = run.workloads.get_mut(&key).expect("listed above");
            let before = w.clone();
            let now_ready = ready.get(&w.uid).copied().unwrap_or(0);
            let now_available = available.get(&w.uid).copied().unwrap_or(0);
            if let Some(&d) = self
                .desired
                .get(w.uid.as_str())
                .or_else(|| inferred.get(&w.uid))
            {
                w.desired = d;
                w.bound = sla_floor(run.threshold, d);
            }
            w.min_ready = w.min_ready.min(now_ready);
            w.min_available = Some(w.min_counted().min(now_available));
            w.recovering = now_available < w.desired;
            changed |= *w != before;
        }
        changed
    }

    /// Finishes `run` once all its nodes run the target (and takes that back while one does not),
    /// noting in `observed` that the policy `name`'s run finished, and that its record changed if
    /// it did (`changed`, or finished).
    fn finish(&self, run: &mut UpgradeReport, name: &str, changed: bool, observed: &mut Observed) {
        let counts = self.plan.policy(name).map(|p| p.counts);
        let all_upgraded = counts.is_some_and(|c| c.total > 0 && c.compatible == c.total)
            && run.nodes.values().all(|n| n.upgraded.is_some());
        let finished = run.finished;
        run.finished = match (all_upgraded, run.finished) {
            (true, None) => Some(self.now),
            (true, Some(at)) => Some(at),
            (false, _) => None,
        };
        if finished.is_none() && run.finished.is_some() {
            observed.finished.insert(name.to_owned());
        }
        if changed || run.finished != finished {
            run.updated = self.now;
            observed.changed.insert(name.to_owned());
        }
    }
}

/// Records what an operator forced on `node` (its annotation, on the node as `seen` in the view),
/// if not recorded yet. Whether it was new.
fn record_forced(run: &mut UpgradeReport, node: &NodePlan, seen: Option<&NodeView>) -> bool {
    let Some(forced) = seen
        .and_then(|n| n.forced.as_deref())
        .and_then(|v| ForcedRecord::parse(&node.node, v))
        .filter(|forced| !run.forced.contains(forced))
    else {
        return false;
    };
    run.forced.push(forced);
    if run.forced.len() > FORCED_KEPT {
        run.forced.remove(0);
    }
    true
}

/// Records where `node` stands in `run`: when it is back on the target, or when it was admitted and
/// told to restart (from its annotations, on the node as `seen` in the view). Whether the record
/// changed.
fn record_phase(
    run: &mut UpgradeReport,
    node: &NodePlan,
    seen: Option<&NodeView>,
    now: DateTime<Utc>,
) -> bool {
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
                return true;
            }
            false
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
            *record != before
        }
    }
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

/// Records an action the controller carried out, at `now`, in its policy's run (if it has one).
/// `node`: the node of a pod action (the pod's node, from the controller's cache). Whether the
/// record changed.
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

/// A workload lost a pod (or started moving one) and has `ready_after` Ready pods of `desired`,
/// `available_after` of them available: recorded, and observed until whole again.
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
mod tests {
    use super::*;
    use crate::testing::{NEW, apply, at, deployment, node, policy};

    /// Deployment web (3 replicas, through ReplicaSet web-1) with a pod on each of n1 and n2
    /// (marked) and one on the upgraded node up; policy p targets NEW.
    fn fleet() -> ClusterView {
        let d = deployment("shop", "web", 3);
        let rs = d.replica_set("web-1");
        ClusterView {
            nodes: vec![node("n1"), node("n2"), node("up").executor(NEW)],
            pods: crate::testing::shared_pods([
                rs.pod("web-a", "n1"),
                rs.pod("web-b", "n2"),
                rs.pod("web-c", "up"),
            ]),
            owners: crate::testing::shared_owners([d, rs]),
            policies: vec![policy("p").with(|s| s.owner_health_threshold = 50)],
            ..ClusterView::default()
        }
    }

    /// Plans at `now`, records every action as executed (pods on their nodes from the view),
    /// applies the plan.
    fn pass(view: &mut ClusterView, runs: &mut Runs, now: DateTime<Utc>) -> Plan {
        pass_observed(view, runs, now).0
    }

    /// [`pass`], and what the record observed.
    fn pass_observed(
        view: &mut ClusterView,
        runs: &mut Runs,
        now: DateTime<Utc>,
    ) -> (Plan, Observed) {
        let plan = crate::plan(view, now);
        let observed = observe(runs, view, &plan, now, |_, _| true);
        for action in &plan.actions {
            let node = action
                .kind
                .about_pod()
                .and_then(|p| view.pods.iter().find(|v| *v.uid == *p.uid()))
                .and_then(|p| p.node_name.as_deref().map(str::to_owned));
            record(runs, action, node.as_deref(), now);
        }
        apply(view, &plan);
        (plan, observed)
    }

    /// The cluster moves on: terminating pods go and come back Ready on `up`; kamikazed nodes come
    /// back with NEW.
    fn settle(view: &mut ClusterView, next: &mut usize) {
        let gone: Vec<_> = view
            .pods
            .iter()
            .filter(|p| p.terminating)
            .cloned()
            .collect();
        view.pods.retain(|p| !p.terminating);
        for pod in gone {
            *next += 1;
            let mut new = (*pod).clone();
            new.name = format!("web-new-{next}").into();
            new.uid = format!("shop/web-new-{next}").into();
            new.node_name = Some("up".into());
            new.terminating = false;
            view.pods.push(std::sync::Arc::new(new));
        }
        for n in &mut view.nodes {
            if n.kamikaze.is_some() {
                n.executor_id = Some(NEW.into());
                n.kamikaze = None;
            }
        }
    }

    #[test]
    fn a_run_records_each_node_s_times_the_evictions_and_each_workload_s_fewest_ready_pods() {
        let mut view = fleet();
        let mut runs = Runs::new();
        let mut next = 0;
        let mut evictions = 0;
        let mut finishes = Vec::new();
        for minute in 0..30 {
            let (plan, observed) = pass_observed(&mut view, &mut runs, at(minute));
            evictions += plan.evictions().count();
            finishes.extend(observed.finished.into_iter().map(|p| (p, minute)));
            settle(&mut view, &mut next);
        }
        let run = &runs["p"];
        assert_eq!(run.target_executor_id, NEW);
        assert_eq!(run.started, at(0));
        assert!(run.finished.is_some(), "{run:#?}");
        // Its end is reported once, at the pass that saw it.
        assert_eq!(finishes.len(), 1, "{finishes:?}");
        assert_eq!(run.finished, Some(at(finishes[0].1)));
        assert_eq!(usize::try_from(run.count("Evicted")).unwrap(), evictions);
        assert_eq!(evictions, 2);
        assert_eq!(run.count("KamikazeSent"), 2);
        assert_eq!(
            run.nodes.len(),
            2,
            "the nodes it upgraded: {:?}",
            run.nodes.keys()
        );
        for (name, n) in &run.nodes {
            assert_eq!(n.evictions, 1, "{name}");
            let (a, k, u) = (
                n.admitted.unwrap(),
                n.kamikaze.unwrap(),
                n.upgraded.unwrap(),
            );
            assert!(a <= k && k < u, "{name}: {n:?}");
        }
        let web = &run.workloads["Deployment shop/web"];
        assert_eq!((web.desired, web.bound, web.disruptions), (3, 2, 2));
        // One pod at a time: it went to 2 Ready, never lower, and is whole again.
        assert_eq!(web.min_ready, 2);
        assert!(!web.recovering);
    }

    #[test]
    fn a_new_target_starts_a_new_run_and_hands_the_old_one_back() {
        let mut view = fleet();
        let mut runs = Runs::new();
        pass(&mut view, &mut runs, at(0));
        view.policies[0].spec.target_executor_id = Some("sha256:newer".into());
        let plan = crate::plan(&view, at(1));
        let observed = observe(&mut runs, &view, &plan, at(1), |_, _| true);
        assert_eq!(observed.superseded.len(), 1);
        assert_eq!(observed.superseded[0].target_executor_id, NEW);
        assert_eq!(runs["p"].target_executor_id, "sha256:newer");
        assert_eq!(runs["p"].started, at(1));
    }

    #[test]
    fn a_workload_is_observed_at_each_pass_until_it_is_whole_again() {
        let mut view = fleet();
        let mut runs = Runs::new();
        let plan = pass(&mut view, &mut runs, at(0));
        assert_eq!(plan.evictions().count(), 1);
        assert_eq!(runs["p"].workloads["Deployment shop/web"].min_ready, 2);
        // Something else takes another pod's readiness away: the report shows the low the
        // controller saw.
        view.pods.retain(|p| !p.terminating);
        let other = view.pods.iter_mut().find(|p| p.ready).unwrap();
        std::sync::Arc::make_mut(other).ready = false;
        pass(&mut view, &mut runs, at(1));
        let web = &runs["p"].workloads["Deployment shop/web"];
        assert_eq!(web.min_ready, 1);
        assert!(web.recovering);
    }

    /// An operator's workload (a kind k8sm cannot read a size from) with a pod terminating, its
    /// replacement already there (a failure's), when k8sm evicts another: the planner counts
    /// the terminating pod in its size then (4 for 3 pods), more careful. Once the terminating
    /// pods are gone and the evicted one is replaced, the record holds the workload to the size
    /// inferred now, so it is whole again with its 3 pods Ready, not "recovering" for good and
    /// recording dips that are not k8sm's
    /// (docs/decisions/0008-defects-found-by-models-and-benchmarks.md).
    #[test]
    fn an_unknown_kind_is_whole_again_at_the_size_inferred_now() {
        let brokers = crate::testing::owner(
            crate::OwnerKind::Other("KafkaNodePool".into()),
            "k",
            "brokers",
            None,
        );
        let mut view = ClusterView {
            nodes: vec![node("n1"), node("up").executor(NEW)],
            pods: crate::testing::shared_pods([
                brokers.pod("b0", "n1"),
                brokers.pod("b1", "up"),
                brokers.pod("b2", "up"),
                brokers.pod("b3", "up").terminating(),
            ]),
            policies: vec![policy("p").with(|s| s.owner_health_threshold = 50)],
            observed_sizes: [(brokers.uid.to_string(), 3)].into(),
            ..ClusterView::default()
        };
        let mut runs = Runs::new();
        let plan = pass(&mut view, &mut runs, at(0));
        assert_eq!(plan.evictions().count(), 1);
        let key = "KafkaNodePool k/brokers";
        let w = &runs["p"].workloads[key];
        assert_eq!((w.desired, w.min_ready, w.recovering), (4, 2, true));
        view.pods.retain(|p| !p.terminating);
        view.pods.push(std::sync::Arc::new(brokers.pod("b4", "up")));
        pass(&mut view, &mut runs, at(1));
        let w = &runs["p"].workloads[key];
        assert_eq!((w.desired, w.bound, w.min_ready), (3, 2, 2));
        assert!(!w.recovering, "{w:?}");
    }

    #[test]
    fn what_an_operator_forced_on_a_node_is_recorded_once() {
        let mut view = fleet();
        let mut runs = Runs::new();
        pass(&mut view, &mut runs, at(0));
        let value =
            k8sm_api::report::ForcedRecord::annotation(at(1), "alice", "deleted shop/legacy");
        view.nodes[0].forced = Some(value);
        pass(&mut view, &mut runs, at(2));
        pass(&mut view, &mut runs, at(3));
        let forced = &runs["p"].forced;
        assert_eq!(forced.len(), 1, "{forced:?}");
        assert_eq!(
            (
                forced[0].node.as_str(),
                forced[0].user.as_str(),
                forced[0].at
            ),
            ("n1", "alice", at(1))
        );
    }

    /// Where a workload sets `minReadySeconds`, the record keeps its fewest Ready pods and its
    /// fewest available ones apart: a pod Ready for 10 s of 60 is Ready and not available.
    /// Whole again once as many are available as desired.
    #[test]
    fn with_min_ready_seconds_the_record_keeps_ready_and_available_apart() {
        let mut d = deployment("shop", "web", 4);
        d.min_ready_seconds = 60;
        let rs = d.replica_set("web-1");
        let since = |p: crate::PodView, t: DateTime<Utc>| crate::PodView {
            ready_changed: Some(t),
            ..p
        };
        let long_ago = at(0) - chrono::Duration::minutes(30);
        let mut view = ClusterView {
            nodes: vec![node("n1"), node("up").executor(NEW)],
            pods: crate::testing::shared_pods([
                since(rs.pod("web-a", "n1"), long_ago),
                since(rs.pod("web-b", "up"), long_ago),
                since(rs.pod("web-c", "up"), long_ago),
                since(rs.pod("web-d", "up"), at(0) - chrono::Duration::seconds(10)),
            ]),
            owners: crate::testing::shared_owners([d, rs.clone()]),
            policies: vec![policy("p").with(|s| s.owner_health_threshold = 50)],
            ..ClusterView::default()
        };
        let mut runs = Runs::new();
        let plan = pass(&mut view, &mut runs, at(0));
        assert_eq!(plan.evictions().count(), 1, "3 available of 4, bound 2");
        let key = "Deployment shop/web";
        let w = &runs["p"].workloads[key];
        assert_eq!(
            (w.bound, w.min_ready, w.min_available),
            (2, 3, Some(2)),
            "{w:?}"
        );
        // The evicted pod replaced, Ready from at(1): 4 Ready, 3 available (web-d is by now).
        view.pods.retain(|p| !p.terminating);
        view.pods
            .push(std::sync::Arc::new(since(rs.pod("web-e", "up"), at(1))));
        pass(&mut view, &mut runs, at(1));
        let w = &runs["p"].workloads[key];
        assert_eq!(
            (w.min_ready, w.min_available, w.recovering),
            (3, Some(2), true)
        );
        // Available a minute later: whole again.
        pass(&mut view, &mut runs, at(2) + chrono::Duration::seconds(1));
        assert!(!runs["p"].workloads[key].recovering);
    }
}
