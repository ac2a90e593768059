//! The node side cannot be abused, on the real apiserver with deploy/'s own files: the agent's
//! credential (the token of its Pod) changes only its own Node, and only the agent's keys there
//! (deploy/agent/admission.yaml); the Http kamikaze obeys only the controller's token for the
//! kamikaze audience, bound to the node, on a node k8sm drained.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use k8sm_api::keys::{
    CORDONED_BY_ANNOTATION, DRAINING_ANNOTATION, EXECUTOR_ID_ANNOTATION,
    INCOMPATIBLE_EXECUTOR_ANNOTATION, INCOMPATIBLE_EXECUTOR_LABEL, INCOMPATIBLE_EXECUTOR_TAINT_KEY,
    KAMIKAZE_ANNOTATION, KAMIKAZE_EXECUTOR_ID_ANNOTATION, KAMIKAZE_OBEYED_ANNOTATION,
    KAMIKAZE_TOKEN_AUDIENCE, MARKED_BY_ANNOTATION,
};
use k8sm_api::{ExecutorUpgradePolicy, ExecutorUpgradePolicySpec};
use k8sm_e2e::admission::wait_refused;
use k8sm_e2e::binaries::{ChildGuard, binary};
use k8sm_e2e::events::with_reason;
use k8sm_e2e::http::{free_port, request};
use k8sm_e2e::nodes::annotation;
use k8sm_e2e::objects::node_of;
use k8sm_e2e::polling::POLL;
use k8sm_e2e::run_agents::RunAgents;
use k8sm_e2e::scenario::{agent_http_kamikaze, is_upgraded};
use k8sm_e2e::tokens::{
    AGENT_ACCOUNT, CONTROLLER_ACCOUNT, K8SM_NAMESPACE, apply_controller_account, client_from,
    controller_kamikaze_token, controller_kubeconfig, request_token, token_kubeconfig,
};
use k8sm_e2e::waits::wait_until;
use k8sm_e2e::workload_policy::only_node;
use k8sm_e2e::{install_crd, kubectl_ok};
use k8sm_testcluster::{ClusterOptions, TestCluster, node_name};

const OLD: &str = "sha256:node-trust-old";
const NEW: &str = "sha256:node-trust-new";
const AT: &str = "2026-01-01T00:00:00Z";
const LATER: &str = "2026-01-01T01:00:00Z";
const WAIT: Duration = Duration::from_secs(60);

/// What the policy's denials say, in part: each names what is allowed.
const OWN_NODE_ONLY: &str = "k8sm-agent may change only its own Node";
const NO_LABELS_TAINTS_SPEC: &str = "may not change a Node's labels, taints, cordon (spec)";
const ONLY_AGENT_ANNOTATIONS: &str = "k8sm-agent may change only the annotations";

/// Applies deploy/'s namespace and controller RBAC, and the whole node side (`kubectl apply -k
/// deploy/agent`: the agent's RBAC, its admission policy and its DaemonSet): the files an operator
/// applies, not copies.
fn apply_deploy(cluster: &TestCluster) {
    apply_controller_account(cluster);
    kubectl_ok(cluster, &["apply", "-k", "deploy/agent"]);
}

/// The DaemonSet's agent Pod on `node` (KWOK "runs" it), once the DaemonSet controller created it.
async fn agent_pod(client: &Client, node: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), K8SM_NAMESPACE);
    let params = ListParams::default().labels("app.kubernetes.io/name=k8sm-agent");
    let what = format!("an agent Pod runs on {node}");
    wait_until(&what, WAIT, POLL, &[], || async {
        let list = pods.list(&params).await.expect("pods");
        list.items.into_iter().find(|p| node_of(p) == Some(node))
    })
    .await
}

/// The agent's credential on `node`: a token of its ServiceAccount bound to its Pod there, as the
/// kubelet mounts it.
async fn agent_token(client: &Client, node: &str) -> String {
    let pod = agent_pod(client, node).await;
    request_token(client, K8SM_NAMESPACE, AGENT_ACCOUNT, None, Some(&pod)).await
}

async fn merge(nodes: &Api<Node>, name: &str, patch: &Value) -> Result<Node, kube::Error> {
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
}

fn annotations(patch: Value) -> Value {
    json!({ "metadata": { "annotations": patch } })
}

/// Waits until the admission policy is in force (the apiserver loads it asynchronously): a dry-run
/// write of another Node's executor ID is denied.
async fn wait_policy_in_force(agent: &Api<Node>, other: &str) {
    let patch = annotations(json!({ EXECUTOR_ID_ANNOTATION: "probe" }));
    wait_refused(agent, other, &patch, OWN_NODE_ONLY, WAIT, POLL).await;
}

/// Asserts that the apiserver denied `result` by the agent's admission policy with a message
/// containing `says`.
fn assert_denied(what: &str, result: Result<Node, kube::Error>, says: &str) {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{what}: {status:?}");
            assert!(
                status.message.contains("k8sm-agent-own-node") && status.message.contains(says),
                "{what}: the denial says {says:?}: {}",
                status.message
            );
        }
        Ok(_) => panic!("{what}: allowed"),
        Err(other) => panic!("{what}: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_changes_only_its_own_node_and_only_its_own_keys() {
    let cluster = TestCluster::start(ClusterOptions::default().with_nodes(2))
        .await
        .expect("cluster starts");
    apply_deploy(&cluster);
    let admin: Api<Node> = Api::all(cluster.client());
    let [a, b] = [0, 1].map(node_name);
    let token = agent_token(&cluster.client(), &a).await;
    let agent: Api<Node> =
        Api::all(client_from(&token_kubeconfig(&cluster, "agent-a", &token)).await);
    wait_policy_in_force(&agent, &b).await;

    // What the agent does on its own Node is allowed: publish its ID, record a kamikaze it obeys
    // (and the record of the executor told where a hand-set kamikaze had none), acknowledge
    // (remove) a kamikaze it obeyed.
    merge(
        &agent,
        &a,
        &annotations(json!({ EXECUTOR_ID_ANNOTATION: OLD })),
    )
    .await
    .expect("publishing its own executor ID");
    // Only the controller may set a kamikaze (the policy k8sm-kamikaze-from-controller).
    let (kubeconfig, _) = controller_kubeconfig(&cluster, "controller");
    let controller: Api<Node> = Api::all(client_from(&kubeconfig).await);
    merge(
        &controller,
        &a,
        &annotations(json!({ KAMIKAZE_ANNOTATION: AT })),
    )
    .await
    .unwrap();
    merge(
        &agent,
        &a,
        &annotations(
            json!({ KAMIKAZE_OBEYED_ANNOTATION: AT, KAMIKAZE_EXECUTOR_ID_ANNOTATION: OLD }),
        ),
    )
    .await
    .expect("recording a hand-set kamikaze as obeyed, with the executor told");
    merge(
        &agent,
        &a,
        &annotations(json!({ KAMIKAZE_ANNOTATION: null })),
    )
    .await
    .expect("acknowledging the kamikaze it obeyed");
    let after = admin.get(&a).await.unwrap();
    assert_eq!(annotation(&after, EXECUTOR_ID_ANNOTATION), Some(OLD));
    assert_eq!(annotation(&after, KAMIKAZE_OBEYED_ANNOTATION), Some(AT));
    assert_eq!(annotation(&after, KAMIKAZE_ANNOTATION), None);

    // Everything else is denied, and says what is allowed. The state each attempt would change is
    // set up by the controller first where it matters.
    merge(
        &controller,
        &a,
        &annotations(json!({ KAMIKAZE_ANNOTATION: LATER, KAMIKAZE_EXECUTOR_ID_ANNOTATION: OLD })),
    )
    .await
    .unwrap();
    let b_before = admin.get(&b).await.unwrap();
    let a_before = admin.get(&a).await.unwrap();
    let attempts: Vec<(&str, String, Value, &str)> = vec![
        (
            "another node's executor ID",
            b.clone(),
            annotations(json!({ EXECUTOR_ID_ANNOTATION: NEW })),
            OWN_NODE_ONLY,
        ),
        (
            "another node's kamikaze-obeyed",
            b.clone(),
            annotations(json!({ KAMIKAZE_OBEYED_ANNOTATION: AT })),
            OWN_NODE_ONLY,
        ),
        (
            "a label",
            a.clone(),
            json!({ "metadata": { "labels": { "example.com/role": "db" } } }),
            NO_LABELS_TAINTS_SPEC,
        ),
        (
            "the mark's label",
            a.clone(),
            json!({ "metadata": { "labels": { INCOMPATIBLE_EXECUTOR_LABEL: "true" } } }),
            NO_LABELS_TAINTS_SPEC,
        ),
        (
            "a taint",
            a.clone(),
            json!({ "spec": { "taints": [{ "key": INCOMPATIBLE_EXECUTOR_TAINT_KEY, "effect": "NoExecute" }] } }),
            NO_LABELS_TAINTS_SPEC,
        ),
        (
            "a cordon",
            a.clone(),
            json!({ "spec": { "unschedulable": true } }),
            NO_LABELS_TAINTS_SPEC,
        ),
        (
            "the mark",
            a.clone(),
            annotations(
                json!({ INCOMPATIBLE_EXECUTOR_ANNOTATION: AT, MARKED_BY_ANNOTATION: "k8sm" }),
            ),
            ONLY_AGENT_ANNOTATIONS,
        ),
        (
            "the draining record",
            a.clone(),
            annotations(json!({ DRAINING_ANNOTATION: AT })),
            ONLY_AGENT_ANNOTATIONS,
        ),
        (
            "the cordon record",
            a.clone(),
            annotations(json!({ CORDONED_BY_ANNOTATION: "k8sm" })),
            ONLY_AGENT_ANNOTATIONS,
        ),
        (
            "another component's annotation",
            a.clone(),
            annotations(json!({ "example.com/owner": "me" })),
            ONLY_AGENT_ANNOTATIONS,
        ),
        (
            "removing a kamikaze it did not obey",
            a.clone(),
            annotations(json!({ KAMIKAZE_ANNOTATION: null })),
            "it may only remove a kamikaze it obeyed",
        ),
        (
            "the controller's record of the executor told",
            a.clone(),
            annotations(json!({ KAMIKAZE_EXECUTOR_ID_ANNOTATION: NEW })),
            "kamikaze-executor-id only where it is missing",
        ),
        (
            "removing its executor ID",
            a.clone(),
            annotations(json!({ EXECUTOR_ID_ANNOTATION: null })),
            "may set, but not remove",
        ),
    ];
    for (what, node, patch, says) in attempts {
        assert_denied(what, merge(&agent, &node, &patch).await, says);
    }
    // A kamikaze is denied to everyone but the controller: both policies deny it, and the apiserver
    // names either.
    match merge(
        &agent,
        &a,
        &annotations(json!({ KAMIKAZE_ANNOTATION: "2027-01-01T00:00:00Z" })),
    )
    .await
    {
        Err(kube::Error::Api(status)) => assert!(
            status.code == 403
                && (status.message.contains(KAMIKAZE_POLICY)
                    && status.message.contains("only the controller")
                    || status.message.contains("k8sm-agent-own-node")
                        && status
                            .message
                            .contains("may not set or change the kamikaze annotation")),
            "a kamikaze: {status:?}"
        ),
        other => panic!("a kamikaze: {other:?}"),
    }
    let unchanged = |before: &Node, after: &Node| {
        before.metadata.labels == after.metadata.labels
            && before.metadata.annotations == after.metadata.annotations
            && before.spec == after.spec
    };
    assert!(
        unchanged(&b_before, &admin.get(&b).await.unwrap()),
        "node B changed"
    );
    assert!(
        unchanged(&a_before, &admin.get(&a).await.unwrap()),
        "node A changed"
    );

    // RBAC does not even let it try the rest.
    for (what, result) in [
        (
            "deleting its Node",
            agent
                .delete(&a, &Default::default())
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
        ),
        (
            "its Node's status",
            agent
                .patch_status(
                    &a,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "status": { "addresses": [] } })),
                )
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
        ),
    ] {
        let error = result.expect_err(what);
        assert!(error.contains("forbidden"), "{what}: {error}");
    }

    // A token of the agent's ServiceAccount bound to no Pod names no node, and may change none.
    let unbound =
        request_token::<Pod>(&cluster.client(), K8SM_NAMESPACE, AGENT_ACCOUNT, None, None).await;
    let unbound: Api<Node> =
        Api::all(client_from(&token_kubeconfig(&cluster, "agent-unbound", &unbound)).await);
    assert_denied(
        "an unbound token, its 'own' node",
        merge(
            &unbound,
            &a,
            &annotations(json!({ EXECUTOR_ID_ANNOTATION: NEW })),
        )
        .await,
        "its token names none",
    );
}

/// POSTs the controller's kamikaze body to `addr` for `node` with `token` (if any); the status
/// code.
async fn post_kamikaze(addr: SocketAddr, node: &str, token: Option<&str>) -> u16 {
    let body = format!(r#"{{"kamikaze": "{AT}"}}"#);
    request(addr, "POST", &format!("/kamikaze/{node}"), token, &body)
        .await
        .unwrap_or_else(|e| panic!("the agent's endpoint answers: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_kamikaze_obeys_only_the_controller_on_a_node_it_drained() {
    let cluster = TestCluster::start(ClusterOptions::default().with_nodes(2))
        .await
        .expect("cluster starts");
    apply_deploy(&cluster);
    install_crd(&cluster);
    let client = cluster.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let [a, b] = [0, 1].map(node_name);
    let agent_token = agent_token(&client, &a).await;
    let agent_kubeconfig = token_kubeconfig(&cluster, "agent-a", &agent_token);
    let agents = RunAgents::new(&cluster, &agent_kubeconfig, &a);
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let http_addr = [format!("--http-addr={addr}")];

    // The real agent, with its Pod's token: its own writes pass the admission policy.
    let old_agent = agents.start(OLD, &http_addr, &[], "agent-old.log");
    let reported = "node A reports the old ID";
    wait_until(reported, WAIT * 2, POLL, &[&old_agent], || async {
        let node = nodes.get(&a).await.ok()?;
        (annotation(&node, EXECUTOR_ID_ANNOTATION) == Some(OLD)).then_some(())
    })
    .await;

    // Anything but the controller's token for the kamikaze audience, bound to node A, on a node
    // k8sm drained, is refused, and nothing happens.
    let node_a = nodes.get(&a).await.unwrap();
    let node_b = nodes.get(&b).await.unwrap();
    let for_a = controller_kamikaze_token(&client, &node_a).await;
    let for_b = controller_kamikaze_token(&client, &node_b).await;
    let kamikaze = Some(KAMIKAZE_TOKEN_AUDIENCE);
    let apiserver_audience = request_token(
        &client,
        K8SM_NAMESPACE,
        CONTROLLER_ACCOUNT,
        None,
        Some(&node_a),
    )
    .await;
    let unbound =
        request_token::<Node>(&client, K8SM_NAMESPACE, CONTROLLER_ACCOUNT, kamikaze, None).await;
    let agents_own_for_kamikaze = request_token(
        &client,
        K8SM_NAMESPACE,
        AGENT_ACCOUNT,
        kamikaze,
        Some(&node_a),
    )
    .await;
    // (case, token, expected answer)
    let refused: [(&str, Option<&str>, u16); 7] = [
        ("no token", None, 401),
        ("a made-up token", Some("not-a-token"), 401),
        (
            "the agent's own Pod token (the apiserver's audience)",
            Some(&agent_token),
            401,
        ),
        (
            "the controller's token for the apiserver's audience",
            Some(&apiserver_audience),
            401,
        ),
        (
            "a token of another account for the kamikaze audience",
            Some(&agents_own_for_kamikaze),
            403,
        ),
        (
            "the controller's kamikaze token for node B",
            Some(&for_b),
            403,
        ),
        (
            "the controller's kamikaze token bound to no node",
            Some(&unbound),
            403,
        ),
    ];
    let answers = "the agent's endpoint answers";
    wait_until(answers, WAIT * 2, POLL, &[&old_agent], || async {
        tokio::net::TcpStream::connect(addr).await.ok().map(drop)
    })
    .await;
    for (case, token, code) in refused {
        assert_eq!(post_kamikaze(addr, &a, token).await, code, "{case}");
    }
    assert_eq!(
        post_kamikaze(addr, &a, Some(&for_a)).await,
        409,
        "the controller's own token, but node A was never drained"
    );
    old_agent.assert_running();
    assert!(agents.runs().is_empty(), "no kamikaze command ran");
    let untouched = nodes.get(&a).await.unwrap();
    assert!(
        !untouched
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(KAMIKAZE_OBEYED_ANNOTATION),
        "no kamikaze recorded as obeyed"
    );
    let log = old_agent.log_tail(usize::MAX);
    assert_eq!(
        log.matches("kamikaze over HTTP refused").count(),
        8,
        "every refusal is logged:\n{log}"
    );
    assert!(
        !log.contains(&for_a[for_a.len() - 24..]),
        "the agent logs no token"
    );

    // The controller's own POST works: with its ServiceAccount's token (deploy/rbac.yaml), it
    // drains node A and POSTs; the agent verifies the token, obeys, runs its command and exits,
    // and the agent of the new executor completes the upgrade.
    let (kubeconfig, _) = controller_kubeconfig(&cluster, "controller");
    let controller = ChildGuard::spawn(
        "k8sm-controller",
        &binary("k8sm-controller"),
        &[
            format!("--kubeconfig={}", kubeconfig.display()),
            "--identity=controller-0".to_owned(),
            "--metrics-addr=127.0.0.1:0".to_owned(),
            format!("--kamikaze-service-account={K8SM_NAMESPACE}/{CONTROLLER_ACCOUNT}"),
            // The deployed Role grants the reports' ConfigMaps in the controller's namespace only.
            format!("--report-namespace={K8SM_NAMESPACE}"),
        ],
        &cluster.dir().join("controller.log"),
    );
    let spec = ExecutorUpgradePolicySpec {
        target_executor_id: Some(NEW.into()),
        node_selector: only_node(&a),
        kamikaze: agent_http_kamikaze(addr),
        ..ExecutorUpgradePolicySpec::default()
    };
    Api::<ExecutorUpgradePolicy>::all(client.clone())
        .create(
            &PostParams::default(),
            &ExecutorUpgradePolicy::new("trust", spec),
        )
        .await
        .expect("policy created");
    let exited = tokio::task::spawn_blocking(move || {
        let status = old_agent.wait_exit(WAIT * 2);
        (status, old_agent)
    })
    .await
    .unwrap();
    let (status, old_agent) = exited;
    assert!(
        status.is_some_and(|s| s.success()),
        "the agent obeyed the controller's kamikaze and exited 0 ({status:?}):\n{}\n--- controller ---\n{}",
        old_agent.log_tail(40),
        controller.log_tail(40)
    );
    assert_eq!(agents.runs(), [OLD], "the kamikaze command ran once");
    let new_agent = agents.start(NEW, &http_addr, &[], "agent-new.log");
    let running = [&new_agent, &controller];
    wait_until("node A is upgraded", WAIT * 2, POLL, &running, || async {
        let node = nodes.get(&a).await.ok()?;
        is_upgraded(&node, NEW).then_some(())
    })
    .await;
    assert_eq!(with_reason(&client, "KamikazeSent").await.len(), 1);
    assert_eq!(
        old_agent
            .log_tail(usize::MAX)
            .matches("kamikaze over HTTP refused")
            .count(),
        8,
        "the controller's POST was not refused"
    );
    // Handed back, node A is no longer drained: even the controller's token gets nothing.
    assert_eq!(post_kamikaze(addr, &a, Some(&for_a)).await, 409);
    assert_eq!(agents.runs(), [OLD]);
    new_agent.assert_running();
}

/// The name of the admission policy that keeps the Annotation kamikaze to the controller; its
/// denials name it.
const KAMIKAZE_POLICY: &str = "k8sm-kamikaze-from-controller";
const EXECUTOR_ID_POLICY: &str = "k8sm-executor-id-from-agent";

/// A client of a ServiceAccount `default/node-admin` that RBAC lets get, list and patch every Node:
/// a cluster operator or another component, anyone but the controller.
async fn node_patcher(cluster: &TestCluster) -> Api<Node> {
    kubectl_ok(
        cluster,
        &["create", "serviceaccount", "node-admin", "-n", "default"],
    );
    kubectl_ok(
        cluster,
        &[
            "create",
            "clusterrole",
            "node-patcher",
            "--verb=get,list,patch",
            "--resource=nodes",
        ],
    );
    kubectl_ok(
        cluster,
        &[
            "create",
            "clusterrolebinding",
            "node-patcher",
            "--clusterrole=node-patcher",
            "--serviceaccount=default:node-admin",
        ],
    );
    let token = request_token::<Pod>(&cluster.client(), "default", "node-admin", None, None).await;
    Api::all(client_from(&token_kubeconfig(cluster, "node-admin", &token)).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_controller_sets_the_annotation_kamikaze() {
    let cluster = TestCluster::start(ClusterOptions::default().with_nodes(2))
        .await
        .expect("cluster starts");
    apply_deploy(&cluster);
    install_crd(&cluster);
    let client = cluster.client();
    let admin: Api<Node> = Api::all(client.clone());
    let [a, b] = [0, 1].map(node_name);
    let patcher = node_patcher(&cluster).await;
    let (kubeconfig, _) = controller_kubeconfig(&cluster, "controller");
    let controller: Api<Node> = Api::all(client_from(&kubeconfig).await);

    // Whoever may patch Nodes, the cluster's admin included, may not tell an executor to terminate:
    // the denial names the policy and who may. The policy is loaded asynchronously: wait until
    // it denies a dry run.
    let set = |at: &str| annotations(json!({ KAMIKAZE_ANNOTATION: at }));
    wait_refused(&patcher, &a, &set(AT), KAMIKAZE_POLICY, WAIT * 2, POLL).await;
    let denied = |what: &str, result: Result<Node, kube::Error>| match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{what}: {status:?}");
            assert!(
                status.message.contains(KAMIKAZE_POLICY)
                    && status.message.contains(
                        "only the controller (system:serviceaccount:k8sm-system:k8sm-controller)"
                    ),
                "{what}: the denial says who may: {}",
                status.message
            );
        }
        other => panic!("{what}: {other:?}"),
    };
    denied(
        "a user with nodes patch",
        merge(&patcher, &a, &set(AT)).await,
    );
    denied("the cluster's admin", merge(&admin, &a, &set(AT)).await);
    denied("an empty kamikaze", merge(&patcher, &a, &set("")).await);

    // The controller may; nobody else may change its kamikaze, but anyone may withdraw it, and
    // other writes to a Node that carries one pass.
    merge(&controller, &b, &set(AT))
        .await
        .expect("the controller sets a kamikaze");
    denied(
        "changing the controller's kamikaze",
        merge(&patcher, &b, &set(LATER)).await,
    );
    merge(
        &patcher,
        &b,
        &annotations(json!({ "example.com/owner": "me" })),
    )
    .await
    .expect("another annotation of a Node with a kamikaze");
    merge(
        &patcher,
        &b,
        &annotations(json!({ KAMIKAZE_ANNOTATION: null })),
    )
    .await
    .expect("withdrawing a kamikaze");
    let annotations_of = |node: Node| node.metadata.annotations.unwrap_or_default();

    // The executor ID: a user with nodes patch may not claim a node runs the target (its executor
    // would never restart); the cluster's administrators may.
    let claim = |id: &str| annotations(json!({ EXECUTOR_ID_ANNOTATION: id }));
    wait_refused(
        &patcher,
        &a,
        &claim(NEW),
        EXECUTOR_ID_POLICY,
        WAIT * 2,
        POLL,
    )
    .await;
    match merge(&patcher, &a, &claim(NEW)).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{status:?}");
            assert!(
                status.message.contains(
                    "only the agent (system:serviceaccount:k8sm-system:k8sm-agent) and cluster administrators"
                ),
                "the denial says who may: {}",
                status.message
            );
        }
        other => panic!("a user with nodes patch set the executor ID: {other:?}"),
    }
    merge(
        &patcher,
        &a,
        &annotations(json!({ "example.com/owner": "me" })),
    )
    .await
    .expect("another annotation of a Node");
    merge(&admin, &a, &claim("sha256:set-by-hand"))
        .await
        .expect("an administrator sets the executor ID");
    merge(&admin, &a, &claim(OLD)).await.expect("and back");
    assert_eq!(
        annotations_of(admin.get(&a).await.unwrap())
            .get(EXECUTOR_ID_ANNOTATION)
            .map(String::as_str),
        Some(OLD)
    );
    assert!(!annotations_of(admin.get(&a).await.unwrap()).contains_key(KAMIKAZE_ANNOTATION));
    assert!(!annotations_of(admin.get(&b).await.unwrap()).contains_key(KAMIKAZE_ANNOTATION));

    // The controller, with its own ServiceAccount, still upgrades both nodes by the Annotation
    // kamikaze; the simulated executors obey it (and remove it, which anyone may).
    let simulator = ChildGuard::spawn(
        "k8sm-agent",
        &binary("k8sm-agent"),
        &[
            "simulate".to_owned(),
            format!("--kubeconfig={}", cluster.kubeconfig().display()),
            format!("--new-executor-id={NEW}"),
            format!("--initial-executor-id={OLD}"),
            "--restart-delay=1s".to_owned(),
        ],
        &cluster.dir().join("simulator.log"),
    );
    let (kubeconfig, _) = controller_kubeconfig(&cluster, "controller");
    let controller = ChildGuard::spawn(
        "k8sm-controller",
        &binary("k8sm-controller"),
        &[
            format!("--kubeconfig={}", kubeconfig.display()),
            "--identity=controller-0".to_owned(),
            "--metrics-addr=127.0.0.1:0".to_owned(),
            format!("--report-namespace={K8SM_NAMESPACE}"),
        ],
        &cluster.dir().join("controller.log"),
    );
    let spec = ExecutorUpgradePolicySpec {
        target_executor_id: Some(NEW.into()),
        ..ExecutorUpgradePolicySpec::default()
    };
    Api::<ExecutorUpgradePolicy>::all(client.clone())
        .create(
            &PostParams::default(),
            &ExecutorUpgradePolicy::new("trust", spec),
        )
        .await
        .expect("policy created");
    let running = [&simulator, &controller];
    wait_until(
        "both nodes are upgraded",
        WAIT * 2,
        POLL,
        &running,
        || async {
            let upgraded = admin.list(&ListParams::default()).await.map_or(0, |list| {
                list.items.iter().filter(|n| is_upgraded(n, NEW)).count()
            });
            (upgraded == 2).then_some(())
        },
    )
    .await;
    assert_eq!(with_reason(&client, "KamikazeSent").await.len(), 2);
}
