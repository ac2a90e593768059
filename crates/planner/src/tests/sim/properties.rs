//! The properties of the simulation, run as proptests over generated scenarios (healthy, with a
//! stuck workload, with failures), the check that the model reaches the situations they are about,
//! and a fixed scenario kept as a regression test.

use proptest::{prelude::*, strategy::ValueTree, test_runner::TestRunner};

use super::{
    run::{bound, converges, run},
    scenarios::{Kind, Mode, Scenario, WorkloadSpec, arb_scenario},
};
use crate::tests::support::Tally;

/// The outcome of a scenario as a test case: a failure carries the scenario, to replay it.
fn judged(s: &Scenario, outcome: Result<(), String>) -> Result<(), TestCaseError> {
    outcome.map_err(|e| TestCaseError::fail(format!("{e}\n{s:?}")))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Without stuck workloads or failures: the invariants hold at every step, and every node is
    /// upgraded within the bound.
    #[test]
    fn the_upgrade_converges_and_keeps_the_sla(s in arb_scenario(Mode::Healthy)) {
        judged(&s, converges(&s))?;
    }

    /// With a stuck workload (a stuck rollout, a budget at zero, pods that never become Ready): it
    /// never loses a pod below its bound, its nodes are reported, and every other node is upgraded:
    /// nothing holds the fleet.
    #[test]
    fn a_stuck_workload_holds_only_its_own_nodes(s in arb_scenario(Mode::Stuck)) {
        judged(&s, converges(&s))?;
    }

    /// With random failures that k8sm does not cause: k8sm never evicts a workload's pod when that
    /// leaves it below its bound, nor breaks any other rule.
    #[test]
    fn failures_never_make_k8sm_break_the_sla(s in arb_scenario(Mode::Failures)) {
        judged(&s, run(&s, 120, 0).map(|_| ()))?;
    }
}

/// The checks above are only as good as the situations the model reaches: over a fixed sample of
/// scenarios of each mode, the planner must meet each of them.
#[test]
fn the_model_reaches_the_cases_that_matter() {
    let mut seen = Tally::default();
    let mut upgraded_after_a_stall = 0;
    let mut runner = TestRunner::deterministic();
    for mode in [Mode::Healthy, Mode::Stuck, Mode::Failures] {
        let strategy = arb_scenario(mode);
        for _ in 0..40 {
            let s = strategy.new_tree(&mut runner).unwrap().current();
            let limit = if mode == Mode::Failures {
                120
            } else {
                bound(&s)
            };
            let (done, world) = run(&s, limit, 0).unwrap_or_else(|e| panic!("{e}\n{s:?}"));
            seen.add(&world.seen);
            if mode == Mode::Stuck
                && done.is_some()
                && world.seen.count("a node gave up its slot") > 0
            {
                upgraded_after_a_stall += 1;
            }
        }
    }
    seen.assert_all_met(12, "the sample");
    assert!(
        upgraded_after_a_stall > 0,
        "no stuck node ever gave up its slot for the others"
    );
}

/// The controller's in-flight records with overlapping evictions of an unknown kind's pods
/// (docs/decisions/0008-defects-found-by-models-and-benchmarks.md). Here, an operator of 5 pods at
/// threshold 50 (bound 3), all on one node, recreating a deleted pod 1 to 3 minutes later: k8sm
/// evicts pods at 00:00 (two), 00:04 and 00:06 as room allows, so the operator never has 5 live
/// pods again. Attributing each new pod to one eviction keeps one record per missing pod, and the
/// age-out (30 minutes) never meets a replacement that is merely slow.
#[test]
fn overlapping_evictions_of_an_unknown_kind_keep_one_record_per_missing_pod() {
    let s = Scenario {
        mode: Mode::Healthy,
        old_nodes: 1,
        workloads: vec![WorkloadSpec {
            kind: Kind::Operator,
            desired: 5,
            min_available: None,
            never_ready: 0,
        }],
        unmanaged: 0,
        threshold: 50,
        max_concurrent: 1,
        cordon: true,
        surge: false,
        age_out: true,
        seed: 40,
    };
    if let Err(e) = run(&s, bound(&s), 0) {
        panic!("{e}");
    }
}
