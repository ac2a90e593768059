//! The command line and the whole invocation: cluster, runs, JSON summary, charts, report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use k8sm_api::MaxConcurrentNodes;

use crate::calibrate::{CONTROLLER_CALL_CONCURRENCY, eviction_throughput};
use crate::env::BenchCluster;
use crate::results::{Run, Scenario, Summary, Tool};
use crate::runs::{self, RunConfig};
use crate::stats::concurrency_bound;
use crate::workload::{Kind, Realism, Shape, Workload};
use crate::{charts, machine, report};

/// k8sm against sequential `kubectl drain` on the real local cluster; writes bench/results/<scenario>.md.
#[derive(clap::Parser, Debug, Clone)]
#[command(name = "k8sm-bench", args_override_self = true)]
pub struct Args {
    /// KWOK nodes.
    #[arg(long, default_value_t = 100)]
    pub nodes: usize,
    /// Pods of owners and unmanaged pods (default: 30 per node).
    #[arg(long)]
    pub pods: Option<usize>,
    /// How long after scheduling a pod becomes Ready (KWOK stage delay).
    #[arg(long, default_value = "2s")]
    pub pod_ready_delay: humantime::Duration,
    /// How long a simulated executor takes to restart after kamikaze.
    #[arg(long, default_value = "2s")]
    pub restart_delay: humantime::Duration,
    /// The policy's ownerHealthThreshold (and the SLA bound of every tool), percent.
    #[arg(long, default_value_t = 90)]
    pub threshold: u8,
    /// The policy's maxConcurrentNodes: a count or a percentage.
    #[arg(long, default_value = "20%")]
    pub max_concurrent_nodes: MaxConcurrentNodes,
    /// Baselines: how long `kubectl drain` may try evictions on one node before the operator falls back to
    /// `--disable-eviction`.
    #[arg(long, default_value = "10s")]
    pub drain_timeout: humantime::Duration,
    /// How long k8sm may take to upgrade every node before its run is reported as incomplete (default: 10 minutes,
    /// or 6 s per node on larger fleets). The report of an incomplete run still has the controller's cost so far.
    #[arg(long)]
    pub upgrade_timeout: Option<humantime::Duration>,
    /// Which tools to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "k8sm,drain-pdb,drain")]
    pub tools: Vec<String>,
    /// Scenario name (file names of the report); default from the sizes, e.g. n100-p3000.
    #[arg(long)]
    pub name: Option<String>,
    /// Where reports go.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Where the cluster's files and the runs' logs go (default target/bench/<scenario>).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Directory of the k8sm-controller and k8sm-agent binaries (default: next to this one).
    #[arg(long)]
    pub bin_dir: Option<PathBuf>,
    /// TrueType font for the charts' text.
    #[arg(
        long,
        default_value = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    )]
    pub font: PathBuf,
    /// Only re-render the report and charts of an earlier invocation from its JSON summary (no charts of ready pods).
    #[arg(long)]
    pub render_only: bool,
    /// A named scenario whose arguments fill the defaults (explicit arguments win): owners-pace, restarts-pace.
    #[arg(long, value_parser = crate::presets::parse_name)]
    pub scenario: Option<String>,
    /// The fleet: `simple` is the earlier reports' (one readiness delay, no grace period, no requests);
    /// `realistic` draws each owner's readiness delay in [--pod-ready-delay, --ready-delay-max] and requests,
    /// and adds grace periods, bunched owners, a rollout and an ordered StatefulSet.
    #[arg(long, value_enum, default_value_t = Shape::Realistic)]
    pub shape: Shape,
    /// Seed of the realistic fleet: same seed, same fleet.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Realistic fleet: the slowest readiness delay an owner may draw.
    #[arg(long, default_value = "20s")]
    pub ready_delay_max: humantime::Duration,
    /// Realistic fleet: every pod's termination grace period (whole seconds).
    #[arg(long, default_value = "3s")]
    pub grace_period: humantime::Duration,
    /// Realistic fleet: how full the nodes are on average, percent of allocatable CPU and memory.
    #[arg(long, default_value_t = 75, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub node_fill: u8,
    /// Do not measure the apiserver's eviction throughput before the runs (the bound then leaves it out).
    #[arg(long)]
    pub skip_calibration: bool,
}

impl Args {
    /// The realistic fleet's parameters.
    pub fn realism(&self) -> Realism {
        Realism {
            seed: self.seed,
            ready_delay_min: self.pod_ready_delay.into(),
            ready_delay_max: self.ready_delay_max.into(),
            grace_period_s: u32::try_from(Duration::from(self.grace_period).as_secs())
                .unwrap_or(u32::MAX),
            fill_percent: self.node_fill,
        }
    }
}

fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

fn parse_tool(name: &str) -> anyhow::Result<Tool> {
    [Tool::K8sm, Tool::DrainPdb, Tool::Drain]
        .into_iter()
        .find(|t| t.slug() == name)
        .with_context(|| format!("unknown tool {name:?}: use k8sm, drain-pdb, drain"))
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let pods = args.pods.unwrap_or(args.nodes * 30);
    anyhow::ensure!(
        args.nodes > 0 && pods > 0,
        "--nodes and --pods must be positive"
    );
    let tools = args
        .tools
        .iter()
        .map(|t| parse_tool(t))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let pod_ready_delay: Duration = args.pod_ready_delay.into();
    let restart_delay: Duration = args.restart_delay.into();
    let name = args.name.clone().unwrap_or_else(|| {
        let mut name = format!("n{}-p{pods}", args.nodes);
        if pod_ready_delay != Duration::from_secs(2) {
            name += &format!("-d{}", args.pod_ready_delay);
        }
        if tools.len() < 3 {
            let slugs: Vec<&str> = tools.iter().map(|t| t.slug()).collect();
            name += &format!("-{}", slugs.join("-"));
        }
        name
    });
    let root = workspace_root();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| root.join("bench/results"));
    std::fs::create_dir_all(&out)?;
    let exe = std::env::current_exe()?;
    let bin_dir = args
        .bin_dir
        .clone()
        .unwrap_or_else(|| exe.parent().map(Path::to_owned).unwrap_or_default());
    // target/<profile>/k8sm-bench → target/
    let target_dir = bin_dir.parent().map(Path::to_owned).unwrap_or_default();
    let work_dir = args
        .work_dir
        .clone()
        .unwrap_or_else(|| target_dir.join("bench").join(&name));
    std::fs::create_dir_all(&work_dir)?;
    charts::register_font(&args.font)?;

    if args.render_only {
        let text = std::fs::read_to_string(out.join(format!("{name}.json")))?;
        let summary: Summary = serde_json::from_str(&text)?;
        let workload = Workload::generate(
            summary.scenario.nodes,
            summary.scenario.pods,
            args.shape,
            &args.realism(),
        );
        let owners = charted_owners(&workload, &summary);
        return write_report(&out, &name, &summary, &owners);
    }

    let workload = Workload::generate(args.nodes, pods, args.shape, &args.realism());
    if let Some((cpu, memory)) = workload.fill(args.nodes) {
        eprintln!(
            "==> nodes sized for the requests: {:.0}% of CPU, {:.0}% of memory in use on average",
            cpu * 100.0,
            memory * 100.0
        );
    }
    let mut bench = BenchCluster::start(
        args.nodes,
        pod_ready_delay,
        restart_delay,
        &workload,
        &bin_dir,
        &work_dir,
    )
    .await?;
    let throughput = if args.skip_calibration {
        None
    } else {
        let throughput =
            eviction_throughput(&mut bench, &workload, CONTROLLER_CALL_CONCURRENCY).await?;
        eprintln!("==> eviction throughput: {}", throughput.describe());
        Some(throughput)
    };
    let mut bound = concurrency_bound(&workload.bound_input(
        args.nodes,
        args.max_concurrent_nodes.resolve(args.nodes),
        args.threshold,
        pod_ready_delay,
        restart_delay,
        throughput.as_ref().map(|t| t.per_second),
    ));
    if let Some(throughput) = &throughput {
        bound.derivation += &format!(" Measured alone: {}.", throughput.describe());
    }
    let mut owner_sizes = BTreeMap::new();
    for owner in &workload.owners {
        *owner_sizes.entry(owner.replicas).or_default() += 1;
    }
    let count = |kind| workload.owners.iter().filter(|o| o.kind == kind).count();
    let scenario = Scenario {
        name: name.clone(),
        nodes: args.nodes,
        pods,
        deployments: count(Kind::Deployment),
        stateful_sets: count(Kind::StatefulSet),
        unmanaged: workload.unmanaged.len(),
        owner_sizes,
        pod_ready_delay_s: pod_ready_delay.as_secs_f64(),
        restart_delay_s: restart_delay.as_secs_f64(),
        threshold_percent: args.threshold,
        max_concurrent_nodes: args.max_concurrent_nodes.to_string(),
        drain_timeout_s: Duration::from(args.drain_timeout).as_secs_f64(),
        lower_bound: bound.clone(),
    };
    let command = format!(
        "cargo xtask bench {}",
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    );
    eprintln!(
        "==> scenario {name}: {} nodes, {pods} pods in {} owners, lower bound {:.1}s; work dir {}",
        args.nodes,
        workload.owners.len(),
        bound.seconds,
        work_dir.display()
    );
    eprintln!("==> {}", bound.derivation);

    let kubernetes = bench.cluster.server_version().await.unwrap_or_default();
    let machine = machine::machine(&root, &kubernetes, command);
    let charted: Vec<&crate::workload::Owner> = workload.charted(bound.critical_replicas);
    let config = RunConfig {
        workload: &workload,
        nodes: args.nodes,
        threshold: args.threshold,
        max_concurrent_nodes: args.max_concurrent_nodes,
        drain_timeout: args.drain_timeout.into(),
        upgrade_timeout: args.upgrade_timeout.map_or_else(
            || Duration::from_secs(600.max(args.nodes as u64 * 6)),
            Duration::from,
        ),
        charted: charted.iter().map(|o| o.name.clone()).collect(),
    };
    let mut outputs: Vec<Run> = Vec::new();
    for tool in tools {
        eprintln!("==> {}", tool.label());
        match runs::run(&mut bench, &config, tool).await {
            Ok(run) => {
                eprintln!(
                    "==> {}: makespan {}, {} SLA violations, {:.2} disruptions per pod",
                    tool.label(),
                    run.makespan_s.map_or("–".into(), |m| format!("{m:.1}s")),
                    run.violations(),
                    run.disruptions_per_pod().unwrap_or_default()
                );
                outputs.push(run);
            }
            Err(error) => {
                eprintln!("==> {} failed: {error:#}", tool.label());
                let mut run = Run::from_timeline(
                    tool,
                    &crate::timeline::Timeline::new(args.threshold, [], []),
                    None,
                );
                run.notes.push(format!("the run failed: {error:#}"));
                outputs.push(run);
            }
        }
    }
    drop(bench);

    let summary = Summary {
        scenario,
        machine,
        runs: outputs,
        planner: machine::planner_benches(&target_dir),
    };
    std::fs::write(
        out.join(format!("{name}.json")),
        serde_json::to_string_pretty(&summary)?,
    )?;
    let owners = charted_owners(&workload, &summary);
    write_report(&out, &name, &summary, &owners)
}

/// The owners to chart, with their SLA bounds.
fn charted_owners(workload: &Workload, summary: &Summary) -> Vec<(crate::workload::Owner, u32)> {
    let s = &summary.scenario;
    workload
        .charted(s.lower_bound.critical_replicas)
        .into_iter()
        .map(|o| {
            (
                o.clone(),
                k8sm_testcluster::sla::bound(o.replicas, u32::from(s.threshold_percent)),
            )
        })
        .collect()
}

fn write_report(
    out: &Path,
    name: &str,
    summary: &Summary,
    owners: &[(crate::workload::Owner, u32)],
) -> anyhow::Result<()> {
    let mut charts_made = Vec::new();
    let runs: Vec<&Run> = summary
        .runs
        .iter()
        .filter(|r| !r.series.is_empty())
        .collect();
    if !owners.is_empty() && !runs.is_empty() {
        let file = format!("{name}-ready.png");
        charts::ready_over_time(&out.join(&file), owners, &runs)?;
        charts_made.push(("Ready pods over time".to_owned(), file));
    }
    let summaries: Vec<Summary> = std::fs::read_dir(out)?
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).ok()?).ok())
        .collect();
    if let Some(points) = charts::makespan_points(&summaries, summary) {
        let file = format!("{name}-makespan.png");
        charts::makespan_vs_nodes(
            &out.join(&file),
            &points,
            summary.scenario.lower_bound.seconds,
        )?;
        charts_made.push(("Makespan against node count".to_owned(), file));
    }
    let path = out.join(format!("{name}.md"));
    std::fs::write(&path, report::render(summary, &charts_made))?;
    eprintln!("==> report: {}", path.display());
    Ok(())
}
