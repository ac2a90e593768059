//! Table-like tests of the simulation's decisions, one rule each.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8sm_api::keys::{
    EXECUTOR_ID_ANNOTATION, INCOMPATIBLE_EXECUTOR_ANNOTATION, INCOMPATIBLE_EXECUTOR_LABEL,
    KAMIKAZE_ANNOTATION, KAMIKAZE_EXECUTOR_ID_ANNOTATION,
};

use super::*;

const T1: &str = "2025-01-01T00:00:01Z";
const T2: &str = "2025-01-01T00:00:02Z";

fn node(name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Node {
    let map = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>()
    };
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            resource_version: Some("5".into()),
            labels: Some(map(labels)),
            annotations: Some(map(annotations)),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

fn old(name: &str) -> Node {
    node(name, &[], &[(EXECUTOR_ID_ANNOTATION, "old")])
}

fn kamikazed(name: &str, at: &str) -> Node {
    node(
        name,
        &[],
        &[(EXECUTOR_ID_ANNOTATION, "old"), (KAMIKAZE_ANNOTATION, at)],
    )
}

fn restart(name: &str) -> Command {
    Command::Restart { node: name.into() }
}

fn sim() -> Simulation {
    Simulation::new("new".into(), None)
}

#[test]
fn a_node_without_an_id_gets_the_initial_id_once() {
    let mut s = Simulation::new("new".into(), Some("old".into()));
    let bare = node("n1", &[], &[]);
    assert_eq!(
        s.applied(&bare),
        [Command::PublishInitial {
            node: "n1".into(),
            executor_id: "old".into(),
            resource_version: Some("5".into()),
        }]
    );
    assert_eq!(s.applied(&bare), [], "already publishing");
    s.publish_done("n1");
    assert_eq!(s.applied(&old("n1")), [], "published");
}

#[test]
fn without_an_initial_id_nothing_is_published() {
    assert_eq!(sim().applied(&node("n1", &[], &[])), []);
}

#[test]
fn a_node_with_an_id_keeps_it() {
    let mut s = Simulation::new("new".into(), Some("old".into()));
    let other = node("n1", &[], &[(EXECUTOR_ID_ANNOTATION, "other")]);
    assert_eq!(s.applied(&other), []);
}

#[test]
fn a_kamikaze_restarts_the_node_once() {
    let mut s = sim();
    assert_eq!(s.applied(&old("n1")), []);
    assert_eq!(s.applied(&kamikazed("n1", T1)), [restart("n1")]);
    assert_eq!(s.applied(&kamikazed("n1", T1)), [], "restart in flight");
    assert_eq!(
        s.applied(&kamikazed("n1", T2)),
        [],
        "a new kamikaze during the restart is obeyed by that restart"
    );
    assert_eq!(s.pending(), 1);
    s.restart_done("n1", Some(T2.into()));
    assert_eq!(s.pending(), 0);
    assert_eq!(
        s.applied(&kamikazed("n1", T2)),
        [],
        "a stale event from before the restart"
    );
}

#[test]
fn a_node_kamikazed_again_later_restarts_again() {
    let mut s = sim();
    assert_eq!(s.applied(&kamikazed("n1", T1)), [restart("n1")]);
    s.restart_done("n1", Some(T1.into()));
    assert_eq!(
        s.applied(&node("n1", &[], &[(EXECUTOR_ID_ANNOTATION, "new")])),
        []
    );
    assert_eq!(
        s.applied(&kamikazed("n1", T1)),
        [restart("n1")],
        "seen without kamikaze in between: a new kamikaze, even with the same value"
    );
}

#[test]
fn a_kamikaze_recorded_for_an_earlier_executor_is_not_obeyed() {
    let mut s = sim();
    let already_restarted = node(
        "n1",
        &[],
        &[
            (EXECUTOR_ID_ANNOTATION, "new"),
            (KAMIKAZE_ANNOTATION, T1),
            (KAMIKAZE_EXECUTOR_ID_ANNOTATION, "old"),
        ],
    );
    assert_eq!(s.applied(&already_restarted), []);
}

#[test]
fn restarting_nodes_do_not_get_the_initial_id() {
    let mut s = Simulation::new("new".into(), Some("old".into()));
    let told = node("n1", &[], &[(KAMIKAZE_ANNOTATION, T1)]);
    assert_eq!(s.applied(&told), [restart("n1")]);
}

#[test]
fn each_node_restarts_independently() {
    let mut s = sim();
    assert_eq!(s.applied(&kamikazed("n1", T1)), [restart("n1")]);
    assert_eq!(s.applied(&kamikazed("n2", T1)), [restart("n2")]);
    assert_eq!(s.pending(), 2);
}

#[test]
fn http_kamikaze_restarts_known_nodes_once() {
    let mut s = sim();
    assert_eq!(s.http_kamikaze("n1"), HttpKamikaze::UnknownNode);
    s.applied(&old("n1"));
    assert_eq!(s.http_kamikaze("n1"), HttpKamikaze::Restart(restart("n1")));
    assert_eq!(s.http_kamikaze("n1"), HttpKamikaze::AlreadyRestarting);
    assert_eq!(
        s.applied(&kamikazed("n1", T1)),
        [],
        "the controller's annotation of the same kamikaze"
    );
    s.restart_done("n1", None);
    assert_eq!(s.http_kamikaze("n1"), HttpKamikaze::Restart(restart("n1")));
}

fn marked(name: &str) -> Node {
    node(
        name,
        &[("type", "kwok"), (INCOMPATIBLE_EXECUTOR_LABEL, "true")],
        &[
            (EXECUTOR_ID_ANNOTATION, "old"),
            (INCOMPATIBLE_EXECUTOR_ANNOTATION, T1),
        ],
    )
}

fn recreated(name: &str) -> Node {
    let mut node = node(
        name,
        &[("type", "kwok")],
        &[(EXECUTOR_ID_ANNOTATION, "new")],
    );
    node.metadata.resource_version = None;
    node.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
        unschedulable: Some(false),
        ..Default::default()
    });
    node.status = Some(Default::default());
    node
}

#[test]
fn a_deleted_node_in_an_upgrade_is_recreated_upgraded_once() {
    let mut s = sim();
    s.applied(&marked("n1"));
    assert_eq!(
        s.deleted("n1"),
        [Command::Recreate(Box::new(recreated("n1")))]
    );
    assert_eq!(s.deleted("n1"), [], "forgotten once deleted");
    assert_eq!(s.pending(), 1);
    assert_eq!(
        s.http_kamikaze("n1"),
        HttpKamikaze::AlreadyRestarting,
        "coming back already"
    );
    s.recreate_done("n1");
    assert_eq!(s.pending(), 0);
}

#[test]
fn a_deleted_node_told_kamikaze_is_recreated() {
    let mut s = sim();
    s.applied(&kamikazed("n1", T1));
    assert!(matches!(s.deleted("n1")[..], [Command::Recreate(_)]));
}

#[test]
fn a_deleted_node_not_in_an_upgrade_stays_deleted() {
    let mut s = sim();
    s.applied(&old("n1"));
    assert_eq!(s.deleted("n1"), []);
    assert_eq!(s.deleted("never-seen"), []);
}

#[test]
fn the_last_seen_state_counts() {
    let mut s = sim();
    s.applied(&marked("n1"));
    s.applied(&node("n1", &[], &[(EXECUTOR_ID_ANNOTATION, "new")]));
    assert_eq!(s.deleted("n1"), [], "upgraded and unmarked before deletion");
}

#[test]
fn nodes_missing_from_a_relist_were_deleted() {
    let mut s = sim();
    s.applied(&marked("n1"));
    s.applied(&old("n2"));
    s.applied(&marked("n3"));
    s.relist_started();
    s.applied(&old("n2"));
    s.applied(&marked("n3"));
    assert_eq!(
        s.relist_done(),
        [Command::Recreate(Box::new(recreated("n1")))]
    );
    assert_eq!(s.relist_done(), [], "only once per relist");
}

#[test]
fn watch_events_drive_the_same_rules() {
    use kube::runtime::watcher::Event;
    let mut s = sim();
    assert_eq!(s.on_event(&Event::Init), []);
    assert_eq!(s.on_event(&Event::InitApply(marked("n1"))), []);
    assert_eq!(s.on_event(&Event::InitApply(old("n2"))), []);
    assert_eq!(s.on_event(&Event::InitDone), []);
    assert_eq!(
        s.on_event(&Event::Apply(kamikazed("n2", T1))),
        [restart("n2")]
    );
    assert_eq!(
        s.on_event(&Event::Delete(marked("n1"))),
        [Command::Recreate(Box::new(recreated("n1")))]
    );
}

#[test]
fn a_never_restarting_node_hangs_on_every_mechanism() {
    let mut s = sim().never_restarting(["n1".to_owned()]);
    let hang = || Command::Hang { node: "n1".into() };
    assert_eq!(s.applied(&old("n1")), []);
    assert_eq!(s.applied(&kamikazed("n1", T1)), [hang()]);
    assert_eq!(s.applied(&kamikazed("n1", T2)), [], "reported once");
    assert_eq!(s.pending(), 0, "no restart scheduled");
    assert_eq!(s.http_kamikaze("n1"), HttpKamikaze::Hangs);
    assert_eq!(s.applied(&old("n1")), [], "kamikaze removed by hand");
    assert_eq!(s.applied(&kamikazed("n1", T2)), [hang()], "a new kamikaze");
    s.applied(&marked("n1"));
    assert_eq!(s.deleted("n1"), [], "a deleted node never comes back");
    assert_eq!(
        s.applied(&kamikazed("n2", T1)),
        [restart("n2")],
        "other nodes restart as usual"
    );
}
