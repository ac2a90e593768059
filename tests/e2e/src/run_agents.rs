//! `k8sm-agent run` agents of one node, each started as a service manager starts the agent of the
//! executor it runs: every run of an agent's restart command appends the agent's executor ID to one
//! file, so that a test counts the runs (`tests/agent.rs`, `tests/node_trust.rs`).

use std::path::{Path, PathBuf};

use k8sm_testcluster::TestCluster;

use crate::binaries::{ChildGuard, binary};

pub struct RunAgents {
    /// The cluster's directory: the agents' logs and the file of runs.
    dir: PathBuf,
    kubeconfig: PathBuf,
    node: String,
}

impl RunAgents {
    /// The agents of `node` of `cluster`, authenticated by `kubeconfig`.
    pub fn new(cluster: &TestCluster, kubeconfig: &Path, node: &str) -> Self {
        Self {
            dir: cluster.dir().to_owned(),
            kubeconfig: kubeconfig.to_owned(),
            node: node.to_owned(),
        }
    }

    /// The file each run of a restart command appends its agent's executor ID to.
    pub fn runs_file(&self) -> PathBuf {
        self.dir.join("kamikaze-runs")
    }

    /// Starts the agent of executor `id` with `extra` flags (its HTTP address, …) and `env`, its
    /// log `log` in the cluster's directory.
    pub fn start(&self, id: &str, extra: &[String], env: &[(&str, &str)], log: &str) -> ChildGuard {
        let args: Vec<String> = [
            "run".to_owned(),
            format!("--kubeconfig={}", self.kubeconfig.display()),
            format!("--node={}", self.node),
            format!("--executor-id={id}"),
            format!(
                "--on-kamikaze=echo {id} >> '{}'",
                self.runs_file().display()
            ),
        ]
        .into_iter()
        .chain(extra.iter().cloned())
        .collect();
        ChildGuard::spawn_with_env(
            "k8sm-agent",
            &binary("k8sm-agent"),
            &args,
            env,
            &self.dir.join(log),
        )
    }

    /// The executor IDs of the agents that ran their restart command, in order.
    pub fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(self.runs_file())
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}
