//! The pod cache's own pod type: a pod's metadata and the three fields of its spec and status that the planner reads
//! (`k8sm_view::PodFields`), deserialized straight from the apiserver's Pod objects.
//!
//! Pods are most of the controller's memory at fleet size, and a [`Pod`](k8s_openapi::api::core::v1::Pod) holds
//! every field of its spec and status inline (2.4 KB on 64-bit) however few are set, so trimming one cannot make it
//! smaller than that. This type is 0.4 KB, and the fields it does not name are skipped while parsing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

/// A pod as the controller caches it. Read and written like a Pod by kube (same API path, kind and version);
/// never sent to the apiserver.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "Wire")]
pub struct CachedPod {
    pub metadata: ObjectMeta,
    /// `spec.nodeName`.
    pub node_name: Option<String>,
    /// `status.phase`.
    pub phase: Option<String>,
    /// `status.conditions` has Ready True.
    pub ready: bool,
}

impl k8s_openapi::Resource for CachedPod {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for CachedPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl k8sm_view::PodFields for CachedPod {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn node_name(&self) -> Option<&str> {
        self.node_name.as_deref()
    }

    fn phase(&self) -> Option<&str> {
        self.phase.as_deref()
    }

    fn ready(&self) -> bool {
        self.ready
    }
}

/// The parts of a Pod object that are read; serde skips the rest.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<WireSpec>,
    #[serde(default)]
    status: Option<WireStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    #[serde(default)]
    node_name: Option<String>,
}

#[derive(Deserialize)]
struct WireStatus {
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    conditions: Option<Vec<WireCondition>>,
}

#[derive(Deserialize)]
struct WireCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

impl From<Wire> for CachedPod {
    fn from(wire: Wire) -> Self {
        let (phase, conditions) = wire
            .status
            .map_or((None, None), |s| (s.phase, s.conditions));
        Self {
            metadata: wire.metadata,
            node_name: wire.spec.and_then(|s| s.node_name),
            phase,
            ready: conditions
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True"),
        }
    }
}
