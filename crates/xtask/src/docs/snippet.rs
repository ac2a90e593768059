//! Code found in a doc, before it is read as shell.

/// A piece of code and the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snippet {
    /// The body of a shell block: every line is a command (`#` lines are comments), or with
    /// `console`, every line after a `$ ` prompt is (the others are output).
    Block {
        line: usize,
        text: String,
        console: bool,
    },
    /// An inline code span, in prose or in a comment.
    Span { line: usize, text: String },
}

/// The 1-based line of each byte offset of a text.
pub struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub fn new(text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { starts }
    }

    pub fn at(&self, offset: usize) -> usize {
        self.starts.partition_point(|&start| start <= offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_to_lines() {
        let lines = Lines::new("ab\ncd\n\nef");
        assert_eq!(
            [0, 2, 3, 5, 6, 7, 8].map(|o| lines.at(o)),
            [1, 1, 2, 2, 3, 4, 4]
        );
    }
}
