//! Lists of observed objects → the planner's [`ClusterView`]: plain field reads, no decisions.

use k8sm_planner::{ClusterView, InFlightEviction};

use crate::node::node_view;
use crate::objects::Objects;
use crate::owner_views::OwnerViews;
use crate::pdb::pdb_view;
use crate::pin::volume_view;
use crate::pod::PodSource;
use crate::policy::policy_view;

/// Builds the planner's input from lists of objects and the controller's evictions not yet visible
/// in them. `owners` holds the owners' views of the last build (the controller keeps it from pass
/// to pass; a one-shot list passes a new one).
pub fn from_objects<P: PodSource>(
    objects: &Objects<'_, P>,
    owners: &mut OwnerViews,
    in_flight: Vec<InFlightEviction>,
) -> ClusterView {
    ClusterView {
        nodes: objects.nodes.iter().map(|n| node_view(n)).collect(),
        pods: objects.pods.iter().map(|p| p.pod_view()).collect(),
        owners: owners.views(objects),
        pdbs: objects.pdbs.iter().map(|p| pdb_view(p)).collect(),
        policies: objects.policies.iter().map(|p| policy_view(p)).collect(),
        in_flight,
        // The controller's memory, not an object: it sets them itself.
        observed_sizes: Default::default(),
        volumes: objects
            .persistent_volumes
            .iter()
            .filter_map(|v| volume_view(v))
            .collect(),
        // A flag of the controller's, not an object.
        pace_by_room: false,
        // The controller's calls, which it sets itself; without them every eviction is planned.
        calls: None,
    }
}

#[cfg(test)]
mod tests {
    //! Tests of `from_objects`: which objects become which parts of the view.

    use std::sync::Arc;

    use chrono::DateTime;
    use k8s_openapi::api::core::v1::Pod;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::*;
    use k8sm_planner::OwnerKind;

    fn arc<K: DeserializeOwned>(value: Value) -> Arc<K> {
        Arc::new(serde_json::from_value(value).expect("a valid object"))
    }

    fn pod(name: &str, node: Option<&str>, phase: &str) -> Arc<Pod> {
        arc(json!({
            "metadata": {"name": name, "namespace": "shop", "uid": format!("u-{name}"),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-new",
                                              "uid": "rs-new", "controller": true}]},
            "spec": {"nodeName": node, "containers": []},
            "status": {"phase": phase}
        }))
    }

    #[test]
    fn every_pod_bound_or_not_and_every_owner_kind() {
        let nodes = [arc(json!({"metadata": {"name": "n1", "uid": "un1"}}))];
        let pods = [
            pod("web-1", Some("n1"), "Running"),
            pod("web-2", None, "Pending"),
        ];
        let deployments = [arc(json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "d-web"},
            "spec": {"replicas": 3, "selector": {}, "template": {}}
        }))];
        let replica_set = |name: &str, replicas: i32| {
            arc(json!({
                "metadata": {"name": name, "namespace": "shop", "uid": format!("rs-{}", &name[4..]),
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                                  "uid": "d-web", "controller": true}]},
                "spec": {"replicas": replicas, "selector": {}}
            }))
        };
        let replica_sets = [replica_set("web-old", 1), replica_set("web-new", 2)];
        let rcs = [arc(
            json!({"metadata": {"name": "legacy", "namespace": "shop", "uid": "rc1"}, "spec": {"replicas": 2}}),
        )];
        let stateful_sets = [arc(json!({
            "metadata": {"name": "db", "namespace": "shop", "uid": "sts1"},
            "spec": {"selector": {}, "serviceName": "db", "template": {}}
        }))];
        let jobs = [arc(
            json!({"metadata": {"name": "report", "namespace": "shop", "uid": "job1"}, "spec": {"template": {}}}),
        )];
        let pdbs = [arc(
            json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {}}),
        )];
        let policies = [arc(json!({
            "apiVersion": "k8s.mesosphere.io/v1alpha1", "kind": "ExecutorUpgradePolicy",
            "metadata": {"name": "fleet"}, "spec": {}
        }))];
        let in_flight = vec![InFlightEviction {
            unanswered: false,
            pod_uid: "u-web-0".into(),
            owner_uid: Some("d-web".into()),
            at: DateTime::UNIX_EPOCH,
        }];
        // A local volume of a claim, a volume of none, and one that any node of a zone can mount.
        let volume = |name: &str, claim: bool, key: &str| {
            let claim_ref =
                claim.then(|| json!({"namespace": "shop", "name": format!("data-{name}")}));
            arc(json!({
                "metadata": {"name": name},
                "spec": {"claimRef": claim_ref, "local": {"path": "/mnt/disk"},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                             {"key": key, "operator": "In", "values": ["n1"]}]}]}}}
            }))
        };
        let volumes = [
            volume("local-1", true, "kubernetes.io/hostname"),
            volume("free", false, "kubernetes.io/hostname"),
            volume("zonal", true, "topology.kubernetes.io/zone"),
        ];
        let objects = Objects {
            nodes: &nodes,
            pods: &pods,
            deployments: &deployments,
            replica_sets: &replica_sets,
            replication_controllers: &rcs,
            stateful_sets: &stateful_sets,
            jobs: &jobs,
            pdbs: &pdbs,
            policies: &policies,
            persistent_volumes: &volumes,
        };
        let view = from_objects(&objects, &mut OwnerViews::default(), in_flight.clone());

        assert_eq!(view.nodes.len(), 1);
        let pods: Vec<(&str, Option<&str>)> = view
            .pods
            .iter()
            .map(|p| (&*p.name, p.node_name.as_deref()))
            .collect();
        assert_eq!(
            pods,
            [("web-1", Some("n1")), ("web-2", None)],
            "the Pending replacement counts too"
        );
        let owners: Vec<(OwnerKind, &str, Option<u32>, Option<&str>)> = view
            .owners
            .iter()
            .map(|o| {
                (
                    o.kind.clone(),
                    &*o.name,
                    o.desired,
                    o.controller.as_ref().map(|c| &*c.uid),
                )
            })
            .collect();
        assert_eq!(
            owners,
            [
                (OwnerKind::Deployment, "web", Some(3), None),
                (OwnerKind::ReplicaSet, "web-old", Some(1), Some("d-web")),
                (OwnerKind::ReplicaSet, "web-new", Some(2), Some("d-web")),
                (OwnerKind::ReplicationController, "legacy", Some(2), None),
                (OwnerKind::StatefulSet, "db", Some(1), None),
                (OwnerKind::Job, "report", None, None),
            ]
        );
        assert_eq!(view.pdbs.len(), 1);
        assert_eq!(view.policies[0].name, "fleet");
        assert_eq!(view.in_flight, in_flight);
        let volumes: Vec<(&str, &str)> = view
            .volumes
            .iter()
            .map(|v| (&*v.name, &*v.claim_name))
            .collect();
        assert_eq!(
            volumes,
            [("local-1", "data-local-1")],
            "only volumes of a claim that name a node"
        );
    }

    #[test]
    fn no_objects_no_view() {
        assert_eq!(
            from_objects(
                &Objects::<Pod>::default(),
                &mut OwnerViews::default(),
                Vec::new()
            ),
            ClusterView::default()
        );
    }
}
