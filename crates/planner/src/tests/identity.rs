//! Owners by identity: a pod counts for an owner only when its controller reference names that
//! owner's UID, kind and API group in the pod's own namespace. A tenant who may create pods in its
//! own namespace can write any reference on them; pods whose reference copies another namespace's
//! UID count for nobody but themselves.

use std::sync::Arc;

use super::*;
use crate::{
    ControllerRef, OwnerKind,
    testing::{deployment, owner, policy, replica_set},
    tests::pods::draining,
};

/// A Deployment `web` of 4 in `shop`, with its ReplicaSet: every pod on the draining node `n1`.
fn victim() -> (OwnerView, OwnerView, Vec<PodView>) {
    let web = deployment("shop", "web", 4);
    let rs = web.replica_set("web-6d4f");
    let pods = (0..4).map(|i| rs.pod(&format!("web-{i}"), "n1")).collect();
    (web, rs, pods)
}

/// `count` Ready pods of the tenant's namespace `tenant`, on the upgraded node, whose controller
/// reference is `reference`.
fn forged(count: usize, reference: ControllerRef) -> Vec<PodView> {
    let reference = Arc::new(reference);
    (0..count)
        .map(|i| PodView {
            controller: Some(Arc::clone(&reference)),
            ..crate::testing::unmanaged_pod("tenant", &format!("forged-{i}"), "up")
        })
        .collect()
}

/// Threshold 75%: the Deployment of 4 may lose one pod.
fn three_of_four() -> PolicyView {
    policy("p").with(|s| s.owner_health_threshold = 75)
}

/// The victim's pods evicted by one plan, with the tenant's pods in the view.
fn victim_evictions(tenant: Vec<PodView>) -> Vec<String> {
    let (web, rs, mut pods) = victim();
    pods.extend(tenant);
    let plan = plan_now(&draining(vec![web, rs], pods, three_of_four()));
    summary(&plan)
        .into_iter()
        .filter(|a| a.starts_with("Evict shop/"))
        .collect()
}

#[test]
fn without_a_tenant_the_deployment_loses_one_pod() {
    assert_eq!(victim_evictions(vec![]), ["Evict shop/web-0"]);
}

#[test]
fn pods_of_an_unserved_kind_that_copy_a_replica_set_s_uid_count_for_nobody_else() {
    let (_, rs, _) = victim();
    let tenant = forged(
        10,
        ControllerRef::new("tenant", "evil.example/v1", "Forged", "web-6d4f", &rs.uid),
    );
    assert_eq!(victim_evictions(tenant), ["Evict shop/web-0"]);
}

#[test]
fn pods_of_an_unserved_kind_that_copy_a_deployment_s_uid_count_for_nobody_else() {
    let (web, _, _) = victim();
    let tenant = forged(
        10,
        ControllerRef::new("tenant", "evil.example/v1", "Forged", "web", &web.uid),
    );
    assert_eq!(victim_evictions(tenant), ["Evict shop/web-0"]);
}

#[test]
fn a_reference_to_the_right_kind_in_another_namespace_names_nothing() {
    let (_, rs, _) = victim();
    let tenant = forged(
        10,
        ControllerRef::new("tenant", "apps/v1", "ReplicaSet", &rs.name, &rs.uid),
    );
    assert_eq!(victim_evictions(tenant), ["Evict shop/web-0"]);
}

#[test]
fn a_reference_with_the_wrong_kind_or_group_in_the_same_namespace_names_nothing() {
    let (web, rs, mut pods) = victim();
    for (api_version, kind) in [
        ("apps/v1", "StatefulSet"),
        ("evil.example/v1", "ReplicaSet"),
    ] {
        let reference = Arc::new(ControllerRef::new(
            "shop",
            api_version,
            kind,
            &rs.name,
            &rs.uid,
        ));
        for i in 0..5 {
            pods.push(PodView {
                controller: Some(Arc::clone(&reference)),
                ..crate::testing::unmanaged_pod("shop", &format!("{kind}-{i}"), "up")
            });
        }
    }
    let plan = plan_now(&draining(vec![web, rs], pods, three_of_four()));
    let evicted: Vec<String> = summary(&plan)
        .into_iter()
        .filter(|a| a.starts_with("Evict shop/web-"))
        .collect();
    assert_eq!(evicted, ["Evict shop/web-0"]);
}

#[test]
fn a_tenant_replica_set_that_claims_the_deployment_counts_for_nobody_else() {
    let (web, rs, pods) = victim();
    // The tenant's own ReplicaSet, whose controller reference copies the victim Deployment's: its
    // pods name it correctly, but it names nothing in its own namespace.
    let mut tenant_rs = replica_set("tenant", "web-6d4f", 10);
    tenant_rs.controller = Some(ControllerRef::new(
        "tenant",
        "apps/v1",
        "Deployment",
        &web.name,
        &web.uid,
    ));
    let mut all = pods;
    all.extend((0..10).map(|i| tenant_rs.pod(&format!("forged-{i}"), "up")));
    let plan = plan_now(&draining(vec![web, rs, tenant_rs], all, three_of_four()));
    let evicted: Vec<String> = summary(&plan)
        .into_iter()
        .filter(|a| a.starts_with("Evict shop/"))
        .collect();
    assert_eq!(evicted, ["Evict shop/web-0"]);
}

#[test]
fn unknown_controllers_with_one_uid_in_two_namespaces_are_two_workloads() {
    // Three brokers in `kafka`, and thirty pods of the tenant that copy the node pool's reference
    // in their own namespace: counted for it, they would let all three go at once (33 pods, 30
    // needed at 90%).
    let kafka = owner(
        OwnerKind::Other("KafkaNodePool".into()),
        "kafka",
        "brokers",
        None,
    );
    let mut pods = vec![
        kafka.pod("broker-0", "n1"),
        kafka.pod("broker-1", "n1"),
        kafka.pod("broker-2", "n1"),
    ];
    let mut copy = kafka.reference();
    copy.namespace = "tenant".into();
    pods.extend(forged(30, copy));
    let plan = plan_now(&draining(vec![], pods, policy("p")));
    let evicted: Vec<String> = summary(&plan)
        .into_iter()
        .filter(|a| a.starts_with("Evict kafka/"))
        .collect();
    // Of three brokers seen (not thirteen), one goes at a time.
    assert_eq!(evicted, ["Evict kafka/broker-0"]);
}

#[test]
fn keys_of_unseen_references_never_equal_a_uid_nor_each_other_across_namespaces() {
    let reference = |namespace: &str| {
        ControllerRef::new(namespace, "evil.example/v1", "Forged", "web", "uid-1")
    };
    assert_eq!(reference("a").key(), "a/evil.example/Forged/web/uid-1");
    assert_ne!(reference("a").key(), reference("b").key());
    assert_ne!(reference("a").key(), "uid-1");
    // The core group has no group part.
    let core = ControllerRef::new("a", "v1", "ReplicationController", "web", "uid-1");
    assert_eq!(core.key(), "a//ReplicationController/web/uid-1");
}
