//! The pods' positions grouped by node, each group in the view's order, kept across passes and
//! updated pod by pod: a step of a large fleet moves a few hundred of its hundreds of thousands of
//! pods, and grouping them all again took a walk over every pod's facts in every pass.

use crate::objects::pod_facts::{ClassKey, OrderKey, PodFacts};

/// A pod on its node: its position among the facts, and the keys read from the group instead of
/// from the facts (a node's pods are scattered over the view's order; see [`ClassKey`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) position: u32,
    pub(crate) key: ClassKey,
    pub(crate) order: OrderKey,
}

impl Member {
    fn of(position: u32, f: &PodFacts) -> Self {
        Self {
            position,
            key: ClassKey::of(f),
            order: f.order,
        }
    }
}

/// Per node slot, its pods, by position.
#[derive(Default)]
pub(crate) struct NodeGroups {
    groups: Vec<Vec<Member>>,
}

impl NodeGroups {
    /// Groups `facts` over `nodes` slots from scratch, reusing the groups' memory.
    pub(crate) fn rebuild(&mut self, facts: &[PodFacts], nodes: usize) {
        self.groups.truncate(nodes);
        for group in &mut self.groups {
            group.clear();
        }
        self.groups.resize_with(nodes, Vec::new);
        for (i, f) in facts.iter().enumerate() {
            if let Some(group) = self.groups.get_mut(f.node as usize) {
                group.push(Member::of(u32::try_from(i).unwrap_or(u32::MAX), f));
            }
        }
    }

    /// The pod at `position`, grouped under `before` (`u32::MAX`: none), now has the facts `f`:
    /// updated where it stands, or moved to the group of its new node.
    pub(crate) fn update(&mut self, position: u32, before: u32, f: &PodFacts) {
        if before == f.node {
            if let Some(at) = self.find(before, position) {
                self.groups[before as usize][at] = Member::of(position, f);
            }
            return;
        }
        self.remove(position, before);
        if let Some(group) = self.groups.get_mut(f.node as usize) {
            let at = group.partition_point(|m| m.position < position);
            group.insert(at, Member::of(position, f));
        }
    }

    /// The pod at `position`, grouped under `node`, is gone.
    pub(crate) fn remove(&mut self, position: u32, node: u32) {
        if let Some(at) = self.find(node, position) {
            self.groups[node as usize].remove(at);
        }
    }

    fn find(&self, node: u32, position: u32) -> Option<usize> {
        let group = self.groups.get(node as usize)?;
        group.binary_search_by_key(&position, |m| m.position).ok()
    }

    /// The pods of the node in `slot`, in the view's order.
    pub(crate) fn on(&self, slot: usize) -> &[Member] {
        self.groups.get(slot).map_or(&[], Vec::as_slice)
    }

    /// Whether these are the groups of `facts` over `nodes` slots, as [`Self::rebuild`] makes them.
    #[cfg(test)]
    pub(crate) fn same_as_rebuilt(&self, facts: &[PodFacts], nodes: usize) -> bool {
        let mut fresh = Self::default();
        fresh.rebuild(facts, nodes);
        self.groups == fresh.groups
    }
}
