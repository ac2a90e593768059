//! Running `kubectl k8sm …` as an operator does: the cluster's real kubectl, with the plugin on its PATH and no
//! terminal.

use k8sm_testcluster::TestCluster;

use crate::KubectlResult;
use crate::scenario::kubectl_with_plugin;

/// `kubectl k8sm args…`, without a terminal.
pub fn k8sm(cluster: &TestCluster, args: &[&str]) -> KubectlResult {
    kubectl_with_plugin(cluster)
        .arg("k8sm")
        .args(args)
        .output()
        .expect("kubectl runs")
        .into()
}

/// Like [`k8sm`], but panics with the plugin's output when it fails; returns its standard output.
pub fn k8sm_ok(cluster: &TestCluster, args: &[&str]) -> String {
    let result = k8sm(cluster, args);
    assert!(
        result.success,
        "kubectl k8sm {} failed:\n{}{}",
        args.join(" "),
        result.stdout,
        result.stderr
    );
    result.stdout
}

/// Like [`k8sm`], but expects a failure with exactly this one-sentence error, and no panic. Returns the result for
/// further checks.
pub fn k8sm_fails(cluster: &TestCluster, args: &[&str], error: &str) -> KubectlResult {
    let result = k8sm(cluster, args);
    assert!(
        !result.success,
        "kubectl k8sm {} succeeded:\n{}",
        args.join(" "),
        result.stdout
    );
    assert_eq!(
        result.stderr,
        format!("error: {error}\n"),
        "kubectl k8sm {}",
        args.join(" ")
    );
    result
}
