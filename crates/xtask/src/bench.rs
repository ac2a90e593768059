//! `cargo xtask bench`: the planner's criterion benchmark, then k8sm against `kubectl drain` on the
//! real local cluster (crates/bench), which reads criterion's estimates of this invocation and
//! writes `bench/results/<scenario>.md` and the index `bench/results/README.md`. Not part of `cargo
//! xtask test`: it takes minutes to an hour and yields figures, not pass/fail.

use std::path::Path;

use anyhow::bail;

use crate::workspace;

/// The charts' default font (Debian package fonts-dejavu-core).
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Skip `cargo bench -p k8sm-planner` (the planner's pass over 1,000 and 5,000 synthetic
    /// nodes).
    #[arg(long)]
    no_planner_bench: bool,
    /// Arguments of k8sm-bench: `--nodes N`, `--pods M`, `--runs 3`, `--tools
    /// k8sm,drain-pdb-parallel,drain-pdb,drain`, `--render-only`, …
    /// (`cargo run -p k8sm-bench -- --help` lists them).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let custom_font = args.args.iter().any(|a| a.starts_with("--font"));
    if !custom_font && !Path::new(FONT).exists() {
        install_font()?;
    }
    if !args.no_planner_bench {
        workspace::run(
            "cargo bench -p k8sm-planner --bench plan (planner pass, 1,000 and 5,000 nodes)",
            workspace::cargo().args(["bench", "-p", "k8sm-planner", "--bench", "plan"]),
        )?;
    }
    // The benchmark starts the controller and the simulated executors from target/release.
    workspace::run(
        "cargo build --release -p k8sm-controller -p k8sm-agent",
        workspace::cargo().args([
            "build",
            "--release",
            "-p",
            "k8sm-controller",
            "-p",
            "k8sm-agent",
        ]),
    )?;
    let mut bench = workspace::cargo();
    bench
        .args(["run", "--release", "-p", "k8sm-bench", "--"])
        .args(&args.args);
    // The report must not present criterion figures left by an earlier run as this invocation's.
    if args.no_planner_bench && !args.args.iter().any(|a| a == "--planner-measured-earlier") {
        bench.arg("--planner-measured-earlier");
    }
    workspace::run("cargo run --release -p k8sm-bench", &mut bench)
}

/// The charts need a TrueType font; Debian machines get DejaVu Sans from its package, as .ci/run
/// installs tools.
fn install_font() -> anyhow::Result<()> {
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    if !root || which("apt-get").is_none() {
        bail!("the charts need {FONT}: install fonts-dejavu-core, or pass --font <a .ttf file>");
    }
    workspace::run(
        "apt-get install fonts-dejavu-core (the charts' font)",
        std::process::Command::new("apt-get")
            .args(["install", "-y", "-qq", "fonts-dejavu-core"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}
