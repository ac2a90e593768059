//! Pods classified through the index, which looks up their owners and evictions in flight.

use k8sm_api::keys;

use crate::{
    ClusterView, OwnerKind, OwnerView, PodPhase, PodView,
    index::Index,
    model::view::InFlightEviction,
    objects::classify::{
        Class, Ignored, MIRROR_ANNOTATION, Unmanaged, controller_class, is_watched, seed,
    },
    testing::{daemon_set, deployment, job, owner, replica_set, unmanaged_pod},
};

/// Classifies `pod` (the index classifies each pod of its view once, from its [`Seed`]).
fn classify<'a>(pod: &'a PodView, index: &Index<'a>) -> Class<'a> {
    let entry = pod.controller.as_ref().and_then(|c| index.lookups.owner(c));
    let lookups = &index.lookups;
    let seed = seed(pod);
    seed.class(lookups.in_flight_pods.contains(&*pod.uid), || {
        let controller = pod.controller.as_deref();
        let watched = pod.controller.as_ref().is_some_and(|c| is_watched(&c.kind));
        controller_class(
            controller.expect("a seed that needs the controller has one"),
            watched,
            entry.as_ref(),
            lookups,
        )
    })
}

/// Classifies each pod of a small cluster.
fn class_of(pods: Vec<PodView>, owners: Vec<OwnerView>, in_flight: Vec<&str>) -> Vec<PodClassOf> {
    let view = ClusterView {
        pods: crate::testing::shared_pods(pods),
        owners: crate::testing::shared_owners(owners),
        in_flight: in_flight
            .into_iter()
            .map(|uid| InFlightEviction {
                unanswered: false,
                pod_uid: uid.into(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let mut facts = crate::objects::pod_cache::PodCache::default();
    let mut budgets = crate::objects::budgets::KeptBudgets::default();
    let mut tally = crate::index::tally::KeptTally::default();
    let index = Index::new(
        &view,
        &mut facts,
        &mut Default::default(),
        &mut budgets,
        &mut tally,
        crate::testing::t0(),
    );
    view.pods
        .iter()
        .map(|p| PodClassOf::from(classify(p, &index)))
        .collect()
}

/// `Class` without the borrow, for comparisons.
#[derive(Debug, PartialEq)]
enum PodClassOf {
    Ignored(Ignored),
    Finished,
    OptedOut(&'static str),
    Owned(String),
    Job(String),
    NoController,
    OwnerGone(String),
    OwnerDeleting(String),
    Other(String),
}

impl From<Class<'_>> for PodClassOf {
    fn from(class: Class) -> Self {
        match class {
            Class::Ignored(why) => Self::Ignored(why),
            Class::Finished => Self::Finished,
            Class::OptedOut(key) => Self::OptedOut(key),
            Class::Owned(w) => Self::Owned(format!("{} {}", w.kind(), w.name())),
            Class::Other(w) => Self::Other(format!("{} {}", w.kind(), w.name())),
            Class::Job(o) => Self::Job(o.name.clone()),
            Class::Unmanaged(Unmanaged::NoController) => Self::NoController,
            Class::Unmanaged(Unmanaged::OwnerGone(c)) => Self::OwnerGone(c.name.clone()),
            Class::Unmanaged(Unmanaged::OwnerDeleting(c)) => Self::OwnerDeleting(c.name.clone()),
        }
    }
}

#[test]
fn classification_table() {
    let rs = replica_set("ns", "web", 3);
    let sts = owner(OwnerKind::StatefulSet, "ns", "db", Some(3));
    let rc = owner(OwnerKind::ReplicationController, "ns", "legacy", Some(2));
    let jb = job("ns", "batch");
    let ds = daemon_set("ns", "agent");
    let custom = owner(OwnerKind::Other("Rollout".into()), "ns", "canary", Some(2));
    let mut deleting = replica_set("ns", "old", 2);
    deleting.exists = false;
    // Not in the view at all.
    let gone = replica_set("ns", "deleted", 2);
    let shop = deployment("ns", "shop", 4);
    let (shop_old, shop_new) = (shop.replica_set("shop-1"), shop.replica_set("shop-2"));
    let orphan_rs = deployment("ns", "missing", 2).replica_set("missing-1");
    let rollout = owner(
        OwnerKind::Other("Rollout".into()),
        "ns",
        "canary-rollout",
        None,
    );
    let rollout_rs = replica_set("ns", "canary-rollout-1", 2).controlled_by(&rollout);
    let cases: Vec<(&str, PodView, PodClassOf)> = vec![
        (
            "owned by a ReplicaSet",
            rs.pod("a", "n1"),
            PodClassOf::Owned("ReplicaSet web".into()),
        ),
        (
            "owned by a StatefulSet",
            sts.pod("b", "n1"),
            PodClassOf::Owned("StatefulSet db".into()),
        ),
        (
            "owned by a ReplicationController",
            rc.pod("c", "n1"),
            PodClassOf::Owned("ReplicationController legacy".into()),
        ),
        (
            "Job pod",
            jb.pod("d", "n1"),
            PodClassOf::Job("batch".into()),
        ),
        (
            "DaemonSet pod",
            ds.pod("e", "n1"),
            PodClassOf::Ignored(Ignored::DaemonSet),
        ),
        (
            "mirror pod by field",
            unmanaged_pod("ns", "f", "n1").mirror(),
            PodClassOf::Ignored(Ignored::Mirror),
        ),
        (
            "mirror pod by annotation",
            unmanaged_pod("ns", "g", "n1").annotation(MIRROR_ANNOTATION, "abc"),
            PodClassOf::Ignored(Ignored::Mirror),
        ),
        (
            "terminating",
            rs.pod("h", "n1").terminating(),
            PodClassOf::Ignored(Ignored::Terminating),
        ),
        (
            "eviction in flight",
            rs.pod("inflight", "n1"),
            PodClassOf::Ignored(Ignored::EvictionInFlight),
        ),
        (
            "succeeded",
            jb.pod("i", "n1").phase(PodPhase::Succeeded),
            PodClassOf::Finished,
        ),
        (
            "failed",
            unmanaged_pod("ns", "j", "n1").phase(PodPhase::Failed),
            PodClassOf::Finished,
        ),
        (
            "finished and opted out",
            unmanaged_pod("ns", "k", "n1")
                .phase(PodPhase::Failed)
                .label(keys::UPGRADE_OPT_OUT_LABEL, "true"),
            PodClassOf::Ignored(Ignored::FinishedOptedOut),
        ),
        (
            "opt-out label",
            rs.pod("l", "n1").label(keys::UPGRADE_OPT_OUT_LABEL, "true"),
            PodClassOf::OptedOut(keys::UPGRADE_OPT_OUT_LABEL),
        ),
        (
            "opt-out as annotation, any case",
            rs.pod("m", "n1")
                .annotation(keys::UPGRADE_OPT_OUT_LABEL, " True "),
            PodClassOf::OptedOut(keys::UPGRADE_OPT_OUT_LABEL),
        ),
        (
            "opt-out false does not opt out",
            rs.pod("n", "n1")
                .label(keys::UPGRADE_OPT_OUT_LABEL, "false"),
            { PodClassOf::Owned("ReplicaSet web".into()) },
        ),
        (
            "karpenter do-not-disrupt",
            rs.pod("o", "n1")
                .annotation(keys::KARPENTER_DO_NOT_DISRUPT_ANNOTATION, "true"),
            PodClassOf::OptedOut(keys::KARPENTER_DO_NOT_DISRUPT_ANNOTATION),
        ),
        (
            "karpenter do-not-disrupt as a label",
            rs.pod("p", "n1")
                .label(keys::KARPENTER_DO_NOT_DISRUPT_ANNOTATION, "true"),
            PodClassOf::OptedOut(keys::KARPENTER_DO_NOT_DISRUPT_ANNOTATION),
        ),
        (
            "cluster-autoscaler safe-to-evict false",
            unmanaged_pod("ns", "q", "n1")
                .annotation(keys::CLUSTER_AUTOSCALER_SAFE_TO_EVICT_ANNOTATION, "false"),
            PodClassOf::OptedOut(keys::CLUSTER_AUTOSCALER_SAFE_TO_EVICT_ANNOTATION),
        ),
        (
            "cluster-autoscaler safe-to-evict true does not opt out",
            rs.pod("r", "n1")
                .annotation(keys::CLUSTER_AUTOSCALER_SAFE_TO_EVICT_ANNOTATION, "true"),
            PodClassOf::Owned("ReplicaSet web".into()),
        ),
        (
            "no controller",
            unmanaged_pod("ns", "s", "n1"),
            PodClassOf::NoController,
        ),
        (
            "controller being deleted",
            deleting.pod("t", "n1"),
            PodClassOf::OwnerDeleting("old".into()),
        ),
        (
            "controller gone",
            gone.pod("t2", "n1"),
            PodClassOf::OwnerGone("deleted".into()),
        ),
        (
            "Job gone",
            job("ns", "finished").pod("t3", "n1"),
            PodClassOf::OwnerGone("finished".into()),
        ),
        (
            "controller of a kind k8sm does not watch, not in the view",
            owner(OwnerKind::Other("Rollout".into()), "ns", "elsewhere", None).pod("t4", "n1"),
            PodClassOf::Other("Rollout elsewhere".into()),
        ),
        (
            "controller of another kind",
            custom.pod("u", "n1"),
            PodClassOf::Other("Rollout canary".into()),
        ),
        (
            "a ReplicaSet of a Deployment counts for the Deployment",
            shop_old.pod("w", "n1"),
            PodClassOf::Owned("Deployment shop".into()),
        ),
        (
            "its other ReplicaSet too",
            shop_new.pod("x", "n1"),
            PodClassOf::Owned("Deployment shop".into()),
        ),
        (
            "a ReplicaSet whose Deployment is not in the view waits",
            orphan_rs.pod("y", "n1"),
            PodClassOf::OwnerGone("missing".into()),
        ),
        (
            "a ReplicaSet of a controller of another kind counts for that controller",
            rollout_rs.pod("z", "n1"),
            PodClassOf::Other("Rollout canary-rollout".into()),
        ),
        (
            "terminating beats opted out",
            rs.pod("v", "n1")
                .terminating()
                .label(keys::UPGRADE_OPT_OUT_LABEL, "true"),
            PodClassOf::Ignored(Ignored::Terminating),
        ),
    ];
    let owners = vec![
        rs, sts, rc, jb, ds, custom, deleting, shop, shop_old, shop_new, orphan_rs, rollout_rs,
    ];
    let (names, pods): (Vec<&str>, Vec<PodView>) =
        cases.iter().map(|(n, p, _)| (*n, p.clone())).unzip();
    let got = class_of(pods, owners, vec!["ns/inflight"]);
    for ((name, (_, _, expected)), got) in names.iter().zip(&cases).zip(got) {
        assert_eq!(&got, expected, "{name}");
    }
}
