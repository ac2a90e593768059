//! Nodes and Pods read and changed as `kubectl get`, `patch` and `create` do, each call panicking
//! with what it was about when the apiserver refuses it; and the few facts of a pod the tests ask
//! about.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource, ResourceExt};

/// The Node `name`, or `None` when there is no such Node.
pub async fn get_node_opt(client: &Client, name: &str) -> Option<Node> {
    Api::<Node>::all(client.clone())
        .get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading node {name}: {e}"))
}

/// The Node `name`, which must exist.
pub async fn get_node(client: &Client, name: &str) -> Node {
    get_node_opt(client, name)
        .await
        .unwrap_or_else(|| panic!("node {name} does not exist"))
}

/// Merge-patches a Node, as `kubectl patch --type=merge` does.
pub async fn patch_node(client: &Client, name: &str, patch: serde_json::Value) {
    Api::<Node>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching node {name}: {e}"));
}

/// Merge-patches the object `name` of kind `K` in `namespace`, as `kubectl patch --type=merge`
/// does.
pub async fn merge_patch<K>(client: &Client, namespace: &str, name: &str, patch: serde_json::Value)
where
    K: Resource<Scope = NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    Api::<K>::namespaced(client.clone(), namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "patching {} {namespace}/{name}: {e}",
                K::kind(&K::DynamicType::default())
            )
        });
}

/// Creates a Node, as a machine does when it registers.
pub async fn register_node(client: &Client, node: &Node) -> Node {
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), node)
        .await
        .unwrap_or_else(|e| panic!("creating node {}: {e}", node.name_any()))
}

/// The pod `name` of `namespace`, or `None` when there is no such pod.
pub async fn get_pod_opt(client: &Client, namespace: &str, name: &str) -> Option<Pod> {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading pod {namespace}/{name}: {e}"))
}

/// Every pod of `namespace`.
pub async fn pods_in(client: &Client, namespace: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing the pods of {namespace}: {e}"))
        .items
}

/// The node the pod is bound to, if any.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

/// The pod is not terminating.
pub fn is_live(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
}

/// The objects' names, in order.
pub fn names<K: ResourceExt>(objects: &[K]) -> Vec<String> {
    objects.iter().map(ResourceExt::name_any).collect()
}

/// A client of the cluster of `kubeconfig` that takes every answer as it comes: kube's default
/// client retries a 429 (a budget's refusal of an eviction) for minutes before it tells.
pub async fn client_without_retries(kubeconfig: &std::path::Path) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("a kubeconfig");
    let options = kube::config::KubeConfigOptions::default();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .expect("a client configuration");
    config.default_retry = false;
    Client::try_from(config).expect("a client")
}

/// Asks the Eviction API to evict the pod `name` of `namespace` as a server-side dry run (`kubectl
/// drain --dry-run=server`): `Ok` when the apiserver would evict it, else its answer (429 when a
/// budget refuses; pass a [`client_without_retries`] to hear it at once).
pub async fn dry_run_eviction(client: &Client, namespace: &str, name: &str) -> kube::Result<()> {
    let params = EvictParams {
        delete_options: Some(DeleteParams {
            dry_run: true,
            ..DeleteParams::default()
        }),
        post_options: PostParams {
            dry_run: true,
            ..PostParams::default()
        },
    };
    Api::<Pod>::namespaced(client.clone(), namespace)
        .evict(name, &params)
        .await
        .map(|_| ())
}
