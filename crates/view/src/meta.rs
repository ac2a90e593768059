//! Reads of `metadata` that every kind shares.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8sm_planner::ControllerRef;

/// The annotation `key` as found on the object.
pub(crate) fn annotation(meta: &ObjectMeta, key: &str) -> Option<String> {
    meta.annotations.as_ref()?.get(key).cloned()
}

/// The controlling owner reference (`ownerReferences[?controller]`), which names an object in the
/// holder's namespace: a pod's ReplicaSet, a ReplicaSet's Deployment (or an operator's kind, such
/// as an Argo Rollout). Other owner references only keep an object alive; they do not replace its
/// pods.
pub(crate) fn controller_ref(meta: &ObjectMeta) -> Option<ControllerRef> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| {
            ControllerRef::new(
                meta.namespace.as_deref().unwrap_or_default(),
                &r.api_version,
                &r.kind,
                &r.name,
                &r.uid,
            )
        })
}
