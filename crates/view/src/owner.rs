//! Pod controllers → [`OwnerView`]: kind, identity, desired replicas and their own controller, so that the planner
//! can judge a ReplicaSet's pods as its Deployment's (docs/design.md §2).

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use k8sm_api::keys;
use k8sm_planner::{OwnerKind, OwnerView, RolloutView};

use crate::meta::controller_ref;

/// The annotation by which a Deployment's controller numbers its ReplicaSets: the highest is the newest.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";

pub fn deployment_view(deployment: &Deployment) -> OwnerView {
    let replicas = deployment.spec.as_ref().and_then(|s| s.replicas);
    let mut view = replicated(OwnerKind::Deployment, &deployment.metadata, replicas);
    view.min_ready_seconds = seconds(deployment.spec.as_ref().and_then(|s| s.min_ready_seconds));
    view.replacing = replacing_pods(deployment);
    view.rollout = Some(rollout(deployment));
    view
}

/// What moving the Deployment's single pod by a surge rollout needs: its strategy, whether its last rollout is
/// complete (`kubectl rollout status`'s test), and k8sm's annotations on it.
fn rollout(deployment: &Deployment) -> RolloutView {
    let spec = deployment.spec.as_ref();
    let strategy = spec.and_then(|s| s.strategy.as_ref());
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let annotation = |key: &str| {
        deployment
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
    };
    RolloutView {
        rolling_update: strategy
            .and_then(|s| s.type_.as_deref())
            .is_none_or(|t| t == "RollingUpdate"),
        max_surge: rolling.and_then(|r| r.max_surge.clone()),
        max_unavailable: rolling.and_then(|r| r.max_unavailable.clone()),
        paused: spec.and_then(|s| s.paused).unwrap_or(false),
        complete: rollout_complete(deployment),
        surge: annotation(keys::SURGE_ANNOTATION),
        surge_move: annotation(keys::SURGE_MOVE_ANNOTATION),
        progress_deadline_seconds: spec
            .and_then(|s| s.progress_deadline_seconds)
            .and_then(|s| u32::try_from(s).ok())
            .unwrap_or(k8sm_planner::DEFAULT_PROGRESS_DEADLINE_SECONDS),
        unavailable_since: unavailable_since(deployment),
    }
}

/// When the Deployment's Available condition last turned False, if it is False.
fn unavailable_since(deployment: &Deployment) -> Option<chrono::DateTime<chrono::Utc>> {
    let conditions = deployment
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Available")
        .filter(|c| c.status == "False")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(crate::time::from_time)
}

/// `kubectl rollout status`'s test of a Deployment: its generation observed, not past its progress deadline, and
/// every replica updated and available, none of an older ReplicaSet left.
fn rollout_complete(deployment: &Deployment) -> bool {
    let Some(status) = deployment.status.as_ref() else {
        return false;
    };
    let observed = match (deployment.metadata.generation, status.observed_generation) {
        (Some(generation), Some(observed)) => generation <= observed,
        (None, _) => true,
        (Some(_), None) => false,
    };
    let timed_out = progress_deadline_exceeded(deployment);
    let desired = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let updated = status.updated_replicas.unwrap_or(0);
    let replicas = status.replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    observed && !timed_out && updated >= desired && replicas <= updated && available >= updated
}

/// The Deployment's Progressing condition says its rollout is stuck (`kubectl rollout status` fails with it).
fn progress_deadline_exceeded(deployment: &Deployment) -> bool {
    let conditions = deployment
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().any(|c| {
        c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
    })
}

/// Whether a Deployment's controller is replacing pods itself: not paused, not past its progress deadline, and either
/// a generation it has not observed yet (a rollout about to start) or pods of older ReplicaSets left
/// (`status.replicas` counts every ReplicaSet's pods, `status.updatedReplicas` the newest one's), the first half of
/// `kubectl rollout status`'s test. A rollout past its deadline replaces a pod only as a new one becomes available,
/// which adds as much readiness as it takes: its pods then move within the headroom of its Ready count.
fn replacing_pods(deployment: &Deployment) -> bool {
    if progress_deadline_exceeded(deployment) {
        return false;
    }
    let paused = deployment
        .spec
        .as_ref()
        .and_then(|s| s.paused)
        .unwrap_or(false);
    let status = deployment.status.as_ref();
    let observed = status.and_then(|s| s.observed_generation);
    let unobserved = match (deployment.metadata.generation, observed) {
        (Some(generation), Some(observed)) => generation > observed,
        (Some(_), None) => true,
        (None, _) => false,
    };
    let replicas = status.and_then(|s| s.replicas).unwrap_or(0);
    let updated = status.and_then(|s| s.updated_replicas).unwrap_or(0);
    !paused && (unobserved || replicas > updated)
}

pub fn replica_set_view(replica_set: &ReplicaSet) -> OwnerView {
    let spec = replica_set.spec.as_ref();
    let mut view = replicated(
        OwnerKind::ReplicaSet,
        &replica_set.metadata,
        spec.and_then(|s| s.replicas),
    );
    view.min_ready_seconds = seconds(spec.and_then(|s| s.min_ready_seconds));
    view.revision = replica_set
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    view
}

/// `spec.minReadySeconds`; unset or negative (which the apiserver rejects) is 0.
fn seconds(min_ready_seconds: Option<i32>) -> u32 {
    min_ready_seconds.map_or(0, |s| u32::try_from(s).unwrap_or(0))
}

pub fn replication_controller_view(controller: &ReplicationController) -> OwnerView {
    let spec = controller.spec.as_ref();
    let mut view = replicated(
        OwnerKind::ReplicationController,
        &controller.metadata,
        spec.and_then(|s| s.replicas),
    );
    view.min_ready_seconds = seconds(spec.and_then(|s| s.min_ready_seconds));
    view
}

pub fn stateful_set_view(stateful_set: &StatefulSet) -> OwnerView {
    let replicas = stateful_set.spec.as_ref().and_then(|s| s.replicas);
    let mut view = replicated(OwnerKind::StatefulSet, &stateful_set.metadata, replicas);
    view.min_ready_seconds = seconds(stateful_set.spec.as_ref().and_then(|s| s.min_ready_seconds));
    view.replacing = stateful_set_replacing(stateful_set);
    view
}

/// Whether a StatefulSet's controller is about to replace a Ready pod: a rolling update not done (a generation not
/// observed yet, or fewer pods of the update revision than the partition asks for) while every replica is Ready,
/// which is when it deletes the next old pod. While a pod is not Ready it waits for it, as with a rollout stuck on a
/// bad image: its pods then move within the headroom of its Ready count. `OnDelete` replaces nothing itself.
fn stateful_set_replacing(stateful_set: &StatefulSet) -> bool {
    let spec = stateful_set.spec.as_ref();
    let strategy = spec.and_then(|s| s.update_strategy.as_ref());
    if strategy.and_then(|s| s.type_.as_deref()) == Some("OnDelete") {
        return false;
    }
    let Some(status) = stateful_set.status.as_ref() else {
        return false;
    };
    let replicas = spec.and_then(|s| s.replicas).unwrap_or(1);
    let partition = strategy
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0)
        .clamp(0, replicas);
    let unobserved = match (stateful_set.metadata.generation, status.observed_generation) {
        (Some(generation), Some(observed)) => generation > observed,
        (Some(_), None) => true,
        (None, _) => false,
    };
    let revisions_differ = status.update_revision.is_some()
        && status.current_revision.is_some()
        && status.update_revision != status.current_revision;
    let updating = revisions_differ && status.updated_replicas.unwrap_or(0) < replicas - partition;
    let all_ready = status.ready_replicas.unwrap_or(0) >= replicas;
    (unobserved || updating) && all_ready
}

/// A Job: its pods wait for completion, so it has no desired count.
pub fn job_view(job: &Job) -> OwnerView {
    owner(OwnerKind::Job, &job.metadata, None)
}

/// A kind whose `spec.replicas` is the desired count.
fn replicated(kind: OwnerKind, meta: &ObjectMeta, replicas: Option<i32>) -> OwnerView {
    // The apiserver defaults replicas to 1; a negative count cannot be stored.
    let desired = u32::try_from(replicas.unwrap_or(1)).unwrap_or(0);
    owner(kind, meta, Some(desired))
}

fn owner(kind: OwnerKind, meta: &ObjectMeta, desired: Option<u32>) -> OwnerView {
    OwnerView {
        kind,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        desired,
        controller: controller_ref(meta),
        exists: meta.deletion_timestamp.is_none(),
        replacing: false,
        min_ready_seconds: 0,
        revision: 0,
        rollout: None,
    }
}

#[cfg(test)]
#[path = "owner_tests.rs"]
mod tests;
