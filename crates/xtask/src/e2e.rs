//! The end-to-end tests of `cargo xtask test`, run several at a time: each test starts its own
//! small cluster and spends most of its time waiting on it, so two cores carry more than the two
//! that `cargo test` would run (one test binary after the other).

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::workspace;

/// The package whose test binaries are the end-to-end tests.
pub const PACKAGE: &str = "k8sm-e2e";

/// Tests run at once. Each cluster's apiserver, etcd and controller manager take about a tenth of a
/// core while idle; more than this on two cores stretches the tests' own waits.
pub const DEFAULT_JOBS: usize = 4;

/// One test of one test binary.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Job {
    binary: PathBuf,
    /// The test binary's name: the file under tests/e2e/tests/.
    file: String,
    test: String,
}

impl Job {
    fn name(&self) -> String {
        format!("{}::{}", self.file, self.test)
    }
}

/// What a job did.
struct Outcome {
    job: Job,
    elapsed: Duration,
    passed: bool,
    output: PathBuf,
}

/// Test files that need something built beside the tests, and what waits for it.
pub struct Held<'a> {
    pub files: &'a [&'a str],
    pub until: &'a (dyn Fn() -> anyhow::Result<()> + Sync),
}

/// Builds the end-to-end test binaries, lists their tests (those `filter` selects, as libtest
/// would), runs them `jobs` at a time (the held ones last, once what they wait for is there), and
/// fails naming every test that failed, whose output it prints.
pub fn run(
    jobs: usize,
    filter: &[String],
    env: &[(&str, OsString)],
    held: Held<'_>,
) -> anyhow::Result<()> {
    eprintln!("==> end-to-end tests, {jobs} at a time");
    let binaries = build()?;
    let mut jobs_found = Vec::new();
    for (file, binary) in &binaries {
        for test in list(binary, filter)? {
            jobs_found.push(Job {
                binary: binary.clone(),
                file: file.clone(),
                test,
            });
        }
    }
    let logs = workspace::root().join("target/e2e-logs");
    let history = logs.join("durations.tsv");
    let queue = order(jobs_found, &read_durations(&history), &held);
    let total = queue.len();
    if total == 0 {
        // A filter for unit tests only.
        eprintln!("==> no end-to-end test matches {filter:?}");
        return Ok(());
    }
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let started = Instant::now();
    let queue = Mutex::new(queue);
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                while let Some(job) = next(&queue) {
                    let outcome = if held.files.contains(&job.file.as_str()) {
                        match (held.until)() {
                            Ok(()) => run_one(job, &logs, env),
                            Err(e) => not_run(job, &logs, &e),
                        }
                    } else {
                        run_one(job, &logs, env)
                    };
                    let mut outcomes = outcomes.lock().unwrap_or_else(|e| e.into_inner());
                    outcomes.push(outcome);
                    report(outcomes.last().expect("just pushed"), outcomes.len(), total);
                }
            });
        }
    });
    let mut outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    outcomes.sort_by_key(|o| std::cmp::Reverse(o.elapsed));
    write_durations(&history, &outcomes);
    eprintln!(
        "==> {total} end-to-end tests in {:.0} s ({jobs} at a time); the slowest:",
        started.elapsed().as_secs_f64()
    );
    for o in outcomes.iter().take(8) {
        eprintln!("    {:>6.1} s  {}", o.elapsed.as_secs_f64(), o.job.name());
    }
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| !o.passed).collect();
    for o in &failed {
        let output = std::fs::read_to_string(&o.output).unwrap_or_default();
        eprintln!(
            "---- {} failed; its output ({}):\n{output}",
            o.job.name(),
            o.output.display()
        );
    }
    if !failed.is_empty() {
        let names: Vec<String> = failed.iter().map(|o| o.job.name()).collect();
        bail!(
            "{} end-to-end test(s) failed: {}",
            failed.len(),
            names.join(", ")
        );
    }
    Ok(())
}

/// The order jobs start in: the longest first as the last run timed them (new tests count as long),
/// so that no long test starts last and runs alone; the held ones after all others.
fn order(jobs: Vec<Job>, durations: &HashMap<String, f64>, held: &Held<'_>) -> VecDeque<Job> {
    let mut jobs = jobs;
    jobs.sort_by(|a, b| {
        let is_held = |j: &Job| held.files.contains(&j.file.as_str());
        let took = |j: &Job| durations.get(&j.name()).copied().unwrap_or(f64::INFINITY);
        is_held(a)
            .cmp(&is_held(b))
            .then(took(b).total_cmp(&took(a)))
            .then_with(|| a.name().cmp(&b.name()))
    });
    jobs.into()
}

/// `file::test<TAB>seconds` lines of the last run (none: an empty map).
fn read_durations(path: &Path) -> HashMap<String, f64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (name, secs) = l.split_once('\t')?;
            Some((name.to_owned(), secs.parse().ok()?))
        })
        .collect()
}

fn write_durations(path: &Path, outcomes: &[Outcome]) {
    let mut known = read_durations(path);
    for o in outcomes.iter().filter(|o| o.elapsed > Duration::ZERO) {
        known.insert(o.job.name(), o.elapsed.as_secs_f64());
    }
    let mut lines: Vec<String> = known.iter().map(|(n, s)| format!("{n}\t{s:.1}")).collect();
    lines.sort();
    let _ = std::fs::write(path, lines.join("\n") + "\n");
}

fn next(queue: &Mutex<VecDeque<Job>>) -> Option<Job> {
    queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
}

fn report(o: &Outcome, done: usize, total: usize) {
    eprintln!(
        "    [{done}/{total}] {} {} ({:.1} s)",
        if o.passed { "ok    " } else { "FAILED" },
        o.job.name(),
        o.elapsed.as_secs_f64()
    );
}

/// Compiles the package's test binaries and returns (file name, executable) for each.
///
/// With the whole workspace selected, as the unit tests were: `-p` alone would resolve other
/// features for the shared dependencies and compile 74 of them again (2.5 min in the gate).
fn build() -> anyhow::Result<Vec<(String, PathBuf)>> {
    let output = workspace::cargo()
        .args(["test", "--workspace", "--no-run", "--message-format=json"])
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo test --no-run")?;
    if !output.status.success() {
        bail!("building the end-to-end tests failed ({})", output.status);
    }
    Ok(test_executables(&String::from_utf8_lossy(&output.stdout)))
}

/// The test executables of [`PACKAGE`] (its integration tests and its library's unit tests) in
/// cargo's JSON messages.
fn test_executables(messages: &str) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["profile"]["test"] == true)
        .filter(|m| {
            m["manifest_path"]
                .as_str()
                .is_some_and(|p| p.ends_with("tests/e2e/Cargo.toml"))
        })
        .filter_map(|m| {
            let name = m["target"]["name"].as_str()?.to_owned();
            let exe = PathBuf::from(m["executable"].as_str()?);
            Some((name, exe))
        })
        .collect();
    found.sort();
    found
}

/// The tests of one binary that `filter` selects (`--list --format terse`: `name: test` lines).
fn list(binary: &Path, filter: &[String]) -> anyhow::Result<Vec<String>> {
    let output = Command::new(binary)
        .args(["--list", "--format", "terse"])
        .args(filter)
        .current_dir(package_dir())
        .output()
        .with_context(|| format!("listing the tests of {}", binary.display()))?;
    if !output.status.success() {
        bail!("{} --list failed ({})", binary.display(), output.status);
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_owned)
        .collect())
}

/// Runs one test alone in its binary, as `cargo test` would (from the package's directory), with
/// its output in a file.
fn run_one(job: Job, logs: &Path, env: &[(&str, OsString)]) -> Outcome {
    let output = log_path(logs, &job);
    let started = Instant::now();
    let passed = std::fs::File::create(&output)
        .and_then(|log| {
            let err = log.try_clone()?;
            Command::new(&job.binary)
                .args(["--exact", &job.test, "--test-threads=1", "--nocapture"])
                .current_dir(package_dir())
                .envs(env.iter().map(|(k, v)| (*k, v)))
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(err)
                .status()
        })
        .is_ok_and(|status| status.success());
    Outcome {
        job,
        elapsed: started.elapsed(),
        passed,
        output,
    }
}

/// A job whose prerequisite failed: failed, with the reason as its output.
fn not_run(job: Job, logs: &Path, why: &anyhow::Error) -> Outcome {
    let output = log_path(logs, &job);
    let _ = std::fs::write(&output, format!("not run: {why:#}\n"));
    Outcome {
        job,
        elapsed: Duration::ZERO,
        passed: false,
        output,
    }
}

fn log_path(logs: &Path, job: &Job) -> PathBuf {
    logs.join(format!("{}--{}.log", job.file, job.test.replace("::", "-")))
}

fn package_dir() -> PathBuf {
    workspace::root().join("tests/e2e")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(file: &str, test: &str) -> Job {
        Job {
            binary: PathBuf::from(file),
            file: file.to_owned(),
            test: test.to_owned(),
        }
    }

    #[test]
    fn the_longest_start_first_new_ones_before_them_and_held_ones_last() {
        let durations =
            read_durations_from("a::short\t3.0\nb::long\t90.5\nimage::x\t500\nbad line\n");
        let jobs = vec![
            job("image", "x"),
            job("a", "short"),
            job("b", "long"),
            job("c", "new"),
        ];
        let held = Held {
            files: &["image"],
            until: &|| Ok(()),
        };
        let order: Vec<String> = order(jobs, &durations, &held)
            .iter()
            .map(Job::name)
            .collect();
        assert_eq!(order, ["c::new", "b::long", "a::short", "image::x"]);
    }

    fn read_durations_from(text: &str) -> HashMap<String, f64> {
        let dir = std::env::temp_dir().join(format!("k8sm-e2e-order-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("durations.tsv");
        std::fs::write(&path, text).unwrap();
        let read = read_durations(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        read
    }

    #[test]
    fn every_test_executable_of_the_e2e_package_and_only_those_is_run() {
        let messages = [
            r#"{"reason":"compiler-artifact","manifest_path":"/w/tests/e2e/Cargo.toml","target":{"kind":["test"],"name":"upgrade"},"profile":{"test":true},"executable":"/w/target/debug/deps/upgrade-1"}"#,
            r#"{"reason":"compiler-artifact","manifest_path":"/w/tests/e2e/Cargo.toml","target":{"kind":["lib"],"name":"k8sm_e2e"},"profile":{"test":true},"executable":"/w/target/debug/deps/k8sm_e2e-2"}"#,
            r#"{"reason":"compiler-artifact","manifest_path":"/w/tests/e2e/Cargo.toml","target":{"kind":["lib"],"name":"k8sm_e2e"},"profile":{"test":false},"executable":null}"#,
            r#"{"reason":"compiler-artifact","manifest_path":"/w/crates/planner/Cargo.toml","target":{"kind":["test"],"name":"design_contract"},"profile":{"test":true},"executable":"/w/target/debug/deps/design_contract-3"}"#,
            r#"{"reason":"build-finished","success":true}"#,
            "not json",
            r#"{"reason":"compiler-artifact","manifest_path":"/w/tests/e2e/Cargo.toml","target":{"kind":["test"],"name":"chaos"},"profile":{"test":true},"executable":"/w/target/debug/deps/chaos-4"}"#,
        ]
        .join("\n");
        assert_eq!(
            test_executables(&messages),
            vec![
                (
                    "chaos".to_owned(),
                    PathBuf::from("/w/target/debug/deps/chaos-4")
                ),
                (
                    "k8sm_e2e".to_owned(),
                    PathBuf::from("/w/target/debug/deps/k8sm_e2e-2")
                ),
                (
                    "upgrade".to_owned(),
                    PathBuf::from("/w/target/debug/deps/upgrade-1")
                ),
            ]
        );
    }
}
