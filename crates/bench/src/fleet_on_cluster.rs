//! The fleet made real on the bench cluster: [`Workload::create`] creates its objects in a
//! namespace (with a messy fleet's owner traits from `crate::mess`), and
//! [`Workload::start_rollout`] starts the realistic shape's rollout.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{
    DaemonSet, Deployment, DeploymentStrategy, RollingUpdateDeployment, StatefulSet,
};
use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec,
    PodTemplateSpec, PreferredSchedulingTerm, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use k8sm_e2e::workloads;
use k8sm_testcluster::READY_DELAY_ANNOTATION;

use crate::mess;
use crate::workload::{
    DAEMON_REQUESTS, DAEMON_SET, Kind, UNMANAGED_REQUESTS, Workload, budget_at_bound,
};

/// The annotation of the rolling Deployment's template that [`Workload::start_rollout`] changes.
const REVISION_ANNOTATION: &str = "bench.k8sm.io/revision";

impl Workload {
    /// Creates every object in `namespace`, with a PodDisruptionBudget per owner when
    /// `pdb_threshold` is set: its `minAvailable` is the owner's SLA bound at that threshold,
    /// `min(ceil(t·d), d−1)` (see [`budget_at_bound`]). A messy fleet's owners get their traits
    /// here; its dead nodes, stuck rollouts and zombies are `crate::mess`'s.
    pub async fn create(
        &self,
        client: &Client,
        namespace: &str,
        node_name: impl Fn(usize) -> String,
        pdb_threshold: Option<u8>,
    ) -> anyhow::Result<()> {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
        let stateful_sets: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
        let budgets: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
            Api::namespaced(client.clone(), namespace);
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
        let post = PostParams::default();
        let mut daemon_set = workloads::daemon_set(namespace, DAEMON_SET);
        if let Some(template) = daemon_set.spec.as_mut().map(|s| &mut s.template) {
            self.realise(template, 0, DAEMON_REQUESTS, &[], &node_name);
        }
        daemon_sets.create(&post, &daemon_set).await?;
        let node_name = &node_name;
        futures::stream::iter(&self.owners)
            .map(|owner| {
                let (deployments, stateful_sets, budgets, post) =
                    (&deployments, &stateful_sets, &budgets, &post);
                async move {
                    let replicas = i32::try_from(owner.replicas)?;
                    if let Some(threshold) = pdb_threshold {
                        let mut pdb = workloads::pdb_min_available(
                            namespace,
                            &owner.name,
                            &owner.name,
                            budget_at_bound(owner.replicas, threshold),
                        );
                        if self.messy.is_some()
                            && let Some(spec) = pdb.spec.as_mut()
                        {
                            // As Kubernetes' docs advise, so that drains get past crash-looping
                            // apps.
                            spec.unhealthy_pod_eviction_policy = Some("AlwaysAllow".into());
                        }
                        budgets.create(post, &pdb).await?;
                    }
                    let realise = |template: &mut PodTemplateSpec| {
                        self.realise(
                            template,
                            owner.ready_delay_ms,
                            (owner.cpu_millis, owner.memory_mib),
                            &owner.preferred_nodes,
                            node_name,
                        );
                        mess::realise_owner(owner, template, node_name);
                    };
                    match owner.kind {
                        Kind::Deployment => {
                            let mut object =
                                workloads::deployment(namespace, &owner.name, replicas);
                            if let Some(spec) = object.spec.as_mut() {
                                realise(&mut spec.template);
                                if owner.rolling {
                                    spec.strategy = Some(rolling_strategy());
                                }
                                mess::realise_deployment(owner, spec);
                            }
                            deployments.create(post, &object).await?;
                        }
                        Kind::StatefulSet => {
                            let mut object =
                                workloads::stateful_set(namespace, &owner.name, replicas);
                            if let Some(spec) = object.spec.as_mut() {
                                realise(&mut spec.template);
                                if owner.ordered {
                                    spec.pod_management_policy = Some("OrderedReady".into());
                                }
                                mess::realise_stateful_set(owner, spec);
                            }
                            mess::create_local_volumes(client, namespace, owner, node_name).await?;
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
            let mut object =
                workloads::unmanaged_pod(namespace, &pod.name, &node_name(pod.node_index), &[]);
            if let Some(spec) = object.spec.as_mut() {
                self.realise_spec(spec, UNMANAGED_REQUESTS, &[], node_name);
            }
            pods.create(&post, &object).await?;
        }
        Ok(())
    }

    /// Changes the rolling Deployment's pod template (if the fleet has one), so that a new
    /// ReplicaSet rolls out while the tool starts: called once every pod is Ready, just before
    /// the tool.
    pub async fn start_rollout(&self, client: &Client, namespace: &str) -> anyhow::Result<()> {
        let Some(owner) = self.owners.iter().find(|o| o.rolling) else {
            return Ok(());
        };
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
        let patch = json!({ "spec": { "template": { "metadata": { "annotations": {
            REVISION_ANNOTATION: "2"
        } } } } });
        deployments
            .patch(&owner.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// Gives a pod template the realistic shape's traits: its readiness delay, requests, grace
    /// period and preferred nodes. The simple shape's templates are left as they are.
    fn realise(
        &self,
        template: &mut PodTemplateSpec,
        ready_delay_ms: u64,
        requests: (u32, u32),
        preferred_nodes: &[usize],
        node_name: &impl Fn(usize) -> String,
    ) {
        if self.node_size.is_none() {
            return;
        }
        if ready_delay_ms > 0 {
            let meta = template.metadata.get_or_insert_with(Default::default);
            meta.annotations.get_or_insert_with(BTreeMap::new).insert(
                READY_DELAY_ANNOTATION.to_owned(),
                format!("{ready_delay_ms}ms"),
            );
        }
        if let Some(spec) = template.spec.as_mut() {
            self.realise_spec(spec, requests, preferred_nodes, node_name);
        }
    }

    fn realise_spec(
        &self,
        spec: &mut PodSpec,
        (cpu_millis, memory_mib): (u32, u32),
        preferred_nodes: &[usize],
        node_name: &impl Fn(usize) -> String,
    ) {
        if self.node_size.is_none() {
            return;
        }
        spec.termination_grace_period_seconds = Some(i64::from(self.grace_period_s));
        for container in &mut spec.containers {
            container.resources = Some(ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".to_owned(), Quantity(format!("{cpu_millis}m"))),
                    ("memory".to_owned(), Quantity(format!("{memory_mib}Mi"))),
                ])),
                ..ResourceRequirements::default()
            });
        }
        if !preferred_nodes.is_empty() {
            // Preferred, not required: a bunched owner whose few nodes are all cordoned at once
            // still has somewhere to go, so the fleet cannot deadlock whatever order a
            // tool drains in.
            let term = NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "kubernetes.io/hostname".into(),
                    operator: "In".into(),
                    values: Some(preferred_nodes.iter().map(|i| node_name(*i)).collect()),
                }]),
                ..NodeSelectorTerm::default()
            };
            spec.affinity = Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    preferred_during_scheduling_ignored_during_execution: Some(vec![
                        PreferredSchedulingTerm {
                            weight: 100,
                            preference: term,
                        },
                    ]),
                    ..NodeAffinity::default()
                }),
                ..Affinity::default()
            });
        }
    }
}

fn rolling_strategy() -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::String(format!(
                "{}%",
                crate::workload::ROLLING_MAX_SURGE_PERCENT
            ))),
            max_unavailable: Some(IntOrString::Int(0)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Realism, Shape};

    fn realistic(nodes: usize, pods: usize) -> Workload {
        Workload::generate(nodes, pods, Shape::Realistic, &Realism::default())
    }

    #[test]
    fn templates_carry_the_delay_requests_grace_period_and_preferred_nodes() {
        let w = realistic(20, 600);
        let owner = w
            .owners
            .iter()
            .find(|o| !o.preferred_nodes.is_empty())
            .unwrap();
        let mut object = workloads::deployment("ns", &owner.name, 3);
        let template = &mut object.spec.as_mut().unwrap().template;
        w.realise(
            template,
            owner.ready_delay_ms,
            (owner.cpu_millis, owner.memory_mib),
            &owner.preferred_nodes,
            &k8sm_testcluster::node_name,
        );
        let annotations = template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap();
        assert_eq!(
            annotations[READY_DELAY_ANNOTATION],
            format!("{}ms", owner.ready_delay_ms)
        );
        let spec = template.spec.as_ref().unwrap();
        assert_eq!(spec.termination_grace_period_seconds, Some(3));
        let requests = spec.containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap();
        assert_eq!(requests["cpu"], Quantity(format!("{}m", owner.cpu_millis)));
        assert_eq!(
            requests["memory"],
            Quantity(format!("{}Mi", owner.memory_mib))
        );
        let preferred = spec
            .affinity
            .as_ref()
            .unwrap()
            .node_affinity
            .as_ref()
            .unwrap()
            .preferred_during_scheduling_ignored_during_execution
            .as_ref()
            .unwrap();
        let values = preferred[0].preference.match_expressions.as_ref().unwrap()[0]
            .values
            .clone()
            .unwrap();
        let expected: Vec<String> = owner
            .preferred_nodes
            .iter()
            .map(|i| format!("node-{i:04}"))
            .collect();
        assert_eq!(values, expected);
    }
}
