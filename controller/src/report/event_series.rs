//! Writes Events (`events.k8s.io/v1`) and folds a repeat into the earlier Event's series, as
//! client-go's recorder and kube's `Recorder` do (docs/design.md §5.5), remembering only what a
//! repeat needs: per Event its key and the name to patch, at most [`REMEMBERED`] (the oldest
//! forgotten first), expired at most once a second. kube's `Recorder` keeps every Event whole for
//! six minutes and scans them all on every write: at fleet scale, most of the controller's heap
//! (docs/decisions/0006-controller-memory.md).

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};

/// How long a written Event takes repeats into its series (client-go's and kube's six minutes).
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);
/// Events remembered at most (client-go's event correlator keeps an LRU cache of 4,096).
const REMEMBERED: usize = 4096;
/// The least time between two sweeps of expired entries.
const SWEEP_EVERY: SignedDuration = SignedDuration::from_secs(1);

/// What makes two Events one repeated Event: as kube's `Recorder` keys them (the reporter is the
/// writer's own).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    warning: bool,
    reason: String,
    action: String,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
}

impl Key {
    fn of(event: &Event, regarding: &ObjectReference) -> Self {
        Self {
            warning: matches!(event.type_, EventType::Warning),
            reason: event.reason.clone(),
            action: event.action.clone(),
            kind: regarding.kind.clone(),
            namespace: regarding.namespace.clone(),
            name: regarding.name.clone(),
            uid: regarding.uid.clone(),
        }
    }
}

/// A written Event, as much as a repeat needs.
#[derive(Clone, Debug, PartialEq)]
struct Written {
    namespace: String,
    name: String,
    /// Occurrences so far (1: written once, no series yet).
    count: i32,
    last: Timestamp,
}

/// The Events written in the last [`SERIES_WINDOW`], at most [`REMEMBERED`] of them.
#[derive(Debug, Default)]
struct Remembered {
    events: HashMap<Key, Written>,
    swept: Option<Timestamp>,
}

impl Remembered {
    /// The Event to fold a repeat of `key` into, if it was written within the window.
    fn repeat_of(&mut self, key: &Key, now: Timestamp) -> Option<Written> {
        self.sweep(now);
        self.events
            .get(key)
            .filter(|w| w.last + SERIES_WINDOW > now)
            .cloned()
    }

    fn remember(&mut self, key: Key, written: Written) {
        if !self.events.contains_key(&key) && self.events.len() >= REMEMBERED {
            // Full of Events still in their window: the one observed longest ago goes, as from an
            // LRU cache.
            if let Some(oldest) = self
                .events
                .iter()
                .min_by_key(|(_, w)| w.last)
                .map(|(k, _)| k.clone())
            {
                self.events.remove(&oldest);
            }
        }
        self.events.insert(key, written);
    }

    fn forget(&mut self, key: &Key) {
        self.events.remove(key);
    }

    /// Drops the entries whose window has passed, at most once per [`SWEEP_EVERY`].
    fn sweep(&mut self, now: Timestamp) {
        if self.swept.is_some_and(|at| at + SWEEP_EVERY > now) {
            return;
        }
        self.swept = Some(now);
        self.events.retain(|_, w| w.last + SERIES_WINDOW > now);
        // A burst's table is given back once it has mostly expired.
        if self.events.capacity() > 4 * self.events.len().max(64) {
            self.events.shrink_to(2 * self.events.len());
        }
    }
}

/// Writes Events for one reporter (controller and instance), folding repeats into series.
pub struct EventWriter {
    client: Client,
    reporter: Reporter,
    remembered: Mutex<Remembered>,
}

impl EventWriter {
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            remembered: Mutex::new(Remembered::default()),
        }
    }

    /// Writes `event` about `regarding`, which happened at `now`: a new Event, or, when the same
    /// Event was written in the last six minutes, one more occurrence in that Event's series.
    /// Cluster-scoped objects' Events go to the `default` namespace. Every try of one write passes
    /// the same `now`: a try whose answer was lost may have written the Event, and the next try
    /// then finds it by its name instead of writing a second one (so client-go's recorder keeps
    /// the name across its tries); a series' count is written whole, so a repeat is tried again
    /// as it is.
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
        now: Timestamp,
    ) -> Result<(), kube::Error> {
        let key = Key::of(event, regarding);
        let repeat = self.remembered().repeat_of(&key, now);
        if let Some(earlier) = repeat {
            let count = earlier.count + 1;
            let series = serde_json::json!({
                "series": EventSeries { count, last_observed_time: MicroTime(now) }
            });
            let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &earlier.namespace);
            match api
                .patch(
                    &earlier.name,
                    &PatchParams::default(),
                    &Patch::Merge(&series),
                )
                .await
            {
                Ok(_) => {
                    self.remembered().remember(
                        key,
                        Written {
                            count,
                            last: now,
                            ..earlier
                        },
                    );
                    return Ok(());
                }
                // The Event is gone (the apiserver's Event TTL, or deleted): written anew below.
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    self.remembered().forget(&key)
                }
                Err(error) => return Err(error),
            }
        }
        let new = self.new_event(event, regarding, now);
        let namespace = new.metadata.namespace.clone().unwrap_or_default();
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        let name = match api.create(&PostParams::default(), &new).await {
            Ok(created) => created.metadata.name,
            // An earlier try of this write created it, and its answer was lost.
            Err(kube::Error::Api(status)) if status.code == 409 => None,
            Err(error) => return Err(error),
        }
        .or(new.metadata.name)
        .unwrap_or_default();
        self.remembered().remember(
            key,
            Written {
                namespace,
                name,
                count: 1,
                last: now,
            },
        );
        Ok(())
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, Remembered> {
        // A panic while holding the lock left at worst a stale entry: the cache is still usable.
        self.remembered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The Event as kube's `Recorder` writes it: named after the object and the time in
    /// nanoseconds.
    fn new_event(&self, event: &Event, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let object = regarding
            .name
            .as_deref()
            .unwrap_or(&self.reporter.controller);
        K8sEvent {
            metadata: ObjectMeta {
                namespace: Some(namespace),
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                ..ObjectMeta::default()
            },
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            note: event.note.clone(),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: event.secondary.clone(),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(
                match event.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            ..K8sEvent::default()
        }
    }
}

#[cfg(test)]
mod tests {
    //! The cache of written Events: repeats within the window, expiry, the bound, and what keys an
    //! Event.

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
}
