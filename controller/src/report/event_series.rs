//! Writes Events (`events.k8s.io/v1`) and folds a repeat into the earlier Event's series, as client-go's recorder
//! and kube's `Recorder` do, remembering only what a repeat needs.
//!
//! kube's `Recorder` keeps every Event it wrote for six minutes, whole, inline in one hash map with its key: about
//! 2 kB a bucket. At fleet scale (an Event per eviction, thousands in six minutes) its table grew to 35 MB of the
//! controller's 59 MB heap at 300 nodes (heaptrack), and it scanned the whole table on every write. This cache keeps,
//! per Event, its key and the name to patch; it is bounded like client-go's (4,096 Events, the oldest forgotten
//! first), and it expires entries at most once a second. A repeat of a forgotten Event is written as a new Event.

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

/// What makes two Events one repeated Event: as kube's `Recorder` keys them (the reporter is the writer's own).
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
            // Full of Events still in their window: the one observed longest ago goes, as from an LRU cache.
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

    /// Writes `event` about `regarding`: a new Event, or, when the same Event was written in the last six minutes,
    /// one more occurrence in that Event's series. Cluster-scoped objects' Events go to the `default` namespace.
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
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
        let created = api.create(&PostParams::default(), &new).await?;
        let name = created
            .metadata
            .name
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

    /// The Event as kube's `Recorder` writes it: named after the object and the time in nanoseconds.
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
#[path = "event_series_tests.rs"]
mod tests;
