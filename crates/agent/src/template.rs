//! What `simulate` remembers of a node so that, after the `DeleteNode` kamikaze deleted it, it can
//! re-create the node as a real upgraded node would re-register: same identity and resources, none
//! of k8sm's upgrade state.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8sm_api::keys::{
    CORDONED_BY_ANNOTATION, DRAIN_PROGRESS_ANNOTATION, DRAINING_ANNOTATION, EXECUTOR_ID_ANNOTATION,
    INCOMPATIBLE_EXECUTOR_ANNOTATION, INCOMPATIBLE_EXECUTOR_LABEL, INCOMPATIBLE_EXECUTOR_TAINT_KEY,
    KAMIKAZE_ANNOTATION, KAMIKAZE_EXECUTOR_ID_ANNOTATION, KAMIKAZE_OBEYED_ANNOTATION,
    MARKED_BY_ANNOTATION, STALLED_ANNOTATION,
};

/// Annotations that describe the upgrade of the *old* node (or its old executor); a re-registered
/// node has none.
pub const STRIPPED_ANNOTATIONS: [&str; 10] = [
    EXECUTOR_ID_ANNOTATION,
    INCOMPATIBLE_EXECUTOR_ANNOTATION,
    KAMIKAZE_ANNOTATION,
    KAMIKAZE_EXECUTOR_ID_ANNOTATION,
    KAMIKAZE_OBEYED_ANNOTATION,
    DRAINING_ANNOTATION,
    DRAIN_PROGRESS_ANNOTATION,
    STALLED_ANNOTATION,
    CORDONED_BY_ANNOTATION,
    MARKED_BY_ANNOTATION,
];

/// Labels that describe the upgrade of the old node.
pub const STRIPPED_LABELS: [&str; 1] = [INCOMPATIBLE_EXECUTOR_LABEL];

/// Prefix of the taints that the node lifecycle controller derives from conditions and
/// `spec.unschedulable` (`node.kubernetes.io/unschedulable`, `…/not-ready`, …). A kubelet never
/// registers with them, and copying the old node's `unschedulable` taint onto an uncordoned node
/// would keep pods off it.
const NODE_LIFECYCLE_TAINT_PREFIX: &str = "node.kubernetes.io/";

/// The last-seen state of a node, minus k8sm's upgrade state.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeTemplate {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub capacity: Option<BTreeMap<String, Quantity>>,
    pub allocatable: Option<BTreeMap<String, Quantity>>,
}

impl NodeTemplate {
    /// Remembers `node`; `None` for a node without a name (never served by the apiserver).
    pub fn of(node: &Node) -> Option<Self> {
        let meta = &node.metadata;
        let mut labels = meta.labels.clone().unwrap_or_default();
        labels.retain(|key, _| !STRIPPED_LABELS.contains(&key.as_str()));
        let mut annotations = meta.annotations.clone().unwrap_or_default();
        annotations.retain(|key, _| !STRIPPED_ANNOTATIONS.contains(&key.as_str()));
        let taints = node
            .spec
            .as_ref()
            .and_then(|spec| spec.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|taint| {
                taint.key != INCOMPATIBLE_EXECUTOR_TAINT_KEY
                    && !taint.key.starts_with(NODE_LIFECYCLE_TAINT_PREFIX)
            })
            .collect();
        let status = node.status.as_ref();
        Some(Self {
            name: meta.name.clone()?,
            labels,
            annotations,
            taints,
            capacity: status.and_then(|s| s.capacity.clone()),
            allocatable: status.and_then(|s| s.allocatable.clone()),
        })
    }

    /// The node as it re-registers after its executor restarted with `executor_id` (normally the
    /// new ID; none: it reports none): schedulable, reporting that ID. Other annotations are
    /// kept, KWOK's among them, so KWOK manages the new node and makes it Ready.
    pub fn upgraded(&self, executor_id: Option<&str>) -> Node {
        let mut annotations = self.annotations.clone();
        if let Some(executor_id) = executor_id {
            annotations.insert(EXECUTOR_ID_ANNOTATION.to_owned(), executor_id.to_owned());
        }
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(self.labels.clone()),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                unschedulable: Some(false),
                taints: (!self.taints.is_empty()).then(|| self.taints.clone()),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                capacity: self.capacity.clone(),
                allocatable: self.allocatable.clone(),
                ..NodeStatus::default()
            }),
        }
    }
}

/// Whether the node is in an upgrade: marked incompatible (by annotation or label) or told
/// kamikaze. Only such a node's deletion is a `DeleteNode` kamikaze; any other deleted node stays
/// deleted.
pub fn in_upgrade(node: &Node) -> bool {
    let has = |map: &Option<BTreeMap<String, String>>, key: &str| {
        map.as_ref().is_some_and(|m| m.contains_key(key))
    };
    let meta = &node.metadata;
    has(&meta.annotations, INCOMPATIBLE_EXECUTOR_ANNOTATION)
        || has(&meta.labels, INCOMPATIBLE_EXECUTOR_LABEL)
        || has(&meta.annotations, KAMIKAZE_ANNOTATION)
}

#[cfg(test)]
mod tests {
    use k8sm_api::keys::{
        CORDONED_BY_VALUE, INCOMPATIBLE_EXECUTOR_LABEL_VALUE, INCOMPATIBLE_EXECUTOR_TAINT_EFFECT,
        UPGRADE_OPT_OUT_LABEL,
    };

    use super::*;

    const KWOK: &str = "kwok.x-k8s.io/node";

    fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            ..Taint::default()
        }
    }

    fn resources() -> BTreeMap<String, Quantity> {
        BTreeMap::from([("pods".to_owned(), Quantity("110".into()))])
    }

    /// A KWOK node in the middle of a `DeleteNode` upgrade: marked, tainted, cordoned by k8sm,
    /// admitted.
    fn draining_node() -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("node-0002".into()),
                uid: Some("old-uid".into()),
                resource_version: Some("99".into()),
                labels: Some(strings(&[
                    ("type", "kwok"),
                    (
                        INCOMPATIBLE_EXECUTOR_LABEL,
                        INCOMPATIBLE_EXECUTOR_LABEL_VALUE,
                    ),
                    (UPGRADE_OPT_OUT_LABEL, "false"),
                ])),
                annotations: Some(strings(&[
                    (KWOK, "fake"),
                    (EXECUTOR_ID_ANNOTATION, "old"),
                    (INCOMPATIBLE_EXECUTOR_ANNOTATION, "2025-01-01T00:00:00Z"),
                    (DRAINING_ANNOTATION, "2025-01-01T00:00:01Z"),
                    (CORDONED_BY_ANNOTATION, CORDONED_BY_VALUE),
                    (KAMIKAZE_ANNOTATION, "2025-01-01T00:00:02Z"),
                    (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
                    (KAMIKAZE_OBEYED_ANNOTATION, "2025-01-01T00:00:00Z"),
                ])),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                unschedulable: Some(true),
                taints: Some(vec![
                    taint(
                        INCOMPATIBLE_EXECUTOR_TAINT_KEY,
                        INCOMPATIBLE_EXECUTOR_TAINT_EFFECT,
                    ),
                    taint("node.kubernetes.io/unschedulable", "NoSchedule"),
                    taint("dedicated", "NoSchedule"),
                ]),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                capacity: Some(resources()),
                allocatable: Some(resources()),
                ..NodeStatus::default()
            }),
        }
    }

    #[test]
    fn the_template_strips_every_upgrade_key_and_keeps_the_rest() {
        let template = NodeTemplate::of(&draining_node()).unwrap();
        assert_eq!(template.name, "node-0002");
        assert_eq!(
            template.labels,
            strings(&[("type", "kwok"), (UPGRADE_OPT_OUT_LABEL, "false")])
        );
        assert_eq!(template.annotations, strings(&[(KWOK, "fake")]));
        assert_eq!(template.taints, [taint("dedicated", "NoSchedule")]);
        assert_eq!(template.capacity, Some(resources()));
        assert_eq!(template.allocatable, Some(resources()));
    }

    #[test]
    fn the_upgraded_node_reports_the_new_id_and_is_schedulable() {
        let node = NodeTemplate::of(&draining_node())
            .unwrap()
            .upgraded(Some("new"));
        let meta = &node.metadata;
        assert_eq!(meta.name.as_deref(), Some("node-0002"));
        assert_eq!(meta.uid, None, "a new object");
        assert_eq!(meta.resource_version, None, "a create, not an update");
        assert_eq!(
            meta.annotations,
            Some(strings(&[(KWOK, "fake"), (EXECUTOR_ID_ANNOTATION, "new")]))
        );
        let spec = node.spec.as_ref().unwrap();
        assert_eq!(spec.unschedulable, Some(false));
        assert_eq!(spec.taints, Some(vec![taint("dedicated", "NoSchedule")]));
        assert!(!in_upgrade(&node));
        let status = node.status.as_ref().unwrap();
        assert_eq!(status.capacity, Some(resources()));
        assert_eq!(status.conditions, None, "KWOK reports the conditions");
    }

    #[test]
    fn a_node_can_come_back_without_an_id() {
        let node = NodeTemplate::of(&draining_node()).unwrap().upgraded(None);
        assert_eq!(node.metadata.annotations, Some(strings(&[(KWOK, "fake")])));
    }

    #[test]
    fn a_node_without_taints_is_recreated_without_a_taint_list() {
        let mut node = draining_node();
        node.spec = None;
        let upgraded = NodeTemplate::of(&node).unwrap().upgraded(Some("new"));
        assert_eq!(upgraded.spec.unwrap().taints, None);
    }

    #[test]
    fn a_nameless_node_has_no_template() {
        assert_eq!(NodeTemplate::of(&Node::default()), None);
    }

    #[test]
    fn in_upgrade_means_marked_by_either_key_or_told_kamikaze() {
        let with = |labels: &[(&str, &str)], annotations: &[(&str, &str)]| Node {
            metadata: ObjectMeta {
                labels: Some(strings(labels)),
                annotations: Some(strings(annotations)),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        assert!(!in_upgrade(&with(
            &[("type", "kwok")],
            &[(EXECUTOR_ID_ANNOTATION, "old")]
        )));
        assert!(in_upgrade(&with(
            &[(INCOMPATIBLE_EXECUTOR_LABEL, "true")],
            &[]
        )));
        assert!(in_upgrade(&with(
            &[],
            &[(INCOMPATIBLE_EXECUTOR_ANNOTATION, "t")]
        )));
        assert!(in_upgrade(&with(&[], &[(KAMIKAZE_ANNOTATION, "t")])));
        assert!(!in_upgrade(&Node::default()));
    }
}
