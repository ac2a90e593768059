//! Pod → [`PodView`]: where it runs (if anywhere yet), who controls it, and whether it is Ready or on its way out.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use k8sm_planner::{PodPhase, PodView};

use crate::meta::controller_ref;
use crate::time::from_timestamp;

/// The annotation the kubelet puts on the mirror pod of a static pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

pub fn pod_view(pod: &Pod) -> PodView {
    let meta = &pod.metadata;
    let status = pod.status.as_ref();
    let annotations = pod.annotations().clone();
    PodView {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
        node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        labels: pod.labels().clone(),
        mirror: annotations.contains_key(MIRROR_ANNOTATION),
        annotations,
        controller: controller_ref(meta),
        phase: phase(status.and_then(|s| s.phase.as_deref())),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        terminating: meta.deletion_timestamp.is_some(),
        created: meta
            .creation_timestamp
            .as_ref()
            .map(|t| from_timestamp(&t.0)),
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
