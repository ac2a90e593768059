//! The kamikaze mechanisms other than the default annotation, end to end: `Http` POSTs to the
//! executor's endpoint with the controller's token (at an IPv6 address in brackets; never to a node
//! whose InternalIP is a host name), `DeleteNode` deletes the Node object (the simulated executor
//! re-creates it in the new version).

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use k8sm_api::{
    ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, Kamikaze, KamikazeMechanism, NodePhase, keys,
};
use k8sm_e2e::events::note;
use k8sm_e2e::http::free_port;
use k8sm_e2e::scenario::{Scenario, agent_http_kamikaze, agent_pki, is_upgraded};
use k8sm_e2e::status::status_entry;
use k8sm_e2e::tokens::apply_controller_account;
use k8sm_e2e::workloads::{create, deployment};
use k8sm_testcluster::node_name;

/// Starts the controller (admin kubeconfig) with deploy/rbac.yaml's ServiceAccount as the one whose
/// token the Http kamikaze carries.
fn start_controller(scenario: &mut Scenario, extra_args: &[&str]) {
    apply_controller_account(&scenario.cluster);
    let args = [
        &["--kamikaze-service-account=k8sm-system/k8sm-controller"],
        extra_args,
    ]
    .concat();
    scenario.start_controller(&args);
}

/// A Deployment of 4 to move, Ready.
async fn deploy_web(scenario: &Scenario) {
    let ns = scenario.namespace.clone();
    create(&scenario.client, &deployment(&ns, "web", 4)).await;
    scenario
        .wait_ready_within(&ns, 4, Duration::from_secs(60))
        .await;
}

/// Upgrades 3 nodes under a Deployment of 4 with `kamikaze`, the controller started with
/// `controller_args` too.
async fn upgrade_with(scenario: &mut Scenario, kamikaze: Kamikaze, controller_args: &[&str]) {
    deploy_web(scenario).await;
    start_controller(scenario, controller_args);
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
        .wait_nodes_upgraded(3, Duration::from_secs(300))
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
    upgrade_with(&mut scenario, agent_http_kamikaze(&addr), &[]).await;
    // The controller records the kamikaze annotation only after the POST was answered 2xx, and the
    // simulated executors answer 2xx only to the controller's token bound to the node, so nodes
    // that restarted prove the endpoint was called with it.
    let log = scenario.agent.log_tail(usize::MAX);
    assert!(
        !log.contains("kamikaze over HTTP refused"),
        "the controller's POSTs were refused:\n{log}"
    );
    // Plain http:// was allowed by the policy, and warned about.
    let warned = scenario.events("InsecureKamikaze").await;
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(note(&warned[0]).contains("unencrypted"), "{warned:?}");
}

/// The Http kamikaze over HTTPS: the agents serve a certificate of the operator's CA
/// (`--tls-cert-file`), the controller trusts only that CA (`--kamikaze-ca-file`); a plain http:// URL without the opt-in is refused by the
/// apiserver with a message that says what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_kamikaze_over_https_is_verified_by_the_operators_ca() {
    let addr = format!("127.0.0.1:{}", free_port());
    let dir = std::env::temp_dir().join(format!("k8sm-e2e-pki-{}", std::process::id()));
    let [ca, cert, key] = agent_pki(&dir);
    let agent_args = [
        format!("--http-addr={addr}"),
        format!("--tls-cert-file={}", cert.display()),
        format!("--tls-key-file={}", key.display()),
    ];
    let mut scenario = Scenario::start_with_agent_args(3, "https", "1s", &agent_args).await;
    let plain = ExecutorUpgradePolicySpec {
        kamikaze: Kamikaze {
            allow_insecure_http: false,
            ..agent_http_kamikaze(&addr)
        },
        ..ExecutorUpgradePolicySpec::default()
    };
    let refused = Api::<ExecutorUpgradePolicy>::all(scenario.client.clone())
        .create(
            &PostParams::default(),
            &ExecutorUpgradePolicy::new("plain", plain),
        )
        .await
        .expect_err("a plain http:// URL without the opt-in is refused")
        .to_string();
    assert!(
        refused.contains("is a plain http:// URL") && refused.contains("allowInsecureHttp: true"),
        "{refused}"
    );

    let kamikaze = Kamikaze {
        mechanism: KamikazeMechanism::Http,
        url_template: Some(format!("https://{addr}/kamikaze/{{nodeName}}")),
        allow_insecure_http: false,
    };
    let ca_file = format!("--kamikaze-ca-file={}", ca.display());
    upgrade_with(&mut scenario, kamikaze, &[&ca_file]).await;
    assert!(scenario.events("InsecureKamikaze").await.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sets the node's addresses to an InternalIP of `address` (as its kubelet would report it) and
/// waits until the apiserver shows it.
async fn set_internal_ip(scenario: &Scenario, node: &str, address: &str) {
    let nodes: Api<Node> = Api::all(scenario.client.clone());
    let patch = json!({ "status": { "addresses": [
        { "type": "InternalIP", "address": address },
        { "type": "Hostname", "address": node },
    ] } });
    nodes
        .patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("setting the InternalIP of {node} to {address:?}: {e}"));
    scenario
        .wait_until(
            &format!("{node} reports InternalIP {address}"),
            Duration::from_secs(30),
            || async { (internal_ip(&nodes.get(node).await.ok()?)? == address).then_some(()) },
        )
        .await;
}

fn internal_ip(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_kamikaze_brackets_an_ipv6_address_and_never_posts_to_a_host_name() {
    // The simulated executors listen on IPv6 loopback only; anything sent to the same port on IPv4
    // loopback (where "localhost" may resolve) lands in a trap.
    let port = free_port();
    let mut scenario = Scenario::start_with_agent_args(
        2,
        "http-addresses",
        "1s",
        &[format!("--http-addr=[::1]:{port}")],
    )
    .await;
    let trap = std::net::TcpListener::bind(("127.0.0.1", port)).expect("the IPv4 trap");
    trap.set_nonblocking(true).unwrap();
    let [ipv6, named] = [0, 1].map(node_name);
    set_internal_ip(&scenario, &ipv6, "::1").await;
    set_internal_ip(&scenario, &named, "localhost").await;
    start_controller(&mut scenario, &[]);
    scenario
        .create_policy(
            "fleet",
            ExecutorUpgradePolicySpec {
                kamikaze: Kamikaze {
                    mechanism: KamikazeMechanism::Http,
                    url_template: Some(format!("http://{{nodeIP}}:{port}/kamikaze/{{nodeName}}")),
                    allow_insecure_http: true,
                },
                ..scenario.policy_spec(2)
            },
        )
        .await;

    // The IPv6 node is POSTed at [::1] and restarts; the other is drained, then held with the
    // reason.
    let blocker = scenario
        .wait_until(
            "the IPv6 node is upgraded and the other blocked",
            Duration::from_secs(120),
            || async {
                scenario.controllers[0].assert_running();
                let upgraded = scenario.nodes().await.iter().any(|n| {
                    n.metadata.name.as_ref() == Some(&ipv6) && is_upgraded(n, &scenario.new_id)
                });
                let entry = status_entry(&scenario.policy("fleet").await, &named)?;
                let blocker = entry
                    .blockers
                    .iter()
                    .find(|b| b.contains("is not an IP address"))?
                    .clone();
                (upgraded && entry.phase == NodePhase::Drained).then_some(blocker)
            },
        )
        .await;
    assert!(
        blocker.contains(r#""localhost""#) && blocker.contains("never to a host name"),
        "the blocker names the address and why: {blocker}"
    );
    let warnings = scenario.events("NodeAddressInvalid").await;
    assert_eq!(warnings.len(), 1, "one Warning Event: {warnings:?}");
    assert_eq!(
        warnings[0]
            .regarding
            .as_ref()
            .and_then(|r| r.name.as_deref()),
        Some(named.as_str())
    );

    // Nothing was sent for the named node: no connection on IPv4, no request at the executors, no
    // kamikaze.
    assert_eq!(
        trap.accept().map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::WouldBlock),
        "a connection reached the IPv4 trap"
    );
    let log = scenario.agent.log_tail(usize::MAX);
    assert!(
        !log.lines()
            .any(|l| l.contains("kamikaze over HTTP") && l.contains(named.as_str())),
        "the executors were asked to kamikaze {named}:\n{log}"
    );
    let held = scenario
        .nodes()
        .await
        .into_iter()
        .find(|n| n.metadata.name.as_ref() == Some(&named))
        .expect("the named node");
    let annotations = held.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key(keys::KAMIKAZE_ANNOTATION),
        "no kamikaze recorded"
    );
    assert_eq!(
        annotations.get(keys::EXECUTOR_ID_ANNOTATION),
        Some(&scenario.old_id),
        "still the old executor"
    );
    assert_eq!(
        scenario.events("KamikazeSent").await.len(),
        1,
        "only the IPv6 node was told"
    );
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
            ..Kamikaze::default()
        },
        &[],
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

/// A controller on a system without CA roots (a minimal image without a bundle) still starts and
/// upgrades: only the `Http` kamikaze needs its HTTP client, which loads the roots, so it is built
/// when first needed; there it fails visibly (an `ActionFailed` Event that names the cause) and the
/// policy's other mechanisms are unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_without_system_ca_roots_fails_only_its_http_kamikaze() {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut scenario =
        Scenario::start_with_agent_args(3, "no-roots", "1s", &[format!("--http-addr={addr}")])
            .await;
    deploy_web(&scenario).await;
    apply_controller_account(&scenario.cluster);
    let no_roots = scenario.cluster.dir().join("no-ca-roots");
    std::fs::create_dir_all(&no_roots).expect("an empty directory");
    let missing = no_roots.join("ca-certificates.crt");
    scenario.start_controller_with_env(
        &["--kamikaze-service-account=k8sm-system/k8sm-controller"],
        &[
            ("SSL_CERT_FILE", &missing.display().to_string()),
            ("SSL_CERT_DIR", &no_roots.display().to_string()),
        ],
    );
    scenario
        .create_policy(
            "fleet",
            ExecutorUpgradePolicySpec {
                target_executor_id: Some(scenario.new_id.clone()),
                owner_health_threshold: 70,
                kamikaze: agent_http_kamikaze(&addr),
                ..ExecutorUpgradePolicySpec::default()
            },
        )
        .await;
    let failure = scenario
        .wait_until(
            "the Http kamikaze fails and says why",
            Duration::from_secs(180),
            || async {
                scenario.controllers[0].assert_running();
                scenario
                    .events("ActionFailed")
                    .await
                    .iter()
                    .map(|e| note(e).to_owned())
                    .find(|n| n.contains("building the kamikaze HTTP client"))
            },
        )
        .await;
    assert!(failure.contains("CA"), "the cause is named: {failure}");
    assert_eq!(scenario.upgraded_nodes().await, 0);

    // The same controller, the default mechanism: every node goes.
    scenario
        .patch_policy(
            "fleet",
            json!({"kamikaze": {"mechanism": "Annotation", "urlTemplate": null}}),
        )
        .await;
    scenario
        .wait_nodes_upgraded(3, Duration::from_secs(300))
        .await;
}
