//! What the operator sees: the policies' status, Events, the upgrade run records and metrics.

pub(crate) mod event_series;
pub(crate) mod events;
pub(crate) mod metrics;
pub(crate) mod policy_gauges;
pub(crate) mod run_records;
pub(crate) mod status;
pub(crate) mod status_interval;
pub(crate) mod status_lists;
pub(crate) mod status_writer;
