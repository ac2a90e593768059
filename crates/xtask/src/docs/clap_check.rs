//! Commands of this repository's programs, parsed by their own clap definitions: whatever flags
//! those define when the check runs is what the docs must follow.

use clap::Parser;
use clap::error::ErrorKind;

use super::command::Form;
use super::programs::Own;

/// Parses a command line with a clap definition (xtask's own is passed in by its `main`).
pub type Parse = fn(&[String]) -> Result<(), clap::Error>;

/// Whether `argv` parses, or clap's error. A span may leave out required arguments and the value
/// of a flag it ends with; `--help` and `--version` parse.
pub fn check(own: Own, argv: &[String], form: Form, xtask: Parse) -> Result<(), String> {
    let parsed = match own {
        Own::Plugin => kubectl_k8sm::cli::Cli::try_parse_from(argv).map(drop),
        Own::Xtask => xtask(argv),
        Own::Controller => k8sm_controller::Args::try_parse_from(argv).map(drop),
        Own::Agent => k8sm_agent::cli::Cli::try_parse_from(argv).map(drop),
    };
    match parsed {
        Ok(()) => Ok(()),
        Err(error) if accepted(&error, argv, form) => Ok(()),
        Err(error) => Err(error.render().to_string().trim_end().to_owned()),
    }
}

fn accepted(error: &clap::Error, argv: &[String], form: Form) -> bool {
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => true,
        ErrorKind::MissingRequiredArgument
        | ErrorKind::MissingSubcommand
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => form == Form::Span,
        ErrorKind::InvalidValue => {
            form == Form::Span
                && argv.last().is_some_and(|w| w.starts_with('-'))
                && error.to_string().contains("a value is required")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_xtask(_: &[String]) -> Result<(), clap::Error> {
        unreachable!()
    }

    fn plugin(form: Form, args: &str) -> Result<(), String> {
        let argv: Vec<String> = std::iter::once("kubectl k8sm")
            .chain(args.split(' '))
            .map(str::to_owned)
            .collect();
        check(Own::Plugin, &argv, form, no_xtask)
    }

    #[test]
    fn a_block_must_be_complete_and_a_span_may_name_a_command() {
        assert!(plugin(Form::Block, "resume --policy default").is_ok());
        assert!(plugin(Form::Block, "force node-17").is_ok());
        assert!(plugin(Form::Block, "force").is_err());
        assert!(plugin(Form::Span, "force").is_ok());
        assert!(plugin(Form::Span, "upgrade start --to").is_ok());
        assert!(plugin(Form::Block, "upgrade start --to").is_err());
        assert!(plugin(Form::Block, "blocked --help").is_ok());
    }

    #[test]
    fn a_stray_argument_fails_either_way_with_clap_s_words() {
        for form in [Form::Block, Form::Span] {
            let error = plugin(form, "resume conservative").unwrap_err();
            assert!(
                error.contains("unexpected argument 'conservative'"),
                "{error}"
            );
            assert!(plugin(form, "blocked --no-such-flag").is_err());
        }
    }

    #[test]
    fn the_controller_and_the_agent_parse_with_their_own_definitions() {
        let argv = |text: &str| text.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let controller = argv("k8sm-controller --leader-elect --log-format json");
        assert_eq!(
            check(Own::Controller, &controller, Form::Block, no_xtask),
            Ok(())
        );
        let agent = argv("k8sm-agent run --no-such-flag");
        assert!(check(Own::Agent, &agent, Form::Span, no_xtask).is_err());
    }
}
