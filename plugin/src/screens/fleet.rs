//! Where a node stands, read from its own labels and annotations (docs/design.md §3), without
//! listing any pod: for the nodes of `upgrade status --all` (and `-l`) that the policy's status
//! does not list. The status lists at most 100 nodes, those in flight or blocked, and only counts
//! the rest: almost always nodes on the target and nodes queued, which the contract keys tell
//! apart. A node in flight left out is recognised by its draining or kamikaze annotation; what it
//! waits for needs its pods, and is `kubectl k8sm plan`'s to say.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use k8sm_api::{NodePhase, keys};

/// A node, its phase as its annotations tell it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetNode {
    pub name: String,
    pub phase: NodePhase,
    /// When it entered the phase, where an annotation records it.
    pub since: Option<DateTime<Utc>>,
    /// Pods left, from the drain progress annotation of a draining node.
    pub pods_left: Option<u32>,
    pub executor_id: Option<String>,
}

impl FleetNode {
    /// `annotations` and `labels` of node `name`; `target` is the policy's target executor ID.
    pub fn classify(
        name: &str,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
        target: Option<&str>,
    ) -> Self {
        let time = |key: &str| {
            annotations
                .get(key)
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| DateTime::parse_from_rfc3339(v).ok())
                .map(|t| t.to_utc())
        };
        let executor_id = annotations.get(keys::EXECUTOR_ID_ANNOTATION).cloned();
        let marked = labels.contains_key(keys::INCOMPATIBLE_EXECUTOR_LABEL)
            || annotations.contains_key(keys::INCOMPATIBLE_EXECUTOR_ANNOTATION);
        let runs_target = match target {
            Some(target) => executor_id.as_deref() == Some(target),
            // Without a target, only nodes marked by another component are upgraded.
            None => !marked,
        };
        let (phase, since) = if annotations.contains_key(keys::KAMIKAZE_ANNOTATION) {
            (NodePhase::KamikazeSent, time(keys::KAMIKAZE_ANNOTATION))
        } else if annotations.contains_key(keys::DRAINING_ANNOTATION) {
            (NodePhase::Draining, time(keys::DRAINING_ANNOTATION))
        } else if runs_target {
            (NodePhase::Compatible, None)
        } else {
            (
                NodePhase::Incompatible,
                time(keys::INCOMPATIBLE_EXECUTOR_ANNOTATION),
            )
        };
        let pods_left = (phase == NodePhase::Draining)
            .then(|| annotations.get(keys::DRAIN_PROGRESS_ANNOTATION))
            .flatten()
            .and_then(|v| v.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok());
        Self {
            name: name.to_owned(),
            phase,
            since,
            pods_left,
            executor_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: &str = "sha256:new";

    fn node(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> FleetNode {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        FleetNode::classify("n", &map(labels), &map(annotations), Some(TARGET))
    }

    #[test]
    fn the_annotations_tell_the_phase() {
        let upgraded = node(&[], &[(keys::EXECUTOR_ID_ANNOTATION, TARGET)]);
        assert_eq!(upgraded.phase, NodePhase::Compatible);
        let old = node(&[], &[(keys::EXECUTOR_ID_ANNOTATION, "sha256:old")]);
        assert_eq!(old.phase, NodePhase::Incompatible, "not marked yet: queued");
        let queued = node(
            &[(keys::INCOMPATIBLE_EXECUTOR_LABEL, "true")],
            &[
                (keys::EXECUTOR_ID_ANNOTATION, "sha256:old"),
                (
                    keys::INCOMPATIBLE_EXECUTOR_ANNOTATION,
                    "2026-03-01T12:00:00Z",
                ),
            ],
        );
        assert_eq!(queued.phase, NodePhase::Incompatible);
        assert_eq!(
            queued.since.map(|t| t.to_rfc3339()),
            Some("2026-03-01T12:00:00+00:00".to_owned())
        );
        let draining = node(
            &[],
            &[
                (keys::DRAINING_ANNOTATION, "2026-03-01T12:05:00Z"),
                (keys::DRAIN_PROGRESS_ANNOTATION, "2026-03-01T12:06:00Z 7"),
            ],
        );
        assert_eq!(
            (draining.phase, draining.pods_left),
            (NodePhase::Draining, Some(7))
        );
        let kamikaze = node(
            &[],
            &[
                (keys::DRAINING_ANNOTATION, "2026-03-01T12:05:00Z"),
                (keys::KAMIKAZE_ANNOTATION, "2026-03-01T12:09:00Z"),
            ],
        );
        assert_eq!(kamikaze.phase, NodePhase::KamikazeSent);
        assert_eq!(kamikaze.pods_left, None);
    }

    #[test]
    fn without_a_target_only_marked_nodes_are_upgraded() {
        let none = BTreeMap::new();
        let marked = BTreeMap::from([(
            keys::INCOMPATIBLE_EXECUTOR_LABEL.to_owned(),
            "true".to_owned(),
        )]);
        assert_eq!(
            FleetNode::classify("n", &none, &none, None).phase,
            NodePhase::Compatible
        );
        assert_eq!(
            FleetNode::classify("n", &marked, &none, None).phase,
            NodePhase::Incompatible
        );
    }
}
