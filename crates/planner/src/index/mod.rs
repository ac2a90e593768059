//! The view, indexed once per pass: the pods classified, counted per workload and grouped per node.

pub(crate) mod shared_output;

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::{
    ClusterView, ControllerRef, NodeView, OwnerView, PodView, Resources,
    index::shared_output::SharedOutput,
    model::collections::{FastMap, FastSet},
    model::pass_cache::Text,
    objects::budgets::{Cover, KeptBudgets, Pdb},
    objects::classify::{self, Class, Ignored},
    objects::controller_classes::ControllerClasses,
    objects::lookups::{Lookups, slot_of},
    objects::node_groups::{Member, NodeGroups},
    objects::pod_cache::PodCache,
    objects::pod_facts::{ClassKey, Covered, PodFacts},
    objects::workload::{self, CountsFor},
};

/// The Deployments whose controller is replacing pods, with their progress deadline, and the newest
/// ReplicaSet of each (the highest revision): a few, during rollouts.
struct Rollouts<'a> {
    deadlines: Vec<(&'a OwnerView, chrono::Duration)>,
    newest: FastSet<&'a str>,
}

impl<'a> Rollouts<'a> {
    fn new(view: &'a ClusterView) -> Self {
        let deadlines: Vec<(&OwnerView, chrono::Duration)> = view
            .owners
            .iter()
            .filter(|o| o.kind == crate::OwnerKind::Deployment && o.replacing)
            .filter_map(|o| {
                let seconds = o.rollout.as_ref()?.progress_deadline_seconds;
                Some((&**o, chrono::Duration::seconds(i64::from(seconds))))
            })
            .collect();
        let mut newest: FastSet<&str> = FastSet::default();
        if !deadlines.is_empty() {
            let mut by_deployment: BTreeMap<&str, (u64, &str)> = BTreeMap::new();
            // Without a revision (never, from a Deployment controller) which one is newest is
            // unknown.
            let sets = view
                .owners
                .iter()
                .filter(|o| o.kind == crate::OwnerKind::ReplicaSet && o.revision > 0);
            for set in sets {
                let Some(parent) = set.controller.as_ref() else {
                    continue;
                };
                if !deadlines
                    .iter()
                    .any(|(deployment, _)| parent.names(deployment))
                {
                    continue;
                }
                let best = by_deployment
                    .entry(parent.uid.as_str())
                    .or_insert((set.revision, set.uid.as_str()));
                if set.revision > best.0 {
                    *best = (set.revision, set.uid.as_str());
                }
            }
            newest.extend(by_deployment.values().map(|(_, uid)| *uid));
        }
        Self { deadlines, newest }
    }
}

/// A workload's pods as the view shows them (not finished), counted once per pass for every
/// workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PodCounts {
    /// Pods not finished, bound to a node or not.
    pub(crate) seen: u32,
    /// Of those, pods with an eviction in flight (a pod terminating on its own is gone, not
    /// going).
    pub(crate) going: u32,
    /// Of the others, available pods: Ready, for the workload's `minReadySeconds` where it sets
    /// them.
    pub(crate) ready: u32,
    /// Of the others, Ready pods not available yet: what the upgrade report counts as Ready beside
    /// `ready`.
    pub(crate) warming: u32,
    /// Pods this upgrade still has to move: workload or other-controller pods (so neither finished
    /// nor terminating nor with an eviction in flight) bound to a node that must still be
    /// drained, by its contract keys alone — one that carries the mark (annotation or label),
    /// was not told to terminate (no kamikaze annotation nor recorded kamikaze executor ID)
    /// and is not opted out — whether it drains now or queues for a slot. Counted in the same
    /// walk as the rest, from one flag per node: which policy selects the node is not known here,
    /// and a node marked in this very pass counts from the next one. See `admission::chain`.
    pub(crate) to_move: u32,
    /// Since when its pod that has been not Ready longest is not Ready (its Ready condition's last
    /// change, or its creation): with no pod Ready, the workload is broken as a whole once
    /// that is `nodeProgressDeadline` ago.
    pub(crate) not_ready_since: Option<DateTime<Utc>>,
    /// A Deployment whose controller is replacing pods: the last time its newest ReplicaSet
    /// started a pod or saw one become Ready, the rollout's own progress.
    rollout_progress: Option<DateTime<Utc>>,
    /// That was longer ago than its `progressDeadlineSeconds`: the rollout is stuck, and its pods
    /// move within the headroom of its Ready count. Its Progressing condition says so only
    /// until a replacement of an old pod becomes Ready, which the Deployment controller counts
    /// as progress (for `progressDeadlineSeconds` more).
    pub(crate) rollout_stalled: bool,
}

/// How many pods of a node are of the classes that its tally reads (see `drain::tally`), counted in
/// the walk that classifies every pod: most of a large fleet's nodes only queue for a slot, and
/// their tally is then read from here rather than from a walk over their pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeClasses {
    /// Pods that keep the node from being drained ([`Class::holds_node`]).
    pub(crate) holding: u32,
    /// Workload and other-controller pods.
    pub(crate) workload: u32,
    /// Of those, pods that more than one budget covers (whose eviction the Eviction API refuses:
    /// see `drain::needs_operator`).
    pub(crate) multi_covered: u32,
    /// Opted-out, Job and unmanaged pods: those whose obstacle depends on the policy.
    pub(crate) judged_by_policy: u32,
    /// Pods terminating: whether one is stuck depends on the time.
    pub(crate) terminating: u32,
    /// Workload and other-controller pods whose spec may pin them to the node: whether one does
    /// depends on the node, the volumes and the policy.
    pub(crate) pinnable: u32,
}

/// The view, indexed. Every collection iterates in a fixed order, whatever the order of the view's
/// vectors.
///
/// Each pod is classified once per pass, and grouped by node as positions in the view's pod list
/// (one flat array, no list per node): a large fleet's pods are mostly on nodes that only queue for
/// a slot, whose pods are only counted, so a pass must not spend more than a few lookups on each
/// pod.
pub(crate) struct Index<'a> {
    /// Nodes by name.
    pub(crate) nodes: BTreeMap<&'a str, &'a NodeView>,
    /// Slot of each node name in `groups`, by name and by the copy of the name its node holds
    /// (which is the one a pass asks with: found without reading the text).
    node_slots: FastMap<&'a str, u32>,
    node_slots_by_copy: FastMap<Text, u32>,
    /// Pods of each node slot, as positions in `pods` with their class and order keys, in pod
    /// order.
    groups: &'a NodeGroups,
    /// Per node slot, the classes of its pods.
    node_classes: Vec<NodeClasses>,
    /// Per node slot, what its pods that have not finished reserve, and what its pods that need a
    /// place elsewhere once evicted (workload, other-controller and Job pods, not terminating)
    /// reserve.
    node_used: Vec<Resources>,
    node_moving: Vec<Resources>,
    /// What the pods waiting to be scheduled (bound to no node, not finished nor terminating) will
    /// reserve.
    pub(crate) pending: Resources,
    /// What every schedulable Ready node has free (`None`: no node reports its allocatable),
    /// worked out once per pass, when a broken pod first asks ([`Self::free_beside`]).
    schedulable_free: OnceCell<Option<Resources>>,
    /// The view's pods, and the facts of each (its class is worked out from them when asked for: a
    /// large fleet's pass reads few of them, and a vector of every pod's class would cost more
    /// to write than those reads).
    pods: &'a [Arc<PodView>],
    facts: &'a [PodFacts],
    /// Per controller slot (a fact's `controller`), the class its pods get when nothing about the
    /// pod decides it, and the slot of the workload they count for (`None`: no pod of the view
    /// refers to it).
    by_controller: Vec<Option<(Class<'a>, u32)>>,
    /// The pods with an eviction in flight, by the address of their UID (a few; not a set of every
    /// pod).
    in_flight_uids: FastSet<usize>,
    /// Per UID of the workload the pods count for (docs/design.md §2: a Deployment for the pods of
    /// its ReplicaSets), its slot in `workload_pods` (looked up, never iterated where order
    /// matters).
    workload_slots: FastMap<&'a str, u32>,
    /// Per workload slot, its pods, bound to a node or not.
    workload_pods: Vec<PodCounts>,
    /// What the pods were classified with (classifying again is for tests: the index holds every
    /// pod's class).
    #[cfg(test)]
    pub(crate) lookups: Lookups<'a>,
    /// Budgets, sorted by namespace and name.
    pub(crate) pdbs: Vec<Pdb<'a>>,
    /// Which budgets cover which pods.
    cover: Cover<'a>,
    /// Per pod (by its position in the view), which budgets cover it; empty without budgets.
    covered: Vec<Covered>,
    /// What the pass writes once and shares among the pods it reports.
    pub(crate) shared: SharedOutput,
    /// Per workload UID, evictions in flight whose pod is no longer in the view: gone, and not
    /// replaced yet.
    pub(crate) in_flight_gone: FastMap<&'a str, u32>,
    /// Pods whose eviction was launched and is not answered yet (a few).
    pub(crate) unanswered_pods: FastSet<&'a str>,
    /// The remembered sizes of controllers of unknown kinds.
    pub(crate) observed_sizes: &'a BTreeMap<String, u32>,
    /// The volumes that may pin a pod, by claim.
    pub(crate) volumes: crate::objects::pin::Volumes<'a>,
    /// The earliest time a Ready pod not yet available (Ready for less than its workload's
    /// `minReadySeconds`) becomes available, or a rollout without progress becomes stuck: its
    /// workload's health changes then, whatever else does.
    pub(crate) next_available: Option<DateTime<Utc>>,
}

impl<'a> Index<'a> {
    /// Indexes `view`, with the facts of its pods in `pods` (brought in line with the view here:
    /// those of the pods seen in the last pass are reused), the classes of its controllers kept
    /// in `controllers` (those whose owners did not change are reused) and its budgets'
    /// selectors kept in `budgets` (reused unless one changed).
    pub(crate) fn new(
        view: &'a ClusterView,
        pods: &'a mut PodCache,
        controllers: &mut ControllerClasses,
        budgets: &'a mut KeptBudgets,
        now: DateTime<Utc>,
    ) -> Self {
        let nodes: BTreeMap<&str, &NodeView> =
            view.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        let (node_slots, node_slots_by_copy) = node_slots(&nodes);
        align_facts(pods, view, &nodes);
        let (pdbs, cover) = index_budgets(view, budgets, pods);
        let mut in_flight = InFlight::new(view, pods);
        let pods: &'a PodCache = pods;
        let owners = Owners::new(view, controllers);
        let mut resolver = Resolver::new(view, pods, controllers, owners);
        let mut walk = Walk::new(
            view,
            &nodes,
            &mut in_flight,
            &mut resolver,
            !pdbs.is_empty(),
            now,
        );
        for (position, (f, pod)) in pods.facts.iter().zip(&view.pods).enumerate() {
            walk.pod(position, f, pod);
        }
        walk.stall_rollouts();
        let Walk {
            by_controller,
            node_classes,
            node_used,
            node_moving,
            pending,
            next_available,
            covered,
            ..
        } = walk;
        Self {
            nodes,
            node_slots,
            node_slots_by_copy,
            groups: pods.groups(),
            node_classes,
            node_used,
            node_moving,
            pending,
            schedulable_free: OnceCell::new(),
            pods: &view.pods,
            facts: &pods.facts,
            by_controller,
            in_flight_gone: in_flight.gone(view),
            in_flight_uids: in_flight.uids,
            workload_slots: resolver.owners.workload_slots,
            workload_pods: resolver.workload_pods,
            #[cfg(test)]
            lookups: resolver
                .owners
                .lookups
                .unwrap_or_else(|| Lookups::new(view, &resolver.owners.owner_counts)),
            pdbs,
            cover,
            covered,
            shared: SharedOutput::default(),
            unanswered_pods: view
                .in_flight
                .iter()
                .filter(|e| e.unanswered)
                .map(|e| e.pod_uid.as_str())
                .collect(),
            observed_sizes: &view.observed_sizes,
            volumes: crate::objects::pin::volumes(&view.volumes),
            next_available,
        }
    }

    /// Pods bound to `node`, each with its class, in pod order (by namespace, name and UID).
    pub(crate) fn pods_on(&self, node: &str) -> impl ExactSizeIterator<Item = OnNode<'a>> + '_ {
        self.group_of(node).iter().map(|m| {
            let (i, key) = (m.position as usize, &m.key);
            OnNode {
                pod: &self.pods[i],
                class: self.class_at(i, key),
                ready: key.ready,
                pinnable: key.pinnable,
                covered: self.covered.get(i).copied().unwrap_or(Covered::UNKNOWN),
                counts_for: self
                    .controlled(key.controller)
                    .map_or(u32::MAX, |(_, slot)| slot),
            }
        })
    }

    /// What the pods bound to `node` reserve ([`Self::node_used`]).
    pub(crate) fn used_on(&self, node: &str) -> Resources {
        self.node_slot(node)
            .map(|slot| self.node_used[slot])
            .unwrap_or_default()
    }

    /// What the schedulable Ready nodes but `node` have free, less what the pods waiting to be
    /// scheduled will reserve: where the replacements of `node`'s pods can land. `None` where
    /// no node reports its allocatable.
    pub(crate) fn free_beside(&self, node: &str) -> Option<Resources> {
        let total = (*self.schedulable_free.get_or_init(|| {
            let mut known = false;
            let mut free = Resources::default();
            for (&name, view) in &self.nodes {
                known |= view.allocatable.is_some();
                free += self.free_on(name, view);
            }
            known.then_some(free)
        }))?;
        let own = self.nodes.get(node).map(|view| self.free_on(node, view));
        Some(total.less(own.unwrap_or_default()).less(self.pending))
    }

    /// What a schedulable Ready node has free (nothing for the others, and where it reports no
    /// allocatable).
    fn free_on(&self, name: &str, view: &NodeView) -> Resources {
        match view.allocatable {
            Some(allocatable) if view.ready && !view.unschedulable => {
                allocatable.less(self.used_on(name))
            }
            _ => Resources::default(),
        }
    }

    /// What the pods of `node` that need a place elsewhere once evicted reserve
    /// ([`Self::node_moving`]).
    pub(crate) fn moving_on(&self, node: &str) -> Resources {
        self.node_slot(node)
            .map(|slot| self.node_moving[slot])
            .unwrap_or_default()
    }

    /// The classes of the pods bound to `node`.
    pub(crate) fn classes_on(&self, node: &str) -> NodeClasses {
        self.node_slot(node)
            .map(|slot| self.node_classes[slot])
            .unwrap_or_default()
    }

    /// The pods of `node`, with their keys.
    fn group_of(&self, node: &str) -> &'a [Member] {
        match self.node_slot(node) {
            Some(slot) => self.groups.on(slot),
            None => &[],
        }
    }

    /// The slot of `node`, found by the copy of its name that its view holds where it can be.
    fn node_slot(&self, node: &str) -> Option<usize> {
        self.node_slots_by_copy
            .get(&Text::of(node))
            .or_else(|| self.node_slots.get(node))
            .map(|&slot| slot as usize)
    }

    /// The position of `node` among the view's nodes in name order.
    pub(crate) fn node_position(&self, node: &str) -> Option<u32> {
        self.node_slot(node)
            .map(|slot| u32::try_from(slot).unwrap_or(u32::MAX))
    }

    /// The class of the pod at position `i`, with the class key `key`.
    fn class_at(&self, i: usize, key: &ClassKey) -> Class<'a> {
        let going =
            !self.in_flight_uids.is_empty() && self.in_flight_uids.contains(&self.facts[i].uid);
        key.seed.class(going, || {
            self.controlled(key.controller)
                .expect("a pod whose seed needs its controller has one")
                .0
        })
    }

    /// The class of the pods of the controller in `slot` when nothing about the pod decides it, and
    /// the slot of the workload they count for (`None`: a pod without a controller).
    fn controlled(&self, slot: u32) -> Option<(Class<'a>, u32)> {
        self.by_controller.get(slot as usize).copied().flatten()
    }

    /// The workload or other-controller pods bound to `node`, each with the slot of the workload it
    /// counts for (see [`Self::workload_at`]), in pod order. Reads no UID.
    pub(crate) fn workloads_on(
        &self,
        node: &str,
    ) -> impl Iterator<Item = (crate::objects::workload::Workload<'a>, u32)> + '_ {
        self.group_of(node).iter().filter_map(|m| {
            let workload = self.class_at(m.position as usize, &m.key).workload()?;
            let (_, slot) = self.controlled(m.key.controller)?;
            Some((workload, slot))
        })
    }

    /// How many workload slots there are: workload slots are `0..workload_count()`.
    pub(crate) fn workload_count(&self) -> usize {
        self.workload_pods.len()
    }

    /// The pods of the workload in `slot` (from [`Self::workloads_on`]), as the view shows them.
    pub(crate) fn workload_at(&self, slot: u32) -> PodCounts {
        self.workload_pods
            .get(slot as usize)
            .copied()
            .unwrap_or_default()
    }

    /// The pods of the workload `uid`, as the view shows them.
    pub(crate) fn workload_pods(&self, uid: &str) -> PodCounts {
        self.workload_slots
            .get(uid)
            .map(|&slot| self.workload_pods[slot as usize])
            .unwrap_or_default()
    }

    /// Budgets that cover `pod`, with their positions in `pdbs`, in that order.
    pub(crate) fn pdbs_for<'s>(&'s self, pod: &'s PodView) -> Vec<(usize, &'s Pdb<'a>)> {
        self.pdbs_covering(pod).collect()
    }

    /// Budgets that cover the pod `on`, with their positions in `pdbs`, in that order: found by the
    /// answer its facts refer to, without reading the pod (asked for every pod decided).
    pub(crate) fn budgets_of<'s>(&'s self, on: &OnNode<'s>) -> Vec<(usize, &'s Pdb<'a>)> {
        if self.pdbs.is_empty() {
            return Vec::new();
        }
        let answer = self.cover.answer(on.covered);
        // Every test's pass checks the answer against the pod's labels: every pod's is known.
        #[cfg(test)]
        assert_eq!(
            answer.as_deref(),
            Some(&*self.cover.covering(&self.pdbs, on.pod)),
            "budgets covering {}",
            on.pod.name
        );
        let Some(answer) = answer else {
            return self.pdbs_for(on.pod);
        };
        answer
            .iter()
            .map(|&i| (i as usize, &self.pdbs[i as usize]))
            .collect()
    }

    /// Budgets that cover `pod`, in the order of their positions in `pdbs`, found once per pass for
    /// the pods that share its namespace and labels. Without budgets, the pod is not even read
    /// (this runs for every pod of every queued node).
    pub(crate) fn pdbs_covering<'s>(
        &'s self,
        pod: &'s PodView,
    ) -> impl Iterator<Item = (usize, &'s Pdb<'a>)> + 's {
        let budgets = (!self.pdbs.is_empty()).then(|| self.cover.covering(&self.pdbs, pod));
        budgets.into_iter().flat_map(move |budgets| {
            (0..budgets.len()).map(move |k| {
                let i = budgets[k] as usize;
                (i, &self.pdbs[i])
            })
        })
    }
}

/// A pod bound to a node, as [`Index::pods_on`] finds it.
#[derive(Clone, Copy)]
pub(crate) struct OnNode<'a> {
    pub(crate) pod: &'a Arc<PodView>,
    pub(crate) class: Class<'a>,
    /// Whether the pod is Ready, read from the index rather than from the pod: most pods of a
    /// large fleet's nodes are judged by their readiness and class alone, and reading a pod's
    /// view is a cache miss.
    pub(crate) ready: bool,
    /// Whether its spec may pin it to the node ([`PodView::pins`]), read from the index rather
    /// than from the pod.
    pub(crate) pinnable: bool,
    /// For a workload or other-controller pod, which budgets cover it ([`Index::budgets_of`]), and
    /// whether more than one does (see [`NodeClasses::multi_covered`]), read from the index
    /// rather than from the pod's labels.
    pub(crate) covered: Covered,
    /// The slot of the workload it counts for ([`Index::workload_at`]; `u32::MAX` without a
    /// controller): what the ledger finds the workload's health by, without hashing its UID.
    pub(crate) counts_for: u32,
}

/// Each node name's slot in the index's `groups` (the nodes sorted by name), by name and by
/// the copy of the name its node holds.
fn node_slots<'a>(
    nodes: &BTreeMap<&'a str, &'a NodeView>,
) -> (FastMap<&'a str, u32>, FastMap<Text, u32>) {
    let mut node_slots: FastMap<&str, u32> =
        FastMap::with_capacity_and_hasher(nodes.len(), Default::default());
    let mut node_slots_by_copy: FastMap<Text, u32> =
        FastMap::with_capacity_and_hasher(nodes.len(), Default::default());
    for (slot, name) in nodes.keys().enumerate() {
        node_slots.insert(name, slot_of(slot));
        node_slots_by_copy.insert(Text::of(name), slot_of(slot));
    }
    (node_slots, node_slots_by_copy)
}

/// Brings the pods' facts in line with `view`, places them on the slots of `nodes` and groups them
/// by node.
fn align_facts(pods: &mut PodCache, view: &ClusterView, nodes: &BTreeMap<&str, &NodeView>) {
    pods.align(view);
    pods.place(nodes.keys().copied());
    pods.group_by_node();
}

/// The budgets, sorted by namespace and name, and which cover which pods; the facts of the pods
/// whose answer is not known are told whether more than one covers them.
fn index_budgets<'a>(
    view: &'a ClusterView,
    budgets: &'a mut KeptBudgets,
    pods: &mut PodCache,
) -> (Vec<Pdb<'a>>, Cover<'a>) {
    let (pdbs, cover, answers_dropped) = budgets.index(view);
    if !pdbs.is_empty() {
        pods.know_cover(answers_dropped, |pod| cover.covered(&pdbs, pod));
    }
    (pdbs, cover)
}

/// The pods with an eviction in flight (a few; not a set of every pod), and which of them the walk
/// meets.
struct InFlight<'a> {
    /// The addresses of their UIDs: the index's `in_flight_uids`.
    uids: FastSet<usize>,
    /// Those still in the view.
    seen: FastSet<&'a str>,
}

impl<'a> InFlight<'a> {
    fn new(view: &ClusterView, pods: &mut PodCache) -> Self {
        let uids = if view.in_flight.is_empty() {
            FastSet::default()
        } else {
            pods.uid_addresses(view.in_flight.iter().map(|e| e.pod_uid.as_str()))
        };
        Self {
            uids,
            seen: FastSet::default(),
        }
    }

    /// Whether an eviction of `pod` (with the facts `f`) is in flight; if so, it is seen.
    #[inline]
    fn going(&mut self, f: &PodFacts, pod: &'a PodView) -> bool {
        let going = !self.uids.is_empty() && self.uids.contains(&f.uid);
        if going {
            self.seen.insert(&pod.uid);
        }
        going
    }

    /// Per workload UID, the evictions in flight whose pod the walk did not meet: gone, and not
    /// replaced yet.
    fn gone(&self, view: &'a ClusterView) -> FastMap<&'a str, u32> {
        let mut gone: FastMap<&str, u32> = FastMap::default();
        for eviction in &view.in_flight {
            if let Some(owner) = &eviction.owner_uid
                && !self.seen.contains(eviction.pod_uid.as_str())
            {
                *gone.entry(owner).or_default() += 1;
            }
        }
        gone
    }
}

/// The view's owners as the walk classifies controllers with them: the slot of the workload each
/// one's pods count for (what its pods are is worked out in the walk, when a pod first refers to
/// it), and the owners by UID where built.
struct Owners<'a> {
    /// Per UID of the workload the pods count for, its slot: the index's `workload_slots`, which
    /// the walk extends with the controllers that are not in the view.
    workload_slots: FastMap<&'a str, u32>,
    /// Per position in the view's owners, the workload slot its pods count for: what a kept class
    /// needs.
    owner_counts: Vec<u32>,
    /// The owners by UID, looked up only for controllers whose class is not kept: built when the
    /// first one is met (a pass over the owners of the last pass, whose controllers are all kept,
    /// builds none), or at once for owners not seen in the last pass, to tell whether two of them
    /// share a UID.
    lookups: Option<Lookups<'a>>,
    /// No two owners share a UID. With two (the last one found by it), kept classes, found by
    /// position, are not used.
    one_owner_per_uid: bool,
}

impl<'a> Owners<'a> {
    /// The owners of `view`; `controllers` remembers them when they are not the last pass's.
    fn new(view: &'a ClusterView, controllers: &mut ControllerClasses) -> Self {
        let unchanged = controllers.owners_unchanged(&view.owners);
        // What each owner's pods count for, worked out again only for the owners that changed.
        let counted_for = unchanged.is_none().then(|| {
            workload::counts_for_since(&view.owners, controllers.owners(), controllers.counts_for())
        });
        let each = counted_for
            .as_deref()
            .unwrap_or_else(|| controllers.counts_for());
        let (workload_slots, owner_counts) = workload_slots(view, each);
        let (lookups, one_owner_per_uid) =
            owner_lookups(view, &owner_counts, controllers, unchanged, counted_for);
        Self {
            workload_slots,
            owner_counts,
            lookups,
            one_owner_per_uid,
        }
    }
}

/// Every owner with the slot of the workload its pods count for (`each`, owner by owner), and per
/// position in the view's owners, that slot.
fn workload_slots<'a>(
    view: &'a ClusterView,
    each: &[CountsFor],
) -> (FastMap<&'a str, u32>, Vec<u32>) {
    let mut workload_slots: FastMap<&str, u32> =
        FastMap::with_capacity_and_hasher(view.owners.len(), Default::default());
    let mut owner_counts: Vec<u32> = Vec::with_capacity(view.owners.len());
    for (owner, counts_for) in view.owners.iter().zip(each) {
        let next = slot_of(workload_slots.len());
        let counts = *workload_slots
            .entry(counts_for.key(owner, &view.owners))
            .or_insert(next);
        owner_counts.push(counts);
    }
    (workload_slots, owner_counts)
}

/// The owners by UID if built now, and whether no two owners share a UID: as the last pass found if
/// the owners are its own (`unchanged`), otherwise found from lookups built at once and remembered
/// in `controllers` with what each owner's pods count for (`counted_for`).
fn owner_lookups<'a>(
    view: &'a ClusterView,
    owner_counts: &[u32],
    controllers: &mut ControllerClasses,
    unchanged: Option<bool>,
    counted_for: Option<Vec<CountsFor>>,
) -> (Option<Lookups<'a>>, bool) {
    match unchanged {
        Some(unique) => (None, unique),
        None => {
            let built = Lookups::new(view, owner_counts);
            let unique = built.distinct_uids() == view.owners.len();
            controllers.remember_owners(&view.owners, unique, counted_for.unwrap_or_default());
            (Some(built), unique)
        }
    }
}

/// What the class of a controller's pods is worked out from, the first time a pod refers to it: the
/// classes kept from the last pass, and the view's owners.
struct Resolver<'a, 'c> {
    view: &'a ClusterView,
    /// The controller references, by slot.
    references: &'a [Arc<ControllerRef>],
    /// The classes kept from the last pass.
    controllers: &'c mut ControllerClasses,
    owners: Owners<'a>,
    /// Per workload slot, its pods: sized up front, for the owners' workloads, and grown by one
    /// for each controller not in the view.
    workload_pods: Vec<PodCounts>,
}

impl<'a, 'c> Resolver<'a, 'c> {
    fn new(
        view: &'a ClusterView,
        pods: &'a PodCache,
        controllers: &'c mut ControllerClasses,
        owners: Owners<'a>,
    ) -> Self {
        let references = pods.controllers();
        controllers.fit(references.len());
        Self {
            view,
            references,
            controllers,
            workload_pods: vec![PodCounts::default(); owners.workload_slots.len()],
            owners,
        }
    }

    /// The class of the pods of the controller of `f` when nothing about the pod decides it, and
    /// the slot of the workload they count for: the class kept from the last pass where its owners
    /// are the same, otherwise worked out from the owners by UID (and kept for the next pass where
    /// it can be).
    fn resolve(&mut self, f: &PodFacts) -> (Class<'a>, u32) {
        let view = self.view;
        let owners = &mut self.owners;
        // Read from the cache's copy of the reference its pods share, not from the pod.
        let reference = &self.references[f.controller as usize];
        let kept = owners
            .one_owner_per_uid
            .then(|| self.controllers.get(f.controller, reference, &view.owners))
            .flatten();
        if let Some((class, owner)) = kept {
            return (class, owners.owner_counts[owner as usize]);
        }
        let controller = &**reference;
        let lookups = owners
            .lookups
            .get_or_insert_with(|| Lookups::new(view, &owners.owner_counts));
        let entry = lookups.owner(controller);
        let class = classify::controller_class(controller, f.watched, entry.as_ref(), lookups);
        if let Some(e) = entry.filter(|e| f.watched && e.owner.exists && owners.one_owner_per_uid) {
            // The ReplicaSet's controller, which its pods' class may depend on.
            let top = e
                .owner
                .controller
                .as_ref()
                .and_then(|top| lookups.owner(top))
                .map(|top| top.position);
            self.controllers.keep(
                f.controller,
                reference,
                class,
                e.position,
                top,
                &view.owners,
            );
        }
        // A controller that is not in the view counts for itself, by its whole reference.
        let counts = match entry {
            Some(e) => e.counts,
            None => self.slot_of_missing(controller),
        };
        (class, counts)
    }

    /// The workload slot of a controller that is not in the view, which counts for itself, by its
    /// whole reference: a new slot (with no pods counted yet) when it is the first of its key.
    fn slot_of_missing(&mut self, controller: &'a ControllerRef) -> u32 {
        let workload_slots = &mut self.owners.workload_slots;
        let next = slot_of(workload_slots.len());
        let slot = *workload_slots.entry(controller.key()).or_insert(next);
        if slot as usize == self.workload_pods.len() {
            self.workload_pods.push(PodCounts::default());
        }
        slot
    }
}

/// The one walk over the pods' facts, front to back, without reading a pod that did not change:
/// each classified, counted for its workload, and placed on its node. What it produces is sized up
/// front: growing a large fleet's vectors costs copies.
struct Walk<'a, 'w, 'c> {
    /// Held by reference, as `resolver` is: a pointer into the walk handed to a call it does not
    /// inline (recording a pod seen, working out a class) would keep the walk's own vectors out of
    /// registers, a cost on every pod.
    in_flight: &'w mut InFlight<'a>,
    /// Whether the view has budgets.
    budgets: bool,
    now: DateTime<Utc>,
    /// Per node slot, whether its pods must still move (`node_state::still_to_drain`): decided
    /// once per node.
    to_drain: Vec<bool>,
    rollouts: Rollouts<'a>,
    /// Works out a controller's class when a pod first refers to it; holds the workloads' pods.
    resolver: &'w mut Resolver<'a, 'c>,
    /// Per controller reference (by the slot of the copy its pods share, as the controller's
    /// conversion makes them share), the class its pods get when nothing about the pod decides it,
    /// and the slot of the workload they count for: worked out once per controller, not once per
    /// pod. Unshared copies (as tests build them) are worked out once each, with the same result.
    by_controller: Vec<Option<(Class<'a>, u32)>>,
    /// Per node slot, the classes of its pods, what they reserve and what those that need a place
    /// elsewhere once evicted reserve; and what the pods waiting to be scheduled will reserve.
    node_classes: Vec<NodeClasses>,
    node_used: Vec<Resources>,
    node_moving: Vec<Resources>,
    pending: Resources,
    /// The index's `next_available`.
    next_available: Option<DateTime<Utc>>,
    /// Per pod (by its position in the view), which budgets cover it: what deciding a draining
    /// node's pods asks of every one of them, answered here without reading the pod. Empty
    /// without budgets.
    covered: Vec<Covered>,
}

impl<'a, 'w, 'c> Walk<'a, 'w, 'c> {
    fn new(
        view: &'a ClusterView,
        nodes: &BTreeMap<&'a str, &'a NodeView>,
        in_flight: &'w mut InFlight<'a>,
        resolver: &'w mut Resolver<'a, 'c>,
        budgets: bool,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            in_flight,
            budgets,
            now,
            to_drain: nodes
                .values()
                .map(|n| crate::objects::node_state::still_to_drain(n))
                .collect(),
            rollouts: Rollouts::new(view),
            by_controller: vec![None; resolver.references.len()],
            resolver,
            node_classes: vec![NodeClasses::default(); nodes.len()],
            node_used: vec![Resources::default(); nodes.len()],
            node_moving: vec![Resources::default(); nodes.len()],
            pending: Resources::default(),
            next_available: None,
            covered: if budgets {
                vec![Covered::UNKNOWN; view.pods.len()]
            } else {
                Vec::new()
            },
        }
    }

    /// The pod at `position`, with its facts `f`: classified (through its controller's class,
    /// worked out once), placed on its node and counted for its workload.
    #[inline]
    fn pod(&mut self, position: usize, f: &PodFacts, pod: &'a PodView) {
        let going = self.in_flight.going(f, pod);
        let controlled = self.controlled(f);
        let class = f.seed.class(going, || {
            controlled
                .expect("a pod whose seed needs its controller has one")
                .0
        });
        self.place(position, f, class);
        if let Some((_, counts)) = controlled {
            self.count(counts, f, pod, class, going);
        }
    }

    /// The class of the pods of the controller of `f` when nothing about the pod decides it, and
    /// the slot of the workload they count for (`None`: a pod without a controller), worked out
    /// when a pod first refers to it.
    #[inline]
    fn controlled(&mut self, f: &PodFacts) -> Option<(Class<'a>, u32)> {
        (f.controller != u32::MAX).then(|| {
            let known = &mut self.by_controller[f.controller as usize];
            *known.get_or_insert_with(|| self.resolver.resolve(f))
        })
    }

    /// Adds the pod at `position` to what its node's pods reserve and to its node's classes (a pod
    /// bound to no node to what the pods waiting to be scheduled will reserve), and notes whether
    /// more than one budget covers it.
    #[inline]
    fn place(&mut self, position: usize, f: &PodFacts, class: Class<'a>) {
        let slot = f.node;
        if let Some(used) = self.node_used.get_mut(slot as usize) {
            if !f.finished {
                *used += f.requests.resources();
            }
            if matches!(class, Class::Owned(_) | Class::Other(_) | Class::Job(_)) {
                self.node_moving[slot as usize] += f.requests.resources();
            }
        } else if f.node_name == 0 && !f.finished && !f.terminating {
            self.pending += f.requests.resources();
        }
        if self.budgets {
            self.covered[position] = f.covered;
        }
        if let Some(on_node) = self.node_classes.get_mut(slot as usize) {
            on_node.holding += u32::from(class.holds_node());
            match class {
                Class::Owned(_) | Class::Other(_) => {
                    on_node.workload += 1;
                    on_node.pinnable += u32::from(f.pinnable);
                    on_node.multi_covered += u32::from(self.budgets && f.covered.several());
                }
                Class::OptedOut(_) | Class::Job(_) | Class::Unmanaged(_) => {
                    on_node.judged_by_policy += 1
                }
                Class::Ignored(Ignored::Terminating) => on_node.terminating += 1,
                Class::Ignored(_) | Class::Finished => {}
            }
        }
    }

    /// Counts the pod for the workload in slot `counts`: the progress of its rollout, whether it is
    /// still to move, and, if not finished, whether it is going, not Ready, available or warming
    /// up.
    #[inline]
    fn count(&mut self, counts: u32, f: &PodFacts, pod: &PodView, class: Class<'a>, going: bool) {
        let counts = &mut self.resolver.workload_pods[counts as usize];
        let newest = &self.rollouts.newest;
        if !newest.is_empty()
            && newest.contains(self.resolver.references[f.controller as usize].uid.as_str())
        {
            let readied = pod.ready_changed.filter(|_| f.ready);
            let progress = pod.created.max(readied);
            counts.rollout_progress = counts.rollout_progress.max(progress);
        }
        let slot = f.node;
        if slot != u32::MAX
            && self.to_drain[slot as usize]
            && matches!(class, Class::Owned(_) | Class::Other(_))
        {
            counts.to_move += 1;
        }
        if !f.finished {
            counts.seen += 1;
            // A pod terminating is gone for its workload, as the disruption controller counts it
            // (its controller replaces it at once); only k8sm's own evictions not yet shown are
            // still going.
            if going {
                counts.going += 1;
            } else if !f.ready && !f.terminating {
                if let Some(since) = pod.ready_changed.or(pod.created) {
                    let known = counts.not_ready_since.get_or_insert(since);
                    *known = (*known).min(since);
                }
            } else if f.ready && !f.terminating {
                // Where its workload sets minReadySeconds, a Ready pod counts once available.
                let available_at = match class {
                    Class::Owned(w) | Class::Other(w) => w.available_at(pod),
                    _ => Some(None),
                };
                match available_at {
                    Some(Some(at)) if at > self.now => {
                        counts.warming += 1;
                        self.next_available = Some(self.next_available.map_or(at, |n| n.min(at)));
                    }
                    Some(_) => counts.ready += 1,
                    None => counts.warming += 1,
                }
            }
        }
    }

    /// Marks stalled the rollouts whose newest ReplicaSet made no progress for longer than their
    /// deadline, and has the index's `next_available` wake the pass when the others would stall.
    fn stall_rollouts(&mut self) {
        for (deployment, deadline) in &self.rollouts.deadlines {
            let Some(&slot) = self
                .resolver
                .owners
                .workload_slots
                .get(deployment.uid.as_str())
            else {
                continue;
            };
            let counts = &mut self.resolver.workload_pods[slot as usize];
            if let Some(stall) = counts.rollout_progress.map(|p| p + *deadline) {
                if stall <= self.now {
                    counts.rollout_stalled = true;
                } else {
                    self.next_available = Some(self.next_available.map_or(stall, |n| n.min(stall)));
                }
            }
        }
    }
}
