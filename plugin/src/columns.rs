//! kubectl's `-o custom-columns=HEADER:EXPR,…`: one row per listed object, each column the values
//! of a JSONPath expression on it (`.metadata.name`, `{.metadata.name}` or `metadata.name`, as
//! kubectl's relaxed syntax), joined by commas, `<none>` when there is none.

use std::fmt;

use serde_json::Value;

use crate::jsonpath::{self, Template};

/// The columns of `-o custom-columns=…`.
#[derive(Clone, Debug, PartialEq)]
pub struct Columns {
    columns: Vec<(String, Template)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError(String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

impl std::str::FromStr for Columns {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Self, SpecError> {
        if spec.trim().is_empty() {
            return Err(SpecError(
                "custom-columns format specified but no custom columns given".into(),
            ));
        }
        let columns = spec
            .split(',')
            .map(|part| {
                let (header, expression) = part.split_once(':').ok_or_else(|| {
                    SpecError(format!(
                        "unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>"
                    ))
                })?;
                let template = relaxed(expression)
                    .parse::<Template>()
                    .map_err(|e| SpecError(e.to_string()))?;
                Ok((header.to_owned(), template))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { columns })
    }
}

/// kubectl's RelaxedJSONPathExpression: `{.a}`, `.a` and `a` all mean `{.a}`.
fn relaxed(expression: &str) -> String {
    let inner = expression
        .strip_prefix('{')
        .and_then(|e| e.strip_suffix('}'))
        .unwrap_or(expression);
    let inner = inner.strip_prefix('.').unwrap_or(inner);
    format!("{{.{inner}}}")
}

impl Columns {
    /// The header line (unless `headers` is false), then a row per object in `rows`.
    pub fn render(&self, rows: &[Value], headers: bool) -> String {
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|row| {
                self.columns
                    .iter()
                    .map(|(_, template)| {
                        let values: Vec<String> = template
                            .values(row)
                            .into_iter()
                            .map(jsonpath::text)
                            .collect();
                        if values.is_empty() {
                            "<none>".to_owned()
                        } else {
                            values.join(",")
                        }
                    })
                    .collect()
            })
            .collect();
        let names: Vec<&str> = self.columns.iter().map(|(h, _)| h.as_str()).collect();
        crate::render::grid(headers.then_some(&names[..]), &cells)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rows() -> Vec<Value> {
        vec![
            json!({"name": "node-0001", "phase": "Draining", "podsLeft": 3,
                   "blockers": ["BlockedByPDB", "BlockedOptOut"]}),
            json!({"name": "node-0002", "phase": "Blocked", "blockers": []}),
        ]
    }

    #[test]
    fn columns_render_like_kubectls() {
        let columns: Columns = "NODE:.name,PHASE:{.phase},LEFT:podsLeft,WHY:.blockers[*]"
            .parse()
            .unwrap();
        assert_eq!(
            columns.render(&rows(), true),
            "NODE        PHASE      LEFT     WHY\n\
             node-0001   Draining   3        BlockedByPDB,BlockedOptOut\n\
             node-0002   Blocked    <none>   <none>\n"
        );
        assert_eq!(
            columns.render(&rows(), false),
            "node-0001   Draining   3        BlockedByPDB,BlockedOptOut\n\
             node-0002   Blocked    <none>   <none>\n"
        );
        assert_eq!(columns.render(&[], true), "NODE   PHASE   LEFT   WHY\n");
        assert_eq!(columns.render(&[], false), "");
    }

    #[test]
    fn a_malformed_spec_says_what_kubectl_expects() {
        let error = |spec: &str| spec.parse::<Columns>().unwrap_err().to_string();
        assert_eq!(
            error("NODE"),
            "unexpected custom-columns spec: NODE, expected <header>:<json-path-expr>"
        );
        assert_eq!(
            error(""),
            "custom-columns format specified but no custom columns given"
        );
        assert_eq!(
            error("A:.items[0"),
            "error parsing jsonpath {.items[0}: unterminated array"
        );
    }
}
