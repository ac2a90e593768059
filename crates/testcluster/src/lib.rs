//! A real local Kubernetes for tests, demos and benchmarks: etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and KWOK, built from the Go module proxy and started on
//! free loopback ports (envtest for Rust).
#![forbid(unsafe_code)]

mod binaries;
mod cluster;
mod components;
mod error;
mod helm;
mod kubeconfig;
mod kwok;
mod kwok_patch;
mod pki;
mod ports;
mod process;
mod tools;

pub mod sla;

pub use binaries::{Binaries, cache_root, go_modules_dir};
pub use cluster::{ClusterOptions, TestCluster};
pub use error::Error;
pub use kwok::{
    COMPLETE_DELAY_ANNOTATION, KWOK_NODE_ANNOTATION, NodeResources, READY_DELAY_ANNOTATION,
    node_name,
};
pub use ports::free_port;
pub use process::ManagedProcess;
pub use tools::{Krew, crane, krew, kstatus, promtool};
