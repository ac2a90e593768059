//! Writing results: human text as rendered, the view model as JSON or YAML for scripts, or, as
//! kubectl's `get`, one line per listed object (`-o name`), a JSONPath template over the JSON
//! document, or custom columns. A closed pipe (`| head`) ends the output quietly instead of
//! panicking.

use std::io::{ErrorKind, IsTerminal, Write};

use serde::Serialize;
use serde_json::Value;

use crate::cli::Output;
use crate::error::Error;
use crate::render::Palette;

/// What the plugin knows about where it runs.
#[derive(Clone, Copy, Debug)]
pub struct Terminal {
    pub palette: Palette,
    pub stdout_is_terminal: bool,
    pub stdin_is_terminal: bool,
}

impl Terminal {
    pub fn detect() -> Self {
        let stdout_is_terminal = std::io::stdout().is_terminal();
        Self {
            palette: Palette::detect(
                stdout_is_terminal,
                std::env::var("NO_COLOR").ok().as_deref(),
                std::env::var("TERM").ok().as_deref(),
            ),
            stdout_is_terminal,
            stdin_is_terminal: std::io::stdin().is_terminal(),
        }
    }
}

/// Writes `text` to standard output.
pub fn print(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        result => Ok(result?),
    }
}

/// What a command lists, for `-o name` and `-o custom-columns`: the objects under `key` in its
/// JSON document (a list, or a map from name to object), each named by its `name` field (or its
/// key in the map), of the Kubernetes kind `kind`.
#[derive(Clone, Copy, Debug)]
pub struct Listing {
    pub key: &'static str,
    pub kind: &'static str,
}

/// The nodes of the policy that the command shows.
pub const NODES: Listing = Listing {
    key: "nodes",
    kind: "node",
};

/// The pods that hold their nodes.
pub const PODS: Listing = Listing {
    key: "pods",
    kind: "pod",
};

/// `value` as JSON or YAML.
pub fn encode<T: Serialize>(value: &T, format: &Output) -> Result<String, Error> {
    let encoded = match format {
        Output::Yaml => serde_yaml::to_string(value).map_err(|e| e.to_string()),
        _ => serde_json::to_string_pretty(value)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
    };
    encoded.map_err(Error::Encode)
}

/// Renders `value` in `format`: `human(wide)` for tables.
pub fn render<T: Serialize>(
    value: &T,
    format: &Output,
    no_headers: bool,
    listing: Listing,
    human: impl FnOnce(bool) -> String,
) -> Result<String, Error> {
    let document = || serde_json::to_value(value).map_err(|e| Error::Encode(e.to_string()));
    Ok(match format {
        Output::Table => human(false),
        Output::Wide => human(true),
        Output::Json | Output::Yaml => encode(value, format)?,
        Output::JsonPath(template) => template.render(&document()?),
        Output::Name => rows(&document()?, listing)
            .iter()
            .map(|row| format!("{}/{}\n", listing.kind, row["name"].as_str().unwrap_or("")))
            .collect(),
        Output::CustomColumns(columns) => columns.render(&rows(&document()?, listing), !no_headers),
    })
}

/// The listed objects of `document`; those of a map get their key as `name`.
fn rows(document: &Value, listing: Listing) -> Vec<Value> {
    match &document[listing.key] {
        Value::Array(items) => items.clone(),
        Value::Object(map) => map
            .iter()
            .map(|(name, object)| {
                let mut object = object.clone();
                if let Value::Object(fields) = &mut object {
                    fields
                        .entry("name")
                        .or_insert_with(|| Value::String(name.clone()));
                }
                object
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Sample {
        pods_left: u32,
        nodes: Vec<Node>,
    }

    #[derive(Serialize)]
    struct Node {
        name: &'static str,
        phase: &'static str,
    }

    fn sample() -> Sample {
        Sample {
            pods_left: 3,
            nodes: vec![
                Node {
                    name: "node-0001",
                    phase: "Draining",
                },
                Node {
                    name: "node-0002",
                    phase: "Blocked",
                },
            ],
        }
    }

    fn show(format: &str, no_headers: bool) -> String {
        let human = |wide: bool| if wide { "wide\n" } else { "table\n" }.to_owned();
        let format = Output::parse(format).unwrap();
        render(&sample(), &format, no_headers, NODES, human).unwrap()
    }

    #[test]
    fn formats() {
        assert_eq!(show("table", false), "table\n");
        assert_eq!(show("wide", true), "wide\n");
        assert!(show("json", false).starts_with("{\n  \"podsLeft\": 3,\n  \"nodes\": ["));
        assert!(show("yaml", false).starts_with("podsLeft: 3\nnodes:\n- name: node-0001\n"));
    }

    #[test]
    fn name_prints_kind_slash_name_per_listed_object() {
        assert_eq!(show("name", false), "node/node-0001\nnode/node-0002\n");
        let pods = render(&sample(), &Output::Name, false, PODS, |_| String::new()).unwrap();
        assert_eq!(pods, "", "nothing listed under pods");
    }

    #[test]
    fn jsonpath_runs_over_the_json_document() {
        assert_eq!(
            show(
                r#"jsonpath={range .nodes[*]}{.name}={.phase}{"\n"}{end}"#,
                false
            ),
            "node-0001=Draining\nnode-0002=Blocked\n"
        );
        assert_eq!(show("jsonpath={.podsLeft}", false), "3");
    }

    #[test]
    fn custom_columns_list_one_row_per_object_with_or_without_headers() {
        let spec = "custom-columns=NODE:.name,PHASE:.phase";
        assert_eq!(
            show(spec, false),
            "NODE        PHASE\nnode-0001   Draining\nnode-0002   Blocked\n"
        );
        assert_eq!(
            show(spec, true),
            "node-0001   Draining\nnode-0002   Blocked\n"
        );
    }

    #[test]
    fn objects_listed_in_a_map_are_named_by_their_key() {
        #[derive(Serialize)]
        struct Report {
            nodes: BTreeMap<&'static str, BTreeMap<&'static str, u32>>,
        }
        let report = Report {
            nodes: BTreeMap::from([
                ("b", BTreeMap::from([("evictions", 2)])),
                ("a", BTreeMap::new()),
            ]),
        };
        let human = |_| String::new();
        let names = render(&report, &Output::Name, false, NODES, human).unwrap();
        assert_eq!(names, "node/a\nnode/b\n");
        let columns = Output::parse("custom-columns=N:.name,E:.evictions").unwrap();
        assert_eq!(
            render(&report, &columns, true, NODES, human).unwrap(),
            "a   <none>\nb   2\n"
        );
    }
}
