//! `k8sm-replay`: times the controller's pass on caches fed synthetic watch streams, with no
//! apiserver (see `k8sm_bench::replay`). Usage: `cargo run --release -p k8sm-bench --bin
//! k8sm-replay -- --nodes 1000,10000`.
#![forbid(unsafe_code)]

use std::path::PathBuf;

use clap::Parser;
use k8sm_api::MaxConcurrentNodes;
use k8sm_bench::replay::{self, Config};

/// The controller's allocator (controller/src/main.rs): what a pass costs, and the memory it takes,
/// depend on it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    about = "The controller's pass timed on caches fed synthetic watch streams, with no apiserver"
)]
struct Args {
    /// Fleet sizes, each replayed in a process of its own (so that each one's memory is its own).
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    nodes: Vec<usize>,
    #[arg(long, default_value_t = 30)]
    pods_per_node: usize,
    /// The policy's maxConcurrentNodes: how many nodes drain at once.
    #[arg(long, default_value = "20%")]
    max_concurrent_nodes: MaxConcurrentNodes,
    /// Timed passes, one per step of the upgrade.
    #[arg(long, default_value_t = 200)]
    passes: usize,
    /// The calls the controller may have at once (its starting limit): a pass plans no more
    /// evictions, and the harness carries out at most so many a step.
    #[arg(long, default_value_t = k8sm_controller::INITIAL_CALL_CONCURRENCY)]
    calls: usize,
    /// Processes per fleet size: the summary gives each figure's median [min–max] over them.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Writes the figures (JSON) here, besides the table on stdout.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Replays one fleet size in this process and prints its figures as JSON (how each size gets a
    /// process).
    #[arg(long, hide = true)]
    one: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = |nodes| Config {
        nodes,
        pods_per_node: args.pods_per_node,
        max_concurrent_nodes: args.max_concurrent_nodes,
        passes: args.passes,
        calls: args.calls,
    };
    if args.one {
        let nodes = *args
            .nodes
            .first()
            .ok_or_else(|| anyhow::anyhow!("--nodes is empty"))?;
        println!("{}", serde_json::to_string(&replay::run(&config(nodes)))?);
        return Ok(());
    }
    let mut all = Vec::new();
    for &nodes in args
        .nodes
        .iter()
        .flat_map(|n| std::iter::repeat_n(n, args.runs))
    {
        let output = std::process::Command::new(std::env::current_exe()?)
            // The controller's allocator settings, as its image sets them.
            .envs(k8sm_controller::allocator::missing())
            .args(["--one", "--nodes", &nodes.to_string()])
            .args(["--pods-per-node", &args.pods_per_node.to_string()])
            .args([
                "--max-concurrent-nodes",
                &args.max_concurrent_nodes.to_string(),
            ])
            .args(["--passes", &args.passes.to_string()])
            .args(["--calls", &args.calls.to_string()])
            .stderr(std::process::Stdio::inherit())
            .output()?;
        anyhow::ensure!(
            output.status.success(),
            "the replay of {nodes} nodes failed"
        );
        all.push(serde_json::from_slice::<replay::Figures>(&output.stdout)?);
    }
    print!("{}", replay::render(&all));
    if let Some(path) = args.json {
        std::fs::write(path, serde_json::to_string_pretty(&all)?)?;
    }
    Ok(())
}
