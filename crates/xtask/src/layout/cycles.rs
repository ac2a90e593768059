//! Import cycles: the strongly connected components of a crate's file graph (Tarjan's algorithm),
//! each with more than one file.

use std::collections::BTreeMap;

/// The components of the graph on `nodes` nodes with more than one node, each sorted, in order of
/// their first node.
pub fn cycles<E>(nodes: usize, edges: &BTreeMap<(usize, usize), E>) -> Vec<Vec<usize>> {
    let mut successors = vec![Vec::new(); nodes];
    for &(from, to) in edges.keys() {
        successors[from].push(to);
    }
    let mut tarjan = Tarjan {
        successors,
        index: vec![None; nodes],
        low: vec![0; nodes],
        on_stack: vec![false; nodes],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for node in 0..nodes {
        if tarjan.index[node].is_none() {
            tarjan.connect(node);
        }
    }
    let mut cycles: Vec<Vec<usize>> = tarjan
        .components
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|mut c| {
            c.sort_unstable();
            c
        })
        .collect();
    cycles.sort();
    cycles
}

struct Tarjan {
    successors: Vec<Vec<usize>>,
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    next: usize,
    components: Vec<Vec<usize>>,
}

impl Tarjan {
    // Recursive: a crate has hundreds of files, not the hundreds of thousands that would exhaust
    // the stack.
    fn connect(&mut self, node: usize) {
        self.index[node] = Some(self.next);
        self.low[node] = self.next;
        self.next += 1;
        self.stack.push(node);
        self.on_stack[node] = true;
        for i in 0..self.successors[node].len() {
            let next = self.successors[node][i];
            match self.index[next] {
                None => {
                    self.connect(next);
                    self.low[node] = self.low[node].min(self.low[next]);
                }
                Some(index) if self.on_stack[next] => self.low[node] = self.low[node].min(index),
                Some(_) => {}
            }
        }
        if Some(self.low[node]) == self.index[node] {
            let mut component = Vec::new();
            while let Some(top) = self.stack.pop() {
                self.on_stack[top] = false;
                component.push(top);
                if top == node {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(usize, usize)]) -> BTreeMap<(usize, usize), ()> {
        edges.iter().map(|&e| (e, ())).collect()
    }

    #[test]
    fn finds_each_component_with_more_than_one_node() {
        // 1 → 2 → 3 → 1 and 4 ⇄ 5, joined by 3 → 4; 0 → 1 and 5 → 6 are on no cycle.
        let edges = graph(&[
            (0, 1),
            (1, 2),
            (2, 3),
            (3, 1),
            (3, 4),
            (4, 5),
            (5, 4),
            (5, 6),
        ]);
        assert_eq!(cycles(7, &edges), vec![vec![1, 2, 3], vec![4, 5]]);
    }

    #[test]
    fn a_chain_has_no_cycle() {
        let edges = graph(&[(0, 1), (1, 2), (0, 2)]);
        assert!(cycles(3, &edges).is_empty());
    }
}
