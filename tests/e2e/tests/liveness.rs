//! Liveness on the real cluster (docs/design.md §5.7): every node that `kubectl drain` with
//! PodDisruptionBudgets could finish, k8sm finishes; a node that only an operator can finish costs
//! nothing. One shape per test, each on its own small cluster with a control that must behave as
//! before. Every oracle comes from what the test set up and from the cluster's own objects (the SLA
//! watcher, watches of Nodes, dry-run evictions), never from what k8sm reports, except where
//! reporting is the contract.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentStrategy, RollingUpdateDeployment, RollingUpdateStatefulSetStrategy,
    StatefulSet, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use k8sm_api::{ExecutorUpgradePolicy, ExecutorUpgradePolicySpec, UnmanagedPodPolicy, keys};
use k8sm_e2e::crash_loop::{CrashLoop, NEVER, READY_DELAY_ANNOTATION};
use k8sm_e2e::deletions::DeletionLog;
use k8sm_e2e::node_starts::NodeStarts;
use k8sm_e2e::nodes::{is_cordoned, is_node_ready, k8sm_keys};
use k8sm_e2e::objects::{
    client_without_retries, dry_run_eviction, get_node, get_pod_opt, merge_patch, node_of,
    patch_node, register_node,
};
use k8sm_e2e::plugin::{blocked_rows, k8sm, k8sm_exits, k8sm_ok};
use k8sm_e2e::polling::{POLL, poll};
use k8sm_e2e::scenario::{Scenario, is_ready, is_upgraded};
use k8sm_e2e::sla::{SlaWatcher, assert_no_violations, assert_within_bounds};
use k8sm_e2e::waits::observe_for;
use k8sm_e2e::workload_policy::{THRESHOLD, workload_policy};
use k8sm_e2e::workloads::{
    create, deployment, pdb_min_available, stateful_set, unmanaged_pod, with_template_annotation,
};
use k8sm_testcluster::{COMPLETE_DELAY_ANNOTATION, KWOK_NODE_ANNOTATION, node_name};

const POLICY: &str = "fleet";
/// Short, so that a test takes minutes: a pod not Ready for this long is broken, a node without
/// progress for this long gives up its slot.
const NODE_PROGRESS_DEADLINE: &str = "30s";
/// Generous deadlines: the clusters of this file run two at a time on small machines.
const SETUP: Duration = Duration::from_secs(120);
const UPGRADE: Duration = Duration::from_secs(300);
/// How long a node that only an operator can finish is watched once the others are done.
const AFTERWARDS: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------------------------------
// Crash-looping pods
// ---------------------------------------------------------------------------------------------------------------

/// Two Deployments whose pods are never Ready, without a budget (`kubectl drain` evicts them):
/// `crashing` (3 pods Running, their container in `CrashLoopBackOff`, Ready False since they were
/// created) and `unpullable` (2 pods Pending for ever, as with an image that cannot be pulled,
/// without a Ready condition). Each pod is broken once not Ready for `nodeProgressDeadline` (since
/// its Ready condition's last transition, or its creation), and goes whatever its owner's Ready
/// count (0, below the bound). Every node is upgraded. Control: a healthy Deployment of 3 never
/// falls below its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_looping_pods_move_and_every_node_finishes() {
    const NS: &str = "crash-loop";
    let mut scenario = Scenario::start(4, NS, "1s").await;
    let client = scenario.client.clone();
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    let _crash_loop = CrashLoop::start(&client, NS, "app=crashing");
    create(&client, &deployment(NS, "web", 3)).await;
    create(&client, &never_ready(deployment(NS, "crashing", 3))).await;
    create(&client, &never_ready(deployment(NS, "unpullable", 2))).await;
    scenario.wait_ready(3).await;
    let mut broken = wait_scheduled_not_ready(&scenario, "crashing", 3, true).await;
    broken.extend(wait_scheduled_not_ready(&scenario, "unpullable", 2, false).await);
    sla.arm();
    // Nothing refuses their eviction: `kubectl drain` gets through.
    for pod in &broken {
        dry_run_eviction(&client, NS, pod)
            .await
            .unwrap_or_else(|e| panic!("a dry-run eviction of {pod} is allowed: {e}"));
    }

    scenario.start_controller(&[]);
    let policy = liveness_policy(&scenario, UnmanagedPodPolicy::Never);
    scenario.create_policy(POLICY, policy).await;
    wait_upgraded(&scenario, &node_names(4), || async {}).await;

    let left: Vec<String> = scenario
        .live_pods()
        .await
        .into_keys()
        .filter(|p| broken.contains(p))
        .collect();
    assert!(left.is_empty(), "the broken pods moved: {left:?} left");
    assert_no_violations(&sla);
    assert_within_bounds(&sla, THRESHOLD, &[("Deployment", "web", 3)]);
}

/// A crash loop whose broken pods were all replaced already (evicted by an earlier run, or deleted
/// by hand): its Deployment of 2 has been unavailable for an hour (its Available condition False
/// since then), and its pods are replacements seconds old, never Ready. Nothing on the pods says
/// the workload is broken; its Deployment does, so they go at once, as `kubectl drain` evicts them,
/// and every node is upgraded while `nodeProgressDeadline` (10 minutes here, longer than the test
/// waits) has not passed for any of them: without the rule they would hold their nodes that long.
/// Control: a healthy Deployment of 3 stays within its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacements_of_a_crash_loop_go_once_their_deployment_is_unavailable_that_long() {
    const NS: &str = "unavailable";
    let mut scenario = Scenario::start(4, NS, "1s").await;
    let client = scenario.client.clone();
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    let _crash_loop = CrashLoop::start(&client, NS, "app=crashing");
    create(&client, &deployment(NS, "web", 3)).await;
    create(&client, &never_ready(deployment(NS, "crashing", 2))).await;
    scenario.wait_ready(3).await;
    let first = wait_scheduled_not_ready(&scenario, "crashing", 2, true).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let since = unavailable_for_an_hour(&scenario, &deployments, "crashing").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for pod in &first {
        pods.delete(pod, &DeleteParams::default())
            .await
            .expect("a crash-looping pod deleted");
    }
    let young = wait_for(&scenario, "crashing's pods are replaced", SETUP, || async {
        let names = wait_scheduled_not_ready(&scenario, "crashing", 2, true).await;
        names.is_disjoint(&first).then_some(names)
    })
    .await;
    for pod in &young {
        dry_run_eviction(&client, NS, pod)
            .await
            .unwrap_or_else(|e| panic!("a dry-run eviction of {pod} is allowed: {e}"));
    }
    sla.arm();

    scenario.start_controller(&[]);
    let policy = ExecutorUpgradePolicySpec {
        node_progress_deadline: "10m".parse().expect("a duration"),
        ..workload_policy(&scenario, UnmanagedPodPolicy::Never)
    };
    scenario.create_policy(POLICY, policy).await;
    wait_upgraded(&scenario, &node_names(4), || async {}).await;
    // The premise held throughout: unavailable since an hour before the run.
    assert_eq!(
        unavailable_since(&deployments, "crashing").await,
        Some(since)
    );
    assert_within_bounds(&sla, THRESHOLD, &[("Deployment", "web", 3)]);
}

/// Waits until the Deployment `name` reports itself unavailable, then backdates that condition by
/// an hour, as in a cluster where a crash loop was left alone: its controller keeps a condition's
/// transition time while its status and reason stay. Returns that time.
async fn unavailable_for_an_hour(
    scenario: &Scenario,
    deployments: &Api<Deployment>,
    name: &str,
) -> chrono::DateTime<chrono::Utc> {
    wait_for(scenario, &format!("{name} is unavailable"), SETUP, || {
        unavailable_since(deployments, name)
    })
    .await;
    let since = chrono::Utc::now() - chrono::Duration::hours(1);
    let since = chrono::DateTime::from_timestamp(since.timestamp(), 0).expect("a time");
    let at = since.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let patch = json!({"status": {"conditions": [{
        "type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
        "message": "Deployment does not have minimum availability.",
        "lastTransitionTime": at, "lastUpdateTime": at,
    }]}});
    deployments
        .patch_status(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Strategic(patch),
        )
        .await
        .expect("the Available condition backdated");
    assert_eq!(unavailable_since(deployments, name).await, Some(since));
    since
}

/// When the Deployment's Available condition turned False, if it is False.
async fn unavailable_since(
    deployments: &Api<Deployment>,
    name: &str,
) -> Option<chrono::DateTime<chrono::Utc>> {
    let status = deployments.get_status(name).await.ok()?.status?;
    let available = status
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "Available" && c.status == "False")?;
    let at = available.last_transition_time?.0;
    chrono::DateTime::from_timestamp(at.as_second(), 0)
}

/// A Deployment of 3 whose pods crash-loop (Running, never Ready) under a budget `minAvailable: 3`
/// with `unhealthyPodEvictionPolicy: AlwaysAllow`: `disruptionsAllowed` is 0, yet the Eviction API
/// evicts each of them. k8sm asks instead of predicting a refusal, and every node without a guarded
/// pod is upgraded. Control: a Deployment of 2, both Ready on one node, under a budget
/// `minAvailable: 2`: the Eviction API refuses (429), its pods stay and its node is not upgraded
/// while the budget allows nothing; relaxed to 1, that node is upgraded too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_looping_pods_under_an_always_allow_budget_move_and_a_closed_budget_holds_its_node() {
    const NS: &str = "always-allow";
    let mut scenario = Scenario::start(4, NS, "1s").await;
    let client = scenario.client.clone();
    let guarded_node = node_name(0);
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    scenario
        .pin_to(&guarded_node, 2, || async {
            create(&client, &deployment(NS, "guarded", 2)).await;
        })
        .await;
    create(
        &client,
        &pdb_min_available(NS, "guarded", "guarded", IntOrString::Int(2)),
    )
    .await;
    let _crash_loop = CrashLoop::start(&client, NS, "app=crashing");
    create(&client, &never_ready(deployment(NS, "crashing", 3))).await;
    let mut budget = pdb_min_available(NS, "crashing", "crashing", IntOrString::Int(3));
    if let Some(spec) = budget.spec.as_mut() {
        spec.unhealthy_pod_eviction_policy = Some("AlwaysAllow".into());
    }
    create(&client, &budget).await;
    let crashing = wait_scheduled_not_ready(&scenario, "crashing", 3, true).await;
    scenario.wait_budget("guarded", 2, 0).await;
    scenario.wait_budget("crashing", 0, 0).await;
    let guarded: BTreeMap<String, String> = uids(&scenario.app_pods("guarded").await);
    let asker = client_without_retries(scenario.cluster.kubeconfig()).await;

    // The Eviction API lets every crash-looping pod go, and refuses the guarded ones.
    for pod in &crashing {
        dry_run_eviction(&asker, NS, pod).await.unwrap_or_else(|e| {
            panic!("AlwaysAllow: a dry-run eviction of the crash-looping {pod} is allowed: {e}")
        });
    }
    for pod in guarded.keys() {
        match dry_run_eviction(&asker, NS, pod).await {
            Err(kube::Error::Api(status)) if status.code == 429 => {}
            other => panic!("the budget refuses a dry-run eviction of {pod} with 429: {other:?}"),
        }
    }
    sla.arm();

    scenario.start_controller(&[]);
    let policy = liveness_policy(&scenario, UnmanagedPodPolicy::Never);
    scenario.create_policy(POLICY, policy).await;
    let guarded_stay = || async {
        let live = scenario.live_pods().await;
        for (pod, uid) in &guarded {
            assert_eq!(
                live.get(pod),
                Some(uid),
                "{pod} stays while its budget allows no disruption"
            );
        }
        assert!(
            !scenario.upgraded_names().await.contains(&guarded_node),
            "{guarded_node} upgraded with its guarded pods"
        );
    };
    let others: Vec<String> = (1..4).map(node_name).collect();
    wait_upgraded(&scenario, &others, guarded_stay).await;
    observe_for(AFTERWARDS, guarded_stay).await;

    // The operator relaxes the budget: the guarded node finishes too, one guarded pod at a time.
    merge_patch::<PodDisruptionBudget>(
        &client,
        NS,
        "guarded",
        json!({ "spec": { "minAvailable": 1 } }),
    )
    .await;
    wait_upgraded(&scenario, &node_names(4), || async {}).await;
    assert_no_violations(&sla);
    assert_within_bounds(&sla, THRESHOLD, &[("Deployment", "guarded", 2)]);
}

// ---------------------------------------------------------------------------------------------------------------
// A rollout past its progress deadline
// ---------------------------------------------------------------------------------------------------------------

/// A Deployment of 4 (surge 1, no unavailable, `progressDeadlineSeconds: 10`) rolled out to a
/// template whose pods are never Ready: 4 old pods Ready, 1 new one not, and its Progressing
/// condition says `ProgressDeadlineExceeded`. It is no longer rolling out: its pods move within the
/// headroom of its Ready pods over both ReplicaSets (bound 3 at threshold 90: one at a time), and
/// every node is upgraded. (Each replacement that becomes Ready counts as progress
/// to the Deployment controller, which then reports the rollout progressing again; k8sm goes by the
/// newest ReplicaSet's pods, which made none.)
/// Control: a healthy Deployment of 3 alongside, within its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_past_its_progress_deadline_moves_within_its_headroom() {
    const NS: &str = "stuck-rollout";
    const REPLICAS: u32 = 4;
    let mut scenario = Scenario::start(4, NS, "1s").await;
    let client = scenario.client.clone();
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    let mut web = deployment(NS, "web", REPLICAS as i32);
    if let Some(spec) = web.spec.as_mut() {
        spec.strategy = Some(DeploymentStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDeployment {
                max_surge: Some(IntOrString::Int(1)),
                max_unavailable: Some(IntOrString::Int(0)),
            }),
        });
        spec.progress_deadline_seconds = Some(10);
    }
    create(&client, &web).await;
    create(&client, &deployment(NS, "api", 3)).await;
    scenario.wait_ready(REPLICAS as usize + 3).await;

    let never = json!({ "spec": { "template": { "metadata": { "annotations": {
        READY_DELAY_ANNOTATION: NEVER } } } } });
    merge_patch::<Deployment>(&client, NS, "web", never).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let old_ready = wait_for(
        &scenario,
        "web's rollout exceeded its progress deadline: 4 old pods Ready, 1 new one not",
        SETUP,
        || async {
            let exceeded = deployments
                .get_status("web")
                .await
                .ok()?
                .status?
                .conditions?
                .iter()
                .any(|c| {
                    c.type_ == "Progressing"
                        && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
                });
            let pods = scenario.app_pods("web").await;
            let ready: Vec<String> = pods
                .iter()
                .filter(|p| is_ready(p))
                .map(ResourceExt::name_any)
                .collect();
            (exceeded && pods.len() == 5 && ready.len() == 4).then_some(ready)
        },
    )
    .await;
    sla.arm();
    scenario
        .wait_until("the SLA watcher sees 4 web pods Ready", SETUP, || async {
            (sla.ready("Deployment", "web") == REPLICAS).then_some(())
        })
        .await;
    // No budget: `kubectl drain` evicts its pods.
    dry_run_eviction(&client, NS, &old_ready[0])
        .await
        .unwrap_or_else(|e| panic!("a dry-run eviction of {} is allowed: {e}", old_ready[0]));

    scenario.start_controller(&[]);
    let policy = liveness_policy(&scenario, UnmanagedPodPolicy::Never);
    scenario.create_policy(POLICY, policy).await;
    wait_upgraded(&scenario, &node_names(4), || async {
        assert_no_violations(&sla);
    })
    .await;
    let left: Vec<&String> = {
        let live = scenario.live_pods().await;
        old_ready.iter().filter(|p| live.contains_key(*p)).collect()
    };
    assert!(left.is_empty(), "every old web pod moved: {left:?} left");
    assert_within_bounds(
        &sla,
        THRESHOLD,
        &[("Deployment", "web", REPLICAS), ("Deployment", "api", 3)],
    );
}

/// A StatefulSet of 3 whose rolling update stopped at its partition (2): its last pod runs the new
/// revision, the others the old one, and its `currentRevision` and `updateRevision` differ for as
/// long as the partition stays. Its controller replaces nothing more, so it is not rolling out: its
/// pods move one at a time (bound 2 at threshold 90), each replaced at the revision its ordinal
/// asks for, and every node is upgraded. (While an update goes on with every replica Ready, its
/// controller deletes the next old pod and k8sm adds no eviction: that instant is tested in the
/// view and the planner.) Control: a healthy Deployment of 3 alongside, within its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_set_whose_update_stopped_at_its_partition_holds_no_node() {
    const NS: &str = "partition";
    let mut scenario = Scenario::start(4, NS, "1s").await;
    let client = scenario.client.clone();
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    let mut db = stateful_set(NS, "db", 3);
    if let Some(spec) = db.spec.as_mut() {
        spec.update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateStatefulSetStrategy {
                partition: Some(2),
                ..RollingUpdateStatefulSetStrategy::default()
            }),
        });
    }
    create(&client, &db).await;
    create(&client, &deployment(NS, "api", 3)).await;
    scenario.wait_ready(6).await;
    let template = json!({ "spec": { "template": { "metadata": { "annotations": {
        "k8sm.test/revision": "2" } } } } });
    merge_patch::<StatefulSet>(&client, NS, "db", template).await;
    let stateful_sets: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    wait_for(
        &scenario,
        "db's update stopped at its partition: db-2 updated, 3 pods Ready",
        SETUP,
        || async {
            let status = stateful_sets.get_status("db").await.ok()?.status?;
            let stopped = status.current_revision.is_some()
                && status.current_revision != status.update_revision
                && status.updated_replicas == Some(1)
                && status.ready_replicas == Some(3);
            stopped.then_some(())
        },
    )
    .await;
    let old = scenario.app_pods("db").await;
    sla.arm();
    // No budget: `kubectl drain` evicts its pods.
    for pod in &old {
        dry_run_eviction(&client, NS, &pod.name_any())
            .await
            .unwrap_or_else(|e| panic!("a dry-run eviction of {} is allowed: {e}", pod.name_any()));
    }

    scenario.start_controller(&[]);
    let policy = liveness_policy(&scenario, UnmanagedPodPolicy::Never);
    scenario.create_policy(POLICY, policy).await;
    wait_upgraded(&scenario, &node_names(4), || async {
        assert_no_violations(&sla);
    })
    .await;
    let moved = uids(&scenario.app_pods("db").await);
    let stayed: Vec<String> = uids(&old)
        .into_iter()
        .filter(|(name, uid)| moved.get(name) == Some(uid))
        .map(|(name, _)| name)
        .collect();
    assert!(stayed.is_empty(), "every db pod moved: {stayed:?} stayed");
    assert_within_bounds(
        &sla,
        THRESHOLD,
        &[("StatefulSet", "db", 3), ("Deployment", "api", 3)],
    );
}

// ---------------------------------------------------------------------------------------------------------------
// A pod stuck Terminating
// ---------------------------------------------------------------------------------------------------------------

/// The finalizer that holds the zombie: nobody in the cluster removes it but the test.
const HOLD: &str = "k8sm.test/hold";

/// A Deployment of 3, one of whose pods is stuck Terminating (a finalizer holds it; KWOK's deletion
/// leaves finalizers alone): its ReplicaSet replaced it, so the Deployment has 3 Ready pods and a
/// zombie. The zombie counts as gone for its workload, as the disruption controller counts it: the
/// Deployment is whole and its pods on other nodes move one at a time. Every node but the zombie's
/// is upgraded; the zombie's node is reported with the pod, and k8sm never removes the finalizer.
/// Once the operator does, that node is upgraded too. Control: a healthy Deployment of 3 alongside,
/// within its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_stuck_terminating_holds_only_its_own_node() {
    const NS: &str = "zombie";
    let mut scenario = Scenario::start(4, NS, "1s").await;
    let client = scenario.client.clone();
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    create(&client, &deployment(NS, "web", 3)).await;
    create(&client, &deployment(NS, "api", 3)).await;
    scenario.wait_ready(6).await;
    let first = scenario.app_pods("web").await.remove(0);
    let zombie = first.name_any();
    let zombie_uid = first.uid().expect("a uid");
    let zombie_node = node_of(&first).expect("scheduled").to_owned();
    merge_patch::<Pod>(
        &client,
        NS,
        &zombie,
        json!({ "metadata": { "finalizers": [HOLD] } }),
    )
    .await;
    Api::<Pod>::namespaced(client.clone(), NS)
        .delete(&zombie, &DeleteParams::default())
        .await
        .expect("the zombie is deleted");
    let zombie_held = || async {
        let pod = get_pod_opt(&client, NS, &zombie).await;
        assert!(
            pod.as_ref()
                .is_some_and(|p| p.uid().as_deref() == Some(&*zombie_uid)
                    && p.metadata.deletion_timestamp.is_some()
                    && p.finalizers().iter().any(|f| f == HOLD)),
            "{zombie} stays Terminating, held by {HOLD}: {:?}",
            pod.map(|p| p.metadata)
        );
    };
    scenario
        .wait_until("web has 3 Ready pods besides its zombie", SETUP, || async {
            (sla.ready("Deployment", "web") == 3).then_some(())
        })
        .await;
    observe_for(Duration::from_secs(3), zombie_held).await;
    sla.arm();
    // The shape: web pods elsewhere, which the zombie must not freeze; `kubectl drain` evicts them
    // (no budget).
    let elsewhere: Vec<String> = scenario
        .app_pods("web")
        .await
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && node_of(p) != Some(&*zombie_node))
        .map(ResourceExt::name_any)
        .collect();
    assert!(
        !elsewhere.is_empty(),
        "a live web pod runs elsewhere than {zombie_node}"
    );
    for pod in &elsewhere {
        dry_run_eviction(&client, NS, pod)
            .await
            .unwrap_or_else(|e| panic!("a dry-run eviction of {pod} is allowed: {e}"));
    }

    scenario.start_controller(&[]);
    let policy = liveness_policy(&scenario, UnmanagedPodPolicy::Never);
    scenario.create_policy(POLICY, policy).await;
    let others: Vec<String> = node_names(4)
        .into_iter()
        .filter(|n| *n != zombie_node)
        .collect();
    wait_upgraded(&scenario, &others, zombie_held).await;
    let report = wait_for(
        &scenario,
        &format!("the status lists {zombie_node} with {zombie}"),
        SETUP,
        || async {
            zombie_held().await;
            let status = scenario.policy(POLICY).await.status?;
            let pod = status
                .blocked_pods
                .iter()
                .find(|p| p.name == zombie && p.node == zombie_node)
                .map(|p| format!("blockedPods: {} {}: {}", p.name, p.reason, p.message));
            let node = status
                .nodes
                .iter()
                .find(|n| n.name == zombie_node && n.blockers.iter().any(|b| b.contains(&zombie)))
                .map(|n| format!("nodes: {} {}: {:?}", n.name, n.phase, n.blockers));
            pod.or(node)
        },
    )
    .await;
    println!("{zombie_node} reported: {report}");

    // The operator removes the finalizer: the zombie goes, and its node finishes.
    merge_patch::<Pod>(
        &client,
        NS,
        &zombie,
        json!({ "metadata": { "finalizers": null } }),
    )
    .await;
    wait_upgraded(&scenario, &node_names(4), || async {}).await;
    assert_within_bounds(
        &sla,
        THRESHOLD,
        &[("Deployment", "web", 3), ("Deployment", "api", 3)],
    );
    // The upgrade report shows both counts: for web its fewest available pods apart from its fewest
    // Ready ones.
    let report: k8sm_api::report::UpgradeReport = serde_json::from_str(&k8sm_ok(
        &scenario.cluster,
        &["upgrade", "report", "-o", "json"],
    ))
    .expect("the report as JSON");
    let record = &report.workloads[&format!("Deployment {NS}/web")];
    let available = record.min_available.expect("available pods recorded");
    assert!(
        available >= record.bound && record.min_ready >= available,
        "the report's record of web: {record:?}"
    );
    let text = k8sm_ok(&scenario.cluster, &["upgrade", "report"]);
    assert!(text.contains("MIN AVAILABLE"), "{text}");
}

// ---------------------------------------------------------------------------------------------------------------
// Availability
// ---------------------------------------------------------------------------------------------------------------

/// A Deployment of 3 with `minReadySeconds: 15` (bound 2 at threshold 90): its pods count once
/// available, Ready for 15 s, as the Deployment controller and its `availableReplicas` count them.
/// Each of its pods goes only once the replacement of the last one is available, so its available
/// pods, not only its Ready ones, never fall below the bound, while every node is upgraded
/// (`kubectl drain` gets through: a dry-run eviction is allowed), and the upgrade report keeps its
/// fewest available pods beside its fewest Ready ones. Control: a Deployment of 3 without
/// `minReadySeconds` alongside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_min_ready_seconds_a_pod_goes_once_its_predecessor_s_replacement_is_available() {
    const NS: &str = "available";
    let mut scenario = Scenario::start(4, NS, "1s").await;
    let client = scenario.client.clone();
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    let mut web = deployment(NS, "web", 3);
    if let Some(spec) = web.spec.as_mut() {
        spec.min_ready_seconds = Some(15);
    }
    create(&client, &web).await;
    create(&client, &deployment(NS, "api", 3)).await;
    scenario.wait_ready(6).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    wait_for(&scenario, "web's 3 pods are available", SETUP, || async {
        let status = deployments.get_status("web").await.ok()?.status?;
        (status.available_replicas == Some(3)).then_some(())
    })
    .await;
    let first = scenario.app_pods("web").await.remove(0).name_any();
    dry_run_eviction(&client, NS, &first)
        .await
        .unwrap_or_else(|e| panic!("a dry-run eviction of {first} is allowed: {e}"));
    sla.arm();

    scenario.start_controller(&[]);
    let policy = liveness_policy(&scenario, UnmanagedPodPolicy::Never);
    scenario.create_policy(POLICY, policy).await;
    wait_upgraded(&scenario, &node_names(4), || async {}).await;
    assert_within_bounds(
        &sla,
        THRESHOLD,
        &[("Deployment", "web", 3), ("Deployment", "api", 3)],
    );
}

// ---------------------------------------------------------------------------------------------------------------
// The target moved
// ---------------------------------------------------------------------------------------------------------------

/// The target moved mid-upgrade (a hotfix release): the node told to restart into the first target
/// comes back on it, and, incompatible with the new target, simply goes round again, as the nodes
/// still on the old executor go straight to the new one. Nothing waits on an operator (`force
/// --retry-kamikaze`), and no node is reported as having come back wrong (`UnexpectedExecutor`) or
/// overdue. Every node ends on the new target; a healthy Deployment of 3 stays within its bound
/// throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_moved_mid_upgrade_sends_the_nodes_round_to_the_new_one() {
    const NS: &str = "target-moved";
    // Restarts slow enough to move the target while one is under way.
    let mut scenario = Scenario::start(4, NS, "8s").await;
    let client = scenario.client.clone();
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    create(&client, &deployment(NS, "web", 3)).await;
    scenario.wait_ready(3).await;
    sla.arm();
    let first = scenario.new_id.clone();

    scenario.start_controller(&[]);
    let policy = liveness_policy(&scenario, UnmanagedPodPolicy::Never);
    scenario.create_policy(POLICY, policy).await;
    let told = wait_for(
        &scenario,
        "a node is told to restart into the first target",
        UPGRADE,
        || async {
            scenario.nodes().await.into_iter().find_map(|n| {
                let annotations = n.annotations();
                (annotations.contains_key(keys::KAMIKAZE_ANNOTATION)
                    && annotations.get(keys::KAMIKAZE_TARGET_ANNOTATION) == Some(&first))
                .then(|| n.name_any())
            })
        },
    )
    .await;
    let hotfix = k8sm_e2e::scenario::executor_id("2.0.1");
    scenario
        .patch_policy(POLICY, json!({ "targetExecutorId": hotfix }))
        .await;
    wait_for(
        &scenario,
        &format!("{told} is back on the first target"),
        SETUP,
        || async {
            let node = get_node(&client, &told).await;
            (node.annotations().get(keys::EXECUTOR_ID_ANNOTATION) == Some(&first)).then_some(())
        },
    )
    .await;
    // From now on the executors restart into the hotfix.
    scenario.new_id = hotfix;
    scenario.restart_agent("1s", &[]);
    wait_upgraded(&scenario, &node_names(4), || async {}).await;
    for reason in ["UnexpectedExecutor", "RestartOverdue"] {
        let events = scenario.events(reason).await;
        assert!(events.is_empty(), "no {reason} Event: {events:?}");
    }
    assert_within_bounds(&sla, THRESHOLD, &[("Deployment", "web", 3)]);
}

// ---------------------------------------------------------------------------------------------------------------
// Evictions for every owned pod
// ---------------------------------------------------------------------------------------------------------------

/// Under `unmanagedPods: DeleteAfterTimeout` (10 s) a Job's pod (running for ever) and a bare pod
/// go once the timeout has passed, and both go through the Eviction API, as `kubectl drain` sends
/// them: the apiserver marks each with `DisruptionTarget`, which a Job's `podFailurePolicy` can
/// tell from a failure. Every node is upgraded; a healthy Deployment of 3 stays within its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_and_bare_pods_go_through_the_eviction_api() {
    const NS: &str = "by-eviction";
    let mut scenario = Scenario::start(4, NS, "1s").await;
    let client = scenario.client.clone();
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    create(&client, &deployment(NS, "web", 3)).await;
    // KWOK completes a Job's pods once Running, unless told to wait.
    let mut report = k8sm_e2e::workloads::job(NS, "report", 1);
    if let Some(spec) = report.spec.as_mut() {
        spec.template
            .metadata
            .get_or_insert_with(Default::default)
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(COMPLETE_DELAY_ANNOTATION.into(), NEVER.into());
    }
    create(&client, &report).await;
    create(&client, &unmanaged_pod(NS, "debug", &node_name(1), &[])).await;
    scenario.wait_ready(5).await;
    let job_pod = scenario.app_pods("report").await.remove(0).name_any();
    for pod in [job_pod.as_str(), "debug"] {
        dry_run_eviction(&client, NS, pod)
            .await
            .unwrap_or_else(|e| panic!("a dry-run eviction of {pod} is allowed: {e}"));
    }
    let deletions = DeletionLog::start(&client, NS, "").await;
    sla.arm();

    scenario.start_controller(&[]);
    let mut policy = liveness_policy(&scenario, UnmanagedPodPolicy::DeleteAfterTimeout);
    policy.unmanaged_pods.timeout = Some("10s".parse().expect("a duration"));
    scenario.create_policy(POLICY, policy).await;
    wait_upgraded(&scenario, &node_names(4), || async {}).await;

    let deleted = deletions.deleted();
    for pod in [job_pod.as_str(), "debug"] {
        let deletion = deleted
            .iter()
            .find(|d| d.name == pod)
            .unwrap_or_else(|| panic!("{pod} went: {deleted:?}"));
        assert!(
            deletion.evicted,
            "{pod} went through the Eviction API: {deletion:?}"
        );
    }
    assert_within_bounds(&sla, THRESHOLD, &[("Deployment", "web", 3)]);
}

// ---------------------------------------------------------------------------------------------------------------
// Two policies
// ---------------------------------------------------------------------------------------------------------------

/// A second policy comes to select a node that the first is draining (cordoned, held by a budget at
/// zero): neither may act on a shared node, so the first hands it back: uncordoned, none of k8sm's
/// keys left, its pods untouched, and both policies report the Conflict. Once the second policy
/// goes and the budget allows, the node is upgraded like the others (control: the other nodes are
/// upgraded meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_a_second_policy_selects_mid_drain_is_handed_back() {
    const NS: &str = "two-policies";
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let client = scenario.client.clone();
    let shared = node_name(0);
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    scenario
        .pin_to(&shared, 2, || async {
            create(&client, &deployment(NS, "web", 2)).await;
        })
        .await;
    create(
        &client,
        &pdb_min_available(NS, "web", "web", IntOrString::Int(2)),
    )
    .await;
    let web_pods = uids(&scenario.app_pods("web").await);
    sla.arm();

    scenario.start_controller(&[]);
    let policy = liveness_policy(&scenario, UnmanagedPodPolicy::Never);
    scenario.create_policy(POLICY, policy.clone()).await;
    wait_upgraded(&scenario, &[node_name(1), node_name(2)], || async {}).await;
    wait_for(
        &scenario,
        &format!("{shared} is cordoned by k8sm"),
        SETUP,
        || async { is_cordoned(&get_node(&client, &shared).await).then_some(()) },
    )
    .await;

    patch_node(
        &client,
        &shared,
        json!({ "metadata": { "labels": { "second": "true" } } }),
    )
    .await;
    let mut second = policy;
    second.node_selector = LabelSelector {
        match_labels: Some(BTreeMap::from([("second".to_owned(), "true".to_owned())])),
        ..LabelSelector::default()
    };
    scenario.create_policy("second", second).await;
    wait_for(
        &scenario,
        &format!("{shared} is handed back, both policies report the conflict"),
        SETUP,
        || async {
            let node = get_node(&client, &shared).await;
            // The executor's own ID is the executor's, not k8sm's state.
            let released = !is_cordoned(&node)
                && k8sm_keys(&node)
                    .iter()
                    .all(|k| k.ends_with(keys::EXECUTOR_ID_ANNOTATION));
            let mut conflict = true;
            for name in [POLICY, "second"] {
                let status = scenario.policy(name).await.status;
                conflict &= status.is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.type_ == "Conflict" && c.status == "True" && c.message.contains(&shared)
                    })
                });
            }
            (released && conflict).then_some(())
        },
    )
    .await;
    assert_eq!(
        uids(&scenario.app_pods("web").await),
        web_pods,
        "the shared node's pods are untouched"
    );

    Api::<ExecutorUpgradePolicy>::all(client.clone())
        .delete("second", &DeleteParams::default())
        .await
        .expect("the second policy is deleted");
    merge_patch::<PodDisruptionBudget>(
        &client,
        NS,
        "web",
        json!({ "spec": { "minAvailable": 1 } }),
    )
    .await;
    wait_upgraded(&scenario, &node_names(3), || async {}).await;
    assert_within_bounds(&sla, THRESHOLD, &[("Deployment", "web", 2)]);
}

// ---------------------------------------------------------------------------------------------------------------
// A dead node
// ---------------------------------------------------------------------------------------------------------------

/// A node that no KWOK manages and no executor plays: registered with the old executor ID, it never
/// becomes Ready (a machine that died). It is marked like every node, but never admitted, never
/// cordoned, holds no drain slot (one slot: the 4 live nodes are upgraded all the same) and is
/// reported `NodeNotReady`. Control: once KWOK manages it and the simulated executor plays it (the
/// machine is back), it is admitted and upgraded like any other. A healthy Deployment of 4 stays
/// within its bound throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_node_holds_no_slot_and_is_never_cordoned() {
    const NS: &str = "dead-node";
    const DEAD: &str = "node-dead";
    let mut scenario = Scenario::start(4, NS, "1s").await;
    let client = scenario.client.clone();
    let dead = k8sm_e2e::nodes::dead_node(&scenario.cluster, DEAD, &scenario.old_id);
    register_node(&client, &dead).await;
    wait_for(
        &scenario,
        &format!("{DEAD} is Ready Unknown and tainted unreachable NoSchedule"),
        SETUP,
        || async {
            let node = get_node(&client, DEAD).await;
            let unknown = node
                .status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "Unknown");
            let tainted = node
                .spec?
                .taints?
                .iter()
                .any(|t| t.effect == "NoSchedule" && t.key == "node.kubernetes.io/unreachable");
            (unknown && tainted).then_some(())
        },
    )
    .await;
    // Stays so: the scheduler keeps away.
    observe_for(Duration::from_secs(3), || async {
        let taints = get_node(&client, DEAD)
            .await
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default();
        assert!(
            taints
                .iter()
                .any(|t| t.effect == "NoSchedule" && t.key == "node.kubernetes.io/unreachable"),
            "{DEAD} stays tainted: {taints:?}"
        );
    })
    .await;
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    create(&client, &deployment(NS, "web", 4)).await;
    scenario.wait_ready(4).await;
    let not_ready = || async {
        let ready = is_node_ready(&get_node(&client, DEAD).await);
        assert!(!ready, "{DEAD} is not Ready");
    };
    observe_for(Duration::from_secs(3), not_ready).await;
    let starts = NodeStarts::start(&client).await;
    sla.arm();

    scenario.start_controller(&[]);
    let policy = liveness_policy(&scenario, UnmanagedPodPolicy::Never);
    scenario.create_policy(POLICY, policy).await;
    let dead_untouched = || async {
        starts.assert_never_started(&[DEAD.to_owned()]);
        not_ready().await;
        let there = scenario.pods_on(DEAD).await;
        assert!(
            there.is_empty(),
            "no pod runs on {DEAD}: {:?}",
            uids(&there)
        );
    };
    wait_upgraded(&scenario, &node_names(4), dead_untouched).await;
    let (status_line, planned) = wait_for(
        &scenario,
        &format!("{DEAD} is reported NodeNotReady"),
        SETUP,
        || async {
            let status = scenario.policy(POLICY).await.status?;
            let entry = status.nodes.iter().find(|n| n.name == DEAD)?;
            let line = format!("{} {}: {:?}", entry.name, entry.phase, entry.blockers);
            let plan: Value =
                serde_json::from_str(&k8sm_ok(&scenario.cluster, &["plan", "-o", "json"])).ok()?;
            let node = plan["nodes"]
                .as_array()?
                .iter()
                .find(|n| n["name"] == DEAD)?
                .clone();
            let not_ready = node["blockers"]
                .as_array()?
                .iter()
                .any(|b| b["reason"] == "NodeNotReady");
            (not_ready && !entry.blockers.is_empty()).then_some((line, node))
        },
    )
    .await;
    println!("status: {status_line}\nplan: {planned}");
    observe_for(AFTERWARDS, dead_untouched).await;

    // The machine comes back: KWOK manages it, the simulated executor plays it (with the old
    // executor). KWOK takes on a node only when it lists or first sees it, not when a node it
    // saw gains its annotation: it is restarted.
    patch_node(
        &client,
        DEAD,
        json!({ "metadata": {
            "annotations": { KWOK_NODE_ANNOTATION: "fake" },
            "labels": { "type": "kwok" },
        } }),
    )
    .await;
    scenario
        .cluster
        .process_mut("kwok")
        .expect("KWOK runs")
        .respawn()
        .expect("KWOK restarts");
    let mut all = node_names(4);
    all.push(DEAD.to_owned());
    wait_upgraded(&scenario, &all, || async {}).await;
    assert_within_bounds(&sla, THRESHOLD, &[("Deployment", "web", 4)]);
}

// ---------------------------------------------------------------------------------------------------------------
// Nodes only an operator can finish
// ---------------------------------------------------------------------------------------------------------------

/// A node with an unmanaged pod under `unmanagedPods.policy: Never` and the 2 pods of a healthy
/// Deployment: only an operator can clear the unmanaged pod (`kubectl drain` refuses it without
/// `--force`). The node is never started: never cordoned, none of its pods evicted; it is reported
/// blocked, naming the pod (`BlockedUnmanagedPod`). Every other node is upgraded. Once the operator
/// deletes the pod, the node is admitted and upgraded like any other. Control: a healthy Deployment
/// of 4 spread over the fleet moves within its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_bare_pod_is_never_started_until_the_operator_clears_it() {
    const NS: &str = "bare-pod";
    let mut scenario = Scenario::start(4, NS, "1s").await;
    let client = scenario.client.clone();
    let held = node_name(0);
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    scenario
        .pin_to(&held, 2, || async {
            create(&client, &deployment(NS, "local", 2)).await;
        })
        .await;
    create(&client, &unmanaged_pod(NS, "pet", &held, &[])).await;
    create(&client, &deployment(NS, "web", 4)).await;
    scenario.wait_ready(7).await;
    let guard = OperatorOnly::record(&scenario, std::slice::from_ref(&held)).await;
    sla.arm();

    scenario.start_controller(&[]);
    let policy = liveness_policy(&scenario, UnmanagedPodPolicy::Never);
    scenario.create_policy(POLICY, policy).await;
    let others: Vec<String> = (1..4).map(node_name).collect();
    wait_upgraded(&scenario, &others, || guard.check(&scenario)).await;
    wait_reported(&scenario, &guard, &[(&held, "pet", "BlockedUnmanagedPod")]).await;
    observe_for(AFTERWARDS, || guard.check(&scenario)).await;

    // The operator clears it.
    Api::<Pod>::namespaced(client.clone(), NS)
        .delete("pet", &DeleteParams::default())
        .await
        .expect("pet deleted by hand");
    wait_upgraded(&scenario, &node_names(4), || async {}).await;
    assert_within_bounds(
        &sla,
        THRESHOLD,
        &[("Deployment", "local", 2), ("Deployment", "web", 4)],
    );
}

/// Two nodes, each with a pod a neighbouring tool opted out of disruption
/// (`karpenter.sh/do-not-disrupt: "true"` on one, `cluster-autoscaler.kubernetes.io/safe-to-evict:
/// "false"` on the other; both pods of Deployments) beside a pod of another healthy Deployment.
/// Neither node is ever started: never cordoned, none of their pods evicted; each is
/// reported blocked naming its pod (`BlockedOptOut`). The 3 other nodes are upgraded. Once the
/// operator removes the annotations, both are admitted and upgraded. Control: a healthy Deployment
/// of 4 spread over the fleet moves within its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_with_pods_opted_out_by_neighbouring_tools_are_never_started_until_cleared() {
    const NS: &str = "opted-out";
    let mut scenario = Scenario::start(5, NS, "1s").await;
    let client = scenario.client.clone();
    let (karpenter_node, autoscaler_node) = (node_name(0), node_name(1));
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    let karpenter = with_template_annotation(
        deployment(NS, "karpenter-pinned", 1),
        keys::KARPENTER_DO_NOT_DISRUPT_ANNOTATION,
        keys::KARPENTER_DO_NOT_DISRUPT_VALUE,
    );
    let autoscaler = with_template_annotation(
        deployment(NS, "autoscaler-pinned", 1),
        keys::CLUSTER_AUTOSCALER_SAFE_TO_EVICT_ANNOTATION,
        keys::CLUSTER_AUTOSCALER_SAFE_TO_EVICT_VALUE,
    );
    scenario
        .pin_to(&karpenter_node, 2, || async {
            create(&client, &karpenter).await;
            create(&client, &deployment(NS, "local-a", 1)).await;
        })
        .await;
    scenario
        .pin_to(&autoscaler_node, 4, || async {
            create(&client, &autoscaler).await;
            create(&client, &deployment(NS, "local-b", 1)).await;
        })
        .await;
    create(&client, &deployment(NS, "web", 4)).await;
    scenario.wait_ready(8).await;
    let karpenter_pod = scenario.app_pods("karpenter-pinned").await[0].name_any();
    let autoscaler_pod = scenario.app_pods("autoscaler-pinned").await[0].name_any();
    let held = [karpenter_node.clone(), autoscaler_node.clone()];
    let guard = OperatorOnly::record(&scenario, &held).await;
    sla.arm();

    scenario.start_controller(&[]);
    let policy = liveness_policy(&scenario, UnmanagedPodPolicy::Never);
    scenario.create_policy(POLICY, policy).await;
    let others: Vec<String> = (2..5).map(node_name).collect();
    wait_upgraded(&scenario, &others, || guard.check(&scenario)).await;
    wait_reported(
        &scenario,
        &guard,
        &[
            (&karpenter_node, &karpenter_pod, "BlockedOptOut"),
            (&autoscaler_node, &autoscaler_pod, "BlockedOptOut"),
        ],
    )
    .await;
    observe_for(AFTERWARDS, || guard.check(&scenario)).await;

    // The operator lifts both opt-outs.
    for (pod, key) in [
        (&karpenter_pod, keys::KARPENTER_DO_NOT_DISRUPT_ANNOTATION),
        (
            &autoscaler_pod,
            keys::CLUSTER_AUTOSCALER_SAFE_TO_EVICT_ANNOTATION,
        ),
    ] {
        let lift = json!({ "metadata": { "annotations": { key: null } } });
        merge_patch::<Pod>(&client, NS, pod, lift).await;
    }
    wait_upgraded(&scenario, &node_names(5), || async {}).await;
    assert_within_bounds(
        &sla,
        THRESHOLD,
        &[
            ("Deployment", "karpenter-pinned", 1),
            ("Deployment", "autoscaler-pinned", 1),
            ("Deployment", "local-a", 1),
            ("Deployment", "local-b", 1),
            ("Deployment", "web", 4),
        ],
    );
}

/// Two nodes whose pods' replacements could only run where they are: a Deployment of 1 with
/// `nodeSelector: kubernetes.io/hostname: <node 0>`, and a Deployment of 1 whose claim is bound to
/// a local PersistentVolume of node 1 (`spec.local` with node affinity to node 1, pre-bound: no
/// provisioner). `kubectl drain` would evict both (a server-side dry-run eviction is allowed) and
/// their replacements would wait Pending until the node is back. Under `workloads.pinnedPods:
/// Block` (the default), neither node is ever started: never cordoned, none of their pods
/// evicted; each is reported blocked naming its pod (`BlockedPinnedPod`), in the status and by
/// `kubectl k8sm blocked`. The control node 2, with a healthy Deployment of 2, is upgraded. Once
/// the operator sets `pinnedPods: Evict`, both are upgraded too, and no workload ever falls below
/// its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_with_pinned_pods_are_never_started_until_the_operator_lets_them_go() {
    const NS: &str = "pinned";
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let client = scenario.client.clone();
    let (by_selector, by_volume, control) = (node_name(0), node_name(1), node_name(2));
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    create(&client, &on_host(deployment(NS, "pinned", 1), &by_selector)).await;
    local_volume(&client, NS, "data", &by_volume).await;
    create(&client, &with_claim(deployment(NS, "db", 1), "data")).await;
    // Running before the other nodes are cordoned to put `web` on the control node.
    scenario.wait_ready(2).await;
    scenario
        .pin_to(&control, 4, || async {
            create(&client, &deployment(NS, "web", 2)).await;
        })
        .await;
    let pinned_pod = scenario.app_pods("pinned").await[0].clone();
    let db_pod = scenario.app_pods("db").await[0].clone();
    assert_eq!(node_of(&pinned_pod), Some(by_selector.as_str()));
    assert_eq!(
        node_of(&db_pod),
        Some(by_volume.as_str()),
        "the scheduler follows the local volume"
    );
    let (pinned_pod, db_pod) = (pinned_pod.name_any(), db_pod.name_any());
    for pod in [&pinned_pod, &db_pod] {
        dry_run_eviction(&client, NS, pod)
            .await
            .unwrap_or_else(|e| panic!("a dry-run eviction of {pod} is allowed: {e}"));
    }
    let held = [by_selector.clone(), by_volume.clone()];
    let guard = OperatorOnly::record(&scenario, &held).await;
    sla.arm();

    scenario.start_controller(&[]);
    let policy = liveness_policy(&scenario, UnmanagedPodPolicy::Never);
    scenario.create_policy(POLICY, policy).await;
    wait_upgraded(&scenario, std::slice::from_ref(&control), || {
        guard.check(&scenario)
    })
    .await;
    wait_reported(
        &scenario,
        &guard,
        &[
            (&by_selector, &pinned_pod, "BlockedPinnedPod"),
            (&by_volume, &db_pod, "BlockedPinnedPod"),
        ],
    )
    .await;
    let rows = blocked_rows(&k8sm_exits(
        &scenario.cluster,
        &["blocked", "-o", "json"],
        3,
    ));
    for (node, pod) in [(&by_selector, &pinned_pod), (&by_volume, &db_pod)] {
        assert!(
            rows.iter()
                .any(|r| r.node == *node && r.name == *pod && r.reason == "BlockedPinnedPod"),
            "`kubectl k8sm blocked` names {pod} on {node}: {rows:?}"
        );
    }
    let table = k8sm_exits(&scenario.cluster, &["blocked", "-o", "wide"], 3);
    for what in [
        "kubernetes.io/hostname=",
        "PersistentVolume local-data",
        "pinnedPods: Evict",
    ] {
        assert!(table.contains(what), "`blocked` says {what:?}:\n{table}");
    }
    observe_for(AFTERWARDS, || guard.check(&scenario)).await;

    // The operator accepts that the replacements wait Pending until their nodes are back.
    scenario
        .patch_policy(POLICY, json!({ "workloads": { "pinnedPods": "Evict" } }))
        .await;
    wait_upgraded(&scenario, &node_names(3), || async {}).await;
    assert_within_bounds(
        &sla,
        THRESHOLD,
        &[
            ("Deployment", "pinned", 1),
            ("Deployment", "db", 1),
            ("Deployment", "web", 2),
        ],
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

/// The workload tests' policy (one drain slot, [`THRESHOLD`], `unmanaged`) with this file's
/// [`NODE_PROGRESS_DEADLINE`].
fn liveness_policy(
    scenario: &Scenario,
    unmanaged: UnmanagedPodPolicy,
) -> ExecutorUpgradePolicySpec {
    ExecutorUpgradePolicySpec {
        node_progress_deadline: NODE_PROGRESS_DEADLINE.parse().expect("a duration"),
        ..workload_policy(scenario, unmanaged)
    }
}

/// `deployment` whose pods may run only on `node` (`nodeSelector: kubernetes.io/hostname`).
fn on_host(mut deployment: Deployment, node: &str) -> Deployment {
    let spec = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut());
    spec.expect("a pod template")
        .node_selector
        .get_or_insert_with(BTreeMap::new)
        .insert("kubernetes.io/hostname".to_owned(), node.to_owned());
    deployment
}

/// `deployment` whose pods mount the claim `claim`.
fn with_claim(mut deployment: Deployment, claim: &str) -> Deployment {
    let spec = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut());
    spec.expect("a pod template")
        .volumes
        .get_or_insert_with(Vec::new)
        .push(
            serde_json::from_value(
                json!({"name": "data", "persistentVolumeClaim": {"claimName": claim}}),
            )
            .expect("a volume"),
        );
    deployment
}

/// A local PersistentVolume `local-<claim>` of `node` (node affinity to its hostname) and the claim
/// `claim` bound to it, both naming the other, so that no provisioner is needed; returns once the
/// claim is Bound.
async fn local_volume(client: &kube::Client, namespace: &str, claim: &str, node: &str) {
    let class = "k8sm-local";
    let volume: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": format!("local-{claim}")},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": class,
            "local": {"path": "/mnt/disks/data"},
            "claimRef": {"namespace": namespace, "name": claim},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
        }
    }))
    .expect("a PersistentVolume");
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &volume)
        .await
        .expect("PersistentVolume created");
    let claimed: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": claim, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": class,
            "volumeName": format!("local-{claim}"),
            "resources": {"requests": {"storage": "1Gi"}}
        }
    }))
    .expect("a PersistentVolumeClaim");
    create(client, &claimed).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace);
    poll(SETUP, POLL, || async {
        let phase = claims.get(claim).await.ok().and_then(|c| c.status?.phase);
        match phase.as_deref() {
            Some("Bound") => Ok(()),
            _ => Err(phase),
        }
    })
    .await
    .unwrap_or_else(|phase| panic!("claim {claim} is Bound: {phase:?}"));
}

/// `deployment` whose pods KWOK never makes Ready: they stay Pending.
fn never_ready(deployment: Deployment) -> Deployment {
    with_template_annotation(deployment, READY_DELAY_ANNOTATION, NEVER)
}

/// The names of the first `count` KWOK nodes.
fn node_names(count: usize) -> Vec<String> {
    (0..count).map(node_name).collect()
}

/// Pod name → UID.
fn uids(pods: &[Pod]) -> BTreeMap<String, String> {
    pods.iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect()
}

/// Waits until `count` pods of the Deployment `app` are bound to nodes, none Ready (and, with
/// `running`, each Running: crash-looping); returns their names.
async fn wait_scheduled_not_ready(
    scenario: &Scenario,
    app: &str,
    count: usize,
    running: bool,
) -> BTreeSet<String> {
    wait_for(
        scenario,
        &format!("{count} pods of {app} are scheduled and not Ready"),
        SETUP,
        || async {
            let pods = scenario.app_pods(app).await;
            let placed = pods.iter().filter(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                node_of(p).is_some() && !is_ready(p) && (!running || phase == Some("Running"))
            });
            let names: BTreeSet<String> = placed.map(ResourceExt::name_any).collect();
            (names.len() == count && pods.len() == count).then_some(names)
        },
    )
    .await
}

/// Waits (up to [`UPGRADE`]) until every one of `nodes` is upgraded, calling `check` (which panics
/// on a violation) at each look, while the controller keeps running.
async fn wait_upgraded<F, Fut>(scenario: &Scenario, nodes: &[String], mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let started = Instant::now();
    wait_for(
        scenario,
        &format!("{} are upgraded", nodes.join(", ")),
        UPGRADE,
        || {
            let checked = check();
            async move {
                checked.await;
                scenario.controllers[0].assert_running();
                let up = scenario.upgraded_names().await;
                nodes.iter().all(|n| up.contains(n)).then_some(())
            }
        },
    )
    .await;
    println!(
        "{} upgraded after {:.1}s",
        nodes.join(", "),
        started.elapsed().as_secs_f64()
    );
}

/// Waits until the policy's status lists each `(node, pod, reason)` among its blocked pods, while
/// `guard` holds.
async fn wait_reported(scenario: &Scenario, guard: &OperatorOnly, expected: &[(&str, &str, &str)]) {
    let lines = wait_for(
        scenario,
        &format!("the status reports {expected:?}"),
        SETUP,
        || async {
            guard.check(scenario).await;
            let status = scenario.policy(POLICY).await.status?;
            expected
                .iter()
                .map(|(node, pod, reason)| {
                    status
                        .blocked_pods
                        .iter()
                        .find(|p| p.node == *node && p.name == *pod && p.reason == *reason)
                        .map(|p| format!("{} {} {}: {}", p.node, p.name, p.reason, p.message))
                })
                .collect::<Option<Vec<String>>>()
        },
    )
    .await;
    println!("reported:\n{}", lines.join("\n"));
}

/// Nodes that only an operator can finish, and the pods on them when the test recorded them.
struct OperatorOnly {
    nodes: Vec<String>,
    /// pod name → uid
    pods: BTreeMap<String, String>,
    starts: NodeStarts,
    deletions: DeletionLog,
}

impl OperatorOnly {
    async fn record(scenario: &Scenario, nodes: &[String]) -> Self {
        let mut pods = BTreeMap::new();
        for node in nodes {
            pods.extend(uids(&scenario.pods_on(node).await));
        }
        assert!(!pods.is_empty(), "pods run on {nodes:?}");
        Self {
            nodes: nodes.to_vec(),
            pods,
            starts: NodeStarts::start(&scenario.client).await,
            deletions: DeletionLog::start(&scenario.client, &scenario.namespace, "").await,
        }
    }

    /// Panics if one of the nodes was ever cordoned or admitted, or one of their pods was ever
    /// deleted or evicted (as the watches saw), or is not there now.
    async fn check(&self, scenario: &Scenario) {
        self.starts.assert_never_started(&self.nodes);
        let uids: BTreeSet<&String> = self.pods.values().collect();
        let taken: Vec<String> = self
            .deletions
            .deleted()
            .into_iter()
            .filter(|d| uids.contains(&d.uid))
            .map(|d| format!("{} (evicted: {})", d.name, d.evicted))
            .collect();
        assert!(
            taken.is_empty(),
            "pods of {:?}, which only an operator can finish, were taken: {taken:?}",
            self.nodes
        );
        let live = scenario.live_pods().await;
        for (pod, uid) in &self.pods {
            assert_eq!(live.get(pod), Some(uid), "{pod} stays where it ran");
        }
    }
}

/// Polls `check` every 500 ms until it yields a value; after `timeout`, panics with what an
/// operator would look at.
async fn wait_for<T, F, Fut>(scenario: &Scenario, what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let every = Duration::from_millis(500);
    let looked = poll(timeout, every, || {
        let answer = check();
        async move { answer.await.ok_or(()) }
    })
    .await;
    match looked {
        Ok(value) => value,
        Err(()) => panic!(
            "timed out after {timeout:?} waiting until {what}\n{}",
            diagnosis(scenario).await
        ),
    }
}

/// The nodes (executor, k8sm's keys, cordon), the policy's status, `kubectl k8sm blocked`, the pods
/// and the controller's last log lines.
async fn diagnosis(scenario: &Scenario) -> String {
    let mut out = String::from("--- nodes ---\n");
    for node in scenario.nodes().await {
        let id = node.annotations().get(keys::EXECUTOR_ID_ANNOTATION);
        let executor = match id {
            Some(id) if *id == scenario.new_id => "new",
            Some(id) if *id == scenario.old_id => "old",
            Some(_) => "other",
            None => "none",
        };
        let _ = writeln!(
            out,
            "{}: executor {executor}, upgraded {}, cordoned {}, {:?}",
            node.name_any(),
            is_upgraded(&node, &scenario.new_id),
            is_cordoned(&node),
            k8sm_keys(&node)
        );
    }
    let policy = Api::<ExecutorUpgradePolicy>::all(scenario.client.clone())
        .get_opt(POLICY)
        .await
        .ok()
        .flatten();
    if let Some(status) = policy.and_then(|p| p.status) {
        let _ = writeln!(out, "--- status: upgraded {:?} ---", status.upgraded);
        for node in &status.nodes {
            let _ = writeln!(
                out,
                "node {} {}: {:?}",
                node.name, node.phase, node.blockers
            );
        }
        for pod in &status.blocked_pods {
            let _ = writeln!(
                out,
                "pod {} {} {}: {}",
                pod.node, pod.name, pod.reason, pod.message
            );
        }
    }
    let blocked = k8sm(&scenario.cluster, &["blocked"]);
    let _ = writeln!(
        out,
        "--- kubectl k8sm blocked ---\n{}{}",
        blocked.stdout, blocked.stderr
    );
    out.push_str("--- pods ---\n");
    for pod in scenario.pods().await {
        let _ = writeln!(
            out,
            "{} on {:?}: ready {}, terminating {}",
            pod.name_any(),
            node_of(&pod),
            is_ready(&pod),
            pod.metadata.deletion_timestamp.is_some()
        );
    }
    for controller in &scenario.controllers {
        let _ = writeln!(
            out,
            "--- {} ---\n{}",
            controller.log.display(),
            controller.log_tail(30)
        );
    }
    out
}
