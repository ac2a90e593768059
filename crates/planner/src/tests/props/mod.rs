//! Property tests over random clusters shaped like real ones, judged against the generated world:
//! the SLA of one plan, controllers of kinds k8sm does not know, unmanaged pods, budgets,
//! determinism and pause.
//!
//! The generator decides every object and writes down what it decided ([`truth::Truth`]): which
//! workload each pod counts for, each workload's `d`, which policy (and so which threshold) each
//! node has, what each budget covers. Every oracle is computed from that record, never from the
//! plan's own account of an eviction (`Eviction::desired`, `threshold`, `ready_before`): a planner
//! that judges a pod against the wrong workload reports consistently wrong numbers, and an oracle
//! that reads them agrees with it.
//!
//! The shapes are those of real clusters: Deployments of one to three ReplicaSets (steady,
//! mid-rollout, a paused 2+2, a rollout stuck with its new pods Pending and unscheduled, surge
//! above `d`), bare ReplicaSets, ReplicationControllers, StatefulSets, controllers of kinds k8sm
//! does not watch (absent from the view's owners), ReplicaSets of such a controller (an Argo
//! `Rollout`), pods not Ready, terminating, opted out, finished or unscheduled, evictions in flight
//! with and without their pod, budgets allowing -1 to 3 (one of them over several workloads),
//! unmanaged, Job, DaemonSet and mirror pods, three policies (one of which overlaps the others),
//! paused policies and a policy without its finalizer.

mod build;
mod checks;
mod draw;
mod generate;
mod incremental;
mod properties;
mod truth;
