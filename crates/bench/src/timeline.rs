//! What happened during one run, rebuilt from the pod and node watch events in the order they
//! arrived: ready pods per owner over time, the SLA invariant checked at every change, disruptions,
//! reaction latencies, node upgrades and where each upgraded node's time went (drain, kamikaze,
//! restart).
//!
//! Pure: the recorder feeds it observations stamped with seconds since the recorder started, so the
//! whole logic is tested with synthetic events.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use k8sm_planner::Resources;

use crate::landing::{Landed, Landings, NodeRoom};
use crate::stats::percentile;

/// One observation of a pod of the benchmark's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodObs {
    pub uid: String,
    /// The `app` label: the owner's name, or the unmanaged pod's own name.
    pub app: String,
    pub node: Option<String>,
    /// The Ready condition is True.
    pub ready: bool,
    /// `deletionTimestamp` is set.
    pub terminating: bool,
    /// Carries the `DisruptionTarget` condition that the Eviction API sets before it deletes a
    /// pod: this pod is going because someone evicted it, not because it was deleted directly
    /// or failed.
    pub evicted: bool,
    /// What kube-scheduler reserves for it on its node.
    pub requests: Resources,
}

/// One observation of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeObs {
    pub name: String,
    /// Carries k8sm's incompatible-executor label.
    pub marked: bool,
    /// Cordoned or admitted into a drain slot.
    pub draining: bool,
    /// Runs the new executor and carries no upgrade state (see `k8sm_e2e::scenario::is_upgraded`).
    pub upgraded: bool,
    /// Carries the kamikaze annotation: k8sm and the baselines' operator both tell the executor to
    /// restart with it.
    pub kamikaze: bool,
    /// Reports the new executor's ID, upgrade state or not.
    pub executor_new: bool,
    /// `status.allocatable`, where reported.
    pub allocatable: Option<Resources>,
    /// Not cordoned, and no taint keeps the fleet's pods off.
    pub schedulable: bool,
}

/// What a run left on a messy fleet when it ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leftovers {
    pub finishable: usize,
    pub finishable_upgraded: usize,
    /// Nodes only an operator can clear ([`Timeline::set_unfinishable`]), and those upgraded all
    /// the same (a tool that restarted an executor under a pod stuck terminating).
    pub unfinishable: usize,
    pub unfinishable_upgraded: usize,
    /// Nodes cordoned (or in a drain slot) and not upgraded.
    pub stranded_cordons: usize,
    /// Pods disrupted on nodes that were not upgraded, whoever removed them (the tool, or a
    /// rollout's own controller replacing its pods): lost for nothing.
    pub disruptions_on_unfinished: u64,
}

/// Where the upgraded nodes' time went, by the benchmark's watches: per phase, the median and p90
/// over the nodes.
///
/// The pod and node watches stamp their events apart, so a phase between a pod event and a node
/// event (`drain`, `to_kamikaze`) can come out a few milliseconds off, even below zero.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodePhases {
    /// Nodes upgraded while armed with every phase time: the ones summarised.
    pub nodes: usize,
    /// First seen draining → no pod of a tracked app bound to it any more.
    pub drain: PhaseQuantiles,
    /// Emptied → kamikaze annotation seen.
    pub to_kamikaze: PhaseQuantiles,
    /// Kamikaze → the new executor's ID reported.
    pub restart: PhaseQuantiles,
    /// New executor → upgraded (no upgrade state left, uncordoned).
    pub to_done: PhaseQuantiles,
    /// First seen draining → upgraded.
    pub whole: PhaseQuantiles,
    /// Drain slots C the idle time is counted against.
    pub slots: usize,
    /// `∫ max(0, C − nodes in progress) dt` from the first node started to the last: slots left
    /// free while nodes still waited to start. In progress: started and not upgraded.
    pub idle_slot_s: f64,
}

impl NodePhases {
    /// The phases' names, in the order of [`NodePhases::phases`].
    pub const NAMES: [&str; 5] = ["drain", "to kamikaze", "restart", "to done", "whole"];

    pub fn phases(&self) -> [PhaseQuantiles; 5] {
        [
            self.drain,
            self.to_kamikaze,
            self.restart,
            self.to_done,
            self.whole,
        ]
    }
}

/// Median and p90 (nearest rank) of one phase, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseQuantiles {
    pub p50_s: f64,
    pub p90_s: f64,
}

impl PhaseQuantiles {
    fn of(samples: &[f64]) -> Option<Self> {
        Some(Self {
            p50_s: percentile(samples, 50.0)?,
            p90_s: percentile(samples, 90.0)?,
        })
    }
}

/// Per owner, what the run did to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwnerOutcome {
    pub name: String,
    pub kind: String,
    pub desired: u32,
    /// The invariant's bound `min(ceil(t·d), d−1)`.
    pub floor: u32,
    pub min_ready: u32,
    /// Times the owner went below its floor.
    pub violations: u32,
    pub seconds_below: f64,
    pub disruptions: u32,
    /// Of the disruptions, pods that went without the Eviction API (deleted directly, or no longer
    /// Ready).
    #[serde(default)]
    pub outside_disruptions: u32,
    /// Of the violations, descents that began with such a pod: caused by whoever deleted it, not
    /// by an eviction.
    #[serde(default)]
    pub outside_violations: u32,
    /// Unavailable replica-seconds: `∫ max(0, desired − ready) dt` from arming to finishing.
    #[serde(default)]
    pub unavailable_replica_s: f64,
    /// Seconds from the upgrade's start until it last had all its replicas Ready again after
    /// losing one: its own makespan (none if it never lost one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_s: Option<f64>,
}

#[derive(Clone, Debug)]
struct Owner {
    kind: String,
    desired: u32,
    needed: u32,
    floor: u32,
    /// Ready and not terminating.
    ready: u32,
    /// Terminating, not yet gone.
    going: u32,
    min_ready: u32,
    violations: u32,
    below_since: Option<f64>,
    seconds_below: f64,
    disruptions: u32,
    outside_disruptions: u32,
    outside_violations: u32,
    /// (seconds, ready) at every change while armed.
    series: Vec<(f64, u32)>,
    /// When a replacement became Ready while the owner could not lose another pod and still had
    /// pods to move.
    waiting_since: Option<f64>,
    /// `∫ max(0, desired − ready) dt` up to `integrated_to`.
    unavailable_replica_s: f64,
    integrated_to: f64,
    /// Broken before the run (crash-looping): no Ready pod to keep, so no bound.
    waived: bool,
    /// When it last had all its replicas Ready again after fewer, while armed.
    restored_at: Option<f64>,
}

impl Owner {
    /// Adds the replicas missing since the last change, up to `t`.
    fn integrate(&mut self, t: f64) {
        let missing = f64::from(self.desired.saturating_sub(self.ready));
        self.unavailable_replica_s += missing * (t - self.integrated_to).max(0.0);
        self.integrated_to = t;
    }
}

#[derive(Clone, Debug)]
struct Pod {
    app: String,
    node: Option<String>,
    available: bool,
    terminating: bool,
    /// Existed when the timeline was armed (not a replacement).
    initial: bool,
    evicted: bool,
}

#[derive(Clone, Debug, Default)]
struct Node {
    draining: bool,
    upgraded: bool,
    /// What it has room for, as the scheduler weighs it.
    room: NodeRoom,
    upgraded_at: Option<f64>,
    /// The phase times of [`NodePhases`], each the first while armed.
    started_at: Option<f64>,
    emptied_at: Option<f64>,
    kamikaze_at: Option<f64>,
    back_at: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct Timeline {
    threshold: u8,
    owners: BTreeMap<String, Owner>,
    unmanaged: BTreeSet<String>,
    pods: HashMap<String, Pod>,
    nodes: BTreeMap<String, Node>,
    armed_at: Option<f64>,
    finished: bool,
    started_at: Option<f64>,
    initial_pods: usize,
    disruptions: u64,
    outside_disruptions: u64,
    latencies: Vec<f64>,
    /// Watch relists after the first list, of pods and of nodes: each replaces the whole set (see
    /// [`Timeline::pods_relisted`]).
    relists: u64,
    /// Nodes that no tool can finish without an operator (a messy fleet's truth): left out of the
    /// makespan.
    unfinishable: BTreeSet<String>,
    /// Disruptions while armed, by the node of the pod.
    disruptions_by_node: BTreeMap<String, u64>,
    /// Pods in `pods` bound to each node (terminating ones included), kept apart from `nodes`
    /// because a pod may be seen before its node.
    pods_on: HashMap<String, usize>,
    /// Where the replacements landed, and what each node had room for (every pod counted, the
    /// DaemonSet's too).
    landings: Landings,
}

impl Timeline {
    /// A timeline of the owners `(name, kind, desired)` and unmanaged pods `unmanaged` (by `app`
    /// label). Pods of other apps (the DaemonSet) are ignored.
    pub fn new<'a>(
        threshold: u8,
        owners: impl IntoIterator<Item = (&'a str, &'a str, u32)>,
        unmanaged: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let owners = owners
            .into_iter()
            .map(|(name, kind, desired)| {
                let owner = Owner {
                    kind: kind.to_owned(),
                    desired,
                    needed: k8sm_planner::needed(threshold, desired),
                    // The oracle is computed apart from the planner under test.
                    floor: k8sm_testcluster::sla::bound(desired, u32::from(threshold)),
                    ready: 0,
                    going: 0,
                    min_ready: 0,
                    violations: 0,
                    below_since: None,
                    seconds_below: 0.0,
                    disruptions: 0,
                    outside_disruptions: 0,
                    outside_violations: 0,
                    series: Vec::new(),
                    waiting_since: None,
                    unavailable_replica_s: 0.0,
                    integrated_to: 0.0,
                    waived: false,
                    restored_at: None,
                };
                (name.to_owned(), owner)
            })
            .collect();
        Self {
            threshold,
            owners,
            unmanaged: unmanaged.into_iter().map(str::to_owned).collect(),
            pods: HashMap::new(),
            nodes: BTreeMap::new(),
            armed_at: None,
            finished: false,
            started_at: None,
            initial_pods: 0,
            disruptions: 0,
            outside_disruptions: 0,
            latencies: Vec::new(),
            relists: 0,
            unfinishable: BTreeSet::new(),
            disruptions_by_node: BTreeMap::new(),
            pods_on: HashMap::new(),
            landings: Landings::default(),
        }
    }

    /// `apps` are broken before the run (crash-looping): they have no Ready pod to keep, so no
    /// bound to hold, and they count as whole without one.
    pub fn waive(&mut self, apps: impl IntoIterator<Item = impl AsRef<str>>) {
        for app in apps {
            if let Some(owner) = self.owners.get_mut(app.as_ref()) {
                owner.waived = true;
                owner.floor = 0;
                owner.needed = 0;
            }
        }
    }

    /// `nodes` cannot finish without an operator: the makespan is that of the others.
    pub fn set_unfinishable(&mut self, nodes: impl IntoIterator<Item = String>) {
        self.unfinishable = nodes.into_iter().collect();
    }

    pub fn threshold(&self) -> u8 {
        self.threshold
    }

    fn armed(&self) -> bool {
        self.armed_at.is_some() && !self.finished
    }

    /// From now on every change counts: the pods seen so far are the initial ones.
    pub fn arm(&mut self, t: f64) {
        self.armed_at = Some(t);
        self.initial_pods = self.pods.len();
        for pod in self.pods.values_mut() {
            pod.initial = true;
        }
        // Nodes already draining are seen draining now.
        let draining: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.draining)
            .map(|(name, _)| name.clone())
            .collect();
        for name in draining {
            self.started(t, &name);
        }
        for owner in self.owners.values_mut() {
            owner.min_ready = owner.ready;
            owner.integrated_to = t;
            owner.series.push((t, owner.ready));
            if owner.ready < owner.floor {
                owner.violations += 1;
                owner.below_since = Some(t);
            }
        }
    }

    /// The upgrade starts now (for tools that do not mark nodes; k8sm's start is its first mark).
    pub fn start(&mut self, t: f64) {
        self.started_at.get_or_insert(t);
    }

    /// Stops counting: open intervals below the floor are closed at `t`.
    pub fn finish(&mut self, t: f64) {
        let armed = self.armed();
        for owner in self.owners.values_mut() {
            if armed {
                owner.integrate(t);
            }
            if let Some(since) = owner.below_since.take() {
                owner.seconds_below += t - since;
            }
            owner.series.push((t, owner.ready));
        }
        self.finished = true;
    }

    pub fn pod_applied(&mut self, t: f64, obs: PodObs) {
        self.landings
            .pod_seen(&obs.uid, obs.node.as_deref(), obs.requests);
        if !self.owners.contains_key(&obs.app) && !self.unmanaged.contains(&obs.app) {
            return;
        }
        let available = obs.ready && !obs.terminating;
        // Pods first seen after arming are replacements.
        let initial = self.armed_at.is_none();
        let before = self.pods.get(&obs.uid).cloned();
        let was_terminating = before.as_ref().is_some_and(|p| p.terminating);
        let was_available = before.as_ref().is_some_and(|p| p.available);
        let became_ready =
            available && !was_available && !before.as_ref().is_some_and(|p| p.initial);
        if became_ready && self.armed() {
            self.replacement_ready(t, &obs.app);
        }
        let evicted = obs.evicted || before.as_ref().is_some_and(|p| p.evicted);
        if obs.terminating && !was_terminating && before.is_some() {
            self.disrupted(t, &obs.app, obs.node.as_deref(), evicted);
        }
        let lost_outside = was_available && !available && !evicted;
        // A re-applied pod on the same node is already counted there.
        let was_on = before.as_ref().and_then(|p| p.node.clone());
        let replacement = !before.as_ref().map_or(initial, |p| p.initial);
        if let (None, Some(node)) = (&was_on, &obs.node)
            && replacement
            && self.armed()
            && self.owners.contains_key(&obs.app)
        {
            let (nodes, unfinishable) = (&self.nodes, &self.unfinishable);
            let rooms = nodes.iter().map(|(name, n)| (name.as_str(), n.room));
            self.landings
                .replacement_bound(node, obs.requests, rooms, |name| {
                    to_drain(nodes, unfinishable, name)
                });
        }
        if was_on != obs.node {
            if let Some(node) = &obs.node {
                *self.pods_on.entry(node.clone()).or_default() += 1;
            }
            if let Some(node) = was_on {
                self.unbound(t, &node);
            }
        }
        self.pods.insert(
            obs.uid,
            Pod {
                app: obs.app.clone(),
                node: obs.node,
                available,
                terminating: obs.terminating,
                initial: before.map_or(initial, |p| p.initial),
                evicted,
            },
        );
        self.recount(t, &obs.app, lost_outside);
    }

    pub fn pod_deleted(&mut self, t: f64, uid: &str) {
        self.landings.pod_gone(uid);
        let Some(pod) = self.pods.remove(uid) else {
            return;
        };
        if !pod.terminating {
            self.disrupted(t, &pod.app, pod.node.as_deref(), pod.evicted);
        }
        if let Some(node) = &pod.node {
            self.unbound(t, node);
        }
        self.recount(t, &pod.app, pod.available && !pod.evicted);
    }

    pub fn node_applied(&mut self, t: f64, obs: NodeObs) {
        let armed = self.armed();
        if armed && obs.marked {
            self.started_at.get_or_insert(t);
        }
        if armed && obs.draining {
            self.started(t, &obs.name);
        }
        let node = self.nodes.entry(obs.name).or_default();
        node.room = NodeRoom {
            allocatable: obs.allocatable,
            schedulable: obs.schedulable,
        };
        if armed && obs.upgraded && !node.upgraded {
            node.upgraded_at = Some(t);
        }
        if armed && obs.kamikaze && node.started_at.is_some() {
            node.kamikaze_at.get_or_insert(t);
        }
        if armed && obs.executor_new && node.kamikaze_at.is_some() {
            node.back_at.get_or_insert(t);
        }
        node.upgraded = obs.upgraded;
        node.draining = obs.draining;
    }

    /// Node `name` is seen draining (while armed): it starts, and is empty at once if no tracked
    /// pod is on it.
    fn started(&mut self, t: f64, name: &str) {
        let empty = !self.pods_on.contains_key(name);
        let node = self.nodes.entry(name.to_owned()).or_default();
        if node.started_at.is_none() {
            node.started_at = Some(t);
            if empty {
                node.emptied_at = Some(t);
            }
        }
    }

    /// A tracked pod left node `name` (deleted, or bound elsewhere): the node's drain ends with its
    /// last one.
    fn unbound(&mut self, t: f64, name: &str) {
        let Some(count) = self.pods_on.get_mut(name) else {
            return;
        };
        *count -= 1;
        if *count > 0 {
            return;
        }
        self.pods_on.remove(name);
        let armed = self.armed();
        if let Some(node) = self.nodes.get_mut(name)
            && armed
            && node.started_at.is_some()
        {
            node.emptied_at.get_or_insert(t);
        }
    }

    pub fn node_deleted(&mut self, name: &str) {
        self.nodes.remove(name);
    }

    /// A relist of the pods ended at `t`: `listed` holds the UID of every pod it returned. A pod
    /// the timeline holds and the list lacks was deleted during the watch gap (its Delete event
    /// was never seen), and goes now: kept, it would count as Ready for ever. `first`: the
    /// recorder's initial list, not counted as a relist.
    pub fn pods_relisted(&mut self, t: f64, listed: &HashSet<String>, first: bool) {
        if !first {
            self.relists += 1;
        }
        let gone: Vec<String> = self
            .pods
            .keys()
            .filter(|uid| !listed.contains(*uid))
            .cloned()
            .collect();
        for uid in gone {
            self.pod_deleted(t, &uid);
        }
        self.landings.keep_pods(|uid| listed.contains(uid));
    }

    /// Like [`Timeline::pods_relisted`], for the nodes (by name).
    pub fn nodes_relisted(&mut self, listed: &HashSet<String>, first: bool) {
        if !first {
            self.relists += 1;
        }
        self.nodes.retain(|name, _| listed.contains(name));
    }

    /// Watch relists after the initial lists (a gap in a watch: its events in between are unknown).
    pub fn relists(&self) -> u64 {
        self.relists
    }

    fn replacement_ready(&mut self, t: f64, app: &str) {
        let Some(owner) = self.owners.get(app) else {
            return;
        };
        // Could the owner lose another pod just before this one became Ready (docs/design.md §5.3)?
        let could_evict =
            owner.ready > owner.needed || (owner.ready >= owner.desired && owner.going == 0);
        let waiting_pods = self.pods.values().any(|p| {
            p.app == app
                && !p.terminating
                && p.node
                    .as_ref()
                    .and_then(|n| self.nodes.get(n))
                    .is_some_and(|n| n.draining && !n.upgraded)
        });
        if !could_evict
            && waiting_pods
            && let Some(owner) = self.owners.get_mut(app)
        {
            owner.waiting_since.get_or_insert(t);
        }
    }

    /// A pod of `app` on `node` started going; `evicted`: through the Eviction API.
    fn disrupted(&mut self, t: f64, app: &str, node: Option<&str>, evicted: bool) {
        if !self.armed() {
            return;
        }
        self.disruptions += 1;
        if let Some(node) = node {
            *self.disruptions_by_node.entry(node.to_owned()).or_default() += 1;
        }
        self.outside_disruptions += u64::from(!evicted);
        if let Some(owner) = self.owners.get_mut(app) {
            owner.disruptions += 1;
            owner.outside_disruptions += u32::from(!evicted);
            if let Some(since) = owner.waiting_since.take() {
                self.latencies.push(t - since);
            }
        }
    }

    /// Counts `app`'s ready pods again after a change; `lost_outside`: the change is a pod that
    /// stopped being available without being evicted.
    fn recount(&mut self, t: f64, app: &str, lost_outside: bool) {
        let armed = self.armed();
        let Some(owner) = self.owners.get_mut(app) else {
            return;
        };
        let (mut ready, mut going) = (0, 0);
        for pod in self.pods.values().filter(|p| p.app == app) {
            ready += u32::from(pod.available);
            going += u32::from(pod.terminating);
        }
        let changed = ready != owner.ready;
        if armed && changed {
            owner.integrate(t);
        }
        let before = std::mem::replace(&mut owner.ready, ready);
        owner.going = going;
        if !armed || !changed {
            return;
        }
        if ready >= owner.desired && before < owner.desired {
            owner.restored_at = Some(t);
        }
        owner.series.push((t, ready));
        owner.min_ready = owner.min_ready.min(ready);
        match (ready < owner.floor, owner.below_since) {
            (true, None) => {
                owner.violations += 1;
                owner.outside_violations += u32::from(lost_outside);
                owner.below_since = Some(t);
            }
            (false, Some(since)) => {
                owner.seconds_below += t - since;
                owner.below_since = None;
            }
            _ => {}
        }
    }

    /// Pods (of owners and unmanaged) present when the timeline was armed.
    pub fn initial_pods(&self) -> usize {
        self.initial_pods
    }

    /// Ready pods of owners and unmanaged pods now.
    pub fn ready_pods(&self) -> usize {
        self.pods.values().filter(|p| p.available).count()
    }

    /// Every owner has all its replicas Ready (a waived one has none to have).
    pub fn owners_fully_ready(&self) -> bool {
        self.owners
            .values()
            .all(|o| o.waived || o.ready >= o.desired)
    }

    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Nodes upgraded since the timeline was armed.
    pub fn upgraded_nodes(&self) -> usize {
        self.nodes
            .values()
            .filter(|n| n.upgraded && n.upgraded_at.is_some())
            .count()
    }

    pub fn node_upgraded(&self, name: &str) -> bool {
        self.nodes.get(name).is_some_and(|n| n.upgraded)
    }

    /// Nodes that are neither marked-in-progress nor upgraded (for checks before a run).
    pub fn all_nodes_match(&self, upgraded: bool) -> bool {
        !self.nodes.is_empty() && self.nodes.values().all(|n| n.upgraded == upgraded)
    }

    /// From the first mark (or [`Timeline::start`]) to the last node upgraded, once every node was
    /// upgraded (but the unfinishable ones).
    pub fn makespan(&self) -> Option<(f64, f64)> {
        let start = self.started_at?;
        let mut end = start;
        for (name, node) in &self.nodes {
            if self.unfinishable.contains(name) {
                continue;
            }
            end = end.max(node.upgraded_at.filter(|_| node.upgraded)?);
        }
        Some((start, end))
    }

    /// Where the time of the nodes upgraded while armed went, over those with every phase time;
    /// `slots`: the nodes the tool upgrades at once (C), for the idle slot time. `None` without
    /// such a node.
    pub fn node_phases(&self, slots: usize) -> Option<NodePhases> {
        let mut phases: [Vec<f64>; 5] = Default::default();
        for node in self.nodes.values().filter(|n| n.upgraded) {
            let (Some(started), Some(emptied), Some(kamikaze), Some(back), Some(upgraded)) = (
                node.started_at,
                node.emptied_at,
                node.kamikaze_at,
                node.back_at,
                node.upgraded_at,
            ) else {
                continue;
            };
            let durations = [
                emptied - started,
                kamikaze - emptied,
                back - kamikaze,
                upgraded - back,
                upgraded - started,
            ];
            for (phase, d) in phases.iter_mut().zip(durations) {
                phase.push(d);
            }
        }
        let [drain, to_kamikaze, restart, to_done, whole] = phases;
        Some(NodePhases {
            nodes: whole.len(),
            drain: PhaseQuantiles::of(&drain)?,
            to_kamikaze: PhaseQuantiles::of(&to_kamikaze)?,
            restart: PhaseQuantiles::of(&restart)?,
            to_done: PhaseQuantiles::of(&to_done)?,
            whole: PhaseQuantiles::of(&whole)?,
            slots,
            idle_slot_s: self.idle_slot_s(slots),
        })
    }

    /// `∫ max(0, slots − nodes in progress) dt` from the first node started to the last.
    fn idle_slot_s(&self, slots: usize) -> f64 {
        // (time, change of the nodes in progress); a node not upgraded after its start holds its
        // slot to the end.
        let mut changes: Vec<(f64, i64)> = Vec::new();
        for node in self.nodes.values() {
            let Some(started) = node.started_at else {
                continue;
            };
            changes.push((started, 1));
            if let Some(upgraded) = node.upgraded_at.filter(|u| node.upgraded && *u >= started) {
                changes.push((upgraded, -1));
            }
        }
        let starts = changes.iter().filter(|(_, d)| *d > 0).map(|(t, _)| *t);
        let (Some(first), Some(last)) = (
            starts.clone().min_by(f64::total_cmp),
            starts.max_by(f64::total_cmp),
        ) else {
            return 0.0;
        };
        changes.sort_by(|a, b| a.0.total_cmp(&b.0));
        let slots = slots as f64;
        let (mut idle, mut since, mut in_progress) = (0.0, first, 0i64);
        for (t, change) in changes.into_iter().take_while(|(t, _)| *t <= last) {
            idle += (slots - in_progress as f64).max(0.0) * (t - since);
            since = t;
            in_progress += change;
        }
        idle + (slots - in_progress as f64).max(0.0) * (last - since)
    }

    /// What a messy fleet's run left, if the fleet has unfinishable nodes.
    pub fn leftovers(&self) -> Option<Leftovers> {
        if self.unfinishable.is_empty() {
            return None;
        }
        let (unfinishable, finishable): (Vec<_>, Vec<_>) = self
            .nodes
            .iter()
            .partition(|(name, _)| self.unfinishable.contains(*name));
        let upgraded =
            |nodes: &[(&String, &Node)]| nodes.iter().filter(|(_, n)| n.upgraded).count();
        Some(Leftovers {
            finishable: finishable.len(),
            finishable_upgraded: upgraded(&finishable),
            unfinishable: unfinishable.len(),
            unfinishable_upgraded: upgraded(&unfinishable),
            stranded_cordons: self
                .nodes
                .values()
                .filter(|n| n.draining && !n.upgraded)
                .count(),
            disruptions_on_unfinished: self
                .disruptions_by_node
                .iter()
                .filter(|(name, _)| !self.node_upgraded(name))
                .map(|(_, n)| n)
                .sum(),
        })
    }

    pub fn disruptions(&self) -> u64 {
        self.disruptions
    }

    /// Where the replacements landed (see [`crate::landing`]).
    pub fn landed(&self) -> Landed {
        self.landings.counts
    }

    /// Disruptions of pods that went without the Eviction API.
    pub fn outside_disruptions(&self) -> u64 {
        self.outside_disruptions
    }

    pub fn latencies(&self) -> &[f64] {
        &self.latencies
    }

    pub fn outcomes(&self) -> Vec<OwnerOutcome> {
        self.owners
            .iter()
            .map(|(name, o)| OwnerOutcome {
                name: name.clone(),
                kind: o.kind.clone(),
                desired: o.desired,
                floor: o.floor,
                min_ready: o.min_ready,
                violations: o.violations,
                seconds_below: o.seconds_below,
                disruptions: o.disruptions,
                outside_disruptions: o.outside_disruptions,
                outside_violations: o.outside_violations,
                unavailable_replica_s: o.unavailable_replica_s,
                restored_s: o
                    .restored_at
                    .map(|t| t - self.started_at.or(self.armed_at).unwrap_or(t)),
            })
            .collect()
    }

    /// Ready pods of `app` over time, from arming to finishing.
    pub fn series(&self, app: &str) -> Vec<(f64, u32)> {
        self.owners
            .get(app)
            .map(|o| o.series.clone())
            .unwrap_or_default()
    }

    pub fn armed_at(&self) -> Option<f64> {
        self.armed_at
    }
}

/// Whether some tool is still to drain node `name`: it is not upgraded, and not one only an
/// operator can clear (an unknown node counts as to drain).
fn to_drain(nodes: &BTreeMap<String, Node>, unfinishable: &BTreeSet<String>, name: &str) -> bool {
    !unfinishable.contains(name) && nodes.get(name).is_none_or(|n| !n.upgraded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, app: &str, node: &str, ready: bool, terminating: bool) -> PodObs {
        PodObs {
            uid: uid.into(),
            app: app.into(),
            node: Some(node.into()),
            ready,
            terminating,
            evicted: terminating,
            requests: Resources::default(),
        }
    }

    fn node(name: &str, marked: bool, draining: bool, upgraded: bool) -> NodeObs {
        NodeObs {
            name: name.into(),
            marked,
            draining,
            upgraded,
            kamikaze: false,
            executor_new: upgraded,
            allocatable: None,
            schedulable: !draining,
        }
    }

    /// A node in no phase: to be changed with struct update syntax.
    fn obs(name: &str) -> NodeObs {
        NodeObs {
            name: name.into(),
            marked: false,
            draining: false,
            upgraded: false,
            kamikaze: false,
            executor_new: false,
            allocatable: None,
            schedulable: true,
        }
    }

    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() < 1e-9
    }

    /// Each phase's median and p90 (equal with one node).
    fn phase(q: PhaseQuantiles) -> f64 {
        assert!(close(q.p50_s, q.p90_s), "{q:?}");
        q.p50_s
    }

    /// An owner `web` of 3 on n1 and n2, an unmanaged pod, all Ready; armed at t=0.
    fn running() -> Timeline {
        let mut timeline = Timeline::new(90, [("web", "Deployment", 3)], ["debug"]);
        timeline.node_applied(-1.0, node("n1", false, false, false));
        timeline.node_applied(-1.0, node("n2", false, false, false));
        timeline.pod_applied(-1.0, pod("a", "web", "n1", true, false));
        timeline.pod_applied(-1.0, pod("b", "web", "n1", true, false));
        timeline.pod_applied(-1.0, pod("c", "web", "n2", true, false));
        timeline.pod_applied(-1.0, pod("d", "debug", "n1", true, false));
        timeline.pod_applied(-1.0, pod("x", "node-logs", "n1", true, false));
        timeline.arm(0.0);
        timeline
    }

    /// A messy fleet: `web` on n1 and n2, n3 only an operator can clear, `broken` crash-looping on
    /// n3.
    #[test]
    fn a_messy_fleets_makespan_leaves_out_the_unfinishable_nodes_and_counts_what_was_left() {
        let mut t = Timeline::new(
            90,
            [("web", "Deployment", 2), ("broken", "Deployment", 2)],
            [],
        );
        t.waive(["broken"]);
        t.set_unfinishable(["n3".to_owned()]);
        for n in ["n1", "n2", "n3"] {
            t.node_applied(-1.0, node(n, false, false, false));
        }
        t.pod_applied(-1.0, pod("a", "web", "n1", true, false));
        t.pod_applied(-1.0, pod("b", "web", "n2", true, false));
        t.pod_applied(-1.0, pod("c", "broken", "n3", false, false));
        t.pod_applied(-1.0, pod("e", "broken", "n3", false, false));
        assert!(
            t.owners_fully_ready(),
            "a waived owner has no Ready pod to wait for"
        );
        t.arm(0.0);
        t.node_applied(1.0, node("n1", true, true, false));
        t.node_applied(1.0, node("n3", true, true, false));
        t.pod_applied(2.0, pod("a", "web", "n1", true, true));
        t.pod_applied(2.0, pod("c", "broken", "n3", false, true));
        t.node_applied(5.0, node("n1", false, false, true));
        assert_eq!(t.makespan(), None, "n2 is finishable and not upgraded");
        t.node_applied(7.0, node("n2", false, false, true));
        assert_eq!(t.makespan(), Some((1.0, 7.0)), "n3 does not count");
        t.finish(8.0);
        assert_eq!(
            t.leftovers(),
            Some(Leftovers {
                finishable: 2,
                finishable_upgraded: 2,
                unfinishable: 1,
                unfinishable_upgraded: 0,
                stranded_cordons: 1,
                disruptions_on_unfinished: 1,
            })
        );
        let broken = t
            .outcomes()
            .into_iter()
            .find(|o| o.name == "broken")
            .unwrap();
        assert_eq!(
            (broken.floor, broken.violations),
            (0, 0),
            "waived: no bound"
        );
        assert_eq!(running().leftovers(), None, "a tidy fleet has none");
    }

    #[test]
    fn arming_counts_the_initial_pods_of_owners_and_unmanaged_pods() {
        let timeline = running();
        assert_eq!(timeline.initial_pods(), 4);
        assert_eq!(timeline.ready_pods(), 4);
        assert!(timeline.owners_fully_ready());
        assert_eq!(timeline.series("web"), [(0.0, 3)]);
    }

    #[test]
    fn one_pod_at_a_time_keeps_the_floor_and_measures_the_reaction() {
        let mut t = running();
        t.node_applied(1.0, node("n1", true, true, false));
        // Evict a: 2 ready of 3, floor 2.
        t.pod_applied(2.0, pod("a", "web", "n1", true, true));
        t.pod_deleted(2.1, "a");
        // Its replacement on n2 becomes Ready while b still waits on the draining n1.
        t.pod_applied(2.2, pod("a2", "web", "n2", false, false));
        t.pod_applied(4.0, pod("a2", "web", "n2", true, false));
        // The next eviction of web, 0.3 s later.
        t.pod_applied(4.3, pod("b", "web", "n1", true, true));
        t.pod_deleted(4.4, "b");
        t.pod_deleted(4.5, "d");
        let outcome = &t.outcomes()[0];
        assert_eq!((outcome.floor, outcome.min_ready), (2, 2));
        assert_eq!(outcome.violations, 0);
        assert_eq!(outcome.disruptions, 2);
        assert_eq!(outcome.outside_disruptions, 0, "both were evicted");
        assert_eq!(t.disruptions(), 3, "two evictions and the unmanaged pod");
        assert_eq!(t.latencies().len(), 1);
        assert!((t.latencies()[0] - 0.3).abs() < 1e-9);
        assert_eq!(t.series("web"), [(0.0, 3), (2.0, 2), (4.0, 3), (4.3, 2)]);
    }

    #[test]
    fn two_pods_down_at_once_is_a_violation_with_its_duration() {
        let mut t = running();
        t.node_applied(1.0, node("n1", false, true, false));
        t.pod_deleted(2.0, "a");
        t.pod_deleted(2.0, "b");
        t.pod_applied(2.5, pod("a2", "web", "n2", false, false));
        t.pod_applied(5.0, pod("a2", "web", "n2", true, false));
        t.finish(10.0);
        let outcome = &t.outcomes()[0];
        assert_eq!(outcome.min_ready, 1);
        assert_eq!(outcome.violations, 1);
        // Deleted without the Eviction API: the descent is counted, and attributed to whoever
        // deleted them.
        assert_eq!(outcome.outside_violations, 1);
        assert_eq!(outcome.outside_disruptions, 2);
        assert!((outcome.seconds_below - 3.0).abs() < 1e-9);
        // Nothing was waiting for a2: the owner could already lose pods, no reaction is measured.
        assert!(t.latencies().is_empty());
    }

    #[test]
    fn a_descent_is_attributed_to_the_pod_that_began_it() {
        let mut t = running();
        // Evicted: 3 → 2, at the floor.
        t.pod_applied(1.0, pod("a", "web", "n1", true, true));
        // Then someone deletes b outright: 2 → 1, below the floor, not by an eviction.
        t.pod_deleted(2.0, "b");
        t.pod_applied(3.0, pod("a2", "web", "n2", true, false));
        t.pod_applied(3.5, pod("b2", "web", "n2", true, false));
        // Now an eviction takes it below the floor: the evicting tool's violation.
        t.pod_applied(4.0, pod("b2", "web", "n2", true, true));
        t.pod_applied(4.0, pod("c", "web", "n2", true, true));
        let outcome = &t.outcomes()[0];
        assert_eq!(outcome.violations, 2);
        assert_eq!(outcome.outside_violations, 1);
        assert_eq!(outcome.outside_disruptions, 1);
        assert_eq!(t.outside_disruptions(), 1);
    }

    #[test]
    fn a_ready_replacement_with_nothing_left_to_move_measures_nothing() {
        let mut t = running();
        // n1 is not draining: b has nowhere to go, so a2 unblocks nothing.
        t.pod_applied(1.0, pod("a", "web", "n1", true, true));
        t.pod_applied(1.5, pod("a2", "web", "n2", true, false));
        t.pod_applied(9.0, pod("b", "web", "n1", true, true));
        assert!(t.latencies().is_empty());
    }

    #[test]
    fn the_makespan_runs_from_the_first_mark_to_the_last_upgrade() {
        let mut t = running();
        assert_eq!(t.makespan(), None);
        t.node_applied(1.0, node("n2", true, false, false));
        t.node_applied(1.5, node("n1", true, true, false));
        t.node_applied(6.0, node("n1", false, false, true));
        assert_eq!(t.makespan(), None, "n2 is not upgraded yet");
        assert_eq!(t.upgraded_nodes(), 1);
        t.node_applied(9.0, node("n2", false, false, true));
        assert_eq!(t.makespan(), Some((1.0, 9.0)));
        assert!(t.all_nodes_match(true));
    }

    #[test]
    fn tools_that_do_not_mark_start_explicitly() {
        let mut t = running();
        t.start(0.5);
        t.node_applied(3.0, node("n1", false, false, true));
        t.node_applied(4.0, node("n2", false, false, true));
        assert_eq!(t.makespan(), Some((0.5, 4.0)));
    }

    #[test]
    fn changes_before_arming_or_after_finishing_do_not_count() {
        let mut t = Timeline::new(90, [("web", "Deployment", 2)], []);
        t.pod_applied(0.0, pod("a", "web", "n1", true, false));
        t.pod_deleted(0.5, "a");
        t.pod_applied(0.6, pod("a2", "web", "n1", true, false));
        t.pod_applied(0.7, pod("b", "web", "n1", true, false));
        t.arm(1.0);
        t.finish(2.0);
        t.pod_deleted(3.0, "a2");
        assert_eq!(t.disruptions(), 0);
        assert_eq!(t.outcomes()[0].min_ready, 2);
    }

    #[test]
    fn unavailable_replica_seconds_integrate_the_missing_replicas_over_the_run() {
        let mut t = running();
        // web has 3 desired. 0–2 s: 3 ready (0). 2–3 s: 2 ready (1 × 1 s). 3–7 s: 1 ready (2 × 4
        // s). 7–8 s: 2 ready (1 × 1 s). 8–10 s: 3 ready (0). By hand: 1 + 8 + 1 = 10
        // replica-seconds.
        t.pod_applied(2.0, pod("a", "web", "n1", true, true));
        t.pod_deleted(3.0, "b");
        t.pod_deleted(3.5, "a");
        t.pod_applied(4.0, pod("a2", "web", "n2", false, false));
        t.pod_applied(7.0, pod("a2", "web", "n2", true, false));
        t.pod_applied(8.0, pod("b2", "web", "n2", true, false));
        // Still one short when finishing at 12 s, from 11 s: one more replica-second.
        t.pod_applied(11.0, pod("c", "web", "n2", true, true));
        t.finish(12.0);
        // Changes after finishing do not count.
        t.pod_deleted(13.0, "a2");
        let outcome = &t.outcomes()[0];
        assert!(
            (outcome.unavailable_replica_s - 11.0).abs() < 1e-9,
            "{}",
            outcome.unavailable_replica_s
        );
    }

    /// An owner's own makespan: from the upgrade's start (its first mark) until it last had all its
    /// replicas Ready again, a second loss after the first recovery included.
    #[test]
    fn an_owner_is_restored_when_it_last_has_all_its_replicas_ready_again() {
        let mut t = running();
        t.node_applied(1.0, node("n1", true, false, false));
        t.pod_applied(2.0, pod("a", "web", "n1", true, true));
        t.pod_applied(5.0, pod("a2", "web", "n2", true, false));
        assert_eq!(t.outcomes()[0].restored_s, Some(4.0));
        t.pod_applied(6.0, pod("b", "web", "n1", true, true));
        t.pod_applied(9.5, pod("b2", "web", "n2", true, false));
        t.finish(12.0);
        assert_eq!(t.outcomes()[0].restored_s, Some(8.5));
        // An owner that never lost a pod has none.
        let mut untouched = running();
        untouched.finish(3.0);
        assert_eq!(untouched.outcomes()[0].restored_s, None);
    }

    #[test]
    fn nothing_is_unavailable_before_arming() {
        let mut t = Timeline::new(90, [("web", "Deployment", 2)], []);
        t.pod_applied(0.0, pod("a", "web", "n1", true, false));
        // Only one of two Ready from 0 to 5 s, unarmed: not counted. Armed at 5 s with one missing
        // until 6 s.
        t.arm(5.0);
        t.pod_applied(6.0, pod("b", "web", "n1", true, false));
        t.finish(9.0);
        assert!((t.outcomes()[0].unavailable_replica_s - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_relist_removes_the_pods_deleted_during_the_watch_gap() {
        let mut t = running();
        // Pod b was deleted while the watch was down: the relist lacks it, and no Delete event ever
        // comes.
        let listed: HashSet<String> = ["a", "c", "d", "x"].map(String::from).into();
        t.pods_relisted(5.0, &listed, false);
        assert_eq!(t.relists(), 1);
        assert_eq!(t.ready_pods(), 3, "b no longer counts as Ready");
        assert_eq!(t.series("web").last(), Some(&(5.0, 2)));
        assert_eq!(t.disruptions(), 1, "its going is a disruption");
        // The recorder's first list is not a relist, and a list with every pod changes nothing.
        let all: HashSet<String> = ["a", "c", "d", "x"].map(String::from).into();
        t.pods_relisted(6.0, &all, true);
        assert_eq!((t.relists(), t.ready_pods()), (1, 3));
        t.nodes_relisted(&["n1".to_owned()].into(), false);
        assert_eq!((t.relists(), t.nodes()), (2, 1));
    }

    #[test]
    fn a_nodes_time_is_split_into_drain_kamikaze_restart_and_the_rest() {
        let mut t = Timeline::new(90, [("web", "Deployment", 3)], []);
        t.node_applied(-1.0, obs("n1"));
        t.node_applied(-1.0, obs("n2"));
        t.pod_applied(-1.0, pod("a", "web", "n1", true, false));
        t.pod_applied(-1.0, pod("b", "web", "n1", true, false));
        t.pod_applied(-1.0, pod("c", "web", "n2", true, false));
        // The DaemonSet's pod is not tracked: it stays, and the node is empty all the same.
        t.pod_applied(-1.0, pod("x", "node-logs", "n1", true, false));
        t.arm(0.0);
        let cordoned = NodeObs {
            draining: true,
            ..obs("n1")
        };
        t.node_applied(1.0, cordoned.clone());
        // Evicted, then re-applied as its status changes: still one pod on n1 until it is deleted.
        t.pod_applied(2.0, pod("a", "web", "n1", true, true));
        t.pod_applied(3.0, pod("a", "web", "n1", false, true));
        t.pod_deleted(4.0, "a");
        t.pod_applied(4.5, pod("b", "web", "n1", true, true));
        assert_eq!(t.node_phases(2), None, "n1 is not upgraded yet");
        t.pod_deleted(5.0, "b");
        let kamikaze = NodeObs {
            kamikaze: true,
            ..cordoned.clone()
        };
        t.node_applied(5.2, kamikaze.clone());
        // The old executor obeys: the node still carries the kamikaze and the old ID.
        t.node_applied(6.0, kamikaze);
        t.node_applied(
            7.2,
            NodeObs {
                executor_new: true,
                ..cordoned
            },
        );
        t.node_applied(
            7.5,
            NodeObs {
                executor_new: true,
                upgraded: true,
                ..obs("n1")
            },
        );
        let phases = t.node_phases(2).expect("n1 has every phase");
        assert_eq!((phases.nodes, phases.slots), (1, 2), "n2 was not upgraded");
        let got = [
            phase(phases.drain),
            phase(phases.to_kamikaze),
            phase(phases.restart),
            phase(phases.to_done),
            phase(phases.whole),
        ];
        for (got, want) in got.into_iter().zip([4.0, 0.2, 2.0, 0.3, 6.5]) {
            assert!(close(got, want), "{phases:?}");
        }
        // One node started: no wait for a slot.
        assert!(close(phases.idle_slot_s, 0.0), "{phases:?}");
    }

    /// The floor's oracle, worked out by hand: a replacement counts as landed on a node still to
    /// drain when bound to one that is not upgraded (and not left to an operator), and as forced
    /// when no schedulable node not to drain had room for it, every pod bound there counted,
    /// whatever its app.
    #[test]
    fn replacements_on_nodes_still_to_drain_are_counted_and_forced_ones_apart() {
        let cpu = |millis| Resources {
            cpu_millis: millis,
            ..Resources::default()
        };
        let sized = |name: &str, upgraded: bool, millis| NodeObs {
            upgraded,
            allocatable: Some(Resources {
                pods: 110,
                ..cpu(millis)
            }),
            ..obs(name)
        };
        let with = |obs: PodObs, millis| PodObs {
            requests: cpu(millis),
            ..obs
        };
        let mut t = Timeline::new(90, [("web", "Deployment", 4)], ["debug"]);
        // A node left to an operator is not to drain: a place like an upgraded one, this one small.
        for (name, upgraded, millis) in [
            ("old", false, 1000),
            ("lost", false, 100),
            ("new", true, 1000),
        ] {
            t.node_applied(-1.0, sized(name, upgraded, millis));
        }
        t.set_unfinishable(["lost".to_owned()]);
        // The DaemonSet's pod, not tracked, takes 500m of the upgraded node.
        t.pod_applied(-1.0, with(pod("ds", "node-logs", "new", true, false), 500));
        t.pod_applied(-1.0, with(pod("a", "web", "old", true, false), 300));
        t.arm(0.0);
        // Not a replacement: seen before arming.
        t.pod_applied(0.5, with(pod("a", "web", "old", true, true), 300));
        // 500m left on the upgraded node: a 300m replacement had room there.
        t.pod_applied(1.0, with(pod("r1", "web", "old", false, false), 300));
        assert_eq!(
            t.landed(),
            Landed {
                to_drain: 1,
                forced: 0
            }
        );
        // 200m left: a 300m one had none.
        t.pod_applied(2.0, with(pod("r2", "web", "new", false, false), 300));
        t.pod_applied(3.0, with(pod("r3", "web", "old", false, false), 300));
        assert_eq!(
            t.landed(),
            Landed {
                to_drain: 2,
                forced: 1
            }
        );
        // Seen again on the same node: counted once.
        t.pod_applied(3.5, with(pod("r3", "web", "old", true, false), 300));
        // The node left to an operator is not to drain; an unmanaged pod is no replacement.
        t.pod_applied(4.0, with(pod("r4", "web", "lost", false, false), 50));
        t.pod_applied(4.5, with(pod("d2", "debug", "old", false, false), 300));
        assert_eq!(
            t.landed(),
            Landed {
                to_drain: 2,
                forced: 1
            }
        );
        // The DaemonSet's pod goes: room again.
        t.pod_deleted(5.0, "ds");
        t.pod_applied(6.0, with(pod("r5", "web", "old", false, false), 300));
        assert_eq!(
            t.landed(),
            Landed {
                to_drain: 3,
                forced: 1
            }
        );
    }

    #[test]
    fn a_pod_is_counted_once_on_its_node_until_it_goes() {
        let mut t = Timeline::new(90, [("web", "Deployment", 3)], ["debug"]);
        t.node_applied(-1.0, obs("n1"));
        t.node_applied(-1.0, obs("n2"));
        t.pod_applied(-1.0, pod("a", "web", "n1", true, false));
        t.pod_applied(-1.0, pod("b", "web", "n1", true, false));
        // Pending when armed, bound to n1 afterwards: counted there from then on.
        t.pod_applied(
            -1.0,
            PodObs {
                node: None,
                ..pod("p", "debug", "n1", false, false)
            },
        );
        t.arm(0.0);
        t.pod_applied(0.5, pod("p", "debug", "n1", false, false));
        t.pod_applied(0.8, pod("p", "debug", "n1", true, false));
        t.node_applied(
            1.0,
            NodeObs {
                draining: true,
                ..obs("n1")
            },
        );
        // n2 holds no tracked pod: empty as soon as it starts.
        t.node_applied(
            1.5,
            NodeObs {
                draining: true,
                ..obs("n2")
            },
        );
        for at in [2.0, 2.5, 2.7] {
            t.pod_applied(at, pod("a", "web", "n1", false, true));
        }
        t.pod_deleted(3.0, "a");
        t.pod_deleted(3.1, "a");
        // b went in a watch gap: the relist removes it.
        t.pods_relisted(4.0, &["p".to_owned()].into(), false);
        t.pod_deleted(6.0, "p");
        for (name, start) in [("n1", 1.0), ("n2", 1.5)] {
            t.node_applied(
                start + 6.0,
                NodeObs {
                    draining: true,
                    kamikaze: true,
                    ..obs(name)
                },
            );
            t.node_applied(
                start + 7.0,
                NodeObs {
                    executor_new: true,
                    upgraded: true,
                    ..obs(name)
                },
            );
        }
        let phases = t.node_phases(2).expect("both nodes have every phase");
        assert_eq!(phases.nodes, 2);
        // Drains of 5 s (n1, until p went at 6 s) and 0 s (n2): the nearest-rank median is the
        // lower one.
        assert!(close(phases.drain.p50_s, 0.0), "{phases:?}");
        assert!(close(phases.drain.p90_s, 5.0), "{phases:?}");
        assert!(close(phases.whole.p90_s, 7.0), "{phases:?}");
    }

    #[test]
    fn idle_slot_seconds_count_the_free_slots_until_the_last_node_starts() {
        let mut t = Timeline::new(90, [], []);
        // (node, started, upgraded)
        let nodes = [
            ("n1", 0.0, 4.0),
            ("n2", 1.0, 3.0),
            ("n3", 3.0, 6.0),
            ("n4", 5.0, 8.0),
        ];
        for (name, _, _) in nodes {
            t.node_applied(-1.0, obs(name));
        }
        t.arm(-0.5);
        for (name, started, upgraded) in nodes {
            let draining = NodeObs {
                draining: true,
                ..obs(name)
            };
            t.node_applied(started, draining.clone());
            t.node_applied(
                started + 0.5,
                NodeObs {
                    kamikaze: true,
                    ..draining
                },
            );
            t.node_applied(
                upgraded,
                NodeObs {
                    executor_new: true,
                    upgraded: true,
                    ..obs(name)
                },
            );
        }
        // In progress from 0 to 5 s: 1 node on [0, 1), 2 on [1, 4) (n2 hands its slot to n3 at 3
        // s), 1 on [4, 5). Two slots: 1·1 + 0·3 + 1·1 = 2 slot-seconds. Three: 2·1 + 1·3 +
        // 2·1 = 7. One: never idle.
        let idle = |slots| t.node_phases(slots).unwrap().idle_slot_s;
        assert!(close(idle(2), 2.0), "{}", idle(2));
        assert!(close(idle(3), 7.0), "{}", idle(3));
        assert!(close(idle(1), 0.0), "{}", idle(1));
        assert_eq!(t.node_phases(2).unwrap().nodes, 4);
    }
}
