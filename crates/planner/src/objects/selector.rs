//! Label selector matching (`matchLabels` + `matchExpressions`), with the apiserver's validation
//! rules.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Why a label selector cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// An operator other than `In`, `NotIn`, `Exists`, `DoesNotExist`.
    #[error(
        "matchExpressions[{index}] (key {key:?}): unknown operator {operator:?}; use In, NotIn, Exists or DoesNotExist"
    )]
    UnknownOperator {
        /// Position in `matchExpressions`.
        index: usize,
        /// The requirement's key.
        key: String,
        /// The rejected operator.
        operator: String,
    },
    /// `In`/`NotIn` without values, or `Exists`/`DoesNotExist` with values.
    #[error("matchExpressions[{index}] (key {key:?}): operator {operator} {problem}")]
    BadValues {
        /// Position in `matchExpressions`.
        index: usize,
        /// The requirement's key.
        key: String,
        /// The requirement's operator.
        operator: &'static str,
        /// What is wrong.
        problem: &'static str,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

/// A validated label selector. All requirements are ANDed; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Validates `selector` the way the apiserver does.
    pub fn new(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements: Vec<Requirement> = selector
            .match_labels
            .iter()
            .flatten()
            .map(|(key, value)| Requirement {
                key: key.clone(),
                operator: Operator::In,
                values: vec![value.clone()],
            })
            .collect();
        for (index, expr) in selector.match_expressions.iter().flatten().enumerate() {
            let operator = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorError::UnknownOperator {
                        index,
                        key: expr.key.clone(),
                        operator: other.to_owned(),
                    });
                }
            };
            let values = expr.values.clone().unwrap_or_default();
            let bad = |operator, problem| SelectorError::BadValues {
                index,
                key: expr.key.clone(),
                operator,
                problem,
            };
            match operator {
                Operator::In if values.is_empty() => {
                    return Err(bad("In", "needs at least one value"));
                }
                Operator::NotIn if values.is_empty() => {
                    return Err(bad("NotIn", "needs at least one value"));
                }
                Operator::Exists if !values.is_empty() => {
                    return Err(bad("Exists", "takes no values"));
                }
                Operator::DoesNotExist if !values.is_empty() => {
                    return Err(bad("DoesNotExist", "takes no values"));
                }
                _ => {}
            }
            requirements.push(Requirement {
                key: expr.key.clone(),
                operator,
                values,
            });
        }
        Ok(Self { requirements })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| {
            let value = labels.get(&r.key);
            match r.operator {
                Operator::In => value.is_some_and(|v| r.values.contains(v)),
                // NotIn also matches objects without the key, as in Kubernetes.
                Operator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                Operator::Exists => value.is_some(),
                Operator::DoesNotExist => value.is_none(),
            }
        })
    }
}

/// A label that every object `selector` matches carries (a `matchLabels` entry, or an `In`
/// expression of one value), if it has one: a key to index selectors by. Meaningful for a selector
/// that [`Selector::new`] accepts.
pub(crate) fn required_label(selector: &LabelSelector) -> Option<(&str, &str)> {
    if let Some((key, value)) = selector.match_labels.iter().flatten().next() {
        return Some((key, value));
    }
    selector.match_expressions.iter().flatten().find_map(|e| {
        match (e.operator.as_str(), e.values.as_deref()) {
            ("In", Some([value])) => Some((e.key.as_str(), value.as_str())),
            _ => None,
        }
    })
}

/// A label selector in kubectl's notation (`pool=web, zone in (a, b), !spot`), for messages;
/// `<all>` when empty.
pub(crate) fn describe(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    for expr in selector.match_expressions.iter().flatten() {
        let values = expr.values.clone().unwrap_or_default().join(", ");
        parts.push(match expr.operator.as_str() {
            "In" => format!("{} in ({values})", expr.key),
            "NotIn" => format!("{} notin ({values})", expr.key),
            "Exists" => expr.key.clone(),
            "DoesNotExist" => format!("!{}", expr.key),
            other => format!("{} {other} ({values})", expr.key),
        });
    }
    if parts.is_empty() {
        "<all>".to_owned()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn selector(
        match_labels: &[(&str, &str)],
        exprs: Vec<LabelSelectorRequirement>,
    ) -> LabelSelector {
        LabelSelector {
            match_labels: (!match_labels.is_empty()).then(|| labels(match_labels)),
            match_expressions: (!exprs.is_empty()).then_some(exprs),
        }
    }

    #[test]
    fn match_table() {
        let web_prod = labels(&[("app", "web"), ("env", "prod")]);
        let db = labels(&[("app", "db")]);
        let none = labels(&[]);
        let cases = [
            (
                "empty selects all",
                selector(&[], vec![]),
                [true, true, true],
            ),
            (
                "matchLabels",
                selector(&[("app", "web")], vec![]),
                [true, false, false],
            ),
            (
                "matchLabels all of",
                selector(&[("app", "web"), ("env", "dev")], vec![]),
                [false, false, false],
            ),
            (
                "In",
                selector(&[], vec![expr("app", "In", &["web", "db"])]),
                [true, true, false],
            ),
            (
                "NotIn matches absent key",
                selector(&[], vec![expr("app", "NotIn", &["web"])]),
                [false, true, true],
            ),
            (
                "Exists",
                selector(&[], vec![expr("env", "Exists", &[])]),
                [true, false, false],
            ),
            (
                "DoesNotExist",
                selector(&[], vec![expr("env", "DoesNotExist", &[])]),
                [false, true, true],
            ),
            (
                "labels and expressions are ANDed",
                selector(&[("app", "web")], vec![expr("env", "In", &["prod"])]),
                [true, false, false],
            ),
        ];
        for (name, sel, expected) in cases {
            let sel = Selector::new(&sel).unwrap_or_else(|e| panic!("{name}: {e}"));
            let got = [sel.matches(&web_prod), sel.matches(&db), sel.matches(&none)];
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn selectors_are_described_as_kubectl_writes_them() {
        let sel = selector(
            &[("pool", "web")],
            vec![
                expr("zone", "In", &["a", "b"]),
                expr("tier", "NotIn", &["batch"]),
                expr("ssd", "Exists", &[]),
                expr("spot", "DoesNotExist", &[]),
            ],
        );
        assert_eq!(
            describe(&sel),
            "pool=web, zone in (a, b), tier notin (batch), ssd, !spot"
        );
        assert_eq!(describe(&selector(&[], vec![])), "<all>");
    }

    #[test]
    fn invalid_selectors_are_rejected_with_the_field() {
        let cases = [
            (expr("a", "Equals", &["x"]), "unknown operator \"Equals\""),
            (expr("a", "In", &[]), "In needs at least one value"),
            (expr("a", "NotIn", &[]), "NotIn needs at least one value"),
            (expr("a", "Exists", &["x"]), "Exists takes no values"),
            (
                expr("a", "DoesNotExist", &["x"]),
                "DoesNotExist takes no values",
            ),
        ];
        for (requirement, message) in cases {
            let err = Selector::new(&selector(&[], vec![expr("ok", "Exists", &[]), requirement]))
                .unwrap_err();
            let text = err.to_string();
            assert!(text.contains(message), "{text}");
            assert!(text.contains("matchExpressions[1]"), "{text}");
        }
    }
}
