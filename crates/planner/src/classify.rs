//! Per-pod classification of DESIGN.md §5.3, as small filters tried in order (like kubectl's `pkg/drain/filters.go`).

use k8sm_api::keys;

use crate::{OwnerKind, OwnerView, PodView, index::Index, output::PodClass, view::ControllerRef};

/// The annotation that marks a mirror pod (the API's view of a static pod).
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The opt-out keys and the value that opts out. Each is honoured as a label and as an annotation: operators and
/// tools put them in either place, and reading both costs nothing.
const OPT_OUT_KEYS: [(&str, &str); 3] = [
    (keys::UPGRADE_OPT_OUT_LABEL, keys::UPGRADE_OPT_OUT_VALUE),
    keys::NEIGHBOUR_OPT_OUT_KEYS[0],
    keys::NEIGHBOUR_OPT_OUT_KEYS[1],
];

/// Every pod annotation the planner reads: a cache may drop the others (real pods can carry large ones).
pub const POD_ANNOTATIONS_READ: [&str; 4] = [
    MIRROR_ANNOTATION,
    OPT_OUT_KEYS[0].0,
    OPT_OUT_KEYS[1].0,
    OPT_OUT_KEYS[2].0,
];

/// Why a pod is ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ignored {
    Mirror,
    DaemonSet,
    /// Deletion requested by someone; not gone yet.
    Terminating,
    /// Evicted by k8sm; the cache does not show it terminating yet.
    EvictionInFlight,
    /// Finished, and opted out of deletion: it runs nothing, so it does not hold the node either.
    FinishedOptedOut,
}

/// Why a pod counts as unmanaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unmanaged<'a> {
    NoController,
    /// Its controller reference names an owner of a kind k8sm watches that is not in the view: deleted (the garbage
    /// collector deletes or orphans the pod soon), or created so recently that k8sm has not seen it yet. Either way
    /// the pod waits: deleting it could take a live owner below its threshold.
    OwnerGone(&'a ControllerRef),
    /// Its controller is being deleted: it replaces nothing any more, and the garbage collector (or an orphaning
    /// deletion) decides what becomes of the pod.
    OwnerDeleting(&'a ControllerRef),
    /// Its controller is of a kind whose health k8sm cannot judge (in the view or not: k8sm does not watch it).
    UnjudgedKind(&'a ControllerRef),
}

/// The class of one pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class<'a> {
    Ignored(Ignored),
    Finished,
    /// With the key that opts it out.
    OptedOut(&'static str),
    Owned(&'a OwnerView),
    Job(&'a OwnerView),
    Unmanaged(Unmanaged<'a>),
}

impl Class<'_> {
    /// Whether the pod keeps its node from being drained.
    pub(crate) fn holds_node(self) -> bool {
        match self {
            Self::Ignored(why) => matches!(why, Ignored::Terminating | Ignored::EvictionInFlight),
            Self::Finished => false,
            Self::OptedOut(_) | Self::Owned(_) | Self::Job(_) | Self::Unmanaged(_) => true,
        }
    }

    /// The public summary of the class.
    pub(crate) fn public(self) -> PodClass {
        match self {
            Self::Ignored(_) => PodClass::Ignored,
            Self::Finished => PodClass::Finished,
            Self::OptedOut(_) => PodClass::OptedOut,
            Self::Owned(_) => PodClass::Owned,
            Self::Job(_) => PodClass::Job,
            Self::Unmanaged(_) => PodClass::Unmanaged,
        }
    }
}

/// Classifies `pod`: the first filter that claims it wins.
pub(crate) fn classify<'a>(pod: &'a PodView, index: &Index<'a>) -> Class<'a> {
    if let Some(why) = ignored(pod, index) {
        return Class::Ignored(why);
    }
    let opted_out = opted_out(pod);
    if pod.phase.is_finished() {
        return match opted_out {
            Some(_) => Class::Ignored(Ignored::FinishedOptedOut),
            None => Class::Finished,
        };
    }
    if let Some(key) = opted_out {
        return Class::OptedOut(key);
    }
    owner_class(pod, index)
}

/// Mirror and DaemonSet pods, pods on their way out.
fn ignored(pod: &PodView, index: &Index) -> Option<Ignored> {
    if pod.mirror || pod.annotations.contains_key(MIRROR_ANNOTATION) {
        return Some(Ignored::Mirror);
    }
    // By the reference's kind, whether or not the DaemonSet is in the view: its pods come back with the node.
    if pod
        .controller
        .as_ref()
        .is_some_and(|c| c.kind == "DaemonSet")
    {
        return Some(Ignored::DaemonSet);
    }
    if pod.terminating {
        return Some(Ignored::Terminating);
    }
    if index.in_flight_pods.contains(pod.uid.as_str()) {
        return Some(Ignored::EvictionInFlight);
    }
    None
}

/// The key by which the pod opts out, if any (the first of `OPT_OUT_KEYS` that the pod's labels or annotations set).
pub(crate) fn opted_out(pod: &PodView) -> Option<&'static str> {
    let opts_out = |value: &String, expected: &str| value.trim().eq_ignore_ascii_case(expected);
    // One walk over the pod's few labels and (as cached) few annotations: most keys differ from every opt-out key
    // in length, so this costs far less than six map lookups with string comparisons, on every pod of every pass.
    let mut hits = [false; OPT_OUT_KEYS.len()];
    for (key, value) in pod.labels.iter().chain(&pod.annotations) {
        if let Some(i) = OPT_OUT_KEYS.iter().position(|(k, _)| k == key) {
            hits[i] |= opts_out(value, OPT_OUT_KEYS[i].1);
        }
    }
    OPT_OUT_KEYS
        .iter()
        .zip(hits)
        .find_map(|(&(key, _), hit)| hit.then_some(key))
}

/// Owned, Job or unmanaged, by the pod's controller reference.
fn owner_class<'a>(pod: &'a PodView, index: &Index<'a>) -> Class<'a> {
    let Some(controller) = &pod.controller else {
        return Class::Unmanaged(Unmanaged::NoController);
    };
    let Some(&owner) = index.owners.get(controller.uid.as_str()) else {
        if index.deleting_owners.contains(controller.uid.as_str()) {
            return Class::Unmanaged(Unmanaged::OwnerDeleting(controller));
        }
        // The view holds every owner of these kinds; owners of other kinds are not watched, so not finding one
        // says nothing about whether it exists.
        let watched = matches!(
            OwnerKind::from(controller.kind.as_str()),
            OwnerKind::ReplicaSet
                | OwnerKind::ReplicationController
                | OwnerKind::StatefulSet
                | OwnerKind::Job
        );
        return Class::Unmanaged(if watched {
            Unmanaged::OwnerGone(controller)
        } else {
            Unmanaged::UnjudgedKind(controller)
        });
    };
    match owner.kind {
        OwnerKind::ReplicaSet | OwnerKind::ReplicationController | OwnerKind::StatefulSet => {
            Class::Owned(owner)
        }
        OwnerKind::Job => Class::Job(owner),
        // A DaemonSet pod was ignored above; any other kind has no health k8sm can judge.
        OwnerKind::DaemonSet | OwnerKind::Other(_) => {
            Class::Unmanaged(Unmanaged::UnjudgedKind(controller))
        }
    }
}

/// Why an ignored pod is ignored, for a human.
pub(crate) fn ignored_message(why: Ignored) -> &'static str {
    match why {
        Ignored::Mirror => "mirror pod of a static pod: restarts with the node",
        Ignored::DaemonSet => "DaemonSet pod: restarts with the node",
        Ignored::Terminating => "terminating: the node is drained once it is gone",
        Ignored::EvictionInFlight => "eviction in flight: the node is drained once it is gone",
        Ignored::FinishedOptedOut => "finished and opted out: kept, and not in the way",
    }
}

/// Why a pod is unmanaged, for a human.
pub(crate) fn unmanaged_message(why: Unmanaged) -> String {
    match why {
        Unmanaged::NoController => "unmanaged pod (no controller)".to_owned(),
        Unmanaged::OwnerGone(c) => format!(
            "its controller {}/{} is not in the cluster (deleted, or not seen yet)",
            c.kind, c.name
        ),
        Unmanaged::OwnerDeleting(c) => format!(
            "unmanaged pod: its controller {}/{} is being deleted",
            c.kind, c.name
        ),
        Unmanaged::UnjudgedKind(c) => format!(
            "unmanaged pod: k8sm cannot judge the health of its controller {}/{}",
            c.kind, c.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        ClusterView, PodPhase,
        testing::{daemon_set, job, owner, replica_set, unmanaged_pod},
        view::InFlightEviction,
    };

    #[test]
    fn opt_out_by_label_or_annotation_in_key_order() {
        let (upgrade, neighbour, other) = (OPT_OUT_KEYS[0], OPT_OUT_KEYS[1], OPT_OUT_KEYS[2]);
        let pod = || unmanaged_pod("ns", "p", "n1").label("app", "web");
        assert_eq!(opted_out(&pod()), None);
        assert_eq!(
            opted_out(&pod().label(upgrade.0, " TRUE ")),
            Some(upgrade.0),
            "values are trimmed and compared without case"
        );
        assert_eq!(
            opted_out(&pod().annotation(neighbour.0, neighbour.1)),
            Some(neighbour.0)
        );
        assert_eq!(
            opted_out(&pod().label(upgrade.0, "no")),
            None,
            "another value does not opt out"
        );
        // A label that does not opt out does not hide an annotation of the same key that does.
        assert_eq!(
            opted_out(&pod().label(other.0, "no").annotation(other.0, other.1)),
            Some(other.0)
        );
        // Several keys: the first in OPT_OUT_KEYS is named, whatever the maps' order.
        assert_eq!(
            opted_out(
                &pod()
                    .annotation(other.0, other.1)
                    .label(upgrade.0, upgrade.1)
            ),
            Some(upgrade.0)
        );
    }

    /// Classifies each pod of a small cluster.
    fn class_of(
        pods: Vec<PodView>,
        owners: Vec<OwnerView>,
        in_flight: Vec<&str>,
    ) -> Vec<PodClassOf> {
        let view = ClusterView {
            pods,
            owners,
            in_flight: in_flight
                .into_iter()
                .map(|uid| InFlightEviction {
                    pod_uid: uid.into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let index = Index::new(&view);
        view.pods
            .iter()
            .map(|p| PodClassOf::from(classify(p, &index)))
            .collect()
    }

    /// `Class` without the borrow, for comparisons.
    #[derive(Debug, PartialEq)]
    enum PodClassOf {
        Ignored(Ignored),
        Finished,
        OptedOut(&'static str),
        Owned(String),
        Job(String),
        NoController,
        OwnerGone(String),
        OwnerDeleting(String),
        UnjudgedKind(String),
    }

    impl From<Class<'_>> for PodClassOf {
        fn from(class: Class) -> Self {
            match class {
                Class::Ignored(why) => Self::Ignored(why),
                Class::Finished => Self::Finished,
                Class::OptedOut(key) => Self::OptedOut(key),
                Class::Owned(o) => Self::Owned(o.name.clone()),
                Class::Job(o) => Self::Job(o.name.clone()),
                Class::Unmanaged(Unmanaged::NoController) => Self::NoController,
                Class::Unmanaged(Unmanaged::OwnerGone(c)) => Self::OwnerGone(c.name.clone()),
                Class::Unmanaged(Unmanaged::OwnerDeleting(c)) => {
                    Self::OwnerDeleting(c.name.clone())
                }
                Class::Unmanaged(Unmanaged::UnjudgedKind(c)) => Self::UnjudgedKind(c.name.clone()),
            }
        }
    }

    #[test]
    fn classification_table() {
        let rs = replica_set("ns", "web", 3);
        let sts = owner(OwnerKind::StatefulSet, "ns", "db", Some(3));
        let rc = owner(OwnerKind::ReplicationController, "ns", "legacy", Some(2));
        let jb = job("ns", "batch");
        let ds = daemon_set("ns", "agent");
        let custom = owner(OwnerKind::Other("Rollout".into()), "ns", "canary", Some(2));
        let mut deleting = replica_set("ns", "old", 2);
        deleting.exists = false;
        // Not in the view at all.
        let gone = replica_set("ns", "deleted", 2);
        let cases: Vec<(&str, PodView, PodClassOf)> = vec![
            (
                "owned by a ReplicaSet",
                rs.pod("a", "n1"),
                PodClassOf::Owned("web".into()),
            ),
            (
                "owned by a StatefulSet",
                sts.pod("b", "n1"),
                PodClassOf::Owned("db".into()),
            ),
            (
                "owned by a ReplicationController",
                rc.pod("c", "n1"),
                PodClassOf::Owned("legacy".into()),
            ),
            (
                "Job pod",
                jb.pod("d", "n1"),
                PodClassOf::Job("batch".into()),
            ),
            (
                "DaemonSet pod",
                ds.pod("e", "n1"),
                PodClassOf::Ignored(Ignored::DaemonSet),
            ),
            (
                "mirror pod by field",
                unmanaged_pod("ns", "f", "n1").mirror(),
                PodClassOf::Ignored(Ignored::Mirror),
            ),
            (
                "mirror pod by annotation",
                unmanaged_pod("ns", "g", "n1").annotation(MIRROR_ANNOTATION, "abc"),
                PodClassOf::Ignored(Ignored::Mirror),
            ),
            (
                "terminating",
                rs.pod("h", "n1").terminating(),
                PodClassOf::Ignored(Ignored::Terminating),
            ),
            (
                "eviction in flight",
                rs.pod("inflight", "n1"),
                PodClassOf::Ignored(Ignored::EvictionInFlight),
            ),
            (
                "succeeded",
                jb.pod("i", "n1").phase(PodPhase::Succeeded),
                PodClassOf::Finished,
            ),
            (
                "failed",
                unmanaged_pod("ns", "j", "n1").phase(PodPhase::Failed),
                PodClassOf::Finished,
            ),
            (
                "finished and opted out",
                unmanaged_pod("ns", "k", "n1")
                    .phase(PodPhase::Failed)
                    .label(keys::UPGRADE_OPT_OUT_LABEL, "true"),
                PodClassOf::Ignored(Ignored::FinishedOptedOut),
            ),
            (
                "opt-out label",
                rs.pod("l", "n1").label(keys::UPGRADE_OPT_OUT_LABEL, "true"),
                PodClassOf::OptedOut(keys::UPGRADE_OPT_OUT_LABEL),
            ),
            (
                "opt-out as annotation, any case",
                rs.pod("m", "n1")
                    .annotation(keys::UPGRADE_OPT_OUT_LABEL, " True "),
                PodClassOf::OptedOut(keys::UPGRADE_OPT_OUT_LABEL),
            ),
            (
                "opt-out false does not opt out",
                rs.pod("n", "n1")
                    .label(keys::UPGRADE_OPT_OUT_LABEL, "false"),
                { PodClassOf::Owned("web".into()) },
            ),
            (
                "karpenter do-not-disrupt",
                rs.pod("o", "n1")
                    .annotation(keys::KARPENTER_DO_NOT_DISRUPT_ANNOTATION, "true"),
                PodClassOf::OptedOut(keys::KARPENTER_DO_NOT_DISRUPT_ANNOTATION),
            ),
            (
                "karpenter do-not-disrupt as a label",
                rs.pod("p", "n1")
                    .label(keys::KARPENTER_DO_NOT_DISRUPT_ANNOTATION, "true"),
                PodClassOf::OptedOut(keys::KARPENTER_DO_NOT_DISRUPT_ANNOTATION),
            ),
            (
                "cluster-autoscaler safe-to-evict false",
                unmanaged_pod("ns", "q", "n1")
                    .annotation(keys::CLUSTER_AUTOSCALER_SAFE_TO_EVICT_ANNOTATION, "false"),
                PodClassOf::OptedOut(keys::CLUSTER_AUTOSCALER_SAFE_TO_EVICT_ANNOTATION),
            ),
            (
                "cluster-autoscaler safe-to-evict true does not opt out",
                rs.pod("r", "n1")
                    .annotation(keys::CLUSTER_AUTOSCALER_SAFE_TO_EVICT_ANNOTATION, "true"),
                PodClassOf::Owned("web".into()),
            ),
            (
                "no controller",
                unmanaged_pod("ns", "s", "n1"),
                PodClassOf::NoController,
            ),
            (
                "controller being deleted",
                deleting.pod("t", "n1"),
                PodClassOf::OwnerDeleting("old".into()),
            ),
            (
                "controller gone",
                gone.pod("t2", "n1"),
                PodClassOf::OwnerGone("deleted".into()),
            ),
            (
                "Job gone",
                job("ns", "finished").pod("t3", "n1"),
                PodClassOf::OwnerGone("finished".into()),
            ),
            (
                "controller of a kind k8sm does not watch, not in the view",
                owner(OwnerKind::Other("Rollout".into()), "ns", "elsewhere", None).pod("t4", "n1"),
                PodClassOf::UnjudgedKind("elsewhere".into()),
            ),
            (
                "controller of another kind",
                custom.pod("u", "n1"),
                PodClassOf::UnjudgedKind("canary".into()),
            ),
            (
                "terminating beats opted out",
                rs.pod("v", "n1")
                    .terminating()
                    .label(keys::UPGRADE_OPT_OUT_LABEL, "true"),
                PodClassOf::Ignored(Ignored::Terminating),
            ),
        ];
        let owners = vec![rs, sts, rc, jb, ds, custom, deleting];
        let (names, pods): (Vec<&str>, Vec<PodView>) =
            cases.iter().map(|(n, p, _)| (*n, p.clone())).unzip();
        let got = class_of(pods, owners, vec!["ns/inflight"]);
        for ((name, (_, _, expected)), got) in names.iter().zip(&cases).zip(got) {
            assert_eq!(&got, expected, "{name}");
        }
    }

    #[test]
    fn only_pods_that_hold_the_node_count() {
        let holds = |class: Class| class.holds_node();
        assert!(holds(Class::Ignored(Ignored::Terminating)));
        assert!(holds(Class::Ignored(Ignored::EvictionInFlight)));
        assert!(!holds(Class::Ignored(Ignored::DaemonSet)));
        assert!(!holds(Class::Ignored(Ignored::Mirror)));
        assert!(!holds(Class::Ignored(Ignored::FinishedOptedOut)));
        assert!(!holds(Class::Finished));
        assert!(holds(Class::OptedOut("k")));
        assert!(holds(Class::Unmanaged(Unmanaged::NoController)));
    }
}
