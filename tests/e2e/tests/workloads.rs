//! Built-in workloads as production clusters run them (docs/design.md §2, §5.2, §5.3): a stuck
//! rollout, a pod that is not Ready, single-replica Deployments moved by surge rollouts. Each test
//! runs its own small cluster with the SLA watcher armed before the controller starts, and checks
//! each workload it created against the bound computed from it. Pods of other controllers are in
//! `other_controllers.rs`.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use k8sm_api::keys::{RESTARTED_AT_ANNOTATION, STALLED_ANNOTATION, SURGE_MOVE_ANNOTATION};
use k8sm_api::{NodePhase, Surge, UnmanagedPodPolicy};
use k8sm_e2e::events::{events_about, first_seen, occurrences, regards, regards_one_of};
use k8sm_e2e::kubectl_ok;
use k8sm_e2e::nodes::is_cordoned;
use k8sm_e2e::objects::{get_node, is_live, merge_patch, node_of};
use k8sm_e2e::plugin::{BlockedRow, blocked_rows, k8sm_exits, k8sm_ok};
use k8sm_e2e::scenario::{Scenario, is_ready};
use k8sm_e2e::sla::{SlaWatcher, assert_within_bounds};
use k8sm_e2e::status::status_entry;
use k8sm_e2e::waits::observe_for;
use k8sm_e2e::workload_policy::{NODE_PROGRESS_DEADLINE, THRESHOLD, workload_policy};
use k8sm_e2e::workloads::{create, deployment, fill_nodes, pdb_min_available};
use k8sm_testcluster::node_name;

const POLICY: &str = "fleet";
/// Generous deadlines: the clusters of this file run two at a time on small machines.
const SETUP: Duration = Duration::from_secs(120);
const PROGRESS: Duration = Duration::from_secs(300);

// ---------------------------------------------------------------------------------------------------------------
// A Deployment whose rollout is stuck
// ---------------------------------------------------------------------------------------------------------------

/// A Deployment of 4 mid-rollout, stuck: its old ReplicaSet has 3 Ready pods, its new one 2 pods
/// that no node can take. Its bound at threshold 90 is 3, and it has 3: none of its pods may go,
/// although the old ReplicaSet alone looks fully ready (3 of 3). Admission looks at owners:
/// although its node has the fewest pods, the nodes whose pods can move take the only drain slot
/// first and are upgraded; then it is admitted, waits on the Deployment, stalls after
/// `nodeProgressDeadline`, gives the slot up (uncordoned, `Stalled`, Blocked), rests as long as the
/// deadline although the slot is free (its pods still cannot move) and is admitted again. After
/// `kubectl rollout undo` the Deployment recovers and the upgrade completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_rollout_keeps_its_deployment_at_its_bound_and_holds_no_other_node() {
    const NS: &str = "stuck-rollout";
    const REPLICAS: u32 = 4;
    let mut scenario = Scenario::start(5, NS, "1s").await;
    let client = scenario.client.clone();
    let stuck = node_name(0);
    let others: Vec<String> = (1..5).map(node_name).collect();
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));

    // Every web pod on the node that gets stuck; a surge of 1 and 1 unavailable, so that the
    // rollout takes one old pod away and leaves two new ones pending.
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
    scenario
        .pin_to(&stuck, REPLICAS as usize, || async {
            create(&client, &web).await;
        })
        .await;
    // Unmanaged pods on every other node, more than the 3 web pods that stay on the stuck node: by
    // pod count the stuck node would be admitted first; only the owner-aware admission puts the
    // others, whose pods can move, first.
    fill_nodes(&client, NS, &others, 4).await;
    scenario
        .wait_ready(REPLICAS as usize + 4 * others.len())
        .await;

    // The rollout to a template that no node can run.
    let nowhere = json!({ "spec": { "template": { "spec": {
        "nodeSelector": { "k8sm.test/pool": "nowhere" } } } } });
    merge_patch::<Deployment>(&client, NS, "web", nowhere).await;
    let stuck_pods: BTreeSet<String> = scenario
        .wait_until(
            "the rollout is stuck: 3 old pods Ready, 2 new ones pending",
            SETUP,
            || async {
                let pods = scenario.app_pods("web").await;
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
            workload_policy(&scenario, UnmanagedPodPolicy::Delete),
        )
        .await;
    // Admitted last, it waits on the Deployment (not on its ReplicaSet), whose controller is still
    // replacing pods (the rollout is under way: k8sm takes none of its Ready pods meanwhile),
    // as Events and `blocked` say.
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
        note.contains("Deployment web is rolling out"),
        "judged as the Deployment: {note}"
    );
    // One slot: the nodes whose pods could move were admitted and upgraded, one at a time, before
    // it.
    let upgraded_before = scenario.upgraded_names().await;
    assert_eq!(
        upgraded_before,
        others.iter().cloned().collect::<BTreeSet<_>>(),
        "the nodes whose pods can move took the only slot before {stuck}"
    );
    let rows = blocked_rows(&k8sm_exits(
        &scenario.cluster,
        &["blocked", "-o", "json"],
        3,
    ));
    for pod in &stuck_pods {
        let row = BlockedRow {
            node: stuck.clone(),
            namespace: NS.into(),
            name: pod.clone(),
            reason: "WaitingForOwner".into(),
            owner: Some("Deployment/web".into()),
            class: "owned".into(),
        };
        assert!(
            rows.contains(&row),
            "`kubectl k8sm blocked` lists {pod} waiting for Deployment/web: {rows:?}"
        );
    }

    // No progress for the deadline: it stalls, gives its slot up, and the other nodes are upgraded
    // meanwhile while every web pod stays where it is.
    let web_untouched = || async {
        let here: BTreeSet<String> = scenario
            .app_pods("web")
            .await
            .iter()
            .filter(|p| is_ready(p) && is_live(p))
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
                let status = status_entry(&scenario.policy(POLICY).await, &stuck)?;
                let stalled = events_about(&client, "Stalled", &stuck).await;
                let node = get_node(&client, &stuck).await;
                let stalled_at = node.annotations().get(STALLED_ANNOTATION)?;
                let stalled_at = chrono::DateTime::parse_from_rfc3339(stalled_at).ok()?;
                (status.phase == NodePhase::Blocked && !is_cordoned(&node) && !stalled.is_empty())
                    .then(|| (status, stalled[0].clone(), stalled_at))
            },
        )
        .await;
    let (status, stalled, stalled_at) = stall;
    // Its rest ends a deadline after its stall, by the controller's clock (the same machine's).
    let rest_ends = stalled_at + chrono::Duration::from_std(NODE_PROGRESS_DEADLINE).expect("short");
    assert_eq!(stalled.type_.as_deref(), Some("Warning"));
    let stall_note = stalled.note.clone().unwrap_or_default();
    assert!(
        stall_note.contains("no pod left the node since")
            && stall_note.contains("Deployment web is rolling out"),
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
            .any(|b| b.contains("Deployment web is rolling out")),
        "the status says what the node waits on: {:?}",
        status.blockers
    );
    // It rests Blocked for the deadline (the other nodes were served before it: nothing else needs
    // the slot).
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

    // Nothing holds the fleet: the 4 other nodes are upgraded, and the stuck node is admitted again
    // behind them, once rested: not before its rest ends, although its pods still cannot move
    // and the slot is free.
    scenario
        .wait_until(
            &format!("the other nodes are upgraded and {stuck} is admitted again after its rest"),
            PROGRESS,
            || async {
                web_untouched().await;
                let upgraded = scenario.upgraded_names().await;
                // The Events API counts a repeated Event in its series.
                let admissions: u32 = events_about(&client, "Cordoned", &stuck)
                    .await
                    .iter()
                    .map(occurrences)
                    .sum();
                let again = admissions >= 2;
                if again {
                    assert!(
                        chrono::Utc::now() >= rest_ends,
                        "{stuck} admitted again before its rest ended at {rest_ends}"
                    );
                }
                (upgraded == others.iter().cloned().collect() && again).then_some(())
            },
        )
        .await;
    assert_eq!(
        sla.ready("Deployment", "web"),
        3,
        "the Deployment kept 3 Ready"
    );

    // The operator rolls back: the Deployment is whole again, its pods move one at a time, and the
    // upgrade ends.
    kubectl_ok(
        &scenario.cluster,
        &["rollout", "undo", "deployment/web", "-n", NS],
    );
    scenario
        .wait_all_upgraded_and_clean(POLICY, 5, PROGRESS)
        .await;
    for pod in &stuck_pods {
        let evicted = events_about(&client, "Evicted", pod).await;
        assert_eq!(evicted.len(), 1, "{pod} evicted once, after the rollback");
        let note = evicted[0].note.as_deref().unwrap_or_default();
        assert!(
            note.contains("workload Deployment web"),
            "{pod} judged as the Deployment: {note}"
        );
    }
    assert_within_bounds(&sla, THRESHOLD, &[("Deployment", "web", REPLICAS)]);
}

// ---------------------------------------------------------------------------------------------------------------
// A pod that is not Ready
// ---------------------------------------------------------------------------------------------------------------

/// A Deployment of 5 at threshold 90 (bound 4) whose pods all run on one node, one of them not
/// Ready: 4 Ready, so no Ready pod may go, but the one that is not Ready may, costing nothing. It
/// is evicted first, the Deployment is whole again, the others follow one at a time, and the node
/// finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_made_not_ready_moves_and_its_node_finishes() {
    const NS: &str = "not-ready";
    const REPLICAS: u32 = 5;
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let client = scenario.client.clone();
    let node = node_name(0);
    scenario
        .pin_to(&node, REPLICAS as usize, || async {
            create(&client, &deployment(NS, "web", REPLICAS as i32)).await;
        })
        .await;
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    let pods = scenario.app_pods("web").await;
    let sick = pods.first().expect("a web pod").name_any();

    // As a failing readiness probe would: the Ready condition False. KWOK leaves a Running pod's
    // status alone.
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
        let pod = scenario.pod(&sick).await.expect("the sick pod");
        assert!(!is_ready(&pod), "{sick} stays not Ready");
    })
    .await;
    sla.arm();

    scenario.start_controller(&[]);
    scenario
        .create_policy(
            POLICY,
            workload_policy(&scenario, UnmanagedPodPolicy::Never),
        )
        .await;
    scenario
        .wait_all_upgraded_and_clean(POLICY, 3, PROGRESS)
        .await;

    let evicted = scenario.events("Evicted").await;
    let sick_evicted: Vec<&Event> = evicted.iter().filter(|e| regards(e, &sick)).collect();
    assert_eq!(sick_evicted.len(), 1, "{sick} evicted once");
    let note = sick_evicted[0].note.as_deref().unwrap_or_default();
    assert!(
        note.contains("pod not Ready") && note.contains("Deployment web keeps 4/5 ready"),
        "moving it cost no readiness: {note}"
    );
    let first_at = first_seen(sick_evicted[0]);
    for other in pods
        .iter()
        .map(ResourceExt::name_any)
        .filter(|p| *p != sick)
    {
        let events = events_about(&client, "Evicted", &other).await;
        assert_eq!(events.len(), 1, "{other} evicted once");
        assert!(
            first_seen(&events[0]) > first_at,
            "{other} was evicted before the pod that is not Ready"
        );
        let note = events[0].note.as_deref().unwrap_or_default();
        assert!(
            note.contains("Deployment web ready 5/5"),
            "a Ready pod goes only once the Deployment is whole: {note}"
        );
    }
    assert_within_bounds(&sla, THRESHOLD, &[("Deployment", "web", REPLICAS)]);
}

// ---------------------------------------------------------------------------------------------------------------
// Single-replica Deployments moved by surge rollouts
// ---------------------------------------------------------------------------------------------------------------

/// `spec.workloads.surge: SingleReplica`. Three Deployments of one replica on one node: `solo`,
/// `guarded` (with a `minAvailable: 1` PodDisruptionBudget, which blocks every drain tool's
/// eviction for ever) and `recreate` (strategy Recreate, which stops its old pod first). k8sm moves
/// the first two by a rollout of their Deployment: the new pod starts on another node and is Ready
/// before the old one goes, so neither ever has 0 Ready pods (the SLA watcher, armed before the
/// controller starts, sees every change); a `Moved` Event says how. `recreate` cannot surge: it is
/// evicted, and its Event says why. Every node is upgraded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_replica_deployments_move_by_a_rollout_and_keep_their_ready_pod() {
    const NS: &str = "surge";
    let mut scenario = Scenario::start(3, NS, "1s").await;
    let client = scenario.client.clone();
    let first = node_name(0);
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    let mut recreate = deployment(NS, "recreate", 1);
    if let Some(spec) = recreate.spec.as_mut() {
        spec.strategy = Some(DeploymentStrategy {
            type_: Some("Recreate".into()),
            rolling_update: None,
        });
    }
    scenario
        .pin_to(&first, 3, || async {
            create(&client, &deployment(NS, "solo", 1)).await;
            create(&client, &deployment(NS, "guarded", 1)).await;
            create(&client, &recreate).await;
        })
        .await;
    create(
        &client,
        &pdb_min_available(NS, "guarded", "guarded", IntOrString::Int(1)),
    )
    .await;
    let pod_of = |app: &'static str| {
        let scenario = &scenario;
        async move {
            let pods = scenario.app_pods(app).await;
            assert_eq!(pods.len(), 1, "{app} has one pod");
            pods[0].name_any()
        }
    };
    let moving: BTreeSet<String> = [pod_of("solo").await, pod_of("guarded").await].into();
    let evicted_pod = pod_of("recreate").await;
    sla.arm();
    scenario
        .wait_until(
            "the SLA watcher sees each Deployment Ready",
            SETUP,
            || async {
                ["solo", "guarded", "recreate"]
                    .iter()
                    .all(|name| sla.ready("Deployment", name) == 1)
                    .then_some(())
            },
        )
        .await;

    scenario.start_controller(&[]);
    let mut spec = workload_policy(&scenario, UnmanagedPodPolicy::Delete);
    spec.workloads.surge = Surge::SingleReplica;
    // Long enough that a loaded machine brings the new pods up before a move falls back to
    // eviction.
    spec.node_progress_deadline = "3m".parse().expect("a duration");
    scenario.create_policy(POLICY, spec).await;
    scenario.wait_all_upgraded(POLICY, 3, PROGRESS).await;

    // Never below one Ready pod for the two that moved; the bound for the one evicted (0 for d =
    // 1).
    assert_within_bounds(
        &sla,
        THRESHOLD,
        &[
            ("Deployment", "solo", 1),
            ("Deployment", "guarded", 1),
            ("Deployment", "recreate", 1),
        ],
    );
    for record in sla.records() {
        if record.name == "solo" || record.name == "guarded" {
            assert!(
                record.min_ready >= 1,
                "Deployment {} kept a Ready pod throughout: {record:?}",
                record.name
            );
        }
    }
    // How each moved: a Moved Event on each moved pod, no eviction of it; the Recreate one evicted,
    // saying why.
    let moved = scenario.events("Moved").await;
    for pod in &moving {
        let event = moved
            .iter()
            .find(|e| regards(e, pod))
            .unwrap_or_else(|| panic!("a Moved Event about {pod}: {moved:?}"));
        let note = event.note.clone().unwrap_or_default();
        assert!(
            note.contains("a rollout of it starts the new pod on another node")
                && note.contains("keeps 1/1 ready"),
            "{note}"
        );
    }
    let evicted = scenario.events("Evicted").await;
    assert!(
        evicted.iter().all(|e| !regards_one_of(e, &moving)),
        "no moved pod was evicted: {evicted:?}"
    );
    let recreate_evicted = evicted
        .iter()
        .find(|e| regards(e, &evicted_pod))
        .unwrap_or_else(|| panic!("{evicted_pod} evicted: {evicted:?}"));
    let note = recreate_evicted.note.clone().unwrap_or_default();
    assert!(
        note.contains("no surge move: its strategy is Recreate"),
        "{note}"
    );
    // The moves were rollouts k8sm started: each Deployment's template carries its restart
    // annotation, and its record names the pod it moved.
    for app in ["solo", "guarded"] {
        let deployment: Deployment = Api::namespaced(client.clone(), NS)
            .get(app)
            .await
            .expect("the Deployment");
        let template = deployment
            .spec
            .and_then(|s| s.template.metadata)
            .and_then(|m| m.annotations)
            .unwrap_or_default();
        assert!(
            template.contains_key(RESTARTED_AT_ANNOTATION),
            "{app}: {template:?}"
        );
        let record = deployment
            .metadata
            .annotations
            .unwrap_or_default()
            .get(SURGE_MOVE_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        let moved_pod = moving.iter().find(|p| p.starts_with(app)).expect("its pod");
        let uid = scenario
            .events("Moved")
            .await
            .into_iter()
            .find(|e| regards(e, moved_pod))
            .and_then(|e| e.regarding?.uid)
            .unwrap_or_default();
        assert!(record.ends_with(&uid) && !uid.is_empty(), "{app}: {record}");
    }
}
