//! The SLA watcher's bookkeeping, free of I/O: watch events in, per-workload records and violations
//! out. Once armed, every change of a workload's Ready count or of its `d` is a sample, and a
//! sample where the Ready count fell below the bound of the `d` in force is a violation (see
//! [`super::SlaWatcher`]). Where a workload sets `minReadySeconds`, its available pods are judged
//! the same way, beside the Ready ones.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::watcher;

use super::objects::{
    ControllerFacts, Objects, PodController, PodFacts, Store, Tracked, WorkloadKey, WorkloadKind,
};

/// What was observed of one workload while the watcher was armed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadRecord {
    /// `Deployment`, `ReplicaSet`, `ReplicationController`, `StatefulSet`, or another controller's
    /// kind.
    pub kind: String,
    pub name: String,
    /// `d` now.
    pub desired: u32,
    /// The bound `min(ceil(t·d/100), d−1)` now.
    pub bound: u32,
    /// The fewest Ready pods seen.
    pub min_ready: u32,
    /// The fewest available pods seen (Ready for the workload's `minReadySeconds`; the Ready ones
    /// without it).
    pub min_available: u32,
    /// The smallest `Ready − bound` seen, each against the bound in force then; negative after a
    /// scale-up, or when the SLA was broken.
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
    /// The replicas of the workload's ReplicaSets together (a Deployment's), to notice its rollout
    /// steps.
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
    /// `d` of other controllers without a declared one: the most live pods seen at once since
    /// arming.
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

    /// Ready, available and live pods per workload. A pod becomes available (Ready for
    /// `minReadySeconds`) with no event, but only stops being available with one (not Ready,
    /// deleted), so the fewest available pods are seen at events, by the wall clock then.
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

    /// The workload's `spec.minReadySeconds` (0 for another controller's: its spec can't be read
    /// generically).
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

    /// Every workload that can be judged now, with its `d` and the replicas of its ReplicaSets
    /// together. A workload whose controller is being deleted is not judged: it replaces
    /// nothing any more.
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

    /// Takes a sample of every workload whose Ready count or `d` changed, once armed and every
    /// watch has listed.
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
        // A workload that can no longer be judged starts afresh if it comes back (say, deleted and
        // re-created).
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

/// `min(ceil(t·d/100), d−1)`, and 0 for `d` = 0.
pub fn bound(desired: u32, threshold_percent: u32) -> u32 {
    let needed = (u64::from(desired) * u64::from(threshold_percent)).div_ceil(100);
    u32::try_from(needed)
        .unwrap_or(u32::MAX)
        .min(desired.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    //! The SLA watcher's bookkeeping, fed with objects as its watches would report them.

    use std::time::{Duration, Instant};

    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
    use k8s_openapi::api::core::v1::{Pod, ReplicationController};
    use kube::runtime::watcher::Event;
    use serde_json::{Value, json};

    use super::{State, WorkloadRecord, bound};
    use crate::sla::objects::Tracked;

    const THRESHOLD: u32 = 90;

    /// A watcher's state whose watches have all listed an empty namespace, and a clock.
    struct World {
        state: State,
        now: Instant,
    }

    impl World {
        fn new() -> Self {
            let mut world = Self {
                state: State::new(THRESHOLD),
                now: Instant::now(),
            };
            world.relist::<Pod>(vec![]);
            world.relist::<Deployment>(vec![]);
            world.relist::<ReplicaSet>(vec![]);
            world.relist::<ReplicationController>(vec![]);
            world.relist::<StatefulSet>(vec![]);
            world
        }

        fn apply<K: Tracked>(&mut self, object: K) {
            self.state.observe(Event::Apply(object), self.now);
        }

        fn delete<K: Tracked>(&mut self, object: K) {
            self.state.observe(Event::Delete(object), self.now);
        }

        /// The watch of `K` restarted and listed `objects`.
        fn relist<K: Tracked>(&mut self, objects: Vec<K>) {
            self.state.observe(Event::<K>::Init, self.now);
            for object in objects {
                self.state.observe(Event::InitApply(object), self.now);
            }
            self.state.observe(Event::<K>::InitDone, self.now);
        }

        fn arm(&mut self) {
            self.state.arm(self.now);
        }

        fn later(&mut self, seconds: u64) {
            self.now += Duration::from_secs(seconds);
        }

        fn record(&self, kind: &str, name: &str) -> WorkloadRecord {
            let records = self.state.records();
            let found = records.iter().find(|r| r.kind == kind && r.name == name);
            found
                .unwrap_or_else(|| panic!("no record of {kind} {name} in {records:?}"))
                .clone()
        }

        fn violations(&self) -> Vec<String> {
            self.state.violations().to_vec()
        }
    }

    fn object<K: serde::de::DeserializeOwned>(value: Value) -> K {
        serde_json::from_value(value).expect("a valid object")
    }

    fn uid(name: &str) -> String {
        format!("uid-{name}")
    }

    /// A controller reference to `kind`/`name` of `api_version`.
    fn controlled_by(api_version: &str, kind: &str, name: &str) -> Value {
        json!([{ "apiVersion": api_version, "kind": kind, "name": name, "uid": uid(name), "controller": true }])
    }

    fn deployment(name: &str, replicas: i32) -> Deployment {
        object(json!({
            "metadata": { "name": name, "uid": uid(name) },
            "spec": { "replicas": replicas, "selector": {}, "template": {} },
        }))
    }

    /// A ReplicaSet, controlled by the Deployment `deployment` if any.
    fn replica_set(name: &str, replicas: i32, deployment: Option<&str>) -> ReplicaSet {
        let owners = deployment.map(|d| controlled_by("apps/v1", "Deployment", d));
        object(json!({
            "metadata": { "name": name, "uid": uid(name), "ownerReferences": owners },
            "spec": { "replicas": replicas, "selector": {} },
        }))
    }

    fn stateful_set(name: &str, replicas: i32) -> StatefulSet {
        object(json!({
            "metadata": { "name": name, "uid": uid(name) },
            "spec": { "replicas": replicas, "selector": {}, "template": {}, "serviceName": name },
        }))
    }

    fn replication_controller(name: &str, replicas: i32) -> ReplicationController {
        object(json!({
            "metadata": { "name": name, "uid": uid(name) },
            "spec": { "replicas": replicas },
        }))
    }

    /// A running pod controlled by `kind`/`owner` (none for `""`), Ready or not.
    fn pod(name: &str, kind: &str, owner: &str, ready: bool) -> Pod {
        let api_version = match kind {
            "ReplicaSet" | "StatefulSet" | "DaemonSet" => "apps/v1",
            "ReplicationController" => "v1",
            "Job" => "batch/v1",
            _ => "example.com/v1",
        };
        let owners = (!kind.is_empty()).then(|| controlled_by(api_version, kind, owner));
        let ready = if ready { "True" } else { "False" };
        object(json!({
            "metadata": { "name": name, "uid": uid(name), "ownerReferences": owners },
            "status": { "phase": "Running", "conditions": [{ "type": "Ready", "status": ready }] },
        }))
    }

    /// `pod` evicted or deleted: terminating, its Ready condition not yet updated.
    fn terminating(mut pod: Pod) -> Pod {
        pod.metadata.deletion_timestamp = Some(object(json!("2025-01-01T00:00:00Z")));
        pod
    }

    /// A Deployment of 4 mid-rollout, as its controller leaves it with maxSurge 1, maxUnavailable
    /// 1: the old ReplicaSet scaled to 3 with 3 Ready pods, the new one at 1 with a pod not
    /// Ready yet.
    fn mid_rollout(world: &mut World) -> [Pod; 3] {
        world.apply(deployment("web", 4));
        world.apply(replica_set("web-old", 3, Some("web")));
        world.apply(replica_set("web-new", 1, Some("web")));
        let old =
            ["web-old-a", "web-old-b", "web-old-c"].map(|n| pod(n, "ReplicaSet", "web-old", true));
        for pod in &old {
            world.apply(pod.clone());
        }
        world.apply(pod("web-new-a", "ReplicaSet", "web-new", false));
        old
    }

    #[test]
    fn bound_matches_the_design() {
        assert_eq!(bound(10, 90), 9);
        assert_eq!(bound(25, 90), 23);
        assert_eq!(bound(3, 90), 2);
        assert_eq!(bound(1, 90), 0);
        assert_eq!(bound(0, 90), 0);
        assert_eq!(bound(100, 90), 90);
        assert_eq!(bound(4, 50), 2);
    }

    #[test]
    fn a_deployment_mid_rollout_is_judged_as_one_workload() {
        let mut world = World::new();
        let [old_a, ..] = mid_rollout(&mut world);
        world.arm();
        assert_eq!(world.state.ready("Deployment", "web"), 3);
        assert!(world.violations().is_empty(), "{:?}", world.violations());

        // An eviction from the old ReplicaSet: 2 Ready of the Deployment's 4, below its bound 3.
        // The old ReplicaSet alone (2 Ready of its 3, bound 2) would have looked fine.
        world.apply(terminating(old_a));
        assert_eq!(bound(3, THRESHOLD), 2);
        assert_eq!(
            world.violations(),
            ["Deployment web: 2 Ready of 4 desired, below the bound 3"]
        );
        let records = world.state.records();
        assert_eq!(
            records.len(),
            1,
            "only the Deployment is a workload: {records:?}"
        );
        let web = world.record("Deployment", "web");
        assert_eq!(
            (
                web.desired,
                web.bound,
                web.min_ready,
                web.min_margin,
                web.samples
            ),
            (4, 3, 2, -1, 2)
        );
    }

    #[test]
    fn a_loss_the_bound_allows_is_no_violation_and_the_ready_pods_of_all_replica_sets_count() {
        let mut world = World::new();
        let [old_a, ..] = mid_rollout(&mut world);
        world.arm();
        world.apply(pod("web-new-a", "ReplicaSet", "web-new", true));
        // 4 Ready of 4: one may go.
        world.apply(terminating(old_a));
        assert!(world.violations().is_empty(), "{:?}", world.violations());
        let web = world.record("Deployment", "web");
        assert_eq!((web.min_ready, web.min_margin, web.samples), (3, 0, 3));
    }

    #[test]
    fn a_scale_up_raises_the_bound() {
        let mut world = World::new();
        world.apply(deployment("api", 2));
        world.apply(replica_set("api-1", 2, Some("api")));
        let pods = ["api-1-a", "api-1-b"].map(|n| pod(n, "ReplicaSet", "api-1", true));
        for pod in &pods {
            world.apply(pod.clone());
        }
        world.arm();
        assert_eq!(world.record("Deployment", "api").bound, 1);

        world.apply(deployment("api", 10));
        world.apply(replica_set("api-1", 10, Some("api")));
        let api = world.record("Deployment", "api");
        assert_eq!((api.desired, api.bound, api.min_margin), (10, 9, -7));
        // Below the new bound through no one's fault: the new pods are not Ready yet.
        assert!(world.violations().is_empty(), "{:?}", world.violations());

        // Losing a pod now breaks the raised bound (with 2 desired, 1 Ready of 2 would have been
        // fine).
        world.apply(terminating(pods[0].clone()));
        assert_eq!(
            world.violations(),
            ["Deployment api: 1 Ready of 10 desired, below the bound 9"]
        );
    }

    #[test]
    fn a_scale_down_lowers_the_bound() {
        let mut world = World::new();
        world.apply(stateful_set("db", 4));
        let pods = ["db-0", "db-1", "db-2", "db-3"].map(|n| pod(n, "StatefulSet", "db", true));
        for pod in &pods {
            world.apply(pod.clone());
        }
        world.arm();
        world.apply(stateful_set("db", 2));
        world.apply(terminating(pods[3].clone()));
        world.delete(pods[3].clone());
        world.apply(terminating(pods[2].clone()));
        assert!(world.violations().is_empty(), "{:?}", world.violations());
        // 2 Ready of 2: one may go, a second may not.
        world.apply(terminating(pods[1].clone()));
        world.apply(terminating(pods[0].clone()));
        assert_eq!(
            world.violations(),
            ["StatefulSet db: 0 Ready of 2 desired, below the bound 1"]
        );
        let db = world.record("StatefulSet", "db");
        assert_eq!((db.desired, db.bound, db.min_ready), (2, 1, 0));
    }

    #[test]
    fn a_relist_forgets_the_pods_deleted_during_the_gap() {
        let mut world = World::new();
        world.apply(replication_controller("legacy", 3));
        let pods = ["legacy-a", "legacy-b", "legacy-c"]
            .map(|n| pod(n, "ReplicationController", "legacy", true));
        for pod in &pods {
            world.apply(pod.clone());
        }
        world.arm();
        // While the watch was down, two pods were deleted and one replacement is not Ready yet.
        let replacement = pod("legacy-d", "ReplicationController", "legacy", false);
        world.relist(vec![pods[0].clone(), replacement]);
        assert_eq!(world.state.ready("ReplicationController", "legacy"), 1);
        assert_eq!(
            world.violations(),
            ["ReplicationController legacy: 1 Ready of 3 desired, below the bound 2"]
        );
    }

    #[test]
    fn a_bare_replica_set_counts_for_itself() {
        let mut world = World::new();
        world.apply(replica_set("cache", 2, None));
        let pods = ["cache-a", "cache-b"].map(|n| pod(n, "ReplicaSet", "cache", true));
        for pod in &pods {
            world.apply(pod.clone());
        }
        world.arm();
        world.apply(terminating(pods[0].clone()));
        world.apply(terminating(pods[1].clone()));
        assert_eq!(
            world.violations(),
            ["ReplicaSet cache: 0 Ready of 2 desired, below the bound 1"]
        );
    }

    #[test]
    fn another_controller_is_judged_with_the_d_it_was_told() {
        for (expected, violations) in [
            // Told: 4 desired (bound 3), of which 3 run: losing one breaks the bound.
            (
                Some(4),
                vec!["PodSet cache: 2 Ready of 4 desired, below the bound 3"],
            ),
            // Inferred from the 3 pods at arming (bound 2): the same loss is allowed.
            (None, vec![]),
        ] {
            let mut world = World::new();
            let pods = ["cache-a", "cache-b", "cache-c"].map(|n| pod(n, "PodSet", "cache", true));
            for pod in &pods {
                world.apply(pod.clone());
            }
            if let Some(desired) = expected {
                world.state.expect("PodSet", "cache", desired);
            }
            world.arm();
            world.apply(terminating(pods[0].clone()));
            assert_eq!(world.violations(), violations, "expected d {expected:?}");
        }
    }

    #[test]
    fn another_controllers_d_is_inferred_from_its_live_pods_and_raised_when_more_appear() {
        let mut world = World::new();
        world.apply(pod("q-a", "PodSet", "q", true));
        world.apply(pod("q-b", "PodSet", "q", true));
        world.apply(terminating(pod("q-old", "PodSet", "q", true)));
        world.arm();
        assert_eq!(world.record("PodSet", "q").desired, 2);
        world.apply(pod("q-c", "PodSet", "q", false));
        world.apply(pod("q-d", "PodSet", "q", false));
        let q = world.record("PodSet", "q");
        assert_eq!((q.desired, q.bound), (4, 3));
        assert!(world.violations().is_empty(), "{:?}", world.violations());
    }

    #[test]
    #[should_panic(expected = "reads d of a Deployment from its spec")]
    fn a_built_in_workloads_d_is_not_told() {
        World::new().state.expect("Deployment", "web", 3);
    }

    #[test]
    fn daemon_set_job_and_unmanaged_pods_are_no_workload() {
        let mut world = World::new();
        let pods = [
            pod("logs-a", "DaemonSet", "logs", true),
            pod("report-a", "Job", "report", true),
            pod("debug", "", "", true),
        ];
        for pod in &pods {
            world.apply(pod.clone());
        }
        world.arm();
        for pod in pods {
            world.apply(terminating(pod));
        }
        assert!(world.violations().is_empty(), "{:?}", world.violations());
        assert_eq!(world.state.records(), []);
    }

    #[test]
    fn a_workload_being_deleted_or_not_yet_seen_is_not_judged() {
        let mut world = World::new();
        world.apply(replica_set("web-1", 2, Some("web")));
        let pods = ["web-1-a", "web-1-b"].map(|n| pod(n, "ReplicaSet", "web-1", true));
        for pod in &pods {
            world.apply(pod.clone());
        }
        world.arm();
        // The Deployment is not seen (yet): its ReplicaSet is no bare ReplicaSet.
        assert_eq!(world.state.records(), []);
        let mut web = deployment("web", 2);
        world.apply(web.clone());
        assert_eq!(world.record("Deployment", "web").min_ready, 2);
        web.metadata.deletion_timestamp = Some(object(json!("2025-01-01T00:00:00Z")));
        world.apply(web);
        for pod in pods {
            world.apply(terminating(pod));
        }
        assert!(world.violations().is_empty(), "{:?}", world.violations());
    }

    #[test]
    fn nothing_is_judged_before_every_watch_has_listed() {
        let mut world = World {
            state: State::new(THRESHOLD),
            now: Instant::now(),
        };
        world.relist(vec![deployment("web", 2)]);
        world.relist(vec![replica_set("web-1", 2, Some("web"))]);
        world.relist::<ReplicationController>(vec![]);
        world.relist::<StatefulSet>(vec![]);
        world.arm();
        // The pods are still being listed: none is known to be Ready yet.
        world.state.observe(Event::<Pod>::Init, world.now);
        assert_eq!(world.state.records(), []);
        for name in ["web-1-a", "web-1-b"] {
            let pod = pod(name, "ReplicaSet", "web-1", true);
            world.state.observe(Event::InitApply(pod), world.now);
        }
        world.state.observe(Event::<Pod>::InitDone, world.now);
        let web = world.record("Deployment", "web");
        assert_eq!((web.min_ready, web.samples), (2, 1));
    }

    /// A rollout of a Deployment of 10 whose controller takes two old pods down at once
    /// (maxUnavailable 25%): 8 Ready, below the bound 9.
    fn rollout_step(world: &mut World) -> Vec<Pod> {
        world.apply(deployment("big", 10));
        world.apply(replica_set("big-1", 10, Some("big")));
        let pods: Vec<Pod> = (0..10)
            .map(|i| pod(&format!("big-1-{i}"), "ReplicaSet", "big-1", true))
            .collect();
        for pod in &pods {
            world.apply(pod.clone());
        }
        world.arm();
        world.later(60);
        world.apply(replica_set("big-2", 2, Some("big")));
        world.apply(replica_set("big-1", 8, Some("big")));
        world.apply(terminating(pods[0].clone()));
        world.apply(terminating(pods[1].clone()));
        pods
    }

    #[test]
    fn a_descent_right_after_a_scale_down_is_a_violation_by_default() {
        let mut world = World::new();
        rollout_step(&mut world);
        assert_eq!(
            world.violations(),
            ["Deployment big: 8 Ready of 10 desired, below the bound 9"]
        );
        assert_eq!(world.record("Deployment", "big").excused, 0);
    }

    #[test]
    fn a_grace_after_a_scale_down_excuses_descents_within_it_only() {
        let mut world = World::new();
        world.state.set_grace(Duration::from_secs(5));
        let pods = rollout_step(&mut world);
        assert!(world.violations().is_empty(), "{:?}", world.violations());
        assert_eq!(world.record("Deployment", "big").excused, 1);
        world.later(5);
        world.apply(terminating(pods[2].clone()));
        assert_eq!(
            world.violations(),
            ["Deployment big: 7 Ready of 10 desired, below the bound 9"]
        );
    }

    #[test]
    fn a_pod_of_a_deleted_namesake_counts_for_nobody() {
        let mut world = World::new();
        world.apply(stateful_set("db", 1));
        let mut stale = pod("db-0", "StatefulSet", "db", true);
        if let Some(owner) = stale
            .metadata
            .owner_references
            .as_mut()
            .and_then(|o| o.first_mut())
        {
            owner.uid = "uid-of-an-older-db".to_owned();
        }
        world.apply(stale);
        assert_eq!(world.state.ready("StatefulSet", "db"), 0);
        world.apply(pod("db-0", "StatefulSet", "db", true));
        assert_eq!(world.state.ready("StatefulSet", "db"), 1);
    }

    /// A pod of `replica_set`, Ready since `since` (RFC 3339).
    fn ready_since(name: &str, replica_set: &str, since: &str) -> Pod {
        let mut pod = pod(name, "ReplicaSet", replica_set, true);
        let conditions = pod.status.as_mut().and_then(|s| s.conditions.as_mut());
        for condition in conditions.into_iter().flatten() {
            condition.last_transition_time = Some(object(json!(since)));
        }
        pod
    }

    /// With `minReadySeconds`, a replacement Ready for less than that is not available yet: taking
    /// another pod then keeps the Ready count at the bound but takes the available count below
    /// it, which is a violation too. Control: the same eviction once the replacement is
    /// available.
    #[test]
    fn with_min_ready_seconds_available_pods_are_judged_beside_ready_ones() {
        let run = |second_eviction_at: &str| {
            let mut world = World::new();
            let mut web: Deployment = deployment("web", 3);
            if let Some(spec) = web.spec.as_mut() {
                spec.min_ready_seconds = Some(30);
            }
            world.apply(web);
            world.apply(replica_set("web-1", 3, Some("web")));
            let [a, b, _] = ["a", "b", "c"].map(|n| {
                let pod = ready_since(n, "web-1", "2026-01-01T00:00:00Z");
                world.apply(pod.clone());
                pod
            });
            world
                .state
                .set_wall_clock("2026-01-01T00:10:00Z".parse().unwrap());
            world.arm();
            // One evicted (bound 2 of 3), its replacement Ready at 00:10:00.
            world.apply(terminating(a.clone()));
            world.delete(a);
            world.apply(ready_since("a2", "web-1", "2026-01-01T00:10:00Z"));
            world
                .state
                .set_wall_clock(second_eviction_at.parse().unwrap());
            world.apply(terminating(b));
            (world.violations(), world.record("Deployment", "web"))
        };
        let (violations, web) = run("2026-01-01T00:10:05Z");
        assert_eq!(
            violations,
            [
                "Deployment web: 1 available (Ready for minReadySeconds) of 3 desired, below the bound 2"
            ]
        );
        assert_eq!((web.min_ready, web.min_available), (2, 1));
        let (violations, web) = run("2026-01-01T00:10:30Z");
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!((web.min_ready, web.min_available), (2, 2));
    }
}
