//! One crate's module tree: from its root file, every `.rs` file reached through `mod`
//! declarations, with its module path (`foo.rs` and `foo/mod.rs` are `foo`, `foo/bar.rs` is
//! `foo::bar`, `#[path]` honoured).
//!
//! The tree follows the declarations rather than listing src/, so a test file declared as
//! `#[cfg(test)] #[path = "status_lists_tests.rs"] mod tests;` inside `status_lists.rs` is
//! `status_lists::tests`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// A module path below the crate root: `["foo", "bar"]` is `crate::foo::bar`, `[]` the root.
pub type Module = Vec<String>;

pub struct SourceFile {
    pub path: PathBuf,
    pub module: Module,
    pub ast: syn::File,
}

pub struct Tree {
    /// The root file first.
    pub files: Vec<SourceFile>,
    /// Every module, inline ones (`mod tests { .. }`) included, to the index of the file that
    /// holds it.
    pub modules: HashMap<Module, usize>,
    /// `mod x;` declarations whose file was not found (compiled out on this platform, or being
    /// moved).
    pub unresolved: Vec<String>,
}

impl Tree {
    pub fn load(root: &Path) -> anyhow::Result<Tree> {
        let mut tree = Tree {
            files: Vec::new(),
            modules: HashMap::new(),
            unresolved: Vec::new(),
        };
        let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
        tree.add(root.to_path_buf(), Vec::new(), dir)?;
        Ok(tree)
    }

    /// The file that holds the longest prefix of `path` that is a module (the root when none is).
    /// Whether `path` is a module with a file of its own.
    pub fn has_file(&self, path: &[String]) -> bool {
        self.modules.contains_key(path)
    }

    pub fn file_of(&self, path: &[String]) -> usize {
        (0..=path.len())
            .rev()
            .find_map(|len| self.modules.get(&path[..len]).copied())
            .unwrap_or(0)
    }

    /// Adds the file of `module`, then the files it declares. `child_dir` is where its `mod x;`
    /// files live: its own directory for a root, a `mod.rs` or a `#[path]` file, else a
    /// directory named after it.
    fn add(&mut self, path: PathBuf, module: Module, child_dir: PathBuf) -> anyhow::Result<()> {
        // Two cfg-alternative declarations may name the same file: parse it once.
        if self.files.iter().any(|f| f.path == path) {
            return Ok(());
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let ast = syn::parse_file(&text).with_context(|| format!("parsing {}", path.display()))?;
        let index = self.files.len();
        self.modules.entry(module.clone()).or_insert(index);
        let file_dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let mut declared = Declared::default();
        declared.walk(&ast.items, &file_dir, &child_dir, &module, false);
        self.files.push(SourceFile { path, module, ast });
        for inline in declared.inline {
            self.modules.entry(inline).or_insert(index);
        }
        for (child, module, child_dir) in declared.files {
            match child {
                Ok(child) => self.add(child, module, child_dir)?,
                Err(tried) => self.unresolved.push(tried),
            }
        }
        Ok(())
    }
}

/// The modules one file declares.
#[derive(Default)]
struct Declared {
    inline: Vec<Module>,
    /// (the file or what was tried, its module, its child directory)
    files: Vec<(Result<PathBuf, String>, Module, PathBuf)>,
}

impl Declared {
    fn walk(
        &mut self,
        items: &[syn::Item],
        file_dir: &Path,
        child_dir: &Path,
        module: &[String],
        in_inline: bool,
    ) {
        for item in items {
            let syn::Item::Mod(item) = item else { continue };
            let name = ident(&item.ident);
            let mut sub = module.to_vec();
            sub.push(name.clone());
            let explicit = path_attribute(&item.attrs);
            if let Some((_, items)) = &item.content {
                // Inside `mod a { .. }`, `mod b;` is a/b.rs, and a `#[path]` is relative to a/ as
                // well.
                let dir = child_dir.join(&name);
                self.walk(items, file_dir, &dir, &sub, true);
                self.inline.push(sub);
                continue;
            }
            let found = match explicit {
                // The reference: a `#[path]` outside inline modules is relative to the declaring
                // file's directory.
                Some(explicit) => {
                    let base = if in_inline { child_dir } else { file_dir };
                    let path = base.join(explicit);
                    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
                    path.is_file()
                        .then(|| (path.clone(), dir))
                        .ok_or_else(|| path.display().to_string())
                }
                None => {
                    let flat = child_dir.join(format!("{name}.rs"));
                    let nested = child_dir.join(&name).join("mod.rs");
                    let dir = child_dir.join(&name);
                    if flat.is_file() {
                        Ok((flat, dir))
                    } else if nested.is_file() {
                        Ok((nested, dir))
                    } else {
                        Err(format!("{} (or {})", flat.display(), nested.display()))
                    }
                }
            };
            match found {
                Ok((path, dir)) => self.files.push((Ok(path), sub, dir)),
                Err(tried) => self.files.push((Err(tried), sub, PathBuf::new())),
            }
        }
    }
}

/// The identifier as a module name: `r#type` is the module `type`, in type.rs.
pub fn ident(ident: &syn::Ident) -> String {
    let name = ident.to_string();
    name.strip_prefix("r#").map(str::to_owned).unwrap_or(name)
}

/// The value of `#[path = "..."]`, if any.
fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::fixture::fixture;

    fn modules(tree: &Tree, root: &Path) -> Vec<(String, String)> {
        let mut modules: Vec<(String, String)> = tree
            .files
            .iter()
            .map(|f| {
                let path = f.path.strip_prefix(root).expect("under the fixture");
                (path.display().to_string(), f.module.join("::"))
            })
            .collect();
        modules.sort();
        modules
    }

    #[test]
    fn files_map_to_their_module_paths_with_path_attributes_honoured() {
        let dir = fixture(&[
            ("src/lib.rs", "mod flat;\nmod nested;\nmod status_lists;\n"),
            ("src/flat.rs", "mod leaf;\n"),
            ("src/flat/leaf.rs", ""),
            ("src/nested/mod.rs", "mod inner;\n"),
            ("src/nested/inner.rs", ""),
            (
                "src/status_lists.rs",
                "#[cfg(test)]\n#[path = \"status_lists_tests.rs\"]\nmod tests;\n",
            ),
            // What `mod tests;` would be without the attribute: it must not be taken.
            ("src/status_lists/tests.rs", ""),
            ("src/status_lists_tests.rs", "use super::*;\n"),
        ]);
        let tree = Tree::load(&dir.path().join("src/lib.rs")).expect("the fixture's modules");
        assert_eq!(
            modules(&tree, dir.path()),
            [
                ("src/flat.rs", "flat"),
                ("src/flat/leaf.rs", "flat::leaf"),
                ("src/lib.rs", ""),
                ("src/nested/inner.rs", "nested::inner"),
                ("src/nested/mod.rs", "nested"),
                ("src/status_lists.rs", "status_lists"),
                ("src/status_lists_tests.rs", "status_lists::tests"),
            ]
            .map(|(p, m)| (p.to_owned(), m.to_owned()))
        );
        assert!(tree.unresolved.is_empty(), "{:?}", tree.unresolved);
    }

    #[test]
    fn path_attributes_inside_inline_modules_and_longest_prefixes() {
        let dir = fixture(&[
            ("src/lib.rs", "mod outer;\n"),
            (
                "src/outer.rs",
                "mod inline {\n    #[path = \"x.rs\"]\n    mod renamed;\n    mod plain;\n}\n",
            ),
            ("src/outer/inline/x.rs", ""),
            ("src/outer/inline/plain.rs", ""),
        ]);
        let tree = Tree::load(&dir.path().join("src/lib.rs")).expect("the fixture's modules");
        let file = |module: &[&str]| {
            let module: Vec<String> = module.iter().map(|s| s.to_string()).collect();
            let path = &tree.files[tree.file_of(&module)].path;
            path.strip_prefix(dir.path())
                .expect("under the fixture")
                .display()
                .to_string()
        };
        assert_eq!(
            file(&["outer", "inline", "renamed", "Item"]),
            "src/outer/inline/x.rs"
        );
        assert_eq!(
            file(&["outer", "inline", "plain"]),
            "src/outer/inline/plain.rs"
        );
        // The inline module lives in the file that declares it.
        assert_eq!(file(&["outer", "inline", "f"]), "src/outer.rs");
        assert_eq!(file(&["Thing"]), "src/lib.rs");
    }
}
