//! Property tests over random clusters shaped like real ones (see `generate::arb_world`): the SLA
//! of one plan, controllers of kinds k8sm does not know, unmanaged pods, budgets, determinism and
//! pause. Every oracle is computed from what the generator decided ([`truth::Truth`]), never from
//! the plan's own account of an eviction: a planner that judges a pod against the wrong workload
//! reports consistently wrong numbers, and an oracle that read them would agree with it.

mod build;
mod checks;
mod draw;
mod generate;
mod incremental;
mod properties;
mod truth;
