//! k8sm-planner: the pure decision engine — (cluster view, now) → plan. No kube client, no I/O, no
//! clock (docs/design.md §4). The controller builds a [`ClusterView`], calls [`plan()`] (or a kept
//! [`Planner`]), executes [`Plan::actions`] in order, reports each as an Event and writes the
//! policies' status from [`Plan::policies`] and [`Plan::nodes`]; the kubectl plugin renders the
//! same plan, so what it predicts is what the controller does. All state lives in the cluster
//! (§3): planning again after the actions were applied never repeats one.
#![forbid(unsafe_code)]

mod index;
mod model;
mod objects;
mod pass;
mod plan;
pub mod report;
mod rules;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(test)]
mod tests;

pub use model::output::{
    Action, ActionKind, Blocker, Decision, EtaInputs, Eviction, NodePlan, OwnerRef, Plan, PodClass,
    PodPlan, PodRef, PolicyCondition, PolicyPlan,
};
pub use model::reason::Reason;
pub use model::view::{
    Calls, ClusterView, ControllerRef, DEFAULT_PROGRESS_DEADLINE_SECONDS, DeletedNodeRecord,
    HOSTNAME_LABEL, InFlightEviction, NodeName, NodePin, NodeView, OwnerKind, OwnerView, PdbView,
    PodPhase, PodPins, PodView, PolicyView, Resources, RolloutView, UnhealthyPodEvictionPolicy,
    VolumeView, node_hostname,
};
pub use objects::classify::POD_ANNOTATIONS_READ;
pub use objects::selector::{Selector, SelectorError};
pub use objects::workload::{grow_observed_sizes, live_pods_by_workload, ready_pods_by_workload};
pub use plan::{Planner, plan};
pub use rules::health::{OwnerHealth, Verdict, judge, needed, sla_floor};
pub use rules::progress::format as drain_progress;
pub use rules::surge::move_record as surge_move_record;
