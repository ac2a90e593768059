//! The checks of each step against the model's truth, never against the plan's account of itself:
//! before execution, each eviction (the rule, budgets, unknown kinds through the Eviction API, no
//! workload pod deleted); after it, each workload's Ready pods against its bound; and a tally of
//! what the plans did that the checks are about.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    scenarios::{Kind, Mode, Rollout, Scenario},
    world::World,
};
use crate::{
    ActionKind, Plan,
    tests::{
        oracle::{self, Evicted},
        support::Direct,
    },
};

/// Before execution: each workload's evictions keep the rule (oracle), budgets hold, unknown kinds
/// go through the Eviction API, no workload pod is deleted directly. Returns the workloads that
/// lost a pod that was not broken.
pub(super) fn check_plan(
    world: &World,
    plan: &Plan,
    step: usize,
) -> Result<BTreeSet<usize>, String> {
    let t = world.threshold;
    let mut evicted: BTreeMap<usize, Vec<Evicted>> = BTreeMap::new();
    for (pod_ref, e) in plan.evictions() {
        let pod = world
            .view
            .pods
            .iter()
            .find(|p| *p.uid == *pod_ref.uid())
            .ok_or_else(|| format!("step {step}: {pod_ref} evicted: no such pod"))?;
        let Some(w) = world.workload_of(&pod.uid) else {
            return Err(format!(
                "step {step}: {pod_ref} evicted: not a workload pod"
            ));
        };
        let known = world.workloads[w].known();
        if !known && !e.use_eviction_api {
            return Err(format!(
                "step {step}: {pod_ref} of an unknown kind evicted around the Eviction API"
            ));
        }
        let broken = world.broken(pod);
        evicted.entry(w).or_default().push(Evicted {
            ready: pod.ready,
            broken,
            threshold: t,
        });
    }
    for (&w, list) in &evicted {
        oracle::check(world.truth(w), list).map_err(|e| {
            format!(
                "step {step}: {:?} {}: {e}",
                world.workloads[w].kind, world.workloads[w].key
            )
        })?;
        // k8sm predicts a budget only for Ready pods of kinds it knows; for the others the Eviction
        // API decides.
        let predicted = if world.workloads[w].known() {
            list.iter().filter(|e| e.ready).count()
        } else {
            0
        };
        if let Some(budget) = world
            .view
            .pdbs
            .iter()
            .find(|b| b.name == world.workloads[w].name)
            && predicted > budget.disruptions_allowed.max(0) as usize
        {
            return Err(format!(
                "step {step}: {predicted} Ready pods of {} evicted, its budget allows {}",
                world.workloads[w].key, budget.disruptions_allowed
            ));
        }
    }
    check_surge(world, plan, step)?;
    for pod in plan.deletions() {
        if let Some(w) = world.workload_of(pod.uid()) {
            return Err(format!(
                "step {step}: {pod} of {} deleted directly",
                world.workloads[w].key
            ));
        }
    }
    // Workloads that lost a pod that was not broken: only those can lose readiness by it.
    Ok(evicted
        .into_iter()
        .filter(|(_, list)| list.iter().any(|e| !e.broken))
        .map(|(w, _)| w)
        .collect())
}

/// Surge moves against the model: a move starts only for the Ready pod of a single-replica
/// Deployment whose last rollout is complete (the model's ReplicaSets say so), on a cordoned node,
/// under a policy that asks for it; and with surge on, such a pod is never evicted while its
/// Deployment can move it — unless the move it started brought no new pod within the deadline.
fn check_surge(world: &World, plan: &Plan, step: usize) -> Result<(), String> {
    let spec = &world.view.policies[0].spec;
    let surge = spec.workloads.surge == k8sm_api::Surge::SingleReplica;
    let single = |w: usize| {
        matches!(world.workloads[w].kind, Kind::Deployment(r) if r != Rollout::Paused)
            && world.workloads[w].desired == 1
    };
    let complete = |w: usize| {
        let sets = &world.workloads[w].sets;
        let (new, olds) = sets.split_last().unwrap();
        let ready_new = world
            .view
            .pods
            .iter()
            .filter(|p| p.ready && !p.terminating && world.pod_set.get(&*p.uid) == Some(new))
            .count();
        olds.iter().all(|&s| world.sets[s].replicas == 0)
            && world.sets[*new].replicas == 1
            && ready_new == 1
    };
    for action in &plan.actions {
        let ActionKind::Surge { pod: pod_ref, .. } = &action.kind else {
            continue;
        };
        let pod = world.view.pods.iter().find(|p| *p.uid == *pod_ref.uid());
        let w = world.workload_of(pod_ref.uid());
        let node = pod
            .and_then(|p| p.node_name.as_deref())
            .and_then(|n| world.view.nodes.iter().find(|x| *x.name == *n));
        let fine = surge
            && pod.is_some_and(|p| p.ready && !p.terminating)
            && w.is_some_and(|w| single(w) && complete(w))
            && node.is_some_and(|n| n.unschedulable);
        if !fine {
            return Err(format!(
                "step {step}: surge move of {pod_ref} that the model does not allow"
            ));
        }
    }
    if !surge || !spec.cordon {
        return Ok(());
    }
    let deadline = chrono::Duration::minutes(super::world::DEADLINE_MINUTES);
    for (pod_ref, _) in plan.evictions() {
        let Some(pod) = world.view.pods.iter().find(|p| *p.uid == *pod_ref.uid()) else {
            continue;
        };
        let Some(w) = world.workload_of(&pod.uid) else {
            continue;
        };
        let overdue = world.workloads[w]
            .surge_seen
            .as_ref()
            .is_some_and(|(_, at)| world.now - *at >= deadline);
        if pod.ready && single(w) && !overdue {
            return Err(format!(
                "step {step}: {pod_ref}, the only Ready pod of a single-replica Deployment, evicted instead of moved"
            ));
        }
    }
    Ok(())
}

/// After execution: a workload of which k8sm evicted a pod in this step is at or above its bound;
/// without failures, one that neither rolls out nor crash-loops always is.
pub(super) fn check_executed(
    world: &World,
    s: &Scenario,
    evicted: &BTreeSet<usize>,
    bounds: &[u32],
    step: usize,
) -> Result<(), String> {
    for (w, &bound) in bounds.iter().enumerate() {
        let after = world.ready(w);
        let key = &world.workloads[w].key;
        if evicted.contains(&w) && after < bound {
            return Err(format!(
                "step {step}: k8sm evicted from {key} and left {after} Ready, below its bound {bound}"
            ));
        }
        let rolls = matches!(world.workloads[w].kind, Kind::Deployment(r) if r != Rollout::Steady);
        let crash_loops = s.workloads[w].never_ready > 0;
        if s.mode != Mode::Failures && !rolls && !crash_loops && after < bound {
            return Err(format!(
                "step {step}: {key} has {after} Ready, below its bound {bound}"
            ));
        }
    }
    Ok(())
}

impl World {
    /// Counts what a plan does that the checks are about.
    pub(super) fn note(&mut self, plan: &Plan) {
        let stalls = plan
            .actions
            .iter()
            .any(|a| matches!(a.kind, ActionKind::Stall { .. }));
        self.seen.saw("a node gave up its slot", stalls);
        let evictions: Vec<(usize, bool, bool)> = plan
            .evictions()
            .filter_map(|(pod, _)| {
                let pod = self.view.pods.iter().find(|p| *p.uid == *pod.uid())?;
                Some((self.workload_of(&pod.uid)?, pod.ready, self.broken(pod)))
            })
            .collect();
        for (w, ready, broken) in evictions {
            let sets_with_pods = self.workloads[w]
                .sets
                .iter()
                .filter(|&&s| self.pod_set.values().any(|&p| p == s))
                .count();
            let kind = self.workloads[w].kind;
            self.seen.saw("an eviction", true);
            self.seen
                .saw("an eviction of a pod that is not Ready", !ready);
            self.seen.saw(
                "an eviction of a broken pod of a workload below its bound",
                broken && self.ready(w) < oracle::bound(self.threshold, self.workloads[w].desired),
            );
            self.seen.saw(
                "an eviction from a Deployment with pods in several ReplicaSets",
                matches!(kind, Kind::Deployment(_)) && sets_with_pods > 1,
            );
            self.seen.saw(
                "an eviction of an unknown kind's pod",
                !self.workloads[w].known(),
            );
            self.seen.saw(
                "an eviction of a ReplicationController's pod",
                kind == Kind::Direct(Direct::ReplicationController),
            );
        }
    }
}
