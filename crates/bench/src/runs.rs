//! One run of one tool on a fresh cluster: k8sm's controller, `kubectl drain` of C nodes at once
//! with PodDisruptionBudgets at the bound, or sequential `kubectl drain` with and without them.
//!
//! The tools act under identities of their own (see [`crate::audit`]): k8sm's controller as
//! [`audit::CONTROLLER_USER`]; the baselines' operator, its kubectl and its executor restarts, as
//! [`audit::OPERATOR_USER`]. The harness (workload, watches, waits) acts as the cluster's admin.

use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use futures::StreamExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::await_condition;

use k8sm_api::{
    ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, MaxConcurrentNodes, UnmanagedPodPolicy,
    UnmanagedPods, keys,
};
use k8sm_e2e::crash_loop::CrashLoop;
use k8sm_testcluster::node_name;

use crate::audit;
use crate::env::{BenchCluster, free_port, http_get};
use crate::mess;
use crate::process::ChildProcess;
use crate::recorder::Recorder;
use crate::requests::{histogram_quantiles, metric_sum};
use crate::results::{ControllerCost, Run, Tool};
use crate::timeline::Timeline;
use crate::workload::Workload;

/// The controller's histogram of its reaction: replacement Ready observed → next eviction of that
/// owner.
pub const REACTION_METRIC: &str = "k8sm_eviction_reaction_seconds";
/// The controller's histogram of the stages of a pass, and its stages in their order.
const STAGE_METRIC: &str = "k8sm_reconcile_stage_duration_seconds";
const STAGES: [&str; 7] = [
    "pace", "settle", "observe", "plan", "act", "events", "status",
];

/// What every run shares.
pub struct RunConfig<'a> {
    pub workload: &'a Workload,
    pub nodes: usize,
    pub threshold: u8,
    pub max_concurrent_nodes: MaxConcurrentNodes,
    /// `max_concurrent_nodes` resolved for the fleet: the parallel baseline's workers.
    pub concurrency: usize,
    pub drain_timeout: Duration,
    /// How long k8sm may take to upgrade every node.
    pub upgrade_timeout: Duration,
    /// Owners whose ready pods over time are kept for the charts.
    pub charted: Vec<String>,
    /// Extra flags of k8sm-controller (`--k8sm-arg`), noted in each of its runs.
    pub controller_args: Vec<String>,
}

const POLICY: &str = "bench";

pub async fn run(bench: &mut BenchCluster, cfg: &RunConfig<'_>, tool: Tool) -> anyhow::Result<Run> {
    match tool {
        Tool::K8sm => k8sm(bench, cfg).await,
        Tool::DrainPdbParallel | Tool::DrainPdb | Tool::Drain => drain(bench, cfg, tool).await,
    }
}

/// The requests of `user` between `from` and `to`, from the bench cluster's audit log.
fn tool_requests(
    bench: &BenchCluster,
    user: &str,
    from: chrono::DateTime<Utc>,
    to: chrono::DateTime<Utc>,
    run: &mut Run,
) {
    match audit::count_file(&bench.audit_log, user, from, to) {
        Ok(requests) => run.tool_requests = Some(requests),
        Err(error) => run
            .notes
            .push(format!("the tool's requests are unknown: {error:#}")),
    }
}

/// A fresh namespace with the workload (and PDBs), every pod Ready, every node on the old executor:
/// the recorder is watching, not yet armed. A messy fleet's mess is made too: its crash loops go on
/// while the returned guard lives.
async fn prepare(
    bench: &mut BenchCluster,
    cfg: &RunConfig<'_>,
    tool: Tool,
) -> anyhow::Result<(Recorder, Option<CrashLoop>)> {
    // Each run has a fresh cluster: its nodes run the old executor, no namespace of another run
    // exists.
    let ns = namespace(tool);
    let workload = cfg.workload;
    bench.create_namespace(&ns).await?;
    mess::kill_nodes(
        &bench.cluster,
        &bench.client,
        workload,
        &bench.old_id,
        node_name,
    )
    .await
    .context("killing the messy fleet's dead nodes")?;
    let crash_loop = workload
        .messy
        .is_some()
        .then(|| mess::crash_loop(&bench.client, &ns));
    let budgets = has_budgets(tool);
    workload
        .create(
            &bench.client,
            &ns,
            node_name,
            budgets.then_some(cfg.threshold),
        )
        .await
        .context("creating the workload")?;
    let mut timeline = Timeline::new(
        cfg.threshold,
        workload
            .owners
            .iter()
            .map(|o| (o.name.as_str(), o.kind.as_str(), o.replicas)),
        workload.unmanaged.iter().map(|u| u.name.as_str()),
    );
    let crashing: Vec<&str> = workload
        .owners
        .iter()
        .filter(|o| o.crash_looping)
        .map(|o| o.name.as_str())
        .collect();
    timeline.waive(&crashing);
    timeline.set_unfinishable(workload.unfinishable().into_iter().map(node_name));
    let recorder = Recorder::start(&bench.client, &ns, &bench.new_id, timeline);
    let ready = workload.pods_ready_when_created();
    let started = Instant::now();
    recorder
        .wait_for(
            "every pod of the workload is Ready",
            fleet_ready_timeout(workload.pods()),
            |t| {
                t.ready_pods() == ready
                    && t.owners_fully_ready()
                    && t.nodes() == cfg.nodes
                    && t.all_nodes_match(false)
            },
            || bench.check_running(),
        )
        .await?;
    eprintln!(
        "==> {}: {ready} pods Ready in {:.0}s",
        tool.label(),
        started.elapsed().as_secs_f64()
    );
    if budgets {
        wait_budgets_observed(bench, &ns, workload.owners.len(), &crashing).await?;
    }
    mess::finish(&bench.client, &ns, workload, node_name)
        .await
        .context("making the messy fleet's stuck rollouts and zombies")?;
    // Replacements crash-loop from their start, not for an hour.
    let crash_loop = crash_loop.map(|old| {
        drop(old);
        mess::crash_loop_replacements(&bench.client, &ns)
    });
    // A Deployment of the realistic fleet is mid-rollout when the tool starts.
    workload.start_rollout(&bench.client, &ns).await?;
    Ok((recorder, crash_loop))
}

/// Whether the tool's fleet has PodDisruptionBudgets at the bound: every tool's but the baseline
/// that is drain without them, so that k8sm and drain face the same budgets (and k8sm their 429s),
/// as on real clusters.
fn has_budgets(tool: Tool) -> bool {
    tool != Tool::Drain
}

fn namespace(tool: Tool) -> String {
    format!("bench-{}", tool.slug())
}

/// Waits (at most 2 minutes) until every owner is fully Ready again: seconds after `end`.
async fn settle(recorder: &Recorder, end: f64) -> Option<f64> {
    recorder
        .wait_for(
            "every owner is fully Ready again",
            Duration::from_secs(120),
            Timeline::owners_fully_ready,
            || Ok(()),
        )
        .await
        .ok()
        .map(|()| recorder.now() - end)
}

fn output(recorder: &Recorder, cfg: &RunConfig<'_>, mut run: Run, settle_s: Option<f64>) -> Run {
    let timeline = recorder.timeline();
    let start = timeline
        .makespan()
        .map(|(s, _)| s)
        .or(timeline.armed_at())
        .unwrap_or_default();
    run.series = cfg
        .charted
        .iter()
        .map(|app| {
            let points = timeline
                .series(app)
                .into_iter()
                .map(|(t, n)| (t - start, n))
                .collect();
            (app.clone(), points)
        })
        .collect();
    run.settle_s = settle_s;
    run.node_phases = timeline.node_phases(run.concurrency.unwrap_or(1));
    run
}

async fn k8sm(bench: &mut BenchCluster, cfg: &RunConfig<'_>) -> anyhow::Result<Run> {
    let (recorder, _crash_loop) = prepare(bench, cfg, Tool::K8sm).await?;
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let log = bench.work_dir.join("controller.log");
    let _ = std::fs::remove_file(&log);
    let kubeconfig = user_kubeconfig(bench, audit::CONTROLLER_USER)?;
    let mut controller = ChildProcess::spawn(
        "k8sm-controller",
        &bench.bin_dir.join("k8sm-controller"),
        &[
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--metrics-addr={addr}"),
            "--identity=k8sm-bench".into(),
        ]
        .into_iter()
        .chain(cfg.controller_args.iter().cloned())
        .collect::<Vec<String>>(),
        // The controller's allocator settings, as its image sets them.
        &[("RUST_LOG", "info,kube=warn"), ("NO_COLOR", "1")]
            .into_iter()
            .chain(k8sm_controller::allocator::missing())
            .collect::<Vec<_>>(),
        &log,
    )?;
    let deadline = Instant::now() + Duration::from_secs(180);
    while !matches!(http_get(addr, "/readyz").await, Ok((200, _))) {
        controller.check_running()?;
        anyhow::ensure!(
            Instant::now() < deadline,
            "the controller is not ready after 3 minutes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let cpu_before = controller.sample()?;
    let from = Utc::now();
    recorder.timeline().arm(recorder.now());
    let policies: Api<ExecutorUpgradePolicy> = Api::all(bench.client.clone());
    let spec = ExecutorUpgradePolicySpec {
        target_executor_id: Some(bench.new_id.clone()),
        max_concurrent_nodes: cfg.max_concurrent_nodes,
        owner_health_threshold: cfg.threshold,
        unmanaged_pods: UnmanagedPods {
            policy: cfg
                .workload
                .messy
                .as_ref()
                .map_or(UnmanagedPodPolicy::Delete, |m| m.unmanaged_policy),
            timeout: None,
        },
        ..ExecutorUpgradePolicySpec::default()
    };
    policies
        .create(
            &PostParams::default(),
            &ExecutorUpgradePolicy::new(POLICY, spec),
        )
        .await
        .context("creating the policy")?;

    let upgraded = recorder
        .wait_for(
            "every node runs the new executor",
            cfg.upgrade_timeout,
            |t| t.makespan().is_some(),
            || {
                controller.check_running()?;
                bench.check_running()
            },
        )
        .await;
    let end = recorder.now();
    let to = Utc::now();
    let cpu_after = controller.sample()?;
    let metrics = http_get(addr, "/metrics")
        .await
        .map(|(_, body)| body)
        .unwrap_or_default();
    let settle_s = if upgraded.is_ok() {
        settle(&recorder, end).await
    } else {
        None
    };
    recorder.timeline().finish(recorder.now());
    controller.stop();
    let _ = policies.delete(POLICY, &DeleteParams::default()).await;

    let mut run = Run::from_timeline(Tool::K8sm, &recorder.timeline(), None);
    run.concurrency = Some(cfg.concurrency);
    if let Err(error) = upgraded {
        run.notes.push(format!("incomplete: {error:#}"));
    }
    if !cfg.controller_args.is_empty() {
        run.notes.push(format!(
            "k8sm-controller ran with {}",
            cfg.controller_args.join(" ")
        ));
    }
    let mean_ms = |name: &str| {
        let count = metric_sum(&metrics, &format!("{name}_count")).filter(|n| *n > 0.0)?;
        Some(metric_sum(&metrics, &format!("{name}_sum"))? / count * 1000.0)
    };
    let plans = metric_sum(&metrics, "k8sm_planner_duration_seconds_count");
    run.controller = Some(ControllerCost {
        cpu_seconds_total: cpu_after.cpu_seconds,
        cpu_seconds_upgrade: cpu_after.cpu_seconds - cpu_before.cpu_seconds,
        peak_rss_bytes: cpu_after.peak_rss_bytes,
        evictions_metric: metric_sum(&metrics, "k8sm_evictions_total"),
        plan_mean_ms: mean_ms("k8sm_planner_duration_seconds"),
        plans,
        reconcile_mean_ms: mean_ms("k8sm_reconcile_duration_seconds"),
        reaction: histogram_quantiles(&metrics, REACTION_METRIC),
        stage_mean_ms: STAGES
            .iter()
            .filter_map(|stage| {
                let labelled = |part: &str| format!("{STAGE_METRIC}_{part}{{stage=\"{stage}\"}}");
                let count = metric_sum(&metrics, &labelled("count")).filter(|n| *n > 0.0)?;
                let mean = metric_sum(&metrics, &labelled("sum"))? / count * 1000.0;
                Some(((*stage).to_owned(), mean))
            })
            .collect(),
    });
    // The controller has stopped: its watches have ended and are in the log.
    tool_requests(bench, audit::CONTROLLER_USER, from, to, &mut run);
    if let Some(evictions) = run.controller.as_ref().and_then(|c| c.evictions_metric) {
        run.notes.push(format!(
            "the controller counted {evictions:.0} evictions (k8sm_evictions_total); the watch saw {} \
             disruptions, unmanaged pod deletions included",
            run.disruptions
        ));
    }
    Ok(output(&recorder, cfg, run, settle_s))
}

async fn drain(bench: &mut BenchCluster, cfg: &RunConfig<'_>, tool: Tool) -> anyhow::Result<Run> {
    let pdb = tool != Tool::Drain;
    let concurrency = tool.concurrency(cfg.concurrency).max(1);
    let (recorder, _crash_loop) = prepare(bench, cfg, tool).await?;
    let messy = cfg.workload.messy.is_some();
    let operator = Operator::new(bench, tool, cfg.drain_timeout, messy).await?;
    let from = Utc::now();
    {
        let mut timeline = recorder.timeline();
        let now = recorder.now();
        timeline.arm(now);
        timeline.start(now);
    }
    // C workers: the next node starts as soon as one is done (buffer_unordered keeps C drains in
    // flight).
    let mut drains = futures::stream::iter(0..cfg.nodes)
        .map(|index| operator.upgrade(node_name(index)))
        .buffer_unordered(concurrency);
    let mut failure = None;
    while let Some(result) = drains.next().await {
        if let Err(error) = result {
            failure = Some(error);
            break;
        }
    }
    // Dropping the rest stops their kubectl processes (kill_on_drop).
    drop(drains);
    let upgraded = match failure {
        Some(error) => Err(error),
        None => {
            recorder
                .wait_for(
                    "the watch shows every node upgraded",
                    Duration::from_secs(60),
                    |t| t.makespan().is_some(),
                    || Ok(()),
                )
                .await
        }
    };
    let end = recorder.now();
    let to = Utc::now();
    let settle_s = if upgraded.is_ok() {
        settle(&recorder, end).await
    } else {
        None
    };
    recorder.timeline().finish(recorder.now());
    let mut run = Run::from_timeline(tool, &recorder.timeline(), None);
    run.concurrency = Some(concurrency);
    if let Err(error) = upgraded {
        run.notes.push(format!("incomplete: {error:#}"));
    }
    tool_requests(bench, audit::OPERATOR_USER, from, to, &mut run);
    let forced = operator.forced.load(std::sync::atomic::Ordering::Relaxed);
    run.forced_nodes = Some(forced);
    let left = operator.left.lock().map(|l| l.clone()).unwrap_or_default();
    if !left.is_empty() {
        run.notes.push(format!(
            "{} of {} nodes were left to an operator, cordoned, as a drain script leaves them: {}",
            left.len(),
            cfg.nodes,
            left.join("; ")
        ));
    }
    if pdb && forced > 0 {
        run.notes.push(format!(
            "{forced} of {} nodes could not be drained through the Eviction API within `--timeout={}s` and were \
             drained with `--disable-eviction`, as an operator must (see {})",
            cfg.nodes,
            cfg.drain_timeout.as_secs(),
            operator.log.display()
        ));
    }
    Ok(output(&recorder, cfg, run, settle_s))
}

/// A kubeconfig of one of the tools' users.
fn user_kubeconfig(bench: &BenchCluster, user: &str) -> anyhow::Result<std::path::PathBuf> {
    bench
        .cluster
        .user_kubeconfig(user)
        .with_context(|| format!("the bench cluster has no user {user}"))
}

/// The baselines' operator: what a kured or system-upgrade-controller user's script does per node,
/// as user [`audit::OPERATOR_USER`].
struct Operator {
    client: kube::Client,
    kubectl: std::path::PathBuf,
    kubeconfig: std::path::PathBuf,
    log: std::path::PathBuf,
    timeout: String,
    new_id: String,
    /// Nodes whose drain through the Eviction API failed (hit `--timeout`).
    forced: std::sync::atomic::AtomicUsize,
    /// A messy fleet: drain as SREs run it (no `--force`, `--skip-wait-for-delete-timeout`), and a
    /// node that fails is left as it is, with why, instead of forced.
    messy: bool,
    left: std::sync::Mutex<Vec<String>>,
}

impl Operator {
    async fn new(
        bench: &BenchCluster,
        tool: Tool,
        timeout: Duration,
        messy: bool,
    ) -> anyhow::Result<Self> {
        let kubeconfig = user_kubeconfig(bench, audit::OPERATOR_USER)?;
        let config = kube::Config::from_custom_kubeconfig(
            Kubeconfig::read_from(&kubeconfig)?,
            &KubeConfigOptions::default(),
        )
        .await?;
        let log = bench.work_dir.join(format!("{}-kubectl.log", tool.slug()));
        let _ = std::fs::remove_file(&log);
        Ok(Self {
            client: kube::Client::try_from(config)?,
            kubectl: bench.cluster.binaries().kubectl.clone(),
            kubeconfig,
            log,
            timeout: format!("--timeout={}s", timeout.as_secs().max(1)),
            new_id: bench.new_id.clone(),
            forced: std::sync::atomic::AtomicUsize::new(0),
            messy,
            left: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// `kubectl <args>` as the operator, its output appended to the log, stopped if its future is
    /// dropped.
    async fn kubectl(&self, args: &[&str]) -> anyhow::Result<std::process::ExitStatus> {
        let out = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&self.log)?;
        Ok(tokio::process::Command::new(&self.kubectl)
            .env("KUBECONFIG", &self.kubeconfig)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .status()
            .await?)
    }

    /// Drains node `name` (cordon included), restarts its executor, waits for it and uncordons the
    /// node.
    async fn upgrade(&self, name: String) -> anyhow::Result<()> {
        self.drain(&name)
            .await
            .with_context(|| format!("upgrading {name}"))
    }

    /// A node given up on: left cordoned, as a script that goes on to the next node leaves it.
    fn leave(&self, name: &str, why: &str) {
        if let Ok(mut left) = self.left.lock() {
            left.push(format!("{name} ({why})"));
        }
    }

    async fn drain(&self, name: &str) -> anyhow::Result<()> {
        let mut drain_args = vec![
            "drain",
            name,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            &self.timeout,
        ];
        drain_args.push(if self.messy {
            "--skip-wait-for-delete-timeout=60"
        } else {
            "--force"
        });
        if !self.kubectl(&drain_args).await?.success() {
            if self.messy {
                self.leave(name, "kubectl drain failed");
                return Ok(());
            }
            self.forced
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut forced = drain_args.to_vec();
            forced.push("--disable-eviction");
            let status = self.kubectl(&forced).await?;
            anyhow::ensure!(
                status.success(),
                "kubectl drain --disable-eviction failed ({status})"
            );
        }
        // The executor restarts in its new version (the simulated executors obey the kamikaze
        // annotation).
        let nodes: Api<Node> = Api::all(self.client.clone());
        let patch = json!({ "metadata": { "annotations": { keys::KAMIKAZE_ANNOTATION: Utc::now().to_rfc3339() } } });
        nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        // Waits as `kubectl wait` would: one watch of the node.
        let new_id = self.new_id.clone();
        let restarted = move |node: Option<&Node>| {
            node.is_some_and(|node| {
                let annotations = node.annotations();
                annotations.get(keys::EXECUTOR_ID_ANNOTATION) == Some(&new_id)
                    && !annotations.contains_key(keys::KAMIKAZE_ANNOTATION)
            })
        };
        let restart = tokio::time::timeout(
            Duration::from_secs(120),
            await_condition(nodes, name, restarted),
        )
        .await;
        if self.messy && restart.is_err() {
            self.leave(name, "the executor did not restart in 2 minutes");
            return Ok(());
        }
        restart.context("the executor did not restart in 2 minutes")??;
        let status = self.kubectl(&["uncordon", name]).await?;
        anyhow::ensure!(status.success(), "kubectl uncordon failed ({status})");
        Ok(())
    }
}

/// Evictions are refused until the disruption controller has computed a budget's status. The
/// budgets of `broken` owners (named as their owners) never see their pods healthy.
async fn wait_budgets_observed(
    bench: &BenchCluster,
    ns: &str,
    count: usize,
    broken: &[&str],
) -> anyhow::Result<()> {
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(bench.client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let list = budgets.list(&ListParams::default()).await?;
        let observed = list
            .items
            .iter()
            .filter(|b| {
                let broken = broken.contains(&b.name_any().as_str());
                b.status.as_ref().is_some_and(|s| {
                    s.observed_generation.is_some()
                        && (s.current_healthy >= s.expected_pods
                            || broken && s.expected_pods.is_some_and(|n| n > 0))
                })
            })
            .count();
        if observed == count {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{observed} of {count} PodDisruptionBudgets observed after 5 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// How long the fleet may take to become Ready before a run or the calibration: 15 minutes per
/// 15,000 pods, 15 minutes at least, since creation time grows with the fleet and with the
/// machine's load (bench/results/README.md, "Fleet creation time").
pub(crate) fn fleet_ready_timeout(pods: usize) -> Duration {
    let per_15000_pods = u32::try_from(pods.div_ceil(15_000).max(1)).unwrap_or(u32::MAX);
    Duration::from_secs(900).saturating_mul(per_15000_pods)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_larger_fleet_may_take_longer_to_become_ready() {
        let minutes = |pods| fleet_ready_timeout(pods).as_secs() / 60;
        assert_eq!(minutes(600), 15);
        assert_eq!(minutes(15_000), 15);
        assert_eq!(minutes(30_000), 30);
        assert_eq!(minutes(30_001), 45);
    }
}
