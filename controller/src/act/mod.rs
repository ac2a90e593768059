//! Carrying out the plan: patches, evictions, deletions and kamikazes, within a bound on concurrent
//! calls.

pub(crate) mod call_limit;
pub(crate) mod execute;
pub(crate) mod kamikaze_client;
pub(crate) mod kamikaze_token;
pub(crate) mod node_patches;
