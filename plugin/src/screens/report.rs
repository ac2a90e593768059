//! `upgrade report`: the durable record of an upgrade run (see `k8sm_api::report`), as a table,
//! Markdown (for a change ticket or a post-mortem), JSON or YAML. Pure: the record in, text out.

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
mod tests {
    use super::*;
    use k8sm_api::report::{NodeRecord, WorkloadRecord};

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap()
    }

    fn sample() -> UpgradeReport {
        let mut report = UpgradeReport::new("fleet", "sha256:0123456789abcdef", 90, at(0));
        report.nodes.insert(
            "node-0000".into(),
            NodeRecord {
                admitted: Some(at(10)),
                kamikaze: Some(at(70)),
                upgraded: Some(at(100)),
                evictions: 2,
                moves: 1,
                ..NodeRecord::default()
            },
        );
        report
            .nodes
            .insert("node-0001".into(), NodeRecord::default());
        report.actions.insert("Evicted".into(), 2);
        report.forced.push(k8sm_api::report::ForcedRecord {
            at: at(50),
            node: "node-0001".into(),
            user: "alice".into(),
            what: "deleted shop/legacy".into(),
        });
        report.actions.insert("Moved".into(), 1);
        report.workloads.insert(
            WorkloadRecord::key("Deployment", "shop", "web"),
            WorkloadRecord {
                uid: "u".into(),
                kind: "Deployment".into(),
                namespace: "shop".into(),
                name: "web|x".into(),
                desired: 10,
                bound: 9,
                // Its minReadySeconds: one pod Ready and not yet available at the low.
                min_ready: 10,
                min_available: Some(9),
                disruptions: 2,
                recovering: false,
            },
        );
        report
    }

    #[test]
    fn the_table_says_where_the_run_stands_then_per_node_and_per_workload() {
        let text = render(&sample(), at(600), Style::Terminal(Palette::PLAIN));
        assert!(
            text.starts_with("Upgrade report: policy fleet, target sha256:0123"),
            "{text}"
        );
        assert!(text.contains("not finished; last change"), "{text}");
        assert!(
            text.contains("Nodes: 1 upgraded of 2 in the run; threshold 90%"),
            "{text}"
        );
        assert!(text.contains("Actions: Evicted 2, Moved 1"), "{text}");
        assert!(text.contains(
            "Workloads disrupted: 1, 1 of them below their desired count at some point, 0 below"
        ));
        let row = text
            .lines()
            .find(|l| l.starts_with("node-0000"))
            .expect("a row per node");
        // Drained in 60 s, back 30 s later.
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>()[2..4],
            ["60s", "30s"],
            "{row}"
        );
        assert_eq!(workload_row(&text)[2..], ["10", "9", "10", "9", "2"]);
        let row = text
            .lines()
            .find(|l| l.contains("alice"))
            .expect("a row per forced action");
        assert!(
            row.contains("node-0001") && row.ends_with("deleted shop/legacy"),
            "{row}"
        );
    }

    #[test]
    fn markdown_is_a_document_with_escaped_tables() {
        let mut report = sample();
        report.finished = Some(at(300));
        let text = render(&report, at(600), Style::Markdown);
        assert!(text.starts_with("# Upgrade report: policy fleet"), "{text}");
        assert!(
            text.contains("finished") && text.contains("(took 5m"),
            "{text}"
        );
        assert!(text.contains("\n## Nodes\n\n| NODE | ADMITTED |"), "{text}");
        assert!(
            text.contains("| Deployment shop/web\\|x | 10 | 9 | 10 | 9 | 2 |"),
            "{text}"
        );
    }

    /// A record written before available pods were kept counted them as Ready: both columns show
    /// that count, and the bound is judged on it.
    #[test]
    fn a_record_without_available_pods_shows_its_ready_ones_for_both() {
        let mut report = sample();
        let web = report.workloads.values_mut().next().unwrap();
        (web.min_ready, web.min_available) = (8, None);
        let text = render(&report, at(600), Style::Terminal(Palette::PLAIN));
        assert!(text.contains(", 1 below their bound"), "{text}");
        assert_eq!(workload_row(&text)[2..], ["10", "9", "8", "8", "2"]);
    }

    /// The cells of web's row in the workloads table.
    fn workload_row(text: &str) -> Vec<&str> {
        text.lines()
            .find(|l| l.starts_with("Deployment shop/web"))
            .expect("a row per workload")
            .split_whitespace()
            .collect()
    }
}
