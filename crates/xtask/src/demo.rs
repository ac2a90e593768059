//! `cargo xtask demo`: what a newcomer runs first — a local cluster with the CRD and example policies installed.

use std::process::Command;

use anyhow::Context;
use k8sm_testcluster::Binaries;

use crate::cluster::{self, UpArgs};
use crate::workspace;

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Number of simulated (KWOK) nodes.
    #[arg(long, default_value_t = 10)]
    nodes: usize,
}

pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    let kubeconfig = cluster::up(&UpArgs {
        nodes: args.nodes,
        pod_ready_delay: std::time::Duration::from_secs(1),
    })?;
    let binaries = Binaries::ensure()?;
    let root = workspace::root();
    let kubectl = |what: &str, args: &[&str]| {
        let mut cmd = Command::new(&binaries.kubectl);
        cmd.env("KUBECONFIG", &kubeconfig)
            .current_dir(&root)
            .args(args);
        workspace::run(what, &mut cmd)
    };
    kubectl("kubectl get nodes", &["get", "nodes"])?;
    kubectl(
        "install the ExecutorUpgradePolicy CRD",
        &[
            "apply",
            "--server-side",
            "-f",
            "crds/executorupgradepolicy.yaml",
        ],
    )?;
    kubectl(
        "wait until the CRD is established",
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/executorupgradepolicies.k8s.mesosphere.io",
        ],
    )?;
    kubectl(
        "apply the example policies",
        &["apply", "-f", "deploy/examples/"],
    )?;
    kubectl(
        "list them (printer columns)",
        &["get", "executorupgradepolicies"],
    )?;
    kubectl(
        "the operator's documentation of a field",
        &["explain", "executorupgradepolicy.spec.unmanagedPods"],
    )
    .context("kubectl explain")?;
    eprintln!(
        "\nThe local cluster keeps running. Next:\n  export KUBECONFIG={}\n  cargo xtask kubectl get eup -o yaml\n  \
         cargo xtask cluster status\n  cargo xtask cluster down",
        kubeconfig.display()
    );
    Ok(())
}
