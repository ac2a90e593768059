//! KWOK's side of the cluster: its Stage configuration (pod-ready delays, optionally termination
//! grace periods) and the fake Nodes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::Error;

/// The annotation KWOK is told to manage nodes by (`--manage-nodes-with-annotation-selector`).
pub const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// A pod annotation (set in a pod template) that overrides the cluster's pod-ready delay for that
/// pod: a Go duration such as `7300ms`. Benchmarks give each owner its own readiness delay, as real
/// applications start at their own pace.
pub const READY_DELAY_ANNOTATION: &str = "k8sm.test/ready-delay";

/// A Job pod's annotation: how long it runs before KWOK completes it (a Go duration such as `100h`;
/// without it, at once).
pub const COMPLETE_DELAY_ANNOTATION: &str = "k8sm.test/complete-delay";

/// What KWOK's pod Stages simulate beyond KWOK's fast defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PodStages {
    /// How long after scheduling a pod becomes Ready, unless its [`READY_DELAY_ANNOTATION`] says
    /// otherwise.
    pub ready_delay: Duration,
    /// A deleted pod goes away when its grace period ends, as a kubelet's would once its
    /// containers stop, instead of at once.
    pub honour_grace_periods: bool,
}

/// Name of the `index`-th simulated node: `node-0000`, `node-0001`, …
pub fn node_name(index: usize) -> String {
    format!("node-{index:04}")
}

/// Writes KWOK's `--config`: the pinned KWOK's own node and pod Stages, with `stages.ready_delay`
/// (or the pod's [`READY_DELAY_ANNOTATION`]) before a scheduled pod becomes Ready (benchmarks need
/// replacements to take time, as real ones do) and, with `stages.honour_grace_periods`, deleted
/// pods kept until their grace period ends.
pub fn write_stage_config(stages_dir: &Path, stages: PodStages, out: &Path) -> Result<(), Error> {
    let mut entries: Vec<_> = std::fs::read_dir(stages_dir)
        .map_err(|source| Error::Io {
            context: format!("listing {}", stages_dir.display()),
            source,
        })?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .collect();
    entries.sort();

    let mut documents = Vec::new();
    for path in entries {
        let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
            context: format!("reading {}", path.display()),
            source,
        })?;
        let mut stage: serde_yaml::Value = serde_yaml::from_str(&text)
            .map_err(|e| Error::Setup(format!("parsing KWOK stage {}: {e}", path.display())))?;
        match stage["metadata"]["name"].as_str() {
            Some("pod-ready") => {
                stage["spec"]["delay"] = delay_yaml(&ready_delay(stages.ready_delay))?;
            }
            Some("pod-complete") => {
                stage["spec"]["delay"] = delay_yaml(&complete_delay())?;
            }
            Some("pod-delete") if stages.honour_grace_periods => {
                stage["spec"]["delay"] = delay_yaml(&grace_period_delay())?;
            }
            _ => {}
        }
        documents.push(
            serde_yaml::to_string(&stage)
                .map_err(|e| Error::Setup(format!("serialising a KWOK stage: {e}")))?,
        );
    }
    std::fs::write(out, documents.join("---\n")).map_err(|source| Error::Io {
        context: format!("writing {}", out.display()),
        source,
    })
}

fn delay_yaml(delay: &serde_json::Value) -> Result<serde_yaml::Value, Error> {
    serde_yaml::to_value(delay)
        .map_err(|e| Error::Setup(format!("building a KWOK stage delay: {e}")))
}

/// KWOK's `StageDelay` for the pod-ready stage: the pod's annotation when it has one (KWOK parses a
/// string with Go's `time.ParseDuration`; a missing annotation is `null`, which falls back to the
/// milliseconds).
fn ready_delay(default: Duration) -> serde_json::Value {
    serde_json::json!({
        "durationMilliseconds": u64::try_from(default.as_millis()).unwrap_or(u64::MAX),
        "durationFrom": {
            "expressionFrom": format!(".metadata.annotations[\"{READY_DELAY_ANNOTATION}\"]"),
        },
    })
}

/// KWOK's `StageDelay` for the pod-complete stage (Job pods): the pod's
/// [`COMPLETE_DELAY_ANNOTATION`], else none.
fn complete_delay() -> serde_json::Value {
    serde_json::json!({
        "durationMilliseconds": 0,
        "durationFrom": {
            "expressionFrom": format!(".metadata.annotations[\"{COMPLETE_DELAY_ANNOTATION}\"]"),
        },
    })
}

/// KWOK's `StageDelay` for the pod-delete stage: the pod's `deletionGracePeriodSeconds` (as CEL
/// nanoseconds), counted from when KWOK sees the deletion, as a kubelet counts it. Not the
/// `deletionTimestamp`: the API keeps whole seconds, so the time left until it would cut up to a
/// second off the grace period.
fn grace_period_delay() -> serde_json::Value {
    serde_json::json!({
        "durationMilliseconds": 0,
        "durationFrom": { "cel": { "expression":
            "has(self.metadata.deletionGracePeriodSeconds) ? self.metadata.deletionGracePeriodSeconds * 1000000000 : 0"
        } },
    })
}

/// Allocatable CPU and memory of every KWOK node (Kubernetes quantities, e.g. `64` and `256Gi`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeResources {
    pub cpu: String,
    pub memory: String,
}

impl Default for NodeResources {
    /// Far more than any test's pods request: only the pod count limits scheduling.
    fn default() -> Self {
        Self {
            cpu: "64".into(),
            memory: "256Gi".into(),
        }
    }
}

/// A Node that KWOK will manage, with room for `max_pods` pods and `resources`.
pub fn fake_node(
    name: &str,
    labels: &BTreeMap<String, String>,
    max_pods: u32,
    resources: &NodeResources,
) -> Node {
    let mut all_labels = BTreeMap::from([
        ("kubernetes.io/hostname".to_owned(), name.to_owned()),
        ("kubernetes.io/os".to_owned(), "linux".to_owned()),
        ("kubernetes.io/arch".to_owned(), "amd64".to_owned()),
        ("type".to_owned(), "kwok".to_owned()),
    ]);
    all_labels.extend(labels.clone());
    let resources = BTreeMap::from([
        ("cpu".to_owned(), Quantity(resources.cpu.clone())),
        ("memory".to_owned(), Quantity(resources.memory.clone())),
        ("pods".to_owned(), Quantity(max_pods.to_string())),
    ]);
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(all_labels),
            annotations: Some(BTreeMap::from([
                (KWOK_NODE_ANNOTATION.to_owned(), "fake".to_owned()),
                ("node.alpha.kubernetes.io/ttl".to_owned(), "0".to_owned()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(resources.clone()),
            capacity: Some(resources),
            ..NodeStatus::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const READY: &str = "kind: Stage\nmetadata:\n  name: pod-ready\nspec:\n  next: {}\n";
    const DELETE: &str =
        "kind: Stage\nmetadata:\n  name: pod-delete\nspec:\n  next:\n    delete: true\n";

    fn stages(stages: PodStages) -> Vec<serde_yaml::Value> {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("stages");
        std::fs::create_dir(&source).unwrap();
        std::fs::write(source.join("pod-ready.yaml"), READY).unwrap();
        std::fs::write(source.join("pod-delete.yaml"), DELETE).unwrap();
        let out = dir.path().join("config.yaml");
        write_stage_config(&source, stages, &out).unwrap();
        let text = std::fs::read_to_string(out).unwrap();
        text.split("---\n")
            .map(|doc| serde_yaml::from_str(doc).unwrap())
            .collect()
    }

    #[test]
    fn a_pods_annotation_overrides_the_ready_delay_and_grace_periods_delay_deletion_on_request() {
        let docs = stages(PodStages {
            ready_delay: Duration::from_millis(1500),
            honour_grace_periods: true,
        });
        // Sorted by file name: pod-delete first.
        let delete = &docs[0]["spec"]["delay"];
        assert!(
            delete["durationFrom"]["cel"]["expression"]
                .as_str()
                .is_some_and(
                    |e| e.contains("self.metadata.deletionGracePeriodSeconds * 1000000000")
                ),
            "{delete:?}"
        );
        let ready = &docs[1]["spec"]["delay"];
        assert_eq!(ready["durationMilliseconds"].as_u64(), Some(1500));
        assert_eq!(
            ready["durationFrom"]["expressionFrom"].as_str(),
            Some(".metadata.annotations[\"k8sm.test/ready-delay\"]")
        );
        // Without grace periods, KWOK's own pod-delete stage is kept as it is.
        let docs = stages(PodStages::default());
        assert!(docs[0]["spec"]["delay"].is_null());
        assert_eq!(docs[0]["spec"]["next"]["delete"].as_bool(), Some(true));
    }
}
