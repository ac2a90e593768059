//! View builders and a model of the controller's execution, for the tests of the planner, the
//! controller and the plugin (feature `testing`).
//!
//! Builders start from a plain healthy object and are refined with chained methods:
//! `node("n1").marked(at(0)).admitted(at(1))`, `replica_set("shop", "web", 3).pod("web-1",
//! "n1").not_ready()`.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8sm_api::{ExecutorUpgradePolicySpec, KamikazeMechanism};

use crate::{
    ActionKind, ClusterView, ControllerRef, InFlightEviction, NodeView, OwnerKind, OwnerView,
    PdbView, Plan, PodPhase, PodView, PolicyView, RolloutView,
};

/// The executor ID that nodes run before the upgrade.
pub const OLD: &str = "sha256:old";
/// The target executor ID of [`policy`].
pub const NEW: &str = "sha256:new";

/// The fixed origin of test time: 2026-01-01T00:00:00Z.
/// Pods as a view holds them (shared).
pub fn shared_pods(pods: impl IntoIterator<Item = PodView>) -> Vec<std::sync::Arc<PodView>> {
    pods.into_iter().map(std::sync::Arc::new).collect()
}

/// Owners as a view holds them (shared).
pub fn shared_owners(owners: impl IntoIterator<Item = OwnerView>) -> Vec<Arc<OwnerView>> {
    owners.into_iter().map(Arc::new).collect()
}

pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .expect("a valid date")
}

/// `minutes` after [`t0`].
pub fn at(minutes: i64) -> DateTime<Utc> {
    t0() + Duration::minutes(minutes)
}

/// A ready node running [`OLD`], with an InternalIP, nothing marked.
pub fn node(name: &str) -> NodeView {
    NodeView {
        name: name.to_owned(),
        uid: format!("uid-{name}"),
        executor_id: Some(OLD.to_owned()),
        internal_ip: Some("10.0.0.1".to_owned()),
        ready: true,
        ..NodeView::default()
    }
}

impl NodeView {
    /// Runs executor `id`.
    pub fn executor(mut self, id: &str) -> Self {
        self.executor_id = Some(id.to_owned());
        self
    }

    /// Sets a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Carries the opt-out label.
    pub fn opted_out(self) -> Self {
        self.label(
            k8sm_api::keys::UPGRADE_OPT_OUT_LABEL,
            k8sm_api::keys::UPGRADE_OPT_OUT_VALUE,
        )
    }

    /// Fully marked at `when`: annotation, label and taint.
    pub fn marked(mut self, when: DateTime<Utc>) -> Self {
        self.incompatible_since = Some(when.to_rfc3339());
        self.incompatible_label = true;
        self.has_k8sm_taint = true;
        self
    }

    /// Admitted at `when` and cordoned by k8sm, without a progress record (the first pass writes
    /// one).
    pub fn admitted(mut self, when: DateTime<Utc>) -> Self {
        self.draining_since = Some(when.to_rfc3339());
        self.cordoned_by_k8sm = true;
        self.unschedulable = true;
        self
    }

    /// Its progress record: `pods_left` pods left at `when`.
    pub fn progressed(mut self, when: DateTime<Utc>, pods_left: u32) -> Self {
        self.drain_progress = Some(crate::drain_progress(when, pods_left));
        self
    }

    /// Gave up its drain slot at `when` (and is no longer admitted or cordoned by k8sm).
    pub fn stalled(mut self, when: DateTime<Utc>) -> Self {
        self.stalled_since = Some(when.to_rfc3339());
        self.draining_since = None;
        self.drain_progress = None;
        self.cordoned_by_k8sm = false;
        self.unschedulable = false;
        self
    }

    /// Has room for pods requesting `cpu_millis` in all (memory and pods without limit).
    pub fn allocatable(mut self, cpu_millis: u64) -> Self {
        self.allocatable = Some(crate::Resources {
            cpu_millis,
            memory_bytes: u64::MAX,
            pods: u64::MAX,
        });
        self
    }

    /// Told to terminate at `when`, recording the executor it runs now.
    pub fn kamikazed(mut self, when: DateTime<Utc>) -> Self {
        self.kamikaze = Some(when.to_rfc3339());
        self.kamikaze_executor_id = Some(self.executor_id.clone().unwrap_or_default());
        self
    }
}

/// An owner of `kind`; UID `Kind/namespace/name`.
pub fn owner(kind: OwnerKind, namespace: &str, name: &str, desired: Option<u32>) -> OwnerView {
    OwnerView {
        uid: format!("{kind}/{namespace}/{name}"),
        kind,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        desired,
        controller: None,
        exists: true,
        replacing: false,
        min_ready_seconds: 0,
        revision: 0,
        rollout: None,
    }
}

/// A ReplicaSet of `desired` replicas.
pub fn replica_set(namespace: &str, name: &str, desired: u32) -> OwnerView {
    owner(OwnerKind::ReplicaSet, namespace, name, Some(desired))
}

/// A Deployment of `desired` replicas (its ReplicaSets: [`OwnerView::replica_set`]).
pub fn deployment(namespace: &str, name: &str, desired: u32) -> OwnerView {
    OwnerView {
        rollout: Some(RolloutView::default()),
        ..owner(OwnerKind::Deployment, namespace, name, Some(desired))
    }
}

/// A ReplicationController of `desired` replicas.
pub fn replication_controller(namespace: &str, name: &str, desired: u32) -> OwnerView {
    owner(
        OwnerKind::ReplicationController,
        namespace,
        name,
        Some(desired),
    )
}

/// A StatefulSet of `desired` replicas.
pub fn stateful_set(namespace: &str, name: &str, desired: u32) -> OwnerView {
    owner(OwnerKind::StatefulSet, namespace, name, Some(desired))
}

/// A Job.
pub fn job(namespace: &str, name: &str) -> OwnerView {
    owner(OwnerKind::Job, namespace, name, None)
}

/// A DaemonSet.
pub fn daemon_set(namespace: &str, name: &str) -> OwnerView {
    owner(OwnerKind::DaemonSet, namespace, name, None)
}

impl OwnerView {
    /// Controlled by `controller` (a ReplicaSet of a Deployment, or of a controller of another
    /// kind).
    pub fn controlled_by(mut self, controller: &OwnerView) -> Self {
        self.controller = Some(controller.reference());
        self
    }

    /// A Deployment whose rollout `edit` changed (from the apiserver's defaults, its last rollout
    /// complete).
    pub fn rollout(mut self, edit: impl FnOnce(&mut RolloutView)) -> Self {
        edit(self.rollout.get_or_insert_with(RolloutView::default));
        self
    }

    /// A ReplicaSet `name` of this Deployment, of zero replicas: the Deployment's `desired` is what
    /// counts.
    pub fn replica_set(&self, name: &str) -> OwnerView {
        replica_set(&self.namespace, name, 0).controlled_by(self)
    }

    /// The key its pods count for when it is not in the view, as for a controller of a kind k8sm
    /// does not know: the whole reference (see [`ControllerRef::key`]).
    pub fn unseen_key(&self) -> String {
        self.reference().key().to_owned()
    }

    /// Its controller reference, as a pod (or ReplicaSet) carries it.
    pub fn reference(&self) -> ControllerRef {
        let api_version = match self.kind.group() {
            Some("") => "v1".to_owned(),
            Some(group) => format!("{group}/v1"),
            None => "example.com/v1".to_owned(),
        };
        ControllerRef::new(
            &self.namespace,
            &api_version,
            self.kind.as_str(),
            &self.name,
            &self.uid,
        )
    }

    /// A ready, running pod of this owner on `node`; UID `namespace/name`.
    pub fn pod(&self, name: &str, node: &str) -> PodView {
        PodView {
            controller: Some(Arc::new(self.reference())),
            ..unmanaged_pod(&self.namespace, name, node)
        }
    }
}

/// A ready, running pod without a controller on `node`; UID `namespace/name`.
pub fn unmanaged_pod(namespace: &str, name: &str, node: &str) -> PodView {
    PodView {
        namespace: namespace.into(),
        name: name.into(),
        uid: format!("{namespace}/{name}").into(),
        node_name: Some(node.into()),
        phase: PodPhase::Running,
        ready: true,
        created: Some(t0()),
        ..PodView::default()
    }
}

impl PodView {
    /// Not ready, since a time the view does not tell (no Ready condition time, no creation time):
    /// never broken.
    pub fn not_ready(mut self) -> Self {
        self.ready = false;
        self.ready_changed = None;
        self.created = None;
        self
    }

    /// Not ready since `since` (the Ready condition's last change): broken once
    /// `nodeProgressDeadline` has passed.
    pub fn not_ready_since(mut self, since: DateTime<Utc>) -> Self {
        self.ready = false;
        self.ready_changed = Some(since);
        self
    }

    /// Not ready since [`t0`]: broken by any later plan under the default `nodeProgressDeadline`
    /// (10 minutes).
    pub fn broken(self) -> Self {
        self.not_ready_since(t0())
    }

    /// Terminating (deletionTimestamp set).
    pub fn terminating(mut self) -> Self {
        self.terminating = true;
        self
    }

    /// In phase `phase` (finished phases are not ready).
    pub fn phase(mut self, phase: PodPhase) -> Self {
        self.phase = phase;
        self.ready &= phase == PodPhase::Running;
        self
    }

    /// Sets a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        Arc::make_mut(&mut self.labels).insert(key.to_owned(), value.to_owned());
        self
    }

    /// Sets an annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Requests `cpu_millis` of CPU.
    pub fn requests(mut self, cpu_millis: u64) -> Self {
        self.requests.cpu_millis = cpu_millis;
        self
    }

    /// A mirror pod.
    pub fn mirror(mut self) -> Self {
        self.mirror = true;
        self
    }

    /// Edits what may pin the pod to a node.
    pub fn pinned(mut self, edit: impl FnOnce(&mut crate::PodPins)) -> Self {
        edit(self.pins.get_or_insert_with(Default::default));
        self
    }
}

/// A required node selector of one term per entry, each term requiring the hostnames given
/// (`kubernetes.io/hostname` In one value each).
pub fn hostname_terms(terms: &[&[&str]]) -> crate::NodePin {
    crate::NodePin {
        terms: terms
            .iter()
            .map(|t| {
                t.iter()
                    .map(|h| crate::NodeName::Hostname((*h).to_owned()))
                    .collect()
            })
            .collect(),
    }
}

/// A policy with target [`NEW`] and every other field at its default.
pub fn policy(name: &str) -> PolicyView {
    PolicyView {
        name: name.to_owned(),
        generation: Some(1),
        spec: ExecutorUpgradePolicySpec {
            target_executor_id: Some(NEW.to_owned()),
            ..ExecutorUpgradePolicySpec::default()
        },
        deleting: false,
        has_finalizer: true,
        deleted_nodes: Vec::new(),
        pause_annotation: Default::default(),
    }
}

impl PolicyView {
    /// Edits the spec.
    pub fn with(mut self, edit: impl FnOnce(&mut ExecutorUpgradePolicySpec)) -> Self {
        edit(&mut self.spec);
        self
    }

    /// Selects nodes labelled `key=value`.
    pub fn selecting(self, key: &str, value: &str) -> Self {
        self.with(|s| s.node_selector = labels_selector(&[(key, value)]))
    }
}

/// A selector of `matchLabels` only.
pub fn labels_selector(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        match_expressions: None,
    }
}

/// A PodDisruptionBudget over pods labelled with `pairs`, allowing `allowed` disruptions.
pub fn pdb(namespace: &str, name: &str, pairs: &[(&str, &str)], allowed: i32) -> PdbView {
    PdbView {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        selector: Some(labels_selector(pairs)),
        disruptions_allowed: allowed,
        ..Default::default()
    }
}

/// Applies a plan's actions to a view the way the controller executes them against the cluster,
/// with caches that are up to date at once: evicted and deleted pods become terminating, nodes get
/// the contract keys.
pub fn apply(view: &mut ClusterView, plan: &Plan) {
    let mut nodes: BTreeMap<String, usize> = BTreeMap::new();
    for (i, node) in view.nodes.iter().enumerate() {
        nodes.insert(node.name.clone(), i);
    }
    let mut deleted_nodes = Vec::new();
    for action in &plan.actions {
        let node = action.kind.node().and_then(|n| nodes.get(n)).copied();
        match (&action.kind, node) {
            (
                ActionKind::Mark {
                    incompatible_since,
                    claim,
                    ..
                },
                Some(i),
            ) => {
                let n = &mut view.nodes[i];
                if let Some(t) = incompatible_since {
                    n.incompatible_since = Some(t.to_rfc3339());
                }
                n.incompatible_label = true;
                n.has_k8sm_taint = true;
                n.marked_by_k8sm |= *claim;
            }
            (
                ActionKind::Admit {
                    at,
                    pods_left,
                    cordon,
                    ..
                },
                Some(i),
            ) => {
                let n = &mut view.nodes[i];
                n.draining_since = Some(at.to_rfc3339());
                n.drain_progress = Some(crate::drain_progress(*at, *pods_left));
                n.stalled_since = None;
                if *cordon && !n.unschedulable {
                    n.unschedulable = true;
                    n.cordoned_by_k8sm = true;
                }
            }
            (ActionKind::Progress { at, pods_left, .. }, Some(i)) => {
                view.nodes[i].drain_progress = Some(crate::drain_progress(*at, *pods_left));
            }
            (ActionKind::Stall { at, uncordon, .. }, Some(i)) => {
                let n = &mut view.nodes[i];
                n.stalled_since = Some(at.to_rfc3339());
                n.draining_since = None;
                n.drain_progress = None;
                n.cordoned_by_k8sm = false;
                if *uncordon {
                    n.unschedulable = false;
                }
            }
            (ActionKind::Cordon { .. }, Some(i)) => {
                view.nodes[i].unschedulable = true;
                view.nodes[i].cordoned_by_k8sm = true;
            }
            (
                ActionKind::Surge {
                    pod,
                    deployment,
                    at,
                },
                _,
            ) => {
                // The Deployment's controller sees a new template: a rollout under way, until the
                // new pod is available and the old one gone (which the caller
                // simulates, if it wants to).
                if let Some(d) = view.owners.iter_mut().find(|o| *o.uid == *deployment.uid) {
                    let d = Arc::make_mut(d);
                    d.replacing = true;
                    let rollout = d.rollout.get_or_insert_with(RolloutView::default);
                    rollout.complete = false;
                    rollout.surge_move = Some(crate::surge_move_record(*at, pod.uid()));
                }
            }
            (ActionKind::Evict { pod, .. } | ActionKind::DeletePod { pod, .. }, _) => {
                if let Some(p) = view.pods.iter_mut().find(|p| *p.uid == *pod.uid()) {
                    std::sync::Arc::make_mut(p).terminating = true;
                }
            }
            (
                ActionKind::Kamikaze {
                    mechanism,
                    executor_id,
                    at,
                    target,
                    ..
                },
                Some(i),
            ) => {
                if *mechanism == KamikazeMechanism::DeleteNode {
                    deleted_nodes.push(i);
                } else {
                    let n = &mut view.nodes[i];
                    n.kamikaze = Some(at.to_rfc3339());
                    n.kamikaze_executor_id = Some(executor_id.clone().unwrap_or_default());
                    n.kamikaze_target = target.clone();
                }
            }
            (ActionKind::Complete { uncordon, .. }, Some(i)) => {
                release(&mut view.nodes[i], *uncordon, true);
            }
            (
                ActionKind::Release {
                    uncordon,
                    remove_mark,
                    ..
                },
                Some(i),
            ) => release(&mut view.nodes[i], *uncordon, *remove_mark),
            (ActionKind::AddFinalizer { policy }, _) => {
                if let Some(p) = view.policies.iter_mut().find(|p| &p.name == policy) {
                    p.has_finalizer = true;
                }
            }
            (ActionKind::RemoveFinalizer { policy }, _) => {
                // The last finalizer gone, the apiserver deletes the object.
                view.policies.retain(|p| &p.name != policy);
            }
            (_, None) => {}
        }
    }
    // The status write at the end of the pass.
    for policy in &mut view.policies {
        if let Some(planned) = plan.policy(&policy.name) {
            policy.deleted_nodes = planned.deleted_nodes.clone();
        }
    }
    deleted_nodes.sort_unstable();
    for i in deleted_nodes.into_iter().rev() {
        view.nodes.remove(i);
    }
}

/// Removes k8sm's keys from a node, as `Complete` (everything) and `Release` (the mark only with
/// `remove_mark`) do.
fn release(n: &mut NodeView, uncordon: bool, remove_mark: bool) {
    if remove_mark {
        n.incompatible_since = None;
        n.incompatible_label = false;
        n.has_k8sm_taint = false;
    }
    n.kamikaze = None;
    n.kamikaze_executor_id = None;
    n.kamikaze_target = None;
    n.kamikaze_obeyed = false;
    n.draining_since = None;
    n.drain_progress = None;
    n.stalled_since = None;
    n.cordoned_by_k8sm = false;
    n.marked_by_k8sm = false;
    if uncordon {
        n.unschedulable = false;
    }
}

/// Records every eviction and deletion of `plan` as in flight (as the controller does before its
/// cache catches up), without changing the pods.
pub fn record_in_flight(view: &mut ClusterView, plan: &Plan, when: DateTime<Utc>) {
    for action in &plan.actions {
        if let ActionKind::Evict { pod, eviction } = &action.kind {
            view.in_flight.push(InFlightEviction {
                unanswered: false,
                pod_uid: pod.uid().to_string(),
                owner_uid: Some(eviction.owner.uid.to_string()),
                at: when,
            });
        } else if let ActionKind::DeletePod { pod, .. } = &action.kind {
            view.in_flight.push(InFlightEviction {
                unanswered: false,
                pod_uid: pod.uid().to_string(),
                owner_uid: None,
                at: when,
            });
        }
    }
}
