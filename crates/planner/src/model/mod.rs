//! The planner's input (the view of the cluster) and output (the plan), and the small types every
//! layer shares.

pub(crate) mod collections;
pub(crate) mod output;
pub(crate) mod pass_cache;
pub(crate) mod reason;
pub(crate) mod stamp;
pub(crate) mod view;
