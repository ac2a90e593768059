//! The kamikaze mechanisms other than the default annotation, end to end: `Http` POSTs to the executor's endpoint,
//! `DeleteNode` deletes the Node object (the simulated executor re-creates it in the new version).

use std::time::Duration;

use k8sm_api::{ExecutorUpgradePolicySpec, Kamikaze, KamikazeMechanism};
use k8sm_e2e::http::free_port;
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::workloads::{create, deployment};

async fn upgrade_with(scenario: &mut Scenario, kamikaze: Kamikaze) {
    let ns = scenario.namespace.clone();
    create(&scenario.client, &deployment(&ns, "web", 4)).await;
    scenario
        .wait_until("web is ready", Duration::from_secs(60), || async {
            (scenario.ready_pods().await >= 4).then_some(())
        })
        .await;
    scenario.start_controller(&[]);
    scenario
        .create_policy(
            "fleet",
            ExecutorUpgradePolicySpec {
                target_executor_id: Some(scenario.new_id.clone()),
                owner_health_threshold: 70,
                kamikaze,
                ..ExecutorUpgradePolicySpec::default()
            },
        )
        .await;
    scenario
        .wait_until(
            "every node runs the new executor",
            Duration::from_secs(300),
            || async {
                scenario.controllers[0].assert_running();
                (scenario.upgraded_nodes().await == 3).then_some(())
            },
        )
        .await;
    assert_eq!(
        scenario.events("KamikazeSent").await.len(),
        3,
        "one kamikaze per node"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_kamikaze_posts_to_the_executor() {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut scenario =
        Scenario::start_with_agent_args(3, "http", "1s", &[format!("--http-addr={addr}")]).await;
    upgrade_with(
        &mut scenario,
        Kamikaze {
            mechanism: KamikazeMechanism::Http,
            url_template: Some(format!("http://{addr}/kamikaze/{{nodeName}}")),
        },
    )
    .await;
    // The controller records the kamikaze annotation only after the POST was answered 2xx, so nodes that
    // restarted prove the executor's endpoint was called.
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_node_kamikaze_replaces_the_node_object() {
    let mut scenario = Scenario::start(3, "delete-node", "1s").await;
    let uids_before: Vec<String> = scenario
        .nodes()
        .await
        .iter()
        .filter_map(|n| n.metadata.uid.clone())
        .collect();
    upgrade_with(
        &mut scenario,
        Kamikaze {
            mechanism: KamikazeMechanism::DeleteNode,
            url_template: None,
        },
    )
    .await;
    let uids_after: Vec<String> = scenario
        .nodes()
        .await
        .iter()
        .filter_map(|n| n.metadata.uid.clone())
        .collect();
    assert!(
        uids_after.iter().all(|uid| !uids_before.contains(uid)),
        "every Node object was deleted and re-created"
    );
}
