//! Facts about the machine and the software the figures come from, and criterion's planner
//! measurements.

use std::path::Path;
use std::process::Command;

use anyhow::Context;

use crate::results::{Machine, PlannerBench};

/// Reads what the report states about the machine; `command` is how the benchmark was invoked.
pub fn machine(root: &Path, kubernetes: &str, command: String) -> Machine {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let memory_kb = crate::process::status_kb(&read("/proc/meminfo"), "MemTotal").unwrap_or(0);
    let output = |program: &str, args: &[&str]| output(root, program, args);
    Machine {
        date: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        cpu_model,
        cores: std::thread::available_parallelism().map_or(0, usize::from),
        memory_gib: memory_kb as f64 / (1024.0 * 1024.0),
        kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
        load_at_start: read("/proc/loadavg")
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        rustc: output("rustc", &["-V"]),
        kubernetes: kubernetes.to_owned(),
        git_commit: git_commit(root),
        binaries_commit: None,
        git_dirty: !output("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty(),
        command,
    }
}

/// What `program args…` prints in `dir`, trimmed ("" if it fails).
fn output(dir: &Path, program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// The checkout's commit, abbreviated as the binaries name it ("" outside a git checkout).
pub fn git_commit(root: &Path) -> String {
    output(root, "git", &["rev-parse", "--short=12", "HEAD"])
}

/// The commit `binary --version` names, as the k8sm binaries print it: `k8sm-controller 0.1.0
/// (commit 0123abcd4567)`.
pub fn binary_commit(binary: &Path) -> anyhow::Result<String> {
    let output = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", binary.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    commit_of_version(&text).with_context(|| {
        format!(
            "{} --version names no commit ({:?}): build it from this checkout",
            binary.display(),
            text.trim()
        )
    })
}

fn commit_of_version(text: &str) -> Option<String> {
    let commit = text.split_once("(commit ")?.1.split_once(')')?.0;
    (!commit.is_empty() && commit != "unknown").then(|| commit.to_owned())
}

/// Refuses binaries in `bin_dir` built from another commit than `commit`, the one the report
/// records: figures of other binaries would be presented as this commit's. Returns the binaries'
/// commit.
pub fn check_binaries(bin_dir: &Path, commit: &str) -> anyhow::Result<String> {
    let mut found = String::new();
    for name in ["k8sm-controller", "k8sm-agent"] {
        let binary = bin_dir.join(name);
        let built = binary_commit(&binary)?;
        anyhow::ensure!(
            built == commit,
            "{} was built from commit {built}, but the report records this checkout's {commit}: rebuild it \
             (`cargo build --release -p k8sm-controller -p k8sm-agent`, which `cargo xtask bench` runs) or check \
             out {built}",
            binary.display()
        );
        found = built;
    }
    Ok(found)
}

/// criterion's estimates under `target/criterion` (every `<id>/new/estimates.json`, e.g.
/// `plan/nodes/5000`), with the node count of IDs that name one (`…/nodes/<n>`).
pub fn planner_benches(target_dir: &Path) -> Vec<PlannerBench> {
    let root = target_dir.join("criterion");
    let mut found = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            // criterion's HTML report is no estimate.
            if path.is_dir() && entry.file_name() != "report" {
                dirs.push(path);
            }
        }
        let estimates = dir.join("new/estimates.json");
        let (Ok(text), Ok(id)) = (std::fs::read_to_string(&estimates), dir.strip_prefix(&root))
        else {
            continue;
        };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let id = id.display().to_string();
        let ns = |key: &str| json[key]["point_estimate"].as_f64();
        let nodes = nodes_of(&id);
        if let (Some(mean), Some(median)) = (ns("mean"), ns("median")) {
            let measured_at = std::fs::metadata(&estimates)
                .and_then(|m| m.modified())
                .ok()
                .map(|t| {
                    chrono::DateTime::<chrono::Utc>::from(t)
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                });
            found.push(PlannerBench {
                id,
                measured_at,
                nodes: nodes.unwrap_or(0),
                pods: nodes.unwrap_or(0) * 30,
                mean_ms: mean / 1e6,
                median_ms: median / 1e6,
            });
        }
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    found
}

/// The node count of a criterion ID such as `plan/nodes/5000` or `plan/nodes-with-budgets/5000`.
fn nodes_of(id: &str) -> Option<usize> {
    let segments: Vec<&str> = id.split('/').collect();
    segments
        .windows(2)
        .find(|w| w[0] == "nodes" || w[0].starts_with("nodes-"))
        .and_then(|w| w[1].parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn criterion_estimates_are_found_with_their_node_counts() {
        let dir = std::env::temp_dir().join(format!("k8sm-bench-criterion-{}", std::process::id()));
        let estimate = |id: &str, mean_ns: f64| {
            let path = dir.join("criterion").join(id).join("new");
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(
                path.join("estimates.json"),
                format!(
                    r#"{{"mean":{{"point_estimate":{mean_ns}}},"median":{{"point_estimate":{}}}}}"#,
                    mean_ns / 2.0
                ),
            )
            .unwrap();
        };
        estimate("plan/nodes/5000", 12_500_000.0);
        estimate("plan/nodes/1000", 2_000_000.0);
        estimate("plan/nodes-with-budgets/5000", 40_000_000.0);
        estimate("incremental/one event", 1000.0);
        std::fs::create_dir_all(dir.join("criterion/report")).unwrap();
        let found = planner_benches(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        let ids: Vec<(&str, usize, f64)> = found
            .iter()
            .map(|p| (p.id.as_str(), p.nodes, p.mean_ms))
            .collect();
        assert_eq!(
            ids,
            [
                ("incremental/one event", 0, 0.001),
                ("plan/nodes-with-budgets/5000", 5000, 40.0),
                ("plan/nodes/1000", 1000, 2.0),
                ("plan/nodes/5000", 5000, 12.5)
            ]
        );
        assert_eq!(found[3].median_ms, 6.25);
        assert!(found[3].measured_at.is_some());
    }

    #[test]
    fn the_commit_is_read_from_the_version_line() {
        assert_eq!(
            commit_of_version("k8sm-controller 0.1.0 (commit 0123abcd4567)\n").as_deref(),
            Some("0123abcd4567")
        );
        assert_eq!(commit_of_version("k8sm-agent 0.1.0 (commit unknown)"), None);
        assert_eq!(commit_of_version("k8sm-agent 0.1.0"), None);
    }

    /// A binary of another commit is refused, naming both commits; one of this commit passes.
    #[test]
    fn binaries_of_another_commit_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["k8sm-controller", "k8sm-agent"] {
            let path = dir.path().join(name);
            std::fs::write(
                &path,
                format!("#!/bin/sh\necho '{name} 0.1.0 (commit 0123abcd4567)'\n"),
            )
            .unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        assert_eq!(
            check_binaries(dir.path(), "0123abcd4567").unwrap(),
            "0123abcd4567"
        );
        let refused = check_binaries(dir.path(), "89abcdef0123")
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("built from commit 0123abcd4567")
                && refused.contains("this checkout's 89abcdef0123"),
            "{refused}"
        );
    }
}
