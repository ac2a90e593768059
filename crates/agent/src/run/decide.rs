//! What the agent on a real node does about the latest state of its Node; pure.

use k8s_openapi::api::core::v1::Node;
use k8sm_api::keys::{
    KAMIKAZE_ANNOTATION, KAMIKAZE_EXECUTOR_ID_ANNOTATION, KAMIKAZE_OBEYED_ANNOTATION,
};

use crate::contract::{
    KamikazeFor, NotDrained, annotation, drained_by_k8sm, executor_id, kamikaze_for,
};

/// How the agent was told to terminate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// By the kamikaze annotation with this value.
    Annotation(String),
    /// By an HTTP POST. The value is the body's kamikaze, which the controller writes as the
    /// kamikaze annotation once the POST succeeded, or the time of a POST without a body.
    Http(String),
}

/// The agent's next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Obey this kamikaze: record it as obeyed (see [`obedience`]), then restart the executor.
    Obey(Told),
    /// This executor obeyed this kamikaze before and came back with the same ID: remove the
    /// kamikaze to say so, and do not restart again.
    Acknowledge { kamikaze: String },
    /// Publish this executor's ID: the node reports none, or (before this agent published) an
    /// outdated one.
    Publish,
    /// The node reports another ID although this agent published its own: something else writes the
    /// key. Reported, not fought over.
    Foreign { reported: String },
    /// The node reports this executor's ID.
    Nothing,
}

/// Decides for `node`, on which this agent runs executor `own_id`; `published` says whether this
/// agent has published its ID already; `waiting`: the value of an HTTP kamikaze that waits for the
/// controller's annotation.
///
/// While an HTTP kamikaze waits, an annotation of another value is not obeyed: the controller is
/// about to write the one it POSTed, and that is the one to record as obeyed.
pub fn decide(node: &Node, own_id: &str, published: bool, waiting: Option<&str>) -> Decision {
    if let Some(told) = waiting
        && annotation(node, KAMIKAZE_ANNOTATION) == Some(told)
    {
        return Decision::Obey(Told::Http(told.to_owned()));
    }
    match kamikaze_for(node, Some(own_id)) {
        KamikazeFor::Pending(kamikaze) if waiting.is_none() => {
            return Decision::Obey(Told::Annotation(kamikaze.to_owned()));
        }
        KamikazeFor::Returned(kamikaze) => {
            return Decision::Acknowledge {
                kamikaze: kamikaze.to_owned(),
            };
        }
        KamikazeFor::Pending(_) | KamikazeFor::Ignored | KamikazeFor::None => {}
    }
    match executor_id(node) {
        Some(reported) if reported == own_id => Decision::Nothing,
        Some(reported) if published => Decision::Foreign {
            reported: reported.to_owned(),
        },
        _ => Decision::Publish,
    }
}

/// What the agent writes before it restarts for a kamikaze: the kamikaze it records as obeyed and
/// whether it also records itself as the executor told (see [`crate::contract::obey_patch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Obedience {
    pub kamikaze: String,
    /// The kamikaze came without the record of the executor told (set by hand or by another tool):
    /// without it, the agent that starts after the restart could not tell whether the kamikaze
    /// was meant for it.
    pub record: bool,
}

/// Why a kamikaze is not obeyed after all, on a fresh read of the Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotObeyed {
    /// The kamikaze annotation went, or is no longer meant for this executor.
    Withdrawn,
    /// This value is recorded as obeyed already: an executor obeys a given kamikaze once.
    AlreadyObeyed(String),
    /// An HTTP kamikaze for a node that k8sm did not drain (any more): the POST was checked, but
    /// the Node changed since (the policy was deleted, say).
    NotDrained(NotDrained),
}

/// What to write before obeying `told`, decided again on a fresh read of `node` (the decision to
/// obey was made on a watch event, and a conflicting write is retried on a fresh read).
pub fn obedience(node: &Node, own_id: &str, told: &Told) -> Result<Obedience, NotObeyed> {
    let unrecorded = annotation(node, KAMIKAZE_EXECUTOR_ID_ANNOTATION).is_none();
    match told {
        Told::Annotation(_) => match kamikaze_for(node, Some(own_id)) {
            // A newer kamikaze that replaced the one seen: that one is obeyed.
            KamikazeFor::Pending(kamikaze) => Ok(Obedience {
                kamikaze: kamikaze.to_owned(),
                record: unrecorded,
            }),
            KamikazeFor::Returned(kamikaze) => Err(NotObeyed::AlreadyObeyed(kamikaze.to_owned())),
            KamikazeFor::Ignored | KamikazeFor::None => Err(NotObeyed::Withdrawn),
        },
        Told::Http(kamikaze) => {
            if annotation(node, KAMIKAZE_OBEYED_ANNOTATION) == Some(kamikaze) {
                return Err(NotObeyed::AlreadyObeyed(kamikaze.clone()));
            }
            drained_by_k8sm(node).map_err(NotObeyed::NotDrained)?;
            // The controller writes the record with the annotation; before that, no record is made:
            // a record with no kamikaze next to it would read as an executor that came
            // back with its old ID.
            let annotated = annotation(node, KAMIKAZE_ANNOTATION) == Some(kamikaze.as_str());
            Ok(Obedience {
                kamikaze: kamikaze.clone(),
                record: annotated && unrecorded,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8sm_api::keys::{
        DRAINING_ANNOTATION, EXECUTOR_ID_ANNOTATION, INCOMPATIBLE_EXECUTOR_ANNOTATION,
    };

    use super::*;
    use crate::contract::{acknowledge_patch, apply_annotations, obey_patch};

    const AT: &str = "2025-01-01T00:00:00Z";
    const LATER: &str = "2025-01-01T01:00:00Z";
    const ID: &str = EXECUTOR_ID_ANNOTATION;
    const K: &str = KAMIKAZE_ANNOTATION;
    const RECORD: &str = KAMIKAZE_EXECUTOR_ID_ANNOTATION;
    const OBEYED: &str = KAMIKAZE_OBEYED_ANNOTATION;
    /// What the controller writes on a node it marks and admits into a drain slot.
    const MARKED: (&str, &str) = (INCOMPATIBLE_EXECUTOR_ANNOTATION, AT);
    const ADMITTED: (&str, &str) = (DRAINING_ANNOTATION, AT);

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

    fn obey(kamikaze: &str) -> Decision {
        Decision::Obey(Told::Annotation(kamikaze.into()))
    }

    fn acknowledge(kamikaze: &str) -> Decision {
        Decision::Acknowledge {
            kamikaze: kamikaze.into(),
        }
    }

    #[test]
    fn decisions() {
        use Decision::{Nothing, Publish};
        let foreign = |id: &str| Decision::Foreign {
            reported: id.into(),
        };
        let http = |v: &str| Decision::Obey(Told::Http(v.into()));
        type Annotations<'a> = &'a [(&'a str, &'a str)];
        /// (case, annotations, own ID, published, waiting HTTP kamikaze, expected)
        type Case<'a> = (
            &'a str,
            Annotations<'a>,
            &'a str,
            bool,
            Option<&'a str>,
            Decision,
        );
        #[rustfmt::skip]
        let table: &[Case] = &[
            ("no ID: publish", &[], "old", false, None, Publish),
            ("ID removed by someone: publish again", &[], "old", true, None, Publish),
            ("outdated ID: replaced once", &[(ID, "older")], "old", false, None, Publish),
            ("then not fought over", &[(ID, "older")], "old", true, None, foreign("older")),
            ("own ID: nothing", &[(ID, "old")], "old", true, None, Nothing),
            ("kamikaze recorded for this executor", &[(ID, "old"), (K, AT), (RECORD, "old")], "old", true, None, obey(AT)),
            ("kamikaze set by hand", &[(ID, "old"), (K, AT)], "old", true, None, obey(AT)),
            ("new ID after the restart: the old kamikaze is not its own",
                &[(ID, "old"), (K, AT), (RECORD, "old")], "new", false, None, Publish),
            ("new ID, kamikaze obeyed by its predecessor",
                &[(ID, "old"), (K, AT), (RECORD, "old"), (OBEYED, AT)], "new", false, None, Publish),
            ("same ID after obeying: acknowledge, never obey again",
                &[(ID, "old"), (K, AT), (RECORD, "old"), (OBEYED, AT)], "old", false, None, acknowledge(AT)),
            ("acknowledged before publishing", &[(K, AT), (RECORD, "old"), (OBEYED, AT)], "old", false, None, acknowledge(AT)),
            ("acknowledged: nothing left to do", &[(ID, "old"), (RECORD, "old"), (OBEYED, AT)], "old", true, None, Nothing),
            ("a new kamikaze after an obeyed one", &[(ID, "old"), (K, LATER), (RECORD, "old"), (OBEYED, AT)], "old", true, None, obey(LATER)),
            ("HTTP waiting: its annotation arrived", &[(ID, "old"), (K, AT), (RECORD, "old")], "old", true, Some(AT), http(AT)),
            ("HTTP waiting: the annotation not yet there", &[(ID, "old")], "old", true, Some(AT), Nothing),
            ("HTTP waiting: another kamikaze is not obeyed meanwhile",
                &[(ID, "old"), (K, AT), (RECORD, "old")], "old", true, Some(LATER), Nothing),
            ("HTTP waiting does not hold an acknowledgement",
                &[(ID, "old"), (K, AT), (RECORD, "old"), (OBEYED, AT)], "old", true, Some(LATER), acknowledge(AT)),
        ];
        for (case, annotations, own, published, waiting, expected) in table {
            assert_eq!(
                decide(&node(annotations), own, *published, *waiting),
                *expected,
                "{case}"
            );
        }
    }

    /// The agent's side of one kamikaze end to end, through its own patches: obey, come back with
    /// the same ID, acknowledge; nothing is obeyed twice.
    fn obey_then_come_back(mut told: Node) -> Node {
        let Decision::Obey(how) = decide(&told, "old", true, None) else {
            panic!("not obeyed: {told:?}");
        };
        let Ok(Obedience { kamikaze, record }) = obedience(&told, "old", &how) else {
            panic!("not obeyed on the fresh read");
        };
        apply_annotations(
            &mut told,
            &obey_patch(&kamikaze, record.then_some("old"), None),
        );
        // The executor restarts with the same ID; its agent starts (not published yet) and sees the
        // same node.
        assert_eq!(
            decide(&told, "old", false, None),
            acknowledge(&kamikaze),
            "the same ID comes back"
        );
        assert_eq!(
            obedience(&told, "old", &how),
            Err(NotObeyed::AlreadyObeyed(kamikaze.clone())),
            "a late retry of the obedience is refused too"
        );
        apply_annotations(&mut told, &acknowledge_patch(None));
        assert_eq!(decide(&told, "old", false, None), Decision::Nothing);
        told
    }

    #[test]
    fn a_kamikaze_is_obeyed_once_then_acknowledged() {
        let left = obey_then_come_back(node(&[(ID, "old"), (K, AT), (RECORD, "old")]));
        assert_eq!(
            left,
            node(&[(ID, "old"), (RECORD, "old"), (OBEYED, AT)]),
            "kamikaze gone, record and kamikaze-obeyed kept"
        );
    }

    #[test]
    fn a_hand_set_kamikaze_is_recorded_and_obeyed_once() {
        let left = obey_then_come_back(node(&[(ID, "old"), (K, AT)]));
        assert_eq!(left, node(&[(ID, "old"), (RECORD, "old"), (OBEYED, AT)]));
    }

    #[test]
    fn a_new_kamikaze_after_an_obeyed_one_is_obeyed_again() {
        let mut n = obey_then_come_back(node(&[(ID, "old"), (K, AT), (RECORD, "old")]));
        apply_annotations(
            &mut n,
            &serde_json::json!({ "metadata": { "annotations": { K: LATER } } }),
        );
        assert_eq!(decide(&n, "old", true, None), obey(LATER));
        let left = obey_then_come_back(n);
        assert_eq!(left, node(&[(ID, "old"), (RECORD, "old"), (OBEYED, LATER)]));
    }

    #[test]
    fn an_http_kamikaze_is_recorded_so_its_annotation_is_never_obeyed() {
        let mut n = node(&[(ID, "old"), MARKED, ADMITTED]);
        let told = Told::Http(AT.into());
        assert_eq!(
            obedience(&n, "old", &told),
            Ok(Obedience {
                kamikaze: AT.into(),
                record: false
            }),
            "no record without the controller's annotation"
        );
        apply_annotations(&mut n, &obey_patch(AT, None, None));
        // The controller writes the annotation and its record after the POST; the restarted agent
        // finds them.
        apply_annotations(
            &mut n,
            &serde_json::json!({ "metadata": { "annotations": { K: AT, RECORD: "old" } } }),
        );
        assert_eq!(decide(&n, "old", false, None), acknowledge(AT));
        assert_eq!(decide(&n, "new", false, None), Decision::Publish);
        assert_eq!(
            obedience(&n, "old", &told),
            Err(NotObeyed::AlreadyObeyed(AT.into())),
            "the same POST again"
        );
    }

    #[test]
    fn an_http_kamikaze_whose_annotation_arrived_records_as_the_annotation_does() {
        let told = Told::Http(AT.into());
        let recorded = node(&[(ID, "old"), MARKED, ADMITTED, (K, AT), (RECORD, "old")]);
        assert_eq!(
            obedience(&recorded, "old", &told),
            Ok(Obedience {
                kamikaze: AT.into(),
                record: false
            })
        );
        let by_hand = node(&[(ID, "old"), MARKED, ADMITTED, (K, AT)]);
        assert_eq!(
            obedience(&by_hand, "old", &told),
            Ok(Obedience {
                kamikaze: AT.into(),
                record: true
            })
        );
        let other = node(&[(ID, "old"), MARKED, ADMITTED, (K, LATER)]);
        assert_eq!(
            obedience(&other, "old", &told).map(|o| o.kamikaze),
            Ok(AT.into()),
            "the POSTed value is the one obeyed"
        );
    }

    #[test]
    fn an_http_kamikaze_is_obeyed_only_on_a_node_k8sm_drained() {
        let told = Told::Http(AT.into());
        assert_eq!(
            obedience(&node(&[(ID, "old")]), "old", &told),
            Err(NotObeyed::NotDrained(NotDrained::NotMarked))
        );
        assert_eq!(
            obedience(&node(&[(ID, "old"), MARKED]), "old", &told),
            Err(NotObeyed::NotDrained(NotDrained::NotAdmitted)),
            "marked, but never admitted into a drain slot (or handed back since)"
        );
        assert_eq!(
            obedience(
                &node(&[(ID, "old"), MARKED, ADMITTED, (OBEYED, AT)]),
                "old",
                &told
            ),
            Err(NotObeyed::AlreadyObeyed(AT.into())),
            "obeyed once is obeyed once, drained or not"
        );
    }

    #[test]
    fn a_withdrawn_or_replaced_annotation_is_decided_again() {
        let told = Told::Annotation(AT.into());
        assert_eq!(
            obedience(&node(&[(ID, "old")]), "old", &told),
            Err(NotObeyed::Withdrawn)
        );
        assert_eq!(
            obedience(
                &node(&[(ID, "new"), (K, AT), (RECORD, "new")]),
                "old",
                &told
            ),
            Err(NotObeyed::Withdrawn),
            "now recorded for another executor"
        );
        assert_eq!(
            obedience(
                &node(&[(ID, "old"), (K, LATER), (RECORD, "old")]),
                "old",
                &told
            ),
            Ok(Obedience {
                kamikaze: LATER.into(),
                record: false
            }),
            "a newer kamikaze replaced it"
        );
    }
}
