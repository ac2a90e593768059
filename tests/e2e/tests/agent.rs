//! `k8sm-agent`, the real binary, against the real local cluster: `simulate` publishes executor IDs and restarts KWOK
//! nodes on each kamikaze mechanism (annotation, DeleteNode, HTTP with the controller's token) as a controller would
//! see it, also with an executor that comes back with its old ID; `run` publishes its executor's ID and runs its
//! restart command once per kamikaze, and an agent that comes back with the same ID acknowledges the kamikaze instead
//! of obeying it again.

use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8sm_api::keys::{
    DRAINING_ANNOTATION, EXECUTOR_ID_ANNOTATION, INCOMPATIBLE_EXECUTOR_ANNOTATION,
    INCOMPATIBLE_EXECUTOR_LABEL, INCOMPATIBLE_EXECUTOR_LABEL_VALUE,
    INCOMPATIBLE_EXECUTOR_TAINT_EFFECT, INCOMPATIBLE_EXECUTOR_TAINT_KEY, KAMIKAZE_ANNOTATION,
    KAMIKAZE_EXECUTOR_ID_ANNOTATION, KAMIKAZE_OBEYED_ANNOTATION,
};
use k8sm_e2e::tokens::{apply_controller_account, controller_kamikaze_token};
use k8sm_testcluster::{ClusterOptions, TestCluster, node_name};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const OLD: &str = "sha256:e2e-old-executor";
const NEW: &str = "sha256:e2e-new-executor";
/// KWOK manages the nodes that carry this annotation (see crates/testcluster), so a re-created node must keep it.
const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";
const WAIT: Duration = Duration::from_secs(90);

/// A running `k8sm-agent`, killed on drop (also when the test panics).
struct Agent {
    child: Child,
    log: PathBuf,
}

impl Agent {
    fn spawn(args: &[&str], log: PathBuf) -> Self {
        let log_file = std::fs::File::create(&log).expect("agent log file");
        let child = Command::new(k8sm_e2e::binaries::binary("k8sm-agent"))
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("agent log file"))
            .stderr(log_file)
            .spawn()
            .expect("k8sm-agent starts");
        Self { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Panics with the agent's log if it has exited.
    fn check_running(&mut self) {
        if let Some(status) = self.child.try_wait().expect("agent status") {
            panic!("k8sm-agent exited ({status}):\n{}", self.log());
        }
    }

    /// Sends SIGTERM and waits for the agent to exit.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -TERM {pid} failed");
        self.wait_exit("exit on SIGTERM")
    }

    /// The loopback address its HTTP endpoint bound, read from its log (it binds before anything else).
    fn http_addr(&mut self) -> SocketAddr {
        let deadline = Instant::now() + WAIT;
        loop {
            let log = self.log();
            // The port follows the address in the line, whether or not the log is coloured.
            let bound = log
                .lines()
                .filter(|line| line.contains("serving POST /kamikaze"))
                .find_map(|line| {
                    let (_, rest) = line.split_once("127.0.0.1:")?;
                    let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    format!("127.0.0.1:{port}").parse().ok()
                });
            if let Some(addr) = bound {
                return addr;
            }
            self.check_running();
            assert!(
                Instant::now() < deadline,
                "k8sm-agent did not serve HTTP:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the agent to exit by itself.
    fn wait_exit(&mut self, what: &str) -> std::process::ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("agent status") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "k8sm-agent did not {what}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Already exited after `terminate`: both calls are harmless then.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Sends one HTTP/1.1 request without a body or token and returns the status code.
async fn http(addr: SocketAddr, method: &str, path: &str) -> std::io::Result<u16> {
    http_with_body(addr, method, path, None, "").await
}

/// Sends one HTTP/1.1 request with `token` as bearer token (if any) and a JSON `body`; returns the status code.
async fn http_with_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> std::io::Result<u16> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let authorization = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{authorization}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line in {response:?}")))
}

/// Polls `check` until it holds, failing with `what` and the agent's log at the deadline or if the agent exits.
async fn wait_until<F, Fut>(agent: &mut Agent, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        agent.check_running();
        if check().await {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting until {what}; k8sm-agent log:\n{}",
            agent.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn executor_id_of(nodes: &Api<Node>, name: &str) -> Option<String> {
    let node = nodes.get_opt(name).await.ok()??;
    annotation(&node, EXECUTOR_ID_ANNOTATION).map(str::to_owned)
}

/// The controller's token for the Http kamikaze of node `name` (its ServiceAccount created first).
async fn controller_token(cluster: &TestCluster, name: &str) -> String {
    apply_controller_account(cluster);
    let client = cluster.client();
    let node = Api::<Node>::all(client.clone())
        .get(name)
        .await
        .expect("node");
    controller_kamikaze_token(&client, &node).await
}

/// Marks node `name` and admits it into a drain slot, as the controller does before it drains a node: only such a
/// node obeys the Http kamikaze.
async fn drain_as_controller(nodes: &Api<Node>, name: &str) {
    merge_patch(
        nodes,
        name,
        json!({ "metadata": { "annotations": {
            INCOMPATIBLE_EXECUTOR_ANNOTATION: "2025-01-01T00:00:00Z",
            DRAINING_ANNOTATION: "2025-01-01T00:00:00Z",
        } } }),
    )
    .await;
}

async fn merge_patch(nodes: &Api<Node>, name: &str, patch: serde_json::Value) {
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching {name}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_publishes_ids_and_restarts_nodes_on_every_kamikaze_mechanism() {
    let cluster = TestCluster::start(ClusterOptions::default().with_nodes(4))
        .await
        .expect("cluster starts");
    let nodes: Api<Node> = Api::all(cluster.client());
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let [n0, n1, n2, n3] = [0, 1, 2, 3].map(node_name);
    // Fault injection: node-0003's new package is missing, so its executor comes back with its old ID.
    let come_back_old = format!("{n3}=old");
    let kubeconfig = cluster
        .kubeconfig()
        .to_str()
        .expect("UTF-8 path")
        .to_owned();
    let mut agent = Agent::spawn(
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
        &mut agent,
        "all nodes report the old executor ID",
        || async {
            let mut all = true;
            for name in [&n0, &n1, &n2, &n3] {
                all &= executor_id_of(&nodes, name).await.as_deref() == Some(OLD);
            }
            all
        },
    )
    .await;
    wait_until(&mut agent, "the HTTP endpoint answers", || async {
        http(addr, "GET", "/healthz").await.ok() == Some(200)
    })
    .await;

    // Annotation mechanism: node-0001 restarts with the new ID, the kamikaze is gone and recorded as obeyed; the
    // others are untouched.
    merge_patch(
        &nodes,
        &n1,
        json!({ "metadata": { "annotations": { KAMIKAZE_ANNOTATION: "2025-01-01T00:00:00Z" } } }),
    )
    .await;
    wait_until(&mut agent, "node-0001 restarted by annotation", || async {
        let Ok(node) = nodes.get(&n1).await else {
            return false;
        };
        annotation(&node, EXECUTOR_ID_ANNOTATION) == Some(NEW)
            && annotation(&node, KAMIKAZE_ANNOTATION).is_none()
    })
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

    // An executor that comes back with its old ID: node-0003, told as the controller tells it, ends as a real agent
    // leaves it: kamikaze gone, record and kamikaze-obeyed kept, the old ID.
    merge_patch(
        &nodes,
        &n3,
        json!({ "metadata": { "annotations": {
            KAMIKAZE_ANNOTATION: "2025-01-01T00:00:03Z",
            KAMIKAZE_EXECUTOR_ID_ANNOTATION: OLD,
        } } }),
    )
    .await;
    wait_until(
        &mut agent,
        "node-0003 came back with its old ID",
        || async {
            let Ok(node) = nodes.get(&n3).await else {
                return false;
            };
            annotation(&node, KAMIKAZE_ANNOTATION).is_none()
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

    // DeleteNode mechanism: node-0002, marked, tainted and cordoned as the marker and controller leave it, is
    // deleted and comes back as an upgraded node that KWOK makes Ready.
    merge_patch(
        &nodes,
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
        &mut agent,
        "node-0002 re-created, Ready, with the new ID",
        || async {
            let Ok(Some(node)) = nodes.get_opt(&n2).await else {
                return false;
            };
            node.metadata.uid != old_uid
                && is_ready(&node)
                && annotation(&node, EXECUTOR_ID_ANNOTATION) == Some(NEW)
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

    // Http mechanism: the controller's POST (its token bound to the node, its body) restarts node-0000, which k8sm
    // drained, and records its kamikaze as obeyed; an unknown node, a POST without the token (whatever its body), one
    // before the node was drained, and a malformed body once authenticated are refused.
    let told = r#"{"kamikaze": "2025-01-01T00:00:04Z"}"#;
    let token = controller_token(&cluster, &n0).await;
    let token = Some(token.as_str());
    let n0_path = format!("/kamikaze/{n0}");
    assert_eq!(
        http_with_body(addr, "POST", "/kamikaze/node-9999", token, told)
            .await
            .unwrap(),
        404
    );
    assert_eq!(
        http_with_body(addr, "POST", &n0_path, None, told)
            .await
            .unwrap(),
        401
    );
    assert_eq!(
        http_with_body(addr, "POST", &n0_path, None, "{")
            .await
            .unwrap(),
        401,
        "the body is read only after authentication"
    );
    assert_eq!(
        http_with_body(addr, "POST", &n0_path, token, told)
            .await
            .unwrap(),
        409,
        "node-0000 is not drained yet"
    );
    drain_as_controller(&nodes, &n0).await;
    assert_eq!(
        http_with_body(addr, "POST", &n0_path, token, "{}")
            .await
            .unwrap(),
        400,
        "authenticated, with a malformed body"
    );
    assert_eq!(
        http_with_body(addr, "POST", &n0_path, token, told)
            .await
            .unwrap(),
        202
    );
    wait_until(&mut agent, "node-0000 restarted over HTTP", || async {
        executor_id_of(&nodes, &n0).await.as_deref() == Some(NEW)
    })
    .await;
    let restarted = nodes.get(&n0).await.unwrap();
    assert_eq!(
        annotation(&restarted, KAMIKAZE_OBEYED_ANNOTATION),
        Some("2025-01-01T00:00:04Z")
    );

    // The token is spent: replayed, with another kamikaze, it is refused while node-0000 still shows it drained.
    let replay = r#"{"kamikaze": "2025-01-01T00:00:05Z"}"#;
    assert_eq!(
        http_with_body(addr, "POST", &n0_path, token, replay)
            .await
            .unwrap(),
        401,
        "a replayed token"
    );
    assert!(
        agent.log().contains("this token was already obeyed"),
        "{}",
        agent.log()
    );

    // A flood of forged requests costs a bounded number of TokenReviews: past the burst, the agent answers 429 (or
    // 503 while its few reviews run) without asking the apiserver.
    let flood = (0..40).map(|_| http_with_body(addr, "POST", &n0_path, Some("forged"), told));
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
    let log = agent.log();
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
    let status = agent.terminate();
    assert!(
        status.success(),
        "k8sm-agent exited with {status} on SIGTERM:\n{}",
        agent.log()
    );
}

/// `k8sm-agent run` agents of one node, each started as a service manager starts the agent of the executor it runs.
/// Every run of an agent's restart command appends the agent's executor ID to one file, so the test counts the runs.
struct RunAgents<'a> {
    cluster: &'a TestCluster,
    kubeconfig: String,
    node: String,
    started: usize,
}

impl<'a> RunAgents<'a> {
    fn new(cluster: &'a TestCluster, node: String) -> Self {
        let kubeconfig = cluster
            .kubeconfig()
            .to_str()
            .expect("UTF-8 path")
            .to_owned();
        Self {
            cluster,
            kubeconfig,
            node,
            started: 0,
        }
    }

    fn runs_file(&self) -> PathBuf {
        self.cluster.dir().join("kamikaze-runs")
    }

    /// Starts an agent of executor `id`, serving HTTP on a port the system picks when the agent binds: a port found
    /// free beforehand could be taken, before the agent bound it, by the connections of the clusters of the tests
    /// running beside it (it was, once, and the agent rightly refused to start).
    fn start(&mut self, id: &str) -> (Agent, SocketAddr) {
        self.started += 1;
        let command = format!("echo {id} >> '{}'", self.runs_file().display());
        // Shared by the agents of the node, as the DaemonSet's hostPath is.
        let obeyed_tokens = self
            .cluster
            .dir()
            .join("obeyed-tokens")
            .display()
            .to_string();
        let mut agent = Agent::spawn(
            &[
                "run",
                "--kubeconfig",
                &self.kubeconfig,
                "--node",
                &self.node,
                "--executor-id",
                id,
                "--on-kamikaze",
                &command,
                "--http-addr",
                "127.0.0.1:0",
                "--obeyed-tokens-file",
                &obeyed_tokens,
            ],
            self.cluster
                .dir()
                .join(format!("k8sm-agent-run-{}.log", self.started)),
        );
        let addr = agent.http_addr();
        (agent, addr)
    }

    /// The executor IDs of the agents that ran their restart command, in order.
    fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(self.runs_file())
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

async fn wait_for_http(agent: &mut Agent, addr: SocketAddr) {
    wait_until(agent, "the HTTP endpoint answers", || async {
        http(addr, "GET", "/healthz").await.ok() == Some(200)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_publishes_its_id_and_runs_the_restart_command_once_per_kamikaze() {
    let cluster = TestCluster::start(ClusterOptions::default().with_nodes(1))
        .await
        .expect("cluster starts");
    let nodes: Api<Node> = Api::all(cluster.client());
    let node = node_name(0);
    let mut agents = RunAgents::new(&cluster, node.clone());

    // The old agent publishes its ID, and publishes it again when someone removes it.
    let (mut old, _) = agents.start(OLD);
    wait_until(&mut old, "the node reports the old ID", || async {
        executor_id_of(&nodes, &node).await.as_deref() == Some(OLD)
    })
    .await;
    merge_patch(
        &nodes,
        &node,
        json!({ "metadata": { "annotations": { EXECUTOR_ID_ANNOTATION: null } } }),
    )
    .await;
    wait_until(&mut old, "the old ID is published again", || async {
        executor_id_of(&nodes, &node).await.as_deref() == Some(OLD)
    })
    .await;

    // A kamikaze set by hand (no recorded executor): the agent records itself and the kamikaze as obeyed, runs the
    // command and exits 0.
    merge_patch(
        &nodes,
        &node,
        json!({ "metadata": { "annotations": { KAMIKAZE_ANNOTATION: "2025-01-01T00:00:00Z" } } }),
    )
    .await;
    let status = old.wait_exit("exit after the kamikaze");
    assert!(status.success(), "exit status {status}:\n{}", old.log());
    assert_eq!(agents.runs(), [OLD], "{}", old.log());
    let told = nodes.get(&node).await.unwrap();
    assert_eq!(
        annotation(&told, KAMIKAZE_EXECUTOR_ID_ANNOTATION),
        Some(OLD)
    );
    assert_eq!(
        annotation(&told, KAMIKAZE_OBEYED_ANNOTATION),
        Some("2025-01-01T00:00:00Z")
    );

    // The service manager starts the new version: it publishes the new ID and does not obey the kamikaze that its
    // predecessor obeyed (the decision is made on the same state that makes it publish).
    let (mut new, new_addr) = agents.start(NEW);
    wait_until(&mut new, "the node reports the new ID", || async {
        executor_id_of(&nodes, &node).await.as_deref() == Some(NEW)
    })
    .await;
    new.check_running();
    assert_eq!(
        agents.runs(),
        [OLD],
        "the new agent obeyed a stale kamikaze:\n{}",
        new.log()
    );

    // Http mechanism: only its own node, a well-formed body and the controller's token, on a node k8sm drained; a
    // POST without a body (by hand, with the token) is obeyed at once and records its time as obeyed.
    wait_for_http(&mut new, new_addr).await;
    let token = controller_token(&cluster, &node).await;
    let token = Some(token.as_str());
    let path = format!("/kamikaze/{node}");
    assert_eq!(
        http_with_body(new_addr, "POST", "/kamikaze/node-9999", token, "")
            .await
            .unwrap(),
        404
    );
    assert_eq!(http(new_addr, "POST", &path).await.unwrap(), 401);
    assert_eq!(
        http_with_body(new_addr, "POST", &path, token, "")
            .await
            .unwrap(),
        409,
        "not drained"
    );
    new.check_running();
    drain_as_controller(&nodes, &node).await;
    assert_eq!(
        http_with_body(
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
        http_with_body(new_addr, "POST", &path, token, "")
            .await
            .unwrap(),
        202
    );
    let status = new.wait_exit("exit after the HTTP kamikaze");
    assert!(status.success(), "exit status {status}:\n{}", new.log());
    assert_eq!(agents.runs(), [OLD, NEW], "{}", new.log());
    let obeyed = nodes.get(&node).await.unwrap();
    let obeyed = annotation(&obeyed, KAMIKAZE_OBEYED_ANNOTATION).unwrap_or_default();
    assert!(
        obeyed != "2025-01-01T00:00:00Z" && chrono::DateTime::parse_from_rfc3339(obeyed).is_ok(),
        "the time of the POST recorded as obeyed: {obeyed:?}"
    );

    // The token is spent, also for the agent started next: replayed with another kamikaze while the node still shows
    // it drained, it is refused and the command does not run again.
    let (mut next, next_addr) = agents.start(NEW);
    wait_for_http(&mut next, next_addr).await;
    assert_eq!(
        http_with_body(
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
        next.log()
    );
    next.check_running();
    assert_eq!(agents.runs(), [OLD, NEW], "{}", next.log());
    let status = next.terminate();
    assert!(status.success(), "exit status {status}:\n{}", next.log());
}

/// Waits until the agent that came back with `id` acknowledged the kamikaze it obeyed before, and checks the node
/// is left as the controller expects: kamikaze gone, record and kamikaze-obeyed kept, the same ID.
async fn wait_acknowledged(
    agent: &mut Agent,
    nodes: &Api<Node>,
    node: &str,
    id: &str,
    kamikaze: &str,
) {
    wait_until(agent, "the returned agent removed the kamikaze", || async {
        let Ok(current) = nodes.get(node).await else {
            return false;
        };
        annotation(&current, KAMIKAZE_ANNOTATION).is_none()
    })
    .await;
    let left = nodes.get(node).await.unwrap();
    assert_eq!(annotation(&left, EXECUTOR_ID_ANNOTATION), Some(id));
    assert_eq!(annotation(&left, KAMIKAZE_EXECUTOR_ID_ANNOTATION), Some(id));
    assert_eq!(
        annotation(&left, KAMIKAZE_OBEYED_ANNOTATION),
        Some(kamikaze)
    );
    agent.check_running();
    assert!(
        agent
            .log()
            .contains("came back with the old executor ID after obeying this kamikaze"),
        "no warning about the comeback:\n{}",
        agent.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_obeys_a_kamikaze_once_and_an_agent_back_with_the_same_id_acknowledges_it() {
    let cluster = TestCluster::start(ClusterOptions::default().with_nodes(1))
        .await
        .expect("cluster starts");
    let nodes: Api<Node> = Api::all(cluster.client());
    let node = node_name(0);
    let mut agents = RunAgents::new(&cluster, node.clone());

    // Annotation mechanism, as the controller sends it: the kamikaze with the record of the executor told.
    let (mut first, _) = agents.start(OLD);
    wait_until(&mut first, "the node reports the old ID", || async {
        executor_id_of(&nodes, &node).await.as_deref() == Some(OLD)
    })
    .await;
    merge_patch(
        &nodes,
        &node,
        json!({ "metadata": { "annotations": {
            KAMIKAZE_ANNOTATION: "2025-01-01T00:00:01Z",
            KAMIKAZE_EXECUTOR_ID_ANNOTATION: OLD,
        } } }),
    )
    .await;
    let status = first.wait_exit("exit after the kamikaze");
    assert!(status.success(), "exit status {status}:\n{}", first.log());
    assert_eq!(agents.runs(), [OLD]);

    // The executor comes back with its old ID (the new package was missing): its agent finds the kamikaze it obeyed,
    // acknowledges it and does not restart again.
    let (mut second, second_addr) = agents.start(OLD);
    wait_acknowledged(&mut second, &nodes, &node, OLD, "2025-01-01T00:00:01Z").await;
    assert_eq!(
        agents.runs(),
        [OLD],
        "the command ran again:\n{}",
        second.log()
    );

    // Http mechanism, as the controller sends it: a POST with the kamikaze's value, then the annotation of that
    // value with the record. A new kamikaze after an obeyed one is obeyed, once.
    wait_for_http(&mut second, second_addr).await;
    let at = "2025-01-01T00:00:02Z";
    let token = controller_token(&cluster, &node).await;
    drain_as_controller(&nodes, &node).await;
    assert_eq!(
        http_with_body(
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
    merge_patch(
        &nodes,
        &node,
        json!({ "metadata": { "annotations": {
            KAMIKAZE_ANNOTATION: at,
            KAMIKAZE_EXECUTOR_ID_ANNOTATION: OLD,
        } } }),
    )
    .await;
    let status = second.wait_exit("exit after the HTTP kamikaze");
    assert!(status.success(), "exit status {status}:\n{}", second.log());
    assert_eq!(agents.runs(), [OLD, OLD], "{}", second.log());

    // Back with its old ID once more: the annotation that followed the POST is acknowledged, never obeyed.
    let (mut third, _) = agents.start(OLD);
    wait_acknowledged(&mut third, &nodes, &node, OLD, at).await;
    assert_eq!(
        agents.runs(),
        [OLD, OLD],
        "the command ran again:\n{}",
        third.log()
    );
    let status = third.terminate();
    assert!(status.success(), "exit status {status}:\n{}", third.log());
}

/// A fake `/proc` holding one process, PID 4242, named kubelet: it executes the real kubelet binary built from the
/// pinned Kubernetes module, with `args`, and sees `root` as its root and working directory — what `/proc` shows of
/// a kubelet running on a node.
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

/// `k8sm-agent run --kubelet` publishes the executor ID of a real kubelet build (the pinned Kubernetes module's,
/// hashed and asked for its version; it does not need to run) with its flags, configuration file and static pods,
/// as `/proc` shows them; `kubectl k8sm executor-id --kubelet-binary …` gives the same ID from the same files.
/// Reordering flags or the configuration's keys changes nothing, nor do the flags that name the node itself; a
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
        let mut agent = Agent::spawn(
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
            let deadline = Instant::now() + WAIT;
            loop {
                agent.check_running();
                if let Some(logged) = agent_log_id(&agent)
                    && executor_id_of(&nodes, &node).await.as_deref() == Some(logged.as_str())
                {
                    agent.terminate();
                    return logged;
                }
                assert!(
                    Instant::now() < deadline,
                    "the node never showed the kubelet's ID:\n{}",
                    agent.log()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let base = published(flags.to_vec()).await;
    // The same files, from an operator's workstation.
    let cmdline = dir.join("cmdline.txt");
    std::fs::write(&cmdline, format!("/usr/bin/kubelet {}", flags.join(" "))).unwrap();
    let plugin = Command::new(k8sm_e2e::binaries::binary("kubectl-k8sm"))
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

    // Reordered flags, another node's own flags, the configuration's keys reordered: the same executor.
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
fn agent_log_id(agent: &Agent) -> Option<String> {
    let log = agent.log();
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
