//! k8sm-agent: the node side of the k8sm contract (docs/design.md §3, §5.4). `run` publishes a real
//! executor's ID and obeys kamikaze; `simulate` plays the executors of KWOK nodes for tests, demos
//! and benchmarks (§7).
#![forbid(unsafe_code)]

pub mod cli;
mod client;
mod contract;
mod error;
mod gate;
mod http;
pub mod kubelet;
mod obeyed;
mod retry;
pub mod run;
mod shutdown;
pub mod simulate;
mod template;
mod tls;
mod validate;

pub use error::Error;
pub use shutdown::Shutdown;
