//! (2) The SLA invariant over time: random sequences of plan → execute → the cluster moves on, against a model of
//! the cluster (ReplicaSet controllers, a scheduler, executors that restart on kamikaze, failures k8sm did not cause).
//!
//! Each step:
//! 1. the planner sees the cluster and plans;
//! 2. the actions are executed (evicted and deleted pods become terminating, nodes get the contract keys);
//!    **invariant**: an owner whose ready pods dropped in this execution has `ready >= min(ceil(t*d), d-1)` after it;
//!    and the evidence of each eviction shows the rule held before it;
//! 3. the cluster moves on: pods terminating since the previous step are gone; executors told to terminate come back
//!    with the target ID after 1..3 steps (asserting that no pod was left on them); each ReplicaSet replaces missing
//!    pods on a node the scheduler picks (uncordoned, preferring untainted), ready after 1..3 steps; budgets are
//!    recomputed from ready pods; optionally, random pods fail (not ready for a while, or deleted).
//!
//! Without failures every owner keeps `ready >= floor` at every step, and the upgrade converges within a bound.

use std::collections::BTreeMap;

use k8sm_api::{MaxConcurrentNodes, UnmanagedPodPolicy};
use proptest::prelude::*;

use super::*;
use crate::{
    ClusterView, OwnerView, PdbView, PodView,
    testing::{NEW, apply, labels_selector, node, policy, replica_set, unmanaged_pod},
};

/// A tiny deterministic random source, so a failing case replays from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap()
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    old_nodes: usize,
    /// Desired replicas and `minAvailable` of the budget (if any) of each ReplicaSet.
    owners: Vec<(u32, Option<u32>)>,
    unmanaged: usize,
    threshold: u8,
    max_concurrent: u32,
    cordon: bool,
    failures: bool,
    seed: u64,
}

fn arb_scenario(failures: bool) -> impl Strategy<Value = Scenario> {
    (
        1usize..7,
        prop::collection::vec((1u32..12, prop::option::weighted(0.3, 0u32..12)), 1..5),
        0usize..3,
        1u8..=100,
        1u32..4,
        prop::bool::weighted(0.8),
        1u64..,
    )
        .prop_map(
            move |(old_nodes, owners, unmanaged, threshold, max_concurrent, cordon, seed)| {
                Scenario {
                    old_nodes,
                    owners: owners
                        .into_iter()
                        .map(|(d, min)| (d, min.map(|m| m.min(d - 1))))
                        .collect(),
                    unmanaged,
                    threshold,
                    max_concurrent,
                    cordon,
                    failures,
                    seed,
                }
            },
        )
}

/// The modelled cluster: the view the planner sees, plus what the model needs to move it on.
struct World {
    view: ClusterView,
    rng: Rng,
    /// Step at which a not-ready pod becomes ready, by UID.
    ready_at: BTreeMap<String, usize>,
    /// Step at which a kamikazed node comes back, by name.
    restart_at: BTreeMap<String, usize>,
    /// `minAvailable` of each owner's budget, by owner UID.
    min_available: BTreeMap<String, u32>,
    next_pod: usize,
}

impl World {
    fn new(s: &Scenario) -> Self {
        let mut rng = Rng(s.seed | 1);
        let mut nodes: Vec<NodeView> = (0..s.old_nodes)
            .map(|i| node(&format!("old-{i}")))
            .collect();
        // Spare capacity that is upgraded already, so replacements always have somewhere to go.
        nodes.push(node("spare").executor(NEW));
        let p = policy("p").with(|spec| {
            spec.owner_health_threshold = s.threshold;
            spec.max_concurrent_nodes = MaxConcurrentNodes::count(s.max_concurrent).unwrap();
            spec.cordon = s.cordon;
            spec.unmanaged_pods.policy = UnmanagedPodPolicy::Delete;
        });
        let mut view = ClusterView {
            nodes,
            policies: vec![p],
            ..Default::default()
        };
        let mut min_available = BTreeMap::new();
        for (k, &(desired, min)) in s.owners.iter().enumerate() {
            let rs = replica_set("ns", &format!("rs{k}"), desired);
            for j in 0..desired {
                let on = format!("old-{}", rng.below(s.old_nodes));
                view.pods
                    .push(rs.pod(&format!("rs{k}-{j}"), &on).label("app", &rs.name));
            }
            if let Some(min) = min {
                min_available.insert(rs.uid.clone(), min);
                view.pdbs.push(PdbView {
                    namespace: "ns".into(),
                    name: rs.name.clone(),
                    selector: Some(labels_selector(&[("app", &rs.name)])),
                    disruptions_allowed: 0,
                });
            }
            view.owners.push(rs);
        }
        for i in 0..s.unmanaged {
            let on = format!("old-{}", rng.below(s.old_nodes));
            view.pods
                .push(unmanaged_pod("ns", &format!("loose-{i}"), &on));
        }
        let mut world = Self {
            view,
            rng,
            ready_at: BTreeMap::new(),
            restart_at: BTreeMap::new(),
            min_available,
            next_pod: 0,
        };
        world.update_budgets();
        world
    }

    fn ready(&self, owner: &OwnerView) -> u32 {
        let of_owner = |p: &&PodView| p.controller.as_ref().is_some_and(|c| c.uid == owner.uid);
        let count = self
            .view
            .pods
            .iter()
            .filter(of_owner)
            .filter(|p| p.ready && !p.terminating)
            .count();
        u32::try_from(count).unwrap()
    }

    fn ready_all(&self) -> BTreeMap<String, u32> {
        self.view
            .owners
            .iter()
            .map(|o| (o.uid.clone(), self.ready(o)))
            .collect()
    }

    /// The disruption controller: `disruptionsAllowed = healthy - minAvailable`.
    fn update_budgets(&mut self) {
        let ready = self.ready_all();
        for budget in &mut self.view.pdbs {
            let uid = self
                .view
                .owners
                .iter()
                .find(|o| o.name == budget.name)
                .map(|o| o.uid.clone())
                .unwrap();
            let allowed = i64::from(ready[&uid]) - i64::from(self.min_available[&uid]);
            budget.disruptions_allowed = i32::try_from(allowed.max(0)).unwrap();
        }
    }

    /// Moves the cluster on by one step; `terminating_before` are the pods that were terminating when planning.
    fn advance(
        &mut self,
        step: usize,
        terminating_before: &[String],
        failures: bool,
    ) -> Result<(), String> {
        self.view
            .pods
            .retain(|p| !terminating_before.contains(&p.uid));
        // Executors told to terminate come back with the target after a while; their node must be empty.
        for n in &mut self.view.nodes {
            if n.kamikaze.is_some() && !self.restart_at.contains_key(&n.name) {
                let delay = 1 + self.rng.below(3);
                self.restart_at.insert(n.name.clone(), step + delay);
            }
        }
        let due: Vec<String> = self
            .restart_at
            .iter()
            .filter(|&(_, &at)| at <= step)
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            self.restart_at.remove(&name);
            if let Some(left) = self
                .view
                .pods
                .iter()
                .find(|p| p.node_name.as_deref() == Some(&name))
            {
                return Err(format!("kamikaze of {name} killed pod {}", left.name));
            }
            let n = self.view.nodes.iter_mut().find(|n| n.name == name).unwrap();
            n.executor_id = Some(NEW.into());
            n.kamikaze = None;
        }
        // ReplicaSet controllers replace missing pods; the scheduler avoids cordoned and restarting nodes.
        for owner in self.view.owners.clone() {
            let live = self
                .view
                .pods
                .iter()
                .filter(|p| {
                    p.controller.as_ref().is_some_and(|c| c.uid == owner.uid) && !p.terminating
                })
                .count();
            for _ in live..owner.desired.unwrap() as usize {
                let on = self.schedule();
                let mut pod = owner
                    .pod(&format!("{}-r{}", owner.name, self.next_pod), &on)
                    .label("app", &owner.name);
                self.next_pod += 1;
                pod.ready = false;
                self.ready_at
                    .insert(pod.uid.clone(), step + 1 + self.rng.below(3));
                self.view.pods.push(pod);
            }
        }
        for pod in &mut self.view.pods {
            if self
                .ready_at
                .get(&pod.uid)
                .is_some_and(|&at| at <= step + 1)
            {
                pod.ready = true;
                self.ready_at.remove(&pod.uid);
            }
        }
        if failures {
            self.fail(step);
        }
        self.update_budgets();
        Ok(())
    }

    /// Picks a node for a new pod: schedulable, not restarting, untainted if possible.
    fn schedule(&mut self) -> String {
        let schedulable: Vec<&NodeView> = self
            .view
            .nodes
            .iter()
            .filter(|n| {
                !n.unschedulable && n.kamikaze.is_none() && !self.restart_at.contains_key(&n.name)
            })
            .collect();
        let untainted: Vec<&NodeView> = schedulable
            .iter()
            .copied()
            .filter(|n| !n.has_k8sm_taint)
            .collect();
        let pool = if untainted.is_empty() {
            schedulable
        } else {
            untainted
        };
        pool[self.rng.below(pool.len())].name.clone()
    }

    /// Failures k8sm does not cause: a ready pod stops being ready for a while, or a pod is deleted.
    fn fail(&mut self, step: usize) {
        if self.view.pods.is_empty() || !self.rng.chance(30) {
            return;
        }
        let i = self.rng.below(self.view.pods.len());
        if self.rng.chance(50) {
            let uid = self.view.pods[i].uid.clone();
            self.view.pods[i].ready = false;
            self.ready_at.insert(uid, step + 1 + self.rng.below(4));
        } else if self.view.pods[i].controller.is_some() {
            self.view.pods.remove(i);
        }
    }

    fn upgraded(&self) -> bool {
        self.view.nodes.iter().all(|n| {
            n.executor_id.as_deref() == Some(NEW)
                && n.incompatible_since.is_none()
                && !n.incompatible_label
                && !n.has_k8sm_taint
                && !n.unschedulable
                && n.draining_since.is_none()
                && n.kamikaze_executor_id.is_none()
        })
    }
}

/// Runs a scenario for at most `steps` steps; returns the step at which every node was upgraded and clean.
fn run(s: &Scenario, steps: usize) -> Result<Option<usize>, String> {
    let mut world = World::new(s);
    let floors: BTreeMap<String, u32> = world
        .view
        .owners
        .iter()
        .map(|o| {
            (
                o.uid.clone(),
                crate::sla_floor(s.threshold, o.desired.unwrap()),
            )
        })
        .collect();
    for step in 0..steps {
        if world.upgraded() {
            return Ok(Some(step));
        }
        let now = at(i64::try_from(step).unwrap());
        let plan = crate::plan(&world.view, now);
        for (pod, e) in plan.evictions() {
            let ready = world.view.pods.iter().any(|p| p.uid == pod.uid && p.ready);
            let allowed = if ready {
                e.ready_before > e.needed || e.ready_before >= e.desired
            } else {
                e.ready_before >= floors[&e.owner.uid]
            };
            if !allowed || e.ready_after < floors[&e.owner.uid] {
                return Err(format!(
                    "step {step}: eviction of {pod} breaks the rule: {e:?}"
                ));
            }
        }
        let before = world.ready_all();
        let terminating_before: Vec<String> = world
            .view
            .pods
            .iter()
            .filter(|p| p.terminating)
            .map(|p| p.uid.clone())
            .collect();
        apply(&mut world.view, &plan);
        for (uid, after) in world.ready_all() {
            if after < before[&uid] && after < floors[&uid] {
                return Err(format!(
                    "step {step}: k8sm took {uid} from {} to {after} ready, floor {}",
                    before[&uid], floors[&uid]
                ));
            }
            // Without failures nothing else ever takes an owner below its floor either.
            if !s.failures && after < floors[&uid] && step > 0 {
                return Err(format!(
                    "step {step}: {uid} has {after} ready, below its floor {}",
                    floors[&uid]
                ));
            }
        }
        world.advance(step, &terminating_before, s.failures)?;
    }
    Ok(world.upgraded().then_some(steps))
}

/// A bound on the steps an upgrade takes, as if nothing overlapped: replacements always land on upgraded (untainted)
/// nodes, so each pod moves once, and a move takes at most 5 steps (evict; gone; replaced; ready after up to 3 steps),
/// after which its owner is fully ready again; each node then takes at most 6 more (kamikaze, up to 3 steps of
/// restart, completion). In practice drains overlap and upgrades take a fraction of this.
fn bound(s: &Scenario) -> usize {
    let pods: usize = s.owners.iter().map(|&(d, _)| d as usize).sum::<usize>() + s.unmanaged;
    12 + 5 * pods + 6 * s.old_nodes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    /// Without failures and with spare capacity: the invariant holds at every step, and every node is upgraded
    /// within the bound.
    #[test]
    fn the_upgrade_converges_and_keeps_the_sla(s in arb_scenario(false)) {
        let limit = bound(&s);
        match run(&s, limit) {
            Ok(Some(_)) => {}
            Ok(None) => prop_assert!(false, "not upgraded within {limit} steps: {s:?}"),
            Err(e) => prop_assert!(false, "{e}: {s:?}"),
        }
    }

    /// With random failures that k8sm does not cause: k8sm never makes an owner drop below its floor.
    #[test]
    fn failures_never_make_k8sm_break_the_sla(s in arb_scenario(true)) {
        if let Err(e) = run(&s, 150) {
            prop_assert!(false, "{e}: {s:?}");
        }
    }
}
