//! What the index derives from each pod alone, kept across passes for the pods that did not change.
//!
//! A large fleet's pass reads every pod (150,000 at 5,000 nodes) to classify it, place it on its node and count it
//! for its workload, and almost none of them changed since the last pass. Reading a pod's view is a cache miss (the
//! views are scattered over the heap, each hundreds of bytes), and those misses were most of a pass. A version of a
//! pod never changes (the controller converts each watch event into a new view), so what follows from the pod alone
//! (its [`Seed`], its node, its counted state, the identities of its shared parts) is worked out once per version and
//! kept here, in the view's order, in one flat array that a pass reads front to back; everything that depends on
//! other objects (owners, budgets, evictions in flight, nodes' state) is still derived every pass.
//!
//! Whether a pod is the one seen before is decided by the identity of its view (`Arc::ptr_eq`): the cache holds a
//! reference to every view it describes, so no address can be reused while its facts are kept. The view's order
//! need not be stable: pods the cache does not find near where they were are derived again, which only costs time.

use std::sync::Arc;

use crate::{
    ClusterView, ControllerRef, PodView,
    classify::{self, Seed},
    index::{FastMap, FastSet},
    memo,
};

/// How far around its expected place a pod is looked for among the last pass's facts: behind, for pods that new
/// ones were inserted before; ahead, for pods that removed ones were before (a controller's store keeps the others
/// in place). A pod found nowhere near is derived again, which only costs time.
const LOOK_BEHIND: usize = 32;
const LOOK_AHEAD: usize = 32;

/// One pod, by its own fields: small and plain, so that a pass reads them front to back and copies them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PodFacts {
    pub(crate) seed: Seed,
    /// `status.phase` is Succeeded or Failed.
    pub(crate) finished: bool,
    pub(crate) terminating: bool,
    pub(crate) ready: bool,
    /// Its controller is of a kind k8sm watches (whatever its seed: the pods of one controller share this, and the
    /// first one met stands for the others).
    pub(crate) watched: bool,
    /// The slot of its node among the nodes of [`PodCache::node_names`] (`u32::MAX`: unbound, or not in the view).
    pub(crate) node: u32,
    /// The address of the pod's UID, of its controller reference and of its node's name (0: none): the pods of one
    /// controller or node share one copy, so a pass looks them up by address without reading the pod. Unique while
    /// the cache holds the pod.
    pub(crate) uid: usize,
    pub(crate) controller: usize,
    pub(crate) node_name: usize,
}

impl PodFacts {
    fn of(pod: &PodView) -> Self {
        Self {
            seed: classify::seed(pod),
            finished: pod.phase.is_finished(),
            terminating: pod.terminating,
            ready: pod.ready,
            watched: pod
                .controller
                .as_ref()
                .is_some_and(|c| classify::is_watched(&c.kind)),
            node: u32::MAX,
            uid: memo::address(&pod.uid),
            controller: pod.controller.as_ref().map_or(0, memo::address),
            node_name: pod.node_name.as_ref().map_or(0, memo::address),
        }
    }
}

/// The facts of the last view's pods, in its order, and what they were worked out against.
#[derive(Default)]
pub(crate) struct PodCache {
    /// The views the facts are of, position by position (held: a view's address identifies it only while it cannot
    /// be freed and its memory reused). `None` only while being aligned.
    held: Vec<Option<Arc<PodView>>>,
    pub(crate) facts: Vec<PodFacts>,
    /// The last pass's vectors, emptied, kept for the next alignment so that a pass allocates nothing.
    spare_held: Vec<Option<Arc<PodView>>>,
    spare_facts: Vec<PodFacts>,
    /// Positions of the facts derived in the last alignment, still to be placed on their nodes.
    unplaced: Vec<u32>,
    /// The names of the nodes, sorted, whose positions the facts' node slots are.
    node_names: Vec<String>,
    /// The controller references of the pods, by address (held, so that an address stays unique): a pass reads the
    /// reference of each controller once, without reading any of its pods. Entries of controllers gone are dropped
    /// when they have doubled since the last clean-up.
    controllers: FastMap<usize, Arc<ControllerRef>>,
    controllers_kept: usize,
    /// Per pod UID, the UID of the newest version of that pod the cache has seen (held, so its address stays unique):
    /// the few pods with an eviction in flight are found by it. Built at the first pass that needs it, then kept up
    /// to date; dropped when the entries of pods gone outnumber the live ones.
    uids: Option<FastMap<Arc<str>, Arc<str>>>,
}

impl PodCache {
    /// Brings the facts in line with `view`, position by position, reusing those of every pod seen before.
    pub(crate) fn align(&mut self, view: &ClusterView) {
        let mut held = std::mem::take(&mut self.spare_held);
        let mut facts = std::mem::take(&mut self.spare_facts);
        held.clear();
        facts.clear();
        held.reserve(view.pods.len());
        facts.reserve(view.pods.len());
        self.unplaced.clear();
        let (old_held, old_facts) = (&mut self.held, &self.facts);
        // Where the next pod is expected among the old ones: one further after each pod, whether found (just after
        // where it was found) or not (a new version replaces the old one in its place; a pod inserted before the
        // others is caught up with by looking behind).
        let mut next = 0usize;
        for pod in &view.pods {
            let same = |k: &usize| old_held[*k].as_ref().is_some_and(|h| Arc::ptr_eq(h, pod));
            let ahead = next..(next + LOOK_AHEAD).min(old_held.len());
            let behind = next.saturating_sub(LOOK_BEHIND)..next.min(old_held.len());
            match ahead.clone().find(same).or_else(|| behind.rev().find(same)) {
                Some(k) => {
                    held.push(old_held[k].take());
                    facts.push(old_facts[k]);
                    next = k + 1;
                }
                None => {
                    self.unplaced
                        .push(u32::try_from(facts.len()).unwrap_or(u32::MAX));
                    facts.push(PodFacts::of(pod));
                    held.push(Some(Arc::clone(pod)));
                    if let Some(uids) = &mut self.uids {
                        uids.insert(Arc::clone(&pod.uid), Arc::clone(&pod.uid));
                    }
                    if let Some(c) = &pod.controller {
                        self.controllers
                            .entry(memo::address(c))
                            .or_insert_with(|| Arc::clone(c));
                    }
                    next += 1;
                }
            }
        }
        // The views not carried over (pods gone, or replaced by a new version) are let go here.
        old_held.clear();
        self.spare_held = std::mem::replace(&mut self.held, held);
        self.spare_facts = std::mem::replace(&mut self.facts, facts);
        if self
            .uids
            .as_ref()
            .is_some_and(|uids| uids.len() > 2 * self.facts.len() + 1024)
        {
            self.uids = None;
        }
        if self.controllers.len() > 2 * self.controllers_kept + 1024 {
            self.controllers = self
                .held
                .iter()
                .flatten()
                .filter_map(|pod| pod.controller.as_ref())
                .map(|c| (memo::address(c), Arc::clone(c)))
                .collect();
            self.controllers_kept = self.controllers.len();
        }
    }

    /// The controller reference at `address` (a fact's `controller`).
    pub(crate) fn controller(&self, address: usize) -> Option<&ControllerRef> {
        self.controllers.get(&address).map(|c| &**c)
    }

    /// Places the pods on their nodes' slots among `names` (sorted): those derived in this alignment, or every pod
    /// when the nodes are not the ones the facts were placed among (a node added, removed or renamed).
    pub(crate) fn place<'n>(&mut self, names: impl ExactSizeIterator<Item = &'n str> + Clone) {
        let same = names.len() == self.node_names.len()
            && names.clone().zip(&self.node_names).all(|(a, b)| a == b);
        if !same {
            self.node_names = names.clone().map(str::to_owned).collect();
        }
        let names = &self.node_names;
        let mut slot_of_name: Option<FastMap<&str, u32>> = None;
        // By the address of the node's name: its pods share one copy, so one lookup of the text per node.
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
                place(
                    &mut self.facts[i],
                    self.held[i].as_deref().expect("aligned"),
                );
            }
        } else {
            for (f, pod) in self.facts.iter_mut().zip(pods) {
                if f.node_name != 0 {
                    place(f, pod);
                }
            }
        }
        self.unplaced.clear();
    }

    /// The addresses of the UIDs (as the facts hold them) of the pods with these UIDs, if the view has them.
    pub(crate) fn uid_addresses<'u>(
        &mut self,
        uids: impl Iterator<Item = &'u str>,
    ) -> FastSet<usize> {
        let held = &self.held;
        let known = self.uids.get_or_insert_with(|| {
            held.iter()
                .flatten()
                .map(|pod| (Arc::clone(&pod.uid), Arc::clone(&pod.uid)))
                .collect()
        });
        uids.filter_map(|uid| known.get(uid).map(memo::address))
            .collect()
    }
}
