//! Least privilege: the controller completes an upgrade with a ServiceAccount token bound to exactly
//! deploy/rbac.yaml, and with one verb taken away it refuses to start, naming the missing permission.

use std::time::Duration;

use k8sm_api::ExecutorUpgradePolicySpec;
use k8sm_e2e::kubectl_ok;
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::workloads::{create, deployment};

const NS: &str = "rbac";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_needs_exactly_the_deployed_role() {
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let (kubeconfig, token) = scenario.deployed_controller_identity();
    let election = ["--leader-elect", "--leader-elect-namespace=k8sm-system"];

    create(&scenario.client, &deployment(NS, "web", 3)).await;
    scenario
        .wait_until("web is ready", Duration::from_secs(60), || async {
            (scenario.ready_pods().await >= 3).then_some(())
        })
        .await;
    scenario.start_controller_as(&kubeconfig, &election);
    scenario
        .create_policy(
            "fleet",
            ExecutorUpgradePolicySpec {
                target_executor_id: Some(scenario.new_id.clone()),
                owner_health_threshold: 60,
                ..ExecutorUpgradePolicySpec::default()
            },
        )
        .await;
    scenario
        .wait_nodes_upgraded(3, Duration::from_secs(300))
        .await;
    // The status is written in the pass after the last node's change: wait for it rather than race it.
    let status = scenario
        .wait_until(
            "the policy status says 3/3",
            Duration::from_secs(60),
            || async {
                let status = scenario.policy("fleet").await.status?;
                (status.upgraded.as_deref() == Some("3/3")).then_some(status)
            },
        )
        .await;
    assert_eq!(status.upgraded.as_deref(), Some("3/3"));
    assert!(
        !scenario.events("Evicted").await.is_empty(),
        "it evicted through the Eviction API"
    );
    // Nothing secret is logged: the whole upgrade's log holds no part of the credential it ran with.
    let log = scenario.controllers[0].log_tail(usize::MAX);
    assert!(token.len() > 64, "a real token: {} chars", token.len());
    assert!(
        !log.contains(&token[token.len() - 32..]) && !log.contains(&token[..32]),
        "the controller's log contains its ServiceAccount token"
    );

    // Take one verb away: a new controller refuses to start and says which permission is missing.
    scenario.controllers[0].kill_with(nix::sys::signal::Signal::SIGTERM);
    scenario.patch_controller_role(&remove_rule(&scenario, "pods/eviction"));
    let index = scenario.start_controller_as(&kubeconfig, &election);
    let controller = &scenario.controllers[index];
    let status = controller
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| {
            panic!(
                "the controller kept running without pods/eviction:\n{}",
                controller.log_tail(20)
            )
        });
    assert!(!status.success());
    let log = controller.log_tail(20);
    assert!(
        log.contains("create pods/eviction"),
        "the error names the missing permission:\n{log}"
    );
}

/// A JSON patch removing the ClusterRole rule that grants `resource`.
fn remove_rule(scenario: &Scenario, resource: &str) -> String {
    let rules = kubectl_ok(
        &scenario.cluster,
        &[
            "get",
            "clusterrole",
            "k8sm-controller",
            "-o",
            "jsonpath={.rules[*].resources}",
        ],
    );
    let index = rules
        .split("] [")
        .position(|r| r.contains(&format!("\"{resource}\"")))
        .unwrap_or_else(|| panic!("no rule grants {resource}: {rules}"));
    format!(r#"[{{"op":"remove","path":"/rules/{index}"}}]"#)
}
