//! What the index derives from each pod alone ([`PodFacts`]); `pod_cache.rs` keeps them across
//! passes for the pods that did not change.

use crate::{
    PodView, Resources,
    model::pass_cache,
    objects::classify::{self, Seed},
};

/// One pod, by its own fields: small and plain, so that a pass reads them front to back and copies
/// them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PodFacts {
    pub(crate) seed: Seed,
    /// `status.phase` is Succeeded or Failed.
    pub(crate) finished: bool,
    pub(crate) terminating: bool,
    pub(crate) ready: bool,
    /// Its spec may pin it to its node ([`PodView::pins`]): whether it does depends on the node
    /// and volumes.
    pub(crate) pinnable: bool,
    /// The slot of its node among the nodes of [`PodCache::node_names`] (`u32::MAX`: unbound, or
    /// not in the view).
    pub(crate) node: u32,
    /// The slot of its controller reference among [`PodCache::controllers`] (`u32::MAX`: none):
    /// the pods of one controller share one copy of its reference, so a pass works out what
    /// follows from it once per slot, in a vector, without reading the pod nor hashing
    /// anything.
    pub(crate) controller: u32,
    /// The address of the pod's UID and of its node's name (0: none): the pods of one node share
    /// one copy, so a pass looks them up by address without reading the pod. Unique while the
    /// cache holds the pod.
    pub(crate) uid: usize,
    pub(crate) node_name: usize,
    /// The address of its labels: the pods of one controller share one copy, so the budgets
    /// covering a pod are found by it and its namespace's without reading the pod (see
    /// [`OrderKey::namespace`]).
    pub(crate) labels: usize,
    pub(crate) order: OrderKey,
    /// What the scheduler reserves for it.
    pub(crate) requests: Requested,
}

/// Which of the kept answers lists the budgets covering a pod (its id among
/// `budgets::Cover::answer`'s), and whether that list holds more than one: deciding a pod reads
/// its budgets by the id, without reading the pod nor hashing its labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Covered(u32);

impl Covered {
    /// Not worked out since the pod or the budgets changed.
    pub(crate) const UNKNOWN: Self = Self(u32::MAX);
    /// The bit that says more than one budget covers the pod: the Eviction API refuses to evict it.
    const SEVERAL: u32 = 1 << 31;

    /// The answer `id` (below 2^31 - 1), listing `several` budgets or not.
    pub(crate) fn new(id: u32, several: bool) -> Self {
        assert!(id < Self::SEVERAL - 1, "fewer than 2^31 - 1 answers kept");
        Self(id | if several { Self::SEVERAL } else { 0 })
    }

    /// The answer's id; `None` where not worked out.
    pub(crate) fn answer(self) -> Option<u32> {
        (self != Self::UNKNOWN).then_some(self.0 & !Self::SEVERAL)
    }

    /// More than one budget covers the pod (false where not worked out).
    pub(crate) fn several(self) -> bool {
        self != Self::UNKNOWN && self.0 & Self::SEVERAL != 0
    }
}

/// A pod's requests, compact: a pass sums every pod's (millicores and KiB, rounded up; 4,000 cores
/// and 4 TiB at most per pod).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Requested {
    cpu_millis: u32,
    memory_kib: u32,
}

impl Requested {
    fn of(requests: Resources) -> Self {
        Self {
            cpu_millis: u32::try_from(requests.cpu_millis).unwrap_or(u32::MAX),
            memory_kib: u32::try_from(requests.memory_bytes.div_ceil(1024)).unwrap_or(u32::MAX),
        }
    }

    /// As [`Resources`], one pod.
    pub(crate) fn resources(self) -> Resources {
        Resources {
            cpu_millis: u64::from(self.cpu_millis),
            memory_bytes: u64::from(self.memory_kib) << 10,
            pods: 1,
        }
    }
}

/// Enough of a pod's namespace and name to order most pods of a node without reading them (see
/// [`OrderKey::cmp`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct OrderKey {
    /// The address of the pod's namespace: the pods of a namespace share one copy.
    namespace: usize,
    /// The first eight bytes of its name, big-endian (so that the integers order as the bytes do);
    /// 0 for a shorter name (or one of eight NUL bytes, which no Kubernetes name is): then the
    /// names must be read.
    name_head: u64,
}

impl OrderKey {
    /// The address of the pod's namespace.
    pub(crate) fn namespace(&self) -> usize {
        self.namespace
    }

    fn of(pod: &PodView) -> Self {
        Self {
            namespace: pass_cache::address(&pod.namespace),
            name_head: pod
                .name
                .as_bytes()
                .first_chunk::<8>()
                .map_or(0, |head| u64::from_be_bytes(*head)),
        }
    }

    /// How the namespaces and names of the two pods compare, when the keys tell: both in one copy
    /// of a namespace, and names that differ in their first eight bytes. `None`: the pods must
    /// be read.
    pub(crate) fn cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        let (a, b) = (self.name_head, other.name_head);
        (a != 0 && b != 0 && a != b && self.namespace == other.namespace).then(|| a.cmp(&b))
    }
}

impl PodFacts {
    pub(crate) fn of(pod: &PodView) -> Self {
        Self {
            seed: classify::seed(pod),
            finished: pod.phase.is_finished(),
            terminating: pod.terminating,
            ready: pod.ready,
            pinnable: pod.pins.is_some(),
            node: u32::MAX,
            controller: u32::MAX,
            uid: pass_cache::address(&pod.uid),
            node_name: pod.node_name.as_ref().map_or(0, pass_cache::address),
            labels: pass_cache::address(&pod.labels),
            order: OrderKey::of(pod),
            requests: Requested::of(pod.requests),
        }
    }
}

/// What classifying a pod reads of its facts (but for its UID, read only while evictions are in
/// flight), and whether it is Ready, kept in the order of the pods grouped by node: a pass reads
/// the pods of a node together, whose facts are scattered over the view's order (a cache miss
/// each), and whose views more (readiness is what deciding and judging a node's pods read most of
/// them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClassKey {
    pub(crate) seed: Seed,
    /// See [`PodFacts::controller`].
    pub(crate) controller: u32,
    pub(crate) ready: bool,
    /// See [`PodFacts::pinnable`]: asked of every pod of a draining node, and on a line of its
    /// view that nothing else deciding it reads.
    pub(crate) pinnable: bool,
}

impl ClassKey {
    pub(crate) fn of(f: &PodFacts) -> Self {
        Self {
            seed: f.seed,
            controller: f.controller,
            ready: f.ready,
            pinnable: f.pinnable,
        }
    }
}
