//! What may pin a pod to one node, as plain field reads: a pod's hostname node selector, its
//! required node affinity and its claims, and the PersistentVolumes bound to a claim with a node
//! affinity. A node selector is reduced to the nodes each of its terms names; whether that is the
//! pod's own node is the planner's to decide.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, PersistentVolume, Pod, Volume};

use k8sm_planner::{HOSTNAME_LABEL, NodeName, NodePin, PodPins, VolumeView};

/// The field a `matchFields` requirement can name a node by.
const NAME_FIELD: &str = "metadata.name";

/// The nodes each term of `selector` names one at a time (`kubernetes.io/hostname` In one value, or
/// `metadata.name` In one value). `None` where a term names none: that term may select any number
/// of nodes.
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

/// The claim a pod's volume uses, in the pod's namespace: `persistentVolumeClaim.claimName`, or for
/// a generic ephemeral volume the claim its controller creates, `<pod>-<volume>`.
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

/// A PersistentVolume that may pin the pods of its claim: bound (or reserved) to a claim, with a
/// required node affinity that names a node in every term. `None` for any other.
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
mod tests {
    //! Tests of what may pin a pod, read from real objects.

    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::*;

    fn object<K: DeserializeOwned>(value: Value) -> K {
        serde_json::from_value(value).expect("a valid object")
    }

    fn pod(spec: Value) -> Pod {
        let mut spec = spec;
        spec["containers"] = json!([]);
        spec["nodeName"] = json!("n1");
        object(json!({"metadata": {"name": "web-0", "namespace": "shop"}, "spec": spec}))
    }

    fn hostname(term: &[&str]) -> Value {
        json!({"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": term}]})
    }

    fn required(terms: Vec<Value>) -> Value {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
    }

    fn one(h: &str) -> NodePin {
        NodePin {
            terms: vec![vec![NodeName::Hostname(h.into())]],
        }
    }

    #[test]
    fn a_hostname_node_selector() {
        let pins = pins_of(&pod(
            json!({"nodeSelector": {"kubernetes.io/hostname": "host-1", "disk": "ssd"}}),
        ));
        assert_eq!(pins.unwrap().hostname.as_deref(), Some("host-1"));
        // Any other selector ties the pod to no one node.
        assert_eq!(
            pins_of(&pod(
                json!({"nodeSelector": {"topology.kubernetes.io/zone": "a"}})
            )),
            None
        );
        assert_eq!(pins_of(&pod(json!({}))), None);
    }

    #[test]
    fn a_required_node_affinity_naming_one_node_per_term() {
        let affinity =
            |affinity: Value| pins_of(&pod(json!({"affinity": affinity}))).and_then(|p| p.affinity);
        assert_eq!(
            affinity(required(vec![hostname(&["host-1"])])),
            Some(one("host-1"))
        );
        // A value repeated is still one node; a term with other requirements besides still names
        // it.
        let mut with_zone = hostname(&["host-1", "host-1"]);
        with_zone["matchExpressions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}));
        assert_eq!(affinity(required(vec![with_zone])), Some(one("host-1")));
        // Every term is kept: the planner asks whether all of them name the pod's node.
        assert_eq!(
            affinity(required(vec![hostname(&["host-1"]), hostname(&["host-2"])])),
            Some(NodePin {
                terms: vec![
                    vec![NodeName::Hostname("host-1".into())],
                    vec![NodeName::Hostname("host-2".into())]
                ]
            })
        );
        assert_eq!(
            affinity(required(vec![json!({"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]})])),
            Some(NodePin {
                terms: vec![vec![NodeName::Name("n1".into())]]
            })
        );
        // Not pins: two hostnames in a term, another operator, a term that names no node, and a
        // preferred affinity.
        assert_eq!(
            affinity(required(vec![hostname(&["host-1", "host-2"])])),
            None
        );
        assert_eq!(
            affinity(required(vec![json!({"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["host-2"]}]})])),
            None
        );
        assert_eq!(
            affinity(required(vec![
                hostname(&["host-1"]),
                json!({"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]})
            ])),
            None
        );
        assert_eq!(affinity(required(vec![])), None);
        let preferred = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": hostname(&["host-1"])}]}});
        assert_eq!(pins_of(&pod(json!({"affinity": preferred}))), None);
    }

    #[test]
    fn the_claims_of_its_volumes() {
        let pins = pins_of(&pod(json!({"volumes": [
            {"name": "config", "configMap": {"name": "c"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        ]})));
        assert_eq!(pins.unwrap().claims, ["data-web-0", "web-0-scratch"]);
        assert_eq!(
            pins_of(&pod(json!({"volumes": [{"name": "tmp", "emptyDir": {}}]}))),
            None
        );
    }

    #[test]
    fn a_local_persistent_volume_of_a_claim() {
        let volume = |spec: Value| {
            volume_view(&object(
                json!({"metadata": {"name": "local-1"}, "spec": spec}),
            ))
        };
        let affinity = json!({"required": {"nodeSelectorTerms": [hostname(&["host-1"])]}});
        let claim =
            json!({"kind": "PersistentVolumeClaim", "namespace": "shop", "name": "data-web-0"});
        assert_eq!(
            volume(
                json!({"local": {"path": "/mnt/disk"}, "nodeAffinity": affinity, "claimRef": claim})
            ),
            Some(VolumeView {
                name: "local-1".into(),
                claim_namespace: "shop".into(),
                claim_name: "data-web-0".into(),
                pin: one("host-1"),
            })
        );
        // Unclaimed, without a node affinity, or one that several nodes satisfy: it pins nothing.
        assert_eq!(volume(json!({"nodeAffinity": affinity})), None);
        assert_eq!(volume(json!({"claimRef": claim})), None);
        let zonal = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]}});
        assert_eq!(
            volume(json!({"nodeAffinity": zonal, "claimRef": claim})),
            None
        );
    }
}
