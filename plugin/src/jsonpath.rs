//! kubectl's JSONPath templates (`-o jsonpath=…`), as k8s.io/client-go/util/jsonpath reads them:
//! text outside braces is printed as is; inside, `$` is the document and `.` or `@` the current
//! object, then `.field`, `['field']`, `[n]` (negative from the end), `[start:end:step]`, `[*]` or
//! `.*`, unions `[0,2]` and `['a','b']`, `..field` (recursive descent), filters
//! `[?(@.path == 'x')]` (also `!=`, `<`, `<=`, `>`, `>=`, or `[?(@.path)]`: it exists),
//! `{range PATH}…{end}` and string literals such as `{"\n"}`. The values of one expression are
//! joined by spaces; strings print bare, lists and objects as JSON. As kubectl's printer, a missing
//! key prints nothing.
//!
//! No maintained crate implements this template grammar: jsonpath-rust (in the tree through kube)
//! reads RFC 9535 queries, without braces, `range` or literals, and prints JSON, not kubectl text.

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

/// A parsed template.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    nodes: Vec<Node>,
}

/// Why a template does not parse, with the template, as kubectl says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub template: String,
    pub why: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error parsing jsonpath {}: {}", self.template, self.why)
    }
}

impl std::error::Error for ParseError {}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    Text(String),
    Path(Path),
    Range(Path, Vec<Node>),
}

#[derive(Clone, Debug, PartialEq)]
struct Path {
    /// `$`: from the document, not the current object.
    root: bool,
    steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// `.name`, `['a','b']`, `[0,2]`, `[*]`.
    Select(Vec<Selector>),
    /// `..` then what follows it, applied to every object below (and the current one).
    Descend(Vec<Selector>),
    Filter(Filter),
}

#[derive(Clone, Debug, PartialEq)]
enum Selector {
    Field(String),
    Index(i64),
    Slice(Option<i64>, Option<i64>, Option<i64>),
    All,
}

#[derive(Clone, Debug, PartialEq)]
struct Filter {
    path: Path,
    /// `None`: the path only has to exist.
    compare: Option<(Op, Value)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl std::str::FromStr for Template {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, ParseError> {
        let error = |why: String| ParseError {
            template: text.to_owned(),
            why,
        };
        let mut stack: Vec<(Path, Vec<Node>)> = Vec::new();
        let mut nodes = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let Some(open) = rest.find('{') else {
                nodes.push(Node::Text(rest.to_owned()));
                break;
            };
            if open > 0 {
                nodes.push(Node::Text(rest[..open].to_owned()));
            }
            let inside = &rest[open + 1..];
            let close = closing_brace(inside).ok_or_else(|| error("unclosed action".into()))?;
            let action = inside[..close].trim();
            rest = &inside[close + 1..];
            if action == "end" {
                let (path, outer) = stack
                    .pop()
                    .ok_or_else(|| error("not in range, nothing to end".into()))?;
                let body = std::mem::replace(&mut nodes, outer);
                nodes.push(Node::Range(path, body));
            } else if let Some(path) = action.strip_prefix("range ") {
                let path = Parser::new(path.trim()).path().map_err(error)?;
                stack.push((path, std::mem::take(&mut nodes)));
            } else if action.starts_with('"') || action.starts_with('\'') {
                nodes.push(Node::Text(literal(action).map_err(error)?));
            } else if action.is_empty() {
                return Err(error("empty action".into()));
            } else {
                nodes.push(Node::Path(Parser::new(action).path().map_err(error)?));
            }
        }
        if !stack.is_empty() {
            return Err(error("range without end".into()));
        }
        Ok(Self { nodes })
    }
}

/// Where the action that starts `text` ends: its `}` outside quotes.
fn closing_brace(text: &str) -> Option<usize> {
    let mut quote = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '}') => return Some(i),
            (None, _) => {}
        }
    }
    None
}

/// `"text"` or `'text'`, with Go's escapes `\n`, `\t`, `\r`, `\\` and the quotes.
fn literal(action: &str) -> Result<String, String> {
    let quote = action.chars().next().unwrap_or('"');
    let inner = action
        .strip_prefix(quote)
        .and_then(|a| a.strip_suffix(quote))
        .filter(|_| action.len() >= 2)
        .ok_or_else(|| format!("unterminated string {action}"))?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next() {
            Some('n') => '\n',
            Some('t') => '\t',
            Some('r') => '\r',
            Some(c @ ('\\' | '"' | '\'')) => c,
            other => return Err(format!("invalid escape \\{}", other.unwrap_or(' '))),
        });
    }
    Ok(out)
}

/// Reads one path, such as `.items[?(@.a=="b")].metadata.name`.
struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, at: 0 }
    }

    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn eat(&mut self, prefix: &str) -> bool {
        let found = self.rest().starts_with(prefix);
        if found {
            self.at += prefix.len();
        }
        found
    }

    fn path(mut self) -> Result<Path, String> {
        let path = self.steps()?;
        match self.rest() {
            "" => Ok(path),
            rest => Err(format!("unrecognized character in action: {rest}")),
        }
    }

    /// Steps up to the end of the text or of a filter's operand.
    fn steps(&mut self) -> Result<Path, String> {
        let root = self.eat("$");
        if !root {
            // `@` and a leading `.` both mean the current object.
            self.eat("@");
        }
        let mut steps = Vec::new();
        loop {
            if self.eat("..") {
                let selectors = if self.rest().starts_with('[') {
                    self.bracket()?
                } else {
                    vec![self.field()?]
                };
                steps.push(Step::Descend(selectors));
            } else if self.eat(".") {
                if self.rest().is_empty() && steps.is_empty() {
                    break;
                }
                steps.push(Step::Select(vec![self.field()?]));
            } else if self.rest().starts_with("[?") {
                steps.push(Step::Filter(self.filter()?));
            } else if self.rest().starts_with('[') {
                steps.push(Step::Select(self.bracket()?));
            } else {
                break;
            }
        }
        Ok(Path { root, steps })
    }

    fn field(&mut self) -> Result<Selector, String> {
        if self.eat("*") {
            return Ok(Selector::All);
        }
        let name: String = self
            .rest()
            .chars()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '/'))
            .collect();
        if name.is_empty() {
            return Err(format!("expected a field name at {:?}", self.rest()));
        }
        self.at += name.len();
        Ok(Selector::Field(name))
    }

    /// `[…]`: `*`, indices, a slice, or quoted names, comma-separated.
    fn bracket(&mut self) -> Result<Vec<Selector>, String> {
        let inner_start = self.at + 1;
        let close = closing_bracket(&self.text[inner_start..])
            .ok_or_else(|| "unterminated array".to_owned())?;
        let inner = &self.text[inner_start..inner_start + close];
        self.at = inner_start + close + 1;
        if inner.trim() == "*" {
            return Ok(vec![Selector::All]);
        }
        split_top(inner, ',')
            .into_iter()
            .map(|part| {
                let part = part.trim();
                if part.starts_with('\'') || part.starts_with('"') {
                    literal(part).map(Selector::Field)
                } else if part.contains(':') {
                    let bounds: Vec<&str> = part.split(':').collect();
                    if bounds.len() > 3 {
                        return Err(format!("invalid array slice {part}"));
                    }
                    let bound = |i: usize| -> Result<Option<i64>, String> {
                        match bounds.get(i).map(|b| b.trim()).unwrap_or("") {
                            "" => Ok(None),
                            b => b
                                .parse()
                                .map(Some)
                                .map_err(|_| format!("invalid array index {b}")),
                        }
                    };
                    Ok(Selector::Slice(bound(0)?, bound(1)?, bound(2)?))
                } else {
                    part.parse()
                        .map(Selector::Index)
                        .map_err(|_| format!("invalid array index {part}"))
                }
            })
            .collect()
    }

    /// `[?(@.path OP literal)]` or `[?(@.path)]`.
    fn filter(&mut self) -> Result<Filter, String> {
        let inner_start = self.at + 1;
        let close = closing_bracket(&self.text[inner_start..])
            .ok_or_else(|| "unterminated filter".to_owned())?;
        let inner = &self.text[inner_start..inner_start + close];
        self.at = inner_start + close + 1;
        let body = inner
            .strip_prefix("?(")
            .and_then(|b| b.strip_suffix(')'))
            .ok_or_else(|| format!("invalid filter [{inner}]: expected [?(…)]"))?
            .trim();
        const OPS: [(&str, Op); 6] = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ];
        let mut parser = Parser::new(body);
        let path = parser.steps()?;
        let rest = parser.rest().trim_start();
        if rest.is_empty() {
            return Ok(Filter {
                path,
                compare: None,
            });
        }
        let (op, operand) = OPS
            .iter()
            .find_map(|(text, op)| rest.strip_prefix(text).map(|r| (*op, r.trim())))
            .ok_or_else(|| format!("invalid filter operator in {body}"))?;
        let value = if operand.starts_with('\'') || operand.starts_with('"') {
            Value::String(literal(operand)?)
        } else {
            serde_json::from_str(operand)
                .map_err(|_| format!("invalid filter operand {operand}"))?
        };
        Ok(Filter {
            path,
            compare: Some((op, value)),
        })
    }
}

/// Where the bracket that `text` is inside of closes: its `]` outside quotes and nested brackets.
fn closing_bracket(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') if depth == 0 => return Some(i),
            (None, ']') => depth -= 1,
            (None, _) => {}
        }
    }
    None
}

/// `text` split at `separator` outside quotes.
fn split_top(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut quote = None;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, c) if c == separator => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            (None, _) => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

impl Template {
    /// The template's text for `document`.
    pub fn render(&self, document: &Value) -> String {
        let mut out = String::new();
        render_nodes(&self.nodes, document, document, &mut out);
        out
    }

    /// The values of a template that is one expression (a custom column's), in order.
    pub fn values<'v>(&self, document: &'v Value) -> Vec<&'v Value> {
        self.nodes
            .iter()
            .flat_map(|node| match node {
                Node::Path(path) => path.eval(document, document),
                Node::Text(_) | Node::Range(..) => Vec::new(),
            })
            .collect()
    }
}

fn render_nodes(nodes: &[Node], root: &Value, current: &Value, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Path(path) => {
                let texts: Vec<String> = path.eval(root, current).into_iter().map(text).collect();
                out.push_str(&texts.join(" "));
            }
            Node::Range(path, body) => {
                for item in path.eval(root, current) {
                    render_nodes(body, root, item, out);
                }
            }
        }
    }
}

/// A value as kubectl prints it: strings bare, lists and objects as JSON, null as nothing.
pub fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_) => value.to_string(),
    }
}

impl Path {
    fn eval<'v>(&self, root: &'v Value, current: &'v Value) -> Vec<&'v Value> {
        let mut values = vec![if self.root { root } else { current }];
        for step in &self.steps {
            values = match step {
                Step::Select(selectors) => values
                    .into_iter()
                    .flat_map(|v| select(v, selectors))
                    .collect(),
                Step::Descend(selectors) => values
                    .into_iter()
                    .flat_map(descendants)
                    .flat_map(|v| select(v, selectors))
                    .collect(),
                Step::Filter(filter) => values
                    .into_iter()
                    .flat_map(|v| match v {
                        Value::Array(items) => items.iter().collect(),
                        other => vec![other],
                    })
                    .filter(|v| filter.matches(root, v))
                    .collect(),
            };
        }
        values
    }
}

fn select<'v>(value: &'v Value, selectors: &[Selector]) -> Vec<&'v Value> {
    selectors
        .iter()
        .flat_map(|selector| match (selector, value) {
            (Selector::Field(name), Value::Object(map)) => map.get(name).into_iter().collect(),
            (Selector::All, Value::Object(map)) => map.values().collect(),
            (Selector::All, Value::Array(items)) => items.iter().collect(),
            (Selector::Index(i), Value::Array(items)) => index(*i, items.len())
                .and_then(|i| items.get(i))
                .into_iter()
                .collect(),
            (Selector::Slice(start, end, step), Value::Array(items)) => {
                slice(items, *start, *end, *step)
            }
            _ => Vec::new(),
        })
        .collect()
}

fn index(i: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let i = if i < 0 { len + i } else { i };
    usize::try_from(i).ok().filter(|_| i < len)
}

/// Python's slice semantics, as client-go's.
fn slice(items: &[Value], start: Option<i64>, end: Option<i64>, step: Option<i64>) -> Vec<&Value> {
    let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
    let clamp = |i: i64| if i < 0 { (len + i).max(0) } else { i.min(len) };
    let step = step.unwrap_or(1);
    if step <= 0 {
        return Vec::new();
    }
    let (start, end) = (clamp(start.unwrap_or(0)), clamp(end.unwrap_or(len)));
    (start..end)
        .step_by(usize::try_from(step).unwrap_or(1))
        .filter_map(|i| items.get(usize::try_from(i).ok()?))
        .collect()
}

/// `value` and everything below it, depth first.
fn descendants(value: &Value) -> Vec<&Value> {
    let mut out = vec![value];
    match value {
        Value::Array(items) => out.extend(items.iter().flat_map(descendants)),
        Value::Object(map) => out.extend(map.values().flat_map(descendants)),
        _ => {}
    }
    out
}

impl Filter {
    fn matches(&self, root: &Value, item: &Value) -> bool {
        let found = self.path.eval(root, item);
        let Some((op, operand)) = &self.compare else {
            return !found.is_empty();
        };
        found.into_iter().any(|v| {
            let ordering = match (v, operand) {
                (Value::Number(a), Value::Number(b)) => a
                    .as_f64()
                    .zip(b.as_f64())
                    .and_then(|(a, b)| a.partial_cmp(&b)),
                (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
                (a, b) => (a == b).then_some(Ordering::Equal),
            };
            match op {
                Op::Eq => ordering == Some(Ordering::Equal),
                Op::Ne => ordering != Some(Ordering::Equal),
                Op::Lt => ordering == Some(Ordering::Less),
                Op::Le => matches!(ordering, Some(Ordering::Less | Ordering::Equal)),
                Op::Gt => ordering == Some(Ordering::Greater),
                Op::Ge => matches!(ordering, Some(Ordering::Greater | Ordering::Equal)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pods() -> Value {
        json!({
            "kind": "List",
            "items": [
                {"metadata": {"name": "web-1", "labels": {"app": "web"}},
                 "status": {"restarts": 0, "ready": true}},
                {"metadata": {"name": "web-2", "labels": {"app": "web"}},
                 "status": {"restarts": 3, "ready": false}},
                {"metadata": {"name": "db-0", "labels": {"app.kubernetes.io/name": "db"}},
                 "status": {"restarts": 1}},
            ]
        })
    }

    fn run(template: &str) -> String {
        template
            .parse::<Template>()
            .unwrap_or_else(|e| panic!("{e}"))
            .render(&pods())
    }

    #[test]
    fn the_examples_of_kubectls_reference() {
        assert_eq!(run("{.kind}"), "List");
        assert_eq!(run("{.items[*].metadata.name}"), "web-1 web-2 db-0");
        assert_eq!(run("{$.items[0].metadata.name}"), "web-1");
        assert_eq!(run("{.items[-1].metadata.name}"), "db-0");
        assert_eq!(run("{.items[0:2].metadata.name}"), "web-1 web-2");
        assert_eq!(run("{.items[::2].metadata.name}"), "web-1 db-0");
        assert_eq!(run("{..name}"), "web-1 web-2 db-0");
        assert_eq!(
            run("{.items[*]['metadata.name']}"),
            "",
            "a quoted name is one key"
        );
        assert_eq!(
            run(
                "{.items[0].metadata.labels['app']}{.items[2].metadata.labels['app.kubernetes.io/name']}"
            ),
            "webdb"
        );
        assert_eq!(
            run("{.items[?(@.status.restarts > 0)].metadata.name}"),
            "web-2 db-0"
        );
        assert_eq!(
            run("{.items[?(@.metadata.labels.app==\"web\")].status.restarts}"),
            "0 3"
        );
        assert_eq!(
            run("{.items[?(@.status.ready)].metadata.name}"),
            "web-1 web-2"
        );
        assert_eq!(
            run("{.items[?(@.status.ready==false)].metadata.name}"),
            "web-2"
        );
        assert_eq!(run("{.items[0,2].metadata.name}"), "web-1 db-0");
        assert_eq!(
            run("{.items[0].metadata['name','labels']}"),
            "web-1 {\"app\":\"web\"}"
        );
    }

    #[test]
    fn range_and_literals_print_one_line_per_item() {
        assert_eq!(
            run(r#"{range .items[*]}{.metadata.name}{"\t"}{.status.restarts}{"\n"}{end}"#),
            "web-1\t0\nweb-2\t3\ndb-0\t1\n"
        );
        assert_eq!(
            run("names: {range .items[*]}[{.metadata.name}]{end}."),
            "names: [web-1][web-2][db-0]."
        );
        assert_eq!(
            run("{range .items[*]}{range .metadata.labels.*}{@} {end}{end}"),
            "web web db "
        );
        assert_eq!(run("{'a}b'}"), "a}b", "a brace inside quotes");
    }

    #[test]
    fn values_print_as_kubectl_prints_them() {
        assert_eq!(run("{.items[1].status}"), r#"{"ready":false,"restarts":3}"#);
        assert_eq!(run("{.items[1].status.ready}"), "false");
        assert_eq!(
            run("{.missing} {.items[7]}|"),
            " |",
            "missing keys print nothing"
        );
        assert_eq!(run("plain text"), "plain text");
    }

    #[test]
    fn malformed_templates_say_what_is_wrong() {
        let error = |t: &str| t.parse::<Template>().unwrap_err().to_string();
        assert_eq!(
            error("{.items[0}"),
            "error parsing jsonpath {.items[0}: unterminated array"
        );
        assert!(error("{.a").ends_with("unclosed action"));
        assert!(error("{range .items[*]}{.a}").ends_with("range without end"));
        assert!(error("{end}").ends_with("not in range, nothing to end"));
        assert!(error("{.items[x]}").ends_with("invalid array index x"));
        assert!(error("{.a b}").contains("unrecognized character"));
        assert!(error("{.items[?(@.a ~ 1)]}").contains("invalid filter operator"));
        assert!(error("{}").ends_with("empty action"));
    }
}
