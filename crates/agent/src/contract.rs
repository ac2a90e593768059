//! The agent's side of the Node contract (docs/design.md §3): what it reads from a Node and the
//! merge patches it writes.
//!
//! Pure functions, shared by `run` and `simulate`, so both modes obey kamikaze by exactly the same
//! rule.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::Node;
use k8sm_api::keys::{
    DRAINING_ANNOTATION, EXECUTOR_ID_ANNOTATION, INCOMPATIBLE_EXECUTOR_ANNOTATION,
    INCOMPATIBLE_EXECUTOR_LABEL, INCOMPATIBLE_EXECUTOR_LABEL_VALUE, KAMIKAZE_ANNOTATION,
    KAMIKAZE_EXECUTOR_ID_ANNOTATION, KAMIKAZE_OBEYED_ANNOTATION,
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

/// What the kamikaze annotation on a node means to the executor that runs `running_id` there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KamikazeFor<'a> {
    /// The node carries no kamikaze.
    None,
    /// Obey this kamikaze (the annotation's value): this executor was told and nobody obeyed it
    /// yet.
    Pending(&'a str),
    /// This executor ID obeyed this kamikaze already and is running again: the executor came back
    /// with its old ID (e.g. the new package was missing). It acknowledges by removing the
    /// kamikaze and must not restart again.
    Returned(&'a str),
    /// Meant for another executor, which has restarted since: leave it to the controller.
    Ignored,
}

/// Reads the kamikaze on `node` for the executor running `running_id`.
///
/// An executor obeys a given kamikaze once: it writes the value it obeys as `kamikaze-obeyed`
/// before it restarts, and a kamikaze with that value is never obeyed again, whatever ID the
/// executor comes back with. Next to the kamikaze, the controller records the ID the node reported
/// when it was told (`kamikaze-executor-id`, empty when none): a kamikaze recorded for another ID
/// was meant for an executor that has restarted since. Without the record (someone set the kamikaze
/// by hand) the kamikaze is meant for whoever runs now, and the executor that obeys writes
/// the record itself.
pub fn kamikaze_for<'a>(node: &'a Node, running_id: Option<&str>) -> KamikazeFor<'a> {
    let Some(kamikaze) = annotation(node, KAMIKAZE_ANNOTATION) else {
        return KamikazeFor::None;
    };
    let running_id = running_id.unwrap_or_default();
    let record = annotation(node, KAMIKAZE_EXECUTOR_ID_ANNOTATION);
    let obeyed = annotation(node, KAMIKAZE_OBEYED_ANNOTATION) == Some(kamikaze);
    match record {
        Some(record) if record != running_id => KamikazeFor::Ignored,
        _ if !obeyed => KamikazeFor::Pending(kamikaze),
        // Obeyed, and recorded for the ID running now: it came back with the executor that was
        // told. Without a record (removed by hand since: whoever obeyed wrote one) there is
        // no telling who obeyed it.
        Some(_) => KamikazeFor::Returned(kamikaze),
        None => KamikazeFor::Ignored,
    }
}

/// The kamikaze that the executor running `running_id` obeyed before it came back with the same ID,
/// if so.
pub fn returned_from_kamikaze<'a>(node: &'a Node, running_id: Option<&str>) -> Option<&'a str> {
    match kamikaze_for(node, running_id) {
        KamikazeFor::Returned(kamikaze) => Some(kamikaze),
        _ => None,
    }
}

/// Why a node is not one that k8sm drained: the `Http` kamikaze is refused (409) on such a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotDrained {
    #[error(
        "it is not marked incompatible (no {INCOMPATIBLE_EXECUTOR_LABEL} label or annotation): k8sm drains only \
         marked nodes"
    )]
    NotMarked,
    #[error(
        "k8sm did not admit it into a drain slot (no {DRAINING_ANNOTATION} annotation): k8sm tells only nodes it \
         drained to terminate"
    )]
    NotAdmitted,
}

/// Whether `node` shows that k8sm drained it, the precondition of obeying an `Http` kamikaze: it is
/// marked incompatible and carries the controller's admission record ([`DRAINING_ANNOTATION`],
/// written when k8sm admits a node into a drain slot and kept until the node comes back upgraded).
/// Only the controller writes these keys (the agent's ValidatingAdmissionPolicy in deploy/ denies
/// them to the agent), so a request that got past the token check still cannot restart a node that
/// k8sm never drained.
///
/// The `Annotation` mechanism needs no such check: writing the kamikaze annotation takes the
/// controller's (or an operator's) own permission on the Node, which is the decision itself.
pub fn drained_by_k8sm(node: &Node) -> Result<(), NotDrained> {
    let labelled = node
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(INCOMPATIBLE_EXECUTOR_LABEL))
        .is_some_and(|value| value == INCOMPATIBLE_EXECUTOR_LABEL_VALUE);
    if !labelled && annotation(node, INCOMPATIBLE_EXECUTOR_ANNOTATION).is_none() {
        return Err(NotDrained::NotMarked);
    }
    if annotation(node, DRAINING_ANNOTATION).is_none() {
        return Err(NotDrained::NotAdmitted);
    }
    Ok(())
}

/// The value recorded as obeyed for a kamikaze that came without one (an HTTP POST without a body):
/// the current time, formatted as the controller formats the kamikaze annotation.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// The merge patch that publishes `executor_id`. With a resource version, the apiserver rejects the
/// patch (409) if the node changed since it was read, so a concurrent writer is never overwritten
/// by a decision made on stale data.
pub fn publish_patch(executor_id: &str, resource_version: Option<&str>) -> Value {
    let annotations = Map::from_iter([(EXECUTOR_ID_ANNOTATION.to_owned(), json!(executor_id))]);
    metadata_patch(annotations, resource_version)
}

/// The merge patch that an executor writes before it restarts for kamikaze `kamikaze`: it records
/// the kamikaze as obeyed and, for a kamikaze that came without the record of the executor told
/// (see [`kamikaze_for`]), `record` as that executor.
pub fn obey_patch(kamikaze: &str, record: Option<&str>, resource_version: Option<&str>) -> Value {
    let mut annotations =
        Map::from_iter([(KAMIKAZE_OBEYED_ANNOTATION.to_owned(), json!(kamikaze))]);
    if let Some(record) = record {
        annotations.insert(KAMIKAZE_EXECUTOR_ID_ANNOTATION.to_owned(), json!(record));
    }
    metadata_patch(annotations, resource_version)
}

/// The merge patch by which an executor that came back with its old ID acknowledges the kamikaze it
/// obeyed: the kamikaze goes, the record and `kamikaze-obeyed` stay, so the controller sees a node
/// that came back with the executor it told to terminate.
pub fn acknowledge_patch(resource_version: Option<&str>) -> Value {
    // `null` removes a key in a JSON merge patch.
    let annotations = Map::from_iter([(KAMIKAZE_ANNOTATION.to_owned(), Value::Null)]);
    metadata_patch(annotations, resource_version)
}

/// The merge patch of a simulated restart that obeyed kamikaze `obeyed`: the kamikaze goes and is
/// recorded as obeyed; the executor comes back reporting `reported`. `reported: None`: it came back
/// with the ID it had, which stays, and the patch leaves the node exactly as a real agent leaves it
/// then (see [`acknowledge_patch`]), with `record` written for a kamikaze that had none. Every
/// other k8sm key belongs to the controller, which recognises the restart by the changed ID (or the
/// comeback by the unchanged one) and clears its own keys.
pub fn restart_patch(
    reported: Option<&str>,
    obeyed: &str,
    record: Option<&str>,
    resource_version: Option<&str>,
) -> Value {
    let mut annotations = Map::from_iter([
        (KAMIKAZE_ANNOTATION.to_owned(), Value::Null),
        (KAMIKAZE_OBEYED_ANNOTATION.to_owned(), json!(obeyed)),
    ]);
    if let Some(reported) = reported {
        annotations.insert(EXECUTOR_ID_ANNOTATION.to_owned(), json!(reported));
    }
    if let Some(record) = record {
        annotations.insert(KAMIKAZE_EXECUTOR_ID_ANNOTATION.to_owned(), json!(record));
    }
    metadata_patch(annotations, resource_version)
}

fn metadata_patch(annotations: Map<String, Value>, resource_version: Option<&str>) -> Value {
    let mut metadata = Map::from_iter([("annotations".to_owned(), Value::Object(annotations))]);
    if let Some(version) = resource_version {
        metadata.insert("resourceVersion".to_owned(), json!(version));
    }
    json!({ "metadata": metadata })
}

/// Applies a merge patch's annotations to `node`, as the apiserver would: for the tests of the
/// agent's decisions.
#[cfg(test)]
pub(crate) fn apply_annotations(node: &mut Node, patch: &Value) {
    let annotations = node
        .metadata
        .annotations
        .get_or_insert_with(std::collections::BTreeMap::new);
    for (key, value) in patch["metadata"]["annotations"].as_object().unwrap() {
        match value.as_str() {
            Some(value) => annotations.insert(key.clone(), value.to_owned()),
            None => annotations.remove(key),
        };
    }
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
    const LATER: &str = "2025-01-01T01:00:00Z";
    const K: &str = KAMIKAZE_ANNOTATION;
    const RECORD: &str = KAMIKAZE_EXECUTOR_ID_ANNOTATION;
    const OBEYED: &str = KAMIKAZE_OBEYED_ANNOTATION;

    type Annotations<'a> = &'a [(&'a str, &'a str)];

    #[test]
    fn what_a_kamikaze_means_to_the_running_executor() {
        use KamikazeFor::{Ignored, None as NoKamikaze, Pending, Returned};
        // (case, annotations, running ID, expected)
        let table: &[(&str, Annotations, Option<&str>, KamikazeFor)] = &[
            ("no kamikaze", &[], Some("old"), NoKamikaze),
            (
                "only an obeyed record left",
                &[(OBEYED, AT), (RECORD, "old")],
                Some("old"),
                NoKamikaze,
            ),
            (
                "set by hand, no record: obeyed",
                &[(K, AT)],
                Some("old"),
                Pending(AT),
            ),
            (
                "set by hand, node reports no ID",
                &[(K, AT)],
                None,
                Pending(AT),
            ),
            (
                "recorded for the running executor",
                &[(K, AT), (RECORD, "old")],
                Some("old"),
                Pending(AT),
            ),
            (
                "recorded for an earlier executor",
                &[(K, AT), (RECORD, "old")],
                Some("new"),
                Ignored,
            ),
            (
                "recorded for an earlier executor, no ID now",
                &[(K, AT), (RECORD, "old")],
                None,
                Ignored,
            ),
            (
                "empty record: the node reported none",
                &[(K, AT), (RECORD, "")],
                None,
                Pending(AT),
            ),
            (
                "empty record, an ID published since",
                &[(K, AT), (RECORD, "")],
                Some("new"),
                Ignored,
            ),
            // Obeyed once: the same ID running again came back with the old executor.
            (
                "obeyed, same ID again",
                &[(K, AT), (RECORD, "old"), (OBEYED, AT)],
                Some("old"),
                Returned(AT),
            ),
            (
                "obeyed, no ID before or after",
                &[(K, AT), (RECORD, ""), (OBEYED, AT)],
                None,
                Returned(AT),
            ),
            (
                "obeyed, a new ID now",
                &[(K, AT), (RECORD, "old"), (OBEYED, AT)],
                Some("new"),
                Ignored,
            ),
            (
                "obeyed, record removed by hand",
                &[(K, AT), (OBEYED, AT)],
                Some("old"),
                Ignored,
            ),
            // A new kamikaze after an obeyed one is a new message.
            (
                "a new value after an obeyed one",
                &[(K, LATER), (RECORD, "old"), (OBEYED, AT)],
                Some("old"),
                Pending(LATER),
            ),
            (
                "a new value, set by hand",
                &[(K, LATER), (OBEYED, AT)],
                Some("old"),
                Pending(LATER),
            ),
            (
                "a new value for an earlier executor",
                &[(K, LATER), (RECORD, "old"), (OBEYED, AT)],
                Some("new"),
                Ignored,
            ),
        ];
        for (case, annotations, running, expected) in table {
            let n = node(annotations);
            assert_eq!(kamikaze_for(&n, *running), *expected, "{case}");
            let returned = matches!(expected, Returned(_))
                .then_some(annotation(&n, K))
                .flatten();
            assert_eq!(
                returned_from_kamikaze(&n, *running),
                returned,
                "{case}: returned"
            );
        }
        assert_eq!(
            kamikaze_for(&Node::default(), None),
            NoKamikaze,
            "no annotations at all"
        );
    }

    #[test]
    fn drained_by_k8sm_means_marked_and_admitted_by_the_controller() {
        const MARK: &str = INCOMPATIBLE_EXECUTOR_ANNOTATION;
        const DRAINING: &str = DRAINING_ANNOTATION;
        let labelled = |annotations: &[(&str, &str)], label: &str| {
            let mut n = node(annotations);
            n.metadata.labels = Some(BTreeMap::from([(
                INCOMPATIBLE_EXECUTOR_LABEL.to_owned(),
                label.to_owned(),
            )]));
            n
        };
        // (case, node, expected)
        let table: Vec<(&str, Node, Result<(), NotDrained>)> = vec![
            (
                "untouched",
                node(&[(EXECUTOR_ID_ANNOTATION, "old")]),
                Err(NotDrained::NotMarked),
            ),
            (
                "marked, not admitted",
                node(&[(MARK, AT)]),
                Err(NotDrained::NotAdmitted),
            ),
            (
                "label only, not admitted",
                labelled(&[], "true"),
                Err(NotDrained::NotAdmitted),
            ),
            (
                "admitted without a mark",
                node(&[(DRAINING, AT)]),
                Err(NotDrained::NotMarked),
            ),
            (
                "label of another value",
                labelled(&[(DRAINING, AT)], "false"),
                Err(NotDrained::NotMarked),
            ),
            (
                "marked and admitted",
                node(&[(MARK, AT), (DRAINING, AT)]),
                Ok(()),
            ),
            (
                "label and admitted",
                labelled(&[(DRAINING, AT)], "true"),
                Ok(()),
            ),
            (
                "told already",
                node(&[(MARK, AT), (DRAINING, AT), (K, AT), (RECORD, "old")]),
                Ok(()),
            ),
            (
                "a kamikaze alone proves nothing",
                node(&[(K, AT), (RECORD, "old")]),
                Err(NotDrained::NotMarked),
            ),
        ];
        for (case, n, expected) in table {
            assert_eq!(drained_by_k8sm(&n), expected, "{case}");
        }
        assert!(
            NotDrained::NotAdmitted.to_string().contains(DRAINING),
            "the refusal names the key"
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
    fn obey_patch_records_the_obeyed_kamikaze_and_the_record_only_when_asked() {
        assert_eq!(
            obey_patch(AT, None, Some("8")),
            json!({
                "metadata": {
                    "resourceVersion": "8",
                    "annotations": { OBEYED: AT }
                }
            })
        );
        assert_eq!(
            obey_patch(AT, Some("old"), Some("8")),
            json!({
                "metadata": {
                    "resourceVersion": "8",
                    "annotations": { OBEYED: AT, RECORD: "old" }
                }
            })
        );
    }

    #[test]
    fn obeying_makes_the_kamikaze_one_this_id_returned_from() {
        // The state machine of one kamikaze, through the patches: told, obeyed, back with the same
        // ID, acknowledged.
        let mut n = node(&[(EXECUTOR_ID_ANNOTATION, "old"), (K, AT)]);
        assert_eq!(kamikaze_for(&n, Some("old")), KamikazeFor::Pending(AT));
        apply_annotations(&mut n, &obey_patch(AT, Some("old"), None));
        assert_eq!(returned_from_kamikaze(&n, Some("old")), Some(AT));
        assert_eq!(kamikaze_for(&n, Some("new")), KamikazeFor::Ignored);
        apply_annotations(&mut n, &acknowledge_patch(None));
        assert_eq!(kamikaze_for(&n, Some("old")), KamikazeFor::None);
        assert_eq!(annotation(&n, RECORD), Some("old"), "record kept");
        assert_eq!(annotation(&n, OBEYED), Some(AT), "obeyed kept");
    }

    #[test]
    fn acknowledge_patch_removes_only_the_kamikaze() {
        assert_eq!(
            acknowledge_patch(Some("9")),
            json!({ "metadata": { "resourceVersion": "9", "annotations": { K: null } } })
        );
    }

    #[test]
    fn restart_patch_reports_the_id_removes_the_kamikaze_and_records_it_obeyed() {
        assert_eq!(
            restart_patch(Some("new"), AT, None, Some("42")),
            json!({
                "metadata": {
                    "resourceVersion": "42",
                    "annotations": {
                        EXECUTOR_ID_ANNOTATION: "new",
                        K: null,
                        OBEYED: AT,
                    }
                }
            })
        );
        assert_eq!(
            restart_patch(None, AT, Some("old"), Some("42")),
            json!({
                "metadata": {
                    "resourceVersion": "42",
                    "annotations": { K: null, OBEYED: AT, RECORD: "old" }
                }
            }),
            "back with the old ID: the ID stays"
        );
    }

    #[test]
    fn now_is_formatted_like_the_controllers_kamikaze() {
        let now = now_rfc3339();
        assert_eq!(now.len(), AT.len(), "{now}");
        assert!(now.ends_with('Z') && now.as_bytes()[10] == b'T', "{now}");
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
