//! The figures of one benchmark invocation, as written to `bench/results/<scenario>.json` and rendered into the
//! report. Kept plain (serde) so that later invocations can chart earlier ones (makespan against node count).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::requests::ByVerb;
use crate::stats::{LowerBound, percentile};
use crate::timeline::{OwnerOutcome, Timeline};

/// The tools compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Tool {
    K8sm,
    /// Sequential `kubectl drain` with a PodDisruptionBudget per owner at its SLA bound (`min(ceil(t·d), d−1)`).
    DrainPdb,
    /// Sequential `kubectl drain` without PodDisruptionBudgets.
    Drain,
}

impl Tool {
    pub fn label(self) -> &'static str {
        match self {
            Self::K8sm => "k8sm",
            Self::DrainPdb => "kubectl drain + PDB at the bound",
            Self::Drain => "kubectl drain, no PDB",
        }
    }

    /// Short name for file names and command lines.
    pub fn slug(self) -> &'static str {
        match self {
            Self::K8sm => "k8sm",
            Self::DrainPdb => "drain-pdb",
            Self::Drain => "drain",
        }
    }
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
}

/// The controller's cost during a k8sm run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerCost {
    /// CPU seconds from its start (initial lists included) to the last node upgraded.
    pub cpu_seconds_total: f64,
    /// CPU seconds from the policy's creation to the last node upgraded.
    pub cpu_seconds_upgrade: f64,
    pub peak_rss_bytes: u64,
    /// Its own requests from the policy's creation to the last node upgraded, from its client's traces.
    pub requests: ByVerb,
    /// `k8sm_evictions_total` from its /metrics (all reasons).
    pub evictions_metric: Option<f64>,
    /// Mean and count of `k8sm_planner_duration_seconds` (real planner passes during the run).
    pub plan_mean_ms: Option<f64>,
    pub plans: Option<f64>,
    /// Mean of `k8sm_reconcile_duration_seconds`: one observe-plan-execute-report pass, actions included.
    #[serde(default)]
    pub reconcile_mean_ms: Option<f64>,
    /// Its eviction calls: p50 and p99 seconds, and how many.
    #[serde(default)]
    pub eviction_call_p50_s: Option<f64>,
    #[serde(default)]
    pub eviction_call_p99_s: Option<f64>,
    #[serde(default)]
    pub eviction_calls: usize,
}

/// One tool's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub tool: Tool,
    pub completed: bool,
    pub makespan_s: Option<f64>,
    /// From the last node upgraded until every owner had all its replicas Ready again.
    pub settle_s: Option<f64>,
    pub nodes_upgraded: usize,
    /// Pods when the run started.
    pub pods: usize,
    pub disruptions: u64,
    /// Of the disruptions, pods that went without the Eviction API (see [`OwnerOutcome::outside_disruptions`]).
    #[serde(default)]
    pub outside_disruptions: u64,
    /// Watch relists the recorder went through (pods deleted in a watch gap are removed at the relist).
    #[serde(default)]
    pub recorder_relists: u64,
    pub reaction_samples: usize,
    pub reaction_p50_s: Option<f64>,
    pub reaction_p99_s: Option<f64>,
    pub controller: Option<ControllerCost>,
    /// `apiserver_request_total` increase during the run, every client together.
    pub apiserver_requests: ByVerb,
    /// Mean server-side time of an Eviction API call during the run (`apiserver_request_duration_seconds`).
    #[serde(default)]
    pub apiserver_eviction_mean_s: Option<f64>,
    /// Baselines: nodes whose eviction-based drain timed out and were drained with `--disable-eviction`.
    pub forced_nodes: Option<usize>,
    pub owners: Vec<OwnerOutcome>,
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
            apiserver_requests: ByVerb::new(),
            apiserver_eviction_mean_s: None,
            forced_nodes: None,
            owners: timeline.outcomes(),
            notes: Vec::new(),
            series: BTreeMap::new(),
        }
    }

    pub fn violations(&self) -> u32 {
        self.owners.iter().map(|o| o.violations).sum()
    }

    /// Violations that began with a pod going without the Eviction API: deleted directly (by a baseline's
    /// `--disable-eviction`, a controller, or the simulator) or no longer Ready.
    pub fn outside_violations(&self) -> u32 {
        self.owners.iter().map(|o| o.outside_violations).sum()
    }

    pub fn owners_violated(&self) -> usize {
        self.owners.iter().filter(|o| o.violations > 0).count()
    }

    pub fn seconds_below(&self) -> f64 {
        self.owners.iter().map(|o| o.seconds_below).sum()
    }

    /// The smallest `min ready − floor` over owners: negative means some owner went below its bound.
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
    pub command: String,
}

/// One criterion measurement of the planner (read from criterion's output, if `cargo bench` ran).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannerBench {
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
}

impl Summary {
    pub fn run(&self, tool: Tool) -> Option<&Run> {
        self.runs.iter().find(|r| r.tool == tool)
    }
}
