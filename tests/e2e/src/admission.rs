//! Admission policies in force: the apiserver loads a ValidatingAdmissionPolicy and its binding
//! asynchronously, a moment after `kubectl apply` (longer on a loaded machine), so a test that
//! expects a write refused first waits until a server-side dry run of it is refused.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::polling::poll;

/// Waits, looking every `every`, until the apiserver refuses a server-side dry run of
/// merge-patching the Node `name` with `patch` as the client of `nodes`, with a message that
/// contains `says` (the policy's name, or what its denial says). Panics after `timeout` with the
/// last answer.
pub async fn wait_refused(
    nodes: &Api<Node>,
    name: &str,
    patch: &serde_json::Value,
    says: &str,
    timeout: Duration,
    every: Duration,
) {
    let dry_run = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    poll(timeout, every, || async {
        match nodes.patch(name, &dry_run, &Patch::Merge(patch)).await {
            Err(kube::Error::Api(status)) if status.message.contains(says) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap_or_else(|last| {
        panic!("a write to node {name} is not refused with {says:?} after {timeout:?}: {last}")
    });
}
