//! The Markdown report: the scenario, the lower bound and its derivation, every figure per tool as
//! the median of its runs with the range, the targets met or missed with the reason,
//! per-run and per-size detail, the charts and the machine.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::requests::ByVerb;
use crate::results::{Run, Summary, Tool};
use crate::spread::Spread;
use crate::targets::{self, Verdict};
use crate::timeline::{Leftovers, NodePhases};
use crate::units::{bucket, megabytes, millis, ratio, secs, two_decimals};

/// Renders the report; `charts` are (title, file name relative to the report).
pub fn render(summary: &Summary, charts: &[(String, String)]) -> String {
    [
        scenario_section(summary),
        bound_section(summary),
        results_section(summary),
        charts_section(charts),
        notes_section(summary),
        machine_section(summary),
    ]
    .concat()
}

/// The title and the scenario: the fleet, the tools, the rounds and the command.
fn scenario_section(summary: &Summary) -> String {
    let mut out = String::new();
    let s = &summary.scenario;
    let tools = summary.tools();
    let rounds = tools
        .iter()
        .map(|t| summary.runs_of(*t).len())
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "# Benchmark `{}`: k8sm against kubectl drain\n",
        s.name
    );
    out.push_str(&setup_paragraph(summary));
    if let Some(fleet) = &s.fleet {
        let _ = writeln!(out, "Fleet: {fleet}.\n");
    }
    let sizes: Vec<String> = s
        .owner_sizes
        .iter()
        .map(|(d, n)| format!("{n}×{d}"))
        .collect();
    let _ = writeln!(out, "Owners by replicas: {}.\n", sizes.join(", "));
    let _ = writeln!(
        out,
        "Each tool ran {rounds} time(s), in alternating order ({}, then again), each run on a fresh cluster. Figures \
         are the **median [min–max]** over a tool's runs.\n",
        tools
            .iter()
            .map(|t| t.slug())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(out, "Command: `{}`\n", summary.machine.command);
    out
}

/// The cluster, the policy, the baselines and the budgets every tool met.
fn setup_paragraph(summary: &Summary) -> String {
    let mut out = String::new();
    let s = &summary.scenario;
    let drain = baseline_drain(summary);
    let _ = writeln!(
        out,
        "{} KWOK nodes, {} pods ({} Deployments, {} StatefulSets, unmanaged pods: {}; plus a DaemonSet), pods Ready \
         {} after scheduling, executors restarting in {}. Threshold {}% for every tool; `maxConcurrentNodes: {}` = \
         **C = {}** nodes at once for k8sm and for the parallel baseline. Baselines: {drain}, then the executor \
         restarted (kamikaze annotation, wait for the new executor) and `kubectl uncordon`. PodDisruptionBudgets at \
         each owner's SLA bound `min(ceil(t·d), d−1)` {}.\n",
        s.nodes,
        s.pods,
        s.deployments,
        s.stateful_sets,
        s.unmanaged,
        secs(s.pod_ready_delay_s),
        secs(s.restart_delay_s),
        s.threshold_percent,
        s.max_concurrent_nodes,
        s.concurrency,
        if s.k8sm_budgets {
            "for k8sm and the baselines alike (but `kubectl drain, no PDB`): k8sm meets their 429s too"
        } else {
            "for the baselines with PDB only: **k8sm's fleet had none** (reports before the budgets were shared)"
        },
    );
    out
}

/// The baselines' `kubectl drain`. A messy fleet's drain runs as SREs run it, described with its
/// figures below.
fn baseline_drain(summary: &Summary) -> String {
    if summary.runs.iter().any(|r| r.leftovers.is_some()) {
        "`kubectl drain` without `--force`, as SREs run it (see *Messy fleet* below)".to_owned()
    } else {
        format!(
            "`kubectl drain --ignore-daemonsets --delete-emptydir-data --force --timeout={:.0}s` (falling back to \
             `--disable-eviction` only if that timeout is hit)",
            summary.scenario.drain_timeout_s
        )
    }
}

/// The figures and the targets, then the detail: phases, planner, leftovers, runs and sizes.
fn results_section(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Results\n");
    out.push_str(&figures_table(summary));
    out.push('\n');
    out.push_str(&targets_table(summary));
    out.push('\n');
    out.push_str(&phases_table(summary));
    out.push_str(&planner_table(summary));
    out.push_str(&leftovers_table(summary));
    out.push_str(&runs_table(summary));
    out.push('\n');
    out.push_str(&sizes_table(summary));
    out
}

/// The charts, if any were drawn.
fn charts_section(charts: &[(String, String)]) -> String {
    let mut out = String::new();
    if !charts.is_empty() {
        let _ = writeln!(out, "\n## Charts\n");
        let _ = writeln!(out, "Each tool's run with the median makespan.\n");
        for (title, file) in charts {
            let _ = writeln!(out, "![{title}]({file})\n");
        }
    }
    out
}

/// How the figures were measured, then the runs' own notes.
fn notes_section(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n## Method and notes\n");
    for line in METHOD {
        let _ = writeln!(out, "- {line}");
    }
    for run in &summary.runs {
        for note in &run.notes {
            let _ = writeln!(
                out,
                "- {} (run {}): {note}",
                run.tool.label(),
                run.round + 1
            );
        }
    }
    out
}

/// The machine, the versions and the commit the figures were measured on.
fn machine_section(summary: &Summary) -> String {
    let mut out = String::new();
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
        (
            "binaries (controller, agents)",
            m.binaries_commit.as_ref().map_or_else(
                || "not checked against the commit".into(),
                |c| format!("built from {c}, checked before the runs"),
            ),
        ),
    ];
    for (k, v) in rows {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    out
}

const METHOD: &[&str] = &[
    "The machine may be shared with other work; timings vary from run to run, hence several runs per tool in \
     alternating order on fresh clusters. Figures are never assertions.",
    "Ready pods, SLA checks, disruptions and node upgrades are observed through watches of the benchmark's \
     namespace and of the nodes, timestamped on arrival (a watch relist replaces the whole set). The SLA bound of \
     an owner is `min(ceil(t·d), d−1)` for every tool; an owner is below its bound when fewer of its pods are \
     Ready. Each descent is attributed to the pod whose loss began it: evicted (the `DisruptionTarget` condition \
     with reason `EvictionByEvictionAPI`) or gone without the Eviction API.",
    "Makespan: k8sm from the first node marked to the last node upgraded (new executor, no upgrade state, \
     uncordoned); baselines from the first `kubectl drain` to the last node upgraded.",
    "Unavailable replica-seconds: per owner `∫ max(0, d − ready) dt` from the start of the run until every owner \
     was fully Ready again (at most 2 minutes after the last upgrade), d = the owner's desired replicas; summed \
     over owners, and the worst owner.",
    "Disruptions per pod: pods evicted or deleted during the run (replacements disrupted again count again), over \
     the pods present at the start. Its floor: 1 plus, per pod, the replacements that the watches saw bound to a \
     node still to drain while no schedulable node that is not to drain had room for their requests (the \
     allocatable less the requests of the pods bound there, the DaemonSet's included): those had to move again \
     whatever the tool did, given where the scheduler put the others.",
    "The tool's apiserver requests are counted exactly from the kube-apiserver's audit log (level Metadata, one \
     event per request when its response completes): k8sm's controller authenticates as user `k8sm-controller`, \
     the baselines' operator (its `kubectl drain` and `uncordon`, the kamikaze patch and one watch of the node \
     while its executor restarts, as `kubectl wait` would) as `bench-operator`, each with a client certificate of \
     its own; the harness (workload, watches, polls), the cluster's components and the simulated executors \
     authenticate as the cluster admin and are not logged. Window: from the start of the upgrade to the last node \
     upgraded (the controller's initial lists before the policy exists are left out).",
    "Reaction, for every tool by the same clock, the benchmark's watches: from a replacement becoming Ready while \
     its owner could not lose another pod and had a pod on a draining node, to the next disruption of that owner. \
     Beside it, for k8sm only and never instead, the controller's own `k8sm_eviction_reaction_seconds` from its \
     /metrics at the end of the run: from the controller observing the replacement Ready to its next eviction of \
     that owner, which leaves out the watch's delivery and the eviction's answer; a histogram, so p50/p99 are shown \
     as the bound of the bucket they fall in (\"≤ x\").",
    "Controller CPU and peak RSS: `/proc/<pid>/stat` (utime+stime) and `VmHWM` of the controller process.",
    "The cluster's node lifecycle controller waits 10 minutes for a node's heartbeat (`--node-monitor-grace-period`, \
     40 s by default): KWOK renews every simulated node's lease from one process, late when the machine is \
     saturated, and the node lifecycle controller then marked the pods of those nodes not Ready, descents no tool \
     caused. Reports written before 2026-12-02 ran with the default.",
];

/// The lower bound: the concurrency-aware one with its derivation, and the per-owner waves alone.
fn bound_section(summary: &Summary) -> String {
    let mut out = String::new();
    let s = &summary.scenario;
    let lb = &s.lower_bound;
    let _ = writeln!(out, "## Lower bound\n");
    if let Some(bound) = &s.bound {
        let _ = match s.bound_unknown() {
            None => writeln!(out, "**{}**\n", secs(bound.seconds)),
            Some(_) => writeln!(out, "**unknown** (≥ {})\n", secs(bound.seconds)),
        };
        let _ = writeln!(out, "{}\n", bound.derivation.trim_end());
        let _ = match (s.bound_set_by(), s.bound_unknown()) {
            (Some("owner waves"), _) => {
                writeln!(out, "In this scenario the owners' waves set the pace.\n")
            }
            (Some("node waves"), _) => writeln!(
                out,
                "In this scenario the nodes (drains and restarts at the allowed concurrency) set the pace, not \
                 the owners.\n"
            ),
            (Some(term), _) => writeln!(
                out,
                "In this scenario the {term} sets the pace, neither the owners nor the nodes.\n"
            ),
            (None, Some(why)) => writeln!(
                out,
                "**Bound unknown**: {why}, so the term it would give may be the largest; the runs are not judged \
                 against the terms above.\n"
            ),
            (None, None) => Ok(()),
        };
    }
    if s.bound.is_some() {
        // The concurrency-aware derivation above already holds the owners' term, with their drawn
        // delays.
        return out;
    }
    let _ = writeln!(
        out,
        "Per-owner waves alone (unlimited nodes in parallel, zero scheduling and reaction time): an owner of `d` \
         replicas may have at most `a = d − min(ceil(t·d), d−1)` pods down at once, so its pods go in at least \
         `ceil(d/a)` waves, each waiting one pod-ready delay `D`; the last wave's node then restarts its executor \
         (`R`): `({} − 1) · {} + {} = {}` (critical owners: {} replicas, {} at a time).\n",
        lb.waves,
        secs(lb.pod_ready_delay_s),
        secs(lb.restart_delay_s),
        secs(lb.seconds),
        lb.critical_replicas,
        lb.critical_allowed,
    );
    out
}

/// Every figure per tool, the median of its runs with the range.
fn figures_table(summary: &Summary) -> String {
    let mut table = FiguresTable::new(summary);
    makespan_rows(&mut table, summary);
    availability_rows(&mut table);
    disruption_rows(&mut table);
    request_rows(&mut table);
    controller_rows(&mut table);
    table.out
}

/// A table of figures as it is written: a column per tool, a row per figure.
struct FiguresTable<'a> {
    out: String,
    /// Each tool's runs, in the columns' order.
    runs: Vec<Vec<&'a Run>>,
}

impl<'a> FiguresTable<'a> {
    /// The table's header.
    fn new(summary: &'a Summary) -> Self {
        let tools = summary.tools();
        let runs: Vec<Vec<&Run>> = tools.iter().map(|t| summary.runs_of(*t)).collect();
        let mut out = String::new();
        let header: Vec<&str> = tools.iter().map(|t| t.label()).collect();
        let _ = writeln!(out, "| figure | {} |", header.join(" | "));
        let _ = writeln!(out, "|---|{}", "---:|".repeat(tools.len()));
        Self { out, runs }
    }

    /// The row `name`: `cell` of each tool's runs.
    fn row(&mut self, name: &str, cell: &dyn Fn(&[&Run]) -> String) {
        let cells: Vec<String> = self.runs.iter().map(|r| cell(r)).collect();
        let _ = writeln!(self.out, "| {name} | {} |", cells.join(" | "));
    }
}

/// The spread of `figure` over `runs`, each value shown by `show`; "–" without the figure.
fn spread(
    runs: &[&Run],
    figure: &dyn Fn(&Run) -> Option<f64>,
    show: &dyn Fn(f64) -> String,
) -> String {
    Spread::over(runs, figure).map_or("–".into(), |s| s.show(show))
}

/// Runs completed, concurrency and makespan, against the lower bound and k8sm's, and the settling.
fn makespan_rows(table: &mut FiguresTable<'_>, summary: &Summary) {
    let bound = summary.scenario.bound_seconds();
    let k8sm_makespan = Spread::over(&summary.runs_of(Tool::K8sm), |r| r.makespan_s);
    table.row("runs completed", &|r| {
        format!(
            "{} of {}",
            r.iter().filter(|r| r.completed).count(),
            r.len()
        )
    });
    table.row("nodes at once", &|r| {
        r.first()
            .and_then(|r| r.concurrency)
            .map_or("–".into(), |c| c.to_string())
    });
    table.row("makespan", &|r| spread(r, &|r| r.makespan_s, &secs));
    let bound_name = match summary.scenario.bound_unknown() {
        None => format!("makespan / lower bound ({})", secs(bound)),
        Some(_) => format!(
            "makespan / known terms of the bound ({}; bound unknown)",
            secs(bound)
        ),
    };
    table.row(&bound_name, &|r| {
        spread(r, &|r| r.makespan_s.map(|m| m / bound), &ratio)
    });
    table.row("median makespan / k8sm's", &|r| match (
        Spread::over(r, |r| r.makespan_s),
        k8sm_makespan.as_ref(),
    ) {
        (Some(m), Some(k)) => ratio(m.median / k.median),
        _ => "–".into(),
    });
    table.row("settle (last upgrade → all owners fully Ready)", &|r| {
        spread(r, &|r| r.settle_s, &secs)
    });
}

/// Owners below their bound, and the replicas unavailable.
fn availability_rows(table: &mut FiguresTable<'_>) {
    table.row("owners below their bound", &|r| {
        let owners = r.first().map_or(0, |r| r.owners.len());
        format!(
            "{} of {owners}",
            spread(r, &|r| Some(r.owners_violated() as f64), &count)
        )
    });
    table.row("min over owners of (min Ready − bound)", &|r| {
        spread(r, &|r| r.min_margin().map(|m| m as f64), &count)
    });
    table.row("SLA descents below the bound", &|r| {
        spread(r, &|r| Some(f64::from(r.violations())), &count)
    });
    table.row("… of which began without the Eviction API", &|r| {
        spread(r, &|r| Some(f64::from(r.outside_violations())), &count)
    });
    table.row("owner-seconds below the bound", &|r| {
        spread(r, &|r| Some(r.seconds_below()), &one_decimal)
    });
    table.row("unavailable replica-seconds, sum over owners", &|r| {
        spread(r, &|r| Some(r.unavailable_replica_s()), &one_decimal)
    });
    table.row("unavailable replica-seconds, worst owner", &|r| {
        spread(r, &|r| r.worst_unavailable().map(|w| w.1), &one_decimal)
    });
}

/// Disruptions, the recorder's relists, the reaction and the drains forced.
fn disruption_rows(table: &mut FiguresTable<'_>) {
    table.row("disruptions / pod", &|r| {
        spread(r, &|r| r.disruptions_per_pod(), &two_decimals)
    });
    table.row("… floor the free capacity allowed", &|r| {
        spread(r, &|r| r.disruptions_floor(), &two_decimals)
    });
    table.row("… replacements landed on nodes still to drain", &|r| {
        spread(r, &|r| r.landed.map(|l| l.to_drain as f64), &count)
    });
    table.row("… … of which no other node had room", &|r| {
        spread(r, &|r| r.landed.map(|l| l.forced as f64), &count)
    });
    table.row("… disruptions without the Eviction API", &|r| {
        spread(r, &|r| Some(r.outside_disruptions as f64), &count)
    });
    table.row("recorder watch relists", &|r| {
        spread(r, &|r| Some(r.recorder_relists as f64), &count)
    });
    table.row("reaction p50 / p99", &|r| reaction(r));
    table.row(
        "drains that hit --timeout (then --disable-eviction)",
        &|r| spread(r, &|r| r.forced_nodes.map(|n| n as f64), &count),
    );
}

/// The tool's apiserver requests, and its evictions.
fn request_rows(table: &mut FiguresTable<'_>) {
    table.row("**tool's apiserver requests per upgraded node**", &|r| {
        spread(r, &|r| r.requests_per_node(), &one_decimal)
    });
    table.row("… by verb, per upgraded node (median run)", &|r| {
        crate::spread::median_run(r, |r| r.requests_per_node())
            .and_then(|run| {
                Some(per_node(
                    &run.tool_requests.as_ref()?.by_verb,
                    run.nodes_upgraded,
                ))
            })
            .unwrap_or_else(|| "–".into())
    });
    table.row("Eviction API calls (refused with 429)", &|r| {
        let calls = spread(
            r,
            &|r| r.tool_requests.as_ref().map(|q| q.evictions as f64),
            &count,
        );
        let refused = spread(
            r,
            &|r| r.tool_requests.as_ref().map(|q| q.evictions_refused as f64),
            &count,
        );
        format!("{calls} ({refused})")
    });
    table.row("eviction call at the apiserver p50 / p99", &|r| {
        let p50 = spread(
            r,
            &|r| r.tool_requests.as_ref()?.eviction_server_p50_s,
            &millis,
        );
        let p99 = spread(
            r,
            &|r| r.tool_requests.as_ref()?.eviction_server_p99_s,
            &millis,
        );
        format!("{p50} / {p99}")
    });
}

/// The controller's cost: CPU, memory and its passes.
fn controller_rows(table: &mut FiguresTable<'_>) {
    table.row("controller CPU during the upgrade", &|r| {
        spread(
            r,
            &|r| Some(r.controller.as_ref()?.cpu_seconds_upgrade),
            &secs,
        )
    });
    table.row("controller peak RSS", &|r| {
        spread(
            r,
            &|r| Some(r.controller.as_ref()?.peak_rss_bytes as f64),
            &megabytes,
        )
    });
    table.row("planner pass in the controller (mean)", &|r| {
        spread(r, &|r| r.controller.as_ref()?.plan_mean_ms, &|v| {
            format!("{v:.2} ms")
        })
    });
    table.row("controller pass: observe, plan, act, report (mean)", &|r| {
        spread(r, &|r| r.controller.as_ref()?.reconcile_mean_ms, &|v| {
            format!("{v:.1} ms")
        })
    });
    table.row("of which, per stage (mean of the median run)", &|r| {
        stages(r)
    });
}

/// Where each tool's nodes spent their time, from the runs that measured it (none before it was).
fn phases_table(summary: &Summary) -> String {
    let mut out = String::new();
    if summary.runs.iter().all(|r| r.node_phases.is_none()) {
        return out;
    }
    let tools = summary.tools();
    let _ = writeln!(out, "### Where a node's time goes\n");
    let _ = writeln!(
        out,
        "Per node upgraded, by the benchmark's watches: **drain** from first seen draining (cordoned, or k8sm's \
         draining annotation) until no pod of the workload is bound to it (a terminating pod counts until deleted; \
         the DaemonSet's pods do not count), **to kamikaze** from then to the kamikaze annotation (k8sm's, or the \
         baselines' patch), **restart** from then to the new executor's ID, **to done** from then to upgraded (no \
         upgrade state left, uncordoned). Each cell: median / p90 over a run's nodes, then the median [min–max] of \
         those over the tool's runs. **Idle slot-seconds**: `∫ max(0, C − nodes in progress) dt` from the first \
         node started to the last, C the nodes the tool upgrades at once: slots left free while nodes still waited \
         to start.\n"
    );
    let header: Vec<&str> = tools.iter().map(|t| t.label()).collect();
    let _ = writeln!(out, "| phase | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(tools.len()));
    let runs: Vec<Vec<&Run>> = tools.iter().map(|t| summary.runs_of(*t)).collect();
    let mut row = |name: &str, cell: &dyn Fn(&[&Run]) -> String| {
        let cells: Vec<String> = runs.iter().map(|r| cell(r)).collect();
        let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
    };
    let spread =
        |runs: &[&Run], figure: &dyn Fn(&NodePhases) -> f64, show: &dyn Fn(f64) -> String| {
            Spread::over(runs, |r| r.node_phases.as_ref().map(figure))
                .map_or("–".into(), |s| s.show(show))
        };
    row("nodes summarised", &|r| {
        spread(r, &|p| p.nodes as f64, &count)
    });
    for (i, name) in NodePhases::NAMES.into_iter().enumerate() {
        let phase = |p: &NodePhases| p.phases()[i];
        row(name, &|r| {
            if r.iter().all(|r| r.node_phases.is_none()) {
                return "–".into();
            }
            let p50 = spread(r, &|p| phase(p).p50_s, &phase_secs);
            let p90 = spread(r, &|p| phase(p).p90_s, &phase_secs);
            format!("{p50} / {p90}")
        });
    }
    row("idle slot-seconds", &|r| {
        spread(r, &|p| p.idle_slot_s, &one_decimal)
    });
    out.push('\n');
    out
}

/// Seconds with two decimals below 10 s: some phases last a fraction of a second.
fn phase_secs(s: f64) -> String {
    if s.abs() < 10.0 {
        format!("{s:.2} s")
    } else {
        secs(s)
    }
}

/// The mean of each stage of a pass, from the run with the median pass time (stages of different
/// runs are not added up: their passes differ in number).
fn stages(runs: &[&Run]) -> String {
    let staged: Vec<&Run> = runs
        .iter()
        .copied()
        .filter(|r| {
            r.controller
                .as_ref()
                .is_some_and(|c| !c.stage_mean_ms.is_empty())
        })
        .collect();
    crate::spread::median_run(&staged, |r| r.controller.as_ref()?.reconcile_mean_ms)
        .and_then(|run| run.controller.as_ref())
        .map_or_else(
            || "—".to_owned(),
            |cost| {
                cost.stage_mean_ms
                    .iter()
                    .map(|(stage, ms)| format!("{stage} {ms:.1} ms"))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        )
}

/// Reaction p50 / p99 of a tool's runs by the benchmark's watches, and beside it, for k8sm, the
/// controller's own histogram (bucket bounds).
fn reaction(runs: &[&Run]) -> String {
    let p50 = Spread::over(runs, |r| r.reaction_p50_s);
    let p99 = Spread::over(runs, |r| r.reaction_p99_s);
    let mut text = match (p50, p99) {
        (Some(p50), Some(p99)) => format!("{} / {} (watches)", p50.show(millis), p99.show(millis)),
        _ => "–".into(),
    };
    let mut histograms: Vec<_> = runs
        .iter()
        .filter_map(|r| r.controller_reaction())
        .collect();
    if !histograms.is_empty() {
        // The median run by p99 bucket, and the worst.
        histograms.sort_by(|a, b| a.p99.seconds().total_cmp(&b.p99.seconds()));
        let median = histograms[(histograms.len() - 1) / 2];
        let worst = histograms[histograms.len() - 1];
        let _ = write!(
            text,
            "; controller histogram {} / {} ({} samples",
            bucket(median.p50),
            bucket(median.p99),
            median.count
        );
        if worst != median {
            let _ = write!(text, "; worst run's p99 {}", bucket(worst.p99));
        }
        text.push(')');
    }
    text
}

fn per_node(by_verb: &ByVerb, nodes: usize) -> String {
    if by_verb.is_empty() || nodes == 0 {
        return "–".into();
    }
    let n = nodes as f64;
    let verbs: Vec<String> = by_verb
        .iter()
        .map(|(verb, count)| format!("{verb} {:.1}", count / n))
        .collect();
    verbs.join(", ")
}

fn targets_table(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### Targets (issue 15)\n");
    let _ = writeln!(out, "| target | figure | verdict |\n|---|---|---|");
    for target in targets::judge(summary) {
        let verdict = match &target.verdict {
            Verdict::Met => "met".to_owned(),
            Verdict::Missed(reason) => format!("**missed**: {reason}"),
            Verdict::NotJudged(reason) => format!("not judged: {reason}"),
        };
        let _ = writeln!(out, "| {} | {} | {verdict} |", target.target, target.figure);
    }
    out
}

fn planner_table(summary: &Summary) -> String {
    let mut out = String::new();
    if summary.planner.is_empty() {
        return out;
    }
    let when = if summary.planner_measured_earlier {
        "measured by an earlier run of it, not in this invocation: see when"
    } else {
        "same invocation"
    };
    let _ = writeln!(
        out,
        "### Planner pass (criterion, `cargo bench -p k8sm-planner`, {when})\n"
    );
    let _ = writeln!(
        out,
        "| benchmark | nodes | mean | median | measured at |\n|---|---:|---:|---:|---|"
    );
    for p in &summary.planner {
        let _ = writeln!(
            out,
            "| `{}` | {} | {:.2} ms | {:.2} ms | {} |",
            if p.id.is_empty() { "plan" } else { &p.id },
            p.nodes,
            p.mean_ms,
            p.median_ms,
            p.measured_at.as_deref().unwrap_or("–")
        );
    }
    out.push('\n');
    out
}

/// A messy fleet's liveness figures, per run: what each tool finished, and what it left and at what
/// cost.
fn leftovers_table(summary: &Summary) -> String {
    let mut out = String::new();
    let mut runs: Vec<(&Run, &Leftovers)> = summary
        .runs
        .iter()
        .filter_map(|r| Some((r, r.leftovers.as_ref()?)))
        .collect();
    if runs.is_empty() {
        return out;
    }
    runs.sort_by_key(|(r, _)| r.round);
    let _ = writeln!(
        out,
        "### Messy fleet: what each tool finished and what it left
"
    );
    let _ = writeln!(
        out,
        "Nodes only an operator can clear are the fleet's truth (dead nodes, nodes holding a pod stuck terminating, \
         nodes holding a bare pod under `unmanagedPods.policy: Never`, nodes holding a pod pinned there under `pinnedPods: \
         Block`); every other node is finishable. The drain \
         baseline runs as SREs run it: PodDisruptionBudgets at the bound with `unhealthyPodEvictionPolicy: \
         AlwaysAllow` (k8sm's fleet has the same budgets), `kubectl drain --ignore-daemonsets --delete-emptydir-data \
         --skip-wait-for-delete-timeout=60 --timeout=…` without `--force`, and a node whose drain fails or whose \
         executor is not back within 2 minutes is left as it is, cordoned. Disruptions on nodes not upgraded count every \
         pod that went there, whoever removed it (the tool, or a rollout's own controller replacing its pods).\n"
    );
    let _ = writeln!(
        out,
        "| run | tool | finishable nodes upgraded | time to upgrade them | unfinishable nodes upgraded anyway | \
         nodes left cordoned, not upgraded | disruptions on nodes not upgraded | owners below bound |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|"
    );
    for (r, left) in runs {
        let _ = writeln!(
            out,
            "| {} | {} | {} of {} | {} | {} of {} | {} | {} | {} |",
            r.round + 1,
            r.tool.slug(),
            left.finishable_upgraded,
            left.finishable,
            r.makespan_s.map_or_else(|| "**not all**".into(), secs),
            left.unfinishable_upgraded,
            left.unfinishable,
            left.stranded_cordons,
            left.disruptions_on_unfinished,
            r.owners_violated(),
        );
    }
    out.push('\n');
    out
}

/// Every run, in the order it ran.
fn runs_table(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### Every run\n");
    let _ = writeln!(
        out,
        "| run | tool | makespan | owners below bound | unavailable replica-s (worst owner) | disruptions / pod | \
         tool's requests | reaction p99 |\n|---:|---|---:|---:|---:|---:|---:|---:|"
    );
    let mut runs: Vec<&Run> = summary.runs.iter().collect();
    runs.sort_by_key(|r| r.round);
    for r in runs {
        let worst = r
            .worst_unavailable()
            .map_or("–".into(), |(name, v)| format!("{v:.1}, {name}"));
        let mut reaction = r.reaction_p99().map_or("–".into(), millis);
        if let Some(h) = r.controller_reaction() {
            let _ = write!(reaction, " (histogram {})", bucket(h.p99));
        }
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.1} ({worst}) | {} | {} | {reaction} |",
            r.round + 1,
            r.tool.slug(),
            r.makespan_s.map_or_else(|| "**incomplete**".into(), secs),
            r.owners_violated(),
            r.unavailable_replica_s(),
            r.disruptions_per_pod().map_or("–".into(), two_decimals),
            r.tool_requests
                .as_ref()
                .map_or("–".into(), |q| q.total.to_string()),
        );
    }
    out
}

fn sizes_table(summary: &Summary) -> String {
    let mut out = String::new();
    let tools = summary.tools();
    let _ = writeln!(
        out,
        "### Minimum Ready pods against the bound, by owner size\n\nPer size and tool, over all its runs: the lowest \
         `min Ready` of any owner of that size, and the descents below the bound of those owners.\n"
    );
    let labels: Vec<String> = tools
        .iter()
        .map(|t| format!("{}: min Ready (descents)", t.slug()))
        .collect();
    let _ = writeln!(
        out,
        "| replicas | owners | bound | {} |",
        labels.join(" | ")
    );
    let _ = writeln!(out, "|---:|---:|---:|{}", "---:|".repeat(tools.len()));
    let mut sizes: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    if let Some(run) = summary.runs.first() {
        for o in &run.owners {
            *sizes.entry((o.desired, o.floor)).or_default() += 1;
        }
    }
    for ((desired, floor), owners) in sizes {
        let cells: Vec<String> = tools
            .iter()
            .map(|tool| {
                let outcomes = summary
                    .runs_of(*tool)
                    .into_iter()
                    .flat_map(|r| r.owners.iter())
                    .filter(|o| o.desired == desired);
                let (min, descents) = outcomes.fold((u32::MAX, 0), |(m, v), o| {
                    (m.min(o.min_ready), v + o.violations)
                });
                if min == u32::MAX {
                    "–".into()
                } else if min < floor {
                    format!("**{min}** ({descents})")
                } else {
                    format!("{min} ({descents})")
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "| {desired} | {owners} | {floor} | {} |",
            cells.join(" | ")
        );
    }
    out
}

fn count(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn one_decimal(v: f64) -> String {
    format!("{v:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::summary;
    use crate::timeline::PhaseQuantiles;

    fn line<'a>(report: &'a str, start: &str) -> &'a str {
        report
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line starting with {start:?} in\n{report}"))
    }

    #[test]
    fn figures_are_medians_with_their_range_side_by_side() {
        let report = render(&summary(), &[]);
        assert_eq!(
            line(&report, "| figure"),
            "| figure | k8sm | parallel kubectl drain + PDB at the bound, C at once | kubectl drain + PDB at the bound |"
        );
        // k8sm 30, 33, 36 s; parallel 45, 60, 90 s; sequential one run of 300 s.
        assert_eq!(
            line(&report, "| makespan |"),
            "| makespan | 33.0 s [30.0 s–36.0 s] | 60.0 s [45.0 s–90.0 s] | 300 s |"
        );
        // Bound 30 s.
        assert_eq!(
            line(&report, "| makespan / lower bound"),
            "| makespan / lower bound (30.0 s) | 1.10× [1.00×–1.20×] | 2.00× [1.50×–3.00×] | 10.00× |"
        );
        assert_eq!(
            line(&report, "| median makespan / k8sm's"),
            "| median makespan / k8sm's | 1.00× | 1.82× | 9.09× |"
        );
        assert_eq!(
            line(&report, "| owners below their bound"),
            "| owners below their bound | 0 of 3 | 0 of 3 | 2 of 3 |"
        );
        assert_eq!(
            line(&report, "| unavailable replica-seconds, sum"),
            "| unavailable replica-seconds, sum over owners | 12.0 [10.0–14.0] | 20.0 | 50.0 |"
        );
        assert_eq!(
            line(&report, "| nodes at once"),
            "| nodes at once | 2 | 2 | 1 |"
        );
        assert_eq!(
            line(&report, "| **tool's apiserver requests"),
            "| **tool's apiserver requests per upgraded node** | 30.0 [20.0–40.0] | 12.0 | 12.0 |"
        );
        assert_eq!(
            line(&report, "| … by verb"),
            "| … by verb, per upgraded node (median run) | POST 30.0 | LIST 2.0, POST 10.0 | LIST 2.0, POST 10.0 |"
        );
        assert_eq!(
            line(&report, "| reaction p50 / p99"),
            "| reaction p50 / p99 | 50 ms / 250 ms (watches); controller histogram ≤ 50 ms / ≤ 500 ms (40 samples; \
             worst run's p99 > 120 s) | 50 ms / 250 ms (watches) | 50 ms / 250 ms (watches) |"
        );
        assert!(report.contains("a placeholder derivation"), "{report}");
        assert!(report.contains("- kubectl drain + PDB at the bound (run 1): a note"));
    }

    /// Without the eviction throughput, the report says the bound is unknown and which terms it
    /// has, not what set the pace.
    #[test]
    fn an_uncalibrated_bound_is_reported_unknown() {
        let report = render(&summary(), &[]);
        assert!(
            report.contains("In this scenario the owners' waves set the pace."),
            "{report}"
        );
        assert!(
            report.contains("| makespan / lower bound (30.0 s) |"),
            "{report}"
        );
        assert!(
            report.contains("for k8sm and the baselines alike"),
            "{report}"
        );
        assert!(
            report.contains("| binaries (controller, agents) | not checked against the commit |")
        );

        let mut s = summary();
        s.scenario
            .lower_bound
            .terms
            .as_mut()
            .unwrap()
            .evictions_per_second = None;
        s.scenario.k8sm_budgets = false;
        let report = render(&s, &[]);
        assert!(
            report.contains(
                "**Bound unknown**: the apiserver's eviction throughput was not calibrated, so the term it would \
                 give may be the largest"
            ),
            "{report}"
        );
        assert!(!report.contains("In this scenario"), "{report}");
        assert!(
            report.contains("## Lower bound\n\n**unknown** (≥ 30.0 s)\n"),
            "{report}"
        );
        assert!(report.contains("| makespan / known terms of the bound (30.0 s; bound unknown) |"));
        assert!(report.contains("**k8sm's fleet had none**"), "{report}");
    }

    #[test]
    fn criterion_figures_of_an_earlier_run_are_not_called_this_invocations() {
        let heading = |report: &str| {
            report
                .lines()
                .find(|l| l.starts_with("### Planner pass"))
                .map(str::to_owned)
        };
        let mut summary = summary();
        let now = heading(&render(&summary, &[])).expect("a planner section");
        assert!(now.ends_with("same invocation)"), "{now}");
        summary.planner_measured_earlier = true;
        let earlier = heading(&render(&summary, &[])).expect("a planner section");
        assert!(earlier.contains("not in this invocation"), "{earlier}");
        // With both the per-stage means: the pass's stages of the median run, in order.
        let report = render(&summary, &[]);
        assert!(
            report.contains("observe 12.5 ms, plan 1.5 ms"),
            "{}",
            report
                .lines()
                .filter(|l| l.contains("per stage"))
                .collect::<String>()
        );
    }

    #[test]
    fn every_run_is_listed_in_the_order_it_ran() {
        let report = render(&summary(), &[]);
        let rows: Vec<&str> = report
            .lines()
            .skip_while(|l| !l.starts_with("### Every run"))
            .filter(|l| l.starts_with("| 1 |") || l.starts_with("| 2 |") || l.starts_with("| 3 |"))
            .collect();
        assert_eq!(rows.len(), 7, "{report}");
        assert!(
            rows[0].starts_with("| 1 | k8sm | 30.0 s | 0 |"),
            "{}",
            rows[0]
        );
    }

    #[test]
    fn the_size_table_marks_owners_below_their_bound_over_all_runs() {
        let report = render(&summary(), &[("Ready pods".into(), "x-ready.png".into())]);
        assert_eq!(
            line(&report, "| 10 |"),
            "| 10 | 1 | 9 | 9 (0) | 9 (0) | **8** (1) |"
        );
        assert!(report.contains("![Ready pods](x-ready.png)"));
    }

    #[test]
    fn where_a_nodes_time_goes_is_shown_once_measured() {
        let report = render(&summary(), &[]);
        assert!(!report.contains("Where a node's time goes"), "{report}");
        let phases = |drain: f64, idle: f64| NodePhases {
            nodes: 10,
            drain: PhaseQuantiles {
                p50_s: drain,
                p90_s: drain * 2.0,
            },
            to_kamikaze: PhaseQuantiles {
                p50_s: 0.05,
                p90_s: 0.1,
            },
            restart: PhaseQuantiles {
                p50_s: 2.0,
                p90_s: 2.5,
            },
            to_done: PhaseQuantiles {
                p50_s: 0.3,
                p90_s: 0.4,
            },
            whole: PhaseQuantiles {
                p50_s: drain + 2.35,
                p90_s: 30.0,
            },
            slots: 2,
            idle_slot_s: idle,
        };
        let mut s = summary();
        // k8sm's three runs and one of the parallel baseline's: the sequential one has none.
        for (i, drain, idle) in [(0, 4.0, 1.0), (3, 5.0, 2.0), (5, 6.0, 4.0), (1, 20.0, 10.0)] {
            s.runs[i].node_phases = Some(phases(drain, idle));
        }
        let report = render(&s, &[]);
        assert_eq!(
            line(&report, "| phase |"),
            "| phase | k8sm | parallel kubectl drain + PDB at the bound, C at once | kubectl drain + PDB at the bound |"
        );
        assert_eq!(
            line(&report, "| drain |"),
            "| drain | 5.00 s [4.00 s–6.00 s] / 10.0 s [8.00 s–12.0 s] | 20.0 s / 40.0 s | – |"
        );
        assert_eq!(
            line(&report, "| to kamikaze |"),
            "| to kamikaze | 0.05 s / 0.10 s | 0.05 s / 0.10 s | – |"
        );
        assert_eq!(
            line(&report, "| idle slot-seconds |"),
            "| idle slot-seconds | 2.0 [1.0–4.0] | 10.0 | – |"
        );
        for row in [
            "| nodes summarised | 10 |",
            "| restart |",
            "| to done |",
            "| whole |",
        ] {
            assert!(report.contains(row), "{row} in\n{report}");
        }
    }

    // The committed summaries still load (and render), and new fields round-trip.

    /// The committed reports predate some fields: they must still load, and render
    /// (`--render-only`, the index).
    #[test]
    fn every_committed_summary_still_loads_and_renders() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/results");
        let mut loaded = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let summary: Summary =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            render(&summary, &[]);
            loaded += 1;
        }
        assert!(loaded > 0, "no summary in {}", dir.display());
    }

    #[test]
    fn node_phases_round_trip_and_are_left_out_when_unmeasured() {
        let mut run = crate::fixtures::run(Tool::K8sm, 0, 30.0, 10.0);
        let json = serde_json::to_value(&run).unwrap();
        assert!(json.get("node_phases").is_none(), "{json}");
        let q = PhaseQuantiles {
            p50_s: 1.0,
            p90_s: 2.0,
        };
        run.node_phases = Some(NodePhases {
            nodes: 3,
            drain: q,
            to_kamikaze: q,
            restart: q,
            to_done: q,
            whole: q,
            slots: 2,
            idle_slot_s: 4.5,
        });
        let text = serde_json::to_string(&run).unwrap();
        assert_eq!(serde_json::from_str::<Run>(&text).unwrap(), run);
    }
}
