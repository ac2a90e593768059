//! Turns what the generator drew into the cluster view the planner sees and the record of truth the
//! oracles read: every object is decided here, and written down as it is decided.

use std::sync::Arc;

use chrono::Duration;
use k8sm_api::{MaxConcurrentNodes, UnmanagedPodPolicy, keys};

use super::{
    draw::{Kind, Loose, NodeGen, PodGen, PolicyGen, Shape, WorkloadGen},
    truth::{BudgetTruth, NodeTruth, PodOf, PodTruth, PolicyTruth, Truth, WorkloadTruth, World},
};
use crate::{
    ClusterView, ControllerRef, InFlightEviction, OwnerKind, OwnerView, PodPhase, PodView,
    testing::{
        NEW, at, daemon_set, deployment, job, node, owner, pdb, policy, replica_set, unmanaged_pod,
    },
};

const OPERATOR_KINDS: [&str; 3] = ["KafkaNodePool", "CloneSet", "EtcdCluster"];

/// Adds a pod with the generated attributes to the view, and records it.
fn push_pod(view: &mut ClusterView, truth: &mut Truth, mut pod: PodView, g: &PodGen, of: PodOf) {
    if g.unscheduled {
        pod.node_name = None;
        pod.phase = PodPhase::Pending;
        pod.ready = false;
    } else {
        pod.ready = g.ready;
    }
    // The plans are made at(60), under the default nodeProgressDeadline of 10 minutes.
    if !pod.ready {
        pod.ready_changed = Some(if g.broken { at(0) } else { at(58) });
    }
    if g.finished {
        pod = pod.phase(PodPhase::Failed);
    }
    pod.terminating = g.terminating;
    if g.opted_out {
        pod = pod.label(keys::UPGRADE_OPT_OUT_LABEL, keys::UPGRADE_OPT_OUT_VALUE);
    }
    truth.pods.insert(
        pod.uid.to_string(),
        PodTruth {
            namespace: pod.namespace.to_string(),
            labels: (*pod.labels).clone(),
            of,
            node: pod.node_name.as_deref().map(str::to_owned),
            ready: pod.ready,
            broken: !pod.ready && g.broken,
            terminating: pod.terminating,
            in_flight: false,
            finished: pod.phase.is_finished(),
            opted_out: g.opted_out,
        },
    );
    view.pods.push(pod.into());
}

/// One generated workload: its truth, and its pods before they are placed.
struct Built {
    key: String,
    truth: WorkloadTruth,
    /// The pods' controllers: the workload's ReplicaSets, or the workload itself.
    controllers: Vec<ControllerRef>,
    /// Each pod's controller (an index into `controllers`) and attributes.
    pods: Vec<(usize, PodGen)>,
}

/// Builds workload `k`, adding the owner objects the view holds of it (a controller of a kind k8sm
/// does not watch is not among them).
fn build_workload(
    k: usize,
    w: &WorkloadGen,
    ns: &str,
    name: &str,
    owners: &mut Vec<Arc<OwnerView>>,
) -> Built {
    let spec_replicas = (!w.replicas_unset).then_some(w.desired);
    // The apiserver defaults `replicas` to 1.
    let d = spec_replicas.unwrap_or(1);
    let count = usize::try_from((i64::from(d) + w.delta).max(0)).unwrap();
    let plain: Vec<(usize, PodGen)> = w.pods.iter().take(count).map(|g| (0, g.clone())).collect();
    match w.kind {
        Kind::Deployment(shape) => {
            let mut dep = deployment(ns, name, d);
            dep.desired = spec_replicas;
            let (sets, pods) = rollout_pods(shape, d, w);
            let mut controllers = Vec::new();
            for s in 0..sets {
                let mut rs = dep.replica_set(&format!("{name}-{s}"));
                // A ReplicaSet's own replicas: what it runs (k8sm must not judge it by them).
                let runs = pods
                    .iter()
                    .filter(|(set, g)| *set == s && !g.finished)
                    .count();
                rs.desired = Some(u32::try_from(runs).unwrap());
                controllers.push(rs.reference());
                owners.push(rs.into());
            }
            let key = dep.uid.clone();
            owners.push(dep.into());
            Built {
                key,
                truth: WorkloadTruth {
                    what: format!("Deployment {ns}/{name} ({shape:?}, {sets} ReplicaSets)"),
                    desired: Some(d),
                    replica_sets: sets,
                    shape: Some(shape),
                },
                controllers,
                pods,
            }
        }
        Kind::Direct(kind) => {
            let kind = OwnerKind::from(kind);
            let o = owner(kind.clone(), ns, name, spec_replicas);
            let built = Built {
                key: o.uid.clone(),
                truth: WorkloadTruth {
                    what: format!("{kind} {ns}/{name}"),
                    desired: Some(d),
                    replica_sets: 0,
                    shape: None,
                },
                controllers: vec![o.reference()],
                pods: plain,
            };
            owners.push(o.into());
            built
        }
        Kind::Operator => {
            let kind = OPERATOR_KINDS[k % OPERATOR_KINDS.len()];
            let controller = ControllerRef::new(
                ns,
                "example.com/v1",
                kind,
                name,
                &format!("{kind}/{ns}/{name}"),
            );
            Built {
                key: controller.key().to_owned(),
                truth: WorkloadTruth {
                    what: format!("{kind} {ns}/{name} (not in the view)"),
                    desired: None,
                    replica_sets: 0,
                    shape: None,
                },
                controllers: vec![controller],
                pods: plain,
            }
        }
        Kind::OperatorReplicaSets => {
            let rollout = owner(OwnerKind::Other("Rollout".into()), ns, name, None);
            let sets = w.sets.min(2);
            let pods: Vec<(usize, PodGen)> =
                plain.into_iter().map(|(_, g)| (g.set % sets, g)).collect();
            let mut controllers = Vec::new();
            for s in 0..sets {
                let runs = pods.iter().filter(|(set, _)| *set == s).count();
                let rs = replica_set(ns, &format!("{name}-{s}"), u32::try_from(runs).unwrap())
                    .controlled_by(&rollout);
                controllers.push(rs.reference());
                owners.push(rs.into());
            }
            Built {
                key: rollout.unseen_key(),
                truth: WorkloadTruth {
                    what: format!("Rollout {ns}/{name} over {sets} ReplicaSets (not in the view)"),
                    desired: None,
                    replica_sets: sets,
                    shape: None,
                },
                controllers,
                pods,
            }
        }
    }
}

/// A Deployment's ReplicaSets (how many) and pods (each with its ReplicaSet) in rollout state
/// `shape`.
fn rollout_pods(shape: Shape, d: u32, w: &WorkloadGen) -> (usize, Vec<(usize, PodGen)>) {
    let count = |extra: i64| usize::try_from((i64::from(d) + extra).max(0)).unwrap();
    let pods = &w.pods;
    match shape {
        Shape::Steady => (
            1,
            pods.iter()
                .take(count(w.delta))
                .map(|g| (0, g.clone()))
                .collect(),
        ),
        Shape::Rolling => {
            let sets = w.sets.max(2);
            let assigned = pods
                .iter()
                .take(count(w.delta))
                .map(|g| (g.set % sets, g.clone()))
                .collect();
            (sets, assigned)
        }
        Shape::Paused | Shape::Surge => {
            let n = match shape {
                Shape::Paused => count(0),
                _ => count(1 + i64::from(w.delta.unsigned_abs() % 2 == 1)),
            };
            let assigned = pods
                .iter()
                .take(n)
                .enumerate()
                .map(|(j, g)| {
                    let g = PodGen {
                        ready: true,
                        terminating: false,
                        finished: false,
                        unscheduled: false,
                        ..g.clone()
                    };
                    (usize::from(j >= n / 2), g)
                })
                .collect();
            (2, assigned)
        }
        Shape::Stuck => {
            // maxSurge 25% rounded up, maxUnavailable 25% rounded down (the defaults): the old
            // ReplicaSet was scaled down to d - maxUnavailable, the new one up to
            // maxSurge + maxUnavailable pods that never schedule.
            let (surge, unavailable) = (d.div_ceil(4), d / 4);
            let old = usize::try_from(d - unavailable).unwrap();
            let new = usize::try_from(surge + unavailable).unwrap();
            let assigned = pods
                .iter()
                .take(old + new)
                .enumerate()
                .map(|(j, g)| {
                    let new = j >= old;
                    let g = PodGen {
                        unscheduled: new,
                        ..g.clone()
                    };
                    (usize::from(new), g)
                })
                .collect();
            (2, assigned)
        }
    }
}

/// Builds the view and its truth from what the generator drew.
pub(super) fn build(
    nodes: Vec<NodeGen>,
    policies: [PolicyGen; 3],
    workloads: Vec<WorkloadGen>,
    loose: Vec<(usize, Loose, bool)>,
    in_flight: Vec<usize>,
    gone: Vec<(usize, u32)>,
    gold_budget: Option<i32>,
) -> World {
    let mut view = ClusterView::default();
    let mut truth = Truth::default();
    add_policies(&mut view, &mut truth, &policies);
    add_nodes(&mut view, &mut truth, &nodes);
    add_workloads(&mut view, &mut truth, &workloads, nodes.len());
    add_loose_pods(&mut view, &mut truth, &loose, nodes.len());
    add_in_flight(&mut view, &mut truth, in_flight);
    add_gone(&mut view, &mut truth, gone);
    add_budgets(&mut view, &mut truth, gold_budget);
    World { view, truth }
}

/// The name of the node a generated pod is placed on, `n` among `node_count`.
fn node_name(n: usize, node_count: usize) -> String {
    format!("n{}", n % node_count)
}

/// Adds the three policies, selecting `pool=a`, `pool=b` and `tier=c`.
fn add_policies(view: &mut ClusterView, truth: &mut Truth, policies: &[PolicyGen; 3]) {
    let selectors = [("pool", "a"), ("pool", "b"), ("tier", "c")];
    for (i, (p, name)) in policies.iter().zip(["a", "b", "c"]).enumerate() {
        let unmanaged = [
            UnmanagedPodPolicy::Delete,
            UnmanagedPodPolicy::Never,
            UnmanagedPodPolicy::DeleteAfterTimeout,
        ][usize::from(p.unmanaged)];
        let timeout = if p.long_timeout { "2h" } else { "30m" };
        let mut built = policy(name)
            .selecting(selectors[i].0, selectors[i].1)
            .with(|s| {
                s.owner_health_threshold = p.threshold;
                s.max_concurrent_nodes = MaxConcurrentNodes::count(p.max_concurrent).unwrap();
                s.respect_pod_disruption_budgets = p.respect_pdbs;
                s.unmanaged_pods.policy = unmanaged;
                s.unmanaged_pods.timeout = Some(timeout.parse().unwrap());
                s.paused = p.paused;
                s.cordon = p.cordon;
            });
        built.has_finalizer = p.finalizer;
        view.policies.push(built);
        truth.policies.push(PolicyTruth {
            name,
            threshold: p.threshold,
            acts: !p.paused && p.finalizer,
            respect_pdbs: p.respect_pdbs,
            unmanaged,
            timeout: Duration::minutes(if p.long_timeout { 120 } else { 30 }),
        });
    }
}

/// Adds the nodes, labelled for the policies that select them, at the stage of the upgrade drawn.
fn add_nodes(view: &mut ClusterView, truth: &mut Truth, nodes: &[NodeGen]) {
    for (i, g) in nodes.iter().enumerate() {
        let name = format!("n{i}");
        let mut n = node(&name);
        if g.pool < 2 {
            n = n.label("pool", ["a", "b"][usize::from(g.pool)]);
        }
        if g.tier_c {
            n = n.label("tier", "c");
        }
        if g.upgraded {
            n = n.executor(NEW);
        }
        let marked = (g.stage >= 1).then(|| at(i64::try_from(i).unwrap()));
        if let Some(when) = marked {
            n = n.marked(when);
        }
        if g.stage >= 2 {
            n = n.admitted(at(10));
        }
        if g.stage >= 3 {
            n = n.kamikazed(at(20));
        }
        if g.opted_out {
            n = n.opted_out();
        }
        view.nodes.push(n);
        let selected: Vec<usize> = [g.pool == 0, g.pool == 1, g.tier_c]
            .iter()
            .enumerate()
            .filter(|(_, s)| **s)
            .map(|(i, _)| i)
            .collect();
        truth.nodes.insert(
            name,
            NodeTruth {
                policy: (selected.len() == 1).then(|| selected[0]),
                upgraded: g.upgraded,
                stage: g.stage,
                opted_out: g.opted_out,
                marked,
            },
        );
    }
}

/// Adds each workload's owners and pods, and its budget if it has one.
fn add_workloads(
    view: &mut ClusterView,
    truth: &mut Truth,
    workloads: &[WorkloadGen],
    node_count: usize,
) {
    for (k, w) in workloads.iter().enumerate() {
        let ns = if w.ops_namespace { "ops" } else { "shop" };
        let name = format!("w{k}");
        let built = build_workload(k, w, ns, &name, &mut view.owners);
        for (j, (set, g)) in built.pods.iter().enumerate() {
            let mut pod = unmanaged_pod(ns, &format!("{name}-{j}"), &node_name(g.node, node_count))
                .label("app", &name);
            if w.gold {
                pod = pod.label("tier", "gold");
            }
            pod.controller = Some(std::sync::Arc::new(built.controllers[*set].clone()));
            let of = PodOf::Workload(built.key.clone());
            push_pod(view, truth, pod, g, of);
        }
        if let Some(allowed) = w.budget {
            view.pdbs
                .push(pdb(ns, &format!("pdb-{name}"), &[("app", &name)], allowed));
        }
        truth.workloads.insert(built.key, built.truth);
    }
}

/// Adds the pods of no workload: unmanaged, DaemonSet, Job and mirror pods.
fn add_loose_pods(
    view: &mut ClusterView,
    truth: &mut Truth,
    loose: &[(usize, Loose, bool)],
    node_count: usize,
) {
    let (ds, jb) = (daemon_set("shop", "agent"), job("shop", "batch"));
    view.owners.push(ds.clone().into());
    view.owners.push(jb.clone().into());
    for (i, &(n, kind, opted_out)) in loose.iter().enumerate() {
        let name = format!("loose-{i}");
        let on = node_name(n, node_count);
        let (pod, of) = match kind {
            Loose::Unmanaged => (unmanaged_pod("shop", &name, &on), PodOf::Unmanaged),
            Loose::UnmanagedFinished => (
                unmanaged_pod("shop", &name, &on).phase(PodPhase::Succeeded),
                PodOf::Unmanaged,
            ),
            Loose::DaemonSet => (ds.pod(&name, &on), PodOf::DaemonSet),
            Loose::Job => (jb.pod(&name, &on), PodOf::Job),
            Loose::JobFinished => (jb.pod(&name, &on).phase(PodPhase::Succeeded), PodOf::Job),
            Loose::Mirror => (unmanaged_pod("shop", &name, &on).mirror(), PodOf::Mirror),
        };
        let g = PodGen {
            node: n,
            ready: pod.ready,
            broken: false,
            terminating: false,
            opted_out,
            finished: pod.phase.is_finished(),
            unscheduled: false,
            set: 0,
        };
        push_pod(view, truth, pod, &g, of);
    }
}

/// Adds evictions in flight of pods in the view, each pod's at most once.
fn add_in_flight(view: &mut ClusterView, truth: &mut Truth, in_flight: Vec<usize>) {
    let uids: Vec<String> = view.pods.iter().map(|p| p.uid.to_string()).collect();
    for i in in_flight {
        let Some(uid) = uids.get(i % uids.len().max(1)) else {
            continue;
        };
        let pod = truth.pods.get_mut(uid).unwrap();
        if pod.in_flight {
            continue;
        }
        pod.in_flight = true;
        let owner_uid = match &pod.of {
            PodOf::Workload(key) => Some(key.clone()),
            _ => None,
        };
        view.in_flight.push(InFlightEviction {
            unanswered: false,
            pod_uid: uid.clone(),
            owner_uid,
            at: at(59),
        });
    }
}

/// Adds evictions in flight of workload pods no longer in the view: gone, and not replaced yet.
fn add_gone(view: &mut ClusterView, truth: &mut Truth, gone: Vec<(usize, u32)>) {
    let keys: Vec<String> = truth.workloads.keys().cloned().collect();
    for (i, n) in gone {
        let Some(key) = keys.get(i % keys.len().max(1)) else {
            continue;
        };
        for _ in 0..n {
            let count = truth.gone.entry(key.clone()).or_default();
            view.in_flight.push(InFlightEviction {
                unanswered: false,
                pod_uid: format!("gone/{key}/{count}"),
                owner_uid: Some(key.clone()),
                at: at(59),
            });
            *count += 1;
        }
    }
}

/// Adds the budget over the pods labelled `tier=gold`, if drawn, and records which pods each budget
/// covers.
fn add_budgets(view: &mut ClusterView, truth: &mut Truth, gold_budget: Option<i32>) {
    if let Some(allowed) = gold_budget {
        view.pdbs
            .push(pdb("shop", "gold", &[("tier", "gold")], allowed));
    }
    for budget in &view.pdbs {
        let selector = budget
            .selector
            .as_ref()
            .and_then(|s| s.match_labels.clone());
        let covers = truth
            .pods
            .iter()
            .filter(|(_, p)| {
                p.namespace == budget.namespace
                    && selector
                        .iter()
                        .flatten()
                        .all(|(k, v)| p.labels.get(k) == Some(v))
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        truth.budgets.push(BudgetTruth {
            name: format!("{}/{}", budget.namespace, budget.name),
            allowed: budget.disruptions_allowed,
            covers,
        });
    }
}
