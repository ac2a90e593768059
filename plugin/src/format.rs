//! `-o`: the output formats of kubectl's `get`, read from the flag's value as kubectl reads them.

use crate::columns::Columns;
use crate::jsonpath::Template;

/// Human tables, data for scripts, or one line per listed object.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Output {
    #[default]
    Table,
    Wide,
    Json,
    Yaml,
    /// `kind/name` of each listed object, as `kubectl get -o name`.
    Name,
    /// `jsonpath=TEMPLATE`, over the document `-o json` prints.
    JsonPath(Template),
    /// `custom-columns=HEADER:EXPR,…`, one row per listed object.
    CustomColumns(Columns),
}

/// The formats, as the error for an unknown one lists them.
pub const FORMATS: &str = "table, wide, json, yaml, name, jsonpath=TEMPLATE, custom-columns=SPEC";

impl Output {
    /// Reads `-o`'s value (clap's value parser).
    pub fn parse(text: &str) -> Result<Self, String> {
        if let Some((kind, argument)) = text.split_once('=') {
            return match kind {
                "jsonpath" if argument.is_empty() => {
                    Err("jsonpath format specified but no template given".into())
                }
                "jsonpath" => argument
                    .parse()
                    .map(Self::JsonPath)
                    .map_err(|e| e.to_string()),
                "custom-columns" => argument
                    .parse()
                    .map(Self::CustomColumns)
                    .map_err(|e| e.to_string()),
                _ => Err(unknown(text)),
            };
        }
        match text {
            "table" => Ok(Self::Table),
            "wide" => Ok(Self::Wide),
            "json" => Ok(Self::Json),
            "yaml" => Ok(Self::Yaml),
            "name" => Ok(Self::Name),
            "jsonpath" | "custom-columns" => Err(format!("{text} needs a value: {text}=…")),
            _ => Err(unknown(text)),
        }
    }
}

fn unknown(text: &str) -> String {
    format!("unknown output format {text:?}; allowed formats are: {FORMATS}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kubectls_formats() {
        assert_eq!(Output::parse("wide"), Ok(Output::Wide));
        assert_eq!(Output::parse("name"), Ok(Output::Name));
        assert!(matches!(
            Output::parse("jsonpath={.nodes[*].name}"),
            Ok(Output::JsonPath(_))
        ));
        assert!(matches!(
            Output::parse("jsonpath={.a}={.b}"),
            Ok(Output::JsonPath(_)),
        ));
        assert!(matches!(
            Output::parse("custom-columns=NODE:.name"),
            Ok(Output::CustomColumns(_))
        ));
        assert!(
            Output::parse("go-template={{.x}}")
                .unwrap_err()
                .contains("allowed formats")
        );
        assert!(
            Output::parse("jsonpath=")
                .unwrap_err()
                .contains("no template")
        );
        assert!(
            Output::parse("jsonpath")
                .unwrap_err()
                .contains("jsonpath=…")
        );
        assert!(
            Output::parse("custom-columns=X")
                .unwrap_err()
                .contains("<header>")
        );
    }
}
