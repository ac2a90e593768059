//! One run per tool on the same cluster and the same workload: k8sm's controller, then sequential `kubectl drain`
//! with and without PodDisruptionBudgets. Each run gets a fresh namespace and nodes back on the old executor.

use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use k8sm_api::{
    ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, MaxConcurrentNodes, UnmanagedPodPolicy,
    UnmanagedPods, keys,
};
use k8sm_testcluster::node_name;

use crate::env::{BenchCluster, free_port, http_get};
use crate::process::ChildProcess;
use crate::recorder::Recorder;
use crate::requests::{controller_eviction_seconds, controller_requests_by_verb, metric_sum};
use crate::results::{ControllerCost, Run, Tool};
use crate::stats::percentile;
use crate::timeline::Timeline;
use crate::workload::Workload;

/// What every run shares.
pub struct RunConfig<'a> {
    pub workload: &'a Workload,
    pub nodes: usize,
    pub threshold: u8,
    pub max_concurrent_nodes: MaxConcurrentNodes,
    pub drain_timeout: Duration,
    /// How long k8sm may take to upgrade every node.
    pub upgrade_timeout: Duration,
    /// Owners whose ready pods over time are kept for the charts.
    pub charted: Vec<String>,
}

const POLICY: &str = "bench";

pub async fn run(bench: &mut BenchCluster, cfg: &RunConfig<'_>, tool: Tool) -> anyhow::Result<Run> {
    match tool {
        Tool::K8sm => k8sm(bench, cfg).await,
        Tool::DrainPdb => drain(bench, cfg, true).await,
        Tool::Drain => drain(bench, cfg, false).await,
    }
}

/// A fresh namespace with the workload (and PDBs), every pod Ready, every node on the old executor: the recorder is
/// watching, not yet armed.
async fn prepare(
    bench: &mut BenchCluster,
    cfg: &RunConfig<'_>,
    tool: Tool,
) -> anyhow::Result<Recorder> {
    for other in [Tool::K8sm, Tool::DrainPdb, Tool::Drain] {
        bench.delete_namespace(&namespace(other)).await?;
    }
    bench.reset_nodes().await?;
    let ns = namespace(tool);
    bench.create_namespace(&ns).await?;
    cfg.workload
        .create(
            &bench.client,
            &ns,
            node_name,
            (tool == Tool::DrainPdb).then_some(cfg.threshold),
        )
        .await
        .context("creating the workload")?;
    let timeline = Timeline::new(
        cfg.threshold,
        cfg.workload
            .owners
            .iter()
            .map(|o| (o.name.as_str(), o.kind.as_str(), o.replicas)),
        cfg.workload.unmanaged.iter().map(|u| u.name.as_str()),
    );
    let recorder = Recorder::start(&bench.client, &ns, &bench.new_id, timeline);
    let pods = cfg.workload.pods();
    let started = Instant::now();
    recorder
        .wait_for(
            "every pod of the workload is Ready",
            Duration::from_secs(900),
            |t| {
                t.ready_pods() == pods
                    && t.owners_fully_ready()
                    && t.nodes() == cfg.nodes
                    && t.all_nodes_match(false)
            },
            || bench.check_running(),
        )
        .await?;
    eprintln!(
        "==> {}: {pods} pods Ready in {:.0}s",
        tool.label(),
        started.elapsed().as_secs_f64()
    );
    // A Deployment of the realistic fleet is mid-rollout when the tool starts.
    cfg.workload.start_rollout(&bench.client, &ns).await?;
    Ok(recorder)
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
    run
}

async fn k8sm(bench: &mut BenchCluster, cfg: &RunConfig<'_>) -> anyhow::Result<Run> {
    let recorder = prepare(bench, cfg, Tool::K8sm).await?;
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let log = bench.work_dir.join("controller.log");
    let _ = std::fs::remove_file(&log);
    let mut controller = ChildProcess::spawn(
        "k8sm-controller",
        &bench.bin_dir.join("k8sm-controller"),
        &[
            format!("--kubeconfig={}", bench.cluster.kubeconfig().display()),
            format!("--metrics-addr={addr}"),
            "--identity=k8sm-bench".into(),
        ],
        // One trace line per request, to count the controller's own requests by verb.
        &[
            (
                "RUST_LOG",
                "info,kube=warn,kube_client::client::builder=debug",
            ),
            ("NO_COLOR", "1"),
        ],
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

    let before = bench.apiserver_requests().await?;
    let cpu_before = controller.sample()?;
    let from = Utc::now();
    recorder.timeline().arm(recorder.now());
    let policies: Api<ExecutorUpgradePolicy> = Api::all(bench.client.clone());
    let spec = ExecutorUpgradePolicySpec {
        target_executor_id: Some(bench.new_id.clone()),
        max_concurrent_nodes: cfg.max_concurrent_nodes,
        owner_health_threshold: cfg.threshold,
        unmanaged_pods: UnmanagedPods {
            policy: UnmanagedPodPolicy::Delete,
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
    let after = bench.apiserver_requests().await?;
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
    if let Err(error) = upgraded {
        run.notes.push(format!("incomplete: {error:#}"));
    }
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    let mean_ms = |name: &str| {
        let count = metric_sum(&metrics, &format!("{name}_count")).filter(|n| *n > 0.0)?;
        Some(metric_sum(&metrics, &format!("{name}_sum"))? / count * 1000.0)
    };
    let plans = metric_sum(&metrics, "k8sm_planner_duration_seconds_count");
    let eviction_calls = controller_eviction_seconds(&log_text);
    run.controller = Some(ControllerCost {
        cpu_seconds_total: cpu_after.cpu_seconds,
        cpu_seconds_upgrade: cpu_after.cpu_seconds - cpu_before.cpu_seconds,
        peak_rss_bytes: cpu_after.peak_rss_bytes,
        requests: controller_requests_by_verb(&log_text, from, to),
        evictions_metric: metric_sum(&metrics, "k8sm_evictions_total"),
        plan_mean_ms: mean_ms("k8sm_planner_duration_seconds"),
        plans,
        reconcile_mean_ms: mean_ms("k8sm_reconcile_duration_seconds"),
        eviction_call_p50_s: percentile(&eviction_calls, 50.0),
        eviction_call_p99_s: percentile(&eviction_calls, 99.0),
        eviction_calls: eviction_calls.len(),
    });
    run.apiserver_requests = after.requests_since(&before);
    run.apiserver_eviction_mean_s = after.eviction_mean_since(&before);
    if let Some(evictions) = run.controller.as_ref().and_then(|c| c.evictions_metric) {
        run.notes.push(format!(
            "the controller counted {evictions:.0} evictions (k8sm_evictions_total); the watch saw {} \
             disruptions, unmanaged pod deletions included",
            run.disruptions
        ));
    }
    Ok(output(&recorder, cfg, run, settle_s))
}

async fn drain(bench: &mut BenchCluster, cfg: &RunConfig<'_>, pdb: bool) -> anyhow::Result<Run> {
    let tool = if pdb { Tool::DrainPdb } else { Tool::Drain };
    let recorder = prepare(bench, cfg, tool).await?;
    if pdb {
        wait_budgets_observed(bench, &namespace(tool), cfg.workload.owners.len()).await?;
    }
    let log = bench.work_dir.join(format!("{}-kubectl.log", tool.slug()));
    let _ = std::fs::remove_file(&log);
    let nodes: Api<Node> = Api::all(bench.client.clone());
    let timeout = format!("--timeout={}s", cfg.drain_timeout.as_secs().max(1));
    let before = bench.apiserver_requests().await?;
    {
        let mut timeline = recorder.timeline();
        let now = recorder.now();
        timeline.arm(now);
        timeline.start(now);
    }
    let mut forced = 0;
    let mut failure = None;
    for index in 0..cfg.nodes {
        let name = node_name(index);
        if let Err(error) = drain_node(bench, &nodes, &log, &name, &timeout, &mut forced).await {
            failure = Some(error.context(format!("upgrading {name}")));
            break;
        }
        bench.check_running()?;
    }
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
    let after = bench.apiserver_requests().await?;
    let settle_s = if upgraded.is_ok() {
        settle(&recorder, end).await
    } else {
        None
    };
    recorder.timeline().finish(recorder.now());
    let mut run = Run::from_timeline(tool, &recorder.timeline(), None);
    if let Err(error) = upgraded {
        run.notes.push(format!("incomplete: {error:#}"));
    }
    run.apiserver_requests = after.requests_since(&before);
    run.apiserver_eviction_mean_s = after.eviction_mean_since(&before);
    run.forced_nodes = Some(forced);
    if pdb && forced > 0 {
        run.notes.push(format!(
            "{forced} of {} nodes could not be drained through the Eviction API within {}s (a budget at the SLA \
             bound allowed no disruption for that long, e.g. while replacements were not Ready) and were drained \
             with `--disable-eviction`, as an operator must",
            cfg.nodes,
            cfg.drain_timeout.as_secs()
        ));
    }
    Ok(output(&recorder, cfg, run, settle_s))
}

/// Drains one node as an operator would with kubectl, restarts its executor and uncordons it.
async fn drain_node(
    bench: &BenchCluster,
    nodes: &Api<Node>,
    log: &std::path::Path,
    name: &str,
    timeout: &str,
    forced: &mut usize,
) -> anyhow::Result<()> {
    let drain_args = [
        "drain",
        name,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--force",
        timeout,
    ];
    let drained = bench.kubectl(log)?.args(drain_args).status().await?;
    if !drained.success() {
        *forced += 1;
        let status = bench
            .kubectl(log)?
            .args(drain_args)
            .arg("--disable-eviction")
            .status()
            .await?;
        anyhow::ensure!(
            status.success(),
            "kubectl drain --disable-eviction failed ({status})"
        );
    }
    // The executor restarts in its new version (the simulated executors obey the kamikaze annotation).
    let patch = json!({ "metadata": { "annotations": { keys::KAMIKAZE_ANNOTATION: Utc::now().to_rfc3339() } } });
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let node = nodes.get(name).await?;
        let annotations = node.annotations();
        if annotations.get(keys::EXECUTOR_ID_ANNOTATION) == Some(&bench.new_id)
            && !annotations.contains_key(keys::KAMIKAZE_ANNOTATION)
        {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the executor did not restart in 2 minutes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = bench
        .kubectl(log)?
        .args(["uncordon", name])
        .status()
        .await?;
    anyhow::ensure!(status.success(), "kubectl uncordon failed ({status})");
    Ok(())
}

/// Evictions are refused until the disruption controller has computed a budget's status.
async fn wait_budgets_observed(bench: &BenchCluster, ns: &str, count: usize) -> anyhow::Result<()> {
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(bench.client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let list = budgets.list(&ListParams::default()).await?;
        let observed = list
            .items
            .iter()
            .filter(|b| {
                b.status.as_ref().is_some_and(|s| {
                    s.observed_generation.is_some() && s.current_healthy >= s.expected_pods
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
