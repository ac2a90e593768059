//! Workloads as production clusters run them (DESIGN.md §2, §5.2, §5.3), each test on its own small cluster with the
//! SLA watcher armed before the controller starts:
//!
//! - a Deployment whose rollout is stuck is judged over all its ReplicaSets, so its node waits, stalls after
//!   `nodeProgressDeadline` and gives up its only drain slot; the rest of the fleet goes on, and after
//!   `kubectl rollout undo` the upgrade completes;
//! - pods of a custom resource's operator are never deleted directly: under a budget that allows no disruption they
//!   stay, reported `BlockedByPDB`, while the other nodes finish; otherwise they go through the Eviction API one at a
//!   time, even when their operator is slow to replace them;
//! - a pod that is not Ready moves, costing no readiness, and its node finishes.
//!
//! Each test prints, per workload, the fewest Ready pods seen against the bound `min(ceil(t·d), d−1)` computed from the
//! workload the test created.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use k8sm_api::{
    DurationString, ExecutorUpgradePolicySpec, MaxConcurrentNodes, NodePhase, NodeStatus,
    UnmanagedPodPolicy, UnmanagedPods, keys,
};
use k8sm_e2e::deletions::DeletionLog;
use k8sm_e2e::kubectl_ok;
use k8sm_e2e::plugin::k8sm_ok;
use k8sm_e2e::podset;
use k8sm_e2e::scenario::{Scenario, is_ready, is_upgraded};
use k8sm_e2e::sla::{SlaWatcher, bound};
use k8sm_e2e::workloads::{create, deployment, pdb_min_available, unmanaged_pod};
use k8sm_testcluster::node_name;

const POLICY: &str = "fleet";
const THRESHOLD: u8 = 90;
/// Short, so that stalls happen within a test; long enough that a node that moves pods never stalls.
const NODE_PROGRESS_DEADLINE: &str = "20s";
/// Generous deadlines: the clusters of this file run two at a time on small machines.
const SETUP: Duration = Duration::from_secs(120);
const PROGRESS: Duration = Duration::from_secs(300);

// ---------------------------------------------------------------------------------------------------------------
// A Deployment whose rollout is stuck
// ---------------------------------------------------------------------------------------------------------------

/// A Deployment of 4 mid-rollout, stuck: its old ReplicaSet has 3 Ready pods, its new one 2 pods that no node can
/// take. Its bound at threshold 90 is 3, and it has 3: none of its pods may go, although the old ReplicaSet alone
/// looks fully ready (3 of 3). Its node is admitted first into the only drain slot, waits on the Deployment, stalls
/// after `nodeProgressDeadline`, gives the slot up (uncordoned, `Stalled`, Blocked) and every other node is upgraded
/// meanwhile. After `kubectl rollout undo` the Deployment recovers and the upgrade completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_rollout_keeps_its_deployment_at_its_bound_and_holds_no_other_node() {
    const NS: &str = "stuck-rollout";
    const REPLICAS: u32 = 4;
    let mut scenario = Scenario::start(5, NS, "1s").await;
    let client = scenario.client.clone();
    let stuck = node_name(0);
    let others: Vec<String> = (1..5).map(node_name).collect();
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));

    // Every web pod on the node that gets stuck; a surge of 1 and 1 unavailable, so that the rollout takes one old
    // pod away and leaves two new ones pending.
    let mut web = deployment(NS, "web", REPLICAS as i32);
    if let Some(spec) = web.spec.as_mut() {
        spec.strategy = Some(DeploymentStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDeployment {
                max_surge: Some(IntOrString::Int(1)),
                max_unavailable: Some(IntOrString::Int(1)),
            }),
        });
    }
    pin_to(&scenario, &stuck, REPLICAS as usize, || async {
        create(&client, &web).await;
    })
    .await;
    // Unmanaged pods on every other node, more than the 3 web pods that stay on the stuck node: the stuck node is
    // the easiest and is admitted first, so only its stall can let the others go.
    fill_other_nodes(&scenario, &others, 4).await;
    wait_ready(&scenario, REPLICAS as usize + 4 * others.len()).await;

    // The rollout to a template that no node can run.
    Api::<Deployment>::namespaced(client.clone(), NS)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "template": { "spec": {
                "nodeSelector": { "k8sm.test/pool": "nowhere" } } } } })),
        )
        .await
        .expect("rollout started");
    let stuck_pods: BTreeSet<String> = scenario
        .wait_until(
            "the rollout is stuck: 3 old pods Ready, 2 new ones pending",
            SETUP,
            || async {
                let pods = app_pods(&scenario, "web").await;
                let ready: BTreeSet<String> = pods
                    .iter()
                    .filter(|p| is_ready(p) && node_of(p) == Some(stuck.as_str()))
                    .map(ResourceExt::name_any)
                    .collect();
                let pending = pods.iter().filter(|p| node_of(p).is_none()).count();
                let settled = pods.len() == 5 && ready.len() == 3 && pending == 2;
                settled.then_some(ready)
            },
        )
        .await;
    sla.arm();
    scenario
        .wait_until("the SLA watcher sees 3 web pods Ready", SETUP, || async {
            (sla.ready("Deployment", "web") == 3).then_some(())
        })
        .await;

    scenario.start_controller(&[]);
    scenario
        .create_policy(
            POLICY,
            spec(&scenario, 1, THRESHOLD, UnmanagedPodPolicy::Delete),
        )
        .await;
    // Admitted first, it waits on the Deployment (not on its ReplicaSet), as Events and `blocked` say.
    let waiting = scenario
        .wait_until(
            &format!("a web pod on {stuck} waits for its Deployment"),
            PROGRESS,
            || async {
                let events = scenario.events("WaitingForOwner").await;
                events.into_iter().find(|e| regards_one_of(e, &stuck_pods))
            },
        )
        .await;
    let note = waiting.note.clone().unwrap_or_default();
    assert!(
        note.contains("workload Deployment web 3/4 ready, needs 4"),
        "judged as the Deployment: {note}"
    );
    for other in &others {
        assert!(
            events_about(&scenario, "Cordoned", other).await.is_empty()
                && !cordoned(&scenario, other).await,
            "{stuck} took the only slot first, before {other}"
        );
    }
    let blocked = k8sm_ok(&scenario.cluster, &["blocked", "-o", "json"]);
    let rows = blocked_rows(&blocked);
    for pod in &stuck_pods {
        assert!(
            rows.contains(&(
                stuck.clone(),
                pod.clone(),
                "WaitingForOwner".into(),
                Some("Deployment/web".into()),
                "owned".into(),
            )),
            "`kubectl k8sm blocked` lists {pod} waiting for Deployment/web: {rows:?}"
        );
    }

    // No progress for the deadline: it stalls, gives its slot up, and the other nodes are upgraded meanwhile while
    // every web pod stays where it is.
    let web_untouched = || async {
        let here: BTreeSet<String> = app_pods(&scenario, "web")
            .await
            .iter()
            .filter(|p| is_ready(p) && p.metadata.deletion_timestamp.is_none())
            .map(ResourceExt::name_any)
            .collect();
        assert_eq!(
            here, stuck_pods,
            "no web pod moved while the rollout is stuck"
        );
        assert!(
            scenario
                .events("Evicted")
                .await
                .iter()
                .all(|e| !regards_one_of(e, &stuck_pods)),
            "no web pod evicted while the rollout is stuck"
        );
    };
    let stall = scenario
        .wait_until(
            &format!("{stuck} stalls: Blocked, uncordoned, a Stalled Warning"),
            PROGRESS,
            || async {
                web_untouched().await;
                let status = node_status(&scenario, &stuck).await?;
                let stalled = events_about(&scenario, "Stalled", &stuck).await;
                let uncordoned = !cordoned(&scenario, &stuck).await;
                (status.phase == NodePhase::Blocked && uncordoned && !stalled.is_empty())
                    .then(|| (status, stalled[0].clone()))
            },
        )
        .await;
    let (status, stalled) = stall;
    assert_eq!(stalled.type_.as_deref(), Some("Warning"));
    let stall_note = stalled.note.clone().unwrap_or_default();
    assert!(
        stall_note.contains("no pod left the node since")
            && stall_note.contains("Deployment web 3/4 ready"),
        "the Stalled Event says since when and on what it waits: {stall_note}"
    );
    // The stall pass and the passes after it word the stall differently; both say that no pod left.
    assert!(
        status
            .blockers
            .first()
            .is_some_and(|b| b.contains("no pod left")),
        "the status reports the stall first: {:?}",
        status.blockers
    );
    assert!(
        status
            .blockers
            .iter()
            .any(|b| b.contains("Deployment web 3/4 ready")),
        "the status says what the node waits on: {:?}",
        status.blockers
    );
    // Until the other nodes are served, it stays Blocked; once admitted again it stalls again: wait for a view of it
    // Blocked rather than race its next admission.
    let upgrade_status = scenario
        .wait_until(
            &format!("`kubectl k8sm upgrade status` shows {stuck} Blocked"),
            PROGRESS,
            || async {
                let text = k8sm_ok(&scenario.cluster, &["upgrade", "status"]);
                text.lines()
                    .any(|l| {
                        l.starts_with(&stuck) && l.contains("Blocked") && l.contains("stalled")
                    })
                    .then_some(text)
            },
        )
        .await;
    println!("kubectl k8sm upgrade status, {stuck} stalled:\n{upgrade_status}");

    // Nothing holds the fleet: the 4 other nodes are upgraded, and the stuck node is admitted again behind them.
    scenario
        .wait_until(
            &format!("the other nodes are upgraded and {stuck} is admitted again"),
            PROGRESS,
            || async {
                web_untouched().await;
                let upgraded = scenario
                    .nodes()
                    .await
                    .iter()
                    .filter(|n| is_upgraded(n, &scenario.new_id))
                    .map(ResourceExt::name_any)
                    .collect::<BTreeSet<_>>();
                // The Events API counts a repeated Event in its series.
                let admissions: u32 = events_about(&scenario, "Cordoned", &stuck)
                    .await
                    .iter()
                    .map(occurrences)
                    .sum();
                let again = admissions >= 2;
                (upgraded == others.iter().cloned().collect() && again).then_some(())
            },
        )
        .await;
    assert_eq!(
        sla.ready("Deployment", "web"),
        3,
        "the Deployment kept 3 Ready"
    );

    // The operator rolls back: the Deployment is whole again, its pods move one at a time, and the upgrade ends.
    kubectl_ok(
        &scenario.cluster,
        &["rollout", "undo", "deployment/web", "-n", NS],
    );
    wait_all_upgraded(&scenario, 5).await;
    for pod in &stuck_pods {
        let evicted = events_about(&scenario, "Evicted", pod).await;
        assert_eq!(evicted.len(), 1, "{pod} evicted once, after the rollback");
        let note = evicted[0].note.as_deref().unwrap_or_default();
        assert!(
            note.contains("workload Deployment web"),
            "{pod} judged as the Deployment: {note}"
        );
    }
    assert_sla(&sla, &[("Deployment", "web", REPLICAS)]);
}

// ---------------------------------------------------------------------------------------------------------------
// Pods of a custom resource
// ---------------------------------------------------------------------------------------------------------------

/// Pods of a `PodSet` custom resource under a PodDisruptionBudget that allows no disruption, with
/// `unmanagedPods.policy: Delete` and `respectPodDisruptionBudgets: false`: k8sm evicts another controller's pods
/// through the Eviction API whatever that flag says, so they are never deleted. They are reported `BlockedByPDB`,
/// their node stalls and gives up the only slot, the other nodes finish, and the node's unmanaged pod waits for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_pods_under_a_budget_allowing_no_disruption_are_never_deleted() {
    const NS: &str = "podset-pdb";
    const REPLICAS: u32 = 3;
    let mut scenario = Scenario::start(4, NS, "1s").await;
    let client = scenario.client.clone();
    let held = node_name(0);
    let others: Vec<String> = (1..4).map(node_name).collect();
    podset::install_crd(&client).await;
    let uid = podset::create(&client, NS, "cache", REPLICAS).await;
    let operator = pin_to(&scenario, &held, REPLICAS as usize, || async {
        podset::Operator::start(&client, NS, "cache", &uid, REPLICAS, Duration::ZERO)
    })
    .await;
    create(&client, &unmanaged_pod(NS, "scratch", &held, &[])).await;
    let scratch_uid = pod(&scenario, "scratch").await.and_then(|p| p.uid());
    fill_other_nodes(&scenario, &others, 5).await;
    wait_ready(&scenario, REPLICAS as usize + 1 + 5 * others.len()).await;
    let members: BTreeSet<String> = app_pods(&scenario, "cache")
        .await
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(members.len(), REPLICAS as usize);
    create(
        &client,
        &pdb_min_available(NS, "cache", "cache", IntOrString::Int(REPLICAS as i32)),
    )
    .await;
    wait_budget(&scenario, "cache", REPLICAS, 0).await;

    let deletions = DeletionLog::start(&client, NS, "app=cache");
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    sla.expect(podset::KIND, "cache", REPLICAS);
    scenario
        .wait_until("the deletion log has listed", SETUP, || async {
            deletions.synced().then_some(())
        })
        .await;
    sla.arm();

    scenario.start_controller(&[]);
    let mut spec = spec(&scenario, 1, THRESHOLD, UnmanagedPodPolicy::Delete);
    spec.respect_pod_disruption_budgets = false;
    scenario.create_policy(POLICY, spec).await;
    let never_touched = || async {
        assert_eq!(
            deletions.deleted(),
            vec![],
            "no pod of the PodSet was deleted or evicted"
        );
        let scratch = pod(&scenario, "scratch").await;
        assert!(
            scratch
                .as_ref()
                .is_some_and(|p| p.uid() == scratch_uid && p.metadata.deletion_timestamp.is_none()),
            "the unmanaged pod of {held} waits for the PodSet's pods"
        );
    };
    scenario
        .wait_until(
            &format!("{held} reports BlockedByPDB, stalls, and the other nodes are upgraded"),
            PROGRESS,
            || async {
                never_touched().await;
                let reported = scenario
                    .events("BlockedByPDB")
                    .await
                    .iter()
                    .any(|e| regards_one_of(e, &members));
                let stalled = !events_about(&scenario, "Stalled", &held).await.is_empty();
                let upgraded = scenario.upgraded_nodes().await == others.len();
                (reported && stalled && upgraded).then_some(())
            },
        )
        .await;
    observe_for(Duration::from_secs(5), never_touched).await;

    // What the operator sees: the status and `kubectl k8sm blocked` name the budget and the PodSet.
    let status = scenario.policy(POLICY).await.status.expect("status");
    assert_eq!(status.counts.compatible, others.len() as u32);
    for member in &members {
        let entry = status
            .blocked_pods
            .iter()
            .find(|p| p.name == *member)
            .unwrap_or_else(|| {
                panic!(
                    "status.blockedPods lists {member}: {:?}",
                    status.blocked_pods
                )
            });
        assert_eq!(
            (
                entry.node.as_str(),
                entry.reason.as_str(),
                entry.owner.as_deref()
            ),
            (held.as_str(), "BlockedByPDB", Some("PodSet/cache")),
            "{entry:?}"
        );
        assert!(
            entry
                .message
                .contains("PodDisruptionBudget podset-pdb/cache"),
            "{entry:?}"
        );
    }
    let rows = blocked_rows(&k8sm_ok(&scenario.cluster, &["blocked", "-o", "json"]));
    for member in &members {
        assert!(
            rows.contains(&(
                held.clone(),
                member.clone(),
                "BlockedByPDB".into(),
                Some("PodSet/cache".into()),
                "otherController".into(),
            )),
            "`kubectl k8sm blocked` lists {member} blocked by the budget, as another controller's pod: {rows:?}"
        );
    }
    let table = k8sm_ok(&scenario.cluster, &["blocked", "-n", NS]);
    println!("kubectl k8sm blocked -n {NS}:\n{table}");
    for reason in ["Evicted", "DeletedUnmanagedPod"] {
        let about: Vec<String> = scenario
            .events(reason)
            .await
            .iter()
            .filter(|e| regards_one_of(e, &members) || regards(e, "scratch"))
            .filter_map(|e| e.note.clone())
            .collect();
        assert!(
            about.is_empty(),
            "{reason} Events about the PodSet or scratch: {about:?}"
        );
    }
    assert_eq!(
        operator.created().len(),
        REPLICAS as usize,
        "the operator never had to replace a pod"
    );
    assert_sla(&sla, &[(podset::KIND, "cache", REPLICAS)]);
    let record = sla
        .records()
        .into_iter()
        .find(|r| r.name == "cache")
        .expect("judged");
    assert_eq!(
        record.min_ready, REPLICAS,
        "the budget allowed no disruption"
    );
}

/// Pods of two `PodSet`s on one node: `cache` under a budget that allows one disruption, `ledger` without a budget
/// and with an operator that takes 3 s to replace a pod. Both move one at a time, through the Eviction API (never a
/// plain DELETE, although unmanaged pods are deleted under this policy): `d` counts the evictions not yet replaced,
/// so a pod gone and not yet replaced still counts as missing. The `Evicted` Events name the PodSet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_pods_move_one_at_a_time_through_the_eviction_api() {
    const NS: &str = "podset-move";
    const REPLICAS: u32 = 3;
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let client = scenario.client.clone();
    let node = node_name(0);
    podset::install_crd(&client).await;
    let mut operators = Vec::new();
    for (name, replace_after) in [
        ("cache", Duration::ZERO),
        ("ledger", Duration::from_secs(3)),
    ] {
        let uid = podset::create(&client, NS, name, REPLICAS).await;
        let ready = (operators.len() + 1) * REPLICAS as usize;
        let operator = pin_to(&scenario, &node, ready, || async {
            podset::Operator::start(&client, NS, name, &uid, REPLICAS, replace_after)
        })
        .await;
        operators.push(operator);
    }
    create(
        &client,
        &pdb_min_available(NS, "cache", "cache", IntOrString::Int(REPLICAS as i32 - 1)),
    )
    .await;
    wait_budget(&scenario, "cache", REPLICAS, 1).await;
    let mut first: BTreeSet<String> = BTreeSet::new();
    for app in ["cache", "ledger"] {
        first.extend(
            app_pods(&scenario, app)
                .await
                .iter()
                .map(ResourceExt::name_any),
        );
    }
    assert_eq!(first.len(), 2 * REPLICAS as usize, "{first:?}");

    let deletions = DeletionLog::start(&client, NS, "app in (cache,ledger)");
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    for name in ["cache", "ledger"] {
        sla.expect(podset::KIND, name, REPLICAS);
    }
    scenario
        .wait_until("the deletion log has listed", SETUP, || async {
            deletions.synced().then_some(())
        })
        .await;
    sla.arm();

    scenario.start_controller(&[]);
    scenario
        .create_policy(
            POLICY,
            spec(&scenario, 1, THRESHOLD, UnmanagedPodPolicy::Delete),
        )
        .await;
    wait_all_upgraded(&scenario, 3).await;

    let deleted = deletions.deleted();
    let gone: BTreeSet<String> = deleted.iter().map(|d| d.name.clone()).collect();
    assert!(
        first.is_subset(&gone),
        "every first pod of the PodSets left {node}: left {:?}",
        first.difference(&gone).collect::<Vec<_>>()
    );
    for deletion in &deleted {
        assert!(
            deletion.evicted,
            "{} was deleted without the Eviction API: {deletion:?}",
            deletion.name
        );
    }
    for pod in &first {
        let evicted = events_about(&scenario, "Evicted", pod).await;
        assert_eq!(evicted.len(), 1, "{pod} evicted once");
        let app = pod.rsplit_once('-').map_or("", |(app, _)| app);
        let note = evicted[0].note.as_deref().unwrap_or_default();
        assert!(
            note.contains(&format!("{} {app}", podset::KIND)),
            "the Evicted Event of {pod} names PodSet {app}: {note}"
        );
        assert!(
            events_about(&scenario, "DeletedUnmanagedPod", pod)
                .await
                .is_empty(),
            "{pod} is no unmanaged pod"
        );
    }
    for (operator, name) in operators.iter().zip(["cache", "ledger"]) {
        println!(
            "PodSet {name}: the operator created {:?}",
            operator.created()
        );
    }
    assert_sla(
        &sla,
        &[
            (podset::KIND, "cache", REPLICAS),
            (podset::KIND, "ledger", REPLICAS),
        ],
    );
}

// ---------------------------------------------------------------------------------------------------------------
// A pod that is not Ready
// ---------------------------------------------------------------------------------------------------------------

/// A Deployment of 5 at threshold 90 (bound 4) whose pods all run on one node, one of them not Ready: 4 Ready, so no
/// Ready pod may go, but the one that is not Ready may, costing nothing. It is evicted first, the Deployment is whole
/// again, the others follow one at a time, and the node finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_made_not_ready_moves_and_its_node_finishes() {
    const NS: &str = "not-ready";
    const REPLICAS: u32 = 5;
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let client = scenario.client.clone();
    let node = node_name(0);
    pin_to(&scenario, &node, REPLICAS as usize, || async {
        create(&client, &deployment(NS, "web", REPLICAS as i32)).await;
    })
    .await;
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    let pods = app_pods(&scenario, "web").await;
    let sick = pods.first().expect("a web pod").name_any();

    // As a failing readiness probe would: the Ready condition False. KWOK leaves a Running pod's status alone.
    Api::<Pod>::namespaced(client.clone(), NS)
        .patch_status(
            &sick,
            &PatchParams::default(),
            &Patch::Strategic(json!({ "status": { "conditions": [
                { "type": "Ready", "status": "False", "reason": "ReadinessProbeFailed" },
                { "type": "ContainersReady", "status": "False", "reason": "ReadinessProbeFailed" },
            ] } })),
        )
        .await
        .expect("the pod's status is patched");
    scenario
        .wait_until(&format!("{sick} is not Ready"), SETUP, || async {
            (sla.ready("Deployment", "web") == REPLICAS - 1).then_some(())
        })
        .await;
    observe_for(Duration::from_secs(3), || async {
        let pod = pod(&scenario, &sick).await.expect("the sick pod");
        assert!(!is_ready(&pod), "{sick} stays not Ready");
    })
    .await;
    sla.arm();

    scenario.start_controller(&[]);
    scenario
        .create_policy(
            POLICY,
            spec(&scenario, 1, THRESHOLD, UnmanagedPodPolicy::Never),
        )
        .await;
    wait_all_upgraded(&scenario, 3).await;

    let evicted = scenario.events("Evicted").await;
    let sick_evicted: Vec<&Event> = evicted.iter().filter(|e| regards(e, &sick)).collect();
    assert_eq!(sick_evicted.len(), 1, "{sick} evicted once");
    let note = sick_evicted[0].note.as_deref().unwrap_or_default();
    assert!(
        note.contains("pod not Ready") && note.contains("Deployment web keeps 4/5 ready"),
        "moving it cost no readiness: {note}"
    );
    let first_at = event_time(sick_evicted[0]);
    for other in pods
        .iter()
        .map(ResourceExt::name_any)
        .filter(|p| *p != sick)
    {
        let events = events_about(&scenario, "Evicted", &other).await;
        assert_eq!(events.len(), 1, "{other} evicted once");
        assert!(
            event_time(&events[0]) > first_at,
            "{other} was evicted before the pod that is not Ready"
        );
        let note = events[0].note.as_deref().unwrap_or_default();
        assert!(
            note.contains("Deployment web ready 5/5"),
            "a Ready pod goes only once the Deployment is whole: {note}"
        );
    }
    assert_sla(&sla, &[("Deployment", "web", REPLICAS)]);
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

/// A policy with a target, `slots` drain slots, a threshold, an unmanaged-pod policy and a short progress deadline.
fn spec(
    scenario: &Scenario,
    slots: u32,
    threshold: u8,
    unmanaged: UnmanagedPodPolicy,
) -> ExecutorUpgradePolicySpec {
    ExecutorUpgradePolicySpec {
        target_executor_id: Some(scenario.new_id.clone()),
        max_concurrent_nodes: MaxConcurrentNodes::count(slots).expect("at least one slot"),
        owner_health_threshold: threshold,
        unmanaged_pods: UnmanagedPods {
            policy: unmanaged,
            timeout: None,
        },
        node_progress_deadline: NODE_PROGRESS_DEADLINE
            .parse::<DurationString>()
            .expect("a duration"),
        ..ExecutorUpgradePolicySpec::default()
    }
}

/// Zero SLA violations, and for each workload `(kind, name, d)` the test created: a record, whose fewest Ready pods
/// stayed at or above the bound computed from `d` and the threshold. Prints each against its bound.
fn assert_sla(sla: &SlaWatcher, workloads: &[(&str, &str, u32)]) {
    let records = sla.records();
    for record in &records {
        println!(
            "SLA: {} {}: desired {}, min ready {} (bound {}), {} samples",
            record.kind,
            record.name,
            record.desired,
            record.min_ready,
            record.bound,
            record.samples
        );
    }
    let violations = sla.violations();
    assert!(
        violations.is_empty(),
        "SLA violations:\n{}",
        violations.join("\n")
    );
    for (kind, name, desired) in workloads {
        let floor = bound(*desired, u32::from(THRESHOLD));
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
    }
}

/// Runs `start` while only `node` is schedulable, waits until `ready` pods of the namespace are ready, and makes
/// every node schedulable again.
async fn pin_to<T, F, Fut>(scenario: &Scenario, node: &str, ready: usize, start: F) -> T
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let others: Vec<String> = scenario
        .nodes()
        .await
        .iter()
        .map(ResourceExt::name_any)
        .filter(|n| n != node)
        .collect();
    for other in &others {
        patch_node(
            scenario,
            other,
            json!({ "spec": { "unschedulable": true } }),
        )
        .await;
    }
    let started = start().await;
    wait_ready(scenario, ready).await;
    for other in &others {
        patch_node(
            scenario,
            other,
            json!({ "spec": { "unschedulable": null } }),
        )
        .await;
    }
    started
}

/// `per_node` unmanaged pods on each of `nodes`.
async fn fill_other_nodes(scenario: &Scenario, nodes: &[String], per_node: usize) {
    for node in nodes {
        for i in 0..per_node {
            let name = format!("filler-{node}-{i}");
            create(
                &scenario.client,
                &unmanaged_pod(&scenario.namespace, &name, node, &[]),
            )
            .await;
        }
    }
}

async fn wait_ready(scenario: &Scenario, count: usize) {
    scenario
        .wait_until(&format!("{count} pods are ready"), SETUP, || async {
            (scenario.ready_pods().await >= count).then_some(())
        })
        .await;
}

/// Waits until the budget `name` has seen `healthy` pods and allows `allowed` disruptions.
async fn wait_budget(scenario: &Scenario, name: &str, healthy: u32, allowed: i32) {
    let pdbs: Api<PodDisruptionBudget> =
        Api::namespaced(scenario.client.clone(), &scenario.namespace);
    scenario
        .wait_until(
            &format!("the budget {name} allows {allowed} disruptions"),
            SETUP,
            || async {
                let pdb = pdbs.get(name).await.ok()?;
                let generation = pdb.metadata.generation;
                let status = pdb.status?;
                (status.observed_generation == generation
                    && status.current_healthy == i32::try_from(healthy).ok()
                    && status.disruptions_allowed == Some(allowed))
                .then_some(())
            },
        )
        .await;
}

/// Waits until every one of the `total` nodes runs the new executor and carries none of k8sm's keys, and the
/// status says so.
async fn wait_all_upgraded(scenario: &Scenario, total: usize) {
    scenario
        .wait_until(
            &format!("all {total} nodes are upgraded and clean"),
            PROGRESS,
            || async {
                scenario.controllers[0].assert_running();
                let nodes = scenario.nodes().await;
                let clean = nodes
                    .iter()
                    .filter(|n| is_upgraded(n, &scenario.new_id) && !has_k8sm_state(n))
                    .count();
                (clean == total).then_some(())
            },
        )
        .await;
    let expected = format!("{total}/{total}");
    scenario
        .wait_until(
            &format!("the status reports {expected}"),
            Duration::from_secs(60),
            || async {
                let status = scenario.policy(POLICY).await.status?;
                (status.upgraded.as_deref() == Some(expected.as_str())
                    && status.nodes.is_empty()
                    && status.blocked_pods.is_empty())
                .then_some(())
            },
        )
        .await;
}

/// Calls `check` (which panics on a violation) every 250 ms for `duration`.
async fn observe_for<F, Fut>(duration: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let end = Instant::now() + duration;
    while Instant::now() < end {
        check().await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    check().await;
}

/// Whether `node` carries any of k8sm's keys (label, annotations, taint) or is cordoned.
fn has_k8sm_state(node: &Node) -> bool {
    let annotations = node.annotations();
    let taint = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY)
        });
    let k8sm_annotation = annotations
        .keys()
        .any(|k| k.starts_with("k8s.mesosphere.io/") && k != keys::EXECUTOR_ID_ANNOTATION);
    k8sm_annotation
        || node
            .labels()
            .contains_key(keys::INCOMPATIBLE_EXECUTOR_LABEL)
        || taint
        || node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
}

async fn cordoned(scenario: &Scenario, name: &str) -> bool {
    get_node(scenario, name)
        .await
        .spec
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

async fn get_node(scenario: &Scenario, name: &str) -> Node {
    Api::<Node>::all(scenario.client.clone())
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("node {name}: {e}"))
}

async fn patch_node(scenario: &Scenario, name: &str, patch: Value) {
    Api::<Node>::all(scenario.client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching node {name}: {e}"));
}

async fn pod(scenario: &Scenario, name: &str) -> Option<Pod> {
    Api::<Pod>::namespaced(scenario.client.clone(), &scenario.namespace)
        .get_opt(name)
        .await
        .expect("pods can be read")
}

/// The namespace's pods labelled `app=<app>`.
async fn app_pods(scenario: &Scenario, app: &str) -> Vec<Pod> {
    scenario
        .pods()
        .await
        .into_iter()
        .filter(|p| p.labels().get("app").map(String::as_str) == Some(app))
        .collect()
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

/// The status entry of `node` in the policy's status, if it is not Compatible.
async fn node_status(scenario: &Scenario, node: &str) -> Option<NodeStatus> {
    scenario
        .policy(POLICY)
        .await
        .status?
        .nodes
        .into_iter()
        .find(|n| n.name == node)
}

/// The Event is about the object named `name`.
fn regards(event: &Event, name: &str) -> bool {
    event
        .regarding
        .as_ref()
        .is_some_and(|r| r.name.as_deref() == Some(name))
}

fn regards_one_of(event: &Event, names: &BTreeSet<String>) -> bool {
    event
        .regarding
        .as_ref()
        .and_then(|r| r.name.as_ref())
        .is_some_and(|name| names.contains(name))
}

/// Events with `reason` about the object named `name`.
async fn events_about(scenario: &Scenario, reason: &str, name: &str) -> Vec<Event> {
    scenario
        .events(reason)
        .await
        .into_iter()
        .filter(|e| regards(e, name))
        .collect()
}

/// When an Event first happened: its eventTime (microseconds), else its creation time.
fn event_time(event: &Event) -> DateTime<Utc> {
    let ts = event
        .event_time
        .as_ref()
        .map(|t| t.0)
        .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .expect("an Event has a time");
    DateTime::from_timestamp(ts.as_second(), ts.subsec_nanosecond().max(0) as u32)
        .expect("a representable time")
}

/// How many times an Event occurred: a repeated Event (same object, reason and reporter) is one Event whose series
/// counts the repetitions.
fn occurrences(event: &Event) -> u32 {
    event
        .series
        .as_ref()
        .map_or(1, |s| u32::try_from(s.count).unwrap_or(1))
}

/// The rows of `kubectl k8sm blocked -o json`: (node, pod, reason, owner, class).
fn blocked_rows(json: &str) -> BTreeSet<(String, String, String, Option<String>, String)> {
    let blocked: Value = serde_json::from_str(json).expect("`blocked -o json` is JSON");
    blocked["pods"]
        .as_array()
        .expect("a list of pods")
        .iter()
        .map(|p| {
            (
                p["node"].as_str().unwrap_or_default().to_owned(),
                p["name"].as_str().unwrap_or_default().to_owned(),
                p["reason"].as_str().unwrap_or_default().to_owned(),
                p["owner"].as_str().map(str::to_owned),
                p["class"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}
