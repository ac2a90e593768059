//! The entry point: `plan(view, now)`, one pass over every policy, selected node and pod.
//!
//! Policies are planned one after the other, by name, against one ledger of workload health and
//! budget allowances, so that evictions planned for one policy count for the next. Paused policies,
//! and policies that do not carry their finalizer yet, come last, each against a copy of the
//! ledger: what they would do is reported, and changes nothing for the others. A policy being
//! deleted plans nothing: it only waits until every node it held is handed back. Nodes that no live
//! policy selects and that carry k8sm's state are handed back (docs/design.md §5.2).

use chrono::{DateTime, Utc};
use k8sm_api::NodeCounts;

use crate::{
    ClusterView, NodeView, PolicyView, Reason,
    index::{Index, tally::KeptTally},
    model::output::{Action, ActionKind, EtaInputs, Plan, PodRef, PolicyPlan},
    objects::budgets::KeptBudgets,
    objects::controller_classes::ControllerClasses,
    objects::node_state,
    objects::pod_cache::PodCache,
    objects::selector::Selector,
    pass::PolicyPass,
    pass::claims::Claims,
    pass::conditions::{self, condition},
    pass::kept_decisions::KeptDecisions,
    rules::drain::earliest,
    rules::health::Ledger,
    rules::window,
};

/// Plans one pass: what to do now, and where every selected node stands. Pure: the same view and
/// `now` always give the same plan, whatever the order of the view's vectors. A caller that plans
/// again and again (the controller) keeps a [`Planner`] instead, which gives the same plans faster.
pub fn plan(view: &ClusterView, now: DateTime<Utc>) -> Plan {
    let mut fresh = Planner::default();
    plan_with(view, &mut fresh.kept(false), now)
}

/// A planner for pass after pass over a changing view: it keeps what it worked out from each pod
/// alone (see `pod_cache`) and from each controller with its owners (see `controller_classes`), so
/// that a pass reads only the pods and controllers that changed since the last one, and the
/// decisions of the draining nodes (see `kept_decisions`), so that it decides again only the nodes
/// whose decisions read something that changed. Its plans are exactly [`plan`]'s for the same view
/// and `now`, whatever views it planned before.
#[derive(Default)]
pub struct Planner {
    pods: PodCache,
    controllers: ControllerClasses,
    budgets: KeptBudgets,
    tally: KeptTally,
    decisions: KeptDecisions,
}

/// What a pass reads and keeps of the planner's memory.
struct Kept<'p> {
    pods: &'p mut PodCache,
    controllers: &'p mut ControllerClasses,
    budgets: &'p mut KeptBudgets,
    tally: &'p mut KeptTally,
    /// `None`: decide every node (a planner that plans once keeps nothing for a next pass).
    decisions: Option<&'p mut KeptDecisions>,
}

impl Planner {
    /// Plans one pass, as [`plan`] does.
    pub fn plan(&mut self, view: &ClusterView, now: DateTime<Utc>) -> Plan {
        let plan = plan_with(view, &mut self.kept(true), now);
        // The kept decisions name owners by address: every test's pass checks that the owners of
        // this pass stay held until the next pass's index is built.
        #[cfg(test)]
        assert!(
            self.controllers.owners().len() == view.owners.len()
                && self
                    .controllers
                    .owners()
                    .iter()
                    .zip(&view.owners)
                    .all(|(held, owner)| std::sync::Arc::ptr_eq(held, owner)),
            "the pass's owners are held"
        );
        plan
    }

    fn kept(&mut self, decisions: bool) -> Kept<'_> {
        Kept {
            pods: &mut self.pods,
            controllers: &mut self.controllers,
            budgets: &mut self.budgets,
            tally: &mut self.tally,
            decisions: decisions.then_some(&mut self.decisions),
        }
    }
}

fn plan_with(view: &ClusterView, kept: &mut Kept, now: DateTime<Utc>) -> Plan {
    let index = Index::new(
        view,
        kept.pods,
        kept.controllers,
        kept.budgets,
        kept.tally,
        now,
    );
    if let Some(decisions) = kept.decisions.as_deref_mut() {
        decisions.begin(&index);
    }
    let mut policies: Vec<&PolicyView> = view.policies.iter().collect();
    policies.sort_by(|a, b| a.name.cmp(&b.name));

    let selections: Vec<Result<Vec<&NodeView>, String>> = policies
        .iter()
        .map(|p| {
            Selector::new(&p.spec.node_selector)
                .map(|s| {
                    index
                        .nodes
                        .values()
                        .copied()
                        .filter(|n| s.matches(&n.labels))
                        .collect()
                })
                .map_err(|e| e.to_string())
        })
        .collect();
    // Selection first: a node claimed by two live policies is acted on by neither. A policy being
    // deleted claims nothing: it hands its nodes back.
    let mut claims = Claims::new(&index);
    for (policy, selection) in policies.iter().zip(&selections) {
        if policy.deleting {
            continue;
        }
        for node in selection.iter().flatten() {
            claims.claim(node, &policy.name);
        }
    }

    let mut plan = Plan::default();
    let mut ledger = Ledger::new(&index).with_calls(view.calls.as_ref());
    // Policies that act first, in name order; then the ones that only report, on copies of the
    // ledger.
    let acts = |p: &PolicyView| !p.paused() && p.has_finalizer;
    let mut order: Vec<usize> = (0..policies.len())
        .filter(|&i| !policies[i].deleting)
        .collect();
    order.sort_by_key(|&i| !acts(policies[i]));
    for i in order {
        let policy = policies[i];
        let mut scratch;
        let ledger = if acts(policy) {
            &mut ledger
        } else {
            scratch = ledger.clone();
            &mut scratch
        };
        // Only a policy that acts keeps decisions: the others decide on a copy of the ledger.
        let decisions = kept
            .decisions
            .as_deref_mut()
            .filter(|_| acts(policy))
            .map(|d| d.policy(&policy.name, &policy.spec));
        let pass = PolicyPass {
            policy,
            index: &index,
            claims: &claims,
            now,
            gate: window::gate(&policy.spec, now),
            pace_by_room: view.pace_by_room,
            kept: decisions,
        };
        let (mut out, policy_plan) = pass.run(&selections[i], ledger);
        if !policy.has_finalizer {
            // Nothing is done on behalf of a policy that could be deleted without handing its nodes
            // back.
            out.actions.clear();
            out.action(
                &policy.name,
                ActionKind::AddFinalizer {
                    policy: policy.name.clone(),
                },
                Reason::Finalizer,
                "finalizer added: deleting this policy first hands its nodes back".to_owned(),
            );
        }
        plan.actions.extend(out.actions);
        plan.nodes.extend(out.nodes);
        plan.next_wake = earliest(plan.next_wake, out.wake);
        plan.policies.push(policy_plan);
    }
    if let Some(decisions) = kept.decisions.as_deref_mut() {
        decisions.finish();
    }
    hand_back(&policies, &selections, &claims, &index, &mut plan);
    plan.next_wake = earliest(plan.next_wake, index.next_available);

    sort_output(&mut plan, &policies, &index);
    plan.policies.sort_by(|a, b| a.policy.cmp(&b.policy));
    plan
}

/// An action's rank, and the positions of its policy and node in name order (0: none).
type ActionKey = (u8, u32, u32);

/// Sorts the pass's actions into [`action_order`] and its nodes' reports by policy and node, as
/// comparing the names would: by the names' positions among the policies and the index's nodes
/// (both in name order), which compare as integers, reading the pods' references only between
/// actions on one node (a large fleet's pass plans tens of thousands of evictions). A name not
/// among them (a deleted node's record) leaves the comparisons to the names.
fn sort_output(plan: &mut Plan, policies: &[&PolicyView], index: &Index) {
    let policy_at = |name: Option<&str>| match name {
        None => Some(0),
        Some(name) => policies
            .binary_search_by(|p| p.name.as_str().cmp(name))
            .ok()
            .map(|i| u32::try_from(i + 1).unwrap_or(u32::MAX)),
    };
    let node_at = |name: Option<&str>| match name {
        None => Some(0),
        Some(name) => index
            .node_position_by_name(name)
            .map(|i| i.saturating_add(1)),
    };
    let action_keys: Option<Vec<(ActionKey, usize)>> = plan
        .actions
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let key = (
                a.kind.rank(),
                policy_at(a.kind.policy())?,
                node_at(a.kind.node())?,
            );
            Some((key, i))
        })
        .collect();
    match action_keys {
        Some(keys) => permute(&mut plan.actions, keys, |actions, i, j| {
            actions[i].kind.pod().cmp(&actions[j].kind.pod())
        }),
        None => plan
            .actions
            .sort_by(|a, b| action_order(a).cmp(&action_order(b))),
    }
    let node_keys: Option<Vec<((u32, u32), usize)>> = plan
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| Some(((policy_at(Some(&n.policy))?, node_at(Some(&n.node))?), i)))
        .collect();
    match node_keys {
        Some(keys) => permute(&mut plan.nodes, keys, |_, _, _| std::cmp::Ordering::Equal),
        None => plan
            .nodes
            .sort_by(|a, b| (&a.policy, &a.node).cmp(&(&b.policy, &b.node))),
    }
    #[cfg(test)]
    {
        assert!(
            plan.actions
                .is_sorted_by(|a, b| action_order(a) <= action_order(b))
        );
        assert!(
            plan.nodes
                .is_sorted_by(|a, b| (&a.policy, &a.node) <= (&b.policy, &b.node))
        );
    }
}

/// Puts `items` in the order of their `keys` (each with the item's position), then of `tie` between
/// items of equal keys, then of their positions: in place, cycle by cycle (the item for each place
/// is where the last swap of its cycle left it).
fn permute<T, K: Ord>(
    items: &mut [T],
    mut keys: Vec<(K, usize)>,
    tie: impl Fn(&[T], usize, usize) -> std::cmp::Ordering,
) {
    // Unstable, as the positions tell every two keys apart; the keys side by side in memory.
    keys.sort_unstable_by(|(a, i), (b, j)| {
        a.cmp(b).then_with(|| tie(items, *i, *j)).then(i.cmp(j))
    });
    let order: Vec<usize> = keys.into_iter().map(|(_, i)| i).collect();
    let mut done = vec![false; items.len()];
    for start in 0..items.len() {
        let mut at = start;
        while !done[at] {
            done[at] = true;
            let from = order[at];
            if from == start {
                break;
            }
            items.swap(at, from);
            at = from;
        }
    }
}

/// Hands back every node that carries k8sm's state and that no live policy selects, or two do
/// (neither acts on it, so neither may leave it cordoned), and lets a policy being deleted go once
/// none of its nodes needs it any more.
fn hand_back(
    policies: &[&PolicyView],
    selections: &[Result<Vec<&NodeView>, String>],
    claims: &Claims<'_, '_>,
    index: &Index,
    plan: &mut Plan,
) {
    let deleting: Vec<(&PolicyView, &[&NodeView])> = policies
        .iter()
        .zip(selections)
        .filter(|(p, _)| p.deleting)
        .map(|(p, s)| (*p, s.as_deref().unwrap_or_default()))
        .collect();
    for node in index.nodes.values() {
        let claimed_by = claims.of(node);
        if claimed_by.len() == 1 {
            continue;
        }
        let Some(kind) = node_state::release(node) else {
            continue;
        };
        let by = deleting
            .iter()
            .find(|(_, selected)| selected.iter().any(|n| n.name == node.name))
            .map(|(p, _)| p.name.as_str());
        let why = match (claimed_by, by) {
            ([_, _, ..], _) => format!(
                "policies {} select the node: neither acts on it",
                claimed_by.join(" and ")
            ),
            (_, Some(policy)) => format!("policy {policy} is being deleted"),
            (_, None) => "no policy selects the node any more".to_owned(),
        };
        plan.actions.push(Action {
            policy: by.unwrap_or_default().to_owned(),
            reason: Reason::Released,
            message: format!(
                "{why}: k8sm removed what it had put on the node (its cordon, mark, taint and kamikaze keys); the \
                 node is left as it was otherwise"
            ),
            kind,
        });
    }
    for (policy, selected) in deleting {
        let pending: Vec<String> = selected
            .iter()
            .filter(|n| claims.of(n).len() != 1 && node_state::release(n).is_some())
            .map(|n| n.name.clone())
            .collect();
        if pending.is_empty() && policy.has_finalizer {
            plan.actions.push(Action {
                policy: policy.name.clone(),
                reason: Reason::Finalizer,
                message: "every node handed back: finalizer removed".to_owned(),
                kind: ActionKind::RemoveFinalizer {
                    policy: policy.name.clone(),
                },
            });
        }
        let message = format!(
            "being deleted: handing {} node(s) back ({})",
            pending.len(),
            conditions::name_list(&pending)
        );
        plan.policies.push(PolicyPlan {
            policy: policy.name.clone(),
            generation: policy.generation,
            counts: NodeCounts::default(),
            slots: 0,
            slots_in_use: 0,
            paused: policy.paused(),
            conditions: vec![condition(Reason::Released, message, pending)],
            eta: EtaInputs::default(),
            deleting: true,
            deleted_nodes: Vec::new(),
            window: None,
        });
    }
}

/// The order in which a pass's actions execute: by rank, then policy, node and pod.
fn action_order(a: &Action) -> (u8, Option<&str>, Option<&str>, Option<&PodRef>) {
    (a.kind.rank(), a.kind.policy(), a.kind.node(), a.kind.pod())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// Permuted by half their keys, ties told by the whole keys, items are in the order a
        /// stable sort by their keys gives.
        #[test]
        fn permuted_in_place_is_sorted_by_key_tie_and_position(keys in proptest::collection::vec(0u8..6, 0..64)) {
            let mut items: Vec<(u8, usize)> = keys.iter().copied().zip(0..).collect();
            let mut sorted = items.clone();
            sorted.sort_by_key(|&(key, _)| key);
            let by_half = items.iter().map(|&(key, i)| (key / 2, i)).collect();
            super::permute(&mut items, by_half, |items, i, j| items[i].0.cmp(&items[j].0));
            prop_assert_eq!(items, sorted);
        }
    }
}
