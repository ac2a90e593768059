//! The view, indexed once per pass: the pods classified, counted per workload and grouped per node.

pub(crate) mod shared_output;
pub(crate) mod tally;
pub(crate) mod workload_slots;

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::{
    ClusterView, ControllerRef, NodeView, OwnerView, PodView, Resources,
    index::shared_output::SharedOutput,
    index::tally::{Context, Controlled, Counted, KeptTally, Sums},
    index::workload_slots::WorkloadSlots,
    model::collections::{FastMap, FastSet},
    objects::budgets::{Cover, KeptBudgets, Pdb},
    objects::classify::{self, Class},
    objects::controller_classes::ControllerClasses,
    objects::lookups::{Lookups, slot_of},
    objects::node_groups::{Member, NodeGroups},
    objects::node_state,
    objects::pod_cache::PodCache,
    objects::pod_facts::{ClassKey, Covered},
    objects::workload::{self, CountsFor},
};

pub(crate) use tally::{NodeClasses, PodCounts};

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

    /// Whether `controller` is the newest ReplicaSet of a Deployment whose controller is replacing
    /// pods.
    fn is_newest(&self, controller: &ControllerRef) -> bool {
        !self.newest.is_empty() && self.newest.contains(controller.uid.as_str())
    }
}

/// The view, indexed. Every collection iterates in a fixed order, whatever the order of the view's
/// vectors.
///
/// The pods are grouped by node as positions in the view's pod list, their counts kept across
/// passes ([`tally`]), and each one's class worked out when asked for: a large fleet's pods are
/// mostly on nodes that only queue for a slot, whose pods are only counted, so a pass must not
/// spend more than a few lookups on each pod.
pub(crate) struct Index<'a> {
    /// Nodes by name.
    pub(crate) nodes: BTreeMap<&'a str, &'a NodeView>,
    /// Slot of each node name in `groups`.
    node_slots: FastMap<&'a str, u32>,
    /// The view's nodes, and the slot of each (in the view's order; `u32::MAX` for a node whose
    /// name another holds): a node of the view is found by its place in it, with no hashing (a
    /// pass asks for each node's slot about ten times).
    view_nodes: &'a [NodeView],
    view_slots: Vec<u32>,
    /// Per node slot, whether the node opted out ([`node_state::node_opted_out`]): read once per
    /// pass, as a label lookup costs more than the rest of what a pass reads of a node's keys.
    opted_out: Vec<bool>,
    /// Pods of each node slot, as positions in `pods` with their class and order keys, in pod
    /// order.
    groups: &'a NodeGroups,
    /// Per node and per workload slot, what its pods count (kept across passes).
    sums: &'a Sums,
    /// What the pods waiting to be scheduled (bound to no node, not finished nor terminating) will
    /// reserve.
    pub(crate) pending: Resources,
    /// What every schedulable Ready node has free (`None`: no node reports its allocatable),
    /// worked out once per pass, when a broken pod first asks ([`Self::free_beside`]).
    schedulable_free: OnceCell<Option<Resources>>,
    /// The view's pods (a pod's class is worked out from its key in the node groups when asked
    /// for: a large fleet's pass reads few of them, and a vector of every pod's class would
    /// cost more to write than those reads).
    pods: &'a [Arc<PodView>],
    /// Per position, which budgets cover its pod (see `PodCache::covered`).
    covered: &'a [Covered],
    /// Per controller slot (a fact's `controller`), the class its pods get when nothing about the
    /// pod decides it, and the slot of the workload they count for (`None`: no pod of the view
    /// refers to it).
    by_controller: Vec<Option<(Class<'a>, u32)>>,
    /// The positions of the pods with an eviction in flight, sorted (a few; not a set of every
    /// pod): found without reading a pod's facts.
    in_flight_at: Vec<u32>,
    /// Per UID of the workload the pods count for (docs/design.md §2: a Deployment for the pods of
    /// its ReplicaSets), its slot in the sums' `workload_pods` (looked up, never iterated where
    /// order matters).
    workload_slots: WorkloadSlots<'a>,
    /// What the pods were classified with (classifying again is for tests: the index holds every
    /// pod's class).
    #[cfg(test)]
    pub(crate) lookups: Lookups<'a>,
    /// Budgets, sorted by namespace and name.
    pub(crate) pdbs: Vec<Pdb<'a>>,
    /// Which budgets cover which pods.
    cover: Cover<'a>,
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
    /// in `controllers` (those whose owners did not change are reused), its budgets' selectors
    /// kept in `budgets` (reused unless one changed) and the counts of its pods kept in `tally`
    /// (counted again only for the pods whose count changed).
    pub(crate) fn new(
        view: &'a ClusterView,
        pods: &'a mut PodCache,
        controllers: &mut ControllerClasses,
        budgets: &'a mut KeptBudgets,
        tally: &'a mut KeptTally,
        now: DateTime<Utc>,
    ) -> Self {
        let nodes: BTreeMap<&str, &NodeView> =
            view.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        let node_slots = node_slots(&nodes);
        let mut view_slots = vec![u32::MAX; view.nodes.len()];
        for (slot, node) in nodes.values().enumerate() {
            if let Some(place) = place_in(&view.nodes, node) {
                view_slots[place] = slot_of(slot);
            }
        }
        let opted_out: Vec<bool> = nodes
            .values()
            .map(|n| node_state::node_opted_out(n))
            .collect();
        align_facts(pods, view, &nodes);
        let (pdbs, cover, answers_dropped) = index_budgets(view, budgets, pods);
        let in_flight = InFlight::new(view, pods);
        let pods: &'a PodCache = pods;
        let owners = Owners::new(view, controllers);
        let mut resolver = Resolver::new(view, pods, controllers, owners);
        let by_controller = resolver.resolve_all(tally.pods_per_controller(pods, now));
        let rollouts = Rollouts::new(view);
        let context = Context {
            now,
            budgets: !pdbs.is_empty(),
            to_drain: nodes
                .values()
                .zip(&opted_out)
                .map(|(n, &out)| node_state::still_to_drain(n, out))
                .collect(),
            controllers: by_controller
                .iter()
                .zip(resolver.references)
                .map(|(known, reference)| {
                    known.map(|(class, workload)| Controlled {
                        counted: Counted::of(class),
                        workload,
                        newest: rollouts.is_newest(reference),
                    })
                })
                .collect(),
            in_flight: in_flight.uids,
            in_flight_at: in_flight.positions.clone(),
        };
        let mut workload_slots = resolver.owners.slots;
        if !rollouts.deadlines.is_empty() {
            workload_slots.index_keys();
        }
        #[cfg(test)]
        let lookups = resolver
            .owners
            .lookups
            .unwrap_or_else(|| Lookups::new(view, workload_slots.owner_counts()));
        let sums = tally.update(
            pods,
            &view.pods,
            context,
            workload_slots.len(),
            answers_dropped,
        );
        let next_available = sums.stall_rollouts(
            rollouts
                .deadlines
                .iter()
                .filter_map(|(deployment, deadline)| {
                    Some((workload_slots.get(deployment.uid.as_str())?, *deadline))
                }),
            now,
        );
        let sums: &'a Sums = sums;
        Self {
            nodes,
            node_slots,
            view_nodes: &view.nodes,
            view_slots,
            opted_out,
            groups: pods.groups(),
            sums,
            pending: sums.pending,
            schedulable_free: OnceCell::new(),
            pods: &view.pods,
            covered: &pods.covered,
            by_controller,
            in_flight_gone: in_flight.gone,
            in_flight_at: in_flight.positions,
            workload_slots,
            #[cfg(test)]
            lookups,
            pdbs,
            cover,
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
    pub(crate) fn pods_on(
        &self,
        node: &NodeView,
    ) -> impl ExactSizeIterator<Item = OnNode<'a>> + '_ {
        self.group_of(node).iter().map(|m| {
            let (i, key) = (m.position as usize, &m.key);
            OnNode {
                pod: &self.pods[i],
                class: self.class_at(i, key),
                ready: key.ready,
                pinnable: key.pinnable,
                covered: if self.pdbs.is_empty() {
                    Covered::UNKNOWN
                } else {
                    self.covered[i]
                },
                counts_for: self
                    .controlled(key.controller)
                    .map_or(u32::MAX, |(_, slot)| slot),
            }
        })
    }

    /// What the pods bound to `node` reserve ([`Self::node_used`]).
    pub(crate) fn used_on(&self, node: &NodeView) -> Resources {
        self.node_slot(node)
            .map(|slot| self.used_at(slot))
            .unwrap_or_default()
    }

    /// What the pods bound to the node at `position` (see [`Self::node_position`]) reserve.
    pub(crate) fn used_at(&self, position: usize) -> Resources {
        self.sums
            .node_used
            .get(position)
            .copied()
            .unwrap_or_default()
    }

    /// What the schedulable Ready nodes but `node` have free, less what the pods waiting to be
    /// scheduled will reserve: where the replacements of `node`'s pods can land. `None` where
    /// no node reports its allocatable.
    pub(crate) fn free_beside(&self, node: &NodeView) -> Option<Resources> {
        let total = (*self.schedulable_free.get_or_init(|| {
            let mut known = false;
            let mut free = Resources::default();
            for view in self.nodes.values() {
                known |= view.allocatable.is_some();
                free += self.free_on(view);
            }
            known.then_some(free)
        }))?;
        let own = self
            .nodes
            .get(node.name.as_str())
            .map(|view| self.free_on(view));
        Some(total.less(own.unwrap_or_default()).less(self.pending))
    }

    /// What a schedulable Ready node has free (nothing for the others, and where it reports no
    /// allocatable).
    fn free_on(&self, view: &NodeView) -> Resources {
        match view.allocatable {
            Some(allocatable) if view.ready && !view.unschedulable => {
                allocatable.less(self.used_on(view))
            }
            _ => Resources::default(),
        }
    }

    /// What the pods of `node` that need a place elsewhere once evicted reserve
    /// ([`Self::node_moving`]).
    pub(crate) fn moving_on(&self, node: &NodeView) -> Resources {
        self.node_slot(node)
            .map(|slot| self.sums.node_moving[slot])
            .unwrap_or_default()
    }

    /// The classes of the pods bound to `node`.
    pub(crate) fn classes_on(&self, node: &NodeView) -> NodeClasses {
        self.node_slot(node)
            .map(|slot| self.sums.node_classes[slot])
            .unwrap_or_default()
    }

    /// The pods of `node`, with their keys.
    fn group_of(&self, node: &NodeView) -> &'a [Member] {
        match self.node_slot(node) {
            Some(slot) => self.groups.on(slot),
            None => &[],
        }
    }

    /// The slot of `node`: by its place in the view where it is one of the view's nodes, else by
    /// its name.
    fn node_slot(&self, node: &NodeView) -> Option<usize> {
        let by_place = place_in(self.view_nodes, node)
            .and_then(|place| self.view_slots.get(place))
            .filter(|&&slot| slot != u32::MAX);
        let found = match by_place {
            Some(&slot) => Some(slot as usize),
            None => self.node_slot_by_name(&node.name),
        };
        // Every test's pass checks the slot found by place against the slot of the name.
        #[cfg(test)]
        assert_eq!(found, self.node_slot_by_name(&node.name), "{}", node.name);
        found
    }

    /// The slot of the node named `node`.
    fn node_slot_by_name(&self, node: &str) -> Option<usize> {
        self.node_slots.get(node).map(|&slot| slot as usize)
    }

    /// Whether `node` opted out ([`node_state::node_opted_out`]).
    pub(crate) fn opted_out(&self, node: &NodeView) -> bool {
        match self.node_slot(node) {
            Some(slot) => self.opted_out[slot],
            None => node_state::node_opted_out(node),
        }
    }

    /// The position of `node` among the view's nodes in name order.
    pub(crate) fn node_position(&self, node: &NodeView) -> Option<u32> {
        self.node_slot(node)
            .map(|slot| u32::try_from(slot).unwrap_or(u32::MAX))
    }

    /// The position of the node named `node` (see [`Self::node_position`]).
    pub(crate) fn node_position_by_name(&self, node: &str) -> Option<u32> {
        self.node_slot_by_name(node)
            .map(|slot| u32::try_from(slot).unwrap_or(u32::MAX))
    }

    /// The class of the pod at position `i`, with the class key `key`.
    fn class_at(&self, i: usize, key: &ClassKey) -> Class<'a> {
        let going = !self.in_flight_at.is_empty()
            && self
                .in_flight_at
                .binary_search(&u32::try_from(i).unwrap_or(u32::MAX))
                .is_ok();
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

    /// The slot of the workload (see [`Self::workload_at`]) that each workload and
    /// other-controller pod bound to `node` counts for, in slot order. Kept across passes: reads no
    /// pod.
    pub(crate) fn workloads_on(&self, node: &NodeView) -> &'a [u32] {
        let kept = self
            .node_slot(node)
            .map_or(&[][..], |slot| self.sums.node_workloads[slot].as_slice());
        // Every test's pass checks the kept workloads against a walk over the node's pods.
        #[cfg(test)]
        {
            let mut walked: Vec<u32> = self
                .group_of(node)
                .iter()
                .filter(|m| {
                    self.class_at(m.position as usize, &m.key)
                        .workload()
                        .is_some()
                })
                .filter_map(|m| Some(self.controlled(m.key.controller)?.1))
                .collect();
            walked.sort_unstable();
            assert_eq!(
                kept,
                walked.as_slice(),
                "the workloads kept on {}",
                node.name
            );
        }
        kept
    }

    /// Per workload slot, the workload its pods count for (`None`: a slot no controller with
    /// pods counts for, or one whose pods are not workload pods).
    pub(crate) fn workloads(&self) -> Vec<Option<crate::objects::workload::Workload<'a>>> {
        let mut workloads = vec![None; self.workload_count()];
        for &(class, slot) in self.by_controller.iter().flatten() {
            if let Some(known) = workloads.get_mut(slot as usize)
                && known.is_none()
            {
                *known = class.workload();
            }
        }
        workloads
    }

    /// How many workload slots there are: workload slots are `0..workload_count()`.
    pub(crate) fn workload_count(&self) -> usize {
        self.sums.workload_pods.len()
    }

    /// The pods of the workload in `slot` (from [`Self::workloads_on`]), as the view shows them.
    pub(crate) fn workload_at(&self, slot: u32) -> PodCounts {
        self.sums
            .workload_pods
            .get(slot as usize)
            .copied()
            .unwrap_or_default()
    }

    /// The pods of `workload`, found by its slot `counts_for` (or by its UID where the slot is not
    /// known).
    pub(crate) fn workload_counts(
        &self,
        workload: workload::Workload,
        counts_for: u32,
    ) -> PodCounts {
        if (counts_for as usize) < self.workload_count() {
            let pods = self.workload_at(counts_for);
            // Every test's pass checks that the slot stands for the workload's UID.
            #[cfg(test)]
            assert_eq!(pods, self.workload_pods(workload.key()));
            pods
        } else {
            self.workload_pods(workload.key())
        }
    }

    /// The slot of the workload whose key (see [`crate::objects::workload::Workload::key`]) is
    /// `key`, if any.
    pub(crate) fn workload_slot(&self, key: &str) -> Option<u32> {
        self.workload_slots.get(key)
    }

    /// The pods of the workload `uid`, as the view shows them.
    pub(crate) fn workload_pods(&self, uid: &str) -> PodCounts {
        self.workload_slots
            .get(uid)
            .map(|slot| self.sums.workload_pods[slot as usize])
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

/// The place of `node` in `nodes`, if it is one of them (found by its address).
fn place_in(nodes: &[NodeView], node: &NodeView) -> Option<usize> {
    let place = std::ptr::from_ref(node)
        .addr()
        .wrapping_sub(nodes.as_ptr().addr())
        / size_of::<NodeView>();
    nodes
        .get(place)
        .filter(|&at| std::ptr::eq(at, node))
        .map(|_| place)
}

/// Each node name's slot in the index's `groups` (the nodes sorted by name).
fn node_slots<'a>(nodes: &BTreeMap<&'a str, &'a NodeView>) -> FastMap<&'a str, u32> {
    let mut node_slots: FastMap<&str, u32> =
        FastMap::with_capacity_and_hasher(nodes.len(), Default::default());
    for (slot, name) in nodes.keys().enumerate() {
        node_slots.insert(name, slot_of(slot));
    }
    node_slots
}

/// Brings the pods' facts in line with `view`, places them on the slots of `nodes` and groups them
/// by node.
fn align_facts(pods: &mut PodCache, view: &ClusterView, nodes: &BTreeMap<&str, &NodeView>) {
    pods.align(view);
    pods.place(nodes.keys().copied());
    pods.group_by_node();
}

/// The budgets, sorted by namespace and name, and which cover which pods; the facts of the pods
/// whose answer is not known are told whether more than one covers them. Also whether the
/// answers kept were dropped (every pod's is worked out again).
fn index_budgets<'a>(
    view: &'a ClusterView,
    budgets: &'a mut KeptBudgets,
    pods: &mut PodCache,
) -> (Vec<Pdb<'a>>, Cover<'a>, bool) {
    let (pdbs, cover, answers_dropped) = budgets.index(view);
    if !pdbs.is_empty() {
        pods.know_cover(answers_dropped, |pod| cover.covered(&pdbs, pod));
    }
    (pdbs, cover, answers_dropped)
}

/// The pods with an eviction in flight (a few; not a set of every pod).
struct InFlight<'a> {
    /// The addresses of their UIDs, as the pods' facts hold them.
    uids: FastSet<usize>,
    /// Their positions, sorted.
    positions: Vec<u32>,
    /// Per workload UID, the evictions in flight whose pod is not in the view: gone, and not
    /// replaced yet.
    gone: FastMap<&'a str, u32>,
}

impl<'a> InFlight<'a> {
    fn new(view: &'a ClusterView, pods: &mut PodCache) -> Self {
        let mut in_flight = Self {
            uids: FastSet::default(),
            positions: Vec::new(),
            gone: FastMap::default(),
        };
        if view.in_flight.is_empty() {
            return in_flight;
        }
        let found = pods.find_uids(view.in_flight.iter().map(|e| e.pod_uid.as_str()));
        for (eviction, found) in view.in_flight.iter().zip(found) {
            match found {
                Some((uid, position)) => {
                    in_flight.uids.insert(uid);
                    in_flight.positions.push(position);
                }
                None => {
                    if let Some(owner) = &eviction.owner_uid {
                        *in_flight.gone.entry(owner).or_default() += 1;
                    }
                }
            }
        }
        in_flight.positions.sort_unstable();
        in_flight.positions.dedup();
        in_flight
    }
}

/// The view's owners as the walk classifies controllers with them: the slot of the workload each
/// one's pods count for (what its pods are is worked out in the walk, when a pod first refers to
/// it), and the owners by UID where built.
struct Owners<'a> {
    /// The slot of the workload each owner's pods count for, which the walk extends with the
    /// controllers that are not in the view: the index's `workload_slots`.
    slots: WorkloadSlots<'a>,
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
            .clone()
            .unwrap_or_else(|| controllers.counts_for().to_vec());
        let slots = match (unchanged, controllers.slots()) {
            (Some(_), Some((owner_counts, owner_slots))) => {
                WorkloadSlots::kept(view, each, owner_counts.to_vec(), owner_slots)
            }
            _ => WorkloadSlots::number(view, each),
        };
        let (lookups, one_owner_per_uid) =
            owner_lookups(view, &slots, controllers, unchanged, counted_for);
        Self {
            slots,
            lookups,
            one_owner_per_uid,
        }
    }
}

/// The owners by UID if built now, and whether no two owners share a UID: as the last pass found if
/// the owners are its own (`unchanged`), otherwise found from lookups built at once and remembered
/// in `controllers` with what each owner's pods count for (`counted_for`) and the workload `slots`
/// they numbered.
fn owner_lookups<'a>(
    view: &'a ClusterView,
    slots: &WorkloadSlots<'a>,
    controllers: &mut ControllerClasses,
    unchanged: Option<bool>,
    counted_for: Option<Vec<CountsFor>>,
) -> (Option<Lookups<'a>>, bool) {
    match unchanged {
        Some(unique) => (None, unique),
        None => {
            let built = Lookups::new(view, slots.owner_counts());
            let unique = built.distinct_uids() == view.owners.len();
            controllers.remember_owners(
                &view.owners,
                unique,
                counted_for.unwrap_or_default(),
                slots.owners(),
            );
            (Some(built), unique)
        }
    }
}

/// What the class of a controller's pods is worked out from: the classes kept from the last pass,
/// and the view's owners.
struct Resolver<'a, 'c> {
    view: &'a ClusterView,
    /// The controller references, by slot.
    references: &'a [Arc<ControllerRef>],
    /// The classes kept from the last pass.
    controllers: &'c mut ControllerClasses,
    owners: Owners<'a>,
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
            owners,
        }
    }

    /// Per controller slot, the class of its pods when nothing about the pod decides it and the
    /// slot of the workload they count for, for the controllers with pods (`pods`, by slot):
    /// worked out once per controller, not once per pod, in slot order (which numbers the
    /// workloads of controllers not in the view).
    fn resolve_all(&mut self, pods: &[u32]) -> Vec<Option<(Class<'a>, u32)>> {
        (0..self.references.len())
            .map(|slot| {
                let has_pods = pods.get(slot).is_some_and(|&n| n > 0);
                has_pods.then(|| self.resolve(slot_of(slot)))
            })
            .collect()
    }

    /// The class of the pods of the controller in `slot` when nothing about the pod decides it,
    /// and the slot of the workload they count for: the class kept from the last pass where its
    /// owners are the same, otherwise worked out from the owners by UID (and kept for the next
    /// pass where it can be).
    fn resolve(&mut self, slot: u32) -> (Class<'a>, u32) {
        let view = self.view;
        let owners = &mut self.owners;
        // Read from the cache's copy of the reference its pods share, not from a pod.
        let reference = &self.references[slot as usize];
        let kept = owners
            .one_owner_per_uid
            .then(|| self.controllers.get(slot, reference, &view.owners))
            .flatten();
        if let Some((class, owner)) = kept {
            return (class, owners.slots.owner_counts()[owner as usize]);
        }
        let controller = &**reference;
        let watched = classify::is_watched(&controller.kind);
        let lookups = owners
            .lookups
            .get_or_insert_with(|| Lookups::new(view, owners.slots.owner_counts()));
        let entry = lookups.owner(controller);
        let class = classify::controller_class(controller, watched, entry.as_ref(), lookups);
        if let Some(e) = entry.filter(|e| watched && e.owner.exists && owners.one_owner_per_uid) {
            // The ReplicaSet's controller, which its pods' class may depend on.
            let top = e
                .owner
                .controller
                .as_ref()
                .and_then(|top| lookups.owner(top))
                .map(|top| top.position);
            self.controllers
                .keep(slot, reference, class, e.position, top, &view.owners);
        }
        // A controller that is not in the view counts for itself, by its whole reference.
        let counts = match entry {
            Some(e) => e.counts,
            None => self.slot_of_missing(controller),
        };
        (class, counts)
    }

    /// The workload slot of a controller that is not in the view, which counts for itself, by its
    /// whole reference: a new slot when it is the first of its key.
    fn slot_of_missing(&mut self, controller: &'a ControllerRef) -> u32 {
        self.owners.slots.of_missing(controller.key())
    }
}
