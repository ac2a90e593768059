//! Inline code spans in the `#` comments of YAML (manifests, chart values, YAML blocks of the
//! Markdown docs): comments tell the reader what to run next.

use super::snippet::Snippet;

/// The code spans of the comments of `text`, whose first line is `first_line`. A span may go on
/// into the next comment line, as prose wrapped in a comment does.
pub fn spans(text: &str, first_line: usize) -> Vec<Snippet> {
    let mut spans = Vec::new();
    // Consecutive comment lines joined by spaces, with the line each byte of the join came from.
    let mut joined = String::new();
    let mut line_of: Vec<usize> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match comment(line) {
            Some(comment) => {
                if !joined.is_empty() {
                    joined.push(' ');
                    line_of.push(first_line + i);
                }
                joined.push_str(comment);
                line_of.extend(std::iter::repeat_n(first_line + i, comment.len()));
            }
            None => flush(&mut joined, &mut line_of, &mut spans),
        }
    }
    flush(&mut joined, &mut line_of, &mut spans);
    spans
}

fn flush(joined: &mut String, line_of: &mut Vec<usize>, spans: &mut Vec<Snippet>) {
    let mut rest = joined.as_str();
    let mut offset = 0;
    while let Some(open) = rest.find('`') {
        let Some(len) = rest[open + 1..].find('`') else {
            break;
        };
        let text = rest[open + 1..open + 1 + len].trim();
        if !text.is_empty() {
            spans.push(Snippet::Span {
                line: line_of[offset + open],
                text: text.to_owned(),
            });
        }
        offset += open + len + 2;
        rest = &rest[open + len + 2..];
    }
    joined.clear();
    line_of.clear();
}

/// The comment of a YAML line: after a `#` that starts the line or follows a blank, outside
/// quotes.
fn comment(line: &str) -> Option<&str> {
    let mut quote = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') if previous.is_whitespace() => return Some(line[i + 1..].trim()),
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if q == c => quote = None,
            _ => {}
        }
        previous = c;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(line: usize, text: &str) -> Snippet {
        Snippet::Span {
            line,
            text: text.to_owned(),
        }
    }

    #[test]
    fn spans_of_whole_line_and_trailing_comments() {
        let text = "# Start with `kubectl k8sm plan`.\nspec:\n  paused: true  # then `resume`\n";
        assert_eq!(
            spans(text, 10),
            [span(10, "kubectl k8sm plan"), span(12, "resume")]
        );
    }

    #[test]
    fn a_span_goes_on_into_the_next_comment_line() {
        let text = "# add `--tls-cert-file=a\n# --tls-key-file=b`; and `x`\nkey: '#not' # `y`\n";
        assert_eq!(
            spans(text, 1),
            [
                span(1, "--tls-cert-file=a --tls-key-file=b"),
                span(2, "x"),
                span(3, "y")
            ]
        );
    }

    #[test]
    fn a_hash_inside_a_value_is_no_comment() {
        assert_eq!(comment("url: http://x/#a"), None);
        assert_eq!(comment("a: \"b # c\""), None);
        assert_eq!(comment("a: b # c"), Some("c"));
    }
}
