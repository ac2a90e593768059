//! The objects that Events are about (`regarding`), from the planner's names for them: the
//! controller's Events and the plugin's `Forced` Events point at objects the same way.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;

use k8sm_api::ExecutorUpgradePolicy;
use k8sm_planner::PodRef;

pub fn pod_ref(pod: &PodRef) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(pod.namespace().to_string()),
        name: Some(pod.name().to_string()),
        uid: Some(pod.uid().to_string()),
        ..ObjectReference::default()
    }
}

pub fn node_ref(name: &str, uid: Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.to_owned()),
        uid,
        ..ObjectReference::default()
    }
}

/// A policy's reference carries its UID when known: `kubectl describe eup NAME` shows only the
/// Events whose reference has the policy's UID.
pub fn policy_ref(name: &str, uid: Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some(ExecutorUpgradePolicy::api_version(&()).into_owned()),
        kind: Some(ExecutorUpgradePolicy::kind(&()).into_owned()),
        name: Some(name.to_owned()),
        uid,
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_the_kind_its_version_and_the_object() {
        let pod = pod_ref(&PodRef::new("shop", "web-1", "u1"));
        let node = node_ref("n1", Some("un1".into()));
        let policy = policy_ref("fleet", Some("up1".into()));
        let read = |r: &ObjectReference| {
            [&r.api_version, &r.kind, &r.namespace, &r.name, &r.uid]
                .map(|f| f.as_deref().unwrap_or("-").to_owned())
        };
        assert_eq!(read(&pod), ["v1", "Pod", "shop", "web-1", "u1"]);
        assert_eq!(read(&node), ["v1", "Node", "-", "n1", "un1"]);
        assert_eq!(
            read(&policy),
            [
                "k8s.mesosphere.io/v1alpha1",
                "ExecutorUpgradePolicy",
                "-",
                "fleet",
                "up1"
            ]
        );
    }
}
