//! k8sm-controller: watches nodes, pods and policies, asks the planner what to do, and does it.
#![forbid(unsafe_code)]

fn main() {
    println!("k8sm-controller {}", env!("CARGO_PKG_VERSION"));
}
