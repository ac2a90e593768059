//! Multi-document YAML manifests as sets of objects, compared object for object: how the tests
//! check that two ways of installing k8sm (the kustomize base and the Helm chart) produce the same
//! objects.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

/// What identifies an object in a cluster: apiVersion, kind, namespace ("" for cluster-scoped) and
/// name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectKey {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            api_version,
            kind,
            namespace,
            name,
        } = self;
        if namespace.is_empty() {
            write!(f, "{api_version} {kind} {name}")
        } else {
            write!(f, "{api_version} {kind} {namespace}/{name}")
        }
    }
}

/// The objects of a multi-document YAML stream, by key. Empty documents (a template that rendered
/// nothing, comments only) are skipped; a document that is not an object, or a key that occurs
/// twice, is an error.
pub fn parse(yaml: &str) -> Result<BTreeMap<ObjectKey, Value>, String> {
    let mut objects = BTreeMap::new();
    for document in serde_yaml::Deserializer::from_str(yaml) {
        let value: Value = serde::Deserialize::deserialize(document).map_err(|e| e.to_string())?;
        if value.is_null() {
            continue;
        }
        let field = |path: &[&str]| {
            path.iter()
                .try_fold(&value, |v, k| v.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let key = ObjectKey {
            api_version: field(&["apiVersion"]),
            kind: field(&["kind"]),
            namespace: field(&["metadata", "namespace"]),
            name: field(&["metadata", "name"]),
        };
        if key.api_version.is_empty() || key.kind.is_empty() || key.name.is_empty() {
            return Err(format!(
                "a document without apiVersion, kind or metadata.name:\n{}",
                serde_yaml::to_string(&value).unwrap_or_default()
            ));
        }
        if let Some(previous) = objects.insert(key.clone(), value) {
            return Err(format!(
                "{key} occurs twice; the first:\n{}",
                serde_yaml::to_string(&previous).unwrap_or_default()
            ));
        }
    }
    Ok(objects)
}

/// The YAML files (`*.yaml`) of `dir`, sorted: a directory of manifests, such as deploy/examples.
pub fn yaml_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
}

/// Every difference between two sets of objects, `want` (the reference) and `have`, readably: the
/// objects only one side has, and for each object both have, every field path whose values differ.
/// Empty when they are equal. The only normalisation is JSON's: numbers compare by value (`100`
/// equals `100.0`); a field missing on one side differs from any value, and YAML comments, key
/// order and quoting never count.
pub fn differences(
    want_name: &str,
    want: &BTreeMap<ObjectKey, Value>,
    have_name: &str,
    have: &BTreeMap<ObjectKey, Value>,
) -> String {
    let mut out = String::new();
    for (key, object) in want {
        match have.get(key) {
            None => {
                let _ = writeln!(
                    out,
                    "{key}: only in {want_name}:\n{}",
                    indent(&serde_yaml::to_string(object).unwrap_or_default())
                );
            }
            Some(other) => {
                let mut paths = Vec::new();
                diff_values("", object, other, &mut paths);
                if !paths.is_empty() {
                    let _ = writeln!(out, "{key}: differs ({want_name} vs {have_name}):");
                    for path in paths {
                        let _ = writeln!(out, "  {path}");
                    }
                }
            }
        }
    }
    for (key, object) in have {
        if !want.contains_key(key) {
            let _ = writeln!(
                out,
                "{key}: only in {have_name}:\n{}",
                indent(&serde_yaml::to_string(object).unwrap_or_default())
            );
        }
    }
    out
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("    {line}\n")).collect()
}

/// Appends `path: want != have` for every leaf where the two differ (a missing field shows as
/// null).
fn diff_values(path: &str, want: &Value, have: &Value, out: &mut Vec<String>) {
    match (want, have) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                diff_values(
                    &format!("{path}.{key}"),
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff_values(&format!("{path}[{i}]"), x, y, out);
            }
        }
        // JSON has one number type: `100` and `100.0` are the same value to the apiserver
        // (kustomize prints the CRD's `maximum: 100.0` as `100`, Helm copies the file as it
        // is).
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        _ if want != have => out.push(format!("{path}: {want} != {have}")),
        _ => {}
    }
}

/// Writes, in `dir`, a kustomize overlay of deploy/ with `components` (directories under
/// deploy/components), as an operator opting in to surge moves or DeleteNode writes one; returns
/// `dir`, for `kubectl kustomize` or `apply -k`.
pub fn overlay_with_components(dir: &std::path::Path, components: &[&str]) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).expect("overlay dir");
    // Kustomize takes relative paths only: from the overlay up to / and down to the workspace.
    let dir = dir.canonicalize().expect("overlay dir");
    let root = crate::workspace_root()
        .canonicalize()
        .expect("workspace root");
    let up = "../".repeat(dir.components().count() - 1);
    let deploy = format!(
        "{up}{}/deploy",
        root.display().to_string().trim_start_matches('/')
    );
    let components: String = components
        .iter()
        .map(|c| format!("  - {deploy}/components/{c}\n"))
        .collect();
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {deploy}\n\
         components:\n{components}"
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).expect("kustomization");
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_sets_have_no_differences_and_every_change_is_named() {
        let base = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: n}\ndata: {x: '1'}\n---\n\
                    # only a comment\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n";
        let same = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\n---\nkind: ConfigMap\napiVersion: v1\n\
                    data:\n  x: \"1\"\nmetadata:\n  namespace: n\n  name: a\n";
        let changed = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: n}\ndata: {x: '2'}\n---\n\
                       apiVersion: v1\nkind: Namespace\nmetadata: {name: m}\n";
        let base = parse(base).unwrap();
        assert_eq!(base.len(), 2);
        assert_eq!(differences("a", &base, "b", &parse(same).unwrap()), "");
        let diff = differences("a", &base, "b", &parse(changed).unwrap());
        assert!(diff.contains("v1 ConfigMap n/a: differs"), "{diff}");
        assert!(diff.contains(".data.x: \"1\" != \"2\""), "{diff}");
        assert!(diff.contains("v1 Namespace n: only in a"), "{diff}");
        assert!(diff.contains("v1 Namespace m: only in b"), "{diff}");
    }

    #[test]
    fn numbers_compare_by_value_but_not_with_strings() {
        let object = |max: &str| {
            parse(&format!(
                "apiVersion: v1\nkind: X\nmetadata: {{name: a}}\nmax: {max}\n"
            ))
            .unwrap()
        };
        assert_eq!(differences("a", &object("100"), "b", &object("100.0")), "");
        assert!(!differences("a", &object("100"), "b", &object("\"100\"")).is_empty());
        assert!(!differences("a", &object("100"), "b", &object("100.5")).is_empty());
    }

    #[test]
    fn a_duplicate_or_nameless_object_is_an_error() {
        let twice = "apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n---\n\
                     apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n";
        assert!(parse(twice).unwrap_err().contains("occurs twice"));
        assert!(parse("apiVersion: v1\nkind: Namespace\n").is_err());
    }
}
