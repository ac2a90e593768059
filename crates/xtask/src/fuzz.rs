//! `cargo xtask fuzz`: runs the cargo-fuzz targets of `fuzz/` for a fixed time each and fails if
//! any crashes.
//!
//! Not part of `cargo xtask test`: it needs the nightly toolchain and cargo-fuzz, and takes as long
//! as it is given. Each target grows its corpus in `fuzz/corpus/<target>`; a crash leaves its input
//! in `fuzz/artifacts/<target>` (both git-ignored), and `cargo +nightly fuzz run <target> <that
//! file>` replays it.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::workspace;

/// The cargo-fuzz release the targets are run with (`cargo install cargo-fuzz --locked --version
/// ...`).
pub const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// Lines of a failing run's output that are shown.
const TAIL_LINES: usize = 150;

#[derive(clap::Args)]
pub struct FuzzArgs {
    /// How long to fuzz each target, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    seconds: u64,
    /// Fuzz only this target (a file name in fuzz/fuzz_targets, without `.rs`). Default: every
    /// target.
    #[arg(long)]
    target: Option<String>,
}

pub fn run(args: FuzzArgs) -> anyhow::Result<()> {
    let all = targets()?;
    let targets = match &args.target {
        Some(t) if all.contains(t) => vec![t.clone()],
        Some(t) => bail!("no fuzz target {t:?}; the targets are {}", all.join(", ")),
        None => all,
    };
    check_tools()?;

    let mut build = nightly_cargo();
    build.args(["fuzz", "build"]);
    if let Some(t) = &args.target {
        build.arg(t);
    }
    workspace::run("cargo +nightly fuzz build", &mut build)?;

    let mut summaries = Vec::new();
    let mut failed = Vec::new();
    for target in &targets {
        eprintln!("==> fuzz {target} for {} s", args.seconds);
        let outcome = fuzz(target, args.seconds)?;
        let summary = outcome.summary(target);
        eprintln!("{summary}");
        if !outcome.success {
            eprintln!("---- last lines of the output of {target} ----");
            for line in &outcome.tail {
                eprintln!("{line}");
            }
            if !outcome.panic.is_empty() {
                eprintln!("---- the panic ----");
                for line in &outcome.panic {
                    eprintln!("{line}");
                }
            }
            eprintln!("---- end of {target} ----");
            failed.push(target.clone());
        }
        summaries.push(summary);
    }
    eprintln!("==> fuzz summary");
    for summary in &summaries {
        eprintln!("{summary}");
    }
    if !failed.is_empty() {
        bail!("fuzz target(s) failed: {}", failed.join(", "));
    }
    Ok(())
}

/// The fuzz targets: the files of `fuzz/fuzz_targets`.
fn targets() -> anyhow::Result<Vec<String>> {
    let dir = fuzz_dir().join("fuzz_targets");
    let mut targets = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "rs")
            && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
        {
            targets.push(stem.to_owned());
        }
    }
    targets.sort();
    Ok(targets)
}

fn fuzz_dir() -> PathBuf {
    workspace::root().join("fuzz")
}

/// `cargo +nightly`, through rustup's proxy, without the environment that the cargo running xtask
/// set up: its toolchain choice, and the package variables of `cargo run`, which build scripts such
/// as ring's track (with them, every switch between `cargo xtask fuzz` and a plain `cargo fuzz`
/// would rebuild half the dependency tree).
fn nightly_cargo() -> Command {
    let mut cmd = Command::new("cargo");
    cmd.arg("+nightly").current_dir(workspace::root());
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if matches!(
            key,
            "RUSTUP_TOOLCHAIN"
                | "CARGO"
                | "RUSTC"
                | "RUSTDOC"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
        ) || key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_MANIFEST_")
        {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// Fails with what to install when the nightly toolchain or cargo-fuzz is missing.
fn check_tools() -> anyhow::Result<()> {
    let works = |args: &[&str]| {
        nightly_cargo()
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !works(&["--version"]) {
        bail!(
            "fuzzing needs the nightly Rust toolchain, which is missing: install it with `rustup toolchain install nightly`"
        );
    }
    if !works(&["fuzz", "--version"]) {
        bail!(
            "fuzzing needs cargo-fuzz, which is missing: install it with `cargo install cargo-fuzz --locked --version {CARGO_FUZZ_VERSION}`"
        );
    }
    Ok(())
}

/// What one target's run did.
#[derive(Debug, Default)]
struct Outcome {
    success: bool,
    /// `Done N runs in S second(s)`.
    runs: Option<u64>,
    seconds: Option<u64>,
    /// From the last status line: edges covered and corpus size.
    coverage: Option<u64>,
    corpus: Option<u64>,
    /// The input that made it fail, as libFuzzer saved it.
    artifact: Option<String>,
    /// The panic message, if the target panicked (before libFuzzer's and cargo-fuzz's long
    /// reports).
    panic: Vec<String>,
    in_panic: bool,
    tail: VecDeque<String>,
    status: String,
}

impl Outcome {
    /// Feeds one line of libFuzzer's output.
    fn read(&mut self, line: &str) {
        if self.panic.is_empty() && line.contains("panicked at") {
            self.in_panic = true;
        } else if self.in_panic
            && (line.starts_with("stack backtrace:")
                || line.starts_with("note: ")
                || line.starts_with("==")
                || self.panic.len() >= 40)
        {
            self.in_panic = false;
        }
        if self.in_panic {
            self.panic.push(line.to_owned());
        }
        if let Some(rest) = line.strip_prefix("Done ") {
            // "Done 123456 runs in 61 second(s)"
            let mut words = rest.split_whitespace();
            self.runs = words.next().and_then(|w| w.parse().ok());
            self.seconds = words.nth(2).and_then(|w| w.parse().ok());
        } else if let Some(rest) = line.strip_prefix("stat::number_of_executed_units:") {
            self.runs = self.runs.or_else(|| rest.trim().parse().ok());
        } else if line.starts_with('#') {
            // "#65536  pulse  cov: 1234 ft: 5678 corp: 345/20Kb lim: 4096 exec/s: 21845 rss: 412Mb"
            let words: Vec<&str> = line.split_whitespace().collect();
            let after = |label: &str| {
                let i = words.iter().position(|w| *w == label)?;
                words.get(i + 1)?.split('/').next()?.parse().ok()
            };
            self.coverage = after("cov:").or(self.coverage);
            self.corpus = after("corp:").or(self.corpus);
        } else if let Some((_, path)) = line.split_once("Test unit written to ") {
            self.artifact = Some(path.trim().to_owned());
        }
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(line.to_owned());
    }

    fn summary(&self, target: &str) -> String {
        let mut s = if self.success {
            format!("fuzz {target}: ok")
        } else {
            format!("fuzz {target}: FAILED ({})", self.status)
        };
        match (self.runs, self.seconds) {
            (Some(runs), Some(secs)) if secs > 0 => {
                s += &format!(", {runs} runs in {secs} s ({}/s)", runs / secs)
            }
            (Some(runs), _) => s += &format!(", {runs} runs"),
            (None, _) => {}
        }
        if let Some(cov) = self.coverage {
            s += &format!(", coverage {cov}");
        }
        if let Some(corpus) = self.corpus {
            s += &format!(", corpus {corpus} inputs");
        }
        if let Some(artifact) = &self.artifact {
            s += &format!(
                "; input saved in {artifact}, replay with `cargo +nightly fuzz run {target} {artifact}`"
            );
        }
        s
    }
}

/// Runs one target for `seconds`, keeping libFuzzer's chatter out of the terminal unless the run
/// fails.
fn fuzz(target: &str, seconds: u64) -> anyhow::Result<Outcome> {
    let corpus = fuzz_dir().join("corpus").join(target);
    std::fs::create_dir_all(&corpus).with_context(|| format!("creating {}", corpus.display()))?;
    let mut child = nightly_cargo()
        .args(["fuzz", "run", target])
        .arg(&corpus)
        .args([
            "--",
            &format!("-max_total_time={seconds}"),
            // A single input that takes this long is a hang: reported as a failure.
            "-timeout=30",
            "-print_final_stats=1",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting cargo +nightly fuzz run {target}"))?;
    let mut outcome = Outcome::default();
    let stderr = child
        .stderr
        .take()
        .context("capturing libFuzzer's output")?;
    for line in BufReader::new(stderr).lines() {
        outcome.read(&line.context("reading libFuzzer's output")?);
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for cargo +nightly fuzz run {target}"))?;
    outcome.success = status.success();
    outcome.status = status.to_string();
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libfuzzer_output() {
        let mut o = Outcome::default();
        for line in [
            "INFO: Seed: 1234",
            "#2\tINITED cov: 10 ft: 11 corp: 1/1b exec/s: 0 rss: 40Mb",
            "#65536\tpulse  cov: 1234 ft: 5678 corp: 345/20Kb lim: 4096 exec/s: 21845 rss: 412Mb",
            "#70000\tDONE   cov: 1240 ft: 5700 corp: 350/21Kb lim: 4096 exec/s: 1166 rss: 420Mb",
            "stat::number_of_executed_units: 70000",
            "Done 70000 runs in 60 second(s)",
        ] {
            o.read(line);
        }
        o.success = true;
        assert_eq!(
            o.summary("t"),
            "fuzz t: ok, 70000 runs in 60 s (1166/s), coverage 1240, corpus 350 inputs"
        );

        let mut o = Outcome::default();
        o.read("thread '<unnamed>' (1) panicked at fuzz_targets/t.rs:1:2:");
        o.read("assertion failed: x");
        o.read("stack backtrace:");
        o.read("   0: __rustc::rust_begin_unwind");
        assert_eq!(
            o.panic,
            [
                "thread '<unnamed>' (1) panicked at fuzz_targets/t.rs:1:2:",
                "assertion failed: x"
            ]
        );
        o.read(
            "artifact_prefix='fuzz/artifacts/t/'; Test unit written to fuzz/artifacts/t/crash-abc",
        );
        o.read("stat::number_of_executed_units: 42");
        o.status = "exit status: 1".into();
        assert_eq!(
            o.summary("t"),
            "fuzz t: FAILED (exit status: 1), 42 runs; input saved in fuzz/artifacts/t/crash-abc, replay with \
             `cargo +nightly fuzz run t fuzz/artifacts/t/crash-abc`"
        );
    }
}
