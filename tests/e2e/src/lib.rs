//! Helpers shared by the end-to-end tests: workspace paths, the harness's kubectl, k8sm's own
//! binaries as child processes, manifests compared object for object, workloads, the SLA watcher,
//! and what an operator reads of Nodes, Pods, Events and a policy's status.
#![forbid(unsafe_code)]

pub mod admission;
pub mod audit_log;
pub mod binaries;
pub mod connect_proxy;
pub mod crash_loop;
pub mod delaying_proxy;
pub mod deletions;
pub mod drain_order;
pub mod events;
pub mod freezing_proxy;
pub mod http;
pub mod lifecycle;
pub mod manifests;
pub mod node_starts;
pub mod nodes;
pub mod objects;
pub mod plugin;
pub mod podset;
pub mod polling;
pub mod promql;
pub mod rng;
pub mod run_agents;
pub mod scenario;
pub mod sla;
pub mod status;
pub mod tokens;
pub mod waits;
pub mod watch_events;
pub mod workload_policy;
pub mod workloads;

use std::path::{Path, PathBuf};
use std::process::Output;

use k8sm_testcluster::TestCluster;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What a kubectl invocation printed, with its exit status.
#[derive(Debug)]
pub struct KubectlResult {
    pub success: bool,
    /// The exit status (`None`: killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for KubectlResult {
    fn from(output: Output) -> Self {
        Self {
            success: output.status.success(),
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// Runs the cluster's kubectl with `args` from the workspace root (so paths like `crds/…` resolve).
pub fn kubectl(cluster: &TestCluster, args: &[&str]) -> KubectlResult {
    cluster
        .kubectl()
        .current_dir(workspace_root())
        .args(args)
        .output()
        .expect("kubectl runs")
        .into()
}

/// Like [`kubectl`], but panics with kubectl's stderr when it fails.
pub fn kubectl_ok(cluster: &TestCluster, args: &[&str]) -> String {
    let result = kubectl(cluster, args);
    assert!(
        result.success,
        "kubectl {} failed:\n{}",
        args.join(" "),
        result.stderr
    );
    result.stdout
}

/// Installs the committed CRD (the artefact operators apply) and waits until it is served.
pub fn install_crd(cluster: &TestCluster) {
    kubectl_ok(
        cluster,
        &[
            "apply",
            "--server-side",
            "-f",
            "crds/executorupgradepolicy.yaml",
        ],
    );
    kubectl_ok(
        cluster,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/executorupgradepolicies.k8s.mesosphere.io",
        ],
    );
}
