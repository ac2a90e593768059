//! One planner pass over a synthetic fleet in the middle of an upgrade: every node marked, 20% of
//! them draining, 30 pods per node in owners of 1 to 50 replicas, some pods already terminating.
//! Target: under 20 ms at 5,000 nodes (bench/results/README.md). The same fleet again with a
//! PodDisruptionBudget per workload (as the cluster benchmark gives every owner), each allowing
//! one disruption: every pod's budgets are looked up on every surveyed node.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8sm_api::{ExecutorUpgradePolicySpec, MaxConcurrentNodes};
use k8sm_planner::{
    ClusterView, ControllerRef, NodeView, OwnerKind, OwnerView, PdbView, Planner, PodPhase,
    PodView, PolicyView, plan,
};

/// The controller's allocator (controller/src/main.rs): what a pass costs depends on it, and this
/// measures the pass the controller runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PODS_PER_NODE: usize = 30;
/// Owner sizes, cycled until every pod has an owner (as in the cluster benchmark).
const SIZES: [usize; 13] = [1, 2, 3, 5, 8, 10, 12, 15, 20, 25, 30, 40, 50];

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .expect("a valid date")
}

fn fleet(nodes: usize) -> ClusterView {
    let marked = t0().to_rfc3339();
    let draining = (nodes / 5).max(1);
    let node_views = (0..nodes)
        .map(|i| NodeView {
            name: format!("node-{i:05}"),
            labels: [("type".to_owned(), "kwok".to_owned())].into(),
            executor_id: Some("sha256:old".into()),
            incompatible_since: Some(marked.clone()),
            incompatible_label: true,
            has_k8sm_taint: true,
            draining_since: (i < draining).then(|| marked.clone()),
            cordoned_by_k8sm: i < draining,
            unschedulable: i < draining,
            internal_ip: Some("10.0.0.1".into()),
            ready: true,
            ..NodeView::default()
        })
        .collect();

    // One copy of each node's name and of the namespace for all their pods, as the controller's
    // conversion shares them.
    let node_names: Vec<Arc<str>> = (0..nodes).map(|i| format!("node-{i:05}").into()).collect();
    let namespace: Arc<str> = "shop".into();
    let total = nodes * PODS_PER_NODE;
    let mut owners = Vec::new();
    let mut pods = Vec::with_capacity(total);
    let mut placed = 0;
    while placed < total {
        let workload = owners.len() / 2;
        let size = SIZES[workload % SIZES.len()].min(total - placed);
        // Each workload a Deployment with one ReplicaSet, as most are: health is judged at the
        // Deployment.
        let deployment = OwnerView {
            kind: OwnerKind::Deployment,
            namespace: "shop".into(),
            name: format!("web-{workload}"),
            uid: format!("deploy-{workload}"),
            desired: Some(size as u32),
            controller: None,
            exists: true,
            replacing: false,
            min_ready_seconds: 0,
            revision: 0,
            rollout: None,
        };
        let owner = OwnerView {
            kind: OwnerKind::ReplicaSet,
            name: format!("{}-6d4f", deployment.name),
            uid: format!("rs-{workload}"),
            desired: Some(size as u32),
            controller: Some(ControllerRef::new(
                "shop",
                "apps/v1",
                "Deployment",
                &deployment.name,
                &deployment.uid,
            )),
            ..deployment.clone()
        };
        // One copy of the labels and of the controller reference for all the owner's pods, as the
        // controller's conversion shares them.
        let labels = Arc::new([("app".to_owned(), owner.name.clone())].into());
        let reference = Arc::new(ControllerRef::new(
            "shop",
            "apps/v1",
            "ReplicaSet",
            &owner.name,
            &owner.uid,
        ));
        for replica in 0..size {
            let slot = placed + replica;
            let node = slot % nodes;
            // Mid-upgrade: one pod in ten on a draining node is already on its way out.
            let terminating = node < draining && slot % 10 == 0;
            pods.push(PodView {
                namespace: Arc::clone(&namespace),
                name: format!("{}-{replica}", owner.name).into(),
                uid: format!("pod-{slot}").into(),
                node_name: Some(Arc::clone(&node_names[node])),
                labels: Arc::clone(&labels),
                controller: Some(Arc::clone(&reference)),
                phase: PodPhase::Running,
                ready: !terminating,
                terminating,
                created: Some(t0()),
                ..PodView::default()
            });
        }
        placed += size;
        owners.push(owner);
        owners.push(deployment);
    }

    ClusterView {
        nodes: node_views,
        pods: pods.into_iter().map(Arc::new).collect(),
        owners: owners.into_iter().map(Arc::new).collect(),
        policies: vec![PolicyView {
            name: "fleet".into(),
            generation: Some(1),
            spec: ExecutorUpgradePolicySpec {
                target_executor_id: Some("sha256:new".into()),
                max_concurrent_nodes: MaxConcurrentNodes::Percent(20),
                ..ExecutorUpgradePolicySpec::default()
            },
            // Without its finalizer a policy gets only the finalizer planned: the bench would
            // measure nothing.
            has_finalizer: true,
            deleting: false,
            deleted_nodes: Vec::new(),
            pause_annotation: Default::default(),
        }],
        ..ClusterView::default()
    }
}

/// A budget per workload, selecting its pods by their `app` label, allowing one disruption.
fn with_budgets(mut view: ClusterView) -> ClusterView {
    view.pdbs = view
        .owners
        .iter()
        .filter(|o| o.kind == OwnerKind::ReplicaSet)
        .map(|o| PdbView {
            namespace: o.namespace.clone(),
            name: format!("{}-pdb", o.name),
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_owned(), o.name.clone())].into()),
                ..LabelSelector::default()
            }),
            disruptions_allowed: 1,
            ..PdbView::default()
        })
        .collect();
    view
}

fn one_pass(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan");
    // 150,000 pods per pass at 5,000 nodes: fewer, longer samples.
    group.sample_size(20);
    let now = t0() + chrono::Duration::minutes(5);
    for (name, budgets) in [("nodes", false), ("nodes-with-budgets", true)] {
        for nodes in [1000, 5000] {
            let view = fleet(nodes);
            let view = if budgets { with_budgets(view) } else { view };
            // The fleet is mid-upgrade: the pass has evictions to plan.
            assert!(plan(&view, now).evictions().next().is_some());
            group.bench_with_input(BenchmarkId::new(name, nodes), &view, |b, view| {
                b.iter(|| plan(black_box(view), now));
            });
        }
    }
    group.finish();
}

/// Replaces one pod in every `every` with a new version of itself, as the watch events between two
/// passes do: the pods a kept planner must read again. The new versions say what the old ones said
/// (as most pod updates do for what the planner reads), so that the fleet stays the one
/// `plan/nodes` measures however many passes criterion runs.
fn churn(view: &ClusterView, every: usize, round: usize) -> ClusterView {
    let mut next = view.clone();
    for pod in next.pods.iter_mut().skip(round % every).step_by(every) {
        *pod = Arc::new(PodView::clone(pod));
    }
    next
}

/// Pass after pass with the controller's [`Planner`], which keeps what it derived from each pod:
/// between two passes one pod in 200 changes (750 at 5,000 nodes), which the pass reads again. Only
/// the pass is timed (and the drop of its plan, as in `plan/nodes`): the changed view is built
/// before it, as the controller builds its view from its caches. With and without a budget on every
/// workload, as `plan/…`: most real clusters' workloads have one.
fn kept_passes(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan-kept");
    group.sample_size(20);
    let now = t0() + chrono::Duration::minutes(5);
    for (name, budgets) in [("nodes", false), ("nodes-with-budgets", true)] {
        for nodes in [1000, 5000] {
            kept_pass(&mut group, name, nodes, budgets, now);
        }
    }
    group.finish();
}

/// One `plan-kept/<name>/<nodes>` benchmark.
fn kept_pass(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    nodes: usize,
    budgets: bool,
    now: DateTime<Utc>,
) {
    let view = fleet(nodes);
    let mut view = if budgets { with_budgets(view) } else { view };
    let mut planner = Planner::default();
    assert_eq!(planner.plan(&view, now), plan(&view, now));
    let mut round = 0;
    group.bench_function(BenchmarkId::new(name, nodes), |b| {
        b.iter_custom(|iterations| {
            let mut took = Duration::ZERO;
            for _ in 0..iterations {
                round += 1;
                view = churn(&view, 200, round);
                let started = Instant::now();
                black_box(planner.plan(black_box(&view), now));
                took += started.elapsed();
            }
            took
        });
    });
}

criterion_group!(benches, one_pass, kept_passes);
criterion_main!(benches);
