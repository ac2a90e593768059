//! Which budgets cover a pod, worked out once per pass for each shared copy of a namespace and a label set: the
//! pods of one controller share both (the controller's conversion makes them share), so a pass that asks for the
//! budgets of every pod of every queued node matches selectors once per controller, not once per pod and look.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use crate::{PodView, index::FastMap};

/// The budgets covering the pods that share a namespace and labels, by the addresses of those shared copies.
#[derive(Default)]
pub(crate) struct CoverMemo {
    /// Interior mutability: the index is read-only during a pass, and this only remembers answers it would give
    /// anyway. A pass runs on one thread.
    table: RefCell<FastMap<(usize, usize), Covered>>,
}

struct Covered {
    /// Held so that the addresses in the key stay unique while the entry lives: a pod built for one look and then
    /// dropped cannot leave its address to another pod with other labels.
    _namespace: Arc<str>,
    _labels: Arc<BTreeMap<String, String>>,
    /// Positions of the covering budgets, ascending.
    budgets: Rc<[u32]>,
}

impl CoverMemo {
    /// The budgets covering `pod`: remembered, or found by `search` (in any order) and remembered.
    pub(crate) fn get_or(&self, pod: &PodView, search: impl FnOnce() -> Vec<u32>) -> Rc<[u32]> {
        let key = (address(&pod.namespace), address(&pod.labels));
        if let Some(covered) = self.table.borrow().get(&key) {
            return Rc::clone(&covered.budgets);
        }
        let mut budgets = search();
        budgets.sort_unstable();
        let budgets: Rc<[u32]> = budgets.into();
        self.table.borrow_mut().insert(
            key,
            Covered {
                _namespace: Arc::clone(&pod.namespace),
                _labels: Arc::clone(&pod.labels),
                budgets: Rc::clone(&budgets),
            },
        );
        budgets
    }
}

/// The address of a shared value: equal for every holder of one copy, unique among the copies alive.
pub(crate) fn address<T: ?Sized>(value: &Arc<T>) -> usize {
    Arc::as_ptr(value).cast::<u8>().addr()
}
