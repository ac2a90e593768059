//! `k8sm-agent`, the real binary, against the real local cluster: `simulate` publishes executor IDs
//! and restarts KWOK nodes on each kamikaze mechanism (annotation, DeleteNode, HTTP with the
//! controller's token) as a controller would see it, also with an executor that comes back with its
//! old ID; `run` publishes its executor's ID and runs its restart command once per kamikaze, and an
//! agent that comes back with the same ID acknowledges the kamikaze instead of obeying it again.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8sm_api::keys::{
    DRAINING_ANNOTATION, EXECUTOR_ID_ANNOTATION, INCOMPATIBLE_EXECUTOR_ANNOTATION,
    INCOMPATIBLE_EXECUTOR_LABEL, INCOMPATIBLE_EXECUTOR_LABEL_VALUE,
    INCOMPATIBLE_EXECUTOR_TAINT_EFFECT, INCOMPATIBLE_EXECUTOR_TAINT_KEY, KAMIKAZE_ANNOTATION,
    KAMIKAZE_EXECUTOR_ID_ANNOTATION, KAMIKAZE_OBEYED_ANNOTATION,
};
use k8sm_e2e::binaries::{ChildGuard, binary};
use k8sm_e2e::http::{free_port, request};
use k8sm_e2e::nodes::{annotation, is_node_ready, label};
use k8sm_e2e::objects::{get_node, patch_node};
use k8sm_e2e::run_agents::RunAgents;
use k8sm_e2e::tokens::{apply_controller_account, controller_kamikaze_token};
use k8sm_e2e::waits::wait_until;
use k8sm_testcluster::{ClusterOptions, TestCluster, node_name};
use kube::api::DeleteParams;
use kube::{Api, Client};
use serde_json::json;

const OLD: &str = "sha256:e2e-old-executor";
const NEW: &str = "sha256:e2e-new-executor";
/// KWOK manages the nodes that carry this annotation (see crates/testcluster), so a re-created node
/// must keep it.
const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";
const WAIT: Duration = Duration::from_secs(90);
/// How often this file's waits look at the node.
const EVERY: Duration = Duration::from_millis(200);
/// The agents log at `info`, their dependencies' messages included.
const AGENT_ENV: [(&str, &str); 1] = [("RUST_LOG", "info")];

/// Starts `k8sm-agent args…`, logging to `log`.
fn spawn_agent(args: &[&str], log: PathBuf) -> ChildGuard {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    ChildGuard::spawn_with_env("k8sm-agent", &binary("k8sm-agent"), &args, &AGENT_ENV, &log)
}

/// Everything the agent logged so far.
fn log_of(agent: &ChildGuard) -> String {
    agent.log_tail(usize::MAX)
}

/// Waits for the agent to exit by itself; its exit status.
fn wait_exit(agent: &ChildGuard, what: &str) -> ExitStatus {
    agent
        .wait_exit(WAIT)
        .unwrap_or_else(|| panic!("k8sm-agent did not {what}:\n{}", log_of(agent)))
}

/// Sends SIGTERM and waits for the agent to exit.
fn terminate(agent: &ChildGuard) -> ExitStatus {
    agent
        .terminate(WAIT)
        .unwrap_or_else(|| panic!("k8sm-agent did not exit on SIGTERM:\n{}", log_of(agent)))
}

/// The loopback address the agent's HTTP endpoint bound, read from its log (it binds before
/// anything else).
async fn http_addr(agent: &ChildGuard) -> SocketAddr {
    let every = Duration::from_millis(50);
    wait_until("k8sm-agent serves HTTP", WAIT, every, &[], || async {
        // The port follows the address in the line, whether or not the log is coloured.
        let bound = log_of(agent)
            .lines()
            .filter(|line| line.contains("serving POST /kamikaze"))
            .find_map(|line| {
                let (_, rest) = line.split_once("127.0.0.1:")?;
                let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
                format!("127.0.0.1:{port}").parse().ok()
            });
        if bound.is_none() {
            agent.assert_running();
        }
        bound
    })
    .await
}

async fn executor_id_of(nodes: &Api<Node>, name: &str) -> Option<String> {
    let node = nodes.get_opt(name).await.ok()??;
    annotation(&node, EXECUTOR_ID_ANNOTATION).map(str::to_owned)
}

/// Waits until node `name` reports executor `id`, while `agent` keeps running.
async fn wait_reported(agent: &ChildGuard, nodes: &Api<Node>, name: &str, id: &str, what: &str) {
    wait_until(what, WAIT, EVERY, &[agent], || async {
        (executor_id_of(nodes, name).await.as_deref() == Some(id)).then_some(())
    })
    .await;
}

/// Waits until the agent's HTTP endpoint answers `/healthz`, while the agent keeps running.
async fn wait_for_http(agent: &ChildGuard, addr: SocketAddr) {
    wait_until(
        "the HTTP endpoint answers",
        WAIT,
        EVERY,
        &[agent],
        || async {
            (request(addr, "GET", "/healthz", None, "").await.ok() == Some(200)).then_some(())
        },
    )
    .await;
}

/// The controller's token for the Http kamikaze of node `name` (its ServiceAccount created first).
async fn controller_token(cluster: &TestCluster, name: &str) -> String {
    apply_controller_account(cluster);
    let client = cluster.client();
    let node = get_node(&client, name).await;
    controller_kamikaze_token(&client, &node).await
}

/// Marks node `name` and admits it into a drain slot, as the controller does before it drains a
/// node: only such a node obeys the Http kamikaze.
async fn drain_as_controller(client: &Client, name: &str) {
    patch_node(
        client,
        name,
        json!({ "metadata": { "annotations": {
            INCOMPATIBLE_EXECUTOR_ANNOTATION: "2025-01-01T00:00:00Z",
            DRAINING_ANNOTATION: "2025-01-01T00:00:00Z",
        } } }),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_publishes_ids_and_restarts_nodes_on_every_kamikaze_mechanism() {
    let cluster = TestCluster::start(ClusterOptions::default().with_nodes(4))
        .await
        .expect("cluster starts");
    let client = cluster.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let [n0, n1, n2, n3] = [0, 1, 2, 3].map(node_name);
    // Fault injection: node-0003's new package is missing, so its executor comes back with its old
    // ID.
    let come_back_old = format!("{n3}=old");
    let kubeconfig = cluster
        .kubeconfig()
        .to_str()
        .expect("UTF-8 path")
        .to_owned();
    let agent = spawn_agent(
        &[
            "simulate",
            "--kubeconfig",
            &kubeconfig,
            "--new-executor-id",
            NEW,
            "--initial-executor-id",
            OLD,
            "--restart-delay",
            "1s",
            "--selector",
            "type=kwok",
            "--http-addr",
            &addr.to_string(),
            "--come-back-as",
            &come_back_old,
        ],
        cluster.dir().join("k8sm-agent.log"),
    );

    // Executors publish their ID when they start.
    wait_until(
        "all nodes report the old executor ID",
        WAIT,
        EVERY,
        &[&agent],
        || async {
            let mut all = true;
            for name in [&n0, &n1, &n2, &n3] {
                all &= executor_id_of(&nodes, name).await.as_deref() == Some(OLD);
            }
            all.then_some(())
        },
    )
    .await;
    wait_for_http(&agent, addr).await;

    // Annotation mechanism: node-0001 restarts with the new ID, the kamikaze is gone and recorded
    // as obeyed; the others are untouched.
    patch_node(
        &client,
        &n1,
        json!({ "metadata": { "annotations": { KAMIKAZE_ANNOTATION: "2025-01-01T00:00:00Z" } } }),
    )
    .await;
    wait_until(
        "node-0001 restarted by annotation",
        WAIT,
        EVERY,
        &[&agent],
        || async {
            let node = nodes.get(&n1).await.ok()?;
            (annotation(&node, EXECUTOR_ID_ANNOTATION) == Some(NEW)
                && annotation(&node, KAMIKAZE_ANNOTATION).is_none())
            .then_some(())
        },
    )
    .await;
    let restarted = nodes.get(&n1).await.unwrap();
    assert_eq!(
        annotation(&restarted, KAMIKAZE_OBEYED_ANNOTATION),
        Some("2025-01-01T00:00:00Z"),
        "the restart records the kamikaze as obeyed"
    );
    for name in [&n0, &n2, &n3] {
        let node = nodes.get(name).await.unwrap();
        assert_eq!(
            annotation(&node, EXECUTOR_ID_ANNOTATION),
            Some(OLD),
            "{name}"
        );
        assert_eq!(annotation(&node, KAMIKAZE_ANNOTATION), None, "{name}");
    }

    // An executor that comes back with its old ID: node-0003, told as the controller tells it, ends
    // as a real agent leaves it: kamikaze gone, record and kamikaze-obeyed kept, the old ID.
    patch_node(
        &client,
        &n3,
        json!({ "metadata": { "annotations": {
            KAMIKAZE_ANNOTATION: "2025-01-01T00:00:03Z",
            KAMIKAZE_EXECUTOR_ID_ANNOTATION: OLD,
        } } }),
    )
    .await;
    wait_until(
        "node-0003 came back with its old ID",
        WAIT,
        EVERY,
        &[&agent],
        || async {
            let node = nodes.get(&n3).await.ok()?;
            annotation(&node, KAMIKAZE_ANNOTATION)
                .is_none()
                .then_some(())
        },
    )
    .await;
    let back = nodes.get(&n3).await.unwrap();
    assert_eq!(annotation(&back, EXECUTOR_ID_ANNOTATION), Some(OLD));
    assert_eq!(
        annotation(&back, KAMIKAZE_EXECUTOR_ID_ANNOTATION),
        Some(OLD)
    );
    assert_eq!(
        annotation(&back, KAMIKAZE_OBEYED_ANNOTATION),
        Some("2025-01-01T00:00:03Z")
    );

    // DeleteNode mechanism: node-0002, marked, tainted and cordoned as the marker and controller
    // leave it, is deleted and comes back as an upgraded node that KWOK makes Ready.
    patch_node(
        &client,
        &n2,
        json!({
            "metadata": {
                "labels": { INCOMPATIBLE_EXECUTOR_LABEL: INCOMPATIBLE_EXECUTOR_LABEL_VALUE },
                "annotations": { INCOMPATIBLE_EXECUTOR_ANNOTATION: "2025-01-01T00:00:00Z" },
            },
            "spec": {
                "unschedulable": true,
                "taints": [{ "key": INCOMPATIBLE_EXECUTOR_TAINT_KEY, "effect": INCOMPATIBLE_EXECUTOR_TAINT_EFFECT }],
            },
        }),
    )
    .await;
    let old_uid = nodes.get(&n2).await.unwrap().metadata.uid;
    nodes
        .delete(&n2, &DeleteParams::default())
        .await
        .expect("node-0002 deleted");
    wait_until(
        "node-0002 re-created, Ready, with the new ID",
        WAIT,
        EVERY,
        &[&agent],
        || async {
            let node = nodes.get_opt(&n2).await.ok()??;
            (node.metadata.uid != old_uid
                && is_node_ready(&node)
                && annotation(&node, EXECUTOR_ID_ANNOTATION) == Some(NEW))
            .then_some(())
        },
    )
    .await;
    let recreated = nodes.get(&n2).await.unwrap();
    assert_eq!(
        annotation(&recreated, KWOK_NODE_ANNOTATION),
        Some("fake"),
        "KWOK's annotation kept"
    );
    assert_eq!(label(&recreated, "type"), Some("kwok"), "labels kept");
    assert_eq!(
        label(&recreated, INCOMPATIBLE_EXECUTOR_LABEL),
        None,
        "mark label gone"
    );
    assert_eq!(
        annotation(&recreated, INCOMPATIBLE_EXECUTOR_ANNOTATION),
        None,
        "mark annotation gone"
    );
    let spec = recreated.spec.clone().unwrap_or_default();
    assert_ne!(spec.unschedulable, Some(true), "schedulable again");
    assert!(
        !spec
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == INCOMPATIBLE_EXECUTOR_TAINT_KEY),
        "k8sm's taint gone"
    );
    let capacity = recreated
        .status
        .and_then(|s| s.capacity)
        .unwrap_or_default();
    assert!(capacity.contains_key("pods"), "capacity kept: {capacity:?}");

    // Http mechanism: the controller's POST (its token bound to the node, its body) restarts
    // node-0000, which k8sm drained, and records its kamikaze as obeyed; an unknown node, a
    // POST without the token (whatever its body), one before the node was drained, and a
    // malformed body once authenticated are refused.
    let told = r#"{"kamikaze": "2025-01-01T00:00:04Z"}"#;
    let token = controller_token(&cluster, &n0).await;
    let token = Some(token.as_str());
    let n0_path = format!("/kamikaze/{n0}");
    assert_eq!(
        request(addr, "POST", "/kamikaze/node-9999", token, told)
            .await
            .unwrap(),
        404
    );
    assert_eq!(
        request(addr, "POST", &n0_path, None, told).await.unwrap(),
        401
    );
    assert_eq!(
        request(addr, "POST", &n0_path, None, "{").await.unwrap(),
        401,
        "the body is read only after authentication"
    );
    assert_eq!(
        request(addr, "POST", &n0_path, token, told).await.unwrap(),
        409,
        "node-0000 is not drained yet"
    );
    drain_as_controller(&client, &n0).await;
    assert_eq!(
        request(addr, "POST", &n0_path, token, "{}").await.unwrap(),
        400,
        "authenticated, with a malformed body"
    );
    assert_eq!(
        request(addr, "POST", &n0_path, token, told).await.unwrap(),
        202
    );
    wait_reported(&agent, &nodes, &n0, NEW, "node-0000 restarted over HTTP").await;
    let restarted = nodes.get(&n0).await.unwrap();
    assert_eq!(
        annotation(&restarted, KAMIKAZE_OBEYED_ANNOTATION),
        Some("2025-01-01T00:00:04Z")
    );

    // The token is spent: replayed, with another kamikaze, it is refused while node-0000 still
    // shows it drained.
    let replay = r#"{"kamikaze": "2025-01-01T00:00:05Z"}"#;
    assert_eq!(
        request(addr, "POST", &n0_path, token, replay)
            .await
            .unwrap(),
        401,
        "a replayed token"
    );
    assert!(
        log_of(&agent).contains("this token was already obeyed"),
        "{}",
        log_of(&agent)
    );

    // A flood of forged requests costs a bounded number of TokenReviews: past the burst, the agent
    // answers 429 (or 503 while its few reviews run) without asking the apiserver.
    let flood = (0..40).map(|_| request(addr, "POST", &n0_path, Some("forged"), told));
    let codes: Vec<u16> = futures::future::join_all(flood)
        .await
        .into_iter()
        .map(|code| code.expect("an answer"))
        .collect();
    let limited = codes.iter().filter(|c| [429, 503].contains(*c)).count();
    assert!(
        limited >= 20 && codes.iter().all(|c| [401, 429, 503].contains(c)),
        "{codes:?}"
    );

    // Every restart was logged, node-0003's once, and SIGTERM stops the agent cleanly.
    let log = log_of(&agent);
    println!("k8sm-agent log:\n{log}");
    let restarts = |name: &str| {
        log.lines()
            .filter(|l| l.contains("restarted executor") && l.contains(name))
            .count()
    };
    for name in [&n1, &n0, &n3] {
        assert_eq!(restarts(name), 1, "restarts of {name} logged:\n{log}");
    }
    assert!(
        log.lines()
            .any(|l| l.contains(n3.as_str()) && l.contains("came back with its old ID")),
        "node-0003's comeback not logged:\n{log}"
    );
    assert!(
        log.contains("re-created deleted node"),
        "re-creation not logged:\n{log}"
    );
    let status = terminate(&agent);
    assert!(
        status.success(),
        "k8sm-agent exited with {status} on SIGTERM:\n{}",
        log_of(&agent)
    );
}

/// The harness's `k8sm-agent run` agents of one node, authenticated as the cluster's admin,
/// numbered in the order they start.
struct NodeAgents {
    agents: RunAgents,
    /// The agents' obeyed-tokens file, shared by the agents of the node as the DaemonSet's
    /// hostPath is.
    obeyed_tokens: String,
    started: usize,
}

impl NodeAgents {
    fn new(cluster: &TestCluster, node: &str) -> Self {
        Self {
            agents: RunAgents::new(cluster, cluster.kubeconfig(), node),
            obeyed_tokens: cluster.dir().join("obeyed-tokens").display().to_string(),
            started: 0,
        }
    }

    /// Starts an agent of executor `id`, serving HTTP on a port the system picks when the agent
    /// binds: a port found free beforehand could be taken, before the agent bound it, by the
    /// connections of the clusters of the tests running beside it, and the agent would rightly
    /// refuse to start (docs/decisions/0009-end-to-end-fault-tests.md).
    async fn start(&mut self, id: &str) -> (ChildGuard, SocketAddr) {
        self.started += 1;
        let extra = [
            "--http-addr=127.0.0.1:0".to_owned(),
            format!("--obeyed-tokens-file={}", self.obeyed_tokens),
        ];
        let log = format!("k8sm-agent-run-{}.log", self.started);
        let agent = self.agents.start(id, &extra, &AGENT_ENV, &log);
        let addr = http_addr(&agent).await;
        (agent, addr)
    }

    /// The executor IDs of the agents that ran their restart command, in order.
    fn runs(&self) -> Vec<String> {
        self.agents.runs()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_publishes_its_id_and_runs_the_restart_command_once_per_kamikaze() {
    let cluster = TestCluster::start(ClusterOptions::default().with_nodes(1))
        .await
        .expect("cluster starts");
    let client = cluster.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let node = node_name(0);
    let mut agents = NodeAgents::new(&cluster, &node);

    // The old agent publishes its ID, and publishes it again when someone removes it.
    let (old, _) = agents.start(OLD).await;
    wait_reported(&old, &nodes, &node, OLD, "the node reports the old ID").await;
    patch_node(
        &client,
        &node,
        json!({ "metadata": { "annotations": { EXECUTOR_ID_ANNOTATION: null } } }),
    )
    .await;
    wait_reported(&old, &nodes, &node, OLD, "the old ID is published again").await;

    // A kamikaze set by hand (no recorded executor): the agent records itself and the kamikaze as
    // obeyed, runs the command and exits 0.
    patch_node(
        &client,
        &node,
        json!({ "metadata": { "annotations": { KAMIKAZE_ANNOTATION: "2025-01-01T00:00:00Z" } } }),
    )
    .await;
    let status = wait_exit(&old, "exit after the kamikaze");
    assert!(status.success(), "exit status {status}:\n{}", log_of(&old));
    assert_eq!(agents.runs(), [OLD], "{}", log_of(&old));
    let told = nodes.get(&node).await.unwrap();
    assert_eq!(
        annotation(&told, KAMIKAZE_EXECUTOR_ID_ANNOTATION),
        Some(OLD)
    );
    assert_eq!(
        annotation(&told, KAMIKAZE_OBEYED_ANNOTATION),
        Some("2025-01-01T00:00:00Z")
    );

    // The service manager starts the new version: it publishes the new ID and does not obey the
    // kamikaze that its predecessor obeyed (the decision is made on the same state that makes
    // it publish).
    let (new, new_addr) = agents.start(NEW).await;
    wait_reported(&new, &nodes, &node, NEW, "the node reports the new ID").await;
    new.assert_running();
    assert_eq!(
        agents.runs(),
        [OLD],
        "the new agent obeyed a stale kamikaze:\n{}",
        log_of(&new)
    );

    // Http mechanism: only its own node, a well-formed body and the controller's token, on a node
    // k8sm drained; a POST without a body (by hand, with the token) is obeyed at once and
    // records its time as obeyed.
    wait_for_http(&new, new_addr).await;
    let token = controller_token(&cluster, &node).await;
    let token = Some(token.as_str());
    let path = format!("/kamikaze/{node}");
    assert_eq!(
        request(new_addr, "POST", "/kamikaze/node-9999", token, "")
            .await
            .unwrap(),
        404
    );
    assert_eq!(
        request(new_addr, "POST", &path, None, "").await.unwrap(),
        401
    );
    assert_eq!(
        request(new_addr, "POST", &path, token, "").await.unwrap(),
        409,
        "not drained"
    );
    new.assert_running();
    drain_as_controller(&client, &node).await;
    assert_eq!(
        request(
            new_addr,
            "POST",
            &path,
            token,
            r#"{"kamikaze": "yesterday"}"#
        )
        .await
        .unwrap(),
        400
    );
    assert_eq!(
        request(new_addr, "POST", &path, token, "").await.unwrap(),
        202
    );
    let status = wait_exit(&new, "exit after the HTTP kamikaze");
    assert!(status.success(), "exit status {status}:\n{}", log_of(&new));
    assert_eq!(agents.runs(), [OLD, NEW], "{}", log_of(&new));
    let obeyed = nodes.get(&node).await.unwrap();
    let obeyed = annotation(&obeyed, KAMIKAZE_OBEYED_ANNOTATION).unwrap_or_default();
    assert!(
        obeyed != "2025-01-01T00:00:00Z" && chrono::DateTime::parse_from_rfc3339(obeyed).is_ok(),
        "the time of the POST recorded as obeyed: {obeyed:?}"
    );

    // The token is spent, also for the agent started next: replayed with another kamikaze while the
    // node still shows it drained, it is refused and the command does not run again.
    let (next, next_addr) = agents.start(NEW).await;
    wait_for_http(&next, next_addr).await;
    assert_eq!(
        request(
            next_addr,
            "POST",
            &path,
            token,
            r#"{"kamikaze": "2025-01-01T00:00:09Z"}"#
        )
        .await
        .unwrap(),
        401,
        "a replayed token:\n{}",
        log_of(&next)
    );
    next.assert_running();
    assert_eq!(agents.runs(), [OLD, NEW], "{}", log_of(&next));
    let status = terminate(&next);
    assert!(status.success(), "exit status {status}:\n{}", log_of(&next));
}

/// Waits until the agent that came back with `id` acknowledged the kamikaze it obeyed before, and
/// checks the node is left as the controller expects: kamikaze gone, record and kamikaze-obeyed
/// kept, the same ID.
async fn wait_acknowledged(
    agent: &ChildGuard,
    nodes: &Api<Node>,
    node: &str,
    id: &str,
    kamikaze: &str,
) {
    wait_until(
        "the returned agent removed the kamikaze",
        WAIT,
        EVERY,
        &[agent],
        || async {
            let current = nodes.get(node).await.ok()?;
            annotation(&current, KAMIKAZE_ANNOTATION)
                .is_none()
                .then_some(())
        },
    )
    .await;
    let left = nodes.get(node).await.unwrap();
    assert_eq!(annotation(&left, EXECUTOR_ID_ANNOTATION), Some(id));
    assert_eq!(annotation(&left, KAMIKAZE_EXECUTOR_ID_ANNOTATION), Some(id));
    assert_eq!(
        annotation(&left, KAMIKAZE_OBEYED_ANNOTATION),
        Some(kamikaze)
    );
    agent.assert_running();
    assert!(
        log_of(agent).contains("came back with the old executor ID after obeying this kamikaze"),
        "no warning about the comeback:\n{}",
        log_of(agent)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_obeys_a_kamikaze_once_and_an_agent_back_with_the_same_id_acknowledges_it() {
    let cluster = TestCluster::start(ClusterOptions::default().with_nodes(1))
        .await
        .expect("cluster starts");
    let client = cluster.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let node = node_name(0);
    let mut agents = NodeAgents::new(&cluster, &node);

    // Annotation mechanism, as the controller sends it: the kamikaze with the record of the
    // executor told.
    let (first, _) = agents.start(OLD).await;
    wait_reported(&first, &nodes, &node, OLD, "the node reports the old ID").await;
    patch_node(
        &client,
        &node,
        json!({ "metadata": { "annotations": {
            KAMIKAZE_ANNOTATION: "2025-01-01T00:00:01Z",
            KAMIKAZE_EXECUTOR_ID_ANNOTATION: OLD,
        } } }),
    )
    .await;
    let status = wait_exit(&first, "exit after the kamikaze");
    assert!(
        status.success(),
        "exit status {status}:\n{}",
        log_of(&first)
    );
    assert_eq!(agents.runs(), [OLD]);

    // The executor comes back with its old ID (the new package was missing): its agent finds the
    // kamikaze it obeyed, acknowledges it and does not restart again.
    let (second, second_addr) = agents.start(OLD).await;
    wait_acknowledged(&second, &nodes, &node, OLD, "2025-01-01T00:00:01Z").await;
    assert_eq!(
        agents.runs(),
        [OLD],
        "the command ran again:\n{}",
        log_of(&second)
    );

    // Http mechanism, as the controller sends it: a POST with the kamikaze's value, then the
    // annotation of that value with the record. A new kamikaze after an obeyed one is obeyed,
    // once.
    wait_for_http(&second, second_addr).await;
    let at = "2025-01-01T00:00:02Z";
    let token = controller_token(&cluster, &node).await;
    drain_as_controller(&client, &node).await;
    assert_eq!(
        request(
            second_addr,
            "POST",
            &format!("/kamikaze/{node}"),
            Some(&token),
            &format!(r#"{{"kamikaze": "{at}"}}"#)
        )
        .await
        .unwrap(),
        202
    );
    patch_node(
        &client,
        &node,
        json!({ "metadata": { "annotations": {
            KAMIKAZE_ANNOTATION: at,
            KAMIKAZE_EXECUTOR_ID_ANNOTATION: OLD,
        } } }),
    )
    .await;
    let status = wait_exit(&second, "exit after the HTTP kamikaze");
    assert!(
        status.success(),
        "exit status {status}:\n{}",
        log_of(&second)
    );
    assert_eq!(agents.runs(), [OLD, OLD], "{}", log_of(&second));

    // Back with its old ID once more: the annotation that followed the POST is acknowledged, never
    // obeyed.
    let (third, _) = agents.start(OLD).await;
    wait_acknowledged(&third, &nodes, &node, OLD, at).await;
    assert_eq!(
        agents.runs(),
        [OLD, OLD],
        "the command ran again:\n{}",
        log_of(&third)
    );
    let status = terminate(&third);
    assert!(
        status.success(),
        "exit status {status}:\n{}",
        log_of(&third)
    );
}

/// A fake `/proc` holding one process, PID 4242, named kubelet: it executes the real kubelet binary
/// built from the pinned Kubernetes module, with `args`, and sees `root` as its root and working
/// directory — what `/proc` shows of a kubelet running on a node.
fn fake_proc(
    dir: &std::path::Path,
    kubelet: &std::path::Path,
    args: &[&str],
    root: &std::path::Path,
) -> PathBuf {
    let proc = dir.join("proc");
    let process = proc.join("4242");
    let _ = std::fs::remove_dir_all(&proc);
    std::fs::create_dir_all(&process).unwrap();
    std::fs::write(process.join("comm"), "kubelet\n").unwrap();
    let mut cmdline = b"/usr/bin/kubelet\0".to_vec();
    for arg in args {
        cmdline.extend_from_slice(arg.as_bytes());
        cmdline.push(0);
    }
    std::fs::write(process.join("cmdline"), cmdline).unwrap();
    std::os::unix::fs::symlink(kubelet, process.join("exe")).unwrap();
    std::os::unix::fs::symlink(root, process.join("root")).unwrap();
    std::os::unix::fs::symlink(root, process.join("cwd")).unwrap();
    proc
}

/// `k8sm-agent run --kubelet` publishes the executor ID of a real kubelet build (the pinned
/// Kubernetes module's, hashed and asked for its version; it does not need to run) with its flags,
/// configuration file and static pods, as `/proc` shows them; `kubectl k8sm executor-id
/// --kubelet-binary …` gives the same ID from the same files. Reordering flags or the
/// configuration's keys changes nothing, nor do the flags that name the node itself; a
/// changed flag, configuration value or static pod gives a new ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_computes_the_executor_id_of_the_running_kubelet() {
    let kubelet =
        k8sm_testcluster::Binaries::kubelet().expect("a kubelet built from the pinned module");
    let version = Command::new(&kubelet)
        .arg("--version")
        .output()
        .expect("kubelet --version");
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let pinned = k8sm_testcluster::Binaries::ensure()
        .expect("binaries")
        .kubernetes_version;
    assert_eq!(version, format!("Kubernetes {pinned}"), "the pinned build");
    let cluster = TestCluster::start(ClusterOptions::default().with_nodes(1))
        .await
        .expect("cluster starts");
    let nodes: Api<Node> = Api::all(cluster.client());
    let node = node_name(0);
    let kubeconfig = cluster.kubeconfig().display().to_string();
    let dir = cluster.dir().join("kubelet-id");
    let root = dir.join("root");
    let config = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n\
                  staticPodPath: /etc/kubernetes/manifests\nevictionHard: {memory.available: 100Mi, nodefs.available: 10%}\n";
    std::fs::create_dir_all(root.join("etc/kubernetes/manifests")).unwrap();
    std::fs::create_dir_all(root.join("var/lib/kubelet")).unwrap();
    let write_config =
        |text: &str| std::fs::write(root.join("var/lib/kubelet/config.yaml"), text).unwrap();
    let write_pod =
        |text: &str| std::fs::write(root.join("etc/kubernetes/manifests/etcd.yaml"), text).unwrap();
    write_config(config);
    write_pod("apiVersion: v1\nkind: Pod\nmetadata: {name: etcd, namespace: kube-system}\n");
    std::fs::write(root.join("etc/kubernetes/manifests/.swap"), "ignored").unwrap();
    let flags = [
        "--config=/var/lib/kubelet/config.yaml",
        "--v=2",
        "--hostname-override=node-a",
        "--node-ip",
        "10.0.0.7",
    ];

    let mut started = 0;
    let mut published = |args: Vec<&str>| {
        started += 1;
        let proc = fake_proc(&dir, &kubelet, &args, &root);
        let log = cluster
            .dir()
            .join(format!("k8sm-agent-kubelet-{started}.log"));
        let proc_arg = proc.display().to_string();
        let agent = spawn_agent(
            &[
                "run",
                "--kubeconfig",
                &kubeconfig,
                "--node",
                &node,
                "--kubelet",
                "--proc",
                &proc_arg,
                "--on-kamikaze",
                "true",
            ],
            log,
        );
        let nodes = nodes.clone();
        let node = node.clone();
        async move {
            // The ID it computed (logged), once the node shows it.
            let shown = "the node shows the kubelet's ID";
            let logged = wait_until(shown, WAIT, EVERY, &[&agent], || async {
                let logged = agent_log_id(&agent)?;
                let id = executor_id_of(&nodes, &node).await;
                (id.as_deref() == Some(logged.as_str())).then_some(logged)
            })
            .await;
            terminate(&agent);
            logged
        }
    };
    let base = published(flags.to_vec()).await;
    // The same files, from an operator's workstation.
    let cmdline = dir.join("cmdline.txt");
    std::fs::write(&cmdline, format!("/usr/bin/kubelet {}", flags.join(" "))).unwrap();
    let plugin = Command::new(binary("kubectl-k8sm"))
        .args(["executor-id", "--kubelet-binary"])
        .arg(&kubelet)
        .arg("--kubelet-cmdline")
        .arg(&cmdline)
        .arg("--kubelet-config")
        .arg(root.join("var/lib/kubelet/config.yaml"))
        .arg("--static-pods")
        .arg(root.join("etc/kubernetes/manifests"))
        .output()
        .expect("kubectl-k8sm runs");
    assert!(
        plugin.status.success(),
        "{}",
        String::from_utf8_lossy(&plugin.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&plugin.stdout).trim(),
        base,
        "the plugin agrees with the agent"
    );

    // Reordered flags, another node's own flags, the configuration's keys reordered: the same
    // executor.
    write_config(
        "kind: KubeletConfiguration\nevictionHard:\n  nodefs.available: 10%\n  memory.available: 100Mi\n\
         staticPodPath: /etc/kubernetes/manifests\nmaxPods: 110\napiVersion: kubelet.config.k8s.io/v1beta1\n",
    );
    let same = published(vec![
        "--node-ip=10.0.0.8",
        "--v",
        "2",
        "--hostname-override",
        "node-b",
        "--config",
        "/var/lib/kubelet/config.yaml",
    ])
    .await;
    assert_eq!(same, base, "reordering and per-node flags change nothing");
    // A changed flag, configuration value or static pod: another executor.
    let flag = published(vec!["--config=/var/lib/kubelet/config.yaml", "--v=4"]).await;
    write_config(&config.replace("110", "250"));
    let value = published(flags.to_vec()).await;
    write_config(config);
    write_pod(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: etcd, namespace: kube-system}\nspec: {hostNetwork: true}\n",
    );
    let pod = published(flags.to_vec()).await;
    let ids: std::collections::BTreeSet<&String> =
        [&base, &flag, &value, &pod].into_iter().collect();
    assert_eq!(
        ids.len(),
        4,
        "each change gives a new ID: {base} {flag} {value} {pod}"
    );
}

/// The executor ID the agent logged it computed.
fn agent_log_id(agent: &ChildGuard) -> Option<String> {
    let log = log_of(agent);
    let line = log
        .lines()
        .find(|l| l.contains("computed the executor ID of the running kubelet"))?;
    let start = line.find("sha256:")?;
    Some(
        line[start..]
            .split_whitespace()
            .next()?
            .trim_matches('"')
            .to_owned(),
    )
}
