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

/// A record written before available pods were kept counted them as Ready: both columns show that count, and the
/// bound is judged on it.
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
