//! k8sm-controller: the imperative shell around the planner. Each pass observes the cluster
//! (`observe`), asks the planner what to do, acts on it (`act`) and reports (`report`), as the
//! leader (`leadership`); what it keeps between passes is in `memory`, and the loop itself in
//! `reconcile`.
#![forbid(unsafe_code)]

mod act;
mod error;
mod leadership;
mod memory;
mod observe;
mod reconcile;
mod report;
mod startup;

pub use act::call_limit::INITIAL as INITIAL_CALL_CONCURRENCY;
pub use error::Error;
pub use observe::cached_pod::CachedPod;
pub use observe::feeds::Feeds;
pub use observe::pod_store::pod_store;
pub use observe::stores::Stores;
pub use reconcile::planning::Planning;
pub use report::status::build as build_status;
pub use startup::allocator;
pub use startup::args::{Args, LogFormat};
pub use startup::process::run;
