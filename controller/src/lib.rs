//! k8sm-controller as a library: the imperative shell around the planner (observe → plan → execute → report).
//!
//! Only the ends do I/O: [`stores`] observes the cluster, [`view`] turns it into the planner's input (through
//! [`k8sm_view`], the conversion the kubectl plugin shares), the planner decides, [`execute`] applies the actions,
//! and [`events`] and [`status`] report.
#![forbid(unsafe_code)]

mod args;
mod backoff;
pub mod cached_pod;
pub mod call_limit;
pub mod deliveries;
mod error;
mod event_series;
pub mod events;
pub mod execute;
pub mod feeds;
mod fence;
mod in_flight;
pub mod kamikaze_client;
pub mod kamikaze_token;
pub mod leader;
mod metrics;
pub mod mirror;
mod pace;
pub mod permissions;
pub mod planning;
pub mod pod_store;
mod reaction;
mod reconcile;
pub mod reports;
mod server;
mod sizes;
mod sizes_store;
pub mod status;
mod status_lists;
mod status_pace;
pub mod status_writer;
pub mod stores;
mod term_clock;
mod trim;
pub mod view;
pub mod watches;
mod write_params;

pub use args::{Args, LogFormat};
pub use error::Error;
pub use reconcile::run;
