//! The node side cannot be abused, on the real apiserver with deploy/'s own files: the agent's credential (the token
//! of its Pod) changes only its own Node, and only the agent's keys there (deploy/agent/admission.yaml); the Http
//! kamikaze obeys only the controller's token for the kamikaze audience, bound to the node, on a node k8sm drained.

use std::net::SocketAddr;
use std::path::PathBuf;
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
use k8sm_e2e::binaries::{ChildGuard, binary};
use k8sm_e2e::events::with_reason;
use k8sm_e2e::http::free_port;
use k8sm_e2e::scenario::{agent_http_kamikaze, is_upgraded};
use k8sm_e2e::tokens::{
    AGENT_ACCOUNT, CONTROLLER_ACCOUNT, K8SM_NAMESPACE, apply_controller_account, client_from,
    controller_kamikaze_token, request_token, token_kubeconfig,
};
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

/// Applies deploy/'s namespace and controller RBAC, and the whole node side (`kubectl apply -k deploy/agent`: the
/// agent's RBAC, its admission policy and its DaemonSet): the files an operator applies, not copies.
fn apply_deploy(cluster: &TestCluster) {
    apply_controller_account(cluster);
    kubectl_ok(cluster, &["apply", "-k", "deploy/agent"]);
}

/// The DaemonSet's agent Pod on `node` (KWOK "runs" it), once the DaemonSet controller created it.
async fn agent_pod(client: &Client, node: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), K8SM_NAMESPACE);
    let params = ListParams::default().labels("app.kubernetes.io/name=k8sm-agent");
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let list = pods.list(&params).await.expect("pods");
        if let Some(pod) = list
            .items
            .into_iter()
            .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        {
            return pod;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no agent Pod on {node} after {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The agent's credential on `node`: a token of its ServiceAccount bound to its Pod there, as the kubelet mounts it.
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

/// Waits until the admission policy is in force (the apiserver loads it asynchronously): a dry-run write of another
/// Node's executor ID is denied.
async fn wait_policy_in_force(agent: &Api<Node>, other: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    let dry_run = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let patch = annotations(json!({ EXECUTOR_ID_ANNOTATION: "probe" }));
    loop {
        match agent.patch(other, &dry_run, &Patch::Merge(&patch)).await {
            Err(kube::Error::Api(status)) if status.message.contains(OWN_NODE_ONLY) => return,
            other => assert!(
                std::time::Instant::now() < deadline,
                "the admission policy is not in force after {WAIT:?}: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Asserts that the apiserver denied `result` by the agent's admission policy with a message containing `says`.
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

    // What the agent does on its own Node is allowed: publish its ID, record a kamikaze it obeys (and the record of
    // the executor told where a hand-set kamikaze had none), acknowledge (remove) a kamikaze it obeyed.
    merge(
        &agent,
        &a,
        &annotations(json!({ EXECUTOR_ID_ANNOTATION: OLD })),
    )
    .await
    .expect("publishing its own executor ID");
    // Only the controller may set a kamikaze (the policy k8sm-kamikaze-from-controller).
    let controller: Api<Node> = Api::all(client_from(&controller_kubeconfig(&cluster)).await);
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
    let annotation = |node: &Node, key: &str| {
        node.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key).cloned())
    };
    assert_eq!(
        annotation(&after, EXECUTOR_ID_ANNOTATION).as_deref(),
        Some(OLD)
    );
    assert_eq!(
        annotation(&after, KAMIKAZE_OBEYED_ANNOTATION).as_deref(),
        Some(AT)
    );
    assert_eq!(annotation(&after, KAMIKAZE_ANNOTATION), None);

    // Everything else is denied, and says what is allowed. The state each attempt would change is set up by the
    // controller first where it matters.
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
    // A kamikaze is denied to everyone but the controller: both policies deny it, and the apiserver names either.
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

/// `k8sm-agent run` for `node` with the kubeconfig `kubeconfig`, serving the Http kamikaze on `addr`; every run of its
/// restart command appends `id` to `runs`.
fn spawn_agent(
    cluster: &TestCluster,
    kubeconfig: &std::path::Path,
    node: &str,
    id: &str,
    addr: SocketAddr,
    runs: &std::path::Path,
    log: &str,
) -> ChildGuard {
    let args = [
        "run".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--node={node}"),
        format!("--executor-id={id}"),
        format!("--on-kamikaze=echo {id} >> '{}'", runs.display()),
        format!("--http-addr={addr}"),
    ];
    ChildGuard::spawn(
        "k8sm-agent",
        &binary("k8sm-agent"),
        &args,
        &cluster.dir().join(log),
    )
}

/// POSTs the controller's kamikaze body to `addr` for `node` with `token` (if any); the status code.
async fn post_kamikaze(addr: SocketAddr, node: &str, token: Option<&str>) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = format!(r#"{{"kamikaze": "{AT}"}}"#);
    let authorization = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "POST /kamikaze/{node} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{authorization}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("agent endpoint");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer:?}"))
}

async fn wait_until<F, Fut>(what: &str, logs: &[&ChildGuard], mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + WAIT * 2;
    while !check().await {
        if std::time::Instant::now() > deadline {
            let logs: Vec<String> = logs
                .iter()
                .map(|c| format!("--- {} ---\n{}", c.log.display(), c.log_tail(40)))
                .collect();
            panic!("timed out waiting until {what}\n{}", logs.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn runs(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
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
    let runs_file: PathBuf = cluster.dir().join("kamikaze-runs");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();

    // The real agent, with its Pod's token: its own writes pass the admission policy.
    let old_agent = spawn_agent(
        &cluster,
        &agent_kubeconfig,
        &a,
        OLD,
        addr,
        &runs_file,
        "agent-old.log",
    );
    let executor_id = |node: Node| {
        node.metadata
            .annotations
            .and_then(|a| a.get(EXECUTOR_ID_ANNOTATION).cloned())
    };
    wait_until("node A reports the old ID", &[&old_agent], || async {
        nodes.get(&a).await.ok().and_then(executor_id).as_deref() == Some(OLD)
    })
    .await;

    // Anything but the controller's token for the kamikaze audience, bound to node A, on a node k8sm drained, is
    // refused, and nothing happens.
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
    wait_until("the agent's endpoint answers", &[&old_agent], || async {
        tokio::net::TcpStream::connect(addr).await.is_ok()
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
    assert!(runs(&runs_file).is_empty(), "no kamikaze command ran");
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

    // The controller's own POST works: with its ServiceAccount's token (deploy/rbac.yaml), it drains node A and
    // POSTs; the agent verifies the token, obeys, runs its command and exits, and the agent of the new executor
    // completes the upgrade.
    let controller_token = kubectl_ok(
        &cluster,
        &[
            "create",
            "token",
            CONTROLLER_ACCOUNT,
            "-n",
            K8SM_NAMESPACE,
            "--duration=2h",
        ],
    );
    let controller_kubeconfig = token_kubeconfig(&cluster, "controller", controller_token.trim());
    let controller = ChildGuard::spawn(
        "k8sm-controller",
        &binary("k8sm-controller"),
        &[
            format!("--kubeconfig={}", controller_kubeconfig.display()),
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
        node_selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some([("kubernetes.io/hostname".to_owned(), a.clone())].into()),
            ..Default::default()
        },
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
    assert_eq!(runs(&runs_file), [OLD], "the kamikaze command ran once");
    let new_agent = spawn_agent(
        &cluster,
        &agent_kubeconfig,
        &a,
        NEW,
        addr,
        &runs_file,
        "agent-new.log",
    );
    wait_until("node A is upgraded", &[&new_agent, &controller], || async {
        controller.assert_running();
        nodes.get(&a).await.is_ok_and(|n| is_upgraded(&n, NEW))
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
    assert_eq!(runs(&runs_file), [OLD]);
    new_agent.assert_running();
}

/// The name of the admission policy that keeps the Annotation kamikaze to the controller; its denials name it.
const KAMIKAZE_POLICY: &str = "k8sm-kamikaze-from-controller";
const EXECUTOR_ID_POLICY: &str = "k8sm-executor-id-from-agent";

/// A client of a ServiceAccount `default/node-admin` that RBAC lets get, list and patch every Node: a cluster operator
/// or another component, anyone but the controller.
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

/// A kubeconfig with a token of the controller's ServiceAccount (deploy/rbac.yaml), as the controller's Pod has.
fn controller_kubeconfig(cluster: &TestCluster) -> PathBuf {
    let token = kubectl_ok(
        cluster,
        &[
            "create",
            "token",
            CONTROLLER_ACCOUNT,
            "-n",
            K8SM_NAMESPACE,
            "--duration=2h",
        ],
    );
    token_kubeconfig(cluster, "controller", token.trim())
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
    let controller: Api<Node> = Api::all(client_from(&controller_kubeconfig(&cluster)).await);

    // Whoever may patch Nodes, the cluster's admin included, may not tell an executor to terminate: the denial names
    // the policy and who may. The policy is loaded asynchronously: wait until it denies a dry run.
    let set = |at: &str| annotations(json!({ KAMIKAZE_ANNOTATION: at }));
    let dry_run = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    wait_until("the kamikaze policy is in force", &[], || async {
        matches!(
            patcher.patch(&a, &dry_run, &Patch::Merge(&set(AT))).await,
            Err(kube::Error::Api(status)) if status.message.contains(KAMIKAZE_POLICY)
        )
    })
    .await;
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

    // The controller may; nobody else may change its kamikaze, but anyone may withdraw it, and other writes to a
    // Node that carries one pass.
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

    // The executor ID: a user with nodes patch may not claim a node runs the target (its executor would never
    // restart); the cluster's administrators may.
    let claim = |id: &str| annotations(json!({ EXECUTOR_ID_ANNOTATION: id }));
    wait_until("the executor ID policy is in force", &[], || async {
        matches!(
            patcher.patch(&a, &dry_run, &Patch::Merge(&claim(NEW))).await,
            Err(kube::Error::Api(status)) if status.message.contains(EXECUTOR_ID_POLICY)
        )
    })
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

    // The controller, with its own ServiceAccount, still upgrades both nodes by the Annotation kamikaze; the simulated
    // executors obey it (and remove it, which anyone may).
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
    let controller = ChildGuard::spawn(
        "k8sm-controller",
        &binary("k8sm-controller"),
        &[
            format!("--kubeconfig={}", controller_kubeconfig(&cluster).display()),
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
    wait_until(
        "both nodes are upgraded",
        &[&simulator, &controller],
        || async {
            controller.assert_running();
            simulator.assert_running();
            let upgraded = admin.list(&ListParams::default()).await.map_or(0, |list| {
                list.items.iter().filter(|n| is_upgraded(n, NEW)).count()
            });
            upgraded == 2
        },
    )
    .await;
    assert_eq!(with_reason(&client, "KamikazeSent").await.len(), 2);
}
