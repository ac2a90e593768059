//! The facts of the last view's pods ([`PodCache`]), kept across passes for the pods that did not
//! change. A version of a pod never changes (the controller converts each watch event into a new
//! view), so its facts are worked out once per version and kept in the view's order, in one flat
//! array that a pass reads front to back instead of the views scattered over the heap. What
//! depends on other objects is still derived every pass. Why:
//! docs/decisions/0007-planner-keeps-what-it-derived.md.

use std::sync::Arc;

use crate::{
    ClusterView, ControllerRef, PodView,
    model::collections::FastMap,
    model::pass_cache,
    objects::node_groups::NodeGroups,
    objects::pod_facts::{Covered, PodFacts},
};

/// How far around its expected place a pod is looked for among the last pass's facts: behind, for
/// pods that new ones were inserted before; ahead, for pods that removed ones were before (a
/// controller's store keeps the others in place). A pod found nowhere near is derived again, which
/// only costs time.
const LOOK_BEHIND: usize = 32;
const LOOK_AHEAD: usize = 32;
/// A view with at most one pod in this many not at its place is aligned in place.
const IN_PLACE_SHARE: usize = 8;

/// The facts of the last view's pods, in its order, and what they were worked out against.
///
/// Whether a pod is the one seen before is decided by the identity of its view (`Arc::ptr_eq`): the
/// cache holds a reference to every view it describes, so no address can be reused while its facts
/// are kept. The view's order need not be stable: pods the cache does not find near where they were
/// are derived again, which only costs time. What follows from the pod alone (its [`Seed`], its
/// node, its counted state, the identities of its shared parts) is kept here; everything that
/// depends on other objects (owners, budgets, evictions in flight, nodes' state) is derived every
/// pass.
#[derive(Default)]
pub(crate) struct PodCache {
    /// The views the facts are of, position by position (held: a view's address identifies it only
    /// while it cannot be freed and its memory reused). `None` only while being aligned.
    held: Vec<Option<Arc<PodView>>>,
    pub(crate) facts: Vec<PodFacts>,
    /// Per position, which budgets cover its pod, worked out once for the budgets it was worked
    /// out with (see [`Self::know_cover`]): apart from the facts, so that the queue, which reads
    /// it for every pod of every node it judges, reads 4 bytes a pod rather than a line of its
    /// facts.
    pub(crate) covered: Vec<Covered>,
    /// The last pass's vectors, emptied, kept for the next alignment so that a pass allocates
    /// nothing.
    spare_held: Vec<Option<Arc<PodView>>>,
    spare_facts: Vec<PodFacts>,
    spare_covered: Vec<Covered>,
    /// Positions of the facts derived in the last alignment, still to be placed on their nodes.
    unplaced: Vec<u32>,
    /// The names of the nodes, sorted, whose positions the facts' node slots are.
    node_names: Vec<String>,
    /// The positions of the facts grouped by node, kept from pass to pass and updated for the pods
    /// placed again; grouped again from scratch only when the facts were realigned or the nodes
    /// changed.
    groups: NodeGroups,
    /// Whether `groups` are those of the facts.
    grouped: bool,
    /// The controller references of the pods, by slot (held, so that an address stays unique): a
    /// pass reads the reference of each controller once, without reading any of its pods. The
    /// slots of controllers gone are given up (and the others numbered again) when they have
    /// doubled since the last clean-up.
    controllers: Vec<Arc<ControllerRef>>,
    /// The slot of each reference in `controllers`, by its address.
    controller_slots: FastMap<usize, u32>,
    controllers_kept: usize,
    /// Per pod UID, the position of the newest version of that pod the cache has derived (an
    /// entry whose position now holds another pod is of a pod gone): the few pods with an
    /// eviction in flight are found by it. Built at the first pass that needs it, then kept up
    /// to date; dropped when the positions move, or when the entries of pods gone outnumber the
    /// live ones.
    uids: Option<FastMap<Arc<str>, u32>>,
    /// The positions derived in the last alignment, with what each held before it (`None`: a
    /// position new to the view); positions past the view's end hold nothing now.
    replaced: Vec<Replaced>,
    /// Whether every position but those in `replaced` holds the pod it held before the last
    /// alignment, with the same facts: not after a realignment, nor once the nodes or the
    /// controllers' slots were numbered again.
    positions_kept: bool,
}

/// A position derived in an alignment, and what it held before (`None`: nothing).
pub(crate) struct Replaced {
    pub(crate) position: u32,
    pub(crate) before: Option<Before>,
}

/// The pod a position held before an alignment, with its facts and budgets' answer.
pub(crate) struct Before {
    pub(crate) facts: PodFacts,
    pub(crate) covered: Covered,
    pub(crate) pod: Arc<PodView>,
}

impl PodCache {
    /// Brings the facts in line with `view`, position by position, reusing those of every pod seen
    /// before.
    pub(crate) fn align(&mut self, view: &ClusterView) {
        // Facts derived and never placed hold a node the groups do not show.
        self.grouped &= self.unplaced.is_empty();
        self.unplaced.clear();
        self.replaced.clear();
        self.positions_kept = true;
        if self.mostly_in_place(view) {
            self.align_in_place(view);
        } else {
            self.realign(view);
        }
        if self
            .uids
            .as_ref()
            .is_some_and(|uids| uids.len() > 2 * self.facts.len() + 1024)
        {
            self.uids = None;
        }
        if self.controllers_kept == 0 {
            // The first controllers met: none of them is gone, nothing to number again.
            self.controllers_kept = self.controllers.len();
        } else if self.controllers.len() > 2 * self.controllers_kept + 1024 {
            self.controllers.clear();
            self.controller_slots.clear();
            for (f, pod) in self.facts.iter_mut().zip(&self.held) {
                let pod = pod.as_deref().expect("aligned");
                f.controller = Self::controller_slot(
                    &mut self.controllers,
                    &mut self.controller_slots,
                    pod.controller.as_ref(),
                );
            }
            self.controllers_kept = self.controllers.len();
            // The class keys hold the slots numbered again.
            self.grouped = false;
            self.positions_kept = false;
        }
    }

    /// The slot of `controller` among `controllers`, given one if it has none.
    fn controller_slot(
        controllers: &mut Vec<Arc<ControllerRef>>,
        slots: &mut FastMap<usize, u32>,
        controller: Option<&Arc<ControllerRef>>,
    ) -> u32 {
        let Some(controller) = controller else {
            return u32::MAX;
        };
        *slots
            .entry(pass_cache::address(controller))
            .or_insert_with(|| {
                controllers.push(Arc::clone(controller));
                u32::try_from(controllers.len() - 1).unwrap_or(u32::MAX)
            })
    }

    /// Whether the view has the pods of the last pass at the same places, but for a few (new
    /// versions, pods gone from the end or put in the place of one gone, new pods at the end:
    /// what a view kept across passes shows): then the facts are updated where they stand,
    /// instead of copied into new vectors (a large fleet's facts are megabytes). A pass with
    /// pods added or removed before others is aligned by [`Self::realign`].
    fn mostly_in_place(&self, view: &ClusterView) -> bool {
        let moved = view
            .pods
            .iter()
            .zip(&self.held)
            .filter(|(pod, held)| !held.as_ref().is_some_and(|h| Arc::ptr_eq(h, pod)))
            .count();
        moved + view.pods.len().abs_diff(self.held.len()) <= view.pods.len() / IN_PLACE_SHARE
    }

    /// Derives the facts of the pods that are not the ones at their places.
    fn align_in_place(&mut self, view: &ClusterView) {
        if view.pods.len() < self.held.len() {
            // The pods past the view's end are gone (let go here), and their positions with them.
            for (i, f) in self.facts.iter().enumerate().skip(view.pods.len()) {
                let position = u32::try_from(i).unwrap_or(u32::MAX);
                if self.grouped {
                    self.groups.remove(position, f.node);
                }
                let before = self.held[i].take().map(|pod| Before {
                    facts: *f,
                    covered: self.covered[i],
                    pod,
                });
                self.replaced.push(Replaced { position, before });
            }
            self.held.truncate(view.pods.len());
            self.facts.truncate(view.pods.len());
            self.covered.truncate(view.pods.len());
        }
        for (i, pod) in view.pods.iter().enumerate() {
            if self
                .held
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(|h| Arc::ptr_eq(h, pod))
            {
                continue;
            }
            let position = u32::try_from(i).unwrap_or(u32::MAX);
            self.unplaced.push(position);
            let derived = self.derive(pod, position);
            if i == self.held.len() {
                self.facts.push(derived);
                self.covered.push(Covered::UNKNOWN);
                self.held.push(Some(Arc::clone(pod)));
                self.replaced.push(Replaced {
                    position,
                    before: None,
                });
                continue;
            }
            let facts = self.facts[i];
            let covered = std::mem::replace(&mut self.covered[i], Covered::UNKNOWN);
            // Its node kept until it is placed again, to tell whether it moved.
            self.facts[i] = PodFacts {
                node: facts.node,
                ..derived
            };
            // The old version is let go with the next alignment.
            let before = self.held[i].replace(Arc::clone(pod)).map(|pod| Before {
                facts,
                covered,
                pod,
            });
            self.replaced.push(Replaced { position, before });
        }
    }

    /// Aligns the facts with a view whose pods moved: each looked for around where it is expected
    /// among the last pass's, the others derived.
    fn realign(&mut self, view: &ClusterView) {
        let mut held = std::mem::take(&mut self.spare_held);
        let mut facts = std::mem::take(&mut self.spare_facts);
        let mut covered = std::mem::take(&mut self.spare_covered);
        held.clear();
        facts.clear();
        covered.clear();
        held.reserve(view.pods.len());
        facts.reserve(view.pods.len());
        covered.reserve(view.pods.len());
        let mut old_held = std::mem::take(&mut self.held);
        let mut old_facts = std::mem::take(&mut self.facts);
        let mut old_covered = std::mem::take(&mut self.covered);
        // Where the next pod is expected among the old ones: one further after each pod, whether
        // found (just after where it was found) or not (a new version replaces the old one
        // in its place; a pod inserted before the others is caught up with by looking
        // behind).
        let mut next = 0usize;
        for pod in &view.pods {
            let same = |k: &usize| old_held[*k].as_ref().is_some_and(|h| Arc::ptr_eq(h, pod));
            let ahead = next..(next + LOOK_AHEAD).min(old_held.len());
            let behind = next.saturating_sub(LOOK_BEHIND)..next.min(old_held.len());
            match ahead.clone().find(same).or_else(|| behind.rev().find(same)) {
                Some(k) => {
                    held.push(old_held[k].take());
                    facts.push(old_facts[k]);
                    covered.push(old_covered[k]);
                    next = k + 1;
                }
                None => {
                    let position = u32::try_from(facts.len()).unwrap_or(u32::MAX);
                    self.unplaced.push(position);
                    facts.push(self.derive(pod, position));
                    covered.push(Covered::UNKNOWN);
                    held.push(Some(Arc::clone(pod)));
                    next += 1;
                }
            }
        }
        // The views not carried over (pods gone, or replaced by a new version) are let go here.
        old_held.clear();
        old_facts.clear();
        old_covered.clear();
        self.held = held;
        self.facts = facts;
        self.covered = covered;
        self.grouped = false;
        self.positions_kept = false;
        // Found again from the pods' new positions when next needed.
        self.uids = None;
        self.spare_held = old_held;
        self.spare_facts = old_facts;
        self.spare_covered = old_covered;
    }

    /// The facts of a pod not seen before, at `position`, and its UID and controller reference
    /// remembered.
    fn derive(&mut self, pod: &Arc<PodView>, position: u32) -> PodFacts {
        if let Some(uids) = &mut self.uids {
            uids.insert(Arc::clone(&pod.uid), position);
        }
        PodFacts {
            controller: Self::controller_slot(
                &mut self.controllers,
                &mut self.controller_slots,
                pod.controller.as_ref(),
            ),
            ..PodFacts::of(pod)
        }
    }

    /// Works out which budgets cover each pod whose answer is not known: those that changed since
    /// the last pass, or every pod when the answers were dropped (`forget`: a budget came, went,
    /// or changed its selector, or the answers kept were cleaned up). `covered(pod)`: the answer
    /// for `pod`, asked once for consecutive pods with one copy of a namespace and of labels (the
    /// pods of one controller share them).
    pub(crate) fn know_cover(
        &mut self,
        forget: bool,
        mut covered: impl FnMut(&PodView) -> Covered,
    ) {
        if forget {
            self.covered.fill(Covered::UNKNOWN);
        }
        let mut last: Option<((usize, usize), Covered)> = None;
        for ((f, known), pod) in self.facts.iter().zip(&mut self.covered).zip(&self.held) {
            if *known != Covered::UNKNOWN {
                continue;
            }
            let Some(pod) = pod.as_deref() else {
                continue;
            };
            let key = (f.order.namespace(), f.labels);
            *known = match last {
                Some((seen, answer)) if seen == key => answer,
                _ => {
                    let answer = covered(pod);
                    last = Some((key, answer));
                    answer
                }
            };
        }
    }

    /// The controller references, by slot (a fact's `controller`).
    pub(crate) fn controllers(&self) -> &[Arc<ControllerRef>] {
        &self.controllers
    }

    /// Places the pods on their nodes' slots among `names` (sorted): those derived in this
    /// alignment, or every pod when the nodes are not the ones the facts were placed among (a
    /// node added, removed or renamed).
    pub(crate) fn place<'n>(&mut self, names: impl ExactSizeIterator<Item = &'n str> + Clone) {
        let same = names.len() == self.node_names.len()
            && names.clone().zip(&self.node_names).all(|(a, b)| a == b);
        if !same {
            self.node_names = names.clone().map(str::to_owned).collect();
            self.grouped = false;
            self.positions_kept = false;
        }
        let names = &self.node_names;
        let mut slot_of_name: Option<FastMap<&str, u32>> = None;
        // By the address of the node's name: its pods share one copy, so one lookup of the text per
        // node.
        let mut by_address: FastMap<usize, u32> = FastMap::default();
        let mut place = |f: &mut PodFacts, pod: &PodView| {
            f.node = match &pod.node_name {
                None => u32::MAX,
                Some(name) => *by_address.entry(f.node_name).or_insert_with(|| {
                    let slots = slot_of_name.get_or_insert_with(|| {
                        names
                            .iter()
                            .enumerate()
                            .map(|(slot, name)| {
                                (name.as_str(), u32::try_from(slot).unwrap_or(u32::MAX))
                            })
                            .collect()
                    });
                    slots.get(&**name).copied().unwrap_or(u32::MAX)
                }),
            };
        };
        let pods = self.held.iter().map(|h| h.as_deref().expect("aligned"));
        if same {
            for &i in &self.unplaced {
                let i = i as usize;
                let before = self.facts[i].node;
                place(
                    &mut self.facts[i],
                    self.held[i].as_deref().expect("aligned"),
                );
                if self.grouped {
                    self.groups.update(
                        u32::try_from(i).unwrap_or(u32::MAX),
                        before,
                        &self.facts[i],
                    );
                }
            }
        } else {
            for (f, pod) in self.facts.iter_mut().zip(pods) {
                if f.node_name != 0 {
                    place(f, pod);
                } else {
                    // Unbound (a new version may still hold the old one's node, see
                    // `align_in_place`).
                    f.node = u32::MAX;
                }
            }
        }
        self.unplaced.clear();
    }

    /// Groups the facts' positions by node (see [`Self::groups`]), unless they are grouped
    /// already, and puts the groups that changed in pod order.
    pub(crate) fn group_by_node(&mut self) {
        if !self.grouped {
            self.groups.rebuild(&self.facts, self.node_names.len());
            self.grouped = true;
        }
        self.groups.order(&self.held);
    }

    /// The facts' positions grouped by node, as [`Self::group_by_node`] left them.
    pub(crate) fn groups(&self) -> &NodeGroups {
        &self.groups
    }

    /// For each of these UIDs, the pod with it if the view has one: the address of its UID (as
    /// its facts hold it) and its position.
    pub(crate) fn find_uids<'u>(
        &mut self,
        uids: impl Iterator<Item = &'u str>,
    ) -> Vec<Option<(usize, u32)>> {
        let held = &self.held;
        let known = self.uids.get_or_insert_with(|| {
            held.iter()
                .enumerate()
                .filter_map(|(i, pod)| {
                    let pod = pod.as_ref()?;
                    Some((Arc::clone(&pod.uid), u32::try_from(i).unwrap_or(u32::MAX)))
                })
                .collect()
        });
        uids.map(|uid| {
            let position = *known.get(uid)?;
            let pod = held.get(position as usize)?.as_deref()?;
            (*pod.uid == *uid).then(|| (pass_cache::address(&pod.uid), position))
        })
        .collect()
    }

    /// The positions derived in the last alignment, with what each held before.
    pub(crate) fn replaced(&self) -> &[Replaced] {
        &self.replaced
    }

    /// Whether every position not [`Self::replaced`] holds the pod and facts it held before the
    /// last alignment.
    pub(crate) fn positions_kept(&self) -> bool {
        self.positions_kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool) -> Arc<PodView> {
        Arc::new(PodView {
            name: name.into(),
            uid: format!("uid-{name}").into(),
            ready,
            ..PodView::default()
        })
    }

    #[test]
    fn only_the_pods_not_seen_before_are_derived_whether_in_place_or_moved() {
        let mut view = ClusterView {
            pods: (0..16).map(|i| pod(&format!("p{i}"), true)).collect(),
            ..ClusterView::default()
        };
        let mut cache = PodCache::default();
        cache.align(&view);
        assert_eq!(cache.unplaced.len(), 16);
        // A new version in its place: derived again where it stands.
        view.pods[5] = pod("p5", false);
        cache.align(&view);
        assert_eq!(cache.unplaced, [5]);
        let ready: Vec<bool> = cache.facts.iter().map(|f| f.ready).collect();
        assert_eq!(ready, (0..16).map(|i| i != 5).collect::<Vec<_>>());
        // A pod gone, the last one put in its place, and a new one at the end, as a kept view shows
        // them: only those two derived, where they stand.
        view.pods.swap_remove(3);
        view.pods.push(pod("p16", false));
        cache.align(&view);
        assert_eq!(cache.unplaced, [3, 15]);
        let names: Vec<&str> = cache
            .held
            .iter()
            .map(|h| &*h.as_ref().unwrap().name)
            .collect();
        let expected: Vec<&str> = view.pods.iter().map(|p| &*p.name).collect();
        assert_eq!(names, expected);
        // The last one gone: nothing derived.
        view.pods.pop();
        cache.align(&view);
        assert!(cache.unplaced.is_empty());
        assert_eq!(cache.facts.len(), 15);
        // Back to the first sixteen, in order, for what follows.
        view.pods = (0..16).map(|i| pod(&format!("p{i}"), i != 5)).collect();
        cache.align(&view);
        // A pod gone before the others: each of them found a place earlier, none derived.
        view.pods.remove(0);
        cache.align(&view);
        assert!(cache.unplaced.is_empty());
        let ready: Vec<bool> = cache.facts.iter().map(|f| f.ready).collect();
        assert_eq!(ready, (1..16).map(|i| i != 5).collect::<Vec<_>>());
        // Most pods new: derived again, in the view's order.
        view.pods = (0..15).map(|i| pod(&format!("q{i}"), i % 2 == 0)).collect();
        cache.align(&view);
        assert_eq!(cache.unplaced.len(), 15);
        let ready: Vec<bool> = cache.facts.iter().map(|f| f.ready).collect();
        assert_eq!(ready, (0..15).map(|i| i % 2 == 0).collect::<Vec<_>>());
    }
}

#[cfg(test)]
mod kept_groups {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::PodCache;
    use crate::{ClusterView, PodView};

    /// A change to the view's pods, as the controller's kept view makes them, or one that moves
    /// the others (which the cache realigns).
    #[derive(Clone, Debug)]
    enum Change {
        /// A new version of the pod at this place: on another node or none, Ready or not.
        Version(usize, Option<u8>, bool),
        /// A pod gone, the last one put in its place.
        SwapRemove(usize),
        Push(Option<u8>, bool),
        Pop,
        /// A pod gone before the others.
        Remove(usize),
        /// Every pod at another place.
        Reverse,
        /// A node added or removed.
        Nodes(u8),
    }

    fn change() -> impl Strategy<Value = Change> {
        let node = proptest::option::weighted(0.8, 0u8..6);
        prop_oneof![
            6 => (any::<usize>(), node.clone(), any::<bool>())
                .prop_map(|(i, n, r)| Change::Version(i, n, r)),
            3 => any::<usize>().prop_map(Change::SwapRemove),
            3 => (node, any::<bool>()).prop_map(|(n, r)| Change::Push(n, r)),
            1 => Just(Change::Pop),
            1 => any::<usize>().prop_map(Change::Remove),
            1 => Just(Change::Reverse),
            1 => (0u8..6).prop_map(Change::Nodes),
        ]
    }

    /// Names alike in their first eight bytes and namespaces of another copy for some pods, so
    /// that ordering them reads their texts.
    fn pod(id: usize, node: Option<u8>, ready: bool) -> Arc<PodView> {
        Arc::new(PodView {
            namespace: ["shop", "db"][id % 2].into(),
            name: match id % 3 {
                0 => format!("pod-{id:04}"),
                _ => format!("web-frontend-{}", id % 7),
            }
            .into(),
            uid: format!("uid-{id}").into(),
            node_name: node.map(|n| format!("node-{n}").into()),
            ready,
            ..PodView::default()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The groups updated pod by pod are those grouped from scratch, and each pod is on the
        /// slot of its node, after every change.
        #[test]
        fn groups_kept_across_changes_are_those_grouped_again(
            changes in proptest::collection::vec(change(), 1..40),
        ) {
            let mut view = ClusterView {
                pods: (0..12).map(|i| pod(i, Some((i % 4) as u8), true)).collect(),
                ..ClusterView::default()
            };
            let mut nodes: Vec<u8> = (0..5).collect();
            let mut next = view.pods.len();
            let mut cache = PodCache::default();
            for (step, change) in changes.into_iter().enumerate() {
                let len = view.pods.len();
                match change {
                    Change::Version(i, n, r) if len > 0 => {
                        let name = view.pods[i % len].name.clone();
                        let mut new = (*pod(0, n, r)).clone();
                        new.name = name;
                        new.uid = view.pods[i % len].uid.clone();
                        view.pods[i % len] = Arc::new(new);
                    }
                    Change::SwapRemove(i) if len > 0 => {
                        view.pods.swap_remove(i % len);
                    }
                    Change::Remove(i) if len > 0 => {
                        view.pods.remove(i % len);
                    }
                    Change::Push(n, r) => {
                        view.pods.push(pod(next, n, r));
                        next += 1;
                    }
                    Change::Pop => {
                        view.pods.pop();
                    }
                    Change::Reverse => view.pods.reverse(),
                    Change::Nodes(n) => match nodes.iter().position(|&m| m == n) {
                        Some(at) => {
                            nodes.remove(at);
                        }
                        None => {
                            nodes.push(n);
                            nodes.sort_unstable();
                        }
                    },
                    _ => {}
                }
                let names: Vec<String> = nodes.iter().map(|n| format!("node-{n}")).collect();
                cache.align(&view);
                cache.place(names.iter().map(String::as_str));
                cache.group_by_node();
                for (f, p) in cache.facts.iter().zip(&view.pods) {
                    let slot = p
                        .node_name
                        .as_ref()
                        .and_then(|n| names.iter().position(|m| **m == **n))
                        .map_or(u32::MAX, |s| u32::try_from(s).unwrap_or(u32::MAX));
                    prop_assert_eq!(f.node, slot, "step {}", step);
                }
                prop_assert!(
                    cache.groups().same_as_rebuilt(&cache.facts, names.len(), &cache.held),
                    "step {}",
                    step
                );
                for slot in 0..names.len() {
                    let texts: Vec<_> = cache
                        .groups()
                        .on(slot)
                        .iter()
                        .map(|m| {
                            let p = &view.pods[m.position as usize];
                            (p.namespace.to_string(), p.name.to_string(), p.uid.to_string())
                        })
                        .collect();
                    let mut sorted = texts.clone();
                    sorted.sort();
                    prop_assert_eq!(texts, sorted, "step {}", step);
                }
            }
        }
    }
}
