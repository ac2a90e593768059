//! k8sm-controller: watches nodes, pods and policies, asks the planner what to do, and does it.
#![forbid(unsafe_code)]

use std::io::IsTerminal;

use clap::Parser;
use k8sm_controller::LogFormat;

/// mimalloc rather than glibc's malloc: each pass allocates and frees tens of thousands of small
/// objects (its plan) next to a few large vectors (its index), and glibc's malloc took a fifth of a
/// large fleet's pass (most of it consolidating freed chunks), more the longer the process ran
/// (`cargo bench -p k8sm-planner` measures the pass under this allocator: 1.66x faster).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = k8sm_controller::Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube=warn".into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes garble `kubectl logs` and every log collector.
        .with_ansi(std::io::stderr().is_terminal());
    match args.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().flatten_event(true).init(),
    }
    match k8sm_controller::run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // One line with the whole cause chain: what an operator reads in `kubectl logs`.
            tracing::error!("{error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
