//! The imperative shell of each subcommand: fetch, build the pure view, render, and (for the few
//! that change anything) act.

pub mod blocked;
pub mod executor_id;
pub mod force;
mod forcing;
pub mod plan;
pub mod policy;
pub mod report;
pub mod retry;
pub mod status;
pub mod watch;
