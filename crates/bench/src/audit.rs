//! Requests attributable to the tool under test, counted exactly from the kube-apiserver's audit
//! log. Every other client of the bench cluster (kube-controller-manager, the scheduler, KWOK, the
//! simulated executors, the harness) authenticates as the cluster's admin; k8sm's controller runs
//! as [`CONTROLLER_USER`] and the baselines' operator (`kubectl drain`/`uncordon`, executor
//! restarts) as [`OPERATOR_USER`], each with a certificate of its own, and the audit policy logs
//! one event per request of those two users only, so a request counts for a tool iff it sent it.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::requests::ByVerb;
use crate::stats::percentile;

/// The user k8sm's controller authenticates as in the benchmark.
pub const CONTROLLER_USER: &str = "k8sm-controller";
/// The user the baselines' operator (kubectl and its executor restarts) authenticates as.
pub const OPERATOR_USER: &str = "bench-operator";

/// The users the bench cluster issues certificates for.
pub fn users() -> Vec<String> {
    vec![CONTROLLER_USER.to_owned(), OPERATOR_USER.to_owned()]
}

/// The audit policy: the tools' requests at `Metadata`, once each (when the response is complete; a
/// watch counts once, when it ends), nothing else.
pub fn policy() -> String {
    format!(
        "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [\"RequestReceived\", \"ResponseStarted\"]
rules:
- level: Metadata
  users: [\"{CONTROLLER_USER}\", \"{OPERATOR_USER}\"]
- level: None
"
    )
}

/// Writes the policy into `dir` and returns the kube-apiserver flags of a file-backed audit log
/// there, and the log's path.
pub fn apiserver_args(dir: &Path) -> anyhow::Result<(Vec<String>, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let policy_file = dir.join("audit-policy.yaml");
    std::fs::write(&policy_file, policy())?;
    let log = dir.join("audit.log");
    let args = vec![
        format!("--audit-policy-file={}", policy_file.display()),
        format!("--audit-log-path={}", log.display()),
        "--audit-log-format=json".into(),
        // Written before the response is sent: when a client has its answer, its event is in the
        // file.
        "--audit-log-mode=blocking".into(),
        // No rotation (the default rotates at 100 MB): one file holds every event of the run.
        "--audit-log-maxsize=100000".into(),
    ];
    Ok((args, log))
}

/// What a tool asked of the apiserver in a window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolRequests {
    /// Requests by verb, named as `apiserver_request_total` names them (`GET`, `LIST`, `WATCH`,
    /// `POST`, `PATCH`, …).
    pub by_verb: ByVerb,
    pub total: u64,
    /// Eviction API calls (`create` of `pods/eviction`), and of those the ones refused with 429 (a
    /// budget allowed no disruption: kubectl retries them every 5 s).
    pub evictions: u64,
    pub evictions_refused: u64,
    /// Server-side seconds of an eviction call (received → response complete), p50 and p99.
    pub eviction_server_p50_s: Option<f64>,
    pub eviction_server_p99_s: Option<f64>,
    /// The user agents seen (e.g. `kubectl/v1.36.3 …`), to show who the user was.
    pub user_agents: BTreeSet<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    #[serde(default)]
    stage: String,
    #[serde(default)]
    verb: String,
    user: User,
    #[serde(default)]
    user_agent: String,
    object_ref: Option<ObjectRef>,
    response_status: Option<Status>,
    request_received_timestamp: DateTime<Utc>,
    stage_timestamp: DateTime<Utc>,
}

#[derive(Deserialize)]
struct User {
    #[serde(default)]
    username: String,
}

#[derive(Deserialize)]
struct ObjectRef {
    #[serde(default)]
    subresource: Option<String>,
}

#[derive(Deserialize)]
struct Status {
    #[serde(default)]
    code: Option<u16>,
}

/// The name `apiserver_request_total` gives the audit log's verb.
fn verb_name(verb: &str) -> String {
    match verb {
        "create" => "POST".into(),
        "update" => "PUT".into(),
        other => other.to_ascii_uppercase(),
    }
}

/// Counts the requests of `user` received in `[from, to]`, from the text of an audit log (one JSON
/// event per line). Lines that are not audit events are skipped.
pub fn count(
    log: impl BufRead,
    user: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> ToolRequests {
    let mut out = ToolRequests::default();
    let mut eviction_seconds = Vec::new();
    for line in log.lines().map_while(Result::ok) {
        let Ok(event) = serde_json::from_str::<Event>(&line) else {
            continue;
        };
        // `Panic` ends a request whose handler panicked: it was sent all the same.
        let complete = event.stage == "ResponseComplete" || event.stage == "Panic";
        let received = event.request_received_timestamp;
        if !complete || event.user.username != user || received < from || received > to {
            continue;
        }
        out.total += 1;
        *out.by_verb.entry(verb_name(&event.verb)).or_default() += 1.0;
        out.user_agents.insert(event.user_agent);
        let eviction = event.verb == "create"
            && event
                .object_ref
                .and_then(|o| o.subresource)
                .is_some_and(|s| s == "eviction");
        if eviction {
            out.evictions += 1;
            if event.response_status.and_then(|s| s.code) == Some(429) {
                out.evictions_refused += 1;
            }
            eviction_seconds.push((event.stage_timestamp - received).as_seconds_f64());
        }
    }
    out.eviction_server_p50_s = percentile(&eviction_seconds, 50.0);
    out.eviction_server_p99_s = percentile(&eviction_seconds, 99.0);
    out
}

/// [`count`] over the audit log file at `path`.
pub fn count_file(
    path: &Path,
    user: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> anyhow::Result<ToolRequests> {
    let file = std::fs::File::open(path)
        .map_err(|e| anyhow::anyhow!("opening the audit log {}: {e}", path.display()))?;
    Ok(count(std::io::BufReader::new(file), user, from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events as kube-apiserver v1.36 writes them (trimmed to one line each), hand-counted below.
    const LOG: &str = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"1","stage":"ResponseComplete","requestURI":"/api/v1/nodes?limit=500","verb":"list","user":{"username":"k8sm-controller","groups":["system:masters","system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"k8sm-controller/0.1.0","objectRef":{"resource":"nodes","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:00.900000Z","stageTimestamp":"2026-01-01T00:00:00.910000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"2","stage":"ResponseComplete","requestURI":"/api/v1/nodes?watch=true","verb":"watch","user":{"username":"k8sm-controller"},"userAgent":"k8sm-controller/0.1.0","objectRef":{"resource":"nodes","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:01.000000Z","stageTimestamp":"2026-01-01T00:05:00.000000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"3","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/a/pods/p/eviction","verb":"create","user":{"username":"k8sm-controller"},"userAgent":"k8sm-controller/0.1.0","objectRef":{"resource":"pods","namespace":"a","name":"p","apiVersion":"v1","subresource":"eviction"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-01-01T00:00:02.000000Z","stageTimestamp":"2026-01-01T00:00:02.100000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"4","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/a/pods/q/eviction","verb":"create","user":{"username":"k8sm-controller"},"userAgent":"k8sm-controller/0.1.0","objectRef":{"resource":"pods","namespace":"a","name":"q","apiVersion":"v1","subresource":"eviction"},"responseStatus":{"metadata":{},"status":"Failure","reason":"TooManyRequests","code":429},"requestReceivedTimestamp":"2026-01-01T00:00:03.000000Z","stageTimestamp":"2026-01-01T00:00:03.300000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"5","stage":"ResponseComplete","requestURI":"/api/v1/nodes/n1","verb":"patch","user":{"username":"bench-operator"},"userAgent":"kubectl/v1.36.3 (linux/amd64) kubernetes/abcdef0","objectRef":{"resource":"nodes","name":"n1","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:04.000000Z","stageTimestamp":"2026-01-01T00:00:04.010000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"6","stage":"ResponseComplete","requestURI":"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/k8sm","verb":"update","user":{"username":"k8sm-controller"},"userAgent":"k8sm-controller/0.1.0","objectRef":{"resource":"leases","apiVersion":"coordination.k8s.io/v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:05.000000Z","stageTimestamp":"2026-01-01T00:00:05.010000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"7","stage":"ResponseStarted","requestURI":"/api/v1/pods?watch=true","verb":"watch","user":{"username":"k8sm-controller"},"userAgent":"k8sm-controller/0.1.0","objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:06.000000Z","stageTimestamp":"2026-01-01T00:00:06.000000Z"}
not json
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"8","stage":"Panic","requestURI":"/api/v1/namespaces/a/pods/r","verb":"delete","user":{"username":"k8sm-controller"},"userAgent":"k8sm-controller/0.1.0","objectRef":{"resource":"pods","apiVersion":"v1"},"requestReceivedTimestamp":"2026-01-01T00:00:09.000000Z","stageTimestamp":"2026-01-01T00:00:09.500000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"9","stage":"ResponseComplete","requestURI":"/api/v1/nodes/n2","verb":"get","user":{"username":"k8sm-controller"},"userAgent":"k8sm-controller/0.1.0","objectRef":{"resource":"nodes","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:11.000000Z","stageTimestamp":"2026-01-01T00:00:11.010000Z"}
"#;

    fn at(s: u32) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(&format!("2026-01-01T00:00:{s:02}Z"))
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn the_controllers_requests_in_the_window_are_counted_by_verb() {
        let counted = count(LOG.as_bytes(), CONTROLLER_USER, at(1), at(10));
        // In [1 s, 10 s]: the watch (received at 1 s), 2 evictions, the lease update, the panicked
        // delete. Not: the list before the window, the operator's patch, the
        // ResponseStarted stage, the get after the window.
        assert_eq!(
            counted.by_verb,
            ByVerb::from([
                ("WATCH".into(), 1.0),
                ("POST".into(), 2.0),
                ("PUT".into(), 1.0),
                ("DELETE".into(), 1.0),
            ])
        );
        assert_eq!(counted.total, 5);
        assert_eq!((counted.evictions, counted.evictions_refused), (2, 1));
        // Server-side 100 ms and 300 ms: nearest-rank p50 is the first, p99 the second.
        assert!((counted.eviction_server_p50_s.unwrap() - 0.1).abs() < 1e-9);
        assert!((counted.eviction_server_p99_s.unwrap() - 0.3).abs() < 1e-9);
        assert_eq!(
            counted.user_agents,
            BTreeSet::from(["k8sm-controller/0.1.0".to_owned()])
        );
    }

    #[test]
    fn the_operators_requests_are_its_own() {
        let counted = count(LOG.as_bytes(), OPERATOR_USER, at(0), at(59));
        assert_eq!(counted.by_verb, ByVerb::from([("PATCH".into(), 1.0)]));
        assert_eq!((counted.total, counted.evictions), (1, 0));
        assert_eq!(counted.eviction_server_p50_s, None);
        assert!(
            counted
                .user_agents
                .iter()
                .all(|a| a.starts_with("kubectl/"))
        );
        assert_eq!(count(LOG.as_bytes(), "k8sm-admin", at(0), at(59)).total, 0);
    }

    #[test]
    fn the_policy_logs_only_the_tools_once_per_request() {
        let policy = policy();
        assert!(policy.contains(r#"omitStages: ["RequestReceived", "ResponseStarted"]"#));
        assert!(policy.contains(r#"users: ["k8sm-controller", "bench-operator"]"#));
        assert!(policy.trim_end().ends_with("- level: None"));
    }
}
