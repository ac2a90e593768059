//! Pods of other controllers — a custom resource's operator, as k8sm knows nothing of its kind
//! (docs/design.md §5.3) — on a real cluster, each test on its own small cluster with the SLA
//! watcher armed before the controller starts. Such pods are never deleted directly: they go
//! through the Eviction API one at a time, even when their operator is slow to replace them, and a
//! killed controller's successor keeps the size it must hold their workload to.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use nix::sys::signal::Signal;

use k8sm_api::UnmanagedPodPolicy;
use k8sm_e2e::deletions::DeletionLog;
use k8sm_e2e::events::{events_about, regards, regards_one_of};
use k8sm_e2e::plugin::{BlockedRow, blocked_rows, k8sm_exits};
use k8sm_e2e::podset;
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::sla::{SlaWatcher, assert_within_bounds};
use k8sm_e2e::waits::observe_for;
use k8sm_e2e::workload_policy::{THRESHOLD, only_node, workload_policy};
use k8sm_e2e::workloads::{create, fill_nodes, pdb_min_available, unmanaged_pod};
use k8sm_testcluster::node_name;

const POLICY: &str = "fleet";
/// Generous: the clusters of this file run two at a time on small machines.
const PROGRESS: Duration = Duration::from_secs(300);

/// Pods of a `PodSet` custom resource under a PodDisruptionBudget that allows no disruption, with
/// `unmanagedPods.policy: Delete` and `respectPodDisruptionBudgets: false`: k8sm evicts another
/// controller's pods through the Eviction API whatever that flag says, so they are never deleted.
/// They are reported `BlockedByPDB`, their node stalls and gives up the only slot, the other nodes
/// finish, and the node's unmanaged pod waits for them.
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
    let operator = scenario
        .pin_to(&held, REPLICAS as usize, || async {
            podset::Operator::start(&client, NS, "cache", &uid, REPLICAS, Duration::ZERO)
        })
        .await;
    create(&client, &unmanaged_pod(NS, "scratch", &held, &[])).await;
    let scratch_uid = scenario.pod("scratch").await.and_then(|p| p.uid());
    fill_nodes(&client, NS, &others, 5).await;
    scenario
        .wait_ready(REPLICAS as usize + 1 + 5 * others.len())
        .await;
    let members: BTreeSet<String> = scenario
        .app_pods("cache")
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
    scenario.wait_budget("cache", REPLICAS, 0).await;

    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    sla.expect(podset::KIND, "cache", REPLICAS);
    let deletions = DeletionLog::start(&client, NS, "app=cache").await;
    sla.arm();

    scenario.start_controller(&[]);
    let mut policy = workload_policy(&scenario, UnmanagedPodPolicy::Delete);
    policy.respect_pod_disruption_budgets = false;
    scenario.create_policy(POLICY, policy).await;
    let never_touched = || async {
        assert_eq!(
            deletions.deleted(),
            vec![],
            "no pod of the PodSet was deleted or evicted"
        );
        let scratch = scenario.pod("scratch").await;
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
                let stalled = !events_about(&client, "Stalled", &held).await.is_empty();
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
    let rows = blocked_rows(&k8sm_exits(
        &scenario.cluster,
        &["blocked", "-o", "json"],
        3,
    ));
    for member in &members {
        let row = BlockedRow {
            node: held.clone(),
            namespace: NS.into(),
            name: member.clone(),
            reason: "BlockedByPDB".into(),
            owner: Some("PodSet/cache".into()),
            class: "otherController".into(),
        };
        assert!(
            rows.contains(&row),
            "`kubectl k8sm blocked` lists {member} blocked by the budget, as another controller's pod: {rows:?}"
        );
    }
    let table = k8sm_exits(&scenario.cluster, &["blocked", "-n", NS], 3);
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
    assert_within_bounds(&sla, THRESHOLD, &[(podset::KIND, "cache", REPLICAS)]);
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

/// Pods of two `PodSet`s on one node: `cache` under a budget that allows one disruption, `ledger`
/// without a budget and with an operator that takes 3 s to replace a pod. Both move one at a time,
/// through the Eviction API (never a plain DELETE, although unmanaged pods are deleted under this
/// policy): `d` counts the evictions not yet replaced, so a pod gone and not yet replaced still
/// counts as missing. The `Evicted` Events name the PodSet.
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
        let operator = scenario
            .pin_to(&node, ready, || async {
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
    scenario.wait_budget("cache", REPLICAS, 1).await;
    let mut first: BTreeSet<String> = BTreeSet::new();
    for app in ["cache", "ledger"] {
        first.extend(
            scenario
                .app_pods(app)
                .await
                .iter()
                .map(ResourceExt::name_any),
        );
    }
    assert_eq!(first.len(), 2 * REPLICAS as usize, "{first:?}");

    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    for name in ["cache", "ledger"] {
        sla.expect(podset::KIND, name, REPLICAS);
    }
    let deletions = DeletionLog::start(&client, NS, "app in (cache,ledger)").await;
    sla.arm();

    scenario.start_controller(&[]);
    scenario
        .create_policy(
            POLICY,
            workload_policy(&scenario, UnmanagedPodPolicy::Delete),
        )
        .await;
    scenario
        .wait_all_upgraded_and_clean(POLICY, 3, PROGRESS)
        .await;

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
        let evicted = events_about(&client, "Evicted", pod).await;
        assert_eq!(evicted.len(), 1, "{pod} evicted once");
        let app = pod.rsplit_once('-').map_or("", |(app, _)| app);
        let note = evicted[0].note.as_deref().unwrap_or_default();
        assert!(
            note.contains(&format!("{} {app}", podset::KIND)),
            "the Evicted Event of {pod} names PodSet {app}: {note}"
        );
        assert!(
            events_about(&client, "DeletedUnmanagedPod", pod)
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
    assert_within_bounds(
        &sla,
        THRESHOLD,
        &[
            (podset::KIND, "cache", REPLICAS),
            (podset::KIND, "ledger", REPLICAS),
        ],
    );
}

/// The remembered size of an unknown kind outlives the controller: a `PodSet` of 3 on one node,
/// whose operator takes 40 s to replace a pod. The controller is SIGKILLed right after the first
/// eviction, and a new one started while the evicted pod is gone and not replaced: it reads the
/// size it must keep (3) back, sees 2 of 3, and waits for the replacement instead of taking the 2
/// left for a whole PodSet of 2 and evicting a second pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_kinds_size_outlives_a_killed_controller() {
    const NS: &str = "podset-kill";
    const REPLICAS: u32 = 3;
    const REPLACE_AFTER: Duration = Duration::from_secs(40);
    let mut scenario = Scenario::start(2, NS, "1s").await;
    let client = scenario.client.clone();
    let node = node_name(0);
    podset::install_crd(&client).await;
    let uid = podset::create(&client, NS, "ledger", REPLICAS).await;
    let operator = scenario
        .pin_to(&node, REPLICAS as usize, || async {
            podset::Operator::start(&client, NS, "ledger", &uid, REPLICAS, REPLACE_AFTER)
        })
        .await;
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    sla.expect(podset::KIND, "ledger", REPLICAS);
    let deletions = DeletionLog::start(&client, NS, "app=ledger").await;
    sla.arm();

    scenario.start_controller(&[]);
    let mut policy = workload_policy(&scenario, UnmanagedPodPolicy::Never);
    policy.node_selector = only_node(&node);
    scenario.create_policy(POLICY, policy).await;
    scenario
        .wait_until("the first pod is evicted", PROGRESS, || async {
            (!deletions.deleted().is_empty()).then_some(())
        })
        .await;
    let evicted_at = Instant::now();
    scenario.controllers[0].kill_with(Signal::SIGKILL);
    scenario.start_controller(&[]);
    let watched = REPLACE_AFTER.saturating_sub(evicted_at.elapsed() + Duration::from_secs(5));
    observe_for(watched, || async {
        let deleted = deletions.deleted();
        assert_eq!(
            deleted.len(),
            1,
            "a second pod went before the first one's replacement: {deleted:?}\n{}",
            scenario.controllers[1].log_tail(30)
        );
    })
    .await;
    println!(
        "watched {watched:?} after the kill: 1 pod evicted; the operator created {:?}",
        operator.created()
    );
    scenario
        .wait_until("the node is upgraded", PROGRESS, || async {
            scenario.controllers[1].assert_running();
            (scenario.upgraded_nodes().await == 1).then_some(())
        })
        .await;
    assert_within_bounds(&sla, THRESHOLD, &[(podset::KIND, "ledger", REPLICAS)]);
}
