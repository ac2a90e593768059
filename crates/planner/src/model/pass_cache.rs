//! What a pass works out once and reads many times, keyed by the identity of the view's shared
//! values: the pods of one node, namespace or controller share one copy of its name, labels and
//! reference (the controller's conversion makes them share), so a copy's address stands for its
//! value for as long as the view is borrowed. Only for values borrowed from the view (or static):
//! no one changes or frees them during a pass, so no address is reused.

use std::cell::RefCell;
use std::hash::Hash;
use std::sync::Arc;

use crate::model::collections::FastMap;

/// The address of a shared value: equal for every holder of one copy.
pub(crate) fn address<T: ?Sized>(value: &Arc<T>) -> usize {
    Arc::as_ptr(value).cast::<u8>().addr()
}

/// A text the view holds, by where it is: two live texts at the same place and of the same length
/// are the same text. Cheaper to hash and compare than the text, and it keeps the index free of the
/// view's lifetime.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) struct Text(usize, usize);

impl Text {
    pub(crate) fn of(text: &str) -> Self {
        Self(text.as_ptr().addr(), text.len())
    }
}

/// Answers remembered for the rest of a pass. Interior mutability: the index that holds a memo is
/// read-only during a pass, and an answer is the same whoever asks first. A pass runs on one
/// thread.
pub(crate) struct Memo<K, V> {
    table: RefCell<FastMap<K, V>>,
}

impl<K, V> Default for Memo<K, V> {
    fn default() -> Self {
        Self {
            table: RefCell::new(FastMap::default()),
        }
    }
}

impl<K: Hash + Eq, V: Clone> Memo<K, V> {
    /// The answer for `key`: remembered, or made by `make` now and remembered.
    pub(crate) fn get_or(&self, key: K, make: impl FnOnce() -> V) -> V {
        if let Some(value) = self.table.borrow().get(&key) {
            return value.clone();
        }
        let value = make();
        self.table.borrow_mut().insert(key, value.clone());
        value
    }
}
