//! Shell lines read as a shell reads them, enough to know each simple command's words: quotes,
//! `\` continuations, `#` comments, pipes and lists (`|`, `&&`, `||`, `;`), redirections (dropped
//! with their target), leading `NAME=value` assignments and `exec` (dropped), and the commands
//! inside `$(…)`, `<(…)` and backquotes (checked as commands of their own). Variables are not
//! expanded.

/// How a span's `|` reads: in a shell line it is a pipe; in a synopsis (`pause|resume`) it
/// separates alternatives, which stay in the word for [`super::synopsis`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Shell,
    Synopsis,
}

/// A line of a block, its `\` continuations joined, with the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logical {
    pub line: usize,
    pub text: String,
}

/// The logical lines of a block that hold commands. In a console block only lines after a `$ `
/// prompt do (with their continuations, which may start with `> `); elsewhere a `$ ` prompt is
/// stripped too.
pub fn logical_lines(text: &str, first_line: usize, console: bool) -> Vec<Logical> {
    let mut logical = Vec::new();
    let mut open: Option<Logical> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        let (text, continued) = match line.strip_suffix('\\') {
            Some(head) => (head, true),
            None => (line, false),
        };
        let current = match open.take() {
            Some(mut current) => {
                let text = text.trim_start();
                let text = if console {
                    text.strip_prefix("> ").unwrap_or(text)
                } else {
                    text
                };
                current.text.push(' ');
                current.text.push_str(text);
                current
            }
            None => {
                let trimmed = text.trim_start();
                let command =
                    trimmed
                        .strip_prefix("$ ")
                        .or(if trimmed == "$" { Some("") } else { None });
                let text = match (command, console) {
                    (Some(command), _) => command,
                    (None, true) => continue,
                    (None, false) => trimmed,
                };
                Logical {
                    line: first_line + i,
                    text: text.to_owned(),
                }
            }
        };
        if continued {
            open = Some(current);
        } else {
            logical.push(current);
        }
    }
    logical.extend(open);
    logical
}

/// The simple commands of a line, each as its words, and where its code ends (where a comment
/// starts). Commands inside substitutions come after the line's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub commands: Vec<Vec<String>>,
    pub code_end: usize,
}

pub fn split(line: &str, mode: Mode) -> Result<Split, String> {
    let mut s = Splitter::default();
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut code_end = line.len();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        let next = chars.get(i + 1).map(|&(_, c)| c);
        match c {
            c if c.is_whitespace() => s.end_word(),
            '#' if !s.in_word => {
                code_end = at;
                break;
            }
            '\'' => {
                let end = find(&chars, i + 1, '\'').ok_or("unterminated '")?;
                s.push_str(chars[i + 1..end].iter().map(|&(_, c)| c));
                i = end;
            }
            '"' => i = s.double_quoted(line, &chars, i)?,
            '\\' => {
                let &(_, escaped) = chars.get(i + 1).ok_or("a \\ ends the line")?;
                s.push(escaped);
                i += 1;
            }
            '$' | '<' if next == Some('(') => i = s.substitution(line, &chars, i + 1)?,
            '`' => {
                let end = find(&chars, i + 1, '`').ok_or("unterminated `")?;
                let inner = &line[chars[i + 1].0..chars[end].0];
                s.nested.extend(split(inner, Mode::Shell)?.commands);
                s.push_str(line[at..=chars[end].0].chars());
                i = end;
            }
            '|' if mode == Mode::Synopsis => s.push(c),
            '|' | ';' | '&' => s.end_command(),
            '>' | '<' => {
                if c == '<' && next == Some('<') {
                    return Err("here-documents are not read".into());
                }
                // A word of digits right before is the descriptor (`2>`), not an argument.
                if s.in_word && s.word.chars().all(|c| c.is_ascii_digit()) {
                    s.word.clear();
                    s.in_word = false;
                }
                s.end_word();
                while let Some(&(_, '>')) = chars.get(i + 1) {
                    i += 1;
                }
                if let Some(&(_, '&')) = chars.get(i + 1) {
                    // `>&2`: a descriptor, not a file.
                    i += 1;
                    while chars.get(i + 1).is_some_and(|&(_, c)| c.is_ascii_digit()) {
                        i += 1;
                    }
                } else {
                    s.redirect = true;
                }
            }
            _ => s.push(c),
        }
        i += 1;
    }
    if s.redirect && !s.in_word {
        return Err("a redirection has no target".into());
    }
    s.end_command();
    let mut commands = s.commands;
    commands.extend(s.nested);
    Ok(Split { commands, code_end })
}

#[derive(Default)]
struct Splitter {
    commands: Vec<Vec<String>>,
    nested: Vec<Vec<String>>,
    words: Vec<String>,
    word: String,
    in_word: bool,
    /// The next word is a redirection's target.
    redirect: bool,
}

impl Splitter {
    fn push(&mut self, c: char) {
        self.word.push(c);
        self.in_word = true;
    }

    fn push_str(&mut self, text: impl Iterator<Item = char>) {
        self.word.extend(text);
        self.in_word = true;
    }

    fn end_word(&mut self) {
        if !self.in_word {
            return;
        }
        let word = std::mem::take(&mut self.word);
        self.in_word = false;
        if std::mem::take(&mut self.redirect) {
            return;
        }
        self.words.push(word);
    }

    fn end_command(&mut self) {
        self.end_word();
        let mut words: Vec<String> = std::mem::take(&mut self.words)
            .into_iter()
            .skip_while(|w| is_assignment(w))
            .collect();
        // `exec PROGRAM …` runs PROGRAM in the shell's place.
        if words.len() > 1 && words[0] == "exec" {
            words.remove(0);
        }
        if !words.is_empty() {
            self.commands.push(words);
        }
    }

    /// `"…"` from `chars[open]`: `\` escapes `$`, `` ` ``, `"` and `\`; substitutions inside are
    /// commands too. Returns the index of the closing quote.
    fn double_quoted(
        &mut self,
        line: &str,
        chars: &[(usize, char)],
        open: usize,
    ) -> Result<usize, String> {
        self.in_word = true;
        let mut i = open + 1;
        while let Some(&(_, c)) = chars.get(i) {
            let next = chars.get(i + 1).map(|&(_, c)| c);
            match c {
                '"' => return Ok(i),
                '\\' if matches!(next, Some('$' | '`' | '"' | '\\')) => {
                    self.push(next.unwrap_or_default());
                    i += 1;
                }
                '$' if next == Some('(') => i = self.substitution(line, chars, i + 1)?,
                _ => self.push(c),
            }
            i += 1;
        }
        Err("unterminated \"".into())
    }

    /// `$(…)` or `<(…)` whose `(` is `chars[open]`: its commands are checked too, and the word
    /// keeps it as written. Returns the index of the closing `)`.
    fn substitution(
        &mut self,
        line: &str,
        chars: &[(usize, char)],
        open: usize,
    ) -> Result<usize, String> {
        let close = matching(chars, open).ok_or("unbalanced (")?;
        let inner = &line[chars[open].0 + 1..chars[close].0];
        self.nested.extend(split(inner, Mode::Shell)?.commands);
        self.push_str(line[chars[open - 1].0..=chars[close].0].chars());
        Ok(close)
    }
}

fn find(chars: &[(usize, char)], from: usize, wanted: char) -> Option<usize> {
    (from..chars.len()).find(|&i| chars[i].1 == wanted)
}

/// The `)` that closes the `(` at `open`, past nested parentheses and quotes.
fn matching(chars: &[(usize, char)], open: usize) -> Option<usize> {
    let mut depth = 0;
    let mut quote = None;
    for (i, &(_, c)) in chars.iter().enumerate().skip(open) {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `NAME=value` before a command sets its environment.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        split(line, Mode::Shell).unwrap().commands
    }

    #[test]
    fn quotes_comments_and_lists() {
        assert_eq!(
            words(r#"kubectl get eup -o 'jsonpath={.a b}' "x\"y" a\ b  # a comment"#),
            [[
                "kubectl",
                "get",
                "eup",
                "-o",
                "jsonpath={.a b}",
                "x\"y",
                "a b"
            ]]
        );
        assert_eq!(
            words("a 1 | b 2 && c; d || e & f"),
            [
                vec!["a", "1"],
                vec!["b", "2"],
                vec!["c"],
                vec!["d"],
                vec!["e"],
                vec!["f"]
            ]
        );
        assert_eq!(split("a b # c", Mode::Shell).unwrap().code_end, 4);
        assert_eq!(words("x=1 Y=2 run --flag=a=b"), [["run", "--flag=a=b"]]);
        assert_eq!(words("exec k8sm-agent run"), [["k8sm-agent", "run"]]);
    }

    #[test]
    fn redirections_are_dropped_with_their_target() {
        assert_eq!(
            words("k completion bash > ~/f 2>&1 2>/dev/null >>g <h"),
            [["k", "completion", "bash"]]
        );
        assert!(split("a >", Mode::Shell).is_err());
        assert!(split("cat <<EOF", Mode::Shell).is_err());
    }

    #[test]
    fn substitutions_are_commands_too() {
        assert_eq!(
            words("source <(kubectl-k8sm completion bash)"),
            [
                vec!["source", "<(kubectl-k8sm completion bash)"],
                vec!["kubectl-k8sm", "completion", "bash"]
            ]
        );
        assert_eq!(
            words(r#"cat /proc/$(pidof "kubelet")/cmdline x "$(date -u)" `id -u`"#),
            [
                vec![
                    "cat",
                    "/proc/$(pidof \"kubelet\")/cmdline",
                    "x",
                    "$(date -u)",
                    "`id -u`"
                ],
                vec!["pidof", "kubelet"],
                vec!["date", "-u"],
                vec!["id", "-u"]
            ]
        );
        assert!(split("echo $(a", Mode::Shell).is_err());
        assert!(split("echo 'a", Mode::Shell).is_err());
    }

    #[test]
    fn a_synopsis_keeps_its_alternatives() {
        assert_eq!(
            split("kubectl k8sm pause|resume --policy NAME", Mode::Synopsis)
                .unwrap()
                .commands,
            [["kubectl", "k8sm", "pause|resume", "--policy", "NAME"]]
        );
    }

    #[test]
    fn continuations_prompts_and_console_output() {
        let block = "a \\\n  --b c\n# comment\n$ d\n";
        assert_eq!(
            logical_lines(block, 10, false),
            [
                Logical {
                    line: 10,
                    text: "a  --b c".into()
                },
                Logical {
                    line: 12,
                    text: "# comment".into()
                },
                Logical {
                    line: 13,
                    text: "d".into()
                }
            ]
        );
        let console = "$ kubectl get \\\n> eup\nNAME  AGE\ndefault 1m\n$ kubectl k8sm plan\n";
        assert_eq!(
            logical_lines(console, 1, true),
            [
                Logical {
                    line: 1,
                    text: "kubectl get  eup".into()
                },
                Logical {
                    line: 5,
                    text: "kubectl k8sm plan".into()
                }
            ]
        );
    }
}
