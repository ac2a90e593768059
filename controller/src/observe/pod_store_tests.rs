//! The pod cache against kube's own reflector store, fed the same events.

use std::collections::BTreeMap;

use futures::FutureExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{self, store::Writer};
use proptest::prelude::*;

use super::*;

#[derive(Clone, Debug)]
enum Step {
    Apply(u8, u8, u8),
    Delete(u8, u8),
    Init,
    InitApply(u8, u8, u8),
    InitDone,
}

fn pod(namespace: u8, name: u8, version: u8) -> CachedPod {
    let (namespace, name) = (format!("ns-{namespace}"), format!("pod-{name}"));
    CachedPod {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            resource_version: Some(version.to_string()),
            ..ObjectMeta::default()
        },
        view: Arc::new(PodView {
            namespace: namespace.into(),
            name: name.into(),
            ..PodView::default()
        }),
    }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..3u8, 0..6u8, any::<u8>()).prop_map(|(ns, n, v)| Step::Apply(ns, n, v)),
        3 => (0..3u8, 0..6u8).prop_map(|(ns, n)| Step::Delete(ns, n)),
        1 => Just(Step::Init),
        3 => (0..3u8, 0..6u8, any::<u8>()).prop_map(|(ns, n, v)| Step::InitApply(ns, n, v)),
        1 => Just(Step::InitDone),
    ]
}

/// Namespace, name and resourceVersion of every pod, with the address of its view.
type Contents = BTreeMap<(String, String), (String, usize)>;

fn of_reflector(store: &reflector::Store<CachedPod>) -> Contents {
    store
        .state()
        .iter()
        .map(|p| {
            let key = (p.namespace().unwrap_or_default(), p.name_any());
            (
                key,
                (
                    p.resource_version().unwrap_or_default(),
                    Arc::as_ptr(&p.view).addr(),
                ),
            )
        })
        .collect()
}

fn of_pod_store(store: &PodStore) -> Contents {
    store
        .views()
        .iter()
        .map(|view| {
            let cached = store
                .get(&view.namespace, &view.name)
                .expect("found by its name");
            assert!(Arc::ptr_eq(&cached.view, view));
            assert!(Arc::ptr_eq(
                &store.view(&view.namespace, &view.name).expect("found"),
                view
            ));
            let key = (view.namespace.to_string(), view.name.to_string());
            (
                key,
                (
                    cached.resource_version.to_string(),
                    Arc::as_ptr(view).addr(),
                ),
            )
        })
        .collect()
}

proptest! {
    #[test]
    fn the_pod_cache_holds_what_kubes_store_holds_after_every_event(
        steps in prop::collection::vec(step(), 1..80)
    ) {
        let (truth, mut truth_writer): (_, Writer<CachedPod>) = reflector::store();
        let (store, mut writer) = pod_store();
        for step in steps {
            let event = match step {
                Step::Apply(ns, n, v) => Event::Apply(pod(ns, n, v)),
                Step::Delete(ns, n) => Event::Delete(pod(ns, n, 0)),
                Step::Init => Event::Init,
                Step::InitApply(ns, n, v) => Event::InitApply(pod(ns, n, v)),
                Step::InitDone => Event::InitDone,
            };
            truth_writer.apply_watcher_event(&event);
            writer.apply(&event);
            prop_assert_eq!(of_pod_store(&store), of_reflector(&truth));
            prop_assert_eq!(store.len(), truth.state().len());
            prop_assert_eq!(*store.ready.borrow(), matches!(truth.wait_until_ready().now_or_never(), Some(Ok(()))));
        }
    }
}
