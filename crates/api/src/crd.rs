//! The generated `CustomResourceDefinition` of `ExecutorUpgradePolicy`, for the `crdgen` tool and for tests.

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
/// - integer formats derived from Rust types (`uint8`, `uint32`, ...) become the two that Kubernetes knows, `int32`
///   and `int64`: the apiserver warns about any other on every CRD apply. `minimum`/`maximum` keep the ranges.
/// - descriptions lose the line breaks of the `///` comments they come from (paragraphs stay), so that
///   `kubectl explain` can wrap them to the terminal instead of printing ragged lines.
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
    // A CRD built from plain data always serialises; a failure here is a bug in the types, caught by the tests.
    serde_yaml::to_string(&crd()).expect("the CRD serialises to YAML")
}

#[cfg(test)]
mod tests;
