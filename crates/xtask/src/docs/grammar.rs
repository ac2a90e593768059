//! Commands of tools checked by the tool's own parser, which reads every flag and prints its
//! help instead of running: `cargo … --help`, and spans naming kubectl or Helm commands
//! (`kubectl drain`), which are references rather than commands to copy.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::bounded;
use super::command::Form;

/// Whether the tool at `program` accepts `args` with `--help` after them (before `--`: what
/// follows is another program's). A span may leave out the value of the flag it ends with, which
/// then takes `--help` for its value or finds none.
pub fn check(program: &Path, args: &[String], form: Form) -> Result<(), String> {
    let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let mut words = args.to_vec();
    words.insert(at, "--help".to_owned());
    let mut command = Command::new(program);
    command.args(&words).current_dir(crate::workspace::root());
    let output = bounded::run(&mut command, Duration::from_secs(60))?;
    if output.success {
        return Ok(());
    }
    let needs_value = [
        "flag needs an argument",
        "a value is required",
        "invalid argument \"--help\"",
    ]
    .iter()
    .any(|text| output.stderr.contains(text));
    let ends_with_flag = at > 0 && args[at - 1].starts_with('-');
    if form == Form::Span && needs_value && ends_with_flag {
        return Ok(());
    }
    Err(format!(
        "`{} {}` failed:\n{}",
        program.display(),
        words.join(" "),
        output.stderr.trim_end()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cargo(form: Form, args: &str) -> Result<(), String> {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let args: Vec<String> = args.split(' ').map(str::to_owned).collect();
        check(Path::new(&cargo), &args, form)
    }

    #[test]
    fn cargo_s_parser_reads_the_flags() {
        assert_eq!(cargo(Form::Block, "test -p k8sm-e2e --test NAME"), Ok(()));
        assert_eq!(
            cargo(Form::Block, "run --release -p k8sm-bench -- --runs 3"),
            Ok(())
        );
        assert!(cargo(Form::Block, "test --no-such-flag").is_err());
        assert!(cargo(Form::Block, "build --features").is_err());
        assert_eq!(cargo(Form::Span, "build --features"), Ok(()));
    }
}
