//! The hash maps and sets of a pass.

use std::collections::{HashMap, HashSet};

/// The hash maps and sets of a pass: lookups by UID or name, rebuilt every pass and never iterated
/// where order matters, so a fast fixed-seed hasher (no DoS concern: the keys come from the
/// apiserver, and a pass is short-lived).
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;
pub(crate) type FastSet<T> = HashSet<T, foldhash::fast::FixedState>;
