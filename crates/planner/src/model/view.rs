//! The planner's input: a plain, owned snapshot of the cluster that the controller builds from its
//! reflectors.
//!
//! Every field is raw observed data. Annotations are kept as the text found on the object (they may
//! be malformed; the planner parses them and reports what it cannot read), and nothing here is
//! derived by the caller except what the field documentation says. Names are unique per kind (and
//! per namespace for namespaced objects).

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    sync::Arc,
};

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8sm_api::{ExecutorUpgradePolicySpec, PauseAnnotation};
use serde::{Deserialize, Serialize};

/// Everything the planner looks at. The order of the vectors does not matter: the plan is the same
/// for any order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    /// All nodes (not only the selected ones: two policies may select the same node).
    pub nodes: Vec<NodeView>,
    /// All pods, bound to a node or not, or at least all pods of the selected nodes and all pods
    /// of their workloads (the health rule counts a workload's ready pods wherever they run,
    /// and, for a controller of a kind k8sm does not know, infers its size from its pods,
    /// including those not scheduled yet). Shared, not copied: the controller keeps each pod's
    /// view in its cache, built once per watch event, and a pass only counts references.
    pub pods: Vec<Arc<PodView>>,
    /// The controllers of those pods and of their ReplicaSets: Deployments, ReplicaSets,
    /// ReplicationControllers, StatefulSets, Jobs (DaemonSets optional). Shared, not copied,
    /// like the pods: the controller converts each owner once per watch event.
    pub owners: Vec<Arc<OwnerView>>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<PdbView>,
    /// Every `ExecutorUpgradePolicy`.
    pub policies: Vec<PolicyView>,
    /// Evictions and deletions that the controller executed and that its caches may not show yet.
    pub in_flight: Vec<InFlightEviction>,
    /// Sizes the controller remembers of controllers of unknown kinds it evicts from, by UID: the
    /// most live pods (not finished nor terminating) seen of each at once since its first
    /// eviction (see [`crate::grow_observed_sizes`]). Such a controller's size is inferred
    /// from its pods; once an evicted pod is gone and before its replacement exists, it would
    /// look one pod smaller, and healthy, without this.
    pub observed_sizes: BTreeMap<String, u32>,
    /// PersistentVolumes bound to a claim whose node affinity names a node in every term (the
    /// others cannot pin a pod).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeView>,
    /// Admission paced by room (`crate::rules::room`): past a floor of nodes in progress, a node
    /// is admitted only while the nodes that stay can take its pods. Off by default (the
    /// controller's `--pace-by-room`): it trades makespan for fewer second moves
    /// (docs/decisions/0002-land-once.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pace_by_room: bool,
    /// The calls the pass's evictions may take: the controller runs at most so many at once, and
    /// the pass plans no eviction it could not launch. `None`: every eviction is planned (the
    /// plugin's prediction, the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<Calls>,
}

/// One Node, reduced to what the upgrade needs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`: tells a node that came back under the same name (kamikaze DeleteNode) from
    /// the deleted one.
    pub uid: String,
    /// `metadata.resourceVersion` of the object this was read from: a write decided on this view
    /// is made only to that version. Not used in decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// `metadata.labels` (node selection and the opt-out label).
    pub labels: BTreeMap<String, String>,
    /// The `k8s.mesosphere.io/executor-id` annotation: the executor that runs on the node now.
    pub executor_id: Option<String>,
    /// The `k8s.mesosphere.io/incompatible-executor` annotation as found: RFC 3339 time of marking
    /// (maybe malformed).
    pub incompatible_since: Option<String>,
    /// Whether the `k8s.mesosphere.io/incompatible-executor` label is present (any value).
    pub incompatible_label: bool,
    /// Whether the node carries the `k8s.mesosphere.io/incompatible-executor:PreferNoSchedule`
    /// taint.
    pub has_k8sm_taint: bool,
    /// The admission marker annotation ([`k8sm_api::keys::DRAINING_ANNOTATION`]) as found: RFC
    /// 3339 time at which the node was admitted into a drain slot.
    pub draining_since: Option<String>,
    /// The `k8s.mesosphere.io/kamikaze` annotation as found: RFC 3339 time at which kamikaze was
    /// sent.
    pub kamikaze: Option<String>,
    /// The [`k8sm_api::keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION`] as found: the executor ID the node
    /// reported when kamikaze was sent (empty when it reported none). It survives the executor
    /// clearing the kamikaze annotation on restart, so a restart is recognised by a changed
    /// executor ID.
    pub kamikaze_executor_id: Option<String>,
    /// The [`k8sm_api::keys::KAMIKAZE_TARGET_ANNOTATION`] as found: the target the node was told
    /// to restart into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kamikaze_target: Option<String>,
    /// Whether the `k8s.mesosphere.io/cordoned-by: k8sm` annotation is present.
    pub cordoned_by_k8sm: bool,
    /// Whether the `k8s.mesosphere.io/marked-by: k8sm` annotation is present: k8sm set the mark
    /// itself.
    pub marked_by_k8sm: bool,
    /// The [`k8sm_api::keys::DRAIN_PROGRESS_ANNOTATION`] as found: `<RFC 3339 time> <pods left>`.
    pub drain_progress: Option<String>,
    /// The [`k8sm_api::keys::STALLED_ANNOTATION`] as found: RFC 3339 time at which the node gave
    /// up its slot.
    pub stalled_since: Option<String>,
    /// The [`k8sm_api::keys::FORCED_ANNOTATION`] as found: the last action an operator forced on
    /// the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced: Option<String>,
    /// Whether the [`k8sm_api::keys::KAMIKAZE_OBEYED_ANNOTATION`] is present (the executor's
    /// acknowledgement).
    pub kamikaze_obeyed: bool,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// The node's `InternalIP` address, for kamikaze URL templates.
    pub internal_ip: Option<String>,
    /// The `Ready` condition is `True`. Reported, not used in decisions.
    pub ready: bool,
    /// `status.allocatable`: what the scheduler may place on the node (`None`: not reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocatable: Option<Resources>,
}

/// An amount of the resources the scheduler places pods by: CPU, memory and pod count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// CPU in millicores.
    pub cpu_millis: u64,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// Pods.
    pub pods: u64,
}

impl Resources {
    /// Nothing of anything.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    /// Whether `self` has room for `other` in every resource.
    pub fn covers(self, other: Self) -> bool {
        self.cpu_millis >= other.cpu_millis
            && self.memory_bytes >= other.memory_bytes
            && self.pods >= other.pods
    }

    /// `self - other` in every resource, at least zero.
    pub fn less(self, other: Self) -> Self {
        Self {
            cpu_millis: self.cpu_millis.saturating_sub(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_sub(other.memory_bytes),
            pods: self.pods.saturating_sub(other.pods),
        }
    }

    /// `self` less `other` in every resource; `None` where `other` has more of one.
    pub fn checked_less(self, other: Self) -> Option<Self> {
        Some(Self {
            cpu_millis: self.cpu_millis.checked_sub(other.cpu_millis)?,
            memory_bytes: self.memory_bytes.checked_sub(other.memory_bytes)?,
            pods: self.pods.checked_sub(other.pods)?,
        })
    }
}

impl std::ops::Add for Resources {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
            pods: self.pods.saturating_add(other.pods),
        }
    }
}

impl std::ops::AddAssign for Resources {
    fn add_assign(&mut self, other: Self) {
        *self = *self + other;
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}m CPU, {} MiB, {} pods",
            self.cpu_millis,
            self.memory_bytes >> 20,
            self.pods
        )
    }
}

/// The phase of a pod (`status.phase`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum PodPhase {
    /// Accepted, not all containers started.
    Pending,
    /// Bound and running.
    #[default]
    Running,
    /// All containers terminated with success.
    Succeeded,
    /// All containers terminated, at least one in failure.
    Failed,
    /// State unknown (node unreachable).
    Unknown,
}

impl PodPhase {
    /// Succeeded or Failed: the pod runs nothing any more.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// The controller owner reference of a pod or ReplicaSet (`metadata.ownerReferences[?controller]`),
/// with the namespace of the object that holds it: an owner reference names an object in that
/// namespace (or a cluster-scoped one), so a pod belongs to an owner only when the owner's UID,
/// kind, API group and namespace all match (see [`Self::names`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerRef {
    /// `metadata.namespace` of the object holding the reference.
    #[serde(default)]
    pub namespace: String,
    /// `apiVersion`, such as `apps/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `kind`, such as `ReplicaSet`.
    pub kind: String,
    /// `name`.
    pub name: String,
    /// `uid`: a pod of a deleted-and-recreated owner counts as orphaned.
    pub uid: String,
    #[serde(skip)]
    key: KeyCache,
}

impl ControllerRef {
    /// The reference held by an object in `namespace`.
    pub fn new(namespace: &str, api_version: &str, kind: &str, name: &str, uid: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
            key: KeyCache::default(),
        }
    }

    /// The API group of `apiVersion` (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// Whether the reference names `owner`: the same UID, kind and API group, in the same
    /// namespace. A tenant that copies another namespace's UID, or names a kind nothing serves,
    /// names nothing k8sm sees.
    pub fn names(&self, owner: &OwnerView) -> bool {
        self.uid == owner.uid
            && self.namespace == owner.namespace
            && self.kind == owner.kind.as_str()
            && owner.kind.group() == Some(self.group())
    }

    /// The key of the workload the reference stands for when it names no owner k8sm sees: the whole
    /// reference, as `namespace/group/kind/name/uid`. It never equals an owner's UID (which the
    /// apiserver makes, without a slash), and references held in different namespaces never
    /// share one.
    pub fn key(&self) -> &str {
        self.key.0.get_or_init(|| {
            format!(
                "{}/{}/{}/{}/{}",
                self.namespace,
                self.group(),
                self.kind,
                self.name,
                self.uid
            )
        })
    }
}

/// [`ControllerRef::key`], worked out once: no part of the reference's identity.
#[derive(Clone, Debug, Default)]
struct KeyCache(std::sync::OnceLock<String>);

impl PartialEq for KeyCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for KeyCache {}

impl PartialOrd for KeyCache {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for KeyCache {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl std::hash::Hash for KeyCache {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

/// One Pod, reduced to what the drain needs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodView {
    /// `metadata.namespace`; shared by the pods of one namespace.
    pub namespace: Arc<str>,
    /// `metadata.name`. Shared strings, so that a plan's references to the pod copy no text.
    pub name: Arc<str>,
    /// `metadata.uid`.
    pub uid: Arc<str>,
    /// `spec.nodeName`; `None` while pending unscheduled. Shared by the pods of one node, so that
    /// a pass reading every pod's node reads each name from one place.
    pub node_name: Option<Arc<str>>,
    /// `metadata.labels` (opt-out and PodDisruptionBudget selectors); shared by the pods that have
    /// the same ones.
    pub labels: Arc<BTreeMap<String, String>>,
    /// `metadata.annotations`, or at least the opt-out and mirror ones.
    pub annotations: BTreeMap<String, String>,
    /// The controller owner reference, if any; shared by the pods of one controller.
    pub controller: Option<Arc<ControllerRef>>,
    /// `status.phase`.
    pub phase: PodPhase,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// A mirror pod of a static pod (`kubernetes.io/config.mirror` annotation); also recognised
    /// from `annotations`.
    pub mirror: bool,
    /// `metadata.creationTimestamp`; lets reports list blocked pods oldest first.
    pub created: Option<DateTime<Utc>>,
    /// The `lastTransitionTime` of the `Ready` condition: since when the pod is Ready, or not
    /// Ready (`None`: it has no Ready condition yet; a pod not Ready is then not Ready since
    /// its creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_changed: Option<DateTime<Utc>>,
    /// `metadata.deletionTimestamp`: when its grace period ends, after which only its kubelet's
    /// confirmation or a finalizer keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<DateTime<Utc>>,
    /// `metadata.finalizers`: what may keep a terminating pod after its grace period.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
    /// What in its spec may tie its replacement to one node (`None`, for most pods: nothing).
    /// Boxed: a few pods have any, and every pod's view is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins: Option<Box<PodPins>>,
    /// The CPU and memory the scheduler reserves for it: its containers' requests as
    /// kube-scheduler sums them (init containers, sidecars and overhead included). `pods` is
    /// left 0: where room is counted, each pod counts one.
    #[serde(default, skip_serializing_if = "Resources::is_zero")]
    pub requests: Resources,
}

/// The parts of a pod's spec that may allow its replacement on one node only. Whether they name the
/// pod's own node is the planner's to decide (the node's hostname label, and the claims' volumes,
/// are other objects).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodPins {
    /// `spec.nodeSelector["kubernetes.io/hostname"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`, where every
    /// term of it names a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<NodePin>,
    /// The PersistentVolumeClaims of its volumes, in its namespace
    /// (`persistentVolumeClaim.claimName`, and `<pod>-<volume>` for a generic ephemeral
    /// volume): a volume bound to one of them may have a node affinity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<String>,
}

/// A required node selector (its `nodeSelectorTerms`, ORed) that names a node in every term: per
/// term, the nodes its requirements name one at a time (`kubernetes.io/hostname` In one value, or
/// the field `metadata.name` In one value). A term naming none may select any number of nodes, so a
/// selector with one is no `NodePin`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePin {
    pub terms: Vec<Vec<NodeName>>,
}

/// One node, as a requirement names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NodeName {
    /// The value of its `kubernetes.io/hostname` label.
    Hostname(String),
    /// Its `metadata.name`.
    Name(String),
}

/// The label the kubelet sets to the node's hostname, unique per node.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

impl NodeName {
    /// Whether `node` is the node named.
    pub fn names(&self, node: &NodeView) -> bool {
        match self {
            Self::Hostname(hostname) => node_hostname(node) == hostname,
            Self::Name(name) => node.name == *name,
        }
    }
}

/// The node's `kubernetes.io/hostname` label, or its name where it has none.
pub fn node_hostname(node: &NodeView) -> &str {
    node.labels
        .get(HOSTNAME_LABEL)
        .map_or(node.name.as_str(), String::as_str)
}

impl NodePin {
    /// Whether `node` is the only node that satisfies it: every term requires that node (the terms
    /// are ORed).
    pub fn only(&self, node: &NodeView) -> bool {
        !self.terms.is_empty()
            && self
                .terms
                .iter()
                .all(|term| term.iter().any(|name| name.names(node)))
    }
}

/// A PersistentVolume bound (or reserved) to a claim, whose node affinity names a node in every
/// term: only such volumes can pin a pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeView {
    /// `metadata.name`.
    pub name: String,
    /// `spec.claimRef.namespace` and `spec.claimRef.name`.
    pub claim_namespace: String,
    pub claim_name: String,
    /// `spec.nodeAffinity.required`.
    pub pin: NodePin,
}

/// The kinds of pod controllers (and of their own controllers) that the planner tells apart.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum OwnerKind {
    /// `apps/v1 Deployment`: the workload of the ReplicaSets it controls.
    Deployment,
    /// `apps/v1 ReplicaSet`.
    ReplicaSet,
    /// `v1 ReplicationController`.
    ReplicationController,
    /// `apps/v1 StatefulSet`.
    StatefulSet,
    /// `batch/v1 Job`.
    Job,
    /// `apps/v1 DaemonSet`.
    DaemonSet,
    /// Any other controller kind (an operator's custom resource): its pods are evicted one at a
    /// time through the Eviction API, judged against the pods of that controller that k8sm
    /// sees.
    Other(String),
}

impl OwnerKind {
    /// The kind as written in an owner reference.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Deployment => "Deployment",
            Self::ReplicaSet => "ReplicaSet",
            Self::ReplicationController => "ReplicationController",
            Self::StatefulSet => "StatefulSet",
            Self::Job => "Job",
            Self::DaemonSet => "DaemonSet",
            Self::Other(kind) => kind,
        }
    }

    /// A kind whose `spec.replicas` is a workload's desired count (docs/design.md §2, §5.3).
    pub fn is_replicated(&self) -> bool {
        matches!(
            self,
            Self::Deployment | Self::ReplicaSet | Self::ReplicationController | Self::StatefulSet
        )
    }

    /// The API group of the kind (`""` for the core group); `None` for a kind k8sm does not know.
    pub fn group(&self) -> Option<&'static str> {
        match self {
            Self::Deployment | Self::ReplicaSet | Self::StatefulSet | Self::DaemonSet => {
                Some("apps")
            }
            Self::ReplicationController => Some(""),
            Self::Job => Some("batch"),
            Self::Other(_) => None,
        }
    }

    /// A kind that k8sm watches, so that an owner of it missing from the view is gone (or not seen
    /// yet).
    pub fn is_watched(&self) -> bool {
        !matches!(self, Self::DaemonSet | Self::Other(_))
    }
}

impl From<&str> for OwnerKind {
    fn from(kind: &str) -> Self {
        match kind {
            "Deployment" => Self::Deployment,
            "ReplicaSet" => Self::ReplicaSet,
            "ReplicationController" => Self::ReplicationController,
            "StatefulSet" => Self::StatefulSet,
            "Job" => Self::Job,
            "DaemonSet" => Self::DaemonSet,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl From<String> for OwnerKind {
    fn from(kind: String) -> Self {
        Self::from(kind.as_str())
    }
}

impl From<OwnerKind> for String {
    fn from(kind: OwnerKind) -> Self {
        kind.as_str().to_owned()
    }
}

impl fmt::Display for OwnerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A pod controller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerView {
    /// Its kind.
    pub kind: OwnerKind,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`, matched against the pods' controller references.
    pub uid: String,
    /// `spec.replicas` for Deployments, ReplicaSets, ReplicationControllers and StatefulSets
    /// (`None` there means the apiserver default, 1); `None` for Jobs and DaemonSets.
    pub desired: Option<u32>,
    /// Its own controller reference, if any: a ReplicaSet controlled by a Deployment counts for
    /// the Deployment.
    pub controller: Option<ControllerRef>,
    /// `false` when the controller knows the owner is being deleted (a deletion timestamp): it
    /// replaces nothing any more, so its pods are unmanaged pods (the unmanaged-pod policy
    /// applies). An owner absent from the view is different: it may be gone or not seen yet,
    /// so its pods wait for the garbage collector.
    pub exists: bool,
    /// A Deployment whose own controller is replacing pods: a rollout under way (a generation it
    /// has not observed yet, or pods of older ReplicaSets left: `status.replicas >
    /// status.updatedReplicas`) and not paused. Its controller deletes old pods as new ones
    /// become available, within its own `maxUnavailable`, reacting to the same readiness
    /// changes k8sm reacts to: an eviction on top of that can take it below its floor before
    /// either saw the other's deletion. `false` for every other kind.
    #[serde(default)]
    pub replacing: bool,
    /// `spec.minReadySeconds` of a Deployment, ReplicaSet, ReplicationController or StatefulSet: a
    /// pod counts as available, and so as Ready for the health rule, once Ready for this long,
    /// as its controller counts it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_ready_seconds: u32,
    /// A ReplicaSet's `deployment.kubernetes.io/revision`: the highest of a Deployment's
    /// ReplicaSets is its newest, whose pods tell whether its rollout still progresses. 0 when
    /// absent, and for every other kind.
    #[serde(default, skip_serializing_if = "is_zero_revision")]
    pub revision: u64,
    /// For a Deployment: what moving its single pod by a surge rollout needs
    /// (`spec.workloads.surge`). `None` for every other kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutView>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_revision(n: &u64) -> bool {
    *n == 0
}

/// A Deployment's rollout: its strategy, whether its last rollout is complete, and the annotations
/// by which it chooses how its pod moves and k8sm records a move it started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutView {
    /// `spec.strategy.type` is `RollingUpdate` (the default), not `Recreate` (which deletes the
    /// old pods first).
    pub rolling_update: bool,
    /// `spec.strategy.rollingUpdate.maxSurge` as stored: a count or a percentage such as "25%";
    /// `None` means the apiserver's default, 25%.
    pub max_surge: Option<IntOrString>,
    /// `spec.strategy.rollingUpdate.maxUnavailable`, the same way.
    pub max_unavailable: Option<IntOrString>,
    /// `spec.paused`: a paused Deployment does not roll out.
    pub paused: bool,
    /// The last rollout is complete, by `kubectl rollout status`'s test: its generation observed,
    /// not past its progress deadline, and `status.updatedReplicas`, `status.replicas` and
    /// `status.availableReplicas` all at `spec.replicas`.
    pub complete: bool,
    /// The [`k8sm_api::keys::SURGE_ANNOTATION`] as found (the Deployment's own choice, maybe
    /// malformed).
    pub surge: Option<String>,
    /// The [`k8sm_api::keys::SURGE_MOVE_ANNOTATION`] as found: `<RFC 3339 time> <pod UID>`, the
    /// move k8sm started last.
    pub surge_move: Option<String>,
    /// `spec.progressDeadlineSeconds`: a rollout whose newest ReplicaSet has neither started nor
    /// readied a pod for this long is stuck, whatever its Progressing condition says since.
    #[serde(default = "default_progress_deadline")]
    pub progress_deadline_seconds: u32,
    /// Since when its Available condition has been False (fewer available pods than `replicas -
    /// maxUnavailable`), its last transition: with no pod Ready, a Deployment unavailable for
    /// `nodeProgressDeadline` is broken as a whole, however young its pods (a crash loop of
    /// one replica replaced by a pod that crashes the same way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_since: Option<DateTime<Utc>>,
}

/// The apiserver's default `spec.progressDeadlineSeconds`.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: u32 = 600;

fn default_progress_deadline() -> u32 {
    DEFAULT_PROGRESS_DEADLINE_SECONDS
}

impl Default for RolloutView {
    /// A Deployment as the apiserver defaults it (RollingUpdate, 25%/25%), not paused, its last
    /// rollout complete.
    fn default() -> Self {
        Self {
            rolling_update: true,
            max_surge: None,
            max_unavailable: None,
            paused: false,
            complete: true,
            surge: None,
            surge_move: None,
            progress_deadline_seconds: DEFAULT_PROGRESS_DEADLINE_SECONDS,
            unavailable_since: None,
        }
    }
}

/// A PodDisruptionBudget.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PdbView {
    /// `metadata.namespace`: a budget covers pods of its own namespace only.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.selector`. `None` (null) selects no pod; an empty selector selects every pod of the
    /// namespace.
    pub selector: Option<LabelSelector>,
    /// `status.disruptionsAllowed`, as the apiserver reports it.
    pub disruptions_allowed: i32,
    /// `spec.unhealthyPodEvictionPolicy`: when the Eviction API lets a pod that is Running but not
    /// Ready go.
    #[serde(default)]
    pub unhealthy_pod_eviction_policy: UnhealthyPodEvictionPolicy,
    /// `status.currentHealthy` and `status.desiredHealthy`: under `IfHealthyBudget`, a pod that is
    /// not Ready goes while the first is at least the second.
    #[serde(default)]
    pub current_healthy: i32,
    #[serde(default)]
    pub desired_healthy: i32,
}

/// `spec.unhealthyPodEvictionPolicy` of a PodDisruptionBudget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum UnhealthyPodEvictionPolicy {
    /// The default: a Running pod that is not Ready goes while the budget is healthy, without using
    /// a disruption.
    #[default]
    IfHealthyBudget,
    /// A Running pod that is not Ready always goes.
    AlwaysAllow,
}

impl PdbView {
    /// Whether the Eviction API lets a Running pod that is not Ready go without using one of the
    /// budget's disruptions (pkg/registry/core/pod/storage/eviction.go).
    pub fn admits_not_ready_freely(&self) -> bool {
        match self.unhealthy_pod_eviction_policy {
            UnhealthyPodEvictionPolicy::AlwaysAllow => true,
            UnhealthyPodEvictionPolicy::IfHealthyBudget => {
                self.desired_healthy > 0 && self.current_healthy >= self.desired_healthy
            }
        }
    }
}

/// An `ExecutorUpgradePolicy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyView {
    /// `metadata.name` (the policy is cluster-scoped).
    pub name: String,
    /// `metadata.generation`, echoed into the plan for `status.observedGeneration`.
    pub generation: Option<i64>,
    /// `spec`.
    pub spec: ExecutorUpgradePolicySpec,
    /// `metadata.deletionTimestamp` is set: the policy hands its nodes back and acts no more.
    pub deleting: bool,
    /// `metadata.finalizers` holds [`k8sm_api::keys::POLICY_FINALIZER`].
    pub has_finalizer: bool,
    /// `status.deletedNodes`: nodes this policy deleted as their kamikaze that have not come back
    /// upgraded yet.
    pub deleted_nodes: Vec<DeletedNodeRecord>,
    /// The [`k8sm_api::keys::PAUSE_ANNOTATION`] on the policy.
    #[serde(default)]
    pub pause_annotation: PauseAnnotation,
}

impl PolicyView {
    /// Paused by `spec.paused` or by its annotation: either one stops every eviction, deletion,
    /// cordon and kamikaze.
    pub fn paused(&self) -> bool {
        self.spec.paused || self.pause_annotation.pauses()
    }
}

/// A node that a policy deleted as its kamikaze (`status.deletedNodes`), remembered until it comes
/// back upgraded.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletedNodeRecord {
    /// Node name.
    pub name: String,
    /// UID of the deleted Node object.
    pub uid: String,
    /// Executor ID it reported when it was deleted, as [`k8sm_api::text::recorded_id`] keeps it:
    /// the ID itself (for every real one), or a bounded stand-in of an oversized one. Compare
    /// with [`k8sm_api::text::recorded_id`] of the ID the node reports.
    pub executor_id: Option<String>,
    /// When it was deleted.
    pub deleted_at: DateTime<Utc>,
    /// The target it was told to restart into, as recorded: back on it after the target moved, it
    /// goes round again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// An eviction (or deletion) the controller executed that its pod cache may not show yet. The pod
/// counts as terminating, and its owner as having a pod terminating, until the controller drops the
/// entry (once its cache shows the pod terminating or gone).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InFlightEviction {
    /// UID of the evicted pod.
    pub pod_uid: String,
    /// UID of its workload (docs/design.md §2: a Deployment for a pod of one of its ReplicaSets),
    /// if any.
    pub owner_uid: Option<String>,
    /// When the eviction was executed.
    pub at: DateTime<Utc>,
    /// The call was launched and its answer is not known: it may still be refused (a budget, a
    /// webhook), so the pod has not surely left, and the pods that go after it on its node
    /// (docs/design.md §5.3) wait for the answer.
    #[serde(default)]
    pub unanswered: bool,
}

/// The controller's calls as a pass finds them (docs/design.md §8): an eviction it plans is
/// launched at once if a call is free, and one that is not launched waits for a later pass while
/// the plan counts it. A pass plans an eviction only while a call is free for it; the other pods
/// that could go wait for a call (`WaitingForCall`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Calls {
    /// How many calls may run at once.
    pub limit: usize,
    /// How many run now.
    pub running: usize,
    /// How many more an eviction that continues one of the `continuing` workloads may take.
    pub for_continuations: usize,
    /// UIDs of the workloads whose evictions continue them: a pod of each became Ready while it
    /// waited.
    pub continuing: BTreeSet<String>,
    /// UIDs of the pods whose last call failed and that back off now: their evictions are not
    /// launched in this pass, and take no call.
    pub backing_off: BTreeSet<String>,
    /// Nodes whose pods wait for a write on its way: their evictions take no call either.
    pub held_nodes: BTreeSet<String>,
}
