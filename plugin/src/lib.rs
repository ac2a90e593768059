//! kubectl-k8sm as a library: the operator's console for k8sm upgrades, used as `kubectl k8sm …`.
//!
//! Every command is fetch → pure screen model ([`screens`]) → render into a `String` ([`render`]) →
//! print. `plan`, `blocked` and `force` run the controller's planner over the conversion of live
//! objects that the controller uses too ([`k8sm_view`]), so what the plugin predicts is what the
//! controller does.
#![forbid(unsafe_code)]

pub mod cli;
mod columns;
mod commands;
mod complete;
mod connect;
mod error;
pub mod exit;
mod fetch;
mod format;
mod jsonpath;
mod output;
mod render;
mod screens;

use cli::{Cli, Command, Upgrade};
use commands::{blocked, executor_id, force, plan, policy, report, status, watch};
pub use complete::{complete, is_completion};
use connect::Connection;
pub use error::Error;
use exit::Outcome;
use output::Terminal;

/// Runs one command line.
pub async fn run(cli: Cli) -> Result<Outcome, Error> {
    let terminal = Terminal::detect();
    if let Command::ExecutorId(args) = &cli.command {
        // Pure computation: no cluster needed.
        return executor_id::run(args).map(|()| Outcome::Ok);
    }
    if let Command::Completion(args) = &cli.command {
        let mut command = <Cli as clap::CommandFactory>::command();
        let mut script = Vec::new();
        clap_complete::generate(args.shell, &mut command, "kubectl-k8sm", &mut script);
        return output::print(&String::from_utf8_lossy(&script)).map(|()| Outcome::Ok);
    }
    let mut options: connect::ConnectOptions = (&cli.connect).into();
    options.long_lived =
        matches!(&cli.command, Command::Upgrade(Upgrade::Status(args)) if args.watch);
    let connection = Connection::open(&options).await?;
    let client = &connection.client;
    let done = match &cli.command {
        Command::Upgrade(Upgrade::Status(args)) if args.watch => {
            let policy = fetch::policy(client, args.policy.policy.as_deref()).await?;
            watch::run(client, &policy, args, terminal).await
        }
        Command::Upgrade(Upgrade::Status(args)) => {
            return status::run(client, args, terminal).await;
        }
        Command::Blocked(args) => return blocked::run(client, args, terminal).await,
        Command::Upgrade(Upgrade::Start(args)) => policy::start(client, args, terminal).await,
        Command::Upgrade(Upgrade::Report(args)) => report::run(client, args, terminal).await,
        Command::Plan(args) => plan::run(client, args, terminal).await,
        Command::Force(args) => force::run(&connection, args, terminal).await,
        Command::Pause(args) => policy::pause(client, args, terminal).await,
        Command::Resume(args) => policy::resume(client, args).await,
        Command::ExecutorId(_) | Command::Completion(_) => unreachable!("handled above"),
    };
    done.map(|()| Outcome::Ok)
}
