//! k8sm-controller: watches nodes, pods and policies, asks the planner what to do, and does it.
#![forbid(unsafe_code)]

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = k8sm_controller::Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,kube=warn".into()),
        )
        .init();
    match k8sm_controller::run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // One line with the whole cause chain: what an operator reads in `kubectl logs`.
            tracing::error!("{error:#}");
            eprintln!("k8sm-controller: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
