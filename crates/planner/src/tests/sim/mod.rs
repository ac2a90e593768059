//! The SLA invariant over time: random sequences of plan → execute → the cluster moves on, against
//! a model of the cluster that knows its own truth (each workload's `d`, which pods it has, what
//! its budget allows), so that every check reads the model and never the plan's account of itself.
//!
//! The model: Deployments doing real rollouts (the model's Deployment controller scales a new
//! ReplicaSet up and the old ones down within maxSurge/maxUnavailable; a rollout may be under way,
//! paused half-way, start mid-upgrade, or be stuck with new pods that are never schedulable), bare
//! ReplicaSets, ReplicationControllers, StatefulSets, an operator of a kind k8sm does not know that
//! recreates a deleted pod only after a delay (its `d` is not visible to the planner), an
//! Argo-Rollout-like controller of ReplicaSets, pods that never become Ready, budgets recomputed
//! each step from Ready pods, a scheduler, executors that restart on kamikaze, the controller's
//! bookkeeping of evictions in flight, and (optionally) failures k8sm did not cause.
//!
//! Each step:
//! 1. the planner sees the cluster and plans at the model's clock; every eviction is checked
//!    against the model's truth (the rule before each eviction, budgets, unknown kinds through the
//!    Eviction API, no workload pod deleted);
//! 2. the actions are executed (evicted and deleted pods become terminating, nodes get the contract
//!    keys); **invariant**: a workload of which k8sm evicted a pod in this step has at least
//!    `min(ceil(t*d), d-1)` Ready pods after it (whatever failures did before: those are not
//!    k8sm's);
//! 3. the cluster moves on: pods terminating since the previous step are gone; the controllers
//!    replace and scale; executors told to terminate come back with the target ID (their node must
//!    be empty); pods become Ready.
//!
//! The clock advances a minute per step, and, when the cluster is idle (nothing pending in the
//! model, nothing but bookkeeping in the plan), jumps to the plan's next wake-up, as the controller
//! requeues: a node that waits on a stuck workload reaches its `nodeProgressDeadline` and gives up
//! its slot.
//!
//! Liveness: without stuck workloads every node is upgraded within a bound; with stuck workloads (a
//! stuck rollout, a budget that allows nothing, pods that never become Ready below the bound) every
//! other node still is, and the stuck nodes are reported with what they wait on.

mod checks;
mod controllers;
mod properties;
mod report;
mod run;
mod scenarios;
mod world;
