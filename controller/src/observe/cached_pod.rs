//! The pod watch's own pod type: a pod's identity and the planner's [`PodView`] of it, converted
//! once per watch event; the pod cache (`pod_store`) keeps the view, shared by every pass after
//! that, so no pass copies a pod. Pods are most of the controller's memory at fleet size, and a
//! [`Pod`](k8s_openapi::api::core::v1::Pod) holds every field inline however few are set
//! (docs/decisions/0006-controller-memory.md): only the fields the conversion reads are parsed, and
//! the metadata is cut down to the identity the watch resumes from.

use std::sync::Arc;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::Deserialize;

use k8s_openapi::api::core::v1::NodeSelector;
use k8sm_planner::{POD_ANNOTATIONS_READ, PodPins, PodView, Resources};
use k8sm_view::{ContainerRequests, ResourceList};

/// A pod as the controller caches it. Read and written like a Pod by kube (same API path, kind and
/// version); never sent to the apiserver.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "Wire")]
pub struct CachedPod {
    /// Name, namespace, UID and resourceVersion only: what the watch resumes from and the pod
    /// cache keeps.
    pub metadata: ObjectMeta,
    /// Everything the planner reads of the pod.
    pub view: Arc<PodView>,
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

impl k8sm_view::PodSource for CachedPod {
    fn pod_view(&self) -> Arc<PodView> {
        Arc::clone(&self.view)
    }
}

/// The parts of a Pod object that are read; serde skips the rest.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: WireMeta,
    #[serde(default)]
    spec: Option<WireSpec>,
    #[serde(default)]
    status: Option<WireStatus>,
}

/// The metadata the conversion and the cache read. Not a whole [`ObjectMeta`]: its `managedFields`
/// are a tree of JSON values per field manager, parsed into hundreds of small allocations on every
/// watch event of every pod only to be dropped; skipped here, they cost a scan.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    generate_name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    owner_references: Option<Vec<OwnerReference>>,
    #[serde(default)]
    creation_timestamp: Option<Time>,
    #[serde(default)]
    deletion_timestamp: Option<Time>,
    #[serde(default)]
    finalizers: Option<Vec<String>>,
}

impl From<WireMeta> for ObjectMeta {
    fn from(wire: WireMeta) -> Self {
        Self {
            name: wire.name,
            generate_name: wire.generate_name,
            namespace: wire.namespace,
            uid: wire.uid,
            resource_version: wire.resource_version,
            labels: wire.labels,
            annotations: wire.annotations,
            owner_references: wire.owner_references,
            creation_timestamp: wire.creation_timestamp,
            deletion_timestamp: wire.deletion_timestamp,
            finalizers: wire.finalizers,
            ..Self::default()
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    #[serde(default)]
    node_name: Option<String>,
    #[serde(default)]
    node_selector: Option<BTreeMap<String, String>>,
    #[serde(default)]
    affinity: Option<WireAffinity>,
    #[serde(default)]
    volumes: Option<Vec<WireVolume>>,
    #[serde(default)]
    containers: Vec<WireContainer>,
    #[serde(default)]
    init_containers: Vec<WireContainer>,
    /// Pod-level `resources`.
    #[serde(default)]
    resources: Option<WireResources>,
    #[serde(default)]
    overhead: Option<ResourceList>,
}

/// Of a container, what it asks the scheduler for.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireContainer {
    #[serde(default)]
    resources: Option<WireResources>,
    #[serde(default)]
    restart_policy: Option<String>,
}

#[derive(Deserialize)]
struct WireResources {
    #[serde(default)]
    requests: Option<ResourceList>,
}

impl WireResources {
    fn requests(resources: Option<&Self>) -> Option<&ResourceList> {
        resources?.requests.as_ref()
    }
}

/// Of `spec.affinity`, the required node affinity only (what may pin the pod to a node).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireAffinity {
    #[serde(default)]
    node_affinity: Option<WireNodeAffinity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireNodeAffinity {
    #[serde(default)]
    required_during_scheduling_ignored_during_execution: Option<NodeSelector>,
}

/// Of a volume, its name and the claim it uses, if any (a claim's volume may pin the pod to a
/// node).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireVolume {
    name: String,
    #[serde(default)]
    persistent_volume_claim: Option<WireClaim>,
    /// A generic ephemeral volume: its claim is `<pod>-<volume>` (its template is not read).
    #[serde(default)]
    ephemeral: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireClaim {
    claim_name: String,
}

#[derive(Deserialize)]
struct WireStatus {
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    conditions: Option<Vec<WireCondition>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    #[serde(default)]
    last_transition_time: Option<Time>,
}

impl WireSpec {
    /// What of the spec may pin the pod to one node (`pod`: its name, which names its ephemeral
    /// volumes' claims).
    fn pins(&self, pod: &str) -> Option<Box<PodPins>> {
        let required = self
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        let claims = self
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| {
                let claim = v.persistent_volume_claim.as_ref();
                k8sm_view::volume_claim(
                    pod,
                    &v.name,
                    claim.map(|c| c.claim_name.as_str()),
                    v.ephemeral.is_some(),
                )
            })
            .collect();
        k8sm_view::pod_pins(self.node_selector.as_ref(), required, claims)
    }

    fn requests(&self) -> Resources {
        k8sm_view::pod_requests(
            self.containers
                .iter()
                .map(|c| WireResources::requests(c.resources.as_ref())),
            self.init_containers.iter().map(|c| ContainerRequests {
                requests: WireResources::requests(c.resources.as_ref()),
                sidecar: c.restart_policy.as_deref() == Some("Always"),
            }),
            WireResources::requests(self.resources.as_ref()),
            self.overhead.as_ref(),
        )
    }
}

/// What the conversion reads, as parsed.
struct Parsed {
    metadata: ObjectMeta,
    node_name: Option<String>,
    phase: Option<String>,
    ready: bool,
    ready_changed: Option<DateTime<Utc>>,
    pins: Option<Box<PodPins>>,
    requests: Resources,
}

impl k8sm_view::PodFields for Parsed {
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

    fn ready_changed(&self) -> Option<DateTime<Utc>> {
        self.ready_changed
    }

    fn pins(&self) -> Option<Box<PodPins>> {
        self.pins.clone()
    }

    fn requests(&self) -> Resources {
        self.requests
    }
}

impl From<Wire> for CachedPod {
    fn from(wire: Wire) -> Self {
        let (phase, conditions) = wire
            .status
            .map_or((None, None), |s| (s.phase, s.conditions));
        let ready_condition = conditions
            .into_iter()
            .flatten()
            .find(|c| c.type_ == "Ready");
        let metadata: ObjectMeta = wire.metadata.into();
        let (node_name, pins, requests) =
            wire.spec
                .map_or((None, None, Resources::default()), |spec| {
                    let pins = spec.pins(metadata.name.as_deref().unwrap_or_default());
                    let requests = spec.requests();
                    (spec.node_name, pins, requests)
                });
        let mut parsed = Parsed {
            metadata,
            node_name,
            pins,
            requests,
            phase,
            ready: ready_condition.as_ref().is_some_and(|c| c.status == "True"),
            ready_changed: ready_condition
                .and_then(|c| c.last_transition_time)
                .map(|t| k8sm_view::time::from_time(&t)),
        };
        // The view keeps only the annotations the planner reads (a sidecar's status blob is not one
        // of them).
        if let Some(annotations) = parsed.metadata.annotations.as_mut() {
            annotations.retain(|key, _| POD_ANNOTATIONS_READ.contains(&key.as_str()));
        }
        let view = Arc::new(k8sm_view::pod_view(&parsed));
        let meta = parsed.metadata;
        Self {
            metadata: ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                uid: meta.uid,
                resource_version: meta.resource_version,
                ..ObjectMeta::default()
            },
            view,
        }
    }
}

#[cfg(test)]
mod tests {
    //! A cached pod converts to the same view as the whole Pod, and keeps nothing else the planner
    //! does not read.

    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn object<K: DeserializeOwned>(value: Value) -> K {
        serde_json::from_value(value).expect("a valid object")
    }

    fn pod_json() -> Value {
        json!({
            "metadata": {
                "name": "web-1", "generateName": "web-", "namespace": "shop", "uid": "u1",
                "resourceVersion": "42", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1,
                "labels": {"app": "web"},
                "annotations": {
                    "karpenter.sh/do-not-disrupt": "true",
                    "sidecar.istio.io/status": "{\"a large\": \"blob\"}",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}"
                },
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "keep-alive", "uid": "cm1"},
                                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs1",
                                     "controller": true, "blockOwnerDeletion": true}],
                "finalizers": ["example.com/hold"],
                "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                                   "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                                                "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}}}}}}]
            },
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]},
            "status": {
                "phase": "Running",
                "podIP": "10.0.0.1",
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:02Z"}
                ]
            }
        })
    }

    #[test]
    fn a_cached_pod_keeps_everything_the_planner_reads() {
        let original: Pod = object(pod_json());
        assert!(
            original.metadata.managed_fields.is_some(),
            "the fixture has managed fields"
        );
        let cached: CachedPod = object(pod_json());
        let (before, after) = (k8sm_view::pod_view(&original), &*cached.view);
        assert_eq!(after.ready, before.ready);
        assert!(after.ready);
        assert_eq!(after.phase, before.phase);
        assert_eq!(after.node_name, before.node_name);
        assert_eq!(after.node_name.as_deref(), Some("n1"));
        assert_eq!(after.controller, before.controller);
        assert_eq!(after.labels, before.labels);
        assert_eq!(after.created, before.created);
        assert_eq!(
            after.annotations.keys().collect::<Vec<_>>(),
            ["karpenter.sh/do-not-disrupt"],
            "only the annotations the planner reads"
        );
        // Of the metadata, only what kube's cache keys on and what the controller itself compares
        // (its backoff keys a pod by UID and resourceVersion): the rest is in the view or
        // never read.
        let expected = ObjectMeta {
            name: original.metadata.name.clone(),
            namespace: original.metadata.namespace.clone(),
            uid: original.metadata.uid.clone(),
            resource_version: original.metadata.resource_version.clone(),
            ..ObjectMeta::default()
        };
        assert_eq!(cached.metadata, expected);
    }

    #[test]
    fn a_cached_pod_reads_what_a_pod_reads_whatever_is_missing_or_not_ready() {
        let cases = [
            json!({"metadata": {"name": "new", "namespace": "shop"}}),
            json!({"metadata": {"name": "pending", "namespace": "shop"}, "spec": {"containers": []},
               "status": {"phase": "Pending"}}),
            json!({"metadata": {"name": "not-ready", "namespace": "shop", "deletionTimestamp": "2026-01-01T00:00:05Z"},
               "spec": {"nodeName": "n2"},
               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"},
                                                             {"type": "ContainersReady", "status": "True"}]}}),
            json!({"metadata": {"name": "done", "namespace": "shop"}, "spec": {"nodeName": "n2"},
               "status": {"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "True"}]}}),
        ];
        for case in cases {
            let pod: Pod = object(case.clone());
            let cached: CachedPod = object(case.clone());
            assert_eq!(*cached.view, k8sm_view::pod_view(&pod), "{case}");
        }
    }

    /// A pod's requests are read from the slimmer copy as from the whole Pod: containers, init
    /// containers and sidecars, pod-level requests and overhead.
    #[test]
    fn a_cached_pod_reads_what_the_scheduler_reserves_for_it() {
        let cases = [
            json!({"metadata": {"name": "plain", "namespace": "shop"},
               "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                                       {"name": "b", "resources": {"limits": {"cpu": "1"}}}]}}),
            json!({"metadata": {"name": "meshed", "namespace": "shop"},
               "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
                        "initContainers": [{"name": "proxy", "restartPolicy": "Always",
                                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
                                           {"name": "migrate", "resources": {"requests": {"cpu": "3"}}}],
                        "overhead": {"cpu": "10m"},
                        "resources": {"requests": {"memory": "2Gi"}}}}),
        ];
        for case in cases {
            let pod: Pod = object(case.clone());
            let cached: CachedPod = object(case.clone());
            assert_eq!(cached.view.requests, k8sm_view::requests_of(&pod), "{case}");
            assert!(cached.view.requests.cpu_millis > 0, "{case}");
        }
    }

    /// What may pin a pod to its node is read from the slimmer copy exactly as from the whole Pod:
    /// a hostname node selector, the required node affinity (not the preferred one), and the
    /// claims of its volumes.
    #[test]
    fn a_cached_pod_reads_what_may_pin_it() {
        let mut value = pod_json();
        value["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "host-1", "disk": "ssd"});
        value["spec"]["affinity"] = json!({
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["host-1"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                ]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["host-2"]}]}}]
            },
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]}
        });
        value["spec"]["volumes"] = json!([
            {"name": "config", "configMap": {"name": "web"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}
        ]);
        let original: Pod = object(value.clone());
        let cached: CachedPod = object(value);
        let pins = cached.view.pins.as_deref().expect("pins");
        assert_eq!(
            cached.view.pins,
            k8sm_view::pod_view(&original).pins,
            "as read from the Pod"
        );
        assert_eq!(pins.hostname.as_deref(), Some("host-1"));
        let affinity = pins
            .affinity
            .as_ref()
            .expect("a required affinity naming nodes");
        assert_eq!(affinity.terms.len(), 2);
        assert_eq!(pins.claims, ["data-web-1", "web-1-scratch"]);
        // A pod with none of it has none.
        let plain: CachedPod = object(pod_json());
        assert_eq!(plain.view.pins, None);
    }
}
