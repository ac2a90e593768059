//! What the controller sees: one watch per kind, stores trimmed to what the planner reads, and
//! their conversion to the planner's input.

pub(crate) mod cached_pod;
pub(crate) mod cluster_view;
pub(crate) mod deliveries;
pub(crate) mod feeds;
pub(crate) mod mirror;
pub(crate) mod pod_store;
pub(crate) mod stores;
pub(crate) mod trim;
pub(crate) mod watches;
