//! k8sm-planner: the pure decision engine — (cluster view, policy, now) → plan. No kube client, no I/O.
#![forbid(unsafe_code)]
