//! The end of a policy on a real cluster, as an operator sees it (Node objects, pods, Events),
//! docs/design.md §5.4: the policy's finalizer makes `kubectl delete eup` mid-upgrade hand every
//! node back, schedulable and clean, and leave what others set.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use kube::{Api, ResourceExt};
use serde_json::json;

use k8sm_api::{
    ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, UnmanagedPodPolicy, UnmanagedPods, keys,
};
use k8sm_e2e::events::{event_history, first_seen, note, occurrences};
use k8sm_e2e::kubectl_ok;
use k8sm_e2e::nodes::{
    NodeState, annotation, has_k8sm_taint, is_cordoned, k8sm_keys, label, taints,
};
use k8sm_e2e::objects::{get_node, is_live, node_of, patch_node};
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::waits::observe_for;
use k8sm_e2e::workloads::{create, deployment, unmanaged_pod};
use k8sm_testcluster::{ClusterOptions, node_name};

const POLICY: &str = "fleet";
/// Generous: CI runs on small machines.
const PROGRESS: Duration = Duration::from_secs(180);

/// `kubectl delete eup` while nodes are marked and queued, draining (one of them cordoned by the
/// operator, not by k8sm) and told kamikaze returns once the controller has handed every node back:
/// all schedulable except the one the operator cordoned, without k8sm's taint, with no
/// `k8s.mesosphere.io/*` key but the executor ID — except the mark another component set — and with
/// the labels and taints of others intact. No pod is evicted or deleted after the deletion, and
/// nothing changes on the nodes afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_policy_mid_upgrade_hands_every_node_back() {
    const NS: &str = "hand-back";
    let [hung, _, foreign, external, cordoned_by_operator, spare] =
        [0, 1, 2, 3, 4, 5].map(node_name);
    let options = ClusterOptions {
        // Replacements take a moment to become Ready, so the Deployment moves one pod at a time,
        // slowly.
        pod_ready_delay: Duration::from_secs(3),
        ..ClusterOptions::default().with_nodes(6)
    };
    // The empty node is admitted first, drained at once and told kamikaze, and its executor never
    // comes back: it is mid-kamikaze when the policy goes. The node the operator cordoned holds
    // only an unmanaged pod that may go after an hour: admitted next, it drains (k8sm's
    // admission, the operator's cordon) until the policy goes.
    let mut scenario =
        Scenario::start_with_options(options, NS, "1s", &[format!("--never-restart={hung}")]).await;
    let client = scenario.client.clone();
    // A node the policy leaves alone (opted out), empty: room for the replacements, so that
    // admission, paced by room, fills the three slots at once.
    patch_node(
        &client,
        &spare,
        json!({ "metadata": { "labels": { keys::UPGRADE_OPT_OUT_LABEL: keys::UPGRADE_OPT_OUT_VALUE } } }),
    )
    .await;
    for name in [&hung, &cordoned_by_operator, &spare] {
        patch_node(&client, name, json!({ "spec": { "unschedulable": true } })).await;
    }
    create(&client, &deployment(NS, "web", 8)).await;
    let pet = create(
        &client,
        &unmanaged_pod(NS, "pet", &cordoned_by_operator, &[]),
    )
    .await;
    scenario.wait_ready(9).await;
    // The operator's cordon stays.
    for name in [&hung, &spare] {
        patch_node(&client, name, json!({ "spec": { "unschedulable": null } })).await;
    }

    // What others put on nodes: the operator's cordon (above), a storage team's label and taint,
    // another marker's mark.
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
    // Three slots: the hung node, the operator's node, and one whose Deployment pods move one at a
    // time.
    let slow = ExecutorUpgradePolicySpec {
        owner_health_threshold: 90,
        restart_timeout: "10m".parse().expect("a duration"),
        unmanaged_pods: UnmanagedPods {
            policy: UnmanagedPodPolicy::DeleteAfterTimeout,
            timeout: Some("1h".parse().expect("a duration")),
        },
        ..scenario.policy_spec(3)
    };
    scenario.create_policy(POLICY, slow).await;

    // Mid-upgrade: one node told kamikaze, the operator's node admitted, one node draining with
    // Deployment pods left, and one marked and queued.
    let names: Vec<String> = (0..5).map(node_name).collect();
    let before = scenario
        .wait_until(
            "one node is told kamikaze, two drain (one the operator cordoned) and one is queued",
            PROGRESS,
            || async {
                scenario.controllers[0].assert_running();
                let mut nodes = Vec::new();
                for name in &names {
                    nodes.push(get_node(&client, name).await);
                }
                let pods = scenario.pods().await;
                let live_on = |name: &str| {
                    pods.iter()
                        .filter(|p| node_of(p) == Some(name) && is_live(p))
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

    // The operator deletes the policy; kubectl waits until it is gone, i.e. until the finalizer is
    // removed.
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
    let pods_after = scenario.live_pods().await;
    let evictions_after = times_in_namespace(&scenario, "Evicted").await;
    let mut states = BTreeMap::new();
    for name in &names {
        let n = get_node(&client, name).await;
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
    let ext = get_node(&client, &external).await;
    assert_eq!(
        annotation(&ext, keys::INCOMPATIBLE_EXECUTOR_ANNOTATION),
        Some(external_mark),
        "the other marker's mark is left as it was"
    );
    assert!(has_k8sm_taint(&ext), "the other marker's taint stays");
    assert_eq!(
        scenario.live_pods().await.get("pet"),
        pet.uid().as_ref(),
        "the unmanaged pod of the operator's node is still there"
    );
    let fgn = get_node(&client, &foreign).await;
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
        scenario.live_pods().await,
        pods_after,
        "pods were evicted or deleted after the policy was deleted"
    );
    assert_eq!(
        times_in_namespace(&scenario, "Evicted").await,
        evictions_after
    );
    // An eviction in flight when the deletion was made may still be reported a moment later; none
    // after that.
    let late: Vec<String> = scenario
        .events("Evicted")
        .await
        .iter()
        .filter(|e| first_seen(e) > began + chrono::Duration::seconds(3))
        .map(|e| format!("{} at {}", note(e), first_seen(e)))
        .collect();
    assert!(
        late.is_empty(),
        "evictions after the deletion began at {began}: {late:?}"
    );
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
