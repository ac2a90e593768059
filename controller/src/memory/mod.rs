//! What the controller keeps between passes, none of which it needs to be correct after a restart.

pub(crate) mod backoff;
pub(crate) mod in_flight;
pub(crate) mod reaction;
pub(crate) mod sizes;
pub(crate) mod sizes_store;
