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
    // kube-cel applies the schema's `default`s the way the apiserver does before storing an object.
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
