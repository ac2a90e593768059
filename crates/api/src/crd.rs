//! The generated `CustomResourceDefinition` of `ExecutorUpgradePolicy`, for the `crdgen` tool and
//! for tests.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

use crate::ExecutorUpgradePolicy;

/// The CRD of `ExecutorUpgradePolicy`, as generated from the Rust types.
pub fn crd() -> CustomResourceDefinition {
    let mut value =
        serde_json::to_value(ExecutorUpgradePolicy::crd()).expect("the CRD serialises to JSON");
    tidy(&mut value);
    serde_json::from_value(value).expect("tidying keeps a valid CRD")
}

/// Two touch-ups of what kube-derive and schemars generate, applied to every (sub)schema:
/// - integer formats derived from Rust types (`uint8`, `uint32`, ...) become the two that
///   Kubernetes knows, `int32` and `int64`: the apiserver warns about any other on every CRD apply.
///   `minimum`/`maximum` keep the ranges.
/// - descriptions lose the line breaks of the `///` comments they come from (paragraphs stay), so
///   that `kubectl explain` can wrap them to the terminal instead of printing ragged lines.
fn tidy(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.get("type").and_then(Value::as_str) == Some("integer")
                && let Some(format) = map.get_mut("format")
            {
                let wide = matches!(format.as_str(), Some("uint32" | "int64" | "uint64"));
                *format = Value::from(if wide { "int64" } else { "int32" });
            }
            if let Some(Value::String(description)) = map.get_mut("description") {
                *description = unwrap_lines(description);
            }
            map.values_mut().for_each(tidy);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// Joins the lines of each paragraph with single spaces; paragraphs stay separated by a blank line.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| paragraph.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|paragraph| !paragraph.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// [`crd`] as YAML, the form in which it is committed under `crds/` and applied to clusters.
pub fn crd_yaml() -> String {
    // A CRD built from plain data always serialises; a failure here is a bug in the types, caught
    // by the tests.
    serde_yaml::to_string(&crd()).expect("the CRD serialises to YAML")
}

#[cfg(test)]
mod tests {
    //! Snapshot-style checks of the generated CRD, and its CEL rules evaluated client-side with
    //! kube-cel.

    use super::*;
    use kube::core::cel::{Validator, compile_schema};
    use serde_json::{Value, json};

    fn crd_json() -> Value {
        serde_json::to_value(crd()).unwrap()
    }

    fn schema() -> Value {
        crd_json()["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
    }

    fn spec_props() -> Value {
        schema()["properties"]["spec"]["properties"].clone()
    }

    #[test]
    fn names_scope_and_subresources() {
        let crd = crd_json();
        assert_eq!(
            crd["metadata"]["name"],
            "executorupgradepolicies.k8s.mesosphere.io"
        );
        assert_eq!(crd["spec"]["group"], crate::keys::GROUP);
        assert_eq!(crd["spec"]["scope"], "Cluster");
        let names = &crd["spec"]["names"];
        assert_eq!(names["kind"], "ExecutorUpgradePolicy");
        assert_eq!(names["plural"], "executorupgradepolicies");
        assert_eq!(names["shortNames"], json!(["eup"]));
        assert_eq!(names["categories"], json!(["k8sm"]));
        let versions = crd["spec"]["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0]["name"], crate::keys::VERSION);
        assert_eq!(versions[0]["served"], true);
        assert_eq!(versions[0]["storage"], true);
        assert_eq!(versions[0]["subresources"], json!({"status": {}}));
    }

    #[test]
    fn printer_columns() {
        let columns = crd_json()["spec"]["versions"][0]["additionalPrinterColumns"].clone();
        let columns: Vec<(String, String, String)> = columns
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap().to_owned();
                (s("name"), s("type"), s("jsonPath"))
            })
            .collect();
        let want = [
            ("Target", "string", ".spec.targetExecutorId"),
            ("Upgraded", "string", ".status.upgraded"),
            ("Blocked", "integer", ".status.counts.blocked"),
            (
                "Degraded",
                "string",
                ".status.conditions[?(@.type==\"Degraded\")].status",
            ),
            ("Paused", "boolean", ".spec.paused"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ];
        let want: Vec<(String, String, String)> = want
            .iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect();
        assert_eq!(columns, want);
    }

    #[test]
    fn spec_fields_are_the_public_api_with_their_defaults() {
        let props = spec_props();
        let mut names: Vec<&str> = props
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "cordon",
                "kamikaze",
                "maxConcurrentNodes",
                "nodeProgressDeadline",
                "nodeSelector",
                "ownerHealthThreshold",
                "paused",
                "respectPodDisruptionBudgets",
                "restartTimeout",
                "targetExecutorId",
                "unmanagedPods",
                "window",
                "workloads"
            ]
        );
        let defaults = [
            ("nodeSelector", json!({})),
            ("maxConcurrentNodes", json!(1)),
            ("ownerHealthThreshold", json!(90)),
            ("unmanagedPods", json!({"policy": "Never"})),
            ("respectPodDisruptionBudgets", json!(true)),
            ("cordon", json!(true)),
            ("kamikaze", json!({"mechanism": "Annotation"})),
            ("restartTimeout", json!("10m")),
            ("nodeProgressDeadline", json!("10m")),
            (
                "workloads",
                json!({"surge": "Never", "pinnedPods": "Block"}),
            ),
            ("paused", json!(false)),
        ];
        for (field, default) in defaults {
            assert_eq!(props[field]["default"], default, "{field}");
        }
        assert_eq!(props["targetExecutorId"].get("default"), None);
        // No window: always open. A window names its days and hours; its zone defaults to UTC,
        // in-flight nodes finish.
        let window = &props["window"];
        assert_eq!(window.get("default"), None);
        assert_eq!(window["required"], json!(["days", "end", "start"]));
        assert_eq!(window["properties"]["timeZone"]["default"], "UTC");
        assert_eq!(window["properties"]["inFlight"]["default"], "Finish");
        assert_eq!(
            window["properties"]["days"]["items"]["enum"],
            json!([
                "Monday",
                "Tuesday",
                "Wednesday",
                "Thursday",
                "Friday",
                "Saturday",
                "Sunday"
            ])
        );
        for clock in ["start", "end"] {
            assert_eq!(
                window["properties"][clock]["pattern"],
                crate::CLOCK_PATTERN,
                "{clock}"
            );
        }
        assert_eq!(
            props["unmanagedPods"]["properties"]["policy"]["default"],
            "Never"
        );
        assert_eq!(
            props["kamikaze"]["properties"]["mechanism"]["default"],
            "Annotation"
        );
    }

    #[test]
    fn schema_keywords() {
        let props = spec_props();
        let threshold = &props["ownerHealthThreshold"];
        assert_eq!(threshold["type"], "integer");
        assert_eq!(threshold["minimum"].as_f64(), Some(1.0));
        assert_eq!(threshold["maximum"].as_f64(), Some(100.0));

        let max = &props["maxConcurrentNodes"];
        assert_eq!(max["x-kubernetes-int-or-string"], true);
        assert_eq!(max["nullable"], false);

        let policy = &props["unmanagedPods"]["properties"]["policy"];
        assert_eq!(
            policy["enum"],
            json!(["Delete", "DeleteAfterTimeout", "Never"])
        );
        let mechanism = &props["kamikaze"]["properties"]["mechanism"];
        assert_eq!(
            mechanism["enum"],
            json!(["Annotation", "Http", "DeleteNode"])
        );

        for duration in [
            &props["restartTimeout"],
            &props["unmanagedPods"]["properties"]["timeout"],
        ] {
            assert_eq!(duration["type"], "string");
            assert_eq!(duration["pattern"], crate::DURATION_PATTERN);
            assert_eq!(duration["maxLength"], 32);
        }
        let target = &props["targetExecutorId"];
        assert_eq!(target["pattern"], crate::TARGET_EXECUTOR_ID_PATTERN);
        assert_eq!(target["minLength"], 1);
        assert_eq!(target["maxLength"], 256);
        assert_eq!(
            props["kamikaze"]["properties"]["urlTemplate"]["maxLength"],
            2048
        );

        let status = &schema()["properties"]["status"]["properties"];
        assert_eq!(status["conditions"]["x-kubernetes-list-type"], "map");
        assert_eq!(
            status["conditions"]["x-kubernetes-list-map-keys"],
            json!(["type"])
        );
        assert_eq!(status["nodes"]["x-kubernetes-list-type"], "map");
        assert_eq!(
            status["nodes"]["x-kubernetes-list-map-keys"],
            json!(["name"])
        );
        assert_eq!(status["blockedPods"]["maxItems"], crate::MAX_BLOCKED_PODS);
        assert_eq!(status["nodes"]["maxItems"], crate::MAX_NODES);
        assert_eq!(
            status["nodes"]["items"]["properties"]["phase"]["enum"],
            json!([
                "Compatible",
                "Incompatible",
                "Draining",
                "Drained",
                "KamikazeSent",
                "Blocked"
            ])
        );
    }

    #[test]
    fn cel_rules_are_where_they_belong() {
        let props = spec_props();
        let rules = |v: &Value| -> Vec<String> {
            v["x-kubernetes-validations"]
                .as_array()
                .unwrap_or_else(|| panic!("no rules in {v}"))
                .iter()
                .map(|r| r["rule"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(
            rules(&props["maxConcurrentNodes"]),
            [crate::MAX_CONCURRENT_NODES_RULE]
        );
        assert_eq!(
            rules(&props["unmanagedPods"]),
            ["!has(self.policy) || self.policy != 'DeleteAfterTimeout' || has(self.timeout)"]
        );
        assert_eq!(
            rules(&props["kamikaze"]),
            [
                "!has(self.mechanism) || self.mechanism != 'Http' || has(self.urlTemplate)",
                "!has(self.urlTemplate) || !self.urlTemplate.startsWith('http://') || (has(self.allowInsecureHttp) && self.allowInsecureHttp)"
            ]
        );
        assert_eq!(
            rules(&props["kamikaze"]["properties"]["urlTemplate"]).len(),
            1
        );
        // Required-with rules point at the missing field, so the apiserver names it.
        assert_eq!(
            props["unmanagedPods"]["x-kubernetes-validations"][0]["fieldPath"],
            ".timeout"
        );
        assert_eq!(
            props["unmanagedPods"]["x-kubernetes-validations"][0]["reason"],
            "FieldValueRequired"
        );
        assert_eq!(
            props["kamikaze"]["x-kubernetes-validations"][0]["fieldPath"],
            ".urlTemplate"
        );
        // Every rule carries a message naming its field.
        let text = serde_json::to_string(&schema()).unwrap();
        for field in [
            "maxConcurrentNodes must",
            "timeout is required",
            "urlTemplate is required",
            "urlTemplate must",
        ] {
            assert!(text.contains(field), "{field}");
        }
    }

    #[test]
    fn rules_compile() {
        let compiled = compile_schema(&schema());
        let errors: Vec<String> = compiled
            .compilation_errors()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn every_spec_field_is_documented_and_nothing_keeps_unknown_fields() {
        fn walk(path: &str, schema: &Value) {
            if let Some(object) = schema.as_object() {
                assert!(
                    !object.contains_key("x-kubernetes-preserve-unknown-fields"),
                    "{path} would keep unknown fields"
                );
                for (key, value) in object {
                    walk(&format!("{path}/{key}"), value);
                }
            }
        }
        walk("", &schema());
        for (field, value) in spec_props().as_object().unwrap() {
            let description = value["description"].as_str().unwrap_or_default();
            assert!(
                description.len() > 40,
                "spec.{field} needs operator documentation"
            );
        }
    }

    #[test]
    fn only_formats_that_kubernetes_recognises() {
        // Mirrors apiextensions-apiserver's GetUnrecognizedFormats, which turns any other format
        // into a warning.
        fn walk(path: &str, schema: &Value) {
            if let Some(object) = schema.as_object() {
                if let Some(format) = object.get("format").and_then(Value::as_str) {
                    let ok = match object.get("type").and_then(Value::as_str) {
                        Some("integer") => ["int32", "int64"].contains(&format),
                        Some("string") => {
                            ["date-time", "date", "byte", "duration"].contains(&format)
                        }
                        _ => false,
                    };
                    assert!(ok, "{path}: format {format}");
                }
                for (key, value) in object {
                    walk(&format!("{path}/{key}"), value);
                }
            }
        }
        walk("", &schema());
        assert_eq!(spec_props()["ownerHealthThreshold"]["format"], "int32");
        assert_eq!(
            schema()["properties"]["status"]["properties"]["counts"]["properties"]["total"]["format"],
            "int64"
        );
    }

    #[test]
    fn descriptions_are_unwrapped_paragraphs() {
        assert_eq!(unwrap_lines("a\n  b\nc\n\nd\ne"), "a b c\n\nd e");
        let text = serde_json::to_string(&crd()).unwrap();
        let props = spec_props();
        let description = props["ownerHealthThreshold"]["description"]
            .as_str()
            .unwrap();
        assert!(!description.contains('\n'), "{description}");
        assert!(
            description.starts_with("The SLA guard, in percent from 1 to 100 (default 90): a pod")
        );
        assert!(!text.contains("  "), "double spaces left in descriptions");
    }

    #[test]
    fn yaml_parses_back_to_the_same_crd() {
        let yaml = crd_yaml();
        assert!(
            yaml.starts_with(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
            )
        );
        let back: CustomResourceDefinition = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(back, crd());
    }

    /// Evaluates the CEL rules on a policy with the given spec (after the schema's defaults) and
    /// returns the failures as "path: message".
    fn cel_failures(spec: Value) -> Vec<String> {
        let object = json!({
            "apiVersion": "k8s.mesosphere.io/v1alpha1",
            "kind": "ExecutorUpgradePolicy",
            "metadata": {"name": "p"},
            "spec": spec,
        });
        match Validator::new().validate(&schema(), &object, None) {
            Ok(()) => vec![],
            Err(errors) => errors
                .iter()
                .map(|e| format!("{}: {}", e.field_path, e.message))
                .collect(),
        }
    }

    #[test]
    fn cel_accepts_good_specs() {
        for spec in [
            json!({}),
            json!({"maxConcurrentNodes": 1}),
            json!({"maxConcurrentNodes": 500}),
            json!({"maxConcurrentNodes": "1%"}),
            json!({"maxConcurrentNodes": "20%"}),
            json!({"maxConcurrentNodes": "100%"}),
            json!({"unmanagedPods": {"policy": "Delete"}}),
            json!({"unmanagedPods": {"policy": "DeleteAfterTimeout", "timeout": "5m"}}),
            json!({"unmanagedPods": {"policy": "Never", "timeout": "5m"}}),
            json!({"kamikaze": {"mechanism": "Http", "urlTemplate": "https://{nodeIP}:10260/kamikaze"}}),
            json!({"kamikaze": {"mechanism": "Http", "urlTemplate": "http://{nodeIP}:10260/kamikaze", "allowInsecureHttp": true}}),
            json!({"kamikaze": {"mechanism": "Http", "urlTemplate": "https://agent.example/{nodeName}"}}),
            json!({"kamikaze": {"mechanism": "DeleteNode"}}),
        ] {
            assert_eq!(cel_failures(spec.clone()), Vec::<String>::new(), "{spec}");
        }
    }

    #[test]
    fn cel_rejects_bad_specs_naming_the_field() {
        let table = [
            (
                json!({"maxConcurrentNodes": 0}),
                "spec.maxConcurrentNodes",
                "maxConcurrentNodes must",
            ),
            (
                json!({"maxConcurrentNodes": -3}),
                "spec.maxConcurrentNodes",
                "maxConcurrentNodes must",
            ),
            (
                json!({"maxConcurrentNodes": "0%"}),
                "spec.maxConcurrentNodes",
                "maxConcurrentNodes must",
            ),
            (
                json!({"maxConcurrentNodes": "150%"}),
                "spec.maxConcurrentNodes",
                "maxConcurrentNodes must",
            ),
            (
                json!({"maxConcurrentNodes": "101%"}),
                "spec.maxConcurrentNodes",
                "maxConcurrentNodes must",
            ),
            (
                json!({"maxConcurrentNodes": "05%"}),
                "spec.maxConcurrentNodes",
                "maxConcurrentNodes must",
            ),
            (
                json!({"maxConcurrentNodes": "abc"}),
                "spec.maxConcurrentNodes",
                "maxConcurrentNodes must",
            ),
            (
                json!({"maxConcurrentNodes": "3"}),
                "spec.maxConcurrentNodes",
                "maxConcurrentNodes must",
            ),
            (
                json!({"unmanagedPods": {"policy": "DeleteAfterTimeout"}}),
                "spec.unmanagedPods.timeout",
                "timeout is required",
            ),
            (
                json!({"kamikaze": {"mechanism": "Http"}}),
                "spec.kamikaze.urlTemplate",
                "urlTemplate is required",
            ),
            (
                json!({"kamikaze": {"mechanism": "Http", "urlTemplate": "ftp://{nodeIP}/k"}}),
                "spec.kamikaze.urlTemplate",
                "urlTemplate must",
            ),
            (
                json!({"kamikaze": {"mechanism": "Http", "urlTemplate": "https://10.0.0.1/kamikaze"}}),
                "spec.kamikaze.urlTemplate",
                "urlTemplate must",
            ),
            (
                json!({"kamikaze": {"mechanism": "Http", "urlTemplate": "https://{nodeIP}/a b"}}),
                "spec.kamikaze.urlTemplate",
                "urlTemplate must",
            ),
            (
                json!({"kamikaze": {"mechanism": "Http", "urlTemplate": "http://{nodeIP}/kamikaze"}}),
                "spec.kamikaze.urlTemplate",
                "is a plain http:// URL",
            ),
            (
                json!({"kamikaze": {"mechanism": "Http", "urlTemplate": "http://{nodeIP}/kamikaze", "allowInsecureHttp": false}}),
                "spec.kamikaze.urlTemplate",
                "set spec.kamikaze.allowInsecureHttp: true",
            ),
        ];
        for (spec, path, message) in table {
            let failures = cel_failures(spec.clone());
            assert_eq!(failures.len(), 1, "{spec}: {failures:?}");
            assert!(
                failures[0].starts_with(&format!("{path}: ")),
                "{spec}: {failures:?}"
            );
            assert!(failures[0].contains(message), "{spec}: {failures:?}");
        }
    }
}
