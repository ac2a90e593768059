//! `upgrade report`: the durable record of an upgrade run (see `k8sm_api::report`), as a table, Markdown (for a
//! change ticket or a post-mortem), JSON or YAML. Pure: the record in, text out.

use chrono::{DateTime, Utc};
use k8sm_api::report::UpgradeReport;

use crate::render::{Palette, clean, duration, short_id, table, timestamp};

/// A table in the terminal's style, or in Markdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Terminal(Palette),
    Markdown,
}

/// Renders `report` at `now`.
pub fn render(report: &UpgradeReport, now: DateTime<Utc>, style: Style) -> String {
    let markdown = style == Style::Markdown;
    let bold = |text: &str| match style {
        Style::Terminal(palette) => palette.bold(text),
        Style::Markdown => format!("**{text}**"),
    };
    let mut out = String::new();
    let title = format!(
        "Upgrade report: policy {}, target {}",
        report.policy,
        clean(&short_id(&report.target_executor_id), false)
    );
    out.push_str(&if markdown {
        format!("# {title}\n\n")
    } else {
        format!("{}\n", bold(&title))
    });
    let state = match report.finished {
        Some(end) => format!(
            "finished {} (took {})",
            timestamp(end),
            duration((end - report.started).num_seconds())
        ),
        None => format!(
            "not finished; last change {} (running for {})",
            timestamp(report.updated),
            duration((now - report.started).num_seconds())
        ),
    };
    let lines = [
        format!("Started {}, {state}", timestamp(report.started)),
        format!(
            "Nodes: {} upgraded of {} in the run; threshold {}%",
            report.nodes_upgraded(),
            report.nodes.len(),
            report.threshold
        ),
        format!("Actions: {}", actions(report)),
        format!(
            "Workloads disrupted: {}, {} of them below their desired count at some point, {} below their bound{}",
            report.workloads.len() + report.dropped_workloads as usize,
            report
                .workloads
                .values()
                .filter(|w| w.min_counted() < w.desired)
                .count(),
            report
                .workloads
                .values()
                .filter(|w| w.min_counted() < w.bound)
                .count(),
            if report.dropped_workloads > 0 {
                format!(
                    " ({} records dropped to bound the report's size)",
                    report.dropped_workloads
                )
            } else {
                String::new()
            }
        ),
    ];
    for line in lines {
        out.push_str(&line);
        out.push_str(if markdown { "  \n" } else { "\n" });
    }
    let nodes: Vec<Vec<String>> = report
        .nodes
        .iter()
        .map(|(name, n)| {
            vec![
                name.clone(),
                n.admitted.map_or_else(|| "-".into(), timestamp),
                n.drain_duration()
                    .map_or_else(|| "-".into(), |d| secs(d.as_secs())),
                n.restart_duration()
                    .map_or_else(|| "-".into(), |d| secs(d.as_secs())),
                n.evictions.to_string(),
                n.moves.to_string(),
                n.deletions.to_string(),
                n.stalls.to_string(),
            ]
        })
        .collect();
    let node_headers = [
        "NODE", "ADMITTED", "DRAIN", "RESTART", "EVICTED", "MOVED", "DELETED", "STALLS",
    ];
    let workloads: Vec<Vec<String>> = report
        .workloads
        .values()
        .map(|w| {
            vec![
                format!("{} {}/{}", w.kind, w.namespace, w.name),
                w.desired.to_string(),
                w.bound.to_string(),
                w.min_ready.to_string(),
                w.min_counted().to_string(),
                w.disruptions.to_string(),
            ]
        })
        .collect();
    let workload_headers = [
        "WORKLOAD",
        "DESIRED",
        "BOUND",
        "MIN READY",
        "MIN AVAILABLE",
        "DISRUPTIONS",
    ];
    let forced: Vec<Vec<String>> = report
        .forced
        .iter()
        .map(|f| {
            vec![
                timestamp(f.at),
                f.node.clone(),
                f.user.clone(),
                clean(&f.what, false),
            ]
        })
        .collect();
    let forced_headers = ["AT", "NODE", "BY", "WHAT"];
    for (heading, headers, rows) in [
        ("Nodes", &node_headers[..], &nodes),
        (
            "Workloads (fewest Ready pods the controller observed from the first disruption until whole again)",
            &workload_headers[..],
            &workloads,
        ),
        ("Forced by operators", &forced_headers[..], &forced),
    ] {
        if rows.is_empty() {
            continue;
        }
        if markdown {
            out.push_str(&format!(
                "\n## {heading}\n\n{}",
                markdown_table(headers, rows)
            ));
        } else {
            out.push_str(&format!("\n{}\n{}", bold(heading), table(headers, rows)));
        }
    }
    out
}

/// "Evicted 4, Moved 2, KamikazeSent 3", or "none".
fn actions(report: &UpgradeReport) -> String {
    let shown: Vec<String> = report
        .actions
        .iter()
        .filter(|(reason, _)| {
            !matches!(
                reason.as_str(),
                "Marked" | "Cordoned" | "Admitted" | "Upgraded"
            )
        })
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    if shown.is_empty() {
        "none".into()
    } else {
        shown.join(", ")
    }
}

fn secs(seconds: u64) -> String {
    duration(i64::try_from(seconds).unwrap_or(i64::MAX))
}

fn markdown_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let escape = |cell: &str| cell.replace('|', "\\|");
    let mut out = format!(
        "| {} |\n|{}\n",
        headers.join(" | "),
        "---|".repeat(headers.len())
    );
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| escape(c)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
