//! The benchmark's cluster: the real local cluster with KWOK nodes, the CRD, the simulated
//! executors, and what every run needs from it (a fresh namespace, nodes back on the old executor,
//! metrics, kubectl).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use k8sm_api::keys;
use k8sm_testcluster::{ClusterOptions, NodeResources, TestCluster};

use crate::process::ChildProcess;
use crate::requests::{ByVerb, apiserver_eviction_seconds, apiserver_requests_by_verb};
use crate::workload::Workload;

/// How long kube-controller-manager lets a node's heartbeat lag before it takes the node for
/// NotReady and marks its pods not Ready (40 s by default). KWOK renews the leases of all the
/// simulated nodes from one process, and on a saturated 2-core machine some renewals come late:
/// the node lifecycle controller then marks every pod of those nodes not Ready (Events
/// `NodeNotReady` on pods), descents below owners' bounds that no tool caused, begun by losses
/// without the Eviction API (`n500-p15000-k8sm-reaction` in bench/results/README.md). The simulated
/// nodes never fail for real, so the bench gives them time.
const NODE_MONITOR_GRACE: Duration = Duration::from_secs(600);

/// Counters of the apiserver's /metrics that a run compares before and after.
pub struct ApiserverCounters {
    pub by_verb: ByVerb,
    /// Server-side seconds and count of Eviction API calls.
    pub evictions: (f64, f64),
}

impl ApiserverCounters {
    /// Requests by verb since `before`.
    pub fn requests_since(&self, before: &Self) -> ByVerb {
        crate::requests::delta(&before.by_verb, &self.by_verb)
    }

    /// Mean server-side seconds per eviction since `before`, if there was one.
    pub fn eviction_mean_since(&self, before: &Self) -> Option<f64> {
        let count = self.evictions.1 - before.evictions.1;
        (count > 0.0).then(|| (self.evictions.0 - before.evictions.0) / count)
    }
}

pub struct BenchCluster {
    pub cluster: TestCluster,
    pub client: Client,
    pub agent: ChildProcess,
    pub old_id: String,
    pub new_id: String,
    pub bin_dir: PathBuf,
    pub work_dir: PathBuf,
    /// The apiserver's audit log: the tools' requests (see [`crate::audit`]).
    pub audit_log: PathBuf,
}

impl BenchCluster {
    /// Starts a cluster of `nodes` KWOK nodes in `work_dir/cluster` (logs stay there after the
    /// run), installs the CRD and starts the simulated executors, and waits until every node
    /// reports the old executor. The nodes are sized for `workload` (its allocatable, when its
    /// pods request resources) and its pods' grace periods are honoured: KWOK removes a deleted
    /// pod only when its grace period ends. Pods without a readiness delay of their own become
    /// Ready `pod_ready_delay` after scheduling.
    pub async fn start(
        nodes: usize,
        pod_ready_delay: Duration,
        restart_delay: Duration,
        workload: &Workload,
        bin_dir: &Path,
        work_dir: &Path,
    ) -> anyhow::Result<Self> {
        let cluster_dir = work_dir.join("cluster");
        if cluster_dir.exists() {
            std::fs::remove_dir_all(&cluster_dir)
                .with_context(|| format!("removing the old {}", cluster_dir.display()))?;
        }
        let (apiserver_args, audit_log) = crate::audit::apiserver_args(&work_dir.join("audit"))?;
        let _ = std::fs::remove_file(&audit_log);
        let options = ClusterOptions {
            nodes,
            pod_ready_delay,
            honour_grace_periods: workload.grace_period_s > 0,
            node_resources: workload
                .node_size
                .map_or_else(NodeResources::default, |size| NodeResources {
                    cpu: format!("{}m", size.cpu_millis),
                    memory: format!("{}Mi", size.memory_mib),
                }),
            dir: Some(cluster_dir),
            apiserver_args,
            controller_manager_args: vec![format!(
                "--node-monitor-grace-period={}s",
                NODE_MONITOR_GRACE.as_secs()
            )],
            users: crate::audit::users(),
            ..ClusterOptions::default()
        };
        let cluster = TestCluster::start(options)
            .await
            .context("starting the local cluster")?;
        k8sm_e2e::install_crd(&cluster);
        let client = cluster.client();
        let old_id = k8sm_e2e::scenario::executor_id("1.0.0");
        let new_id = k8sm_e2e::scenario::executor_id("2.0.0");
        let agent = ChildProcess::spawn(
            "k8sm-agent",
            &bin_dir.join("k8sm-agent"),
            &[
                "simulate".into(),
                format!("--kubeconfig={}", cluster.kubeconfig().display()),
                format!("--new-executor-id={new_id}"),
                format!("--initial-executor-id={old_id}"),
                format!(
                    "--restart-delay={}",
                    humantime::format_duration(restart_delay)
                ),
                "--selector=type=kwok".into(),
            ],
            &[("RUST_LOG", "info,kube=warn"), ("NO_COLOR", "1")],
            &cluster.dir().join("agent.log"),
        )?;
        let bench = Self {
            cluster,
            client,
            agent,
            old_id,
            new_id,
            bin_dir: bin_dir.to_owned(),
            work_dir: work_dir.to_owned(),
            audit_log,
        };
        bench.wait_nodes_old(Duration::from_secs(120)).await?;
        Ok(bench)
    }

    async fn wait_nodes_old(&self, timeout: Duration) -> anyhow::Result<()> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let started = Instant::now();
        let mut nudged = Instant::now();
        loop {
            let list = nodes.list(&ListParams::default()).await?;
            let waiting: Vec<String> = list
                .items
                .iter()
                .filter(|n| {
                    n.annotations().get(keys::EXECUTOR_ID_ANNOTATION) != Some(&self.old_id)
                        || n.annotations().contains_key(keys::KAMIKAZE_ANNOTATION)
                })
                .map(ResourceExt::name_any)
                .collect();
            if waiting.is_empty() {
                return Ok(());
            }
            anyhow::ensure!(
                started.elapsed() < timeout,
                "{} of {} nodes do not report the old executor after {timeout:?}: {}",
                waiting.len(),
                list.items.len(),
                waiting.join(", ")
            );
            // The simulated executors publish their ID with a resourceVersion precondition and,
            // after a conflict, decide again on the node's next change, which KWOK's
            // lease-based heartbeats make rare: touch the nodes still waiting so that
            // they are looked at again.
            if nudged.elapsed() > Duration::from_secs(10) {
                nudged = Instant::now();
                let patch = json!({ "metadata": { "annotations": {
                    "bench.k8sm.io/nudged": chrono::Utc::now().to_rfc3339(),
                } } });
                for name in &waiting {
                    nodes
                        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Puts every node back on the old executor, without any upgrade state, uncordoned.
    pub async fn reset_nodes(&self) -> anyhow::Result<()> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let names: Vec<String> = nodes
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        let patch = json!({
            "metadata": {
                "annotations": {
                    keys::EXECUTOR_ID_ANNOTATION: self.old_id,
                    keys::INCOMPATIBLE_EXECUTOR_ANNOTATION: null,
                    keys::KAMIKAZE_ANNOTATION: null,
                    keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION: null,
                    keys::DRAINING_ANNOTATION: null,
                    keys::CORDONED_BY_ANNOTATION: null,
                },
                "labels": { keys::INCOMPATIBLE_EXECUTOR_LABEL: null },
            },
            "spec": { "unschedulable": null },
        });
        futures::stream::iter(&names)
            .map(|name| {
                let (nodes, patch) = (&nodes, &patch);
                async move {
                    nodes
                        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                }
            })
            .buffer_unordered(16)
            .try_collect::<Vec<_>>()
            .await?;
        self.wait_nodes_old(Duration::from_secs(60)).await
    }

    /// Deletes namespace `name` if it exists and waits until it is gone (its pods with it).
    pub async fn delete_namespace(&self, name: &str) -> anyhow::Result<()> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        if namespaces.get_opt(name).await?.is_none() {
            return Ok(());
        }
        let _ = namespaces.delete(name, &DeleteParams::default()).await;
        let deadline = Instant::now() + Duration::from_secs(900);
        while namespaces.get_opt(name).await?.is_some() {
            anyhow::ensure!(
                Instant::now() < deadline,
                "namespace {name} still exists after 15 minutes"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Ok(())
    }

    pub async fn create_namespace(&mut self, name: &str) -> anyhow::Result<()> {
        self.cluster
            .create_namespace(name)
            .await
            .with_context(|| format!("creating namespace {name}"))
    }

    /// `apiserver_request_total` by verb and the server-side time of evictions `(seconds, count)`,
    /// now.
    pub async fn apiserver_requests(&self) -> anyhow::Result<ApiserverCounters> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = self.client.request_text(request).await?;
        Ok(ApiserverCounters {
            by_verb: apiserver_requests_by_verb(&text),
            evictions: apiserver_eviction_seconds(&text),
        })
    }

    /// The harness's kubectl, as an async command with output appended to `log`.
    pub fn kubectl(&self, log: &Path) -> anyhow::Result<tokio::process::Command> {
        let out = std::fs::File::options()
            .create(true)
            .append(true)
            .open(log)?;
        let mut cmd = tokio::process::Command::new(&self.cluster.binaries().kubectl);
        cmd.env("KUBECONFIG", self.cluster.kubeconfig())
            .stdin(std::process::Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        Ok(cmd)
    }

    /// Fails when the simulated executors or a cluster component have exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        self.agent.check_running()?;
        self.cluster.check_running()?;
        Ok(())
    }
}

/// `GET http://<addr><path>` over plain HTTP/1.0: the controller's /readyz and /metrics.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("an HTTP status line")?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// A free loopback port that no other process of the harness holds.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(k8sm_testcluster::free_port()?)
}
