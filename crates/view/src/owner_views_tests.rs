//! Tests of `OwnerViews`: an owner's view is converted once per version of the object, and only the objects of the
//! last build are kept.

use serde_json::json;

use super::*;

fn replica_set(name: &str, replicas: i32) -> Arc<ReplicaSet> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}")},
            "spec": {"replicas": replicas, "selector": {}}
        }))
        .expect("a valid ReplicaSet"),
    )
}

fn views(kept: &mut OwnerViews, replica_sets: &[Arc<ReplicaSet>]) -> Vec<Arc<OwnerView>> {
    kept.views(&Objects::<()> {
        replica_sets,
        ..Objects::default()
    })
}

#[test]
fn an_unchanged_object_keeps_its_view_and_a_new_version_gets_a_new_one() {
    let mut kept = OwnerViews::default();
    let (web, db) = (replica_set("web", 3), replica_set("db", 1));
    let first = views(&mut kept, &[Arc::clone(&web), Arc::clone(&db)]);
    assert_eq!(first[0].desired, Some(3));
    // The store replaces an object's Arc for each watch event: web scaled to 5 is a new object.
    let web_scaled = replica_set("web", 5);
    let second = views(&mut kept, &[Arc::clone(&db), Arc::clone(&web_scaled)]);
    assert!(Arc::ptr_eq(&second[0], &first[1]), "db did not change");
    assert!(!Arc::ptr_eq(&second[1], &first[0]));
    assert_eq!(second[1].desired, Some(5));
    // Views of the same objects in a new build are the same views.
    let third = views(&mut kept, &[Arc::clone(&db), Arc::clone(&web_scaled)]);
    assert!(Arc::ptr_eq(&third[0], &second[0]) && Arc::ptr_eq(&third[1], &second[1]));
}

#[test]
fn an_object_gone_is_not_kept() {
    let mut kept = OwnerViews::default();
    let web = replica_set("web", 3);
    views(&mut kept, &[Arc::clone(&web)]);
    assert_eq!(Arc::strong_count(&web), 2, "held while its view is kept");
    assert!(views(&mut kept, &[]).is_empty());
    assert_eq!(
        Arc::strong_count(&web),
        1,
        "released once gone from the store"
    );
}

#[test]
fn a_fresh_keeper_converts_every_owner() {
    let web = replica_set("web", 3);
    let one = views(&mut OwnerViews::default(), &[Arc::clone(&web)]);
    let two = views(&mut OwnerViews::default(), &[Arc::clone(&web)]);
    assert!(!Arc::ptr_eq(&one[0], &two[0]));
    assert_eq!(one, two);
}
