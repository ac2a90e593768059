//! `k8sm-bench`: see `k8sm-bench --help`, or run it through `cargo xtask bench`.
#![forbid(unsafe_code)]

use clap::Parser;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            // The cluster harness polls the apiserver while it starts: its client's errors then
            // are expected.
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,kube_client::client::builder=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    // A `--scenario NAME` stands for arguments placed before the user's own.
    let args = k8sm_bench::presets::expand(std::env::args().collect());
    k8sm_bench::cli::run(k8sm_bench::cli::Args::parse_from(args)).await
}
