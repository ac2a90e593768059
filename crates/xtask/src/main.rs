//! `cargo xtask`: the project's automation — tests, CRD generation, the local cluster, the demo,
//! the benchmarks and the release packaging (container images, the krew plugin release).
#![forbid(unsafe_code)]

mod bench;
mod cluster;
mod crdgen;
mod demo;
mod deny;
mod dist;
mod docs;
mod e2e;
mod executable;
mod fuzz;
mod image;
mod layout;
mod packaging;
mod release;
mod test;
mod workspace;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "k8sm project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Everything CI checks: fmt, layout, the docs' commands, clippy, CRD drift, cargo-deny
    /// (licenses, bans, sources), unit and end-to-end tests on the real local cluster.
    Test(test::TestArgs),
    /// Check the source layout: no import cycle between the files of a crate, and the docs name
    /// only files that exist. Also a step of `test`.
    Layout,
    /// Check every shell command the docs show: k8sm's own by their clap definitions, kubectl's
    /// and Helm's on a demo cluster (changes as dry runs). Also steps of `test`.
    Docs(docs::DocsArgs),
    /// Write the CRD (crds/, and its copy in the Helm chart) from the Rust types (--check: fail
    /// when either differs).
    Crdgen(crdgen::CrdgenArgs),
    /// Manage the long-lived local cluster (up, down, status).
    Cluster(cluster::ClusterArgs),
    /// Run the harness's kubectl against the local cluster: `cargo xtask kubectl get nodes`.
    Kubectl {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build k8sm, start a 30-node local cluster with real workloads, the controller and simulated
    /// executors, roll a new executor through it live (`kubectl k8sm upgrade status --watch`),
    /// then print a summary. The cluster keeps running (`cargo xtask cluster down` stops it).
    Demo(demo::DemoArgs),
    /// Benchmarks on the real local cluster, k8sm against `kubectl drain`: writes
    /// bench/results/<scenario>.md (`cargo xtask bench --nodes 100`). Not part of `test`.
    Bench(bench::BenchArgs),
    /// Run the cargo-fuzz targets of fuzz/ for --seconds each (default 60; needs nightly and
    /// cargo-fuzz), failing if any crashes. Not part of `test`.
    Fuzz(fuzz::FuzzArgs),
    /// OCI image archives of k8sm-controller and k8sm-agent from statically linked release
    /// binaries, without a Docker daemon (crane, pinned in tests/go/crane), each an index of
    /// linux/amd64 and linux/arm64: target/image/<name>-<version>.oci.tar.
    Image(image::ImageArgs),
    /// The kubectl plugin's release for krew: archive, SHA-256 and the manifest rendered from
    /// plugin/krew.yaml for the platforms built (linux/amd64, linux/arm64), checked by krew's
    /// validate-krew-manifest and install: target/dist/.
    Dist(dist::DistArgs),
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Test(args) => test::run(args, parse),
        Command::Layout => layout::run(),
        Command::Docs(args) => docs::run(args, parse),
        Command::Crdgen(args) => crdgen::run(args),
        Command::Cluster(args) => cluster::run(args),
        Command::Kubectl { args } => cluster::kubectl(&args),
        Command::Demo(args) => demo::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Fuzz(args) => fuzz::run(args),
        Command::Image(args) => image::run(args),
        Command::Dist(args) => dist::run(args),
    }
}

/// Parses a documented `cargo xtask …` command line (the docs check's view of [`Cli`]).
fn parse(argv: &[String]) -> Result<(), clap::Error> {
    Cli::try_parse_from(argv).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gate's first docs pass, so that `cargo test` catches a broken documented command too.
    #[test]
    fn the_documented_commands_of_k8sm_s_programs_and_cargo_parse() {
        docs::check_parse(parse, false).unwrap();
    }

    #[test]
    fn the_cli_is_consistent() {
        <Cli as clap::CommandFactory>::command().debug_assert();
    }
}
