//! A messy fleet ([`Workload::mess_up`]) made real on the bench cluster: dead nodes, crash-looping
//! owners, stuck rollouts, pods stuck terminating, pinned pods, bare pods. The truth stays the
//! workload's: these functions only realise it, so [`Workload::unfinishable`] judges every tool
//! alike.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, RollingUpdateDeployment,
    StatefulSetSpec,
};
use k8s_openapi::api::core::v1::{
    LocalVolumeSource, Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeSpec, Pod, PodSpec, PodTemplateSpec, VolumeNodeAffinity,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use k8sm_e2e::crash_loop::{CrashLoop, NEVER};
use k8sm_testcluster::{READY_DELAY_ANNOTATION, TestCluster};

use crate::workload::{Kind, Owner, Workload, ZOMBIE_FINALIZER};

/// The label of a crash-looping owner's pods, by which [`crash_loop`] finds them.
pub const CRASH_LOOP_LABEL: &str = "bench.k8sm.io/crash-loop";
/// A stuck rollout's `progressDeadlineSeconds`: short, so that it is stuck before the tool starts.
const STUCK_DEADLINE_S: i32 = 10;
/// The template annotation a stuck rollout changes.
const STUCK_REVISION_ANNOTATION: &str = "bench.k8sm.io/stuck-revision";
/// The storage class of the pinned StatefulSets' local volumes (no StorageClass object: the volumes
/// are bound to their claims in advance, as an operator provisions local disks).
const LOCAL_CLASS: &str = "bench-local";
const CLAIM: &str = "data";
/// How long the crash-looping owners have been crash-looping when the tool starts: a broken app
/// left alone, as in real clusters, long past any tool's "still starting".
const CRASHING_FOR: Duration = Duration::from_secs(3600);
/// The disruption controller's and k8sm's "stuck": a minute past the grace period.
const STUCK_AFTER: Duration = Duration::from_secs(65);

const HOSTNAME: &str = "kubernetes.io/hostname";

/// A crash-looping owner's pods never become Ready (and are made to crash-loop by [`crash_loop`]);
/// a pinned Deployment's pod can only run on its node.
pub fn realise_owner(
    owner: &Owner,
    template: &mut PodTemplateSpec,
    node_name: &impl Fn(usize) -> String,
) {
    if owner.crash_looping {
        let meta = template.metadata.get_or_insert_with(Default::default);
        meta.annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(READY_DELAY_ANNOTATION.into(), NEVER.into());
        meta.labels
            .get_or_insert_with(BTreeMap::new)
            .insert(CRASH_LOOP_LABEL.into(), "true".into());
    }
    if owner.kind == Kind::Deployment
        && let Some(&node) = owner.pinned_nodes.first()
        && let Some(spec) = template.spec.as_mut()
    {
        spec.node_selector = Some(BTreeMap::from([(HOSTNAME.into(), node_name(node))]));
        spec.affinity = None;
    }
}

/// A Deployment whose rollout will get stuck surges its not-Ready new pods on top of its Ready
/// ones.
pub fn realise_deployment(owner: &Owner, spec: &mut DeploymentSpec) {
    if owner.stuck_rollout == 0 {
        return;
    }
    spec.progress_deadline_seconds = Some(STUCK_DEADLINE_S);
    spec.strategy = Some(DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(
                i32::try_from(owner.stuck_rollout).unwrap_or(1),
            )),
            max_unavailable: Some(IntOrString::Int(0)),
        }),
    });
}

/// A pinned StatefulSet claims a local volume per ordinal ([`create_local_volumes`]).
pub fn realise_stateful_set(owner: &Owner, spec: &mut StatefulSetSpec) {
    if owner.pinned_nodes.is_empty() {
        return;
    }
    spec.volume_claim_templates = Some(vec![PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(CLAIM.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(LOCAL_CLASS.into()),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    }]);
}

/// The local volumes of a pinned StatefulSet: one per ordinal, on that ordinal's node, bound in
/// advance to the claim the StatefulSet will make.
pub async fn create_local_volumes(
    client: &Client,
    namespace: &str,
    owner: &Owner,
    node_name: &impl Fn(usize) -> String,
) -> anyhow::Result<()> {
    if owner.kind != Kind::StatefulSet {
        return Ok(());
    }
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    for (ordinal, &node) in owner.pinned_nodes.iter().enumerate() {
        let claim = format!("{CLAIM}-{}-{ordinal}", owner.name);
        let volume = PersistentVolume {
            metadata: ObjectMeta {
                name: Some(format!("{namespace}-{claim}")),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeSpec {
                capacity: Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))])),
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: Some(LOCAL_CLASS.into()),
                persistent_volume_reclaim_policy: Some("Retain".into()),
                local: Some(LocalVolumeSource {
                    path: format!("/mnt/disks/{claim}"),
                    fs_type: None,
                }),
                node_affinity: Some(VolumeNodeAffinity {
                    required: Some(NodeSelector {
                        node_selector_terms: vec![hostname_term(&node_name(node))],
                    }),
                }),
                claim_ref: Some(ObjectReference {
                    namespace: Some(namespace.into()),
                    name: Some(claim),
                    ..ObjectReference::default()
                }),
                ..PersistentVolumeSpec::default()
            }),
            ..PersistentVolume::default()
        };
        volumes
            .create(&PostParams::default(), &volume)
            .await
            .context("creating a local volume")?;
    }
    Ok(())
}

fn hostname_term(node: &str) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: HOSTNAME.into(),
            operator: "In".into(),
            values: Some(vec![node.into()]),
        }]),
        ..NodeSelectorTerm::default()
    }
}

/// Before the workload exists: the fleet's dead nodes die. Each is registered again as a machine
/// whose kubelet stopped posting: no KWOK manages it and no simulated executor plays it, it reports
/// the old executor, and its Ready condition is Unknown, so the node lifecycle controller taints it
/// unreachable and nothing is scheduled there.
pub async fn kill_nodes(
    cluster: &TestCluster,
    client: &Client,
    workload: &Workload,
    old_id: &str,
    node_name: impl Fn(usize) -> String,
) -> anyhow::Result<()> {
    let Some(messy) = &workload.messy else {
        return Ok(());
    };
    let nodes: Api<Node> = Api::all(client.clone());
    for &index in &messy.dead_nodes {
        let name = node_name(index);
        nodes.delete(&name, &DeleteParams::default()).await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while nodes.get_opt(&name).await?.is_some() {
            anyhow::ensure!(
                Instant::now() < deadline,
                "{name} is not deleted after 60 s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let dead = k8sm_e2e::nodes::dead_node(cluster, &name, old_id);
        nodes.create(&PostParams::default(), &dead).await?;
    }
    for &index in &messy.dead_nodes {
        let name = node_name(index);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let node = nodes.get(&name).await?;
            let unreachable = node.spec.and_then(|s| s.taints).is_some_and(|taints| {
                taints
                    .iter()
                    .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoSchedule")
            });
            if unreachable {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{name} is not tainted unreachable after 2 minutes"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    Ok(())
}

/// Makes the crash-looping owners' scheduled pods crash-loop, as they have for an hour. Kept while
/// the fleet is created; [`crash_loop_replacements`] takes over when the tool starts.
pub fn crash_loop(client: &Client, namespace: &str) -> CrashLoop {
    let since = chrono::Utc::now() - chrono::Duration::from_std(CRASHING_FOR).unwrap_or_default();
    CrashLoop::start_since(client, namespace, &crash_loop_selector(), since)
}

/// Makes the crash-looping owners' replacements crash-loop from their start.
pub fn crash_loop_replacements(client: &Client, namespace: &str) -> CrashLoop {
    CrashLoop::start(client, namespace, &crash_loop_selector())
}

fn crash_loop_selector() -> String {
    format!("{CRASH_LOOP_LABEL}=true")
}

/// Once every pod that can be is Ready: the stuck rollouts start (and get stuck), and the zombies
/// are made (and are stuck by the time this returns).
pub async fn finish(
    client: &Client,
    namespace: &str,
    workload: &Workload,
    node_name: impl Fn(usize) -> String,
) -> anyhow::Result<()> {
    let Some(messy) = &workload.messy else {
        return Ok(());
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let stuck: Vec<&Owner> = workload
        .owners
        .iter()
        .filter(|o| o.stuck_rollout > 0)
        .collect();
    for owner in &stuck {
        let patch = json!({ "spec": { "template": { "metadata": { "annotations": {
            READY_DELAY_ANNOTATION: NEVER,
            STUCK_REVISION_ANNOTATION: "2",
        } } } } });
        deployments
            .patch(&owner.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    let made = Instant::now();
    for zombie in &messy.zombies {
        make_zombie(
            client,
            namespace,
            &zombie.name,
            &zombie.owner,
            &node_name(zombie.node_index),
            zombie.finalizer,
            workload.grace_period_s,
        )
        .await
        .with_context(|| format!("making zombie {}", zombie.name))?;
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    for owner in &stuck {
        loop {
            let deployment = deployments.get(&owner.name).await?;
            let exceeded = deployment
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|conditions| {
                    conditions.iter().any(|c| {
                        c.type_ == "Progressing"
                            && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
                    })
                });
            if exceeded {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{}'s rollout is not past its progress deadline after 3 minutes",
                owner.name
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let stuck_at = made + Duration::from_secs(u64::from(workload.grace_period_s)) + STUCK_AFTER;
    tokio::time::sleep_until(stuck_at.into()).await;
    Ok(())
}

/// A pod of `owner`'s ReplicaSet on `node`, deleted: held by [`ZOMBIE_FINALIZER`] on a live node,
/// by the absence of a kubelet on a dead one.
async fn make_zombie(
    client: &Client,
    namespace: &str,
    name: &str,
    owner: &str,
    node: &str,
    finalizer: bool,
    grace_period_s: u32,
) -> anyhow::Result<()> {
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    let list = sets
        .list(&ListParams::default().labels(&format!("app={owner}")))
        .await?;
    let set = list
        .items
        .iter()
        .max_by_key(|s| s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0))
        .with_context(|| format!("{owner} has no ReplicaSet"))?;
    let labels = set
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let owner_reference = OwnerReference {
        api_version: ReplicaSet::api_version(&()).into(),
        kind: ReplicaSet::kind(&()).into(),
        name: set.name_any(),
        uid: set.uid().context("a ReplicaSet without a UID")?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            owner_references: Some(vec![owner_reference]),
            finalizers: finalizer.then(|| vec![ZOMBIE_FINALIZER.into()]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            termination_grace_period_seconds: Some(i64::from(grace_period_s)),
            ..k8sm_e2e::workloads::pod_spec()
        }),
        ..Pod::default()
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.create(&PostParams::default(), &pod).await?;
    // Its ReplicaSet may already have deleted it as one pod too many: either way it is terminating.
    match pods.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => {
            anyhow::bail!("{name} is gone already: nothing holds it")
        }
        Err(e) => Err(e.into()),
    }
}
