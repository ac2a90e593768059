//! The imports between one crate's files: every path that starts with `crate::`, `super::` or
//! `self::` — in `use` trees, in expressions and types, and in macro arguments — resolved to the
//! file of the longest module prefix it names.
//!
//! A bare path that starts with the name of a child module with a file of its own (`use child::X;`
//! in the parent) is an import of that child too. `mod x;` declarations are not imports.

use std::collections::BTreeMap;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

use super::modules::{Module, Tree, ident};

/// The first place a file names another one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    pub line: usize,
    /// The path as written, `super` and `self` kept: `crate::facts::Facts`.
    pub path: String,
}

/// Edges between files of `tree`, by index, each with its first import. Never to the file itself,
/// never to the root (lib.rs, main.rs): everything names the root, and it names every module.
pub fn edges(tree: &Tree) -> BTreeMap<(usize, usize), Import> {
    let mut edges = BTreeMap::new();
    for (from, file) in tree.files.iter().enumerate() {
        let mut collector = Collector {
            module: file.module.clone(),
            found: Vec::new(),
        };
        collector.visit_file(&file.ast);
        for found in collector.found {
            let Some(target) = resolve(&found.module, &found.segments, |m| tree.has_file(m)) else {
                continue;
            };
            let to = tree.file_of(&target);
            if to == from || to == 0 {
                continue;
            }
            let import = Import {
                line: found.line,
                path: found.segments.join("::"),
            };
            edges
                .entry((from, to))
                .and_modify(|first: &mut Import| {
                    if import.line < first.line {
                        *first = import.clone();
                    }
                })
                .or_insert(import);
        }
    }
    edges
}

/// The absolute module path `segments` names from inside `module`, if it starts with `crate`,
/// `self`, `super` or the name of a child module for which `has_file` is true.
fn resolve(
    module: &[String],
    segments: &[String],
    has_file: impl Fn(&[String]) -> bool,
) -> Option<Module> {
    let (first, rest) = segments.split_first()?;
    let mut base: Module = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let mut base = module.to_vec();
            base.pop()?;
            base
        }
        child => {
            let mut path = module.to_vec();
            path.push(child.to_owned());
            if !has_file(&path) {
                return None;
            }
            module.to_vec()
        }
    };
    let rest = if matches!(first.as_str(), "crate" | "self" | "super") {
        rest
    } else {
        segments
    };
    let mut rest = rest.iter().peekable();
    while let Some(segment) = rest.next_if(|s| *s == "super" || *s == "self") {
        if segment == "super" {
            base.pop()?;
        }
    }
    base.extend(rest.cloned());
    Some(base)
}

struct Found {
    /// The module the path is written in (inline modules included).
    module: Module,
    segments: Vec<String>,
    line: usize,
}

struct Collector {
    module: Module,
    found: Vec<Found>,
}

impl Collector {
    fn record(&mut self, segments: Vec<String>, line: usize) {
        let relative = matches!(
            segments.first().map(String::as_str),
            Some("crate" | "self" | "super")
        );
        // A lone `self` is a method's receiver (or this very module): never another file. A bare
        // path of two segments or more may start with a child module's name: `resolve`
        // tells.
        if (relative && segments != ["self"]) || segments.len() > 1 {
            self.found.push(Found {
                module: self.module.clone(),
                segments,
                line,
            });
        }
    }

    /// Every leaf of a use tree as a whole path: `use crate::{a::{b, c}, d}` is `crate::a::b`,
    /// `crate::a::c`, `crate::d`. A `self` leaf names its prefix; a glob names the module it is
    /// in.
    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(ident(&path.ident));
                self.use_tree(&path.tree, prefix);
                prefix.pop();
            }
            syn::UseTree::Name(syn::UseName { ident: leaf })
            | syn::UseTree::Rename(syn::UseRename { ident: leaf, .. }) => {
                let mut path = prefix.clone();
                if leaf != "self" || prefix.is_empty() {
                    path.push(ident(leaf));
                }
                self.record(path, line(leaf.span()));
            }
            syn::UseTree::Glob(glob) => {
                // `*` names no module: the file is that of the prefix.
                let mut path = prefix.clone();
                path.push("*".to_owned());
                self.record(path, line(glob.star_token.span));
            }
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(tree, prefix);
                }
            }
        }
    }

    /// Paths inside macro arguments, which syn leaves as tokens: `crate :: a :: b` (and `$crate::a`
    /// in a `macro_rules!` body).
    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(group) => {
                    self.tokens(group.stream());
                    i += 1;
                }
                TokenTree::Ident(start)
                    if matches!(start.to_string().as_str(), "crate" | "self" | "super") =>
                {
                    let mut segments = vec![start.to_string()];
                    let mut next = i + 1;
                    while let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(name)),
                    ) = (tokens.get(next), tokens.get(next + 1), tokens.get(next + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        segments.push(ident(name));
                        next += 3;
                    }
                    if segments.len() > 1 {
                        self.record(segments, line(start.span()));
                    }
                    i = next;
                }
                _ => i += 1,
            }
        }
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        // A `mod x;` declaration is not an import; an inline `mod x { .. }` is more code, in module
        // `x`.
        if item.content.is_some() {
            self.module.push(ident(&item.ident));
            visit::visit_item_mod(self, item);
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if item.leading_colon.is_none() {
            self.use_tree(&item.tree, &mut Vec::new());
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let segments = path.segments.iter().map(|s| ident(&s.ident)).collect();
            let first = path.segments.first().map(|s| s.ident.span());
            self.record(segments, first.map(line).unwrap_or(0));
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        visit::visit_macro(self, mac);
        self.tokens(mac.tokens.clone());
    }

    // `pub(super)`, `pub(in crate::a)`: who may see an item, not what it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
}

fn line(span: proc_macro2::Span) -> usize {
    span.start().line
}
