//! `cargo xtask layout`, also a step of `cargo xtask test`: no import cycle between the files of a
//! crate (a cycle makes files that cannot be read, tested or moved one without the other), the
//! docs name only files that exist, and comments wrap at the code's width.

mod comment_width;
mod cycles;
mod docs;
#[cfg(test)]
mod fixture;
mod imports;
mod modules;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::workspace;

/// One crate of the workspace: a target of a member package.
pub struct Target {
    /// `k8sm-planner lib`, `k8sm-e2e test image`.
    pub label: String,
    pub root: PathBuf,
}

/// Files of one crate that import each other, and the first import of each edge between them.
#[derive(Debug)]
pub struct Cycle {
    pub label: String,
    /// Relative to the repository root, sorted.
    pub files: Vec<String>,
    /// `from.rs:line -> to.rs (crate::to::Item)`, by file and line.
    pub edges: Vec<String>,
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "import cycle in {} ({} files):",
            self.label,
            self.files.len()
        )?;
        for file in &self.files {
            writeln!(f, "    {file}")?;
        }
        writeln!(f, "  through:")?;
        for edge in &self.edges {
            writeln!(f, "    {edge}")?;
        }
        Ok(())
    }
}

pub fn run() -> anyhow::Result<()> {
    eprintln!("==> layout: import cycles between a crate's files, paths named by the docs");
    let root = workspace::root();
    let cycles = find_cycles(&root, &targets()?)?;
    let mut missing = Vec::new();
    for doc in docs::files(&root) {
        missing.extend(
            docs::missing(&root, &doc).with_context(|| format!("reading {}", doc.display()))?,
        );
    }
    let mut wide = Vec::new();
    for path in comment_width::sources(&root)? {
        let text =
            std::fs::read_to_string(root.join(&path)).with_context(|| format!("reading {path}"))?;
        wide.extend(comment_width::too_wide(&path, &text));
    }
    for cycle in &cycles {
        eprintln!("{cycle}");
    }
    if !wide.is_empty() {
        eprintln!(
            "comment lines wider than {} columns (rewrap them):",
            comment_width::WIDTH
        );
        for line in &wide {
            eprintln!("    {line}");
        }
    }
    if !missing.is_empty() {
        eprintln!("paths named by the docs that do not exist:");
        for missing in &missing {
            eprintln!("    {missing}");
        }
    }
    if !cycles.is_empty() || !missing.is_empty() || !wide.is_empty() {
        bail!(
            "layout: {} import cycle(s) (move what the files share into a module both can import), {} missing \
             path(s) in the docs, {} comment line(s) too wide",
            cycles.len(),
            missing.len(),
            wide.len()
        );
    }
    Ok(())
}

/// Every target (lib, bins, tests, benches, examples, build script) of every workspace member.
fn targets() -> anyhow::Result<Vec<Target>> {
    let output = workspace::cargo()
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("parsing cargo metadata")?;
    let mut targets = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        for target in package["targets"].as_array().into_iter().flatten() {
            let kind = target["kind"][0].as_str().unwrap_or("?");
            let label = match kind {
                "lib" => format!("{} lib", package["name"].as_str().unwrap_or("?")),
                _ => format!(
                    "{} {kind} {}",
                    package["name"].as_str().unwrap_or("?"),
                    target["name"].as_str().unwrap_or("?")
                ),
            };
            if let Some(root) = target["src_path"].as_str() {
                targets.push(Target {
                    label,
                    root: root.into(),
                });
            }
        }
    }
    Ok(targets)
}

/// The import cycles of every target; a cycle two targets share (a lib's files declared by its bin
/// as well) once.
pub fn find_cycles(repo: &Path, targets: &[Target]) -> anyhow::Result<Vec<Cycle>> {
    let relative = |path: &Path| {
        path.strip_prefix(repo)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for target in targets {
        let tree = modules::Tree::load(&target.root)
            .with_context(|| format!("reading the modules of {}", target.label))?;
        for unresolved in &tree.unresolved {
            eprintln!(
                "note: {}: no file for a `mod` declaration: {unresolved}",
                target.label
            );
        }
        let edges = imports::edges(&tree);
        for component in cycles::cycles(tree.files.len(), &edges) {
            let mut files: Vec<String> = component
                .iter()
                .map(|&i| relative(&tree.files[i].path))
                .collect();
            files.sort();
            if !seen.insert(files.clone()) {
                continue;
            }
            let edges = edges
                .iter()
                .filter(|((from, to), _)| component.contains(from) && component.contains(to))
                .map(|(&(from, to), import)| {
                    (
                        relative(&tree.files[from].path),
                        import.line,
                        format!("-> {} ({})", relative(&tree.files[to].path), import.path),
                    )
                })
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(|(from, line, to)| format!("{from}:{line} {to}"))
                .collect();
            found.push(Cycle {
                label: target.label.clone(),
                files,
                edges,
            });
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::fixture::fixture;
    use super::*;

    fn cycles_of(files: &[(&str, &str)]) -> Vec<Cycle> {
        let dir = fixture(files);
        let target = Target {
            label: "fixture lib".into(),
            root: dir.path().join("src/lib.rs"),
        };
        find_cycles(dir.path(), &[target]).expect("the fixture's modules")
    }

    #[test]
    fn a_cycle_through_a_nested_use_group_names_its_three_files() {
        let cycles = cycles_of(&[
            // The root and d name each other, but the root is no file of a cycle: everything names
            // it.
            (
                "src/lib.rs",
                "mod a;\nmod b;\nmod c;\nmod d;\npub use self::d::D;\npub struct R;\n",
            ),
            // a → d and a → b through one nested group (b second), b → c by an expression path, c
            // → a by a type
            ("src/a.rs", "use crate::{d::D, b::{X, Y}};\npub struct A;\n"),
            // Named twice: the message points at the first.
            (
                "src/b.rs",
                "pub fn f() { crate::c::g(); }\npub fn k() { crate::c::k(); }\n",
            ),
            ("src/c.rs", "pub fn g() -> Option<crate::a::A> { None }\n"),
            ("src/d.rs", "pub struct D(crate::R);\n"),
        ]);
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!(cycles[0].files, ["src/a.rs", "src/b.rs", "src/c.rs"]);
        assert_eq!(
            cycles[0].edges,
            [
                "src/a.rs:1 -> src/b.rs (crate::b::X)",
                "src/b.rs:1 -> src/c.rs (crate::c::g)",
                "src/c.rs:1 -> src/a.rs (crate::a::A)",
            ]
        );
        let message = cycles[0].to_string();
        for file in ["src/a.rs", "src/b.rs", "src/c.rs"] {
            assert!(message.contains(file), "{message}");
        }
    }

    #[test]
    fn a_child_importing_its_parent_through_super_is_no_cycle() {
        let files = [
            ("src/lib.rs", "mod parent;\n"),
            (
                "src/parent/mod.rs",
                "mod child;\npub struct P;\npub(super) fn f() {}\n",
            ),
            (
                "src/parent/child.rs",
                "use super::P;\npub(super) fn g() -> P { P }\n",
            ),
        ];
        assert!(cycles_of(&files).is_empty());
        // The same tree with the parent naming its child through `self::` is a cycle: the edge
        // above was seen.
        let mut with_cycle = files;
        with_cycle[1].1 = "mod child;\npub struct P;\nfn f() { self::child::g(); }\n";
        let cycles = cycles_of(&with_cycle);
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!(
            cycles[0].files,
            ["src/parent/child.rs", "src/parent/mod.rs"]
        );
        // `pub(super)` says who may see an item, not what it uses: no edge to the parent.
        with_cycle[2].1 = "pub(super) fn g() {}\npub(in crate::parent) struct Q;\n";
        assert!(cycles_of(&with_cycle).is_empty());
    }

    #[test]
    fn a_parent_importing_its_child_by_its_bare_name_is_an_edge() {
        let files = [
            ("src/lib.rs", "mod parent;\nmod child_like;\n"),
            (
                "src/parent/mod.rs",
                "mod child;\nuse child::C;\npub struct P;\n",
            ),
            ("src/parent/child.rs", "use super::P;\npub struct C;\n"),
            ("src/child_like.rs", "use child::X;\n"),
        ];
        let cycles = cycles_of(&files);
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!(
            cycles[0].files,
            ["src/parent/child.rs", "src/parent/mod.rs"]
        );
    }

    #[test]
    fn paths_in_macros_globs_and_inline_modules_are_edges_to_the_right_files() {
        let cycles = cycles_of(&[
            ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
            // The inline module's `super` is a itself (no edge); its `super::super` is the root,
            // so c is a sibling.
            (
                "src/a.rs",
                "pub fn f() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::c::C;\n}\n\
                 pub fn g() { assert_eq!(crate::b::h(), 1); }\n",
            ),
            ("src/b.rs", "use crate::a::*;\npub fn h() -> u8 { 1 }\n"),
            ("src/c.rs", "use crate::a::f;\npub struct C;\n"),
        ]);
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!(
            cycles[0].edges,
            [
                "src/a.rs:5 -> src/c.rs (super::super::c::C)",
                "src/a.rs:7 -> src/b.rs (crate::b::h)",
                "src/b.rs:1 -> src/a.rs (crate::a::*)",
                "src/c.rs:1 -> src/a.rs (crate::a::f)",
            ]
        );
    }
}
