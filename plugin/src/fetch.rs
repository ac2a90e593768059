//! Reads from the cluster: policies (choosing one like every subcommand does) and one-shot
//! snapshots of everything the planner reads, converted exactly as the controller converts its
//! caches (`k8sm_view`).

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ListParams;
use kube::core::{PartialObjectMeta, Selector};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use k8sm_api::ExecutorUpgradePolicy;
use k8sm_planner::ClusterView;
use k8sm_view::{Objects, OwnerViews, from_objects};

use crate::error::{Error, KubeContext};

/// Every policy, sorted by name. A 404 on the list means the CRD is not installed.
pub async fn policies(client: &Client) -> Result<Vec<ExecutorUpgradePolicy>, Error> {
    let api: Api<ExecutorUpgradePolicy> = Api::all(client.clone());
    match api.list(&ListParams::default()).await {
        Ok(list) => {
            let mut items = list.items;
            items.sort_by_key(|p| p.name_any());
            Ok(items)
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Err(Error::CrdMissing),
        Err(e) => Err(Error::kube("listing ExecutorUpgradePolicies", e)),
    }
}

/// The policy a command acts on: `--policy NAME`, or the only one there is.
pub async fn policy(client: &Client, wanted: Option<&str>) -> Result<ExecutorUpgradePolicy, Error> {
    let all = policies(client).await?;
    let names: Vec<String> = all.iter().map(ResourceExt::name_any).collect();
    let name = choose(&names, wanted)?;
    Ok(all
        .into_iter()
        .find(|p| p.name_any() == name)
        .expect("choose returns one of the names"))
}

/// Picks the policy named `wanted`, or, without a name, the only policy. Pure, for the tests.
pub fn choose(names: &[String], wanted: Option<&str>) -> Result<String, Error> {
    match (wanted, names) {
        (Some(name), _) if names.iter().any(|n| n == name) => Ok(name.to_owned()),
        (Some(name), _) => Err(Error::PolicyNotFound {
            name: name.to_owned(),
            existing: names.to_vec(),
        }),
        (None, []) => Err(Error::NoPolicy),
        (None, [only]) => Ok(only.clone()),
        (None, several) => Err(Error::AmbiguousPolicy {
            names: several.to_vec(),
        }),
    }
}

/// A one-shot view of everything the planner reads (nothing in flight: the plugin evicts nothing
/// itself).
pub async fn cluster_view(client: &Client) -> Result<ClusterView, Error> {
    let policies: Vec<Arc<ExecutorUpgradePolicy>> =
        policies(client).await?.into_iter().map(Arc::new).collect();
    let (
        nodes,
        pods,
        deployments,
        replica_sets,
        replication_controllers,
        stateful_sets,
        jobs,
        pdbs,
        persistent_volumes,
    ) = futures::try_join!(
        list::<Node>(client, "nodes"),
        list::<Pod>(client, "pods"),
        list::<Deployment>(client, "deployments"),
        list::<ReplicaSet>(client, "replicasets"),
        list::<ReplicationController>(client, "replicationcontrollers"),
        list::<StatefulSet>(client, "statefulsets"),
        list::<Job>(client, "jobs"),
        list::<PodDisruptionBudget>(client, "poddisruptionbudgets"),
        list::<PersistentVolume>(client, "persistentvolumes"),
    )?;
    let objects = Objects {
        nodes: &nodes,
        pods: &pods,
        deployments: &deployments,
        replica_sets: &replica_sets,
        replication_controllers: &replication_controllers,
        stateful_sets: &stateful_sets,
        jobs: &jobs,
        pdbs: &pdbs,
        policies: &policies,
        persistent_volumes: &persistent_volumes,
    };
    // A one-shot list: nothing to keep from an earlier build.
    Ok(from_objects(
        &objects,
        &mut OwnerViews::default(),
        Vec::new(),
    ))
}

/// The label query of the nodes `upgrade status --all` or `-l` lists: the policy's
/// `spec.nodeSelector`, and `extra` (`-l`) too, as one query the apiserver evaluates.
pub fn policy_node_selector(
    policy: &ExecutorUpgradePolicy,
    extra: Option<&str>,
) -> Result<String, Error> {
    let own = Selector::try_from(policy.spec.node_selector.clone()).map_err(|e| {
        Error::InvalidFlag(format!(
            "spec.nodeSelector of ExecutorUpgradePolicy {}: {e}",
            policy.name_any()
        ))
    })?;
    Ok(
        [own.to_string(), extra.unwrap_or_default().trim().to_owned()]
            .into_iter()
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// The labels and annotations of every node `selector` matches: metadata only, a fraction of whole
/// nodes.
pub async fn node_metadata(
    client: &Client,
    selector: &str,
) -> Result<Vec<PartialObjectMeta<Node>>, Error> {
    let api: Api<PartialObjectMeta<Node>> = Api::all(client.clone());
    Ok(api
        .list(&ListParams::default().labels(selector))
        .await
        .kube_context(format!("listing nodes with labels {selector:?}"))?
        .items)
}

/// The UIDs of every pod `selector` matches (metadata only).
pub async fn pod_uids(client: &Client, selector: &str) -> Result<HashSet<String>, Error> {
    let api: Api<PartialObjectMeta<Pod>> = Api::all(client.clone());
    Ok(api
        .list(&ListParams::default().labels(selector))
        .await
        .kube_context(format!("listing pods with labels {selector:?}"))?
        .items
        .into_iter()
        .filter_map(|pod| pod.metadata.uid)
        .collect())
}

/// Whether node `name` exists.
pub async fn node_exists(client: &Client, name: &str) -> Result<bool, Error> {
    let api: Api<Node> = Api::all(client.clone());
    Ok(api
        .get_opt(name)
        .await
        .kube_context(format!("reading node {name}"))?
        .is_some())
}

async fn list<K>(client: &Client, plural: &str) -> Result<Vec<Arc<K>>, Error>
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .kube_context(format!("listing {plural}"))?;
    Ok(list.items.into_iter().map(Arc::new).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn the_only_policy_is_chosen() {
        assert_eq!(choose(&names(&["fleet"]), None).unwrap(), "fleet");
    }

    #[test]
    fn a_named_policy_must_exist() {
        assert_eq!(choose(&names(&["a", "b"]), Some("b")).unwrap(), "b");
        let error = choose(&names(&["a", "b"]), Some("c")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "ExecutorUpgradePolicy \"c\" does not exist: existing policies: a, b"
        );
    }

    #[test]
    fn several_policies_need_a_name() {
        let error = choose(&names(&["a", "b", "c"]), None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "3 ExecutorUpgradePolicies exist (a, b, c): choose one with --policy NAME"
        );
    }

    #[test]
    fn the_nodes_of_a_policy_are_those_of_its_selector_and_of_l() {
        let policy: ExecutorUpgradePolicy = serde_json::from_value(serde_json::json!({
            "apiVersion": "k8s.mesosphere.io/v1alpha1",
            "kind": "ExecutorUpgradePolicy",
            "metadata": {"name": "fleet"},
            "spec": {"nodeSelector": {"matchLabels": {"pool": "gpu"},
                     "matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]}},
        }))
        .unwrap();
        let selector = |extra| policy_node_selector(&policy, extra).unwrap();
        assert_eq!(selector(None), "pool=gpu,!spot");
        assert_eq!(
            selector(Some("zone in (a,b)")),
            "pool=gpu,!spot,zone in (a,b)"
        );
        let mut everything = policy.clone();
        everything.spec.node_selector = Default::default();
        assert_eq!(
            policy_node_selector(&everything, Some("zone=a")).unwrap(),
            "zone=a"
        );
        assert_eq!(policy_node_selector(&everything, None).unwrap(), "");
    }

    #[test]
    fn no_policy_says_how_to_create_one() {
        assert!(matches!(choose(&[], None), Err(Error::NoPolicy)));
    }
}
