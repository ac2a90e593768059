//! What may pin a pod to one node, as plain field reads: a pod's hostname node selector, its required node affinity
//! and its claims, and the PersistentVolumes bound to a claim with a node affinity. A node selector is reduced to the
//! nodes each of its terms names; whether that is the pod's own node is the planner's to decide.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, PersistentVolume, Pod, Volume};

use k8sm_planner::{HOSTNAME_LABEL, NodeName, NodePin, PodPins, VolumeView};

/// The field a `matchFields` requirement can name a node by.
const NAME_FIELD: &str = "metadata.name";

/// The nodes each term of `selector` names one at a time (`kubernetes.io/hostname` In one value, or `metadata.name`
/// In one value). `None` where a term names none: that term may select any number of nodes.
pub fn node_pin(selector: &NodeSelector) -> Option<NodePin> {
    let terms: Option<Vec<Vec<NodeName>>> = selector
        .node_selector_terms
        .iter()
        .map(|term| {
            let by_label = term.match_expressions.iter().flatten().filter_map(|r| {
                let value = single_in(&r.operator, r.values.as_deref())?;
                (r.key == HOSTNAME_LABEL).then(|| NodeName::Hostname(value.to_owned()))
            });
            let by_field = term.match_fields.iter().flatten().filter_map(|r| {
                let value = single_in(&r.operator, r.values.as_deref())?;
                (r.key == NAME_FIELD).then(|| NodeName::Name(value.to_owned()))
            });
            let names: Vec<NodeName> = by_label.chain(by_field).collect();
            (!names.is_empty()).then_some(names)
        })
        .collect();
    terms
        .filter(|t| !t.is_empty())
        .map(|terms| NodePin { terms })
}

/// The one value an `In` requirement allows (given once or more), if it allows one.
fn single_in<'v>(operator: &str, values: Option<&'v [String]>) -> Option<&'v str> {
    let first = values?.first()?;
    (operator == "In" && values?.iter().all(|v| v == first)).then_some(first.as_str())
}

/// The claim a pod's volume uses, in the pod's namespace: `persistentVolumeClaim.claimName`, or for a generic
/// ephemeral volume the claim its controller creates, `<pod>-<volume>`.
pub fn volume_claim(
    pod: &str,
    volume: &str,
    claim: Option<&str>,
    ephemeral: bool,
) -> Option<String> {
    match claim {
        Some(claim) => Some(claim.to_owned()),
        None => ephemeral.then(|| format!("{pod}-{volume}")),
    }
}

/// What of these fields may pin a pod to one node; `None` when nothing does.
pub fn pod_pins(
    node_selector: Option<&BTreeMap<String, String>>,
    required_affinity: Option<&NodeSelector>,
    claims: Vec<String>,
) -> Option<Box<PodPins>> {
    let pins = PodPins {
        hostname: node_selector.and_then(|s| s.get(HOSTNAME_LABEL)).cloned(),
        affinity: required_affinity.and_then(node_pin),
        claims,
    };
    (pins != PodPins::default()).then(|| Box::new(pins))
}

/// What may pin a [`Pod`] to one node.
pub fn pins_of(pod: &Pod) -> Option<Box<PodPins>> {
    let spec = pod.spec.as_ref()?;
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    pod_pins(
        spec.node_selector.as_ref(),
        required,
        spec.volumes
            .iter()
            .flatten()
            .filter_map(|v| claim_of(name, v))
            .collect(),
    )
}

fn claim_of(pod: &str, volume: &Volume) -> Option<String> {
    let claim = volume.persistent_volume_claim.as_ref();
    volume_claim(
        pod,
        &volume.name,
        claim.map(|c| c.claim_name.as_str()),
        volume.ephemeral.is_some(),
    )
}

/// A PersistentVolume that may pin the pods of its claim: bound (or reserved) to a claim, with a required node
/// affinity that names a node in every term. `None` for any other.
pub fn volume_view(volume: &PersistentVolume) -> Option<VolumeView> {
    let spec = volume.spec.as_ref()?;
    let claim = spec.claim_ref.as_ref()?;
    let pin = node_pin(spec.node_affinity.as_ref()?.required.as_ref()?)?;
    Some(VolumeView {
        name: volume.metadata.name.clone()?,
        claim_namespace: claim.namespace.clone()?,
        claim_name: claim.name.clone()?,
        pin,
    })
}

#[cfg(test)]
#[path = "pin_tests.rs"]
mod tests;
