//! The conditions a policy reports: conflicts, an empty selection, an unusable spec, node problems,
//! the pause.

use std::collections::BTreeMap;

use k8sm_api::{
    ExecutorUpgradePolicySpec, KamikazeMechanism, KamikazeUrlError, UnmanagedPodPolicy,
};

use crate::{
    NodeView, Reason,
    model::output::{NodePlan, PolicyCondition},
    pass::claims::Claims,
};

pub(crate) fn condition(reason: Reason, message: String, nodes: Vec<String>) -> PolicyCondition {
    PolicyCondition {
        reason,
        message,
        nodes,
    }
}

/// Problems of the spec that the apiserver should have rejected; the planner stays robust to them
/// and says so.
pub(crate) fn spec_conditions(spec: &ExecutorUpgradePolicySpec) -> Vec<PolicyCondition> {
    let mut out = Vec::new();
    if !(1..=100).contains(&spec.owner_health_threshold) {
        let message = format!(
            "ownerHealthThreshold {} is outside 1..100; using {}",
            spec.owner_health_threshold,
            spec.owner_health_threshold.clamp(1, 100)
        );
        out.push(condition(Reason::InvalidPolicy, message, vec![]));
    }
    if spec.unmanaged_pods.policy == UnmanagedPodPolicy::DeleteAfterTimeout
        && spec.unmanaged_pods.timeout.is_none()
    {
        let message =
            "unmanagedPods.policy DeleteAfterTimeout without a timeout: unmanaged pods are kept";
        out.push(condition(Reason::InvalidPolicy, message.into(), vec![]));
    }
    if spec.kamikaze.mechanism == KamikazeMechanism::Http {
        match spec.kamikaze.check_url_template() {
            Ok(()) => {}
            Err(KamikazeUrlError::NoTemplate) => {
                let message =
                    "kamikaze.mechanism Http without a urlTemplate: no kamikaze can be sent";
                out.push(condition(Reason::InvalidPolicy, message.into(), vec![]));
            }
            Err(error) => {
                let message = format!("{error}: no kamikaze can be sent");
                out.push(condition(Reason::InvalidPolicy, message, vec![]));
            }
        }
        if spec.kamikaze.is_insecure_http() && spec.kamikaze.allow_insecure_http {
            let message = "kamikaze.urlTemplate is plain http:// (kamikaze.allowInsecureHttp): the controller's token \
                           crosses the network unencrypted, for anyone on the path to read and replay; serve the agent \
                           over https:// instead";
            out.push(condition(Reason::InsecureKamikaze, message.into(), vec![]));
        }
    }
    out
}

/// One condition per set of other policies that claim some of `policy`'s nodes.
pub(crate) fn conflicts(
    policy: &str,
    shared: &[&NodeView],
    claims: &Claims<'_, '_>,
) -> Vec<PolicyCondition> {
    let mut by_others: BTreeMap<Vec<&str>, Vec<String>> = BTreeMap::new();
    for node in shared {
        let others = claims.of(node).iter().copied().filter(|p| *p != policy);
        by_others
            .entry(others.collect())
            .or_default()
            .push(node.name.clone());
    }
    by_others
        .into_iter()
        .map(|(others, nodes)| {
            let message = format!(
                "{} node(s) ({}) also selected by policy {}: neither policy acts on them; make the nodeSelectors disjoint",
                nodes.len(),
                name_list(&nodes),
                others.join(", ")
            );
            condition(Reason::PolicyConflict, message, nodes)
        })
        .collect()
}

/// Node problems that the policy reports as conditions too, with the nodes concerned.
pub(crate) fn node_conditions(nodes: &[NodePlan]) -> Vec<PolicyCondition> {
    [
        (
            Reason::MalformedAnnotation,
            "node(s) carry unreadable k8sm annotations",
        ),
        (
            Reason::RestartOverdue,
            "node(s) did not come back after kamikaze within restartTimeout",
        ),
        (
            Reason::UnexpectedExecutor,
            "node(s) came back from kamikaze with an unexpected executor and wait for an operator",
        ),
        (
            Reason::Stalled,
            "node(s) made no progress for nodeProgressDeadline and gave up their drain slot",
        ),
    ]
    .into_iter()
    .filter_map(|(reason, what)| {
        let mut names: Vec<String> = nodes
            .iter()
            .filter(|n| {
                n.blockers
                    .iter()
                    .any(|b| b.reason == reason && b.pod.is_none())
            })
            .map(|n| n.node.clone())
            .collect();
        names.sort();
        (!names.is_empty()).then(|| {
            let message = format!("{} {what}: {}", names.len(), name_list(&names));
            condition(reason, message, names)
        })
    })
    .collect()
}

/// At most this many names in a message; the condition's node list has them all.
const NAMES_IN_A_MESSAGE: usize = 5;

/// "a, b, c", or "a, b, c, d, e and 7 more": messages name the nodes concerned, within bounds.
pub(crate) fn name_list(names: &[String]) -> String {
    let shown = names[..names.len().min(NAMES_IN_A_MESSAGE)].join(", ");
    match names.len().saturating_sub(NAMES_IN_A_MESSAGE) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_lists_are_bounded() {
        let names = |n: usize| (0..n).map(|i| format!("n{i}")).collect::<Vec<_>>();
        assert_eq!(name_list(&names(0)), "");
        assert_eq!(name_list(&names(2)), "n0, n1");
        assert_eq!(name_list(&names(5)), "n0, n1, n2, n3, n4");
        assert_eq!(name_list(&names(8)), "n0, n1, n2, n3, n4 and 3 more");
    }
}
