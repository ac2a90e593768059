//! The agent's side of the Node contract (DESIGN.md §3): what it reads from a Node and the merge patches it writes.
//!
//! Pure functions, shared by `run` and `simulate`, so both modes obey kamikaze by exactly the same rule.

use k8s_openapi::api::core::v1::Node;
use k8sm_api::keys::{
    EXECUTOR_ID_ANNOTATION, KAMIKAZE_ANNOTATION, KAMIKAZE_EXECUTOR_ID_ANNOTATION,
};
use serde_json::{Map, Value, json};

/// The value of annotation `key` on `node`, if set.
pub fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The executor ID the node reports now.
pub fn executor_id(node: &Node) -> Option<&str> {
    annotation(node, EXECUTOR_ID_ANNOTATION)
}

/// The kamikaze that the executor running `running_id` on this node must obey, as the annotation's value.
///
/// The controller records, next to the kamikaze, the executor ID the node reported when it was told. A kamikaze
/// recorded for another ID was meant for an executor that has already restarted: obeying it again would restart
/// the new executor in a loop until the controller clears the key. Without that record (an external component set
/// the kamikaze alone), the kamikaze is obeyed.
pub fn pending_kamikaze<'a>(node: &'a Node, running_id: Option<&str>) -> Option<&'a str> {
    let kamikaze = annotation(node, KAMIKAZE_ANNOTATION)?;
    match annotation(node, KAMIKAZE_EXECUTOR_ID_ANNOTATION) {
        // The controller writes an empty value when the node reported no ID.
        Some(meant_for) if meant_for != running_id.unwrap_or_default() => None,
        _ => Some(kamikaze),
    }
}

/// The merge patch that publishes `executor_id`. With a resource version, the apiserver rejects the patch (409) if
/// the node changed since it was read, so a concurrent writer is never overwritten by a decision made on stale data.
pub fn publish_patch(executor_id: &str, resource_version: Option<&str>) -> Value {
    let annotations = Map::from_iter([(EXECUTOR_ID_ANNOTATION.to_owned(), json!(executor_id))]);
    metadata_patch(annotations, resource_version)
}

/// The merge patch of a simulated restart: the executor comes back with `new_executor_id` and the kamikaze it
/// obeyed is gone. Every other k8sm key belongs to the controller, which recognises the restart by the changed ID
/// and clears its own keys.
pub fn restart_patch(new_executor_id: &str, resource_version: Option<&str>) -> Value {
    let annotations = Map::from_iter([
        (EXECUTOR_ID_ANNOTATION.to_owned(), json!(new_executor_id)),
        // `null` removes a key in a JSON merge patch.
        (KAMIKAZE_ANNOTATION.to_owned(), Value::Null),
    ]);
    metadata_patch(annotations, resource_version)
}

/// The merge patch that records `executor_id` as the executor told to terminate, for a kamikaze that came without
/// that record (see [`pending_kamikaze`]).
pub fn record_kamikaze_patch(executor_id: &str, resource_version: Option<&str>) -> Value {
    let annotations = Map::from_iter([(
        KAMIKAZE_EXECUTOR_ID_ANNOTATION.to_owned(),
        json!(executor_id),
    )]);
    metadata_patch(annotations, resource_version)
}

fn metadata_patch(annotations: Map<String, Value>, resource_version: Option<&str>) -> Value {
    let mut metadata = Map::from_iter([("annotations".to_owned(), Value::Object(annotations))]);
    if let Some(version) = resource_version {
        metadata.insert("resourceVersion".to_owned(), json!(version));
    }
    json!({ "metadata": metadata })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(annotations: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n".into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    const AT: &str = "2025-01-01T00:00:00Z";

    #[test]
    fn no_kamikaze_annotation_means_nothing_to_obey() {
        assert_eq!(pending_kamikaze(&node(&[]), Some("old")), None);
        assert_eq!(
            pending_kamikaze(&Node::default(), None),
            None,
            "no annotations at all"
        );
    }

    #[test]
    fn a_kamikaze_without_a_recorded_id_is_obeyed() {
        let n = node(&[(KAMIKAZE_ANNOTATION, AT)]);
        assert_eq!(pending_kamikaze(&n, Some("old")), Some(AT));
        assert_eq!(pending_kamikaze(&n, None), Some(AT));
    }

    #[test]
    fn a_kamikaze_recorded_for_the_running_executor_is_obeyed() {
        let n = node(&[
            (KAMIKAZE_ANNOTATION, AT),
            (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
        ]);
        assert_eq!(pending_kamikaze(&n, Some("old")), Some(AT));
    }

    #[test]
    fn a_kamikaze_recorded_for_an_earlier_executor_is_not_obeyed_again() {
        let n = node(&[
            (KAMIKAZE_ANNOTATION, AT),
            (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
        ]);
        assert_eq!(pending_kamikaze(&n, Some("new")), None);
        assert_eq!(pending_kamikaze(&n, None), None);
    }

    #[test]
    fn an_empty_recorded_id_means_the_node_reported_none() {
        let n = node(&[
            (KAMIKAZE_ANNOTATION, AT),
            (KAMIKAZE_EXECUTOR_ID_ANNOTATION, ""),
        ]);
        assert_eq!(pending_kamikaze(&n, None), Some(AT));
        assert_eq!(
            pending_kamikaze(&n, Some("new")),
            None,
            "an ID published since the kamikaze means the executor already restarted"
        );
    }

    #[test]
    fn executor_id_reads_the_contract_annotation() {
        assert_eq!(
            executor_id(&node(&[(EXECUTOR_ID_ANNOTATION, "old")])),
            Some("old")
        );
        assert_eq!(executor_id(&node(&[("other", "x")])), None);
    }

    #[test]
    fn restart_patch_sets_the_new_id_removes_the_kamikaze_and_nothing_else() {
        let patch = restart_patch("new", Some("42"));
        assert_eq!(
            patch,
            json!({
                "metadata": {
                    "resourceVersion": "42",
                    "annotations": {
                        EXECUTOR_ID_ANNOTATION: "new",
                        KAMIKAZE_ANNOTATION: null,
                    }
                }
            })
        );
    }

    #[test]
    fn record_kamikaze_patch_writes_only_the_record() {
        assert_eq!(
            record_kamikaze_patch("old", Some("8")),
            json!({
                "metadata": {
                    "resourceVersion": "8",
                    "annotations": { KAMIKAZE_EXECUTOR_ID_ANNOTATION: "old" }
                }
            })
        );
    }

    #[test]
    fn publish_patch_is_unconditional_without_a_resource_version() {
        assert_eq!(
            publish_patch("old", None),
            json!({ "metadata": { "annotations": { EXECUTOR_ID_ANNOTATION: "old" } } })
        );
        assert_eq!(
            publish_patch("old", Some("7"))["metadata"]["resourceVersion"],
            "7"
        );
    }
}
