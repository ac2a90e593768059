//! `docs/design.md` is the design of record (its §11): it must mention every Event reason,
//! condition reason and contract key that the code defines, so that a new one cannot ship
//! undocumented. The oracle is the code's own definitions, read from its sources, never a list
//! copied by hand; an item counts as mentioned when the design has it as a whole code span
//! (`` `Evicted` ``).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use k8sm_planner::Reason;

/// What the design must mention: each text, with where the code defines it.
type Items = BTreeMap<String, Vec<String>>;

#[test]
fn the_design_mentions_every_reason_and_contract_key() {
    let root = workspace_root();
    let design_path = root.join("docs").join("design.md");
    let design = fs::read_to_string(&design_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", design_path.display()));

    let mut items = Items::new();
    let reasons = reasons(&mut items);
    let api = package_dir(&root, "k8sm-api");
    let keys = api_strings(&api.join("src"), &mut items);
    let controller = package_dir(&root, "k8sm-controller");
    let conditions = condition_reasons(&controller.join("src"), &mut items);
    let mut literal_reasons = 0;
    for package in ["k8sm-controller", "kubectl-k8sm"] {
        literal_reasons += literal_reasons_in(&package_dir(&root, package).join("src"), &mut items);
    }
    eprintln!(
        "checked {} items: {reasons} planner reasons, {keys} k8sm-api contract strings, {conditions} controller \
         condition reasons, {literal_reasons} literal reasons",
        items.len()
    );

    // A scan that finds nothing has lost its way (a builder renamed, a file format changed): fail,
    // never pass vacuously.
    assert!(
        reasons >= Reason::ALL.len(),
        "found {reasons} reasons, fewer than Reason::ALL"
    );
    assert!(keys > 0, "found no `pub const` string in {}", api.display());
    assert!(
        conditions > 0,
        "found no condition reason in the arguments of a `condition(…)` call under {}: did the controller's \
         condition builder change? Update this test to read it",
        controller.display()
    );

    let missing: Vec<String> = items
        .iter()
        .filter(|(text, _)| !mentions(&design, text))
        .map(|(text, origins)| format!("`{text}` ({})", origins.join("; ")))
        .collect();
    assert!(
        missing.is_empty(),
        "{} does not mention {} item(s) that the code defines; add each as a code span where it belongs:\n  {}",
        design_path.display(),
        missing.len(),
        missing.join("\n  ")
    );
}

/// Whether the design has `text` as a whole code span.
fn mentions(design: &str, text: &str) -> bool {
    design.contains(&format!("`{text}`"))
}

fn add(items: &mut Items, text: &str, origin: String) {
    let origins = items.entry(text.to_owned()).or_default();
    if !origins.contains(&origin) {
        origins.push(origin);
    }
}

/// Every `Reason`: `Reason::ALL`, and the variants of `pub enum Reason` read from the planner's
/// sources (found by content, wherever the file is), so that a variant left out of `ALL` is checked
/// too. Returns how many.
fn reasons(items: &mut Items) -> usize {
    let mut names: Vec<String> = Reason::ALL.iter().map(|r| r.as_str().to_owned()).collect();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let declared: Vec<(PathBuf, Vec<String>)> = rust_files(&src)
        .into_iter()
        .filter_map(|path| {
            let code = code_of(&path);
            enum_variants(&code, "Reason").map(|variants| (path, variants))
        })
        .collect();
    let [(path, variants)] = declared.as_slice() else {
        panic!(
            "expected `pub enum Reason` in exactly one file under {}, found it in {:?}",
            src.display(),
            declared.iter().map(|(p, _)| p).collect::<Vec<_>>()
        );
    };
    assert!(
        !variants.is_empty(),
        "read no variant of `pub enum Reason` in {}",
        path.display()
    );
    for variant in variants {
        if !names.contains(variant) {
            names.push(variant.clone());
        }
    }
    for name in &names {
        // A Reason's name is its variant's name (the planner's own tests hold `as_str` to the serde
        // name).
        add(items, name, "k8sm_planner::Reason".to_owned());
    }
    names.len()
}

/// The contract strings of `k8sm-api`: the value of each `pub const` string, or string in a
/// `pub const` array, in its sources, except schema text (anchored patterns, and rules or messages
/// with whitespace). Returns how many distinct ones.
fn api_strings(src: &Path, items: &mut Items) -> usize {
    let mut found = BTreeSet::new();
    for path in rust_files(src) {
        let code = code_of(&path);
        for (name, value) in string_consts(&code) {
            if is_schema_text(&value) {
                continue;
            }
            let file = path.strip_prefix(src).unwrap_or(&path).display();
            add(items, &value, format!("k8sm-api const {name} in {file}"));
            found.insert(value);
        }
    }
    found.len()
}

/// Patterns, CEL rules and messages of the CRD schema: checked by the CRD's own tests, not design
/// vocabulary.
fn is_schema_text(value: &str) -> bool {
    value.is_empty() || value.starts_with('^') || value.chars().any(char::is_whitespace)
}

/// The condition reasons the controller writes from literals: CamelCase string literals in the
/// arguments of calls of a function named `condition`. Returns how many distinct ones.
fn condition_reasons(src: &Path, items: &mut Items) -> usize {
    camel_case_literals(
        src,
        items,
        |code| call_arguments(code, "condition"),
        "controller condition reason",
    )
}

/// Reasons built from literals rather than from a `Reason` (the controller's and the plugin's Event
/// or other reasons): CamelCase string literals in the value of a `reason:` field or the argument
/// of a `reason(…)` call. Returns how many distinct ones.
fn literal_reasons_in(src: &Path, items: &mut Items) -> usize {
    camel_case_literals(src, items, reason_expressions, "literal reason")
}

/// The CamelCase string literals inside the `expressions` of each source file under `src`, added to
/// `items` as `what` in their file. Returns how many distinct ones.
fn camel_case_literals(
    src: &Path,
    items: &mut Items,
    expressions: impl Fn(&str) -> Vec<String>,
    what: &str,
) -> usize {
    let mut found = BTreeSet::new();
    for path in rust_files(src) {
        let code = code_of(&path);
        let file = path.strip_prefix(src).unwrap_or(&path).display();
        for expression in expressions(&code) {
            for literal in string_literals(&expression) {
                if is_camel_case(&literal) {
                    add(items, &literal, format!("{what} in {file}"));
                    found.insert(literal);
                }
            }
        }
    }
    found.len()
}

fn is_camel_case(text: &str) -> bool {
    text.starts_with(|c: char| c.is_ascii_uppercase())
        && text.chars().all(|c| c.is_ascii_alphanumeric())
}

// ---------------------------------------------------------------------------------------------------------------
// Finding the sources.

/// The workspace's root: the nearest ancestor of this crate whose Cargo.toml declares the
/// workspace.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| {
            fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|toml| toml.contains("[workspace]"))
        })
        .expect("a Cargo workspace above this crate")
        .to_path_buf()
}

/// The directory of the workspace's package `name`, wherever it is (a few levels below the root).
fn package_dir(root: &Path, name: &str) -> PathBuf {
    let wanted = format!("name = \"{name}\"");
    let mut found = Vec::new();
    let mut pending = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = pending.pop() {
        if let Ok(toml) = fs::read_to_string(dir.join("Cargo.toml")) {
            let mut in_package = false;
            for line in toml.lines().map(str::trim) {
                if line.starts_with('[') {
                    in_package = line == "[package]";
                } else if in_package && line == wanted {
                    found.push(dir.clone());
                }
            }
        }
        if depth < 3 {
            for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                let skip = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_none_or(|n| n.starts_with('.') || n == "target");
                if path.is_dir() && !skip {
                    pending.push((path, depth + 1));
                }
            }
        }
    }
    match found.as_slice() {
        [dir] => dir.clone(),
        _ => panic!(
            "expected one package {name} under {}, found {found:?}",
            root.display()
        ),
    }
}

/// The Rust files under `dir`, sorted, without test files (`tests.rs`, `*_tests.rs`, anything under
/// `tests/`).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries =
            fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if name != "tests" {
                    pending.push(path);
                }
            } else if let Some(stem) = name.strip_suffix(".rs")
                && stem != "tests"
                && !stem.ends_with("_tests")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// A file's code as the compiler sees it outside tests: comments and `#[cfg(test)]` items blanked
/// out.
fn code_of(path: &Path) -> String {
    let text =
        fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    without_test_items(&without_comments(&text))
}

// ---------------------------------------------------------------------------------------------------------------
// A small lexer: enough of Rust's string, char and comment syntax to read definitions without a
// parser.

/// A string literal (`"…"`, `r#"…"#`, `b"…"`) or char literal starting at `i`: where it ends, and
/// the string's value (`None` for a char literal). `None` when no literal starts there.
fn literal_at(code: &[u8], i: usize) -> Option<(usize, Option<String>)> {
    let ident_before = i > 0 && (code[i - 1].is_ascii_alphanumeric() || code[i - 1] == b'_');
    match code[i] {
        b'"' => Some(quoted(code, i + 1)),
        b'\'' => char_literal(code, i).map(|end| (end, None)),
        b'r' | b'b' if !ident_before => {
            let mut j = i + 1;
            if code[i] == b'b' && code.get(j) == Some(&b'r') {
                j += 1;
            }
            let raw = j > i + 1 || code[i] == b'r';
            if !raw {
                return (code.get(j) == Some(&b'"')).then(|| quoted(code, j + 1));
            }
            let hashes = code[j..].iter().take_while(|&&c| c == b'#').count();
            if code.get(j + hashes) != Some(&b'"') {
                return None;
            }
            let start = j + hashes + 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let end = (start..code.len())
                .find(|&k| code[k..].starts_with(&close))
                .unwrap_or(code.len());
            let value = String::from_utf8_lossy(&code[start..end]).into_owned();
            Some(((end + close.len()).min(code.len()), Some(value)))
        }
        _ => None,
    }
}

/// The rest of a `"…"` literal whose text starts at `start`: where it ends, and its value with
/// escapes applied.
fn quoted(code: &[u8], start: usize) -> (usize, Option<String>) {
    let mut value = Vec::new();
    let mut k = start;
    while k < code.len() {
        match code[k] {
            b'"' => return (k + 1, Some(String::from_utf8_lossy(&value).into_owned())),
            b'\\' if k + 1 < code.len() => {
                k += 1;
                match code[k] {
                    b'n' => value.push(b'\n'),
                    b't' => value.push(b'\t'),
                    b'r' => value.push(b'\r'),
                    b'0' => value.push(0),
                    // A line continuation: the newline and the next line's leading whitespace go.
                    b'\n' | b'\r' => {
                        while k + 1 < code.len() && code[k + 1].is_ascii_whitespace() {
                            k += 1;
                        }
                    }
                    b'u' => {
                        let close = code[k..].iter().position(|&c| c == b'}').map(|p| k + p);
                        if let Some(close) = close {
                            let hex = String::from_utf8_lossy(&code[k + 2..close]).into_owned();
                            let c = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                            value.extend(c.unwrap_or('\u{fffd}').to_string().bytes());
                            k = close;
                        }
                    }
                    b'x' if k + 2 < code.len() => {
                        let hex = String::from_utf8_lossy(&code[k + 1..k + 3]).into_owned();
                        value.push(u8::from_str_radix(&hex, 16).unwrap_or(b'?'));
                        k += 2;
                    }
                    other => value.push(other),
                }
            }
            other => value.push(other),
        }
        k += 1;
    }
    (
        code.len(),
        Some(String::from_utf8_lossy(&value).into_owned()),
    )
}

/// Where a char literal starting at `i` ends; `None` for a lifetime or label (`'a`).
fn char_literal(code: &[u8], i: usize) -> Option<usize> {
    if code.get(i + 1) == Some(&b'\\') {
        let close = code[i + 2..].iter().position(|&c| c == b'\'')?;
        // `'\''`: the escaped quote is the char, the next quote closes it.
        let close = if close == 0 { i + 3 } else { i + 2 + close };
        return Some(close + 1);
    }
    // One char of up to four bytes, then the closing quote.
    let first = *code.get(i + 1)?;
    let width = match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    };
    (code.get(i + 1 + width) == Some(&b'\'')).then_some(i + 2 + width)
}

/// `text` with every comment replaced by spaces (newlines kept), strings and chars left as they
/// are.
fn without_comments(text: &str) -> String {
    let code = text.as_bytes();
    let mut out = code.to_vec();
    let mut i = 0;
    while i < code.len() {
        if let Some((end, _)) = literal_at(code, i) {
            i = end;
        } else if code[i..].starts_with(b"//") {
            while i < code.len() && code[i] != b'\n' {
                out[i] = b' ';
                i += 1;
            }
        } else if code[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < code.len() {
                if code[i..].starts_with(b"/*") {
                    depth += 1;
                    out[i] = b' ';
                    out[i + 1] = b' ';
                    i += 2;
                } else if code[i..].starts_with(b"*/") {
                    depth -= 1;
                    out[i] = b' ';
                    out[i + 1] = b' ';
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if code[i] != b'\n' && code[i].is_ascii() {
                        out[i] = b' ';
                    }
                    i += 1;
                }
            }
        } else {
            i += 1;
        }
    }
    // Only ASCII bytes were replaced (by ASCII), and only outside multi-byte characters'
    // continuation bytes, except inside block comments where non-ASCII bytes were kept whole.
    String::from_utf8(out).expect("blanking ASCII keeps UTF-8 valid")
}

/// `code` (without comments) with every item or statement under `#[cfg(test)]` blanked out.
fn without_test_items(code: &str) -> String {
    let bytes = code.as_bytes();
    let mut out = bytes.to_vec();
    let mut from = 0;
    while let Some(found) = code[from..].find("#[cfg(test)]") {
        let start = from + found;
        let mut i = start + "#[cfg(test)]".len();
        // Further attributes, then the item: up to its `;`, or its body's closing brace.
        loop {
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            if bytes[i..].starts_with(b"#[") {
                i = matching(bytes, i + 1).map_or(bytes.len(), |close| close + 1);
            } else {
                break;
            }
        }
        let mut end = bytes.len();
        while i < bytes.len() {
            if let Some((after, _)) = literal_at(bytes, i) {
                i = after;
                continue;
            }
            match bytes[i] {
                b';' => {
                    end = i + 1;
                    break;
                }
                b'{' => {
                    end = matching(bytes, i).map_or(bytes.len(), |close| close + 1);
                    break;
                }
                b'(' | b'[' => i = matching(bytes, i).map_or(bytes.len(), |close| close + 1),
                _ => i += 1,
            }
        }
        for byte in &mut out[start..end] {
            if *byte != b'\n' && byte.is_ascii() {
                *byte = b' ';
            }
        }
        from = end;
    }
    String::from_utf8(out).expect("blanking ASCII keeps UTF-8 valid")
}

/// The index of the bracket that closes the one at `open` (`(`, `[` or `{`), skipping literals.
fn matching(code: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < code.len() {
        if let Some((after, _)) = literal_at(code, i) {
            i = after;
            continue;
        }
        match code[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The values of the string literals in `code`, in order.
fn string_literals(code: &str) -> Vec<String> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match literal_at(bytes, i) {
            Some((after, value)) => {
                out.extend(value);
                i = after;
            }
            None => i += 1,
        }
    }
    out
}

/// Whether `word` occurs at `i` as a whole identifier.
fn word_at(code: &[u8], i: usize, word: &str) -> bool {
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    code[i..].starts_with(word.as_bytes())
        && (i == 0 || !is_ident(code[i - 1]))
        && code.get(i + word.len()).is_none_or(|&c| !is_ident(c))
}

/// Each occurrence of `word` outside literals, by position.
fn occurrences(code: &str, word: &str) -> Vec<usize> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if let Some((after, _)) = literal_at(bytes, i) {
            i = after;
        } else {
            if word_at(bytes, i, word) {
                found.push(i);
            }
            i += 1;
        }
    }
    found
}

fn skip_whitespace(code: &[u8], mut i: usize) -> usize {
    while i < code.len() && code[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The variants of `pub enum {name}` if `code` declares it (attributes and discriminants ignored).
fn enum_variants(code: &str, name: &str) -> Option<Vec<String>> {
    let bytes = code.as_bytes();
    let at = occurrences(code, "enum").into_iter().find(|&i| {
        let j = skip_whitespace(bytes, i + "enum".len());
        word_at(bytes, j, name) && code[..i].trim_end().ends_with("pub")
    })?;
    let open = at + code[at..].find('{')?;
    let close = matching(bytes, open)?;
    let mut variants = Vec::new();
    let mut i = open + 1;
    while i < close {
        i = skip_whitespace(bytes, i);
        if bytes[i..].starts_with(b"#[") {
            i = matching(bytes, i + 1)? + 1;
            continue;
        }
        let start = i;
        while i < close && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i > start {
            variants.push(code[start..i].to_owned());
        }
        // Past the variant's fields or discriminant, to the next comma.
        while i < close && bytes[i] != b',' {
            match bytes[i] {
                b'(' | b'{' | b'[' => i = matching(bytes, i)? + 1,
                _ => i += 1,
            }
        }
        i += 1;
    }
    Some(variants)
}

/// `(NAME, value)` of every `pub const NAME: <a type with &str> = <literal or array of literals>;`
/// in `code`.
fn string_consts(code: &str) -> Vec<(String, String)> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    for at in occurrences(code, "const") {
        if !code[..at].trim_end().ends_with("pub") {
            continue;
        }
        let Some(colon) = code[at..].find(':').map(|p| at + p) else {
            continue;
        };
        let name = code[at + "const".len()..colon].trim();
        // Not a `pub const fn`, whose first `:` is a parameter's.
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let Some(equals) = code[colon..].find('=').map(|p| colon + p) else {
            continue;
        };
        let ty: String = code[colon + 1..equals]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if !ty.contains("&str") && !ty.contains("&'staticstr") {
            continue;
        }
        // The value: up to the `;` that ends the item.
        let mut i = equals + 1;
        while i < bytes.len() && bytes[i] != b';' {
            match literal_at(bytes, i) {
                Some((after, _)) => i = after,
                None => match bytes[i] {
                    b'(' | b'[' | b'{' => i = matching(bytes, i).map_or(bytes.len(), |c| c + 1),
                    _ => i += 1,
                },
            }
        }
        for value in string_literals(&code[equals + 1..i.min(bytes.len())]) {
            out.push((name.to_owned(), value));
        }
    }
    out
}

/// The argument text of every call `{function}(…)` in `code` (not its definition, nor a method or
/// path call).
fn call_arguments(code: &str, function: &str) -> Vec<String> {
    let bytes = code.as_bytes();
    occurrences(code, function)
        .into_iter()
        .filter(|&i| {
            let before = code[..i].trim_end();
            !before.ends_with("fn") && !before.ends_with('.') && !before.ends_with("::")
        })
        .filter_map(|i| {
            let open = skip_whitespace(bytes, i + function.len());
            (bytes.get(open) == Some(&b'(')).then_some(open)
        })
        .filter_map(|open| matching(bytes, open).map(|close| code[open + 1..close].to_owned()))
        .collect()
}

/// The expression of every `reason: …` field value (up to its `,` or the closing bracket) and the
/// argument text of every `reason(…)` call in `code`.
fn reason_expressions(code: &str) -> Vec<String> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    for at in occurrences(code, "reason") {
        let i = skip_whitespace(bytes, at + "reason".len());
        match bytes.get(i) {
            Some(b'(') => {
                if let Some(close) = matching(bytes, i) {
                    out.push(code[i + 1..close].to_owned());
                }
            }
            Some(b':') if bytes.get(i + 1) != Some(&b':') => {
                let start = i + 1;
                let mut j = start;
                while j < bytes.len() && !matches!(bytes[j], b',' | b';' | b')' | b']' | b'}') {
                    match literal_at(bytes, j) {
                        Some((after, _)) => j = after,
                        None => match bytes[j] {
                            b'(' | b'[' | b'{' => {
                                j = matching(bytes, j).map_or(bytes.len(), |c| c + 1)
                            }
                            _ => j += 1,
                        },
                    }
                }
                out.push(code[start..j.min(bytes.len())].to_owned());
            }
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------------------------
// The readers themselves, on small samples.

#[test]
fn consts_are_read_with_their_values_whatever_their_layout() {
    let code = without_test_items(&without_comments(
        r##"
        /// A key. "not this"
        pub const A_KEY: &str = "k8s.mesosphere.io/a";
        pub const LONG: &str =
            "cluster-autoscaler.kubernetes.io/safe-to-evict";
        pub const RULE: &str = "!self.matches('^x$') \
             || self.size() > 0";
        pub const FLAGS: [&str; 2] = ["node-ip", r#"provider-id"#];
        pub const PAIRS: [(&str, &str); 1] = [(A_KEY, LONG)];
        const PRIVATE: &str = "private";
        pub const COUNT: usize = 3;
        pub mod kinds {
            pub const NESTED: &str = "Nested";
        }
        #[cfg(test)]
        mod tests {
            pub const IN_TESTS: &str = "in-tests";
        }
        "##,
    ));
    let consts = string_consts(&code);
    let value = |name: &str| {
        consts
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(value("A_KEY"), ["k8s.mesosphere.io/a"]);
    assert_eq!(
        value("LONG"),
        ["cluster-autoscaler.kubernetes.io/safe-to-evict"]
    );
    assert_eq!(value("RULE"), ["!self.matches('^x$') || self.size() > 0"]);
    assert_eq!(value("FLAGS"), ["node-ip", "provider-id"]);
    assert_eq!(value("NESTED"), ["Nested"]);
    assert!(
        value("PAIRS").is_empty() && value("PRIVATE").is_empty() && value("IN_TESTS").is_empty()
    );
    assert!(is_schema_text("!self.matches('^x$') || self.size() > 0"));
    assert!(is_schema_text("^[!-~]+$"));
    assert!(!is_schema_text("k8s.mesosphere.io/a"));
}

#[test]
fn enum_variants_and_literal_reasons_are_read() {
    let code = without_comments(
        r#"
        /// Why. { not a brace that counts }
        #[derive(Clone, Copy)]
        pub enum Reason {
            /// First, with a comma, in its doc.
            Marked,
            #[serde(rename = "x")]
            Evicted,
            Other(u8),
            Last = 7
        }
        let c = '"';
        fn build() {
            conditions.push(condition(
                types::PAUSED,
                paused,
                if paused { "Paused" } else { "Running" },
                &format!("{} of {}", a, b),
            ));
            let event = Event { reason: "Literal".into(), note: Some("Not A Reason".into()) };
            let other = recorder.reason("Called");
            let typed = Event { reason: reason.as_str().to_owned() };
        }
        fn condition(type_: &str, status: bool, reason: &str) -> Condition { todo!("NotCalled") }
        "#,
    );
    assert_eq!(
        enum_variants(&code, "Reason").unwrap(),
        ["Marked", "Evicted", "Other", "Last"]
    );
    assert_eq!(enum_variants(&code, "Reasons"), None);
    let conditions: Vec<String> = call_arguments(&code, "condition")
        .iter()
        .flat_map(|args| string_literals(args))
        .filter(|l| is_camel_case(l))
        .collect();
    assert_eq!(conditions, ["Paused", "Running"]);
    let reasons: Vec<String> = reason_expressions(&code)
        .iter()
        .flat_map(|e| string_literals(e))
        .filter(|l| is_camel_case(l))
        .collect();
    assert_eq!(reasons, ["Literal", "Called"]);
}

#[test]
fn a_mention_is_a_whole_code_span() {
    let design =
        "The `k8s.mesosphere.io/kamikaze-target` key, and `Marked: ...`; Evicted in prose.";
    assert!(mentions(design, "k8s.mesosphere.io/kamikaze-target"));
    assert!(!mentions(design, "k8s.mesosphere.io/kamikaze"));
    assert!(!mentions(design, "Marked"));
    assert!(!mentions(design, "Evicted"));
}
