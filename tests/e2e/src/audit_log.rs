//! The kube-apiserver's audit log, for tests that must know when a request reached the apiserver:
//! each named user's requests are logged once, when their response is complete, with the time the
//! apiserver received them.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde_json::Value;

/// One request as the apiserver audited it.
#[derive(Debug, Clone)]
pub struct Audited {
    pub user: String,
    pub verb: String,
    /// With its subresource: `pods/eviction`.
    pub resource: String,
    pub name: String,
    pub received: DateTime<Utc>,
    pub completed: DateTime<Utc>,
    pub code: u16,
}

impl Audited {
    /// Whether the request asked for a change (it may have been refused).
    pub fn writes(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }

    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.code)
    }
}

/// Writes an audit policy for `users` into `dir`; the kube-apiserver flags of a file-backed log
/// there, and its path.
pub fn apiserver_args(dir: &Path, users: &[&str]) -> (Vec<String>, PathBuf) {
    std::fs::create_dir_all(dir).expect("the audit directory");
    let policy = dir.join("audit-policy.yaml");
    let quoted: Vec<String> = users.iter().map(|u| format!("\"{u}\"")).collect();
    std::fs::write(
        &policy,
        format!(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\", \"ResponseStarted\"]\n\
             rules:\n- level: Metadata\n  users: [{}]\n- level: None\n",
            quoted.join(", ")
        ),
    )
    .expect("the audit policy");
    let log = dir.join("audit.log");
    let args = vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log.display()),
        "--audit-log-format=json".into(),
        // Written before the response is sent: a client that has its answer finds the request in
        // the file.
        "--audit-log-mode=blocking".into(),
        "--audit-log-maxsize=100000".into(),
    ];
    (args, log)
}

/// Every request in the log at `path`, in the order they completed.
pub fn read(path: &Path) -> Vec<Audited> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|event| {
            let time = |key: &str| -> Option<DateTime<Utc>> {
                DateTime::parse_from_rfc3339(event.get(key)?.as_str()?)
                    .ok()
                    .map(|t| t.with_timezone(&Utc))
            };
            let text = |pointer: &str| -> String {
                event
                    .pointer(pointer)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let subresource = text("/objectRef/subresource");
            let mut resource = text("/objectRef/resource");
            if !subresource.is_empty() {
                resource = format!("{resource}/{subresource}");
            }
            Some(Audited {
                user: text("/user/username"),
                verb: text("/verb"),
                resource,
                name: text("/objectRef/name"),
                received: time("requestReceivedTimestamp")?,
                completed: time("stageTimestamp")?,
                code: event
                    .pointer("/responseStatus/code")
                    .and_then(Value::as_u64)
                    .and_then(|c| u16::try_from(c).ok())
                    .unwrap_or(0),
            })
        })
        .collect()
}
