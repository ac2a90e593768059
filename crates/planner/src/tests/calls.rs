//! A pass plans only the evictions the controller's calls can launch now ([`crate::Calls`],
//! docs/design.md §8): the other pods that could go wait for a call, their node keeps its slot and
//! does not stall, and evictions the controller does not launch in this pass (a pod backing off,
//! a node written first) take no call.

use k8sm_api::{MaxConcurrentNodes, NodePhase};

use super::*;
use crate::testing::{NEW, node, policy, replica_set};
use crate::{Calls, Decision};

/// Workloads `w0`…`w9`, 10 replicas each (the default threshold lets each lose one pod a pass):
/// one pod of each on every node of `draining`, the others on the upgraded node `up`. The pods of a
/// node are named `w{i}-{node}`.
fn fleet(draining: &[NodeView]) -> ClusterView {
    let mut nodes = draining.to_vec();
    nodes.push(node("up").executor(NEW));
    let (mut owners, mut pods) = (Vec::new(), Vec::new());
    for i in 0..10 {
        let rs = replica_set("shop", &format!("w{i}"), 10);
        for n in draining {
            pods.push(rs.pod(&format!("w{i}-{}", n.name), &n.name));
        }
        for j in draining.len()..10 {
            pods.push(rs.pod(&format!("w{i}-up{j}"), "up"));
        }
        owners.push(rs);
    }
    let max = MaxConcurrentNodes::count(u32::try_from(draining.len()).unwrap()).unwrap();
    cluster(
        nodes,
        owners,
        pods,
        vec![policy("p").with(|s| s.max_concurrent_nodes = max)],
    )
}

/// Draining since minute 1, with a progress record of 10 pods left then.
fn draining(name: &str) -> NodeView {
    node(name)
        .marked(at(0))
        .admitted(at(1))
        .progressed(at(1), 10)
}

fn calls(limit: usize, running: usize) -> Calls {
    Calls {
        limit,
        running,
        for_continuations: 4,
        ..Calls::default()
    }
}

fn evicted(plan: &Plan) -> Vec<String> {
    plan.evictions()
        .map(|(pod, _)| pod.name().to_owned())
        .collect()
}

/// The pods of `node` waiting for a call.
fn waiting_for_call(plan: &Plan, node: &str) -> Vec<String> {
    node_plan(plan, node)
        .pods
        .iter()
        .filter(|p| p.reason == Some(Reason::WaitingForCall))
        .map(|p| {
            assert_eq!(p.decision, Decision::Wait);
            p.pod.name().to_owned()
        })
        .collect()
}

fn names(prefix: &str, range: std::ops::Range<usize>, node: &str) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}-{node}")).collect()
}

#[test]
fn a_pass_plans_only_the_evictions_its_free_calls_launch() {
    let mut view = fleet(&[draining("a"), draining("b")]);
    // Without a limit, one pod of each workload goes, all from `a` (the first in acting order: as
    // few pods left as `b`, and first by name).
    let all = evicted(&plan_now(&view));
    assert_eq!(all, names("w", 0..10, "a"));
    view.calls = Some(calls(6, 2));
    let plan = plan_now(&view);
    assert_eq!(evicted(&plan), names("w", 0..4, "a"));
    assert_eq!(waiting_for_call(&plan, "a"), names("w", 4..10, "a"));
    // On `b`, the workloads of the four evictions wait for their owner; the others could go.
    assert_eq!(waiting_for_call(&plan, "b"), names("w", 4..10, "b"));
    for i in 0..4 {
        let (_, reason, _) = pod_decision(&plan, "b", &format!("w{i}-b"));
        assert_eq!(reason, Some(Reason::WaitingForOwner), "w{i}-b");
    }
    // Waiting for a call is not blocked: no Event, no Blocked count.
    assert!(!Reason::WaitingForCall.blocks());
    assert_eq!(plan.policy("p").unwrap().counts.blocked, 0);
}

#[test]
fn evictions_that_continue_a_workload_have_calls_of_their_own() {
    let mut view = fleet(&[draining("a")]);
    let mut every_call_taken = calls(6, 6);
    every_call_taken.continuing = ["ReplicaSet/shop/w7".to_owned()].into();
    view.calls = Some(every_call_taken);
    let plan = plan_now(&view);
    assert_eq!(evicted(&plan), ["w7-a"]);
    let mut others = names("w", 0..10, "a");
    others.remove(7);
    assert_eq!(waiting_for_call(&plan, "a"), others);
    // With the continuations' calls taken too, it waits as well.
    view.calls.as_mut().unwrap().running = 10;
    assert!(evicted(&plan_now(&view)).is_empty());
}

#[test]
fn evictions_the_controller_does_not_launch_now_take_no_call() {
    // A pod backing off, and the pods of a node whose write goes first, are planned (reported as
    // going, counted by the ledger) without a call: the controller holds them in this pass.
    let mut view = fleet(&[draining("a"), draining("b")]);
    let mut one_call = calls(1, 0);
    one_call.backing_off = ["shop/w0-a".to_owned()].into();
    view.calls = Some(one_call.clone());
    assert_eq!(evicted(&plan_now(&view)), ["w0-a", "w1-a"]);

    one_call.held_nodes = ["a".to_owned()].into();
    view.calls = Some(one_call.clone());
    assert_eq!(evicted(&plan_now(&view)), names("w", 0..10, "a"));

    // Admitted in this pass: the admission is written first.
    let mut view = fleet(&[node("c").marked(at(0))]);
    view.calls = Some(calls(4, 4));
    let plan = plan_now(&view);
    assert_eq!(admitted(&plan), ["c".to_owned()].into());
    assert_eq!(evicted(&plan), names("w", 0..10, "c"));

    // Cordoned in this pass (admitted without its cordon, which the policy asks for).
    let mut uncordoned = draining("d");
    uncordoned.unschedulable = false;
    uncordoned.cordoned_by_k8sm = false;
    let mut view = fleet(&[uncordoned]);
    view.calls = Some(calls(4, 4));
    let plan = plan_now(&view);
    assert_eq!(summary(&plan)[0], "Cordon d");
    assert_eq!(evicted(&plan), names("w", 0..10, "d"));
}

#[test]
fn a_node_whose_pods_wait_for_a_call_keeps_its_slot() {
    // Past its progress deadline (10 minutes by default) with no pod gone: it would stall if its
    // pods waited on anything but the controller's calls.
    let mut view = fleet(&[draining("a")]);
    view.calls = Some(calls(16, 16));
    let plan = plan_now(&view);
    assert!(evicted(&plan).is_empty());
    assert_eq!(waiting_for_call(&plan, "a").len(), 10);
    assert!(
        !summary(&plan).iter().any(|a| a.starts_with("Stall")),
        "{:?}",
        summary(&plan)
    );
    assert_eq!(phase(&plan, "a"), NodePhase::Draining);
}
