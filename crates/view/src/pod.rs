//! Pod → [`PodView`]: where it runs (if anywhere yet), who controls it, and whether it is Ready or
//! on its way out.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use k8sm_planner::{ControllerRef, PodPhase, PodPins, PodView, Resources};

use crate::intern::Interner;
use crate::meta::controller_ref;
use crate::time::from_timestamp;

/// Pods' labels and controller references, one shared copy of each (a ReplicaSet's pods all have
/// the same).
static LABELS: LazyLock<Interner<BTreeMap<String, String>>> = LazyLock::new(Interner::new);
static CONTROLLERS: LazyLock<Interner<ControllerRef>> = LazyLock::new(Interner::new);
/// Namespaces and node names, shared by the pods of one namespace, of one node.
static NAMES: LazyLock<Interner<str>> = LazyLock::new(Interner::new);

/// The annotation the kubelet puts on the mirror pod of a static pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// What the conversion reads of a pod: a full [`Pod`] (the plugin's lists), or a cache's slimmer
/// copy of one (the controller keeps tens of thousands, and a `Pod` holds every field of its spec
/// and status inline however few are set).
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

/// Where the planner's view of a pod comes from: built from a full [`Pod`] on demand (the plugin's
/// one-shot lists), or shared from a cache that built it once when the pod last changed (the
/// controller: a pass then copies no pod).
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

/// `status.phase`; a pod without one (just created) is treated as running, which is what the drain
/// must assume.
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
mod tests {
    //! Table tests of `pod_view`, from hand-written Pod objects.

    use chrono::{DateTime, Utc};
    use serde_json::{Value, json};

    use super::*;
    use k8sm_planner::ControllerRef;

    /// A pod `web-1` in namespace shop, with `metadata` merged over the defaults, and `spec` and
    /// `status` as given.
    fn pod(metadata: Value, spec: Value, status: Value) -> Pod {
        let mut meta = json!({"name": "web-1", "namespace": "shop", "uid": "u-web-1", "labels": {"app": "web"}});
        for (key, value) in metadata.as_object().expect("an object") {
            meta[key] = value.clone();
        }
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status
        }))
        .expect("a Pod")
    }

    fn rfc3339(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    #[test]
    fn identity_labels_and_creation() {
        let view = pod_view(&pod(
            json!({"creationTimestamp": "2026-01-01T00:00:05Z"}),
            json!({"nodeName": "n1", "containers": []}),
            json!({}),
        ));
        assert_eq!(
            (&*view.namespace, &*view.name, &*view.uid),
            ("shop", "web-1", "u-web-1")
        );
        assert_eq!(view.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(view.node_name.as_deref(), Some("n1"));
        assert_eq!(view.created, Some(rfc3339("2026-01-01T00:00:05Z")));
        assert!(!view.terminating);
    }

    #[test]
    fn an_unscheduled_pod_has_no_node() {
        let view = pod_view(&pod(
            json!({}),
            json!({"containers": []}),
            json!({"phase": "Pending"}),
        ));
        assert_eq!(view.node_name, None);
        assert_eq!(view.phase, PodPhase::Pending);
    }

    #[test]
    fn phases() {
        for (phase, expected) in [
            (json!("Pending"), PodPhase::Pending),
            (json!("Running"), PodPhase::Running),
            (json!("Succeeded"), PodPhase::Succeeded),
            (json!("Failed"), PodPhase::Failed),
            (json!("Unknown"), PodPhase::Unknown),
            (Value::Null, PodPhase::Running),
        ] {
            let view = pod_view(&pod(json!({}), json!({}), json!({"phase": phase})));
            assert_eq!(view.phase, expected, "{phase}");
        }
    }

    #[test]
    fn ready_is_the_ready_condition_true() {
        for (conditions, expected) in [
            (json!([{"type": "Ready", "status": "True"}]), true),
            (
                json!([{"type": "Ready", "status": "False"}, {"type": "ContainersReady", "status": "True"}]),
                false,
            ),
            (json!([{"type": "PodScheduled", "status": "True"}]), false),
            (json!([]), false),
        ] {
            let view = pod_view(&pod(
                json!({}),
                json!({}),
                json!({"conditions": conditions}),
            ));
            assert_eq!(view.ready, expected, "{conditions}");
        }
    }

    #[test]
    fn the_controller_is_the_owner_reference_marked_controller() {
        let replica_set = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-6d4f", "uid": "rs1", "controller": true});
        let keeper = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "cm1"});
        let not_controller = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "old", "uid": "rs0", "controller": false});
        let web = Some(ControllerRef::new(
            "shop",
            "apps/v1",
            "ReplicaSet",
            "web-6d4f",
            "rs1",
        ));
        for (references, expected) in [
            (json!([keeper, replica_set]), web),
            (json!([keeper, not_controller]), None),
            (json!([]), None),
        ] {
            let view = pod_view(&pod(
                json!({"ownerReferences": references}),
                json!({}),
                json!({}),
            ));
            assert_eq!(
                view.controller.as_deref(),
                expected.as_ref(),
                "{references}"
            );
        }
    }

    #[test]
    fn mirror_pods_and_annotations() {
        let view = pod_view(&pod(
            json!({"annotations": {"kubernetes.io/config.mirror": "abc", "karpenter.sh/do-not-disrupt": "true"}}),
            json!({}),
            json!({}),
        ));
        assert!(view.mirror);
        assert_eq!(
            view.annotations
                .get("karpenter.sh/do-not-disrupt")
                .map(String::as_str),
            Some("true")
        );
        assert!(!pod_view(&pod(json!({}), json!({}), json!({}))).mirror);
    }

    #[test]
    fn a_deletion_timestamp_means_terminating() {
        let view = pod_view(&pod(
            json!({"deletionTimestamp": "2026-01-01T00:01:00Z"}),
            json!({}),
            json!({}),
        ));
        assert!(view.terminating);
    }

    /// The pods of one ReplicaSet share one copy of their labels and of their controller reference
    /// (the controller caches tens of thousands of views); a pod with other labels gets its
    /// own.
    #[test]
    fn pods_of_one_controller_share_their_labels_and_reference() {
        let owned = |name: &str, labels: Value| {
            pod_view(&pod(
                json!({"name": name, "uid": format!("u-{name}"), "labels": labels, "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-6d4f", "uid": "rs-1", "controller": true}
                ]}),
                json!({"containers": []}),
                json!({}),
            ))
        };
        let (a, b) = (
            owned("web-a", json!({"app": "shared-labels-test"})),
            owned("web-b", json!({"app": "shared-labels-test"})),
        );
        assert!(Arc::ptr_eq(&a.labels, &b.labels));
        let (ra, rb) = (a.controller.unwrap(), b.controller.unwrap());
        assert!(Arc::ptr_eq(&ra, &rb));
        assert_eq!(ra.uid, "rs-1");
        let c = owned(
            "web-c",
            json!({"app": "shared-labels-test", "canary": "yes"}),
        );
        assert!(!Arc::ptr_eq(&a.labels, &c.labels));
        assert_eq!(c.labels.get("canary").map(String::as_str), Some("yes"));
    }

    /// The pods of one node share one copy of its name, and those of one namespace one copy of it:
    /// the planner reads every pod's node on every pass, from one place per node.
    #[test]
    fn pods_of_one_node_share_its_name_and_namespace() {
        let on = |name: &str, namespace: &str, node: &str| {
            pod_view(&pod(
                json!({"name": name, "namespace": namespace, "uid": format!("u-{name}")}),
                json!({"nodeName": node, "containers": []}),
                json!({}),
            ))
        };
        let (a, b, c) = (
            on("a", "shared-names-test", "node-shared-names-test"),
            on("b", "shared-names-test", "node-shared-names-test"),
            on("c", "shared-names-test-2", "node-shared-names-test-2"),
        );
        let name = |p: &PodView| Arc::clone(p.node_name.as_ref().expect("bound"));
        assert!(Arc::ptr_eq(&name(&a), &name(&b)));
        assert!(Arc::ptr_eq(&a.namespace, &b.namespace));
        assert!(!Arc::ptr_eq(&name(&a), &name(&c)));
        assert_eq!(
            (&*c.namespace, c.node_name.as_deref()),
            ("shared-names-test-2", Some("node-shared-names-test-2"))
        );
        assert_eq!((&*a.name, &*a.uid), ("a", "u-a"));
    }
}
