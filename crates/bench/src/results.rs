//! The figures of one benchmark invocation, as written to `bench/results/<scenario>.json` and
//! rendered into the report. Kept plain (serde) so that later invocations can chart earlier ones
//! (makespan against node count).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::audit::ToolRequests;
use crate::landing::Landed;
use crate::requests::HistogramQuantiles;
use crate::stats::{LowerBound, percentile};
use crate::timeline::{Leftovers, NodePhases, OwnerOutcome, Timeline};

/// The tools compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Tool {
    K8sm,
    /// `kubectl drain` of C nodes at once (C = k8sm's `maxConcurrentNodes` for the fleet), the next
    /// node started as one finishes, with a PodDisruptionBudget per owner at its SLA bound:
    /// what kured or system-upgrade-controller users run.
    DrainPdbParallel,
    /// Sequential `kubectl drain` with a PodDisruptionBudget per owner at its SLA bound
    /// (`min(ceil(t·d), d−1)`).
    DrainPdb,
    /// Sequential `kubectl drain` without PodDisruptionBudgets.
    Drain,
}

impl Tool {
    /// Every tool, in the order runs alternate.
    pub const ALL: [Self; 4] = [
        Self::K8sm,
        Self::DrainPdbParallel,
        Self::DrainPdb,
        Self::Drain,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Self::K8sm => "k8sm",
            Self::DrainPdbParallel => "parallel kubectl drain + PDB at the bound, C at once",
            Self::DrainPdb => "kubectl drain + PDB at the bound",
            Self::Drain => "kubectl drain, no PDB",
        }
    }

    /// Short name for file names and command lines.
    pub fn slug(self) -> &'static str {
        match self {
            Self::K8sm => "k8sm",
            Self::DrainPdbParallel => "drain-pdb-parallel",
            Self::DrainPdb => "drain-pdb",
            Self::Drain => "drain",
        }
    }

    /// The tool whose slug is `slug`.
    pub fn from_slug(slug: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.slug() == slug)
    }

    /// Nodes the tool drains at once: k8sm's `maxConcurrentNodes` resolved for the fleet
    /// (`concurrency`), or one.
    pub fn concurrency(self, concurrency: usize) -> usize {
        match self {
            Self::K8sm | Self::DrainPdbParallel => concurrency,
            Self::DrainPdb | Self::Drain => 1,
        }
    }
}

/// The least makespan any tool can reach in the scenario, and how it is derived (Markdown).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoundFigure {
    pub seconds: f64,
    pub derivation: String,
}

/// What the scenario was.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub name: String,
    pub nodes: usize,
    /// Pods of owners and unmanaged pods (the DaemonSet's one pod per node comes on top).
    pub pods: usize,
    pub deployments: usize,
    pub stateful_sets: usize,
    pub unmanaged: usize,
    /// Owners by desired replicas.
    pub owner_sizes: BTreeMap<u32, usize>,
    pub pod_ready_delay_s: f64,
    pub restart_delay_s: f64,
    pub threshold_percent: u8,
    pub max_concurrent_nodes: String,
    pub drain_timeout_s: f64,
    pub lower_bound: LowerBound,
    /// `maxConcurrentNodes` resolved for the fleet: k8sm's drain slots and the parallel baseline's
    /// workers.
    #[serde(default)]
    pub concurrency: usize,
    /// The concurrency-aware lower bound the targets are judged against (absent in older
    /// summaries).
    #[serde(default)]
    pub bound: Option<BoundFigure>,
    /// How the fleet was drawn (shape, seed, readiness spread, grace period, fill), when not the
    /// simple one.
    #[serde(default)]
    pub fleet: Option<String>,
    /// k8sm's fleet had the same PodDisruptionBudgets as the drain baselines' (false in reports
    /// before they did).
    #[serde(default)]
    pub k8sm_budgets: bool,
}

impl Scenario {
    /// The bound the targets are judged against: the concurrency-aware one, else the per-owner
    /// waves alone.
    pub fn bound_seconds(&self) -> f64 {
        self.bound
            .as_ref()
            .map_or(self.lower_bound.seconds, |b| b.seconds)
    }

    /// Why the bound is unknown, if it is: without the apiserver's eviction throughput, the term
    /// left out may be the largest, so no run is judged against the terms that were measured.
    pub fn bound_unknown(&self) -> Option<&'static str> {
        match &self.lower_bound.terms {
            None => Some("the report has no eviction throughput term"),
            Some(t) if t.evictions_per_second.is_none() => {
                Some("the apiserver's eviction throughput was not calibrated")
            }
            Some(_) => None,
        }
    }

    /// The term that sets the bound (`node waves`, `owner waves` or `eviction throughput`), when it
    /// is known.
    pub fn bound_set_by(&self) -> Option<&str> {
        if self.bound_unknown().is_some() {
            return None;
        }
        self.lower_bound.terms.as_ref().map(|t| t.limit.as_str())
    }
}

/// The controller's cost during a k8sm run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerCost {
    /// CPU seconds from its start (initial lists included) to the last node upgraded.
    pub cpu_seconds_total: f64,
    /// CPU seconds from the policy's creation to the last node upgraded.
    pub cpu_seconds_upgrade: f64,
    pub peak_rss_bytes: u64,
    /// `k8sm_evictions_total` from its /metrics (all reasons).
    pub evictions_metric: Option<f64>,
    /// Mean and count of `k8sm_planner_duration_seconds` (real planner passes during the run).
    pub plan_mean_ms: Option<f64>,
    pub plans: Option<f64>,
    /// Mean of `k8sm_reconcile_duration_seconds`: one observe-plan-execute-report pass, actions
    /// included.
    #[serde(default)]
    pub reconcile_mean_ms: Option<f64>,
    /// `k8sm_eviction_reaction_seconds` (replacement Ready observed → next eviction of that owner,
    /// from the controller's own timestamps), if the controller exports it.
    #[serde(default)]
    pub reaction: Option<HistogramQuantiles>,
    /// Mean of `k8sm_reconcile_stage_duration_seconds` per stage, in milliseconds, in the pass's
    /// order (empty for reports made before the controller exported it).
    #[serde(default)]
    pub stage_mean_ms: Vec<(String, f64)>,
}

/// One tool's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub tool: Tool,
    /// Which repetition this is (0-based): runs alternate between tools, round after round.
    #[serde(default)]
    pub round: usize,
    /// Nodes the tool drained at once.
    #[serde(default)]
    pub concurrency: Option<usize>,
    pub completed: bool,
    pub makespan_s: Option<f64>,
    /// From the last node upgraded until every owner had all its replicas Ready again.
    pub settle_s: Option<f64>,
    pub nodes_upgraded: usize,
    /// Pods when the run started.
    pub pods: usize,
    pub disruptions: u64,
    /// Of the disruptions, pods that went without the Eviction API (see
    /// [`OwnerOutcome::outside_disruptions`]).
    #[serde(default)]
    pub outside_disruptions: u64,
    /// Watch relists the recorder went through (pods deleted in a watch gap are removed at the
    /// relist).
    #[serde(default)]
    pub recorder_relists: u64,
    pub reaction_samples: usize,
    pub reaction_p50_s: Option<f64>,
    pub reaction_p99_s: Option<f64>,
    pub controller: Option<ControllerCost>,
    /// The tool's own requests from its start of the upgrade to the last node upgraded, from the
    /// apiserver's audit log (see [`crate::audit`]).
    #[serde(default)]
    pub tool_requests: Option<ToolRequests>,
    /// Baselines: nodes whose eviction-based drain hit `--timeout` and were drained with
    /// `--disable-eviction`.
    pub forced_nodes: Option<usize>,
    pub owners: Vec<OwnerOutcome>,
    /// A messy fleet's: what the run left to an operator, and at what cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leftovers: Option<Leftovers>,
    /// Where the upgraded nodes' time went, by the watches (absent in reports before it was
    /// measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_phases: Option<NodePhases>,
    /// Where the replacements landed, by the watches (absent in reports before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landed: Option<Landed>,
    pub notes: Vec<String>,
    /// Ready pods over time of the charted owners: (seconds since the run's start, ready).
    #[serde(default)]
    pub series: BTreeMap<String, Vec<(f64, u32)>>,
}

impl Run {
    /// The figures a timeline holds; the caller adds costs and notes.
    pub fn from_timeline(tool: Tool, timeline: &Timeline, settle_s: Option<f64>) -> Self {
        let makespan = timeline.makespan();
        let latencies = timeline.latencies();
        Self {
            tool,
            round: 0,
            concurrency: None,
            completed: makespan.is_some(),
            makespan_s: makespan.map(|(start, end)| end - start),
            settle_s,
            nodes_upgraded: timeline.upgraded_nodes(),
            pods: timeline.initial_pods(),
            disruptions: timeline.disruptions(),
            outside_disruptions: timeline.outside_disruptions(),
            recorder_relists: timeline.relists(),
            reaction_samples: latencies.len(),
            reaction_p50_s: percentile(latencies, 50.0),
            reaction_p99_s: percentile(latencies, 99.0),
            controller: None,
            tool_requests: None,
            forced_nodes: None,
            owners: timeline.outcomes(),
            leftovers: timeline.leftovers(),
            // Needs the nodes the tool drained at once, set by the caller (runs.rs).
            node_phases: None,
            landed: Some(timeline.landed()),
            notes: Vec::new(),
            series: BTreeMap::new(),
        }
    }

    pub fn violations(&self) -> u32 {
        self.owners.iter().map(|o| o.violations).sum()
    }

    /// Violations that began with a pod going without the Eviction API: deleted directly (by a
    /// baseline's `--disable-eviction`, a controller, or the simulator) or no longer Ready.
    pub fn outside_violations(&self) -> u32 {
        self.owners.iter().map(|o| o.outside_violations).sum()
    }

    pub fn owners_violated(&self) -> usize {
        self.owners.iter().filter(|o| o.violations > 0).count()
    }

    pub fn seconds_below(&self) -> f64 {
        self.owners.iter().map(|o| o.seconds_below).sum()
    }

    /// Unavailable replica-seconds summed over owners.
    pub fn unavailable_replica_s(&self) -> f64 {
        self.owners.iter().map(|o| o.unavailable_replica_s).sum()
    }

    /// The owner with the most unavailable replica-seconds, and how many.
    pub fn worst_unavailable(&self) -> Option<(&str, f64)> {
        self.owners
            .iter()
            .max_by(|a, b| a.unavailable_replica_s.total_cmp(&b.unavailable_replica_s))
            .map(|o| (o.name.as_str(), o.unavailable_replica_s))
    }

    /// The tool's apiserver requests per upgraded node.
    pub fn requests_per_node(&self) -> Option<f64> {
        let requests = self.tool_requests.as_ref()?;
        (self.nodes_upgraded > 0).then(|| requests.total as f64 / self.nodes_upgraded as f64)
    }

    /// Reaction p99 in seconds, by the benchmark's own watches: the same clock for every tool.
    pub fn reaction_p99(&self) -> Option<f64> {
        self.reaction_p99_s
    }

    /// The controller's own reaction histogram (k8sm only), shown beside the watches' figure, never
    /// instead.
    pub fn controller_reaction(&self) -> Option<&HistogramQuantiles> {
        self.controller
            .as_ref()
            .and_then(|c| c.reaction.as_ref())
            .filter(|h| h.count > 0)
    }

    /// The smallest `min ready − floor` over owners: negative means some owner went below its
    /// bound.
    pub fn min_margin(&self) -> Option<i64> {
        self.owners
            .iter()
            .map(|o| i64::from(o.min_ready) - i64::from(o.floor))
            .min()
    }

    /// Seconds from the run's start until it settled (or as far as it got).
    pub fn span_s(&self) -> f64 {
        self.makespan_s.unwrap_or_default() + self.settle_s.unwrap_or_default()
    }

    pub fn disruptions_per_pod(&self) -> Option<f64> {
        (self.pods > 0).then(|| self.disruptions as f64 / self.pods as f64)
    }

    /// The least disruptions per pod the fleet's free capacity allowed, as this run's replacements
    /// were placed: every pod once, and once more each replacement that had nowhere to go but a
    /// node still to drain ([`Landed::forced`]).
    pub fn disruptions_floor(&self) -> Option<f64> {
        let landed = self.landed.as_ref()?;
        (self.pods > 0).then(|| 1.0 + landed.forced as f64 / self.pods as f64)
    }
}

/// The machine and software the figures come from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub date: String,
    pub cpu_model: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    /// 1-minute load average when the benchmark started (the machine may be shared).
    pub load_at_start: String,
    pub rustc: String,
    pub kubernetes: String,
    pub git_commit: String,
    pub git_dirty: bool,
    /// The commit the controller's and the agents' binaries say they were built from, checked
    /// equal to `git_commit` before the runs (absent in reports before the check).
    #[serde(default)]
    pub binaries_commit: Option<String>,
    pub command: String,
}

/// One criterion measurement of the planner (read from criterion's output, if `cargo bench` ran).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannerBench {
    /// criterion's benchmark ID, e.g. `plan/nodes/5000`.
    #[serde(default)]
    pub id: String,
    /// When criterion wrote the estimate (RFC 3339), to tell a measurement of this invocation from
    /// an old one.
    #[serde(default)]
    pub measured_at: Option<String>,
    pub nodes: usize,
    pub pods: usize,
    pub mean_ms: f64,
    pub median_ms: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub scenario: Scenario,
    pub machine: Machine,
    pub runs: Vec<Run>,
    pub planner: Vec<PlannerBench>,
    /// `planner` was measured by an earlier `cargo bench`, not in this invocation (see each one's
    /// `measured_at`).
    #[serde(default)]
    pub planner_measured_earlier: bool,
}

impl Summary {
    /// The first run of `tool`.
    pub fn run(&self, tool: Tool) -> Option<&Run> {
        self.runs.iter().find(|r| r.tool == tool)
    }

    /// Every run of `tool`, round by round.
    pub fn runs_of(&self, tool: Tool) -> Vec<&Run> {
        self.runs.iter().filter(|r| r.tool == tool).collect()
    }

    /// The tools that ran, in the order of [`Tool::ALL`].
    pub fn tools(&self) -> Vec<Tool> {
        Tool::ALL
            .into_iter()
            .filter(|t| self.runs.iter().any(|r| r.tool == *t))
            .collect()
    }
}
