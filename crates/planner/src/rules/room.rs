//! Admission paced by room (`--pace-by-room`, docs/design.md §5.2): a node is admitted while the
//! nodes k8sm will not drain can take what the nodes in progress still hold plus the node's own
//! pods, so that their replacements land once, on a node that stays, instead of on nodes still to
//! drain. Room is counted as the scheduler counts it; at least [`least_in_progress`] nodes are in
//! progress whatever the room. Why, and what it cost: docs/decisions/0002-land-once.md.

use crate::{NodeView, Resources, index::Index};

/// The room of one pass: what the nodes not to drain have free, and what the nodes in progress
/// hold. Counted as the scheduler counts it: the allocatable CPU, memory and pods of schedulable
/// Ready nodes, less what their pods reserve, less what the pods waiting to be scheduled will.
pub(crate) struct Room {
    /// Free on schedulable Ready nodes not to drain, less what pending pods will reserve.
    free: Resources,
    /// What the pods of the nodes in progress, and of those admitted in this pass, will need
    /// elsewhere.
    held: Resources,
    /// No node reports its allocatable resources: room is not known, and does not pace admission.
    unknown: bool,
}

impl Room {
    /// The room of `index`'s cluster, with `to_drain` the nodes this policy will drain (candidates
    /// and nodes in progress), by their positions among the index's nodes, and `in_progress` the
    /// nodes that hold a slot.
    pub(crate) fn new<'v>(
        index: &Index,
        to_drain: &[bool],
        in_progress: impl IntoIterator<Item = &'v NodeView>,
    ) -> Self {
        let mut free = Resources::default();
        let mut unknown = true;
        for (position, node) in index.nodes.values().enumerate() {
            let Some(allocatable) = node.allocatable else {
                continue;
            };
            unknown = false;
            if node.ready && !node.unschedulable && !to_drain.get(position).is_some_and(|&d| d) {
                free += allocatable.less(index.used_at(position));
            }
        }
        let held = in_progress
            .into_iter()
            .fold(Resources::default(), |held, n| held + index.moving_on(n));
        Self {
            free: free.less(index.pending),
            held,
            unknown,
        }
    }

    /// Whether the nodes not to drain can take what the nodes in progress hold and `moving`, the
    /// pods of a node to admit.
    pub(crate) fn admits(&self, moving: Resources) -> bool {
        self.unknown || self.free.covers(self.held + moving)
    }

    /// Counts a node admitted with `moving` to place elsewhere.
    pub(crate) fn hold(&mut self, moving: Resources) {
        self.held += moving;
    }

    /// What a node that waits for room is told.
    pub(crate) fn describe(&self, least: usize) -> String {
        format!(
            "waits for room: the nodes k8sm will not drain have {} free, and the nodes in progress will need {} \
             elsewhere; admitted when room frees up, or when fewer than {least} nodes are in progress (so that \
             replacements land on nodes that stay)",
            self.free, self.held
        )
    }
}

/// The nodes in progress that room never holds back (those waiting for an operator aside), so
/// that the upgrade starts, and the nodes' waves keep their pace where room is scarce. Half the
/// slots, rounded up: with fewer, the nodes' waves are paced by the room upgraded nodes bring back,
/// and the makespan grows. One only where the owners' chains set the pace by a margin: the longest
/// chain, in waves, is at least twice the nodes' waves left plus the waves of growing from one node
/// in progress to every slot (about log2 of the slots). There fewer nodes in progress cost nothing,
/// and each node admitted early sends replacements onto nodes still to drain. Figures:
/// docs/decisions/0002-land-once.md.
pub(crate) fn least_in_progress(slots: usize, longest_chain: u32, nodes_left: usize) -> usize {
    let slots = slots.max(1);
    let node_waves = nodes_left.div_ceil(slots);
    let growth = slots.ilog2() as usize;
    if longest_chain as usize >= 2 * (node_waves + growth) {
        1
    } else {
        slots.div_ceil(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_slots_unless_the_owners_chains_set_the_pace() {
        let half: Vec<usize> = [1, 2, 3, 4, 20, 200]
            .map(|slots| least_in_progress(slots, 0, 1000))
            .to_vec();
        assert_eq!(half, [1, 1, 2, 2, 10, 100]);
        // 20 nodes left in 4 slots: 5 waves of nodes and 2 of growth; a chain of 14 waves sets the
        // pace, 13 do not.
        assert_eq!(least_in_progress(4, 14, 20), 1);
        assert_eq!(least_in_progress(4, 13, 20), 2);
        // 1,000 nodes in 200 slots: 5 waves of nodes, but 7 of growth.
        assert_eq!(least_in_progress(200, 23, 1000), 100);
        assert_eq!(least_in_progress(200, 24, 1000), 1);
    }
}
