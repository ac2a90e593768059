//! Which live policies select each node.

use crate::{NodeView, index::Index};

/// The live policies that select each node, by the node's position in the index, in name order:
/// looked up for every node, never iterated. By position, not by name: a large fleet's pass looks
/// every node up several times, and a map by name hashed every name and held a list per node.
pub(crate) struct Claims<'i, 'v> {
    index: &'i Index<'v>,
    by_node: Vec<Claimed<'v>>,
}

/// The policies that select one node.
#[derive(Clone, Default)]
enum Claimed<'v> {
    #[default]
    None,
    /// One policy: the common case, held without a list.
    One([&'v str; 1]),
    Several(Vec<&'v str>),
}

impl<'i, 'v> Claims<'i, 'v> {
    /// No claims yet on the nodes of `index`.
    pub(crate) fn new(index: &'i Index<'v>) -> Self {
        Self {
            index,
            by_node: vec![Claimed::None; index.nodes.len()],
        }
    }

    /// Records that `policy` selects `node` (policies claim in name order).
    pub(crate) fn claim(&mut self, node: &NodeView, policy: &'v str) {
        let Some(claimed) = self.slot(node).and_then(|i| self.by_node.get_mut(i)) else {
            return;
        };
        *claimed = match std::mem::take(claimed) {
            Claimed::None => Claimed::One([policy]),
            Claimed::One([first]) => Claimed::Several(vec![first, policy]),
            Claimed::Several(mut all) => {
                all.push(policy);
                Claimed::Several(all)
            }
        };
    }

    /// The live policies that select `node`, in name order.
    pub(crate) fn of(&self, node: &NodeView) -> &[&'v str] {
        match self.slot(node).and_then(|i| self.by_node.get(i)) {
            Some(Claimed::One(one)) => one,
            Some(Claimed::Several(all)) => all,
            Some(Claimed::None) | None => &[],
        }
    }

    fn slot(&self, node: &NodeView) -> Option<usize> {
        self.index.node_position(node).map(|p| p as usize)
    }
}
