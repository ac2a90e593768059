//! [`TestCluster`]: starts the components in order, waits until each is usable, and stops them all
//! on drop.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::components::{self, Layout};
use crate::kwok::{self, NodeResources, fake_node};
use crate::pki::Pki;
use crate::ports::free_port;
use crate::process::ManagedProcess;
use crate::{Binaries, Error};

/// What to start.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Number of KWOK nodes created and awaited Ready by [`TestCluster::start`].
    pub nodes: usize,
    /// Pod capacity of each node.
    pub max_pods_per_node: u32,
    /// How long after scheduling a pod becomes Ready (KWOK stage delay).
    pub pod_ready_delay: Duration,
    /// A deleted pod stays (terminating) until its grace period ends, as on a real kubelet; off,
    /// KWOK removes it at once (the end-to-end tests' pods have no grace period anyway).
    pub honour_grace_periods: bool,
    /// Allocatable CPU and memory of every node.
    pub node_resources: NodeResources,
    /// Extra labels on every node.
    pub node_labels: BTreeMap<String, String>,
    /// Run kube-controller-manager (Deployments, ReplicaSets, garbage collection, …).
    pub controller_manager: bool,
    /// kube-controller-manager controllers to leave off, by name (e.g. `disruption-controller`, so
    /// that a test writes PodDisruptionBudget statuses itself).
    pub disabled_controllers: Vec<String>,
    /// More kube-controller-manager flags, after the harness's own (e.g. a longer
    /// `--node-monitor-grace-period`).
    pub controller_manager_args: Vec<String>,
    /// Run kube-scheduler.
    pub scheduler: bool,
    /// Keep the cluster's files here instead of in a temporary directory removed on drop.
    pub dir: Option<PathBuf>,
    /// More kube-apiserver flags, after the harness's own (e.g. an audit log, so a benchmark can
    /// count each client's requests).
    pub apiserver_args: Vec<String>,
    /// More admin users (group `system:masters`), each with its own client certificate, so that
    /// the apiserver (its audit log) tells their requests apart:
    /// [`TestCluster::user_kubeconfig`] returns a kubeconfig per name.
    pub users: Vec<String>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            nodes: 3,
            max_pods_per_node: 110,
            pod_ready_delay: Duration::ZERO,
            honour_grace_periods: false,
            node_resources: NodeResources::default(),
            node_labels: BTreeMap::new(),
            controller_manager: true,
            disabled_controllers: Vec::new(),
            controller_manager_args: Vec::new(),
            scheduler: true,
            dir: None,
            apiserver_args: Vec::new(),
            users: Vec::new(),
        }
    }
}

impl ClusterOptions {
    pub fn with_nodes(mut self, nodes: usize) -> Self {
        self.nodes = nodes;
        self
    }

    /// Only etcd and the apiserver: for what needs the API's types and admission, not controllers
    /// or nodes (a CRD, a chart's objects).
    pub fn apiserver_only() -> Self {
        Self {
            nodes: 0,
            controller_manager: false,
            scheduler: false,
            ..Self::default()
        }
    }
}

/// A running cluster. Dropping it stops every process it started (also when a test panics).
pub struct TestCluster {
    // Field order matters: processes stop (in reverse start order, see Drop) before the temp dir
    // is removed.
    processes: Vec<ManagedProcess>,
    client: Client,
    kubeconfig: PathBuf,
    server: String,
    binaries: Binaries,
    dir: PathBuf,
    options: ClusterOptions,
    _temp_dir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCluster")
            .field("server", &self.server)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl TestCluster {
    /// Builds the binaries if needed, starts etcd, kube-apiserver, kube-controller-manager,
    /// kube-scheduler and KWOK on free loopback ports, creates `options.nodes` nodes and waits
    /// until they are Ready.
    pub async fn start(options: ClusterOptions) -> Result<Self, Error> {
        let binaries = tokio::task::spawn_blocking(Binaries::ensure)
            .await
            .map_err(|e| Error::Setup(format!("building binaries panicked: {e}")))??;

        let (dir, temp_dir) = match &options.dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                    context: format!("creating {}", dir.display()),
                    source,
                })?;
                (dir.clone(), None)
            }
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("k8sm-cluster-")
                    .tempdir()
                    .map_err(|source| Error::Io {
                        context: "creating a temporary cluster directory".into(),
                        source,
                    })?;
                (temp.path().to_owned(), Some(temp))
            }
        };
        let pki = Pki::write(&dir, &options.users)?;
        let kubeconfig = dir.join("kubeconfig");
        let layout = Layout {
            dir: &dir,
            pki: &pki,
            kubeconfig: &kubeconfig,
            etcd_client_port: free_port()?,
            etcd_peer_port: free_port()?,
            apiserver_port: free_port()?,
        };
        let server = format!("https://127.0.0.1:{}", layout.apiserver_port);
        crate::kubeconfig::write_admin(&kubeconfig, &server, &pki)?;
        for user in &pki.users {
            crate::kubeconfig::write_user(&user_kubeconfig(&dir, &user.name), &server, &pki, user)?;
        }

        let mut processes = Vec::new();
        let spawn = |name: &str, program: &Path, args: Vec<String>| {
            ManagedProcess::spawn(name, program, &args, &dir.join(format!("{name}.log")))
        };
        processes.push(spawn("etcd", &binaries.etcd, components::etcd(&layout))?);
        let mut apiserver_args = components::kube_apiserver(&layout);
        apiserver_args.extend(options.apiserver_args.iter().cloned());
        processes.push(spawn(
            "kube-apiserver",
            &binaries.kube_apiserver,
            apiserver_args,
        )?);

        let client = client_for(&kubeconfig).await?;
        let mut cluster = Self {
            processes,
            client,
            kubeconfig: kubeconfig.clone(),
            server,
            binaries: binaries.clone(),
            dir: dir.clone(),
            options: options.clone(),
            _temp_dir: temp_dir,
        };
        cluster
            .wait_apiserver_ready(Duration::from_secs(90))
            .await?;

        if options.controller_manager {
            let mut args = components::kube_controller_manager(&layout, free_port()?);
            if !options.disabled_controllers.is_empty() {
                let disabled: Vec<String> = options
                    .disabled_controllers
                    .iter()
                    .map(|name| format!("-{name}"))
                    .collect();
                args.push(format!("--controllers=*,{}", disabled.join(",")));
            }
            args.extend(options.controller_manager_args.iter().cloned());
            let process = spawn(
                "kube-controller-manager",
                &binaries.kube_controller_manager,
                args,
            )?;
            cluster.processes.push(process);
        }
        if options.scheduler {
            let args = components::kube_scheduler(&layout, free_port()?);
            cluster
                .processes
                .push(spawn("kube-scheduler", &binaries.kube_scheduler, args)?);
        }
        let stage_config = dir.join("kwok-stages.yaml");
        kwok::write_stage_config(
            &binaries.kwok_stages,
            kwok::PodStages {
                ready_delay: options.pod_ready_delay,
                honour_grace_periods: options.honour_grace_periods,
            },
            &stage_config,
        )?;
        let kwok_args = components::kwok(&layout, &stage_config, free_port()?);
        cluster
            .processes
            .push(spawn("kwok", &binaries.kwok, kwok_args)?);

        cluster.add_nodes(0..options.nodes).await?;
        if options.controller_manager {
            cluster.wait_default_service_account("default").await?;
        }
        Ok(cluster)
    }

    /// A client with cluster-admin rights.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Absolute path of an admin kubeconfig for this cluster.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A kubeconfig for `user`, one of [`ClusterOptions::users`]: an admin whose requests carry
    /// that user name.
    pub fn user_kubeconfig(&self, user: &str) -> Option<PathBuf> {
        let path = user_kubeconfig(&self.dir, user);
        self.options.users.iter().any(|u| u == user).then_some(path)
    }

    /// The apiserver's URL, `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The directory holding the cluster's certificates, data and component logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn binaries(&self) -> &Binaries {
        &self.binaries
    }

    pub fn options(&self) -> &ClusterOptions {
        &self.options
    }

    /// The harness's kubectl, pointed at this cluster.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new(&self.binaries.kubectl);
        cmd.env("KUBECONFIG", &self.kubeconfig);
        cmd
    }

    /// The version the apiserver reports, e.g. `v1.36.3`.
    pub async fn server_version(&self) -> Result<String, Error> {
        Ok(self.client.apiserver_version().await?.git_version)
    }

    /// Name and pid of every process this cluster started and that has not been stopped.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.processes
            .iter()
            .filter_map(|p| Some((p.name().to_owned(), p.pid()?)))
            .collect()
    }

    /// The processes of this cluster, for tests that inject faults.
    pub fn process_mut(&mut self, name: &str) -> Option<&mut ManagedProcess> {
        self.processes.iter_mut().find(|p| p.name() == name)
    }

    /// Restarts the kube-apiserver, as an operator upgrading or reconfiguring the control plane
    /// does: stops it (SIGTERM, SIGKILL after a grace period), starts it again with the same
    /// flags on the same port, and waits until `/readyz` answers `ok`. etcd keeps every object;
    /// clients (the components, the controller, tests) see their connections and watches break
    /// and reconnect by themselves. Returns how long the apiserver was unavailable,
    /// from the stop to ready.
    pub async fn restart_apiserver(&mut self) -> Result<Duration, Error> {
        let apiserver = self
            .processes
            .iter_mut()
            .find(|p| p.name() == "kube-apiserver")
            .ok_or_else(|| Error::Setup("the kube-apiserver was not started".into()))?;
        let stopped_at = Instant::now();
        let mut old = std::mem::replace(apiserver, apiserver.not_started());
        // Stopping waits up to the grace period; keep the async runtime's worker free meanwhile.
        // (Starting is done from this thread: `setpriv --pdeathsig` ties a process to the
        // thread that started it, and blocking-pool threads come and go.)
        tokio::task::spawn_blocking(move || old.stop())
            .await
            .map_err(|e| Error::Setup(format!("stopping the kube-apiserver panicked: {e}")))?;
        apiserver.respawn()?;
        self.wait_apiserver_ready(Duration::from_secs(90)).await?;
        Ok(stopped_at.elapsed())
    }

    /// Starts again, with the same command line, every component that has exited by itself, as
    /// kubelet or systemd restart a crashed control-plane component (e.g. kube-scheduler exits
    /// on purpose when its cache disagrees with the apiserver after a restart of the
    /// apiserver). Returns the names of those restarted.
    pub fn restart_exited(&mut self) -> Result<Vec<String>, Error> {
        let mut restarted = Vec::new();
        for process in &mut self.processes {
            if process.has_exited() {
                tracing::warn!(name = process.name(), "exited; restarting it");
                process.respawn()?;
                restarted.push(process.name().to_owned());
            }
        }
        Ok(restarted)
    }

    /// Fails with the log of the first component that has exited.
    pub fn check_running(&mut self) -> Result<(), Error> {
        self.processes
            .iter_mut()
            .try_for_each(ManagedProcess::check_running)
    }

    /// The Node object this cluster creates for a KWOK node named `name` (with the options' labels
    /// and pod capacity): what a machine that registers (again) sends.
    pub fn kwok_node(&self, name: &str) -> Node {
        fake_node(
            name,
            &self.options.node_labels,
            self.options.max_pods_per_node,
            &self.options.node_resources,
        )
    }

    /// Creates the KWOK nodes with these indices (see [`crate::node_name`]) and waits until all are
    /// Ready.
    pub async fn add_nodes(&mut self, indices: std::ops::Range<usize>) -> Result<(), Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let names: Vec<String> = indices.map(kwok::node_name).collect();
        futures::stream::iter(names.iter())
            .map(|name| {
                let node = self.kwok_node(name);
                let nodes = nodes.clone();
                async move { nodes.create(&PostParams::default(), &node).await }
            })
            .buffer_unordered(32)
            .try_collect::<Vec<_>>()
            .await?;
        let timeout = Duration::from_secs(60) + Duration::from_millis(100) * names.len() as u32;
        self.wait_nodes_ready(&names, timeout).await
    }

    /// Creates a namespace and waits for its `default` ServiceAccount, without which pods are
    /// rejected.
    pub async fn create_namespace(&mut self, name: &str) -> Result<(), Error> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces.create(&PostParams::default(), &ns).await?;
        self.wait_default_service_account(name).await
    }

    async fn wait_default_service_account(&mut self, namespace: &str) -> Result<(), Error> {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let what = format!("the default ServiceAccount in namespace {namespace}");
        self.poll(&what, Duration::from_secs(60), || async {
            Ok(accounts.get_opt("default").await?.is_some())
        })
        .await
    }

    async fn wait_apiserver_ready(&mut self, timeout: Duration) -> Result<(), Error> {
        let client = self.client.clone();
        self.poll("kube-apiserver /readyz", timeout, || async {
            let request = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| Error::Setup(e.to_string()))?;
            Ok(client
                .request_text(request)
                .await
                .is_ok_and(|body| body.trim() == "ok"))
        })
        .await
    }

    async fn wait_nodes_ready(&mut self, names: &[String], timeout: Duration) -> Result<(), Error> {
        if names.is_empty() {
            return Ok(());
        }
        let nodes: Api<Node> = Api::all(self.client.clone());
        let wanted: std::collections::BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let what = format!("{} KWOK nodes to become Ready", names.len());
        self.poll(&what, timeout, || async {
            let list = nodes.list(&ListParams::default()).await?;
            let ready = list
                .items
                .iter()
                .filter(|n| {
                    n.metadata
                        .name
                        .as_deref()
                        .is_some_and(|name| wanted.contains(name))
                })
                .filter(|n| is_ready(n))
                .count();
            Ok(ready == wanted.len())
        })
        .await
    }

    /// Polls `check` until it is true, failing early with a component's log if one exits meanwhile.
    async fn poll<F, Fut>(
        &mut self,
        what: &str,
        timeout: Duration,
        mut check: F,
    ) -> Result<(), Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<bool, Error>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_running()?;
            // Errors while polling are expected (the apiserver is still starting); only the
            // deadline fails.
            if let Ok(true) = check().await {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: what.to_owned(),
                    seconds: timeout.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        // Reverse start order: KWOK and the controllers go before the apiserver, etcd last.
        while let Some(mut process) = self.processes.pop() {
            process.stop();
        }
    }
}

async fn client_for(kubeconfig: &Path) -> Result<Client, Error> {
    let config = Config::from_custom_kubeconfig(
        Kubeconfig::read_from(kubeconfig)?,
        &KubeConfigOptions::default(),
    )
    .await?;
    Ok(Client::try_from(config)?)
}

fn user_kubeconfig(dir: &Path, user: &str) -> PathBuf {
    dir.join(format!("kubeconfig-{user}"))
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}
