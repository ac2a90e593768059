//! The Markdown report: the scenario, the lower bound and how it is derived, one table of every figure and ratio
//! side by side, the targets met or missed, per-size SLA detail, the charts and the machine.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::requests::ByVerb;
use crate::results::{Run, Summary, Tool};

/// Targets of issue 6.
const TARGET_MAKESPAN_RATIO: f64 = 1.5;
const TARGET_SPEEDUP: f64 = 3.0;
const TARGET_REACTION_P99_S: f64 = 0.5;
const TARGET_RSS_BYTES: u64 = 150 * 1024 * 1024;
const TARGET_PLAN_MS: f64 = 20.0;

/// Renders the report; `charts` are (title, file name relative to the report).
pub fn render(summary: &Summary, charts: &[(String, String)]) -> String {
    let mut out = String::new();
    let s = &summary.scenario;
    let lb = &s.lower_bound;
    let _ = writeln!(
        out,
        "# Benchmark `{}`: k8sm against kubectl drain\n",
        s.name
    );
    let _ = writeln!(
        out,
        "{} KWOK nodes, {} pods ({} Deployments, {} StatefulSets, unmanaged pods: {}; plus a DaemonSet), pods Ready \
         {} after scheduling, executors restarting in {}. k8sm: threshold {}%, `maxConcurrentNodes: {}`, unmanaged \
         pods `Delete`. Baselines: `kubectl drain --ignore-daemonsets --delete-emptydir-data --force` node by node \
         (then kamikaze, wait for the new executor, uncordon), with a drain timeout of {} before falling back to \
         `--disable-eviction`.\n",
        s.nodes,
        s.pods,
        s.deployments,
        s.stateful_sets,
        s.unmanaged,
        secs(s.pod_ready_delay_s),
        secs(s.restart_delay_s),
        s.threshold_percent,
        s.max_concurrent_nodes,
        secs(s.drain_timeout_s),
    );
    let sizes: Vec<String> = s
        .owner_sizes
        .iter()
        .map(|(d, n)| format!("{n}×{d}"))
        .collect();
    let _ = writeln!(out, "Owners by replicas: {}.\n", sizes.join(", "));
    let _ = writeln!(out, "Command: `{}`\n", summary.machine.command);

    let _ = writeln!(out, "## Lower bound\n");
    let _ = writeln!(
        out,
        "An owner of `d` replicas may have at most `a = d − min(ceil(t·d), d−1)` pods down at once, so its pods go \
         in at least `ceil(d/a)` waves, each waiting one pod-ready delay `D` for the previous wave's replacements; \
         the last wave's node then restarts its executor (`R`). With unlimited nodes in parallel and zero \
         scheduling and reaction time:\n\n`lower bound = (max over owners of ceil(d/a) − 1) · D + R = ({} − 1) · {} \
         + {} = {}`\n\nThe critical owners have {} replicas ({} at a time, {} waves).\n",
        lb.waves,
        secs(lb.pod_ready_delay_s),
        secs(lb.restart_delay_s),
        secs(lb.seconds),
        lb.critical_replicas,
        lb.critical_allowed,
        lb.waves,
    );

    let _ = writeln!(out, "## Results\n");
    out.push_str(&figures_table(summary));
    out.push('\n');
    out.push_str(&targets_table(summary));
    out.push('\n');
    out.push_str(&sizes_table(summary));

    if !charts.is_empty() {
        let _ = writeln!(out, "\n## Charts\n");
        for (title, file) in charts {
            let _ = writeln!(out, "![{title}]({file})\n");
        }
    }

    let notes: Vec<(Tool, &String)> = summary
        .runs
        .iter()
        .flat_map(|r| r.notes.iter().map(move |n| (r.tool, n)))
        .collect();
    let _ = writeln!(out, "\n## Method and notes\n");
    for line in METHOD {
        let _ = writeln!(out, "- {line}");
    }
    for (tool, note) in notes {
        let _ = writeln!(out, "- {}: {note}", tool.label());
    }

    let m = &summary.machine;
    let _ = writeln!(out, "\n## Machine and versions\n");
    let _ = writeln!(out, "| | |\n|---|---|");
    let rows = [
        ("date", m.date.clone()),
        ("CPU", format!("{} ({} cores)", m.cpu_model, m.cores)),
        ("memory", format!("{:.1} GiB", m.memory_gib)),
        ("kernel", m.kernel.clone()),
        ("load average at start", m.load_at_start.clone()),
        ("rustc", m.rustc.clone()),
        ("Kubernetes (apiserver, KWOK cluster)", m.kubernetes.clone()),
        (
            "k8sm commit",
            format!(
                "{}{}",
                m.git_commit,
                if m.git_dirty {
                    " (with uncommitted changes)"
                } else {
                    ""
                }
            ),
        ),
    ];
    for (k, v) in rows {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    out
}

const METHOD: &[&str] = &[
    "Every figure comes from one run on one machine that may be shared with other work; timings vary from run to \
     run. They are figures, never assertions.",
    "Ready pods, SLA checks, disruptions and node upgrades are observed through watches of the benchmark's \
     namespace and of the nodes, timestamped on arrival. The SLA bound of an owner is `min(ceil(t·d), d−1)` with \
     t = the threshold, for every tool; a violation is one descent below it. Each descent is attributed to the \
     pod whose loss began it: evicted (the pod carried the `DisruptionTarget` condition with reason \
     `EvictionByEvictionAPI`, which the apiserver sets before it deletes an evicted pod) or gone without the \
     Eviction API (deleted directly, or no longer Ready). k8sm moves pods of owners only through the Eviction \
     API, so descents of the second kind are not its doing; for the baselines they include the nodes forced with \
     `--disable-eviction`.",
    "Makespan: k8sm from the first node marked to the last node upgraded (new executor, no upgrade state, \
     uncordoned); baselines from the first `kubectl drain` to the last node upgraded.",
    "Disruptions per pod: pods evicted or deleted during the run (replacements disrupted again count again), over \
     the pods present at the start.",
    "Reaction latency: from a replacement becoming Ready while its owner could not lose another pod and still had a \
     pod on a draining node, to the next disruption of that owner.",
    "Controller CPU and peak RSS: `/proc/<pid>/stat` (utime+stime) and `VmHWM` of the controller process.",
    "apiserver requests: `apiserver_request_total` has no client label, so the apiserver's own count covers every \
     client (kube-controller-manager, scheduler, KWOK, simulated executors, the benchmark's watches); the \
     controller's own requests are counted from its kube client's request traces.",
];

fn figures_table(summary: &Summary) -> String {
    let runs = &summary.runs;
    let lb = summary.scenario.lower_bound.seconds;
    let nodes = summary.scenario.nodes as f64;
    let k8sm = summary.run(Tool::K8sm);
    let mut out = String::new();
    let header: Vec<&str> = runs.iter().map(|r| r.tool.label()).collect();
    let _ = writeln!(out, "| figure | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(runs.len()));
    let mut row = |name: &str, cell: &dyn Fn(&Run) -> String| {
        let cells: Vec<String> = runs.iter().map(cell).collect();
        let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
    };
    row("completed", &|r| {
        if r.completed {
            "yes".into()
        } else {
            format!(
                "**no** ({}/{} nodes)",
                r.nodes_upgraded, summary.scenario.nodes
            )
        }
    });
    row("makespan", &|r| r.makespan_s.map_or("–".into(), secs));
    row(&format!("makespan / lower bound ({})", secs(lb)), &|r| {
        r.makespan_s
            .map_or("–".into(), |m| format!("{:.2}×", m / lb))
    });
    row(
        "makespan / k8sm's",
        &|r| match (r.makespan_s, k8sm.and_then(|k| k.makespan_s)) {
            (Some(m), Some(k)) => format!("{:.2}×", m / k),
            _ => "–".into(),
        },
    );
    row("seconds per node", &|r| {
        r.makespan_s
            .map_or("–".into(), |m| format!("{:.2} s", m / nodes))
    });
    row("settle (last upgrade → all owners fully Ready)", &|r| {
        r.settle_s.map_or("–".into(), secs)
    });
    row("SLA violations (descents below the bound)", &|r| {
        r.violations().to_string()
    });
    row(
        "… of which began with a pod that went without the Eviction API",
        &|r| r.outside_violations().to_string(),
    );
    row("owners that went below the bound", &|r| {
        format!("{} of {}", r.owners_violated(), r.owners.len())
    });
    row("owner-seconds below the bound", &|r| {
        format!("{:.1}", r.seconds_below())
    });
    row("min over owners of (min ready − bound)", &|r| {
        r.min_margin().map_or("–".into(), |m| m.to_string())
    });
    row("disruptions / pod", &|r| {
        r.disruptions_per_pod().map_or("–".into(), |d| {
            format!("{d:.2} ({} / {})", r.disruptions, r.pods)
        })
    });
    row("… of which without the Eviction API", &|r| {
        r.outside_disruptions.to_string()
    });
    row("recorder watch relists", &|r| {
        r.recorder_relists.to_string()
    });
    row(
        "reaction latency p50 / p99 (samples)",
        &|r| match (r.reaction_p50_s, r.reaction_p99_s) {
            (Some(p50), Some(p99)) => {
                format!("{} / {} ({})", millis(p50), millis(p99), r.reaction_samples)
            }
            _ => "– (0)".into(),
        },
    );
    row("nodes forced with --disable-eviction", &|r| {
        r.forced_nodes.map_or("–".into(), |n| n.to_string())
    });
    row("controller CPU: whole run / upgrade only", &|r| {
        r.controller.as_ref().map_or("–".into(), |c| {
            format!(
                "{:.2} s / {:.2} s",
                c.cpu_seconds_total, c.cpu_seconds_upgrade
            )
        })
    });
    row("controller peak RSS", &|r| {
        r.controller
            .as_ref()
            .map_or("–".into(), |c| mib(c.peak_rss_bytes))
    });
    row("planner pass in the run (mean, passes)", &|r| {
        r.controller
            .as_ref()
            .and_then(|c| Some(format!("{:.2} ms ({:.0})", c.plan_mean_ms?, c.plans?)))
            .unwrap_or_else(|| "–".into())
    });
    row("controller pass: observe, plan, act, report (mean)", &|r| {
        r.controller
            .as_ref()
            .and_then(|c| Some(format!("{:.1} ms", c.reconcile_mean_ms?)))
            .unwrap_or_else(|| "–".into())
    });
    row("controller's eviction calls p50 / p99 (calls)", &|r| {
        r.controller
            .as_ref()
            .and_then(|c| {
                Some(format!(
                    "{} / {} ({})",
                    millis(c.eviction_call_p50_s?),
                    millis(c.eviction_call_p99_s?),
                    c.eviction_calls
                ))
            })
            .unwrap_or_else(|| "–".into())
    });
    row(
        "eviction calls × p50, one after another (share of the makespan)",
        &|r| {
            r.controller
                .as_ref()
                .and_then(|c| {
                    let busy = c.eviction_call_p50_s? * c.eviction_calls as f64;
                    Some(format!(
                        "{} ({:.0}%)",
                        secs(busy),
                        100.0 * busy / r.makespan_s?
                    ))
                })
                .unwrap_or_else(|| "–".into())
        },
    );
    row("apiserver time per eviction, server side (mean)", &|r| {
        r.apiserver_eviction_mean_s.map_or("–".into(), millis)
    });
    row("controller's requests per upgraded node", &|r| {
        r.controller
            .as_ref()
            .map_or("–".into(), |c| per_node(&c.requests, r.nodes_upgraded))
    });
    row("apiserver requests per upgraded node, all clients", &|r| {
        per_node(&r.apiserver_requests, r.nodes_upgraded)
    });
    out
}

fn per_node(by_verb: &ByVerb, nodes: usize) -> String {
    if by_verb.is_empty() || nodes == 0 {
        return "–".into();
    }
    let n = nodes as f64;
    let total: f64 = by_verb.values().sum();
    let verbs: Vec<String> = by_verb
        .iter()
        .map(|(verb, count)| format!("{verb} {:.1}", count / n))
        .collect();
    format!("**{:.1}**: {}", total / n, verbs.join(", "))
}

fn targets_table(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### Targets of issue 6\n");
    let _ = writeln!(out, "| target | figure | met? |\n|---|---|---|");
    let lb = summary.scenario.lower_bound.seconds;
    let k8sm = summary.run(Tool::K8sm);
    let mut row = |target: &str, figure: String, met: Option<bool>| {
        let verdict = match met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "not measured",
        };
        let _ = writeln!(out, "| {target} | {figure} | {verdict} |");
    };
    let violations = k8sm.map(|k| {
        (
            k.violations() - k.outside_violations(),
            k.outside_violations(),
        )
    });
    row(
        "zero SLA violations for k8sm",
        violations.map_or("–".into(), |(by_evictions, outside)| match outside {
            0 => by_evictions.to_string(),
            _ => format!(
                "{by_evictions} by evictions ({outside} more began with pods deleted without the Eviction API)"
            ),
        }),
        violations.map(|(by_evictions, _)| by_evictions == 0),
    );
    let ratio = k8sm.and_then(|k| k.makespan_s).map(|m| m / lb);
    row(
        "makespan ≤ 1.5× the lower bound",
        ratio.map_or("–".into(), |r| format!("{r:.2}×")),
        ratio.map(|r| r <= TARGET_MAKESPAN_RATIO),
    );
    let speedup = match (
        summary.run(Tool::DrainPdb).and_then(|r| r.makespan_s),
        k8sm.and_then(|k| k.makespan_s),
    ) {
        (Some(b), Some(k)) => Some(b / k),
        _ => None,
    };
    row(
        "≥ 3× faster than kubectl drain + PDB",
        speedup.map_or("–".into(), |s| format!("{s:.1}×")),
        speedup.map(|s| s >= TARGET_SPEEDUP),
    );
    let p99 = k8sm.and_then(|k| k.reaction_p99_s);
    row(
        "reaction latency p99 < 500 ms",
        p99.map_or("–".into(), millis),
        p99.map(|p| p < TARGET_REACTION_P99_S),
    );
    let rss = k8sm
        .and_then(|k| k.controller.as_ref())
        .map(|c| c.peak_rss_bytes);
    let at_scale = summary.scenario.nodes >= 500 && summary.scenario.pods >= 15_000;
    row(
        "controller peak RSS < 150 MB at 500 nodes / 15,000 pods",
        rss.map_or("–".into(), |r| {
            format!(
                "{} at {} nodes / {} pods",
                mib(r),
                summary.scenario.nodes,
                summary.scenario.pods
            )
        }),
        rss.filter(|_| at_scale).map(|r| r < TARGET_RSS_BYTES),
    );
    let plan = summary.planner.iter().find(|p| p.nodes == 5000);
    row(
        "planner pass < 20 ms at 5,000 nodes",
        plan.map_or("– (run `cargo bench -p k8sm-planner`)".into(), |_| {
            let all: Vec<String> = summary
                .planner
                .iter()
                .map(|p| format!("{:.2} ms at {} nodes", p.mean_ms, p.nodes))
                .collect();
            format!("{} (criterion mean)", all.join(", "))
        }),
        plan.map(|p| p.mean_ms < TARGET_PLAN_MS),
    );
    out
}

fn sizes_table(summary: &Summary) -> String {
    let mut out = String::new();
    let runs = &summary.runs;
    let _ = writeln!(
        out,
        "### Minimum ready pods against the bound, by owner size\n\nPer size: the lowest `min ready` of any owner of \
         that size, and the SLA violations of those owners.\n"
    );
    let labels: Vec<String> = runs
        .iter()
        .map(|r| format!("{}: min ready (violations)", r.tool.label()))
        .collect();
    let _ = writeln!(
        out,
        "| replicas | owners | bound | {} |",
        labels.join(" | ")
    );
    let _ = writeln!(out, "|---:|---:|---:|{}", "---:|".repeat(runs.len()));
    let mut sizes: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    if let Some(run) = runs.first() {
        for o in &run.owners {
            *sizes.entry((o.desired, o.floor)).or_default() += 1;
        }
    }
    for ((desired, floor), count) in sizes {
        let cells: Vec<String> = runs
            .iter()
            .map(|r| {
                let owners = r.owners.iter().filter(|o| o.desired == desired);
                let (min, violations) = owners.fold((u32::MAX, 0), |(m, v), o| {
                    (m.min(o.min_ready), v + o.violations)
                });
                if min == u32::MAX {
                    "–".into()
                } else if min < floor {
                    format!("**{min}** ({violations})")
                } else {
                    format!("{min} ({violations})")
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "| {desired} | {count} | {floor} | {} |",
            cells.join(" | ")
        );
    }
    out
}

fn secs(s: f64) -> String {
    if s >= 100.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

fn millis(s: f64) -> String {
    format!("{:.0} ms", s * 1000.0)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{ControllerCost, Machine, PlannerBench, Scenario};
    use crate::stats::lower_bound;
    use crate::timeline::OwnerOutcome;
    use std::time::Duration;

    fn owner(name: &str, desired: u32, min_ready: u32, violations: u32) -> OwnerOutcome {
        OwnerOutcome {
            name: name.into(),
            kind: "Deployment".into(),
            desired,
            floor: k8sm_testcluster::sla::bound(desired, 90),
            min_ready,
            violations,
            seconds_below: f64::from(violations) * 2.0,
            disruptions: desired,
            outside_disruptions: 0,
            outside_violations: 0,
        }
    }

    fn run(tool: Tool, makespan: f64, owners: Vec<OwnerOutcome>) -> Run {
        Run {
            tool,
            completed: true,
            makespan_s: Some(makespan),
            settle_s: Some(1.5),
            nodes_upgraded: 10,
            pods: 100,
            disruptions: 120,
            outside_disruptions: 0,
            recorder_relists: 0,
            reaction_samples: 40,
            reaction_p50_s: Some(0.05),
            reaction_p99_s: Some(0.25),
            controller: None,
            apiserver_requests: ByVerb::from([("LIST".into(), 20.0), ("PATCH".into(), 50.0)]),
            apiserver_eviction_mean_s: Some(0.08),
            forced_nodes: None,
            owners,
            notes: vec![],
            series: BTreeMap::new(),
        }
    }

    fn summary() -> Summary {
        let mut k8sm = run(
            Tool::K8sm,
            30.0,
            vec![
                owner("a", 10, 9, 0),
                owner("b", 15, 14, 0),
                owner("c", 15, 15, 0),
            ],
        );
        k8sm.controller = Some(ControllerCost {
            cpu_seconds_total: 3.25,
            cpu_seconds_upgrade: 2.5,
            peak_rss_bytes: 40 * 1024 * 1024,
            requests: ByVerb::from([("POST".into(), 300.0)]),
            evictions_metric: Some(95.0),
            plan_mean_ms: Some(1.234),
            plans: Some(200.0),
            reconcile_mean_ms: Some(45.0),
            eviction_call_p50_s: Some(0.09),
            eviction_call_p99_s: Some(0.2),
            eviction_calls: 300,
        });
        let mut pdb = run(
            Tool::DrainPdb,
            300.0,
            vec![
                owner("a", 10, 8, 1),
                owner("b", 15, 14, 0),
                owner("c", 15, 12, 2),
            ],
        );
        pdb.forced_nodes = Some(7);
        pdb.reaction_p50_s = None;
        pdb.reaction_p99_s = None;
        pdb.notes.push("7 nodes timed out".into());
        Summary {
            scenario: Scenario {
                name: "n10-p100".into(),
                nodes: 10,
                pods: 100,
                deployments: 3,
                stateful_sets: 0,
                unmanaged: 1,
                owner_sizes: BTreeMap::from([(10, 1), (15, 2)]),
                pod_ready_delay_s: 2.0,
                restart_delay_s: 2.0,
                threshold_percent: 90,
                max_concurrent_nodes: "20%".into(),
                drain_timeout_s: 10.0,
                lower_bound: lower_bound(
                    &[10, 15, 15],
                    90,
                    Duration::from_secs(2),
                    Duration::from_secs(2),
                ),
            },
            machine: Machine {
                command: "cargo xtask bench --nodes 10".into(),
                git_commit: "abc".into(),
                git_dirty: true,
                ..Machine::default()
            },
            runs: vec![k8sm, pdb],
            planner: vec![PlannerBench {
                nodes: 5000,
                pods: 150_000,
                mean_ms: 25.0,
                median_ms: 24.0,
            }],
        }
    }

    fn line<'a>(report: &'a str, start: &str) -> &'a str {
        report
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line starting with {start:?} in\n{report}"))
    }

    #[test]
    fn the_figures_table_puts_the_tools_side_by_side_with_ratios() {
        let report = render(&summary(), &[]);
        // (15 − 1) · 2 + 2 = 30 s: k8sm at 1.00×, the baseline at 10×.
        assert!(
            report.contains("= (15 − 1) · 2.0 s + 2.0 s = 30.0 s"),
            "{report}"
        );
        assert_eq!(
            line(&report, "| figure"),
            "| figure | k8sm | kubectl drain + PDB at the bound |"
        );
        assert_eq!(
            line(&report, "| makespan |"),
            "| makespan | 30.0 s | 300 s |"
        );
        assert_eq!(
            line(&report, "| makespan / lower bound"),
            "| makespan / lower bound (30.0 s) | 1.00× | 10.00× |"
        );
        assert_eq!(
            line(&report, "| makespan / k8sm's"),
            "| makespan / k8sm's | 1.00× | 10.00× |"
        );
        assert_eq!(
            line(&report, "| SLA violations"),
            "| SLA violations (descents below the bound) | 0 | 3 |"
        );
        assert_eq!(
            line(&report, "| min over owners"),
            "| min over owners of (min ready − bound) | 0 | -2 |"
        );
        assert_eq!(
            line(&report, "| disruptions / pod"),
            "| disruptions / pod | 1.20 (120 / 100) | 1.20 (120 / 100) |"
        );
        assert_eq!(
            line(&report, "| reaction latency"),
            "| reaction latency p50 / p99 (samples) | 50 ms / 250 ms (40) | – (0) |"
        );
        assert_eq!(
            line(&report, "| nodes forced"),
            "| nodes forced with --disable-eviction | – | 7 |"
        );
        assert_eq!(
            line(&report, "| controller CPU"),
            "| controller CPU: whole run / upgrade only | 3.25 s / 2.50 s | – |"
        );
        assert_eq!(
            line(&report, "| controller peak RSS"),
            "| controller peak RSS | 40.0 MiB | – |"
        );
        assert_eq!(
            line(&report, "| eviction calls × p50"),
            "| eviction calls × p50, one after another (share of the makespan) | 27.0 s (90%) | – |"
        );
        assert_eq!(
            line(&report, "| apiserver time per eviction"),
            "| apiserver time per eviction, server side (mean) | 80 ms | 80 ms |"
        );
        assert_eq!(
            line(&report, "| controller's requests"),
            "| controller's requests per upgraded node | **30.0**: POST 30.0 | – |"
        );
        assert_eq!(
            line(&report, "| apiserver requests"),
            "| apiserver requests per upgraded node, all clients | **7.0**: LIST 2.0, PATCH 5.0 | **7.0**: LIST 2.0, PATCH 5.0 |"
        );
        assert!(report.contains("- kubectl drain + PDB at the bound: 7 nodes timed out"));
        assert!(report.contains("| k8sm commit | abc (with uncommitted changes) |"));
    }

    #[test]
    fn targets_say_met_missed_or_not_measured() {
        let report = render(&summary(), &[]);
        assert_eq!(
            line(&report, "| zero SLA"),
            "| zero SLA violations for k8sm | 0 | met |"
        );
        assert_eq!(
            line(&report, "| makespan ≤"),
            "| makespan ≤ 1.5× the lower bound | 1.00× | met |"
        );
        assert_eq!(
            line(&report, "| ≥ 3×"),
            "| ≥ 3× faster than kubectl drain + PDB | 10.0× | met |"
        );
        assert_eq!(
            line(&report, "| reaction latency p99"),
            "| reaction latency p99 < 500 ms | 250 ms | met |"
        );
        assert_eq!(
            line(&report, "| controller peak RSS <"),
            "| controller peak RSS < 150 MB at 500 nodes / 15,000 pods | 40.0 MiB at 10 nodes / 100 pods | not measured |"
        );
        assert_eq!(
            line(&report, "| planner pass <"),
            "| planner pass < 20 ms at 5,000 nodes | 25.00 ms at 5000 nodes (criterion mean) | **missed** |"
        );
    }

    #[test]
    fn descents_begun_by_pods_deleted_outside_the_eviction_api_are_shown_apart() {
        let mut summary = summary();
        let k8sm = &mut summary.runs[0];
        k8sm.owners[1].violations = 3;
        k8sm.owners[1].outside_violations = 2;
        k8sm.outside_disruptions = 7;
        let report = render(&summary, &[]);
        assert_eq!(
            line(&report, "| … of which began"),
            "| … of which began with a pod that went without the Eviction API | 2 | 0 |"
        );
        assert_eq!(
            line(&report, "| … of which without"),
            "| … of which without the Eviction API | 7 | 0 |"
        );
        assert_eq!(
            line(&report, "| zero SLA"),
            "| zero SLA violations for k8sm | 1 by evictions (2 more began with pods deleted without the Eviction API) | **missed** |"
        );
    }

    #[test]
    fn the_size_table_marks_owners_below_their_bound() {
        let report = render(&summary(), &[("Ready pods".into(), "x-ready.png".into())]);
        assert_eq!(
            line(&report, "| 10 |"),
            "| 10 | 1 | 9 | 9 (0) | **8** (1) |"
        );
        assert_eq!(
            line(&report, "| 15 |"),
            "| 15 | 2 | 14 | 14 (0) | **12** (2) |"
        );
        assert!(report.contains("![Ready pods](x-ready.png)"));
    }
}
