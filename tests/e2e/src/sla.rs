//! The SLA watcher of crates/testcluster, and what the tests assert with it: no violation, and each
//! workload a test created kept at or above its bound.

pub use k8sm_testcluster::sla::*;

/// Panics with every violation the watcher saw, if any.
pub fn assert_no_violations(sla: &SlaWatcher) {
    let violations = sla.violations();
    assert!(
        violations.is_empty(),
        "SLA violations:\n{}",
        violations.join("\n")
    );
}

/// Zero SLA violations, and for each workload `(kind, name, d)` the test created: a record, whose
/// fewest Ready pods, and fewest available pods (Ready for its `minReadySeconds`), stayed at or
/// above the bound computed from `d` and `threshold`. Prints each record against its bound.
pub fn assert_within_bounds(sla: &SlaWatcher, threshold: u8, workloads: &[(&str, &str, u32)]) {
    let records = sla.records();
    for record in &records {
        println!(
            "SLA: {} {}: desired {}, min ready {}, min available {} (bound {}), {} samples",
            record.kind,
            record.name,
            record.desired,
            record.min_ready,
            record.min_available,
            record.bound,
            record.samples
        );
    }
    assert_no_violations(sla);
    for (kind, name, desired) in workloads {
        let floor = bound(*desired, u32::from(threshold));
        let record = records
            .iter()
            .find(|r| r.kind == *kind && r.name == *name)
            .unwrap_or_else(|| panic!("the SLA watcher judged {kind} {name}: {records:?}"));
        assert_eq!(record.desired, *desired, "{kind} {name}: d");
        assert!(
            record.min_ready >= floor,
            "{kind} {name} fell to {} Ready, below its bound {floor}",
            record.min_ready
        );
        assert!(
            record.min_available >= floor,
            "{kind} {name} fell to {} available, below its bound {floor}",
            record.min_available
        );
    }
}
