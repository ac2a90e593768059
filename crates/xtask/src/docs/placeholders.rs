//! The placeholders the docs write where a reader puts their own value, and the sample value each
//! is checked with: the same one everywhere, so that commands run against the demo cluster find
//! the objects its setup made. A `<…>` placeholder not in the table fails the check, so that each
//! new one is given a value here.

/// A sample executor ID.
pub const EXECUTOR_ID: &str =
    "sha256:abababababababababababababababababababababababababababababababab";

/// The node the demo cluster's setup creates for the commands that name one.
pub const NODE: &str = "node-17";

/// The policy the demo cluster's setup applies (deploy/examples/default.yaml).
pub const POLICY: &str = "default";

/// `<…>` placeholders, by their text.
const ANGLED: &[(&str, &str)] = &[
    ("node", NODE),
    ("policy", POLICY),
    ("old id", EXECUTOR_ID),
    ("new id", EXECUTOR_ID),
    (
        "64 hex digits",
        "abababababababababababababababababababababababababababababababab",
    ),
];

/// Words (or the value after a word's `=`) that stand for a value, or that the shell replaces
/// when the command runs (a manifest's script names its node from the Downward API and reads its
/// executor ID from a file).
const WORDS: &[(&str, &str)] = &[
    ("$NODE_NAME", NODE),
    ("$(cat /etc/k8sm/executor-id)", EXECUTOR_ID),
    ("sha256:…", EXECUTOR_ID),
    ("sha256:...", EXECUTOR_ID),
    ("NODE", NODE),
    ("NAME", POLICY),
    ("NAMESPACE", "k8sm-system"),
    ("REGISTRY", "registry.example.com"),
    ("N", "3"),
    ("M", "90"),
];

/// `text` with every `<…>` placeholder (`<node>`, `sha256:<64 hex digits>`) replaced, or the
/// first one the table does not know. A `<` followed by `(` or a blank is shell, not a
/// placeholder.
pub fn angled(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || " -_".contains(c)))
            .filter(|&end| end > 0 && after[end..].starts_with('>'));
        let Some(len) = name_len.filter(|_| after.starts_with(|c: char| c.is_ascii_alphanumeric()))
        else {
            out.push('<');
            rest = after;
            continue;
        };
        let name = &after[..len];
        let value = ANGLED
            .iter()
            .find(|(placeholder, _)| *placeholder == name)
            .map(|(_, value)| *value)
            .ok_or_else(|| {
                format!(
                    "no sample value for <{name}>: add one to crates/xtask/src/docs/placeholders.rs"
                )
            })?;
        out.push_str(value);
        rest = &after[len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `word` with a placeholder word replaced: the whole word, or what follows its first `=`.
pub fn word(word: &str) -> String {
    let lookup = |w: &str| WORDS.iter().find(|(p, _)| *p == w).map(|(_, v)| *v);
    if let Some(value) = lookup(word) {
        return value.to_owned();
    }
    match word.split_once('=') {
        Some((head, tail)) => match lookup(tail) {
            Some(value) => format!("{head}={value}"),
            None => word.to_owned(),
        },
        None => word.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn angled_placeholders_are_replaced_and_shell_is_left() {
        assert_eq!(
            angled("kubectl k8sm force <node> --to sha256:<64 hex digits>").unwrap(),
            format!("kubectl k8sm force node-17 --to {EXECUTOR_ID}")
        );
        assert_eq!(angled("a <(b) < c 2>x <B>").unwrap(), "a <(b) < c 2>x <B>");
        let error = angled("kubectl k8sm force <some node>").unwrap_err();
        assert!(error.contains("<some node>"), "{error}");
    }

    #[test]
    fn placeholder_words_are_replaced_whole_or_after_an_equals_sign() {
        assert_eq!(word("sha256:…"), EXECUTOR_ID);
        assert_eq!(word("NODE"), "node-17");
        assert_eq!(word("--policy=NAME"), "--policy=default");
        assert_eq!(word("NODES"), "NODES");
        assert_eq!(word("-N"), "-N");
    }
}
