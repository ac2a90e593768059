//! The command line and the whole invocation: repeated runs in alternating order, each on a fresh
//! cluster, the JSON summary after every run, then charts, the report and the results index.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use k8sm_api::MaxConcurrentNodes;

use crate::calibrate::{CONTROLLER_CALL_CONCURRENCY, Throughput, eviction_throughput};
use crate::env::BenchCluster;
use crate::results::{BoundFigure, Machine, Run, Scenario, Summary, Tool};
use crate::runs::{self, RunConfig};
use crate::stats::{LowerBound, concurrency_bound};
use crate::workload::{Kind, Realism, Shape, Workload};
use crate::{charts, index, machine, report};

/// k8sm against parallel and sequential `kubectl drain` on the real local cluster; writes
/// bench/results/<scenario>.md and the index bench/results/README.md.
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
    /// Baselines: `kubectl drain --timeout` on one node before the operator falls back to
    /// `--disable-eviction`. With budgets at the bound a drain should never need it: a drain
    /// that hits it is reported.
    #[arg(long, default_value = "5m")]
    pub drain_timeout: humantime::Duration,
    /// How long k8sm may take to upgrade every node before its run is reported as incomplete
    /// (default: 10 minutes, or 6 s per node on larger fleets). The report of an incomplete
    /// run still has the controller's cost so far.
    #[arg(long)]
    pub upgrade_timeout: Option<humantime::Duration>,
    /// Which tools to run, in this order in every round: k8sm, drain-pdb-parallel (C `kubectl
    /// drain` at once, C = `--max-concurrent-nodes` for the fleet), drain-pdb, drain (one node
    /// at a time).
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_TOOLS)]
    pub tools: Vec<String>,
    /// Rounds: each tool runs this many times, alternating with the others, each run on a fresh
    /// cluster.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
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
    /// Only re-render the report, charts and index of an earlier invocation from its JSON summary.
    #[arg(long)]
    pub render_only: bool,
    /// A named scenario whose arguments fill the defaults (explicit arguments win): owners-pace,
    /// restarts-pace.
    #[arg(long, value_parser = crate::presets::parse_name)]
    pub scenario: Option<String>,
    /// The fleet: `simple` is the earlier reports' (one readiness delay, no grace period, no
    /// requests); `realistic` draws each owner's readiness delay in [--pod-ready-delay,
    /// --ready-delay-max] and requests, and adds grace periods, bunched owners, a rollout and
    /// an ordered StatefulSet.
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
    /// Do not measure the apiserver's eviction throughput before the runs: the bound is then
    /// unknown, and no run is judged against it.
    #[arg(long)]
    pub skip_calibration: bool,
    /// The planner's criterion figures under target/criterion come from an earlier `cargo bench`,
    /// not from this invocation (`cargo xtask bench --no-planner-bench` passes it): the report
    /// says so.
    #[arg(long)]
    pub planner_measured_earlier: bool,
    /// Only rewrite the index (`README.md` of the reports' directory) from the JSON summaries
    /// there.
    #[arg(long)]
    pub index_only: bool,
    /// Upgrade the fleet in simulated time with the real planner, without a cluster (see
    /// `model.rs`): `--runs` fleets of seeds `--seed`, `--seed`+1, …, one line each with the
    /// makespan against the lower bound. Seconds instead of minutes and no noise, to compare
    /// admission rules; writes no report.
    #[arg(long)]
    pub model: bool,
    /// With `--model`: a replacement lands on a node still to drain only when no other node has
    /// room for it (the "land once" experiment of docs/decisions/0002-land-once.md).
    #[arg(long, requires = "model")]
    pub no_schedule_to_drain: bool,
    /// With `--model`: one node at a time until the first is upgraded (another "land once"
    /// experiment).
    #[arg(long, requires = "model")]
    pub one_node_first: bool,
    /// With `--model`: the planner is not told the nodes' allocatable resources, so room does not
    /// pace admission (the baseline of docs/decisions/0002-land-once.md).
    #[arg(long, requires = "model")]
    pub no_room: bool,
    /// An extra flag of k8sm-controller, for a comparison (e.g. `--k8sm-arg=--no-room-pacing`);
    /// repeatable. Each k8sm run of the report notes it.
    #[arg(long = "k8sm-arg", value_name = "FLAG", allow_hyphen_values = true)]
    pub k8sm_args: Vec<String>,
    /// With `--model`: admission paced by room, as the controller's `--pace-by-room`.
    #[arg(long, requires = "model")]
    pub pace_by_room: bool,
    /// With `--model`: how long past its grace period an evicted pod is gone (a calibration's
    /// median in the bulk, less the grace period, matches a cluster's load better than the pod
    /// alone).
    #[arg(long, requires = "model", default_value = "300ms")]
    pub model_gone_after: humantime::Duration,
    /// With `--model`: how long past its owner's delay a scheduled pod becomes Ready.
    #[arg(long, requires = "model", default_value = "300ms")]
    pub model_ready_after: humantime::Duration,
    /// With `--model`: compare the model's upgrade of the first seed's fleet, owner by owner, with
    /// k8sm's runs of this report's JSON summary (the same fleet: pass the report's scenario
    /// and seed).
    #[arg(long, requires = "model", value_name = "JSON")]
    pub compare_with: Option<PathBuf>,
    /// With `--compare-with`: upgrade the fleet this many times, each with another pick among the
    /// scheduler's equal scores (as kube-scheduler picks at random from run to run), and compare
    /// the model's medians with the cluster's.
    #[arg(long, requires = "compare_with", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub model_tie_seeds: u64,
    /// Make the fleet messy, as real clusters are (crash-looping owners, dead nodes, pods stuck
    /// terminating, a stuck rollout, bare pods under `unmanagedPods.policy: Never`, pinned
    /// pods; see `workload::Messy`), and say what each tool finished, what it left to an
    /// operator and what it did to those nodes. Every tool's fleet then has budgets at the
    /// bound. The calibration evicts the same seed's tidy fleet.
    #[arg(long)]
    pub messy: bool,
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
            messy: self.messy.then(crate::workload::MessRates::default),
        }
    }
}

const DEFAULT_TOOLS: &str = "k8sm,drain-pdb-parallel,drain-pdb,drain";

fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// `--model`: each seed's fleet upgraded in simulated time, against its lower bound (no throughput
/// term: the model has no apiserver).
fn model(args: &Args, pods: usize, concurrency: usize) -> anyhow::Result<()> {
    let cfg = crate::model::ModelConfig {
        nodes: args.nodes,
        max_concurrent_nodes: args.max_concurrent_nodes,
        threshold: args.threshold,
        restart_delay: args.restart_delay.into(),
        pod_ready_delay: args.pod_ready_delay.into(),
        tick: Duration::from_millis(250),
        limit: Duration::from_secs(24 * 3600),
        // A messy fleet waits out `nodeProgressDeadline` for its broken replacements, and settles
        // for minutes after: plan as the controller does, on changes and wakes (the tidy
        // fleets' figures stay those of every tick).
        event_driven: args.messy,
        no_schedule_to_drain: args.no_schedule_to_drain,
        one_node_first: args.one_node_first,
        no_room: args.no_room,
        pace_by_room: args.pace_by_room,
        gone_after: args.model_gone_after.into(),
        ready_after: args.model_ready_after.into(),
        tie_seed: 0,
    };
    let mut ratios = Vec::new();
    // A messy fleet's totals: nodes left to an operator, those left cordoned, evictions on them,
    // owners below.
    let mut messy = [0usize; 4];
    let (mut disruptions, mut above_floor) = (Vec::new(), Vec::new());
    for seed in (args.seed..).take(args.runs) {
        let realism = Realism {
            seed,
            ..args.realism()
        };
        let fleet = Workload::generate(args.nodes, pods, args.shape, &realism);
        let bound = concurrency_bound(&fleet.bound_input(
            args.nodes,
            concurrency,
            args.threshold,
            cfg.pod_ready_delay,
            cfg.restart_delay,
            None,
        ));
        let run = crate::model::simulate(&fleet, &cfg);
        if let Some(makespan) = run.makespan {
            ratios.push(makespan / bound.seconds);
        }
        if let Some(path) = args.compare_with.as_ref().filter(|_| seed == args.seed) {
            let mut runs = vec![run.clone()];
            for tie_seed in 1..args.model_tie_seeds {
                let cfg = crate::model::ModelConfig {
                    tie_seed,
                    ..cfg.clone()
                };
                runs.push(crate::model::simulate(&fleet, &cfg));
            }
            compare_with(path, &fleet, &runs)?;
        }
        disruptions.push(run.disruptions_per_pod());
        above_floor.push(run.disruptions_per_pod() - run.disruptions_floor());
        println!("{}", crate::model::describe(seed, &bound, &run));
        for (total, n) in messy.iter_mut().zip([
            run.unfinishable.len(),
            run.unfinishable_left_cordoned(),
            run.evictions_on_unfinishable(),
            run.owners_below.len(),
        ]) {
            *total += n;
        }
    }
    if args.messy {
        let [unfinishable, cordoned, evictions, below] = messy;
        println!(
            "messy fleets: {unfinishable} nodes only an operator can clear, {cordoned} of them left cordoned, \
             {evictions} evictions on them; {below} owners below their bound"
        );
    }
    for (name, figures) in [
        ("disruptions per pod", &mut disruptions),
        ("disruptions per pod above the floor", &mut above_floor),
    ] {
        if figures.is_empty() {
            continue;
        }
        figures.sort_by(f64::total_cmp);
        println!(
            "{name} over {} fleets: median {:.3}, min {:.3}, max {:.3}",
            figures.len(),
            figures[figures.len() / 2],
            figures[0],
            figures[figures.len() - 1]
        );
    }
    if !ratios.is_empty() {
        ratios.sort_by(f64::total_cmp);
        println!(
            "makespan / bound over {} fleets: median {:.2}×, min {:.2}×, max {:.2}×",
            ratios.len(),
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1]
        );
    }
    Ok(())
}

/// `--compare-with`: the model's runs of `fleet` (one per tie-break seed) against k8sm's runs
/// in the report at `path`, owner by owner.
fn compare_with(
    path: &Path,
    fleet: &Workload,
    runs: &[crate::model::ModelRun],
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the report {}", path.display()))?;
    let summary: Summary = serde_json::from_str(&text)
        .with_context(|| format!("parsing the report {}", path.display()))?;
    let compared = crate::validate::compare(fleet, runs, &summary)?;
    let cluster: Vec<f64> = summary
        .runs_of(Tool::K8sm)
        .iter()
        .filter_map(|r| r.makespan_s)
        .collect();
    println!(
        "model ({} tie-break seeds, medians) against {} ({} k8sm runs), owner by owner:\n\n{}",
        runs.len(),
        path.display(),
        cluster.len(),
        crate::validate::render(&compared, &crate::validate::makespans(runs), &cluster)
    );
    println!("{}", crate::validate::render_node_phases(runs, &summary));
    Ok(())
}

fn parse_tool(name: &str) -> anyhow::Result<Tool> {
    Tool::from_slug(name).with_context(|| {
        let all: Vec<&str> = Tool::ALL.iter().map(|t| t.slug()).collect();
        format!("unknown tool {name:?}: use {}", all.join(", "))
    })
}

/// The invocation: its settings checked, then `--index-only`, `--render-only` or `--model` alone,
/// or the lower bound, every round of runs and the report.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let plan = Plan::of(&args)?;
    let root = workspace_root();
    let out = reports_dir(&args, &root)?;
    if args.index_only {
        return index::write(&out);
    }
    let dirs = Dirs::of(&args, &plan.name)?;
    charts::register_font(&args.font)?;
    if args.render_only {
        return render_only(&args, &out, &plan.name);
    }
    std::fs::create_dir_all(&dirs.work)?;

    let workload = generate_fleet(&args, plan.pods);
    let concurrency = args.max_concurrent_nodes.resolve(args.nodes);
    if args.shape == Shape::Realistic {
        check_room(args.nodes, concurrency, args.node_fill)?;
    }
    if args.model {
        return model(&args, plan.pods, concurrency);
    }
    let binaries_commit = binaries_commit(&root, &dirs.bin)?;
    let throughput = calibrate(&args, &plan, &workload, &dirs).await?;
    let (waves, bound) = lower_bound(&args, &plan, &workload, concurrency, throughput.as_ref());
    let scenario = describe_scenario(&args, &plan, &workload, concurrency, waves, &bound);
    announce(&args, &plan, &workload, concurrency, &bound, &dirs.work);

    let config = run_config(&args, &workload, &scenario);
    let mut summary = new_summary(&args, &root, &dirs.target, scenario, binaries_commit);
    run_rounds(&args, &plan, &dirs, &out, &config, &mut summary).await?;
    write_report_and_index(&out, &plan.name, &workload, &summary)
}

/// The arguments checked, and what follows from them alone.
struct Plan {
    pods: usize,
    tools: Vec<Tool>,
    pod_ready_delay: Duration,
    restart_delay: Duration,
    /// The scenario's name: the reports' file names.
    name: String,
}

impl Plan {
    fn of(args: &Args) -> anyhow::Result<Self> {
        let pods = args.pods.unwrap_or(args.nodes * 30);
        anyhow::ensure!(
            args.nodes > 0 && pods > 0,
            "--nodes and --pods must be positive"
        );
        anyhow::ensure!(args.runs > 0, "--runs must be at least 1");
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
            if args.tools.join(",") != DEFAULT_TOOLS {
                let slugs: Vec<&str> = tools.iter().map(|t| t.slug()).collect();
                name += &format!("-{}", slugs.join("-"));
            }
            name
        });
        Ok(Self {
            pods,
            tools,
            pod_ready_delay,
            restart_delay,
            name,
        })
    }
}

/// Where reports go (`--out`, default bench/results), created.
fn reports_dir(args: &Args, root: &Path) -> anyhow::Result<PathBuf> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| root.join("bench/results"));
    std::fs::create_dir_all(&out)?;
    Ok(out)
}

/// Where the runs find their binaries and criterion's figures, and leave their files.
struct Dirs {
    /// The k8sm-controller and k8sm-agent binaries.
    bin: PathBuf,
    /// Cargo's target directory, where criterion's figures are.
    target: PathBuf,
    /// The clusters' files and the runs' logs.
    work: PathBuf,
}

impl Dirs {
    fn of(args: &Args, name: &str) -> anyhow::Result<Self> {
        let exe = std::env::current_exe()?;
        let bin = args
            .bin_dir
            .clone()
            .unwrap_or_else(|| exe.parent().map(Path::to_owned).unwrap_or_default());
        // target/<profile>/k8sm-bench → target/
        let target = bin.parent().map(Path::to_owned).unwrap_or_default();
        let work = args
            .work_dir
            .clone()
            .unwrap_or_else(|| target.join("bench").join(name));
        Ok(Self { bin, target, work })
    }
}

/// `--render-only`: the report, charts and index of an earlier invocation from its JSON summary.
fn render_only(args: &Args, out: &Path, name: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(out.join(format!("{name}.json")))?;
    let summary: Summary = serde_json::from_str(&text)?;
    let workload = Workload::generate(
        summary.scenario.nodes,
        summary.scenario.pods,
        args.shape,
        &args.realism(),
    );
    write_report_and_index(out, name, &workload, &summary)
}

/// The fleet every run upgrades, and how full its requests make the nodes.
fn generate_fleet(args: &Args, pods: usize) -> Workload {
    let workload = Workload::generate(args.nodes, pods, args.shape, &args.realism());
    if let Some((cpu, memory)) = workload.fill(args.nodes) {
        eprintln!(
            "==> nodes sized for the requests: {:.0}% of CPU, {:.0}% of memory in use on average",
            cpu * 100.0,
            memory * 100.0
        );
    }
    workload
}

/// The commit the binaries were built from, checked against this checkout's: figures of binaries
/// of another commit must not be reported as this checkout's.
fn binaries_commit(root: &Path, bin_dir: &Path) -> anyhow::Result<Option<String>> {
    let commit = machine::git_commit(root);
    Ok(if commit.is_empty() {
        eprintln!("==> not a git checkout: the binaries' commit is not checked");
        None
    } else {
        Some(machine::check_binaries(bin_dir, &commit)?)
    })
}

/// The apiserver's eviction throughput, measured alone on a cluster of its own (its pods are
/// evicted), unless `--skip-calibration`. A messy fleet is measured by its tidy twin (the same
/// seed's owners): crash loops never become Ready to be evicted.
async fn calibrate(
    args: &Args,
    plan: &Plan,
    workload: &Workload,
    dirs: &Dirs,
) -> anyhow::Result<Option<Throughput>> {
    if args.skip_calibration {
        return Ok(None);
    }
    let tidy = Realism {
        messy: None,
        ..args.realism()
    };
    let tidy = args
        .messy
        .then(|| Workload::generate(args.nodes, plan.pods, args.shape, &tidy));
    let measured = tidy.as_ref().unwrap_or(workload);
    let dir = dirs.work.join("calibration");
    std::fs::create_dir_all(&dir)?;
    let mut bench = BenchCluster::start(
        args.nodes,
        plan.pod_ready_delay,
        plan.restart_delay,
        measured,
        &dirs.bin,
        &dir,
    )
    .await?;
    let throughput = eviction_throughput(&mut bench, measured, CONTROLLER_CALL_CONCURRENCY).await?;
    drop(bench);
    let _ = std::fs::remove_dir_all(dir.join("cluster/etcd-data"));
    eprintln!("==> eviction throughput: {}", throughput.describe());
    Ok(Some(throughput))
}

/// The concurrency-aware lower bound, the measured throughput in its derivation, and the figure
/// the runs are judged against.
fn lower_bound(
    args: &Args,
    plan: &Plan,
    workload: &Workload,
    concurrency: usize,
    throughput: Option<&Throughput>,
) -> (LowerBound, BoundFigure) {
    let mut waves = concurrency_bound(&workload.bound_input(
        args.nodes,
        concurrency,
        args.threshold,
        plan.pod_ready_delay,
        plan.restart_delay,
        throughput.map(|t| t.per_second),
    ));
    if let Some(throughput) = throughput {
        waves.derivation += &format!(" Measured alone: {}.", throughput.describe());
    }
    let bound = BoundFigure {
        seconds: waves.seconds,
        derivation: waves.derivation.clone(),
    };
    (waves, bound)
}

/// What the scenario is, as the summary records it.
fn describe_scenario(
    args: &Args,
    plan: &Plan,
    workload: &Workload,
    concurrency: usize,
    waves: LowerBound,
    bound: &BoundFigure,
) -> Scenario {
    let mut owner_sizes = BTreeMap::new();
    for owner in &workload.owners {
        *owner_sizes.entry(owner.replicas).or_default() += 1;
    }
    let count = |kind| workload.owners.iter().filter(|o| o.kind == kind).count();
    Scenario {
        name: plan.name.clone(),
        nodes: args.nodes,
        pods: plan.pods,
        deployments: count(Kind::Deployment),
        stateful_sets: count(Kind::StatefulSet),
        unmanaged: workload.unmanaged.len(),
        owner_sizes,
        pod_ready_delay_s: plan.pod_ready_delay.as_secs_f64(),
        restart_delay_s: plan.restart_delay.as_secs_f64(),
        threshold_percent: args.threshold,
        max_concurrent_nodes: args.max_concurrent_nodes.to_string(),
        drain_timeout_s: Duration::from(args.drain_timeout).as_secs_f64(),
        lower_bound: waves,
        k8sm_budgets: true,
        concurrency,
        bound: Some(bound.clone()),
        fleet: (args.shape == Shape::Realistic).then(|| describe_fleet(args, workload)),
    }
}

/// How the realistic fleet was drawn.
fn describe_fleet(args: &Args, workload: &Workload) -> String {
    let realism = args.realism();
    let mut fleet = format!(
        "realistic, seed {}: each owner's pods Ready {}–{} after scheduling (drawn per owner), \
         termination grace period {} s honoured, requests filling nodes to {}% on average, about a quarter \
         of the owners bunched on 3 nodes, one Deployment mid-rollout, one OrderedReady StatefulSet of 10",
        realism.seed,
        args.pod_ready_delay,
        args.ready_delay_max,
        realism.grace_period_s,
        realism.fill_percent,
    );
    if let Some(mess) = workload.mess_summary(args.nodes) {
        fleet += &format!("; messy: {mess}");
    }
    fleet
}

/// The scenario, its lower bound and its derivation, before the runs.
fn announce(
    args: &Args,
    plan: &Plan,
    workload: &Workload,
    concurrency: usize,
    bound: &BoundFigure,
    work_dir: &Path,
) {
    eprintln!(
        "==> scenario {}: {} nodes, {} pods in {} owners, C = {concurrency}, lower bound {:.1}s, {} \
         round(s) of {}; work dir {}",
        plan.name,
        args.nodes,
        plan.pods,
        workload.owners.len(),
        bound.seconds,
        args.runs,
        args.tools.join(","),
        work_dir.display()
    );
    eprintln!("==> {}", bound.derivation);
    if let Some(mess) = workload.mess_summary(args.nodes) {
        eprintln!("==> messy fleet: {mess}");
    }
}

/// What every run is given: the fleet, the policy, the timeouts and the owners to chart.
fn run_config<'a>(args: &Args, workload: &'a Workload, scenario: &Scenario) -> RunConfig<'a> {
    let charted: Vec<&crate::workload::Owner> =
        workload.charted(scenario.lower_bound.critical_replicas);
    RunConfig {
        workload,
        nodes: args.nodes,
        threshold: args.threshold,
        max_concurrent_nodes: args.max_concurrent_nodes,
        concurrency: scenario.concurrency,
        drain_timeout: args.drain_timeout.into(),
        upgrade_timeout: args.upgrade_timeout.map_or_else(
            || Duration::from_secs(600.max(args.nodes as u64 * 6)),
            Duration::from,
        ),
        charted: charted.iter().map(|o| o.name.clone()).collect(),
        controller_args: args.k8sm_args.clone(),
    }
}

/// The summary before its runs: the scenario, the machine and the planner's figures.
fn new_summary(
    args: &Args,
    root: &Path,
    target_dir: &Path,
    scenario: Scenario,
    binaries_commit: Option<String>,
) -> Summary {
    let command = format!(
        "cargo xtask bench {}",
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    );
    // criterion ran first in this invocation (`cargo xtask bench`), unless told otherwise: its
    // estimates are read now.
    Summary {
        scenario,
        machine: Machine {
            binaries_commit,
            ..machine::machine(root, "", command)
        },
        runs: Vec::new(),
        planner: machine::planner_benches(target_dir),
        planner_measured_earlier: args.planner_measured_earlier,
    }
}

/// Every round: each tool in turn on a fresh cluster, the JSON summary written after each run.
async fn run_rounds(
    args: &Args,
    plan: &Plan,
    dirs: &Dirs,
    out: &Path,
    config: &RunConfig<'_>,
    summary: &mut Summary,
) -> anyhow::Result<()> {
    let json = out.join(format!("{}.json", plan.name));
    for round in 0..args.runs {
        for &tool in &plan.tools {
            eprintln!("==> round {}/{}: {}", round + 1, args.runs, tool.label());
            let dir = dirs.work.join(format!("r{}-{}", round + 1, tool.slug()));
            let result = one_run(
                summary,
                config,
                tool,
                plan.pod_ready_delay,
                plan.restart_delay,
                &dirs.bin,
                &dir,
            )
            .await;
            let mut run = outcome(tool, args.threshold, result);
            run.round = round;
            summary.runs.push(run);
            // After every run, so that an interrupted invocation keeps what it measured
            // (`--render-only`).
            std::fs::write(&json, serde_json::to_string_pretty(summary)?)?;
            // Logs stay; the cluster's database goes (hundreds of MB at scale).
            let _ = std::fs::remove_dir_all(dir.join("cluster/etcd-data"));
        }
    }
    Ok(())
}

/// The run with its figures printed, or, if it failed, a run without figures that says why.
fn outcome(tool: Tool, threshold: u8, result: anyhow::Result<Run>) -> Run {
    match result {
        Ok(run) => {
            eprintln!(
                "==> {}: makespan {}, {} owners below their bound, {:.1} unavailable replica-seconds, \
                 {:.2} disruptions per pod, {} requests",
                tool.label(),
                run.makespan_s.map_or("–".into(), |m| format!("{m:.1}s")),
                run.owners_violated(),
                run.unavailable_replica_s(),
                run.disruptions_per_pod().unwrap_or_default(),
                run.tool_requests
                    .as_ref()
                    .map_or("–".into(), |r| r.total.to_string()),
            );
            run
        }
        Err(error) => {
            eprintln!("==> {} failed: {error:#}", tool.label());
            let mut run = Run::from_timeline(
                tool,
                &crate::timeline::Timeline::new(threshold, [], []),
                None,
            );
            run.notes.push(format!("the run failed: {error:#}"));
            run
        }
    }
}

/// The report with its charts, then the index of every report in `out`.
fn write_report_and_index(
    out: &Path,
    name: &str,
    workload: &Workload,
    summary: &Summary,
) -> anyhow::Result<()> {
    let owners = charted_owners(workload, summary);
    write_report(out, name, summary, &owners)?;
    index::write(out)
}

/// One run of `tool` on a fresh cluster in `dir`; the first one also records the cluster's version.
async fn one_run(
    summary: &mut Summary,
    config: &RunConfig<'_>,
    tool: Tool,
    pod_ready_delay: Duration,
    restart_delay: Duration,
    bin_dir: &Path,
    dir: &Path,
) -> anyhow::Result<Run> {
    std::fs::create_dir_all(dir)?;
    let mut bench = BenchCluster::start(
        config.nodes,
        pod_ready_delay,
        restart_delay,
        config.workload,
        bin_dir,
        dir,
    )
    .await?;
    if summary.machine.kubernetes.is_empty() {
        summary.machine.kubernetes = bench.cluster.server_version().await.unwrap_or_default();
    }
    runs::run(&mut bench, config, tool).await
}

/// Below this share of the nodes left in service, requests stop fitting for fragmentation (pods of
/// up to half a core on nodes of a few cores), percent.
const PACKABLE_PERCENT: usize = 95;

/// With `concurrency` of `nodes` drained at once, the others must hold every pod: otherwise
/// replacements stay Pending, no owner recovers, and every tool just waits for its timeout (a fleet
/// no tool can upgrade).
fn check_room(nodes: usize, concurrency: usize, fill_percent: u8) -> anyhow::Result<()> {
    let left = nodes.saturating_sub(concurrency);
    let room = PACKABLE_PERCENT * left / nodes.max(1);
    anyhow::ensure!(
        usize::from(fill_percent) <= room,
        "nodes {fill_percent}% full cannot be drained {concurrency} of {nodes} at a time: the {left} left in service \
         hold at most about {room}% of the fleet's requests; lower --node-fill to {room} or --max-concurrent-nodes"
    );
    Ok(())
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
    // Per tool, the run with the median makespan.
    let runs: Vec<&Run> = summary
        .tools()
        .into_iter()
        .filter_map(|tool| {
            crate::spread::median_run(&summary.runs_of(tool), |r| r.makespan_s)
                .or_else(|| summary.run(tool))
        })
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
        charts::makespan_vs_nodes(&out.join(&file), &points, summary.scenario.bound_seconds())?;
        charts_made.push(("Makespan against node count".to_owned(), file));
    }
    let path = out.join(format!("{name}.md"));
    std::fs::write(&path, report::render(summary, &charts_made))?;
    eprintln!("==> report: {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_room;

    #[test]
    fn a_fleet_that_cannot_hold_its_pods_with_c_nodes_out_is_refused() {
        // 6 nodes 75% full, 2 out: 4 nodes hold 4/6 of the capacity, 63% after the packing margin.
        let error = check_room(6, 2, 75).unwrap_err().to_string();
        assert!(error.contains("lower --node-fill to 63"), "{error}");
        // owners-pace: 20 nodes, 4 out, 76% of the room.
        check_room(20, 4, 75).unwrap();
        check_room(6, 1, 75).unwrap();
    }
}
