//! Pods whose replacement can only run on their own node (docs/design.md §5.7): a hostname node
//! selector, a required node affinity or a volume's node affinity that names that node alone.
//! Evicted, such a pod's replacement waits Pending until the node is back and uncordoned: downtime
//! only an operator can accept (`spec.workloads.pinnedPods`).

use k8sm_api::PinnedPods;

use crate::{
    NodeView, PodView, Reason, VolumeView,
    model::collections::FastMap,
    model::view::{HOSTNAME_LABEL, node_hostname},
    objects::classify::Class,
};

/// The volumes that may pin a pod, by the namespace and name of their claim.
pub(crate) type Volumes<'a> = FastMap<(&'a str, &'a str), &'a VolumeView>;

/// The volumes of `views` by claim (the first one of a claim wins: a claim binds one volume).
pub(crate) fn volumes(views: &[VolumeView]) -> Volumes<'_> {
    let mut by_claim = Volumes::with_capacity_and_hasher(views.len(), Default::default());
    for volume in views {
        by_claim
            .entry((volume.claim_namespace.as_str(), volume.claim_name.as_str()))
            .or_insert(volume);
    }
    by_claim
}

/// What pins a pod to its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pin<'a> {
    /// `spec.nodeSelector["kubernetes.io/hostname"]`, with its value.
    Hostname(&'a str),
    /// Its required node affinity.
    Affinity,
    /// A volume whose node affinity only this node satisfies, and the claim by which the pod uses
    /// it.
    Volume { volume: &'a str, claim: &'a str },
}

/// What pins `pod` to `node`, if anything: the first of its hostname selector, its required node
/// affinity and its claims' volumes (in the order the pod lists them) that only `node` satisfies.
pub(crate) fn pin<'a>(pod: &'a PodView, node: &NodeView, volumes: &Volumes<'a>) -> Option<Pin<'a>> {
    let pins = pod.pins.as_deref()?;
    if let Some(hostname) = pins.hostname.as_deref()
        && hostname == node_hostname(node)
    {
        return Some(Pin::Hostname(hostname));
    }
    if pins.affinity.as_ref().is_some_and(|a| a.only(node)) {
        return Some(Pin::Affinity);
    }
    pins.claims.iter().find_map(|claim| {
        let volume = volumes.get(&(&*pod.namespace, claim.as_str()))?;
        volume.pin.only(node).then_some(Pin::Volume {
            volume: &volume.name,
            claim,
        })
    })
}

/// The operator-only obstacle of a pinned pod that k8sm would evict (a workload, other-controller
/// or Job pod), under `pinnedPods: Block`. An unmanaged pod has no replacement: the unmanaged-pod
/// policy alone decides it.
pub(crate) fn needs_operator(
    pod: &PodView,
    class: Class,
    node: &NodeView,
    policy: PinnedPods,
    volumes: &Volumes,
) -> Option<(Reason, String)> {
    // The pod's view is read last: a draining node's pods are mostly judged without reading it.
    if policy == PinnedPods::Evict
        || !matches!(class, Class::Owned(_) | Class::Other(_) | Class::Job(_))
        || pod.pins.is_none()
    {
        return None;
    }
    let by = match pin(pod, node, volumes)? {
        Pin::Hostname(hostname) => format!("its nodeSelector {HOSTNAME_LABEL}={hostname}"),
        Pin::Affinity => {
            "its required node affinity (requiredDuringSchedulingIgnoredDuringExecution)".to_owned()
        }
        Pin::Volume { volume, claim } => format!(
            "PersistentVolume {volume} (its claim {claim}), whose node affinity only this node satisfies"
        ),
    };
    Some((
        Reason::BlockedPinnedPod,
        format!(
            "pinned to {} by {by}: its replacement can run on no other node, so evicting it is downtime until the \
             node is back; set spec.workloads.pinnedPods: Evict to let it wait Pending until the node is back, or \
             move it",
            node.name
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        NodeName, NodePin,
        testing::{hostname_terms, node, unmanaged_pod},
    };

    fn volume(name: &str, claim: &str, pin: NodePin) -> VolumeView {
        VolumeView {
            name: name.into(),
            claim_namespace: "ns".into(),
            claim_name: claim.into(),
            pin,
        }
    }

    #[test]
    fn what_pins_a_pod_to_its_node() {
        let mut n1 = node("n1");
        n1.labels.insert(HOSTNAME_LABEL.into(), "host-1".into());
        let views = [
            volume("local-1", "data", hostname_terms(&[&["host-1"]])),
            volume("local-2", "other", hostname_terms(&[&["host-2"]])),
        ];
        let volumes = volumes(&views);
        let pod = || unmanaged_pod("ns", "p", "n1");
        let pin_of = |pod: &PodView| pin(pod, &n1, &volumes).map(|p| format!("{p:?}"));
        assert_eq!(pin_of(&pod()), None);
        assert_eq!(
            pin_of(&pod().pinned(|p| p.hostname = Some("host-1".into()))),
            Some("Hostname(\"host-1\")".into())
        );
        // The node's hostname label, not its name, is what the selector matches.
        assert_eq!(
            pin_of(&pod().pinned(|p| p.hostname = Some("n1".into()))),
            None
        );
        assert_eq!(
            pin_of(&pod().pinned(|p| p.affinity = Some(hostname_terms(&[&["host-1"]])))),
            Some("Affinity".into())
        );
        // One term could select another node.
        assert_eq!(
            pin_of(
                &pod().pinned(|p| p.affinity = Some(hostname_terms(&[&["host-1"], &["host-2"]])))
            ),
            None
        );
        let by_name = NodePin {
            terms: vec![vec![NodeName::Name("n1".into())]],
        };
        assert_eq!(
            pin_of(&pod().pinned(|p| p.affinity = Some(by_name))),
            Some("Affinity".into())
        );
        assert_eq!(
            pin_of(&pod().pinned(|p| p.claims = vec!["other".into(), "data".into()])),
            Some("Volume { volume: \"local-1\", claim: \"data\" }".into())
        );
        // A claim of that name in another namespace is not the pod's.
        let mut elsewhere = pod().pinned(|p| p.claims = vec!["data".into()]);
        elsewhere.namespace = "other".into();
        assert_eq!(pin_of(&elsewhere), None);
        // A node without a hostname label answers to its name.
        let bare = node("n1");
        assert!(
            pin(
                &pod().pinned(|p| p.hostname = Some("n1".into())),
                &bare,
                &volumes
            )
            .is_some()
        );
    }
}
