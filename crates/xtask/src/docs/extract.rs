//! The commands of a doc: its shell blocks' lines and its spans that start with a known program,
//! with placeholders replaced by their sample values. A line that does not read as shell, or
//! names a placeholder with no sample value, is a finding of its own.

use super::command::{DocCommand, Form};
use super::shell::{self, Mode};
use super::snippet::Snippet;
use super::sources::Kind;
use super::{manifests, markdown, placeholders, programs, synopsis, yaml};

/// A line of a doc that could not be read as commands, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub file: String,
    pub line: usize,
    pub text: String,
    pub error: String,
}

/// The commands of `text`, the file at `file` (relative to the repository root), in order.
pub fn commands(file: &str, kind: Kind, text: &str) -> (Vec<DocCommand>, Vec<Unreadable>) {
    let mut out = Output {
        file,
        commands: Vec::new(),
        unreadable: Vec::new(),
    };
    let snippets = match kind {
        Kind::Markdown => markdown::snippets(text),
        Kind::Template => yaml::spans(text, 1),
        Kind::Yaml => {
            let mut snippets = yaml::spans(text, 1);
            match manifests::snippets(text, 1) {
                Ok(scripts) => snippets.extend(scripts),
                Err(error) => out.unreadable(1, "", error),
            }
            snippets
        }
    };
    for snippet in snippets {
        match snippet {
            Snippet::Block {
                line,
                text,
                console,
            } => {
                for logical in shell::logical_lines(&text, line, console) {
                    out.block_line(logical.line, &logical.text);
                }
            }
            Snippet::Span { line, text } => out.span(line, &text),
        }
    }
    (out.commands, out.unreadable)
}

struct Output<'a> {
    file: &'a str,
    commands: Vec<DocCommand>,
    unreadable: Vec<Unreadable>,
}

impl Output<'_> {
    fn block_line(&mut self, line: usize, text: &str) {
        let split = placeholders::angled(text).and_then(|t| shell::split(&t, Mode::Shell));
        let split = match split {
            Ok(split) => split,
            Err(error) => return self.unreadable(line, text, error),
        };
        // What the docs say, without its comment.
        let shown =
            shell::split(text, Mode::Shell).map_or(text, |s| &text[..s.code_end.min(text.len())]);
        for words in split.commands {
            self.push(line, Form::Block, shown.trim(), words);
        }
    }

    fn span(&mut self, line: usize, text: &str) {
        let first = text.split_whitespace().collect::<Vec<_>>();
        let first: Vec<String> = first.iter().take(2).map(|w| (*w).to_owned()).collect();
        if !programs::is_span_command(&first) {
            return;
        }
        let split = placeholders::angled(text).and_then(|t| shell::split(&t, Mode::Synopsis));
        let split = match split {
            Ok(split) => split,
            Err(error) => return self.unreadable(line, text, error),
        };
        for words in split.commands {
            if !programs::is_span_command(&words) {
                continue;
            }
            for words in synopsis::expand(&words) {
                self.push(line, Form::Span, text, words);
            }
        }
    }

    fn push(&mut self, line: usize, form: Form, text: &str, words: Vec<String>) {
        self.commands.push(DocCommand {
            file: self.file.to_owned(),
            line,
            form,
            words: words.iter().map(|w| placeholders::word(w)).collect(),
            text: text.to_owned(),
        });
    }

    fn unreadable(&mut self, line: usize, text: &str, error: String) {
        self.unreadable.push(Unreadable {
            file: self.file.to_owned(),
            line,
            text: text.to_owned(),
            error,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
Pause with `kubectl k8sm pause|resume --policy NAME`; a `spec.paused` field is no command.

```sh
kubectl apply -f x.yaml   # a policy
kubectl k8sm force <node> \\
  --yes
source <(kubectl-k8sm completion bash)
curl 'unterminated
```
";

    fn shown(commands: &[DocCommand]) -> Vec<String> {
        commands
            .iter()
            .map(|c| format!("{}:{:?}:{}", c.line, c.form, c.words.join(" ")))
            .collect()
    }

    #[test]
    fn blocks_and_spans_become_commands_with_their_lines() {
        let (commands, unreadable) = commands("d.md", Kind::Markdown, DOC);
        assert_eq!(
            shown(&commands),
            [
                "1:Span:kubectl k8sm pause --policy default",
                "1:Span:kubectl k8sm resume --policy default",
                "4:Block:kubectl apply -f x.yaml",
                "5:Block:kubectl k8sm force node-17 --yes",
                "7:Block:source <(kubectl-k8sm completion bash)",
                "7:Block:kubectl-k8sm completion bash",
            ]
        );
        assert_eq!(commands[2].text, "kubectl apply -f x.yaml");
        assert_eq!(unreadable.len(), 1);
        assert_eq!(
            (unreadable[0].line, unreadable[0].error.as_str()),
            (8, "unterminated '")
        );
    }

    #[test]
    fn yaml_comments_are_read_for_spans() {
        let yaml = "spec:\n  # then `kubectl k8sm resume conservative`\n  paused: true\n";
        let (commands, _) = commands("p.yaml", Kind::Yaml, yaml);
        assert_eq!(
            shown(&commands),
            ["2:Span:kubectl k8sm resume conservative"]
        );
    }
}
