//! What each command shows, as pure models and their rendering: data from the cluster (or the
//! planner) in, a `String` out.

pub mod blocked;
#[cfg(test)]
mod fixtures;
pub mod fleet;
pub mod force;
#[cfg(test)]
mod hostile_tests;
pub mod owner;
pub mod plan;
pub mod report;
pub mod retry;
pub mod status;
