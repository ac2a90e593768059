//! An upgrade scenario on the real local cluster: KWOK nodes running the old executor, simulated
//! executors (`k8sm-agent simulate`), the CRD, a namespace for workloads, and helpers to run the
//! controller and wait.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};

use k8sm_api::{
    ExecutorIdentity, ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, Kamikaze,
    KamikazeMechanism, MaxConcurrentNodes, keys,
};
use k8sm_testcluster::{ClusterOptions, TestCluster};

use crate::binaries::{ChildGuard, binary};
use crate::events::with_reason;
use crate::install_crd;
use crate::objects::{get_pod_opt, is_live, node_of, pods_in};
use crate::polling::{POLL, poll};

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
    // Field order matters: the processes stop, and a failed test prints their logs, before the
    // cluster removes its directory with the logs in it.
    pub controllers: Vec<ChildGuard>,
    pub agent: ChildGuard,
    pub cluster: TestCluster,
    pub client: Client,
    pub namespace: String,
    pub old_id: String,
    pub new_id: String,
}

impl Scenario {
    /// A cluster of `nodes` KWOK nodes whose executors report `old_id`, with the CRD installed and
    /// the simulated executors restarting in `new_id` `restart_delay` after a kamikaze.
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

    /// Like [`Scenario::start_with_agent_args`], on a cluster started with `options` (e.g. a KWOK
    /// pod-ready delay).
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
        let log = cluster.dir().join("agent.log");
        let agent = spawn_agent(&cluster, &old_id, &new_id, restart_delay, agent_args, &log);
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

    /// Replaces the simulated executors by a new agent process with the same base flags as
    /// [`Scenario::start`] plus `extra`: the operator rolled out a fixed executor build. The
    /// old agent is stopped first; the log goes on in the same file.
    pub fn restart_agent(&mut self, restart_delay: &str, extra: &[String]) {
        self.agent.kill_with(nix::sys::signal::Signal::SIGTERM);
        let log = self.agent.log.clone();
        self.agent = spawn_agent(
            &self.cluster,
            &self.old_id,
            &self.new_id,
            restart_delay,
            extra,
            &log,
        );
    }

    /// Starts a `k8sm-controller` with `extra` flags; its log is `controller-<index>.log` in the
    /// cluster dir.
    pub fn start_controller(&mut self, extra: &[&str]) -> usize {
        let kubeconfig = self.cluster.kubeconfig().to_owned();
        self.start_controller_as(&kubeconfig, extra)
    }

    /// Like [`Scenario::start_controller`], with these environment variables set too.
    pub fn start_controller_with_env(&mut self, extra: &[&str], env: &[(&str, &str)]) -> usize {
        let kubeconfig = self.cluster.kubeconfig().to_owned();
        self.start_controller_process(&kubeconfig, extra, env)
    }

    /// Like [`Scenario::start_controller`], authenticated by another kubeconfig (e.g. a
    /// ServiceAccount token).
    pub fn start_controller_as(&mut self, kubeconfig: &Path, extra: &[&str]) -> usize {
        self.start_controller_process(kubeconfig, extra, &[])
    }

    fn start_controller_process(
        &mut self,
        kubeconfig: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> usize {
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
        self.controllers.push(ChildGuard::spawn_with_env(
            "k8sm-controller",
            &binary("k8sm-controller"),
            &args,
            env,
            &log,
        ));
        index
    }

    /// Applies `deploy/namespace.yaml` and `deploy/rbac.yaml` and writes a kubeconfig that
    /// authenticates with a token of the controller's ServiceAccount, so that a controller
    /// started with it has exactly the deployed role. Returns the kubeconfig and the token.
    pub fn deployed_controller_identity(&self) -> (std::path::PathBuf, String) {
        crate::tokens::apply_controller_account(&self.cluster);
        crate::tokens::controller_kubeconfig(&self.cluster, "k8sm-controller")
    }

    /// Changes the deployed controller's ClusterRole with a JSON patch, as an operator editing its
    /// RBAC does.
    pub fn patch_controller_role(&self, json_patch: &str) {
        crate::kubectl_ok(
            &self.cluster,
            &[
                "patch",
                "clusterrole",
                "k8sm-controller",
                "--type=json",
                "-p",
                json_patch,
            ],
        );
    }

    /// A policy that upgrades every node to the new executor, `slots` nodes at a time, with every
    /// other field at its default: the base the tests set their knobs on.
    pub fn policy_spec(&self, slots: u32) -> ExecutorUpgradePolicySpec {
        ExecutorUpgradePolicySpec {
            target_executor_id: Some(self.new_id.clone()),
            max_concurrent_nodes: MaxConcurrentNodes::count(slots).expect("at least one slot"),
            ..ExecutorUpgradePolicySpec::default()
        }
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

    /// The policy once its status counts are `(total, compatible, blocked)`. Counts are a paced
    /// refresh (written at most once a second, later on a slow apiserver), so what a test saw
    /// happen to nodes shows in them a moment later.
    pub async fn policy_counting(
        &self,
        name: &str,
        (total, compatible, blocked): (u32, u32, u32),
    ) -> ExecutorUpgradePolicy {
        self.wait_until(
            &format!(
                "{name}'s status counts {total} nodes, {compatible} compatible, {blocked} blocked"
            ),
            Duration::from_secs(30),
            || async {
                let policy = self.policy(name).await;
                let counts = &policy.status.as_ref()?.counts;
                (counts.total == total
                    && counts.compatible == compatible
                    && counts.blocked == blocked)
                    .then_some(policy)
            },
        )
        .await
    }

    pub async fn nodes(&self) -> Vec<Node> {
        Api::<Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .expect("nodes")
            .items
    }

    /// The pods of the scenario's namespace.
    pub async fn pods(&self) -> Vec<Pod> {
        pods_in(&self.client, &self.namespace).await
    }

    /// The pod `name` of the scenario's namespace, if it exists.
    pub async fn pod(&self, name: &str) -> Option<Pod> {
        get_pod_opt(&self.client, &self.namespace, name).await
    }

    /// The namespace's pods bound to `node`.
    pub async fn pods_on(&self, node: &str) -> Vec<Pod> {
        let mut pods = self.pods().await;
        pods.retain(|p| node_of(p) == Some(node));
        pods
    }

    /// The namespace's pods labelled `app=<app>`.
    pub async fn app_pods(&self, app: &str) -> Vec<Pod> {
        let mut pods = self.pods().await;
        pods.retain(|p| p.labels().get("app").map(String::as_str) == Some(app));
        pods
    }

    /// The namespace's pods that are not terminating: name → uid. A pod evicted or deleted leaves
    /// it, and its replacement comes under another name.
    pub async fn live_pods(&self) -> BTreeMap<String, String> {
        self.pods()
            .await
            .into_iter()
            .filter(is_live)
            .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
            .collect()
    }

    /// Nodes that run the new executor and carry none of k8sm's upgrade state.
    pub async fn upgraded_nodes(&self) -> usize {
        self.upgraded_names().await.len()
    }

    /// The names of the nodes that run the new executor and carry none of k8sm's upgrade state.
    pub async fn upgraded_names(&self) -> BTreeSet<String> {
        self.nodes()
            .await
            .iter()
            .filter(|n| is_upgraded(n, &self.new_id))
            .map(ResourceExt::name_any)
            .collect()
    }

    /// Events with `reason`, in any namespace.
    pub async fn events(&self, reason: &str) -> Vec<Event> {
        with_reason(&self.client, reason).await
    }

    /// How many Evicted events name each pod (by UID): more than one means a decision was executed
    /// twice.
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
        let looked = poll(timeout, POLL, || {
            let answer = check();
            async move { answer.await.ok_or(()) }
        })
        .await;
        looked.unwrap_or_else(|()| {
            let logs: Vec<String> = self
                .controllers
                .iter()
                .map(|c| format!("--- {} ---\n{}", c.log.display(), c.log_tail(40)))
                .collect();
            panic!(
                "timed out after {timeout:?} waiting until {what}\n{}\n--- agent ---\n{}",
                logs.join("\n"),
                self.agent.log_tail(20)
            )
        })
    }
}

/// The agent that simulates the executors of every KWOK node: they report `old_id` until told
/// kamikaze, and come back with `new_id` `restart_delay` later (`extra` flags change that, e.g.
/// `--never-restart=<node>`).
fn spawn_agent(
    cluster: &TestCluster,
    old_id: &str,
    new_id: &str,
    restart_delay: &str,
    extra: &[String],
    log: &Path,
) -> ChildGuard {
    let args: Vec<String> = [
        "simulate".to_owned(),
        format!("--kubeconfig={}", cluster.kubeconfig().display()),
        format!("--new-executor-id={new_id}"),
        format!("--initial-executor-id={old_id}"),
        format!("--restart-delay={restart_delay}"),
        "--selector=type=kwok".to_owned(),
    ]
    .into_iter()
    .chain(extra.iter().cloned())
    .collect();
    ChildGuard::spawn("k8sm-agent", &binary("k8sm-agent"), &args, log)
}

/// The node runs `new_id` and carries none of k8sm's upgrade state: no mark, no kamikaze, no
/// cordon.
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

/// The Http kamikaze of a policy whose executors are simulated by a `k8sm-agent simulate
/// --http-addr={addr}`: the controller POSTs each node's kamikaze to that agent's endpoint for the
/// node.
pub fn agent_http_kamikaze(addr: impl std::fmt::Display) -> Kamikaze {
    Kamikaze {
        mechanism: KamikazeMechanism::Http,
        url_template: Some(format!("http://{addr}/kamikaze/{{nodeName}}")),
        allow_insecure_http: true,
    }
}

/// A CA (its certificate, PEM) and a serving certificate it signed for 127.0.0.1, written to `dir`
/// as `ca.crt`, `tls.crt` and `tls.key`: what an operator distributes for the agents' HTTPS; the
/// paths of the three files.
pub fn agent_pki(dir: &Path) -> [PathBuf; 3] {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    std::fs::create_dir_all(dir).expect("the PKI directory");
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca.self_signed(&ca_key).expect("the CA certificate").pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("a serving key");
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .expect("serving parameters")
        .signed_by(&key, &issuer)
        .expect("the serving certificate");
    let paths = ["ca.crt", "tls.crt", "tls.key"].map(|name| dir.join(name));
    for (path, text) in paths.iter().zip([ca_pem, cert.pem(), key.serialize_pem()]) {
        std::fs::write(path, text).expect("a PKI file");
    }
    paths
}
