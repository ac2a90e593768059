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
    // A value repeated is still one node; a term with other requirements besides still names it.
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
    // Not pins: two hostnames in a term, another operator, a term that names no node, and a preferred affinity.
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
    let claim = json!({"kind": "PersistentVolumeClaim", "namespace": "shop", "name": "data-web-0"});
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
