//! Liveness over messy fleets (docs/design.md §5.7, docs/decisions/0001-liveness.md): over many
//! generated fleets with the shapes real clusters have, the real planner, run by the model,
//! upgrades every node that can be finished, costs nothing on the nodes only an operator can clear,
//! and never takes an owner below its bound ([`judge`]). The oracle reads the generated truth only,
//! never the planner's output. A failing case prints its [`Case`], which [`replay_a_messy_case`]
//! runs again.

use std::collections::BTreeSet;
use std::time::Duration;

use k8sm_e2e::rng::SplitMix64;
use proptest::prelude::*;

use super::*;
use crate::workload::{MessRates, Realism, Shape};

/// Fleets per proptest function (two functions, run side by side): 1,400, and 1,600 with the
/// sample's 200, in about a minute of one core in a debug build. `PROPTEST_CASES` asks for more (or
/// fewer).
const CASES: u32 = 700;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CASES)
}

/// One generated fleet and the policy that upgrades it: the same values give the same run.
#[derive(Clone, Debug, PartialEq)]
struct Case {
    seed: u64,
    nodes: usize,
    pods: usize,
    slots: u32,
    threshold: u8,
    /// [`MessRates::harsh`] instead of the real clusters' rates.
    harsh: bool,
}

impl Case {
    /// The case of `seed` in the fixed samples: 6–20 nodes, 20–80 pods, one or two slots, a
    /// threshold of 50, 75, 90 or 100, harsh one time in two.
    fn sampled(seed: u64) -> Self {
        let mut rng = SplitMix64(seed);
        let nodes = 6 + rng.below(15) as usize;
        let pods = 20 + rng.below(61) as usize;
        let extra_slot = rng.below(2) as u32;
        let threshold = rng.pick(&[50, 75, 90, 100]);
        let harsh = rng.below(2) == 0;
        Self::new(seed, nodes, pods, extra_slot, threshold, harsh)
    }

    /// One slot, or two (`extra_slot`) on fleets of 10 nodes or more: the others have room for a
    /// drained node's pods.
    fn new(
        seed: u64,
        nodes: usize,
        pods: usize,
        extra_slot: u32,
        threshold: u8,
        harsh: bool,
    ) -> Self {
        Self {
            seed,
            nodes,
            pods,
            slots: 1 + extra_slot * u32::from(nodes >= 10),
            threshold,
            harsh,
        }
    }

    fn fleet(&self) -> Workload {
        let realism = Realism {
            seed: self.seed,
            ready_delay_min: Duration::from_secs(2),
            ready_delay_max: Duration::from_secs(20),
            grace_period_s: 3,
            // Room for a cordoned node's pods on the others, dead nodes aside.
            fill_percent: 60,
            messy: Some(if self.harsh {
                MessRates::harsh()
            } else {
                MessRates::default()
            }),
        };
        Workload::generate(self.nodes, self.pods, Shape::Realistic, &realism)
    }

    fn config(&self) -> ModelConfig {
        ModelConfig {
            nodes: self.nodes,
            max_concurrent_nodes: MaxConcurrentNodes::count(self.slots).expect("a slot at least"),
            threshold: self.threshold,
            restart_delay: Duration::from_secs(2),
            pod_ready_delay: Duration::from_secs(2),
            tick: Duration::from_millis(500),
            // Generous: a crash loop's replacement waits `nodeProgressDeadline` (10 minutes) before
            // it moves.
            limit: Duration::from_secs(12 * 3600),
            event_driven: true,
            no_schedule_to_drain: false,
            one_node_first: false,
            no_room: false,
            pace_by_room: false,
            gone_after: GONE_AFTER,
            ready_after: READY_AFTER,
            tie_seed: 0,
        }
    }

    /// How to run it again.
    fn replay(&self) -> String {
        format!(
            "K8SM_MESSY_CASE={},{},{},{},{},{} cargo test -p k8sm-bench --lib replay_a_messy_case -- --ignored \
             --nocapture",
            self.seed, self.nodes, self.pods, self.slots, self.threshold, self.harsh
        )
    }
}

/// The nodes only an operator can clear, from the generated truth alone.
struct Oracle {
    /// Known to need an operator from the start: dead, holding a zombie stuck from the start, a
    /// bare pod under `Never`, or a pod pinned there.
    never_started: BTreeSet<String>,
    /// Holding only a fresh zombie, stuck within the first minute: a tool could not tell before.
    handed_back: BTreeSet<String>,
}

impl Oracle {
    fn new(fleet: &Workload) -> Self {
        let messy = fleet.messy.as_ref().expect("a messy fleet");
        assert_eq!(messy.unmanaged_policy, UnmanagedPodPolicy::Never);
        // Stuck a minute past the end of its grace period.
        let stuck_from_the_start = |z: &&crate::workload::Zombie| z.deleted_before_s >= 60;
        let never_started: BTreeSet<String> = messy
            .dead_nodes
            .iter()
            .copied()
            .chain(
                messy
                    .zombies
                    .iter()
                    .filter(stuck_from_the_start)
                    .map(|z| z.node_index),
            )
            .chain(fleet.unmanaged.iter().map(|u| u.node_index))
            .chain(
                fleet
                    .owners
                    .iter()
                    .flat_map(|o| o.pinned_nodes.iter().copied()),
            )
            .map(k8sm_testcluster::node_name)
            .collect();
        let handed_back = messy
            .zombies
            .iter()
            .map(|z| k8sm_testcluster::node_name(z.node_index))
            .filter(|n| !never_started.contains(n))
            .collect();
        Self {
            never_started,
            handed_back,
        }
    }

    fn unfinishable(&self) -> BTreeSet<String> {
        self.never_started
            .union(&self.handed_back)
            .cloned()
            .collect()
    }
}

/// The properties of `run`, judged against the oracle: what broke, if anything. (a) Every node that
/// can be finished is upgraded, within a generous simulated-time limit. (b) A node only an operator
/// can clear is never admitted or cordoned and loses no pod, and ends neither cordoned nor carrying
/// its drain state; one whose zombie was still a mere terminating pod when the upgrade started (a
/// fresh zombie, [`crate::workload::Zombie`]) may have been started, and must have been handed
/// back, uncordoned. (c) No owner goes below its bound `min(ceil(t·d), d−1)`, counting Ready pods
/// (the model counts them itself): an owner Ready at the start never does, and no eviction of a
/// Ready pod leaves any owner, a crash-looping one included, below it.
fn judge(oracle: &Oracle, run: &ModelRun) -> Vec<String> {
    let mut broken = Vec::new();
    if run.makespan.is_none() {
        broken.push("(a) the finishable nodes were not all upgraded within the limit".to_owned());
    }
    for node in &run.nodes {
        if oracle.never_started.contains(&node.name) {
            if node.admitted.is_some()
                || node.cordoned.is_some()
                || node.cordoned_at_end
                || node.evicted > 0
            {
                broken.push(format!("(b) only an operator can clear {node:?}"));
            }
        } else if oracle.handed_back.contains(&node.name) {
            if node.cordoned_at_end || node.kamikaze.is_some() {
                broken.push(format!("(b) not handed back: {node:?}"));
            }
        } else if node.back.is_none() {
            broken.push(format!("(a) finishable, not upgraded: {node:?}"));
        }
    }
    if !run.owners_below.is_empty() {
        broken.push(format!(
            "(c) owners below their bound: {:?}",
            run.owners_below
        ));
    }
    broken
}

/// The properties on one case: its run, or what broke with the case to replay.
fn check(case: &Case) -> Result<ModelRun, String> {
    let fleet = case.fleet();
    let run = simulate(&fleet, &case.config());
    let oracle = Oracle::new(&fleet);
    let mut broken = judge(&oracle, &run);
    let told: BTreeSet<String> = run.unfinishable.iter().cloned().collect();
    let unfinishable = oracle.unfinishable();
    if told != unfinishable {
        broken.push(format!(
            "the model's nodes left to an operator {told:?} are not the oracle's {unfinishable:?}"
        ));
    }
    if broken.is_empty() {
        Ok(run)
    } else {
        Err(format!(
            "{case:?}: {}\nreplay: {}",
            broken.join("; "),
            case.replay()
        ))
    }
}

fn arb_case(nodes: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        nodes,
        20usize..=80,
        0u32..=1,
        prop::sample::select(vec![50u8, 75, 90, 100]),
        any::<bool>(),
    )
        .prop_map(|(seed, nodes, pods, extra_slot, threshold, harsh)| {
            Case::new(seed, nodes, pods, extra_slot, threshold, harsh)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// 6 to 12 nodes: few nodes left to finish, each holding most of an owner.
    #[test]
    fn small_messy_fleets_finish_what_can_be_finished_and_cost_nothing_elsewhere(case in arb_case(6..=12)) {
        check(&case).map_err(TestCaseError::fail)?;
    }

    /// 13 to 20 nodes, some with two slots.
    #[test]
    fn larger_messy_fleets_finish_what_can_be_finished_and_cost_nothing_elsewhere(case in arb_case(13..=20)) {
        check(&case).map_err(TestCaseError::fail)?;
    }
}

/// Cases that failed once, kept as they were generated, with what they found.
const REGRESSIONS: &[Case] = &[
    // Two live nodes 60 % full: neither can take the other's pods, so no tool can drain either,
    // and the oracle must not call one finishable: fleets are sized for the live nodes they have
    // (`Workload::size_nodes`).
    Case {
        seed: 4270290598372954689,
        nodes: 6,
        pods: 56,
        slots: 1,
        threshold: 90,
        harsh: true,
    },
    // A node holding a fresh zombie, started, whose broken pods then wait for the Ready pods to
    // leave: its last eviction comes two minutes in, so it stalls and is handed back more than
    // 11 minutes after the start. Hence the run goes on for `SETTLE` after k8sm's last eviction,
    // not for a fixed time from the start.
    Case {
        seed: 16639782863472062013,
        nodes: 6,
        pods: 50,
        slots: 1,
        threshold: 90,
        harsh: true,
    },
];

/// Two tight fleets the property found, their node sizes set by hand as found (generated fleets are
/// sized for their live nodes): two live nodes, room for one node's Ready pods on the other but not
/// for its broken pods' replacements too. Unless broken pods leave the room to the healthy
/// workloads' pods, the node never finishes and is admitted, stalled and handed back every 11
/// minutes (docs/decisions/0001-liveness.md). The second needs the StatefulSets' replacements still
/// to come (their pods terminating) counted against the room.
#[test]
fn broken_pods_leave_the_room_to_the_ready_pods_on_a_tight_fleet() {
    let tight = [
        (8271499481746269433, 25, 7000, 9088),
        (4261950695112121976, 56, 14900, 18240),
    ];
    for (seed, pods, cpu_millis, memory_mib) in tight {
        let case = Case {
            seed,
            nodes: 6,
            pods,
            slots: 1,
            threshold: 75,
            harsh: true,
        };
        let mut fleet = case.fleet();
        fleet.node_size = Some(crate::workload::NodeSize {
            cpu_millis,
            memory_mib,
        });
        let run = simulate(&fleet, &case.config());
        let broken = judge(&Oracle::new(&fleet), &run);
        assert!(
            broken.is_empty(),
            "{case:?} sized {cpu_millis}m, {memory_mib} MiB: {broken:?}"
        );
    }
}

#[test]
fn the_cases_that_once_failed_hold() {
    for case in REGRESSIONS {
        if let Err(e) = check(case) {
            panic!("{e}");
        }
    }
}

/// The properties are only as good as the situations the model reaches: over a fixed sample, the
/// planner meets every shape, and moves the pods of each movable one off nodes it finishes.
#[test]
fn the_sample_reaches_every_messy_shape() {
    // Per shape: fleets that have it, and evictions of the pods of its owners.
    let mut dead_nodes = 0;
    let mut zombies_on_live_nodes = 0;
    let mut bare_pod_nodes = 0;
    let mut broken_moves = 0;
    let mut stuck_moves = 0;
    let mut stuck_pods = 0;
    let mut pinned_moves = 0;
    let mut pinned_owners = 0;
    let mut unfinishable = 0;
    // Nodes of fresh zombies started before their zombie was known to be stuck, then handed back.
    let mut handed_back = 0;
    let mut stalls = 0;
    for seed in 1..=200 {
        let case = Case::sampled(seed);
        let fleet = case.fleet();
        let run = check(&case).unwrap_or_else(|e| panic!("{e}"));
        let messy = fleet.messy.as_ref().expect("messy");
        dead_nodes += messy.dead_nodes.len();
        zombies_on_live_nodes += messy.zombies.iter().filter(|z| z.finalizer).count();
        bare_pod_nodes += fleet.unmanaged.len();
        unfinishable += run.unfinishable.len();
        stalls += run.stalls;
        let oracle = Oracle::new(&fleet);
        handed_back += run
            .nodes
            .iter()
            .filter(|n| oracle.handed_back.contains(&n.name) && n.admitted.is_some())
            .count();
        let moves = |o: &workload::Owner| run.evictions_by_owner.get(&o.name).copied().unwrap_or(0);
        for owner in &fleet.owners {
            // Nothing of it Ready, below its floor (2 replicas or more): only the broken rule moves
            // its pods.
            if owner.crash_looping && owner.replicas >= 2 {
                broken_moves += moves(owner);
            }
            if owner.stuck_rollout > 0 {
                stuck_moves += moves(owner);
                stuck_pods += owner.stuck_rollout as usize;
            }
            if !owner.pinned_nodes.is_empty() {
                pinned_moves += moves(owner);
                pinned_owners += 1;
            }
        }
    }
    let seen = format!(
        "dead nodes {dead_nodes}, zombies on live nodes {zombies_on_live_nodes}, bare pods {bare_pod_nodes}, \
         broken moves {broken_moves}, stuck rollout moves {stuck_moves} (of {stuck_pods} not-Ready pods), pinned \
         owners {pinned_owners} and their pods moved {pinned_moves}, unfinishable {unfinishable}, started \
         and handed back {handed_back}, slots given up {stalls}"
    );
    println!("{seen}");
    assert!(dead_nodes >= 10 && zombies_on_live_nodes >= 50, "{seen}");
    assert!(bare_pod_nodes >= 200 && unfinishable >= 300, "{seen}");
    assert!(broken_moves >= 50, "{seen}");
    // Its Ready pods moved too, within its headroom, not only its broken ones.
    assert!(stuck_moves > stuck_pods, "{seen}");
    // Under `pinnedPods: Block` a pinned pod's node is the operator's.
    assert!(pinned_owners >= 50 && pinned_moves == 0, "{seen}");
    assert!(handed_back >= 3, "{seen}");
}

/// Planning only on changes, wakes and the resync gives exactly the upgrade of planning at every
/// tick: the planner says when a decision changes with time alone (a pod becoming broken, a node's
/// progress deadline), and the property's event-driven runs lose nothing.
#[test]
fn planning_on_changes_and_wakes_gives_the_upgrade_of_planning_every_tick() {
    for seed in 1..=3 {
        let case = Case::sampled(seed);
        let fleet = case.fleet();
        let events = simulate(&fleet, &case.config());
        let ticks = simulate(
            &fleet,
            &ModelConfig {
                event_driven: false,
                no_schedule_to_drain: false,
                one_node_first: false,
                no_room: false,
                gone_after: GONE_AFTER,
                ready_after: READY_AFTER,
                ..case.config()
            },
        );
        assert_eq!(events.makespan, ticks.makespan, "{case:?}");
        assert_eq!(events.nodes, ticks.nodes, "{case:?}");
        assert_eq!(
            events.evictions_by_owner, ticks.evictions_by_owner,
            "{case:?}"
        );
        assert_eq!(events.owners_below, ticks.owners_below, "{case:?}");
    }
}

/// The checks catch what they are about: the same fleets with their bare pods deleted (`Delete`, as
/// the tidy fleets have it), while the oracle still reads them as `Never`, have their nodes
/// started, and (b) says so.
#[test]
fn the_checks_catch_a_node_started_that_only_an_operator_should_clear() {
    let mut caught = 0;
    for seed in 1..=10 {
        let case = Case::sampled(seed);
        let fleet = case.fleet();
        let oracle = Oracle::new(&fleet);
        let mut deleting = fleet.clone();
        if let Some(messy) = deleting.messy.as_mut() {
            messy.unmanaged_policy = UnmanagedPodPolicy::Delete;
        }
        let run = simulate(&deleting, &case.config());
        let broken = judge(&oracle, &run);
        caught += usize::from(broken.iter().any(|b| b.starts_with("(b)")));
    }
    assert!(caught >= 5, "{caught} of 10 caught");
}

/// Runs the case in `K8SM_MESSY_CASE` (`seed,nodes,pods,slots,threshold,harsh`, as a failure prints
/// it) and prints the model's account of it.
#[test]
#[ignore = "a replay: K8SM_MESSY_CASE=... cargo test -p k8sm-bench --lib replay_a_messy_case -- --ignored --nocapture"]
fn replay_a_messy_case() {
    let text = std::env::var("K8SM_MESSY_CASE")
        .expect("K8SM_MESSY_CASE=seed,nodes,pods,slots,threshold,harsh");
    let fields: Vec<&str> = text.split(',').map(str::trim).collect();
    let [seed, nodes, pods, slots, threshold, harsh] = fields[..] else {
        panic!("K8SM_MESSY_CASE={text}: six fields expected");
    };
    let case = Case {
        seed: seed.parse().expect("seed"),
        nodes: nodes.parse().expect("nodes"),
        pods: pods.parse().expect("pods"),
        slots: slots.parse().expect("slots"),
        threshold: threshold.parse().expect("threshold"),
        harsh: harsh.parse().expect("harsh"),
    };
    let fleet = case.fleet();
    println!("{case:?}\n{fleet:#?}");
    let run = simulate(&fleet, &case.config());
    let bound = crate::stats::concurrency_bound(&fleet.bound_input(
        case.nodes,
        case.slots as usize,
        case.threshold,
        Duration::from_secs(2),
        Duration::from_secs(2),
        None,
    ));
    println!("{}", describe(case.seed, &bound, &run));
    for node in &run.nodes {
        println!("{node:?}");
    }
    if let Err(e) = check(&case) {
        panic!("{e}");
    }
}
