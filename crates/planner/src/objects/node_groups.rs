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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use crate::{ClusterView, PodView, objects::pod_facts::PodCache};

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

    fn pod(id: usize, node: Option<u8>, ready: bool) -> Arc<PodView> {
        Arc::new(PodView {
            name: format!("pod-{id:04}").into(),
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
                    cache.groups().same_as_rebuilt(&cache.facts, names.len()),
                    "step {}",
                    step
                );
            }
        }
    }
}
