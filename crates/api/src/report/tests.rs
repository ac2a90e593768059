use super::*;

fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap()
}

/// A pseudo-random suffix, so that names compress no better than generated names in a real cluster do.
fn suffix(i: u64) -> String {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5851_F42D_4C95_7F2D;
    x ^= x >> 29;
    format!("{:010x}", x & 0xff_ffff_ffff)
}

/// A finished run over `nodes` nodes and `workloads` disrupted workloads, every field filled.
fn big(nodes: u64, workloads: u64) -> UpgradeReport {
    let mut report = UpgradeReport::new("fleet", &format!("sha256:{}", "a".repeat(64)), 90, at(0));
    for i in 0..nodes {
        let start = i64::try_from(i).unwrap() * 7;
        report.nodes.insert(
            format!(
                "ip-10-{}-{}.eu-west-1.compute.internal-{}",
                i / 250,
                i % 250,
                suffix(i)
            ),
            NodeRecord {
                admitted: Some(at(start)),
                kamikaze: Some(at(start + 95)),
                upgraded: Some(at(start + 140)),
                evictions: 28,
                moves: 1,
                deletions: 2,
                stalls: u32::from(i % 50 == 0),
            },
        );
    }
    for i in 0..workloads {
        let (namespace, name) = (
            format!("team-{}", i % 300),
            format!("svc-{}", suffix(i + nodes)),
        );
        let desired = 1 + u32::try_from(i % 40).unwrap();
        report.workloads.insert(
            WorkloadRecord::key("Deployment", &namespace, &name),
            WorkloadRecord {
                uid: suffix(i + 7),
                kind: "Deployment".into(),
                namespace,
                name,
                desired,
                bound: desired / 2,
                min_ready: desired - 1,
                min_available: Some(desired - 1),
                disruptions: desired,
                recovering: false,
            },
        );
    }
    report.actions.insert("Evicted".into(), 280_000);
    report.finished = Some(at(80_000));
    report.updated = at(80_000);
    report
}

#[test]
fn a_record_reads_back_as_written() {
    let mut report = big(3, 4);
    let bytes = report.encode();
    assert_eq!(UpgradeReport::decode(&bytes).unwrap(), report);
    assert!(UpgradeReport::decode(b"not gzip").is_err());
}

/// The bound of the issue: 10,000 nodes and 20,000 workloads fit whole, with room to spare.
#[test]
fn ten_thousand_nodes_and_twenty_thousand_workloads_fit_in_one_object() {
    let mut report = big(10_000, 20_000);
    let bytes = report.encode();
    println!(
        "10,000 nodes, 20,000 workloads: {} bytes gzipped ({} JSON)",
        bytes.len(),
        serde_json::to_vec(&report).unwrap().len()
    );
    assert!(bytes.len() <= REPORT_MAX_BYTES, "{}", bytes.len());
    assert_eq!(report.dropped_workloads, 0, "nothing dropped at the bound");
    assert_eq!(
        UpgradeReport::decode(&bytes).unwrap().workloads.len(),
        20_000
    );
}

/// Far past the bound, workloads are dropped until it fits, those that never lost a Ready pod first, and the
/// record says how many went.
#[test]
fn past_the_bound_the_least_telling_workloads_go_first_and_are_counted() {
    let mut report = big(10_000, 120_000);
    // One workload that went below its desired count and to its bound: kept.
    let telling = report.workloads.keys().next().unwrap().clone();
    let w = report.workloads.get_mut(&telling).unwrap();
    (w.desired, w.bound, w.min_ready, w.min_available) = (10, 9, 9, Some(9));
    for w in report.workloads.values_mut().skip(1).step_by(2) {
        (w.min_ready, w.min_available) = (w.desired, Some(w.desired));
    }
    let before = report.workloads.len();
    let bytes = report.encode();
    assert!(bytes.len() <= REPORT_MAX_BYTES);
    let dropped = usize::try_from(report.dropped_workloads).unwrap();
    assert!(dropped > 0);
    assert_eq!(report.workloads.len() + dropped, before);
    assert!(report.workloads.contains_key(&telling));
    let whole_left = report
        .workloads
        .values()
        .filter(|w| w.min_counted() >= w.desired)
        .count();
    assert!(
        whole_left < 60_000,
        "the whole ones went first: {whole_left} left"
    );
}

#[test]
fn durations_run_from_admission_to_kamikaze_and_on_to_the_return() {
    let node = NodeRecord {
        admitted: Some(at(10)),
        kamikaze: Some(at(70)),
        upgraded: Some(at(100)),
        ..NodeRecord::default()
    };
    assert_eq!(node.drain_duration(), Some(Duration::from_secs(60)));
    assert_eq!(node.restart_duration(), Some(Duration::from_secs(30)));
    assert_eq!(NodeRecord::default().drain_duration(), None);
}

#[test]
fn a_forced_action_reads_back_from_its_annotation_and_bad_ones_are_none() {
    let value = ForcedRecord::annotation(at(5), "kubernetes-admin", "deleted pod shop/x");
    let record = ForcedRecord::parse("n1", &value).expect("readable");
    assert_eq!(
        record,
        ForcedRecord {
            at: at(5),
            node: "n1".into(),
            user: "kubernetes-admin".into(),
            what: "deleted pod shop/x".into()
        }
    );
    for bad in ["", "yesterday admin: x", "2026-01-01T00:00:00Z no colon"] {
        assert_eq!(ForcedRecord::parse("n1", bad), None, "{bad:?}");
    }
}

#[test]
fn object_names_are_short_and_tell_runs_apart() {
    let a = UpgradeReport::object_name("fleet", "sha256:1");
    let b = UpgradeReport::object_name("fleet", "sha256:2");
    assert_ne!(a, b);
    assert!(a.starts_with("k8sm-report-fleet-"));
    assert!(UpgradeReport::object_name(&"p".repeat(253), "x").len() <= 253);
}
