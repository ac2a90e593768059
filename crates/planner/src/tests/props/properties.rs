//! The properties of one plan over random clusters, run as proptests, and the check that the
//! generator reaches the situations they are about.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::{prelude::*, strategy::ValueTree, test_runner::TestRunner};

use super::{
    checks::{
        check_budgets, check_eviction_api, check_other_controllers_one_at_a_time, check_sla,
        check_unmanaged, evictions_by_workload,
    },
    draw::Shape,
    generate::arb_world,
    truth::PodOf,
};
use crate::{
    ActionKind, ClusterView, ControllerRef, Reason,
    tests::{
        now, oracle, plan_now,
        support::{Rng, Tally},
    },
};

proptest! {
    // The property the others exist for: more cases.
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// (a) One plan never takes any workload below its bound `min(ceil(t*d), d-1)`: each eviction
    /// is allowed by the
    /// rule before it (room above the threshold or a fully ready workload for a Ready pod; a Ready
    /// count at the
    /// bound for one that is not Ready), counting every eviction of the plan and those in flight,
    /// with `d` and
    /// Ready counts of the generated workload (a Deployment over all its ReplicaSets).
    #[test]
    fn a_plan_never_takes_a_workload_below_its_bound(world in arb_world()) {
        check_sla(&world, &plan_now(&world.view))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    /// (b) A controller of a kind k8sm does not know loses at most one pod per plan unless its
    /// threshold allows
    /// more (its `d`: its pods that are not finished plus its evictions in flight whose pod is
    /// gone).
    #[test]
    fn an_unknown_controller_loses_one_pod_at_a_time(world in arb_world()) {
        check_other_controllers_one_at_a_time(&world, &plan_now(&world.view))?;
    }

    /// (c) Pods of controllers of kinds k8sm does not know never get a DeletePod; their evictions
    /// always use the
    /// Eviction API.
    #[test]
    fn unknown_controllers_pods_always_go_through_the_eviction_api(world in arb_world()) {
        check_eviction_api(&world, &plan_now(&world.view))?;
    }

    /// (d) Unmanaged pods go only from a node where no workload or other-controller pod is left.
    #[test]
    fn unmanaged_pods_go_only_after_the_nodes_workload_pods(world in arb_world()) {
        check_unmanaged(&world, &plan_now(&world.view), now())?;
    }

    /// (e) A budget is never overdrawn by one plan.
    #[test]
    fn budgets_are_never_overdrawn(world in arb_world()) {
        check_budgets(&world, &plan_now(&world.view))?;
    }

    /// (f) The order of the view's vectors does not matter.
    #[test]
    fn shuffling_the_view_gives_the_same_plan(world in arb_world(), seed in 1u64..) {
        let view = world.view;
        let plan = plan_now(&view);
        let mut shuffled = view.clone();
        // One seeded source for every vector, so a failing case replays from its seed.
        let mut rng = Rng(seed);
        rng.shuffle(&mut shuffled.nodes);
        rng.shuffle(&mut shuffled.pods);
        rng.shuffle(&mut shuffled.owners);
        rng.shuffle(&mut shuffled.pdbs);
        rng.shuffle(&mut shuffled.policies);
        rng.shuffle(&mut shuffled.in_flight);
        prop_assert_eq!(plan_now(&shuffled), plan);
    }

    /// (f) How the view's pods share their texts, labels and controller references does not matter:
    /// the index and
    /// the pass look shared copies up by address, and must give the plan of copies that share
    /// nothing. Shared the
    /// way the controller's conversion shares them: one copy per distinct value, whatever the
    /// namespace.
    #[test]
    fn sharing_copies_gives_the_same_plan(world in arb_world()) {
        let view = world.view;
        let plan = plan_now(&view);
        let (shared, unshared) = (share_copies(&view), unshare_copies(&view));
        prop_assert_eq!(plan_now(&shared), plan.clone());
        prop_assert_eq!(plan_now(&unshared), plan);
    }

    /// (f) A node's pods are reported in the order of their namespaces, names and UIDs, as
    /// comparing the texts
    /// orders them (the pass compares shared copies by address, and other texts by their first
    /// eight bytes first).
    #[test]
    fn a_nodes_pods_are_reported_in_text_order(world in arb_world()) {
        for node in plan_now(&world.view).nodes {
            let reported: Vec<(String, String, String)> = node
                .pods
                .iter()
                .map(|p| (p.pod.namespace().to_owned(), p.pod.name().to_owned(), p.pod.uid().to_owned()))
                .collect();
            let mut sorted = reported.clone();
            sorted.sort();
            prop_assert_eq!(reported, sorted, "node {}", node.node);
        }
    }

    /// (f) A paused policy never evicts, deletes, admits, cordons, stalls or sends kamikaze.
    #[test]
    fn paused_policies_never_disrupt(world in arb_world()) {
        let mut view = world.view;
        for p in &mut view.policies {
            p.spec.paused = true;
        }
        let plan = plan_now(&view);
        for action in &plan.actions {
            // Marks and completions are bookkeeping of nodes' executors; handing back a node that
            // no policy selects
            // any more only removes k8sm's own keys; a policy without its finalizer gets it.
            prop_assert!(
                matches!(
                    action.kind,
                    ActionKind::Mark { .. }
                        | ActionKind::Complete { .. }
                        | ActionKind::Progress { .. }
                        | ActionKind::Release { .. }
                        | ActionKind::AddFinalizer { .. }
                ),
                "{action:?}"
            );
        }
    }

    /// (f) A pass plans no more evictions than the controller's free calls launch, and a pod waits
    /// for a call only once every free call is taken. Evictions of a node that a write of the
    /// plan goes to first take no call (the controller holds them until its cache shows the
    /// write). A policy that does not act (paused, or without its finalizer) reports what it
    /// would do on a copy of the calls left: its waits are not the controller's.
    #[test]
    fn a_pod_waits_for_a_call_only_when_every_call_is_taken(world in arb_world()) {
        let Some(calls) = world.view.calls.clone() else {
            return Ok(());
        };
        let plan = plan_now(&world.view);
        let acting: BTreeSet<&str> = world
            .view
            .policies
            .iter()
            .filter(|p| p.has_finalizer && !p.deleting && !p.paused())
            .map(|p| p.name.as_str())
            .collect();
        let written: BTreeSet<&str> = plan
            .actions
            .iter()
            .filter_map(|a| match &a.kind {
                ActionKind::Mark { node, .. }
                | ActionKind::Admit { node, .. }
                | ActionKind::Cordon { node }
                | ActionKind::Complete { node, .. }
                | ActionKind::Release { node, .. } => Some(node.as_str()),
                _ => None,
            })
            .collect();
        let (mut taking, mut waiting) = (0, 0);
        for (pod, _) in plan.evictions() {
            let node = world.truth.pods[pod.uid()].node.as_deref();
            if !node.is_some_and(|n| written.contains(n)) {
                taking += 1;
            }
        }
        for node in plan.nodes.iter().filter(|n| acting.contains(n.policy.as_str())) {
            waiting += node.pods.iter().filter(|p| p.reason == Some(Reason::WaitingForCall)).count();
        }
        let free = calls.limit.saturating_sub(calls.running);
        prop_assert!(taking <= free, "{taking} evictions take a call, {free} free");
        prop_assert!(waiting == 0 || taking == free, "{waiting} wait for a call, {taking} of {free} taken");
    }

    /// (f) A reported pod of a workload that names an owner names that workload (the generated
    /// controller's UID; for a kind k8sm does not know, the reference ending in it).
    #[test]
    fn every_reported_pod_names_its_workload(world in arb_world()) {
        for node in plan_now(&world.view).nodes {
            for pod in node.pods.iter() {
                let (Some(truth), Some(owner)) = (world.truth.pods.get(pod.pod.uid()), &pod.owner) else {
                    continue;
                };
                if let PodOf::Workload(key) = &truth.of {
                    let named = owner.uid.to_string();
                    prop_assert!(
                        named == *key || named.ends_with(&format!("/{key}")),
                        "{} names {named:?}, not {key}", pod.pod
                    );
                }
            }
        }
    }

    /// (f) Planning never panics and reports every singly-selected node once.
    #[test]
    fn every_selected_node_is_reported_once(world in arb_world()) {
        let plan = plan_now(&world.view);
        let mut seen = BTreeSet::new();
        for n in &plan.nodes {
            prop_assert!(seen.insert(n.node.clone()), "{} twice", n.node);
        }
        for (name, n) in &world.truth.nodes {
            if let Some(p) = n.policy {
                let reported = plan.node(name).map(|np| np.policy.as_str());
                prop_assert_eq!(reported, Some(world.truth.policies[p].name), "node {}", name);
            }
        }
        for p in &plan.policies {
            prop_assert!(p.slots_in_use <= p.slots, "{p:?}");
            prop_assert_eq!(p.counts.total as usize, plan.nodes.iter().filter(|n| n.policy == p.policy).count());
        }
    }
}

/// The properties above are only as good as the cases they see: over a fixed sample of generated
/// worlds, the planner must meet each situation the properties are about, both acting and holding
/// back.
#[test]
fn the_generator_reaches_the_cases_that_matter() {
    let mut runner = TestRunner::deterministic();
    let strategy = arb_world();
    let mut seen = Tally::default();
    for _ in 0..300 {
        let world = strategy.new_tree(&mut runner).unwrap().current();
        let plan = plan_now(&world.view);
        let truth = &world.truth;
        let by_workload = evictions_by_workload(&world, &plan).unwrap();
        for (key, evicted) in &by_workload {
            let w = &truth.workloads[key];
            seen.saw(
                "evictions from a Deployment of several ReplicaSets",
                w.shape.is_some() && w.replica_sets > 1,
            );
            seen.saw(
                "evictions of an unknown kind's pods",
                truth.is_unknown_kind(key),
            );
            seen.saw(
                "several pods of one workload in one plan",
                evicted.len() > 1,
            );
            seen.saw(
                "evictions of pods that are not Ready",
                evicted.iter().any(|e| !e.ready),
            );
        }
        seen.saw(
            "pods waiting for a call",
            plan.nodes
                .iter()
                .flat_map(|n| n.pods.iter())
                .any(|p| p.reason == Some(crate::Reason::WaitingForCall)),
        );
        seen.saw(
            "unmanaged pods deleted",
            plan.deletions().any(|p| {
                truth
                    .pods
                    .get(p.uid())
                    .is_some_and(|p| p.of == PodOf::Unmanaged && !p.finished)
            }),
        );
        seen.saw(
            "a budget spent in full",
            truth.budgets.iter().any(|b| {
                b.allowed > 0
                    && plan
                        .evictions()
                        .filter(|(p, _)| b.covers.contains(p.uid()))
                        .count()
                        == b.allowed as usize
            }),
        );
        // A Ready pod of a stuck rollout on a draining node, which the rule keeps there.
        seen.saw(
            "a stuck rollout held at its bound",
            truth.pods.iter().any(|(uid, p)| {
                let PodOf::Workload(key) = &p.of else {
                    return false;
                };
                let Some(policy) = p.node.as_deref().and_then(|n| truth.draining(n)) else {
                    return false;
                };
                let held = oracle::most_evictions(truth.workload(key), policy.threshold).0 == 0;
                truth.workloads[key].shape == Some(Shape::Stuck)
                    && p.ready
                    && p.staying()
                    && !p.opted_out
                    && held
                    && plan.evictions().all(|(e, _)| *e.uid() != **uid)
            }),
        );
    }
    seen.assert_all_met(8, "300 worlds");
}

/// `view` with one copy of each distinct namespace, node name, label set and controller reference,
/// shared by all the pods that have it (as `k8sm-view` interns them).
fn share_copies(view: &ClusterView) -> ClusterView {
    let mut texts: BTreeMap<String, Arc<str>> = BTreeMap::new();
    let mut labels: BTreeMap<BTreeMap<String, String>, Arc<BTreeMap<String, String>>> =
        BTreeMap::new();
    let mut controllers: BTreeMap<ControllerRef, Arc<ControllerRef>> = BTreeMap::new();
    let mut text =
        |t: &Arc<str>| Arc::clone(texts.entry(t.to_string()).or_insert_with(|| Arc::clone(t)));
    let mut shared = view.clone();
    for pod in &mut shared.pods {
        let mut copy = (**pod).clone();
        copy.namespace = text(&copy.namespace);
        copy.node_name = copy.node_name.as_ref().map(&mut text);
        copy.labels = Arc::clone(
            labels
                .entry((*copy.labels).clone())
                .or_insert_with(|| Arc::clone(&copy.labels)),
        );
        copy.controller = copy.controller.as_ref().map(|c| {
            Arc::clone(
                controllers
                    .entry((**c).clone())
                    .or_insert_with(|| Arc::clone(c)),
            )
        });
        *pod = Arc::new(copy);
    }
    shared
}

/// `view` with a copy of its own of every pod's texts, labels and controller reference.
fn unshare_copies(view: &ClusterView) -> ClusterView {
    let mut unshared = view.clone();
    for pod in &mut unshared.pods {
        let mut copy = (**pod).clone();
        copy.namespace = copy.namespace.to_string().into();
        copy.name = copy.name.to_string().into();
        copy.uid = copy.uid.to_string().into();
        copy.node_name = copy.node_name.as_deref().map(Arc::from);
        copy.labels = Arc::new((*copy.labels).clone());
        copy.controller = copy.controller.as_deref().map(|c| Arc::new(c.clone()));
        *pod = Arc::new(copy);
    }
    unshared
}
