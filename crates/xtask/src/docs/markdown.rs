//! The code of a Markdown doc: shell blocks, inline code spans, and in YAML blocks the spans of
//! the comments and the commands of the objects.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use super::snippet::{Lines, Snippet};
use super::{manifests, yaml};

/// What a fenced block's language says about its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    Shell,
    /// Commands after a `$ ` prompt, output between them.
    Console,
    /// Only the spans of its comments are read.
    Yaml,
    Other,
}

fn language(info: &str) -> Language {
    match info.split([' ', ',', '{']).next().unwrap_or_default() {
        "sh" | "bash" | "shell" | "zsh" => Language::Shell,
        "console" | "shell-session" => Language::Console,
        "yaml" | "yml" => Language::Yaml,
        _ => Language::Other,
    }
}

/// Every shell block and inline code span of `text`, and the spans in its YAML blocks' comments,
/// in order. Indented blocks and blocks of other languages are not shell.
pub fn snippets(text: &str) -> Vec<Snippet> {
    let lines = Lines::new(text);
    let mut snippets = Vec::new();
    // The open block: its language, its first line and its text so far.
    let mut block: Option<(Language, Option<usize>, String)> = None;
    let parser = Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter();
    for (event, range) in parser {
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let language = match kind {
                    CodeBlockKind::Fenced(info) => language(&info),
                    CodeBlockKind::Indented => Language::Other,
                };
                block = Some((language, None, String::new()));
            }
            Event::Text(body) => {
                if let Some((_, first, text)) = &mut block {
                    first.get_or_insert(lines.at(range.start));
                    text.push_str(&body);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                let Some((language, Some(line), text)) = block.take() else {
                    continue;
                };
                match language {
                    Language::Shell | Language::Console => snippets.push(Snippet::Block {
                        line,
                        text,
                        console: language == Language::Console,
                    }),
                    Language::Yaml => {
                        snippets.extend(yaml::spans(&text, line));
                        // An illustration may be a fragment that is not YAML on its own.
                        snippets.extend(manifests::snippets(&text, line).unwrap_or_default());
                    }
                    Language::Other => {}
                }
            }
            Event::Code(code) => snippets.push(Snippet::Span {
                line: lines.at(range.start),
                text: code.trim().to_owned(),
            }),
            _ => {}
        }
    }
    snippets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_blocks_spans_and_yaml_comments_with_their_lines() {
        let text = "# Title\n\nRun `kubectl k8sm\nplan` first.\n\n```sh\nkubectl get eup\n```\n\n\
                    ```console\n$ kubectl k8sm blocked\nNODE  POD\n```\n\n```yaml\nspec:\n  \
                    paused: true  # `kubectl k8sm resume`\n```\n\n```text\nkubectl nothing\n```\n\n    \
                    kubectl indented\n";
        assert_eq!(
            snippets(text),
            [
                Snippet::Span {
                    line: 3,
                    text: "kubectl k8sm plan".into()
                },
                Snippet::Block {
                    line: 7,
                    text: "kubectl get eup\n".into(),
                    console: false
                },
                Snippet::Block {
                    line: 11,
                    text: "$ kubectl k8sm blocked\nNODE  POD\n".into(),
                    console: true
                },
                Snippet::Span {
                    line: 17,
                    text: "kubectl k8sm resume".into()
                },
            ]
        );
    }
}
