//! What the SLA watcher keeps of the cluster's objects: the few facts of each pod and controller
//! that decide which workload a pod counts for and how many replicas that workload wants, in stores
//! that a watch relist replaces.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};

/// The kind of a workload (docs/design.md §2): the top-level owner whose health is judged.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkloadKind {
    Deployment,
    /// A ReplicaSet that no Deployment controls.
    ReplicaSet,
    ReplicationController,
    StatefulSet,
    /// A controller of any other kind, such as an operator's custom resource.
    Other(String),
}

impl WorkloadKind {
    pub fn as_str(&self) -> &str {
        match self {
            Self::Deployment => "Deployment",
            Self::ReplicaSet => "ReplicaSet",
            Self::ReplicationController => "ReplicationController",
            Self::StatefulSet => "StatefulSet",
            Self::Other(kind) => kind,
        }
    }
}

impl From<&str> for WorkloadKind {
    fn from(kind: &str) -> Self {
        match kind {
            "Deployment" => Self::Deployment,
            "ReplicaSet" => Self::ReplicaSet,
            "ReplicationController" => Self::ReplicationController,
            "StatefulSet" => Self::StatefulSet,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// A workload: its kind and name (the namespace is the watcher's).
pub type WorkloadKey = (WorkloadKind, String);

/// The controller that a pod's controller reference names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodController {
    ReplicaSet {
        name: String,
        uid: String,
    },
    ReplicationController {
        name: String,
        uid: String,
    },
    StatefulSet {
        name: String,
        uid: String,
    },
    /// A DaemonSet or a Job: their pods are no workload's replicas (docs/design.md §5.3 ignores
    /// DaemonSet pods and lets Job pods run to completion), so losing one is no breach of the
    /// SLA.
    NotAWorkload,
    /// Any other kind: that controller is the workload.
    Other {
        kind: String,
        name: String,
    },
}

impl PodController {
    fn of(reference: &OwnerReference) -> Self {
        let group = reference
            .api_version
            .split_once('/')
            .map_or("", |(group, _)| group);
        let (name, uid) = (reference.name.clone(), reference.uid.clone());
        match (group, reference.kind.as_str()) {
            ("apps", "ReplicaSet") => Self::ReplicaSet { name, uid },
            ("", "ReplicationController") => Self::ReplicationController { name, uid },
            ("apps", "StatefulSet") => Self::StatefulSet { name, uid },
            ("apps", "DaemonSet") | ("batch", "Job") => Self::NotAWorkload,
            (_, kind) => Self::Other {
                kind: kind.to_owned(),
                name,
            },
        }
    }
}

/// What the watcher keeps of a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFacts {
    /// `None`: an unmanaged pod, judged by no workload.
    pub controller: Option<PodController>,
    /// The Ready condition is True and there is no deletion timestamp.
    pub ready: bool,
    /// Since when it is Ready (its Ready condition's last transition), if it is.
    pub ready_since: Option<Timestamp>,
    /// Neither terminating nor finished (Succeeded or Failed): one of its controller's replicas.
    pub live: bool,
}

impl PodFacts {
    pub fn of(pod: &Pod) -> Self {
        let terminating = pod.metadata.deletion_timestamp.is_some();
        let status = pod.status.as_ref();
        let finished = status
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|phase| phase == "Succeeded" || phase == "Failed");
        let ready_condition = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready" && c.status == "True"));
        let ready = ready_condition.is_some() && !terminating;
        Self {
            controller: controller_of(pod).map(PodController::of),
            ready,
            ready_since: ready_condition
                .filter(|_| ready)
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0),
            live: !terminating && !finished,
        }
    }
}

/// What the watcher keeps of a Deployment, ReplicaSet, ReplicationController or StatefulSet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerFacts {
    /// Matched against the uid in controller references: a reference to a deleted namesake is no
    /// reference.
    pub uid: String,
    /// `spec.replicas`; the apiserver defaults it to 1.
    pub replicas: u32,
    /// `spec.minReadySeconds`: its pods are available once Ready this long.
    pub min_ready_seconds: u32,
    /// A deletion timestamp: it replaces nothing any more, so its losses are no breach of the SLA.
    pub deleting: bool,
    /// For a ReplicaSet: the name and uid of the Deployment that controls it.
    pub deployment: Option<(String, String)>,
}

fn controller_of<K: Resource>(object: &K) -> Option<&OwnerReference> {
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

fn controller_facts<K: Resource>(
    object: &K,
    replicas: Option<i32>,
    min_ready_seconds: Option<i32>,
) -> ControllerFacts {
    let deployment = controller_of(object)
        .filter(|r| r.kind == "Deployment" && r.api_version.starts_with("apps/"))
        .map(|r| (r.name.clone(), r.uid.clone()));
    ControllerFacts {
        uid: object.meta().uid.clone().unwrap_or_default(),
        replicas: u32::try_from(replicas.unwrap_or(1)).unwrap_or(0),
        min_ready_seconds: u32::try_from(min_ready_seconds.unwrap_or(0)).unwrap_or(0),
        deleting: object.meta().deletion_timestamp.is_some(),
        deployment,
    }
}

/// The objects of one kind that a watch reports. After a relist (an expired watch, a restarted
/// apiserver) the listing replaces what was known, so objects deleted while the watch was down are
/// forgotten too.
#[derive(Debug)]
pub struct Store<T> {
    pub objects: HashMap<String, T>,
    /// The keys listed since the relist began.
    listing: Option<HashSet<String>>,
    /// A first listing is complete.
    pub synced: bool,
}

impl<T> Default for Store<T> {
    fn default() -> Self {
        Self {
            objects: HashMap::new(),
            listing: None,
            synced: false,
        }
    }
}

impl<T> Store<T> {
    pub fn apply(&mut self, key: String, facts: T) {
        if let Some(listing) = self.listing.as_mut() {
            listing.insert(key.clone());
        }
        self.objects.insert(key, facts);
    }

    pub fn delete(&mut self, key: &str) {
        self.objects.remove(key);
    }

    pub fn relist_started(&mut self) {
        self.listing = Some(HashSet::new());
    }

    pub fn relist_done(&mut self) {
        if let Some(listing) = self.listing.take() {
            self.objects.retain(|key, _| listing.contains(key));
        }
        self.synced = true;
    }
}

/// Every store of the watcher.
#[derive(Debug, Default)]
pub struct Objects {
    /// By uid.
    pub pods: Store<PodFacts>,
    /// By name, as controller references name them.
    pub deployments: Store<ControllerFacts>,
    pub replica_sets: Store<ControllerFacts>,
    pub replication_controllers: Store<ControllerFacts>,
    pub stateful_sets: Store<ControllerFacts>,
}

impl Objects {
    pub fn synced(&self) -> bool {
        self.pods.synced
            && self.deployments.synced
            && self.replica_sets.synced
            && self.replication_controllers.synced
            && self.stateful_sets.synced
    }
}

/// A kind of object that the watcher follows: where it is stored, under which key, and what is kept
/// of it.
pub trait Tracked: Resource + Clone + std::fmt::Debug + Send + 'static {
    type Facts;
    fn key(&self) -> String;
    fn facts(&self) -> Self::Facts;
    fn store(objects: &mut Objects) -> &mut Store<Self::Facts>;
}

impl Tracked for Pod {
    type Facts = PodFacts;
    fn key(&self) -> String {
        self.uid().unwrap_or_default()
    }
    fn facts(&self) -> PodFacts {
        PodFacts::of(self)
    }
    fn store(objects: &mut Objects) -> &mut Store<PodFacts> {
        &mut objects.pods
    }
}

/// The controllers are all keyed by name and kept as [`ControllerFacts`].
macro_rules! tracked_controller {
    ($kind:ty, $store:ident) => {
        impl Tracked for $kind {
            type Facts = ControllerFacts;
            fn key(&self) -> String {
                self.name_any()
            }
            fn facts(&self) -> ControllerFacts {
                let spec = self.spec.as_ref();
                controller_facts(
                    self,
                    spec.and_then(|s| s.replicas),
                    spec.and_then(|s| s.min_ready_seconds),
                )
            }
            fn store(objects: &mut Objects) -> &mut Store<ControllerFacts> {
                &mut objects.$store
            }
        }
    };
}

tracked_controller!(Deployment, deployments);
tracked_controller!(ReplicaSet, replica_sets);
tracked_controller!(ReplicationController, replication_controllers);
tracked_controller!(StatefulSet, stateful_sets);
