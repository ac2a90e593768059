//! The gauges about one policy, labelled `policy`: its nodes by phase, the nodes its node
//! conditions name, whether it is paused, degraded and inside its maintenance window, and its ETA.
//! Only the leader exports them (a standby's would be stale and double the sums), and a policy's
//! series go with the policy.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use chrono::{DateTime, Utc};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use k8sm_api::{ExecutorUpgradePolicy, ExecutorUpgradePolicyStatus, NodePhase, condition_types};
use k8sm_planner::{Plan, Reason};
use k8sm_view::time::from_time;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabel {
    policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyPhaseLabel {
    policy: String,
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyReasonLabel {
    policy: String,
    reason: &'static str,
}

/// The policy conditions that name nodes, each exported even at 0 so that alerts and panels
/// always find a series.
pub(crate) const NODE_CONDITIONS: [Reason; 5] = [
    Reason::Stalled,
    Reason::RestartOverdue,
    Reason::UnexpectedExecutor,
    Reason::MalformedAnnotation,
    Reason::PolicyConflict,
];

pub(crate) struct PolicyGauges {
    nodes: Family<PolicyPhaseLabel, Gauge>,
    condition_nodes: Family<PolicyReasonLabel, Gauge>,
    paused: Family<PolicyLabel, Gauge>,
    degraded: Family<PolicyLabel, Gauge>,
    window_open: Family<PolicyLabel, Gauge>,
    eta_seconds: Family<PolicyLabel, Gauge<f64, AtomicU64>>,
    /// The policies with series now: the families cannot list their labels.
    exported: Mutex<BTreeSet<String>>,
}

impl PolicyGauges {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let gauges = Self {
            nodes: Family::default(),
            condition_nodes: Family::default(),
            paused: Family::default(),
            degraded: Family::default(),
            window_open: Family::default(),
            eta_seconds: Family::default(),
            exported: Mutex::new(BTreeSet::new()),
        };
        registry.register(
            "nodes",
            "Nodes a policy selects, by upgrade phase (nodes two policies select count for neither)",
            gauges.nodes.clone(),
        );
        registry.register(
            "policy_condition_nodes",
            "Nodes named by a policy's node condition (Stalled, RestartOverdue, UnexpectedExecutor, \
             MalformedAnnotation, PolicyConflict), by reason",
            gauges.condition_nodes.clone(),
        );
        registry.register(
            "policy_paused",
            "1 while the policy is paused (spec.paused)",
            gauges.paused.clone(),
        );
        registry.register(
            "policy_degraded",
            "1 while the policy's Degraded condition is True",
            gauges.degraded.clone(),
        );
        registry.register(
            "policy_window_open",
            "1 while nodes may be admitted and restarted: the maintenance window is open, or the policy \
             has none; 0 while it is closed or cannot be read",
            gauges.window_open.clone(),
        );
        registry.register(
            "policy_eta_seconds",
            "Seconds until the policy's status.eta; no series while there is none (paused, outside the \
             window, a node waiting for an operator, nothing left to do)",
            gauges.eta_seconds.clone(),
        );
        gauges
    }

    /// The node counts, node conditions and pause of every policy in `plan`; drops the series of
    /// policies no longer in it.
    pub(crate) fn observe_plan(&self, plan: &Plan) {
        let planned: BTreeSet<String> = plan.policies.iter().map(|p| p.policy.clone()).collect();
        let gone: Vec<String> = {
            let mut exported = self.exported.lock().unwrap_or_else(|e| e.into_inner());
            let gone = exported.difference(&planned).cloned().collect();
            *exported = planned;
            gone
        };
        for policy in &gone {
            self.forget(policy);
        }
        for policy in &plan.policies {
            for phase in NodePhase::ALL {
                self.nodes
                    .get_or_create(&PolicyPhaseLabel {
                        policy: policy.policy.clone(),
                        phase: phase.as_str(),
                    })
                    .set(i64::from(policy.counts.get(phase)));
            }
            for reason in NODE_CONDITIONS {
                let named: usize = policy
                    .conditions
                    .iter()
                    .filter(|c| c.reason == reason)
                    .map(|c| c.nodes.len())
                    .sum();
                self.condition_nodes
                    .get_or_create(&PolicyReasonLabel {
                        policy: policy.policy.clone(),
                        reason: reason.as_str(),
                    })
                    .set(i64::try_from(named).unwrap_or(i64::MAX));
            }
            let label = PolicyLabel {
                policy: policy.policy.clone(),
            };
            self.paused
                .get_or_create(&label)
                .set(i64::from(policy.paused));
        }
    }

    /// What the status written for `policy` says: Degraded, the window, the ETA.
    pub(crate) fn observe_status(
        &self,
        policy: &ExecutorUpgradePolicy,
        status: &ExecutorUpgradePolicyStatus,
        now: DateTime<Utc>,
    ) {
        let label = PolicyLabel {
            policy: policy.metadata.name.clone().unwrap_or_default(),
        };
        let degraded = status
            .conditions
            .iter()
            .any(|c| c.type_ == condition_types::DEGRADED && c.status == "True");
        self.degraded.get_or_create(&label).set(i64::from(degraded));
        // No window in the status: the spec has none, or one that cannot be read (closed).
        let open = status
            .window
            .as_ref()
            .map_or(policy.spec.window.is_none(), |w| w.open);
        self.window_open.get_or_create(&label).set(i64::from(open));
        match &status.eta {
            Some(eta) => {
                let seconds = (from_time(eta) - now).num_milliseconds() as f64 / 1000.0;
                self.eta_seconds.get_or_create(&label).set(seconds.max(0.0));
            }
            None => {
                self.eta_seconds.remove(&label);
            }
        }
    }

    /// Drops every policy's series: this replica no longer leads.
    pub(crate) fn forget_all(&self) {
        let exported =
            std::mem::take(&mut *self.exported.lock().unwrap_or_else(|e| e.into_inner()));
        for policy in &exported {
            self.forget(policy);
        }
    }

    fn forget(&self, policy: &str) {
        let label = PolicyLabel {
            policy: policy.to_owned(),
        };
        for phase in NodePhase::ALL {
            self.nodes.remove(&PolicyPhaseLabel {
                policy: policy.to_owned(),
                phase: phase.as_str(),
            });
        }
        for reason in NODE_CONDITIONS {
            self.condition_nodes.remove(&PolicyReasonLabel {
                policy: policy.to_owned(),
                reason: reason.as_str(),
            });
        }
        self.paused.remove(&label);
        self.degraded.remove(&label);
        self.window_open.remove(&label);
        self.eta_seconds.remove(&label);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use k8sm_api::{ExecutorUpgradePolicySpec, WindowStatus};
    use k8sm_planner::ClusterView;
    use k8sm_planner::testing::{at, node, policy};
    use k8sm_view::time::to_time;

    use super::*;

    fn encode(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    fn has(text: &str, line: &str) -> bool {
        text.lines().any(|l| l == line)
    }

    #[test]
    fn each_policy_has_its_own_counts_and_pause() {
        let mut registry = Registry::with_prefix("k8sm");
        let gauges = PolicyGauges::register(&mut registry);
        let view = ClusterView {
            nodes: vec![
                node("a1").label("pool", "a"),
                node("a2").label("pool", "a"),
                node("b1").label("pool", "b"),
            ],
            policies: vec![
                policy("alpha").selecting("pool", "a"),
                policy("beta")
                    .selecting("pool", "b")
                    .with(|s| s.paused = true),
            ],
            ..ClusterView::default()
        };
        gauges.observe_plan(&k8sm_planner::plan(&view, at(0)));
        let text = encode(&registry);
        for line in [
            // One of alpha's nodes is admitted at once (one slot); paused beta admits none.
            "k8sm_nodes{policy=\"alpha\",phase=\"Incompatible\"} 1",
            "k8sm_nodes{policy=\"alpha\",phase=\"Draining\"} 1",
            "k8sm_nodes{policy=\"beta\",phase=\"Incompatible\"} 1",
            "k8sm_nodes{policy=\"beta\",phase=\"Compatible\"} 0",
            "k8sm_policy_paused{policy=\"alpha\"} 0",
            "k8sm_policy_paused{policy=\"beta\"} 1",
            "k8sm_policy_condition_nodes{policy=\"alpha\",reason=\"RestartOverdue\"} 0",
            "k8sm_policy_condition_nodes{policy=\"beta\",reason=\"Stalled\"} 0",
        ] {
            assert!(has(&text, line), "{line} in {text}");
        }

        // beta is gone: its series go; a standby exports none at all.
        let view = ClusterView {
            policies: vec![policy("alpha").selecting("pool", "a")],
            ..view
        };
        gauges.observe_plan(&k8sm_planner::plan(&view, at(1)));
        let text = encode(&registry);
        assert!(!text.contains("beta"), "{text}");
        assert!(text.contains("policy=\"alpha\""), "{text}");
        gauges.forget_all();
        assert!(!encode(&registry).contains("alpha"));
    }

    #[test]
    fn conflicting_nodes_are_counted_by_reason() {
        let mut registry = Registry::with_prefix("k8sm");
        let gauges = PolicyGauges::register(&mut registry);
        let view = ClusterView {
            nodes: vec![node("n1"), node("n2")],
            policies: vec![policy("one"), policy("two")],
            ..ClusterView::default()
        };
        gauges.observe_plan(&k8sm_planner::plan(&view, at(0)));
        let text = encode(&registry);
        assert!(
            has(
                &text,
                "k8sm_policy_condition_nodes{policy=\"one\",reason=\"PolicyConflict\"} 2"
            ),
            "{text}"
        );
    }

    fn degraded(status: &str) -> Condition {
        Condition {
            type_: condition_types::DEGRADED.into(),
            status: status.into(),
            reason: "Stalled".into(),
            message: String::new(),
            last_transition_time: to_time(at(0)),
            observed_generation: Some(1),
        }
    }

    #[test]
    fn the_status_gives_degraded_the_window_and_the_eta() {
        let mut registry = Registry::with_prefix("k8sm");
        let gauges = PolicyGauges::register(&mut registry);
        let now = at(0);
        let mut fleet = ExecutorUpgradePolicy::new("fleet", ExecutorUpgradePolicySpec::default());
        let mut status = ExecutorUpgradePolicyStatus {
            conditions: vec![degraded("True")],
            eta: Some(to_time(now + chrono::Duration::seconds(90))),
            ..ExecutorUpgradePolicyStatus::default()
        };
        gauges.observe_status(&fleet, &status, now);
        let text = encode(&registry);
        for line in [
            "k8sm_policy_degraded{policy=\"fleet\"} 1",
            // No window: always open.
            "k8sm_policy_window_open{policy=\"fleet\"} 1",
            "k8sm_policy_eta_seconds{policy=\"fleet\"} 90.0",
        ] {
            assert!(has(&text, line), "{line} in {text}");
        }

        // A closed window, no ETA, no longer degraded.
        status.conditions = vec![degraded("False")];
        status.eta = None;
        status.window = Some(WindowStatus {
            open: false,
            opens_at: None,
            closes_at: None,
        });
        gauges.observe_status(&fleet, &status, now);
        let text = encode(&registry);
        assert!(
            has(&text, "k8sm_policy_degraded{policy=\"fleet\"} 0"),
            "{text}"
        );
        assert!(
            has(&text, "k8sm_policy_window_open{policy=\"fleet\"} 0"),
            "{text}"
        );
        assert!(!text.contains("k8sm_policy_eta_seconds{"), "{text}");

        // A window in the spec that the status cannot show (unreadable) counts as closed.
        fleet.spec.window = Some(
            serde_json::from_value(serde_json::json!({
                "days": ["Monday"], "start": "01:00", "end": "02:00", "timeZone": "Nowhere/Atlantis"
            }))
            .unwrap(),
        );
        status.window = None;
        gauges.observe_status(&fleet, &status, now);
        let text = encode(&registry);
        assert!(
            has(&text, "k8sm_policy_window_open{policy=\"fleet\"} 0"),
            "{text}"
        );
    }
}
