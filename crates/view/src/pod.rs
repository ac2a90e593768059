//! Pod → [`PodView`]: where it runs (if anywhere yet), who controls it, and whether it is Ready or on its way out.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use k8sm_planner::{ControllerRef, PodPhase, PodPins, PodView, Resources};

use crate::intern::Interner;
use crate::meta::controller_ref;
use crate::time::from_timestamp;

/// Pods' labels and controller references, one shared copy of each (a ReplicaSet's pods all have the same).
static LABELS: LazyLock<Interner<BTreeMap<String, String>>> = LazyLock::new(Interner::new);
static CONTROLLERS: LazyLock<Interner<ControllerRef>> = LazyLock::new(Interner::new);
/// Namespaces and node names, shared by the pods of one namespace, of one node.
static NAMES: LazyLock<Interner<str>> = LazyLock::new(Interner::new);

/// The annotation the kubelet puts on the mirror pod of a static pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// What the conversion reads of a pod: a full [`Pod`] (the plugin's lists), or a cache's slimmer copy of one (the
/// controller keeps tens of thousands, and a `Pod` holds every field of its spec and status inline however few are
/// set).
pub trait PodFields {
    fn meta(&self) -> &ObjectMeta;
    /// `spec.nodeName`.
    fn node_name(&self) -> Option<&str>;
    /// `status.phase`.
    fn phase(&self) -> Option<&str>;
    /// Whether `status.conditions` has Ready True.
    fn ready(&self) -> bool;
    /// The `lastTransitionTime` of the Ready condition, if it has one.
    fn ready_changed(&self) -> Option<DateTime<Utc>>;
    /// What may pin it to one node ([`crate::pod_pins`]).
    fn pins(&self) -> Option<Box<PodPins>>;
    /// What the scheduler reserves for it ([`crate::pod_requests`]).
    fn requests(&self) -> Resources;
}

impl PodFields for Pod {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn node_name(&self) -> Option<&str> {
        self.spec.as_ref()?.node_name.as_deref()
    }

    fn phase(&self) -> Option<&str> {
        self.status.as_ref()?.phase.as_deref()
    }

    fn ready(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    }

    fn ready_changed(&self) -> Option<DateTime<Utc>> {
        let conditions = self.status.as_ref()?.conditions.as_ref()?;
        let ready = conditions.iter().find(|c| c.type_ == "Ready")?;
        ready
            .last_transition_time
            .as_ref()
            .map(|t| from_timestamp(&t.0))
    }

    fn pins(&self) -> Option<Box<PodPins>> {
        crate::pins_of(self)
    }

    fn requests(&self) -> Resources {
        crate::requests_of(self)
    }
}

/// Where the planner's view of a pod comes from: built from a full [`Pod`] on demand (the plugin's one-shot lists), or
/// shared from a cache that built it once when the pod last changed (the controller: a pass then copies no pod).
pub trait PodSource {
    fn pod_view(&self) -> Arc<PodView>;
}

impl PodSource for Pod {
    fn pod_view(&self) -> Arc<PodView> {
        Arc::new(pod_view(self))
    }
}

pub fn pod_view(pod: &impl PodFields) -> PodView {
    let meta = pod.meta();
    let annotations = meta.annotations.clone().unwrap_or_default();
    PodView {
        namespace: NAMES.intern(meta.namespace.as_deref().unwrap_or_default()),
        name: meta
            .name
            .as_deref()
            .or(meta.generate_name.as_deref())
            .unwrap_or_default()
            .into(),
        uid: meta.uid.as_deref().unwrap_or_default().into(),
        node_name: pod.node_name().map(|n| NAMES.intern(n)),
        labels: LABELS.intern(meta.labels.clone().unwrap_or_default()),
        mirror: annotations.contains_key(MIRROR_ANNOTATION),
        annotations,
        controller: controller_ref(meta).map(|c| CONTROLLERS.intern(c)),
        phase: phase(pod.phase()),
        ready: pod.ready(),
        terminating: meta.deletion_timestamp.is_some(),
        created: meta
            .creation_timestamp
            .as_ref()
            .map(|t| from_timestamp(&t.0)),
        ready_changed: pod.ready_changed(),
        deletion: meta
            .deletion_timestamp
            .as_ref()
            .map(|t| from_timestamp(&t.0)),
        finalizers: meta.finalizers.clone().unwrap_or_default(),
        pins: pod.pins(),
        requests: pod.requests(),
    }
}

/// `status.phase`; a pod without one (just created) is treated as running, which is what the drain must assume.
fn phase(phase: Option<&str>) -> PodPhase {
    match phase {
        Some("Pending") => PodPhase::Pending,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some("Unknown") => PodPhase::Unknown,
        _ => PodPhase::Running,
    }
}

#[cfg(test)]
#[path = "pod_tests.rs"]
mod tests;
