//! What the agent on a real node does about the latest state of its Node; pure.

use k8s_openapi::api::core::v1::Node;
use k8sm_api::keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION;

use crate::contract::{annotation, executor_id, pending_kamikaze};

/// The agent's next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Obey this kamikaze. `record`: first write this executor's ID as the one told to terminate, because nobody
    /// did (the kamikaze was set by hand or by another tool); without the record, the restarted agent could not
    /// tell that the kamikaze was already obeyed and would restart its executor again, forever.
    Obey { kamikaze: String, record: bool },
    /// Publish this executor's ID: the node reports none, or (before this agent published) an outdated one.
    Publish,
    /// The node reports another ID although this agent published its own: something else writes the key. Reported,
    /// not fought over.
    Foreign { reported: String },
    /// The node reports this executor's ID.
    Nothing,
}

/// Decides for `node`, on which this agent runs executor `own_id`; `published` says whether this agent has
/// published its ID already.
pub fn decide(node: &Node, own_id: &str, published: bool) -> Decision {
    if let Some(kamikaze) = pending_kamikaze(node, Some(own_id)) {
        return Decision::Obey {
            kamikaze: kamikaze.to_owned(),
            record: annotation(node, KAMIKAZE_EXECUTOR_ID_ANNOTATION).is_none(),
        };
    }
    match executor_id(node) {
        Some(reported) if reported == own_id => Decision::Nothing,
        Some(reported) if published => Decision::Foreign {
            reported: reported.to_owned(),
        },
        _ => Decision::Publish,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8sm_api::keys::{EXECUTOR_ID_ANNOTATION, KAMIKAZE_ANNOTATION};

    use super::*;

    const AT: &str = "2025-01-01T00:00:00Z";

    fn node(annotations: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("node-0000".into()),
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

    #[test]
    fn publishes_when_the_node_reports_no_id() {
        assert_eq!(decide(&node(&[]), "old", false), Decision::Publish);
        assert_eq!(
            decide(&node(&[]), "old", true),
            Decision::Publish,
            "removed by someone: re-published"
        );
    }

    #[test]
    fn replaces_an_outdated_id_once_then_does_not_fight() {
        let outdated = node(&[(EXECUTOR_ID_ANNOTATION, "older")]);
        assert_eq!(decide(&outdated, "old", false), Decision::Publish);
        assert_eq!(
            decide(&outdated, "old", true),
            Decision::Foreign {
                reported: "older".into()
            }
        );
    }

    #[test]
    fn nothing_to_do_when_the_node_reports_this_executor() {
        assert_eq!(
            decide(&node(&[(EXECUTOR_ID_ANNOTATION, "old")]), "old", true),
            Decision::Nothing
        );
    }

    #[test]
    fn obeys_a_kamikaze_recorded_for_this_executor() {
        let told = node(&[
            (EXECUTOR_ID_ANNOTATION, "old"),
            (KAMIKAZE_ANNOTATION, AT),
            (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
        ]);
        assert_eq!(
            decide(&told, "old", true),
            Decision::Obey {
                kamikaze: AT.into(),
                record: false
            }
        );
    }

    #[test]
    fn the_restarted_agent_ignores_the_kamikaze_its_predecessor_obeyed() {
        let obeyed = node(&[
            (EXECUTOR_ID_ANNOTATION, "old"),
            (KAMIKAZE_ANNOTATION, AT),
            (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
        ]);
        assert_eq!(decide(&obeyed, "new", false), Decision::Publish);
    }

    #[test]
    fn records_itself_before_obeying_an_unrecorded_kamikaze() {
        let by_hand = node(&[(EXECUTOR_ID_ANNOTATION, "old"), (KAMIKAZE_ANNOTATION, AT)]);
        assert_eq!(
            decide(&by_hand, "old", true),
            Decision::Obey {
                kamikaze: AT.into(),
                record: true
            }
        );
    }
}
