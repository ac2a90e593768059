//! The ends of a node's upgrade (`tests/lifecycle.rs`): how an executor came back from its
//! kamikaze, what the agents' log says of its restarts, that a node waiting for an operator stays
//! as it is, and what an operator does about it (retry a kamikaze).

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;

use k8sm_api::{NodePhase, keys};

use crate::events::{event_history, k8sm_events_about, occurrences};
use crate::nodes::{NodeState, annotation};
use crate::scenario::Scenario;
use crate::status::status_entry;
use crate::waits::observe_for;

/// The node obeyed its kamikaze and came back running `id`, as an executor acknowledges it: the
/// kamikaze removed, its record (`kamikaze-executor-id` = `id`) and `kamikaze-obeyed` kept.
pub fn came_back_with(node: &Node, id: &str) -> bool {
    annotation(node, keys::EXECUTOR_ID_ANNOTATION) == Some(id)
        && annotation(node, keys::KAMIKAZE_ANNOTATION).is_none()
        && annotation(node, keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION) == Some(id)
        && annotation(node, keys::KAMIKAZE_OBEYED_ANNOTATION).is_some()
}

/// When the node's executor last acknowledged a kamikaze (`kamikaze-obeyed`), if it did.
pub fn obeyed_kamikaze(node: &Node) -> Option<String> {
    annotation(node, keys::KAMIKAZE_OBEYED_ANNOTATION).map(str::to_owned)
}

/// Waits for the `UnexpectedExecutor` Warning about `node` to have happened `count` times (Events
/// are written in the background, a moment after the status), and returns it.
pub async fn wait_unexpected_executor(scenario: &Scenario, node: &str, count: u32) -> Event {
    let client = &scenario.client;
    let events = scenario
        .wait_until(
            &format!("{count} UnexpectedExecutor Warning(s) about {node}"),
            Duration::from_secs(30),
            || async {
                let events =
                    k8sm_events_about(client, "Node", node, Some("UnexpectedExecutor")).await;
                (events.iter().map(occurrences).sum::<u32>() >= count).then_some(events)
            },
        )
        .await;
    assert_eq!(
        events.iter().map(occurrences).sum::<u32>(),
        count,
        "{events:?}"
    );
    let last = events.last().expect("an Event").clone();
    assert_eq!(last.type_.as_deref(), Some("Warning"));
    last
}

/// Watches `node` for `duration`: its annotations, labels, taints and cordon never change, the
/// status of `policy` keeps it in `phase`, and the controller reports nothing new about it (no
/// action, no new wait).
pub async fn stays_put(
    scenario: &Scenario,
    policy: &str,
    node: &str,
    duration: Duration,
    phase: NodePhase,
) {
    let client = &scenario.client;
    let state = NodeState::read(client, node).await;
    let history = event_history(client, "Node", node).await;
    observe_for(duration, || async {
        scenario.controllers[0].assert_running();
        assert_eq!(
            NodeState::read(client, node).await,
            state,
            "{node} changed while it waits for an operator"
        );
        assert_eq!(
            status_entry(&scenario.policy(policy).await, node).map(|e| e.phase),
            Some(phase),
            "{node}'s phase"
        );
    })
    .await;
    assert_eq!(
        event_history(client, "Node", node).await,
        history,
        "the controller reported something new about {node}"
    );
}

/// The simulated executor of `node` restarted `count` times in all, by the agents' log (one line
/// per restart).
pub fn assert_restarts(scenario: &Scenario, node: &str, count: usize) {
    let restarts = agent_log_lines(scenario, node, "restarted executor");
    assert_eq!(
        restarts.len(),
        count,
        "restarts of {node}'s executor:\n{}",
        restarts.join("\n")
    );
}

/// The operator retries a node's kamikaze: `kubectl k8sm force NODE --retry-kamikaze --yes`, which
/// removes k8sm's record of it, so that k8sm tells the node once more. Returns what the plugin
/// printed.
pub fn retry_kamikaze(scenario: &Scenario, node_name: &str) -> String {
    let out = crate::plugin::k8sm_ok(
        &scenario.cluster,
        &["force", node_name, "--retry-kamikaze", "--yes"],
    );
    assert!(out.contains("kamikaze record removed"), "{out}");
    out
}

/// Lines of the agent's log that mention `node` and contain `word`.
pub fn agent_log_lines(scenario: &Scenario, node: &str, word: &str) -> Vec<String> {
    std::fs::read_to_string(&scenario.agent.log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(node) && l.contains(word))
        .map(str::to_owned)
        .collect()
}
