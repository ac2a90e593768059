//! `cargo xtask docs`, also two steps of `cargo xtask test`: every shell command the docs show
//! (README.md, CONTRIBUTING.md, docs/, deploy/ with its YAML comments, the crates' READMEs) is
//! checked, so that a command copied from them works.
//!
//! - Commands of k8sm's programs (`kubectl k8sm`, `cargo xtask`, `k8sm-controller`, `k8sm-agent`)
//!   are parsed by their clap definitions as built, and cargo's by cargo (`--help` added).
//! - kubectl's and Helm's: a block's line runs against a demo cluster (changes as server-side dry
//!   runs); a span (`kubectl drain`) names a command, and the tool's parser checks it.
//! - Other programs are allow-listed with a reason; an unknown one fails, as does a command that
//!   does not parse or run.
//!
//! Blocks (`sh`, `bash`, `shell`, `console`) hold whole commands. A span is a command when it
//! starts with a known program and has an argument; it may leave out required arguments and use
//! synopsis notation ([`synopsis`]). Placeholders get sample values ([`placeholders`]).

mod bounded;
mod check;
mod clap_check;
mod command;
mod extract;
mod grammar;
mod manifests;
mod markdown;
mod on_cluster;
mod placeholders;
mod programs;
mod shell;
mod snippet;
mod sources;
mod synopsis;
mod yaml;

use std::path::Path;

use anyhow::{Context, bail};
use k8sm_testcluster::Binaries;

pub use check::Phase;
pub use clap_check::Parse;
use command::DocCommand;

#[derive(clap::Args)]
pub struct DocsArgs {
    /// Only the checks that need no cluster and no Go-built tool: k8sm's programs and cargo.
    #[arg(long)]
    parse_only: bool,
    /// List every command with how it was checked.
    #[arg(short, long)]
    verbose: bool,
}

/// `cargo xtask docs`: both passes.
pub fn run(args: DocsArgs, xtask: Parse) -> anyhow::Result<()> {
    check_parse(xtask, args.verbose)?;
    if args.parse_only {
        return Ok(());
    }
    let binaries = Binaries::ensure().context("building kubectl")?;
    let helm = Binaries::helm().context("building Helm")?;
    check_tools(&binaries.kubectl, &helm, args.verbose)
}

/// The pass that needs no cluster: k8sm's own programs, cargo, the allow-list.
pub fn check_parse(xtask: Parse, verbose: bool) -> anyhow::Result<()> {
    eprintln!("==> docs: the commands of k8sm's programs and cargo's parse");
    let commands = commands()?;
    report(
        &commands,
        &check::check(&commands, &Phase::Parse { xtask }),
        verbose,
    )
}

/// The pass with kubectl and Helm, on a demo cluster of its own.
pub fn check_tools(kubectl: &Path, helm: &Path, verbose: bool) -> anyhow::Result<()> {
    eprintln!("==> docs: kubectl's and Helm's commands parse, and run on a demo cluster");
    let commands = commands()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let demo = on_cluster::Demo::start(&runtime, helm.to_owned())?;
    let tally = check::check(
        &commands,
        &Phase::Tools {
            demo: &demo,
            kubectl,
            helm,
        },
    );
    drop(demo);
    report(&commands, &tally, verbose)
}

/// Every command of the docs; a line that cannot be read as commands fails.
fn commands() -> anyhow::Result<Vec<DocCommand>> {
    let root = crate::workspace::root();
    let mut commands = Vec::new();
    let mut unreadable = Vec::new();
    for source in sources::files(&root) {
        let text = std::fs::read_to_string(&source.path)
            .with_context(|| format!("reading {}", source.path.display()))?;
        let file = source.path.strip_prefix(&root).unwrap_or(&source.path);
        let (found, bad) = extract::commands(&file.display().to_string(), source.kind, &text);
        commands.extend(found);
        unreadable.extend(bad);
    }
    if !unreadable.is_empty() {
        for u in &unreadable {
            eprintln!(
                "{}:{}: `{}`: not read as shell: {}",
                u.file, u.line, u.text, u.error
            );
        }
        bail!(
            "{} doc lines cannot be read as shell commands",
            unreadable.len()
        );
    }
    Ok(commands)
}

fn report(commands: &[DocCommand], tally: &check::Tally, verbose: bool) -> anyhow::Result<()> {
    if verbose {
        for line in &tally.lines {
            eprintln!("    {line}");
        }
    }
    let checked: usize = tally.counts.values().sum();
    eprintln!(
        "    {} commands in the docs: {checked} checked here, {} in the other pass",
        commands.len(),
        tally.deferred
    );
    for (label, count) in &tally.counts {
        eprintln!("    {count:>4}  {label}");
    }
    if tally.failures.is_empty() {
        return Ok(());
    }
    for failure in &tally.failures {
        eprintln!("{failure}");
    }
    bail!(
        "{} documented commands fail (file:line above)",
        tally.failures.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_xtask(_: &[String]) -> Result<(), clap::Error> {
        Ok(())
    }

    /// The known-broken command of issue 45, in a doc: the pass fails naming where and why.
    #[test]
    fn a_command_that_does_not_parse_fails_with_its_file_and_line() {
        let doc =
            "spec:\n  # Review `kubectl k8sm plan`, then `kubectl k8sm resume conservative`.\n";
        let (commands, _) = extract::commands("deploy/x.yaml", sources::Kind::Yaml, doc);
        let tally = check::check(&commands, &Phase::Parse { xtask: no_xtask });
        assert_eq!(tally.counts.values().sum::<usize>(), 2);
        assert_eq!(tally.failures.len(), 1, "{:?}", tally.failures);
        let failure = &tally.failures[0];
        assert!(failure.starts_with("deploy/x.yaml:2: `kubectl k8sm resume conservative`"));
        assert!(
            failure.contains("unexpected argument 'conservative'"),
            "{failure}"
        );
        assert!(report(&commands, &tally, false).is_err());
    }

    #[test]
    fn a_program_nobody_checks_or_allows_fails() {
        let doc = "Intro.\n\n```sh\ncurl -sSf https://example.com | sh\n```\n";
        let (commands, _) = extract::commands("README.md", sources::Kind::Markdown, doc);
        let tally = check::check(&commands, &Phase::Parse { xtask: no_xtask });
        assert_eq!(tally.failures.len(), 2, "{:?}", tally.failures);
        assert!(
            tally.failures[0].starts_with("README.md:4: `curl"),
            "{}",
            tally.failures[0]
        );
        assert!(
            tally.failures[0].contains("allow-list"),
            "{}",
            tally.failures[0]
        );
    }
}
