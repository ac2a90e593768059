//! The ends of a node's upgrade on a real cluster, as an operator sees them (Node objects, Events
//! by reason and type, the policy's status and conditions, `kubectl k8sm upgrade status`),
//! docs/design.md §5.2 and §5.4: kamikaze once, so that a broken executor build stops, and the
//! record `DeleteNode` keeps of a node that never comes back. The end of the policy itself (its
//! finalizer) is in `policy_deletion.rs`. Each test runs its own small cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use kube::ResourceExt;
use serde_json::json;

use k8sm_api::{
    ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, Kamikaze, KamikazeMechanism, NodePhase,
    condition_types, keys,
};
use k8sm_e2e::events::{
    event_history, first_seen, k8sm_events_about, note, occurrences, times, utc,
};
use k8sm_e2e::lifecycle::{
    assert_restarts, came_back_with, obeyed_kamikaze, retry_kamikaze, stays_put,
    wait_unexpected_executor,
};
use k8sm_e2e::nodes::{NodeState, annotation, is_cordoned, label};
use k8sm_e2e::objects::{get_node, get_node_opt, patch_node, register_node};
use k8sm_e2e::plugin::k8sm_ok;
use k8sm_e2e::scenario::{Scenario, executor_id, is_upgraded};
use k8sm_e2e::status::{condition, is_true, required_condition, status_entry};
use k8sm_e2e::workloads::{create, deployment};
use k8sm_testcluster::node_name;

const POLICY: &str = "fleet";
/// Generous deadlines: the clusters of this file run two at a time on small machines.
const PROGRESS: Duration = Duration::from_secs(180);
/// How long a node that waits for an operator is watched for anything k8sm does to it: longer than
/// the policy's restartTimeout, so an overdue timer that fired on it would show too.
const QUIET: Duration = Duration::from_secs(20);
const RESTART_TIMEOUT: &str = "15s";

// ---------------------------------------------------------------------------------------------------------------
// Kamikaze once
// ---------------------------------------------------------------------------------------------------------------

/// An executor that restarts on kamikaze but comes back with its old ID (the new package was
/// missing) is told once, acknowledges, and is reported Blocked with one `UnexpectedExecutor`
/// Warning naming the ID; nothing more happens to it while the others finish (`maxConcurrentNodes:
/// 2`). A retry by the operator tells it exactly once more; once the executor is fixed, a retry
/// upgrades it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_back_with_its_old_id_is_reported_once_not_looped() {
    const NS: &str = "back-old";
    let wrong = node_name(1);
    let others: Vec<String> = [0, 2, 3].map(node_name).to_vec();
    let mut scenario =
        Scenario::start_with_agent_args(4, NS, "1s", &[format!("--come-back-as={wrong}=old")])
            .await;
    let client = scenario.client.clone();
    let old = scenario.old_id.clone();
    create(&client, &deployment(NS, "web", 4)).await;
    scenario.wait_ready(4).await;
    scenario.start_controller(&[]);
    scenario.create_policy(POLICY, spec(&scenario, 2)).await;

    // The others finish; the wrong one obeys, comes back with its old ID and acknowledges the
    // kamikaze.
    wait_back_with_old_id(&scenario, &wrong, &others).await;
    let obeyed = obeyed_kamikaze(&get_node(&client, &wrong).await);
    let unexpected = wait_unexpected_executor(&scenario, &wrong, 1).await;
    assert!(
        note(&unexpected).contains(&format!("still running its old executor {old}")),
        "the Warning names the ID it reported: {}",
        note(&unexpected)
    );

    // Told once; reported once; Blocked with that blocker; the others told once each and upgraded.
    assert_eq!(times(&client, "Node", &wrong, "KamikazeSent").await, 1);
    for other in &others {
        assert_eq!(
            times(&client, "Node", other, "KamikazeSent").await,
            1,
            "{other}"
        );
    }
    let policy = scenario.policy_counting(POLICY, (4, 3, 1)).await;
    let entry = status_entry(&policy, &wrong).expect("the node is in the status");
    assert_eq!(entry.phase, NodePhase::Blocked, "{entry:?}");
    assert_eq!(entry.executor_id.as_deref(), Some(old.as_str()));
    assert!(
        entry.blockers.iter().any(
            |b| b.contains(&format!("still running its old executor {old}"))
                && b.contains("--retry-kamikaze")
        ),
        "the blocker says what happened and what to do: {:?}",
        entry.blockers
    );
    let status = policy.status.clone().expect("a status");
    assert_eq!(
        (
            status.counts.total,
            status.counts.compatible,
            status.counts.blocked
        ),
        (4, 3, 1),
        "{:?}",
        status.counts
    );
    assert!(!is_true(&policy, condition_types::UPGRADED));
    let degraded = required_condition(&policy, condition_types::DEGRADED);
    assert!(
        degraded.status == "True"
            && degraded.message.contains("UnexpectedExecutor")
            && degraded.message.contains(&wrong),
        "{degraded:?}"
    );
    let report = k8sm_ok(&scenario.cluster, &["upgrade", "status"]);
    println!("kubectl k8sm upgrade status:\n{report}");
    assert!(report.contains("3/4 nodes upgraded"), "{report}");
    assert!(
        report.lines().any(|l| l.starts_with(&wrong)
            && l.contains("Blocked")
            && l.contains("still running its old executor")),
        "{report}"
    );

    // Nothing more happens to it: no second kamikaze, no uncordon or re-mark, no new Event, no
    // RestartOverdue.
    stays_put(&scenario, POLICY, &wrong, QUIET, NodePhase::Blocked).await;
    assert_eq!(obeyed_kamikaze(&get_node(&client, &wrong).await), obeyed);
    assert_eq!(times(&client, "Node", &wrong, "RestartOverdue").await, 0);
    assert_restarts(&scenario, &wrong, 1);

    // The operator retries with the executor still broken: told exactly once more, reported again,
    // not looped.
    let retried = retry_kamikaze(&scenario, &wrong);
    println!("kubectl k8sm force {wrong} --retry-kamikaze --yes:\n{retried}");
    scenario
        .wait_until(
            &format!("{wrong} is told once more and back with its old ID again"),
            PROGRESS,
            || async {
                let n = get_node(&client, &wrong).await;
                let again = came_back_with(&n, &old)
                    && obeyed_kamikaze(&n) != obeyed
                    && status_entry(&scenario.policy(POLICY).await, &wrong)
                        .is_some_and(|e| e.phase == NodePhase::Blocked);
                again.then_some(())
            },
        )
        .await;
    wait_unexpected_executor(&scenario, &wrong, 2).await;
    stays_put(
        &scenario,
        POLICY,
        &wrong,
        Duration::from_secs(10),
        NodePhase::Blocked,
    )
    .await;
    assert_eq!(times(&client, "Node", &wrong, "KamikazeSent").await, 2);
    assert_restarts(&scenario, &wrong, 2);

    // The executor is fixed (the agents restart without the fault), and the operator retries:
    // upgraded.
    scenario.restart_agent("1s", &[]);
    let retried = retry_kamikaze(&scenario, &wrong);
    println!("kubectl k8sm force {wrong} --retry-kamikaze --yes:\n{retried}");
    wait_all_upgraded(&scenario, 4).await;
    assert_eq!(times(&client, "Node", &wrong, "KamikazeSent").await, 3);
    assert_restarts(&scenario, &wrong, 3);
    for other in &others {
        assert_eq!(
            times(&client, "Node", other, "KamikazeSent").await,
            1,
            "{other}"
        );
    }
}

/// An executor that comes back with a third ID (neither its old one nor the target) is reported
/// with a Warning naming all three, and with `maxConcurrentNodes: 1` it keeps the only drain slot
/// on purpose: a broken build stops at one node. The other nodes stay marked and queued, untouched.
/// Once the node's executor reports the target (fixed by the operator), the upgrade goes on and
/// finishes, without a second kamikaze for that node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_back_with_a_third_executor_is_reported_and_holds_the_only_slot() {
    const NS: &str = "back-third";
    // No pods anywhere: every node is as easy as the others, so the first admitted is the first by
    // name (§5.2).
    let first = node_name(0);
    let queued: Vec<String> = [1, 2].map(node_name).to_vec();
    let third = executor_id("1.5.0");
    let mut scenario =
        Scenario::start_with_agent_args(3, NS, "1s", &[format!("--come-back-as={first}={third}")])
            .await;
    let client = scenario.client.clone();
    let (old, new) = (scenario.old_id.clone(), scenario.new_id.clone());
    scenario.start_controller(&[]);
    scenario.create_policy(POLICY, spec(&scenario, 1)).await;

    scenario
        .wait_until(
            &format!("{first} comes back as {third} and is reported Blocked"),
            PROGRESS,
            || async {
                scenario.controllers[0].assert_running();
                let n = get_node(&client, &first).await;
                let back = annotation(&n, keys::EXECUTOR_ID_ANNOTATION) == Some(third.as_str())
                    && annotation(&n, keys::KAMIKAZE_ANNOTATION).is_none()
                    && status_entry(&scenario.policy(POLICY).await, &first)
                        .is_some_and(|e| e.phase == NodePhase::Blocked);
                back.then_some(())
            },
        )
        .await;
    let unexpected = wait_unexpected_executor(&scenario, &first, 1).await;
    for id in [&third, &old, &new] {
        assert!(
            note(&unexpected).contains(id.as_str()),
            "the Warning names {id}: {}",
            note(&unexpected)
        );
    }
    assert_eq!(times(&client, "Node", &first, "KamikazeSent").await, 1);
    assert_restarts(&scenario, &first, 1);
    let policy = scenario.policy(POLICY).await;
    let entry = status_entry(&policy, &first).expect("the node is in the status");
    let expected = format!("as {third}, neither its old executor {old} nor the target {new}");
    assert!(
        entry.blockers.iter().any(|b| b.contains(&expected)),
        "{:?}",
        entry.blockers
    );
    let report = k8sm_ok(&scenario.cluster, &["upgrade", "status"]);
    println!("kubectl k8sm upgrade status:\n{report}");
    assert!(
        report
            .lines()
            .any(|l| l.starts_with(&first) && l.contains("Blocked")),
        "{report}"
    );

    // The slot stays taken: the queued nodes are marked and wait, never admitted, cordoned or told.
    let queued_states = NodeState::read_all(&client, &queued).await;
    let histories = {
        let mut all = BTreeMap::new();
        for name in &queued {
            all.insert(name.clone(), event_history(&client, "Node", name).await);
        }
        all
    };
    let check_queued = || async {
        let policy = scenario.policy(POLICY).await;
        let status = policy.status.clone().expect("a status");
        assert_eq!(
            (
                status.counts.blocked,
                status.counts.incompatible,
                status.counts.compatible
            ),
            (1, 2, 0),
            "one blocked node holds the only slot: {:?}",
            status.counts
        );
        // Queued nodes are counted, not listed: the status lists what an operator looks at.
        assert_eq!(status.omitted_nodes, Some(2), "{:?}", status.nodes);
        for name in &queued {
            let n = get_node(&client, name).await;
            assert_eq!(
                label(&n, keys::INCOMPATIBLE_EXECUTOR_LABEL),
                Some("true"),
                "{name} is marked"
            );
            assert!(!is_cordoned(&n), "{name} was cordoned");
            assert!(
                annotation(&n, keys::DRAINING_ANNOTATION).is_none(),
                "{name} was admitted"
            );
            assert_eq!(NodeState::of(&n), queued_states[name], "{name} changed");
            assert_eq!(status_entry(&policy, name), None, "{name}");
        }
    };
    check_queued().await;
    stays_put(&scenario, POLICY, &first, QUIET, NodePhase::Blocked).await;
    check_queued().await;
    for name in &queued {
        assert_eq!(
            event_history(&client, "Node", name).await,
            histories[name],
            "{name}"
        );
        assert_eq!(times(&client, "Node", name, "KamikazeSent").await, 0);
    }

    // The operator fixes the node's executor, which publishes the target ID: the node is upgraded
    // as it is, and the queue moves on.
    patch_node(
        &client,
        &first,
        json!({ "metadata": { "annotations": { keys::EXECUTOR_ID_ANNOTATION: new } } }),
    )
    .await;
    wait_all_upgraded(&scenario, 3).await;
    assert_eq!(
        times(&client, "Node", &first, "KamikazeSent").await,
        1,
        "never told again"
    );
    assert_restarts(&scenario, &first, 1);
    assert_eq!(times(&client, "Node", &first, "Upgraded").await, 1);
    for name in &queued {
        assert_eq!(times(&client, "Node", name, "KamikazeSent").await, 1);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// DeleteNode
// ---------------------------------------------------------------------------------------------------------------

/// With `kamikaze.mechanism: DeleteNode`, a node that never registers again is recorded in
/// `status.deletedNodes`, counted (3/4, not Compatible), reported `RestartOverdue` after
/// restartTimeout, and the policy's Upgraded condition is never True meanwhile, although every
/// other node is upgraded. When the machine registers again with the target executor, the record
/// goes and the policy is Upgraded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_that_never_returns_is_remembered_and_reported_overdue() {
    const NS: &str = "delete-missing";
    let missing = node_name(1);
    let others: Vec<String> = [0, 2, 3].map(node_name).to_vec();
    let mut scenario =
        Scenario::start_with_agent_args(4, NS, "1s", &[format!("--never-restart={missing}")]).await;
    let client = scenario.client.clone();
    let (old, new) = (scenario.old_id.clone(), scenario.new_id.clone());
    let missing_uid = get_node(&client, &missing).await.uid().expect("a uid");
    create(&client, &deployment(NS, "web", 4)).await;
    scenario.wait_ready(4).await;
    scenario.start_controller(&[]);
    let started = Utc::now();
    let mut delete_node = spec(&scenario, 2);
    delete_node.kamikaze = Kamikaze {
        mechanism: KamikazeMechanism::DeleteNode,
        ..Kamikaze::default()
    };
    scenario.create_policy(POLICY, delete_node).await;

    // Every poll also checks that the policy never claims to be Upgraded while the node is missing.
    let never_upgraded = |policy: &ExecutorUpgradePolicy| {
        assert!(
            !is_true(policy, condition_types::UPGRADED),
            "Upgraded is True while {missing} is missing: {:?}",
            policy.status
        );
    };
    scenario
        .wait_until(
            &format!(
                "{missing} is deleted and the only node recorded, and the others are upgraded"
            ),
            PROGRESS,
            || async {
                scenario.controllers[0].assert_running();
                let policy = scenario.policy(POLICY).await;
                never_upgraded(&policy);
                // The others came back too: their records go once the controller completed them.
                let recorded = policy.status.as_ref().is_some_and(|s| {
                    s.deleted_nodes.len() == 1 && s.deleted_nodes[0].name == missing
                });
                let gone = get_node_opt(&client, &missing).await.is_none();
                let mut upgraded = true;
                for other in &others {
                    upgraded &= get_node_opt(&client, other)
                        .await
                        .is_some_and(|n| is_upgraded(&n, &new));
                }
                (recorded && gone && upgraded).then_some(())
            },
        )
        .await;

    let policy = scenario.policy_counting(POLICY, (4, 3, 0)).await;
    let status = policy.status.clone().expect("a status");
    assert_eq!(status.deleted_nodes.len(), 1, "{:?}", status.deleted_nodes);
    let record = &status.deleted_nodes[0];
    assert_eq!(record.uid, missing_uid, "the deleted Node's UID");
    assert_eq!(record.executor_id.as_deref(), Some(old.as_str()));
    let deleted_at = utc(&record.deleted_at.0);
    assert!(
        deleted_at >= started - chrono::Duration::seconds(1) && deleted_at <= Utc::now(),
        "deletedAt {deleted_at}, policy created at {started}"
    );
    assert_eq!(
        (
            status.counts.total,
            status.counts.compatible,
            status.counts.kamikaze_sent
        ),
        (4, 3, 1),
        "the missing node is counted, not Compatible: {:?}",
        status.counts
    );
    assert_eq!(status.upgraded.as_deref(), Some("3/4"));
    let entry = status_entry(&policy, &missing).expect("the missing node is in the status");
    assert_eq!(entry.phase, NodePhase::KamikazeSent, "{entry:?}");
    assert_eq!(times(&client, "Node", &missing, "KamikazeSent").await, 1);

    // After restartTimeout: reported overdue, from the record (there is no Node to read it from).
    let overdue = scenario
        .wait_until(
            &format!("{missing} is reported RestartOverdue"),
            PROGRESS,
            || async {
                let policy = scenario.policy(POLICY).await;
                never_upgraded(&policy);
                let degraded = condition(&policy, condition_types::DEGRADED)
                    .is_some_and(|c| c.status == "True" && c.message.contains("RestartOverdue"));
                let blocked = status_entry(&policy, &missing)
                    .is_some_and(|e| e.blockers.iter().any(|b| b.contains("restartTimeout")));
                let events =
                    k8sm_events_about(&client, "Node", &missing, Some("RestartOverdue")).await;
                (degraded && blocked && !events.is_empty()).then_some(events)
            },
        )
        .await;
    assert_eq!(
        overdue.iter().map(occurrences).sum::<u32>(),
        1,
        "reported once"
    );
    assert_eq!(overdue[0].type_.as_deref(), Some("Warning"));
    let reported_at = first_seen(&overdue[0]);
    assert!(
        reported_at >= deleted_at + chrono::Duration::seconds(15),
        "RestartOverdue at {reported_at}, before restartTimeout {RESTART_TIMEOUT} after the deletion at {deleted_at}"
    );
    let report = k8sm_ok(&scenario.cluster, &["upgrade", "status"]);
    println!("kubectl k8sm upgrade status:\n{report}");
    assert!(report.contains("3/4 nodes upgraded"), "{report}");
    assert!(
        report
            .lines()
            .any(|l| l.starts_with(&missing) && l.contains("KamikazeSent")),
        "{report}"
    );
    let policy = scenario.policy(POLICY).await;
    never_upgraded(&policy);
    assert_eq!(policy.status.expect("a status").deleted_nodes.len(), 1);
    assert_eq!(
        times(&client, "Node", &missing, "KamikazeSent").await,
        1,
        "told once"
    );

    // The machine registers again, with the target executor: the record goes and the policy is
    // Upgraded.
    let registered = Utc::now();
    let mut machine = scenario.cluster.kwok_node(&missing);
    machine
        .annotations_mut()
        .insert(keys::EXECUTOR_ID_ANNOTATION.to_owned(), new.clone());
    register_node(&client, &machine).await;
    wait_all_upgraded(&scenario, 4).await;
    // The record goes once the controller completed the node that came back (a pass or two).
    let policy = scenario
        .wait_until(
            &format!("the record of {missing} is dropped"),
            Duration::from_secs(30),
            || async {
                let policy = scenario.policy(POLICY).await;
                let dropped = policy
                    .status
                    .as_ref()
                    .is_some_and(|s| s.deleted_nodes.is_empty());
                dropped.then_some(policy)
            },
        )
        .await;
    let upgraded = required_condition(&policy, condition_types::UPGRADED);
    let since = utc(&upgraded.last_transition_time.0);
    assert!(
        since >= registered - chrono::Duration::seconds(1),
        "Upgraded became True at {since}, before {missing} registered again at {registered}"
    );
    // The Event that says the node came back, also when the controller's first write to the new
    // Node is overtaken by KWOK's own status update (409): the record stays until the
    // completion is carried out. Events are written in the background: give it a moment.
    scenario
        .wait_until(
            &format!("{missing}, which came back after k8sm deleted it, is reported Upgraded"),
            Duration::from_secs(10),
            || async {
                let back = k8sm_events_about(&client, "Node", &missing, Some("Upgraded")).await;
                back.iter().any(|e| note(e).contains(&new)).then_some(())
            },
        )
        .await;
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

/// The policy of these tests: the scenario's target, `max` drain slots, threshold 50 (pods move
/// fast), a short restartTimeout.
fn spec(scenario: &Scenario, max: u32) -> ExecutorUpgradePolicySpec {
    ExecutorUpgradePolicySpec {
        owner_health_threshold: 50,
        restart_timeout: RESTART_TIMEOUT.parse().expect("a duration"),
        ..scenario.policy_spec(max)
    }
}

/// Waits until every one of the `total` nodes is upgraded, the status says so and the Upgraded
/// condition is True.
async fn wait_all_upgraded(scenario: &Scenario, total: usize) {
    scenario.wait_all_upgraded(POLICY, total, PROGRESS).await;
    scenario
        .wait_until(
            &format!("the policy is Upgraded with all {total} nodes"),
            Duration::from_secs(30),
            || async {
                is_true(&scenario.policy(POLICY).await, condition_types::UPGRADED).then_some(())
            },
        )
        .await;
}

async fn wait_back_with_old_id(scenario: &Scenario, wrong: &str, others: &[String]) {
    let client = &scenario.client;
    scenario
        .wait_until(
            &format!("the others are upgraded and {wrong} is back with its old executor, Blocked"),
            PROGRESS,
            || async {
                scenario.controllers[0].assert_running();
                let mut upgraded = true;
                for other in others {
                    upgraded &= is_upgraded(&get_node(client, other).await, &scenario.new_id);
                }
                let back = came_back_with(&get_node(client, wrong).await, &scenario.old_id);
                let blocked = status_entry(&scenario.policy(POLICY).await, wrong)
                    .is_some_and(|e| e.phase == NodePhase::Blocked);
                (upgraded && back && blocked).then_some(())
            },
        )
        .await;
}
