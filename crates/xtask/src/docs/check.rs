//! Checks each command as its program allows, and counts the commands by how they were checked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::clap_check::{self, Parse};
use super::command::DocCommand;
use super::grammar;
use super::on_cluster::Demo;
use super::programs::{self, Check, Tool};

/// What one pass checks.
pub enum Phase<'a> {
    /// k8sm's own programs (clap), cargo's commands, the allow-list: no cluster, no Go-built tool.
    Parse { xtask: Parse },
    /// kubectl's and Helm's: their grammar, and the blocks' commands on the demo cluster.
    Tools {
        demo: &'a Demo,
        kubectl: &'a Path,
        helm: &'a Path,
    },
}

/// The commands of a pass by how they were checked, and the failures.
#[derive(Default)]
pub struct Tally {
    pub counts: BTreeMap<String, usize>,
    /// Left to the other pass.
    pub deferred: usize,
    pub failures: Vec<String>,
    /// Every command checked, with its check (for `--verbose`).
    pub lines: Vec<String>,
}

pub fn check(commands: &[DocCommand], phase: &Phase<'_>) -> Tally {
    let mut tally = Tally::default();
    for command in commands {
        let (label, result) = match check_one(command, phase) {
            Step::Checked(label, result) => (label, result),
            Step::Later => {
                tally.deferred += 1;
                continue;
            }
            Step::Earlier => continue,
        };
        *tally.counts.entry(label.clone()).or_default() += 1;
        tally.lines.push(format!("{label}: {command}"));
        if let Err(error) = result {
            let error = error.replace('\n', "\n    ");
            tally
                .failures
                .push(format!("{command}\n  ({label}):\n    {error}"));
        }
    }
    tally
}

enum Step {
    /// Checked in this pass: the check's label and its result.
    Checked(String, Result<(), String>),
    /// Left to the tools' pass.
    Later,
    /// Checked by the parse pass.
    Earlier,
}

fn check_one(command: &DocCommand, phase: &Phase<'_>) -> Step {
    let check = programs::classify(command);
    match (phase, check) {
        (Phase::Parse { xtask }, Check::Clap { own, argv }) => Step::Checked(
            format!("parsed by {}'s clap definition", own.name()),
            clap_check::check(own, &argv, command.form, *xtask),
        ),
        (
            Phase::Parse { .. },
            Check::Grammar {
                tool: Tool::Cargo,
                args,
            },
        ) => {
            let cargo = PathBuf::from(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
            Step::Checked(
                "parsed by cargo (--help)".to_owned(),
                grammar::check(&cargo, &args, command.form),
            )
        }
        (Phase::Parse { .. }, Check::Allowed { program, reason }) => {
            Step::Checked(format!("allow-listed: {program} ({reason})"), Ok(()))
        }
        (Phase::Parse { .. }, Check::Unknown) => Step::Checked(
            "unknown program".to_owned(),
            Err(format!(
                "nothing says how to check `{}`: give it a check, or a place with its reason in \
                 the allow-list, in crates/xtask/src/docs/programs.rs",
                command.words.first().map_or("", String::as_str)
            )),
        ),
        (Phase::Parse { .. }, _) => Step::Later,
        (Phase::Tools { kubectl, helm, .. }, Check::Grammar { tool, args }) => {
            let program = match tool {
                Tool::Kubectl => kubectl,
                Tool::Helm => helm,
                Tool::Cargo => return Step::Earlier,
            };
            Step::Checked(
                format!("parsed by {} (--help)", tool.name()),
                grammar::check(program, &args, command.form),
            )
        }
        (Phase::Tools { demo, .. }, Check::Run { tool, args }) => Step::Checked(
            format!("run on the demo cluster ({})", tool.name()),
            demo.run(tool, &args),
        ),
        (Phase::Tools { .. }, _) => Step::Earlier,
    }
}
