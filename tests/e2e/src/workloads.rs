//! Workloads of the end-to-end scenarios: Deployments, ReplicationControllers, StatefulSets, Jobs,
//! DaemonSets and unmanaged pods whose containers KWOK "runs" (the image is never pulled).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec, StatefulSet, StatefulSetSpec,
};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, Pod, PodSpec, PodTemplateSpec, ReplicationController, ReplicationControllerSpec,
    Toleration,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::PostParams;
use kube::{Api, Client};

fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), app.to_owned())])
}

fn meta(name: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        ..ObjectMeta::default()
    }
}

/// A pod's spec whose one container KWOK "runs" (the image is never pulled), deleted at once when
/// evicted.
pub fn pod_spec() -> PodSpec {
    PodSpec {
        containers: vec![Container {
            name: "app".into(),
            image: Some("registry.invalid/app:1".into()),
            ..Container::default()
        }],
        termination_grace_period_seconds: Some(0),
        ..PodSpec::default()
    }
}

fn template(app: &str, extra_labels: &BTreeMap<String, String>) -> PodTemplateSpec {
    let mut all = labels(app);
    all.extend(extra_labels.clone());
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(all),
            ..ObjectMeta::default()
        }),
        spec: Some(pod_spec()),
    }
}

fn selector(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels(app)),
        ..LabelSelector::default()
    }
}

pub fn deployment(namespace: &str, name: &str, replicas: i32) -> Deployment {
    Deployment {
        metadata: meta(name, namespace),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: selector(name),
            template: template(name, &BTreeMap::new()),
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// `deployment` with `key: value` among its pod template's annotations (a readiness delay, a
/// neighbouring tool's opt-out).
pub fn with_template_annotation(mut deployment: Deployment, key: &str, value: &str) -> Deployment {
    if let Some(spec) = deployment.spec.as_mut() {
        spec.template
            .metadata
            .get_or_insert_with(ObjectMeta::default)
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
    }
    deployment
}

/// A ReplicationController: the workload kind the original design was written for, judged for
/// itself.
pub fn replication_controller(namespace: &str, name: &str, replicas: i32) -> ReplicationController {
    ReplicationController {
        metadata: meta(name, namespace),
        spec: Some(ReplicationControllerSpec {
            replicas: Some(replicas),
            selector: Some(labels(name)),
            template: Some(template(name, &BTreeMap::new())),
            ..ReplicationControllerSpec::default()
        }),
        ..ReplicationController::default()
    }
}

pub fn stateful_set(namespace: &str, name: &str, replicas: i32) -> StatefulSet {
    StatefulSet {
        metadata: meta(name, namespace),
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            selector: selector(name),
            service_name: Some(name.to_owned()),
            template: template(name, &BTreeMap::new()),
            pod_management_policy: Some("Parallel".into()),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}

/// A Job of `parallelism` pods (KWOK completes each once Running, unless its template says
/// otherwise: `k8sm_testcluster::COMPLETE_DELAY_ANNOTATION`).
pub fn job(namespace: &str, name: &str, parallelism: i32) -> Job {
    let mut spec = template(name, &BTreeMap::new());
    if let Some(pod) = spec.spec.as_mut() {
        pod.restart_policy = Some("Never".into());
    }
    Job {
        metadata: meta(name, namespace),
        spec: Some(JobSpec {
            parallelism: Some(parallelism),
            completions: Some(parallelism),
            template: spec,
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

pub fn daemon_set(namespace: &str, name: &str) -> DaemonSet {
    let mut spec = template(name, &BTreeMap::new());
    if let Some(pod) = spec.spec.as_mut() {
        // Like real node agents' DaemonSets: stay on cordoned and tainted nodes.
        pod.tolerations = Some(vec![Toleration {
            operator: Some("Exists".into()),
            ..Toleration::default()
        }]);
    }
    DaemonSet {
        metadata: meta(name, namespace),
        spec: Some(DaemonSetSpec {
            selector: selector(name),
            template: spec,
            ..DaemonSetSpec::default()
        }),
        ..DaemonSet::default()
    }
}

/// A pod without a controller, bound straight to `node`.
pub fn unmanaged_pod(
    namespace: &str,
    name: &str,
    node: &str,
    extra_labels: &[(&str, &str)],
) -> Pod {
    let mut all = labels(name);
    all.extend(
        extra_labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    Pod {
        metadata: ObjectMeta {
            labels: Some(all),
            ..meta(name, namespace)
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            ..pod_spec()
        }),
        ..Pod::default()
    }
}

pub fn pdb_min_available(
    namespace: &str,
    name: &str,
    app: &str,
    min_available: IntOrString,
) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(name, namespace),
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(selector(app)),
            min_available: Some(min_available),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }
}

/// `per_node` unmanaged pods on each of `nodes`, named `filler-<node>-<i>`: load that makes a node
/// harder to drain.
pub async fn fill_nodes(client: &Client, namespace: &str, nodes: &[String], per_node: usize) {
    for node in nodes {
        for i in 0..per_node {
            let name = format!("filler-{node}-{i}");
            create(client, &unmanaged_pod(namespace, &name, node, &[])).await;
        }
    }
}

/// Creates any namespaced object in its namespace.
pub async fn create<K>(client: &Client, object: &K) -> K
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    let namespace = object.meta().namespace.clone().expect("a namespace");
    Api::<K>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), object)
        .await
        .unwrap_or_else(|e| panic!("creating {:?}: {e}", object.meta().name))
}
