//! The whole rolling upgrade on a real cluster: 20 nodes, Deployments of 1, 3, 10 and 25 replicas,
//! a ReplicationController, a StatefulSet, a Job, unmanaged pods and a DaemonSet. Setting the
//! target upgrades every node while every workload stays at or above its SLA bound, watched at
//! every pod change.

use std::time::{Duration, Instant};

use k8sm_api::{ExecutorUpgradePolicySpec, MaxConcurrentNodes, UnmanagedPodPolicy, UnmanagedPods};
use k8sm_e2e::drain_order::DrainOrder;
use k8sm_e2e::http::{free_port, get, metric};
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::sla::{SlaWatcher, assert_no_violations, bound};
use k8sm_e2e::workloads::{
    create, daemon_set, deployment, job, replication_controller, stateful_set, unmanaged_pod,
};
use k8sm_testcluster::node_name;
use kube::ResourceExt;

const NS: &str = "shop";
const THRESHOLD: u8 = 90;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_upgrades_every_node_without_breaking_any_sla() {
    let mut scenario = Scenario::start(20, NS, "1s").await;
    let client = scenario.client.clone();
    for (name, replicas) in [("solo", 1), ("trio", 3), ("web", 10), ("api", 25)] {
        create(&client, &deployment(NS, name, replicas)).await;
    }
    create(&client, &replication_controller(NS, "legacy", 4)).await;
    create(&client, &stateful_set(NS, "db", 3)).await;
    create(&client, &job(NS, "report", 1)).await;
    create(&client, &daemon_set(NS, "logs")).await;
    for i in 0..4 {
        create(
            &client,
            &unmanaged_pod(NS, &format!("debug-{i}"), &node_name(i * 5), &[]),
        )
        .await;
    }
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    // 46 replicas + 4 unmanaged + 20 DaemonSet pods (the Job's pod completes at once).
    scenario.wait_ready(70).await;
    sla.arm();
    // The policy below cordons (the default).
    let order = DrainOrder::start(&client, NS, true).await;

    let metrics_addr = format!("127.0.0.1:{}", free_port());
    scenario.start_controller(&[
        &format!("--metrics-addr={metrics_addr}"),
        "--log-format=json",
    ]);
    let started = Instant::now();
    scenario
        .create_policy(
            "fleet",
            ExecutorUpgradePolicySpec {
                target_executor_id: Some(scenario.new_id.clone()),
                max_concurrent_nodes: MaxConcurrentNodes::Percent(20),
                owner_health_threshold: THRESHOLD,
                unmanaged_pods: UnmanagedPods {
                    policy: UnmanagedPodPolicy::Delete,
                    timeout: None,
                },
                ..ExecutorUpgradePolicySpec::default()
            },
        )
        .await;
    // Mid-upgrade, the metrics show nodes draining and pods evicted, with bounded labels only.
    let metrics = scenario
        .wait_until(
            "the metrics show evictions",
            Duration::from_secs(120),
            || async {
                let (code, body) = get(&metrics_addr, "/metrics").ok()?;
                // The series starts at 0 with the policy.
                let evicted = metric(
                    &body,
                    "k8sm_evictions_total{policy=\"fleet\",reason=\"Evicted\"}",
                )
                .is_some_and(|n| n > 0.0);
                (code == 200 && evicted && body.contains("k8sm_nodes{")).then_some(body)
            },
        )
        .await;
    for series in [
        "k8sm_nodes{policy=\"fleet\",phase=\"Incompatible\"}",
        "k8sm_nodes{policy=\"fleet\",phase=\"Compatible\"}",
        "k8sm_blocked_pods",
        "k8sm_is_leader 1",
        "k8sm_reconcile_duration_seconds_count",
        "k8sm_planner_duration_seconds_bucket",
    ] {
        assert!(
            metrics.contains(series),
            "/metrics lacks {series}:\n{metrics}"
        );
    }
    assert!(
        !metrics.contains("node-0"),
        "no metric label names an object:\n{metrics}"
    );
    assert_eq!(
        get(&metrics_addr, "/healthz").unwrap(),
        (200, "ok".to_owned())
    );
    assert_eq!(
        get(&metrics_addr, "/readyz").unwrap(),
        (200, "ok".to_owned())
    );

    scenario
        .wait_nodes_upgraded(20, Duration::from_secs(600))
        .await;
    let took = started.elapsed();
    // Every pod moved only once the cluster showed its node admitted and cordoned (the controller's
    // writes run in the background while it goes on evicting elsewhere): the replicas, the
    // StatefulSet's and the unmanaged pods.
    assert!(
        order.removed() >= 46,
        "the pods of the 20 nodes were removed: {} seen",
        order.removed()
    );
    let out_of_order = order.out_of_order();
    assert!(
        out_of_order.is_empty(),
        "pods removed before their node was admitted and cordoned:\n{}",
        out_of_order.join("\n")
    );

    // What an operator sees: the policy's status, and Events that explain every step.
    let policy = scenario
        .wait_until(
            "the status reports 20/20",
            Duration::from_secs(30),
            || async {
                let policy = scenario.policy("fleet").await;
                (policy.status.as_ref().and_then(|s| s.upgraded.as_deref()) == Some("20/20"))
                    .then_some(policy)
            },
        )
        .await;
    let status = policy.status.expect("status");
    assert_eq!(status.counts.compatible, 20);
    assert!(
        status.nodes.is_empty(),
        "no node left in an upgrade phase: {:?}",
        status.nodes
    );
    let evicted = scenario.events("Evicted").await;
    assert!(!evicted.is_empty(), "Evicted events");
    for event in &evicted {
        let note = event.note.as_deref().unwrap_or_default();
        assert!(
            note.contains("ready"),
            "an Evicted event carries the SLA evidence: {note}"
        );
    }
    assert_eq!(
        scenario.events("Marked").await.len(),
        20,
        "one Marked event per node"
    );
    assert_eq!(
        scenario.events("KamikazeSent").await.len(),
        20,
        "one KamikazeSent event per node"
    );
    assert_eq!(
        scenario.events("Upgraded").await.len(),
        20,
        "one Upgraded event per node"
    );
    assert_eq!(
        scenario.events("DeletedUnmanagedPod").await.len(),
        4,
        "the 4 unmanaged pods were deleted"
    );

    // Hygiene an operator notices: the controller's writes carry its field manager, and its log is
    // one JSON object per line without colour codes (its stderr is a file here, as under
    // `kubectl logs`). (A node's entry goes when its upgrade removes k8sm's keys; the policy's
    // status stays.)
    let managers: Vec<(String, String)> = scenario
        .policy("fleet")
        .await
        .managed_fields()
        .iter()
        .map(|f| {
            (
                f.manager.clone().unwrap_or_default(),
                f.subresource.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("k8sm-controller".into(), "status".into())),
        "the policy's managedFields name k8sm-controller for its status: {managers:?}"
    );
    let log = std::fs::read_to_string(&scenario.controllers[0].log).expect("the controller's log");
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "the controller logged");
    for line in &lines {
        let entry: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
        assert!(
            entry.get("level").is_some() && entry.get("timestamp").is_some(),
            "a JSON log line has a level and a timestamp: {line}"
        );
        assert!(!line.contains('\u{1b}'), "a colour code in the log: {line}");
    }

    // The SLA invariant held at every pod change.
    assert_no_violations(&sla);
    // Every eviction names a distinct pod: no decision was executed twice.
    let evictions_per_pod = scenario.evictions_per_pod().await;
    assert!(
        evictions_per_pod.values().all(|n| *n == 1),
        "a pod was evicted twice: {evictions_per_pod:?}"
    );
    println!(
        "20-node upgrade took {:.1}s; {} evictions",
        took.as_secs_f64(),
        evicted.len()
    );
    // Every workload was judged, the ReplicationController too, and none went below its bound at
    // any moment.
    let records = sla.records();
    for record in &records {
        println!(
            "{} {}: desired {}, min ready {} (bound {})",
            record.kind, record.name, record.desired, record.min_ready, record.bound
        );
    }
    let judged: Vec<(&str, &str, u32)> = records
        .iter()
        .map(|r| (r.kind.as_str(), r.name.as_str(), r.desired))
        .collect();
    for (kind, name, desired) in [
        ("Deployment", "solo", 1),
        ("Deployment", "trio", 3),
        ("Deployment", "web", 10),
        ("Deployment", "api", 25),
        ("ReplicationController", "legacy", 4),
        ("StatefulSet", "db", 3),
    ] {
        assert!(
            judged.contains(&(kind, name, desired)),
            "the SLA watcher judged {kind} {name} of {desired}: {judged:?}"
        );
        let record = records
            .iter()
            .find(|r| r.kind == kind && r.name == name)
            .expect("judged");
        let floor = bound(desired, u32::from(THRESHOLD));
        assert!(
            record.min_ready >= floor,
            "{kind} {name} fell to {} Ready, below its bound {floor}",
            record.min_ready
        );
    }
    let legacy_evicted = evicted
        .iter()
        .filter(|e| {
            e.note
                .as_deref()
                .is_some_and(|n| n.contains("workload ReplicationController legacy"))
        })
        .count();
    assert!(
        legacy_evicted > 0,
        "the ReplicationController's pods were evicted as its own workload"
    );
}
