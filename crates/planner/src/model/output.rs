//! The planner's output: the actions to execute now and the report of where every node stands and
//! why.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8sm_api::{KamikazeMechanism, NodeCounts, NodePhase, WindowState};
use serde::{Deserialize, Serialize};

use crate::{DeletedNodeRecord, OwnerKind, PodView, Reason};

/// Everything the controller does in one pass, and what status, Events and the plugin report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Mutations to execute now, in order: finalizers, completions and releases, marks, admissions
    /// and cordons, evictions, deletions, progress records and stalls, kamikaze. Executing
    /// them and planning again never repeats one.
    pub actions: Vec<Action>,
    /// One entry per node selected by exactly one policy, sorted by policy then node name.
    pub nodes: Vec<NodePlan>,
    /// One entry per policy, sorted by name.
    pub policies: Vec<PolicyPlan>,
    /// The earliest future time at which a time-based decision changes (an unmanaged-pod or Job
    /// timeout expires, a restart becomes overdue): plan again then, even if nothing in the
    /// cluster changed.
    pub next_wake: Option<DateTime<Utc>>,
}

impl Plan {
    /// The plan of `node`, if a single policy selects it.
    pub fn node(&self, name: &str) -> Option<&NodePlan> {
        self.nodes.iter().find(|n| n.node == name)
    }

    /// The plan of the policy `name`.
    pub fn policy(&self, name: &str) -> Option<&PolicyPlan> {
        self.policies.iter().find(|p| p.policy == name)
    }

    /// The planned evictions, in order.
    pub fn evictions(&self) -> impl Iterator<Item = (&PodRef, &Eviction)> {
        self.actions.iter().filter_map(|a| match &a.kind {
            ActionKind::Evict { pod, eviction } => Some((pod, eviction)),
            _ => None,
        })
    }

    /// The pods planned for deletion, in order.
    pub fn deletions(&self) -> impl Iterator<Item = &PodRef> {
        self.actions.iter().filter_map(|a| match &a.kind {
            ActionKind::DeletePod { pod, .. } => Some(pod),
            _ => None,
        })
    }
}

/// One mutation, with the reason and message of the Event that reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Action {
    /// The policy on whose behalf it is done.
    pub policy: String,
    /// The Event reason.
    pub reason: Reason,
    /// The Event message: what and why, with the numbers that justify it.
    pub message: String,
    /// What to do.
    #[serde(flatten)]
    pub kind: ActionKind,
}

/// A mutation of the cluster. Node mutations are idempotent patches of the contract keys of
/// docs/design.md §3.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "action",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ActionKind {
    /// Put [`k8sm_api::keys::POLICY_FINALIZER`] on a policy, so that deleting it hands its nodes
    /// back first. The planner plans nothing else for a policy without it.
    AddFinalizer {
        /// Policy name.
        policy: String,
    },
    /// Remove [`k8sm_api::keys::POLICY_FINALIZER`] from a policy being deleted: every node it held
    /// is handed back.
    RemoveFinalizer {
        /// Policy name.
        policy: String,
    },
    /// Mark (or complete the mark of) a node: ensure the incompatible-executor label and the
    /// PreferNoSchedule taint, and set the incompatible-executor annotation to
    /// `incompatible_since` when given (`None`: keep the annotation as it is); with `claim`
    /// also set `marked-by: k8sm` (k8sm marks it itself, for a target).
    Mark {
        /// Node name.
        node: String,
        /// Value for the annotation, when it must be written.
        incompatible_since: Option<DateTime<Utc>>,
        /// Record that k8sm set the mark.
        claim: bool,
    },
    /// Admit a node into a drain slot: set [`k8sm_api::keys::DRAINING_ANNOTATION`] to `at` and
    /// [`k8sm_api::keys::DRAIN_PROGRESS_ANNOTATION`] to `at` and `pods_left`, remove
    /// [`k8sm_api::keys::STALLED_ANNOTATION`], and with `cordon` also set `spec.unschedulable` and
    /// the `cordoned-by: k8sm` annotation, in one patch.
    Admit {
        /// Node name.
        node: String,
        /// Admission time.
        at: DateTime<Utc>,
        /// Pods to move, for the progress record.
        pods_left: u32,
        /// Cordon it too.
        cordon: bool,
    },
    /// Cordon an admitted node that is not cordoned yet (the policy's `cordon` was turned on
    /// mid-drain): set `spec.unschedulable` and the `cordoned-by: k8sm` annotation.
    Cordon {
        /// Node name.
        node: String,
    },
    /// Evict a pod.
    Evict {
        /// The pod.
        pod: PodRef,
        /// The owner's health before and after, and how the eviction must be executed.
        #[serde(flatten)]
        eviction: Eviction,
    },
    /// Move the only pod of a Deployment by a surge rollout (`spec.workloads.surge`): set the pod
    /// template's [`k8sm_api::keys::RESTARTED_AT_ANNOTATION`] to `at` (a new rollout, as
    /// `kubectl rollout restart` starts one) and the Deployment's
    /// [`k8sm_api::keys::SURGE_MOVE_ANNOTATION`] to `at` and the pod's UID, in one patch. The
    /// pod stays until the Deployment's controller removes it, once the new pod is available.
    Surge {
        /// The pod that moves.
        pod: PodRef,
        /// Its Deployment.
        deployment: OwnerRef,
        /// When the move starts.
        at: DateTime<Utc>,
    },
    /// Delete a pod (a finished pod, an unmanaged pod, or a Job pod past its timeout).
    DeletePod {
        /// The pod.
        pod: PodRef,
        /// Through the Eviction API (an unmanaged or Job pod under a policy that respects budgets:
        /// the API sets its `DisruptionTarget` condition, which a Job's `podFailurePolicy`
        /// reads), or by a plain DELETE.
        #[serde(default)]
        eviction_api: bool,
    },
    /// Record drain progress: set [`k8sm_api::keys::DRAIN_PROGRESS_ANNOTATION`] to `at` and
    /// `pods_left`.
    Progress {
        /// Node name.
        node: String,
        /// When the count went down (or, while paused, when the record was refreshed).
        at: DateTime<Utc>,
        /// Pods left on the node.
        pods_left: u32,
    },
    /// Give up the drain slot of a node that made no progress for `nodeProgressDeadline`: set
    /// [`k8sm_api::keys::STALLED_ANNOTATION`] to `at`; remove the draining, drain-progress and
    /// cordoned-by annotations; with `uncordon` (k8sm cordoned it) set `spec.unschedulable` to
    /// false.
    Stall {
        /// Node name.
        node: String,
        /// When it gave up its slot.
        at: DateTime<Utc>,
        /// Uncordon it too.
        uncordon: bool,
    },
    /// Tell a drained node's executor to terminate. With `Annotation` (and, as the record, with
    /// `Http` after the POST) set [`k8sm_api::keys::KAMIKAZE_ANNOTATION`] to `at` and
    /// [`k8sm_api::keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION`] to `executor_id` (empty for none), and
    /// the target, in one patch, so the state survives a controller restart; with `DeleteNode`,
    /// first record the node in the policy's `status.deletedNodes` (unless it is there
    /// already), then delete the Node object.
    Kamikaze {
        /// Node name.
        node: String,
        /// How.
        mechanism: KamikazeMechanism,
        /// The URL to POST to, for `Http`.
        url: Option<String>,
        /// The executor ID the node reports now, to record.
        executor_id: Option<String>,
        /// The kamikaze time, to record.
        at: DateTime<Utc>,
        /// The target the node is told to restart into, to record
        /// ([`k8sm_api::keys::KAMIKAZE_TARGET_ANNOTATION`]); none without a target.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
    },
    /// Remove all of k8sm's upgrade state from a node (it runs the target executor, or its mark was
    /// removed): the incompatible-executor annotation and label, the taint, and every k8sm
    /// annotation (kamikaze, kamikaze-executor-id, kamikaze-obeyed, draining, drain-progress,
    /// stalled, cordoned-by, marked-by, forced); and uncordon it when `uncordon` (k8sm cordoned
    /// it and it is still cordoned).
    Complete {
        /// Node name.
        node: String,
        /// Also set `spec.unschedulable` to false.
        uncordon: bool,
    },
    /// Hand a node back that no policy selects any more (its policy was deleted, or its labels or
    /// the policy's nodeSelector changed): remove what k8sm put there and nothing else — the
    /// annotations of [`Self::Complete`] except the incompatible-executor mark, which goes
    /// (with its label and the taint) only with `remove_mark` (k8sm set it), and the cordon
    /// only with `uncordon` (k8sm cordoned it).
    Release {
        /// Node name.
        node: String,
        /// Also set `spec.unschedulable` to false.
        uncordon: bool,
        /// Also remove the incompatible-executor annotation, label and taint.
        remove_mark: bool,
    },
}

/// [`ActionKind::rank`] of the evictions (and surge moves).
const EVICTION_RANK: u8 = 5;

impl ActionKind {
    /// The node the action applies to (for pods: the node they run on is in the message, not here).
    pub fn node(&self) -> Option<&str> {
        match self {
            Self::Mark { node, .. }
            | Self::Admit { node, .. }
            | Self::Cordon { node }
            | Self::Progress { node, .. }
            | Self::Stall { node, .. }
            | Self::Kamikaze { node, .. }
            | Self::Complete { node, .. }
            | Self::Release { node, .. } => Some(node),
            Self::Evict { .. }
            | Self::Surge { .. }
            | Self::DeletePod { .. }
            | Self::AddFinalizer { .. }
            | Self::RemoveFinalizer { .. } => None,
        }
    }

    /// The pod the action removes (an eviction or a deletion): a call launched and tracked until it
    /// answers.
    pub fn pod(&self) -> Option<&PodRef> {
        match self {
            Self::Evict { pod, .. } | Self::DeletePod { pod, .. } => Some(pod),
            _ => None,
        }
    }

    /// The pod the action is about: the pod it removes, or the pod a surge rollout moves (the
    /// Deployment is written, and the pod stays until the Deployment's controller removes it).
    pub fn about_pod(&self) -> Option<&PodRef> {
        match self {
            Self::Surge { pod, .. } => Some(pod),
            _ => self.pod(),
        }
    }

    /// Whether the action deserves an Event: bookkeeping (a progress record, a finalizer added)
    /// does not.
    pub fn is_reported(&self) -> bool {
        !matches!(self, Self::Progress { .. } | Self::AddFinalizer { .. })
    }

    /// The policy whose object the action changes, for the finalizer actions.
    pub fn policy(&self) -> Option<&str> {
        match self {
            Self::AddFinalizer { policy } | Self::RemoveFinalizer { policy } => Some(policy),
            _ => None,
        }
    }

    /// Whether the action writes a node before its pods' calls go (see [`Self::rank`]): the
    /// controller holds those calls until its cache shows the write.
    pub(crate) fn writes_node_first(&self) -> bool {
        self.node().is_some() && self.rank() < EVICTION_RANK
    }

    /// Execution order: a policy gets its finalizer before anything is done on its behalf; nodes
    /// are cleaned up and marked before they are admitted, admitted (cordoned) before their
    /// pods move, and told to terminate last; a policy's finalizer goes once its nodes are
    /// handed back (in an earlier pass).
    pub(crate) fn rank(&self) -> u8 {
        match self {
            Self::AddFinalizer { .. } => 0,
            Self::Complete { .. } | Self::Release { .. } => 1,
            Self::Mark { .. } => 2,
            Self::Admit { .. } => 3,
            Self::Cordon { .. } => 4,
            Self::Evict { .. } | Self::Surge { .. } => EVICTION_RANK,
            Self::DeletePod { .. } => 6,
            Self::Progress { .. } | Self::Stall { .. } => 7,
            Self::Kamikaze { .. } => 8,
            Self::RemoveFinalizer { .. } => 9,
        }
    }
}

/// The SLA evidence of one eviction (docs/design.md §5.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Eviction {
    /// The workload the pod counts for (docs/design.md §2): a Deployment for a pod of one of its
    /// ReplicaSets.
    pub owner: OwnerRef,
    /// Available (Ready, for its `minReadySeconds` where it sets them), not terminating pods of
    /// the workload before this eviction (counting the evictions planned before it).
    pub ready_before: u32,
    /// The same after it.
    pub ready_after: u32,
    /// Ready pods of the workload not available yet after it (Ready for less than its
    /// `minReadySeconds`): not in `ready_after`, which counts available pods as the bound
    /// does.
    #[serde(default)]
    pub warming_after: u32,
    /// `spec.replicas` of the workload; for a controller of another kind, the pods k8sm counts for
    /// it.
    pub desired: u32,
    /// `ceil(threshold * desired / 100)`.
    pub needed: u32,
    /// The policy's `ownerHealthThreshold`, in percent.
    pub threshold: u8,
    /// Evict through the Eviction API (PodDisruptionBudgets apply; a 429 means wait). `false`:
    /// delete the pod. Always true for a pod of a controller of another kind.
    pub use_eviction_api: bool,
    /// The workload is a controller of a kind k8sm does not know, whose size k8sm infers from its
    /// pods: the controller remembers its size from now on (see
    /// [`crate::ClusterView::observed_sizes`]), so that a plan made after the pod is gone and
    /// before it is replaced does not take a smaller controller for a healthy one.
    pub size_inferred: bool,
}

/// A pod, by name and UID (execute with a UID precondition, so a recreated pod of the same name is
/// never hit).
///
/// Serialised as `{namespace, name, uid}`. It holds the pod's view rather than copies of its three
/// names: a pass refers to every pod of its draining nodes (tens of thousands in a large fleet),
/// twice for each that waits, and a reference is then one count on memory the pass just read, not
/// three on the names' own allocations.
#[derive(Clone)]
pub struct PodRef(Arc<PodView>);

impl PodRef {
    /// A reference to the pod `namespace/name` with this UID.
    pub fn new(
        namespace: impl Into<Arc<str>>,
        name: impl Into<Arc<str>>,
        uid: impl Into<Arc<str>>,
    ) -> Self {
        Self(Arc::new(PodView {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
            ..PodView::default()
        }))
    }

    pub(crate) fn of(pod: &Arc<PodView>) -> Self {
        Self(Arc::clone(pod))
    }

    /// Namespace.
    pub fn namespace(&self) -> &str {
        &self.0.namespace
    }

    /// Name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// UID.
    pub fn uid(&self) -> &str {
        &self.0.uid
    }

    /// What a reference is compared, ordered and hashed by: the pod's other fields are not part of
    /// it.
    fn key(&self) -> (&str, &str, &str) {
        (self.namespace(), self.name(), self.uid())
    }
}

impl PartialEq for PodRef {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.key() == other.key()
    }
}

impl Eq for PodRef {}

impl PartialOrd for PodRef {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PodRef {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl std::hash::Hash for PodRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl std::fmt::Debug for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodRef")
            .field("namespace", &self.namespace())
            .field("name", &self.name())
            .field("uid", &self.uid())
            .finish()
    }
}

/// The serialised shape of a [`PodRef`]: the struct it was, field for field.
#[derive(Serialize, Deserialize)]
#[serde(rename = "PodRef", rename_all = "camelCase")]
struct PodRefFields<T> {
    namespace: T,
    name: T,
    uid: T,
}

impl Serialize for PodRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (namespace, name, uid) = self.key();
        PodRefFields {
            namespace,
            name,
            uid,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for PodRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let PodRefFields {
            namespace,
            name,
            uid,
        } = PodRefFields::<Arc<str>>::deserialize(deserializer)?;
        Ok(Self::new(namespace, name, uid))
    }
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace(), self.name())
    }
}

/// A pod's controller.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRef {
    /// Kind, such as `ReplicaSet`.
    pub kind: OwnerKind,
    /// Name (in the pod's namespace).
    pub name: Arc<str>,
    /// The workload's key: its UID, or for a controller k8sm does not see (a kind it does not
    /// know), the whole reference as `namespace/group/kind/name/uid`, so that a reference
    /// copied into another namespace names another workload.
    pub uid: Arc<str>,
}

impl std::fmt::Display for OwnerRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

/// Where one node stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePlan {
    /// Node name.
    pub node: String,
    /// The policy that selects it.
    pub policy: String,
    /// Its phase after this plan's actions.
    pub phase: NodePhase,
    /// When it entered the phase, as far as the cluster records it: the mark for Incompatible, the
    /// admission for Draining, Drained and Blocked, the kamikaze for KamikazeSent.
    pub since: Option<DateTime<Utc>>,
    /// Pods still to move or delete before the node is drained.
    pub pods_left: u32,
    /// The executor ID the node reports, for a human: control characters escaped, and cut to
    /// [`k8sm_api::MAX_EXECUTOR_ID`] bytes (never compared: decisions read the node's own
    /// annotation).
    pub executor_id: Option<String>,
    /// The node's Ready condition.
    pub ready: bool,
    /// What the node waits for, node-level first, then per pod.
    pub blockers: Vec<Blocker>,
    /// For a node that waits for a drain slot: its place in the admission queue, from 1 (admitted
    /// next).
    pub admission_position: Option<u32>,
    /// Pods left on the node that wait for an operator whatever the rest of the cluster does
    /// (opted out, unmanaged under policy Never, covered by several budgets): such a node is
    /// admitted after the others.
    pub operator_pods: u32,
    /// The decision for each pod of a draining node (empty for other phases). Shared: a planner
    /// that keeps a node's decisions from pass to pass reports the same list.
    pub pods: Arc<[PodPlan]>,
}

impl NodePlan {
    /// Whether something on the node waits for an operator: the node itself (an opt-out, a
    /// malformed annotation, a restart overdue, an unexpected executor) or one of its pods (see
    /// [`PodPlan::needs_operator`]).
    pub fn needs_operator(&self) -> bool {
        self.blockers.iter().any(|b| b.reason.needs_operator())
    }

    /// Whether the node is blocked: Blocked, or held by something of its own that does not end by
    /// itself within moments (see [`Reason::blocks`]). Its pods' waits are their own
    /// ([`PodPlan::is_blocked`]).
    pub fn is_blocked(&self) -> bool {
        self.phase == NodePhase::Blocked
            || self
                .blockers
                .iter()
                .any(|b| b.pod.is_none() && b.reason.blocks())
    }

    /// Whether the node holds a drain slot and moves: Draining, Drained or KamikazeSent.
    pub fn in_flight(&self) -> bool {
        matches!(
            self.phase,
            NodePhase::Draining | NodePhase::Drained | NodePhase::KamikazeSent
        )
    }
}

/// Something a node waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blocker {
    /// Why, bounded.
    pub reason: Reason,
    /// What, for a human.
    pub message: Arc<str>,
    /// The pod concerned, if any.
    pub pod: Option<PodRef>,
}

/// The decision for one pod of a draining node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodPlan {
    /// The pod.
    pub pod: PodRef,
    /// The workload it counts for (a Deployment for a pod of one of its ReplicaSets), or its Job.
    pub owner: Option<OwnerRef>,
    /// How it was classified.
    pub class: PodClass,
    /// What happens to it.
    pub decision: Decision,
    /// Why (absent for pods the drain ignores).
    pub reason: Option<Reason>,
    /// Details, such as "wait: owner ReplicaSet web-abc 8/10 ready, needs 9".
    pub message: Arc<str>,
    /// For time-based waits: when the decision changes.
    pub until: Option<DateTime<Utc>>,
}

impl PodPlan {
    /// Whether the pod blocks its node (see [`Reason::blocks`]): it waits, and not for something
    /// that ends by itself within moments.
    pub fn is_blocked(&self) -> bool {
        matches!(self.decision, Decision::Wait | Decision::Block)
            && self.reason.is_some_and(Reason::blocks)
    }

    /// Whether only an operator moves the pod: the planner blocks it (an unmanaged pod under policy
    /// Never, an opted-out pod, a pod covered by several budgets), or it waits on something
    /// only an operator resolves.
    pub fn needs_operator(&self) -> bool {
        self.is_blocked()
            && (self.decision == Decision::Block || self.reason.is_some_and(Reason::needs_operator))
    }
}

/// The classes of docs/design.md §5.3.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PodClass {
    /// Never deleted, never blocking: DaemonSet and mirror pods, pods already terminating or being
    /// evicted, and finished pods that opted out.
    Ignored,
    /// Succeeded or Failed: deleted freely.
    Finished,
    /// Opted out by a label or annotation: blocks its node until an operator resolves it.
    OptedOut,
    /// A pod of a workload whose desired count k8sm reads (a Deployment through its ReplicaSet, a
    /// ReplicaSet, a ReplicationController or a StatefulSet): evicted under the health rule.
    Owned,
    /// A pod of a controller of another kind (an operator's custom resource): evicted through the
    /// Eviction API only, under the health rule with that controller's own pods as the
    /// workload; never deleted directly.
    OtherController,
    /// Owned by a Job: waits for completion, then the unmanaged-pod timeout.
    Job,
    /// No controller, or one being deleted: the unmanaged-pod policy applies, once every workload
    /// and other-controller pod has left the node. (A pod whose controller of a kind k8sm
    /// watches is absent from the cluster is unmanaged too, but waits for the garbage collector
    /// instead.)
    Unmanaged,
}

impl PodClass {
    /// The name in the policy's status (`blockedPods[].class`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Ignored => "Ignored",
            Self::Finished => "Finished",
            Self::OptedOut => "OptedOut",
            Self::Owned => "Owned",
            Self::OtherController => "OtherController",
            Self::Job => "Job",
            Self::Unmanaged => "Unmanaged",
        }
    }
}

/// What happens to a pod in this pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    /// Left alone and not in the way.
    Ignore,
    /// Evicted now.
    Evict,
    /// Moved now by a surge rollout of its Deployment: it goes once its replacement is available.
    Move,
    /// Deleted now.
    Delete,
    /// Waits for something that resolves by itself (owner health, a budget, a timeout, termination,
    /// the pause).
    Wait,
    /// Waits for an operator.
    Block,
}

/// Where one policy stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyPlan {
    /// Policy name.
    pub policy: String,
    /// The generation this plan was made from, for `status.observedGeneration`.
    pub generation: Option<i64>,
    /// Nodes by phase (nodes it shares with another policy are not counted).
    pub counts: NodeCounts,
    /// Drain slots: `maxConcurrentNodes` resolved against the selected nodes.
    pub slots: u32,
    /// Slots held after this plan (by Draining, Drained and KamikazeSent nodes).
    pub slots_in_use: u32,
    /// `spec.paused`.
    pub paused: bool,
    /// Conditions to report on the policy, sorted by reason.
    pub conditions: Vec<PolicyCondition>,
    /// What an ETA can be computed from.
    pub eta: EtaInputs,
    /// The policy is being deleted: it hands its nodes back and does nothing else.
    pub deleting: bool,
    /// `status.deletedNodes` after this plan: nodes deleted as their kamikaze that have not come
    /// back upgraded, including those deleted by this plan, sorted by name.
    pub deleted_nodes: Vec<DeletedNodeRecord>,
    /// Where the maintenance window stands (`spec.window`); `None` without one, or with one that
    /// cannot be read.
    pub window: Option<WindowState>,
}

/// A condition to report on a policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyCondition {
    /// Why, bounded: `PolicyConflict`, `NoNodesSelected`, `InvalidPolicy`, `MalformedAnnotation`,
    /// `Paused`, `RestartOverdue`.
    pub reason: Reason,
    /// For a human.
    pub message: String,
    /// The nodes concerned, sorted.
    pub nodes: Vec<String>,
}

/// Inputs of an ETA: the controller combines them with the pace it measures (time per upgraded
/// node).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EtaInputs {
    /// Selected nodes not yet compatible.
    pub nodes_remaining: u32,
    /// Of those, nodes Blocked or waiting on something only an operator resolves, such as a
    /// restart overdue (while any, there is no honest ETA).
    pub nodes_blocked: u32,
    /// Drain slots.
    pub slots: u32,
    /// Pods still to move on admitted nodes.
    pub pods_left: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape the controller's status, the plugin's JSON and the reports carry, whatever a
    /// `PodRef` holds.
    #[test]
    fn pod_ref_serialises_as_namespace_name_and_uid() {
        let pod = PodRef::new("shop", "web-1", "u1");
        let json = serde_json::to_string(&pod).unwrap();
        assert_eq!(json, r#"{"namespace":"shop","name":"web-1","uid":"u1"}"#);
        assert_eq!(serde_json::from_str::<PodRef>(&json).unwrap(), pod);
        assert_eq!(
            (pod.namespace(), pod.name(), pod.uid(), pod.to_string()),
            ("shop", "web-1", "u1", "shop/web-1".to_owned())
        );
    }
}
