//! The harness itself: real components, the pinned version, KWOK nodes running real workloads,
//! RBAC, and no process left behind.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{ListParams, PostParams};

use k8sm_e2e::objects::node_of;
use k8sm_e2e::polling::poll;
use k8sm_e2e::scenario::is_ready;
use k8sm_e2e::waits::wait_until;
use k8sm_e2e::workloads::{deployment, unmanaged_pod};
use k8sm_e2e::{kubectl, kubectl_ok};
use k8sm_testcluster::{ClusterOptions, READY_DELAY_ANNOTATION, TestCluster, node_name};

/// Whether a process with this pid exists and is not a zombie, read from /proc.
fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses; `Z` is exited but not yet reaped.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_cluster_runs_workloads_on_kwok_nodes_and_stops_cleanly() {
    let started = Instant::now();
    let mut cluster = TestCluster::start(ClusterOptions::default().with_nodes(5))
        .await
        .expect("cluster starts");
    println!(
        "5-node cluster started in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // The apiserver and kubectl report the pinned version, not `v0.0.0-master`.
    let version = cluster.server_version().await.unwrap();
    println!("tested against kube-apiserver {version}");
    assert_eq!(version, cluster.binaries().kubernetes_version);
    let kubectl_version: serde_json::Value =
        serde_json::from_str(&kubectl_ok(&cluster, &["version", "-o", "json"])).unwrap();
    assert_eq!(
        kubectl_version["clientVersion"]["gitVersion"],
        version.as_str()
    );
    assert_eq!(
        kubectl_version["serverVersion"]["gitVersion"],
        version.as_str()
    );

    let client = cluster.client();
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(nodes.items.len(), 5);

    // A Deployment goes through the real scheduler and ReplicaSet controller, and KWOK makes its
    // pods Ready.
    cluster.create_namespace("harness").await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "harness");
    deployments
        .create(&PostParams::default(), &deployment("harness", "web", 6))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "harness");
    let (timeout, every) = (Duration::from_secs(90), Duration::from_millis(200));
    poll(timeout, every, || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .unwrap();
        let ready = list.items.iter().filter(|p| is_ready(p)).count();
        let on_nodes = list.items.iter().filter(|p| node_of(p).is_some()).count();
        if ready == 6 && on_nodes == 6 {
            Ok(())
        } else {
            Err((ready, on_nodes))
        }
    })
    .await
    .unwrap_or_else(|(ready, on_nodes)| {
        panic!("6 web pods never became Ready (ready {ready}, scheduled {on_nodes})")
    });

    // RBAC is on: a fresh ServiceAccount may not list nodes.
    Api::<ServiceAccount>::namespaced(client.clone(), "harness")
        .create(
            &PostParams::default(),
            &ServiceAccount {
                metadata: ObjectMeta {
                    name: Some("nobody".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let answer = kubectl(
        &cluster,
        &[
            "auth",
            "can-i",
            "list",
            "nodes",
            "--as=system:serviceaccount:harness:nobody",
        ],
    );
    assert_eq!(
        answer.stdout.trim(),
        "no",
        "RBAC must deny an unbound ServiceAccount: {answer:?}"
    );

    // Dropping the cluster stops every process it started.
    let pids = cluster.pids();
    assert_eq!(
        pids.iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok"
        ]
    );
    cluster.check_running().unwrap();
    drop(cluster);
    for (name, pid) in pids {
        assert!(
            !pid_alive(pid),
            "{name} (pid {pid}) still runs after the cluster was dropped"
        );
    }
}

/// What the benchmark's realistic fleet relies on: a pod's annotation sets its readiness delay, and
/// with grace periods honoured a deleted pod stays (terminating) until its grace period ends. Only
/// lower bounds on time are asserted: a loaded machine makes KWOK slower, never faster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_annotation_sets_its_readiness_delay_and_its_grace_period_delays_its_removal() {
    let options = ClusterOptions {
        honour_grace_periods: true,
        ..ClusterOptions::default().with_nodes(1)
    };
    let mut cluster = TestCluster::start(options).await.expect("cluster starts");
    cluster.create_namespace("stages").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "stages");
    let mut pod = unmanaged_pod("stages", "slow", &node_name(0), &[]);
    pod.metadata.annotations = Some(
        [(READY_DELAY_ANNOTATION.to_owned(), "4s".to_owned())]
            .into_iter()
            .collect(),
    );
    if let Some(spec) = pod.spec.as_mut() {
        spec.termination_grace_period_seconds = Some(3);
    }
    let created = Instant::now();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let (timeout, every) = (Duration::from_secs(60), Duration::from_millis(100));
    wait_until("the pod is Ready", timeout, every, &[], || async {
        is_ready(&pods.get("slow").await.unwrap()).then_some(())
    })
    .await;
    let ready_after = created.elapsed();
    println!("Ready {ready_after:?} after creation (annotation: 4s)");
    assert!(
        ready_after >= Duration::from_millis(3500),
        "Ready after {ready_after:?}, before its annotated 4 s"
    );

    let deleted = Instant::now();
    pods.delete("slow", &Default::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let terminating = pods.get_opt("slow").await.unwrap();
    assert!(
        terminating.is_some_and(|p| p.metadata.deletion_timestamp.is_some()),
        "the pod went before its 3 s grace period ended"
    );
    wait_until("the pod is gone", timeout, every, &[], || async {
        pods.get_opt("slow").await.unwrap().is_none().then_some(())
    })
    .await;
    let gone_after = deleted.elapsed();
    println!("gone {gone_after:?} after its deletion (grace period: 3 s)");
    assert!(
        gone_after >= Duration::from_secs(3),
        "gone after {gone_after:?}"
    );
}
