//! Prometheus metrics. Every label comes from a bounded enum (phases, reasons), the kinds watched
//! or a policy's name (policies are few, written by operators), never from another object's name.

use std::collections::BTreeMap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use chrono::{DateTime, Utc};
use k8sm_api::{ExecutorUpgradePolicy, ExecutorUpgradePolicyStatus};
use k8sm_planner::{Action, ActionKind, Plan, Reason};

use crate::report::policy_gauges::PolicyGauges;

/// An action's policy and reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    policy: String,
    reason: &'static str,
}

/// The policy a surge move was made for.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabel {
    policy: String,
}

/// A failed action: its policy, kind and the apiserver's status code ("none" when no answer came:
/// a timeout, a connection error). All bounded.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabel {
    policy: String,
    action: &'static str,
    code: String,
}

/// Why a planned action of a policy was not attempted.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabel {
    policy: String,
    cause: &'static str,
}

/// What `k8sm_build_info` says of the binary.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabel {
    version: &'static str,
    commit: &'static str,
}

/// The kind a watch watches, such as `Pod`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

/// A stage of a pass, for `k8sm_reconcile_stage_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabel {
    stage: &'static str,
}

/// The stages of one pass, in their order: where its time goes at thousands of nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Before a pass: waiting until the caches show this controller's own writes of the pass before
    /// (outside the pass's own time, `k8sm_reconcile_seconds`).
    Settle,
    /// Before a pass: a wake held back so that passes take at most `--max-busy-share` of the time
    /// (see `crate::reconcile::busy_share`), outside the pass's own time too.
    Pace,
    /// The view built from the caches, evictions in flight pruned, remembered sizes grown.
    Observe,
    /// The planner call.
    Plan,
    /// The plan's actions: node writes awaited, evictions and deletions launched.
    Act,
    /// Events about waits.
    Events,
    /// The policies' status.
    Status,
}

impl Stage {
    fn as_str(self) -> &'static str {
        match self {
            Self::Settle => "settle",
            Self::Pace => "pace",
            Self::Observe => "observe",
            Self::Plan => "plan",
            Self::Act => "act",
            Self::Events => "events",
            Self::Status => "status",
        }
    }
}

/// Why a planned action was not attempted in a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Withheld {
    /// Its object backs off after failures.
    Backoff,
    /// A watch has been failing for too long: the view may be stale.
    StaleView,
}

impl Withheld {
    fn as_str(self) -> &'static str {
        match self {
            Self::Backoff => "backoff",
            Self::StaleView => "stale_view",
        }
    }
}

pub struct Metrics {
    registry: Registry,
    policies: PolicyGauges,
    evictions: Family<ReasonLabel, Counter>,
    deletions: Family<ReasonLabel, Counter>,
    surge_moves: Family<PolicyLabel, Counter>,
    actions_failed: Family<ReasonLabel, Counter>,
    action_failures: Family<FailureLabel, Counter>,
    actions_withheld: Family<CauseLabel, Counter>,
    backing_off: Gauge,
    watches_failing: Gauge,
    watch_silences: Family<KindLabel, Counter>,
    view_stale: Gauge,
    blocked_pods: Gauge,
    is_leader: Gauge,
    call_limit: Gauge,
    calls_throttled: Counter,
    reconcile_seconds: Histogram,
    plan_seconds: Histogram,
    stage_seconds: Family<StageLabel, Histogram, fn() -> Histogram>,
    reaction_seconds: Histogram,
}

/// Buckets of `k8sm_eviction_reaction_seconds`: fine below a second (the target is 0.5 s at 500
/// nodes), coarse up to the minutes a loaded controller took before its actions were pipelined.
const REACTION_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("k8sm");
        // A gauge, not an info metric: the OpenMetrics info type is unknown to the classic text
        // parsers.
        let build = Family::<BuildLabel, Gauge>::default();
        registry.register(
            "build_info",
            "1, labelled with the controller's version and git commit",
            build.clone(),
        );
        build
            .get_or_create(&BuildLabel {
                version: env!("CARGO_PKG_VERSION"),
                commit: env!("K8SM_COMMIT"),
            })
            .set(1);
        let policies = PolicyGauges::register(&mut registry);
        let evictions = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "evictions",
            "Pods evicted, by policy and reason",
            evictions.clone(),
        );
        let deletions = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "deletions",
            "Pods deleted, by policy and reason",
            deletions.clone(),
        );
        let surge_moves = Family::<PolicyLabel, Counter>::default();
        registry.register(
            "surge_moves",
            "Surge rollouts started to move the pod of a single-replica Deployment, by policy",
            surge_moves.clone(),
        );
        let actions_failed = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "actions_failed",
            "Actions that failed or were refused (e.g. by a PodDisruptionBudget), by policy and reason",
            actions_failed.clone(),
        );
        let action_failures = Family::<FailureLabel, Counter>::default();
        registry.register(
            "action_failures",
            "Actions that failed or were refused, by policy, action and the apiserver's status code",
            action_failures.clone(),
        );
        let actions_withheld = Family::<CauseLabel, Counter>::default();
        registry.register(
            "actions_withheld",
            "Planned actions not attempted, by policy: their object backs off, or a watch has failed for too \
             long",
            actions_withheld.clone(),
        );
        let backing_off = Gauge::default();
        registry.register(
            "objects_backing_off",
            "Pods, nodes and policies whose last action failed, waiting before the next attempt",
            backing_off.clone(),
        );
        let watches_failing = Gauge::default();
        registry.register(
            "watches_failing",
            "Watches failing now, however briefly",
            watches_failing.clone(),
        );
        let watch_silences = Family::<KindLabel, Counter>::default();
        registry.register(
            "watch_silences",
            "Watches that delivered nothing (no response, event nor bookmark) for 75 s, a stalled connection, and were \
             started again with a fresh list, by kind",
            watch_silences.clone(),
        );
        let view_stale = Gauge::default();
        registry.register(
            "view_stale",
            "1 while a watch has failed for longer than --max-watch-staleness: no action is taken",
            view_stale.clone(),
        );
        let blocked_pods = Gauge::default();
        registry.register(
            "blocked_pods",
            "Pods that keep a draining node from finishing (PodPlan::is_blocked)",
            blocked_pods.clone(),
        );
        let is_leader = Gauge::default();
        registry.register(
            "is_leader",
            "1 when this replica is the leader",
            is_leader.clone(),
        );
        let call_limit = Gauge::default();
        registry.register(
            "call_limit",
            "How many evictions and deletions may run at once now: grows while the apiserver answers quickly, halves \
             when it is overloaded",
            call_limit.clone(),
        );
        let calls_throttled = Counter::default();
        registry.register(
            "calls_throttled",
            "Evictions the apiserver's priority and fairness refused (429 without a budget's cause): tried again",
            calls_throttled.clone(),
        );
        let reconcile_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register(
            "reconcile_duration_seconds",
            "Duration of one observe-plan-execute-report pass",
            reconcile_seconds.clone(),
        );
        let plan_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 16));
        registry.register(
            "planner_duration_seconds",
            "Duration of one planner call",
            plan_seconds.clone(),
        );
        // Also read by the bench (mean per stage).
        let stage_seconds: Family<StageLabel, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.0001, 2.0, 18)));
        registry.register(
            "reconcile_stage_duration_seconds",
            "Duration of each stage of a pass: observe (the view from the caches), plan, act (node writes awaited, \
             evictions launched), events, status",
            stage_seconds.clone(),
        );
        // The interface with the bench, which reads it at the end of a run: keep its name and type.
        // Exact definition in `crate::memory::reaction`.
        let reaction_seconds = Histogram::new(REACTION_BUCKETS);
        registry.register(
            "eviction_reaction_seconds",
            "Per workload that waited (a pod of it waiting on the health rule or a budget, an eviction of it planned \
             but not sent, or refused): from the controller observing a pod of it become Ready (the pod watch event \
             applied to its cache, the first such pod since the wait began) to the next eviction of that workload \
             being sent",
            reaction_seconds.clone(),
        );
        Self {
            registry,
            policies,
            evictions,
            deletions,
            surge_moves,
            actions_failed,
            action_failures,
            actions_withheld,
            backing_off,
            watches_failing,
            watch_silences,
            view_stale,
            blocked_pods,
            is_leader,
            call_limit,
            calls_throttled,
            reconcile_seconds,
            plan_seconds,
            stage_seconds,
            reaction_seconds,
        }
    }

    pub fn observe_plan(&self, plan: &Plan) {
        self.policies.observe_plan(plan);
        for policy in &plan.policies {
            self.start_counters(&policy.policy);
        }
        // The planner's one meaning of blocked: a pod terminating, or waiting for a slot or the
        // pause, is not.
        let blocked = plan
            .nodes
            .iter()
            .flat_map(|n| n.pods.iter())
            .filter(|p| p.is_blocked())
            .count();
        self.blocked_pods.set(blocked as i64);
    }

    /// Each counter of `policy` whose labels are known in advance, at 0: an alert's `increase()`
    /// then counts the first event too, and the series exist before anything happened.
    fn start_counters(&self, policy: &str) {
        let reason = |reason: Reason| ReasonLabel {
            policy: policy.to_owned(),
            reason: reason.as_str(),
        };
        self.evictions
            .get_or_create(&reason(Reason::Evicted))
            .inc_by(0);
        for deleted in [Reason::DeletedUnmanagedPod, Reason::DeletedFinishedPod] {
            self.deletions.get_or_create(&reason(deleted)).inc_by(0);
        }
        self.surge_moves
            .get_or_create(&PolicyLabel {
                policy: policy.to_owned(),
            })
            .inc_by(0);
        for cause in [Withheld::Backoff, Withheld::StaleView] {
            self.actions_withheld
                .get_or_create(&CauseLabel {
                    policy: policy.to_owned(),
                    cause: cause.as_str(),
                })
                .inc_by(0);
        }
    }

    /// What the status written for `policy` says (see `PolicyGauges::observe_status`).
    pub fn observe_status(
        &self,
        policy: &ExecutorUpgradePolicy,
        status: &ExecutorUpgradePolicyStatus,
        now: DateTime<Utc>,
    ) {
        self.policies.observe_status(policy, status, now);
    }

    pub fn executed(&self, action: &Action) {
        let label = ReasonLabel {
            policy: action.policy.clone(),
            reason: action.reason.as_str(),
        };
        match &action.kind {
            ActionKind::Evict { .. } => {
                self.evictions.get_or_create(&label).inc();
            }
            ActionKind::DeletePod { .. } => {
                self.deletions.get_or_create(&label).inc();
            }
            ActionKind::Surge { .. } => {
                self.surge_moves
                    .get_or_create(&PolicyLabel {
                        policy: action.policy.clone(),
                    })
                    .inc();
            }
            _ => {}
        }
    }

    /// An action of `policy` failed, for `reason`.
    pub fn failed(&self, policy: &str, reason: Reason) {
        self.actions_failed
            .get_or_create(&ReasonLabel {
                policy: policy.to_owned(),
                reason: reason.as_str(),
            })
            .inc();
    }

    /// A failed `action`, answered with HTTP `code` (none: no answer came).
    pub fn action_failed(&self, action: &Action, code: Option<u16>) {
        let code = code.map_or_else(|| "none".to_owned(), |c| c.to_string());
        self.action_failures
            .get_or_create(&FailureLabel {
                policy: action.policy.clone(),
                action: crate::memory::backoff::name(&action.kind),
                code,
            })
            .inc();
    }

    /// An action of `policy` was not attempted.
    pub fn withheld(&self, policy: &str, cause: Withheld) {
        self.actions_withheld
            .get_or_create(&CauseLabel {
                policy: policy.to_owned(),
                cause: cause.as_str(),
            })
            .inc();
    }

    /// Objects backing off, watches failing, and whether the view counts as stale.
    pub fn observe_failures(&self, backing_off: usize, watches_failing: usize, stale: bool) {
        self.backing_off.set(backing_off as i64);
        self.watches_failing.set(watches_failing as i64);
        self.view_stale.set(i64::from(stale));
    }

    /// Brings the silences counted per kind (see `WatchHealth::silences`) up to `totals`.
    pub fn observe_silences(&self, totals: &BTreeMap<String, u64>) {
        for (kind, &total) in totals {
            let counter = self
                .watch_silences
                .get_or_create(&KindLabel { kind: kind.clone() });
            counter.inc_by(total.saturating_sub(counter.get()));
        }
    }

    pub fn set_call_limit(&self, limit: usize) {
        self.call_limit
            .set(i64::try_from(limit).unwrap_or(i64::MAX));
    }

    pub fn throttled(&self) {
        self.calls_throttled.inc();
    }

    /// Whether this replica leads; a standby exports no policy gauges.
    pub fn set_leader(&self, leader: bool) {
        self.is_leader.set(i64::from(leader));
        if !leader {
            self.policies.forget_all();
        }
    }

    pub fn reconcile_took(&self, seconds: f64) {
        self.reconcile_seconds.observe(seconds);
    }

    pub fn plan_took(&self, seconds: f64) {
        self.plan_seconds.observe(seconds);
    }

    pub fn stage_took(&self, stage: Stage, seconds: f64) {
        self.stage_seconds
            .get_or_create(&StageLabel {
                stage: stage.as_str(),
            })
            .observe(seconds);
    }

    pub fn reaction_took(&self, seconds: f64) {
        self.reaction_seconds.observe(seconds);
    }

    /// The registry in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cordon(policy: &str) -> Action {
        Action {
            policy: policy.into(),
            reason: Reason::Cordoned,
            message: String::new(),
            kind: ActionKind::Cordon {
                node: "any-node-name".into(),
            },
        }
    }

    #[test]
    fn encodes_bounded_labels_and_the_build() {
        let metrics = Metrics::new();
        metrics.observe_plan(&Plan::default());
        metrics.failed("fleet", Reason::BlockedByPDB);
        metrics.action_failed(&cordon("fleet"), Some(403));
        metrics.withheld("fleet", Withheld::StaleView);
        metrics.observe_failures(2, 1, true);
        metrics.reaction_took(0.3);
        let text = metrics.encode();
        for line in [
            "k8sm_actions_failed_total{policy=\"fleet\",reason=\"BlockedByPDB\"} 1",
            "k8sm_action_failures_total{policy=\"fleet\",action=\"Cordon\",code=\"403\"} 1",
            "k8sm_actions_withheld_total{policy=\"fleet\",cause=\"stale_view\"} 1",
            "k8sm_objects_backing_off 2",
            "k8sm_watches_failing 1",
            "k8sm_view_stale 1",
            "# TYPE k8sm_eviction_reaction_seconds histogram",
            "k8sm_eviction_reaction_seconds_bucket{le=\"0.25\"} 0",
            "k8sm_eviction_reaction_seconds_bucket{le=\"0.5\"} 1",
            "k8sm_eviction_reaction_seconds_count 1",
            &format!(
                "k8sm_build_info{{version=\"{}\",commit=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION"),
                env!("K8SM_COMMIT")
            ),
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(!text.contains("any-node-name"), "{text}");
    }

    #[test]
    fn blocked_pods_are_the_planner_s_blocked_pods() {
        use k8sm_planner::ClusterView;
        use k8sm_planner::testing::{at, node, policy, replica_set, unmanaged_pod};
        // n1 drains: web-1 waits for its workload (web-2 is not Ready), debug blocks under policy
        // Never, and going is terminating already (a wait that ends by itself).
        let web = replica_set("shop", "web", 2);
        let view = ClusterView {
            nodes: vec![node("n1").marked(at(0)).admitted(at(1)), node("n2")],
            pods: k8sm_planner::testing::shared_pods([
                web.pod("web-1", "n1"),
                web.pod("web-2", "n2").not_ready(),
                unmanaged_pod("ops", "debug", "n1"),
                unmanaged_pod("ops", "going", "n1").terminating(),
            ]),
            owners: vec![web.into()],
            policies: vec![policy("fleet")],
            ..ClusterView::default()
        };
        let metrics = Metrics::new();
        metrics.observe_plan(&k8sm_planner::plan(&view, at(2)));
        let text = metrics.encode();
        assert!(text.contains("k8sm_blocked_pods 2"), "{text}");
        // The counters of the policy start at 0, before anything happened.
        for line in [
            "k8sm_evictions_total{policy=\"fleet\",reason=\"Evicted\"} 0",
            "k8sm_deletions_total{policy=\"fleet\",reason=\"DeletedUnmanagedPod\"} 0",
            "k8sm_surge_moves_total{policy=\"fleet\"} 0",
            "k8sm_actions_withheld_total{policy=\"fleet\",cause=\"backoff\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
    }
}
