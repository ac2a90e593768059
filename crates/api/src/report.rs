//! The durable record of one upgrade run (docs/design.md §5.5): Events expire after an hour, so for
//! each run (a target executor ID applied to a policy's nodes) the controller keeps what happened,
//! for `kubectl k8sm upgrade report`. One ConfigMap per run, labelled with the policy
//! ([`REPORT_POLICY_LABEL`]), holds the whole record as gzipped JSON ([`REPORT_DATA_KEY`]), at most
//! [`REPORT_MAX_BYTES`] at any fleet size; why a ConfigMap, and what is dropped past the bound, is
//! in the design.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Label of a report ConfigMap: the policy whose run it records.
pub const REPORT_POLICY_LABEL: &str = "k8s.mesosphere.io/upgrade-report";
/// The `binaryData` key of the gzipped JSON record.
pub const REPORT_DATA_KEY: &str = "report.json.gz";
/// Largest encoded record: well under the apiserver's 1.5 MiB limit on an object (etcd's request
/// size), with room for the ConfigMap's own fields.
pub const REPORT_MAX_BYTES: usize = 1024 * 1024;
/// Runs kept per policy: older reports are deleted when a new run starts.
pub const REPORTS_KEPT: usize = 10;

/// One upgrade run of one policy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeReport {
    pub policy: String,
    /// The target of the run.
    pub target_executor_id: String,
    /// When the controller first saw the policy with this target.
    pub started: DateTime<Utc>,
    /// When every node the run touched ran the target (or was handed back); `None` while it runs,
    /// or when a new target superseded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<DateTime<Utc>>,
    /// The last change recorded.
    pub updated: DateTime<Utc>,
    /// The policy's ownerHealthThreshold when the run started, against which the bounds are
    /// computed.
    pub threshold: u8,
    /// Every node the run upgraded or is upgrading, by name.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeRecord>,
    /// Actions carried out, by Event reason: Evicted, Moved, DeletedUnmanagedPod,
    /// DeletedFinishedPod, KamikazeSent, Stalled, …
    #[serde(default)]
    pub actions: BTreeMap<String, u32>,
    /// Every workload the run disrupted, by [`WorkloadRecord::key`].
    #[serde(default)]
    pub workloads: BTreeMap<String, WorkloadRecord>,
    /// What operators forced (`kubectl k8sm force`), oldest first, at most [`FORCED_KEPT`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forced: Vec<ForcedRecord>,
    /// Workload records dropped to keep the record under [`REPORT_MAX_BYTES`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_workloads: u32,
}

/// One forced action: when, on which node, by whom, and what.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForcedRecord {
    pub at: DateTime<Utc>,
    pub node: String,
    pub user: String,
    pub what: String,
}

impl ForcedRecord {
    /// Reads a [`crate::keys::FORCED_ANNOTATION`] value of `node`: `<RFC 3339 time> <user>:
    /// <what>`.
    pub fn parse(node: &str, value: &str) -> Option<Self> {
        let (at, rest) = value.trim().split_once(' ')?;
        let (user, what) = rest.split_once(": ")?;
        Some(Self {
            at: DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc),
            node: node.to_owned(),
            user: crate::text::bounded(user, 256).into_owned(),
            what: crate::text::bounded(what, 512).into_owned(),
        })
    }

    /// The annotation value of a forced action.
    pub fn annotation(at: DateTime<Utc>, user: &str, what: &str) -> String {
        format!(
            "{} {user}: {what}",
            at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    }
}

/// Forced actions kept per run: the latest.
pub const FORCED_KEPT: usize = 1000;

/// What one node went through.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// Admitted into a drain slot (the last admission, after a stall).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admitted: Option<DateTime<Utc>>,
    /// Drained, and its executor told to restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kamikaze: Option<DateTime<Utc>>,
    /// Back with the target executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgraded: Option<DateTime<Utc>>,
    /// Pods evicted from it, moved off it by surge rollouts, and deleted on it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub evictions: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub moves: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deletions: u32,
    /// Times it gave up its drain slot.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stalls: u32,
}

impl NodeRecord {
    /// From admission to kamikaze.
    pub fn drain_duration(&self) -> Option<Duration> {
        between(self.admitted?, self.kamikaze?)
    }

    /// From kamikaze to its return with the target.
    pub fn restart_duration(&self) -> Option<Duration> {
        between(self.kamikaze?, self.upgraded?)
    }
}

/// What one workload went through: its size and bound, the fewest Ready and available pods the
/// controller observed from its first disruption until it was whole again, and how many of its pods
/// k8sm moved.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRecord {
    /// UID of the workload object (a Deployment for the pods of its ReplicaSets), to observe it
    /// by; for a controller of a kind k8sm does not know, its whole reference
    /// (`namespace/group/kind/name/uid`).
    pub uid: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub desired: u32,
    /// `min(ceil(t·d), d−1)`: what k8sm never takes it below.
    pub bound: u32,
    /// The fewest Ready pods.
    pub min_ready: u32,
    /// The fewest available pods (Ready for the workload's `minReadySeconds`; without them, its
    /// Ready pods): what the bound is kept on. Absent from records written before it was kept,
    /// whose `min_ready` counted these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<u32>,
    /// Pods evicted or moved by k8sm.
    pub disruptions: u32,
    /// Still short of `desired` available pods at the last observation: observed again at the next
    /// pass.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovering: bool,
}

impl WorkloadRecord {
    /// `Kind namespace/name`.
    pub fn key(kind: &str, namespace: &str, name: &str) -> String {
        format!("{kind} {namespace}/{name}")
    }

    /// The fewest available pods, which the bound is kept on.
    pub fn min_counted(&self) -> u32 {
        self.min_available.unwrap_or(self.min_ready)
    }
}

/// A record that cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("the report is not gzipped JSON: {0}")]
    Io(#[from] std::io::Error),
    #[error("the report is not a record of k8sm: {0}")]
    Json(#[from] serde_json::Error),
}

impl UpgradeReport {
    /// A run of `policy` to `target` that starts at `now` (to the second, as the nodes' annotations
    /// record their times, so that no node seems admitted before its run started).
    pub fn new(policy: &str, target: &str, threshold: u8, now: DateTime<Utc>) -> Self {
        use chrono::SubsecRound;
        let now = now.trunc_subsecs(0);
        Self {
            policy: policy.to_owned(),
            target_executor_id: target.to_owned(),
            started: now,
            updated: now,
            threshold,
            ..Self::default()
        }
    }

    /// Gzipped JSON, at most [`REPORT_MAX_BYTES`]: workload records are dropped to fit, those that
    /// never went below their desired count first, then those with the most room above their
    /// bound.
    pub fn encode(&mut self) -> Vec<u8> {
        loop {
            let bytes = gzip(&serde_json::to_vec(self).unwrap_or_default());
            if bytes.len() <= REPORT_MAX_BYTES || self.workloads.is_empty() {
                return bytes;
            }
            // Drop an eighth of what is left (at least one), the least telling first: those that
            // never went below their desired count, then those that kept the most room
            // above their bound.
            let mut keys: Vec<(bool, std::cmp::Reverse<u32>, String)> = self
                .workloads
                .iter()
                .map(|(k, w)| {
                    let room = w.min_counted().saturating_sub(w.bound);
                    (
                        w.min_counted() < w.desired,
                        std::cmp::Reverse(room),
                        k.clone(),
                    )
                })
                .collect();
            keys.sort();
            let drop = (keys.len() / 8).max(1);
            for (_, _, key) in keys.into_iter().take(drop) {
                self.workloads.remove(&key);
                self.dropped_workloads += 1;
            }
        }
    }

    /// Reads a record written by [`Self::encode`].
    pub fn decode(bytes: &[u8]) -> Result<Self, ReportError> {
        let mut json = Vec::new();
        flate2::read::GzDecoder::new(bytes).read_to_end(&mut json)?;
        Ok(serde_json::from_slice(&json)?)
    }

    /// The ConfigMap name of the run: policy name and a digest of the target (names are at most 253
    /// characters).
    pub fn object_name(policy: &str, target: &str) -> String {
        use sha2::Digest;
        let digest = hex::encode(sha2::Sha256::digest(target.as_bytes()));
        let policy: String = policy.chars().take(200).collect();
        format!("k8sm-report-{policy}-{}", &digest[..12])
    }

    /// Nodes upgraded, of those the run touched.
    pub fn nodes_upgraded(&self) -> usize {
        self.nodes.values().filter(|n| n.upgraded.is_some()).count()
    }

    /// Actions of `reason` carried out.
    pub fn count(&self, reason: &str) -> u32 {
        self.actions.get(reason).copied().unwrap_or(0)
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}

fn between(from: DateTime<Utc>, to: DateTime<Utc>) -> Option<Duration> {
    (to - from).to_std().ok()
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap()
    }

    /// A pseudo-random suffix, so that names compress no better than generated names in a real
    /// cluster do.
    fn suffix(i: u64) -> String {
        let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5851_F42D_4C95_7F2D;
        x ^= x >> 29;
        format!("{:010x}", x & 0xff_ffff_ffff)
    }

    /// A finished run over `nodes` nodes and `workloads` disrupted workloads, every field filled.
    fn big(nodes: u64, workloads: u64) -> UpgradeReport {
        let mut report =
            UpgradeReport::new("fleet", &format!("sha256:{}", "a".repeat(64)), 90, at(0));
        for i in 0..nodes {
            let start = i64::try_from(i).unwrap() * 7;
            report.nodes.insert(
                format!(
                    "ip-10-{}-{}.eu-west-1.compute.internal-{}",
                    i / 250,
                    i % 250,
                    suffix(i)
                ),
                NodeRecord {
                    admitted: Some(at(start)),
                    kamikaze: Some(at(start + 95)),
                    upgraded: Some(at(start + 140)),
                    evictions: 28,
                    moves: 1,
                    deletions: 2,
                    stalls: u32::from(i % 50 == 0),
                },
            );
        }
        for i in 0..workloads {
            let (namespace, name) = (
                format!("team-{}", i % 300),
                format!("svc-{}", suffix(i + nodes)),
            );
            let desired = 1 + u32::try_from(i % 40).unwrap();
            report.workloads.insert(
                WorkloadRecord::key("Deployment", &namespace, &name),
                WorkloadRecord {
                    uid: suffix(i + 7),
                    kind: "Deployment".into(),
                    namespace,
                    name,
                    desired,
                    bound: desired / 2,
                    min_ready: desired - 1,
                    min_available: Some(desired - 1),
                    disruptions: desired,
                    recovering: false,
                },
            );
        }
        report.actions.insert("Evicted".into(), 280_000);
        report.finished = Some(at(80_000));
        report.updated = at(80_000);
        report
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let mut report = big(3, 4);
        let bytes = report.encode();
        assert_eq!(UpgradeReport::decode(&bytes).unwrap(), report);
        assert!(UpgradeReport::decode(b"not gzip").is_err());
    }

    /// The fleet the record is sized for: 10,000 nodes and 20,000 workloads fit whole, with room
    /// to spare.
    #[test]
    fn ten_thousand_nodes_and_twenty_thousand_workloads_fit_in_one_object() {
        let mut report = big(10_000, 20_000);
        let bytes = report.encode();
        println!(
            "10,000 nodes, 20,000 workloads: {} bytes gzipped ({} JSON)",
            bytes.len(),
            serde_json::to_vec(&report).unwrap().len()
        );
        assert!(bytes.len() <= REPORT_MAX_BYTES, "{}", bytes.len());
        assert_eq!(report.dropped_workloads, 0, "nothing dropped at the bound");
        assert_eq!(
            UpgradeReport::decode(&bytes).unwrap().workloads.len(),
            20_000
        );
    }

    /// Far past the bound, workloads are dropped until it fits, those that never lost a Ready pod
    /// first, and the record says how many went.
    #[test]
    fn past_the_bound_the_least_telling_workloads_go_first_and_are_counted() {
        let mut report = big(10_000, 120_000);
        // One workload that went below its desired count and to its bound: kept.
        let telling = report.workloads.keys().next().unwrap().clone();
        let w = report.workloads.get_mut(&telling).unwrap();
        (w.desired, w.bound, w.min_ready, w.min_available) = (10, 9, 9, Some(9));
        for w in report.workloads.values_mut().skip(1).step_by(2) {
            (w.min_ready, w.min_available) = (w.desired, Some(w.desired));
        }
        let before = report.workloads.len();
        let bytes = report.encode();
        assert!(bytes.len() <= REPORT_MAX_BYTES);
        let dropped = usize::try_from(report.dropped_workloads).unwrap();
        assert!(dropped > 0);
        assert_eq!(report.workloads.len() + dropped, before);
        assert!(report.workloads.contains_key(&telling));
        let whole_left = report
            .workloads
            .values()
            .filter(|w| w.min_counted() >= w.desired)
            .count();
        assert!(
            whole_left < 60_000,
            "the whole ones went first: {whole_left} left"
        );
    }

    #[test]
    fn durations_run_from_admission_to_kamikaze_and_on_to_the_return() {
        let node = NodeRecord {
            admitted: Some(at(10)),
            kamikaze: Some(at(70)),
            upgraded: Some(at(100)),
            ..NodeRecord::default()
        };
        assert_eq!(node.drain_duration(), Some(Duration::from_secs(60)));
        assert_eq!(node.restart_duration(), Some(Duration::from_secs(30)));
        assert_eq!(NodeRecord::default().drain_duration(), None);
    }

    #[test]
    fn a_forced_action_reads_back_from_its_annotation_and_bad_ones_are_none() {
        let value = ForcedRecord::annotation(at(5), "kubernetes-admin", "deleted pod shop/x");
        let record = ForcedRecord::parse("n1", &value).expect("readable");
        assert_eq!(
            record,
            ForcedRecord {
                at: at(5),
                node: "n1".into(),
                user: "kubernetes-admin".into(),
                what: "deleted pod shop/x".into()
            }
        );
        for bad in ["", "yesterday admin: x", "2026-01-01T00:00:00Z no colon"] {
            assert_eq!(ForcedRecord::parse("n1", bad), None, "{bad:?}");
        }
    }

    #[test]
    fn object_names_are_short_and_tell_runs_apart() {
        let a = UpgradeReport::object_name("fleet", "sha256:1");
        let b = UpgradeReport::object_name("fleet", "sha256:2");
        assert_ne!(a, b);
        assert!(a.starts_with("k8sm-report-fleet-"));
        assert!(UpgradeReport::object_name(&"p".repeat(253), "x").len() <= 253);
    }
}
