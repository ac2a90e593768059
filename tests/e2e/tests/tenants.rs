//! A tenant against another namespace's workload, on a real cluster. Anyone who may create pods in
//! their own namespace may write any controller reference on them: a kind nothing serves, with the
//! UID of another namespace's ReplicaSet. The garbage collector cannot resolve such a kind and
//! leaves the pods alone; k8sm must not count them as the victim's replicas.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8sm_api::UnmanagedPodPolicy;
use k8sm_e2e::deletions::DeletionLog;
use k8sm_e2e::kubectl_ok;
use k8sm_e2e::scenario::Scenario;
use k8sm_e2e::sla::{SlaWatcher, assert_within_bounds};
use k8sm_e2e::waits::observe_for;
use k8sm_e2e::workload_policy::{THRESHOLD, only_node, workload_policy};
use k8sm_e2e::workloads::{create, deployment, unmanaged_pod};
use k8sm_testcluster::node_name;

const VICTIM: &str = "shop";
const TENANT: &str = "tenant";
const REPLICAS: u32 = 4;
const FORGED: usize = 10;
const PROGRESS: Duration = Duration::from_secs(300);
/// How long the test watches web after its first eviction: well within the policy's 60 s
/// `nodeProgressDeadline`, and far longer than the controller takes to evict the rest of web when
/// it counts the tenant's pods (one pass).
const WATCHED: Duration = Duration::from_secs(20);

/// The victim: a Deployment of 4 (bound 3) on `node-0000`, the only node to upgrade, whose
/// replacements cannot schedule once the node is cordoned (the other node is cordoned too). The
/// tenant: ten Ready pods on `node-0001` whose controller reference names a kind nothing serves,
/// with the UID of the victim's ReplicaSet. k8sm evicts one pod of the victim, then waits for its
/// replacement (which never comes) until the node stalls; the victim never goes below its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_claiming_another_namespace_s_replica_set_never_take_it_below_its_bound() {
    let mut scenario = Scenario::start(2, VICTIM, "1s").await;
    scenario
        .cluster
        .create_namespace(TENANT)
        .await
        .expect("the tenant's namespace");
    let client = scenario.client.clone();
    let (held, other) = (node_name(0), node_name(1));

    // web's pods on node-0000; then the operator cordons node-0001, so that no replacement can
    // schedule once k8sm cordons node-0000.
    scenario
        .pin_to(&held, REPLICAS as usize, || async {
            create(&client, &deployment(VICTIM, "web", REPLICAS as i32)).await
        })
        .await;
    kubectl_ok(&scenario.cluster, &["cordon", &other]);
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), VICTIM);
    let set = sets
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("the victim's ReplicaSets")
        .items
        .pop()
        .expect("the victim's ReplicaSet");
    let set_uid = set.uid().expect("a UID");
    for i in 0..FORGED {
        let mut pod: Pod = unmanaged_pod(TENANT, &format!("forged-{i}"), &other, &[]);
        pod.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "evil.example/v1".into(),
            kind: "Forged".into(),
            name: set.name_any(),
            uid: set_uid.clone(),
            controller: Some(true),
            block_owner_deletion: None,
        }]);
        create(&client, &pod).await;
    }
    scenario
        .wait_ready_within(TENANT, FORGED, Duration::from_secs(60))
        .await;

    let sla = SlaWatcher::start(client.clone(), VICTIM, u32::from(THRESHOLD));
    let deletions = DeletionLog::start(&client, VICTIM, "app=web").await;
    sla.arm();
    scenario.start_controller(&[]);
    // The policy upgrades node-0000 alone: node-0001 stands for the fleet's upgraded nodes.
    let mut policy = workload_policy(&scenario, UnmanagedPodPolicy::Never);
    policy.node_progress_deadline = "60s".parse().expect("a duration");
    policy.node_selector = only_node(&held);
    scenario.create_policy("fleet", policy).await;

    // One pod of the victim goes and its replacement stays Pending: for as long as the node does
    // not stall, which would uncordon it and let the replacement in, no other pod of web goes.
    scenario
        .wait_until("one pod of web is evicted", PROGRESS, || async {
            (!deletions.deleted().is_empty()).then_some(())
        })
        .await;
    observe_for(WATCHED, || async {
        let evicted: Vec<String> = deletions.deleted().into_iter().map(|d| d.name).collect();
        assert_eq!(evicted.len(), 1, "one pod of web went: {evicted:?}");
    })
    .await;
    assert_within_bounds(&sla, THRESHOLD, &[("Deployment", "web", REPLICAS)]);
}
