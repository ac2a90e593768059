//! A controller of a kind k8sm does not know, as an operator's CRD is: the `PodSet` custom resource
//! (group `test.k8sm.io`) and its operator, played by the test. The operator keeps `replicas` pods
//! of a PodSet existing, each controlled by the PodSet (`controller: true`, `blockOwnerDeletion`),
//! and replaces every pod that is deleted or starts terminating with one under a new name, as
//! operators of StatefulSet-like resources do. KWOK makes the pods Ready.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;

pub const GROUP: &str = "test.k8sm.io";
pub const VERSION: &str = "v1";
pub const KIND: &str = "PodSet";
const PLURAL: &str = "podsets";

fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL)
}

/// Installs the PodSet CRD (namespaced, any spec) and waits until the apiserver serves it.
pub async fn install_crd(client: &Client) {
    let object_schema = |properties: Option<BTreeMap<String, JSONSchemaProps>>| JSONSchemaProps {
        type_: Some("object".into()),
        properties,
        ..JSONSchemaProps::default()
    };
    let spec_schema = JSONSchemaProps {
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..object_schema(None)
    };
    let crd = CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{PLURAL}.{GROUP}")),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: GROUP.into(),
            names: CustomResourceDefinitionNames {
                kind: KIND.into(),
                plural: PLURAL.into(),
                singular: Some("podset".into()),
                ..CustomResourceDefinitionNames::default()
            },
            scope: "Namespaced".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: VERSION.into(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(object_schema(Some(BTreeMap::from([(
                        "spec".to_owned(),
                        spec_schema,
                    )])))),
                }),
                ..CustomResourceDefinitionVersion::default()
            }],
            ..CustomResourceDefinitionSpec::default()
        },
        status: None,
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("the PodSet CRD is created");
    let podsets = |namespace: &str| -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, &api_resource())
    };
    for _ in 0..240 {
        let established = crds
            .get_status(&format!("{PLURAL}.{GROUP}"))
            .await
            .ok()
            .and_then(|c| c.status?.conditions)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if established
            && podsets("default")
                .list(&ListParams::default())
                .await
                .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("the PodSet CRD is not served after 60s");
}

/// A PodSet of `replicas` in `namespace`; returns its UID, which its pods' controller references
/// carry.
pub async fn create(client: &Client, namespace: &str, name: &str, replicas: u32) -> String {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &api_resource());
    let mut object = DynamicObject::new(name, &api_resource()).within(namespace);
    object.data = serde_json::json!({ "spec": { "replicas": replicas } });
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating PodSet {name}: {e}"))
        .uid()
        .expect("a created object has a uid")
}

/// The operator of one PodSet, running until dropped.
pub struct Operator {
    created: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl Operator {
    /// Keeps `replicas` live pods (not terminating, not finished) of the PodSet `name` (uid `uid`),
    /// labelled `app=<name>`. A missing pod is replaced `replace_after` after the operator
    /// notices it missing (zero: at once).
    pub fn start(
        client: &Client,
        namespace: &str,
        name: &str,
        uid: &str,
        replicas: u32,
        replace_after: Duration,
    ) -> Self {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let created = Arc::new(Mutex::new(Vec::new()));
        let owner = OwnerReference {
            api_version: format!("{GROUP}/{VERSION}"),
            kind: KIND.into(),
            name: name.to_owned(),
            uid: uid.to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let (name, log) = (name.to_owned(), created.clone());
        let task = tokio::spawn(async move {
            let selector = ListParams::default().labels(&format!("app={name}"));
            let mut next = 0_u32;
            let mut missing_since: Option<tokio::time::Instant> = None;
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let Ok(list) = pods.list(&selector).await else {
                    continue;
                };
                let live = list
                    .items
                    .iter()
                    .filter(|p| p.owner_references().iter().any(|o| o.uid == owner.uid))
                    .filter(|p| p.metadata.deletion_timestamp.is_none() && !finished(p))
                    .count();
                let live = u32::try_from(live).unwrap_or(u32::MAX);
                if live >= replicas {
                    missing_since = None;
                    continue;
                }
                let since = *missing_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() < replace_after {
                    continue;
                }
                for _ in live..replicas {
                    let pod_name = format!("{name}-{next}");
                    next += 1;
                    let pod = pod(&name, &pod_name, &owner);
                    if pods.create(&PostParams::default(), &pod).await.is_ok() {
                        log.lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(pod_name);
                    }
                }
                missing_since = None;
            }
        });
        Self { created, task }
    }

    /// Names of every pod the operator created, in order.
    pub fn created(&self) -> Vec<String> {
        self.created
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn finished(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|phase| phase == "Succeeded" || phase == "Failed")
}

fn pod(app: &str, name: &str, owner: &OwnerReference) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([("app".to_owned(), app.to_owned())])),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: Some(crate::workloads::pod_spec()),
        ..Pod::default()
    }
}
