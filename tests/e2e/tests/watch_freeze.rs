//! Watches that stall without an error, on a real cluster: the controller talks to the apiserver
//! through a TCP proxy that, once armed, stops forwarding on the connections open at that moment
//! but keeps them open (a load balancer or conntrack table that dropped the flows without telling
//! either end). No watch errors; kube's watcher would wait 295 s before it gave such a connection
//! up, and the controller acted on the frozen view meanwhile: two minutes after an eviction, its
//! pod looked Ready again and a second pod of the workload went.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;

use k8sm_api::{ExecutorUpgradePolicy, UnmanagedPodPolicy, condition_types};
use k8sm_e2e::deletions::DeletionLog;
use k8sm_e2e::events::{note, with_reason};
use k8sm_e2e::freezing_proxy::FreezingProxy;
use k8sm_e2e::http::{free_port, get};
use k8sm_e2e::kubectl_ok;
use k8sm_e2e::scenario::{Scenario, is_upgraded};
use k8sm_e2e::sla::{SlaWatcher, bound};
use k8sm_e2e::status::condition;
use k8sm_e2e::waits::observe_for;
use k8sm_e2e::workload_policy::{THRESHOLD, only_node, workload_policy};
use k8sm_e2e::workloads::{create, deployment};
use k8sm_testcluster::node_name;

const NS: &str = "frozen";
const REPLICAS: u32 = 2;
/// web counts a pod available 30 s after it is Ready: the controller evicts its first pod on a
/// timer, with no watch event needed, after the test froze the watches.
const MIN_READY_SECONDS: i32 = 30;
const SETUP: Duration = Duration::from_secs(120);

fn degraded(policy: &ExecutorUpgradePolicy) -> Option<(String, String)> {
    let c = condition(policy, condition_types::DEGRADED)?;
    (c.status == "True").then(|| (c.reason.clone(), c.message.clone()))
}

/// The evicted pods of web, as the test's own watch (straight to the apiserver) saw them.
fn evicted(deletions: &DeletionLog) -> Vec<String> {
    deletions.deleted().into_iter().map(|d| d.name).collect()
}

/// web (2 replicas, bound 1) on node-0000, the only node the policy upgrades; its replacements
/// cannot schedule (the other nodes are cordoned by the operator). The controller's connections
/// freeze; on its frozen view it evicts one pod of web. It must never evict the second (the first's
/// replacement never comes), must report the stalled watches (a WatchFailing Event,
/// `k8sm_watch_silences_total`) once they delivered nothing for `WATCH_SILENCE` (75 s), and must
/// recover: its watches start again with a fresh list on new connections. Once the frozen
/// connections are cut and the replacement can schedule, the node is upgraded and web never went
/// below its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_watch_is_reported_stale_and_never_causes_a_second_eviction() {
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let client = scenario.client.clone();
    let held = node_name(0);
    let others = [node_name(1), node_name(2)];
    let mut web = deployment(NS, "web", REPLICAS as i32);
    if let Some(spec) = web.spec.as_mut() {
        spec.min_ready_seconds = Some(MIN_READY_SECONDS);
    }
    scenario
        .pin_to(&held, REPLICAS as usize, || async {
            create(&client, &web).await
        })
        .await;
    let ready_at = Instant::now();
    for other in &others {
        kubectl_ok(&scenario.cluster, &["cordon", other]);
    }
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    let deletions = DeletionLog::start(&client, NS, "app=web").await;
    sla.arm();

    // The controller goes through the proxy.
    let upstream: SocketAddr = scenario
        .cluster
        .server()
        .trim_start_matches("https://")
        .parse()
        .expect("the apiserver's address");
    let proxy = FreezingProxy::start(upstream);
    let kubeconfig = scenario.cluster.dir().join("through-proxy.kubeconfig");
    let text = std::fs::read_to_string(scenario.cluster.kubeconfig()).expect("the kubeconfig");
    let proxied = format!("https://{}", proxy.address());
    std::fs::write(
        &kubeconfig,
        text.replace(scenario.cluster.server(), &proxied),
    )
    .expect("a kubeconfig through the proxy");
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    scenario.start_controller_as(&kubeconfig, &[&format!("--metrics-addr={metrics_addr}")]);
    let mut policy = workload_policy(&scenario, UnmanagedPodPolicy::Never);
    policy.node_progress_deadline = "10m".parse().expect("a duration");
    policy.node_selector = only_node(&held);
    scenario.create_policy("fleet", policy).await;
    let nodes: Api<Node> = Api::all(client.clone());
    scenario
        .wait_until(&format!("k8sm cordons {held}"), SETUP, || async {
            let node = nodes.get(&held).await.ok()?;
            node.spec?.unschedulable?.then_some(())
        })
        .await;
    assert!(
        ready_at.elapsed() < Duration::from_secs(MIN_READY_SECONDS as u64 - 5),
        "set up before web's pods are available"
    );
    assert!(
        evicted(&deletions).is_empty(),
        "web's pods are not available yet"
    );

    // Freeze every connection of the controller; its next ones go through.
    let frozen = proxy.arm();
    let armed = Instant::now();
    println!("froze {frozen} connections");
    let first = scenario
        .wait_until(
            "one pod of web is evicted",
            Duration::from_secs(200),
            || async { evicted(&deletions).first().cloned() },
        )
        .await;
    println!("{first} evicted {:?} after the freeze", armed.elapsed());

    // The stalled watches are found, reported and started again, and nothing more of web goes
    // meanwhile. The restarted watches work at once (new connections go through), so the stale
    // view lasts only until their lists come back: what stays is the Warning Event and the
    // metric.
    let reported = scenario
        .wait_until(
            "a WatchFailing Event names a silent watch",
            Duration::from_secs(200),
            || async {
                let gone = evicted(&deletions);
                assert_eq!(gone.len(), 1, "one pod of web went: {gone:?}");
                let warned = with_reason(&client, "WatchFailing").await;
                warned
                    .iter()
                    .map(note)
                    .find(|n| n.contains("no response, event nor bookmark"))
                    .map(str::to_owned)
            },
        )
        .await;
    println!(
        "reported {:?} after the freeze: {reported}",
        armed.elapsed()
    );
    // Each watch's silence is timed from its own last delivery, and the counter is brought up to
    // date at the end of the pass that wrote the Event: the Pod watch's silence can be counted
    // a few seconds after the first Event.
    let silences = scenario
        .wait_until(
            "k8sm_watch_silences_total counts the Pod watch",
            Duration::from_secs(60),
            || async {
                let gone = evicted(&deletions);
                assert_eq!(gone.len(), 1, "one pod of web went: {gone:?}");
                let (_, metrics) = get(&metrics_addr, "/metrics").ok()?;
                metrics
                    .lines()
                    .find(|l| {
                        l.starts_with("k8sm_watch_silences_total{")
                            && l.contains("kind=\"Pod\"")
                            && !l.ends_with(" 0")
                    })
                    .map(str::to_owned)
            },
        )
        .await;
    println!("{silences}");
    observe_for(Duration::from_secs(10), || async {
        let gone = evicted(&deletions);
        assert_eq!(gone.len(), 1, "one pod of web went: {gone:?}");
    })
    .await;

    // The frozen connections are cut, and web's replacement can schedule: the controller has
    // recovered, the condition clears, the node is upgraded, and web never went below its
    // bound.
    println!("cut {} connections", proxy.cut());
    kubectl_ok(&scenario.cluster, &["uncordon", &others[0]]);
    let new_id = scenario.new_id.clone();
    scenario
        .wait_until(
            &format!("{held} is upgraded and the policy is no longer Degraded"),
            Duration::from_secs(300),
            || async {
                let node = nodes.get(&held).await.ok()?;
                let policy = scenario.policy("fleet").await;
                (is_upgraded(&node, &new_id) && degraded(&policy).is_none()).then_some(())
            },
        )
        .await;
    // web's available count started at 0 (the test froze the watches before its pods were
    // available): judged on its Ready pods.
    let records = sla.records();
    let record = records
        .iter()
        .find(|r| r.kind == "Deployment" && r.name == "web")
        .unwrap_or_else(|| panic!("the SLA watcher judged web: {records:?}"));
    println!(
        "SLA: web: desired {}, min ready {} (bound {})",
        record.desired, record.min_ready, record.bound
    );
    assert_eq!(record.bound, bound(REPLICAS, u32::from(THRESHOLD)));
    assert!(record.min_ready >= record.bound, "{record:?}");
}
