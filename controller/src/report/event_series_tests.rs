//! The cache of written Events: repeats within the window, expiry, the bound, and what keys an Event.

use super::*;

fn event(type_: EventType, reason: &str) -> Event {
    Event {
        type_,
        reason: reason.into(),
        note: Some("a note".into()),
        action: reason.into(),
        secondary: None,
    }
}

fn pod(name: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: Some("shop".into()),
        name: Some(name.into()),
        uid: Some(format!("uid-{name}")),
        ..ObjectReference::default()
    }
}

fn written(name: &str, at: Timestamp) -> Written {
    Written {
        namespace: "shop".into(),
        name: name.into(),
        count: 1,
        last: at,
    }
}

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

#[test]
fn a_repeat_within_six_minutes_of_the_last_occurrence_folds_into_the_series() {
    let mut remembered = Remembered::default();
    let key = Key::of(&event(EventType::Warning, "EvictionRefused"), &pod("web-1"));
    remembered.remember(key.clone(), written("web-1.1", t(0)));
    assert_eq!(
        remembered.repeat_of(&key, t(359)).map(|w| w.name),
        Some("web-1.1".into())
    );
    // Each repeat moves the window on.
    remembered.remember(
        key.clone(),
        Written {
            count: 2,
            last: t(300),
            ..written("web-1.1", t(0))
        },
    );
    assert_eq!(remembered.repeat_of(&key, t(659)).map(|w| w.count), Some(2));
    assert_eq!(
        remembered.repeat_of(&key, t(660)),
        None,
        "six minutes after the last, a new Event"
    );
}

#[test]
fn expired_entries_are_swept() {
    let mut remembered = Remembered::default();
    for i in 0..100 {
        let key = Key::of(&event(EventType::Normal, "Evicted"), &pod(&format!("p{i}")));
        remembered.remember(key, written(&format!("p{i}.1"), t(i)));
    }
    let probe = Key::of(&event(EventType::Normal, "Evicted"), &pod("other"));
    assert_eq!(remembered.repeat_of(&probe, t(360 + 49)), None);
    assert_eq!(
        remembered.events.len(),
        50,
        "those observed at 50 s or later are within the window"
    );
}

#[test]
fn the_cache_is_bounded_and_forgets_the_oldest_first() {
    let mut remembered = Remembered::default();
    let key = |i: usize| Key::of(&event(EventType::Normal, "Evicted"), &pod(&format!("p{i}")));
    for i in 0..REMEMBERED + 10 {
        // One millisecond apart: all within one window, each observed after the one before.
        let at = t(0) + SignedDuration::from_millis(i as i64);
        remembered.remember(key(i), written(&format!("p{i}.1"), at));
    }
    assert_eq!(remembered.events.len(), REMEMBERED);
    // The first ten (observed first) are forgotten, the later ones kept.
    let now = t(60);
    assert!((0..10).all(|i| remembered.repeat_of(&key(i), now).is_none()));
    assert!((10..REMEMBERED + 10).all(|i| remembered.repeat_of(&key(i), now).is_some()));
}

#[test]
fn an_event_is_keyed_by_type_reason_action_and_object_not_by_its_note() {
    let warning = event(EventType::Warning, "EvictionRefused");
    let base = Key::of(&warning, &pod("web-1"));
    let mut other_note = event(EventType::Warning, "EvictionRefused");
    other_note.note = Some("another note".into());
    assert_eq!(Key::of(&other_note, &pod("web-1")), base);
    assert_ne!(
        Key::of(&event(EventType::Normal, "EvictionRefused"), &pod("web-1")),
        base
    );
    assert_ne!(
        Key::of(&event(EventType::Warning, "Evicted"), &pod("web-1")),
        base
    );
    assert_ne!(Key::of(&warning, &pod("web-2")), base);
    let replaced = ObjectReference {
        uid: Some("a new pod of the same name".into()),
        ..pod("web-1")
    };
    assert_ne!(Key::of(&warning, &replaced), base);
}

#[test]
fn a_new_event_is_written_as_kubes_recorder_writes_it() {
    // The client is never used: only the Event's fields are checked.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let client = Client::try_from(config).unwrap();
        let writer = EventWriter::new(
            client,
            Reporter {
                controller: "k8sm-controller".into(),
                instance: Some("k8sm-1".into()),
            },
        );
        let node = ObjectReference {
            kind: Some("Node".into()),
            name: Some("n1".into()),
            ..ObjectReference::default()
        };
        let new = writer.new_event(&event(EventType::Warning, "Stalled"), &node, t(0));
        assert_eq!(
            new.metadata.namespace.as_deref(),
            Some("default"),
            "cluster-scoped"
        );
        assert_eq!(
            new.metadata.name,
            Some(format!("n1.{:x}", t(0).as_nanosecond()))
        );
        assert_eq!(new.type_.as_deref(), Some("Warning"));
        assert_eq!(new.reason.as_deref(), Some("Stalled"));
        assert_eq!(new.action.as_deref(), Some("Stalled"));
        assert_eq!(new.note.as_deref(), Some("a note"));
        assert_eq!(new.reporting_controller.as_deref(), Some("k8sm-controller"));
        assert_eq!(new.reporting_instance.as_deref(), Some("k8sm-1"));
        assert_eq!(new.event_time, Some(MicroTime(t(0))));
        assert_eq!(new.regarding, Some(node));
        assert_eq!(new.series, None);
    });
}
