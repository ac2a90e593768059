//! The controller is stateless: SIGKILLed mid-upgrade and restarted, it finishes the job without
//! repeating a decision or breaking the SLA; with two replicas under leader election, only the
//! leader ever evicts.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use nix::sys::signal::Signal;

use k8sm_api::{ExecutorUpgradePolicySpec, MaxConcurrentNodes, UnmanagedPodPolicy, UnmanagedPods};
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::sla::SlaWatcher;
use k8sm_e2e::workloads::{create, deployment, stateful_set};

const THRESHOLD: u8 = 80;

fn policy(target: &str) -> ExecutorUpgradePolicySpec {
    ExecutorUpgradePolicySpec {
        target_executor_id: Some(target.to_owned()),
        max_concurrent_nodes: MaxConcurrentNodes::Percent(30),
        owner_health_threshold: THRESHOLD,
        unmanaged_pods: UnmanagedPods {
            policy: UnmanagedPodPolicy::Delete,
            timeout: None,
        },
        ..ExecutorUpgradePolicySpec::default()
    }
}

/// Deployments and a StatefulSet spread over the nodes, all ready, with the SLA watcher armed.
async fn workloads(scenario: &Scenario, ns: &str, expected_ready: usize) -> SlaWatcher {
    let client = scenario.client.clone();
    create(&client, &deployment(ns, "web", 12)).await;
    create(&client, &deployment(ns, "api", 5)).await;
    create(&client, &stateful_set(ns, "db", 3)).await;
    let sla = SlaWatcher::start(client, ns, u32::from(THRESHOLD));
    scenario.wait_ready(expected_ready).await;
    sla.arm();
    sla
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_controller_restarts_and_finishes_without_repeating_itself() {
    const NS: &str = "crash";
    let mut scenario = Scenario::start(10, NS, "1s").await;
    let sla = workloads(&scenario, NS, 20).await;
    scenario.start_controller(&[]);
    scenario
        .create_policy("fleet", policy(&scenario.new_id))
        .await;

    // Kill it mid-upgrade: after some evictions, before the end.
    scenario
        .wait_until(
            "the upgrade is under way",
            Duration::from_secs(120),
            || async {
                let evicted = scenario.events("Evicted").await.len();
                (evicted >= 3 && scenario.upgraded_nodes().await < 10).then_some(())
            },
        )
        .await;
    scenario.controllers[0].kill_with(Signal::SIGKILL);
    let evicted_before_crash = scenario.events("Evicted").await.len();
    println!("SIGKILLed the controller after {evicted_before_crash} evictions");

    scenario.start_controller(&[]);
    scenario
        .wait_until(
            "every node runs the new executor",
            Duration::from_secs(600),
            || async {
                scenario.controllers[1].assert_running();
                (scenario.upgraded_nodes().await == 10).then_some(())
            },
        )
        .await;

    let violations = sla.violations();
    assert!(
        violations.is_empty(),
        "SLA violations:\n{}",
        violations.join("\n")
    );
    let per_pod = scenario.evictions_per_pod().await;
    assert!(
        per_pod.values().all(|n| *n == 1),
        "an eviction was repeated after the restart: {per_pod:?}"
    );
    // One Event per node and step, across the restart: none repeated. A SIGKILL between an action
    // and its Event can lose that one Event (Events are reports, the node's keys are the
    // record).
    for kind in ["Marked", "KamikazeSent", "Upgraded"] {
        let count = scenario.events(kind).await.len();
        println!("{kind} events: {count}");
        assert!(
            (9..=10).contains(&count),
            "{count} {kind} events for 10 nodes"
        );
    }
    for record in sla.records() {
        println!(
            "{} {}: min ready {} (bound {})",
            record.kind, record.name, record.min_ready, record.bound
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_replicas_only_the_leader_evicts() {
    const NS: &str = "ha";
    let mut scenario = Scenario::start(6, NS, "1s").await;
    let sla = workloads(&scenario, NS, 20).await;
    let election = [
        "--leader-elect",
        "--leader-elect-namespace=default",
        "--leader-elect-lease-duration=6s",
    ];
    scenario.start_controller(&election);
    scenario.start_controller(&election);
    scenario
        .create_policy("fleet", policy(&scenario.new_id))
        .await;
    scenario
        .wait_until(
            "every node runs the new executor",
            Duration::from_secs(600),
            || async {
                scenario.controllers.iter().for_each(|c| c.assert_running());
                (scenario.upgraded_nodes().await == 6).then_some(())
            },
        )
        .await;

    let evicted = scenario.events("Evicted").await;
    assert!(!evicted.is_empty());
    let instances: BTreeSet<String> = evicted
        .iter()
        .filter_map(|e| e.reporting_instance.clone())
        .collect();
    assert_eq!(
        instances.len(),
        1,
        "evictions came from several replicas: {instances:?}"
    );
    let lease = Api::<Lease>::namespaced(scenario.client.clone(), "default")
        .get("k8sm-controller")
        .await
        .expect("the Lease exists");
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert_eq!(
        Some(&holder),
        instances.iter().next(),
        "the evicting replica holds the Lease"
    );
    let violations = sla.violations();
    assert!(
        violations.is_empty(),
        "SLA violations:\n{}",
        violations.join("\n")
    );
}
