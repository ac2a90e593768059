//! Shared copies of what many pods have alike: the pods of one ReplicaSet carry the same labels and
//! controller reference, so their views share one copy of each instead of holding tens of thousands
//! of equal maps and strings (docs/decisions/0006-controller-memory.md). An interner holds weak
//! references only, keyed by the value's hash: a value no two pods share (a StatefulSet pod's
//! labels) costs a table entry, not a second copy. Dead entries go whenever the table has doubled
//! since it was last cleaned, so it holds at most about twice the values in use.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::{Arc, Mutex, Weak};

/// The fewest entries before the table is cleaned: cleaning a small table often gains nothing.
const MIN_CLEAN_AT: usize = 1024;

pub(crate) struct Interner<T: ?Sized> {
    hasher: RandomState,
    table: Mutex<Table<T>>,
}

struct Table<T: ?Sized> {
    /// By hash. Two different values with one 64-bit hash (as good as never) only share less: the
    /// later replaces the earlier here, and a value is shared only once found equal.
    values: HashMap<u64, Weak<T>>,
    /// Clean when the table reaches this many entries.
    clean_at: usize,
}

impl<T: Eq + Hash + ?Sized> Interner<T> {
    pub(crate) fn new() -> Self {
        Self {
            hasher: RandomState::new(),
            table: Mutex::new(Table {
                values: HashMap::new(),
                clean_at: MIN_CLEAN_AT,
            }),
        }
    }

    /// The shared copy of `value`: one that is still in use if there is one, else `value` itself (a
    /// map, or a copy of a `&str`), shared from now on.
    pub(crate) fn intern<V>(&self, value: V) -> Arc<T>
    where
        V: Borrow<T>,
        Arc<T>: From<V>,
    {
        let hash = self.hasher.hash_one(value.borrow());
        // A poisoned lock only means a panic elsewhere while holding it; the table is always
        // consistent.
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(shared) = table.values.get(&hash).and_then(Weak::upgrade)
            && *shared == *value.borrow()
        {
            return shared;
        }
        if table.values.len() >= table.clean_at {
            table.values.retain(|_, weak| weak.strong_count() > 0);
            table.clean_at = (table.values.len() * 2).max(MIN_CLEAN_AT);
        }
        let shared = Arc::from(value);
        table.values.insert(hash, Arc::downgrade(&shared));
        shared
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.table.lock().unwrap().values.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn equal_values_share_one_copy_while_it_is_in_use() {
        let interner = Interner::<str>::new();
        let a = interner.intern("web".to_owned());
        let b = interner.intern("web".to_owned());
        assert!(Arc::ptr_eq(&a, &b));
        let c = interner.intern("db".to_owned());
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(&*c, "db");
        drop((a, b));
        // Gone from every view: a new copy is made (equal, so nothing a reader can tell).
        assert_eq!(&*interner.intern("web"), "web");
    }

    #[test]
    fn the_table_never_grows_past_about_twice_the_values_in_use() {
        let interner = Interner::new();
        let kept: Vec<Arc<u32>> = (0..100).map(|i| interner.intern(i)).collect();
        // Many values that nothing keeps: the table is cleaned as it doubles.
        for i in 100..100_000u32 {
            drop(interner.intern(i));
        }
        assert!(interner.len() <= 2 * MIN_CLEAN_AT, "{}", interner.len());
        // The kept ones are still the shared copies.
        for (i, value) in kept.iter().enumerate() {
            assert!(Arc::ptr_eq(value, &interner.intern(i as u32)));
        }
    }

    /// Values alive now, counted by the values themselves.
    static LIVE: AtomicUsize = AtomicUsize::new(0);

    #[derive(PartialEq, Eq, Hash)]
    struct Counted(u32);

    impl Counted {
        fn new(n: u32) -> Self {
            LIVE.fetch_add(1, Ordering::SeqCst);
            Self(n)
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            LIVE.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A value nothing shares (a StatefulSet pod's labels) must not cost a second copy held by the
    /// table: once its views are gone, it is gone, cleaned or not.
    #[test]
    fn the_table_keeps_no_copy_of_a_value() {
        let interner = Interner::new();
        let views: Vec<Arc<Counted>> = (0..100).map(|n| interner.intern(Counted::new(n))).collect();
        assert_eq!(LIVE.load(Ordering::SeqCst), 100);
        // An equal value offered again is dropped for the shared one.
        let again = interner.intern(Counted::new(7));
        assert!(Arc::ptr_eq(&again, &views[7]));
        assert_eq!(LIVE.load(Ordering::SeqCst), 100);
        drop((views, again));
        assert_eq!(LIVE.load(Ordering::SeqCst), 0);
    }
}
