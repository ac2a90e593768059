//! A hand-made summary for the report, target and index tests: 10 nodes, owners of 10, 15 and 15
//! replicas (bound 30 s), k8sm and the parallel baseline three times each, the sequential baseline
//! once.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::audit::ToolRequests;
use crate::requests::{BucketBound, ByVerb, HistogramQuantiles};
use crate::results::{
    BoundFigure, ControllerCost, Machine, PlannerBench, Run, Scenario, Summary, Tool,
};
use crate::stats::{BoundTerms, LowerBound, lower_bound};
use crate::timeline::OwnerOutcome;

pub fn owner(
    name: &str,
    desired: u32,
    min_ready: u32,
    violations: u32,
    unavailable: f64,
) -> OwnerOutcome {
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
        unavailable_replica_s: unavailable,
        restored_s: None,
    }
}

fn requests(by_verb: &[(&str, f64)]) -> ToolRequests {
    let by_verb: ByVerb = by_verb.iter().map(|(v, n)| ((*v).to_owned(), *n)).collect();
    ToolRequests {
        total: by_verb.values().sum::<f64>() as u64,
        by_verb,
        ..ToolRequests::default()
    }
}

/// A run of `tool` in `round`; its owners' unavailable replica-seconds sum to `unavailable`.
pub fn run(tool: Tool, round: usize, makespan: f64, unavailable: f64) -> Run {
    Run {
        tool,
        round,
        concurrency: Some(tool.concurrency(2)),
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
        tool_requests: Some(requests(&[("LIST", 20.0), ("POST", 100.0)])),
        forced_nodes: None,
        owners: vec![
            owner("a", 10, 9, 0, unavailable / 2.0),
            owner("b", 15, 14, 0, unavailable / 4.0),
            owner("c", 15, 15, 0, unavailable / 4.0),
        ],
        leftovers: None,
        node_phases: None,
        landed: None,
        notes: vec![],
        series: BTreeMap::new(),
    }
}

fn k8sm(
    round: usize,
    makespan: f64,
    unavailable: f64,
    requests_per_node: f64,
    p99: BucketBound,
) -> Run {
    let mut run = run(Tool::K8sm, round, makespan, unavailable);
    run.tool_requests = Some(requests(&[("POST", requests_per_node * 10.0)]));
    run.controller = Some(ControllerCost {
        cpu_seconds_total: 3.25,
        cpu_seconds_upgrade: 2.5,
        peak_rss_bytes: 40_000_000,
        evictions_metric: Some(95.0),
        plan_mean_ms: Some(1.234),
        plans: Some(200.0),
        reconcile_mean_ms: Some(45.0),
        reaction: Some(HistogramQuantiles {
            count: 40,
            p50: BucketBound::AtMost(0.05),
            p99,
        }),
        stage_mean_ms: vec![("observe".into(), 12.5), ("plan".into(), 1.5)],
    });
    run
}

pub fn summary() -> Summary {
    let mut pdb = run(Tool::DrainPdb, 0, 300.0, 50.0);
    pdb.owners[0] = owner("a", 10, 8, 1, 25.0);
    pdb.owners[2] = owner("c", 15, 12, 2, 12.5);
    pdb.forced_nodes = Some(0);
    pdb.notes.push("a note".into());
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
            drain_timeout_s: 300.0,
            lower_bound: LowerBound {
                terms: Some(BoundTerms {
                    node_waves_s: 20.0,
                    node_waves: 5,
                    max_concurrent_nodes: 2,
                    owner_waves_s: 30.0,
                    critical_owner: "web-15".into(),
                    eviction_throughput_s: Some(4.0),
                    evictions: 40,
                    evictions_per_second: Some(10.0),
                    grace_period_s: 1.0,
                    limit: "owner waves".into(),
                }),
                ..lower_bound(
                    &[10, 15, 15],
                    90,
                    Duration::from_secs(2),
                    Duration::from_secs(2),
                )
            },
            concurrency: 2,
            bound: Some(BoundFigure {
                seconds: 30.0,
                derivation: "a placeholder derivation".into(),
            }),
            fleet: None,
            k8sm_budgets: true,
        },
        machine: Machine {
            command: "cargo xtask bench --nodes 10".into(),
            git_commit: "abc".into(),
            git_dirty: true,
            ..Machine::default()
        },
        runs: vec![
            k8sm(0, 30.0, 10.0, 20.0, BucketBound::AtMost(0.5)),
            run(Tool::DrainPdbParallel, 0, 45.0, 20.0),
            pdb,
            k8sm(1, 33.0, 12.0, 30.0, BucketBound::AtMost(0.5)),
            run(Tool::DrainPdbParallel, 1, 90.0, 20.0),
            k8sm(2, 36.0, 14.0, 40.0, BucketBound::Above(120.0)),
            run(Tool::DrainPdbParallel, 2, 60.0, 20.0),
        ],
        planner: vec![PlannerBench {
            id: "plan/nodes/5000".into(),
            measured_at: None,
            nodes: 5000,
            pods: 150_000,
            mean_ms: 25.0,
            median_ms: 24.0,
        }],
        planner_measured_earlier: false,
    }
}
