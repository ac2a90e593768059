//! The example policies in deploy/examples are valid, and every fixture in
//! tests/e2e/fixtures/invalid breaks exactly one rule of the generated CRD, the one its `# expect:`
//! line names.
//!
//! The end-to-end suite checks the same files against a real kube-apiserver; this test catches a
//! broken fixture or example in seconds, without a cluster. Schema keywords are checked by a small
//! structural-schema walker below, CEL rules by kube-cel.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

use k8sm_api::{
    CLOCK_PATTERN, DURATION_PATTERN, DurationString, ExecutorUpgradePolicy,
    TARGET_EXECUTOR_ID_PATTERN,
};
use kube::core::cel::Validator;
use serde_json::Value;

fn repo_dir(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
}

fn schema() -> Value {
    let crd = serde_json::to_value(k8sm_api::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// Checks `value` against the keywords that the generated schema uses, as the apiserver does (with
/// strict field validation), and returns "path: what is wrong" for each violation.
fn schema_errors(schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    if value.is_null() {
        return;
    }
    if schema["x-kubernetes-int-or-string"] == true {
        if !(value.is_i64() || value.is_u64() || value.is_string()) {
            errors.push(format!("{path}: must be an integer or a string"));
        }
        return;
    }
    let ty = schema["type"]
        .as_str()
        .unwrap_or_else(|| panic!("{path}: schema without type: {schema}"));
    let type_ok = match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        other => panic!("{path}: the walker does not know type {other}"),
    };
    if !type_ok {
        errors.push(format!("{path}: must be of type {ty}"));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        errors.push(format!("{path}: unsupported value {value}"));
    }
    match value {
        Value::Object(map) => {
            let properties = schema["properties"].as_object();
            for required in schema["required"].as_array().into_iter().flatten() {
                let required = required.as_str().unwrap();
                if !map.contains_key(required) {
                    errors.push(format!("{}: required value", join(path, required)));
                }
            }
            for (key, item) in map {
                // The root schema leaves apiVersion, kind and metadata to the apiserver.
                if path.is_empty() && ["apiVersion", "kind", "metadata"].contains(&key.as_str()) {
                    continue;
                }
                let sub = properties
                    .and_then(|p| p.get(key))
                    .or(schema.get("additionalProperties"));
                match sub {
                    Some(sub) => schema_errors(sub, item, &join(path, key), errors),
                    None => errors.push(format!("{}: unknown field", join(path, key))),
                }
            }
        }
        Value::Array(items) => {
            if let Some(max) = schema["maxItems"].as_u64()
                && items.len() as u64 > max
            {
                errors.push(format!("{path}: too many items"));
            }
            for (i, item) in items.iter().enumerate() {
                schema_errors(&schema["items"], item, &format!("{path}[{i}]"), errors);
            }
        }
        Value::String(text) => {
            let chars = text.chars().count() as u64;
            if schema["minLength"].as_u64().is_some_and(|min| chars < min) {
                errors.push(format!("{path}: too short"));
            }
            if schema["maxLength"].as_u64().is_some_and(|max| chars > max) {
                errors.push(format!("{path}: too long"));
            }
            if let Some(pattern) = schema["pattern"].as_str()
                && !matches_pattern(pattern, text)
            {
                errors.push(format!("{path}: should match {pattern}"));
            }
        }
        Value::Number(n) => {
            let n = n.as_f64().unwrap();
            if schema["minimum"].as_f64().is_some_and(|min| n < min) {
                errors.push(format!("{path}: below minimum"));
            }
            if schema["maximum"].as_f64().is_some_and(|max| n > max) {
                errors.push(format!("{path}: above maximum"));
            }
        }
        _ => {}
    }
}

/// The schema's patterns, each mirrored by Rust code (this crate has no regex engine). A new
/// pattern fails here until it is mirrored.
fn matches_pattern(pattern: &str, text: &str) -> bool {
    if pattern == DURATION_PATTERN {
        DurationString::is_grammatical(text)
    } else if pattern == TARGET_EXECUTOR_ID_PATTERN {
        !text.is_empty() && text.chars().all(|c| ('!'..='~').contains(&c))
    } else if pattern == CLOCK_PATTERN {
        // "HH:MM", 00:00 to 23:59.
        let b = text.as_bytes();
        b.len() == 5
            && b[2] == b':'
            && matches!(
                (b[0], b[1]),
                (b'0' | b'1', b'0'..=b'9') | (b'2', b'0'..=b'3')
            )
            && matches!((b[3], b[4]), (b'0'..=b'5', b'0'..=b'9'))
    } else {
        panic!("mirror pattern {pattern} in matches_pattern")
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Everything the apiserver would reject in `object`: schema violations, then failed CEL rules.
fn violations(object: &Value) -> Vec<String> {
    let schema = schema();
    let mut errors = Vec::new();
    schema_errors(&schema, object, "", &mut errors);
    // CEL rules run only on values of the right type, as in the apiserver; skip them when the
    // schema already failed.
    if errors.is_empty()
        && let Err(failed) = Validator::new().validate(&schema, object, None)
    {
        errors.extend(
            failed
                .iter()
                .map(|e| format!("{}: {}", e.field_path, e.message)),
        );
    }
    errors
}

fn load(path: &Path) -> (String, Value) {
    let text = fs::read_to_string(path).unwrap();
    let value: Value =
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (text, value)
}

fn name_of(value: &Value) -> String {
    value["metadata"]["name"]
        .as_str()
        .expect("metadata.name")
        .to_owned()
}

#[test]
fn examples_are_valid_policies() {
    let files = yaml_files(&repo_dir("deploy/examples"));
    let stems: BTreeSet<String> = files
        .iter()
        .map(|f| f.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for required in ["aggressive", "conservative", "default"] {
        assert!(
            stems.contains(required),
            "deploy/examples/{required}.yaml is missing"
        );
    }
    let mut names = BTreeSet::new();
    for file in files {
        let (text, value) = load(&file);
        assert!(
            text.starts_with('#'),
            "{}: explain the choices in comments",
            file.display()
        );
        assert_eq!(
            value["apiVersion"],
            "k8s.mesosphere.io/v1alpha1",
            "{}",
            file.display()
        );
        assert_eq!(value["kind"], "ExecutorUpgradePolicy", "{}", file.display());
        assert!(
            names.insert(name_of(&value)),
            "{}: duplicate metadata.name",
            file.display()
        );
        assert_eq!(
            violations(&value),
            Vec::<String>::new(),
            "{}",
            file.display()
        );
        let policy: ExecutorUpgradePolicy =
            serde_json::from_value(value).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(policy.spec.owner_health_threshold >= 1);
    }
}

#[test]
fn the_default_example_spells_out_the_defaults() {
    let (_, value) = load(&repo_dir("deploy/examples/default.yaml"));
    let policy: ExecutorUpgradePolicy = serde_json::from_value(value).unwrap();
    assert_eq!(policy.spec, k8sm_api::ExecutorUpgradePolicySpec::default());
}

#[test]
fn each_invalid_fixture_breaks_exactly_the_rule_it_expects() {
    let files = yaml_files(&repo_dir("tests/e2e/fixtures/invalid"));
    assert!(files.len() >= 14, "only {} invalid fixtures", files.len());
    let mut names = BTreeSet::new();
    for file in files {
        let (text, value) = load(&file);
        let first = text.lines().next().unwrap_or_default();
        let expect = first.strip_prefix("# expect: ").unwrap_or_else(|| {
            panic!(
                "{}: first line must be `# expect: <substring>`",
                file.display()
            )
        });
        assert!(!expect.trim().is_empty());
        assert!(
            names.insert(name_of(&value)),
            "{}: duplicate metadata.name",
            file.display()
        );

        let found = violations(&value);
        let paths: BTreeSet<&str> = found
            .iter()
            .map(|e| e.split_once(": ").unwrap().0)
            .collect();
        assert_eq!(
            paths.len(),
            1,
            "{}: want one bad field, found {found:?}",
            file.display()
        );
        let path = paths.first().unwrap();
        // The expected message names the bad field, and it is the field found here.
        assert!(
            expect.contains(path),
            "{}: expect {expect:?} does not name {path} (found {found:?})",
            file.display()
        );
    }
}

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The schema's CEL rule on a duration's length of time and Rust's parse agree on every string
    /// of the grammar,
    /// up to 9 digits a part (3 billion hours, past what Go's durations hold) and around the
    /// maximum to the
    /// second: the apiserver stores exactly the policies the controller can read.
    #[test]
    fn the_schema_and_rust_agree_on_the_longest_duration(text in prop_oneof![
        prop::collection::vec(
            (0u64..1_000_000_000, prop::sample::select(vec!["ms", "s", "m", "h"]), prop::bool::ANY)
                .prop_map(|(n, unit, small)| {
                    let scale = match unit { "ms" => 1_000_000_000, "s" => 40_000_000, "m" => 600_000, _ => 10_000 };
                    format!("{}{unit}", if small { n % scale } else { n })
                }),
            1..4,
        ).prop_map(|parts| parts.concat()),
        (8758u64 * 3600..8762 * 3600).prop_map(|s| format!("{}h{}m{}s", s / 3600, s / 60 % 60, s % 60)),
    ]) {
        prop_assume!(DurationString::is_grammatical(&text));
        let policy = serde_json::json!({
            "apiVersion": "k8s.mesosphere.io/v1alpha1",
            "kind": "ExecutorUpgradePolicy",
            "metadata": {"name": "p"},
            "spec": {"restartTimeout": text},
        });
        let refused = violations(&policy);
        let parsed = text.parse::<DurationString>();
        prop_assert_eq!(refused.is_empty(), parsed.is_ok(), "{}: {:?}, {:?}", text, refused, parsed);
    }
}
