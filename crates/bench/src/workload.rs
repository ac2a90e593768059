//! The benchmark's workload: owners of mixed sizes (1 to 50 replicas), a few StatefulSets, a few unmanaged pods and
//! a DaemonSet, derived deterministically from the node and pod counts, and created in a namespace.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::PostParams;
use kube::{Api, Client};
use serde::{Deserialize, Serialize};

use k8sm_e2e::workloads;

/// Replica counts of the owners, in the order they are created, repeated until the pods are placed. Sizes that are
/// not multiples of 10 matter: at 90% an owner of 15 replicas may lose only one pod at a time.
pub const SIZES: [u32; 13] = [1, 2, 3, 5, 8, 10, 12, 15, 20, 25, 30, 40, 50];

/// How many of the first owners are StatefulSets instead of Deployments ("a few"): positions in [`SIZES`].
const STATEFUL_POSITIONS: [usize; 3] = [2, 5, 8];

/// Name of the DaemonSet (its pods are ignored by every drain and by the measurements).
pub const DAEMON_SET: &str = "node-logs";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    Deployment,
    StatefulSet,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployment => "Deployment",
            Self::StatefulSet => "StatefulSet",
        }
    }
}

/// One replicated owner; its pods carry the label `app=<name>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub name: String,
    pub kind: Kind,
    pub replicas: u32,
}

/// An unmanaged pod bound to the node of this index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unmanaged {
    pub name: String,
    pub node_index: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    pub owners: Vec<Owner>,
    pub unmanaged: Vec<Unmanaged>,
}

impl Workload {
    /// `pods` pods on `nodes` nodes: one unmanaged pod per 20 nodes (at least one), the rest in owners whose sizes
    /// cycle through [`SIZES`]; the last owner takes what is left.
    pub fn plan(nodes: usize, pods: usize) -> Self {
        let unmanaged_count = (nodes / 20).max(1).min(pods);
        let unmanaged = (0..unmanaged_count)
            .map(|i| Unmanaged {
                name: format!("debug-{i:02}"),
                // Spread over the fleet.
                node_index: i * nodes / unmanaged_count,
            })
            .collect();
        let mut left = u32::try_from(pods - unmanaged_count).unwrap_or(u32::MAX);
        let mut owners = Vec::new();
        let mut i = 0;
        while left > 0 {
            let position = i % SIZES.len();
            let replicas = SIZES[position].min(left);
            let kind = if i < SIZES.len() && STATEFUL_POSITIONS.contains(&position) {
                Kind::StatefulSet
            } else {
                Kind::Deployment
            };
            let prefix = match kind {
                Kind::Deployment => "dep",
                Kind::StatefulSet => "sts",
            };
            owners.push(Owner {
                name: format!("{prefix}-{i:03}-x{replicas}"),
                kind,
                replicas,
            });
            left -= replicas;
            i += 1;
        }
        Self { owners, unmanaged }
    }

    /// Pods of owners and unmanaged pods (not the DaemonSet's).
    pub fn pods(&self) -> usize {
        self.owners
            .iter()
            .map(|o| o.replicas as usize)
            .sum::<usize>()
            + self.unmanaged.len()
    }

    pub fn replicas(&self) -> Vec<u32> {
        self.owners.iter().map(|o| o.replicas).collect()
    }

    /// A few owners worth charting: the largest Deployment, the first owner of the size that needs the most
    /// waves, the first StatefulSet and a small Deployment.
    pub fn charted(&self, critical_replicas: u32) -> Vec<&Owner> {
        let deployments = || self.owners.iter().filter(|o| o.kind == Kind::Deployment);
        let candidates = [
            deployments().min_by_key(|o| std::cmp::Reverse(o.replicas)),
            deployments().find(|o| o.replicas == critical_replicas),
            self.owners.iter().find(|o| o.kind == Kind::StatefulSet),
            deployments().find(|o| o.replicas == 3),
        ];
        let mut picks: Vec<&Owner> = Vec::new();
        for owner in candidates.into_iter().flatten() {
            if !picks.iter().any(|p| p.name == owner.name) {
                picks.push(owner);
            }
        }
        picks
    }

    /// Creates every object in `namespace`, with a PodDisruptionBudget per owner when `pdb_threshold` is set: its
    /// `minAvailable` is the owner's SLA bound at that threshold, `min(ceil(t·d), d−1)` (see [`budget_at_bound`]).
    pub async fn create(
        &self,
        client: &Client,
        namespace: &str,
        node_name: impl Fn(usize) -> String,
        pdb_threshold: Option<u8>,
    ) -> anyhow::Result<()> {
        let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
            Api::namespaced(client.clone(), namespace);
        let stateful_sets: Api<k8s_openapi::api::apps::v1::StatefulSet> =
            Api::namespaced(client.clone(), namespace);
        let budgets: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
            Api::namespaced(client.clone(), namespace);
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), namespace);
        let daemon_sets: Api<k8s_openapi::api::apps::v1::DaemonSet> =
            Api::namespaced(client.clone(), namespace);
        let post = PostParams::default();
        daemon_sets
            .create(&post, &workloads::daemon_set(namespace, DAEMON_SET))
            .await?;
        futures::stream::iter(&self.owners)
            .map(|owner| {
                let (deployments, stateful_sets, budgets, post) =
                    (&deployments, &stateful_sets, &budgets, &post);
                async move {
                    let replicas = i32::try_from(owner.replicas)?;
                    if let Some(threshold) = pdb_threshold {
                        let pdb = workloads::pdb_min_available(
                            namespace,
                            &owner.name,
                            &owner.name,
                            budget_at_bound(owner.replicas, threshold),
                        );
                        budgets.create(post, &pdb).await?;
                    }
                    match owner.kind {
                        Kind::Deployment => {
                            let object = workloads::deployment(namespace, &owner.name, replicas);
                            deployments.create(post, &object).await?;
                        }
                        Kind::StatefulSet => {
                            let object = workloads::stateful_set(namespace, &owner.name, replicas);
                            stateful_sets.create(post, &object).await?;
                        }
                    }
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(8)
            .try_collect::<Vec<_>>()
            .await?;
        for pod in &self.unmanaged {
            let object =
                workloads::unmanaged_pod(namespace, &pod.name, &node_name(pod.node_index), &[]);
            pods.create(&post, &object).await?;
        }
        Ok(())
    }
}

/// The `minAvailable` that holds an owner of `replicas` to exactly the guarantee k8sm gives at `threshold`: its SLA
/// bound `min(ceil(t·d), d−1)`. A percentage (`90%`) is stricter for every owner under 10 replicas (it allows no
/// disruption at all, so drain waits for its timeout and the baseline measured that timeout, not the tool); the bound
/// is computed by the test cluster's oracle, apart from the planner under test.
pub fn budget_at_bound(replicas: u32, threshold: u8) -> IntOrString {
    let bound = k8sm_testcluster::sla::bound(replicas, u32::from(threshold));
    IntOrString::Int(i32::try_from(bound).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_places_exactly_the_pods_asked_for() {
        for (nodes, pods) in [(100, 3000), (20, 300), (3, 7), (500, 15_000), (1, 1)] {
            let workload = Workload::plan(nodes, pods);
            assert_eq!(workload.pods(), pods, "{nodes} nodes, {pods} pods");
            assert!(
                workload
                    .owners
                    .iter()
                    .all(|o| (1..=50).contains(&o.replicas))
            );
        }
    }

    #[test]
    fn a_hundred_nodes_get_mixed_owners_a_few_stateful_sets_and_unmanaged_pods() {
        let workload = Workload::plan(100, 3000);
        assert_eq!(workload.unmanaged.len(), 5);
        let stateful: Vec<_> = workload
            .owners
            .iter()
            .filter(|o| o.kind == Kind::StatefulSet)
            .map(|o| o.replicas)
            .collect();
        assert_eq!(stateful, [3, 10, 20]);
        let sizes: std::collections::BTreeSet<u32> =
            workload.owners.iter().map(|o| o.replicas).collect();
        assert!(sizes.contains(&1) && sizes.contains(&50));
        assert_eq!(workload.owners[0].name, "dep-000-x1");
        assert_eq!(workload.owners[2].name, "sts-002-x3");
        // Unmanaged pods are spread over the fleet.
        let nodes: Vec<usize> = workload.unmanaged.iter().map(|u| u.node_index).collect();
        assert_eq!(nodes, [0, 20, 40, 60, 80]);
    }

    #[test]
    fn charted_owners_are_distinct_and_include_the_critical_size() {
        let workload = Workload::plan(100, 3000);
        let names: Vec<&str> = workload
            .charted(15)
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(
            names,
            ["dep-012-x50", "dep-007-x15", "sts-002-x3", "dep-015-x3"]
        );
    }

    #[test]
    fn budgets_sit_at_the_sla_bound_not_at_a_percentage() {
        // min(ceil(0.9·d), d−1), worked out by hand: a percentage would allow nothing under 10 replicas.
        for (replicas, min_available) in [(1, 0), (2, 1), (3, 2), (10, 9), (15, 14), (50, 45)] {
            assert_eq!(
                budget_at_bound(replicas, 90),
                IntOrString::Int(min_available),
                "{replicas} replicas"
            );
        }
        assert_eq!(budget_at_bound(4, 50), IntOrString::Int(2));
    }
}
