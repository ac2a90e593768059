//! The merge patches of the actions that write a Node, built from the action and the cached Node
//! alone, so that each is tested without a client. Every patch carries the cached resourceVersion:
//! if the node changed since, the apiserver answers 409 and the next plan, made from the fresh
//! node, decides again.

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::ResourceExt;
use serde_json::{Map, Value, json};

use k8sm_api::keys;
use k8sm_planner::ActionKind;

use crate::Error;

/// The patch that carries out `kind` on `node`; an error for an action that does not write a Node.
pub(crate) fn for_action(kind: &ActionKind, node: &Node) -> Result<Value, Error> {
    let mut patch = node_patch(node);
    match kind {
        ActionKind::Mark {
            incompatible_since,
            claim,
            ..
        } => {
            put(
                &mut patch,
                &["metadata", "labels", keys::INCOMPATIBLE_EXECUTOR_LABEL],
                json!(keys::INCOMPATIBLE_EXECUTOR_LABEL_VALUE),
            );
            if *claim {
                annotate(
                    &mut patch,
                    keys::MARKED_BY_ANNOTATION,
                    json!(keys::MARKED_BY_VALUE),
                );
            }
            if let Some(since) = incompatible_since {
                annotate(
                    &mut patch,
                    keys::INCOMPATIBLE_EXECUTOR_ANNOTATION,
                    json!(rfc3339(*since)),
                );
            }
            if !has_our_taint(node) {
                let mut taints = taints(node);
                taints.push(Taint {
                    key: keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY.to_owned(),
                    effect: keys::INCOMPATIBLE_EXECUTOR_TAINT_EFFECT.to_owned(),
                    ..Taint::default()
                });
                put(
                    &mut patch,
                    &["spec", "taints"],
                    serde_json::to_value(taints)?,
                );
            }
        }
        ActionKind::Admit {
            at,
            pods_left,
            cordon,
            ..
        } => {
            annotate(&mut patch, keys::DRAINING_ANNOTATION, json!(rfc3339(*at)));
            annotate(
                &mut patch,
                keys::DRAIN_PROGRESS_ANNOTATION,
                json!(k8sm_planner::drain_progress(*at, *pods_left)),
            );
            annotate(&mut patch, keys::STALLED_ANNOTATION, Value::Null);
            if *cordon {
                cordon_patch(node, &mut patch);
            }
        }
        ActionKind::Progress { at, pods_left, .. } => annotate(
            &mut patch,
            keys::DRAIN_PROGRESS_ANNOTATION,
            json!(k8sm_planner::drain_progress(*at, *pods_left)),
        ),
        ActionKind::Stall { at, uncordon, .. } => {
            annotate(&mut patch, keys::STALLED_ANNOTATION, json!(rfc3339(*at)));
            for key in [
                keys::DRAINING_ANNOTATION,
                keys::DRAIN_PROGRESS_ANNOTATION,
                keys::CORDONED_BY_ANNOTATION,
            ] {
                annotate(&mut patch, key, Value::Null);
            }
            if *uncordon {
                put(&mut patch, &["spec", "unschedulable"], json!(false));
            }
        }
        ActionKind::Cordon { .. } => cordon_patch(node, &mut patch),
        // The record that kamikaze was sent (and, for the Annotation mechanism, the message
        // itself).
        ActionKind::Kamikaze {
            executor_id,
            at,
            target,
            ..
        } => {
            annotate(&mut patch, keys::KAMIKAZE_ANNOTATION, json!(rfc3339(*at)));
            annotate(
                &mut patch,
                keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION,
                json!(executor_id.clone().unwrap_or_default()),
            );
            if let Some(target) = target {
                annotate(&mut patch, keys::KAMIKAZE_TARGET_ANNOTATION, json!(target));
            }
        }
        ActionKind::Complete { uncordon, .. } => return release(node, *uncordon, true),
        ActionKind::Release {
            uncordon,
            remove_mark,
            ..
        } => return release(node, *uncordon, *remove_mark),
        other => {
            return Err(Error::Other(format!("not a Node write: {other:?}")));
        }
    }
    Ok(patch)
}

/// Every annotation k8sm writes on a Node besides the mark: what completing or handing a node back
/// removes.
const K8SM_NODE_ANNOTATIONS: [&str; 10] = [
    keys::KAMIKAZE_ANNOTATION,
    keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION,
    keys::KAMIKAZE_TARGET_ANNOTATION,
    keys::KAMIKAZE_OBEYED_ANNOTATION,
    keys::DRAINING_ANNOTATION,
    keys::DRAIN_PROGRESS_ANNOTATION,
    keys::STALLED_ANNOTATION,
    keys::CORDONED_BY_ANNOTATION,
    keys::MARKED_BY_ANNOTATION,
    keys::FORCED_ANNOTATION,
];

/// The patch of `Complete` (`remove_mark`) and `Release`: k8sm's annotations go; the mark
/// (annotation, label and taint) only with `remove_mark`; the cordon only with `uncordon`.
fn release(node: &Node, uncordon: bool, remove_mark: bool) -> Result<Value, Error> {
    let mut patch = node_patch(node);
    for key in K8SM_NODE_ANNOTATIONS {
        annotate(&mut patch, key, Value::Null);
    }
    if remove_mark {
        put(
            &mut patch,
            &["metadata", "labels", keys::INCOMPATIBLE_EXECUTOR_LABEL],
            Value::Null,
        );
        annotate(
            &mut patch,
            keys::INCOMPATIBLE_EXECUTOR_ANNOTATION,
            Value::Null,
        );
        if has_our_taint(node) {
            let rest: Vec<Taint> = taints(node)
                .into_iter()
                .filter(|t| !is_our_taint(t))
                .collect();
            put(&mut patch, &["spec", "taints"], serde_json::to_value(rest)?);
        }
    }
    if uncordon {
        put(&mut patch, &["spec", "unschedulable"], json!(false));
    }
    Ok(patch)
}

fn annotate(patch: &mut Value, key: &str, value: Value) {
    put(patch, &["metadata", "annotations", key], value);
}

fn node_patch(node: &Node) -> Value {
    json!({ "metadata": { "resourceVersion": node.resource_version() } })
}

/// Cordons, recording that k8sm did it — unless an operator had cordoned the node already: then
/// k8sm must not claim it, or it would uncordon a node the operator wants cordoned.
fn cordon_patch(node: &Node, patch: &mut Value) {
    let already = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    if !already {
        put(patch, &["spec", "unschedulable"], json!(true));
        put(
            patch,
            &["metadata", "annotations", keys::CORDONED_BY_ANNOTATION],
            json!(keys::CORDONED_BY_VALUE),
        );
    }
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

fn is_our_taint(taint: &Taint) -> bool {
    taint.key == keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY
        && taint.effect == keys::INCOMPATIBLE_EXECUTOR_TAINT_EFFECT
}

fn has_our_taint(node: &Node) -> bool {
    taints(node).iter().any(is_our_taint)
}

pub(crate) fn rfc3339(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Sets `value` at `path` in a JSON object, creating the objects on the way.
pub(crate) fn put(target: &mut Value, path: &[&str], value: Value) {
    let (last, parents) = path.split_last().expect("a non-empty path");
    let mut cursor = target;
    for key in parents {
        if !cursor.get(*key).is_some_and(Value::is_object) {
            cursor[*key] = Value::Object(Map::new());
        }
        cursor = &mut cursor[*key];
    }
    cursor[*last] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_builds_nested_objects_and_keeps_siblings() {
        let mut patch = json!({ "metadata": { "resourceVersion": "7" } });
        put(&mut patch, &["metadata", "annotations", "a/b"], json!("x"));
        put(&mut patch, &["metadata", "annotations", "c"], Value::Null);
        put(&mut patch, &["spec", "unschedulable"], json!(true));
        assert_eq!(
            patch,
            json!({
                "metadata": { "resourceVersion": "7", "annotations": { "a/b": "x", "c": null } },
                "spec": { "unschedulable": true }
            })
        );
    }

    #[test]
    fn cordon_does_not_claim_a_node_an_operator_cordoned() {
        let node = Node {
            spec: Some(k8s_openapi::api::core::v1::NodeSpec {
                unschedulable: Some(true),
                ..Default::default()
            }),
            ..Node::default()
        };
        let mut patch = json!({});
        cordon_patch(&node, &mut patch);
        assert_eq!(patch, json!({}));

        let mut patch = json!({});
        cordon_patch(&Node::default(), &mut patch);
        assert_eq!(patch["spec"]["unschedulable"], json!(true));
        assert_eq!(
            patch["metadata"]["annotations"][keys::CORDONED_BY_ANNOTATION],
            json!("k8sm")
        );
    }

    #[test]
    fn timestamps_are_rfc3339_utc_seconds() {
        let t = DateTime::parse_from_rfc3339("2026-11-29T17:00:00.123Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(rfc3339(t), "2026-11-29T17:00:00Z");
    }

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-29T17:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    /// A node at resourceVersion 7, with an operator's taint and, if `marked`, k8sm's.
    fn node(marked: bool) -> Node {
        let mut taints = vec![json!({"key": "dedicated", "effect": "NoSchedule"})];
        if marked {
            taints.push(json!({
                "key": keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY,
                "effect": keys::INCOMPATIBLE_EXECUTOR_TAINT_EFFECT,
            }));
        }
        serde_json::from_value(json!({
            "metadata": {"name": "n1", "resourceVersion": "7"},
            "spec": {"taints": taints},
        }))
        .unwrap()
    }

    fn annotation<'a>(patch: &'a Value, key: &str) -> &'a Value {
        &patch["metadata"]["annotations"][key]
    }

    #[test]
    fn every_patch_carries_the_cached_resource_version() {
        let patch = for_action(&ActionKind::Cordon { node: "n1".into() }, &node(false)).unwrap();
        assert_eq!(patch["metadata"]["resourceVersion"], json!("7"));
    }

    #[test]
    fn a_mark_adds_the_label_the_time_and_the_taint_once_keeping_the_operators_taints() {
        let mark = ActionKind::Mark {
            node: "n1".into(),
            incompatible_since: Some(at()),
            claim: true,
        };
        let patch = for_action(&mark, &node(false)).unwrap();
        assert_eq!(
            patch["metadata"]["labels"][keys::INCOMPATIBLE_EXECUTOR_LABEL],
            json!(keys::INCOMPATIBLE_EXECUTOR_LABEL_VALUE)
        );
        assert_eq!(
            annotation(&patch, keys::INCOMPATIBLE_EXECUTOR_ANNOTATION),
            &json!("2026-11-29T17:00:00Z")
        );
        assert_eq!(
            annotation(&patch, keys::MARKED_BY_ANNOTATION),
            &json!(keys::MARKED_BY_VALUE)
        );
        let taints = patch["spec"]["taints"].as_array().unwrap();
        assert_eq!(taints.len(), 2, "{taints:?}");
        assert_eq!(taints[0]["key"], json!("dedicated"));
        // Already tainted: the list is left alone (a merge patch replaces it whole).
        let again = for_action(&mark, &node(true)).unwrap();
        assert!(again["spec"].get("taints").is_none(), "{again}");
    }

    #[test]
    fn admission_records_the_start_and_progress_clears_a_stall_and_cordons_if_asked() {
        let admit = |cordon| ActionKind::Admit {
            node: "n1".into(),
            at: at(),
            pods_left: 3,
            cordon,
        };
        let patch = for_action(&admit(true), &node(true)).unwrap();
        assert_eq!(
            annotation(&patch, keys::DRAINING_ANNOTATION),
            &json!("2026-11-29T17:00:00Z")
        );
        assert_eq!(
            annotation(&patch, keys::DRAIN_PROGRESS_ANNOTATION),
            &json!(k8sm_planner::drain_progress(at(), 3))
        );
        assert_eq!(annotation(&patch, keys::STALLED_ANNOTATION), &Value::Null);
        assert_eq!(patch["spec"]["unschedulable"], json!(true));
        let patch = for_action(&admit(false), &node(true)).unwrap();
        assert!(patch["spec"].get("unschedulable").is_none(), "{patch}");
    }

    #[test]
    fn a_stall_gives_the_slot_up_and_uncordons_only_if_asked() {
        let stall = |uncordon| ActionKind::Stall {
            node: "n1".into(),
            at: at(),
            uncordon,
        };
        let patch = for_action(&stall(true), &node(true)).unwrap();
        assert_eq!(
            annotation(&patch, keys::STALLED_ANNOTATION),
            &json!("2026-11-29T17:00:00Z")
        );
        for key in [
            keys::DRAINING_ANNOTATION,
            keys::DRAIN_PROGRESS_ANNOTATION,
            keys::CORDONED_BY_ANNOTATION,
        ] {
            assert_eq!(annotation(&patch, key), &Value::Null, "{key}");
        }
        assert_eq!(patch["spec"]["unschedulable"], json!(false));
        let patch = for_action(&stall(false), &node(true)).unwrap();
        assert!(patch["spec"].get("unschedulable").is_none(), "{patch}");
    }

    #[test]
    fn a_kamikaze_records_when_the_executor_it_was_sent_to_and_the_target() {
        let kamikaze = ActionKind::Kamikaze {
            node: "n1".into(),
            mechanism: k8sm_api::KamikazeMechanism::Annotation,
            url: None,
            executor_id: Some("sha256:old".into()),
            at: at(),
            target: Some("sha256:new".into()),
        };
        let patch = for_action(&kamikaze, &node(true)).unwrap();
        assert_eq!(
            annotation(&patch, keys::KAMIKAZE_ANNOTATION),
            &json!("2026-11-29T17:00:00Z")
        );
        assert_eq!(
            annotation(&patch, keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION),
            &json!("sha256:old")
        );
        assert_eq!(
            annotation(&patch, keys::KAMIKAZE_TARGET_ANNOTATION),
            &json!("sha256:new")
        );
    }

    #[test]
    fn completion_removes_every_key_and_the_mark_and_a_release_keeps_the_mark_if_asked() {
        let complete = ActionKind::Complete {
            node: "n1".into(),
            uncordon: true,
        };
        let patch = for_action(&complete, &node(true)).unwrap();
        for key in K8SM_NODE_ANNOTATIONS {
            assert_eq!(annotation(&patch, key), &Value::Null, "{key}");
        }
        assert_eq!(
            patch["metadata"]["labels"][keys::INCOMPATIBLE_EXECUTOR_LABEL],
            Value::Null
        );
        assert_eq!(
            patch["spec"]["taints"],
            json!([{"key": "dedicated", "effect": "NoSchedule"}])
        );
        assert_eq!(patch["spec"]["unschedulable"], json!(false));
        let release = ActionKind::Release {
            node: "n1".into(),
            uncordon: false,
            remove_mark: false,
        };
        let patch = for_action(&release, &node(true)).unwrap();
        assert_eq!(annotation(&patch, keys::DRAINING_ANNOTATION), &Value::Null);
        assert!(patch["metadata"].get("labels").is_none(), "{patch}");
        assert!(patch["spec"].get("taints").is_none(), "{patch}");
        assert!(patch["spec"].get("unschedulable").is_none(), "{patch}");
    }

    #[test]
    fn an_action_that_writes_no_node_has_no_patch() {
        let finalizer = ActionKind::AddFinalizer { policy: "p".into() };
        assert!(for_action(&finalizer, &node(false)).is_err());
    }
}
