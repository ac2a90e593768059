//! A node's whole way through the upgrade: kamikaze, restart, pause, execution order, idempotence,
//! JSON.

use k8sm_api::{KamikazeMechanism, NodePhase, PauseAnnotation, UnmanagedPodPolicy};

use super::*;
use crate::{
    Decision, PodPhase,
    testing::{NEW, OLD, apply, node, policy, record_in_flight, replica_set, unmanaged_pod},
};

fn drained_node() -> NodeView {
    node("n1").marked(at(0)).admitted(at(1))
}

fn kamikaze_of(plan: &Plan) -> (KamikazeMechanism, Option<String>, Option<String>) {
    plan.actions
        .iter()
        .find_map(|a| match &a.kind {
            ActionKind::Kamikaze {
                mechanism,
                url,
                executor_id,
                at: when,
                ..
            } => {
                assert_eq!(*when, now());
                Some((*mechanism, url.clone(), executor_id.clone()))
            }
            _ => None,
        })
        .expect("a kamikaze action")
}

#[test]
fn one_node_goes_all_the_way_from_old_to_new() {
    let rs = replica_set("shop", "web", 2);
    let mut view = cluster(
        vec![node("n1"), node("up").executor(NEW)],
        vec![rs.clone()],
        vec![rs.pod("w1", "n1"), rs.pod("w2", "up")],
        vec![policy("p")],
    );
    let mut phases = Vec::new();
    for step in 0..6 {
        let plan = plan(&view, at(step));
        phases.push((phase(&plan, "n1"), summary(&plan)));
        apply(&mut view, &plan);
        // The ReplicaSet replaces the evicted pod on the upgraded node; the evicted one goes.
        view.pods.retain(|p| !p.terminating);
        if view.pods.len() < 2 {
            view.pods.push(rs.pod("w3", "up").into());
        }
        // The executor restarts in the new version and clears the kamikaze annotation.
        if let Some(n1) = view.nodes.iter_mut().find(|n| n.kamikaze.is_some()) {
            n1.executor_id = Some(NEW.into());
            n1.kamikaze = None;
        }
    }
    let expected: Vec<(NodePhase, Vec<String>)> = vec![
        (
            NodePhase::Draining,
            vec![
                "Mark n1 @".into(),
                "Admit n1 +cordon".into(),
                "Evict shop/w1".into(),
            ],
        ),
        (NodePhase::KamikazeSent, vec!["Kamikaze n1".into()]),
        (NodePhase::Compatible, vec!["Complete n1 +uncordon".into()]),
        (NodePhase::Compatible, vec![]),
        (NodePhase::Compatible, vec![]),
        (NodePhase::Compatible, vec![]),
    ];
    assert_eq!(phases, expected);
    assert_eq!(
        view.nodes[0],
        node("n1").executor(NEW),
        "no k8sm state left behind"
    );
}

#[test]
fn kamikaze_by_annotation_records_the_executor_it_replaces() {
    let plan = plan_now(&cluster(
        vec![drained_node()],
        vec![],
        vec![],
        vec![policy("p")],
    ));
    assert_eq!(
        kamikaze_of(&plan),
        (KamikazeMechanism::Annotation, None, Some(OLD.into()))
    );
    assert_eq!(plan.actions[0].reason, Reason::KamikazeSent);
    assert_eq!(phase(&plan, "n1"), NodePhase::KamikazeSent);
    assert_eq!(node_plan(&plan, "n1").since, Some(now()));
}

#[test]
fn kamikaze_by_http_fills_in_the_url_template() {
    let p = policy("p").with(|s| {
        s.kamikaze.mechanism = KamikazeMechanism::Http;
        s.kamikaze.url_template = Some("https://{nodeIP}:10250/kamikaze?node={nodeName}".into());
    });
    let plan = plan_now(&cluster(vec![drained_node()], vec![], vec![], vec![p]));
    let url = Some("https://10.0.0.1:10250/kamikaze?node=n1".to_owned());
    assert_eq!(
        kamikaze_of(&plan),
        (KamikazeMechanism::Http, url, Some(OLD.into()))
    );
}

#[test]
fn kamikaze_by_http_waits_for_a_node_address_it_needs() {
    let p = policy("p").with(|s| {
        s.kamikaze.mechanism = KamikazeMechanism::Http;
        s.kamikaze.url_template = Some("https://{nodeIP}/kamikaze".into());
    });
    let mut n1 = drained_node();
    n1.internal_ip = None;
    let plan = plan_now(&cluster(vec![n1], vec![], vec![], vec![p]));
    assert!(summary(&plan).is_empty());
    assert_eq!(phase(&plan, "n1"), NodePhase::Drained);
    assert_eq!(blocker_reasons(&plan, "n1"), [Reason::NodeAddressMissing]);
}

#[test]
fn kamikaze_by_http_brackets_an_ipv6_address() {
    let p = policy("p").with(|s| {
        s.kamikaze.mechanism = KamikazeMechanism::Http;
        s.kamikaze.url_template = Some("https://{nodeIP}:10260/kamikaze/{nodeName}".into());
    });
    let mut n1 = drained_node();
    n1.internal_ip = Some("fd00::7".into());
    let plan = plan_now(&cluster(vec![n1], vec![], vec![], vec![p]));
    let url = Some("https://[fd00::7]:10260/kamikaze/n1".to_owned());
    assert_eq!(
        kamikaze_of(&plan),
        (KamikazeMechanism::Http, url, Some(OLD.into()))
    );
}

#[test]
fn kamikaze_by_http_never_posts_to_an_address_that_is_not_an_ip() {
    let p = policy("p").with(|s| {
        s.kamikaze.mechanism = KamikazeMechanism::Http;
        s.kamikaze.url_template = Some("https://{nodeIP}:10260/kamikaze".into());
    });
    for address in ["metadata.internal", "169.254.169.254"] {
        let mut n1 = drained_node();
        n1.internal_ip = Some(address.into());
        let plan = plan_now(&cluster(vec![n1], vec![], vec![], vec![p.clone()]));
        assert!(summary(&plan).is_empty(), "{address}: no action");
        assert_eq!(phase(&plan, "n1"), NodePhase::Drained, "{address}");
        assert_eq!(
            blocker_reasons(&plan, "n1"),
            [Reason::NodeAddressInvalid],
            "{address}"
        );
        assert!(Reason::NodeAddressInvalid.blocks() && Reason::NodeAddressInvalid.needs_operator());
    }
}

#[test]
fn kamikaze_by_http_refuses_a_host_made_from_the_node_name() {
    let p = policy("p").with(|s| {
        s.kamikaze.mechanism = KamikazeMechanism::Http;
        s.kamikaze.url_template = Some("https://{nodeName}.nodes.example/kamikaze".into());
    });
    let plan = plan_now(&cluster(vec![drained_node()], vec![], vec![], vec![p]));
    assert!(summary(&plan).is_empty());
    assert_eq!(blocker_reasons(&plan, "n1"), [Reason::InvalidPolicy]);
}

#[test]
fn kamikaze_by_plain_http_needs_the_opt_in_and_is_warned_about() {
    let plain = policy("p").with(|s| {
        s.kamikaze.mechanism = KamikazeMechanism::Http;
        s.kamikaze.url_template = Some("http://{nodeIP}:10260/kamikaze".into());
    });
    let plan = plan_now(&cluster(
        vec![drained_node()],
        vec![],
        vec![],
        vec![plain.clone()],
    ));
    assert!(
        summary(&plan).is_empty(),
        "no kamikaze over plain http:// unless allowed"
    );
    assert_eq!(blocker_reasons(&plan, "n1"), [Reason::InvalidPolicy]);

    let allowed = plain.with(|s| s.kamikaze.allow_insecure_http = true);
    let plan = plan_now(&cluster(
        vec![drained_node()],
        vec![],
        vec![],
        vec![allowed],
    ));
    let url = Some("http://10.0.0.1:10260/kamikaze".to_owned());
    assert_eq!(
        kamikaze_of(&plan),
        (KamikazeMechanism::Http, url, Some(OLD.into()))
    );
    let reasons: Vec<Reason> = plan.policies[0]
        .conditions
        .iter()
        .map(|c| c.reason)
        .collect();
    assert_eq!(reasons, [Reason::InsecureKamikaze]);
    assert!(!Reason::InsecureKamikaze.blocks());
}

#[test]
fn kamikaze_by_deleting_the_node() {
    let p = policy("p").with(|s| s.kamikaze.mechanism = KamikazeMechanism::DeleteNode);
    let plan = plan_now(&cluster(vec![drained_node()], vec![], vec![], vec![p]));
    assert_eq!(
        kamikaze_of(&plan),
        (KamikazeMechanism::DeleteNode, None, Some(OLD.into()))
    );
    assert!(
        plan.actions[0].message.contains("deleting the Node"),
        "{}",
        plan.actions[0].message
    );
}

#[test]
fn a_restart_is_overdue_after_restart_timeout_and_the_plan_wakes_up_for_it() {
    let gone = |when| node("n1").marked(at(0)).admitted(at(1)).kamikazed(when);
    let recent = plan_now(&cluster(
        vec![gone(at(55))],
        vec![],
        vec![],
        vec![policy("p")],
    ));
    assert!(blocker_reasons(&recent, "n1").is_empty());
    assert_eq!(recent.next_wake, Some(at(65)), "10m after kamikaze");
    let late = plan_now(&cluster(
        vec![gone(at(49))],
        vec![],
        vec![],
        vec![policy("p")],
    ));
    assert_eq!(blocker_reasons(&late, "n1"), [Reason::RestartOverdue]);
    assert_eq!(late.next_wake, None);
    assert!(
        summary(&late).is_empty(),
        "overdue is reported, never acted on"
    );
}

#[test]
fn next_wake_is_the_earliest_time_based_change() {
    let p = policy("p").with(|s| {
        s.unmanaged_pods.policy = UnmanagedPodPolicy::DeleteAfterTimeout;
        s.unmanaged_pods.timeout = Some("2h".parse().unwrap());
        s.max_concurrent_nodes = k8sm_api::MaxConcurrentNodes::count(2).unwrap();
    });
    let nodes = vec![
        drained_node(),
        node("n2").marked(at(0)).admitted(at(1)).kamikazed(at(59)),
    ];
    let plan = plan_now(&cluster(
        nodes,
        vec![],
        vec![unmanaged_pod("ops", "tool", "n1")],
        vec![p],
    ));
    // The unmanaged pod becomes deletable at 120, n2's restart overdue at 69.
    assert_eq!(plan.next_wake, Some(at(69)));
}

#[test]
fn paused_means_no_eviction_deletion_cordon_or_kamikaze() {
    let by_spec = paused_policy(true, PauseAnnotation::Absent);
    let message = assert_paused(by_spec);
    assert!(message.starts_with("paused by spec.paused:"), "{message}");
    // The annotation cannot resume what the spec pauses.
    let both = paused_policy(true, PauseAnnotation::NotPaused);
    assert!(assert_paused(both).starts_with("paused by spec.paused:"));
}

#[test]
fn the_pause_annotation_pauses_like_the_spec() {
    let by_annotation = paused_policy(false, PauseAnnotation::Paused);
    let message = assert_paused(by_annotation);
    assert!(
        message.starts_with("paused by annotation k8s.mesosphere.io/paused:"),
        "{message}"
    );
    let both = paused_policy(true, PauseAnnotation::Paused);
    let message = assert_paused(both);
    assert!(
        message.starts_with("paused by spec.paused and annotation"),
        "{message}"
    );
}

#[test]
fn a_malformed_pause_annotation_pauses_and_says_so() {
    let plan_of = |annotation| {
        let rs = replica_set("shop", "web", 1);
        let p = paused_policy(false, annotation);
        let pods = vec![rs.pod("w", "n1")];
        plan_now(&cluster(vec![drained_node()], vec![rs], pods, vec![p]))
    };
    let odd = PauseAnnotation::parse(Some("yes"));
    assert_paused(paused_policy(false, odd.clone()));
    let plan = plan_of(odd);
    let malformed = plan
        .policy("p")
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.reason == Reason::MalformedAnnotation);
    let message = &malformed.expect("a MalformedAnnotation condition").message;
    assert!(
        message.contains("k8s.mesosphere.io/paused is \"yes\""),
        "{message}"
    );
    assert!(
        malformed.unwrap().nodes.is_empty(),
        "the policy's, not a node's"
    );

    // "false" reads as no annotation: the pod is evicted.
    let plan = plan_of(PauseAnnotation::NotPaused);
    assert!(!plan.policy("p").unwrap().paused);
    assert_eq!(summary(&plan), ["Evict shop/w"]);
}

fn paused_policy(spec_paused: bool, annotation: PauseAnnotation) -> PolicyView {
    let mut p = policy("p").with(|s| {
        s.paused = spec_paused;
        s.unmanaged_pods.policy = UnmanagedPodPolicy::Delete;
        s.max_concurrent_nodes = k8sm_api::MaxConcurrentNodes::count(3).unwrap();
    });
    p.pause_annotation = annotation;
    p
}

/// Nothing but marking and clean-up under the paused policy `p`; returns its Paused message.
fn assert_paused(p: PolicyView) -> String {
    let rs = replica_set("shop", "web", 1);
    let mut uncordoned = node("draining").marked(at(0));
    uncordoned.draining_since = Some(at(1).to_rfc3339());
    let nodes = vec![
        uncordoned,
        drained_node(),
        node("fresh"),
        node("done").marked(at(0)).executor(NEW),
    ];
    let pods = vec![
        rs.pod("w", "draining"),
        unmanaged_pod("ops", "tool", "draining"),
        unmanaged_pod("ops", "finished", "draining").phase(PodPhase::Succeeded),
    ];
    let plan = plan_now(&cluster(nodes, vec![rs], pods, vec![p]));
    assert_eq!(
        summary(&plan),
        ["Complete done", "Mark fresh @"],
        "marking and clean-up continue"
    );
    assert_eq!(phase(&plan, "n1"), NodePhase::Drained);
    assert!(blocker_reasons(&plan, "n1").contains(&Reason::Paused));
    let (decision, reason, message) = pod_decision(&plan, "draining", "w");
    assert_eq!((decision, reason), (Decision::Wait, Some(Reason::Paused)));
    assert!(
        message.starts_with("paused; would evict: workload ReplicaSet web"),
        "{message}"
    );
    let policy_plan = plan.policy("p").unwrap();
    assert!(policy_plan.paused);
    let paused = policy_plan
        .conditions
        .iter()
        .find(|c| c.reason == Reason::Paused);
    paused.expect("a Paused condition").message.clone()
}

#[test]
fn a_paused_policy_takes_nothing_from_the_others() {
    // One owner, a pod under each policy: only the active policy's eviction counts against the
    // owner.
    let rs = replica_set("shop", "web", 3);
    let nodes = vec![
        node("a1").label("pool", "a").marked(at(0)).admitted(at(1)),
        node("b1").label("pool", "b").marked(at(0)).admitted(at(1)),
    ];
    let pods = vec![
        rs.pod("in-a", "a1"),
        rs.pod("in-b", "b1"),
        rs.pod("other", "b1"),
    ];
    let a = policy("a").selecting("pool", "a").with(|s| s.paused = true);
    let b = policy("b").selecting("pool", "b");
    let cluster = cluster(nodes, vec![rs], pods, vec![a, b]);
    assert_eq!(summary(&plan_now(&cluster)), ["Evict shop/in-b"]);
    // Paused by its annotation instead, the same.
    let mut by_annotation = cluster.clone();
    by_annotation.policies[0].spec.paused = false;
    by_annotation.policies[0].pause_annotation = PauseAnnotation::Paused;
    assert_eq!(summary(&plan_now(&by_annotation)), ["Evict shop/in-b"]);
}

#[test]
fn actions_come_in_execution_order() {
    let rs = replica_set("shop", "web", 1);
    let p = policy("p").with(|s| {
        s.max_concurrent_nodes = k8sm_api::MaxConcurrentNodes::count(5).unwrap();
        s.unmanaged_pods.policy = UnmanagedPodPolicy::Delete;
    });
    let nodes = vec![
        node("a-drained").marked(at(0)).admitted(at(1)),
        node("b-draining").marked(at(0)).admitted(at(1)),
        node("c-fresh"),
        node("d-done")
            .marked(at(0))
            .admitted(at(1))
            .kamikazed(at(2))
            .executor(NEW),
    ];
    let pods = vec![
        rs.pod("w", "b-draining"),
        unmanaged_pod("ops", "tool", "b-draining"),
    ];
    let plan = plan_now(&cluster(nodes, vec![rs], pods, vec![p]));
    assert_eq!(
        summary(&plan),
        [
            "Complete d-done +uncordon",
            "Mark c-fresh @",
            "Admit c-fresh +cordon",
            "Evict shop/w",
            "Kamikaze a-drained",
        ]
    );
    // The unmanaged pod goes in the next pass, once the workload pod's eviction was accepted.
    let mut view = cluster(
        vec![node("b-draining").marked(at(0)).admitted(at(1))],
        vec![replica_set("shop", "web", 1)],
        vec![
            replica_set("shop", "web", 1)
                .pod("w", "b-draining")
                .terminating(),
            unmanaged_pod("ops", "tool", "b-draining"),
        ],
        vec![policy("p").with(|s| s.unmanaged_pods.policy = UnmanagedPodPolicy::Delete)],
    );
    assert_eq!(summary(&plan_now(&view)), ["Delete ops/tool"]);
    view.pods.clear();
    assert_eq!(summary(&plan_now(&view)), ["Kamikaze b-draining"]);
}

#[test]
fn planning_again_after_the_actions_were_applied_repeats_nothing() {
    let rs = replica_set("shop", "web", 4);
    let p = policy("p").with(|s| {
        s.max_concurrent_nodes = k8sm_api::MaxConcurrentNodes::count(2).unwrap();
        s.unmanaged_pods.policy = UnmanagedPodPolicy::Delete;
        s.owner_health_threshold = 50;
    });
    let nodes = vec![
        node("n1"),
        node("n2"),
        node("n3").marked(at(0)).admitted(at(1)),
        node("n4").executor(NEW),
    ];
    let pods = vec![
        rs.pod("a", "n1"),
        rs.pod("b", "n2"),
        rs.pod("c", "n2"),
        rs.pod("d", "n4"),
        unmanaged_pod("ops", "tool", "n1"),
    ];
    let mut view = cluster(nodes, vec![rs], pods, vec![p]);
    let first = plan_now(&view);
    assert!(!summary(&first).is_empty());
    apply(&mut view, &first);
    let second = plan(&view, now() + chrono::Duration::seconds(1));
    for action in &second.actions {
        assert!(
            !first.actions.iter().any(|a| a.kind.node().is_some()
                && a.kind.node() == action.kind.node()
                && std::mem::discriminant(&a.kind) == std::mem::discriminant(&action.kind)),
            "repeated {action:?}"
        );
        assert!(
            action
                .kind
                .pod()
                .is_none_or(|p| first.actions.iter().all(|a| a.kind.pod() != Some(p))),
            "repeated {action:?}"
        );
    }
}

#[test]
fn planning_again_before_the_cache_shows_the_evictions_repeats_none() {
    let rs = replica_set("shop", "web", 10);
    let pods = (0..10)
        .map(|i| rs.pod(&format!("w{i}"), if i < 6 { "n1" } else { "up" }))
        .collect();
    let mut view = cluster(
        vec![
            node("n1").marked(at(0)).admitted(at(1)),
            node("up").executor(NEW),
        ],
        vec![rs],
        pods,
        vec![policy("p").with(|s| s.owner_health_threshold = 50)],
    );
    let first = plan_now(&view);
    let evicted: Vec<_> = first.evictions().map(|(p, _)| p.clone()).collect();
    assert_eq!(
        evicted.len(),
        5,
        "10 ready, 50% needs 5: five go, the sixth waits"
    );
    record_in_flight(&mut view, &first, now());
    let second = plan_now(&view);
    assert_eq!(second.evictions().count(), 0, "{:?}", summary(&second));
}

#[test]
fn the_plan_is_json_for_the_plugin() {
    let rs = replica_set("shop", "web", 1);
    let view = cluster(
        vec![node("n1").marked(at(0)).admitted(at(1))],
        vec![rs.clone()],
        vec![rs.pod("w", "n1")],
        vec![policy("p")],
    );
    let plan = plan_now(&view);
    let json = serde_json::to_value(&plan).unwrap();
    let evict = &json["actions"][0];
    assert_eq!(evict["action"], "evict");
    assert_eq!(evict["reason"], "Evicted");
    assert_eq!(evict["pod"]["name"], "w");
    assert_eq!(evict["owner"]["kind"], "ReplicaSet");
    assert_eq!(evict["readyBefore"], 1);
    assert_eq!(json["nodes"][0]["phase"], "Draining");
    assert_eq!(json["policies"][0]["counts"]["draining"], 1);
    let back: Plan = serde_json::from_value(json).unwrap();
    assert_eq!(back, plan);
    // The view is JSON too, so `kubectl k8sm plan` can save and replay one.
    let view_back: ClusterView =
        serde_json::from_str(&serde_json::to_string(&view).unwrap()).unwrap();
    assert_eq!(view_back, view);
}
