//! The SLA invariant over time: random sequences of plan → execute → the cluster moves on, against a model of the
//! cluster that knows its own truth (each workload's `d`, which pods it has, what its budget allows), so that every
//! check reads the model and never the plan's account of itself.
//!
//! The model: Deployments doing real rollouts (the model's Deployment controller scales a new ReplicaSet up and the
//! old ones down within maxSurge/maxUnavailable; a rollout may be under way, paused half-way, start mid-upgrade, or
//! be stuck with new pods that are never schedulable), bare ReplicaSets, ReplicationControllers, StatefulSets, an
//! operator of a kind k8sm does not know that recreates a deleted pod only after a delay (its `d` is not visible to
//! the planner), an Argo-Rollout-like controller of ReplicaSets, pods that never become Ready, budgets recomputed
//! each step from Ready pods, a scheduler, executors that restart on kamikaze, the controller's bookkeeping of
//! evictions in flight, and (optionally) failures k8sm did not cause.
//!
//! Each step:
//! 1. the planner sees the cluster and plans at the model's clock; every eviction is checked against the model's
//!    truth (the rule before each eviction, budgets, unknown kinds through the Eviction API, no workload pod deleted);
//! 2. the actions are executed (evicted and deleted pods become terminating, nodes get the contract keys);
//!    **invariant**: a workload of which k8sm evicted a pod in this step has at least `min(ceil(t*d), d-1)` Ready
//!    pods after it (whatever failures did before: those are not k8sm's);
//! 3. the cluster moves on: pods terminating since the previous step are gone; the controllers replace and scale;
//!    executors told to terminate come back with the target ID (their node must be empty); pods become Ready.
//!
//! The clock advances a minute per step, and, when the cluster is idle (nothing pending in the model, nothing but
//! bookkeeping in the plan), jumps to the plan's next wake-up, as the controller requeues: a node that waits on a
//! stuck workload reaches its `nodeProgressDeadline` and gives up its slot.
//!
//! Liveness: without stuck workloads every node is upgraded within a bound; with stuck workloads (a stuck rollout,
//! a budget that allows nothing, pods that never become Ready below the bound) every other node still is, and the
//! stuck nodes are reported with what they wait on.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use k8sm_api::{MaxConcurrentNodes, NodePhase, UnmanagedPodPolicy};
use proptest::prelude::*;

use super::{
    oracle::{self, Evicted},
    *,
};
use crate::{
    ActionKind, ClusterView, ControllerRef, InFlightEviction, OwnerKind, OwnerView, PdbView,
    PodPhase, PodView,
    testing::{NEW, apply, deployment, labels_selector, node, owner, policy, unmanaged_pod},
};

/// `nodeProgressDeadline` of the model's policy, in minutes (one step is at least a minute).
const DEADLINE_MINUTES: i64 = 5;

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

// ---------------------------------------------------------------------------------------------------------------
// Scenarios.

/// Where a Deployment's rollout stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rollout {
    /// One ReplicaSet, no rollout.
    Steady,
    /// Under way: pods in the old and the new ReplicaSet, some new ones not Ready yet.
    Under,
    /// Paused half-way: half the pods in each ReplicaSet; the Deployment controller does nothing.
    Paused,
    /// The new ReplicaSet's pods are never schedulable; the old one is scaled down by maxUnavailable.
    Stuck,
    /// Starts at this step, in the middle of the upgrade.
    StartsAt(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Deployment(Rollout),
    ReplicaSet,
    ReplicationController,
    StatefulSet,
    /// A controller of a kind k8sm does not know that owns its pods and recreates a deleted one after a delay.
    Operator,
    /// A controller of a kind k8sm does not know that owns a ReplicaSet (an Argo Rollout).
    OperatorReplicaSet,
}

#[derive(Clone, Debug)]
struct WorkloadSpec {
    kind: Kind,
    desired: u32,
    /// `minAvailable` of its budget.
    min_available: Option<u32>,
    /// Pods that never become Ready (a crash loop); their replacements are healthy.
    never_ready: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// No workload is stuck: every node must be upgraded.
    Healthy,
    /// At least one workload is stuck: every other node must be upgraded.
    Stuck,
    /// Failures k8sm does not cause, stuck workloads allowed: only the SLA invariants are checked.
    Failures,
}

#[derive(Clone, Debug)]
struct Scenario {
    mode: Mode,
    old_nodes: usize,
    workloads: Vec<WorkloadSpec>,
    unmanaged: usize,
    threshold: u8,
    max_concurrent: u32,
    cordon: bool,
    /// The controller forgets an eviction of an unknown kind's pod after 10 minutes, replaced or not (as
    /// `controller/src/in_flight.rs` does).
    age_out: bool,
    seed: u64,
}

fn arb_kind() -> impl Strategy<Value = Kind> {
    let rollout = prop_oneof![
        3 => Just(Rollout::Steady),
        2 => Just(Rollout::Under),
        1 => Just(Rollout::Paused),
        2 => Just(Rollout::Stuck),
        2 => (0usize..12).prop_map(Rollout::StartsAt),
    ];
    prop_oneof![
        5 => rollout.prop_map(Kind::Deployment),
        1 => Just(Kind::ReplicaSet),
        1 => Just(Kind::ReplicationController),
        1 => Just(Kind::StatefulSet),
        2 => Just(Kind::Operator),
        1 => Just(Kind::OperatorReplicaSet),
    ]
}

fn arb_workload() -> impl Strategy<Value = WorkloadSpec> {
    (
        arb_kind(),
        1u32..10,
        prop::option::weighted(0.3, 0u32..10),
        prop_oneof![3 => Just(0u32), 1 => 1u32..3],
    )
        .prop_map(|(kind, desired, min_available, never_ready)| {
            let rolls = matches!(kind, Kind::Deployment(r) if r != Rollout::Steady);
            WorkloadSpec {
                kind,
                desired,
                // At most d - 1 here: a budget that allows nothing is made on purpose, in `Mode::Stuck`.
                min_available: min_available.map(|m| m.min(desired - 1)),
                // Crash loops in workloads that do not roll out, so that what is stuck stays simple to tell.
                never_ready: if rolls { 0 } else { never_ready.min(desired) },
            }
        })
}

fn arb_scenario(mode: Mode) -> impl Strategy<Value = Scenario> {
    (
        // Stuck workloads get nodes of their own, and the others need one too.
        if mode == Mode::Stuck {
            2usize..6
        } else {
            1usize..6
        },
        prop::collection::vec(arb_workload(), 1..5),
        0usize..3,
        prop_oneof![Just(90u8), Just(100), Just(50), 1u8..=100],
        prop_oneof![2 => Just(1u32), 1 => 2u32..4],
        prop::bool::weighted(0.8),
        1u64..,
        0usize..3,
    )
        .prop_map(
            move |(
                old_nodes,
                workloads,
                unmanaged,
                threshold,
                max_concurrent,
                cordon,
                seed,
                how,
            )| {
                let mut s = Scenario {
                    mode,
                    old_nodes,
                    workloads,
                    unmanaged,
                    threshold,
                    max_concurrent,
                    cordon,
                    age_out: false,
                    seed,
                };
                match mode {
                    Mode::Healthy => {
                        for w in &mut s.workloads {
                            if stuck(w, threshold) {
                                *w = WorkloadSpec {
                                    kind: Kind::Deployment(Rollout::Steady),
                                    never_ready: 0,
                                    ..w.clone()
                                };
                            }
                            if stuck(w, threshold) {
                                w.min_available = None;
                            }
                        }
                    }
                    Mode::Stuck => s.workloads.push(stuck_workload(how, threshold)),
                    Mode::Failures => {}
                }
                s
            },
        )
}

/// A workload that can never move a pod at threshold `t`, of one of three kinds.
fn stuck_workload(how: usize, t: u8) -> WorkloadSpec {
    let mut w = match how {
        // A budget that allows nothing.
        0 => WorkloadSpec {
            kind: Kind::Operator,
            desired: 3,
            min_available: Some(3),
            never_ready: 0,
        },
        // Pods that never become Ready, one more than the bound can spare.
        1 => {
            let d = 4;
            WorkloadSpec {
                kind: Kind::ReplicaSet,
                desired: d,
                min_available: None,
                never_ready: d - oracle::bound(t, d) + 1,
            }
        }
        // A rollout whose new pods are never schedulable.
        _ => WorkloadSpec {
            kind: Kind::Deployment(Rollout::Stuck),
            desired: 8,
            min_available: None,
            never_ready: 0,
        },
    };
    if !stuck(&w, t) {
        // At a threshold this low a stuck rollout still moves one pod at a time: hold it with its budget.
        w.min_available = Some(w.desired);
    }
    w
}

/// `(maxSurge, maxUnavailable)` of a Deployment of `d`: the defaults, 25% rounded up and down.
fn surge_and_unavailable(d: u32) -> (u32, u32) {
    (d.div_ceil(4), d / 4)
}

/// Whether a workload can never move one of its pods at threshold `t`, whatever the upgrade does: a budget that
/// allows nothing, pods that never become Ready with the Ready ones below the bound (or a budget that cannot spare
/// one), or a stuck rollout whose Ready pods are at its bound (or held by its budget).
fn stuck(w: &WorkloadSpec, t: u8) -> bool {
    let d = w.desired;
    let budget_spares = |ready: u32| w.min_available.is_none_or(|m| ready > m);
    let ready = match w.kind {
        Kind::Deployment(Rollout::Stuck) => d - surge_and_unavailable(d).1,
        _ => d - w.never_ready,
    };
    let pods_not_ready = w.never_ready > 0;
    let room = ready > oracle::needed(t, d) || (ready >= d && !pods_not_ready);
    let not_ready_may_go = pods_not_ready && ready >= oracle::bound(t, d);
    !budget_spares(ready) || !(room || not_ready_may_go)
}

// ---------------------------------------------------------------------------------------------------------------
// The model.

/// A controller of pods: a ReplicaSet (of a Deployment or a Rollout, or bare), a ReplicationController, a
/// StatefulSet, or an operator owning its pods directly.
struct Set {
    reference: ControllerRef,
    workload: usize,
    /// Pods it keeps running (`spec.replicas`).
    replicas: u32,
    /// Its pods are never schedulable (the new ReplicaSet of a stuck rollout).
    unschedulable: bool,
    /// An operator: recreates a deleted pod after a delay, and is not in the view.
    operator: bool,
}

struct Workload {
    /// The UID of the top-level controller: the key of its truth.
    key: String,
    name: String,
    kind: Kind,
    desired: u32,
    /// Its sets, oldest first.
    sets: Vec<usize>,
    /// The Deployment object, for a Deployment.
    deployment: Option<OwnerView>,
    /// The Rollout (a kind k8sm does not watch: not in the view) that controls its ReplicaSets.
    rollout: Option<OwnerView>,
    min_available: Option<u32>,
    /// Stuck at the scenario's threshold: its pods never move.
    stuck: bool,
}

impl Workload {
    /// Known to k8sm by its `spec.replicas`.
    fn known(&self) -> bool {
        !matches!(self.kind, Kind::Operator | Kind::OperatorReplicaSet)
    }
}

/// The controller's record of an eviction of an unknown kind's pod, kept until the cache shows as many live pods of
/// its workload as before the eviction (`Eviction::replaced_at`), as `controller/src/in_flight.rs` does; its
/// 10-minute age-out only with `Scenario::age_out` (see `the_controllers_age_out_forgets_an_unreplaced_pod`).
struct InFlight {
    entry: InFlightEviction,
    replaced_at: u32,
}

struct World {
    view: ClusterView,
    rng: Rng,
    threshold: u8,
    age_out: bool,
    workloads: Vec<Workload>,
    sets: Vec<Set>,
    /// The set of each workload pod, by UID.
    pod_set: BTreeMap<String, usize>,
    /// Step at which a pod that is not Ready becomes Ready, by UID (absent: never, or Ready already).
    ready_at: BTreeMap<String, usize>,
    /// Step at which a kamikazed node comes back, by name.
    restart_at: BTreeMap<String, usize>,
    /// Operator recreations due: (step, set).
    recreate: Vec<(usize, usize)>,
    in_flight: Vec<InFlight>,
    next_pod: usize,
    now: DateTime<Utc>,
    /// How often the situations the checks are about occurred, for `the_model_reaches_the_cases_that_matter`.
    seen: BTreeMap<&'static str, u32>,
}

impl World {
    fn new(s: &Scenario) -> Self {
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
            spec.node_progress_deadline = format!("{DEADLINE_MINUTES}m").parse().unwrap();
        });
        let mut world = Self {
            view: ClusterView {
                nodes,
                policies: vec![p],
                ..Default::default()
            },
            rng: Rng(s.seed | 1),
            threshold: s.threshold,
            age_out: s.age_out,
            workloads: Vec::new(),
            sets: Vec::new(),
            pod_set: BTreeMap::new(),
            ready_at: BTreeMap::new(),
            restart_at: BTreeMap::new(),
            recreate: Vec::new(),
            in_flight: Vec::new(),
            next_pod: 0,
            now: at(0),
            seen: BTreeMap::new(),
        };
        for (k, spec) in s.workloads.iter().enumerate() {
            world.add_workload(k, spec, s);
        }
        for i in 0..s.unmanaged {
            let on = world.old_node(s, false);
            world
                .view
                .pods
                .push(unmanaged_pod("ns", &format!("loose-{i}"), &on));
        }
        world.update_budgets();
        world
    }

    /// An old node for an initial pod. With stuck workloads, their pods get nodes of their own (the last third of the
    /// old nodes) and the others the rest: a pod that waits behind a stuck pod on its node (an unknown kind's pods
    /// go only once the node's workload pods have left) would make its own workload stuck too, and what is stuck
    /// would no longer be simple to tell.
    fn old_node(&mut self, s: &Scenario, stuck: bool) -> String {
        let reserved = if s.mode == Mode::Stuck {
            (s.old_nodes / 3).max(1)
        } else {
            0
        };
        let others = s.old_nodes - reserved;
        let i = if stuck && reserved > 0 {
            others + self.rng.below(reserved)
        } else {
            self.rng.below(others)
        };
        format!("old-{i}")
    }

    fn add_workload(&mut self, k: usize, spec: &WorkloadSpec, s: &Scenario) {
        let name = format!("w{k}");
        let d = spec.desired;
        let w = self.workloads.len();
        let (surge, unavailable) = surge_and_unavailable(d);
        // (replicas, unschedulable, how many of its first pods start not Ready for a while) per set.
        let mut sets: Vec<(u32, bool, u32)> = Vec::new();
        let mut workload = Workload {
            key: String::new(),
            name: name.clone(),
            kind: spec.kind,
            desired: d,
            sets: Vec::new(),
            deployment: None,
            rollout: None,
            min_available: spec.min_available,
            stuck: stuck(spec, s.threshold),
        };
        let reference = match spec.kind {
            Kind::Deployment(rollout) => {
                let dep = deployment("ns", &name, d);
                workload.key = dep.uid.clone();
                match rollout {
                    Rollout::Steady | Rollout::StartsAt(_) => sets.push((d, false, 0)),
                    Rollout::Under => {
                        let new = 1 + u32::try_from(self.rng.below(d as usize)).unwrap();
                        let extra = u32::try_from(self.rng.below(surge as usize + 1)).unwrap();
                        sets.push(((d - new + extra).min(d), false, 0));
                        sets.push((new, false, new / 2 + 1));
                    }
                    Rollout::Paused => {
                        sets.push((d / 2, false, 0));
                        sets.push((d - d / 2, false, 0));
                    }
                    Rollout::Stuck => {
                        sets.push((d - unavailable, false, 0));
                        sets.push((surge + unavailable, true, 0));
                    }
                }
                self.view.owners.push(dep.clone());
                workload.deployment = Some(dep);
                None
            }
            Kind::ReplicaSet | Kind::ReplicationController | Kind::StatefulSet => {
                let kind = match spec.kind {
                    Kind::ReplicaSet => OwnerKind::ReplicaSet,
                    Kind::ReplicationController => OwnerKind::ReplicationController,
                    _ => OwnerKind::StatefulSet,
                };
                let o = owner(kind, "ns", &name, Some(d));
                workload.key = o.uid.clone();
                sets.push((d, false, 0));
                Some(o)
            }
            Kind::Operator => {
                let o = owner(OwnerKind::Other("KafkaNodePool".into()), "ns", &name, None);
                workload.key = o.uid.clone();
                sets.push((d, false, 0));
                None
            }
            Kind::OperatorReplicaSet => {
                let rollout = owner(OwnerKind::Other("Rollout".into()), "ns", &name, None);
                workload.key = rollout.uid.clone();
                workload.rollout = Some(rollout);
                sets.push((d, false, 0));
                None
            }
        };
        self.workloads.push(workload);
        for (i, (replicas, unschedulable, starting)) in sets.into_iter().enumerate() {
            let set = self.add_set(w, i, replicas, unschedulable, reference.clone());
            for j in 0..replicas {
                let stuck = self.workloads[w].stuck;
                let on = self.old_node(s, stuck);
                let uid = self.create_pod(set, 0, Some(on));
                let never = i == 0 && j < spec.never_ready;
                if never || j < starting {
                    let pod = self.view.pods.iter_mut().find(|p| p.uid == uid).unwrap();
                    pod.ready = false;
                    if never {
                        self.ready_at.remove(&uid);
                    } else {
                        self.ready_at.insert(uid, 1 + self.rng.below(3));
                    }
                }
            }
        }
        if let Some(min) = spec.min_available {
            self.view.pdbs.push(PdbView {
                namespace: "ns".into(),
                name: name.clone(),
                selector: Some(labels_selector(&[("app", &name)])),
                disruptions_allowed: i32::try_from(min).unwrap(),
            });
        }
    }

    /// Adds the `i`-th set of workload `w`; `owner_object` is the object of a bare ReplicaSet, ReplicationController or
    /// StatefulSet.
    fn add_set(
        &mut self,
        w: usize,
        i: usize,
        replicas: u32,
        unschedulable: bool,
        owner_object: Option<OwnerView>,
    ) -> usize {
        let workload = &self.workloads[w];
        let (reference, operator) = if let Some(o) = owner_object {
            let reference = o.reference();
            self.view.owners.push(o);
            (reference, false)
        } else if let Some(top) = workload.deployment.as_ref().or(workload.rollout.as_ref()) {
            let mut rs = crate::testing::replica_set("ns", &format!("{}-{i}", workload.name), 0)
                .controlled_by(top);
            rs.desired = Some(replicas);
            let reference = rs.reference();
            self.view.owners.push(rs);
            (reference, false)
        } else {
            // An operator owning its pods: not in the view.
            let kind = "KafkaNodePool";
            let reference = ControllerRef {
                kind: kind.into(),
                name: workload.name.clone(),
                uid: workload.key.clone(),
            };
            (reference, true)
        };
        self.sets.push(Set {
            reference,
            workload: w,
            replicas,
            unschedulable,
            operator,
        });
        let set = self.sets.len() - 1;
        self.workloads[w].sets.push(set);
        set
    }

    /// Creates a pod of `set`: Ready at once on `on` (the initial pods), or scheduled and Ready after a while.
    fn create_pod(&mut self, set: usize, step: usize, on: Option<String>) -> String {
        let s = &self.sets[set];
        let workload = &self.workloads[s.workload];
        let name = format!("{}-p{}", workload.name, self.next_pod);
        self.next_pod += 1;
        let mut pod = PodView {
            controller: Some(s.reference.clone()),
            ..unmanaged_pod("ns", &name, "")
        }
        .label("app", &workload.name);
        if s.unschedulable {
            pod.node_name = None;
            pod.phase = PodPhase::Pending;
            pod.ready = false;
        } else if let Some(on) = on {
            pod.node_name = Some(on);
        } else {
            pod.node_name = Some(self.schedule());
            pod.ready = false;
            self.ready_at
                .insert(pod.uid.clone(), step + 1 + self.rng.below(3));
        }
        let uid = pod.uid.clone();
        self.pod_set.insert(uid.clone(), set);
        self.view.pods.push(pod);
        uid
    }

    /// The workload of a pod, if it has one.
    fn workload_of(&self, pod_uid: &str) -> Option<usize> {
        self.pod_set.get(pod_uid).map(|&s| self.sets[s].workload)
    }

    /// Pods of workload `w` (not finished): Ready and not terminating; terminating; all.
    fn counts(&self, w: usize) -> (u32, u32, u32) {
        let (mut ready, mut terminating, mut all) = (0, 0, 0);
        for pod in &self.view.pods {
            if self.workload_of(&pod.uid) != Some(w) {
                continue;
            }
            all += 1;
            if pod.terminating {
                terminating += 1;
            } else if pod.ready {
                ready += 1;
            }
        }
        (ready, terminating, all)
    }

    fn ready(&self, w: usize) -> u32 {
        self.counts(w).0
    }

    /// The model's truth about workload `w` before a plan: `d`, Ready, and going (terminating, or, for an operator,
    /// deleted and not recreated yet).
    fn truth(&self, w: usize) -> oracle::Truth {
        let (ready, terminating, all) = self.counts(w);
        let d = self.workloads[w].desired;
        let missing = if self.workloads[w].known() {
            0
        } else {
            d.saturating_sub(all)
        };
        oracle::Truth {
            desired: d,
            ready,
            going: terminating + missing,
        }
    }

    /// The disruption controller: `disruptionsAllowed = Ready pods - minAvailable`.
    fn update_budgets(&mut self) {
        let allowed: Vec<i32> = self
            .view
            .pdbs
            .iter()
            .map(|b| {
                let w = self
                    .workloads
                    .iter()
                    .position(|w| w.name == b.name)
                    .unwrap();
                let min = i64::from(self.workloads[w].min_available.unwrap());
                i32::try_from((i64::from(self.ready(w)) - min).max(0)).unwrap()
            })
            .collect();
        for (budget, allowed) in self.view.pdbs.iter_mut().zip(allowed) {
            budget.disruptions_allowed = allowed;
        }
    }

    /// The controller drops an in-flight record once the cache shows the pod replaced (as many live pods of its
    /// workload as before the eviction) or after 10 minutes, then hands the rest to the planner.
    fn prune_in_flight(&mut self) {
        let live = |w: &str| {
            self.view
                .pods
                .iter()
                .filter(|p| {
                    !p.terminating
                        && self
                            .workload_of(&p.uid)
                            .is_some_and(|i| self.workloads[i].key == w)
                })
                .count()
        };
        let now = self.now;
        let keep: Vec<bool> = self
            .in_flight
            .iter()
            .map(|f| {
                let owner = f.entry.owner_uid.as_deref().unwrap_or_default();
                let young = !self.age_out || now - f.entry.at < Duration::minutes(10);
                young && live(owner) < f.replaced_at as usize
            })
            .collect();
        let mut keep = keep.into_iter();
        self.in_flight.retain(|_| keep.next().unwrap());
        self.view.in_flight = self.in_flight.iter().map(|f| f.entry.clone()).collect();
    }

    /// Moves the cluster on by one step; `gone` are the pods that were terminating when planning.
    fn advance(&mut self, step: usize, gone: &[String], failures: bool) -> Result<(), String> {
        for uid in gone {
            let delay = 1 + self.rng.below(3);
            self.remove_pod(uid, step, delay);
        }
        if failures {
            self.fail(step);
        }
        self.restart_executors(step)?;
        self.deployment_controllers(step);
        self.replica_set_controllers(step);
        let due: Vec<usize> = self
            .recreate
            .iter()
            .filter(|&&(at, _)| at <= step)
            .map(|&(_, set)| set)
            .collect();
        self.recreate.retain(|&(at, _)| at > step);
        for set in due {
            self.saw("an operator recreated a pod", true);
            self.create_pod(set, step, None);
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
        self.update_budgets();
        Ok(())
    }

    /// Removes a pod; an operator recreates it `delay` steps later.
    fn remove_pod(&mut self, uid: &str, step: usize, delay: usize) {
        self.view.pods.retain(|p| p.uid != uid);
        self.ready_at.remove(uid);
        if let Some(set) = self.pod_set.remove(uid)
            && self.sets[set].operator
        {
            self.recreate.push((step + delay, set));
        }
    }

    /// Executors told to terminate come back with the target after a while; their node must be empty then.
    fn restart_executors(&mut self, step: usize) -> Result<(), String> {
        for n in &self.view.nodes {
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
                return Err(format!(
                    "step {step}: kamikaze of {name} killed pod {}",
                    left.name
                ));
            }
            let n = self.view.nodes.iter_mut().find(|n| n.name == name).unwrap();
            n.executor_id = Some(NEW.into());
            n.kamikaze = None;
        }
        Ok(())
    }

    /// Rolling updates: a new ReplicaSet scaled up within maxSurge, old ones scaled down while the Ready pods stay at
    /// `d - maxUnavailable` at least (kube-controller-manager's `rolloutRolling`, simplified).
    fn deployment_controllers(&mut self, step: usize) {
        for w in 0..self.workloads.len() {
            let Kind::Deployment(rollout) = self.workloads[w].kind else {
                continue;
            };
            if rollout == Rollout::Paused {
                continue;
            }
            if rollout == Rollout::StartsAt(step) {
                let i = self.workloads[w].sets.len();
                self.add_set(w, i, 0, false, None);
            }
            let d = self.workloads[w].desired;
            let (surge, unavailable) = surge_and_unavailable(d);
            let sets = self.workloads[w].sets.clone();
            let (new, olds) = sets.split_last().unwrap();
            let total: u32 = sets.iter().map(|&s| self.sets[s].replicas).sum();
            if self.sets[*new].replicas < d && total < d + surge {
                let up = (d + surge - total).min(d - self.sets[*new].replicas);
                self.sets[*new].replicas += up;
            }
            let total: u32 = sets.iter().map(|&s| self.sets[s].replicas).sum();
            let ready_in = |s: usize| {
                self.view
                    .pods
                    .iter()
                    .filter(|p| p.ready && !p.terminating && self.pod_set.get(&p.uid) == Some(&s))
                    .count() as i64
            };
            let available: i64 = sets.iter().map(|&s| ready_in(s)).sum();
            let min_available = i64::from(d - unavailable);
            let new_unavailable = i64::from(self.sets[*new].replicas) - ready_in(*new);
            let mut down = (i64::from(total) - min_available - new_unavailable.max(0))
                .min(available - min_available);
            for &old in olds {
                if down <= 0 {
                    break;
                }
                self.saw(
                    "a rollout scaled an old ReplicaSet down",
                    self.sets[old].replicas > 0,
                );
                let by = down.min(i64::from(self.sets[old].replicas));
                self.sets[old].replicas -= u32::try_from(by).unwrap();
                down -= by;
            }
            for &s in &sets {
                let reference = &self.sets[s].reference;
                if let Some(rs) = self.view.owners.iter_mut().find(|o| o.uid == reference.uid) {
                    rs.desired = Some(self.sets[s].replicas);
                }
            }
        }
    }

    /// ReplicaSet, ReplicationController and StatefulSet controllers: create missing pods, delete extra ones (those
    /// not scheduled or not Ready first).
    fn replica_set_controllers(&mut self, step: usize) {
        for set in 0..self.sets.len() {
            if self.sets[set].operator {
                continue;
            }
            let mut live: Vec<(bool, bool, String)> = self
                .view
                .pods
                .iter()
                .filter(|p| !p.terminating && self.pod_set.get(&p.uid) == Some(&set))
                .map(|p| (p.node_name.is_some(), p.ready, p.uid.clone()))
                .collect();
            let replicas = self.sets[set].replicas as usize;
            for _ in live.len()..replicas {
                self.create_pod(set, step, None);
            }
            if live.len() > replicas {
                // Unscheduled pods first, then those not Ready (false sorts first).
                live.sort();
                let extra = live.len() - replicas;
                for (_, _, uid) in live.into_iter().take(extra) {
                    let pod = self.view.pods.iter_mut().find(|p| p.uid == uid).unwrap();
                    pod.terminating = true;
                }
            }
        }
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

    /// Failures k8sm does not cause: a Ready pod stops being Ready for a while, or a pod is deleted (and recreated
    /// by its controller at once: an operator that took a while would shrink what k8sm can see of it, which
    /// DESIGN.md §5.3 accepts for deletions k8sm did not make).
    fn fail(&mut self, step: usize) {
        if self.view.pods.is_empty() || !self.rng.chance(30) {
            return;
        }
        let i = self.rng.below(self.view.pods.len());
        let uid = self.view.pods[i].uid.clone();
        if self.rng.chance(50) {
            if self.view.pods[i].ready {
                self.view.pods[i].ready = false;
                self.ready_at.insert(uid, step + 1 + self.rng.below(4));
            }
        } else if self.pod_set.contains_key(&uid) {
            self.remove_pod(&uid, step, 0);
        }
    }

    /// Counts what a plan does that the checks are about.
    fn note(&mut self, plan: &Plan) {
        let stalls = plan
            .actions
            .iter()
            .any(|a| matches!(a.kind, ActionKind::Stall { .. }));
        self.saw("a node gave up its slot", stalls);
        let evictions: Vec<(usize, bool)> = plan
            .evictions()
            .filter_map(|(pod, _)| {
                let ready = self.view.pods.iter().find(|p| p.uid == pod.uid)?.ready;
                Some((self.workload_of(&pod.uid)?, ready))
            })
            .collect();
        for (w, ready) in evictions {
            let sets_with_pods = self.workloads[w]
                .sets
                .iter()
                .filter(|&&s| self.pod_set.values().any(|&p| p == s))
                .count();
            let kind = self.workloads[w].kind;
            self.saw("an eviction", true);
            self.saw("an eviction of a pod that is not Ready", !ready);
            self.saw(
                "an eviction from a Deployment with pods in several ReplicaSets",
                matches!(kind, Kind::Deployment(_)) && sets_with_pods > 1,
            );
            self.saw(
                "an eviction of an unknown kind's pod",
                !self.workloads[w].known(),
            );
            self.saw(
                "an eviction of a ReplicationController's pod",
                kind == Kind::ReplicationController,
            );
        }
    }

    /// Nodes that hold a pod of a stuck workload: those never drain.
    fn stuck_nodes(&self) -> BTreeSet<String> {
        self.view
            .pods
            .iter()
            .filter(|p| {
                self.workload_of(&p.uid)
                    .is_some_and(|w| self.workloads[w].stuck)
            })
            .filter_map(|p| p.node_name.clone())
            .collect()
    }

    /// Every node but `except` runs the target executor and carries no k8sm state.
    fn upgraded(&self, except: &BTreeSet<String>) -> bool {
        self.view
            .nodes
            .iter()
            .filter(|n| !except.contains(&n.name))
            .all(|n| {
                n.executor_id.as_deref() == Some(NEW)
                    && n.incompatible_since.is_none()
                    && !n.incompatible_label
                    && !n.has_k8sm_taint
                    && !n.unschedulable
                    && n.draining_since.is_none()
                    && n.kamikaze_executor_id.is_none()
            })
    }

    fn saw(&mut self, what: &'static str, hit: bool) {
        *self.seen.entry(what).or_default() += u32::from(hit);
    }

    /// Whether the model has nothing pending: no pod starting, terminating or due, no executor restarting.
    fn idle(&self) -> bool {
        self.ready_at.is_empty()
            && self.restart_at.is_empty()
            && self.recreate.is_empty()
            && self.in_flight.is_empty()
            && self.view.pods.iter().all(|p| !p.terminating)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Checks against the model's truth.

/// Before execution: each workload's evictions keep the rule (oracle), budgets hold, unknown kinds go through the
/// Eviction API, no workload pod is deleted directly.
fn check_plan(world: &World, plan: &Plan, step: usize) -> Result<BTreeSet<usize>, String> {
    let t = world.threshold;
    let mut evicted: BTreeMap<usize, Vec<Evicted>> = BTreeMap::new();
    for (pod_ref, e) in plan.evictions() {
        let pod = world
            .view
            .pods
            .iter()
            .find(|p| p.uid == pod_ref.uid)
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
        evicted.entry(w).or_default().push(Evicted {
            ready: pod.ready,
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
        if let Some(budget) = world
            .view
            .pdbs
            .iter()
            .find(|b| b.name == world.workloads[w].name)
            && list.len() > budget.disruptions_allowed.max(0) as usize
        {
            return Err(format!(
                "step {step}: {} pods of {} evicted, its budget allows {}",
                list.len(),
                world.workloads[w].key,
                budget.disruptions_allowed
            ));
        }
    }
    for pod in plan.deletions() {
        if let Some(w) = world.workload_of(&pod.uid) {
            return Err(format!(
                "step {step}: {pod} of {} deleted directly",
                world.workloads[w].key
            ));
        }
    }
    Ok(evicted.into_keys().collect())
}

/// After execution: a workload of which k8sm evicted a pod in this step is at or above its bound; without failures,
/// one that neither rolls out nor crash-loops always is.
fn check_executed(
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

/// Runs a scenario for at most `steps` steps, and `then` more once every node that holds no stuck workload's pod is
/// upgraded and clean; returns the step at which they were, and the world.
fn run(s: &Scenario, steps: usize, then: usize) -> Result<(Option<usize>, World), String> {
    let mut world = World::new(s);
    let stuck_nodes = world.stuck_nodes();
    let failures = s.mode == Mode::Failures;
    let bounds: Vec<u32> = world
        .workloads
        .iter()
        .map(|w| oracle::bound(s.threshold, w.desired))
        .collect();
    let mut done = None;
    let mut step = 0;
    while step < steps {
        if done.is_none() && world.upgraded(&stuck_nodes) {
            done = Some(step);
        }
        if done.is_some_and(|d| step >= d + then) {
            break;
        }
        world.prune_in_flight();
        let plan = crate::plan(&world.view, world.now);
        let evicted = check_plan(&world, &plan, step)?;
        world.note(&plan);
        let gone: Vec<String> = world
            .view
            .pods
            .iter()
            .filter(|p| p.terminating)
            .map(|p| p.uid.clone())
            .collect();
        apply(&mut world.view, &plan);
        for (pod, e) in plan.evictions() {
            if let Some(before) = e.replaced_at {
                world.in_flight.push(InFlight {
                    entry: InFlightEviction {
                        pod_uid: pod.uid.clone(),
                        owner_uid: Some(e.owner.uid.clone()),
                        at: world.now,
                    },
                    replaced_at: before,
                });
            }
        }
        check_executed(&world, s, &evicted, &bounds, step)?;
        let bookkeeping = plan
            .actions
            .iter()
            .all(|a| matches!(a.kind, ActionKind::Progress { .. }));
        let idle = bookkeeping && world.idle();
        world.saw(
            "the clock jumped to the next wake-up",
            idle && plan.next_wake.is_some(),
        );
        world.advance(step, &gone, failures)?;
        let next = world.now + Duration::minutes(1);
        world.now = match plan.next_wake {
            Some(wake) if idle => wake.max(next),
            _ => next,
        };
        step += 1;
    }
    if done.is_none() && world.upgraded(&stuck_nodes) {
        done = Some(steps);
    }
    Ok((done, world))
}

/// A bound on the steps an upgrade takes, as if nothing overlapped: each pod moves once (twice for a Deployment that
/// rolls out: the rollout replaces it too), and a move takes at most 5 steps (evict; gone; replaced, after up to 3
/// steps for an operator; Ready after up to 3); each node then takes at most 6 more (kamikaze, up to 3 steps of
/// restart, completion) and may hold its slot for a deadline before it gives it up, once.
fn bound(s: &Scenario) -> usize {
    let pods: usize = s
        .workloads
        .iter()
        .map(|w| match w.kind {
            Kind::Deployment(r) if r != Rollout::Steady => 2 * w.desired as usize,
            _ => w.desired as usize,
        })
        .sum::<usize>()
        + s.unmanaged;
    let deadline = usize::try_from(DEADLINE_MINUTES).unwrap();
    20 + 5 * pods + (6 + deadline) * (s.old_nodes + 1)
}

/// Runs a scenario to its bound and checks liveness: every node without a stuck workload's pod is upgraded, and
/// each stuck node is then reported with what it waits on, or with its place in the queue for a slot.
fn converges(s: &Scenario) -> Result<(), String> {
    let limit = bound(s);
    let (done, world) = run(s, limit, 3)?;
    if done.is_none() {
        let stuck = world.stuck_nodes();
        let plan = crate::plan(&world.view, world.now);
        let summary: Vec<String> = plan
            .nodes
            .iter()
            .filter(|n| !stuck.contains(&n.node))
            .map(|n| format!("{} {:?} {:?}", n.node, n.phase, n.blockers.first()))
            .collect();
        return Err(format!(
            "not upgraded within {limit} steps (stuck nodes {stuck:?}); the others: {summary:#?}"
        ));
    }
    let stuck = world.stuck_nodes();
    let plan = crate::plan(&world.view, world.now);
    for name in &stuck {
        let n = node_plan(&plan, name);
        let reported = !n.blockers.is_empty() || n.admission_position.is_some();
        if n.phase == NodePhase::Compatible || !reported {
            return Err(format!("stuck node {name} is not reported: {n:?}"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Without stuck workloads or failures: the invariants hold at every step, and every node is upgraded within
    /// the bound.
    #[test]
    fn the_upgrade_converges_and_keeps_the_sla(s in arb_scenario(Mode::Healthy)) {
        if let Err(e) = converges(&s) {
            prop_assert!(false, "{e}\n{s:?}");
        }
    }

    /// With a stuck workload (a stuck rollout, a budget at zero, pods that never become Ready): it never loses a
    /// pod below its bound, its nodes are reported, and every other node is upgraded: nothing holds the fleet.
    #[test]
    fn a_stuck_workload_holds_only_its_own_nodes(s in arb_scenario(Mode::Stuck)) {
        if let Err(e) = converges(&s) {
            prop_assert!(false, "{e}\n{s:?}");
        }
    }

    /// With random failures that k8sm does not cause: k8sm never evicts a workload's pod when that leaves it below
    /// its bound, nor breaks any other rule.
    #[test]
    fn failures_never_make_k8sm_break_the_sla(s in arb_scenario(Mode::Failures)) {
        if let Err(e) = run(&s, 120, 0) {
            prop_assert!(false, "{e}\n{s:?}");
        }
    }
}

/// The checks above are only as good as the situations the model reaches: over a fixed sample of scenarios of each
/// mode, the planner must meet each of them.
#[test]
fn the_model_reaches_the_cases_that_matter() {
    use proptest::{strategy::ValueTree, test_runner::TestRunner};
    let mut seen: BTreeMap<&str, u32> = BTreeMap::new();
    let mut upgraded_after_a_stall = 0;
    let mut runner = TestRunner::deterministic();
    for mode in [Mode::Healthy, Mode::Stuck, Mode::Failures] {
        let strategy = arb_scenario(mode);
        for _ in 0..40 {
            let s = strategy.new_tree(&mut runner).unwrap().current();
            let limit = if mode == Mode::Failures {
                120
            } else {
                bound(&s)
            };
            let (done, world) = run(&s, limit, 0).unwrap();
            for (what, n) in &world.seen {
                *seen.entry(what).or_default() += n;
            }
            if mode == Mode::Stuck
                && done.is_some()
                && world
                    .seen
                    .get("a node gave up its slot")
                    .is_some_and(|&n| n > 0)
            {
                upgraded_after_a_stall += 1;
            }
        }
    }
    for (what, n) in &seen {
        assert!(*n > 0, "never seen in the sample: {what} ({seen:?})");
    }
    assert_eq!(seen.len(), 9, "{seen:?}");
    assert!(
        upgraded_after_a_stall > 0,
        "no stuck node ever gave up its slot for the others"
    );
}

/// A defect outside the planner, kept as a failing reproduction: the controller (`controller/src/in_flight.rs`)
/// forgets an eviction of an unknown kind's pod after 10 minutes, replaced or not. Its records are dropped by count
/// (once the controller has `replaced_at` live pods again), which keeps exactly one record per missing pod only while
/// the oldest record (the highest `replaced_at`) stays. Here, an operator of 5 pods at threshold 50 (bound 3), all on
/// one node, recreating a deleted pod 1 to 3 minutes later: k8sm evicts pods at 00:00 (two), 00:04 and 00:06 as
/// room allows, so the operator never has 5 live pods again and the 00:00 record (`replaced_at` 5) is the one that
/// stands for the pod missing at 00:10; at 00:10 it ages out while the replacement of the 00:06 pod does not exist
/// yet. The planner then sees 4 pods (d = 4, 3 Ready, needed 2) and evicts a Ready one: 2 Ready, below the true
/// bound of 3. The sim's controller model keeps a record until the count says the pod was replaced
/// (`Scenario::age_out` false), as DESIGN.md §5.3 asks ("its unreplaced evictions").
#[test]
#[ignore = "known defect: controller/src/in_flight.rs ages out a record whose pod is not replaced yet"]
fn the_controllers_age_out_forgets_an_unreplaced_pod() {
    let s = Scenario {
        mode: Mode::Healthy,
        old_nodes: 1,
        workloads: vec![WorkloadSpec {
            kind: Kind::Operator,
            desired: 5,
            min_available: None,
            never_ready: 0,
        }],
        unmanaged: 0,
        threshold: 50,
        max_concurrent: 1,
        cordon: true,
        age_out: true,
        seed: 40,
    };
    if let Err(e) = run(&s, bound(&s), 0) {
        panic!("{e}");
    }
}
