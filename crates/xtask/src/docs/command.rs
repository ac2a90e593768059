//! One command line the docs show, where they show it, and whether it is a whole command or a
//! reference to one.

use std::fmt;

/// How the docs show a command, which decides how strictly it is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A line of a `sh`/`bash`/`shell`/`console` block: a reader copies it as it is, so it must
    /// be complete.
    Block,
    /// An inline code span in prose or in a comment: it may name a command without its required
    /// arguments (`kubectl k8sm force`), and uses synopsis notation (`[--flag]`, `a|b`, `…`).
    Span,
}

/// A command with the placeholders replaced by sample values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocCommand {
    /// Relative to the repository root.
    pub file: String,
    pub line: usize,
    pub form: Form,
    /// The words as a shell would pass them, the program first.
    pub words: Vec<String>,
    /// What the docs say, for messages.
    pub text: String,
}

impl fmt::Display for DocCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: `{}`", self.file, self.line, self.text)
    }
}
