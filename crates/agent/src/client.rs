//! Connecting to the apiserver, and the few facts about its answers that the agent acts on.

use std::path::Path;
use std::time::Duration;

use kube::api::{PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::Error;

/// Upper bound on one request: a hung apiserver must not hold a restart (or the agent's exit)
/// forever.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A client from `kubeconfig`, or, without one, from the environment: `KUBECONFIG`,
/// `~/.kube/config`, or the Pod's service account when running in the cluster.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, Error> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig_error = |source| Error::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let file = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_error)?
        }
        None => Config::infer().await.map_err(Error::InferConfig)?,
    };
    let mut config = config;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    Client::try_from(config).map_err(Error::Client)
}

/// How long connecting to the apiserver may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The field manager of the agent's writes, so a Node's `managedFields` tell the agent's keys from
/// k8sm's and kubelet's.
pub const FIELD_MANAGER: &str = "k8sm-agent";

pub fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

pub fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

/// The HTTP status of an apiserver error, if it answered with one.
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// 404: the object is gone.
pub fn is_not_found(error: &kube::Error) -> bool {
    status_code(error) == Some(404)
}

/// 409: a precondition (resource version) failed, or the object already exists.
pub fn is_conflict(error: &kube::Error) -> bool {
    status_code(error) == Some(409)
}
