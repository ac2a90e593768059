use super::*;
use crate::testing::{NEW, apply, at, deployment, node, policy};

/// Deployment web (3 replicas, through ReplicaSet web-1) with a pod on each of n1 and n2 (marked) and one on the
/// upgraded node up; policy p targets NEW.
fn fleet() -> ClusterView {
    let d = deployment("shop", "web", 3);
    let rs = d.replica_set("web-1");
    ClusterView {
        nodes: vec![node("n1"), node("n2"), node("up").executor(NEW)],
        pods: crate::testing::shared_pods([
            rs.pod("web-a", "n1"),
            rs.pod("web-b", "n2"),
            rs.pod("web-c", "up"),
        ]),
        owners: crate::testing::shared_owners([d, rs]),
        policies: vec![policy("p").with(|s| s.owner_health_threshold = 50)],
        ..ClusterView::default()
    }
}

/// Plans at `now`, records every action as executed (pods on their nodes from the view), applies the plan.
fn pass(view: &mut ClusterView, runs: &mut Runs, now: DateTime<Utc>) -> Plan {
    pass_observed(view, runs, now).0
}

/// [`pass`], and what the record observed.
fn pass_observed(view: &mut ClusterView, runs: &mut Runs, now: DateTime<Utc>) -> (Plan, Observed) {
    let plan = crate::plan(view, now);
    let observed = observe(runs, view, &plan, now, |_, _| true);
    for action in &plan.actions {
        let node = action
            .kind
            .about_pod()
            .and_then(|p| view.pods.iter().find(|v| *v.uid == *p.uid()))
            .and_then(|p| p.node_name.as_deref().map(str::to_owned));
        record(runs, action, node.as_deref(), now);
    }
    apply(view, &plan);
    (plan, observed)
}

/// The cluster moves on: terminating pods go and come back Ready on `up`; kamikazed nodes come back with NEW.
fn settle(view: &mut ClusterView, next: &mut usize) {
    let gone: Vec<_> = view
        .pods
        .iter()
        .filter(|p| p.terminating)
        .cloned()
        .collect();
    view.pods.retain(|p| !p.terminating);
    for pod in gone {
        *next += 1;
        let mut new = (*pod).clone();
        new.name = format!("web-new-{next}").into();
        new.uid = format!("shop/web-new-{next}").into();
        new.node_name = Some("up".into());
        new.terminating = false;
        view.pods.push(std::sync::Arc::new(new));
    }
    for n in &mut view.nodes {
        if n.kamikaze.is_some() {
            n.executor_id = Some(NEW.into());
            n.kamikaze = None;
        }
    }
}

#[test]
fn a_run_records_each_node_s_times_the_evictions_and_each_workload_s_fewest_ready_pods() {
    let mut view = fleet();
    let mut runs = Runs::new();
    let mut next = 0;
    let mut evictions = 0;
    let mut finishes = Vec::new();
    for minute in 0..30 {
        let (plan, observed) = pass_observed(&mut view, &mut runs, at(minute));
        evictions += plan.evictions().count();
        finishes.extend(observed.finished.into_iter().map(|p| (p, minute)));
        settle(&mut view, &mut next);
    }
    let run = &runs["p"];
    assert_eq!(run.target_executor_id, NEW);
    assert_eq!(run.started, at(0));
    assert!(run.finished.is_some(), "{run:#?}");
    // Its end is reported once, at the pass that saw it.
    assert_eq!(finishes.len(), 1, "{finishes:?}");
    assert_eq!(run.finished, Some(at(finishes[0].1)));
    assert_eq!(usize::try_from(run.count("Evicted")).unwrap(), evictions);
    assert_eq!(evictions, 2);
    assert_eq!(run.count("KamikazeSent"), 2);
    assert_eq!(
        run.nodes.len(),
        2,
        "the nodes it upgraded: {:?}",
        run.nodes.keys()
    );
    for (name, n) in &run.nodes {
        assert_eq!(n.evictions, 1, "{name}");
        let (a, k, u) = (
            n.admitted.unwrap(),
            n.kamikaze.unwrap(),
            n.upgraded.unwrap(),
        );
        assert!(a <= k && k < u, "{name}: {n:?}");
    }
    let web = &run.workloads["Deployment shop/web"];
    assert_eq!((web.desired, web.bound, web.disruptions), (3, 2, 2));
    // One pod at a time: it went to 2 Ready, never lower, and is whole again.
    assert_eq!(web.min_ready, 2);
    assert!(!web.recovering);
}

#[test]
fn a_new_target_starts_a_new_run_and_hands_the_old_one_back() {
    let mut view = fleet();
    let mut runs = Runs::new();
    pass(&mut view, &mut runs, at(0));
    view.policies[0].spec.target_executor_id = Some("sha256:newer".into());
    let plan = crate::plan(&view, at(1));
    let observed = observe(&mut runs, &view, &plan, at(1), |_, _| true);
    assert_eq!(observed.superseded.len(), 1);
    assert_eq!(observed.superseded[0].target_executor_id, NEW);
    assert_eq!(runs["p"].target_executor_id, "sha256:newer");
    assert_eq!(runs["p"].started, at(1));
}

#[test]
fn a_workload_is_observed_at_each_pass_until_it_is_whole_again() {
    let mut view = fleet();
    let mut runs = Runs::new();
    let plan = pass(&mut view, &mut runs, at(0));
    assert_eq!(plan.evictions().count(), 1);
    assert_eq!(runs["p"].workloads["Deployment shop/web"].min_ready, 2);
    // Something else takes another pod's readiness away: the report shows the low the controller saw.
    view.pods.retain(|p| !p.terminating);
    let other = view.pods.iter_mut().find(|p| p.ready).unwrap();
    std::sync::Arc::make_mut(other).ready = false;
    pass(&mut view, &mut runs, at(1));
    let web = &runs["p"].workloads["Deployment shop/web"];
    assert_eq!(web.min_ready, 1);
    assert!(web.recovering);
}

/// An operator's workload (a kind k8sm cannot read a size from) with a pod terminating, its replacement already
/// there (a failure's), when k8sm evicts another: the planner counts the terminating pod in its size then (4 for 3
/// pods), more careful. Once the terminating pods are gone and the evicted one is replaced, the record holds the
/// workload to the size inferred now, so it is whole again with its 3 pods Ready, not "recovering" for good and
/// recording dips that are not k8sm's (a defect once, found by the model in `tests::sim`).
#[test]
fn an_unknown_kind_is_whole_again_at_the_size_inferred_now() {
    let brokers = crate::testing::owner(
        crate::OwnerKind::Other("KafkaNodePool".into()),
        "k",
        "brokers",
        None,
    );
    let mut view = ClusterView {
        nodes: vec![node("n1"), node("up").executor(NEW)],
        pods: crate::testing::shared_pods([
            brokers.pod("b0", "n1"),
            brokers.pod("b1", "up"),
            brokers.pod("b2", "up"),
            brokers.pod("b3", "up").terminating(),
        ]),
        policies: vec![policy("p").with(|s| s.owner_health_threshold = 50)],
        observed_sizes: [(brokers.uid.to_string(), 3)].into(),
        ..ClusterView::default()
    };
    let mut runs = Runs::new();
    let plan = pass(&mut view, &mut runs, at(0));
    assert_eq!(plan.evictions().count(), 1);
    let key = "KafkaNodePool k/brokers";
    let w = &runs["p"].workloads[key];
    assert_eq!((w.desired, w.min_ready, w.recovering), (4, 2, true));
    view.pods.retain(|p| !p.terminating);
    view.pods.push(std::sync::Arc::new(brokers.pod("b4", "up")));
    pass(&mut view, &mut runs, at(1));
    let w = &runs["p"].workloads[key];
    assert_eq!((w.desired, w.bound, w.min_ready), (3, 2, 2));
    assert!(!w.recovering, "{w:?}");
}

#[test]
fn what_an_operator_forced_on_a_node_is_recorded_once() {
    let mut view = fleet();
    let mut runs = Runs::new();
    pass(&mut view, &mut runs, at(0));
    let value = k8sm_api::report::ForcedRecord::annotation(at(1), "alice", "deleted shop/legacy");
    view.nodes[0].forced = Some(value);
    pass(&mut view, &mut runs, at(2));
    pass(&mut view, &mut runs, at(3));
    let forced = &runs["p"].forced;
    assert_eq!(forced.len(), 1, "{forced:?}");
    assert_eq!(
        (
            forced[0].node.as_str(),
            forced[0].user.as_str(),
            forced[0].at
        ),
        ("n1", "alice", at(1))
    );
}

/// Where a workload sets `minReadySeconds`, the record keeps its fewest Ready pods and its fewest available ones
/// apart: a pod Ready for 10 s of 60 is Ready and not available. Whole again once as many are available as desired.
#[test]
fn with_min_ready_seconds_the_record_keeps_ready_and_available_apart() {
    let mut d = deployment("shop", "web", 4);
    d.min_ready_seconds = 60;
    let rs = d.replica_set("web-1");
    let since = |p: crate::PodView, t: DateTime<Utc>| crate::PodView {
        ready_changed: Some(t),
        ..p
    };
    let long_ago = at(0) - chrono::Duration::minutes(30);
    let mut view = ClusterView {
        nodes: vec![node("n1"), node("up").executor(NEW)],
        pods: crate::testing::shared_pods([
            since(rs.pod("web-a", "n1"), long_ago),
            since(rs.pod("web-b", "up"), long_ago),
            since(rs.pod("web-c", "up"), long_ago),
            since(rs.pod("web-d", "up"), at(0) - chrono::Duration::seconds(10)),
        ]),
        owners: crate::testing::shared_owners([d, rs.clone()]),
        policies: vec![policy("p").with(|s| s.owner_health_threshold = 50)],
        ..ClusterView::default()
    };
    let mut runs = Runs::new();
    let plan = pass(&mut view, &mut runs, at(0));
    assert_eq!(plan.evictions().count(), 1, "3 available of 4, bound 2");
    let key = "Deployment shop/web";
    let w = &runs["p"].workloads[key];
    assert_eq!(
        (w.bound, w.min_ready, w.min_available),
        (2, 3, Some(2)),
        "{w:?}"
    );
    // The evicted pod replaced, Ready from at(1): 4 Ready, 3 available (web-d is by now).
    view.pods.retain(|p| !p.terminating);
    view.pods
        .push(std::sync::Arc::new(since(rs.pod("web-e", "up"), at(1))));
    pass(&mut view, &mut runs, at(1));
    let w = &runs["p"].workloads[key];
    assert_eq!(
        (w.min_ready, w.min_available, w.recovering),
        (3, Some(2), true)
    );
    // Available a minute later: whole again.
    pass(&mut view, &mut runs, at(2) + chrono::Duration::seconds(1));
    assert!(!runs["p"].workloads[key].recovering);
}
