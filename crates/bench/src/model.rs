//! The bench's fleet upgraded in simulated time by the real planner (`k8sm-bench --model`): a
//! deterministic model of the cluster, and of the controller reacting every tick. It runs in
//! seconds and gives the same answer every time, so an admission rule can be judged against the
//! lower bound without the minutes and the noise of a real cluster; the cluster's run stays the
//! measurement of record (docs/decisions/0002-land-once.md shows where the two part).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8sm_api::{MaxConcurrentNodes, UnmanagedPodPolicy};
use k8sm_planner::testing::{self, NEW};
use k8sm_planner::{
    ActionKind, ClusterView, ControllerRef, OwnerView, Planner, PodPhase, PodPins, PodView,
    Resources,
};

use crate::stats::LowerBound;
use crate::workload::{self, Kind, Workload};
use rollout::Rollout;

mod rollout;

/// How long past its grace period an evicted pod is gone, unless told otherwise (KWOK's deletion,
/// measured alone by the calibration).
pub const GONE_AFTER: Duration = Duration::from_millis(300);
/// How long past its owner's delay a scheduled pod becomes Ready, unless told otherwise (the
/// calibration's median).
pub const READY_AFTER: Duration = Duration::from_millis(300);
const NAMESPACE: &str = "bench";
/// The controller plans at least this often when nothing changes (its `--resync` default): the pace
/// of an event-driven run's idle stretches.
const RESYNC: Duration = Duration::from_secs(30);
/// How long a messy run goes on once every node it can finish is upgraded, and after k8sm's last
/// eviction or deletion from then on, for anything k8sm would still do to the nodes left to an
/// operator to show: past the policy's default `nodeProgressDeadline` (10 minutes), the longest
/// wait of the planner's.
pub const SETTLE: Duration = Duration::from_secs(11 * 60);
/// When a messy fleet's pods were created, seconds from the start: an hour before, so that a crash
/// loop of before the upgrade counts as broken at once (its replacements only after
/// `nodeProgressDeadline`).
const CREATED_BEFORE: f64 = -3600.0;

/// What the model runs.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    pub nodes: usize,
    pub max_concurrent_nodes: MaxConcurrentNodes,
    pub threshold: u8,
    pub restart_delay: Duration,
    /// Readiness delay of owners without one of their own (the simple shape).
    pub pod_ready_delay: Duration,
    /// The controller plans once per tick: its reaction time is at most one tick.
    pub tick: Duration,
    /// Simulated time after which the run stops unfinished.
    pub limit: Duration,
    /// Plan at a tick only when something changed since the last pass, when the last plan asked to
    /// be woken (`next_wake`), or [`RESYNC`] after the last pass, as the controller does;
    /// `false`: at every tick. The same upgrade as long as the planner says when its decisions
    /// change with time alone, in a fraction of the passes.
    pub event_driven: bool,
    /// An experiment of docs/decisions/0002-land-once.md: a replacement may land on a node still
    /// to drain only when no other node has room for it, as if those nodes were NoSchedule
    /// exactly while other capacity suffices.
    pub no_schedule_to_drain: bool,
    /// Another: one node at a time until the first node is upgraded, so that replacements find
    /// upgraded room sooner.
    pub one_node_first: bool,
    /// The planner is not told the nodes' allocatable resources: room is unknown (no pacing, and
    /// no broken pod waits for room).
    pub no_room: bool,
    /// Admission paced by room (`ClusterView::pace_by_room`, the controller's `--pace-by-room`).
    pub pace_by_room: bool,
    /// How long past its grace period an evicted pod is gone ([`GONE_AFTER`]; a calibration's bulk
    /// median is longer: KWOK's deletions queue).
    pub gone_after: Duration,
    /// How long past its owner's delay a scheduled pod becomes Ready ([`READY_AFTER`]).
    pub ready_after: Duration,
    /// Mixed into the scheduler's pick among equal scores ([`tie`]): 0 picks as the model always
    /// did; others pick otherwise, as kube-scheduler's random pick does from run to run.
    pub tie_seed: u64,
}

/// When a node went through each step, seconds from the start, and what happened to it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeTimeline {
    pub name: String,
    pub admitted: Option<f64>,
    pub kamikaze: Option<f64>,
    pub back: Option<f64>,
    /// The first time it was seen cordoned (`spec.unschedulable`) after a pass.
    pub cordoned: Option<f64>,
    /// Its pods evicted or deleted by k8sm, over the whole run.
    pub evicted: usize,
    /// At the end: cordoned, or carrying k8sm's drain state (`draining_since`,
    /// `cordoned_by_k8sm`).
    pub cordoned_at_end: bool,
}

/// The model's upgrade.
#[derive(Clone, Debug, Default)]
pub struct ModelRun {
    /// Seconds until every node ran the new executor (of a messy fleet: every node but those only
    /// an operator can clear); `None` if the limit came first.
    pub makespan: Option<f64>,
    pub evictions: usize,
    pub deletions: usize,
    /// Owners whose Ready pods k8sm took below their bound `min(ceil(t·d), d−1)` (counted by the
    /// model): an owner Ready at the start whose Ready pods went below it at some tick, or any
    /// owner left below it by an eviction of one of its Ready pods (an owner below its bound
    /// from the start, as a crash-looping one, may not lose one).
    pub owners_below: Vec<String>,
    pub nodes: Vec<NodeTimeline>,
    /// Evictions of each owner's pods: more than its replicas when replacements landed on nodes
    /// still to drain and had to move again (each such move adds a wave to the owner's chain).
    pub evictions_by_owner: BTreeMap<String, usize>,
    /// Nodes that only an operator can clear, by the fleet's truth ([`Workload::unfinishable`]):
    /// empty for a tidy fleet.
    pub unfinishable: Vec<String>,
    /// Times a draining node gave its slot up (`Stall`).
    pub stalls: usize,
    /// Pods created during the upgrade (replacements).
    pub replacements: usize,
    /// Pods the rolling Deployment's own rollout deleted: disruptions too, as the cluster's
    /// watches count them.
    pub rollout_deletions: usize,
    /// Of those, the ones on nodes still to drain (which k8sm would have moved otherwise).
    pub rollout_deletions_to_drain: usize,
    /// Replacements bound to a node still to drain: each must move again.
    pub landed_to_drain: usize,
    /// Of those, the ones no other node had room for when they were bound: the floor the fleet's
    /// free capacity allows.
    pub landed_to_drain_forced: usize,
    /// Pods of owners at the start.
    pub initial_owned_pods: usize,
    /// Per owner that lost a Ready pod, seconds from the start until it last had all its replicas
    /// Ready again: its own makespan, to compare with the cluster's owner by owner.
    pub owner_restored: BTreeMap<String, f64>,
}

impl ModelRun {
    /// Evictions, and the rolling Deployment's own deletions, per pod of owners at the start (as
    /// the cluster's watches count disruptions).
    pub fn disruptions_per_pod(&self) -> f64 {
        (self.evictions + self.rollout_deletions) as f64 / self.initial_owned_pods.max(1) as f64
    }

    /// The least disruptions per pod the fleet's free capacity allows, as this run placed its
    /// replacements: one per pod, and one more for each replacement that had nowhere to go but
    /// a node still to drain.
    pub fn disruptions_floor(&self) -> f64 {
        1.0 + self.landed_to_drain_forced as f64 / self.initial_owned_pods.max(1) as f64
    }
}

impl ModelRun {
    /// Nodes left to an operator that were still cordoned, or carried k8sm's drain state, at the
    /// end.
    pub fn unfinishable_left_cordoned(&self) -> usize {
        self.unfinishable_nodes()
            .filter(|n| n.cordoned_at_end)
            .count()
    }

    /// Pods evicted or deleted from nodes left to an operator.
    pub fn evictions_on_unfinishable(&self) -> usize {
        self.unfinishable_nodes().map(|n| n.evicted).sum()
    }

    fn unfinishable_nodes(&self) -> impl Iterator<Item = &NodeTimeline> {
        self.nodes
            .iter()
            .filter(|n| self.unfinishable.contains(&n.name))
    }
}

/// One owner of the fleet as the model keeps it.
struct ModelOwner {
    spec: workload::Owner,
    /// The references its pods carry, by ReplicaSet (a Deployment's pods: its ReplicaSet's; a
    /// stuck rollout's second is its new ReplicaSet's).
    references: Vec<Arc<ControllerRef>>,
    labels: Arc<BTreeMap<String, String>>,
    /// Names handed out, for a ReplicaSet's new pods.
    created: usize,
    bound: u32,
    /// Ready pods when the upgrade starts.
    initial_ready: u32,
    lowest_ready: u32,
    /// One of its Ready pods was evicted or deleted in this tick.
    lost_ready: bool,
    /// An eviction of one of its Ready pods left it below its bound.
    taken_below: bool,
    /// Fewer Ready pods than its replicas since the last pass that saw all of them.
    short: bool,
    /// When it last had all its replicas Ready again.
    restored_at: Option<f64>,
    /// The rolling Deployment's rollout, from the upgrade's start: its ReplicaSets are sized by
    /// it, and replace their pods themselves.
    rollout: Option<Rollout>,
}

/// A pod's CPU (millicores) and memory (MiB) requests.
type Requests = (u64, u64);

impl ModelOwner {
    /// What each of its pods requests.
    fn requests(&self) -> Requests {
        (
            u64::from(self.spec.cpu_millis),
            u64::from(self.spec.memory_mib),
        )
    }
}

/// A pod as the model plays it.
#[derive(Clone)]
struct ModelPod {
    /// Its owner (`None`: unmanaged).
    owner: Option<usize>,
    requests: Requests,
    /// Which of its owner's ReplicaSets made it ([`ModelOwner::references`]).
    replica_set: usize,
    /// Crash-looping, or of a stuck rollout's new ReplicaSet.
    never_ready: bool,
    /// A zombie: deleting it again changes nothing.
    stays: bool,
    /// The only node it can run on.
    pin: Option<String>,
}

/// What the pods bound to a node request, in all and per owner (its pods count for topology
/// spread).
#[derive(Default)]
struct NodeUse {
    requests: Requests,
    owners: BTreeMap<usize, u32>,
}

impl NodeUse {
    fn add(&mut self, owner: Option<usize>, (cpu, memory): Requests) {
        self.requests.0 += cpu;
        self.requests.1 += memory;
        if let Some(owner) = owner {
            *self.owners.entry(owner).or_default() += 1;
        }
    }
}

/// What happens later, at a time in seconds.
#[derive(Clone, Debug)]
enum Due {
    /// A terminating pod is gone.
    Gone {
        uid: Arc<str>,
    },
    /// An owner's ReplicaSet creates a pod (pending, unscheduled).
    Create {
        owner: usize,
        replica_set: usize,
        name: String,
    },
    Ready {
        uid: Arc<str>,
    },
    /// A node's executor is back in the new version.
    Back {
        node: String,
    },
}

struct Model<'w> {
    cfg: &'w ModelConfig,
    fleet: &'w Workload,
    view: ClusterView,
    owners: Vec<ModelOwner>,
    /// Every pod by UID.
    pods: BTreeMap<Arc<str>, ModelPod>,
    due: Vec<(f64, Due)>,
    /// Room of every node for pods (allocatable less the DaemonSet's pod), CPU millicores and MiB.
    room: (u64, u64),
    timelines: BTreeMap<String, NodeTimeline>,
    /// Names of the nodes only an operator can clear.
    unfinishable: BTreeSet<String>,
    next_uid: usize,
    run: ModelRun,
    /// The fleet is placed and the upgrade runs: pods bound from now on are replacements.
    upgrading: bool,
}

/// Runs the model: the fleet placed by the model's scheduler, then upgraded by the planner one tick
/// at a time. A ReplicaSet creates a replacement as soon as its pod terminates, a StatefulSet once
/// its pod is gone; the scheduler scores nodes as kube-scheduler's default plugins do; pods are
/// Ready after their owner's delay, executors back after the restart delay; the rolling
/// Deployment rolls out from the start as kube-controller-manager rolls it (`rollout.rs`). Left
/// out, so not in the makespan: the apiserver's and KWOK's latencies under load (an evicted pod is
/// gone a fixed [`GONE_AFTER`] past its grace period, a created pod is scheduled in the next tick),
/// and the DaemonSet (its requests are taken off every node's room).
///
/// A messy fleet ([`crate::workload::Messy`]) is played as its truth says: crash-looping pods and a
/// stuck rollout's new pods never become Ready, dead nodes are NotReady and take no pod, zombies
/// never go, bare pods stay under `unmanagedPods.policy: Never`, and pinned pods stay where they
/// are pinned (under `pinnedPods: Block`). Its run stops once every node but those only an
/// operator can clear ([`Workload::unfinishable`]) is upgraded, and goes on for [`SETTLE`] (after
/// its last eviction) to see what k8sm still does to the others.
pub fn simulate(fleet: &Workload, cfg: &ModelConfig) -> ModelRun {
    let mut model = Model::new(fleet, cfg);
    model.place_fleet();
    model.upgrading = true;
    model.start_rollouts();
    model.run.initial_owned_pods = model.pods.values().filter(|p| p.owner.is_some()).count();
    let mut planner = Planner::default();
    let tick = cfg.tick.as_secs_f64().max(0.01);
    let limit = cfg.limit.as_secs_f64();
    let mut now = 0.0;
    // Event-driven: when the next pass is due though nothing changes.
    let mut plan_at = 0.0;
    let mut stop_at = f64::INFINITY;
    while now <= limit && now <= stop_at {
        let happened = model.happen(now) | model.sync_rollouts(now);
        let bound = model.schedule(now);
        if model.run.makespan.is_none() && model.finished() {
            model.run.makespan = Some(now);
            if !model.unfinishable.is_empty() {
                stop_at = now + SETTLE.as_secs_f64();
            }
        }
        // A tidy fleet's run goes on until every owner has its replicas Ready again, as the
        // cluster's run waits for, so that each owner's own makespan is known.
        if model.run.makespan.is_some()
            && model.unfinishable.is_empty()
            && model.owners.iter().all(|o| !o.short)
        {
            break;
        }
        if cfg.one_node_first {
            let first_back = model
                .view
                .nodes
                .iter()
                .any(|n| n.executor_id.as_deref() == Some(NEW));
            model.view.policies[0].spec.max_concurrent_nodes = if first_back {
                cfg.max_concurrent_nodes
            } else {
                MaxConcurrentNodes::count(1).expect("1 is a valid count")
            };
        }
        if !cfg.event_driven || happened || bound || now >= plan_at {
            let before = cfg.event_driven.then(|| model.view.clone());
            let plan = planner.plan(&model.view, at(now));
            let moved = model.run.evictions + model.run.deletions;
            model.execute(&plan, now);
            if stop_at.is_finite() && model.run.evictions + model.run.deletions > moved {
                // Still moving pods: a node that made progress keeps its slot for
                // `nodeProgressDeadline` after it.
                stop_at = now + SETTLE.as_secs_f64();
            }
            testing::apply(&mut model.view, &plan);
            model.watch_owners(now);
            model.watch_nodes(now);
            plan_at = if before.is_some_and(|b| b != model.view) {
                now
            } else {
                let wake = plan.next_wake.map_or(f64::INFINITY, seconds);
                wake.min(now + RESYNC.as_secs_f64())
            };
        }
        if cfg.event_driven {
            // The next tick at which something is due, or the planner plans; always a tick later at
            // least.
            let due = model
                .due
                .iter()
                .map(|(t, _)| *t)
                .chain(model.rollout_deadlines())
                .fold(plan_at, f64::min)
                .min(stop_at);
            now = ((due / tick).ceil() * tick).max(now + tick);
        } else {
            now += tick;
        }
    }
    model.finish()
}

fn at(seconds: f64) -> DateTime<Utc> {
    testing::t0() + chrono::Duration::milliseconds((seconds * 1000.0).round() as i64)
}

/// The model's requests (millicores, MiB) as the planner reads them.
fn requested((cpu_millis, memory_mib): Requests) -> Resources {
    Resources {
        cpu_millis,
        memory_bytes: memory_mib << 20,
        pods: 0,
    }
}

/// Seconds from the start.
fn seconds(t: DateTime<Utc>) -> f64 {
    (t - testing::t0()).num_milliseconds() as f64 / 1000.0
}

impl<'w> Model<'w> {
    fn new(fleet: &'w Workload, cfg: &'w ModelConfig) -> Self {
        let messy = fleet.messy.as_ref();
        let dead: BTreeSet<usize> = messy
            .map(|m| m.dead_nodes.iter().copied().collect())
            .unwrap_or_default();
        let mut view = ClusterView {
            nodes: (0..cfg.nodes)
                .map(|i| {
                    let mut node = testing::node(&k8sm_testcluster::node_name(i));
                    node.ready = !dead.contains(&i);
                    node
                })
                .collect(),
            policies: vec![testing::policy("bench").with(|spec| {
                spec.max_concurrent_nodes = cfg.max_concurrent_nodes;
                spec.owner_health_threshold = cfg.threshold;
                spec.unmanaged_pods.policy =
                    messy.map_or(UnmanagedPodPolicy::Delete, |m| m.unmanaged_policy);
            })],
            ..ClusterView::default()
        };
        let mut owners = Vec::new();
        for spec in &fleet.owners {
            let references = match spec.kind {
                Kind::Deployment => {
                    let mut deployment = testing::deployment(NAMESPACE, &spec.name, spec.replicas);
                    let mut replica_sets =
                        vec![deployment.replica_set(&format!("{}-rs", spec.name))];
                    if spec.rolling {
                        // Its rollout starts with the upgrade (`start_rollouts`).
                        replica_sets.push(deployment.replica_set(&format!("{}-rs2", spec.name)));
                    }
                    if spec.stuck_rollout > 0 {
                        // Past its progress deadline: its rollout is not complete, and its
                        // controller replaces nothing any more.
                        deployment = deployment.rollout(|r| r.complete = false);
                        deployment.replacing = false;
                        replica_sets.push(deployment.replica_set(&format!("{}-rs2", spec.name)));
                    }
                    view.owners.push(Arc::new(deployment));
                    let references = replica_sets
                        .iter()
                        .map(|r| Arc::new(r.reference()))
                        .collect();
                    view.owners.extend(replica_sets.into_iter().map(Arc::new));
                    references
                }
                Kind::StatefulSet => {
                    let set: OwnerView =
                        testing::stateful_set(NAMESPACE, &spec.name, spec.replicas);
                    let reference = set.reference();
                    view.owners.push(Arc::new(set));
                    vec![Arc::new(reference)]
                }
            };
            let bound = k8sm_testcluster::sla::bound(spec.replicas, u32::from(cfg.threshold));
            owners.push(ModelOwner {
                spec: spec.clone(),
                references,
                labels: Arc::new(BTreeMap::from([("app".to_owned(), spec.name.clone())])),
                created: 0,
                bound,
                initial_ready: spec.replicas,
                lowest_ready: spec.replicas,
                lost_ready: false,
                taken_below: false,
                short: false,
                restored_at: None,
                rollout: None,
            });
        }
        let size = fleet.node_size.unwrap_or(workload::NodeSize {
            cpu_millis: u64::MAX / 4,
            memory_mib: u64::MAX / 4,
        });
        let room = (
            size.cpu_millis
                .saturating_sub(u64::from(workload::DAEMON_REQUESTS.0)),
            size.memory_mib
                .saturating_sub(u64::from(workload::DAEMON_REQUESTS.1)),
        );
        // The planner is told what the model's scheduler places pods by (the DaemonSet's pod, which
        // the view does not hold, already taken off).
        view.pace_by_room = cfg.pace_by_room;
        if fleet.node_size.is_some() && !cfg.no_room {
            for node in &mut view.nodes {
                node.allocatable = Some(Resources {
                    cpu_millis: room.0,
                    memory_bytes: room.1 << 20,
                    pods: u64::MAX / 4,
                });
            }
        }
        let timelines = view
            .nodes
            .iter()
            .map(|n| {
                (
                    n.name.clone(),
                    NodeTimeline {
                        name: n.name.clone(),
                        ..NodeTimeline::default()
                    },
                )
            })
            .collect();
        let unfinishable = fleet
            .unfinishable()
            .into_iter()
            .filter(|&i| i < cfg.nodes)
            .map(k8sm_testcluster::node_name)
            .collect();
        Self {
            cfg,
            fleet,
            view,
            owners,
            pods: BTreeMap::new(),
            due: Vec::new(),
            room,
            timelines,
            unfinishable,
            next_uid: 0,
            run: ModelRun::default(),
            upgrading: false,
        }
    }

    /// The pods of `owners`, Pending: each owner's replicas, and a stuck rollout's new pods.
    fn create_owners(&mut self, owners: &[usize]) {
        for &owner in owners {
            let (replicas, stateful, stuck) = {
                let o = &self.owners[owner];
                (
                    o.spec.replicas,
                    o.spec.kind == Kind::StatefulSet,
                    o.spec.stuck_rollout,
                )
            };
            for i in 0..replicas {
                let name = if stateful {
                    format!("{}-{i}", self.owners[owner].spec.name)
                } else {
                    self.fresh_name(owner)
                };
                self.create(owner, 0, name, 0.0);
            }
            // A stuck rollout's new pods, which never become Ready.
            for _ in 0..stuck {
                let name = self.fresh_name(owner);
                self.create(owner, 1, name, 0.0);
            }
        }
    }

    /// Every owner's pods and the unmanaged ones, placed by the scheduler and Ready, as the bench
    /// waits for before the tool starts (but those of a messy fleet that never become Ready),
    /// and a messy fleet's zombies.
    fn place_fleet(&mut self) {
        // Pinned owners first, each pass bound before the next: a pinned pod that found its node
        // full would stay Pending off it, and its node, which the fleet's truth leaves to
        // the operator, would be finishable.
        let (pinned, free): (Vec<usize>, Vec<usize>) =
            (0..self.owners.len()).partition(|&o| !self.owners[o].spec.pinned_nodes.is_empty());
        for owners in [pinned, free] {
            self.create_owners(&owners);
            self.schedule(0.0);
        }
        let unmanaged: Vec<_> = self.fleet.unmanaged.clone();
        for pod in unmanaged {
            let node = k8sm_testcluster::node_name(pod.node_index);
            let mut view = testing::unmanaged_pod(NAMESPACE, &pod.name, &node);
            view.uid = self.uid(&pod.name);
            let requests = (
                u64::from(workload::UNMANAGED_REQUESTS.0),
                u64::from(workload::UNMANAGED_REQUESTS.1),
            );
            view.requests = requested(requests);
            self.pods.insert(
                view.uid.clone(),
                ModelPod {
                    owner: None,
                    requests,
                    replica_set: 0,
                    never_ready: false,
                    stays: false,
                    pin: None,
                },
            );
            self.view.pods.push(Arc::new(view));
        }
        let messy = self.fleet.messy.is_some();
        // Every pod Ready, as the bench waits for before the tool starts; a messy fleet's were
        // there an hour before (those the scheduler could not place stay Pending: pinned to
        // a node without room, say).
        for pod in &mut self.view.pods {
            let never_ready = self.pods.get(&pod.uid).is_some_and(|p| p.never_ready);
            if messy && pod.node_name.is_none() {
                continue;
            }
            let pod = Arc::make_mut(pod);
            pod.ready = !never_ready;
            pod.phase = PodPhase::Running;
            if messy {
                pod.created = Some(at(CREATED_BEFORE));
                pod.ready_changed = pod.ready.then(|| at(CREATED_BEFORE / 2.0));
            }
        }
        self.place_zombies();
        self.due.clear();
        let mut ready = vec![0u32; self.owners.len()];
        self.count_ready(&mut ready);
        for (owner, ready) in self.owners.iter_mut().zip(ready) {
            owner.initial_ready = ready;
            owner.lowest_ready = ready;
        }
    }

    /// A messy fleet's pods stuck terminating: past their grace period, not Ready, counted by their
    /// Deployment as gone (it replaced them: they come on top of its replicas).
    fn place_zombies(&mut self) {
        let zombies = self
            .fleet
            .messy
            .as_ref()
            .map(|m| m.zombies.clone())
            .unwrap_or_default();
        for zombie in zombies {
            let Some(owner) = self.owners.iter().position(|o| o.spec.name == zombie.owner) else {
                continue;
            };
            let uid = self.uid(&zombie.name);
            let o = &self.owners[owner];
            let pod = PodView {
                namespace: NAMESPACE.into(),
                name: zombie.name.as_str().into(),
                uid: uid.clone(),
                node_name: Some(k8sm_testcluster::node_name(zombie.node_index).into()),
                labels: o.labels.clone(),
                controller: Some(o.references[0].clone()),
                phase: PodPhase::Running,
                ready: false,
                terminating: true,
                created: Some(at(CREATED_BEFORE)),
                ready_changed: Some(at(-f64::from(zombie.deleted_before_s))),
                deletion: Some(at(-f64::from(zombie.deleted_before_s))),
                finalizers: if zombie.finalizer {
                    vec![workload::ZOMBIE_FINALIZER.to_owned()]
                } else {
                    Vec::new()
                },
                requests: requested(o.requests()),
                ..PodView::default()
            };
            let requests = o.requests();
            self.pods.insert(
                uid,
                ModelPod {
                    owner: Some(owner),
                    requests,
                    replica_set: 0,
                    never_ready: true,
                    stays: true,
                    pin: None,
                },
            );
            self.view.pods.push(Arc::new(pod));
        }
    }

    fn fresh_name(&mut self, owner: usize) -> String {
        let o = &mut self.owners[owner];
        o.created += 1;
        format!("{}-{:05}", o.spec.name, o.created)
    }

    fn uid(&mut self, name: &str) -> Arc<str> {
        self.next_uid += 1;
        format!("{name}#{}", self.next_uid).into()
    }

    /// A pending pod of `owner`'s ReplicaSet `replica_set`, created at `now` (seconds).
    fn create(&mut self, owner: usize, replica_set: usize, name: String, now: f64) {
        let uid = self.uid(&name);
        let o = &self.owners[owner];
        let pin = o.spec.pinned_node(&name).map(k8sm_testcluster::node_name);
        let pod = PodView {
            namespace: NAMESPACE.into(),
            name: name.into(),
            uid: uid.clone(),
            node_name: None,
            labels: o.labels.clone(),
            controller: Some(o.references[replica_set].clone()),
            phase: PodPhase::Pending,
            ready: false,
            created: Some(at(now)),
            // A hostname selector for either kind: which pin it is does not change what the planner
            // decides.
            pins: pin.as_ref().map(|node| {
                Box::new(PodPins {
                    hostname: Some(node.clone()),
                    ..PodPins::default()
                })
            }),
            requests: requested(o.requests()),
            ..PodView::default()
        };
        let requests = o.requests();
        self.pods.insert(
            uid,
            ModelPod {
                owner: Some(owner),
                requests,
                replica_set,
                // A stuck rollout's new pods never become Ready; a rolling one's do.
                never_ready: o.spec.crash_looping || (replica_set > 0 && o.spec.stuck_rollout > 0),
                stays: false,
                pin,
            },
        );
        self.view.pods.push(Arc::new(pod));
    }

    /// What is due by `now`, in time order; whether anything was.
    fn happen(&mut self, now: f64) -> bool {
        let (mut ready, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.due)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.due = later;
        ready.sort_by(|a, b| a.0.total_cmp(&b.0));
        let happened = !ready.is_empty();
        // Each at its own time: a tick may cover several.
        for (now, due) in ready {
            match due {
                Due::Gone { uid } => {
                    self.view.pods.retain(|p| p.uid != uid);
                    let owner = self.pods.remove(&uid).and_then(|p| p.owner);
                    if let Some(owner) = owner
                        && self.owners[owner].spec.kind == Kind::StatefulSet
                    {
                        // The same name, once the old pod is gone.
                        let name = uid.split('#').next().unwrap_or_default().to_owned();
                        self.create(owner, 0, name, now);
                    }
                }
                Due::Create {
                    owner,
                    replica_set,
                    name,
                } => self.create(owner, replica_set, name, now),
                Due::Ready { uid } => {
                    if let Some(pod) = self.view.pods.iter_mut().find(|p| p.uid == uid) {
                        let pod = Arc::make_mut(pod);
                        pod.ready = !pod.terminating;
                        pod.phase = PodPhase::Running;
                        if pod.ready {
                            pod.ready_changed = Some(at(now));
                        }
                    }
                }
                Due::Back { node } => {
                    let left = self
                        .view
                        .pods
                        .iter()
                        .filter(|p| p.node_name.as_deref() == Some(node.as_str()))
                        .count();
                    assert_eq!(
                        left, 0,
                        "the executor of {node} restarted with {left} pods on it"
                    );
                    if let Some(n) = self.view.nodes.iter_mut().find(|n| n.name == node) {
                        n.executor_id = Some(NEW.to_owned());
                        n.kamikaze = None;
                    }
                    if let Some(t) = self.timelines.get_mut(&node) {
                        t.back = Some(now);
                    }
                }
            }
        }
        happened
    }

    /// Binds every pending pod, oldest first, to the node kube-scheduler's default plugins would
    /// score highest; whether it bound any.
    fn schedule(&mut self, now: f64) -> bool {
        let pending: Vec<usize> = (0..self.view.pods.len())
            .filter(|&i| self.view.pods[i].node_name.is_none())
            .collect();
        if pending.is_empty() {
            return false;
        }
        // What the bound pods use of each node, worked out once and kept up to date as pods are
        // bound.
        let mut used: BTreeMap<String, NodeUse> = BTreeMap::new();
        for pod in &self.view.pods {
            if let Some(node) = pod.node_name.as_deref()
                && let Some(p) = self.pods.get(&pod.uid)
            {
                used.entry(node.to_owned())
                    .or_default()
                    .add(p.owner, p.requests);
            }
        }
        let mut bound = false;
        for i in pending {
            let uid = self.view.pods[i].uid.clone();
            let Some(p) = self.pods.get(&uid) else {
                continue;
            };
            let Some(owner) = p.owner else {
                continue;
            };
            let (requests, never_ready) = (p.requests, p.never_ready);
            let Some((node, elsewhere)) = self.pick(owner, requests, p.pin.as_deref(), &uid, &used)
            else {
                continue;
            };
            if self.upgrading {
                self.run.replacements += 1;
                if self.to_drain(&node) {
                    self.run.landed_to_drain += 1;
                    self.run.landed_to_drain_forced += usize::from(!elsewhere);
                }
            }
            used.entry(node.clone())
                .or_default()
                .add(Some(owner), requests);
            Arc::make_mut(&mut self.view.pods[i]).node_name = Some(node.into());
            bound = true;
            if never_ready {
                let pod = Arc::make_mut(&mut self.view.pods[i]);
                pod.phase = PodPhase::Running;
                continue;
            }
            let delay = self.owners[owner]
                .spec
                .ready_delay(self.cfg.pod_ready_delay)
                .as_secs_f64();
            self.due.push((
                now + delay + self.cfg.ready_after.as_secs_f64(),
                Due::Ready { uid },
            ));
        }
        bound
    }

    /// A node that k8sm has still to drain: not on the new executor, and not left to an operator.
    fn to_drain(&self, name: &str) -> bool {
        !self.unfinishable.contains(name)
            && self
                .view
                .nodes
                .iter()
                .any(|n| n.name == name && n.executor_id.as_deref() != Some(NEW))
    }

    /// kube-scheduler's choice, in short: among schedulable Ready nodes with room (the pod's own
    /// node only, when it is pinned), the highest of least-allocated (1) + balanced allocation
    /// (1) + preferred node affinity (2) + taint toleration (3: the k8sm mark's
    /// PreferNoSchedule taint) + topology spread over the node's pods of the same owner
    /// (2), each scored 0–100; ties by a hash of the pod and node names (the scheduler picks one of
    /// the best at random). Also says whether a node that is not to drain had room for the pod.
    fn pick(
        &self,
        owner: usize,
        requests: Requests,
        pin: Option<&str>,
        uid: &str,
        used: &BTreeMap<String, NodeUse>,
    ) -> Option<(String, bool)> {
        let preferred: BTreeSet<String> = self.owners[owner]
            .spec
            .preferred_nodes
            .iter()
            .map(|&i| k8sm_testcluster::node_name(i))
            .collect();
        let empty = NodeUse::default();
        let fits: Vec<(&str, Requests, u32, bool)> = self
            .view
            .nodes
            .iter()
            .filter(|n| !n.unschedulable && n.ready && pin.is_none_or(|p| p == n.name))
            .map(|n| {
                let u = used.get(&n.name).unwrap_or(&empty);
                let same = u.owners.get(&owner).copied().unwrap_or(0);
                (n.name.as_str(), u.requests, same, n.has_k8sm_taint)
            })
            .filter(|(_, (cpu, memory), _, _)| {
                cpu + requests.0 <= self.room.0 && memory + requests.1 <= self.room.1
            })
            .collect();
        let elsewhere = fits.iter().any(|f| !self.to_drain(f.0));
        let fits: Vec<_> = if self.cfg.no_schedule_to_drain && elsewhere {
            fits.into_iter().filter(|f| !self.to_drain(f.0)).collect()
        } else {
            fits
        };
        let most_same = fits.iter().map(|f| f.2).max().unwrap_or(0);
        let any_tainted = fits.iter().any(|f| f.3);
        let score = |&(name, (cpu, memory), same, tainted): &(&str, Requests, u32, bool)| {
            let cpu = (cpu + requests.0) as f64 / self.room.0 as f64;
            let memory = (memory + requests.1) as f64 / self.room.1 as f64;
            let least = ((1.0 - cpu) + (1.0 - memory)) * 50.0;
            let balanced = (1.0 - (cpu - memory).abs() / 2.0) * 100.0;
            let affinity = if preferred.contains(name) { 200.0 } else { 0.0 };
            let taint = if any_tainted && tainted { 0.0 } else { 300.0 };
            let spread = if most_same == 0 {
                200.0
            } else {
                200.0 * f64::from(most_same - same) / f64::from(most_same)
            };
            least + balanced + affinity + taint + spread
        };
        fits.iter()
            .map(|f| (score(f), tie(self.cfg.tie_seed, uid, f.0), f.0))
            .max_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map(|(_, _, name)| (name.to_owned(), elsewhere))
    }

    /// The plan's evictions, deletions and kamikazes, as the cluster answers them.
    fn execute(&mut self, plan: &k8sm_planner::Plan, now: f64) {
        let grace = f64::from(self.fleet.grace_period_s);
        for action in &plan.actions {
            match &action.kind {
                ActionKind::Evict { pod, .. } | ActionKind::DeletePod { pod, .. } => {
                    if matches!(action.kind, ActionKind::Evict { .. }) {
                        self.run.evictions += 1;
                    } else {
                        self.run.deletions += 1;
                    }
                    let uid: Arc<str> = pod.uid().into();
                    let gone = now + grace + self.cfg.gone_after.as_secs_f64();
                    // The pod as it stands before the pass's actions apply.
                    let seen = self.view.pods.iter().find(|p| p.uid == uid).cloned();
                    if let Some(node) = seen.as_ref().and_then(|p| p.node_name.as_deref())
                        && let Some(t) = self.timelines.get_mut(node)
                    {
                        t.evicted += 1;
                    }
                    let terminating = seen.as_ref().is_some_and(|p| p.terminating);
                    let Some(model_pod) = self.pods.get(&uid).cloned() else {
                        continue;
                    };
                    if let Some(owner) = model_pod.owner {
                        *self
                            .run
                            .evictions_by_owner
                            .entry(self.owners[owner].spec.name.clone())
                            .or_default() += 1;
                        if seen.as_ref().is_some_and(|p| p.ready && !p.terminating) {
                            self.owners[owner].lost_ready = true;
                        }
                        // A ReplicaSet replaces a terminating pod at once (if it had not yet); a
                        // StatefulSet once it is gone.
                        if self.owners[owner].spec.kind == Kind::Deployment
                            && self.owners[owner].rollout.is_none()
                            && !terminating
                        {
                            let name = self.fresh_name(owner);
                            let replica_set = model_pod.replica_set;
                            self.due.push((
                                now,
                                Due::Create {
                                    owner,
                                    replica_set,
                                    name,
                                },
                            ));
                        }
                    }
                    if !model_pod.stays {
                        self.due.push((gone, Due::Gone { uid }));
                    }
                }
                ActionKind::Admit { node, .. } => {
                    if let Some(t) = self.timelines.get_mut(node.as_str()) {
                        t.admitted.get_or_insert(now);
                    }
                }
                ActionKind::Stall { .. } => self.run.stalls += 1,
                ActionKind::Kamikaze { node, .. } => {
                    if let Some(t) = self.timelines.get_mut(node.as_str()) {
                        t.kamikaze = Some(now);
                    }
                    let back = now + self.cfg.restart_delay.as_secs_f64();
                    self.due.push((back, Due::Back { node: node.clone() }));
                }
                _ => {}
            }
        }
    }

    /// The rolling Deployment's new template, as the bench changes it just before the tool starts:
    /// its controller replaces pods from now on.
    fn start_rollouts(&mut self) {
        for owner in 0..self.owners.len() {
            let o = &mut self.owners[owner];
            if !o.spec.rolling || o.references.len() < 2 {
                continue;
            }
            o.rollout = Some(Rollout::start(o.spec.replicas));
            let name = o.spec.name.clone();
            self.set_replacing(&name, true, false);
        }
    }

    /// The rolling Deployment's controllers: the Deployment's sizes its ReplicaSets, and each
    /// ReplicaSet creates the pods it lacks and deletes those above its size (not Ready ones
    /// first, then the ones Ready most recently), as they would at `now`; whether anything
    /// changed.
    fn sync_rollouts(&mut self, now: f64) -> bool {
        let mut changed = false;
        for owner in 0..self.owners.len() {
            let Some(mut rollout) = self.owners[owner].rollout else {
                continue;
            };
            // Each ReplicaSet's active pods (not terminating), and how many are available.
            let mut active: [Vec<(bool, f64, Arc<str>)>; 2] = Default::default();
            for pod in &self.view.pods {
                let Some(p) = self.pods.get(&pod.uid) else {
                    continue;
                };
                if p.owner != Some(owner) || pod.terminating || p.replica_set > 1 {
                    continue;
                }
                let ready_since = pod.ready_changed.map_or(f64::NEG_INFINITY, seconds);
                active[p.replica_set].push((pod.ready, ready_since, pod.uid.clone()));
            }
            let available = |pods: &[(bool, f64, Arc<str>)]| {
                u32::try_from(pods.iter().filter(|p| p.0).count()).unwrap_or(u32::MAX)
            };
            let desired = self.owners[owner].spec.replicas;
            let resized = rollout.settle(desired, available(&active[0]), available(&active[1]));
            let replacing = rollout.progress(now, resized, available(&active[1]));
            if replacing != rollout.replacing {
                rollout.replacing = replacing;
                let name = self.owners[owner].spec.name.clone();
                self.set_replacing(&name, replacing, rollout.old == 0);
                changed = true;
            }
            self.owners[owner].rollout = Some(rollout);
            for (replica_set, size) in [(0, rollout.old), (1, rollout.new)] {
                let pods = &mut active[replica_set];
                let have = u32::try_from(pods.len()).unwrap_or(u32::MAX);
                for _ in have..size {
                    let name = self.fresh_name(owner);
                    self.create(owner, replica_set, name, now);
                    changed = true;
                }
                if have > size {
                    // kube-controller-manager's order: not Ready first, then Ready for the
                    // shortest time.
                    pods.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
                    let doomed: Vec<Arc<str>> = pods
                        .iter()
                        .take((have - size) as usize)
                        .map(|p| p.2.clone())
                        .collect();
                    for uid in doomed {
                        self.delete_for_rollout(uid, now);
                        changed = true;
                    }
                }
            }
        }
        changed
    }

    /// When the rollouts under way pass their progress deadline, if nothing progresses before.
    fn rollout_deadlines(&self) -> impl Iterator<Item = f64> + '_ {
        self.owners
            .iter()
            .filter_map(|o| o.rollout.filter(|r| r.replacing))
            .map(|r| r.progressed_at + rollout::PROGRESS_DEADLINE)
    }

    /// A pod its own ReplicaSet deletes: terminating at once, gone after its grace period.
    fn delete_for_rollout(&mut self, uid: Arc<str>, now: f64) {
        let mut node = None;
        if let Some(pod) = self.view.pods.iter_mut().find(|p| p.uid == uid) {
            let pod = Arc::make_mut(pod);
            pod.terminating = true;
            pod.deletion = Some(at(now));
            node = pod.node_name.clone();
        }
        self.run.rollout_deletions += 1;
        if node.is_some_and(|n| self.to_drain(&n)) {
            self.run.rollout_deletions_to_drain += 1;
        }
        let gone = now + f64::from(self.fleet.grace_period_s) + self.cfg.gone_after.as_secs_f64();
        self.due.push((gone, Due::Gone { uid }));
    }

    /// Whether the Deployment `name`'s own controller replaces pods (its rollout under way and
    /// within its progress deadline), as the view reads it from `status.replicas`,
    /// `status.updatedReplicas` and its Progressing condition, and whether its rollout is
    /// complete.
    fn set_replacing(&mut self, name: &str, replacing: bool, complete: bool) {
        for owner in &mut self.view.owners {
            if owner.kind == k8sm_planner::OwnerKind::Deployment && owner.name == name {
                let owner = Arc::make_mut(owner);
                owner.replacing = replacing;
                if let Some(rollout) = owner.rollout.as_mut() {
                    rollout.complete = complete;
                }
            }
        }
    }

    /// Each owner's Ready pods (not terminating), by owner.
    fn count_ready(&self, ready: &mut [u32]) {
        for pod in &self.view.pods {
            if pod.ready
                && !pod.terminating
                && let Some(ModelPod {
                    owner: Some(owner), ..
                }) = self.pods.get(&pod.uid)
            {
                ready[*owner] += 1;
            }
        }
    }

    /// Each owner's lowest count of Ready pods, after the tick's actions, whether the tick's
    /// evictions took one below its bound, and when it had all its replicas Ready again.
    fn watch_owners(&mut self, now: f64) {
        let mut ready = vec![0u32; self.owners.len()];
        self.count_ready(&mut ready);
        for (owner, ready) in self.owners.iter_mut().zip(ready) {
            owner.lowest_ready = owner.lowest_ready.min(ready);
            if ready < owner.spec.replicas {
                owner.short = true;
            } else if std::mem::take(&mut owner.short) {
                owner.restored_at = Some(now);
            }
            if std::mem::take(&mut owner.lost_ready) && ready < owner.bound {
                owner.taken_below = true;
            }
        }
    }

    /// When each node was first seen cordoned.
    fn watch_nodes(&mut self, now: f64) {
        for node in &self.view.nodes {
            if node.unschedulable
                && let Some(t) = self.timelines.get_mut(&node.name)
            {
                t.cordoned.get_or_insert(now);
            }
        }
    }

    /// Every node upgraded but those only an operator can clear.
    fn finished(&self) -> bool {
        self.view
            .nodes
            .iter()
            .all(|n| n.executor_id.as_deref() == Some(NEW) || self.unfinishable.contains(&n.name))
    }

    /// The run, with each node's state at the end and the owners k8sm took below their bound.
    fn finish(self) -> ModelRun {
        let mut run = self.run;
        let mut timelines = self.timelines;
        for node in &self.view.nodes {
            if let Some(t) = timelines.get_mut(&node.name) {
                t.cordoned_at_end =
                    node.unschedulable || node.draining_since.is_some() || node.cordoned_by_k8sm;
            }
        }
        run.nodes = timelines.into_values().collect();
        run.owners_below = self
            .owners
            .iter()
            .filter(|o| (o.initial_ready >= o.bound && o.lowest_ready < o.bound) || o.taken_below)
            .map(|o| o.spec.name.clone())
            .collect();
        run.unfinishable = self.unfinishable.into_iter().collect();
        run.owner_restored = self
            .owners
            .iter()
            .filter_map(|o| Some((o.spec.name.clone(), o.restored_at?)))
            .collect();
        run
    }
}

/// A deterministic stand-in for the scheduler's random pick among equal scores: FNV-1a of the pod's
/// and the node's names, spelled out so that the figures the model gave stay what it gives: another
/// hash picks otherwise among equals, and moves fleets' makespans (bench/results/README.md).
/// `seed` 0 is that hash; another seed starts it elsewhere.
fn tie(seed: u64, pod: &str, node: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in pod.bytes().chain(node.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// One line of `k8sm-bench --model`: a seed's fleet, its lower bound and the model's upgrade of it;
/// for a messy fleet, a second line with the nodes left to an operator and what k8sm did to them.
pub fn describe(seed: u64, bound: &LowerBound, run: &ModelRun) -> String {
    let (limit, owner) = bound
        .terms
        .as_ref()
        .map_or(("", ""), |t| (t.limit.as_str(), t.critical_owner.as_str()));
    let owner_moves = run
        .evictions_by_owner
        .get(owner)
        .map_or_else(String::new, |n| {
            format!(
                ", the owner term's {owner} evicted {n}× for {} replicas",
                bound.critical_replicas
            )
        });
    // A messy fleet's owners include some that cannot move, and crash loops whose replacements
    // wait: the bound of the tidy fleet is only a reference.
    let of = if run.unfinishable.is_empty() {
        ""
    } else {
        " of the tidy fleet"
    };
    let line = match run.makespan {
        Some(makespan) => format!(
            "seed {seed}: makespan {makespan:.1} s, bound{of} {:.1} s ({limit}): {:.2}×; {} evictions{owner_moves}; \
             owners below their bound: {}; {:.3} disruptions/pod, floor {:.3} ({} of {} replacements landed on nodes \
             to drain, {} with no room elsewhere)",
            bound.seconds,
            makespan / bound.seconds,
            run.evictions,
            run.owners_below.len(),
            run.disruptions_per_pod(),
            run.disruptions_floor(),
            run.landed_to_drain,
            run.replacements,
            run.landed_to_drain_forced,
        ),
        None => format!(
            "seed {seed}: not upgraded within the limit; bound {:.1} s ({limit})",
            bound.seconds
        ),
    };
    if run.unfinishable.is_empty() {
        return line;
    }
    let left = run
        .nodes
        .iter()
        .filter(|n| n.back.is_none() && !run.unfinishable.contains(&n.name))
        .count();
    format!(
        "{line}\n  messy: {} nodes only an operator can clear ({}), {} of them left cordoned, {} evictions on them; \
         {left} other nodes not upgraded; {} slots given up",
        run.unfinishable.len(),
        run.unfinishable.join(", "),
        run.unfinishable_left_cordoned(),
        run.evictions_on_unfinishable(),
        run.stalls,
    )
}

#[cfg(test)]
mod messy_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::concurrency_bound;
    use crate::workload::{Realism, Shape};

    /// A scenario of the bench, as `--scenario` presets it: nodes, pods, slots, readiness delays.
    struct Preset {
        nodes: usize,
        pods: usize,
        slots: u32,
        ready_delay: (u64, u64),
    }

    const OWNERS_PACE: Preset = Preset {
        nodes: 20,
        pods: 600,
        slots: 4,
        ready_delay: (2, 20),
    };
    const RESTARTS_PACE: Preset = Preset {
        nodes: 30,
        pods: 90,
        slots: 2,
        ready_delay: (1, 3),
    };

    fn run(preset: &Preset, seed: u64) -> (LowerBound, ModelRun) {
        run_with(preset, seed, false)
    }

    fn run_with(preset: &Preset, seed: u64, no_room: bool) -> (LowerBound, ModelRun) {
        let realism = Realism {
            seed,
            ready_delay_min: Duration::from_secs(preset.ready_delay.0),
            ready_delay_max: Duration::from_secs(preset.ready_delay.1),
            ..Realism::default()
        };
        let fleet = Workload::generate(preset.nodes, preset.pods, Shape::Realistic, &realism);
        let restart = Duration::from_secs(2);
        let bound = concurrency_bound(&fleet.bound_input(
            preset.nodes,
            preset.slots as usize,
            90,
            Duration::from_secs(2),
            restart,
            None,
        ));
        let cfg = ModelConfig {
            nodes: preset.nodes,
            max_concurrent_nodes: MaxConcurrentNodes::count(preset.slots).unwrap(),
            threshold: 90,
            restart_delay: restart,
            pod_ready_delay: Duration::from_secs(2),
            tick: Duration::from_millis(250),
            limit: Duration::from_secs(3600),
            event_driven: false,
            no_schedule_to_drain: false,
            one_node_first: false,
            no_room,
            pace_by_room: !no_room,
            gone_after: GONE_AFTER,
            ready_after: READY_AFTER,
            tie_seed: 0,
        };
        (bound, simulate(&fleet, &cfg))
    }

    /// The model's owners are counted by the model itself (Ready pods of each owner after every
    /// tick), and the bound from the fleet alone: neither reads the planner's account. No tool
    /// beats the bound, the model included (its latencies are at least zero), so a makespan
    /// under it would show the bound or the model wrong.
    #[test]
    fn every_fleet_is_upgraded_with_no_owner_below_its_bound_and_no_sooner_than_the_bound() {
        for (preset, seeds) in [(&OWNERS_PACE, 1..=3), (&RESTARTS_PACE, 1..=3)] {
            for seed in seeds {
                let (bound, run) = run(preset, seed);
                let line = describe(seed, &bound, &run);
                let makespan = run.makespan.unwrap_or_else(|| panic!("{line}"));
                assert_eq!(run.owners_below, Vec::<String>::new(), "{line}");
                assert!(makespan >= bound.seconds, "{line}");
                // Every node went through admission, kamikaze and back, in that order.
                for node in &run.nodes {
                    let steps = [node.admitted, node.kamikaze, node.back];
                    assert!(steps.iter().all(Option::is_some), "{node:?}");
                    assert!(steps.windows(2).all(|w| w[0] <= w[1]), "{node:?}");
                }
                // Every pod of an owner moved at least once (every node is upgraded).
                let fleet_pods: usize = run.evictions_by_owner.values().sum();
                assert!(
                    fleet_pods >= preset.pods - preset.nodes.div_ceil(20),
                    "{line}"
                );
            }
        }
    }

    /// The landings account for every second move: in a tidy fleet each owned pod is evicted once,
    /// and once more for every replacement that landed on a node still to drain (all of them
    /// are drained by the end). The counts come from where the model's scheduler bound each
    /// pod, not from the planner.
    #[test]
    fn every_second_move_is_a_replacement_that_landed_on_a_node_still_to_drain() {
        for no_room in [true, false] {
            for seed in 1..=3 {
                let (bound, run) = run_with(&OWNERS_PACE, seed, no_room);
                let line = describe(seed, &bound, &run);
                // Each pod on a node to drain leaves it once: evicted, or deleted by the rolling
                // Deployment's own rollout.
                assert_eq!(
                    run.evictions + run.rollout_deletions_to_drain,
                    run.initial_owned_pods + run.landed_to_drain,
                    "{line}"
                );
                assert!(run.landed_to_drain_forced <= run.landed_to_drain, "{line}");
                assert!(
                    run.disruptions_per_pod() >= run.disruptions_floor(),
                    "{line}"
                );
            }
        }
    }

    /// Admission paced by room halves the second moves at owners pace
    /// (docs/decisions/0002-land-once.md), and keeps every owner at its bound; the planner not
    /// told the nodes' allocatable fills every slot at once.
    #[test]
    fn admission_paced_by_room_lands_replacements_once() {
        for seed in 1..=3 {
            let (_, today) = run_with(&OWNERS_PACE, seed, true);
            let (bound, paced) = run(&OWNERS_PACE, seed);
            let line = describe(seed, &bound, &paced);
            // At most half the second moves (the rolling Deployment's own deletions count on
            // both sides).
            assert!(
                paced.disruptions_per_pod() - 1.0 <= (today.disruptions_per_pod() - 1.0) / 2.0,
                "{line}"
            );
            assert!(
                today.disruptions_per_pod() > 1.12,
                "{}",
                describe(seed, &bound, &today)
            );
            assert_eq!(paced.owners_below, Vec::<String>::new(), "{line}");
        }
    }

    #[test]
    fn the_same_fleet_gives_the_same_upgrade() {
        let (_, a) = run(&OWNERS_PACE, 1);
        let (_, b) = run(&OWNERS_PACE, 1);
        assert_eq!(a.makespan, b.makespan);
        assert_eq!(a.nodes, b.nodes);
        assert_eq!(a.evictions_by_owner, b.evictions_by_owner);
    }
}
