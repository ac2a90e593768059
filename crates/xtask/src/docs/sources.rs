//! The files whose commands are checked: what an operator or a contributor reads and copies from.

use std::path::{Path, PathBuf};

/// A file and how to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub path: PathBuf,
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Markdown,
    /// Its comments, and the commands its objects run.
    Yaml,
    /// A Go template of YAML (the chart's templates/): only its `#` comments are read.
    Template,
}

/// README.md, CONTRIBUTING.md, docs/**/*.md, the crates' and the plugin's README.md, and every
/// Markdown and YAML file under deploy/ (the chart's README and values, the manifests' comments),
/// sorted. Generated reports (bench/results) are not docs to copy from.
pub fn files(root: &Path) -> Vec<Source> {
    let mut paths: Vec<PathBuf> = ["README.md", "CONTRIBUTING.md", "plugin/README.md"]
        .iter()
        .map(|name| root.join(name))
        .filter(|path| path.is_file())
        .collect();
    walk(&root.join("docs"), &mut paths);
    walk(&root.join("deploy"), &mut paths);
    if let Ok(crates) = std::fs::read_dir(root.join("crates")) {
        paths.extend(
            crates
                .flatten()
                .map(|entry| entry.path().join("README.md"))
                .filter(|path| path.is_file()),
        );
    }
    let mut sources: Vec<Source> = paths
        .into_iter()
        .filter_map(|path| {
            let kind = match path.extension()?.to_str()? {
                "md" => Kind::Markdown,
                "yaml" | "yml" if path.components().any(|c| c.as_os_str() == "templates") => {
                    Kind::Template
                }
                "yaml" | "yml" => Kind::Yaml,
                _ => return None,
            };
            Some(Source { path, kind })
        })
        .collect();
    sources.sort_by(|a, b| a.path.cmp(&b.path));
    sources
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_s_docs_and_manifests_are_read() {
        let root = crate::workspace::root();
        let files: Vec<String> = files(&root)
            .iter()
            .map(|s| s.path.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        for expected in [
            "README.md",
            "docs/upgrade-procedure.md",
            "deploy/helm/k8sm/README.md",
            "deploy/examples/conservative.yaml",
        ] {
            assert!(files.iter().any(|f| f == expected), "{expected}: {files:?}");
        }
        assert!(!files.iter().any(|f| f.starts_with("bench/")), "{files:?}");
    }
}
