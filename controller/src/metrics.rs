//! Prometheus metrics. Every label comes from a bounded enum (phases, reasons), never from an object's name.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use k8sm_api::NodePhase;
use k8sm_planner::{ActionKind, Plan, Reason};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabel {
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

pub struct Metrics {
    registry: Registry,
    nodes: Family<PhaseLabel, Gauge>,
    evictions: Family<ReasonLabel, Counter>,
    deletions: Family<ReasonLabel, Counter>,
    actions_failed: Family<ReasonLabel, Counter>,
    blocked_pods: Gauge,
    is_leader: Gauge,
    reconcile_seconds: Histogram,
    plan_seconds: Histogram,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("k8sm");
        let nodes = Family::<PhaseLabel, Gauge>::default();
        registry.register("nodes", "Selected nodes by upgrade phase", nodes.clone());
        let evictions = Family::<ReasonLabel, Counter>::default();
        registry.register("evictions", "Pods evicted, by reason", evictions.clone());
        let deletions = Family::<ReasonLabel, Counter>::default();
        registry.register("deletions", "Pods deleted, by reason", deletions.clone());
        let actions_failed = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "actions_failed",
            "Actions that failed or were refused (e.g. by a PodDisruptionBudget), by reason",
            actions_failed.clone(),
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
        Self {
            registry,
            nodes,
            evictions,
            deletions,
            actions_failed,
            blocked_pods,
            is_leader,
            reconcile_seconds,
            plan_seconds,
        }
    }

    pub fn observe_plan(&self, plan: &Plan) {
        for phase in NodePhase::ALL {
            let count: u32 = plan.policies.iter().map(|p| p.counts.get(phase)).sum();
            self.nodes
                .get_or_create(&PhaseLabel {
                    phase: phase.as_str(),
                })
                .set(i64::from(count));
        }
        // The planner's one meaning of blocked: a pod terminating, or waiting for a slot or the pause, is not.
        let blocked = plan
            .nodes
            .iter()
            .flat_map(|n| &n.pods)
            .filter(|p| p.is_blocked())
            .count();
        self.blocked_pods.set(blocked as i64);
    }

    pub fn executed(&self, kind: &ActionKind, reason: Reason) {
        let label = ReasonLabel {
            reason: reason.as_str(),
        };
        match kind {
            ActionKind::Evict { .. } => {
                self.evictions.get_or_create(&label).inc();
            }
            ActionKind::DeletePod { .. } => {
                self.deletions.get_or_create(&label).inc();
            }
            _ => {}
        }
    }

    pub fn failed(&self, reason: Reason) {
        self.actions_failed
            .get_or_create(&ReasonLabel {
                reason: reason.as_str(),
            })
            .inc();
    }

    pub fn set_leader(&self, leader: bool) {
        self.is_leader.set(i64::from(leader));
    }

    pub fn reconcile_took(&self, seconds: f64) {
        self.reconcile_seconds.observe(seconds);
    }

    pub fn plan_took(&self, seconds: f64) {
        self.plan_seconds.observe(seconds);
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

    #[test]
    fn encodes_every_phase_and_bounded_labels() {
        let metrics = Metrics::new();
        metrics.observe_plan(&Plan::default());
        metrics.failed(Reason::BlockedByPDB);
        let text = metrics.encode();
        for phase in NodePhase::ALL {
            assert!(
                text.contains(&format!("k8sm_nodes{{phase=\"{}\"}} 0", phase.as_str())),
                "{text}"
            );
        }
        assert!(
            text.contains("k8sm_actions_failed_total{reason=\"BlockedByPDB\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn blocked_pods_are_the_planner_s_blocked_pods() {
        use k8sm_planner::ClusterView;
        use k8sm_planner::testing::{at, node, policy, replica_set, unmanaged_pod};
        // n1 drains: web-1 waits for its workload (web-2 is not Ready), debug blocks under policy Never, and
        // going is terminating already (a wait that ends by itself).
        let web = replica_set("shop", "web", 2);
        let view = ClusterView {
            nodes: vec![node("n1").marked(at(0)).admitted(at(1)), node("n2")],
            pods: vec![
                web.pod("web-1", "n1"),
                web.pod("web-2", "n2").not_ready(),
                unmanaged_pod("ops", "debug", "n1"),
                unmanaged_pod("ops", "going", "n1").terminating(),
            ],
            owners: vec![web],
            policies: vec![policy("fleet")],
            ..ClusterView::default()
        };
        let metrics = Metrics::new();
        metrics.observe_plan(&k8sm_planner::plan(&view, at(2)));
        let text = metrics.encode();
        assert!(text.contains("k8sm_blocked_pods 2"), "{text}");
    }
}
