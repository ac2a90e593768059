//! The policy knobs of docs/design.md §5 on a real cluster, each as an operator sees it (nodes,
//! pods, Events by reason, the policy's status): unmanaged pods under `Delete`,
//! `DeleteAfterTimeout` and `Never`, opt-out nodes and pods, `paused`, a PodDisruptionBudget
//! stricter than the threshold, and a node marked by hand under a policy without a target. Each
//! test runs its own small cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Datelike, Timelike, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};
use serde_json::json;

use k8sm_api::{
    CLOCK_SKEW_ALLOWANCE, ExecutorUpgradePolicySpec, InFlight, MaintenanceWindow, NodePhase,
    UnmanagedPodPolicy, UnmanagedPods, Weekday, condition_types, keys,
};
use k8sm_e2e::events::{events_about, first_seen};
use k8sm_e2e::kubectl_ok;
use k8sm_e2e::nodes::{annotation, has_k8sm_state, is_cordoned, is_marked};
use k8sm_e2e::objects::{get_node, merge_patch, patch_node};
use k8sm_e2e::scenario::{Scenario, is_upgraded};
use k8sm_e2e::sla::{SlaWatcher, assert_no_violations};
use k8sm_e2e::status::{condition, is_true, status_entry};
use k8sm_e2e::waits::observe_for;
use k8sm_e2e::workloads::{create, deployment, pdb_min_available, unmanaged_pod};
use k8sm_testcluster::node_name;

const POLICY: &str = "fleet";
/// Generous deadlines: the clusters of this file run two at a time on small machines.
const PROGRESS: Duration = Duration::from_secs(180);

// ---------------------------------------------------------------------------------------------------------------
// Unmanaged pods
// ---------------------------------------------------------------------------------------------------------------

/// `Delete`: the unmanaged pod of a node goes only once no owned pod of that node waits for its
/// owner — after every owned pod of the node was evicted — and the upgrade completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmanaged_delete_goes_once_owned_pods_are_gone() {
    const NS: &str = "unmanaged-delete";
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let node = node_name(0);
    // Three replicas on one node, with a 90% threshold: they can only move one at a time, so the
    // unmanaged pod has to wait for owned pods of its node at least once.
    scenario
        .pin_to(&node, 3, || async {
            create(&scenario.client, &deployment(NS, "web", 3)).await;
        })
        .await;
    create(&scenario.client, &unmanaged_pod(NS, "debug", &node, &[])).await;
    scenario.wait_ready(4).await;
    let owned_on_node: Vec<String> = scenario
        .pods_on(&node)
        .await
        .iter()
        .filter(|p| p.name_any() != "debug")
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(owned_on_node.len(), 3, "the Deployment's pods on {node}");
    let debug_uid = scenario.pod("debug").await.and_then(|p| p.uid());

    scenario.start_controller(&[]);
    scenario
        .create_policy(
            POLICY,
            spec(&scenario, 1, 90, UnmanagedPodPolicy::Delete, None),
        )
        .await;
    scenario.wait_all_upgraded(POLICY, 3, PROGRESS).await;

    assert!(scenario.pod("debug").await.is_none(), "debug is deleted");
    let deleted = events_about(&scenario.client, "DeletedUnmanagedPod", "debug").await;
    assert_eq!(deleted.len(), 1, "one DeletedUnmanagedPod event on debug");
    assert_eq!(
        deleted[0].regarding.as_ref().and_then(|r| r.uid.clone()),
        debug_uid,
        "the event names the pod that was there"
    );
    let deleted_at = first_seen(&deleted[0]);
    for name in &owned_on_node {
        let evicted = events_about(&scenario.client, "Evicted", name).await;
        assert_eq!(evicted.len(), 1, "{name} evicted once");
        let evicted_at = first_seen(&evicted[0]);
        assert!(
            evicted_at < deleted_at,
            "{name} evicted at {evicted_at}, after the unmanaged pod was deleted at {deleted_at}"
        );
    }
    // The rule was exercised, not only satisfied by chance: while the second replica waited for its
    // owner, the unmanaged pod was reported waiting too.
    assert!(
        !events_about(&scenario.client, "WaitingForOwner", "debug")
            .await
            .is_empty(),
        "a WaitingForOwner event on debug while owned pods of {node} waited"
    );
}

/// `DeleteAfterTimeout` 20s: the unmanaged pod is not deleted before 20 s (and the 30 s clock skew
/// allowance) after its node's incompatible-executor annotation time, and is deleted soon after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmanaged_delete_after_timeout_waits_for_the_timeout() {
    const NS: &str = "unmanaged-timeout";
    let timeout = chrono::Duration::seconds(20);
    let soon = chrono::Duration::seconds(20);
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let node = node_name(0);
    create(&scenario.client, &deployment(NS, "web", 2)).await;
    create(&scenario.client, &unmanaged_pod(NS, "scratch", &node, &[])).await;
    scenario.wait_ready(3).await;

    scenario.start_controller(&[]);
    scenario
        .create_policy(
            POLICY,
            spec(
                &scenario,
                3,
                50,
                UnmanagedPodPolicy::DeleteAfterTimeout,
                Some("20s"),
            ),
        )
        .await;
    let marked_at = scenario
        .wait_until(&format!("{node} is marked"), PROGRESS, || async {
            let node = get_node(&scenario.client, &node).await;
            node.annotations()
                .get(keys::INCOMPATIBLE_EXECUTOR_ANNOTATION)
                .map(|t| parse_time(t))
        })
        .await;
    // Judged with the allowance for another replica's clock.
    let deadline = marked_at + timeout + chrono::Duration::from_std(CLOCK_SKEW_ALLOWANCE).unwrap();

    // Admitted at once (all nodes may drain): only the timeout holds it, and it keeps its slot
    // meanwhile.
    scenario
        .wait_until(
            &format!("{node} is Draining with the unmanaged pod left"),
            PROGRESS,
            || async {
                let status = status_entry(&scenario.policy(POLICY).await, &node)?;
                (status.phase == NodePhase::Draining && status.pods_left >= 1).then_some(())
            },
        )
        .await;

    // Watch the pod until it is deleted (gone or terminating).
    let seen_deleted_at = scenario
        .wait_until(
            "the unmanaged pod is deleted",
            Duration::from_secs(120),
            || async {
                let gone = scenario
                    .pod("scratch")
                    .await
                    .is_none_or(|p| p.metadata.deletion_timestamp.is_some());
                gone.then(Utc::now)
            },
        )
        .await;
    // The Event follows the deletion call; the pod can be seen deleted a moment before it is
    // recorded.
    let deleted = scenario
        .wait_until(
            "the DeletedUnmanagedPod event of scratch",
            Duration::from_secs(30),
            || async {
                let events = events_about(&scenario.client, "DeletedUnmanagedPod", "scratch").await;
                (!events.is_empty()).then_some(events)
            },
        )
        .await;
    assert_eq!(deleted.len(), 1, "one DeletedUnmanagedPod event on scratch");
    let event_at = first_seen(&deleted[0]);
    for (what, at) in [
        ("seen deleted", seen_deleted_at),
        ("DeletedUnmanagedPod event", event_at),
    ] {
        assert!(
            at >= deadline,
            "{what} at {at}, before the timeout: marked at {marked_at}, deletable from {deadline}"
        );
        assert!(
            at <= deadline + soon,
            "{what} at {at}, long after the timeout expired at {deadline}"
        );
    }
    println!(
        "marked at {marked_at}, deletable from {deadline}; seen deleted at {seen_deleted_at}, \
         DeletedUnmanagedPod at {event_at}"
    );
    scenario.wait_all_upgraded(POLICY, 3, PROGRESS).await;
}

/// `Never`: the node with an unmanaged pod ends Blocked (status and `BlockedUnmanagedPod` Event)
/// while the other nodes are upgraded; once an operator deletes the pod by hand, the node finishes
/// too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmanaged_never_blocks_its_node_until_an_operator_deletes_it() {
    const NS: &str = "unmanaged-never";
    let mut scenario = Scenario::start(4, NS, "1s").await;
    let node = node_name(0);
    create(&scenario.client, &deployment(NS, "web", 4)).await;
    create(&scenario.client, &unmanaged_pod(NS, "pet", &node, &[])).await;
    scenario.wait_ready(5).await;
    let pet_uid = scenario.pod("pet").await.and_then(|p| p.uid());

    scenario.start_controller(&[]);
    scenario
        .create_policy(
            POLICY,
            spec(&scenario, 1, 50, UnmanagedPodPolicy::Never, None),
        )
        .await;
    scenario
        .wait_until(
            &format!("{node} is Blocked and the 3 other nodes are upgraded"),
            PROGRESS,
            || async {
                let blocked = status_entry(&scenario.policy(POLICY).await, &node)
                    .is_some_and(|s| s.phase == NodePhase::Blocked);
                let reported = !events_about(&scenario.client, "BlockedUnmanagedPod", "pet")
                    .await
                    .is_empty();
                let others = scenario.upgraded_nodes().await == 3;
                (blocked && reported && others).then_some(())
            },
        )
        .await;
    let status = scenario
        .policy_counting(POLICY, (4, 3, 1))
        .await
        .status
        .expect("status");
    assert!(
        status
            .blocked_pods
            .iter()
            .any(|p| p.name == "pet" && p.node == node && p.reason == "BlockedUnmanagedPod"),
        "status.blockedPods reports pet: {:?}",
        status.blocked_pods
    );
    let blocked_node = get_node(&scenario.client, &node).await;
    assert_eq!(
        annotation(&blocked_node, keys::EXECUTOR_ID_ANNOTATION),
        Some(scenario.old_id.as_str()),
        "the blocked node keeps its old executor"
    );
    assert!(
        !blocked_node
            .annotations()
            .contains_key(keys::KAMIKAZE_ANNOTATION),
        "no kamikaze for a node with a pod left"
    );
    let pet = scenario.pod("pet").await.expect("pet is never deleted");
    assert_eq!(pet.uid(), pet_uid);
    assert!(pet.metadata.deletion_timestamp.is_none());
    assert!(scenario.events("DeletedUnmanagedPod").await.is_empty());

    // The operator deletes it by hand: the controller simply carries on.
    Api::<Pod>::namespaced(scenario.client.clone(), NS)
        .delete("pet", &DeleteParams::default())
        .await
        .expect("pet deleted by hand");
    scenario.wait_all_upgraded(POLICY, 4, PROGRESS).await;
}

// ---------------------------------------------------------------------------------------------------------------
// Opt-out
// ---------------------------------------------------------------------------------------------------------------

/// A node labelled `upgrade-opt-out=true` is never cordoned, drained or told to terminate: its pods
/// stay (even an unmanaged one under `Delete`) and it keeps its old executor, while the other nodes
/// are upgraded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opt_out_node_is_never_drained() {
    const NS: &str = "opt-out-node";
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let node = node_name(0);
    patch_node(
        &scenario.client,
        &node,
        json!({ "metadata": { "labels": { keys::UPGRADE_OPT_OUT_LABEL: keys::UPGRADE_OPT_OUT_VALUE } } }),
    )
    .await;
    create(&scenario.client, &deployment(NS, "web", 3)).await;
    create(&scenario.client, &unmanaged_pod(NS, "debug", &node, &[])).await;
    scenario.wait_ready(4).await;
    let untouched = Untouched::record(&scenario, std::slice::from_ref(&node)).await;
    assert!(
        untouched.pods.contains_key("debug"),
        "the unmanaged pod runs on {node}"
    );

    scenario.start_controller(&[]);
    scenario
        .create_policy(
            POLICY,
            spec(&scenario, 1, 50, UnmanagedPodPolicy::Delete, None),
        )
        .await;
    scenario
        .wait_until("the 2 other nodes are upgraded", PROGRESS, || async {
            untouched.check(&scenario).await;
            (scenario.upgraded_nodes().await == 2).then_some(())
        })
        .await;
    // It stays so: nothing is pending for it.
    observe_for(Duration::from_secs(4), || untouched.check(&scenario)).await;

    let status = scenario.policy(POLICY).await.status.expect("status");
    assert_eq!(status.upgraded.as_deref(), Some("2/3"));
    let reported = status
        .nodes
        .iter()
        .find(|n| n.name == node)
        .expect("the opted-out node is reported");
    assert!(
        !matches!(
            reported.phase,
            NodePhase::Draining | NodePhase::Drained | NodePhase::KamikazeSent
        ),
        "the opted-out node is never drained: {reported:?}"
    );
    assert!(
        !events_about(&scenario.client, "BlockedOptOut", &node)
            .await
            .is_empty(),
        "a BlockedOptOut event on {node}"
    );
    for reason in ["Cordoned", "KamikazeSent", "Upgraded"] {
        assert!(
            events_about(&scenario.client, reason, &node)
                .await
                .is_empty(),
            "no {reason} event on {node}"
        );
    }
}

/// A pod labelled `upgrade-opt-out=true` is never deleted (not even an unmanaged one under
/// `Delete`): its node ends Blocked with a `BlockedOptOut` Event while the other nodes are
/// upgraded. Once the operator removes the label, the node finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opt_out_pod_blocks_its_node() {
    const NS: &str = "opt-out-pod";
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let node = node_name(0);
    create(&scenario.client, &deployment(NS, "web", 3)).await;
    create(
        &scenario.client,
        &unmanaged_pod(
            NS,
            "keeper",
            &node,
            &[(keys::UPGRADE_OPT_OUT_LABEL, keys::UPGRADE_OPT_OUT_VALUE)],
        ),
    )
    .await;
    scenario.wait_ready(4).await;
    let keeper_uid = scenario.pod("keeper").await.and_then(|p| p.uid());
    scenario.start_controller(&[]);
    let keeper_stays = || async {
        let keeper = scenario.pod("keeper").await;
        assert!(
            keeper
                .as_ref()
                .is_some_and(|p| p.uid() == keeper_uid && p.metadata.deletion_timestamp.is_none()),
            "the opted-out pod is never deleted: {:?}",
            keeper.map(|p| p.metadata)
        );
    };

    scenario
        .create_policy(
            POLICY,
            spec(&scenario, 1, 50, UnmanagedPodPolicy::Delete, None),
        )
        .await;
    scenario
        .wait_until(
            &format!("{node} is Blocked and the 2 other nodes are upgraded"),
            PROGRESS,
            || async {
                keeper_stays().await;
                let blocked = status_entry(&scenario.policy(POLICY).await, &node)
                    .is_some_and(|s| s.phase == NodePhase::Blocked);
                let reported = !events_about(&scenario.client, "BlockedOptOut", "keeper")
                    .await
                    .is_empty();
                let others = scenario.upgraded_nodes().await == 2;
                (blocked && reported && others).then_some(())
            },
        )
        .await;
    observe_for(Duration::from_secs(3), keeper_stays).await;
    let status = scenario.policy(POLICY).await.status.expect("status");
    assert!(
        status
            .blocked_pods
            .iter()
            .any(|p| p.name == "keeper" && p.node == node && p.reason == "BlockedOptOut"),
        "status.blockedPods reports keeper: {:?}",
        status.blocked_pods
    );
    assert!(
        events_about(&scenario.client, "DeletedUnmanagedPod", "keeper")
            .await
            .is_empty()
    );
    assert!(!is_upgraded(
        &get_node(&scenario.client, &node).await,
        &scenario.new_id
    ));

    // The operator lifts the opt-out: the pod is now an ordinary unmanaged pod under Delete.
    let opt_in = json!({ "metadata": { "labels": { keys::UPGRADE_OPT_OUT_LABEL: null } } });
    merge_patch::<Pod>(&scenario.client, NS, "keeper", opt_in).await;
    scenario.wait_all_upgraded(POLICY, 3, PROGRESS).await;
    assert_eq!(
        events_about(&scenario.client, "DeletedUnmanagedPod", "keeper")
            .await
            .len(),
        1
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Pause
// ---------------------------------------------------------------------------------------------------------------

/// `paused: true`: nodes are marked, but nothing is cordoned, evicted or deleted; `paused: false`
/// resumes and the upgrade completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_evictions_and_resume_continues() {
    const NS: &str = "paused";
    let mut scenario = Scenario::start(3, NS, "1s").await;
    create(&scenario.client, &deployment(NS, "web", 3)).await;
    create(
        &scenario.client,
        &unmanaged_pod(NS, "debug", &node_name(1), &[]),
    )
    .await;
    scenario.wait_ready(4).await;
    let pods_before = scenario.live_pods().await;

    scenario.start_controller(&[]);
    let mut paused = spec(&scenario, 3, 50, UnmanagedPodPolicy::Delete, None);
    paused.paused = true;
    scenario.create_policy(POLICY, paused).await;

    // Marking continues while paused.
    scenario
        .wait_until(
            "every node is marked and the policy reports Paused",
            PROGRESS,
            || async {
                let marked = scenario.nodes().await.iter().all(is_marked);
                let paused = is_true(&scenario.policy(POLICY).await, condition_types::PAUSED);
                (marked && paused).then_some(())
            },
        )
        .await;
    let nothing_moves = || async {
        assert_nothing_moved(&scenario, "while paused").await;
        assert_eq!(
            scenario.live_pods().await,
            pods_before,
            "no pod evicted or deleted while paused"
        );
    };
    observe_for(Duration::from_secs(5), nothing_moves).await;
    assert!(
        !scenario.events("Paused").await.is_empty(),
        "a Paused event tells the operator why nothing moves"
    );
    // The operator finds it where they look first: Events about a policy carry its UID, which
    // `kubectl describe` matches on.
    let described = kubectl_ok(&scenario.cluster, &["describe", "eup", POLICY]);
    let events = described
        .split_once("Events:")
        .map(|(_, events)| events)
        .unwrap_or_default();
    assert!(
        events.contains("Paused") && events.contains("k8sm-controller"),
        "kubectl describe eup {POLICY} shows the Paused Event:\n{described}"
    );

    scenario
        .patch_policy(POLICY, json!({ "paused": false }))
        .await;
    scenario.wait_all_upgraded(POLICY, 3, PROGRESS).await;
    assert!(!scenario.events("Evicted").await.is_empty());
    assert!(scenario.pod("debug").await.is_none());
}

/// `spec.window`: a window that opens 20 s after the policy is created. Until then nodes are
/// marked, none is cordoned, drained or told to restart, and the policy says when the window opens
/// (its Progressing condition, its status and an OutsideWindow Event); once it opens, the upgrade
/// completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maintenance_window_holds_the_upgrade_until_it_opens() {
    const NS: &str = "window";
    let mut scenario = Scenario::start(2, NS, "1s").await;
    create(&scenario.client, &deployment(NS, "web", 2)).await;
    scenario.wait_ready(2).await;
    scenario.start_controller(&[]);

    // Windows are set to the minute: create the policy 20 s before a minute begins, the window
    // opening then.
    let opens = {
        let at = Utc::now() + chrono::Duration::seconds(20);
        let into_minute = i64::from(at.second()) * 1000 + i64::from(at.timestamp_subsec_millis());
        at + chrono::Duration::milliseconds(60_000 - into_minute)
    };
    let create_at = opens - chrono::Duration::seconds(20);
    tokio::time::sleep((create_at - Utc::now()).to_std().unwrap_or_default()).await;
    let window = MaintenanceWindow {
        days: vec![weekday(opens)],
        start: opens.format("%H:%M").to_string(),
        end: (opens + chrono::Duration::minutes(30))
            .format("%H:%M")
            .to_string(),
        time_zone: "UTC".into(),
        in_flight: InFlight::Finish,
    };
    let mut spec = spec(&scenario, 2, 50, UnmanagedPodPolicy::Never, None);
    spec.window = Some(window);
    scenario.create_policy(POLICY, spec).await;

    scenario
        .wait_until(
            "every node is marked and the policy says when the window opens",
            Duration::from_secs(15),
            || async {
                let marked = scenario.nodes().await.iter().all(is_marked);
                let policy = scenario.policy(POLICY).await;
                let waits = condition(&policy, condition_types::PROGRESSING)
                    .is_some_and(|c| c.reason == "OutsideWindow" && c.status == "False");
                let window = policy.status.and_then(|s| s.window);
                let reported = window.is_some_and(|w| {
                    !w.open && w.opens_at.map(|t| t.0.as_second()) == Some(opens.timestamp())
                });
                (marked && waits && reported).then_some(())
            },
        )
        .await;
    let closed_until = opens - chrono::Duration::seconds(1);
    observe_for(
        (closed_until - Utc::now()).to_std().unwrap_or_default(),
        || assert_nothing_moved(&scenario, "outside the window"),
    )
    .await;
    assert!(
        !scenario.events("OutsideWindow").await.is_empty(),
        "an OutsideWindow Event tells the operator why nothing moves"
    );

    scenario.wait_all_upgraded(POLICY, 2, PROGRESS).await;
    let evicted = scenario.events("Evicted").await;
    assert!(!evicted.is_empty());
    let first = evicted.iter().map(first_seen).min().expect("an eviction");
    // Event times are kept to the second (or microsecond for eventTime): nothing before the window
    // opened.
    assert!(
        first >= opens - chrono::Duration::seconds(1),
        "first eviction at {first}, the window opened at {opens}"
    );
    let policy = scenario.policy(POLICY).await;
    assert!(
        policy.status.and_then(|s| s.window).is_some_and(|w| w.open),
        "the status reports the window open"
    );
    // What an operator's script waits on, as docs/upgrade-procedure.md shows it.
    kubectl_ok(
        &scenario.cluster,
        &[
            "wait",
            "--for=condition=Upgraded",
            &format!("eup/{POLICY}"),
            "--timeout=60s",
        ],
    );
    let columns = kubectl_ok(&scenario.cluster, &["get", "eup", POLICY]);
    let header: Vec<&str> = columns
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME", "TARGET", "UPGRADED", "BLOCKED", "DEGRADED", "PAUSED", "AGE"
        ],
        "{columns}"
    );
    let row: Vec<&str> = columns
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        (
            row.get(2).copied(),
            row.get(3).copied(),
            row.get(4).copied()
        ),
        (Some("2/2"), Some("0"), Some("False")),
        "{columns}"
    );
}

/// No node cordoned, draining or told to restart, and no pod evicted or deleted: `when` says why.
async fn assert_nothing_moved(scenario: &Scenario, when: &str) {
    for node in scenario.nodes().await {
        let name = node.name_any();
        assert!(!is_cordoned(&node), "{name} cordoned {when}");
        for key in [keys::DRAINING_ANNOTATION, keys::KAMIKAZE_ANNOTATION] {
            assert!(
                !node.annotations().contains_key(key),
                "{name} has {key} {when}"
            );
        }
    }
    for reason in ["Evicted", "DeletedUnmanagedPod", "KamikazeSent"] {
        assert!(
            scenario.events(reason).await.is_empty(),
            "{reason} event {when}"
        );
    }
}

fn weekday(at: DateTime<Utc>) -> Weekday {
    match at.weekday() {
        chrono::Weekday::Mon => Weekday::Monday,
        chrono::Weekday::Tue => Weekday::Tuesday,
        chrono::Weekday::Wed => Weekday::Wednesday,
        chrono::Weekday::Thu => Weekday::Thursday,
        chrono::Weekday::Fri => Weekday::Friday,
        chrono::Weekday::Sat => Weekday::Saturday,
        chrono::Weekday::Sun => Weekday::Sunday,
    }
}

// ---------------------------------------------------------------------------------------------------------------
// PodDisruptionBudgets
// ---------------------------------------------------------------------------------------------------------------

/// A PodDisruptionBudget stricter than the threshold (minAvailable 4 of 4, threshold 50%) is
/// respected: none of its pods is evicted while it allows no disruption, and the waiting node
/// reports `BlockedByPDB`. Relaxed to 3, the upgrade completes, never below the budget, and the SLA
/// invariant holds throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdb_stricter_than_threshold_is_respected_and_reported() {
    const NS: &str = "pdb";
    const THRESHOLD: u8 = 50;
    let mut scenario = Scenario::start(3, NS, "1s").await;
    create(&scenario.client, &deployment(NS, "web", 4)).await;
    create(
        &scenario.client,
        &pdb_min_available(NS, "web", "web", IntOrString::Int(4)),
    )
    .await;
    let sla = SlaWatcher::start(scenario.client.clone(), NS, u32::from(THRESHOLD));
    scenario.wait_ready(4).await;
    scenario.wait_budget("web", 4, 0).await;
    sla.arm();
    let web_before = scenario.live_pods().await;

    scenario.start_controller(&[]);
    scenario
        .create_policy(
            POLICY,
            spec(&scenario, 1, THRESHOLD, UnmanagedPodPolicy::Delete, None),
        )
        .await;
    let (blocked_node, blocked_pod) = scenario
        .wait_until("a node reports a pod BlockedByPDB", PROGRESS, || async {
            let status = scenario.policy(POLICY).await.status?;
            let entry = status
                .blocked_pods
                .iter()
                .find(|p| p.reason == "BlockedByPDB")?;
            let evented = !events_about(&scenario.client, "BlockedByPDB", &entry.name)
                .await
                .is_empty();
            evented.then(|| (entry.node.clone(), entry.name.clone()))
        })
        .await;
    assert!(web_before.contains_key(&blocked_pod));
    let holds_its_pods = || async {
        assert!(
            scenario.events("Evicted").await.is_empty(),
            "no eviction while the budget allows no disruption"
        );
        assert_eq!(
            scenario.live_pods().await,
            web_before,
            "every web pod stays"
        );
        let phase = status_entry(&scenario.policy(POLICY).await, &blocked_node).map(|s| s.phase);
        assert!(
            matches!(phase, Some(NodePhase::Draining | NodePhase::Blocked)),
            "{blocked_node} keeps waiting for the budget, not drained: {phase:?}"
        );
    };
    observe_for(Duration::from_secs(4), holds_its_pods).await;

    let relaxed = json!({ "spec": { "minAvailable": 3 } });
    merge_patch::<PodDisruptionBudget>(&scenario.client, NS, "web", relaxed).await;
    scenario.wait_all_upgraded(POLICY, 3, PROGRESS).await;

    assert!(
        !scenario.events("Evicted").await.is_empty(),
        "the web pods were evicted once the budget allowed it"
    );
    assert_no_violations(&sla);
    for record in sla.records() {
        assert!(
            record.min_ready >= 3,
            "{} {} fell to {} ready: below the budget's minAvailable 3",
            record.kind,
            record.name,
            record.min_ready
        );
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Nodes marked by someone else
// ---------------------------------------------------------------------------------------------------------------

/// Under a policy without `targetExecutorId`, a node marked by hand (label and annotation) is
/// drained, told to terminate, comes back with the new executor and ends with k8sm's keys removed;
/// unmarked nodes are never touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_marked_node_is_drained_without_a_target() {
    const NS: &str = "hand-marked";
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let marked = node_name(1);
    let others = [node_name(0), node_name(2)];
    scenario
        .pin_to(&marked, 3, || async {
            create(&scenario.client, &deployment(NS, "web", 3)).await;
        })
        .await;
    for other in &others {
        create(
            &scenario.client,
            &unmanaged_pod(NS, &format!("bystander-{other}"), other, &[]),
        )
        .await;
    }
    scenario.wait_ready(5).await;
    let on_marked: Vec<String> = scenario
        .pods_on(&marked)
        .await
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(on_marked.len(), 3, "the web pods run on {marked}");
    let untouched = Untouched::record(&scenario, &others).await;

    scenario.start_controller(&[]);
    let mut no_target = spec(&scenario, 1, 50, UnmanagedPodPolicy::Delete, None);
    no_target.target_executor_id = None;
    scenario.create_policy(POLICY, no_target).await;
    scenario
        .wait_until("the policy sees 3/3 compatible nodes", PROGRESS, || async {
            untouched.check(&scenario).await;
            let status = scenario.policy(POLICY).await.status?;
            (status.upgraded.as_deref() == Some("3/3")).then_some(())
        })
        .await;
    observe_for(Duration::from_secs(2), || async {
        untouched.check(&scenario).await;
        assert!(
            scenario.events("Marked").await.is_empty(),
            "nothing is marked without a target"
        );
    })
    .await;

    // Marked by hand, as an external component would: the label and the RFC 3339 annotation.
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    patch_node(
        &scenario.client,
        &marked,
        json!({ "metadata": {
            "labels": { keys::INCOMPATIBLE_EXECUTOR_LABEL: keys::INCOMPATIBLE_EXECUTOR_LABEL_VALUE },
            "annotations": { keys::INCOMPATIBLE_EXECUTOR_ANNOTATION: now },
        } }),
    )
    .await;
    scenario
        .wait_until(
            &format!("{marked} is drained, restarted and cleaned up"),
            PROGRESS,
            || async {
                untouched.check(&scenario).await;
                let node = get_node(&scenario.client, &marked).await;
                (is_upgraded(&node, &scenario.new_id) && !has_k8sm_state(&node)).then_some(())
            },
        )
        .await;
    observe_for(Duration::from_secs(2), || untouched.check(&scenario)).await;

    for name in &on_marked {
        assert_eq!(
            events_about(&scenario.client, "Evicted", name).await.len(),
            1,
            "{name} was evicted from {marked}"
        );
    }
    let left: Vec<String> = scenario
        .pods_on(&marked)
        .await
        .iter()
        .map(ResourceExt::name_any)
        .filter(|name| on_marked.contains(name))
        .collect();
    assert!(left.is_empty(), "pods left on {marked}: {left:?}");
    for reason in ["Cordoned", "KamikazeSent", "Upgraded"] {
        assert_eq!(
            events_about(&scenario.client, reason, &marked).await.len(),
            1,
            "one {reason} event on {marked}"
        );
    }
    for other in &others {
        assert!(
            events_about(&scenario.client, "Cordoned", other)
                .await
                .is_empty(),
            "{other} never cordoned"
        );
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

/// A policy with a target, `slots` drain slots, a threshold and an unmanaged-pod policy.
fn spec(
    scenario: &Scenario,
    slots: u32,
    threshold: u8,
    unmanaged: UnmanagedPodPolicy,
    timeout: Option<&str>,
) -> ExecutorUpgradePolicySpec {
    ExecutorUpgradePolicySpec {
        owner_health_threshold: threshold,
        unmanaged_pods: UnmanagedPods {
            policy: unmanaged,
            timeout: timeout.map(|t| t.parse().expect("a duration")),
        },
        ..scenario.policy_spec(slots)
    }
}

/// Nodes that k8sm must never touch, and the pods that ran on them.
struct Untouched {
    nodes: Vec<String>,
    old_id: String,
    /// pod name → uid
    pods: BTreeMap<String, String>,
}

impl Untouched {
    async fn record(scenario: &Scenario, nodes: &[String]) -> Self {
        let mut pods = BTreeMap::new();
        for node in nodes {
            for pod in scenario.pods_on(node).await {
                pods.insert(pod.name_any(), pod.uid().unwrap_or_default());
            }
        }
        Self {
            nodes: nodes.to_vec(),
            old_id: scenario.old_id.clone(),
            pods,
        }
    }

    /// Panics if any of the nodes was cordoned, admitted, told to terminate or restarted, or any of
    /// their pods was evicted or deleted.
    async fn check(&self, scenario: &Scenario) {
        for name in &self.nodes {
            let node = get_node(&scenario.client, name).await;
            assert!(!is_cordoned(&node), "{name} was cordoned");
            for key in [
                keys::DRAINING_ANNOTATION,
                keys::KAMIKAZE_ANNOTATION,
                keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION,
                keys::CORDONED_BY_ANNOTATION,
            ] {
                assert!(!node.annotations().contains_key(key), "{name} has {key}");
            }
            assert_eq!(
                annotation(&node, keys::EXECUTOR_ID_ANNOTATION),
                Some(self.old_id.as_str()),
                "{name} keeps its old executor"
            );
        }
        let now = scenario.live_pods().await;
        for (pod, uid) in &self.pods {
            assert_eq!(
                now.get(pod),
                Some(uid),
                "pod {pod} of an untouchable node was evicted or deleted"
            );
        }
    }
}

fn parse_time(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("{text:?} is not RFC 3339: {e}"))
        .with_timezone(&Utc)
}
