//! An upgrade scenario on the real local cluster: KWOK nodes running the old executor, simulated executors
//! (`k8sm-agent simulate`), the CRD, a namespace for workloads, and helpers to run the controller and wait.

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};

use k8sm_api::{ExecutorIdentity, ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, keys};
use k8sm_testcluster::{ClusterOptions, TestCluster};

use crate::binaries::{ChildGuard, binary};
use crate::install_crd;

/// The executor ID of a simulated executor build `version`.
pub fn executor_id(version: &str) -> String {
    ExecutorIdentity {
        version: version.to_owned(),
        binary_sha256: format!("{:0>64}", version.replace('.', "")),
        flags: vec![("--cluster".into(), "test".into())],
        static_pods: vec![],
    }
    .executor_id()
    .expect("a valid identity")
    .to_string()
}

pub struct Scenario {
    pub cluster: TestCluster,
    pub client: Client,
    pub namespace: String,
    pub old_id: String,
    pub new_id: String,
    pub agent: ChildGuard,
    pub controllers: Vec<ChildGuard>,
}

impl Scenario {
    /// A cluster of `nodes` KWOK nodes whose executors report `old_id`, with the CRD installed and the
    /// simulated executors restarting in `new_id` `restart_delay` after a kamikaze.
    pub async fn start(nodes: usize, namespace: &str, restart_delay: &str) -> Self {
        Self::start_with_agent_args(nodes, namespace, restart_delay, &[]).await
    }

    /// Like [`Scenario::start`], with extra `k8sm-agent simulate` flags (e.g. `--http-addr`).
    pub async fn start_with_agent_args(
        nodes: usize,
        namespace: &str,
        restart_delay: &str,
        agent_args: &[String],
    ) -> Self {
        let options = ClusterOptions::default().with_nodes(nodes);
        Self::start_with_options(options, namespace, restart_delay, agent_args).await
    }

    /// Like [`Scenario::start_with_agent_args`], on a cluster started with `options` (e.g. a KWOK pod-ready delay).
    pub async fn start_with_options(
        options: ClusterOptions,
        namespace: &str,
        restart_delay: &str,
        agent_args: &[String],
    ) -> Self {
        let mut cluster = TestCluster::start(options).await.expect("cluster starts");
        install_crd(&cluster);
        cluster
            .create_namespace(namespace)
            .await
            .expect("namespace");
        let client = cluster.client();
        let old_id = executor_id("1.0.0");
        let new_id = executor_id("2.0.0");
        let agent = ChildGuard::spawn(
            "k8sm-agent",
            &binary("k8sm-agent"),
            &[
                "simulate".into(),
                format!("--kubeconfig={}", cluster.kubeconfig().display()),
                format!("--new-executor-id={new_id}"),
                format!("--initial-executor-id={old_id}"),
                format!("--restart-delay={restart_delay}"),
                "--selector=type=kwok".into(),
            ]
            .into_iter()
            .chain(agent_args.iter().cloned())
            .collect::<Vec<String>>(),
            &cluster.dir().join("agent.log"),
        );
        let scenario = Self {
            cluster,
            client,
            namespace: namespace.to_owned(),
            old_id,
            new_id,
            agent,
            controllers: Vec::new(),
        };
        let nodes_api: Api<Node> = Api::all(scenario.client.clone());
        let old = scenario.old_id.clone();
        scenario
            .wait_until(
                "every node reports the old executor",
                Duration::from_secs(60),
                || async {
                    let list = nodes_api.list(&ListParams::default()).await.ok()?;
                    list.items
                        .iter()
                        .all(|n| n.annotations().get(keys::EXECUTOR_ID_ANNOTATION) == Some(&old))
                        .then_some(())
                },
            )
            .await;
        scenario
    }

    /// Starts a `k8sm-controller` with `extra` flags; its log is `controller-<index>.log` in the cluster dir.
    pub fn start_controller(&mut self, extra: &[&str]) -> usize {
        let kubeconfig = self.cluster.kubeconfig().to_owned();
        self.start_controller_as(&kubeconfig, extra)
    }

    /// Like [`Scenario::start_controller`], authenticated by another kubeconfig (e.g. a ServiceAccount token).
    pub fn start_controller_as(&mut self, kubeconfig: &std::path::Path, extra: &[&str]) -> usize {
        let index = self.controllers.len();
        let mut args = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--identity=controller-{index}"),
        ];
        if !extra.iter().any(|a| a.starts_with("--metrics-addr")) {
            args.push("--metrics-addr=127.0.0.1:0".to_owned());
        }
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let log = self.cluster.dir().join(format!("controller-{index}.log"));
        self.controllers.push(ChildGuard::spawn(
            "k8sm-controller",
            &binary("k8sm-controller"),
            &args,
            &log,
        ));
        index
    }

    /// Writes a kubeconfig for this cluster that authenticates with `token`.
    pub fn token_kubeconfig(&self, name: &str, token: &str) -> std::path::PathBuf {
        let path = self.cluster.dir().join(format!("{name}.kubeconfig"));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
             users:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n",
            self.cluster.server(),
            self.cluster.dir().join("ca.crt").display(),
        );
        std::fs::write(&path, text).expect("kubeconfig written");
        path
    }

    /// Creates a policy named `name`.
    pub async fn create_policy(&self, name: &str, spec: ExecutorUpgradePolicySpec) {
        let policies: Api<ExecutorUpgradePolicy> = Api::all(self.client.clone());
        policies
            .create(
                &PostParams::default(),
                &ExecutorUpgradePolicy::new(name, spec),
            )
            .await
            .expect("policy created");
    }

    /// Merge-patches a policy's spec.
    pub async fn patch_policy(&self, name: &str, spec_patch: serde_json::Value) {
        let policies: Api<ExecutorUpgradePolicy> = Api::all(self.client.clone());
        policies
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "spec": spec_patch })),
            )
            .await
            .expect("policy patched");
    }

    pub async fn policy(&self, name: &str) -> ExecutorUpgradePolicy {
        Api::<ExecutorUpgradePolicy>::all(self.client.clone())
            .get(name)
            .await
            .expect("policy")
    }

    pub async fn nodes(&self) -> Vec<Node> {
        Api::<Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .expect("nodes")
            .items
    }

    pub async fn pods(&self) -> Vec<Pod> {
        Api::<Pod>::namespaced(self.client.clone(), &self.namespace)
            .list(&ListParams::default())
            .await
            .expect("pods")
            .items
    }

    /// Nodes that run the new executor and carry none of k8sm's upgrade state.
    pub async fn upgraded_nodes(&self) -> usize {
        self.nodes()
            .await
            .iter()
            .filter(|n| is_upgraded(n, &self.new_id))
            .count()
    }

    /// Events with `reason`, in any namespace.
    pub async fn events(&self, reason: &str) -> Vec<Event> {
        Api::<Event>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    }

    /// How many Evicted events name each pod (by UID): more than one means a decision was executed twice.
    pub async fn evictions_per_pod(&self) -> std::collections::HashMap<String, u32> {
        let mut per_pod = std::collections::HashMap::new();
        for event in self.events("Evicted").await {
            let pod = event.regarding.and_then(|r| r.uid).unwrap_or_default();
            *per_pod.entry(pod).or_default() += 1;
        }
        per_pod
    }

    /// Ready pods of the scenario's namespace.
    pub async fn ready_pods(&self) -> usize {
        self.pods().await.iter().filter(|p| is_ready(p)).count()
    }

    /// Polls `check` until it yields a value; panics after `timeout` with the controllers' logs.
    pub async fn wait_until<T, F, Fut>(&self, what: &str, timeout: Duration, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(value) = check().await {
                return value;
            }
            if Instant::now() > deadline {
                let logs: Vec<String> = self
                    .controllers
                    .iter()
                    .map(|c| format!("--- {} ---\n{}", c.log.display(), c.log_tail(40)))
                    .collect();
                panic!(
                    "timed out after {timeout:?} waiting until {what}\n{}\n--- agent ---\n{}",
                    logs.join("\n"),
                    self.agent.log_tail(20)
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

pub fn is_upgraded(node: &Node, new_id: &str) -> bool {
    let annotations = node.annotations();
    annotations
        .get(keys::EXECUTOR_ID_ANNOTATION)
        .map(String::as_str)
        == Some(new_id)
        && !annotations.contains_key(keys::INCOMPATIBLE_EXECUTOR_ANNOTATION)
        && !annotations.contains_key(keys::KAMIKAZE_ANNOTATION)
        && !node
            .labels()
            .contains_key(keys::INCOMPATIBLE_EXECUTOR_LABEL)
        && !node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
}

/// The pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The cluster's kubectl with this workspace's `kubectl-k8sm` first on `PATH`, so that `kubectl k8sm …` runs the
/// plugin as an operator would (kubectl finds plugins on `PATH`). Standard input is closed, as in a script.
pub fn kubectl_with_plugin(cluster: &TestCluster) -> std::process::Command {
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
        .stdin(std::process::Stdio::null());
    kubectl
}
