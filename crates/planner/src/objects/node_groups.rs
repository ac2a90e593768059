//! The pods' positions grouped by node, each group in pod order (by namespace, name and UID), kept
//! across passes and updated pod by pod: a step of a large fleet moves a few hundred of its
//! hundreds of thousands of pods, and grouping them all again took a walk over every pod's facts
//! in every pass, and ordering each draining node's pods a sort in every pass.

use std::sync::Arc;

use crate::PodView;
use crate::objects::pod_facts::{ClassKey, OrderKey, PodFacts};
use crate::objects::pod_order::pod_order;

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
    /// The slots whose group changed since it was last put in pod order (see [`Self::order`]).
    unordered: Vec<u32>,
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
        self.unordered = (0..nodes)
            .map(|slot| u32::try_from(slot).unwrap_or(u32::MAX))
            .collect();
    }

    /// The pod at `position`, grouped under `before` (`u32::MAX`: none), now has the facts `f`:
    /// updated where it stands, or moved to the group of its new node.
    pub(crate) fn update(&mut self, position: u32, before: u32, f: &PodFacts) {
        if before == f.node {
            if let Some(at) = self.find(before, position) {
                self.groups[before as usize][at] = Member::of(position, f);
                // Another pod may have taken the position.
                self.unordered.push(before);
            }
            return;
        }
        self.remove(position, before);
        if let Some(group) = self.groups.get_mut(f.node as usize) {
            group.push(Member::of(position, f));
            self.unordered.push(f.node);
        }
    }

    /// The pod at `position`, grouped under `node`, is gone (the others keep their order).
    pub(crate) fn remove(&mut self, position: u32, node: u32) {
        if let Some(at) = self.find(node, position) {
            self.groups[node as usize].remove(at);
        }
    }

    fn find(&self, node: u32, position: u32) -> Option<usize> {
        let group = self.groups.get(node as usize)?;
        group.iter().position(|m| m.position == position)
    }

    /// Puts the groups that changed in pod order, `pods` being the pods at the members' positions:
    /// by the order keys where they tell, which reads no pod (the pods of a node are scattered
    /// over the heap, a cache miss each, and their names more), and by position between two
    /// versions of one pod.
    pub(crate) fn order(&mut self, pods: &[Option<Arc<PodView>>]) {
        self.unordered.sort_unstable();
        self.unordered.dedup();
        let pod = |m: &Member| pods[m.position as usize].as_deref().expect("aligned");
        for &slot in &self.unordered {
            if let Some(group) = self.groups.get_mut(slot as usize) {
                group.sort_unstable_by(|a, b| {
                    a.order
                        .cmp(&b.order)
                        .unwrap_or_else(|| pod_order(pod(a), pod(b)))
                        .then(a.position.cmp(&b.position))
                });
            }
        }
        self.unordered.clear();
    }

    /// The pods of the node in `slot`, in pod order.
    pub(crate) fn on(&self, slot: usize) -> &[Member] {
        self.groups.get(slot).map_or(&[], Vec::as_slice)
    }

    /// Whether these are the groups of `facts` over `nodes` slots, as [`Self::rebuild`] and
    /// [`Self::order`] make them.
    #[cfg(test)]
    pub(crate) fn same_as_rebuilt(
        &self,
        facts: &[PodFacts],
        nodes: usize,
        pods: &[Option<Arc<PodView>>],
    ) -> bool {
        let mut fresh = Self::default();
        fresh.rebuild(facts, nodes);
        fresh.order(pods);
        self.groups == fresh.groups
    }
}
