//! kubectl-k8sm: the operator's console for k8sm upgrades, used as `kubectl k8sm …`.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

use kubectl_k8sm::exit;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(words) = kubectl_k8sm::is_completion(&args) {
        print!("{}", kubectl_k8sm::complete(words));
        return ExitCode::SUCCESS;
    }
    // Usage errors exit with clap's status 2 (exit::USAGE).
    let cli = kubectl_k8sm::cli::Cli::parse_from(args);
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| Ok(runtime.block_on(kubectl_k8sm::run(cli))?));
    match result {
        Ok(outcome) => outcome.into(),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(exit::ERROR)
        }
    }
}
