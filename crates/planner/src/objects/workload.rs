//! Workloads (docs/design.md §2): the top-level owner whose health is judged for a pod — a
//! Deployment over all its ReplicaSets, a ReplicationController, a StatefulSet, a ReplicaSet
//! without a Deployment, or, for a pod of a controller of any other kind, that controller.
//!
//! A Deployment mid-rollout has pods in two or more ReplicaSets; judging each ReplicaSet alone
//! finds each "fully ready" and lets both lose a pod at once. Judged as one workload, it loses at
//! most what its own bound allows.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::{
    ClusterView, OwnerKind, OwnerView,
    model::collections::FastMap,
    model::pass_cache,
    model::view::{ControllerRef, RolloutView},
};

/// The workload a pod counts for: a reference to the object it is read from, so that the class of
/// each of a large fleet's pods (which holds one) stays small.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Workload<'a> {
    /// A workload whose object the view holds.
    Owner(&'a OwnerView),
    /// A controller of a kind k8sm does not know, from a controller reference.
    Other(&'a ControllerRef),
}

impl<'a> Workload<'a> {
    /// A workload whose object the view holds.
    pub(crate) fn of_owner(owner: &'a OwnerView) -> Self {
        Self::Owner(owner)
    }

    /// A controller of a kind k8sm does not know, from a controller reference.
    pub(crate) fn of_other(controller: &'a ControllerRef) -> Self {
        Self::Other(controller)
    }

    /// The key of its counts and health: an owner's UID, or for a controller k8sm does not see, its
    /// whole reference (see [`ControllerRef::key`]).
    pub(crate) fn key(self) -> &'a str {
        match self {
            Self::Owner(o) => &o.uid,
            Self::Other(c) => c.key(),
        }
    }

    /// Kind as written in owner references, such as `Deployment` or `KafkaNodePool`.
    pub(crate) fn kind(self) -> &'a str {
        match self {
            Self::Owner(o) => o.kind.as_str(),
            Self::Other(c) => &c.kind,
        }
    }

    /// Name, in the pod's namespace.
    pub(crate) fn name(self) -> &'a str {
        match self {
            Self::Owner(o) => &o.name,
            Self::Other(c) => &c.name,
        }
    }

    /// `spec.replicas` of a kind k8sm knows (the apiserver defaults it to 1); `None` for a
    /// controller of another kind, whose size k8sm infers from the pods it sees (see `health`).
    pub(crate) fn desired(self) -> Option<u32> {
        match self {
            Self::Owner(o) => Some(o.desired.unwrap_or(1)),
            Self::Other(_) => None,
        }
    }

    /// A Deployment whose controller is replacing pods itself (see [`OwnerView::replacing`]).
    pub(crate) fn replacing(self) -> bool {
        match self {
            Self::Owner(o) => o.replacing,
            Self::Other(_) => false,
        }
    }

    /// `spec.minReadySeconds` (see [`OwnerView::min_ready_seconds`]); 0 for a controller of another
    /// kind.
    pub(crate) fn min_ready_seconds(self) -> u32 {
        match self {
            Self::Owner(o) => o.min_ready_seconds,
            Self::Other(_) => 0,
        }
    }

    /// When a Ready pod of this workload is available (Ready for `minReadySeconds`, as the
    /// Deployment controller counts it): at once without `minReadySeconds`; `None` when its
    /// Ready time is unknown (never, as for its controller).
    pub(crate) fn available_at(self, pod: &crate::PodView) -> Option<Option<DateTime<Utc>>> {
        available_at(self.min_ready_seconds(), pod)
    }

    /// Whether a Ready pod of this workload is available at `now`.
    pub(crate) fn available(self, pod: &crate::PodView, now: DateTime<Utc>) -> bool {
        match self.available_at(pod) {
            Some(None) => true,
            Some(Some(at)) => at <= now,
            None => false,
        }
    }

    /// A Deployment's rollout (see [`OwnerView::rollout`]).
    pub(crate) fn rollout(self) -> Option<&'a RolloutView> {
        match self {
            Self::Owner(o) => o.rollout.as_ref(),
            Self::Other(_) => None,
        }
    }

    /// Whether k8sm knows its desired count (a Deployment, ReplicaSet, ReplicationController or
    /// StatefulSet).
    pub(crate) fn is_known(&self) -> bool {
        matches!(self, Self::Owner(_))
    }
}

impl std::fmt::Display for Workload<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind(), self.name())
    }
}

/// Which workload the pods of an owner count for, by position among the view's owners. It needs the
/// owner that a ReplicaSet's controller reference names, so the index keeps it while the view's
/// owners classify alike (see `controller_classes::ControllerClasses`) rather than looking
/// every ReplicaSet's controller up on every pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CountsFor {
    /// Itself, by its UID: every owner but a ReplicaSet with a controller of its own.
    Itself,
    /// The owner at this position, which the ReplicaSet's controller reference names (a Deployment,
    /// or an operator's kind such as an Argo Rollout).
    Owner(u32),
    /// The ReplicaSet's controller, which names no owner in the view: by its whole reference.
    Unseen,
}

impl CountsFor {
    /// What the pods of `owner` count for.
    fn of(owner: &OwnerView, owners: &OwnersByUid) -> Self {
        match (&owner.kind, &owner.controller) {
            (OwnerKind::ReplicaSet, Some(top)) => {
                owners.named(top).map_or(Self::Unseen, Self::Owner)
            }
            _ => Self::Itself,
        }
    }

    /// The key of that workload (see [`Workload::key`]), for `owner` among `owners`.
    pub(crate) fn key<'a>(self, owner: &'a OwnerView, owners: &'a [Arc<OwnerView>]) -> &'a str {
        match (self, &owner.controller) {
            (Self::Owner(position), _) => &owners[position as usize].uid,
            (Self::Unseen, Some(top)) => top.key(),
            _ => &owner.uid,
        }
    }
}

/// What the pods of each of `owners` count for, position by position.
pub(crate) fn counts_for(owners: &[Arc<OwnerView>]) -> Vec<CountsFor> {
    let named = OwnersByUid::new(owners);
    owners.iter().map(|o| CountsFor::of(o, &named)).collect()
}

/// [`counts_for`], from what the pods of `last` (the last pass's owners) counted for (`counted`):
/// while every position holds an owner that a reference names as it named the last one (same
/// UID, namespace and kind: see [`ControllerRef::names`]), an owner's answer changes only with
/// its own kind and controller reference, so only the owners whose reference changed are looked
/// up again: owners' statuses renew a few of them every pass, and looking every reference up
/// again hashed every owner's UID.
pub(crate) fn counts_for_since(
    owners: &[Arc<OwnerView>],
    last: &[Arc<OwnerView>],
    counted: &[CountsFor],
) -> Vec<CountsFor> {
    let same_names = owners.len() == last.len()
        && counted.len() == last.len()
        && owners.iter().zip(last).all(|(a, b)| {
            Arc::ptr_eq(a, b) || (a.uid == b.uid && a.namespace == b.namespace && a.kind == b.kind)
        });
    if !same_names {
        return counts_for(owners);
    }
    let named = OwnersByUid::new(owners);
    owners
        .iter()
        .zip(last)
        .zip(counted)
        .map(|((a, b), &c)| {
            if Arc::ptr_eq(a, b) || a.controller == b.controller {
                c
            } else {
                CountsFor::of(a, &named)
            }
        })
        .collect()
}

/// The view's owners by UID, found for a reference only when the rest of its identity matches;
/// built when first asked.
struct OwnersByUid<'a> {
    owners: &'a [Arc<OwnerView>],
    by_uid: std::cell::OnceCell<FastMap<&'a str, u32>>,
}

impl<'a> OwnersByUid<'a> {
    fn new(owners: &'a [Arc<OwnerView>]) -> Self {
        Self {
            owners,
            by_uid: std::cell::OnceCell::new(),
        }
    }

    /// The position of the owner that `reference` names (see [`ControllerRef::names`]).
    fn named(&self, reference: &ControllerRef) -> Option<u32> {
        self.position(&reference.uid)
            .filter(|&p| reference.names(&self.owners[p as usize]))
    }

    /// The owner with UID `uid`.
    fn with_uid(&self, uid: &str) -> Option<&'a OwnerView> {
        Some(&self.owners[self.position(uid)? as usize])
    }

    fn position(&self, uid: &str) -> Option<u32> {
        let by_uid = self.by_uid.get_or_init(|| {
            (0u32..)
                .zip(self.owners)
                .map(|(p, o)| (o.uid.as_str(), p))
                .collect()
        });
        by_uid.get(uid).copied()
    }
}

/// The key of the workload that a pod with controller `reference` counts for: see [`CountsFor`]; a
/// reference that names no owner in the view counts for itself, by its whole reference.
fn pod_workload_key<'a>(reference: &'a ControllerRef, owners: &OwnersByUid<'a>) -> &'a str {
    match owners.named(reference) {
        Some(position) => {
            let owner = &owners.owners[position as usize];
            CountsFor::of(owner, owners).key(owner, owners.owners)
        }
        None => reference.key(),
    }
}

/// Pods neither finished nor terminating, bound to a node or not, per workload key (see
/// [`Workload::key`]).
pub fn live_pods_by_workload(view: &ClusterView) -> HashMap<String, u32> {
    pods_by_workload(view, |pod, _| !pod.terminating)
}

/// Ready pods, not terminating, per workload key: what the upgrade report observes of the workloads
/// it disrupted.
pub fn ready_pods_by_workload(view: &ClusterView) -> HashMap<String, u32> {
    pods_by_workload(view, |pod, _| pod.ready && !pod.terminating)
}

/// Of those, the pods available at `now` (Ready for their workload's `minReadySeconds`), as the
/// planner counts them.
pub fn available_pods_by_workload(view: &ClusterView, now: DateTime<Utc>) -> HashMap<String, u32> {
    pods_by_workload(view, |pod, workload| {
        pod.ready
            && !pod.terminating
            && workload.is_none_or(|w| Workload::Owner(w).available(pod, now))
    })
}

/// The sizes the planner infers, on `view`, of the workloads among `uids` whose desired count k8sm
/// cannot read (controllers of unknown kinds, docs/design.md §5.3): their live pods (neither
/// finished nor terminating, bound or not), plus their evictions in flight whose pod is gone, or
/// their remembered size, whichever is larger. What the upgrade report holds such a workload to
/// while it recovers. Unlike the planner's `d`, which counts terminating pods too (more careful
/// before an eviction), a pod terminating once its replacement exists is not counted twice here:
/// the workload is whole again when as many pods are Ready as it keeps alive.
pub fn inferred_sizes<'u>(
    view: &ClusterView,
    uids: impl IntoIterator<Item = &'u str>,
) -> HashMap<String, u32> {
    let uids: Vec<&str> = uids.into_iter().collect();
    // Most passes ask for none (the workloads recovering are of kinds k8sm knows): no walk over
    // every pod then.
    if uids.is_empty() {
        return HashMap::new();
    }
    let live = live_pods_by_workload(view);
    // Their evictions in flight (a few), and of those the pods still in the view, found in one walk
    // over the pods only when there are any.
    let evicted: Vec<(&str, &str)> = view
        .in_flight
        .iter()
        .filter_map(|e| Some((e.owner_uid.as_deref()?, e.pod_uid.as_str())))
        .filter(|(owner, _)| uids.contains(owner))
        .collect();
    let still_here: std::collections::HashSet<&str> = if evicted.is_empty() {
        Default::default()
    } else {
        let wanted: std::collections::HashSet<&str> = evicted.iter().map(|&(_, pod)| pod).collect();
        view.pods
            .iter()
            .map(|p| &*p.uid)
            .filter(|uid| wanted.contains(uid))
            .collect()
    };
    uids.into_iter()
        .map(|uid| {
            let gone = evicted
                .iter()
                .filter(|&&(owner, pod)| owner == uid && !still_here.contains(pod))
                .count() as u32;
            let counted = live.get(uid).copied().unwrap_or(0) + gone;
            let remembered = view.observed_sizes.get(uid).copied().unwrap_or(0);
            (uid.to_owned(), counted.max(remembered))
        })
        .collect()
}

/// Pods not finished, and `counted` (given the workload's object where k8sm knows its kind), per
/// workload key. The controller's upgrade report asks on every pass while a workload it disrupted
/// recovers: the pods of one controller share one reference, so the workload of each reference is
/// looked up once (by its address) and a pod costs one lookup of an address, not the hash of a UID;
/// a UID is hashed and copied once per workload.
fn pods_by_workload(
    view: &ClusterView,
    counted: impl Fn(&crate::PodView, Option<&OwnerView>) -> bool,
) -> HashMap<String, u32> {
    let named = OwnersByUid::new(&view.owners);
    // Per controller reference (by address), the position of its workload's count in `counts`.
    let mut slot_of: FastMap<usize, usize> = FastMap::default();
    let mut counts: Vec<(&str, Option<&OwnerView>, u32)> = Vec::new();
    for pod in &view.pods {
        let Some(controller) = &pod.controller else {
            continue;
        };
        if pod.phase.is_finished() {
            continue;
        }
        let slot = *slot_of
            .entry(pass_cache::address(controller))
            .or_insert_with(|| {
                let workload = pod_workload_key(controller, &named);
                counts.push((workload, named.with_uid(workload), 0));
                counts.len() - 1
            });
        if counted(pod, counts[slot].1) {
            counts[slot].2 += 1;
        }
    }
    // Several references (ReplicaSets of one Deployment, copies of one UID) may count for one
    // workload.
    let mut by_uid: HashMap<String, u32> = HashMap::with_capacity(counts.len());
    for (uid, _, n) in counts {
        match by_uid.get_mut(uid) {
            Some(total) => *total += n,
            None => {
                by_uid.insert(uid.to_owned(), n);
            }
        }
    }
    by_uid
}

/// Grows the remembered sizes of controllers of unknown kinds (see
/// [`crate::ClusterView::observed_sizes`]) with what `view` shows: each becomes the most live pods
/// seen of it at once. A controller is remembered from the first eviction k8sm makes of its pods
/// (`start`, planned on this view); the caller forgets one some time after the last, so that a
/// controller scaled down for good is not held to its old size for ever.
pub fn grow_observed_sizes(
    view: &ClusterView,
    sizes: &mut BTreeMap<String, u32>,
    start: impl IntoIterator<Item = String>,
) {
    for uid in start {
        sizes.entry(uid).or_default();
    }
    // Most passes remember nothing: no walk over every pod then.
    if sizes.is_empty() {
        return;
    }
    let live = live_pods_by_workload(view);
    for (uid, size) in sizes.iter_mut() {
        *size = (*size).max(live.get(uid).copied().unwrap_or(0));
    }
}

/// When a Ready `pod` of a workload with `min_ready_seconds` is available (see
/// [`Workload::available_at`]).
pub(crate) fn available_at(
    min_ready_seconds: u32,
    pod: &crate::PodView,
) -> Option<Option<DateTime<Utc>>> {
    match min_ready_seconds {
        0 => Some(None),
        seconds => {
            let since = pod.ready_changed?;
            Some(since.checked_add_signed(chrono::Duration::seconds(i64::from(seconds))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{deployment, owner};

    mod since {
        use proptest::prelude::*;

        use super::*;

        /// An owner with one of a few UIDs (two owners may share one), and maybe a controller
        /// reference naming one of them.
        fn arb_owner() -> impl Strategy<Value = OwnerView> {
            let kind = prop_oneof![
                Just(OwnerKind::ReplicaSet),
                Just(OwnerKind::Deployment),
                Just(OwnerKind::StatefulSet),
            ];
            let top = proptest::option::of((0u8..4, prop::bool::ANY, prop::bool::ANY));
            (kind, 0u8..4, prop::bool::ANY, top).prop_map(|(kind, uid, ns, top)| {
                let namespace = if ns { "a" } else { "b" };
                let mut o = owner(kind, namespace, &format!("o{uid}"), Some(1));
                o.uid = format!("u{uid}");
                o.controller = top.map(|(uid, other_ns, rs)| {
                    let mut top = ControllerRef::default();
                    top.namespace = (if other_ns { "b" } else { namespace }).to_owned();
                    top.api_version = "apps/v1".to_owned();
                    top.kind = (if rs { "ReplicaSet" } else { "Deployment" }).to_owned();
                    top.name = format!("o{uid}");
                    top.uid = format!("u{uid}");
                    top
                });
                o
            })
        }

        #[derive(Clone, Debug)]
        enum Change {
            /// Another owner in this place.
            Replace(usize, OwnerView),
            /// A new version of the owner in this place, with another controller reference.
            Reference(usize, Option<ControllerRef>),
            /// A new version with the same fields (a status changed).
            Renew(usize),
            Push(OwnerView),
            Remove(usize),
            Swap(usize, usize),
        }

        fn arb_change() -> impl Strategy<Value = Change> {
            prop_oneof![
                2 => (any::<usize>(), arb_owner()).prop_map(|(i, o)| Change::Replace(i, o)),
                3 => (any::<usize>(), arb_owner())
                    .prop_map(|(i, o)| Change::Reference(i, o.controller)),
                3 => any::<usize>().prop_map(Change::Renew),
                1 => arb_owner().prop_map(Change::Push),
                1 => any::<usize>().prop_map(Change::Remove),
                1 => (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Change::Swap(i, j)),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Worked out from the last pass's answers, after any sequence of changes to the
            /// owners, what each owner's pods count for is what working it out afresh gives.
            #[test]
            fn counts_kept_across_changes_are_those_worked_out_again(
                start in proptest::collection::vec(arb_owner(), 0..8),
                changes in proptest::collection::vec(arb_change(), 1..30),
            ) {
                let mut owners: Vec<Arc<OwnerView>> = start.into_iter().map(Arc::new).collect();
                let mut last = owners.clone();
                let mut counted = counts_for(&owners);
                for (step, change) in changes.into_iter().enumerate() {
                    let len = owners.len();
                    match change {
                        Change::Replace(i, o) if len > 0 => owners[i % len] = Arc::new(o),
                        Change::Reference(i, top) if len > 0 => {
                            let mut o = (*owners[i % len]).clone();
                            o.controller = top;
                            owners[i % len] = Arc::new(o);
                        }
                        Change::Renew(i) if len > 0 => {
                            owners[i % len] = Arc::new((*owners[i % len]).clone());
                        }
                        Change::Push(o) => owners.push(Arc::new(o)),
                        Change::Remove(i) if len > 0 => {
                            owners.remove(i % len);
                        }
                        Change::Swap(i, j) if len > 0 => owners.swap(i % len, j % len),
                        _ => {}
                    }
                    let kept = counts_for_since(&owners, &last, &counted);
                    prop_assert_eq!(&kept, &counts_for(&owners), "step {}", step);
                    last = owners.clone();
                    counted = kept;
                }
            }
        }
    }

    #[test]
    fn sizes_remember_the_most_live_pods_seen_at_once() {
        let kafka = owner(
            OwnerKind::Other("KafkaNodePool".into()),
            "k",
            "brokers",
            None,
        );
        let web = deployment("shop", "web", 2);
        let rs = web.replica_set("web-1");
        let view = |names: &[&str], terminating: &[&str]| ClusterView {
            pods: names
                .iter()
                .map(|n| {
                    let pod = kafka.pod(n, "n1");
                    if terminating.contains(n) {
                        pod.terminating()
                    } else {
                        pod
                    }
                })
                .chain([rs.pod("w", "n1")])
                .map(std::sync::Arc::new)
                .collect(),
            owners: crate::testing::shared_owners([web.clone(), rs.clone()]),
            ..ClusterView::default()
        };
        let mut sizes = BTreeMap::new();
        // Nothing is remembered before k8sm evicts from a controller.
        grow_observed_sizes(&view(&["b0", "b1", "b2"], &[]), &mut sizes, []);
        assert!(sizes.is_empty());
        // Evicting b0: three live pods then.
        let evicting = [kafka.unseen_key()];
        grow_observed_sizes(&view(&["b0", "b1", "b2"], &[]), &mut sizes, evicting);
        assert_eq!(sizes[&kafka.unseen_key()], 3);
        // b0 terminating, then gone, then replaced: the size stays 3, never 2.
        grow_observed_sizes(&view(&["b0", "b1", "b2"], &["b0"]), &mut sizes, []);
        grow_observed_sizes(&view(&["b1", "b2"], &[]), &mut sizes, []);
        assert_eq!(sizes[&kafka.unseen_key()], 3);
        // Scaled up: it grows.
        grow_observed_sizes(&view(&["b1", "b2", "b3", "b4"], &[]), &mut sizes, []);
        assert_eq!(sizes[&kafka.unseen_key()], 4);
        // Live pods of a Deployment count for the Deployment.
        let live = live_pods_by_workload(&view(&[], &[]));
        assert_eq!(live[&web.uid], 1);
    }

    #[test]
    fn ready_pods_count_for_their_workload_across_its_replica_sets_and_copies_of_a_reference() {
        let web = deployment("shop", "web", 6);
        let (old, new) = (web.replica_set("web-1"), web.replica_set("web-2"));
        let db = crate::testing::stateful_set("shop", "db", 3);
        let mut pods = vec![
            old.pod("o1", "n1"),
            old.pod("o2", "n1").not_ready(),
            old.pod("o3", "n2").terminating(),
            new.pod("w1", "n2"),
            new.pod("w2", "n3"),
            db.pod("db-0", "n1"),
            db.pod("db-1", "n2"),
        ];
        // w1 and w2 share one reference (as the controller's conversion makes them); w3 has a copy
        // of its own.
        pods[4].controller = pods[3].controller.clone();
        pods.push(new.pod("w3", "n3"));
        let view = ClusterView {
            pods: crate::testing::shared_pods(pods),
            owners: crate::testing::shared_owners([web.clone(), old, new, db.clone()]),
            ..ClusterView::default()
        };
        let ready = ready_pods_by_workload(&view);
        assert_eq!(ready.len(), 2, "{ready:?}");
        assert_eq!(ready[&web.uid], 4, "o1, w1, w2, w3");
        assert_eq!(ready[&db.uid], 2);
        assert_eq!(
            live_pods_by_workload(&view)[&web.uid],
            5,
            "o2 is live, not ready"
        );
    }
}
