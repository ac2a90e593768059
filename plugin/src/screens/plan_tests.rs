//! Rendering tests of `plan`: a cluster view in, the planner's verdict as text out.

use super::*;
use crate::screens::fixtures::stuck_cluster;
use k8sm_api::UnmanagedPodPolicy;
use k8sm_planner::ClusterView;
use k8sm_planner::testing::{NEW, OLD, at, node, policy, replica_set, unmanaged_pod};

/// Four nodes before the upgrade starts. n1: two pods of `web` (2 replicas: one may go at a time) and the only pod
/// of `api`; n2: an unmanaged pod under policy Never; n3 and n4: three pods of `fill` each.
fn cluster() -> ClusterView {
    let web = replica_set("shop", "web", 2);
    let api = replica_set("shop", "api", 1);
    let fill = replica_set("shop", "fill", 6);
    let mut pods = vec![
        web.pod("web-1", "n1"),
        web.pod("web-2", "n1"),
        api.pod("api-1", "n1"),
        unmanaged_pod("ops", "debug", "n2"),
    ];
    for i in 1..=6 {
        pods.push(fill.pod(&format!("fill-{i}"), if i <= 3 { "n3" } else { "n4" }));
    }
    ClusterView {
        nodes: ["n1", "n2", "n3", "n4"].map(node).to_vec(),
        pods: k8sm_planner::testing::shared_pods(pods),
        owners: vec![web.into(), api.into(), fill.into()],
        policies: vec![
            policy("fleet").with(|s| s.unmanaged_pods.policy = UnmanagedPodPolicy::Never),
        ],
        ..ClusterView::default()
    }
}

fn view_of(cluster: &ClusterView, now: DateTime<Utc>) -> PlanScreen {
    let plan = k8sm_planner::plan(cluster, now);
    PlanScreen::new(&plan, "fleet", (Some(NEW.into()), true), now)
}

#[test]
fn the_first_wave_of_a_new_target() {
    let view = view_of(&cluster(), at(0));
    // `fill` (6 replicas, one may go at a time) has 6 waves to go, `web` 2: the one slot goes to a node of the longest
    // chain, in the pass that marks the nodes as in every later one; n3 before n4 by name.
    assert_eq!(view.evictions(), ["shop/fill-1"]);
    let order: Vec<(&str, Option<u32>, Option<u32>, u32)> = view
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.order, n.queue_position, n.operator_pods))
        .collect();
    // n2 has the fewest pods but needs an operator: it is never started (Blocked, no place in the queue), and the
    // table shows it before the queue.
    assert_eq!(
        order,
        [
            ("n3", Some(1), None, 0),
            ("n2", Some(2), None, 1),
            ("n1", Some(3), Some(1), 0),
            ("n4", Some(4), Some(2), 0)
        ]
    );
    let text = view.render(false, Palette::PLAIN);
    let expected = "Dry run of policy fleet at 2026-01-01T00:00:00Z, target sha256:new (as if `kubectl k8sm upgrade start` set it now)
Drain slots: 1, 1 in use after this pass
This pass: mark 4 nodes, admit or cordon 1 node, evict 1 pod

ORDER   NODE   PHASE          PODS LEFT   NEXT
1       n3     Draining       3           admitted now; pods: 1 evict, 2 wait
2       n2     Blocked        1           blocked: BlockedUnmanagedPod; pods: 1 need an operator
3       n1     Incompatible   3           waits for a drain slot; place 1 in the queue
4       n4     Incompatible   3           waits for a drain slot; place 2 in the queue

n3 (Draining):
  POD           OWNER             DECISION
  shop/fill-1   ReplicaSet/fill   evict now: workload ReplicaSet fill ready 6/6 → 5 (threshold 90% needs 6)
  shop/fill-2   ReplicaSet/fill   wait: workload ReplicaSet fill 5/6 ready, 1 terminating or not replaced, needs 6 (threshold 90%)
  shop/fill-3   ReplicaSet/fill   wait: workload ReplicaSet fill 5/6 ready, 1 terminating or not replaced, needs 6 (threshold 90%)

n2 (Blocked):
  not started while a pod on it needs an operator (1 in all): not cordoned, nothing evicted; admitted like any other node once they are cleared
  POD         OWNER   DECISION
  ops/debug   none    never: unmanaged pod (no controller): policy Never; delete it, or `kubectl k8sm force n2`
";
    assert_eq!(text, expected);
}

#[test]
fn operator_blocks_read_never() {
    // n2 alone is left: it is admitted and its unmanaged pod needs an operator.
    let mut cluster = cluster();
    cluster
        .pods
        .retain(|p| p.node_name.as_deref() == Some("n2"));
    cluster.nodes.retain(|n| n.name == "n2");
    let view = view_of(&cluster, at(0));
    let pod = &view.nodes[0].pods[0];
    assert_eq!(pod.decision, Decision::Block);
    assert!(
        pod.summary
            .starts_with("never: unmanaged pod (no controller): policy Never"),
        "{}",
        pod.summary
    );
    let text = view.render(false, Palette::PLAIN);
    assert!(text.contains("pods: 1 need an operator"), "{text}");
}

#[test]
fn nothing_left_to_do() {
    let mut cluster = cluster();
    for n in &mut cluster.nodes {
        *n = n.clone().executor(NEW);
    }
    let view = view_of(&cluster, at(0));
    assert!(view.evictions().is_empty());
    let text = view.render(false, Palette::PLAIN);
    assert!(text.contains("This pass: nothing to do"), "{text}");
    assert!(
        text.ends_with("All 4 selected nodes run the target executor: nothing to do.\n"),
        "{text}"
    );
}

#[test]
fn without_a_target_plan_suggests_one() {
    let mut cluster = cluster();
    cluster.policies[0].spec.target_executor_id = None;
    let now = at(0);
    let plan = k8sm_planner::plan(&cluster, now);
    let view = PlanScreen::new(&plan, "fleet", (None, false), now);
    assert_eq!(
        view.render(false, Palette::PLAIN),
        "Dry run of policy fleet at 2026-01-01T00:00:00Z, target none
Drain slots: 1, 0 in use after this pass
This pass: nothing to do

No target executor ID and no node marked by another component: 4 selected nodes are left alone.
Add --to ID to see what `kubectl k8sm upgrade start --to ID` would do.
"
    );
}

#[test]
fn a_paused_policy_says_what_it_would_do() {
    let mut cluster = cluster();
    cluster.nodes = cluster
        .nodes
        .into_iter()
        .map(|n| {
            if n.name == "n1" {
                n.marked(at(0)).admitted(at(1))
            } else {
                n
            }
        })
        .collect();
    cluster.policies[0].spec.paused = true;
    let view = view_of(&cluster, at(2));
    assert!(view.evictions().is_empty());
    let text = view.render(false, Palette::PLAIN);
    assert!(text.contains("PAUSED: nothing moves"), "{text}");
    assert!(!text.contains("Problem"), "the pause is no problem: {text}");
    assert!(text.contains("wait: paused; would evict"), "{text}");
}

#[test]
fn ignored_pods_only_in_wide() {
    let mut cluster = cluster();
    let agent = k8sm_planner::testing::daemon_set("kube-system", "agent");
    // On n3, the node admitted first (see `the_first_wave_of_a_new_target`).
    cluster.pods.push(agent.pod("agent-n3", "n3").into());
    cluster.owners.push(agent.into());
    let view = view_of(&cluster, at(0));
    assert!(!view.render(false, Palette::PLAIN).contains("agent-n3"));
    let wide = view.render(true, Palette::PLAIN);
    assert!(
        wide.contains("ignore: DaemonSet pod: restarts with the node"),
        "{wide}"
    );
}

#[test]
fn summaries_lead_with_the_decision() {
    assert_eq!(
        summary(
            Decision::Wait,
            "wait: owner ReplicaSet web 8/10 ready, needs 9"
        ),
        "wait: owner ReplicaSet web 8/10 ready, needs 9"
    );
    assert_eq!(
        summary(Decision::Delete, "delete unmanaged pod (no controller)"),
        "delete now: unmanaged pod (no controller)"
    );
    assert_eq!(
        summary(
            Decision::Block,
            "opted out by k8s.mesosphere.io/upgrade-opt-out"
        ),
        "never: opted out by k8s.mesosphere.io/upgrade-opt-out"
    );
    assert_eq!(summary(Decision::Evict, ""), "evict now");
}

#[test]
fn json_carries_decisions_and_reasons() {
    let value = serde_json::to_value(view_of(&cluster(), at(0))).unwrap();
    assert_eq!(value["policy"], "fleet");
    assert_eq!(value["nodes"][0]["name"], "n3");
    assert_eq!(value["nodes"][0]["pods"][0]["decision"], "Evict");
    assert_eq!(value["nodes"][0]["pods"][0]["reason"], "Evicted");
    assert_eq!(value["nodes"][0]["pods"][2]["reason"], "WaitingForOwner");
    assert_eq!(value["simulatedTarget"], true);
}

#[test]
fn stalled_and_came_back_wrong_nodes_are_blocked_and_say_why() {
    let view = view_of(&stuck_cluster(), at(22));
    let rows: Vec<(&str, NodePhase, Option<u32>, &str)> = view
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.phase, n.queue_position, n.next.as_str()))
        .collect();
    assert_eq!(
        rows,
        [
            ("n3", NodePhase::Draining, None, "pods: 1 evict"),
            (
                "n5",
                NodePhase::Blocked,
                None,
                "blocked: UnexpectedExecutor"
            ),
            (
                "n1",
                NodePhase::Blocked,
                Some(1),
                "blocked: Stalled; place 1 in the queue; pods: 2 wait"
            ),
            ("n4", NodePhase::Compatible, None, "done"),
        ]
    );
    let text = view.render(false, Palette::PLAIN);
    let section = |node: &str| {
        let start = text
            .find(&format!("\n{node} ("))
            .unwrap_or_else(|| panic!("{node}: {text}"));
        text[start + 1..].split("\n\n").next().unwrap().to_owned()
    };
    let expected = [
        ("n5", format!("n5 (Blocked):\n  came back from kamikaze still running its old executor {OLD}")),
        ("n5", "kubectl k8sm force n5 --retry-kamikaze".to_owned()),
        ("n1", "n1 (Blocked):\n  stalled at 2026-01-01T00:20:00+00:00".to_owned()),
        ("n1", "shop/web-1   ReplicaSet/web   wait: workload ReplicaSet web 1/2 ready".to_owned()),
        ("n1", "shop/api-1   ReplicaSet/api   wait: waits for a drain slot; would evict".to_owned()),
        (
            "n3",
            "data/kafka-0   KafkaNodePool/kafka (other controller)   evict now: controller KafkaNodePool kafka (2 pods \
             seen) ready 2/2 → 1 (threshold 90% needs 2) (PodDisruptionBudget data/kafka allows no disruption now: the \
             Eviction API decides)"
                .to_owned(),
        ),
    ];
    for (node, text) in expected {
        let section = section(node);
        assert!(section.contains(&text), "{node}: {text}\n{section}");
    }
}

#[test]
fn operator_only_node_blockers_are_red_and_waits_yellow() {
    let view = view_of(&stuck_cluster(), at(22));
    let text = view.render(false, Palette::COLOR);
    assert!(text.contains("  \x1b[31mcame back from kamikaze"), "{text}");
    assert!(text.contains("  \x1b[33mstalled at"), "{text}");
}
