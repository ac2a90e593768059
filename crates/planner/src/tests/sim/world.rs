//! The model cluster the simulation runs: its objects (the view the planner sees) and the truth it
//! keeps beside them (each pod's controller, each workload's `d`, what is due when), built from a
//! scenario; how it moves on is in [`super::controllers`].

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use k8sm_api::{MaxConcurrentNodes, UnmanagedPodPolicy};

use super::scenarios::{Kind, Mode, Rollout, Scenario, WorkloadSpec, stuck, surge_and_unavailable};
use crate::{
    ClusterView, ControllerRef, NodeView, OwnerKind, OwnerView, PdbView, PodPhase, PodView, report,
    testing::{NEW, at, deployment, labels_selector, node, owner, policy, unmanaged_pod},
    tests::{
        oracle,
        support::{Rng, Tally},
    },
};

/// `nodeProgressDeadline` of the model's policy, in minutes (one step is at least a minute).
pub(super) const DEADLINE_MINUTES: i64 = 5;

/// A controller of pods: a ReplicaSet (of a Deployment or a Rollout, or bare), a
/// ReplicationController, a StatefulSet, or an operator owning its pods directly.
pub(super) struct Set {
    pub(super) reference: ControllerRef,
    pub(super) workload: usize,
    /// Pods it keeps running (`spec.replicas`).
    pub(super) replicas: u32,
    /// Its pods are never schedulable (the new ReplicaSet of a stuck rollout).
    unschedulable: bool,
    /// An operator: recreates a deleted pod after a delay, and is not in the view.
    pub(super) operator: bool,
}

/// A workload of the scenario, with the truth the checks read: its `d` and whether it is stuck.
pub(super) struct Workload {
    /// The UID of the top-level controller: the key of its truth.
    pub(super) key: String,
    pub(super) name: String,
    pub(super) kind: Kind,
    pub(super) desired: u32,
    /// Its sets, oldest first.
    pub(super) sets: Vec<usize>,
    /// The Deployment object, for a Deployment.
    deployment: Option<OwnerView>,
    /// The Rollout (a kind k8sm does not watch: not in the view) that controls its ReplicaSets.
    rollout: Option<OwnerView>,
    pub(super) min_available: Option<u32>,
    /// Stuck at the scenario's threshold: its pods never move.
    pub(super) stuck: bool,
    /// The last surge move record its Deployment controller acted on, and when it did.
    pub(super) surge_seen: Option<(String, DateTime<Utc>)>,
}

impl Workload {
    /// Known to k8sm by its `spec.replicas`.
    pub(super) fn known(&self) -> bool {
        self.kind.known()
    }
}

/// The model cluster: the view the planner sees, what the model knows beside it, and what is due
/// when. It holds Deployments doing real rollouts (the model's Deployment controller scales a new
/// ReplicaSet up and the old ones down within maxSurge/maxUnavailable; a rollout may be under way,
/// paused half-way, start mid-upgrade, or be stuck with new pods that are never schedulable), bare
/// ReplicaSets, ReplicationControllers, StatefulSets, an operator of a kind k8sm does not know that
/// recreates a deleted pod only after a delay (its `d` is not visible to the planner), an
/// Argo-Rollout-like controller of ReplicaSets, pods that never become Ready, budgets recomputed
/// each step from Ready pods, a scheduler, executors that restart on kamikaze, the controller's
/// bookkeeping of evictions in flight, and (optionally) failures k8sm did not cause.
pub(super) struct World {
    pub(super) view: ClusterView,
    pub(super) rng: Rng,
    pub(super) threshold: u8,
    pub(super) age_out: bool,
    pub(super) workloads: Vec<Workload>,
    pub(super) sets: Vec<Set>,
    /// The set of each workload pod, by UID.
    pub(super) pod_set: BTreeMap<String, usize>,
    /// Step at which a pod that is not Ready becomes Ready, by UID (absent: never, or Ready
    /// already).
    pub(super) ready_at: BTreeMap<String, usize>,
    /// Step at which a kamikazed node comes back, by name.
    pub(super) restart_at: BTreeMap<String, usize>,
    /// Operator recreations due: (step, set).
    pub(super) recreate: Vec<(usize, usize)>,
    /// The sizes the controller remembers of unknown kinds, and when it last evicted from each.
    pub(super) sizes: BTreeMap<String, u32>,
    pub(super) last_eviction: BTreeMap<String, DateTime<Utc>>,
    next_pod: usize,
    pub(super) now: DateTime<Utc>,
    /// How often the situations the checks are about occurred, for
    /// `the_model_reaches_the_cases_that_matter`.
    pub(super) seen: Tally,
    /// The upgrade report of the run, and what the model knows to check it against.
    pub(super) truth: Truth,
}

impl World {
    /// The cluster at the start of scenario `s`: its old nodes, one upgraded spare, the policy,
    /// every workload's pods (Ready, Ready after a while, or never) with their budgets, and
    /// unmanaged pods.
    pub(super) fn new(s: &Scenario) -> Self {
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
            if s.surge {
                spec.workloads.surge = k8sm_api::Surge::SingleReplica;
            }
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
            sizes: BTreeMap::new(),
            last_eviction: BTreeMap::new(),
            next_pod: 0,
            now: at(0),
            seen: Tally::default(),
            truth: Truth::default(),
        };
        for (k, spec) in s.workloads.iter().enumerate() {
            world.add_workload(k, spec, s);
        }
        for i in 0..s.unmanaged {
            let on = world.old_node(s, false);
            world
                .view
                .pods
                .push(unmanaged_pod("ns", &format!("loose-{i}"), &on).into());
        }
        world.update_budgets();
        world
    }

    /// An old node for an initial pod. With stuck workloads, their pods get nodes of their own (the
    /// last third of the old nodes) and the others the rest: a pod that waits behind a stuck
    /// pod on its node (an unknown kind's pods go only once the node's workload pods have left)
    /// would make its own workload stuck too, and what is stuck would no longer be simple to
    /// tell.
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
        // (replicas, unschedulable, how many of its first pods start not Ready for a while) per
        // set.
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
            stuck: stuck(spec, s.threshold, s.surge && s.cordon),
            surge_seen: None,
        };
        let reference = match spec.kind {
            Kind::Deployment(rollout) => {
                // Its last rollout is complete when it has one ReplicaSet and every pod is Ready.
                let dep = deployment("ns", &name, d).rollout(|r| {
                    r.paused = rollout == Rollout::Paused;
                    r.complete = matches!(rollout, Rollout::Steady | Rollout::StartsAt(_))
                        && spec.never_ready == 0;
                });
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
                self.view.owners.push(dep.clone().into());
                workload.deployment = Some(dep);
                None
            }
            Kind::Direct(kind) => {
                let o = owner(kind.into(), "ns", &name, Some(d));
                workload.key = o.uid.clone();
                sets.push((d, false, 0));
                Some(o)
            }
            Kind::Operator => {
                let o = owner(OwnerKind::Other("KafkaNodePool".into()), "ns", &name, None);
                workload.key = o.unseen_key();
                sets.push((d, false, 0));
                None
            }
            Kind::OperatorReplicaSets => {
                let rollout = owner(OwnerKind::Other("Rollout".into()), "ns", &name, None);
                workload.key = rollout.unseen_key();
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
                    let pod = self.view.pods.iter_mut().find(|p| *p.uid == *uid).unwrap();
                    let pod = std::sync::Arc::make_mut(pod);
                    pod.ready = false;
                    pod.ready_changed = Some(self.now);
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
                ..Default::default()
            });
        }
    }

    /// Adds the `i`-th set of workload `w`; `owner_object` is the object of a bare ReplicaSet,
    /// ReplicationController or StatefulSet.
    pub(super) fn add_set(
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
            self.view.owners.push(o.into());
            (reference, false)
        } else if let Some(top) = workload.deployment.as_ref().or(workload.rollout.as_ref()) {
            let mut rs = top.replica_set(&format!("{}-{i}", workload.name));
            rs.desired = Some(replicas);
            let reference = rs.reference();
            self.view.owners.push(rs.into());
            (reference, false)
        } else {
            // An operator owning its pods: not in the view.
            let kafka = OwnerKind::Other("KafkaNodePool".into());
            let reference = owner(kafka, "ns", &workload.name, None).reference();
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

    /// Creates a pod of `set`: Ready at once on `on` (the initial pods), or scheduled and Ready
    /// after a while.
    pub(super) fn create_pod(&mut self, set: usize, step: usize, on: Option<String>) -> String {
        let s = &self.sets[set];
        let workload = &self.workloads[s.workload];
        let name = format!("{}-p{}", workload.name, self.next_pod);
        self.next_pod += 1;
        let mut pod = PodView {
            controller: Some(std::sync::Arc::new(s.reference.clone())),
            ..unmanaged_pod("ns", &name, "")
        }
        .label("app", &workload.name);
        pod.created = Some(self.now);
        if s.unschedulable {
            pod.node_name = None;
            pod.phase = PodPhase::Pending;
            pod.ready = false;
        } else if let Some(on) = on {
            pod.node_name = Some(on.into());
        } else {
            pod.node_name = Some(self.schedule().into());
            pod.ready = false;
            self.ready_at
                .insert(pod.uid.to_string(), step + 1 + self.rng.below(3));
        }
        let uid = pod.uid.clone();
        self.pod_set.insert(uid.to_string(), set);
        self.view.pods.push(pod.into());
        uid.to_string()
    }

    /// The workload of a pod, if it has one.
    pub(super) fn workload_of(&self, pod_uid: &str) -> Option<usize> {
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

    pub(super) fn ready(&self, w: usize) -> u32 {
        self.counts(w).0
    }

    /// Whether `pod`, not Ready, is broken by the model's clock and the pods' times: not Ready for
    /// the model's nodeProgressDeadline itself, or of a workload with no pod Ready and one live
    /// pod broken.
    pub(super) fn broken(&self, pod: &PodView) -> bool {
        let deadline = chrono::Duration::minutes(DEADLINE_MINUTES);
        let own = |p: &PodView| {
            !p.ready
                && p.ready_changed
                    .or(p.created)
                    .is_some_and(|t| t + deadline <= self.now)
        };
        if pod.ready {
            return false;
        }
        own(pod)
            || self.workload_of(&pod.uid).is_some_and(|w| {
                self.ready(w) == 0
                    && self
                        .view
                        .pods
                        .iter()
                        .any(|p| !p.terminating && self.workload_of(&p.uid) == Some(w) && own(p))
            })
    }

    /// The model's truth about workload `w` before a plan: `d`, Ready, and going (for an operator,
    /// deleted and not recreated yet; a terminating pod is gone).
    pub(super) fn truth(&self, w: usize) -> oracle::Truth {
        let (ready, _terminating, all) = self.counts(w);
        let d = self.workloads[w].desired;
        let missing = if self.workloads[w].known() {
            0
        } else {
            d.saturating_sub(all)
        };
        // A terminating pod is gone for its workload, as the disruption controller counts it.
        oracle::Truth {
            desired: d,
            ready,
            going: missing,
        }
    }

    /// Nodes that hold a pod of a stuck workload: those never drain.
    pub(super) fn stuck_nodes(&self) -> BTreeSet<String> {
        self.view
            .pods
            .iter()
            .filter(|p| {
                self.workload_of(&p.uid)
                    .is_some_and(|w| self.workloads[w].stuck)
            })
            .filter_map(|p| p.node_name.as_deref().map(str::to_owned))
            .collect()
    }

    /// Every node but `except` runs the target executor and carries no k8sm state.
    pub(super) fn upgraded(&self, except: &BTreeSet<String>) -> bool {
        self.view
            .nodes
            .iter()
            .filter(|n| !except.contains(&*n.name))
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

    /// Whether the model has nothing pending: no pod starting, terminating or due, no executor
    /// restarting.
    pub(super) fn idle(&self) -> bool {
        self.ready_at.is_empty()
            && self.restart_at.is_empty()
            && self.recreate.is_empty()
            && self.view.pods.iter().all(|p| !p.terminating)
    }
}

/// What the model knows of the run, beside the record.
#[derive(Default)]
pub(super) struct Truth {
    pub(super) runs: report::Runs,
    pub(super) evicted: u32,
    pub(super) deleted_unmanaged: u32,
    /// Per workload disrupted: the fewest Ready pods seen, and the pods k8sm evicted or moved.
    pub(super) min_ready: BTreeMap<usize, u32>,
    pub(super) disruptions: BTreeMap<usize, u32>,
    /// Disrupted and not whole again.
    pub(super) recovering: BTreeSet<usize>,
}
