//! `cargo xtask demo`: what a newcomer runs first. A 30-node local cluster with a realistic mix of
//! workloads, the controller and simulated executors, a new target, and `kubectl k8sm upgrade
//! status --watch` live until every node runs it; then a summary. The cluster keeps running for the
//! next commands.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use k8sm_api::{ExecutorIdentity, keys};
use k8sm_testcluster::Binaries;
use k8sm_testcluster::sla::SlaWatcher;

use crate::cluster::{self, UpArgs};
use crate::workspace;

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Number of simulated (KWOK) nodes.
    #[arg(long, default_value_t = 30)]
    nodes: usize,
}

const NAMESPACE: &str = "demo";
const THRESHOLD: u32 = 90;

pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    // Not xtask itself: rebuilding the running binary (workspace-wide feature unification) would
    // replace it.
    workspace::run(
        "build k8sm",
        workspace::cargo().args(["build", "--workspace", "--exclude", "xtask", "--bins"]),
    )?;
    let kubeconfig = cluster::up(&UpArgs {
        nodes: args.nodes,
        pod_ready_delay: Duration::from_secs(1),
    })?;
    let binaries = Binaries::ensure()?;
    let demo = Demo {
        kubeconfig: kubeconfig.clone(),
        kubectl: binaries.kubectl.clone(),
        bin_dir: workspace::root().join("target/debug"),
        state_dir: workspace::cluster_dir(),
    };
    tokio::runtime::Runtime::new()?.block_on(demo.run(args.nodes))
}

struct Demo {
    kubeconfig: PathBuf,
    kubectl: PathBuf,
    bin_dir: PathBuf,
    state_dir: PathBuf,
}

impl Demo {
    async fn run(&self, nodes: usize) -> anyhow::Result<()> {
        let client = cluster::client(&self.kubeconfig).await?;
        let old_id = executor_id("1.0.0")?;
        let new_id = executor_id("2.0.0")?;

        self.kubectl(
            "install the CRD",
            &[
                "apply",
                "--server-side",
                "-f",
                "crds/executorupgradepolicy.yaml",
            ],
        )?;
        self.kubectl(
            "wait until it is served",
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "crd/executorupgradepolicies.k8s.mesosphere.io",
            ],
        )?;
        self.spawn_background(
            "k8sm-agent",
            &[
                "simulate",
                &format!("--kubeconfig={}", self.kubeconfig.display()),
                &format!("--initial-executor-id={old_id}"),
                &format!("--new-executor-id={new_id}"),
                "--restart-delay=2s",
                "--selector=type=kwok",
            ],
        )?;
        self.spawn_background(
            "k8sm-controller",
            &[
                &format!("--kubeconfig={}", self.kubeconfig.display()),
                "--metrics-addr=127.0.0.1:0",
            ],
        )?;
        self.kubectl(
            "create the demo namespace",
            &["create", "namespace", NAMESPACE],
        )?;
        wait(
            Duration::from_secs(60),
            "the namespace's default ServiceAccount",
            || {
                self.kubectl_quiet(&["get", "serviceaccount", "default", "-n", NAMESPACE])
                    .is_ok()
            },
        )?;
        self.kubectl(
            "deploy the workloads",
            &["apply", "-f", "deploy/demo/workloads.yaml"],
        )?;
        self.kubectl(
            "and the upgrade policy",
            &["apply", "-f", "deploy/demo/policy.yaml"],
        )?;
        let sla = SlaWatcher::start(client.clone(), NAMESPACE, THRESHOLD);
        eprintln!("==> waiting until every workload is ready");
        wait(
            Duration::from_secs(180),
            "the workloads to be ready",
            || {
                self.kubectl_quiet(&[
                    "wait",
                    "--for=condition=Available",
                    "deployment",
                    "--all",
                    "-n",
                    NAMESPACE,
                    "--timeout=5s",
                ])
                .is_ok()
            },
        )?;
        sla.arm();

        eprintln!("\n==> the control plane now launches executor {new_id}: roll it out");
        let started = Instant::now();
        self.plugin(
            "set the new target",
            &["upgrade", "start", "--policy", "demo", "--to", &new_id],
        )?;
        let mut watch = self.plugin_child(&["upgrade", "status", "--policy", "demo", "--watch"])?;
        // The opted-out pod blocks its node until an operator acts: do what an operator would, once
        // the rest is done.
        let forced = self.wait_for_operator(&client, nodes, &mut watch).await?;
        if let Some(node) = &forced {
            self.blocked()?;
            self.plugin(
                &format!("the operator decides: force {node}"),
                &["force", node, "--include-opted-out", "--yes"],
            )?;
            watch = self.plugin_child(&["upgrade", "status", "--policy", "demo", "--watch"])?;
        }
        let upgraded = wait_upgraded(&client, nodes, &new_id, Duration::from_secs(900)).await?;
        let took = started.elapsed();
        let _ = watch.wait_timeout(Duration::from_secs(10));
        let _ = watch.kill();

        self.summary(&client, &sla, took, upgraded, nodes, forced.as_deref())
            .await?;

        eprintln!(
            "\nThe cluster, the controller and the simulated executors keep running. Next:\n  export KUBECONFIG={}\n  \
             PATH=$PWD/target/debug:$PATH kubectl k8sm upgrade report -o markdown\n  cargo xtask kubectl get events -n demo \
             --field-selector reason=Evicted\n  cargo xtask kubectl get eup demo -o yaml\n  cargo xtask cluster down",
            self.kubeconfig.display()
        );
        // The durable record of the run: what the Events said, for after they expire.
        wait(
            Duration::from_secs(30),
            "the upgrade report to record the end of the run",
            || {
                self.plugin_output(&["upgrade", "report", "--policy", "demo", "-o", "json"])
                    .is_ok_and(|json| json.contains("\"finished\""))
            },
        )?;
        self.plugin(
            "the run's durable record",
            &["upgrade", "report", "--policy", "demo"],
        )?;
        Ok(())
    }

    /// Waits until every node is upgraded or only nodes blocked by an operator decision remain;
    /// returns such a node.
    async fn wait_for_operator(
        &self,
        client: &Client,
        nodes: usize,
        watch: &mut Child,
    ) -> anyhow::Result<Option<String>> {
        let deadline = Instant::now() + Duration::from_secs(900);
        loop {
            let all: Vec<Node> = Api::<Node>::all(client.clone())
                .list(&ListParams::default())
                .await?
                .items;
            let remaining: Vec<&Node> = all
                .iter()
                .filter(|n| n.labels().contains_key(keys::INCOMPATIBLE_EXECUTOR_LABEL))
                .collect();
            if remaining.is_empty() && all.len() >= nodes {
                return Ok(None);
            }
            let policy: serde_json::Value =
                serde_json::from_str(&self.kubectl_quiet(&["get", "eup", "demo", "-o", "json"])?)?;
            // Blocked for an operator: a pod on it only an operator moves (a node that stalled is
            // Blocked too, but comes back by itself).
            let for_operator: Vec<&str> = policy["status"]["blockedPods"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| {
                    matches!(
                        p["reason"].as_str(),
                        Some("BlockedOptOut" | "BlockedUnmanagedPod")
                    )
                })
                .filter_map(|p| p["node"].as_str())
                .collect();
            let blocked_nodes: Vec<String> = policy["status"]["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|n| n["phase"] == "Blocked")
                .filter_map(|n| n["name"].as_str())
                .filter(|name| for_operator.contains(name))
                .map(str::to_owned)
                .collect();
            if !blocked_nodes.is_empty() && remaining.len() == blocked_nodes.len() {
                let _ = watch.kill();
                let _ = watch.wait();
                eprintln!(
                    "\n==> every other node is upgraded; {} waits for an operator",
                    blocked_nodes.join(", ")
                );
                return Ok(blocked_nodes.into_iter().next());
            }
            if Instant::now() > deadline {
                bail!(
                    "the upgrade did not finish in 15 minutes; see {}",
                    self.state_dir.display()
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    async fn summary(
        &self,
        client: &Client,
        sla: &SlaWatcher,
        took: Duration,
        upgraded: usize,
        nodes: usize,
        forced: Option<&str>,
    ) -> anyhow::Result<()> {
        let events: Vec<Event> = Api::<Event>::namespaced(client.clone(), NAMESPACE)
            .list(&ListParams::default())
            .await?
            .items;
        let count = |reason: &str| {
            events
                .iter()
                .filter(|e| e.reason.as_deref() == Some(reason))
                .count()
        };
        println!("\n── Summary ─────────────────────────────────────────────");
        println!(
            "nodes upgraded:          {upgraded}/{nodes} in {:.0}s",
            took.as_secs_f64()
        );
        println!("pods evicted:            {}", count("Evicted"));
        println!(
            "pods moved by a rollout: {} (one-replica Deployments, new pod Ready before the old one went)",
            count("Moved")
        );
        println!(
            "unmanaged pods deleted:  {} (DeleteAfterTimeout 30s)",
            count("DeletedUnmanagedPod")
        );
        println!(
            "minimum ready pods per workload (bound = min(ceil({THRESHOLD}% × desired), desired − 1)):"
        );
        for record in sla.records() {
            let verdict = if record.min_ready >= record.bound {
                "ok"
            } else {
                "BELOW BOUND"
            };
            println!(
                "  {:<12} {:<28} desired {:>2}  min ready {:>2}  bound {:>2}  {verdict}",
                record.kind, record.name, record.desired, record.min_ready, record.bound
            );
        }
        let violations = sla.violations();
        println!("SLA violations:          {}", violations.len());
        match forced {
            Some(node) => println!(
                "blocked:                 {node}, by the opted-out pod demo/licence-server, until the operator forced it"
            ),
            None => println!("blocked:                 nothing"),
        }
        if !violations.is_empty() {
            bail!("the SLA invariant was violated:\n{}", violations.join("\n"));
        }
        Ok(())
    }

    fn kubectl(&self, what: &str, args: &[&str]) -> anyhow::Result<()> {
        let mut cmd = Command::new(&self.kubectl);
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .current_dir(workspace::root())
            .args(args);
        workspace::run(what, &mut cmd)
    }

    fn kubectl_quiet(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut cmd = Command::new(&self.kubectl);
        cmd.env("KUBECONFIG", &self.kubeconfig).args(args);
        stdout_of(&mut cmd, &format!("kubectl {}", args.join(" ")))
    }

    /// `kubectl k8sm …`: the harness's kubectl with the plugin on PATH, as an operator would run
    /// it.
    fn plugin_command(&self, args: &[&str]) -> Command {
        let path = format!(
            "{}:{}",
            self.bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(&self.kubectl);
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", path)
            .arg("k8sm")
            .args(args);
        cmd
    }

    /// `kubectl k8sm blocked`, which exits with status 3 when it lists pods: here it should.
    fn blocked(&self) -> anyhow::Result<()> {
        let what = "what blocks the upgrade: kubectl k8sm blocked -n";
        eprintln!("==> {what} {NAMESPACE}");
        let status = self
            .plugin_command(&["blocked", "-n", NAMESPACE])
            .status()
            .with_context(|| format!("starting: {what}"))?;
        ensure!(
            status.code() == Some(3),
            "{what} {NAMESPACE} listed no blocked pod ({status}; 3: some)"
        );
        Ok(())
    }

    fn plugin(&self, what: &str, args: &[&str]) -> anyhow::Result<()> {
        workspace::run(
            &format!("{what}: kubectl k8sm {}", args.join(" ")),
            &mut self.plugin_command(args),
        )
    }

    /// `kubectl k8sm …`'s standard output, quietly.
    fn plugin_output(&self, args: &[&str]) -> anyhow::Result<String> {
        stdout_of(
            &mut self.plugin_command(args),
            &format!("kubectl k8sm {}", args.join(" ")),
        )
    }

    fn plugin_child(&self, args: &[&str]) -> anyhow::Result<Child> {
        eprintln!("==> kubectl k8sm {}", args.join(" "));
        self.plugin_command(args)
            .stdin(Stdio::null())
            .spawn()
            .context("starting kubectl k8sm")
    }

    /// Starts a k8sm binary that outlives the demo (`cargo xtask cluster down` stops it).
    fn spawn_background(&self, name: &str, args: &[&str]) -> anyhow::Result<()> {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(self.state_dir.join(format!("{name}.log")))?;
        let child = Command::new(self.bin_dir.join(name))
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        cluster::record_background_pid(name, child.id())?;
        eprintln!(
            "==> started {name} (pid {}), log {}",
            child.id(),
            self.state_dir.join(format!("{name}.log")).display()
        );
        Ok(())
    }
}

fn executor_id(version: &str) -> anyhow::Result<String> {
    Ok(ExecutorIdentity {
        version: version.to_owned(),
        binary_sha256: format!("{:0>64}", version.replace('.', "")),
        flags: vec![("--cluster".into(), "demo".into())],
        static_pods: vec![],
    }
    .executor_id()?
    .to_string())
}

async fn wait_upgraded(
    client: &Client,
    nodes: usize,
    new_id: &str,
    timeout: Duration,
) -> anyhow::Result<usize> {
    let deadline = Instant::now() + timeout;
    loop {
        let all = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await?
            .items;
        let upgraded = all
            .iter()
            .filter(|n| {
                n.annotations()
                    .get(keys::EXECUTOR_ID_ANNOTATION)
                    .map(String::as_str)
                    == Some(new_id)
            })
            .filter(|n| !n.labels().contains_key(keys::INCOMPATIBLE_EXECUTOR_LABEL))
            .count();
        if upgraded >= nodes {
            return Ok(upgraded);
        }
        if Instant::now() > deadline {
            bail!("only {upgraded}/{nodes} nodes were upgraded after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Runs `cmd` quietly: its standard output, or its standard error as the failure of `what`.
fn stdout_of(cmd: &mut Command, what: &str) -> anyhow::Result<String> {
    let output = cmd.output().with_context(|| format!("running {what}"))?;
    if !output.status.success() {
        bail!("{what}: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn wait(timeout: Duration, what: &str, mut ready: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while !ready() {
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(())
}

trait WaitTimeout {
    fn wait_timeout(
        &mut self,
        timeout: Duration,
    ) -> std::io::Result<Option<std::process::ExitStatus>>;
}

impl WaitTimeout for Child {
    fn wait_timeout(
        &mut self,
        timeout: Duration,
    ) -> std::io::Result<Option<std::process::ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() > deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
