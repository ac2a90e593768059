//! Runs a scenario step by step (plan, check, execute, check, the cluster moves on, the clock
//! advances) and judges liveness: within a bound on the steps, every node that holds no stuck
//! workload's pod is upgraded, and each stuck node is reported with what it waits on.

use chrono::Duration;
use k8sm_api::NodePhase;

use super::{
    checks::{check_executed, check_plan},
    scenarios::{Kind, Mode, Rollout, Scenario},
    world::{DEADLINE_MINUTES, World},
};
use crate::{
    ActionKind, Planner,
    testing::apply,
    tests::{node_plan, oracle},
};

/// Runs a scenario for at most `steps` steps, and `then` more once every node that holds no stuck
/// workload's pod is upgraded and clean; returns the step at which they were, and the world.
///
/// Each step:
/// 1. the planner sees the cluster and plans at the model's clock; every eviction is checked
///    against the model's truth (the rule before each eviction, budgets, unknown kinds through the
///    Eviction API, no workload pod deleted);
/// 2. the actions are executed (evicted and deleted pods become terminating, nodes get the contract
///    keys); **invariant**: a workload of which k8sm evicted a pod in this step has at least
///    `min(ceil(t*d), d-1)` Ready pods after it (whatever failures did before: those are not
///    k8sm's);
/// 3. the cluster moves on: pods terminating since the previous step are gone; the controllers
///    replace and scale; executors told to terminate come back with the target ID (their node must
///    be empty); pods become Ready.
///
/// The clock advances a minute per step, and, when the cluster is idle (nothing pending in the
/// model, nothing but bookkeeping in the plan), jumps to the plan's next wake-up, as the controller
/// requeues: a node that waits on a stuck workload reaches its `nodeProgressDeadline` and gives up
/// its slot.
pub(super) fn run(
    s: &Scenario,
    steps: usize,
    then: usize,
) -> Result<(Option<usize>, World), String> {
    let mut world = World::new(s);
    let stuck_nodes = world.stuck_nodes();
    let failures = s.mode == Mode::Failures;
    let bounds: Vec<u32> = world
        .workloads
        .iter()
        .map(|w| oracle::bound(s.threshold, w.desired))
        .collect();
    let mut done = None;
    let mut step = 0;
    // The controller's planner, kept across passes: each of its plans must be a fresh plan's.
    let mut planner = Planner::default();
    while step < steps {
        if done.is_none() && world.upgraded(&stuck_nodes) {
            done = Some(step);
        }
        if done.is_some_and(|d| step >= d + then) {
            break;
        }
        world.remember_sizes(Vec::new());
        let plan = planner.plan(&world.view, world.now);
        if plan != crate::plan(&world.view, world.now) {
            return Err(format!(
                "step {step}: the kept planner's plan differs from a fresh plan"
            ));
        }
        let evicted = check_plan(&world, &plan, step)?;
        let plan = world.eviction_api(&plan);
        world.note(&plan);
        let gone: Vec<String> = world
            .view
            .pods
            .iter()
            .filter(|p| p.terminating)
            .map(|p| p.uid.to_string())
            .collect();
        let evicting = plan
            .evictions()
            .filter(|(_, e)| e.size_inferred)
            .map(|(_, e)| e.owner.uid.to_string())
            .collect();
        world.remember_sizes(evicting);
        world.report_pass(&plan);
        let nodes_of_pods = world
            .view
            .pods
            .iter()
            .filter_map(|p| Some((p.uid.to_string(), p.node_name.as_deref()?.to_owned())))
            .collect();
        apply(&mut world.view, &plan);
        world.report_actions(&plan, &nodes_of_pods);
        check_executed(&world, s, &evicted, &bounds, step)?;
        let bookkeeping = plan
            .actions
            .iter()
            .all(|a| matches!(a.kind, ActionKind::Progress { .. }));
        let idle = bookkeeping && world.idle();
        world.seen.saw(
            "the clock jumped to the next wake-up",
            idle && plan.next_wake.is_some(),
        );
        world.advance(step, &gone, failures)?;
        let next = world.now + Duration::minutes(1);
        world.now = match plan.next_wake {
            Some(wake) if idle => wake.max(next),
            _ => next,
        };
        step += 1;
    }
    if done.is_none() && world.upgraded(&stuck_nodes) {
        done = Some(steps);
    }
    world.check_report()?;
    Ok((done, world))
}

/// A bound on the steps an upgrade takes, as if nothing overlapped: each pod moves once (twice for
/// a Deployment that rolls out: the rollout replaces it too), and a move takes at most 5 steps
/// (evict; gone; replaced, after up to 3 steps for an operator; Ready after up to 3); each node
/// then takes at most 6 more (kamikaze, up to 3 steps of restart, completion) and may hold its slot
/// for a deadline before it gives it up, once.
pub(super) fn bound(s: &Scenario) -> usize {
    let pods: usize = s
        .workloads
        .iter()
        .map(|w| match w.kind {
            Kind::Deployment(r) if r != Rollout::Steady => 2 * w.desired as usize,
            _ => w.desired as usize,
        })
        .sum::<usize>()
        + s.unmanaged;
    let deadline = usize::try_from(DEADLINE_MINUTES).unwrap();
    20 + 5 * pods + (6 + deadline) * (s.old_nodes + 1)
}

/// Runs a scenario to its bound and checks liveness: every node without a stuck workload's pod is
/// upgraded, and each stuck node is then reported with what it waits on, or with its place in the
/// queue for a slot.
pub(super) fn converges(s: &Scenario) -> Result<(), String> {
    let limit = bound(s);
    let (done, world) = run(s, limit, 3)?;
    if done.is_none() {
        let stuck = world.stuck_nodes();
        let plan = crate::plan(&world.view, world.now);
        let summary: Vec<String> = plan
            .nodes
            .iter()
            .filter(|n| !stuck.contains(&n.node))
            .map(|n| format!("{} {:?} {:?}", n.node, n.phase, n.blockers.first()))
            .collect();
        return Err(format!(
            "not upgraded within {limit} steps (stuck nodes {stuck:?}); the others: {summary:#?}"
        ));
    }
    let stuck = world.stuck_nodes();
    let plan = crate::plan(&world.view, world.now);
    for name in &stuck {
        let n = node_plan(&plan, name);
        let reported = !n.blockers.is_empty() || n.admission_position.is_some();
        if n.phase == NodePhase::Compatible || !reported {
            return Err(format!("stuck node {name} is not reported: {n:?}"));
        }
    }
    Ok(())
}
