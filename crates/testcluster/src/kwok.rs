//! KWOK's side of the cluster: its Stage configuration (with a configurable pod-ready delay) and the fake Nodes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::Error;

/// The annotation KWOK is told to manage nodes by (`--manage-nodes-with-annotation-selector`).
pub const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// Name of the `index`-th simulated node: `node-0000`, `node-0001`, …
pub fn node_name(index: usize) -> String {
    format!("node-{index:04}")
}

/// Writes KWOK's `--config`: the pinned KWOK's own node and pod Stages, with `pod_ready_delay` before a scheduled pod
/// becomes Ready (benchmarks need replacements to take time, as real ones do).
pub fn write_stage_config(
    stages_dir: &Path,
    pod_ready_delay: Duration,
    out: &Path,
) -> Result<(), Error> {
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
        let is_pod_ready = stage["metadata"]["name"].as_str() == Some("pod-ready");
        if is_pod_ready && !pod_ready_delay.is_zero() {
            let millis = pod_ready_delay.as_millis() as u64;
            stage["spec"]["delay"] =
                serde_yaml::to_value(BTreeMap::from([("durationMilliseconds", millis)]))
                    .map_err(|e| Error::Setup(format!("building the pod-ready delay: {e}")))?;
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

/// A Node that KWOK will manage, with room for `max_pods` pods.
pub fn fake_node(name: &str, labels: &BTreeMap<String, String>, max_pods: u32) -> Node {
    let mut all_labels = BTreeMap::from([
        ("kubernetes.io/hostname".to_owned(), name.to_owned()),
        ("kubernetes.io/os".to_owned(), "linux".to_owned()),
        ("kubernetes.io/arch".to_owned(), "amd64".to_owned()),
        ("type".to_owned(), "kwok".to_owned()),
    ]);
    all_labels.extend(labels.clone());
    let resources = BTreeMap::from([
        ("cpu".to_owned(), Quantity("64".to_owned())),
        ("memory".to_owned(), Quantity("256Gi".to_owned())),
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
