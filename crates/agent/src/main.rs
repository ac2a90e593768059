//! k8sm-agent: the node side of the k8sm contract (publishes executor IDs, obeys kamikaze); `simulate` plays the
//! executors of KWOK nodes.
#![forbid(unsafe_code)]

fn main() {
    println!("k8sm-agent {}", env!("CARGO_PKG_VERSION"));
}
