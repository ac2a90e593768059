//! The kept view against kube's own reflector store, fed the same events.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{self, store::Writer};
use proptest::prelude::*;

use super::*;

#[derive(Clone, Debug)]
enum Step {
    Apply(u8, u8),
    Delete(u8),
    /// A relist: `Init`, these objects as `InitApply`, and `InitDone` unless the list broke off.
    Relist(Vec<(u8, u8)>, bool),
    /// The reader brings its view up to date.
    Update,
    /// Another reader takes over (as after a new leader's first pass).
    NewReader,
}

fn node(name: u8, version: u8) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(format!("node-{name}")),
            labels: Some(BTreeMap::from([("v".to_owned(), version.to_string())])),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..12u8, any::<u8>()).prop_map(|(n, v)| Step::Apply(n, v)),
        3 => (0..12u8).prop_map(Step::Delete),
        1 => (prop::collection::vec((0..12u8, any::<u8>()), 0..8), any::<bool>())
            .prop_map(|(objects, done)| Step::Relist(objects, done)),
        4 => Just(Step::Update),
        1 => Just(Step::NewReader),
    ]
}

/// The objects as the view and as the store hold them, by name.
fn by_name(views: &[NodeView]) -> BTreeMap<String, BTreeMap<String, String>> {
    views
        .iter()
        .map(|v| (v.name.clone(), v.labels.clone()))
        .collect()
}

fn feed(writer: &mut Writer<Node>, mirror: &NodeMirror, event: Event<Node>) {
    writer.apply_watcher_event(&event);
    mirror.observe(&event);
}

proptest! {
    #[test]
    fn the_kept_view_holds_what_the_store_holds_after_every_update(
        steps in prop::collection::vec(step(), 1..60)
    ) {
        let (store, mut writer) = reflector::store::<Node>();
        let mirror = nodes();
        let mut kept = Kept::<NodeView>::default();
        let mut items = Vec::new();
        for step in steps.into_iter().chain([Step::Update]) {
            match step {
                Step::Apply(n, v) => feed(&mut writer, &mirror, Event::Apply(node(n, v))),
                Step::Delete(n) => feed(&mut writer, &mirror, Event::Delete(node(n, 0))),
                Step::Relist(objects, done) => {
                    feed(&mut writer, &mirror, Event::Init);
                    for (n, v) in objects {
                        feed(&mut writer, &mirror, Event::InitApply(node(n, v)));
                    }
                    if done {
                        feed(&mut writer, &mirror, Event::InitDone);
                    }
                }
                Step::Update => {
                    kept.update_from_store(&mirror, &store, &mut items);
                    let truth: Vec<NodeView> =
                        store.state().iter().map(|n| k8sm_view::node_view(n)).collect();
                    prop_assert_eq!(by_name(&items), by_name(&truth));
                    prop_assert_eq!(items.len(), truth.len());
                }
                Step::NewReader => {
                    kept = Kept::default();
                    // What the last reader left is not the new one's: it starts from the store.
                    items.truncate(items.len() / 2);
                }
            }
        }
    }
}
