//! The ends of a node's upgrade on a real cluster, as an operator sees them (Node objects, Events by reason and
//! type, the policy's status and conditions, `kubectl k8sm upgrade status`), DESIGN.md §5.2 and §5.4:
//! - kamikaze once: an executor that comes back with its old ID, or with a third one, is reported and never told
//!   again until the operator acts — with `maxConcurrentNodes: 1` it keeps the only slot, so a broken build stops;
//! - `DeleteNode`: a deleted node that never registers again is remembered in `status.deletedNodes`, counted,
//!   reported `RestartOverdue`, and the policy is not Upgraded until it is back;
//! - the policy's finalizer: `kubectl delete eup` mid-upgrade hands every node back, schedulable and clean, and
//!   leaves what others set.
//!
//! Each test runs its own small cluster; CI runs two at a time.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
use serde_json::json;

use k8sm_api::{
    ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, Kamikaze, KamikazeMechanism,
    MaxConcurrentNodes, NodePhase, NodeStatus, UnmanagedPodPolicy, UnmanagedPods, condition_types,
    keys,
};
use k8sm_e2e::kubectl_ok;
use k8sm_e2e::lifecycle::{
    NodeState, agent_log_lines, annotation, condition, event_first_time, event_history,
    events_about, get_node, has_k8sm_taint, is_cordoned, is_true, k8sm_keys, kwok_node, label,
    node, note, occurrences, patch_node, register_node, restart_agent, retry_kamikaze, taints,
    times,
};
use k8sm_e2e::plugin::k8sm_ok;
use k8sm_e2e::scenario::{Scenario, executor_id, is_upgraded};
use k8sm_e2e::workloads::{create, deployment, unmanaged_pod};
use k8sm_testcluster::{ClusterOptions, node_name};

const POLICY: &str = "fleet";
/// Generous deadlines: the clusters of this file run two at a time on small machines.
const SETUP: Duration = Duration::from_secs(120);
const PROGRESS: Duration = Duration::from_secs(180);
/// How long a node that waits for an operator is watched for anything k8sm does to it: longer than the policy's
/// restartTimeout, so an overdue timer that fired on it would show too.
const QUIET: Duration = Duration::from_secs(20);
const RESTART_TIMEOUT: &str = "15s";

// ---------------------------------------------------------------------------------------------------------------
// Kamikaze once
// ---------------------------------------------------------------------------------------------------------------

/// An executor that restarts on kamikaze but comes back with its old ID (the new package was missing) is told once,
/// acknowledges, and is reported Blocked with one `UnexpectedExecutor` Warning naming the ID; nothing more happens
/// to it while the others finish (`maxConcurrentNodes: 2`). A retry by the operator tells it exactly once more;
/// once the executor is fixed, a retry upgrades it.
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
    wait_ready(&scenario, 4).await;
    scenario.start_controller(&[]);
    scenario.create_policy(POLICY, spec(&scenario, 2)).await;

    // The others finish; the wrong one obeys, comes back with its old ID and acknowledges the kamikaze.
    wait_back_with_old_id(&scenario, &wrong, &others).await;
    let obeyed = obeyed_kamikaze(&node(&client, &wrong).await);
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
    let policy = scenario.policy(POLICY).await;
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
    let degraded = condition(&policy, condition_types::DEGRADED).expect("a Degraded condition");
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

    // Nothing more happens to it: no second kamikaze, no uncordon or re-mark, no new Event, no RestartOverdue.
    stays_put(&scenario, &wrong, QUIET, NodePhase::Blocked).await;
    assert_eq!(obeyed_kamikaze(&node(&client, &wrong).await), obeyed);
    assert_eq!(times(&client, "Node", &wrong, "RestartOverdue").await, 0);
    assert_restarts(&scenario, &wrong, 1);

    // The operator retries with the executor still broken: told exactly once more, reported again, not looped.
    let retried = retry_kamikaze(&scenario, &wrong);
    println!("kubectl k8sm force {wrong} --retry-kamikaze --yes:\n{retried}");
    scenario
        .wait_until(
            &format!("{wrong} is told once more and back with its old ID again"),
            PROGRESS,
            || async {
                let n = node(&client, &wrong).await;
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
        &wrong,
        Duration::from_secs(10),
        NodePhase::Blocked,
    )
    .await;
    assert_eq!(times(&client, "Node", &wrong, "KamikazeSent").await, 2);
    assert_restarts(&scenario, &wrong, 2);

    // The executor is fixed (the agents restart without the fault), and the operator retries: upgraded.
    restart_agent(&mut scenario, "1s", &[]);
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

/// An executor that comes back with a third ID (neither its old one nor the target) is reported with a Warning
/// naming all three, and with `maxConcurrentNodes: 1` it keeps the only drain slot on purpose: a broken build stops
/// at one node. The other nodes stay marked and queued, untouched. Once the node's executor reports the target
/// (fixed by the operator), the upgrade goes on and finishes, without a second kamikaze for that node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_back_with_a_third_executor_is_reported_and_holds_the_only_slot() {
    const NS: &str = "back-third";
    // No pods anywhere: every node is as easy as the others, so the first admitted is the first by name (§5.2).
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
                let n = node(&client, &first).await;
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
    let queued_states = {
        let mut states = BTreeMap::new();
        for name in &queued {
            states.insert(name.clone(), NodeState::read(&client, name).await);
        }
        states
    };
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
        for name in &queued {
            let n = node(&client, name).await;
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
            assert_eq!(
                status_entry(&policy, name).map(|e| e.phase),
                Some(NodePhase::Incompatible),
                "{name}"
            );
        }
    };
    check_queued().await;
    stays_put(&scenario, &first, QUIET, NodePhase::Blocked).await;
    check_queued().await;
    for name in &queued {
        assert_eq!(
            event_history(&client, "Node", name).await,
            histories[name],
            "{name}"
        );
        assert_eq!(times(&client, "Node", name, "KamikazeSent").await, 0);
    }

    // The operator fixes the node's executor, which publishes the target ID: the node is upgraded as it is, and
    // the queue moves on.
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

/// With `kamikaze.mechanism: DeleteNode`, a node that never registers again is recorded in `status.deletedNodes`,
/// counted (3/4, not Compatible), reported `RestartOverdue` after restartTimeout, and the policy's Upgraded
/// condition is never True meanwhile, although every other node is upgraded. When the machine registers again with
/// the target executor, the record goes and the policy is Upgraded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_that_never_returns_is_remembered_and_reported_overdue() {
    const NS: &str = "delete-missing";
    let missing = node_name(1);
    let others: Vec<String> = [0, 2, 3].map(node_name).to_vec();
    let mut scenario =
        Scenario::start_with_agent_args(4, NS, "1s", &[format!("--never-restart={missing}")]).await;
    let client = scenario.client.clone();
    let (old, new) = (scenario.old_id.clone(), scenario.new_id.clone());
    let missing_uid = node(&client, &missing).await.uid().expect("a uid");
    create(&client, &deployment(NS, "web", 4)).await;
    wait_ready(&scenario, 4).await;
    scenario.start_controller(&[]);
    let started = Utc::now();
    let mut delete_node = spec(&scenario, 2);
    delete_node.kamikaze = Kamikaze {
        mechanism: KamikazeMechanism::DeleteNode,
        url_template: None,
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
            &format!("{missing} is deleted and recorded, and the others are upgraded"),
            PROGRESS,
            || async {
                scenario.controllers[0].assert_running();
                let policy = scenario.policy(POLICY).await;
                never_upgraded(&policy);
                let recorded = policy
                    .status
                    .as_ref()
                    .is_some_and(|s| s.deleted_nodes.iter().any(|d| d.name == missing));
                let gone = get_node(&client, &missing).await.is_none();
                let mut upgraded = true;
                for other in &others {
                    upgraded &= get_node(&client, other)
                        .await
                        .is_some_and(|n| is_upgraded(&n, &new));
                }
                (recorded && gone && upgraded).then_some(())
            },
        )
        .await;

    let policy = scenario.policy(POLICY).await;
    let status = policy.status.clone().expect("a status");
    assert_eq!(status.deleted_nodes.len(), 1, "{:?}", status.deleted_nodes);
    let record = &status.deleted_nodes[0];
    assert_eq!(record.uid, missing_uid, "the deleted Node's UID");
    assert_eq!(record.executor_id.as_deref(), Some(old.as_str()));
    let deleted_at = from_k8s_time(&record.deleted_at);
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
                let events = events_about(&client, "Node", &missing, Some("RestartOverdue")).await;
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
    let reported_at = event_first_time(&overdue[0]);
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

    // The machine registers again, with the target executor: the record goes and the policy is Upgraded.
    let registered = Utc::now();
    register_node(
        &client,
        &kwok_node(&missing, &[(keys::EXECUTOR_ID_ANNOTATION, new.as_str())]),
    )
    .await;
    wait_all_upgraded(&scenario, 4).await;
    let policy = scenario.policy(POLICY).await;
    assert!(
        policy
            .status
            .as_ref()
            .is_some_and(|s| s.deleted_nodes.is_empty())
    );
    let upgraded = condition(&policy, condition_types::UPGRADED).expect("an Upgraded condition");
    let since = from_k8s_time(&upgraded.last_transition_time);
    assert!(
        since >= registered - chrono::Duration::seconds(1),
        "Upgraded became True at {since}, before {missing} registered again at {registered}"
    );
    // The Event that says the node came back, also when the controller's first write to the new Node is overtaken
    // by KWOK's own status update (409): the record stays until the completion is carried out. Events are written in
    // the background: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let back = events_about(&client, "Node", &missing, Some("Upgraded")).await;
        if back.iter().any(|e| note(e).contains(&new)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no Upgraded Event for {missing}, which came back after k8sm deleted it"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Handing nodes back
// ---------------------------------------------------------------------------------------------------------------

/// `kubectl delete eup` while nodes are marked and queued, draining (one of them cordoned by the operator, not by
/// k8sm) and told kamikaze returns once the controller has handed every node back: all schedulable except the one
/// the operator cordoned, without k8sm's taint, with no `k8s.mesosphere.io/*` key but the executor ID — except the
/// mark another component set — and with the labels and taints of others intact. No pod is evicted or deleted after
/// the deletion, and nothing changes on the nodes afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_policy_mid_upgrade_hands_every_node_back() {
    const NS: &str = "hand-back";
    let [hung, _, foreign, external, cordoned_by_operator] = [0, 1, 2, 3, 4].map(node_name);
    let options = ClusterOptions {
        // Replacements take a moment to become Ready, so the Deployment moves one pod at a time, slowly.
        pod_ready_delay: Duration::from_secs(3),
        ..ClusterOptions::default().with_nodes(5)
    };
    // The empty node is admitted first, drained at once and told kamikaze, and its executor never comes back: it
    // is mid-kamikaze when the policy goes. The node the operator cordoned holds only an unmanaged pod that may go
    // after an hour: admitted next, it drains (k8sm's admission, the operator's cordon) until the policy goes.
    let mut scenario =
        Scenario::start_with_options(options, NS, "1s", &[format!("--never-restart={hung}")]).await;
    let client = scenario.client.clone();
    for name in [&hung, &cordoned_by_operator] {
        patch_node(&client, name, json!({ "spec": { "unschedulable": true } })).await;
    }
    create(&client, &deployment(NS, "web", 8)).await;
    let pet = create(
        &client,
        &unmanaged_pod(NS, "pet", &cordoned_by_operator, &[]),
    )
    .await;
    wait_ready(&scenario, 9).await;
    // The operator's cordon stays.
    patch_node(&client, &hung, json!({ "spec": { "unschedulable": null } })).await;

    // What others put on nodes: the operator's cordon (above), a storage team's label and taint, another marker's
    // mark.
    patch_node(
        &client,
        &foreign,
        json!({
            "metadata": { "labels": { "storage.example.com/pool": "fast" } },
            "spec": { "taints": [
                { "key": "storage.example.com/dedicated", "value": "db", "effect": "PreferNoSchedule" }
            ] },
        }),
    )
    .await;
    let external_mark = "2025-01-01T00:00:00Z";
    patch_node(
        &client,
        &external,
        json!({
            "metadata": {
                "labels": { keys::INCOMPATIBLE_EXECUTOR_LABEL: keys::INCOMPATIBLE_EXECUTOR_LABEL_VALUE },
                "annotations": { keys::INCOMPATIBLE_EXECUTOR_ANNOTATION: external_mark },
            },
            "spec": { "taints": [
                { "key": keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY, "effect": keys::INCOMPATIBLE_EXECUTOR_TAINT_EFFECT }
            ] },
        }),
    )
    .await;

    scenario.start_controller(&[]);
    // Three slots: the hung node, the operator's node, and one whose Deployment pods move one at a time.
    let mut slow = spec(&scenario, 3);
    slow.owner_health_threshold = 90;
    slow.restart_timeout = "10m".parse().expect("a duration");
    slow.unmanaged_pods = UnmanagedPods {
        policy: UnmanagedPodPolicy::DeleteAfterTimeout,
        timeout: Some("1h".parse().expect("a duration")),
    };
    scenario.create_policy(POLICY, slow).await;

    // Mid-upgrade: one node told kamikaze, the operator's node admitted, one node draining with Deployment pods
    // left, and one marked and queued.
    let names: Vec<String> = (0..5).map(node_name).collect();
    let before = scenario
        .wait_until(
            "one node is told kamikaze, two drain (one the operator cordoned) and one is queued",
            PROGRESS,
            || async {
                scenario.controllers[0].assert_running();
                let mut nodes = Vec::new();
                for name in &names {
                    nodes.push(node(&client, name).await);
                }
                let pods = scenario.pods().await;
                let live_on = |name: &str| {
                    pods.iter()
                        .filter(|p| on_node(p, name) && p.metadata.deletion_timestamp.is_none())
                        .count()
                };
                let told = nodes.iter().any(|n| {
                    n.name_any() == hung && annotation(n, keys::KAMIKAZE_ANNOTATION).is_some()
                });
                let operators = nodes.iter().any(|n| {
                    n.name_any() == cordoned_by_operator
                        && annotation(n, keys::DRAINING_ANNOTATION).is_some()
                        && annotation(n, keys::CORDONED_BY_ANNOTATION).is_none()
                        && is_cordoned(n)
                });
                let draining = nodes.iter().any(|n| {
                    annotation(n, keys::DRAINING_ANNOTATION).is_some()
                        && annotation(n, keys::CORDONED_BY_ANNOTATION)
                            == Some(keys::CORDONED_BY_VALUE)
                        && annotation(n, keys::KAMIKAZE_ANNOTATION).is_none()
                        && is_cordoned(n)
                        && live_on(&n.name_any()) > 0
                });
                let queued = nodes.iter().any(|n| {
                    label(n, keys::INCOMPATIBLE_EXECUTOR_LABEL).is_some()
                        && annotation(n, keys::DRAINING_ANNOTATION).is_none()
                });
                (told && operators && draining && queued).then_some(nodes)
            },
        )
        .await;
    for n in &before {
        println!(
            "before: {} cordoned={} {:?}",
            n.name_any(),
            is_cordoned(n),
            k8sm_keys(n)
        );
    }
    assert!(
        scenario
            .policy(POLICY)
            .await
            .finalizers()
            .iter()
            .any(|f| f == keys::POLICY_FINALIZER),
        "the policy carries k8sm's finalizer"
    );

    // The operator deletes the policy; kubectl waits until it is gone, i.e. until the finalizer is removed.
    let began = Utc::now();
    let deleted = tokio::task::block_in_place(|| {
        kubectl_ok(
            &scenario.cluster,
            &["delete", "eup", POLICY, "--timeout=120s"],
        )
    });
    println!(
        "kubectl delete returned after {:?}: {deleted}",
        (Utc::now() - began).to_std().unwrap_or_default()
    );
    assert!(deleted.contains("deleted"), "{deleted}");
    assert!(
        Api::<ExecutorUpgradePolicy>::all(client.clone())
            .get_opt(POLICY)
            .await
            .expect("policies can be read")
            .is_none(),
        "the policy is gone"
    );

    // Every node handed back, and what others set left as it was.
    let pods_after = live_pods(&scenario).await;
    let evictions_after = times_in_namespace(&scenario, "Evicted").await;
    let mut states = BTreeMap::new();
    for name in &names {
        let n = node(&client, name).await;
        println!(
            "after: {name} cordoned={} {:?} history {:?}",
            is_cordoned(&n),
            k8sm_keys(&n),
            event_history(&client, "Node", name).await
        );
        let mut expected = vec![format!("annotation {}", keys::EXECUTOR_ID_ANNOTATION)];
        if *name == external {
            expected.extend([
                format!("annotation {}", keys::INCOMPATIBLE_EXECUTOR_ANNOTATION),
                format!("label {}", keys::INCOMPATIBLE_EXECUTOR_LABEL),
                format!("taint {}", keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY),
            ]);
        }
        expected.sort();
        assert_eq!(k8sm_keys(&n), expected, "k8sm's keys left on {name}");
        assert_eq!(
            is_cordoned(&n),
            *name == cordoned_by_operator,
            "{name}: only the operator's cordon stays"
        );
        if *name != external {
            assert!(!has_k8sm_taint(&n), "{name} keeps k8sm's taint");
        }
        states.insert(name.clone(), NodeState::of(&n));
    }
    let ext = node(&client, &external).await;
    assert_eq!(
        annotation(&ext, keys::INCOMPATIBLE_EXECUTOR_ANNOTATION),
        Some(external_mark),
        "the other marker's mark is left as it was"
    );
    assert!(has_k8sm_taint(&ext), "the other marker's taint stays");
    assert_eq!(
        live_pods(&scenario).await.get("pet"),
        pet.uid().as_ref(),
        "the unmanaged pod of the operator's node is still there"
    );
    let fgn = node(&client, &foreign).await;
    assert_eq!(label(&fgn, "storage.example.com/pool"), Some("fast"));
    assert!(
        taints(&fgn)
            .iter()
            .any(|t| t.key == "storage.example.com/dedicated"
                && t.value.as_deref() == Some("db")
                && t.effect == "PreferNoSchedule"),
        "the storage team's taint stays: {:?}",
        taints(&fgn)
    );

    // And nothing moves afterwards: no eviction, no node change (nobody re-marks or re-cordons).
    observe_for(Duration::from_secs(10), || async {
        for name in &names {
            assert_eq!(
                NodeState::read(&client, name).await,
                states[name],
                "{name} changed after the policy was deleted"
            );
        }
    })
    .await;
    assert_eq!(
        live_pods(&scenario).await,
        pods_after,
        "pods were evicted or deleted after the policy was deleted"
    );
    assert_eq!(
        times_in_namespace(&scenario, "Evicted").await,
        evictions_after
    );
    // An eviction in flight when the deletion was made may still be reported a moment later; none after that.
    let late: Vec<String> = scenario
        .events("Evicted")
        .await
        .iter()
        .filter(|e| event_first_time(e) > began + chrono::Duration::seconds(3))
        .map(|e| format!("{} at {}", note(e), event_first_time(e)))
        .collect();
    assert!(
        late.is_empty(),
        "evictions after the deletion began at {began}: {late:?}"
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

/// The policy of these tests: the scenario's target, `max` drain slots, threshold 50 (pods move fast), a short
/// restartTimeout.
fn spec(scenario: &Scenario, max: u32) -> ExecutorUpgradePolicySpec {
    ExecutorUpgradePolicySpec {
        target_executor_id: Some(scenario.new_id.clone()),
        max_concurrent_nodes: MaxConcurrentNodes::count(max).expect("at least one slot"),
        owner_health_threshold: 50,
        restart_timeout: RESTART_TIMEOUT.parse().expect("a duration"),
        ..ExecutorUpgradePolicySpec::default()
    }
}

async fn wait_ready(scenario: &Scenario, count: usize) {
    scenario
        .wait_until(&format!("{count} pods are ready"), SETUP, || async {
            (scenario.ready_pods().await >= count).then_some(())
        })
        .await;
}

/// Waits until every one of the `total` nodes is upgraded, the status says so and the Upgraded condition is True.
async fn wait_all_upgraded(scenario: &Scenario, total: usize) {
    let expected = format!("{total}/{total}");
    scenario
        .wait_until(
            &format!("all {total} nodes are upgraded and the policy is Upgraded"),
            PROGRESS,
            || async {
                scenario.controllers[0].assert_running();
                let policy = scenario.policy(POLICY).await;
                let reported = policy.status.as_ref().is_some_and(|s| {
                    s.upgraded.as_deref() == Some(expected.as_str()) && s.nodes.is_empty()
                });
                let done = scenario.upgraded_nodes().await == total
                    && reported
                    && is_true(&policy, condition_types::UPGRADED);
                done.then_some(())
            },
        )
        .await;
}

/// The status entry of `node` (present while the node is not Compatible).
fn status_entry(policy: &ExecutorUpgradePolicy, node: &str) -> Option<NodeStatus> {
    policy
        .status
        .as_ref()?
        .nodes
        .iter()
        .find(|n| n.name == node)
        .cloned()
}

/// The node obeyed its kamikaze and came back running `id`, as an executor acknowledges it: the kamikaze removed,
/// its record (`kamikaze-executor-id` = `id`) and `kamikaze-obeyed` kept.
fn came_back_with(node: &k8s_openapi::api::core::v1::Node, id: &str) -> bool {
    annotation(node, keys::EXECUTOR_ID_ANNOTATION) == Some(id)
        && annotation(node, keys::KAMIKAZE_ANNOTATION).is_none()
        && annotation(node, keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION) == Some(id)
        && annotation(node, keys::KAMIKAZE_OBEYED_ANNOTATION).is_some()
}

fn obeyed_kamikaze(node: &k8s_openapi::api::core::v1::Node) -> Option<String> {
    annotation(node, keys::KAMIKAZE_OBEYED_ANNOTATION).map(str::to_owned)
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
                    upgraded &= is_upgraded(&node(client, other).await, &scenario.new_id);
                }
                let back = came_back_with(&node(client, wrong).await, &scenario.old_id);
                let blocked = status_entry(&scenario.policy(POLICY).await, wrong)
                    .is_some_and(|e| e.phase == NodePhase::Blocked);
                (upgraded && back && blocked).then_some(())
            },
        )
        .await;
}

/// Waits for the `UnexpectedExecutor` Warning about `node` to have happened `count` times (Events are written in
/// the background, a moment after the status), and returns it.
async fn wait_unexpected_executor(
    scenario: &Scenario,
    node: &str,
    count: u32,
) -> k8s_openapi::api::events::v1::Event {
    let events = scenario
        .wait_until(
            &format!("{count} UnexpectedExecutor Warning(s) about {node}"),
            Duration::from_secs(30),
            || async {
                let events =
                    events_about(&scenario.client, "Node", node, Some("UnexpectedExecutor")).await;
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

/// Watches `node` for `duration`: its annotations, labels, taints and cordon never change, the status keeps it in
/// `phase`, and the controller reports nothing new about it (no action, no new wait).
async fn stays_put(scenario: &Scenario, node: &str, duration: Duration, phase: NodePhase) {
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
            status_entry(&scenario.policy(POLICY).await, node).map(|e| e.phase),
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

/// The simulated executor of `node` restarted `count` times in all, by the agents' log (one line per restart).
fn assert_restarts(scenario: &Scenario, node: &str, count: usize) {
    let restarts = agent_log_lines(scenario, node, "restarted executor");
    assert_eq!(
        restarts.len(),
        count,
        "restarts of {node}'s executor:\n{}",
        restarts.join("\n")
    );
}

/// Calls `check` (which panics on a violation) every 250 ms for `duration`.
async fn observe_for<F, Fut>(duration: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let end = Instant::now() + duration;
    while Instant::now() < end {
        check().await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    check().await;
}

fn on_node(pod: &Pod, node: &str) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
}

/// The namespace's pods that are not terminating: name → uid.
async fn live_pods(scenario: &Scenario) -> BTreeMap<String, String> {
    scenario
        .pods()
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect()
}

/// How many times the controller reported `reason` about pods of the scenario's namespace.
async fn times_in_namespace(scenario: &Scenario, reason: &str) -> u32 {
    scenario
        .events(reason)
        .await
        .iter()
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.namespace.as_deref() == Some(scenario.namespace.as_str()))
        })
        .map(occurrences)
        .sum()
}

fn from_k8s_time(
    time: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> chrono::DateTime<Utc> {
    let ts = time.0;
    chrono::DateTime::from_timestamp(ts.as_second(), ts.subsec_nanosecond().max(0) as u32)
        .expect("a representable time")
}
