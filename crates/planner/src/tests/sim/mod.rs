//! The SLA invariant and liveness over time: random sequences of plan → execute → the cluster
//! moves on, against a model cluster that knows its own truth (each workload's `d`, which pods it
//! has, what its budget allows). Every check reads the model, never the plan's account of itself,
//! so a planner that judges the wrong workload cannot vouch for itself. The model is in `world` and
//! `controllers`, a step in `run`, the checks in `checks`.

mod checks;
mod controllers;
mod properties;
mod report;
mod run;
mod scenarios;
mod world;
