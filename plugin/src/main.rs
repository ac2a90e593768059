//! kubectl-k8sm: the operator's console for k8sm upgrades, used as `kubectl k8sm …`.
#![forbid(unsafe_code)]

fn main() {
    println!("kubectl-k8sm {}", env!("CARGO_PKG_VERSION"));
}
