//! The metric names a PromQL expression reads, for checking dashboards and alerts against a scrape:
//! a tokenizer that skips strings, label matchers (`{…}`), ranges (`[…]`), label lists of `by`,
//! `without`, `on`, `ignoring` and `group_*`, functions, keywords, numbers and Grafana variables.
//! Every other identifier is a metric name (including `name{…}` and a bare `name`).

use std::collections::BTreeSet;

/// Keywords that are never metric names: binary operators, modifiers, and the special values.
const KEYWORDS: [&str; 11] = [
    "and", "or", "unless", "bool", "offset", "inf", "nan", "start", "end", "atan2", "@",
];

/// Keywords followed by a parenthesised list of label names.
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names `expr` reads. Grafana's `label_values(metric, label)` reads `metric`.
pub fn metric_names(expr: &str) -> Result<BTreeSet<String>, String> {
    let expr = expr.trim();
    if let Some(args) = expr
        .strip_prefix("label_values(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        let metric = args.rsplit_once(',').map_or(args, |(metric, _)| metric);
        return metric_names(metric);
    }
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => i = skip_string(&chars, i)?,
            '{' => i = skip_until(&chars, i, '}')?,
            '[' => i = skip_until(&chars, i, ']')?,
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            // Grafana variables: $name, ${name}, $__rate_interval.
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    i = skip_until(&chars, i, '}')?;
                } else {
                    while i < chars.len() && is_word(chars[i]) {
                        i += 1;
                    }
                }
            }
            c if c.is_ascii_digit() || (c == '.' && next_is_digit(&chars, i)) => {
                // A number or a duration (`1e3`, `0x1f`, `5m`): one word.
                while i < chars.len() && (is_word(chars[i]) || chars[i] == '.') {
                    i += 1;
                }
            }
            c if is_word_start(c) => {
                let start = i;
                while i < chars.len() && (is_word(chars[i]) || chars[i] == ':') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let after = skip_spaces(&chars, i);
                let lower = word.to_ascii_lowercase();
                if LABEL_LISTS.contains(&lower.as_str()) {
                    if chars.get(after) == Some(&'(') {
                        i = skip_until(&chars, after, ')')?;
                    }
                } else if chars.get(after) == Some(&'(')
                    || KEYWORDS.contains(&lower.as_str())
                    || ["by", "without"].contains(&next_word(&chars, after).as_str())
                {
                    // A function, an aggregation (`sum by (…) (…)` too), or a keyword.
                } else {
                    names.insert(word);
                }
            }
            _ => i += 1,
        }
    }
    Ok(names)
}

fn is_word_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn next_is_digit(chars: &[char], i: usize) -> bool {
    chars.get(i + 1).is_some_and(char::is_ascii_digit)
}

/// The word starting at `i`, lower-cased (empty if none).
fn next_word(chars: &[char], i: usize) -> String {
    chars[i.min(chars.len())..]
        .iter()
        .take_while(|c| is_word(**c))
        .collect::<String>()
        .to_ascii_lowercase()
}

fn skip_spaces(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    i
}

/// Past the string opening at `i` (escapes honoured, but in raw backquoted strings).
fn skip_string(chars: &[char], i: usize) -> Result<usize, String> {
    let quote = chars[i];
    let mut j = i + 1;
    while j < chars.len() {
        match chars[j] {
            '\\' if quote != '`' => j += 2,
            c if c == quote => return Ok(j + 1),
            _ => j += 1,
        }
    }
    Err(format!("unterminated string at {i}"))
}

/// Past the `close` matching the bracket at `i`, skipping strings inside.
fn skip_until(chars: &[char], i: usize, close: char) -> Result<usize, String> {
    let open = chars[i];
    let mut depth = 0;
    let mut j = i;
    while j < chars.len() {
        match chars[j] {
            '"' | '\'' | '`' => {
                j = skip_string(chars, j)?;
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return Ok(j + 1);
                }
            }
            _ => {}
        }
        j += 1;
    }
    Err(format!("no {close} closes the {open} at {i}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(expr: &str) -> Vec<String> {
        metric_names(expr).unwrap().into_iter().collect()
    }

    #[test]
    fn names_outside_matchers_functions_and_label_lists() {
        assert_eq!(
            names(
                r#"sum by (policy, phase) (rate(k8sm_evictions_total{policy=~"$policy", reason!="a{b}"}[5m] offset 1h))
                   / on (policy) group_left (phase) max without (pod) (k8sm_nodes) > bool 0.5e3"#
            ),
            ["k8sm_evictions_total", "k8sm_nodes"]
        );
        assert_eq!(
            names("histogram_quantile(0.95, sum by (le) (rate(x_bucket[$__rate_interval])))"),
            ["x_bucket"]
        );
        assert_eq!(
            names(
                r#"max(k8sm_is_leader) < 1 or absent(k8sm_is_leader) unless on() vector(1) and inf"#
            ),
            ["k8sm_is_leader"]
        );
        assert_eq!(
            names("a unless on (policy) (changes(b[30m:1m])) and c @ start()"),
            ["a", "b", "c"]
        );
        assert_eq!(names("label_values(k8sm_nodes, policy)"), ["k8sm_nodes"]);
        assert_eq!(names("ns:rule:rate5m * ${factor}"), ["ns:rule:rate5m"]);
        assert!(metric_names(r#"x{a="b}"#).is_err());
    }
}
