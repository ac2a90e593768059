//! Pinned pods (docs/design.md §5.7): a pod whose replacement can only run on its own node keeps
//! that node for the operator under `workloads.pinnedPods: Block` (the default): never started,
//! nothing on it evicted, reported `BlockedPinnedPod` naming what pins it. `Evict` evicts it like
//! any other pod, as `kubectl drain` does.

use k8sm_api::{NodePhase, PinnedPods, UnmanagedPodPolicy};

use super::*;
use crate::{
    Decision, HOSTNAME_LABEL, NodeName, NodePin, VolumeView,
    testing::{NEW, hostname_terms, job, node, policy, replica_set, stateful_set, unmanaged_pod},
};

/// A workload of 10, 9 of its pods on an upgraded node and `here` on the marked node n1 (hostname
/// label `host-1`).
fn fleet(here: impl FnOnce(PodView) -> PodView) -> ClusterView {
    let rs = replica_set("shop", "web", 10);
    let mut pods: Vec<PodView> = (0..9).map(|i| rs.pod(&format!("w{i}"), "up")).collect();
    pods.push(here(rs.pod("web-here", "n1")));
    let nodes = vec![
        node("n1").label(HOSTNAME_LABEL, "host-1").marked(at(0)),
        node("up").executor(NEW),
    ];
    cluster(nodes, vec![rs], pods, vec![policy("p")])
}

/// n1 is not started (no action at all), is Blocked for its pinned pod, and the pod's message says
/// `by` and what clears it.
fn assert_kept_for_the_operator(view: &ClusterView, pod: &str, by: &str) {
    let plan = plan_now(view);
    assert!(summary(&plan).is_empty(), "{:?}", summary(&plan));
    assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
    assert!(
        blocker_reasons(&plan, "n1").contains(&Reason::BlockedPinnedPod),
        "{:?}",
        blocker_reasons(&plan, "n1")
    );
    let (decision, reason, message) = pod_decision(&plan, "n1", pod);
    assert_eq!(
        (decision, reason),
        (Decision::Block, Some(Reason::BlockedPinnedPod))
    );
    assert!(message.contains(by), "{message}");
    assert!(
        message.contains("set spec.workloads.pinnedPods: Evict to let it wait Pending until the node is back, or move it"),
        "{message}"
    );
    assert_eq!(node_plan(&plan, "n1").operator_pods, 1);
}

#[test]
fn a_hostname_node_selector_keeps_its_node_for_the_operator() {
    let mut view = fleet(|p| p.pinned(|p| p.hostname = Some("host-1".into())));
    assert_kept_for_the_operator(
        &view,
        "web-here",
        "nodeSelector kubernetes.io/hostname=host-1",
    );
    // The operator moved it: n1 is started like any node.
    view.pods.retain(|p| &*p.name != "web-here");
    assert_eq!(summary(&plan_now(&view)), ["Admit n1 +cordon"]);
}

#[test]
fn a_node_without_a_hostname_label_is_named_by_its_name() {
    let mut view = fleet(|p| p.pinned(|p| p.hostname = Some("n1".into())));
    view.nodes[0].labels.remove(HOSTNAME_LABEL);
    assert_kept_for_the_operator(&view, "web-here", "kubernetes.io/hostname=n1");
}

#[test]
fn a_required_node_affinity_to_this_node_only_keeps_it() {
    let view = fleet(|p| p.pinned(|p| p.affinity = Some(hostname_terms(&[&["host-1"]]))));
    assert_kept_for_the_operator(&view, "web-here", "required node affinity");
    // By the node's name (matchFields metadata.name), in every term.
    let by_name = NodePin {
        terms: vec![
            vec![NodeName::Name("n1".into())],
            vec![NodeName::Hostname("host-1".into())],
        ],
    };
    let view = fleet(|p| p.pinned(|p| p.affinity = Some(by_name)));
    assert_kept_for_the_operator(&view, "web-here", "required node affinity");
}

/// Selectors that some other node may satisfy do not pin: a required affinity with a term for
/// another node, a hostname selector of another node (the label changed under a running pod), a
/// claim with no volume that names a node. A preferred affinity never reaches the planner (the view
/// keeps required ones only: see k8sm-view).
#[test]
fn what_another_node_may_satisfy_does_not_pin() {
    for (name, pins) in [
        (
            "two nodes",
            crate::PodPins {
                affinity: Some(hostname_terms(&[&["host-1"], &["host-2"]])),
                ..Default::default()
            },
        ),
        (
            "another hostname",
            crate::PodPins {
                hostname: Some("host-2".into()),
                ..Default::default()
            },
        ),
        (
            "a claim of no pinned volume",
            crate::PodPins {
                claims: vec!["data".into()],
                ..Default::default()
            },
        ),
    ] {
        let view = fleet(|p| p.pinned(|p| *p = pins));
        assert_eq!(
            summary(&plan_now(&view)),
            ["Admit n1 +cordon", "Evict shop/web-here"],
            "{name}"
        );
    }
}

/// The volume of a StatefulSet pod's claim is a local volume of this node: its replacement could
/// only start here.
#[test]
fn a_local_volume_of_this_node_keeps_it() {
    let sts = stateful_set("shop", "db", 3);
    let mut pods = vec![sts.pod("db-0", "up"), sts.pod("db-1", "up")];
    pods.push(
        sts.pod("db-2", "n1")
            .pinned(|p| p.claims = vec!["config".into(), "data-db-2".into()]),
    );
    let nodes = vec![
        node("n1").label(HOSTNAME_LABEL, "host-1").marked(at(0)),
        node("up").executor(NEW),
    ];
    let mut view = cluster(
        nodes,
        vec![sts],
        pods,
        vec![policy("p").with(|s| s.owner_health_threshold = 50)],
    );
    let volume = |node: &str| VolumeView {
        name: "local-db-2".into(),
        claim_namespace: "shop".into(),
        claim_name: "data-db-2".into(),
        pin: hostname_terms(&[&[node]]),
    };
    view.volumes = vec![volume("host-1")];
    assert_kept_for_the_operator(
        &view,
        "db-2",
        "PersistentVolume local-db-2 (its claim data-db-2), whose node affinity only this node satisfies",
    );
    // A volume of another node's: not this node's pin (whatever the scheduler makes of it).
    view.volumes = vec![volume("host-2")];
    assert_eq!(
        summary(&plan_now(&view)),
        ["Admit n1 +cordon", "Evict shop/db-2"]
    );
}

/// `pinnedPods: Evict`: the operator accepts that the replacement waits Pending until the node is
/// back: n1 is started and its pinned pod evicted like any other, as `kubectl drain` does.
#[test]
fn evict_admits_the_node_and_evicts_its_pinned_pod() {
    let mut view = fleet(|p| p.pinned(|p| p.hostname = Some("host-1".into())));
    view.policies[0].spec.workloads.pinned_pods = PinnedPods::Evict;
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Admit n1 +cordon", "Evict shop/web-here"]);
    assert!(!blocker_reasons(&plan, "n1").contains(&Reason::BlockedPinnedPod));
}

/// An admitted node (a pinned pod came after its start, or the policy went back to `Block`): its
/// other pods go, and once only the pinned pod is left it gives its slot up and is uncordoned.
#[test]
fn an_admitted_node_with_only_a_pinned_pod_left_is_handed_back() {
    let rs = replica_set("shop", "web", 10);
    let mut pods: Vec<PodView> = (0..8).map(|i| rs.pod(&format!("w{i}"), "up")).collect();
    pods.push(rs.pod("web-free", "n1"));
    pods.push(
        rs.pod("web-pinned", "n1")
            .pinned(|p| p.hostname = Some("host-1".into())),
    );
    let nodes = vec![
        node("n1")
            .label(HOSTNAME_LABEL, "host-1")
            .marked(at(0))
            .admitted(at(1)),
        node("up").executor(NEW),
    ];
    let mut view = cluster(nodes, vec![rs], pods, vec![policy("p")]);
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Evict shop/web-free"]);
    assert_eq!(
        pod_decision(&plan, "n1", "web-pinned").1,
        Some(Reason::BlockedPinnedPod)
    );
    // The free pod left: only the pinned one holds the node.
    view.pods.retain(|p| &*p.name != "web-free");
    let plan = plan_now(&view);
    assert_eq!(summary(&plan), ["Stall n1 +uncordon"]);
    assert_eq!(phase(&plan, "n1"), NodePhase::Blocked);
}

/// A Job's pod pinned to the node holds it for the operator too (its Job would recreate it there);
/// a pod without a controller has no replacement, so the unmanaged-pod policy alone decides it
/// (here `Delete`).
#[test]
fn a_pinned_job_pod_keeps_its_node_and_a_pinned_bare_pod_is_the_unmanaged_policys() {
    let batch = job("shop", "report");
    let pinned = |p: PodView| p.pinned(|p| p.hostname = Some("host-1".into()));
    let nodes = || {
        vec![
            node("n1").label(HOSTNAME_LABEL, "host-1").marked(at(0)),
            node("up").executor(NEW),
        ]
    };
    let view = cluster(
        nodes(),
        vec![batch.clone()],
        vec![pinned(batch.pod("report-1", "n1"))],
        vec![policy("p")],
    );
    assert_kept_for_the_operator(&view, "report-1", "kubernetes.io/hostname=host-1");
    let view = cluster(
        nodes(),
        vec![],
        vec![pinned(unmanaged_pod("ops", "debug", "n1"))],
        vec![policy("p").with(|s| s.unmanaged_pods.policy = UnmanagedPodPolicy::Delete)],
    );
    assert_eq!(
        summary(&plan_now(&view)),
        ["Admit n1 +cordon", "Delete ops/debug"]
    );
}

/// Among many candidates queued for one slot (counted from the index's classes where none of their
/// pods can need an operator), the one with a pinned pod is not started, and the others queue as
/// before.
#[test]
fn a_pinned_pod_among_queued_nodes_is_counted() {
    let rs = replica_set("shop", "web", 20);
    let mut pods: Vec<PodView> = (0..10).map(|i| rs.pod(&format!("w{i}"), "up")).collect();
    let mut nodes = vec![node("up").executor(NEW)];
    for n in 0..5 {
        let name = format!("n{n}");
        nodes.push(node(&name).marked(at(0)));
        for i in 0..2 {
            let pod = rs.pod(&format!("web-{n}-{i}"), &name);
            pods.push(if n == 0 && i == 0 {
                pod.pinned(|p| p.hostname = Some("n0".into()))
            } else {
                pod
            });
        }
    }
    let view = cluster(nodes, vec![rs], pods, vec![policy("p")]);
    let plan = plan_now(&view);
    assert_eq!(phase(&plan, "n0"), NodePhase::Blocked);
    assert!(!admitted(&plan).contains("n0"), "{:?}", summary(&plan));
    assert_eq!(admitted(&plan).len(), 1, "{:?}", summary(&plan));
}
