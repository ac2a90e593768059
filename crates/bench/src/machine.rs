//! Facts about the machine and the software the figures come from, and criterion's planner measurements.

use std::path::Path;
use std::process::Command;

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
    let output = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
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
        git_commit: output("git", &["rev-parse", "--short=12", "HEAD"]),
        git_dirty: !output("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty(),
        command,
    }
}

/// criterion's estimates of `crates/planner/benches/plan.rs` (group `plan`, ids `nodes/<n>`), if it ran.
pub fn planner_benches(target_dir: &Path) -> Vec<PlannerBench> {
    let mut found = Vec::new();
    for nodes in [1000, 5000] {
        let path = target_dir.join(format!("criterion/plan/nodes/{nodes}/new/estimates.json"));
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let ns = |key: &str| json[key]["point_estimate"].as_f64();
        if let (Some(mean), Some(median)) = (ns("mean"), ns("median")) {
            found.push(PlannerBench {
                nodes,
                pods: nodes * 30,
                mean_ms: mean / 1e6,
                median_ms: median / 1e6,
            });
        }
    }
    found
}
