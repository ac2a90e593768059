//! k8sm-bench: k8sm against `kubectl drain` on the real local cluster (issues 6 and 15). `cargo
//! xtask bench` runs it.
//!
//! Pure parts (workload plan, timeline, statistics, request counting, report) are unit-tested; the
//! runs themselves produce figures for the report, never assertions.
#![forbid(unsafe_code)]

pub mod audit;
pub mod calibrate;
pub mod charts;
pub mod cli;
pub mod env;
#[cfg(test)]
mod fixtures;
pub mod fleet_on_cluster;
pub mod index;
pub mod landing;
pub mod machine;
pub mod mess;
pub mod model;
pub mod presets;
pub mod process;
pub mod recorder;
pub mod replay;
pub mod report;
pub mod requests;
pub mod results;
pub mod runs;
pub mod spread;
pub mod stats;
pub mod targets;
pub mod timeline;
pub mod units;
pub mod validate;
pub mod workload;
