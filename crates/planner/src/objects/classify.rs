//! Per-pod classification of docs/design.md §5.3, as small filters tried in order (like kubectl's
//! `pkg/drain/filters.go`).

use k8sm_api::keys;

use crate::{
    OwnerKind, OwnerView, PodView,
    model::output::PodClass,
    model::view::ControllerRef,
    objects::lookups::{Lookups, OwnerEntry},
    objects::workload::Workload,
};

/// The annotation that marks a mirror pod (the API's view of a static pod).
pub(crate) const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The opt-out keys and the value that opts out. Each is honoured as a label and as an annotation:
/// operators and tools put them in either place, and reading both costs nothing.
const OPT_OUT_KEYS: [(&str, &str); 3] = [
    (keys::UPGRADE_OPT_OUT_LABEL, keys::UPGRADE_OPT_OUT_VALUE),
    keys::NEIGHBOUR_OPT_OUT_KEYS[0],
    keys::NEIGHBOUR_OPT_OUT_KEYS[1],
];

/// Every pod annotation the planner reads: a cache may drop the others (real pods can carry large
/// ones).
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
    /// Its controller reference names an owner of a kind k8sm watches that is not in the view:
    /// deleted (the garbage collector deletes or orphans the pod soon), or created so recently
    /// that k8sm has not seen it yet. Either way the pod waits: deleting it could take a live
    /// owner below its threshold.
    OwnerGone(&'a ControllerRef),
    /// Its controller (or the Deployment of its ReplicaSet) is being deleted: it replaces nothing
    /// any more, and the garbage collector (or an orphaning deletion) decides what becomes of
    /// the pod.
    OwnerDeleting(&'a ControllerRef),
}

/// The class of one pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class<'a> {
    Ignored(Ignored),
    Finished,
    /// With the key that opts it out.
    OptedOut(&'static str),
    /// A pod of a workload whose desired count k8sm knows: a Deployment (through its ReplicaSet), a
    /// bare ReplicaSet, a ReplicationController or a StatefulSet.
    Owned(Workload<'a>),
    /// A pod of a controller of another kind (an operator's custom resource, or the controller of
    /// its ReplicaSet): always evicted through the Eviction API, one at a time unless the
    /// threshold allows more.
    Other(Workload<'a>),
    Job(&'a OwnerView),
    Unmanaged(Unmanaged<'a>),
}

impl<'a> Class<'a> {
    /// Whether the pod keeps its node from being drained.
    pub(crate) fn holds_node(self) -> bool {
        match self {
            Self::Ignored(why) => matches!(why, Ignored::Terminating | Ignored::EvictionInFlight),
            Self::Finished => false,
            Self::OptedOut(_)
            | Self::Owned(_)
            | Self::Other(_)
            | Self::Job(_)
            | Self::Unmanaged(_) => true,
        }
    }

    /// The workload the pod is judged against, if it is a workload or other-controller pod.
    pub(crate) fn workload(self) -> Option<Workload<'a>> {
        match self {
            Self::Owned(w) | Self::Other(w) => Some(w),
            _ => None,
        }
    }

    /// The public summary of the class.
    pub(crate) fn public(self) -> PodClass {
        match self {
            Self::Ignored(_) => PodClass::Ignored,
            Self::Finished => PodClass::Finished,
            Self::OptedOut(_) => PodClass::OptedOut,
            Self::Owned(_) => PodClass::Owned,
            Self::Other(_) => PodClass::OtherController,
            Self::Job(_) => PodClass::Job,
            Self::Unmanaged(_) => PodClass::Unmanaged,
        }
    }
}

/// What a pod is by its own fields alone: everything the classification decides before the pod's
/// evictions in flight and its controller's object are looked at. A version of a pod never changes,
/// so the index works this out once per version and keeps it across passes; the rest is per pass,
/// and per controller rather than per pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seed {
    /// Mirror, DaemonSet and terminating pods, whatever else is true of them.
    Ignored(Ignored),
    /// Finished, and opted out.
    FinishedOptedOut,
    Finished,
    /// With the position in `OPT_OUT_KEYS` of the key that opts it out (a byte: a seed is kept for
    /// every pod).
    OptedOut(u8),
    NoController,
    /// With a controller: its class is its controller's ([`controller_class`]).
    Controlled,
}

/// The filters that read only the pod, in the order of the rule (see [`Seed::class`] for the rest).
pub(crate) fn seed(pod: &PodView) -> Seed {
    if pod.mirror || pod.annotations.contains_key(MIRROR_ANNOTATION) {
        return Seed::Ignored(Ignored::Mirror);
    }
    // By the reference's kind, whether or not the DaemonSet is in the view: its pods come back with
    // the node.
    if pod
        .controller
        .as_ref()
        .is_some_and(|c| c.kind == "DaemonSet")
    {
        return Seed::Ignored(Ignored::DaemonSet);
    }
    if pod.terminating {
        return Seed::Ignored(Ignored::Terminating);
    }
    let opted_out = opted_out(pod);
    if pod.phase.is_finished() {
        return match opted_out {
            Some(_) => Seed::FinishedOptedOut,
            None => Seed::Finished,
        };
    }
    if let Some(key) = opted_out {
        let at = OPT_OUT_KEYS.iter().position(|&(k, _)| k == key);
        return Seed::OptedOut(at.and_then(|i| u8::try_from(i).ok()).unwrap_or(0));
    }
    match &pod.controller {
        None => Seed::NoController,
        Some(_) => Seed::Controlled,
    }
}

impl Seed {
    /// The class of a pod with this seed, given whether an eviction of it is in flight and, for a
    /// pod whose class is its controller's, that class: the first filter that claims the pod
    /// wins.
    pub(crate) fn class<'a>(
        self,
        in_flight: bool,
        by_controller: impl FnOnce() -> Class<'a>,
    ) -> Class<'a> {
        match self {
            Self::Ignored(why) => Class::Ignored(why),
            _ if in_flight => Class::Ignored(Ignored::EvictionInFlight),
            Self::FinishedOptedOut => Class::Ignored(Ignored::FinishedOptedOut),
            Self::Finished => Class::Finished,
            Self::OptedOut(at) => Class::OptedOut(OPT_OUT_KEYS[usize::from(at)].0),
            Self::NoController => Class::Unmanaged(Unmanaged::NoController),
            Self::Controlled => by_controller(),
        }
    }
}

/// The class of a pod of `controller` that nothing about the pod itself classifies (seed
/// [`Seed::Controlled`]), given whether k8sm watches the controller's kind and the view's owner of
/// its UID (looked up once per controller by the caller): the same for all the controller's pods.
pub(crate) fn controller_class<'a>(
    controller: &'a ControllerRef,
    watched: bool,
    entry: Option<&OwnerEntry<'a>>,
    index: &Lookups<'a>,
) -> Class<'a> {
    // k8sm does not watch other kinds: not finding one in the view says nothing about whether it
    // exists.
    if !watched {
        return Class::Other(Workload::of_other(controller));
    }
    owner_entry_class(controller, entry, index)
}

/// The key by which the pod opts out, if any (the first of `OPT_OUT_KEYS` that the pod's labels or
/// annotations set).
pub(crate) fn opted_out(pod: &PodView) -> Option<&'static str> {
    let opts_out = |value: &String, expected: &str| value.trim().eq_ignore_ascii_case(expected);
    // One walk over the pod's few labels and (as cached) few annotations: most keys differ from
    // every opt-out key in length, so this costs far less than six map lookups with string
    // comparisons, on every pod of every pass.
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

/// What a pod of an owner that exists is, by that owner alone: worked out when the index first
/// meets a reference to the owner in a pass (once per controller, not per pod), and only for owners
/// that pods refer to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Resolved<'a> {
    Job(&'a OwnerView),
    Owned(Workload<'a>),
    /// A ReplicaSet controlled by a controller of another kind.
    Other(Workload<'a>),
    /// An owner of a watched kind that is neither replicated nor a Job: the pod's controller is the
    /// workload.
    OtherSelf,
    /// A ReplicaSet whose own controller is not in the view.
    Missing(Unmanaged<'a>),
}

/// Resolves an owner that exists (see [`Resolved`]).
pub(crate) fn resolve<'a>(owner: &'a OwnerView, index: &Lookups<'a>) -> Resolved<'a> {
    match (&owner.kind, &owner.controller) {
        (OwnerKind::Job, _) => Resolved::Job(owner),
        // A ReplicaSet with a controller of its own counts for it: a Deployment (over all its
        // ReplicaSets), or a controller of another kind that rolls ReplicaSets out (such as
        // an Argo Rollout).
        (OwnerKind::ReplicaSet, Some(top)) => {
            if !is_watched(&top.kind) {
                return Resolved::Other(Workload::of_other(top));
            }
            match index.owner(top).filter(|e| e.owner.exists) {
                Some(OwnerEntry {
                    owner: top_owner, ..
                }) if top_owner.kind.is_replicated() => {
                    Resolved::Owned(Workload::of_owner(top_owner))
                }
                // A watched kind that does not control ReplicaSets: judge the ReplicaSet itself.
                Some(_) => Resolved::Owned(Workload::of_owner(owner)),
                None => Resolved::Missing(missing(top, index)),
            }
        }
        (kind, _) if kind.is_replicated() => Resolved::Owned(Workload::of_owner(owner)),
        // A DaemonSet pod is ignored before its owner is looked at.
        _ => Resolved::OtherSelf,
    }
}

/// Whether k8sm watches controllers of this kind: [`OwnerKind::is_watched`], without building an
/// `OwnerKind` (which copies a kind it does not know) for every pod.
pub(crate) fn is_watched(kind: &str) -> bool {
    matches!(
        kind,
        "Deployment" | "ReplicaSet" | "ReplicationController" | "StatefulSet" | "Job"
    )
}

/// Owned, other controller, Job or unmanaged: the class of a pod with the controller reference
/// `controller` of a watched kind, given the view's owner of that UID.
fn owner_entry_class<'a>(
    controller: &'a ControllerRef,
    entry: Option<&OwnerEntry<'a>>,
    index: &Lookups<'a>,
) -> Class<'a> {
    // An owner being deleted replaces nothing: as if it were not there.
    let Some(entry) = entry.filter(|e| e.owner.exists) else {
        return Class::Unmanaged(missing(controller, index));
    };
    match resolve(entry.owner, index) {
        Resolved::Job(owner) => Class::Job(owner),
        Resolved::Owned(workload) => Class::Owned(workload),
        Resolved::Other(workload) => Class::Other(workload),
        Resolved::OtherSelf => Class::Other(Workload::of_other(controller)),
        Resolved::Missing(why) => Class::Unmanaged(why),
    }
}

/// Why a controller of a watched kind is not in the view: being deleted, or gone (or not seen yet).
fn missing<'a>(controller: &'a ControllerRef, index: &Lookups) -> Unmanaged<'a> {
    if index.owner(controller).is_some_and(|e| !e.owner.exists) {
        Unmanaged::OwnerDeleting(controller)
    } else {
        Unmanaged::OwnerGone(controller)
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::unmanaged_pod;

    /// The index keeps a class for every pod of the fleet (150,000 at 5,000 nodes) and every pass
    /// reads them again: a class is a tag and a reference, not copies of names.
    #[test]
    fn a_class_is_small() {
        assert!(
            std::mem::size_of::<Class>() <= 24,
            "{}",
            std::mem::size_of::<Class>()
        );
    }

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
