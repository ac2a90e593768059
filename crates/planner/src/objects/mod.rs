//! The cluster's objects as the rules read them: what a pod, a workload, a budget and a node are.

pub(crate) mod budgets;
pub(crate) mod classify;
pub(crate) mod controller_classes;
pub(crate) mod lookups;
pub(crate) mod node_groups;
pub(crate) mod node_state;
pub(crate) mod pin;
pub(crate) mod pod_cache;
pub(crate) mod pod_facts;
pub(crate) mod pod_order;
pub(crate) mod selector;
pub(crate) mod workload;
