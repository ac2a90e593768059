//! ServiceAccount tokens from the real TokenRequest API, and clients that use them: how the tests
//! act as the agent (a token bound to its Pod) or as the controller (its kamikaze token, bound to a
//! Node).

use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Resource, ResourceExt};

use k8sm_api::keys::KAMIKAZE_TOKEN_AUDIENCE;
use k8sm_testcluster::TestCluster;

use crate::kubectl_ok;

/// The namespace of deploy/ and the ServiceAccounts it creates there.
pub const K8SM_NAMESPACE: &str = "k8sm-system";
pub const CONTROLLER_ACCOUNT: &str = "k8sm-controller";
pub const AGENT_ACCOUNT: &str = "k8sm-agent";

/// A token of ServiceAccount `namespace/account` from the TokenRequest API, for `audience` (`None`:
/// the apiserver's own) and, with `bound_to`, bound to that object (a Pod, or a Node).
pub async fn request_token<K>(
    client: &Client,
    namespace: &str,
    account: &str,
    audience: Option<&str>,
    bound_to: Option<&K>,
) -> String
where
    K: Resource<DynamicType = ()>,
{
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: audience.map(|a| vec![a.to_owned()]),
            expiration_seconds: Some(3600),
            bound_object_ref: bound_to.map(|object| BoundObjectReference {
                api_version: Some(K::api_version(&()).into_owned()),
                kind: Some(K::kind(&()).into_owned()),
                name: Some(object.name_any()),
                uid: object.uid(),
            }),
        }),
        ..TokenRequest::default()
    };
    Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("TokenRequest for {namespace}/{account}: {e}"))
        .status
        .and_then(|status| status.token)
        .expect("a token")
}

/// Writes a kubeconfig for `cluster` that authenticates with `token`, as `<name>.kubeconfig` in the
/// cluster's dir.
pub fn token_kubeconfig(cluster: &TestCluster, name: &str, token: &str) -> PathBuf {
    let path = cluster.dir().join(format!("{name}.kubeconfig"));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
         users:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
         current-context: x\n",
        cluster.server(),
        cluster.dir().join("ca.crt").display(),
    );
    std::fs::write(&path, text).expect("kubeconfig written");
    path
}

/// A client that authenticates with the kubeconfig at `path`.
pub async fn client_from(path: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("client config");
    Client::try_from(config).expect("client")
}

/// Applies deploy/'s namespace and the controller's ServiceAccount and RBAC (the files an operator
/// applies): the account whose tokens the Http kamikaze carries.
pub fn apply_controller_account(cluster: &TestCluster) {
    kubectl_ok(
        cluster,
        &[
            "apply",
            "-f",
            "deploy/namespace.yaml",
            "-f",
            "deploy/rbac.yaml",
        ],
    );
}

/// Writes a kubeconfig `<name>.kubeconfig` with a token of the controller's ServiceAccount (see
/// [`apply_controller_account`]) from `kubectl create token`, as the controller's Pod has; returns
/// the kubeconfig and the token.
pub fn controller_kubeconfig(cluster: &TestCluster, name: &str) -> (PathBuf, String) {
    let token = kubectl_ok(
        cluster,
        &[
            "create",
            "token",
            CONTROLLER_ACCOUNT,
            "-n",
            K8SM_NAMESPACE,
            "--duration=2h",
        ],
    );
    let token = token.trim().to_owned();
    (token_kubeconfig(cluster, name, &token), token)
}

/// The controller's token for the Http kamikaze of `node`, as the controller requests it: its
/// ServiceAccount's (see [`apply_controller_account`]), for the kamikaze audience, bound to the
/// Node.
pub async fn controller_kamikaze_token(client: &Client, node: &Node) -> String {
    request_token(
        client,
        K8SM_NAMESPACE,
        CONTROLLER_ACCOUNT,
        Some(KAMIKAZE_TOKEN_AUDIENCE),
        Some(node),
    )
    .await
}
