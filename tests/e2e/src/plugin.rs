//! Running `kubectl k8sm …` as an operator does: the cluster's real kubectl, with the plugin on its
//! PATH and no terminal.

use std::process::{Command, Stdio};

use k8sm_testcluster::TestCluster;
use serde_json::Value;

use crate::KubectlResult;
use crate::binaries::binary;

/// The cluster's kubectl with this workspace's `kubectl-k8sm` first on `PATH`, so that `kubectl
/// k8sm …` runs the plugin as an operator would (kubectl finds plugins on `PATH`). Standard input
/// is closed, as in a script.
pub fn kubectl_with_plugin(cluster: &TestCluster) -> Command {
    let plugin = binary("kubectl-k8sm");
    let plugin_dir = plugin.parent().expect("the plugin's directory").to_owned();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path =
        std::env::join_paths(std::iter::once(plugin_dir).chain(std::env::split_paths(&path)))
            .expect("a valid PATH");
    let mut kubectl = cluster.kubectl();
    kubectl
        .env("PATH", path)
        .current_dir(crate::workspace_root())
        .stdin(Stdio::null());
    kubectl
}

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

/// Like [`k8sm_ok`] for a command that must exit with `code` (3: `blocked` listed pods, or
/// `upgrade status --exit-code` found a Blocked node); returns its standard output.
pub fn k8sm_exits(cluster: &TestCluster, args: &[&str], code: i32) -> String {
    let result = k8sm(cluster, args);
    assert_eq!(
        result.code,
        Some(code),
        "kubectl k8sm {}:\n{}{}",
        args.join(" "),
        result.stdout,
        result.stderr
    );
    result.stdout
}

/// `kubectl_complete-k8sm WORDS…` as kubectl runs it for `kubectl k8sm <TAB>`: the shim shipped
/// in the krew archive, with this workspace's plugin on `PATH` and the cluster's kubeconfig. The
/// candidates, without their help and without Cobra's last `:DIRECTIVE` line.
pub fn complete(cluster: &TestCluster, words: &[&str]) -> Vec<String> {
    let shim = crate::workspace_root().join("plugin/kubectl_complete-k8sm");
    let kubectl = kubectl_with_plugin(cluster);
    let mut command = Command::new(shim);
    command.args(words).stdin(Stdio::null());
    // The cluster's kubeconfig and the plugin on PATH, as `kubectl` would pass them on.
    for (key, value) in kubectl.get_envs() {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    let output = command.output().expect("kubectl_complete-k8sm runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.last().is_some_and(|l| l.starts_with(':')),
        "Cobra's directive last: {text}"
    );
    lines[..lines.len() - 1]
        .iter()
        .map(|l| l.split('\t').next().unwrap_or_default().to_owned())
        .collect()
}

/// Like [`k8sm`], but expects a failure with exactly this one-sentence error, and no panic. Returns
/// the result for further checks.
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
    assert_eq!(result.code, Some(1), "an error exits with 1");
    result
}

/// A row of `kubectl k8sm blocked -o json`: a pod that holds its node, and why.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BlockedRow {
    pub node: String,
    pub namespace: String,
    pub name: String,
    pub reason: String,
    /// `Kind/name` of the pod's controller, if it has one.
    pub owner: Option<String>,
    /// What kind of pod it is (`owned`, `otherController`, …).
    pub class: String,
}

/// The rows of `kubectl k8sm blocked -o json`.
pub fn blocked_rows(json: &str) -> Vec<BlockedRow> {
    let blocked: Value = serde_json::from_str(json).expect("`blocked -o json` is JSON");
    let text = |pod: &Value, field: &str| pod[field].as_str().unwrap_or_default().to_owned();
    blocked["pods"]
        .as_array()
        .expect("a list of pods")
        .iter()
        .map(|pod| BlockedRow {
            node: text(pod, "node"),
            namespace: text(pod, "namespace"),
            name: text(pod, "name"),
            reason: text(pod, "reason"),
            owner: pod["owner"].as_str().map(str::to_owned),
            class: text(pod, "class"),
        })
        .collect()
}
