//! Bad input on a real cluster (nodes, pods whose owner is gone, policies, plugin requests): what
//! the controller and the plugin do with it, as an operator sees it (the exact Event, status
//! condition or one-sentence error), while the controller keeps running and upgrades everything
//! else. Two clusters, one per test, run side by side.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use kube::api::{DeleteParams, PropagationPolicy};
use kube::{Api, ResourceExt};
use serde_json::json;

use k8sm_api::{
    ExecutorUpgradePolicySpec, NodePhase, UnmanagedPodPolicy, UnmanagedPods, condition_types, keys,
};
use k8sm_e2e::events::{events_about, k8sm_events, print_k8sm_events};
use k8sm_e2e::nodes::is_cordoned;
use k8sm_e2e::objects::{get_node, merge_patch, names, patch_node, pods_in};
use k8sm_e2e::plugin;
use k8sm_e2e::scenario::{Scenario, is_upgraded};
use k8sm_e2e::sla::{SlaWatcher, assert_no_violations};
use k8sm_e2e::status::required_condition;
use k8sm_e2e::workloads::{create, deployment};
use k8sm_testcluster::node_name;

/// Generous deadlines: the two clusters of this file run side by side on small machines.
const SETUP: Duration = Duration::from_secs(90);
const PROGRESS: Duration = Duration::from_secs(150);
/// A finalizer nobody removes but the test: it keeps objects in deletion for as long as the test
/// wants.
const HOLD: &str = "k8sm.test/hold";
const THRESHOLD: u8 = 50;

// ---------------------------------------------------------------------------------------------------------------
// Nodes and pods
// ---------------------------------------------------------------------------------------------------------------

/// Nodes: an incompatible-executor annotation that is not a time ("yesterday"), a garbage
/// executor-id annotation, no executor-id annotation at all (never started, nor cordoned, until
/// its executor shows up). Pods whose owner is gone: a ReplicaSet deleted with
/// `propagationPolicy: Orphan` (the garbage collector strips the pods' owner references, so they
/// are unmanaged pods) and a ReplicaSet held in deletion by a finalizer (its pods keep a controller
/// reference to an owner that replaces nothing any more); a Deployment scaled to 0 whose pods stay
/// terminating; a Deployment of 0 replicas. (An owner absent from the cluster while its pods still
/// name it is a passing state that the garbage collector ends within moments: the planner's unit
/// tests cover it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_nodes_and_pods_are_reported_and_every_node_is_upgraded() {
    const NS: &str = "bad-nodes";
    const OWNERS: &str = "bad-owners";
    let mut scenario = Scenario::start(8, NS, "1s").await;
    scenario
        .cluster
        .create_namespace(OWNERS)
        .await
        .expect("namespace");
    let client = scenario.client.clone();
    let malformed = node_name(0);
    let garbage = node_name(1);
    let no_id = node_name(2);
    let orphans_node = node_name(3);
    let sunset_node = node_name(4);

    // node-0000: the incompatible-executor annotation is not a time.
    patch_node(
        &client,
        &malformed,
        json!({ "metadata": { "annotations": { keys::INCOMPATIBLE_EXECUTOR_ANNOTATION: "yesterday" } } }),
    )
    .await;
    // node-0001: its executor reports garbage.
    patch_node(
        &client,
        &garbage,
        json!({ "metadata": { "annotations": { keys::EXECUTOR_ID_ANNOTATION: "sha256:garbage" } } }),
    )
    .await;
    // node-0002: no executor reports anything. The simulated executors leave it first (they select
    // `type=kwok`), or they would publish an ID again; they see no change of a node they no
    // longer select.
    patch_node(
        &client,
        &no_id,
        json!({ "metadata": { "labels": { "type": null } } }),
    )
    .await;
    patch_node(
        &client,
        &no_id,
        json!({ "metadata": { "annotations": { keys::EXECUTOR_ID_ANNOTATION: null } } }),
    )
    .await;

    // Ordinary workloads, under the SLA watcher: they must move as usual around the bad input.
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    create(&client, &deployment(NS, "web", 8)).await;
    create(&client, &deployment(NS, "idle", 0)).await;
    // Bad owners, in their own namespace (the SLA watcher would count their pods).
    create(
        &client,
        &pinned_replica_set(OWNERS, "orphan", 2, &orphans_node, &[]),
    )
    .await;
    create(
        &client,
        &pinned_replica_set(OWNERS, "ghost", 2, &orphans_node, &[HOLD]),
    )
    .await;
    let mut sunset = deployment(OWNERS, "sunset", 2);
    pin(
        sunset.spec.as_mut().map(|s| &mut s.template),
        &sunset_node,
        &[HOLD],
    );
    create(&client, &sunset).await;
    scenario.wait_ready_in(NS, 8).await;
    scenario.wait_ready_in(OWNERS, 6).await;
    sla.arm();

    // The ReplicaSet `orphan` goes with propagationPolicy Orphan: its pods stay, and the garbage
    // collector removes their owner reference.
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), OWNERS);
    replica_sets
        .delete(
            "orphan",
            &DeleteParams {
                propagation_policy: Some(PropagationPolicy::Orphan),
                ..DeleteParams::default()
            },
        )
        .await
        .expect("orphan deleted");
    // The ReplicaSet `ghost` is deleted, but its finalizer keeps it in deletion: its pods keep a
    // controller reference to an owner that is going away and replaces nothing.
    replica_sets
        .delete("ghost", &DeleteParams::default())
        .await
        .expect("ghost deleted");
    // The Deployment `sunset` is scaled to 0: its pods are deleted, and their finalizer keeps them
    // terminating.
    merge_patch::<Deployment>(
        &client,
        OWNERS,
        "sunset",
        json!({ "spec": { "replicas": 0 } }),
    )
    .await;
    let (orphans, ghosts, sunsets) = scenario
        .wait_until(
            "orphan's pods lost their owner, ghost is in deletion, sunset's pods terminate",
            SETUP,
            || async {
                let pods = pods_in(&client, OWNERS).await;
                let by_app = |app: &str| -> Vec<Pod> {
                    pods.iter()
                        .filter(|p| p.labels().get("app").map(String::as_str) == Some(app))
                        .cloned()
                        .collect()
                };
                let (orphans, ghosts, sunsets) =
                    (by_app("orphan"), by_app("ghost"), by_app("sunset"));
                let orphaned =
                    orphans.len() == 2 && orphans.iter().all(|p| p.owner_references().is_empty());
                let ghost_going = replica_sets
                    .get_opt("ghost")
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|rs| rs.metadata.deletion_timestamp.is_some());
                let dangling = ghosts.len() == 2
                    && ghosts.iter().all(|p| {
                        p.owner_references()
                            .iter()
                            .any(|r| r.name == "ghost" && r.controller == Some(true))
                    });
                let terminating = sunsets.len() == 2
                    && sunsets
                        .iter()
                        .all(|p| p.metadata.deletion_timestamp.is_some());
                (orphaned && ghost_going && dangling && terminating).then_some((
                    names(&orphans),
                    names(&ghosts),
                    names(&sunsets),
                ))
            },
        )
        .await;
    assert_eq!(
        get_node(&client, &no_id)
            .await
            .annotations()
            .get(keys::EXECUTOR_ID_ANNOTATION),
        None,
        "{no_id} reports no executor ID"
    );

    scenario.start_controller(&[]);
    let mut spec = fleet_spec(&scenario, 4);
    spec.unmanaged_pods = UnmanagedPods {
        policy: UnmanagedPodPolicy::Delete,
        timeout: None,
    };
    scenario.create_policy("fleet", spec).await;

    // Everything else is upgraded; the node without an executor is never started (nothing would
    // obey a kamikaze), and the node of `sunset` waits for its terminating pods, never evicting
    // them.
    let ordinary = [0, 1, 3, 5, 6, 7].map(node_name);
    scenario
        .wait_until(
            "the other nodes are upgraded, the node without executor is reported and untouched, sunset's node waits",
            PROGRESS,
            || async {
                scenario.controllers[0].assert_running();
                for pod in &sunsets {
                    for reason in ["Evicted", "DeletedUnmanagedPod", "DeletedFinishedPod"] {
                        assert!(
                            events_about(&scenario.client, reason, pod).await.is_empty(),
                            "terminating pod {pod}: {reason}"
                        );
                    }
                }
                let nodes = scenario.nodes().await;
                let upgraded = ordinary.iter().all(|name| {
                    nodes
                        .iter()
                        .any(|n| n.name_any() == *name && is_upgraded(n, &scenario.new_id))
                });
                let untouched = nodes.iter().any(|n| {
                    n.name_any() == no_id
                        && !is_cordoned(n)
                        && !n.annotations().contains_key(keys::DRAINING_ANNOTATION)
                        && !n.annotations().contains_key(keys::KAMIKAZE_ANNOTATION)
                });
                assert!(untouched, "{no_id} is never started");
                let status = scenario.policy("fleet").await.status?;
                // Handed back once its pods count as stuck: not cordoned.
                let handed_back = nodes
                    .iter()
                    .any(|n| n.name_any() == sunset_node && !is_cordoned(n));
                let waiting = status.nodes.iter().any(|n| {
                    n.name == sunset_node
                        && sunset_waits(n)
                        && (n.phase == NodePhase::Draining || handed_back)
                });
                let reported = status.nodes.iter().any(|n| {
                    n.name == no_id
                        && n.phase == NodePhase::Blocked
                        && n.blockers.iter().any(|b| b.contains("no executor would obey a kamikaze"))
                });
                (upgraded && waiting && reported).then_some(())
            },
        )
        .await;
    print_k8sm_events(&scenario.client).await;

    // The Events that tell the operator what happened with each bad input.
    let note = |e: &Event| e.note.clone().unwrap_or_default();
    let about_idle: Vec<String> = k8sm_events(&scenario.client)
        .await
        .iter()
        .filter(|e| note(e).contains("idle"))
        .map(note)
        .collect();
    assert!(
        about_idle.is_empty(),
        "the Deployment of 0 replicas is nothing to report: {about_idle:?}"
    );
    let malformed_events = events_about(&scenario.client, "MalformedAnnotation", &malformed).await;
    assert_eq!(
        malformed_events.iter().map(note).collect::<Vec<_>>(),
        [format!(
            "annotation {} is \"yesterday\", not an RFC 3339 time: fix or remove it",
            keys::INCOMPATIBLE_EXECUTOR_ANNOTATION
        )],
        "one MalformedAnnotation Event on {malformed}"
    );
    assert_eq!(
        events_about(&scenario.client, "MalformedAnnotation", "fleet")
            .await
            .iter()
            .map(note)
            .collect::<Vec<_>>(),
        [format!(
            "1 node(s) carry unreadable k8sm annotations: {malformed}"
        )],
        "the policy names the node too"
    );
    let marked = |node: &str| {
        let node = node.to_owned();
        let scenario = &scenario;
        async move {
            events_about(&scenario.client, "Marked", &node)
                .await
                .iter()
                .map(note)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        marked(&garbage).await,
        [format!(
            "marked incompatible: annotation {} is \"sha256:garbage\", not the target {}",
            keys::EXECUTOR_ID_ANNOTATION,
            scenario.new_id
        )]
    );
    assert_eq!(
        marked(&no_id).await,
        [format!(
            "marked incompatible: annotation {} is missing (the node reports no executor), not the target {}",
            keys::EXECUTOR_ID_ANNOTATION,
            scenario.new_id
        )]
    );
    for pod in &orphans {
        assert_eq!(
            events_about(&scenario.client, "DeletedUnmanagedPod", pod)
                .await
                .iter()
                .map(note)
                .collect::<Vec<_>>(),
            [format!(
                "{OWNERS}/{pod} on {orphans_node}: delete unmanaged pod (no controller) (by eviction)"
            )]
        );
    }
    for pod in &ghosts {
        assert_eq!(
            events_about(&scenario.client, "DeletedUnmanagedPod", pod)
                .await
                .iter()
                .map(note)
                .collect::<Vec<_>>(),
            [format!(
                "{OWNERS}/{pod} on {orphans_node}: delete unmanaged pod: its controller ReplicaSet/ghost is being deleted \
                 (by eviction)"
            )]
        );
    }
    let status = scenario.policy("fleet").await.status.expect("status");
    let waiting = status
        .nodes
        .iter()
        .find(|n| n.name == sunset_node)
        .expect("sunset's node is reported");
    // Both pods wait for the same thing: the status says it once.
    if waiting.phase == NodePhase::Draining {
        assert_eq!(
            waiting.blockers,
            ["terminating: the node is drained once it is gone"],
            "{waiting:?}"
        );
    }
    assert!(sunset_waits(waiting), "{waiting:?}");

    // The node without an executor ID: an agent starts on it and publishes its ID; the node is then
    // drained and told to restart like any other.
    patch_node(
        &client,
        &no_id,
        json!({ "metadata": { "labels": { "type": "kwok" } } }),
    )
    .await;
    // The finalizer of sunset's pods is done: they go, and their node with them.
    for pod in &sunsets {
        let done = json!({ "metadata": { "finalizers": null } });
        merge_patch::<Pod>(&client, OWNERS, pod, done).await;
    }
    scenario.wait_all_upgraded("fleet", 8, PROGRESS).await;
    let upgraded = events_about(&scenario.client, "Upgraded", &no_id).await;
    assert_eq!(
        upgraded.iter().map(note).collect::<Vec<_>>(),
        [format!(
            "executor came back as {}: upgrade state removed",
            scenario.new_id
        )]
    );
    assert_no_violations(&sla);
    assert!(
        !scenario.events("Evicted").await.is_empty(),
        "web's pods moved"
    );
    scenario.controllers[0].assert_running();
    // Remove the hold on ghost so nothing lingers.
    let released = json!({ "metadata": { "finalizers": null } });
    merge_patch::<ReplicaSet>(&client, OWNERS, "ghost", released).await;
}

// ---------------------------------------------------------------------------------------------------------------
// Policies and the plugin
// ---------------------------------------------------------------------------------------------------------------

/// Policies: one that selects no node, two that overlap; and the plugin asked about a node or a
/// policy that does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_policies_and_plugin_requests_are_reported_and_the_rest_is_upgraded() {
    const NS: &str = "bad-policies";
    let mut scenario = Scenario::start(6, NS, "1s").await;
    let client = scenario.client.clone();
    for (i, pool) in ["east", "east", "west", "west", "shared", "shared"]
        .iter()
        .enumerate()
    {
        patch_node(
            &client,
            &node_name(i),
            json!({ "metadata": { "labels": { "pool": pool } } }),
        )
        .await;
    }
    let shared = [node_name(4), node_name(5)];
    let sla = SlaWatcher::start(client.clone(), NS, u32::from(THRESHOLD));
    create(&client, &deployment(NS, "web", 6)).await;
    scenario.wait_ready_in(NS, 6).await;
    sla.arm();

    scenario.start_controller(&[]);
    for (name, pools) in [
        ("east", &["east", "shared"][..]),
        ("west", &["west", "shared"]),
        ("nowhere", &["nowhere"]),
    ] {
        let mut spec = fleet_spec(&scenario, 1);
        spec.node_selector = pool_selector(pools);
        scenario.create_policy(name, spec).await;
    }

    // The plugin, asked about what does not exist: one sentence, a non-zero exit, while the upgrade
    // runs.
    let existing = "existing policies: east, nowhere, west";
    k8sm_fails(
        &scenario,
        &["force", "no-such-node", "--yes"],
        "node \"no-such-node\" does not exist: see kubectl get nodes",
    );
    for args in [
        &["upgrade", "status", "--policy", "no-such"][..],
        &["plan", "--policy", "no-such"],
        &["pause", "--policy", "no-such"],
    ] {
        k8sm_fails(
            &scenario,
            args,
            &format!("ExecutorUpgradePolicy \"no-such\" does not exist: {existing}"),
        );
    }
    k8sm_fails(
        &scenario,
        &["force", &shared[0], "--yes"],
        "node \"node-0004\" is not upgraded by exactly one ExecutorUpgradePolicy, so k8sm does not drain it: nothing to force",
    );

    scenario
        .wait_until(
            "east's and west's own nodes are upgraded",
            PROGRESS,
            || async {
                scenario.controllers[0].assert_running();
                for name in &shared {
                    assert_untouched(&scenario, name).await;
                }
                let own = (0..4).map(node_name).collect::<Vec<_>>();
                let nodes = scenario.nodes().await;
                let upgraded = own.iter().all(|name| {
                    nodes
                        .iter()
                        .any(|n| n.name_any() == *name && is_upgraded(n, &scenario.new_id))
                });
                let mut reported = true;
                for policy in ["east", "west", "nowhere"] {
                    let status = scenario.policy(policy).await.status;
                    let expected = if policy == "nowhere" { "0/0" } else { "2/2" };
                    reported &= status.is_some_and(|s| s.upgraded.as_deref() == Some(expected));
                }
                (upgraded && reported).then_some(())
            },
        )
        .await;
    // Neither policy ever acts on the shared nodes.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for name in &shared {
        assert_untouched(&scenario, name).await;
    }
    print_k8sm_events(&scenario.client).await;

    for (policy, other) in [("east", "west"), ("west", "east")] {
        let message = format!(
            "2 node(s) (node-0004, node-0005) also selected by policy {other}: neither policy acts on them; make the nodeSelectors disjoint"
        );
        let eup = scenario.policy(policy).await;
        let status = eup.status.clone().expect("status");
        let conflict = required_condition(&eup, condition_types::CONFLICT);
        assert_eq!(
            (
                conflict.status.as_str(),
                conflict.reason.as_str(),
                conflict.message.as_str()
            ),
            ("True", "PolicyConflict", message.as_str()),
            "{policy}"
        );
        assert_eq!(
            events_about(&scenario.client, "PolicyConflict", policy)
                .await
                .iter()
                .map(|e| e.note.clone().unwrap_or_default())
                .collect::<Vec<_>>(),
            [message],
            "one PolicyConflict Event on {policy}"
        );
        assert_eq!(status.counts.total, 2, "{policy} counts only its own nodes");
        assert!(
            status.nodes.is_empty(),
            "{policy}: nothing left: {:?}",
            status.nodes
        );
    }

    let nowhere = scenario.policy("nowhere").await;
    let message = "spec.nodeSelector \"pool in (nowhere)\" selects none of the cluster's 6 nodes";
    let degraded = required_condition(&nowhere, condition_types::DEGRADED);
    assert_eq!(
        (
            degraded.status.as_str(),
            degraded.reason.as_str(),
            degraded.message.as_str()
        ),
        (
            "True",
            "NoNodesSelected",
            format!("NoNodesSelected: {message}").as_str()
        )
    );
    let upgraded = required_condition(&nowhere, condition_types::UPGRADED);
    assert_eq!(
        (upgraded.status.as_str(), upgraded.reason.as_str()),
        ("False", "NoNodesSelected")
    );
    assert_eq!(
        events_about(&scenario.client, "NoNodesSelected", "nowhere")
            .await
            .iter()
            .map(|e| e.note.clone().unwrap_or_default())
            .collect::<Vec<_>>(),
        [message]
    );
    let text = plugin::k8sm_ok(
        &scenario.cluster,
        &["upgrade", "status", "--policy", "nowhere"],
    );
    assert!(
        text.contains("Progress: no node selected: nothing to upgrade\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("Problem:  NoNodesSelected: {message}\n")),
        "{text}"
    );

    assert_no_violations(&sla);
    scenario.controllers[0].assert_running();
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

fn fleet_spec(scenario: &Scenario, slots: u32) -> ExecutorUpgradePolicySpec {
    ExecutorUpgradePolicySpec {
        owner_health_threshold: THRESHOLD,
        ..scenario.policy_spec(slots)
    }
}

fn pool_selector(pools: &[&str]) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "pool".into(),
            operator: "In".into(),
            values: Some(pools.iter().map(|p| (*p).to_owned()).collect()),
        }]),
        ..LabelSelector::default()
    }
}

/// Pins a pod template to `node` and gives its pods `finalizers`.
fn pin(template: Option<&mut PodTemplateSpec>, node: &str, finalizers: &[&str]) {
    let template = template.expect("a template");
    if !finalizers.is_empty() {
        template
            .metadata
            .get_or_insert_with(ObjectMeta::default)
            .finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
    }
    template
        .spec
        .get_or_insert_with(PodSpec::default)
        .node_selector = Some(BTreeMap::from([(
        "kubernetes.io/hostname".to_owned(),
        node.to_owned(),
    )]));
}

/// Whether the node of `sunset`'s two terminating pods waits for them, as it should: draining while
/// they are within a minute of their grace period's end (0 s), and past it, with both stuck
/// terminating, reported for an operator and handed back (a slow machine gets there before the
/// controller reaches the node).
fn sunset_waits(node: &k8sm_api::NodeStatus) -> bool {
    match node.phase {
        NodePhase::Draining => node.pods_left == 2,
        NodePhase::Blocked => node
            .blockers
            .iter()
            .any(|b| b.contains("stuck terminating")),
        _ => false,
    }
}

/// A bare ReplicaSet (no Deployment) whose pods run on `node`, with `finalizers` on the ReplicaSet
/// itself.
fn pinned_replica_set(
    namespace: &str,
    name: &str,
    replicas: i32,
    node: &str,
    finalizers: &[&str],
) -> ReplicaSet {
    let mut template = deployment(namespace, name, replicas)
        .spec
        .expect("a spec")
        .template;
    pin(Some(&mut template), node, &[]);
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            finalizers: (!finalizers.is_empty())
                .then(|| finalizers.iter().map(|f| (*f).to_owned()).collect()),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_owned(), name.to_owned())])),
                ..LabelSelector::default()
            },
            template: Some(template),
            ..ReplicaSetSpec::default()
        }),
        ..ReplicaSet::default()
    }
}

/// Panics if k8sm touched the node in any way: a key, the taint, a cordon, a new executor, an
/// Event.
async fn assert_untouched(scenario: &Scenario, name: &str) {
    let node = get_node(&scenario.client, name).await;
    let annotations = node.annotations();
    for key in [
        keys::INCOMPATIBLE_EXECUTOR_ANNOTATION,
        keys::DRAINING_ANNOTATION,
        keys::KAMIKAZE_ANNOTATION,
        keys::KAMIKAZE_EXECUTOR_ID_ANNOTATION,
        keys::CORDONED_BY_ANNOTATION,
    ] {
        assert!(!annotations.contains_key(key), "{name} has {key}");
    }
    assert!(
        !node
            .labels()
            .contains_key(keys::INCOMPATIBLE_EXECUTOR_LABEL),
        "{name} is labelled incompatible"
    );
    let spec = node.spec.clone().unwrap_or_default();
    assert!(!spec.unschedulable.unwrap_or(false), "{name} is cordoned");
    assert!(
        !spec
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == keys::INCOMPATIBLE_EXECUTOR_TAINT_KEY),
        "{name} is tainted"
    );
    assert_eq!(
        annotations.get(keys::EXECUTOR_ID_ANNOTATION),
        Some(&scenario.old_id),
        "{name} keeps its executor"
    );
    for reason in ["Marked", "Cordoned", "Admitted", "KamikazeSent"] {
        assert!(
            events_about(&scenario.client, reason, name)
                .await
                .is_empty(),
            "a {reason} Event on {name}"
        );
    }
}

/// Expects a failure with exactly this one-sentence error, nothing on standard output, and no
/// panic.
fn k8sm_fails(scenario: &Scenario, args: &[&str], error: &str) {
    let result = plugin::k8sm_fails(&scenario.cluster, args, error);
    assert_eq!(result.stdout, "", "kubectl k8sm {}", args.join(" "));
}
