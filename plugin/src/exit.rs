//! The plugin's exit statuses, so that scripts can tell "blocked" from "broken".

use std::process::ExitCode;

/// How a command that worked ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// `blocked` listed pods, or `upgrade status --exit-code` found a Blocked node.
    Blocked,
}

/// The command did what it was asked.
pub const OK: u8 = 0;
/// It could not: the cluster, the kubeconfig, a refusal; stderr says why.
pub const ERROR: u8 = 1;
/// The command line does not parse (clap's own status for usage errors).
pub const USAGE: u8 = 2;
/// It worked, and found blocked nodes.
pub const BLOCKED: u8 = 3;

/// The exit statuses, as the help states them (a macro, so `concat!` can put it into the help).
macro_rules! help {
    () => {
        "Exit status:
  0  success
  1  error (the cluster, the kubeconfig or a refusal; stderr says why)
  2  usage: the command line does not parse
  3  blocked: `blocked` listed pods that hold their nodes, or `upgrade status --exit-code` found
     a Blocked node"
    };
}
pub(crate) use help;

pub const HELP: &str = help!();

impl Outcome {
    pub fn code(self) -> u8 {
        match self {
            Self::Ok => OK,
            Self::Blocked => BLOCKED,
        }
    }
}

impl From<Outcome> for ExitCode {
    fn from(outcome: Outcome) -> Self {
        Self::from(outcome.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_states_every_status() {
        for code in [OK, ERROR, USAGE, BLOCKED] {
            assert!(HELP.contains(&format!("\n  {code}  ")), "{code}");
        }
        assert_eq!(Outcome::Blocked.code(), 3);
        assert_eq!(Outcome::Ok.code(), 0);
    }
}
