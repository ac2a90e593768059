//! PodDisruptionBudget → [`PdbView`]: whom it covers and how many disruptions it allows now.

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;

use k8sm_planner::{PdbView, UnhealthyPodEvictionPolicy};

pub fn pdb_view(pdb: &PodDisruptionBudget) -> PdbView {
    let status = pdb.status.as_ref();
    PdbView {
        namespace: pdb.namespace().unwrap_or_default(),
        name: pdb.name_any(),
        selector: pdb.spec.as_ref().and_then(|s| s.selector.clone()),
        // No status yet: the disruption controller has not counted, so nothing is allowed.
        disruptions_allowed: pdb
            .status
            .as_ref()
            .and_then(|s| s.disruptions_allowed)
            .unwrap_or(0),
        unhealthy_pod_eviction_policy: match pdb
            .spec
            .as_ref()
            .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
        {
            Some("AlwaysAllow") => UnhealthyPodEvictionPolicy::AlwaysAllow,
            _ => UnhealthyPodEvictionPolicy::IfHealthyBudget,
        },
        current_healthy: status.and_then(|s| s.current_healthy).unwrap_or(0),
        desired_healthy: status.and_then(|s| s.desired_healthy).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn selector_and_allowed_disruptions() {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "web-pdb", "namespace": "shop"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}
        }))
        .unwrap();
        let view = pdb_view(&pdb);
        assert_eq!(
            (view.namespace.as_str(), view.name.as_str()),
            ("shop", "web-pdb")
        );
        let labels = view
            .selector
            .clone()
            .and_then(|s| s.match_labels)
            .unwrap_or_default();
        assert_eq!(labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(view.disruptions_allowed, 1);
        assert_eq!((view.current_healthy, view.desired_healthy), (3, 2));
        assert_eq!(
            view.unhealthy_pod_eviction_policy,
            UnhealthyPodEvictionPolicy::IfHealthyBudget
        );
        assert!(view.admits_not_ready_freely());
    }

    #[test]
    fn always_allow_lets_not_ready_pods_go_even_from_a_disrupted_budget() {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "web-pdb", "namespace": "shop"},
            "spec": {"minAvailable": 3, "selector": {}, "unhealthyPodEvictionPolicy": "AlwaysAllow"},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 3, "expectedPods": 3}
        }))
        .unwrap();
        let view = pdb_view(&pdb);
        assert_eq!(
            view.unhealthy_pod_eviction_policy,
            UnhealthyPodEvictionPolicy::AlwaysAllow
        );
        assert!(view.admits_not_ready_freely());
        let if_healthy = PdbView {
            unhealthy_pod_eviction_policy: UnhealthyPodEvictionPolicy::IfHealthyBudget,
            ..view
        };
        assert!(!if_healthy.admits_not_ready_freely());
    }

    #[test]
    fn a_budget_not_yet_counted_allows_nothing_and_a_null_selector_selects_nothing() {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "new", "namespace": "shop"},
            "spec": {"maxUnavailable": 1}
        }))
        .unwrap();
        let view = pdb_view(&pdb);
        assert_eq!(view.disruptions_allowed, 0);
        assert_eq!(view.selector, None);
    }
}
