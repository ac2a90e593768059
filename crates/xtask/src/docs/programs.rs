//! Which check each program's commands get: its own clap definition, the real tool's parser, a
//! run against the demo cluster, or an allow-list entry with the reason it is not checked.

use super::command::{DocCommand, Form};

/// A program of this repository, parsed by its clap definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Own {
    /// `kubectl k8sm …` or `kubectl-k8sm …`.
    Plugin,
    /// `cargo xtask …`.
    Xtask,
    Controller,
    Agent,
}

impl Own {
    pub fn name(self) -> &'static str {
        match self {
            Own::Plugin => "kubectl k8sm",
            Own::Xtask => "cargo xtask",
            Own::Controller => "k8sm-controller",
            Own::Agent => "k8sm-agent",
        }
    }
}

/// A tool built or installed for the gate, whose own parser checks the words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tool {
    Kubectl,
    Helm,
    Cargo,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Kubectl => "kubectl",
            Tool::Helm => "helm",
            Tool::Cargo => "cargo",
        }
    }
}

/// How a command is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// `Own`'s clap definition parses `argv` (the program's name first).
    Clap { own: Own, argv: Vec<String> },
    /// The tool parses `args` and prints its help instead of running.
    Grammar { tool: Tool, args: Vec<String> },
    /// The tool runs `args` against the demo cluster (changes as server-side dry runs).
    Run { tool: Tool, args: Vec<String> },
    /// Not checked, for this reason.
    Allowed {
        program: &'static str,
        reason: &'static str,
    },
    /// A program nobody said how to check.
    Unknown,
}

/// Programs whose commands are not checked, by their first words, and why. The commands inside
/// their arguments (`source <(…)`) are checked on their own.
const ALLOWED: &[(&str, &str)] = &[
    (
        "kubectl krew",
        "a kubectl plugin of its own; `cargo xtask dist` runs krew's validator and install on the \
         release",
    ),
    (
        "cargo deny",
        "installed by .ci/run only; `cargo xtask test` runs `cargo deny check` itself",
    ),
    ("skopeo", "copies an image into the reader's registry"),
    ("docker", "a container engine, which the gate does without"),
    ("podman", "a container engine, which the gate does without"),
    ("kind", "another local cluster, which the gate does without"),
    ("kustomize", "edits the reader's own overlay"),
    ("source", "a shell builtin"),
    ("export", "a shell builtin"),
    ("cat", "run on a node, on its files"),
    ("pidof", "run on a node, on its processes"),
    ("rustup", "installs toolchains"),
    ("git", "works on the reader's clone"),
    (
        ".ci/run",
        "the CI entry point: it runs `cargo xtask test`, this check included",
    ),
];

/// The programs a span must start with to be a command: a span such as `spec.paused` or
/// `--kubelet` is code, not a command.
const SPAN_PROGRAMS: &[&str] = &[
    "kubectl",
    "kubectl-k8sm",
    "helm",
    "cargo",
    "k8sm-controller",
    "k8sm-agent",
];

/// Whether a span with these words is a command: a known program and at least one argument (a
/// span of a program's name alone names it).
pub fn is_span_command(words: &[String]) -> bool {
    words.len() >= 2
        && (SPAN_PROGRAMS.contains(&words[0].as_str())
            || ALLOWED
                .iter()
                .any(|(program, _)| !program.contains(' ') && *program == words[0]))
}

pub fn classify(command: &DocCommand) -> Check {
    let words = &command.words;
    let word = |i: usize| words.get(i).map(String::as_str);
    let rest = |from: usize| words[from.min(words.len())..].to_vec();
    let own = |own: Own, from: usize| {
        let mut argv = vec![own.name().to_owned()];
        argv.extend(rest(from));
        Check::Clap { own, argv }
    };
    if let Some((program, reason)) = ALLOWED.iter().find(|(program, _)| {
        program
            .split(' ')
            .enumerate()
            .all(|(i, part)| word(i) == Some(part))
    }) {
        return Check::Allowed { program, reason };
    }
    let checked = |tool: Tool| match command.form {
        Form::Block if tool != Tool::Cargo => Check::Run {
            tool,
            args: rest(1),
        },
        _ => Check::Grammar {
            tool,
            args: rest(1),
        },
    };
    match (word(0), word(1)) {
        (Some("kubectl"), Some("k8sm")) => own(Own::Plugin, 2),
        (Some("kubectl-k8sm"), _) => own(Own::Plugin, 1),
        (Some("cargo"), Some("xtask")) => own(Own::Xtask, 2),
        (Some("k8sm-controller"), _) => own(Own::Controller, 1),
        (Some("k8sm-agent"), _) => own(Own::Agent, 1),
        (Some("kubectl"), _) => checked(Tool::Kubectl),
        (Some("helm"), _) => checked(Tool::Helm),
        (Some("cargo"), _) => checked(Tool::Cargo),
        _ => Check::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classified(form: Form, text: &str) -> Check {
        classify(&DocCommand {
            file: "f.md".into(),
            line: 1,
            form,
            words: text.split(' ').map(str::to_owned).collect(),
            text: text.into(),
        })
    }

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn each_program_gets_its_check() {
        assert_eq!(
            classified(Form::Block, "kubectl k8sm resume --policy x"),
            Check::Clap {
                own: Own::Plugin,
                argv: strings(&["kubectl k8sm", "resume", "--policy", "x"])
            }
        );
        assert_eq!(
            classified(Form::Span, "cargo xtask test"),
            Check::Clap {
                own: Own::Xtask,
                argv: strings(&["cargo xtask", "test"])
            }
        );
        assert_eq!(
            classified(Form::Block, "kubectl get eup"),
            Check::Run {
                tool: Tool::Kubectl,
                args: strings(&["get", "eup"])
            }
        );
        assert_eq!(
            classified(Form::Span, "kubectl drain"),
            Check::Grammar {
                tool: Tool::Kubectl,
                args: strings(&["drain"])
            }
        );
        assert_eq!(
            classified(Form::Block, "cargo install --path plugin"),
            Check::Grammar {
                tool: Tool::Cargo,
                args: strings(&["install", "--path", "plugin"])
            }
        );
        assert!(matches!(
            classified(Form::Block, "kubectl krew install x"),
            Check::Allowed {
                program: "kubectl krew",
                ..
            }
        ));
        assert_eq!(classified(Form::Block, "curl x"), Check::Unknown);
    }

    #[test]
    fn a_span_is_a_command_when_it_starts_with_a_known_program() {
        let span = |text: &str| is_span_command(&strings(&text.split(' ').collect::<Vec<_>>()));
        assert!(span("kubectl drain"));
        assert!(span("git log"));
        assert!(!span("kubectl-k8sm"));
        assert!(!span("kind: ExecutorUpgradePolicy"));
        assert!(!span("--set agent.enabled=true"));
    }
}
