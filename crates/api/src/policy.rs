//! The `ExecutorUpgradePolicy` custom resource: what an operator asks k8sm to do (docs/design.md
//! §5.1).
//!
//! The `///` comments on spec fields are operator documentation: they become the CRD's descriptions
//! and so `kubectl explain executorupgradepolicy.spec`. Every default is both an OpenAPI `default`
//! in the CRD (so the apiserver stores it) and a serde default (so a spec read from a file means
//! the same thing). Every constraint is enforced by the apiserver (schema keywords and CEL rules),
//! with a message that names the field.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{DurationString, ExecutorUpgradePolicyStatus, MaintenanceWindow, MaxConcurrentNodes};

/// RE2 pattern of `spec.targetExecutorId`: printable ASCII without whitespace. k8sm's own IDs are
/// `sha256:<64 hex digits>`; IDs of external executors may look different, so anything a Node
/// annotation can carry safely is accepted.
pub const TARGET_EXECUTOR_ID_PATTERN: &str = "^[!-~]+$";

/// Longest accepted `spec.targetExecutorId`.
pub const TARGET_EXECUTOR_ID_MAX_LENGTH: u32 = 256;

/// Longest accepted `spec.kamikaze.urlTemplate`.
pub const URL_TEMPLATE_MAX_LENGTH: u32 = 2048;

/// Placeholder in `spec.kamikaze.urlTemplate` replaced by the Node's name.
pub const URL_PLACEHOLDER_NODE_NAME: &str = "{nodeName}";

/// Placeholder in `spec.kamikaze.urlTemplate` replaced by the Node's InternalIP address.
pub const URL_PLACEHOLDER_NODE_IP: &str = "{nodeIP}";

/// Rolls a new executor through the selected nodes without breaking any application's SLA:
/// incompatible nodes are drained a few at a time, pod by pod, while every replicated workload
/// stays above its health threshold; an empty node is then told to restart its executor in the new
/// version.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
// Several printer columns share `type_ = "string"`, which clippy mistakes for a repeated attribute.
#[allow(clippy::duplicated_attributes)]
#[kube(
    group = "k8s.mesosphere.io",
    version = "v1alpha1",
    kind = "ExecutorUpgradePolicy",
    shortname = "eup",
    category = "k8sm",
    status = "ExecutorUpgradePolicyStatus",
    derive = "PartialEq",
    doc = "ExecutorUpgradePolicy rolls a new node executor through the selected nodes without breaking any \
           application's SLA. See `kubectl explain executorupgradepolicy.spec`.",
    printcolumn(
        name = "Target",
        type_ = "string",
        json_path = ".spec.targetExecutorId",
        description = "Executor ID that selected nodes are upgraded to"
    ),
    printcolumn(
        name = "Upgraded",
        type_ = "string",
        json_path = ".status.upgraded",
        description = "Selected nodes that run the target executor, of all selected nodes"
    ),
    printcolumn(
        name = "Blocked",
        type_ = "integer",
        json_path = ".status.counts.blocked",
        description = "Selected nodes that wait on something only an operator or time resolves (kubectl k8sm blocked)"
    ),
    printcolumn(
        name = "Degraded",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Degraded\")].status",
        description = "Whether the policy cannot be applied as written or an action keeps failing (the Degraded condition)"
    ),
    printcolumn(
        name = "Paused",
        type_ = "boolean",
        json_path = ".spec.paused",
        description = "Whether evictions, deletions and kamikaze are paused"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorUpgradePolicySpec {
    /// Executor ID that the control plane now launches, such as "sha256:<64 hex digits>" (print it
    /// with `kubectl k8sm executor-id`). Every selected node whose executor-id annotation
    /// differs is marked incompatible and upgraded. Leave it unset to upgrade only nodes that
    /// another component marked with the "k8s.mesosphere.io/incompatible-executor" annotation.
    /// Printable characters only, no whitespace, at most 256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = TARGET_EXECUTOR_ID_MAX_LENGTH), regex(pattern = TARGET_EXECUTOR_ID_PATTERN))]
    pub target_executor_id: Option<String>,

    /// Which nodes this policy upgrades, by label. An empty selector (the default) selects all
    /// nodes. Nodes labelled "k8s.mesosphere.io/upgrade-opt-out=true" are never drained,
    /// whatever the selector says. A node selected by two policies is left alone by both, and
    /// reported in both policies' conditions.
    #[serde(default)]
    pub node_selector: LabelSelector,

    /// How many selected nodes may drain at the same time: an integer from 1 to 4294967295 (such
    /// as 3), or a percentage of the selected nodes from "1%" to "100%" (such as "20%"),
    /// rounded up and at least one node. Default: 1. A node that waits on something only an
    /// operator can resolve gives up its slot.
    #[serde(default)]
    pub max_concurrent_nodes: MaxConcurrentNodes,

    /// The SLA guard, in percent from 1 to 100 (default 90): a pod that belongs to a controller
    /// (Deployment, ReplicaSet, StatefulSet, ReplicationController) is evicted only while the
    /// controller keeps at least this percentage of its desired replicas ready after the
    /// eviction, or is fully ready before it (so small controllers move one pod at a time and
    /// never stall). Higher is safer and slower.
    #[serde(default = "default_owner_health_threshold")]
    #[schemars(range(min = 1, max = 100))]
    pub owner_health_threshold: u8,

    /// What to do with unmanaged pods (pods that no controller recreates elsewhere) on a draining
    /// node. Default: never delete them; the node waits until an operator does.
    #[serde(default)]
    pub unmanaged_pods: UnmanagedPods,

    /// Evict pods through the Eviction API so that PodDisruptionBudgets are honoured on top of
    /// ownerHealthThreshold (default true). An eviction refused by a budget is retried and
    /// reported as blocked. Set false only when budgets are known to be stricter than what the
    /// upgrade can ever satisfy.
    #[serde(default = "default_true")]
    pub respect_pod_disruption_budgets: bool,

    /// Cordon a node (mark it unschedulable) when it starts draining, so that evicted pods do not
    /// come back to it (default true). k8sm uncordons only nodes it cordoned itself, once they
    /// run the target executor.
    #[serde(default = "default_true")]
    pub cordon: bool,

    /// How to tell the executor of a drained node to terminate, so that it restarts in the new
    /// version.
    #[serde(default)]
    pub kamikaze: Kamikaze,

    /// How long a node may take, after kamikaze, to come back with the target executor ID before
    /// it is reported with a RestartOverdue event. A duration such as "90s", "10m" or "1h30m"
    /// (units ms, s, m, h). Default: "10m".
    #[serde(default = "default_restart_timeout")]
    pub restart_timeout: DurationString,

    /// How long a draining node may go without any pod leaving it before it gives up its drain
    /// slot (default "10m"), like a Deployment's progressDeadlineSeconds. Such a node waits on
    /// something that does not resolve by itself soon (a workload below its threshold, a
    /// PodDisruptionBudget that allows nothing, a Job): it is reported Blocked with a Stalled
    /// event naming what it waits on, uncordoned if k8sm cordoned it, and admitted again
    /// later, after the nodes that never stalled, so that no single workload or budget holds the
    /// whole fleet: as soon as one of its pods can move, or after it rested as long as this
    /// deadline. A duration such as "90s", "10m" or "1h30m" (units ms, s, m, h).
    #[serde(default = "default_node_progress_deadline")]
    pub node_progress_deadline: DurationString,

    /// A maintenance window: the weekly days and hours, in a time zone, in which nodes may be
    /// admitted and executors told to restart, such as {days: [Saturday, Sunday], start:
    /// "01:00", end: "05:00", timeZone: "Europe/Berlin"}. Outside it no node is admitted and
    /// no kamikaze is sent; nodes already draining finish draining (or, with inFlight "Hold",
    /// wait). The status shows when it opens next. Unset (the default): always open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<MaintenanceWindow>,

    /// How the pods of workloads move off a draining node.
    #[serde(default)]
    pub workloads: Workloads,

    /// Stop all evictions, pod deletions and kamikaze messages (default false). Nodes are still
    /// marked and the status is still updated; set it back to false to resume where the
    /// upgrade stopped.
    #[serde(default)]
    pub paused: bool,
}

/// How far the clocks of two controller replicas may disagree: a timeout counted from a time
/// written by one replica (the node's mark) and judged by another expires this much later than it
/// says (see [`UnmanagedPods::timeout`]).
pub const CLOCK_SKEW_ALLOWANCE: std::time::Duration = std::time::Duration::from_secs(30);

/// What k8sm does with unmanaged pods: pods without a controlling owner, which nothing recreates
/// once deleted.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.policy) || self.policy != 'DeleteAfterTimeout' || has(self.timeout)")
    .message("spec.unmanagedPods.timeout is required when spec.unmanagedPods.policy is DeleteAfterTimeout: set it to a duration such as \"10m\"")
    .field_path(".timeout")
    .reason(Reason::FieldValueRequired))]
pub struct UnmanagedPods {
    /// "Never" (default): never delete an unmanaged pod; the node stays blocked until an operator
    /// deletes the pod (by hand or with `kubectl k8sm force <node>`). "Delete": delete
    /// unmanaged pods as soon as no owned pod on the node waits for an unhealthy controller.
    /// "DeleteAfterTimeout": the same, but only once the node has been incompatible for at
    /// least `timeout`, giving their owners time to move them.
    #[serde(default)]
    pub policy: UnmanagedPodPolicy,

    /// With policy DeleteAfterTimeout (and required there): how long after a node is marked
    /// incompatible its unmanaged pods, and Job pods that have not finished, may be deleted. A
    /// duration such as "90s", "10m" or "1h30m" (units ms, s, m, h). They go 30 s later than
    /// that: the mark's time is written by the controller replica that marked the node and
    /// judged by whichever replica leads later, whose clock may differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<DurationString>,
}

/// Policy for unmanaged pods.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum UnmanagedPodPolicy {
    /// Delete unmanaged pods once no owned pod on the node waits for an unhealthy owner.
    Delete,
    /// Delete unmanaged pods once the node has been incompatible for at least
    /// `unmanagedPods.timeout`.
    DeleteAfterTimeout,
    /// Never delete unmanaged pods; an operator must.
    #[default]
    Never,
}

/// How the pods of workloads move off a draining node.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Workloads {
    /// "Never" (default): every pod of a workload is evicted, within ownerHealthThreshold; a
    /// Deployment with one replica is down until its new pod is Ready. "SingleReplica": the
    /// pod of a Deployment with one replica moves without downtime instead: k8sm restarts the
    /// Deployment's rollout (as `kubectl rollout restart` does), so its new pod starts on
    /// another node and becomes Ready before the old one goes. Only for a Deployment whose
    /// strategy can do that for one replica (RollingUpdate that surges one pod and keeps the
    /// old one until then, such as the default 25%/25%), whose last rollout is complete, on a
    /// cordoned node; otherwise, or when the new pod is not Ready within nodeProgressDeadline,
    /// the pod is evicted as usual, and the Event says why. A Deployment annotated
    /// "k8s.mesosphere.io/surge" with "SingleReplica" or "Never" chooses for itself.
    #[serde(default)]
    pub surge: Surge,

    /// What to do with a pod whose replacement can only run on its own node: a pod whose
    /// nodeSelector "kubernetes.io/hostname", or whose required node affinity, names only its
    /// node, or that uses a PersistentVolume (such as a local volume) whose node affinity only
    /// its node satisfies. "Block" (default): its node is not started (not cordoned, nothing
    /// on it evicted) and is listed as blocked, naming the pod and what pins it, until the pod
    /// is moved or deleted. "Evict": evict it like any other pod, as `kubectl drain` does; its
    /// replacement waits Pending until the node is back and uncordoned, so the workload is down
    /// meanwhile if that was its only Ready pod.
    #[serde(default)]
    pub pinned_pods: PinnedPods,
}

/// What happens to a pod whose replacement can only run on its own node.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PinnedPods {
    /// Keep its node for the operator: not started, listed as blocked.
    #[default]
    Block,
    /// Evict it like any other pod; its replacement waits Pending until the node is back.
    Evict,
}

/// Whether single-replica Deployments move by a surge rollout.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Surge {
    /// Evict, as for any workload.
    #[default]
    Never,
    /// Move by a rollout of the Deployment that starts the new pod before the old one goes.
    SingleReplica,
}

impl Surge {
    /// The value as written in the policy and in the Deployment annotation.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Never => "Never",
            Self::SingleReplica => "SingleReplica",
        }
    }

    /// Reads the Deployment annotation's value; `None` for anything else.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "Never" => Some(Self::Never),
            "SingleReplica" => Some(Self::SingleReplica),
            _ => None,
        }
    }
}

/// How k8sm tells a drained node's executor to terminate, so that it comes back in the new version.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.mechanism) || self.mechanism != 'Http' || has(self.urlTemplate)")
    .message("spec.kamikaze.urlTemplate is required when spec.kamikaze.mechanism is Http: set it to a URL such as \"https://{nodeIP}:10260/kamikaze\"")
    .field_path(".urlTemplate")
    .reason(Reason::FieldValueRequired))]
#[x_kube(validation = Rule::new(
    "!has(self.urlTemplate) || !self.urlTemplate.startsWith('http://') || (has(self.allowInsecureHttp) && self.allowInsecureHttp)"
).message("spec.kamikaze.urlTemplate is a plain http:// URL, which carries the controller's token unencrypted: use https:// (the agent's --tls-cert-file, the controller's --kamikaze-ca-file), or set spec.kamikaze.allowInsecureHttp: true to accept the risk")
    .field_path(".urlTemplate"))]
pub struct Kamikaze {
    /// "Annotation" (default): set the "k8s.mesosphere.io/kamikaze" annotation on the Node; the
    /// executor watches its own Node and exits. "Http": send an HTTP POST to urlTemplate.
    /// "DeleteNode": delete the Node object.
    #[serde(default)]
    pub mechanism: KamikazeMechanism,

    /// With mechanism Http (and required there): the URL to POST to, an https:// URL (http:// only with
    /// allowInsecureHttp) containing "{nodeName}" or "{nodeIP}" (or both), such as "https://{nodeIP}:10260/kamikaze". Its host is fixed, or exactly
    /// "{nodeIP}": the node's InternalIP address (IPv6 in brackets; a node whose InternalIP is not
    /// an IP address is reported, never POSTed to). In the path, query and fragment both are
    /// replaced by their percent-encoded values. The POST carries a ServiceAccount token for
    /// the agent to verify; redirects are not followed. At most 2048 characters, no
    /// whitespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = URL_TEMPLATE_MAX_LENGTH))]
    #[x_kube(validation = Rule::new(
        "self.matches('^https?://[!-~]+$') && (self.contains('{nodeName}') || self.contains('{nodeIP}'))"
    ).message("spec.kamikaze.urlTemplate must be an http:// or https:// URL without whitespace that contains {nodeName} or {nodeIP}, such as \"https://{nodeIP}:10260/kamikaze\""))]
    pub url_template: Option<String>,

    /// Accept a plain http:// urlTemplate (default false): the POST then carries the controller's token unencrypted,
    /// for anyone on the path to read and replay before it expires. Each policy that allows it
    /// gets a Warning Event.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_insecure_http: bool,
}

/// Kamikaze mechanism.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum KamikazeMechanism {
    /// Set the kamikaze annotation on the Node.
    #[default]
    Annotation,
    /// POST to `urlTemplate`.
    Http,
    /// Delete the Node object.
    DeleteNode,
}

impl ExecutorUpgradePolicySpec {
    /// `nodeProgressDeadline` as a span of time: how long a node, a pod or a surge move may go
    /// without progress. The one place it is read; every rule takes it from here.
    pub fn progress_deadline(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.node_progress_deadline.as_duration())
            .unwrap_or(chrono::Duration::MAX)
    }
}

impl Default for ExecutorUpgradePolicySpec {
    /// The spec of `spec: {}`: every documented default.
    fn default() -> Self {
        Self {
            target_executor_id: None,
            node_selector: LabelSelector::default(),
            max_concurrent_nodes: MaxConcurrentNodes::default(),
            owner_health_threshold: default_owner_health_threshold(),
            unmanaged_pods: UnmanagedPods::default(),
            respect_pod_disruption_budgets: true,
            cordon: true,
            kamikaze: Kamikaze::default(),
            restart_timeout: default_restart_timeout(),
            node_progress_deadline: default_node_progress_deadline(),
            window: None,
            workloads: Workloads::default(),
            paused: false,
        }
    }
}

/// Default of `spec.ownerHealthThreshold`.
pub const DEFAULT_OWNER_HEALTH_THRESHOLD: u8 = 90;

/// Default of `spec.restartTimeout`.
pub const DEFAULT_RESTART_TIMEOUT: &str = "10m";

fn default_owner_health_threshold() -> u8 {
    DEFAULT_OWNER_HEALTH_THRESHOLD
}

fn default_restart_timeout() -> DurationString {
    DurationString::from_literal(DEFAULT_RESTART_TIMEOUT)
}

/// Default of `spec.nodeProgressDeadline`.
pub const DEFAULT_NODE_PROGRESS_DEADLINE: &str = "10m";

fn default_node_progress_deadline() -> DurationString {
    DurationString::from_literal(DEFAULT_NODE_PROGRESS_DEADLINE)
}

fn default_true() -> bool {
    true
}

#[cfg(test)]
mod tests {
    //! Defaults and wire format of the policy spec.

    use super::*;
    use crate::crd;
    use serde_json::{Value, json};

    fn spec_schema() -> Value {
        let crd = serde_json::to_value(crd()).unwrap();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
    }

    #[test]
    fn empty_spec_means_the_documented_defaults() {
        let spec: ExecutorUpgradePolicySpec = serde_json::from_value(json!({})).unwrap();
        assert_eq!(spec, ExecutorUpgradePolicySpec::default());
        assert_eq!(spec.target_executor_id, None);
        assert_eq!(spec.node_selector, LabelSelector::default());
        assert_eq!(
            spec.max_concurrent_nodes,
            MaxConcurrentNodes::count(1).unwrap()
        );
        assert_eq!(spec.owner_health_threshold, 90);
        assert_eq!(spec.unmanaged_pods.policy, UnmanagedPodPolicy::Never);
        assert_eq!(spec.unmanaged_pods.timeout, None);
        assert!(spec.respect_pod_disruption_budgets);
        assert!(spec.cordon);
        assert_eq!(spec.kamikaze.mechanism, KamikazeMechanism::Annotation);
        assert_eq!(spec.kamikaze.url_template, None);
        assert_eq!(
            spec.restart_timeout.as_duration(),
            std::time::Duration::from_secs(600)
        );
        assert!(!spec.paused);

        // YAML `spec: {}` and nested empty objects mean the same.
        let yaml: ExecutorUpgradePolicySpec =
            serde_yaml::from_str("unmanagedPods: {}\nkamikaze: {}\n").unwrap();
        assert_eq!(yaml, spec);
    }

    #[test]
    fn the_apiserver_fills_in_the_same_defaults_as_serde() {
        // kube-cel applies the schema's `default`s the way the apiserver does before storing an
        // object.
        let schema = spec_schema();
        for input in [json!({}), json!({"unmanagedPods": {}, "kamikaze": {}})] {
            let defaulted = kube::core::cel::apply_defaults(&schema, &input);
            assert_eq!(
                defaulted,
                serde_json::to_value(ExecutorUpgradePolicySpec::default()).unwrap(),
                "{input}"
            );
        }
        // A nested object given in part gets the rest of its defaults.
        let defaulted =
            kube::core::cel::apply_defaults(&schema, &json!({"unmanagedPods": {"timeout": "5m"}}));
        assert_eq!(
            defaulted["unmanagedPods"],
            json!({"policy": "Never", "timeout": "5m"})
        );
    }

    #[test]
    fn default_spec_serialises_every_defaulted_field() {
        let value = serde_json::to_value(ExecutorUpgradePolicySpec::default()).unwrap();
        assert_eq!(
            value,
            json!({
                "nodeSelector": {},
                "maxConcurrentNodes": 1,
                "ownerHealthThreshold": 90,
                "unmanagedPods": {"policy": "Never"},
                "respectPodDisruptionBudgets": true,
                "cordon": true,
                "kamikaze": {"mechanism": "Annotation"},
                "restartTimeout": "10m",
                "nodeProgressDeadline": "10m",
                "workloads": {"surge": "Never", "pinnedPods": "Block"},
                "paused": false,
            })
        );
    }

    #[test]
    fn a_full_spec_round_trips() {
        let yaml = r#"
targetExecutorId: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
nodeSelector:
  matchLabels: {pool: workers}
  matchExpressions:
  - {key: zone, operator: In, values: [a, b]}
maxConcurrentNodes: 20%
ownerHealthThreshold: 75
unmanagedPods: {policy: DeleteAfterTimeout, timeout: 1h30m}
respectPodDisruptionBudgets: false
cordon: false
kamikaze: {mechanism: Http, urlTemplate: "https://{nodeIP}:8443/kamikaze?node={nodeName}"}
restartTimeout: 90s
paused: true
"#;
        let spec: ExecutorUpgradePolicySpec = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(
            spec.max_concurrent_nodes,
            MaxConcurrentNodes::percent(20).unwrap()
        );
        assert_eq!(spec.owner_health_threshold, 75);
        assert_eq!(
            spec.unmanaged_pods.policy,
            UnmanagedPodPolicy::DeleteAfterTimeout
        );
        assert_eq!(
            spec.unmanaged_pods
                .timeout
                .as_ref()
                .map(DurationString::as_duration),
            Some(std::time::Duration::from_secs(5400))
        );
        assert_eq!(spec.kamikaze.mechanism, KamikazeMechanism::Http);
        assert_eq!(spec.restart_timeout.to_string(), "90s");
        assert!(spec.paused && !spec.cordon && !spec.respect_pod_disruption_budgets);

        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["maxConcurrentNodes"], "20%");
        assert_eq!(json["unmanagedPods"]["timeout"], "1h30m");
        assert_eq!(
            serde_json::from_value::<ExecutorUpgradePolicySpec>(json).unwrap(),
            spec
        );
    }

    #[test]
    fn values_the_apiserver_rejects_by_type_do_not_deserialise() {
        for bad in [
            json!({"maxConcurrentNodes": 0}),
            json!({"maxConcurrentNodes": "150%"}),
            json!({"ownerHealthThreshold": "abc"}),
            json!({"unmanagedPods": {"policy": "Sometimes"}}),
            json!({"unmanagedPods": {"policy": "DeleteAfterTimeout", "timeout": "ten minutes"}}),
            json!({"kamikaze": {"mechanism": "Email"}}),
            json!({"restartTimeout": "soon"}),
            json!({"paused": "yes"}),
        ] {
            assert!(
                serde_json::from_value::<ExecutorUpgradePolicySpec>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_policy_object_reads_as_kubectl_writes_it() {
        let policy: ExecutorUpgradePolicy = serde_yaml::from_str(
        "apiVersion: k8s.mesosphere.io/v1alpha1\nkind: ExecutorUpgradePolicy\nmetadata: {name: p}\nspec: {paused: true}\n",
    )
    .unwrap();
        assert_eq!(policy.metadata.name.as_deref(), Some("p"));
        assert!(policy.spec.paused);
        assert_eq!(policy.status, None);
        let built = ExecutorUpgradePolicy::new("p", ExecutorUpgradePolicySpec::default());
        let value = serde_json::to_value(&built).unwrap();
        assert_eq!(value["apiVersion"], "k8s.mesosphere.io/v1alpha1");
        assert_eq!(value["kind"], "ExecutorUpgradePolicy");
    }
}
