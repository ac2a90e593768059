//! k8sm-planner: the pure decision engine — (cluster view, now) → plan. No kube client, no I/O, no clock.
//!
//! The controller builds a [`ClusterView`] from its reflectors, calls [`plan`], executes [`Plan::actions`] in order,
//! emits an Event per action (reason [`Action::reason`], message [`Action::message`]) and writes the policies' status
//! from [`Plan::policies`] and [`Plan::nodes`]. The kubectl plugin's `plan` and `blocked` commands render the same
//! plan, so what the plugin predicts is what the controller does.
//!
//! All state lives in the cluster (DESIGN.md §3): planning again after the actions were applied never repeats one,
//! and a restarted controller re-derives everything from the nodes' annotations.
#![forbid(unsafe_code)]

mod admission;
mod budgets;
mod classify;
mod conditions;
mod deleted;
mod drain;
mod facts;
mod health;
mod index;
mod memo;
mod nodes;
mod output;
mod pass;
mod pin;
mod plan;
mod progress;
mod reason;
pub mod report;
mod resolved;
mod room;
mod selector;
mod shared;
mod surge;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod view;
mod window;
mod workload;

#[cfg(test)]
mod tests;

pub use classify::POD_ANNOTATIONS_READ;
pub use health::{OwnerHealth, Verdict, judge, needed, sla_floor};
pub use output::{
    Action, ActionKind, Blocker, Decision, EtaInputs, Eviction, NodePlan, OwnerRef, Plan, PodClass,
    PodPlan, PodRef, PolicyCondition, PolicyPlan,
};
pub use plan::{Planner, plan};
pub use progress::format as drain_progress;
pub use reason::Reason;
pub use selector::{Selector, SelectorError};
pub use surge::move_record as surge_move_record;
pub use view::{
    ClusterView, ControllerRef, DEFAULT_PROGRESS_DEADLINE_SECONDS, DeletedNodeRecord,
    HOSTNAME_LABEL, InFlightEviction, NodeName, NodePin, NodeView, OwnerKind, OwnerView, PdbView,
    PodPhase, PodPins, PodView, PolicyView, Resources, RolloutView, UnhealthyPodEvictionPolicy,
    VolumeView, node_hostname,
};
pub use workload::{grow_observed_sizes, live_pods_by_workload, ready_pods_by_workload};
