//! k8sm-api: the `ExecutorUpgradePolicy` CRD types, the well-known Node/Pod keys and the executor
//! ID. No I/O.
#![forbid(unsafe_code)]

mod crd;
mod duration;
mod executor_id;
mod kamikaze_url;
pub mod keys;
pub mod kubelet;
mod max_concurrent;
pub mod pace;
mod pause;
mod policy;
pub mod report;
mod status;
pub mod text;
mod window;

pub use crd::{crd, crd_yaml};
pub use duration::{
    DURATION_MAX, DURATION_MAX_LENGTH, DURATION_MAX_RULE, DURATION_PATTERN, DurationString,
    InvalidDuration,
};
pub use executor_id::{
    EXECUTOR_ID_PREFIX, ExecutorId, ExecutorIdError, ExecutorIdentity, InvalidExecutorId,
    binary_sha256_of,
};
pub use kamikaze_url::KamikazeUrlError;
pub use max_concurrent::{
    InvalidMaxConcurrentNodes, MAX_CONCURRENT_NODES_MESSAGE, MAX_CONCURRENT_NODES_RULE,
    MaxConcurrentNodes,
};
pub use pause::PauseAnnotation;
pub use policy::{
    CLOCK_SKEW_ALLOWANCE, DEFAULT_NODE_PROGRESS_DEADLINE, DEFAULT_OWNER_HEALTH_THRESHOLD,
    DEFAULT_RESTART_TIMEOUT, ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, Kamikaze,
    KamikazeMechanism, PinnedPods, Surge, TARGET_EXECUTOR_ID_MAX_LENGTH,
    TARGET_EXECUTOR_ID_PATTERN, URL_PLACEHOLDER_NODE_IP, URL_PLACEHOLDER_NODE_NAME,
    URL_TEMPLATE_MAX_LENGTH, UnmanagedPodPolicy, UnmanagedPods, Workloads,
};
pub use status::{
    BLOCKED_PODS_BUDGET, BlockedPod, DeletedNode, ExecutorUpgradePolicyStatus, MAX_BLOCKED_PODS,
    MAX_BLOCKERS, MAX_DELETED_NODES, MAX_EXECUTOR_ID, MAX_MESSAGE, MAX_NAME, MAX_NODES,
    NODES_BUDGET, NodeCounts, NodePhase, NodeStatus, PaceStart, WindowStatus, condition_types,
};
pub use window::{
    CLOCK_PATTERN, DEFAULT_TIME_ZONE, InFlight, InvalidWindow, MaintenanceWindow,
    TIME_ZONE_MAX_LENGTH, Weekday, WindowState,
};
