//! The SLA watcher's bookkeeping, free of I/O: watch events in, per-workload records and violations out.
//!
//! A pod counts for its workload (docs/design.md §2), resolved through the cluster's own objects: a ReplicaSet controlled
//! by a Deployment counts for the Deployment, so a Deployment mid-rollout is one workload. Once armed, every change of a
//! workload's Ready count or of its `d` is a sample, and a sample where the Ready count *fell* below the bound
//! `min(ceil(t·d/100), d−1)` of the `d` in force is a violation. Only a descent counts: k8sm only ever takes pods away,
//! while a scale-up raises the bound above the Ready pods through no one's fault until the new pods are Ready (a
//! descent while still below that bound is a violation again).
//!
//! Where a workload sets `minReadySeconds`, its *available* pods (Ready for that long, as its controller counts them)
//! are judged the same way, beside the Ready ones. A pod becomes available with no event, but it only ever stops
//! being available with one (not Ready, deleted), so the fewest available pods are seen at events, by the wall
//! clock then.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::watcher;

use super::bound;
use super::objects::{
    ControllerFacts, Objects, PodController, PodFacts, Store, Tracked, WorkloadKey, WorkloadKind,
};

/// What was observed of one workload while the watcher was armed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadRecord {
    /// `Deployment`, `ReplicaSet`, `ReplicationController`, `StatefulSet`, or another controller's kind.
    pub kind: String,
    pub name: String,
    /// `d` now.
    pub desired: u32,
    /// The bound `min(ceil(t·d/100), d−1)` now.
    pub bound: u32,
    /// The fewest Ready pods seen.
    pub min_ready: u32,
    /// The fewest available pods seen (Ready for the workload's `minReadySeconds`; the Ready ones without it).
    pub min_available: u32,
    /// The smallest `Ready − bound` seen, each against the bound in force then; negative after a scale-up, or when
    /// the SLA was broken.
    pub min_margin: i64,
    /// Changes of the Ready count or of `d` observed (the first observation counts too).
    pub samples: u64,
    /// Descents below the bound within the grace after a scale-down, not counted as violations.
    pub excused: u64,
}

/// Ready, available and live pods of one workload.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    ready: u32,
    available: u32,
    live: u32,
}

/// What the last sample of a workload saw.
#[derive(Clone, Copy, Debug)]
struct Last {
    ready: u32,
    available: u32,
    desired: u32,
    /// The replicas of the workload's ReplicaSets together (a Deployment's), to notice its rollout steps.
    replica_sets: u32,
    scaled_down_at: Option<Instant>,
}

#[derive(Debug)]
pub struct State {
    threshold: u32,
    armed: bool,
    /// A descent below the bound this soon after a scale-down of the workload is excused.
    grace: Duration,
    objects: Objects,
    /// `d` of other controllers, as the test declared it.
    expected: HashMap<WorkloadKey, u32>,
    /// `d` of other controllers without a declared one: the most live pods seen at once since arming.
    inferred: HashMap<WorkloadKey, u32>,
    last: HashMap<WorkloadKey, Last>,
    records: BTreeMap<WorkloadKey, WorkloadRecord>,
    violations: Vec<String>,
    /// The wall clock that availability is judged by: the system's, or a test's.
    wall: Option<Timestamp>,
}

impl State {
    pub fn new(threshold_percent: u32) -> Self {
        Self {
            threshold: threshold_percent,
            armed: false,
            grace: Duration::ZERO,
            objects: Objects::default(),
            expected: HashMap::new(),
            inferred: HashMap::new(),
            last: HashMap::new(),
            records: BTreeMap::new(),
            violations: Vec::new(),
            wall: None,
        }
    }

    /// Judges availability at `now` instead of the system's clock (tests).
    #[cfg(test)]
    pub fn set_wall_clock(&mut self, now: Timestamp) {
        self.wall = Some(now);
    }

    /// Declares `d` of a controller of a kind other than the built-in workload kinds.
    ///
    /// # Panics
    /// For a built-in kind, whose `d` comes from the cluster's own object.
    pub fn expect(&mut self, kind: &str, name: &str, desired: u32) {
        let kind = WorkloadKind::from(kind);
        assert!(
            matches!(kind, WorkloadKind::Other(_)),
            "the SLA watcher reads d of a {} from its spec",
            kind.as_str()
        );
        self.expected.insert((kind, name.to_owned()), desired);
    }

    pub fn set_grace(&mut self, grace: Duration) {
        self.grace = grace;
    }

    pub fn arm(&mut self, now: Instant) {
        self.armed = true;
        self.judge(now);
    }

    /// Applies one watch event of one kind of object, then judges every workload.
    pub fn observe<K: Tracked>(&mut self, event: watcher::Event<K>, now: Instant) {
        let store = K::store(&mut self.objects);
        match event {
            watcher::Event::Init => store.relist_started(),
            watcher::Event::InitApply(object) | watcher::Event::Apply(object) => {
                store.apply(object.key(), object.facts());
            }
            watcher::Event::Delete(object) => store.delete(&object.key()),
            watcher::Event::InitDone => store.relist_done(),
        }
        self.judge(now);
    }

    pub fn records(&self) -> Vec<WorkloadRecord> {
        self.records.values().cloned().collect()
    }

    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// Ready pods of a workload now.
    pub fn ready(&self, kind: &str, name: &str) -> u32 {
        let key = (WorkloadKind::from(kind), name.to_owned());
        self.tally().get(&key).map_or(0, |t| t.ready)
    }

    /// Ready, available and live pods per workload.
    fn tally(&self) -> HashMap<WorkloadKey, Tally> {
        let wall = self.wall.unwrap_or_else(Timestamp::now);
        let mut tally: HashMap<WorkloadKey, Tally> = HashMap::new();
        for pod in self.objects.pods.objects.values() {
            if let Some(workload) = self.workload_of(pod) {
                let min_ready = self.min_ready_seconds(&workload);
                let available = pod.ready
                    && (min_ready == 0
                        || pod.ready_since.is_some_and(|since| {
                            since + SignedDuration::from_secs(i64::from(min_ready)) <= wall
                        }));
                let entry = tally.entry(workload).or_default();
                entry.ready += u32::from(pod.ready);
                entry.available += u32::from(available);
                entry.live += u32::from(pod.live);
            }
        }
        tally
    }

    /// The workload's `spec.minReadySeconds` (0 for another controller's: its spec can't be read generically).
    fn min_ready_seconds(&self, (kind, name): &WorkloadKey) -> u32 {
        let objects = &self.objects;
        let store = match kind {
            WorkloadKind::Deployment => &objects.deployments,
            WorkloadKind::ReplicaSet => &objects.replica_sets,
            WorkloadKind::ReplicationController => &objects.replication_controllers,
            WorkloadKind::StatefulSet => &objects.stateful_sets,
            WorkloadKind::Other(_) => return 0,
        };
        store.objects.get(name).map_or(0, |c| c.min_ready_seconds)
    }

    /// The workload a pod counts for, if its controller is one (or belongs to one) and is known.
    fn workload_of(&self, pod: &PodFacts) -> Option<WorkloadKey> {
        let known = |store: &HashMap<String, ControllerFacts>, name: &str, uid: &str| {
            store.get(name).is_some_and(|c| c.uid == uid)
        };
        let objects = &self.objects;
        match pod.controller.as_ref()? {
            PodController::ReplicaSet { name, uid } => {
                let rs = objects
                    .replica_sets
                    .objects
                    .get(name)
                    .filter(|rs| rs.uid == *uid)?;
                match &rs.deployment {
                    None => Some((WorkloadKind::ReplicaSet, name.clone())),
                    Some((deployment, uid)) => known(&objects.deployments.objects, deployment, uid)
                        .then(|| (WorkloadKind::Deployment, deployment.clone())),
                }
            }
            PodController::ReplicationController { name, uid } => {
                known(&objects.replication_controllers.objects, name, uid)
                    .then(|| (WorkloadKind::ReplicationController, name.clone()))
            }
            PodController::StatefulSet { name, uid } => {
                known(&objects.stateful_sets.objects, name, uid)
                    .then(|| (WorkloadKind::StatefulSet, name.clone()))
            }
            PodController::NotAWorkload => None,
            PodController::Other { kind, name } => {
                Some((WorkloadKind::Other(kind.clone()), name.clone()))
            }
        }
    }

    /// Every workload that can be judged now, with its `d` and the replicas of its ReplicaSets together. A workload
    /// whose controller is being deleted is not judged: it replaces nothing any more.
    fn desired(&self, tally: &HashMap<WorkloadKey, Tally>) -> BTreeMap<WorkloadKey, (u32, u32)> {
        let objects = &self.objects;
        let mut desired = BTreeMap::new();
        for (name, deployment) in standing(&objects.deployments) {
            let owner = Some((name.clone(), deployment.uid.clone()));
            let replica_sets = objects
                .replica_sets
                .objects
                .values()
                .filter(|rs| rs.deployment == owner)
                .map(|rs| rs.replicas)
                .sum();
            let key = (WorkloadKind::Deployment, name.clone());
            desired.insert(key, (deployment.replicas, replica_sets));
        }
        for (name, rs) in standing(&objects.replica_sets) {
            if rs.deployment.is_none() {
                desired.insert((WorkloadKind::ReplicaSet, name.clone()), (rs.replicas, 0));
            }
        }
        for (name, rc) in standing(&objects.replication_controllers) {
            let key = (WorkloadKind::ReplicationController, name.clone());
            desired.insert(key, (rc.replicas, 0));
        }
        for (name, set) in standing(&objects.stateful_sets) {
            desired.insert((WorkloadKind::StatefulSet, name.clone()), (set.replicas, 0));
        }
        let others: BTreeSet<&WorkloadKey> = tally
            .keys()
            .chain(self.expected.keys())
            .chain(self.inferred.keys())
            .filter(|(kind, _)| matches!(kind, WorkloadKind::Other(_)))
            .collect();
        for key in others {
            if let Some(d) = self.expected.get(key).or_else(|| self.inferred.get(key)) {
                desired.insert(key.clone(), (*d, 0));
            }
        }
        desired
    }

    /// Takes a sample of every workload whose Ready count or `d` changed, once armed and every watch has listed.
    fn judge(&mut self, now: Instant) {
        if !self.armed || !self.objects.synced() {
            return;
        }
        let tally = self.tally();
        for (key, t) in &tally {
            if matches!(key.0, WorkloadKind::Other(_)) && !self.expected.contains_key(key) {
                let inferred = self.inferred.entry(key.clone()).or_default();
                *inferred = (*inferred).max(t.live);
            }
        }
        let desired = self.desired(&tally);
        // A workload that can no longer be judged starts afresh if it comes back (say, deleted and re-created).
        self.last.retain(|key, _| desired.contains_key(key));
        for (key, (d, replica_sets)) in desired {
            let counts = tally.get(&key).copied().unwrap_or_default();
            self.sample(key, counts, d, replica_sets, now);
        }
    }

    fn sample(&mut self, key: WorkloadKey, counts: Tally, d: u32, replica_sets: u32, now: Instant) {
        let (ready, available) = (counts.ready, counts.available);
        let bound = bound(d, self.threshold);
        let previous = self.last.get(&key).copied();
        let scaled_down = previous.is_some_and(|p| d < p.desired || replica_sets < p.replica_sets);
        let scaled_down_at = if scaled_down {
            Some(now)
        } else {
            previous.and_then(|p| p.scaled_down_at)
        };
        self.last.insert(
            key.clone(),
            Last {
                ready,
                available,
                desired: d,
                replica_sets,
                scaled_down_at,
            },
        );
        if previous.is_some_and(|p| p.ready == ready && p.available == available && p.desired == d)
        {
            return;
        }
        let margin = i64::from(ready) - i64::from(bound);
        let record = self
            .records
            .entry(key.clone())
            .or_insert_with(|| WorkloadRecord {
                kind: key.0.as_str().to_owned(),
                name: key.1.clone(),
                desired: d,
                bound,
                min_ready: ready,
                min_available: available,
                min_margin: margin,
                samples: 0,
                excused: 0,
            });
        record.desired = d;
        record.bound = bound;
        record.min_ready = record.min_ready.min(ready);
        record.min_available = record.min_available.min(available);
        record.min_margin = record.min_margin.min(margin);
        record.samples += 1;
        let fell_below = previous.is_some_and(|p| ready < p.ready) && ready < bound;
        let availability_fell_below =
            previous.is_some_and(|p| available < p.available) && available < bound;
        if !fell_below && !availability_fell_below {
            return;
        }
        let in_grace =
            scaled_down_at.is_some_and(|at| now.saturating_duration_since(at) < self.grace);
        if in_grace {
            record.excused += 1;
        } else if fell_below {
            self.violations.push(format!(
                "{} {}: {ready} Ready of {d} desired, below the bound {bound}",
                key.0.as_str(),
                key.1
            ));
        } else {
            self.violations.push(format!(
                "{} {}: {available} available (Ready for minReadySeconds) of {d} desired, below the bound \
                 {bound}",
                key.0.as_str(),
                key.1
            ));
        }
    }
}

/// The controllers of a store that are not being deleted.
fn standing(store: &Store<ControllerFacts>) -> impl Iterator<Item = (&String, &ControllerFacts)> {
    store.objects.iter().filter(|(_, c)| !c.deleting)
}
