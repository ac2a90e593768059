//! Pod controllers → [`OwnerView`]: kind, identity, desired replicas and their own controller, so
//! that the planner can judge a ReplicaSet's pods as its Deployment's (docs/design.md §2).

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use k8sm_api::keys;
use k8sm_planner::{OwnerKind, OwnerView, RolloutView};

use crate::meta::controller_ref;

/// The annotation by which a Deployment's controller numbers its ReplicaSets: the highest is the
/// newest.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";

pub fn deployment_view(deployment: &Deployment) -> OwnerView {
    let replicas = deployment.spec.as_ref().and_then(|s| s.replicas);
    let mut view = replicated(OwnerKind::Deployment, &deployment.metadata, replicas);
    view.min_ready_seconds = seconds(deployment.spec.as_ref().and_then(|s| s.min_ready_seconds));
    view.replacing = replacing_pods(deployment);
    view.rollout = Some(rollout(deployment));
    view
}

/// What moving the Deployment's single pod by a surge rollout needs: its strategy, whether its last
/// rollout is complete (`kubectl rollout status`'s test), and k8sm's annotations on it.
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

/// `kubectl rollout status`'s test of a Deployment: its generation observed, not past its progress
/// deadline, and every replica updated and available, none of an older ReplicaSet left.
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

/// The Deployment's Progressing condition says its rollout is stuck (`kubectl rollout status` fails
/// with it).
fn progress_deadline_exceeded(deployment: &Deployment) -> bool {
    let conditions = deployment
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().any(|c| {
        c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
    })
}

/// Whether a Deployment's controller is replacing pods itself: not paused, not past its progress
/// deadline, and either a generation it has not observed yet (a rollout about to start) or pods of
/// older ReplicaSets left (`status.replicas` counts every ReplicaSet's pods,
/// `status.updatedReplicas` the newest one's), the first half of `kubectl rollout status`'s test. A
/// rollout past its deadline replaces a pod only as a new one becomes available, which adds as much
/// readiness as it takes: its pods then move within the headroom of its Ready count.
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

/// Whether a StatefulSet's controller is about to replace a Ready pod: a rolling update not done (a
/// generation not observed yet, or fewer pods of the update revision than the partition asks for)
/// while every replica is Ready, which is when it deletes the next old pod. While a pod is not
/// Ready it waits for it, as with a rollout stuck on a bad image: its pods then move within the
/// headroom of its Ready count. `OnDelete` replaces nothing itself.
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
mod tests {
    //! Table tests of the owner views, from hand-written controller objects.

    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::*;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use k8sm_planner::ControllerRef;

    /// An object of `kind` named web in namespace shop, with `metadata` merged over the defaults
    /// and `spec`.
    fn object<K: DeserializeOwned>(
        api_version: &str,
        kind: &str,
        metadata: Value,
        spec: Value,
    ) -> K {
        let mut meta = json!({"name": "web", "namespace": "shop", "uid": format!("uid-{kind}")});
        for (key, value) in metadata.as_object().expect("an object") {
            meta[key] = value.clone();
        }
        serde_json::from_value(
            json!({"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}),
        )
        .expect("a valid object")
    }

    /// Each kind's view of an object with `metadata` and `spec`.
    fn views(metadata: Value, spec: Value) -> Vec<OwnerView> {
        let (m, s) = (metadata, spec);
        vec![
            deployment_view(&object("apps/v1", "Deployment", m.clone(), s.clone())),
            replica_set_view(&object("apps/v1", "ReplicaSet", m.clone(), s.clone())),
            replication_controller_view(&object(
                "v1",
                "ReplicationController",
                m.clone(),
                s.clone(),
            )),
            stateful_set_view(&object("apps/v1", "StatefulSet", m.clone(), s.clone())),
            job_view(&object("batch/v1", "Job", m, s)),
        ]
    }

    #[test]
    fn kinds_and_identity() {
        let kinds: Vec<(OwnerKind, String, String, String)> = views(json!({}), json!({}))
            .into_iter()
            .map(|o| (o.kind, o.namespace, o.name, o.uid))
            .collect();
        let expected = |kind: OwnerKind, uid: &str| {
            (kind, "shop".to_owned(), "web".to_owned(), uid.to_owned())
        };
        assert_eq!(
            kinds,
            [
                expected(OwnerKind::Deployment, "uid-Deployment"),
                expected(OwnerKind::ReplicaSet, "uid-ReplicaSet"),
                expected(
                    OwnerKind::ReplicationController,
                    "uid-ReplicationController"
                ),
                expected(OwnerKind::StatefulSet, "uid-StatefulSet"),
                expected(OwnerKind::Job, "uid-Job"),
            ]
        );
    }

    #[test]
    fn desired_is_spec_replicas_defaulting_to_one_and_none_for_jobs() {
        for (spec, replicated) in [
            (json!({"replicas": 4}), Some(4)),
            (json!({"replicas": 0}), Some(0)),
            (json!({}), Some(1)),
            (json!({"replicas": -3}), Some(0)),
        ] {
            let desired: Vec<Option<u32>> = views(json!({}), spec.clone())
                .iter()
                .map(|o| o.desired)
                .collect();
            assert_eq!(
                desired,
                [replicated, replicated, replicated, replicated, None],
                "{spec}"
            );
        }
    }

    #[test]
    fn a_deletion_timestamp_means_the_owner_replaces_nothing() {
        for (metadata, exists) in [
            (json!({}), true),
            (json!({"deletionTimestamp": "2026-01-01T00:00:00Z"}), false),
        ] {
            for view in views(metadata.clone(), json!({})) {
                assert_eq!(view.exists, exists, "{} {metadata}", view.kind);
            }
        }
    }

    #[test]
    fn the_controller_is_the_controlling_owner_reference() {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d1", "controller": true});
        let rollout = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "web", "uid": "r1", "controller": true});
        let plain = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "cm1"});
        // Resolved in the holder's namespace: an owner reference names nothing elsewhere.
        let reference = |api_version: &str, kind: &str, uid: &str| {
            ControllerRef::new("shop", api_version, kind, "web", uid)
        };
        for (references, expected) in [
            (
                json!([deployment]),
                Some(reference("apps/v1", "Deployment", "d1")),
            ),
            (
                json!([plain, rollout]),
                Some(reference("argoproj.io/v1alpha1", "Rollout", "r1")),
            ),
            (json!([plain]), None),
            (Value::Null, None),
        ] {
            for view in views(json!({"ownerReferences": references}), json!({})) {
                assert_eq!(view.controller, expected, "{} {references}", view.kind);
            }
        }
    }

    /// A Deployment of one replica with `strategy`, `annotations` and `status` (generation 3).
    fn single(strategy: Value, annotations: Value, status: Value) -> RolloutView {
        let mut object: Deployment = object(
            "apps/v1",
            "Deployment",
            json!({"generation": 3, "annotations": annotations}),
            json!({"replicas": 1, "strategy": strategy, "selector": {}, "template": {}}),
        );
        object.status = serde_json::from_value(status).expect("a status");
        deployment_view(&object)
            .rollout
            .expect("a Deployment has a rollout")
    }

    fn done() -> Value {
        json!({"observedGeneration": 3, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1, "readyReplicas": 1})
    }

    #[test]
    fn a_deployment_tells_its_strategy_and_k8sm_s_annotations_other_kinds_have_no_rollout() {
        let r = single(
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "0%"}}),
            json!({
                keys::SURGE_ANNOTATION: "SingleReplica",
                keys::SURGE_MOVE_ANNOTATION: "2026-01-01T00:00:00Z uid-1",
            }),
            done(),
        );
        assert!(r.rolling_update && r.complete && !r.paused);
        assert_eq!(r.max_surge, Some(IntOrString::Int(1)));
        assert_eq!(r.max_unavailable, Some(IntOrString::String("0%".into())));
        assert_eq!(r.surge.as_deref(), Some("SingleReplica"));
        assert_eq!(r.surge_move.as_deref(), Some("2026-01-01T00:00:00Z uid-1"));
        let recreate = single(json!({"type": "Recreate"}), json!({}), done());
        assert!(!recreate.rolling_update);
        // No strategy written: the apiserver's default, RollingUpdate 25%/25%.
        let default = single(Value::Null, json!({}), done());
        assert!(default.rolling_update && default.max_surge.is_none());
        for view in views(json!({}), json!({})).into_iter().skip(1) {
            assert_eq!(view.rollout, None, "{}", view.kind);
        }
    }

    /// `kubectl rollout status`: observed, not timed out, every replica updated and available, no
    /// old one left.
    #[test]
    fn a_rollout_is_complete_only_by_kubectl_rollout_status_s_test() {
        assert!(single(Value::Null, json!({}), done()).complete);
        let mut not = Vec::new();
        for (field, value) in [
            ("observedGeneration", json!(2)),
            ("updatedReplicas", json!(0)),
            ("replicas", json!(2)),
            ("availableReplicas", json!(0)),
        ] {
            let mut status = done();
            status[field] = value;
            not.push((field, status));
        }
        let mut timed_out = done();
        timed_out["conditions"] = json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]);
        not.push(("progress deadline", timed_out));
        not.push(("no status", Value::Null));
        for (why, status) in not {
            assert!(!single(Value::Null, json!({}), status).complete, "{why}");
        }
    }

    /// A Deployment of 4 rolling out (generation observed, 5 pods of which 1 updated), with
    /// `conditions`.
    fn rolling_deployment(conditions: Value) -> OwnerView {
        let mut object: Deployment = object(
            "apps/v1",
            "Deployment",
            json!({"generation": 2}),
            json!({"replicas": 4}),
        );
        object.status = serde_json::from_value(json!({
            "observedGeneration": 2, "replicas": 5, "updatedReplicas": 1, "readyReplicas": 4,
            "availableReplicas": 4, "conditions": conditions
        }))
        .expect("a status");
        deployment_view(&object)
    }

    /// A rollout stuck past its progress deadline replaces a pod only as a new one becomes
    /// available: no longer "replacing", so its pods move within the headroom of its Ready
    /// count.
    #[test]
    fn a_rollout_past_its_progress_deadline_is_not_replacing() {
        let progressing =
            json!([{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}]);
        assert!(rolling_deployment(progressing).replacing);
        let stuck = json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]);
        assert!(!rolling_deployment(stuck).replacing);
    }

    /// A StatefulSet of 3 with `spec` merged over a rolling update, and `status`.
    fn stateful(spec: Value, status: Value) -> OwnerView {
        let mut base = json!({"replicas": 3});
        for (key, value) in spec.as_object().expect("an object") {
            base[key] = value.clone();
        }
        let mut object: StatefulSet =
            object("apps/v1", "StatefulSet", json!({"generation": 2}), base);
        object.status = serde_json::from_value(status).expect("a status");
        stateful_set_view(&object)
    }

    /// A StatefulSet's controller deletes the next old pod of a rolling update once every replica
    /// is Ready: k8sm adds no eviction then. While one is not Ready (a bad image), or once the
    /// partition is reached, it replaces nothing.
    #[test]
    fn a_stateful_set_replaces_while_its_update_goes_on_with_every_replica_ready() {
        let status = |updated: i32, ready: i32| {
            json!({"observedGeneration": 2, "replicas": 3, "readyReplicas": ready, "updatedReplicas": updated,
               "currentRevision": "web-1", "updateRevision": "web-2"})
        };
        assert!(stateful(json!({}), status(1, 3)).replacing);
        assert!(
            !stateful(json!({}), status(1, 2)).replacing,
            "stuck on a pod that is not Ready"
        );
        let done = json!({"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3,
                      "currentRevision": "web-2", "updateRevision": "web-2"});
        assert!(!stateful(json!({}), done).replacing);
        let partition =
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}});
        assert!(
            !stateful(partition.clone(), status(1, 3)).replacing,
            "partition reached"
        );
        assert!(stateful(partition, status(0, 3)).replacing);
        let on_delete = json!({"updateStrategy": {"type": "OnDelete"}});
        assert!(!stateful(on_delete, status(1, 3)).replacing);
        let unobserved = json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3,
                            "currentRevision": "web-2", "updateRevision": "web-2"});
        assert!(stateful(json!({}), unobserved).replacing);
    }

    /// `spec.minReadySeconds` of every replicated kind: its pods count as available once Ready for
    /// that long.
    #[test]
    fn min_ready_seconds_is_read_for_every_replicated_kind() {
        let read: Vec<u32> = views(json!({}), json!({"minReadySeconds": 30}))
            .iter()
            .map(|o| o.min_ready_seconds)
            .collect();
        assert_eq!(read, [30, 30, 30, 30, 0]);
        let unset: Vec<u32> = views(json!({}), json!({}))
            .iter()
            .map(|o| o.min_ready_seconds)
            .collect();
        assert_eq!(unset, [0; 5]);
    }

    #[test]
    fn a_replica_set_tells_its_revision_and_a_deployment_its_progress_deadline() {
        let with_revision = |revision: &str| {
            let metadata = json!({"annotations": {REVISION_ANNOTATION: revision}});
            replica_set_view(&object("apps/v1", "ReplicaSet", metadata, json!({}))).revision
        };
        assert_eq!(with_revision("12"), 12);
        assert_eq!(with_revision("not a number"), 0);
        let unset = views(json!({}), json!({}));
        assert!(unset.iter().all(|v| v.revision == 0));
        let deadline = |spec: Value| {
            let view = deployment_view(&object("apps/v1", "Deployment", json!({}), spec));
            view.rollout.map(|r| r.progress_deadline_seconds)
        };
        assert_eq!(deadline(json!({"progressDeadlineSeconds": 120})), Some(120));
        assert_eq!(deadline(json!({})), Some(600), "the apiserver's default");
    }

    /// A Deployment's Available condition, False since its last transition: how long it has been
    /// unavailable.
    #[test]
    fn a_deployment_tells_since_when_it_is_unavailable() {
        let since = |conditions: Value| {
            rolling_deployment(conditions)
                .rollout
                .and_then(|r| r.unavailable_since)
        };
        let unavailable = json!([{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                              "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
        assert_eq!(
            since(unavailable),
            Some("2026-01-01T00:00:00Z".parse().unwrap())
        );
        let available = json!([{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
        assert_eq!(since(available), None);
        assert_eq!(since(json!([])), None);
    }
}
