//! `--log-format json`: every line the agent logs is one JSON object, with the message and its
//! fields at the top level, as the controller's. No cluster: the agent starts, logs and retries
//! against an apiserver that is not there.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The first lines the agent logs with `args` before `run` (up to one failed watch).
fn first_lines(args: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    // Port 1 on loopback: refused at once.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n\
         current-context: c\n",
    )
    .unwrap();
    let mut agent = Command::new(env!("CARGO_BIN_EXE_k8sm-agent"))
        .args(args)
        .args(["run", "--node", "node-1"])
        .args(["--executor-id", &format!("sha256:{}", "0".repeat(64))])
        .args(["--on-kamikaze", "true", "--kubeconfig"])
        .arg(&kubeconfig)
        .env("RUST_LOG", "info")
        .env_remove("K8SM_LOG_FORMAT")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("k8sm-agent starts");
    let stderr = agent.stderr.take().unwrap();
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(30)) {
        let done = line.contains("watching the Node");
        seen.push(line);
        if done {
            break;
        }
    }
    let _ = agent.kill();
    let _ = agent.wait();
    seen
}

#[test]
fn json_lines_are_objects_with_the_message_and_fields() {
    let lines = first_lines(&["--log-format", "json"]);
    assert!(
        lines.iter().any(|l| l.contains("watching the Node")),
        "the agent logged its failed watch: {lines:#?}"
    );
    for line in &lines {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(
            object["level"].is_string() && object["timestamp"].is_string(),
            "{line}"
        );
    }
    let started = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|o| o["message"] == "agent started")
        .unwrap_or_else(|| panic!("no start line: {lines:#?}"));
    assert_eq!(started["node"], "node-1");
}

#[test]
fn text_is_the_default() {
    let lines = first_lines(&[]);
    let started = lines
        .iter()
        .find(|l| l.contains("agent started"))
        .unwrap_or_else(|| panic!("no start line: {lines:#?}"));
    assert!(serde_json::from_str::<serde_json::Value>(started).is_err());
    assert!(started.contains("node=node-1"), "{started}");
}
