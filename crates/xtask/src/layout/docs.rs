//! Docs name only files that exist: a path in README.md, CONTRIBUTING.md, docs/**/*.md,
//! crates/*/README.md or bench/**/README.md that names nothing goes stale silently when a file
//! moves.

use std::path::{Path, PathBuf};

/// A path a Markdown file names that exists neither from the repository root nor from the file's
/// directory.
#[derive(Debug, PartialEq, Eq)]
pub struct Missing {
    /// Relative to the repository root.
    pub doc: String,
    pub line: usize,
    pub path: String,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {} does not exist",
            self.doc, self.line, self.path
        )
    }
}

/// Top-level directories: a token that starts with one is a path even without an extension
/// (`crates/planner/`).
const TOP_LEVEL: &[&str] = &[
    "controller/",
    "plugin/",
    "crates/",
    "docs/",
    "deploy/",
    "tests/",
    "bench/",
    "fuzz/",
    ".ci/",
    "crds/",
];

/// Extensions of the files the docs name: a token with a `/` and one of these is a path.
const EXTENSIONS: &[&str] = &[
    ".rs", ".md", ".toml", ".yaml", ".yml", ".json", ".sh", ".lock", ".txt",
];

/// The Markdown files checked, sorted.
pub fn files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["README.md", "CONTRIBUTING.md"]
        .iter()
        .map(|name| root.join(name))
        .filter(|path| path.is_file())
        .collect();
    walk(
        &root.join("docs"),
        &|path| path.extension().is_some_and(|e| e == "md"),
        &mut files,
    );
    if let Ok(crates) = std::fs::read_dir(root.join("crates")) {
        files.extend(
            crates
                .flatten()
                .map(|entry| entry.path().join("README.md"))
                .filter(|path| path.is_file()),
        );
    }
    walk(
        &root.join("bench"),
        &|path| path.file_name().is_some_and(|n| n == "README.md"),
        &mut files,
    );
    files.sort();
    files
}

/// Every file under `dir` that `keep` accepts.
fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.flatten().map(|entry| entry.path()) {
        if path.is_dir() {
            walk(&path, keep, out);
        } else if keep(&path) {
            out.push(path);
        }
    }
}

/// The paths `doc` (a file under `root`) names that do not exist.
pub fn missing(root: &Path, doc: &Path) -> std::io::Result<Vec<Missing>> {
    let text = std::fs::read_to_string(doc)?;
    let dir = doc.parent().unwrap_or(root);
    let name = doc.strip_prefix(root).unwrap_or(doc).display().to_string();
    let mut missing = Vec::new();
    for (number, line) in text.lines().enumerate() {
        // Markdown and prose put paths between backticks, brackets, parentheses, quotes, or after
        // `=`.
        let tokens = line.split(|c: char| c.is_whitespace() || "`()[]\"'|=".contains(c));
        for path in tokens.filter_map(repository_path) {
            if !root.join(path).exists() && !dir.join(path).exists() {
                missing.push(Missing {
                    doc: name.clone(),
                    line: number + 1,
                    path: path.to_owned(),
                });
            }
        }
    }
    Ok(missing)
}

/// The repository path `token` names, if it looks like one: without `#anchor`, `:line` suffix and
/// trailing punctuation. URLs, absolute paths, build outputs (target/) and globs or placeholders
/// (`bench/results/<scenario>.md`) are not checked.
fn repository_path(token: &str) -> Option<&str> {
    if token.contains("://") || token.contains(['*', '<', '>', '{', '}', '$', '?']) {
        return None;
    }
    let token = token.split(['#', ':']).next()?;
    let token = token.trim_end_matches(['.', ',', ';', '!']);
    let token = token.strip_prefix("./").unwrap_or(token);
    if token.starts_with(['/', '~']) || token.starts_with("target/") {
        return None;
    }
    let has_extension = token.contains('/') && EXTENSIONS.iter().any(|e| token.ends_with(e));
    let in_top_level = TOP_LEVEL.iter().any(|dir| token.starts_with(dir));
    (has_extension || in_top_level).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::fixture::fixture;

    fn missing_in(doc: &str) -> Vec<String> {
        let dir = fixture(&[
            ("README.md", doc),
            ("controller/src/leader.rs", ""),
            (
                "docs/architecture.md",
                "See [the README](../README.md) and `../controller/src/leader.rs`.\n",
            ),
        ]);
        let mut found = Vec::new();
        for doc in files(dir.path()) {
            found.extend(
                missing(dir.path(), &doc)
                    .expect("readable")
                    .iter()
                    .map(Missing::to_string),
            );
        }
        found
    }

    #[test]
    fn a_doc_naming_a_missing_file_fails_with_its_line() {
        assert_eq!(
            missing_in(
                "# Title\n\nThe leader is in `controller/src/leader.rs`; the fence in\n\
                        [fence](controller/src/fence.rs#L10), and crates/planner/src/.\n"
            ),
            [
                "README.md:4: controller/src/fence.rs does not exist",
                "README.md:4: crates/planner/src/ does not exist",
            ]
        );
    }

    #[test]
    fn existing_files_urls_globs_and_placeholders_pass() {
        assert_eq!(
            missing_in(
                "`controller/src/leader.rs:42`, (docs/architecture.md#layout), ./controller/src/leader.rs.\n\
                 https://github.com/example/repo/blob/main/src/missing.rs and http://x.io/a/b.md\n\
                 bench/results/<scenario>.md, crates/*/README.md, controller/src/{a,b}.rs, $HOME/x.toml\n\
                 /etc/ssl/certs/ca.json, target/dist/plugin.yaml, and/or, 1/2.\n"
            ),
            Vec::<String>::new()
        );
    }
}
