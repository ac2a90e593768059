//! Chaos on a 50-node upgrade, each test on its own real cluster: the controller SIGKILLed, the
//! kube-apiserver restarted, the leader of two replicas killed, and a hung executor, blocking
//! budgets and a concurrent editor. Each asserts what an operator relies on: the upgrade completes,
//! or reports exactly what blocks it while everything else completes; no owner falls below its
//! bound; no protected pod is deleted and no pod evicted twice. Faults come from a seeded RNG
//! (`CHAOS_SEED=<seed>` replays them); the figures are printed: run with `--nocapture`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    Taint,
};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use nix::sys::signal::Signal;
use serde_json::json;

use k8sm_api::{
    ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, MaxConcurrentNodes, NodePhase, PinnedPods,
    UnmanagedPodPolicy, UnmanagedPods, Workloads, condition_types, keys,
};
use k8sm_e2e::events::{ACTIONS, first_seen, occurrences, utc};
use k8sm_e2e::http::{free_port, get};
use k8sm_e2e::nodes::taints;
use k8sm_e2e::polling::{POLL, poll};
use k8sm_e2e::rng::SplitMix64;
use k8sm_e2e::scenario::{Scenario, is_ready, is_upgraded};
use k8sm_e2e::sla::{SlaWatcher, assert_no_violations};
use k8sm_e2e::workloads::{
    create, daemon_set, deployment, pdb_min_available, stateful_set, unmanaged_pod,
};
use k8sm_testcluster::{ClusterOptions, node_name};

const NODES: usize = 50;
/// Nodes `node-0045`..`node-0049` belong to the `strict` policy (unmanaged pods: `Never`); the rest
/// to `fleet`.
const STRICT_FIRST: usize = 45;
const FLEET: &str = "fleet";
const STRICT: &str = "strict";
const POOL_LABEL: &str = "chaos.k8sm.test/pool";
const THRESHOLD: u8 = 90;
/// The opted-out pod's node (fleet) and the `Never` pod's node (strict).
const OPTED_OUT_NODE: usize = 1;
const NEVER_NODE: usize = 47;
/// The node whose executor never comes back (fleet), in the test of blocked nodes.
const HUNG_NODE: usize = 44;
/// In the test of blocked nodes, `ledger` (2 replicas) runs on `node-0010`, and its
/// PodDisruptionBudget allows no disruption; `vault` (1 replica) runs on `node-0011`, and its
/// budget was tightened while the disruption controller was down, so its status still allows one
/// disruption that the Eviction API refuses (429).
const LEDGER_NODE: usize = 10;
const VAULT_NODE: usize = 11;
/// Deployments of several sizes; with the StatefulSet, 94 owned pods.
const DEPLOYMENTS: [(&str, i32); 5] = [
    ("solo", 1),
    ("trio", 3),
    ("web", 10),
    ("api", 25),
    ("batch", 50),
];
const STATEFUL_SET: (&str, i32) = ("db", 5);
/// Unmanaged pods under `Delete`, one on each of these nodes.
const SCRATCH_NODES: [usize; 10] = [4, 8, 12, 16, 20, 24, 28, 32, 36, 40];

const SETUP: Duration = Duration::from_secs(240);
const UPGRADE: Duration = Duration::from_secs(420);

// ---------------------------------------------------------------------------------------------------------------
// 1. The controller SIGKILLed 10 times at random moments
// ---------------------------------------------------------------------------------------------------------------

/// Ten SIGKILLs spread over the first half of the upgrade (the k-th once 2.4·k of its 48 nodes are
/// upgraded, after a random 0–0.5 s: spaced by progress rather than time, so that every kill falls
/// mid-upgrade; docs/decisions/0009-end-to-end-fault-tests.md), each followed at once by a fresh
/// controller: the upgrade completes, every restarted controller acts within a second or so,
/// nothing is evicted twice, the SLA holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_sigkilled_ten_times_finishes_the_upgrade() {
    const TEST: &str = "sigkill";
    const KILLS: usize = 10;
    let mut rng = Rng::seeded(TEST);
    let mut fleet = Fleet::start(TEST, &[], false).await;
    fleet.scenario.start_controller(&[]);
    fleet.start_upgrade("10m").await;

    let upgradable = fleet.upgradable();
    let mut kills = Vec::new();
    // Per controller process: when it started and when it was killed.
    let mut lives: Vec<(DateTime<Utc>, Option<DateTime<Utc>>)> = vec![(Utc::now(), None)];
    for k in 0..KILLS {
        let at_least = k * upgradable / (2 * KILLS);
        let what = format!("{at_least} nodes are upgraded (before kill {})", k + 1);
        fleet
            .wait_for(&what, UPGRADE, || async {
                let upgraded = fleet.upgraded().await?;
                (upgraded >= at_least)
                    .then_some(())
                    .ok_or(format!("{upgraded} upgraded"))
            })
            .await;
        tokio::time::sleep(rng.millis(0, 500)).await;
        let current = fleet.scenario.controllers.last().expect("a controller");
        current.assert_running();
        current.kill_with(Signal::SIGKILL);
        let now = Utc::now();
        lives.last_mut().expect("a life").1 = Some(now);
        let upgraded = fleet.upgraded().await.unwrap_or_default();
        let evicted = fleet.count("Evicted").await;
        kills.push((fleet.elapsed(), upgraded, evicted));
        fleet.scenario.start_controller(&[]);
        lives.push((Utc::now(), None));
    }
    // Judged at the moment of each kill, not after the last restart: what matters is that every
    // kill fell mid-upgrade.
    let (_, upgraded_at_last_kill, _) = kills.last().expect("a kill");
    assert!(
        *upgraded_at_last_kill < upgradable,
        "all {KILLS} kills happened mid-upgrade ({upgraded_at_last_kill} of {upgradable} upgraded at the last)"
    );

    let stuck = fleet.operator_blockers();
    let took = fleet.settle(&stuck).await;
    for (i, (at, upgraded, evicted)) in kills.iter().enumerate() {
        eprintln!(
            "[{TEST}] kill {:>2} at {:>5.1}s: {upgraded:>2} nodes upgraded, {evicted:>3} evictions so far",
            i + 1,
            at.as_secs_f64()
        );
    }
    eprintln!(
        "[{TEST}] {} SIGKILLs, {} controller processes in all; upgrade settled in {:.1}s",
        kills.len(),
        fleet.scenario.controllers.len(),
        took.as_secs_f64()
    );
    // A restarted controller acts at once (a quiet cluster sends it no change to wake it: it must
    // not idle until its resync), unless it is killed first.
    let events = fleet.all_events().await.expect("Events");
    let mut first_actions = Vec::new();
    for (i, (born, died)) in lives.iter().enumerate() {
        let who = format!("controller-{i}");
        let first = events
            .iter()
            .filter(|e| e.reporting_instance.as_deref() == Some(who.as_str()))
            .filter(|e| ACTIONS.contains(&e.reason.as_deref().unwrap_or_default()))
            .map(first_seen)
            .min();
        let lived = (died.unwrap_or_else(Utc::now) - *born)
            .to_std()
            .unwrap_or_default();
        match first {
            Some(first) => {
                let after = (first - *born).to_std().unwrap_or_default();
                first_actions.push(format!("{who} {:.1}s", after.as_secs_f64()));
                assert!(
                    after < Duration::from_secs(10),
                    "{who} first acted {after:?} after it started"
                );
            }
            None => {
                first_actions.push(format!("{who} none (lived {:.1}s)", lived.as_secs_f64()));
                assert!(
                    lived < Duration::from_secs(10),
                    "{who} lived {lived:?} mid-upgrade without acting"
                );
            }
        }
    }
    eprintln!(
        "[{TEST}] from process start to first action: {}",
        first_actions.join(", ")
    );
    fleet.assert_common(&stuck).await;
}

// ---------------------------------------------------------------------------------------------------------------
// 2. The kube-apiserver restarted twice
// ---------------------------------------------------------------------------------------------------------------

/// The kube-apiserver is stopped and started again twice mid-upgrade (etcd keeps the state). The
/// controller keeps running, its watches re-list by themselves, and the upgrade completes.
/// (kube-scheduler sometimes exits after such a restart — "Scheduler cache is corrupted" when a
/// binding it retried had succeeded — and is then restarted here as kubelet would restart it:
/// without a scheduler no replacement pod runs, and k8sm rightly waits.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_restarted_twice_the_controller_carries_on() {
    const TEST: &str = "apiserver";
    let mut rng = Rng::seeded(TEST);
    let mut fleet = Fleet::start(TEST, &[], false).await;
    fleet.scenario.start_controller(&[]);
    fleet.start_upgrade("10m").await;

    let upgradable = fleet.upgradable();
    let mut restarts = Vec::new();
    for at_least in [upgradable / 4, upgradable * 3 / 5] {
        // The waits of this test restart a component that exits, as kubelet restarts a static pod:
        // kube-scheduler exits on purpose when, after the apiserver's restart, its cache
        // disagrees with a binding it made.
        let what = format!("{at_least} nodes are upgraded");
        fleet
            .wait_upgraded_supervised(&what, |upgraded| upgraded >= at_least)
            .await;
        tokio::time::sleep(rng.millis(0, 1500)).await;
        let before = fleet.upgraded().await.unwrap_or_default();
        let at = fleet.elapsed();
        let down = fleet
            .scenario
            .cluster
            .restart_apiserver()
            .await
            .expect("the kube-apiserver restarts");
        fleet.scenario.controllers[0].assert_running();
        // Progress resumes without help: a node finishes after the restart.
        let ready = Instant::now();
        fleet
            .wait_upgraded_supervised("a node finishes after the restart", |upgraded| {
                upgraded > before || upgraded == upgradable
            })
            .await;
        restarts.push((at, before, down, ready.elapsed()));
    }

    let stuck = fleet.operator_blockers();
    let took = fleet.settle(&stuck).await;
    fleet.scenario.controllers[0].assert_running();
    assert_eq!(
        fleet.scenario.controllers.len(),
        1,
        "one controller process did it all"
    );
    for (i, (at, before, down, resumed)) in restarts.iter().enumerate() {
        eprintln!(
            "[{TEST}] apiserver restart {} at {:.1}s ({before} nodes upgraded): unavailable {:.1}s; next node done \
             {:.1}s after it was ready",
            i + 1,
            at.as_secs_f64(),
            down.as_secs_f64(),
            resumed.as_secs_f64()
        );
    }
    let log = std::fs::read_to_string(&fleet.scenario.controllers[0].log).unwrap_or_default();
    eprintln!(
        "[{TEST}] 2 apiserver restarts; the controller logged {} watch failures and {} failed actions, and carried \
         on; upgrade settled in {:.1}s",
        log.matches("watch failed; retrying").count(),
        log.matches("action failed").count(),
        took.as_secs_f64()
    );
    fleet.assert_common(&stuck).await;
}

// ---------------------------------------------------------------------------------------------------------------
// 3. Two replicas under leader election: the leader SIGKILLed
// ---------------------------------------------------------------------------------------------------------------

/// Two replicas with `--leader-elect` (6 s Lease). The leader is SIGKILLed mid-upgrade; the standby
/// takes the Lease once it expires and acts at once. Measured: from the kill to the standby's first
/// action (its first Event of an executed action). Only one replica ever acts at a time, and the
/// upgrade completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_sigkilled_the_standby_takes_over_and_finishes() {
    const TEST: &str = "leader";
    const LEASE: Duration = Duration::from_secs(6);
    let mut rng = Rng::seeded(TEST);
    let mut fleet = Fleet::start(TEST, &[], false).await;
    let election = [
        "--leader-elect",
        "--leader-elect-namespace=default",
        "--leader-elect-lease-duration=6s",
    ];
    let leases: Api<Lease> = Api::namespaced(fleet.scenario.client.clone(), "default");
    let holder = || async {
        let lease = leases.get_opt("k8sm-controller").await.ok()??;
        let spec = lease.spec?;
        Some((spec.holder_identity?, spec.acquire_time.map(|t| utc(&t.0))))
    };
    fleet.scenario.start_controller(&election);
    fleet
        .wait_for("controller-0 holds the Lease", SETUP, || async {
            let (who, _) = holder().await.ok_or("no Lease yet")?;
            (who == "controller-0").then_some(()).ok_or(who)
        })
        .await;
    fleet.scenario.start_controller(&election);
    fleet
        .wait_for("controller-1 is up as a standby", SETUP, || async {
            let log = std::fs::read_to_string(&fleet.scenario.controllers[1].log)
                .map_err(|e| e.to_string())?;
            log.contains("caches synced")
                .then_some(())
                .ok_or("not synced".to_owned())
        })
        .await;
    fleet.start_upgrade("10m").await;

    let upgradable = fleet.upgradable();
    let at_least = upgradable * 2 / 5;
    fleet
        .wait_for(
            &format!("{at_least} nodes are upgraded"),
            UPGRADE,
            || async {
                let upgraded = fleet.upgraded().await?;
                (upgraded >= at_least)
                    .then_some(())
                    .ok_or(format!("{upgraded} upgraded"))
            },
        )
        .await;
    tokio::time::sleep(rng.millis(0, 2000)).await;
    let (leader, _) = holder().await.expect("a Lease holder");
    assert_eq!(
        leader, "controller-0",
        "the first replica leads until killed"
    );
    let standby = "controller-1";
    fleet.scenario.controllers[0].kill_with(Signal::SIGKILL);
    let killed_at = Utc::now();
    let killed = Instant::now();
    let upgraded_at_kill = fleet.upgraded().await.unwrap_or_default();

    let acquired_at = fleet
        .wait_for("the standby holds the Lease", UPGRADE, || async {
            match holder().await {
                Some((who, Some(at))) if who == standby => Ok(at),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    let lease_seen = killed.elapsed();
    let first_action = fleet
        .wait_for("the standby acts", UPGRADE, || async {
            let events = fleet.all_events().await?;
            events
                .iter()
                .filter(|e| e.reporting_instance.as_deref() == Some(standby))
                .filter(|e| ACTIONS.contains(&e.reason.as_deref().unwrap_or_default()))
                .map(first_seen)
                .min()
                .ok_or("no action yet".to_owned())
        })
        .await;
    let takeover = (first_action - killed_at).to_std().unwrap_or_default();
    let acquired = (acquired_at - killed_at).to_std().unwrap_or_default();

    let stuck = fleet.operator_blockers();
    let took = fleet.settle(&stuck).await;
    fleet.scenario.controllers[1].assert_running();

    // Only the Lease holder acts: nothing from the standby before the kill, nothing from the killed
    // leader after.
    let events = fleet.all_events().await.expect("Events");
    // Per reporting replica: how many Events, the first and the last.
    type Span = (usize, Option<DateTime<Utc>>, Option<DateTime<Utc>>);
    let mut by_instance: BTreeMap<String, Span> = BTreeMap::new();
    for event in events
        .iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("k8sm-controller"))
    {
        let who = event.reporting_instance.clone().unwrap_or_default();
        let at = first_seen(event);
        let entry = by_instance.entry(who).or_default();
        entry.0 += 1;
        entry.1 = Some(entry.1.map_or(at, |t| t.min(at)));
        entry.2 = Some(entry.2.map_or(at, |t| t.max(at)));
    }
    let (_, leader_first, leader_last) = by_instance["controller-0"];
    let (_, standby_first, _) = by_instance[standby];
    assert!(
        leader_last.is_some_and(|t| t <= killed_at),
        "the killed leader reported nothing after its death: {by_instance:?}"
    );
    assert!(
        standby_first.is_some_and(|t| t >= acquired_at && t > killed_at),
        "the standby reported nothing before it held the Lease (acquired {acquired_at}): {by_instance:?}"
    );
    assert!(leader_first.is_some());
    assert_eq!(
        by_instance.len(),
        2,
        "k8sm's Events come from the two replicas only: {by_instance:?}"
    );
    // The Lease expires at most LEASE after the kill (the leader renewed it before), and the
    // standby tries again right when it lapses: LEASE at worst, plus the time to act. 4 s of
    // slack for a loaded machine.
    assert!(
        takeover <= LEASE + Duration::from_secs(4),
        "the standby's first action came {takeover:?} after the kill: more than the Lease duration {LEASE:?} \
         (and 4 s to act)"
    );
    eprintln!(
        "[{TEST}] leader SIGKILLed at {:.1}s with {upgraded_at_kill} nodes upgraded; Lease {LEASE:?}: standby \
         acquired it {:.2}s after the kill (seen by the test after {:.2}s), first action {:.2}s after the kill",
        (killed_at - fleet.started_at())
            .to_std()
            .unwrap_or_default()
            .as_secs_f64(),
        acquired.as_secs_f64(),
        lease_seen.as_secs_f64(),
        takeover.as_secs_f64()
    );
    for (who, (count, first, last)) in &by_instance {
        let rel = |t: &Option<DateTime<Utc>>| {
            t.map(|t| (t - killed_at).num_milliseconds() as f64 / 1000.0)
                .unwrap_or_default()
        };
        eprintln!(
            "[{TEST}] {who}: {count} Events, from {:+.2}s to {:+.2}s relative to the kill",
            rel(first),
            rel(last)
        );
    }
    eprintln!("[{TEST}] upgrade settled in {:.1}s", took.as_secs_f64());
    fleet.assert_common(&stuck).await;
}

// ---------------------------------------------------------------------------------------------------------------
// 4 + 5 + 6. A hung executor, budgets that never allow an eviction, and another actor editing nodes
// throughout
// ---------------------------------------------------------------------------------------------------------------

/// On one cluster: `node-0044`'s executor never comes back after its kamikaze (RestartOverdue,
/// Event and status); two workloads can never be evicted because of their PodDisruptionBudgets:
/// `ledger` (minAvailable = replicas: k8sm waits without trying) and `vault` (a stale budget status
/// allows a disruption that the Eviction API refuses: every eviction returns 429); both are
/// reported BlockedByPDB in Events and status. Meanwhile another actor edits random
/// labels, annotations and taints of random nodes a few times per second, and now and then removes
/// k8sm's own PreferNoSchedule taint from a marked node and wipes the policy's status. Every other
/// node finishes; nothing but those nodes (and the operator-only blockers of every test) is left;
/// no concurrent edit is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_executor_blocking_budgets_and_concurrent_edits_block_only_their_nodes() {
    const TEST: &str = "blocked";
    let mut rng = Rng::seeded(TEST);
    let hung = node_name(HUNG_NODE);
    let agent_args = [format!("--never-restart={hung}")];
    let mut fleet = Fleet::start(TEST, &agent_args, true).await;
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    fleet
        .scenario
        .start_controller(&[&format!("--metrics-addr={metrics_addr}")]);

    let stop = Arc::new(AtomicBool::new(false));
    let noise = tokio::spawn(noise(
        fleet.scenario.client.clone(),
        Rng(SplitMix64(rng.next())),
        stop.clone(),
    ));
    fleet.start_upgrade("20s").await;

    let mut stuck = fleet.operator_blockers();
    for node in [LEDGER_NODE, VAULT_NODE] {
        stuck.push(Stuck {
            node: node_name(node),
            policy: FLEET,
            // Its pods wait for the budget: it keeps its drain slot (a wait that may end by
            // itself).
            phases: &[NodePhase::Draining],
            pod_reasons: vec!["BlockedByPDB"],
            overdue: false,
        });
    }
    stuck.push(Stuck {
        node: hung.clone(),
        policy: FLEET,
        phases: &[NodePhase::KamikazeSent],
        pod_reasons: vec![],
        overdue: true,
    });
    let took = fleet.settle(&stuck).await;

    stop.store(true, Ordering::Relaxed);
    let noise = noise.await.expect("the noise actor ends");
    // Once the actor stops, the marked nodes that remain carry k8sm's taint again (the controller
    // restores it).
    let marked: Vec<String> = stuck.iter().map(|s| s.node.clone()).collect();
    fleet
        .wait_for(
            "the remaining marked nodes carry k8sm's taint",
            SETUP,
            || async {
                let nodes = fleet.nodes().await?;
                let missing: Vec<String> = nodes
                    .iter()
                    .filter(|n| marked.contains(&n.name_any()))
                    .filter(|n| !has_taint(n, keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY))
                    .map(ResourceExt::name_any)
                    .collect();
                missing
                    .is_empty()
                    .then_some(())
                    .ok_or(format!("missing on {missing:?}"))
            },
        )
        .await;
    // The settled state is stable: still exactly the same nodes once the noise stopped.
    fleet.settle(&stuck).await;

    // No concurrent edit was lost: every node carries what the actor last wrote.
    let nodes = fleet.nodes().await.expect("nodes");
    let by_name: HashMap<String, &Node> = nodes.iter().map(|n| (n.name_any(), n)).collect();
    for ((node, key), value) in &noise.labels {
        assert_eq!(
            by_name[node].labels().get(key),
            value.as_ref(),
            "label {key} of {node}: the actor's last write was lost"
        );
    }
    for ((node, key), value) in &noise.annotations {
        assert_eq!(
            by_name[node].annotations().get(key),
            value.as_ref(),
            "annotation {key} of {node}: the actor's last write was lost"
        );
    }
    for (node, present) in &noise.taints {
        assert_eq!(
            has_taint(by_name[node], NOISE_TAINT),
            *present,
            "taint {NOISE_TAINT} of {node}: the actor's last write was lost"
        );
    }

    // What blocks is reported: RestartOverdue on the hung node (Event + status), BlockedByPDB on
    // the budget's pods.
    let overdue = fleet.events_with("RestartOverdue").await;
    let (on_nodes, on_policies): (Vec<&Event>, Vec<&Event>) = overdue
        .iter()
        .partition(|e| regarding_kind(e).as_deref() == Some("Node"));
    let overdue_nodes: BTreeSet<String> =
        on_nodes.iter().filter_map(|e| regarding_name(e)).collect();
    assert_eq!(
        overdue_nodes,
        BTreeSet::from([hung.clone()]),
        "RestartOverdue Events name the hung node only"
    );
    let overdue_policies: BTreeSet<String> = on_policies
        .iter()
        .filter_map(|e| regarding_name(e))
        .collect();
    assert_eq!(
        overdue_policies,
        BTreeSet::from([FLEET.to_owned()]),
        "the fleet policy reports it too"
    );
    let status = fleet.scenario.policy(FLEET).await.status.expect("status");
    let degraded = status
        .conditions
        .iter()
        .find(|c| c.type_ == condition_types::DEGRADED)
        .expect("a Degraded condition");
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "RestartOverdue"),
        "{degraded:?}"
    );
    let pdb_events = fleet.events_with("BlockedByPDB").await;
    let pdb_evented: BTreeSet<String> = pdb_events.iter().filter_map(regarding_name).collect();
    let pdb_pods: BTreeSet<String> = fleet.pdb_pods.keys().cloned().collect();
    assert_eq!(
        pdb_evented, pdb_pods,
        "BlockedByPDB Events name exactly the budget's pods"
    );
    // The refusals (429) are vault's, and only vault's: k8sm never even tries ledger's pods.
    let refused: BTreeSet<String> = pdb_events
        .iter()
        .filter(|e| e.note.as_deref().unwrap_or_default().contains("refused"))
        .filter_map(regarding_name)
        .collect();
    let vault: BTreeSet<String> = pdb_pods
        .iter()
        .filter(|p| p.starts_with("vault-"))
        .cloned()
        .collect();
    assert_eq!(refused, vault, "the Eviction API refused vault's eviction");
    let status = fleet.scenario.policy(FLEET).await.status.expect("status");
    for pod in &pdb_pods {
        let entry = status.blocked_pods.iter().find(|p| &p.name == pod);
        assert_eq!(
            entry.map(|p| p.reason.as_str()),
            Some("BlockedByPDB"),
            "{pod} is listed in status.blockedPods as BlockedByPDB"
        );
    }
    let (_, metrics) = get(&metrics_addr, "/metrics").expect("metrics");
    // Whichever policy selects vault's node.
    let refusals_429: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("k8sm_actions_failed_total{") && l.contains("reason=\"BlockedByPDB\"")
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    assert!(
        refusals_429 >= 3.0,
        "vault's eviction keeps being refused (429), {refusals_429} times so far"
    );
    let evictions = fleet.count("Evicted").await;
    let budget_evicted: Vec<String> = fleet
        .events_with("Evicted")
        .await
        .iter()
        .filter_map(regarding_name)
        .filter(|name| pdb_pods.contains(name))
        .collect();
    assert!(
        budget_evicted.is_empty(),
        "no pod of the budgets was evicted: {budget_evicted:?}"
    );

    eprintln!(
        "[{TEST}] settled in {:.1}s with {} nodes left, exactly as expected: {}",
        took.as_secs_f64(),
        stuck.len(),
        stuck
            .iter()
            .map(|s| format!("{} ({})", s.node, s.describe()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    eprintln!(
        "[{TEST}] {} RestartOverdue Event(s) on {hung}; {} BlockedByPDB Event(s) on {} pods ({:?}); the Eviction \
         API refused vault's eviction {refusals_429} times (429); {evictions} evictions elsewhere",
        on_nodes.len(),
        pdb_events.iter().map(occurrences).sum::<u32>(),
        pdb_evented.len(),
        pdb_evented
    );
    eprintln!(
        "[{TEST}] concurrent actor: {} edits in {:.1}s ({:.1}/s): {} label, {} annotation, {} taint writes ({} lost \
         a 409 race and were dropped), {} removals of k8sm's taint, {} status wipes",
        noise.edits(),
        noise.ran.as_secs_f64(),
        noise.edits() as f64 / noise.ran.as_secs_f64().max(0.001),
        noise.label_writes,
        noise.annotation_writes,
        noise.taint_writes,
        noise.conflicts,
        noise.k8sm_taint_removals,
        noise.status_wipes
    );
    eprintln!(
        "[{TEST}] the controller restored its taint on a marked node {} times (Marked events beyond one per node)",
        fleet.count("Marked").await.saturating_sub(NODES)
    );
    fleet.assert_common(&stuck).await;
}

// ---------------------------------------------------------------------------------------------------------------
// The fleet: cluster, workloads, policies, and the checks every test makes
// ---------------------------------------------------------------------------------------------------------------

/// A node expected to remain in the upgrade at the end, and why.
#[derive(Debug, Clone)]
struct Stuck {
    node: String,
    policy: &'static str,
    phases: &'static [NodePhase],
    /// `status.blockedPods` holds a pod of this node with each of these reasons.
    pod_reasons: Vec<&'static str>,
    /// The node reports RestartOverdue.
    overdue: bool,
}

impl Stuck {
    fn describe(&self) -> String {
        let mut why: Vec<&str> = self.pod_reasons.clone();
        if self.overdue {
            why.push("RestartOverdue");
        }
        format!("{:?}: {}", self.phases, why.join("+"))
    }
}

struct Fleet {
    test: &'static str,
    scenario: Scenario,
    sla: SlaWatcher,
    /// Pods k8sm must never delete (opted out, or unmanaged under `Never`): name → uid.
    protected: BTreeMap<String, String>,
    /// Pods of the budget-blocked workload: name → node.
    pdb_pods: BTreeMap<String, String>,
    started: Option<(Instant, DateTime<Utc>)>,
    /// Cluster components that exited and were restarted.
    component_restarts: Vec<String>,
}

impl Fleet {
    /// A 50-node cluster with every workload running and ready (~160 pods), the SLA watcher armed
    /// (it checks every owner at every pod change), no controller yet.
    /// `K8SM_CHAOS_DIR=<dir>` keeps each test's cluster directory (component, controller and agent
    /// logs) there.
    async fn start(test: &'static str, agent_args: &[String], blocking_budgets: bool) -> Self {
        let begun = Instant::now();
        let options = ClusterOptions {
            nodes: NODES,
            pod_ready_delay: Duration::from_millis(200),
            // To look at the logs afterwards: K8SM_CHAOS_DIR=/some/dir keeps each test's cluster
            // files there.
            dir: std::env::var_os("K8SM_CHAOS_DIR").map(|d| std::path::Path::new(&d).join(test)),
            disabled_controllers: if blocking_budgets {
                vec!["disruption-controller".into()]
            } else {
                Vec::new()
            },
            ..ClusterOptions::default()
        };
        let scenario = Scenario::start_with_options(options, test, "1s", agent_args).await;
        let client = scenario.client.clone();
        let ns = test;
        let nodes: Api<Node> = Api::all(client.clone());
        for i in STRICT_FIRST..NODES {
            nodes
                .patch(
                    &node_name(i),
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "metadata": { "labels": { POOL_LABEL: STRICT } } })),
                )
                .await
                .expect("node labelled");
        }
        for (name, replicas) in DEPLOYMENTS {
            create(&client, &deployment(ns, name, replicas)).await;
        }
        create(&client, &stateful_set(ns, STATEFUL_SET.0, STATEFUL_SET.1)).await;
        create(&client, &daemon_set(ns, "logs")).await;
        for node in SCRATCH_NODES {
            let name = format!("scratch-{node}");
            create(&client, &unmanaged_pod(ns, &name, &node_name(node), &[])).await;
        }
        let opted_out = unmanaged_pod(
            ns,
            "keep-me",
            &node_name(OPTED_OUT_NODE),
            &[(keys::UPGRADE_OPT_OUT_LABEL, keys::UPGRADE_OPT_OUT_VALUE)],
        );
        create(&client, &opted_out).await;
        create(
            &client,
            &unmanaged_pod(ns, "debug-never", &node_name(NEVER_NODE), &[]),
        )
        .await;
        let mut expected = DEPLOYMENTS.iter().map(|(_, r)| *r as usize).sum::<usize>()
            + STATEFUL_SET.1 as usize
            + NODES
            + SCRATCH_NODES.len()
            + 2;
        if blocking_budgets {
            create(&client, &pinned(ns, "ledger", 2, LEDGER_NODE)).await;
            create(&client, &pinned(ns, "vault", 1, VAULT_NODE)).await;
            expected += 3;
        }
        let sla = SlaWatcher::start(client.clone(), ns, u32::from(THRESHOLD));
        let mut fleet = Self {
            test,
            scenario,
            sla,
            protected: BTreeMap::new(),
            pdb_pods: BTreeMap::new(),
            started: None,
            component_restarts: Vec::new(),
        };
        fleet
            .wait_for(&format!("{expected} pods are ready"), SETUP, || async {
                let ready = fleet.pods().await?.iter().filter(|p| is_ready(p)).count();
                (ready >= expected)
                    .then_some(())
                    .ok_or(format!("{ready} ready"))
            })
            .await;
        if blocking_budgets {
            // The test plays the (disabled) disruption controller. `ledger`: minAvailable 2 of 2,
            // processed, so no disruption allowed: k8sm waits for it. `vault`:
            // minAvailable 0 allowed one disruption; then it is tightened to 1, and
            // nothing processes the change, so its status still says 1 allowed (observed
            // generation 1 of 2). k8sm evicts on that word, and the Eviction API refuses with 429,
            // again and again.
            let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
            let min = |n| IntOrString::Int(n);
            create(&client, &pdb_min_available(ns, "ledger", "ledger", min(2))).await;
            create(&client, &pdb_min_available(ns, "vault", "vault", min(0))).await;
            for (name, allowed, healthy, desired) in [("ledger", 0, 2, 2), ("vault", 1, 1, 0)] {
                let status = json!({ "status": {
                    "observedGeneration": 1,
                    "disruptionsAllowed": allowed,
                    "currentHealthy": healthy,
                    "desiredHealthy": desired,
                    "expectedPods": healthy,
                } });
                pdbs.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
                    .await
                    .expect("budget status written");
            }
            let tightened = pdbs
                .patch(
                    "vault",
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "spec": { "minAvailable": 1 } })),
                )
                .await
                .expect("vault's budget tightened");
            let status = tightened.status.expect("a status");
            assert_eq!(
                (
                    tightened.metadata.generation,
                    status.observed_generation,
                    status.disruptions_allowed
                ),
                (Some(2), Some(1), Some(1)),
                "vault's budget status is stale"
            );
        }
        let pods = fleet.pods().await.expect("pods");
        for pod in &pods {
            let name = pod.name_any();
            if name == "keep-me" || name == "debug-never" {
                fleet.protected.insert(name, pod.uid().unwrap_or_default());
            } else if name.starts_with("ledger-") || name.starts_with("vault-") {
                let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
                fleet.pdb_pods.insert(name, node.expect("a scheduled pod"));
            }
        }
        assert_eq!(fleet.protected.len(), 2);
        fleet.sla.arm();
        eprintln!(
            "[{test}] {NODES}-node cluster with {} pods ready in {:.1}s",
            pods.len(),
            begun.elapsed().as_secs_f64()
        );
        fleet
    }

    /// Creates the two policies: `fleet` (nodes 0..44, unmanaged pods deleted, 20% at a time) and
    /// `strict` (nodes 45..49, unmanaged pods `Never`, one at a time).
    async fn start_upgrade(&mut self, restart_timeout: &str) {
        let spec = |selector: LabelSelector, max, unmanaged| ExecutorUpgradePolicySpec {
            target_executor_id: Some(self.scenario.new_id.clone()),
            node_selector: selector,
            max_concurrent_nodes: max,
            owner_health_threshold: THRESHOLD,
            unmanaged_pods: UnmanagedPods {
                policy: unmanaged,
                timeout: None,
            },
            restart_timeout: restart_timeout.parse().expect("a duration"),
            // `ledger` and `vault` are pinned only to place them: their budgets are what these
            // tests are about.
            workloads: Workloads {
                pinned_pods: PinnedPods::Evict,
                ..Workloads::default()
            },
            ..ExecutorUpgradePolicySpec::default()
        };
        let not_strict = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: POOL_LABEL.into(),
                operator: "NotIn".into(),
                values: Some(vec![STRICT.into()]),
            }]),
            ..LabelSelector::default()
        };
        let strict = LabelSelector {
            match_labels: Some(BTreeMap::from([(POOL_LABEL.into(), STRICT.into())])),
            ..LabelSelector::default()
        };
        self.started = Some((Instant::now(), Utc::now()));
        self.scenario
            .create_policy(
                FLEET,
                spec(
                    not_strict,
                    MaxConcurrentNodes::Percent(20),
                    UnmanagedPodPolicy::Delete,
                ),
            )
            .await;
        self.scenario
            .create_policy(
                STRICT,
                spec(
                    strict,
                    MaxConcurrentNodes::Count(1.try_into().expect("non-zero")),
                    UnmanagedPodPolicy::Never,
                ),
            )
            .await;
    }

    fn elapsed(&self) -> Duration {
        self.started.map(|(at, _)| at.elapsed()).unwrap_or_default()
    }

    fn started_at(&self) -> DateTime<Utc> {
        self.started.map(|(_, at)| at).unwrap_or_else(Utc::now)
    }

    /// What only an operator can resolve, in every test: the opted-out pod's node and the `Never`
    /// pod's node.
    fn operator_blockers(&self) -> Vec<Stuck> {
        vec![
            Stuck {
                node: node_name(OPTED_OUT_NODE),
                policy: FLEET,
                phases: &[NodePhase::Blocked],
                pod_reasons: vec!["BlockedOptOut"],
                overdue: false,
            },
            Stuck {
                node: node_name(NEVER_NODE),
                policy: STRICT,
                phases: &[NodePhase::Blocked],
                pod_reasons: vec!["BlockedUnmanagedPod"],
                overdue: false,
            },
        ]
    }

    /// Nodes that can finish, in a test where only the operator-only blockers stay.
    fn upgradable(&self) -> usize {
        NODES - self.operator_blockers().len()
    }

    /// Waits until every node but `stuck` is upgraded and both policies' status lists exactly
    /// `stuck`, each in its expected phase and with its expected reasons. Returns the time
    /// since the policies were created.
    async fn settle(&mut self, stuck: &[Stuck]) -> Duration {
        let what = "every node is upgraded but the expected ones, and the status says exactly that";
        let deadline = Instant::now() + UPGRADE;
        loop {
            self.supervise();
            let last = match self.settled(stuck).await {
                Ok(()) => return self.elapsed(),
                Err(why) => why,
            };
            if Instant::now() > deadline {
                self.timed_out(what, UPGRADE, &last);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until the number of upgraded nodes satisfies `done`, restarting cluster components
    /// that exit.
    async fn wait_upgraded_supervised(&mut self, what: &str, done: impl Fn(usize) -> bool) {
        let deadline = Instant::now() + UPGRADE;
        loop {
            self.supervise();
            let last = match self.upgraded().await {
                Ok(upgraded) if done(upgraded) => return,
                Ok(upgraded) => format!("{upgraded} upgraded"),
                Err(why) => why,
            };
            if Instant::now() > deadline {
                self.timed_out(what, UPGRADE, &last);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Restarts cluster components that exited (as kubelet or systemd would), and records it.
    fn supervise(&mut self) {
        let restarted = self
            .scenario
            .cluster
            .restart_exited()
            .expect("an exited component restarts");
        for name in restarted {
            eprintln!(
                "[{}] {name} exited at {:.1}s; restarted it",
                self.test,
                self.elapsed().as_secs_f64()
            );
            self.component_restarts.push(name);
        }
    }

    async fn settled(&self, stuck: &[Stuck]) -> Result<(), String> {
        // A controller that dies by itself fails the test at once (killed ones are no longer
        // checked).
        self.scenario
            .controllers
            .iter()
            .for_each(|c| c.assert_running());
        let nodes = self.nodes().await?;
        let pending: Vec<String> = nodes
            .iter()
            .filter(|n| !stuck.iter().any(|s| s.node == n.name_any()))
            .filter(|n| !is_upgraded(n, &self.scenario.new_id))
            .map(ResourceExt::name_any)
            .collect();
        if !pending.is_empty() {
            let pods = self.pods().await?;
            let unready: Vec<String> = pods
                .iter()
                .filter(|p| !is_ready(p))
                .map(|p| {
                    let phase = p.status.as_ref().and_then(|s| s.phase.clone());
                    let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                    format!("{} {phase:?} on {node:?}", p.name_any())
                })
                .collect();
            return Err(format!(
                "{} nodes not upgraded: {pending:?}; pods not ready: {unready:?}",
                pending.len()
            ));
        }
        let policies: Api<ExecutorUpgradePolicy> = Api::all(self.scenario.client.clone());
        for (policy, total) in [(FLEET, STRICT_FIRST), (STRICT, NODES - STRICT_FIRST)] {
            let status = policies
                .get(policy)
                .await
                .map_err(|e| e.to_string())?
                .status
                .ok_or(format!("{policy}: no status"))?;
            let expected: Vec<&Stuck> = stuck.iter().filter(|s| s.policy == policy).collect();
            let listed: BTreeSet<&str> = status.nodes.iter().map(|n| n.name.as_str()).collect();
            let wanted: BTreeSet<&str> = expected.iter().map(|s| s.node.as_str()).collect();
            if listed != wanted {
                return Err(format!(
                    "{policy}: status lists {listed:?}, expected {wanted:?}"
                ));
            }
            let upgraded = format!("{}/{total}", total - expected.len());
            if status.upgraded.as_deref() != Some(upgraded.as_str()) {
                return Err(format!("{policy}: upgraded {:?}", status.upgraded));
            }
            for s in expected {
                let node = status
                    .nodes
                    .iter()
                    .find(|n| n.name == s.node)
                    .expect("listed");
                if !s.phases.contains(&node.phase) {
                    return Err(format!("{}: phase {:?}", s.node, node.phase));
                }
                for reason in &s.pod_reasons {
                    if !status
                        .blocked_pods
                        .iter()
                        .any(|p| p.node == s.node && p.reason == *reason)
                    {
                        return Err(format!("{}: no blocked pod with {reason}", s.node));
                    }
                }
                if s.overdue && !node.blockers.iter().any(|b| b.contains("restartTimeout")) {
                    return Err(format!(
                        "{}: not reported overdue: {:?}",
                        s.node, node.blockers
                    ));
                }
            }
        }
        Ok(())
    }

    /// The checks of every test, once settled: the SLA held at every sample, the protected pods are
    /// the very same pods, the unmanaged pods under `Delete` are gone, and no pod was evicted
    /// or deleted twice.
    async fn assert_common(&self, stuck: &[Stuck]) {
        let test = self.test;
        assert_no_violations(&self.sla);
        let records = self.sla.records();
        let samples: u64 = records.iter().map(|r| r.samples).sum();
        let mut owners: Vec<String> = records
            .iter()
            .map(|r| {
                format!(
                    "{} {}/{} (bound {})",
                    r.name, r.min_ready, r.desired, r.bound
                )
            })
            .collect();
        owners.sort();
        eprintln!(
            "[{test}] SLA: 0 violations in {samples} owner samples; min ready per owner: {}",
            owners.join(", ")
        );

        let pods = self.pods().await.expect("pods");
        let uids: HashMap<String, String> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
            .collect();
        for (name, uid) in &self.protected {
            assert_eq!(
                uids.get(name),
                Some(uid),
                "{name} is the very pod that was there before the upgrade"
            );
        }
        for (name, node) in &self.pdb_pods {
            assert!(
                pods.iter().any(|p| &p.name_any() == name
                    && p.spec.as_ref().and_then(|s| s.node_name.as_ref()) == Some(node)),
                "{name} still runs on {node}"
            );
        }
        for node in SCRATCH_NODES {
            let name = format!("scratch-{node}");
            let on_stuck = stuck.iter().any(|s| s.node == node_name(node));
            assert!(
                on_stuck || !uids.contains_key(&name),
                "{name} was deleted (policy Delete)"
            );
        }

        let evicted = self.per_pod("Evicted").await;
        let twice: Vec<_> = evicted.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "pods evicted more than once: {twice:?}");
        let deleted = self.per_pod("DeletedUnmanagedPod").await;
        let twice: Vec<_> = deleted.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "pods deleted more than once: {twice:?}");
        for event in self.events_with("Evicted").await {
            let note = event.note.as_deref().unwrap_or_default();
            assert!(
                note.contains("ready"),
                "Evicted carries the SLA evidence: {note}"
            );
        }
        let protected: BTreeSet<&String> = self.protected.values().collect();
        for event in self.events_with("DeletedUnmanagedPod").await {
            let uid = event.regarding.and_then(|r| r.uid).unwrap_or_default();
            assert!(!protected.contains(&uid), "a protected pod was deleted");
        }
        eprintln!(
            "[{test}] {} pods evicted once each, {} unmanaged pods deleted once each, {} upgraded nodes; protected \
             pods intact: {:?}; cluster components restarted after exiting: {:?}",
            evicted.len(),
            deleted.len(),
            self.upgraded().await.unwrap_or_default(),
            self.protected.keys().collect::<Vec<_>>(),
            self.component_restarts
        );
    }

    // --- reads that tolerate a restarting apiserver
    // -------------------------------------------------------------

    async fn nodes(&self) -> Result<Vec<Node>, String> {
        Api::<Node>::all(self.scenario.client.clone())
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .map_err(|e| e.to_string())
    }

    async fn pods(&self) -> Result<Vec<Pod>, String> {
        Api::<Pod>::namespaced(self.scenario.client.clone(), &self.scenario.namespace)
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .map_err(|e| e.to_string())
    }

    async fn upgraded(&self) -> Result<usize, String> {
        let nodes = self.nodes().await?;
        Ok(nodes
            .iter()
            .filter(|n| is_upgraded(n, &self.scenario.new_id))
            .count())
    }

    async fn all_events(&self) -> Result<Vec<Event>, String> {
        Api::<Event>::all(self.scenario.client.clone())
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .map_err(|e| e.to_string())
    }

    async fn events_with(&self, reason: &str) -> Vec<Event> {
        self.all_events()
            .await
            .expect("Events")
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    }

    /// How many times Events with `reason` were recorded, counting repeats folded into an Event
    /// series.
    async fn count(&self, reason: &str) -> usize {
        self.all_events()
            .await
            .unwrap_or_default()
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .map(|e| occurrences(e) as usize)
            .sum()
    }

    /// Per pod UID, how many times `reason` was recorded about it (a repeat within one controller
    /// process is folded into the Event's series by the recorder, so series counts are added
    /// up).
    async fn per_pod(&self, reason: &str) -> HashMap<String, usize> {
        let mut per_pod = HashMap::new();
        for event in self.events_with(reason).await {
            let uid = event
                .regarding
                .as_ref()
                .and_then(|r| r.uid.clone())
                .unwrap_or_default();
            *per_pod.entry(uid).or_default() += occurrences(&event) as usize;
        }
        per_pod
    }

    /// Polls `check` every [`POLL`] until it succeeds; panics after `timeout` with its last answer
    /// and the logs.
    async fn wait_for<T, F, Fut>(&self, what: &str, timeout: Duration, check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, String>>,
    {
        let looked = poll(timeout, POLL, check).await;
        looked.unwrap_or_else(|last| self.timed_out(what, timeout, &last))
    }

    fn timed_out(&self, what: &str, timeout: Duration, last: &str) -> ! {
        let logs: Vec<String> = self
            .scenario
            .controllers
            .iter()
            .rev()
            .take(2)
            .map(|c| format!("--- {} ---\n{}", c.log.display(), c.log_tail(40)))
            .collect();
        panic!(
            "[{}] timed out after {timeout:?} waiting until {what}; last: {last}\n{}\n--- agent ---\n{}",
            self.test,
            logs.join("\n"),
            self.scenario.agent.log_tail(20)
        );
    }
}

/// A Deployment whose pods may only run on this node.
fn pinned(ns: &str, name: &str, replicas: i32, node: usize) -> Deployment {
    let mut d = deployment(ns, name, replicas);
    let pod = d
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .expect("a pod template");
    pod.affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "kubernetes.io/hostname".into(),
                        operator: "In".into(),
                        values: Some(vec![node_name(node)]),
                    }]),
                    ..NodeSelectorTerm::default()
                }],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    });
    d
}

fn regarding_name(event: &Event) -> Option<String> {
    event.regarding.as_ref().and_then(|r| r.name.clone())
}

fn regarding_kind(event: &Event) -> Option<String> {
    event.regarding.as_ref().and_then(|r| r.kind.clone())
}

fn has_taint(node: &Node, key: &str) -> bool {
    taints(node).iter().any(|t| t.key == key)
}

// ---------------------------------------------------------------------------------------------------------------
// The other actor
// ---------------------------------------------------------------------------------------------------------------

const NOISE_PREFIX: &str = "noise.chaos.k8sm.test";
const NOISE_TAINT: &str = "noise.chaos.k8sm.test/taint";

/// What the concurrent actor did, and the last value it wrote for each key (None: removed).
#[derive(Default)]
struct Noise {
    labels: BTreeMap<(String, String), Option<String>>,
    annotations: BTreeMap<(String, String), Option<String>>,
    taints: BTreeMap<String, bool>,
    label_writes: usize,
    annotation_writes: usize,
    taint_writes: usize,
    conflicts: usize,
    k8sm_taint_removals: usize,
    status_wipes: usize,
    ran: Duration,
}

impl Noise {
    fn edits(&self) -> usize {
        self.label_writes
            + self.annotation_writes
            + self.taint_writes
            + self.k8sm_taint_removals
            + self.status_wipes
    }
}

/// Edits random nodes about 4 times per second until `stop`: unrelated labels and annotations
/// (merge patches, as kubectl label/annotate do), an unrelated taint (read-modify-write with the
/// resourceVersion, as kubectl taint does), and, now and then, k8sm's own non-critical state: its
/// PreferNoSchedule taint on a marked node, and the policy's status (a report the controller
/// re-derives).
async fn noise(client: Client, mut rng: Rng, stop: Arc<AtomicBool>) -> Noise {
    let nodes: Api<Node> = Api::all(client.clone());
    let policies: Api<ExecutorUpgradePolicy> = Api::all(client);
    let mut done = Noise::default();
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(rng.millis(100, 400)).await;
        let node = node_name(rng.below(NODES as u64) as usize);
        let choice = rng.below(100);
        let value = (rng.below(4) > 0).then(|| format!("v{}", rng.below(1000)));
        match choice {
            0..40 => {
                let key = format!("{NOISE_PREFIX}/l{}", rng.below(4));
                let patch = json!({ "metadata": { "labels": { &key: value } } });
                if nodes
                    .patch(&node, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .is_ok()
                {
                    done.labels.insert((node, key), value);
                    done.label_writes += 1;
                }
            }
            40..80 => {
                let key = format!("{NOISE_PREFIX}/a{}", rng.below(4));
                let patch = json!({ "metadata": { "annotations": { &key: value } } });
                if nodes
                    .patch(&node, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .is_ok()
                {
                    done.annotations.insert((node, key), value);
                    done.annotation_writes += 1;
                }
            }
            80..97 => {
                let ours = choice < 93;
                let Ok(current) = nodes.get(&node).await else {
                    continue;
                };
                let mut taints: Vec<Taint> = taints(&current);
                let present = has_taint(&current, NOISE_TAINT);
                if ours {
                    if present {
                        taints.retain(|t| t.key != NOISE_TAINT);
                    } else {
                        taints.push(Taint {
                            key: NOISE_TAINT.into(),
                            value: Some("x".into()),
                            effect: "PreferNoSchedule".into(),
                            ..Taint::default()
                        });
                    }
                } else if has_taint(&current, keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY) {
                    taints.retain(|t| t.key != keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY);
                } else {
                    continue;
                }
                let patch = json!({
                    "metadata": { "resourceVersion": current.resource_version() },
                    "spec": { "taints": taints },
                });
                match nodes
                    .patch(&node, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                {
                    Ok(_) if ours => {
                        done.taints.insert(node, !present);
                        done.taint_writes += 1;
                    }
                    Ok(_) => done.k8sm_taint_removals += 1,
                    Err(_) => done.conflicts += 1,
                }
            }
            _ => {
                let patch = json!({ "status": null });
                if policies
                    .patch_status(FLEET, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .is_ok()
                {
                    done.status_wipes += 1;
                }
            }
        }
    }
    done.ran = started.elapsed();
    done
}

/// A small seeded RNG (SplitMix64): the faults are random within bounds, and a seed replays them.
/// The outcome must not depend on the seed.
struct Rng(SplitMix64);

impl Rng {
    /// Seeded from `CHAOS_SEED`, or from the clock; the seed is printed either way.
    fn seeded(test: &str) -> Self {
        let seed = std::env::var("CHAOS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(7)
            });
        eprintln!("[{test}] chaos seed {seed} (replay with CHAOS_SEED={seed})");
        Self(SplitMix64(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.below(high - low + 1))
    }
}
