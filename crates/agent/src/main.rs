//! k8sm-agent: the node side of the k8sm contract (publishes executor IDs, obeys kamikaze);
//! `simulate` plays the executors of KWOK nodes.
#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use k8sm_agent::cli::{Cli, Command, LogFormat};
use k8sm_agent::{Shutdown, run, simulate};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes would garble journald and log files.
        .with_ansi(std::io::stderr().is_terminal());
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().flatten_event(true).init(),
    }
    let shutdown = Shutdown::on_signals()?;
    match cli.command {
        Command::Simulate(args) => simulate::run(args, shutdown).await?,
        Command::Run(mut args) => {
            args.executor_id = match args.given_executor_id.clone() {
                Some(id) => id,
                None => {
                    let id = k8sm_agent::kubelet::executor_id(&args.proc, args.kubelet_pid)?;
                    tracing::info!(executor_id = %id, "computed the executor ID of the running kubelet");
                    id.to_string()
                }
            };
            // A failed command exits non-zero so that a service manager that restarts on failure
            // tries again.
            if let run::Outcome::Kamikaze {
                command_succeeded: false,
            } = run::run(args, shutdown).await?
            {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
