//! Node → [`NodeView`]: the contract keys of docs/design.md §3 as found, the cordon, the address,
//! the Ready condition and the allocatable resources.

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use k8sm_api::keys;
use k8sm_planner::NodeView;

use crate::meta::annotation;

pub fn node_view(node: &Node) -> NodeView {
    let meta = &node.metadata;
    let labels = node.labels().clone();
    let status = node.status.as_ref();
    NodeView {
        name: node.name_any(),
        uid: node.uid().unwrap_or_default(),
        resource_version: node.resource_version(),
        incompatible_label: labels.contains_key(keys::INCOMPATIBLE_EXECUTOR_LABEL),
        labels,
        executor_id: annotation(meta, keys::EXECUTOR_ID_ANNOTATION),
        incompatible_since: annotation(meta, keys::INCOMPATIBLE_EXECUTOR_ANNOTATION),
        has_k8sm_taint: has_k8sm_taint(node),
        draining_since: annotation(meta, keys::DRAINING_ANNOTATION),
        kamikaze: annotation(meta, keys::KAMIKAZE_ANNOTATION),
        kamikaze_executor_id: annotation(meta, keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION),
        kamikaze_target: annotation(meta, keys::KAMIKAZE_TARGET_ANNOTATION),
        cordoned_by_k8sm: annotation(meta, keys::CORDONED_BY_ANNOTATION).as_deref()
            == Some(keys::CORDONED_BY_VALUE),
        marked_by_k8sm: annotation(meta, keys::MARKED_BY_ANNOTATION).as_deref()
            == Some(keys::MARKED_BY_VALUE),
        drain_progress: annotation(meta, keys::DRAIN_PROGRESS_ANNOTATION),
        stalled_since: annotation(meta, keys::STALLED_ANNOTATION),
        forced: annotation(meta, keys::FORCED_ANNOTATION),
        // The executor writes the kamikaze it obeyed; any value (even a malformed one) means it
        // obeyed one.
        kamikaze_obeyed: annotation(meta, keys::KAMIKAZE_OBEYED_ANNOTATION).is_some(),
        unschedulable: node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        internal_ip: status
            .and_then(|s| s.addresses.as_ref())
            .and_then(|addresses| addresses.iter().find(|a| a.type_ == "InternalIP"))
            .map(|a| a.address.clone()),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        allocatable: status
            .and_then(|s| s.allocatable.as_ref())
            .map(crate::allocatable),
    }
}

fn has_k8sm_taint(node: &Node) -> bool {
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
    taints.is_some_and(|taints| {
        taints.iter().any(|t| {
            t.key == keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY
                && t.effect == keys::INCOMPATIBLE_EXECUTOR_TAINT_EFFECT
        })
    })
}

#[cfg(test)]
mod tests {
    //! Table tests of `node_view`, from hand-written Node objects.

    use serde_json::{Value, json};

    use super::*;

    /// A Node named n1 with `annotations`, `spec` and `status` as given.
    fn node(annotations: Value, spec: Value, status: Value) -> Node {
        serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "n1",
                "uid": "4f1c-n1",
                "labels": {"kubernetes.io/hostname": "n1"},
                "annotations": annotations
            },
            "spec": spec,
            "status": status
        }))
        .expect("a Node")
    }

    fn annotated(annotations: Value) -> NodeView {
        node_view(&node(annotations, json!({}), json!({})))
    }

    #[test]
    fn identity_and_labels() {
        let view = node_view(&node(json!({}), json!({}), json!({})));
        assert_eq!(view.name, "n1");
        assert_eq!(view.uid, "4f1c-n1");
        assert_eq!(
            view.labels
                .get("kubernetes.io/hostname")
                .map(String::as_str),
            Some("n1")
        );
        assert!(!view.incompatible_label);
    }

    #[test]
    fn annotations_are_kept_as_found() {
        type Field = fn(&NodeView) -> Option<String>;
        let cases: [(&str, &str, Field); 7] = [
            ("k8s.mesosphere.io/executor-id", "sha256:old", |n| {
                n.executor_id.clone()
            }),
            (
                "k8s.mesosphere.io/incompatible-executor",
                "2026-01-01T00:00:00Z",
                |n| n.incompatible_since.clone(),
            ),
            ("k8s.mesosphere.io/draining", "2026-01-01T00:01:00Z", |n| {
                n.draining_since.clone()
            }),
            ("k8s.mesosphere.io/kamikaze", "2026-01-01T00:09:00Z", |n| {
                n.kamikaze.clone()
            }),
            ("k8s.mesosphere.io/kamikaze-executor-id", "", |n| {
                n.kamikaze_executor_id.clone()
            }),
            (
                "k8s.mesosphere.io/drain-progress",
                "2026-01-01T00:05:00Z 3",
                |n| n.drain_progress.clone(),
            ),
            ("k8s.mesosphere.io/stalled", "not a time", |n| {
                n.stalled_since.clone()
            }),
        ];
        for (key, value, field) in cases {
            assert_eq!(field(&annotated(json!({}))), None, "{key} absent");
            assert_eq!(
                field(&annotated(json!({ key: value }))).as_deref(),
                Some(value),
                "{key} as found, even malformed or empty"
            );
        }
    }

    #[test]
    fn k8sm_claims_need_the_value_k8sm() {
        type Claim = fn(&NodeView) -> bool;
        let cases: [(&str, Claim); 2] = [
            ("k8s.mesosphere.io/cordoned-by", |n| n.cordoned_by_k8sm),
            ("k8s.mesosphere.io/marked-by", |n| n.marked_by_k8sm),
        ];
        for (key, claim) in cases {
            for (value, expected) in [
                (Some("k8sm"), true),
                (Some("ops-team"), false),
                (None, false),
            ] {
                let annotations = value.map_or(json!({}), |v| json!({ key: v }));
                assert_eq!(claim(&annotated(annotations)), expected, "{key}={value:?}");
            }
        }
    }

    #[test]
    fn kamikaze_obeyed_is_any_value() {
        for (annotations, expected) in [
            (
                json!({"k8s.mesosphere.io/kamikaze-obeyed": "2026-01-01T00:09:00Z"}),
                true,
            ),
            (json!({"k8s.mesosphere.io/kamikaze-obeyed": ""}), true),
            (
                json!({"k8s.mesosphere.io/kamikaze": "2026-01-01T00:09:00Z"}),
                false,
            ),
            (json!({}), false),
        ] {
            assert_eq!(
                annotated(annotations.clone()).kamikaze_obeyed,
                expected,
                "{annotations}"
            );
        }
    }

    #[test]
    fn the_incompatible_label_any_value() {
        let mut object = node(json!({}), json!({}), json!({}));
        object.metadata.labels = Some(
            [(
                "k8s.mesosphere.io/incompatible-executor".to_owned(),
                "yes".to_owned(),
            )]
            .into(),
        );
        assert!(node_view(&object).incompatible_label);
    }

    #[test]
    fn only_the_prefer_no_schedule_taint_is_k8sm_s() {
        let taint = |key: &str, effect: &str| json!({"taints": [{"key": key, "effect": effect}]});
        for (spec, expected) in [
            (
                taint(
                    "k8s.mesosphere.io/incompatible-executor",
                    "PreferNoSchedule",
                ),
                true,
            ),
            (
                taint("k8s.mesosphere.io/incompatible-executor", "NoSchedule"),
                false,
            ),
            (
                taint("node.kubernetes.io/unschedulable", "PreferNoSchedule"),
                false,
            ),
            (json!({}), false),
        ] {
            let view = node_view(&node(json!({}), spec.clone(), json!({})));
            assert_eq!(view.has_k8sm_taint, expected, "{spec}");
        }
    }

    #[test]
    fn cordon_address_and_readiness() {
        let status = json!({
            "addresses": [
                {"type": "Hostname", "address": "n1"},
                {"type": "InternalIP", "address": "10.1.2.3"}
            ],
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"}
            ]
        });
        let view = node_view(&node(json!({}), json!({"unschedulable": true}), status));
        assert!(view.unschedulable);
        assert_eq!(view.internal_ip.as_deref(), Some("10.1.2.3"));
        assert!(view.ready);

        let not_ready = json!({"conditions": [{"type": "Ready", "status": "Unknown"}]});
        let view = node_view(&node(json!({}), json!({}), not_ready));
        assert!(!view.unschedulable);
        assert_eq!(view.internal_ip, None);
        assert!(!view.ready);
    }
}
