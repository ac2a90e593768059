//! How each watch is doing: since when it has been failing and why, so that the controller never
//! acts on a view that a failing watch keeps frozen (docs/design.md §9). A failing watch leaves its
//! store as it last was: pods evicted meanwhile would look Ready, and a planner trusting them would
//! evict their replacements' peers.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

/// A watch that delivers nothing (no response started, no event, no bookmark) for this long has
/// stalled without an error: it counts as failing since its last delivery (its view is stale at
/// once, as this is longer than `--max-watch-staleness`'s default) and starts again with a fresh
/// list. A working watch delivers at least every [`WATCH_TIMEOUT`], plus the time a resumed watch
/// takes to start.
pub const WATCH_SILENCE: Duration = Duration::from_secs(75);

/// A watch that has been failing since its last success.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failing {
    /// The first error after the last success, on this process's monotonic clock (for the bound)…
    pub since: Instant,
    /// …and on the wall clock (for the report).
    pub since_wall: DateTime<Utc>,
    /// The last error.
    pub error: String,
}

/// The health of every watch, shared by the tasks that drive them and the loop that reads it.
#[derive(Clone, Debug, Default)]
pub struct WatchHealth {
    /// Kind (such as `Pod`) → since when its watch has been failing; absent while it is healthy.
    failing: Arc<Mutex<BTreeMap<String, Failing>>>,
    /// Kind → how many times its watch stalled without an error and was started again.
    silences: Arc<Mutex<BTreeMap<String, u64>>>,
    /// Kind → its last silence, until a pass reports it: the fresh list often brings the watch
    /// back before any pass sees it failing, and the operator must still hear of the stalled
    /// connection.
    unreported_silences: Arc<Mutex<BTreeMap<String, Failing>>>,
}

/// Longest error kept: the status condition quotes it.
const MAX_ERROR: usize = 300;

impl WatchHealth {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Failing>> {
        // A poisoned lock only means a panic elsewhere while holding it; the map itself is always
        // consistent.
        self.failing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The watch of `kind` delivered: its store is current again (a complete list, or a change on a
    /// live watch).
    pub fn succeeded(&self, kind: &str) {
        let mut failing = self.lock();
        if failing.contains_key(kind) {
            failing.remove(kind);
            tracing::info!(%kind, "watch recovered");
        }
    }

    /// The watch of `kind` failed with `error`, at `now` (on the monotonic and the wall clock), or
    /// has been failing since then (a watch found silent).
    pub fn failed(&self, kind: &str, error: &str, (now, now_wall): (Instant, DateTime<Utc>)) {
        let error: String = error.chars().take(MAX_ERROR).collect();
        let mut failing = self.lock();
        let entry = failing.entry(kind.to_owned()).or_insert_with(|| Failing {
            since: now,
            since_wall: now_wall,
            error: String::new(),
        });
        entry.error = error;
    }

    /// The watch of `kind` delivered nothing for [`WATCH_SILENCE`] since `since`: it is failing
    /// since then, and starts again.
    pub fn silent(&self, kind: &str, since: (Instant, DateTime<Utc>)) {
        let why = format!(
            "no response, event nor bookmark for {}s (a stalled connection)",
            WATCH_SILENCE.as_secs()
        );
        self.failed(kind, &why, since);
        let mut silences = self.silences.lock().unwrap_or_else(|e| e.into_inner());
        *silences.entry(kind.to_owned()).or_default() += 1;
        self.unreported_silences
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                kind.to_owned(),
                Failing {
                    since: since.0,
                    since_wall: since.1,
                    error: why,
                },
            );
    }

    /// The silences found since the last call, whether or not their watches work again.
    pub fn take_silences(&self) -> BTreeMap<String, Failing> {
        std::mem::take(
            &mut *self
                .unreported_silences
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// Kind → how many times its watch stalled without an error.
    pub fn silences(&self) -> BTreeMap<String, u64> {
        self.silences
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether the watch of `kind` is failing now, for however short a time.
    pub fn is_failing(&self, kind: &str) -> bool {
        self.lock().contains_key(kind)
    }

    /// Every failing watch: kind → since when and why.
    pub fn failing(&self) -> BTreeMap<String, Failing> {
        self.lock().clone()
    }
}

/// The watches among `failing` that have been failing for longer than `bound` at `now`.
pub fn stale(
    failing: &BTreeMap<String, Failing>,
    bound: Duration,
    now: Instant,
) -> BTreeMap<String, Failing> {
    failing
        .iter()
        .filter(|(_, f)| now.saturating_duration_since(f.since) > bound)
        .map(|(kind, f)| (kind.clone(), f.clone()))
        .collect()
}

/// When the first of the failing watches that are not stale yet becomes stale: plan again then, to
/// stop acting.
pub fn next_stale(
    failing: &BTreeMap<String, Failing>,
    bound: Duration,
    now: Instant,
) -> Option<Instant> {
    failing
        .values()
        .map(|f| f.since + bound)
        .filter(|at| *at >= now)
        .min()
}

/// What the policies' Degraded condition says of stale watches. Stable while the same watches fail
/// with the same errors, so the status is not rewritten at every pass.
pub fn describe(stale: &BTreeMap<String, Failing>, bound: Duration) -> String {
    format!(
        "{}: longer than {bound:?}, so no eviction, deletion or node change until it recovers",
        each(stale, "has been failing since"),
    )
}

/// What a Warning Event says of watches that went silent and were started again, whether or not
/// they work again.
pub fn describe_silences(silences: &BTreeMap<String, Failing>) -> String {
    format!(
        "{}: started again with a fresh list; nothing was carried out on the silent view",
        each(silences, "went silent at"),
    )
}

/// "the watch of <kind> objects <what> <time> (<error>)" for each watch, joined by "; ".
fn each(watches: &BTreeMap<String, Failing>, what: &str) -> String {
    let each: Vec<String> = watches
        .iter()
        .map(|(kind, f)| {
            let at = f
                .since_wall
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            format!("the watch of {kind} objects {what} {at} ({})", f.error)
        })
        .collect();
    each.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A silence is reported once even when the fresh list brought the watch back before any pass
    /// saw it failing.
    #[test]
    fn a_silence_is_reported_once_even_after_the_watch_recovered() {
        let health = WatchHealth::default();
        let t0 = (Instant::now(), Utc::now());
        health.silent("Pod", t0);
        health.succeeded("Pod");
        assert!(health.failing().is_empty());
        let silences = health.take_silences();
        assert_eq!(silences.keys().collect::<Vec<_>>(), ["Pod"]);
        let message = describe_silences(&silences);
        assert!(
            message.starts_with("the watch of Pod objects went silent at ")
                && message.contains("no response, event nor bookmark for 75s"),
            "{message}"
        );
        assert!(health.take_silences().is_empty());
    }

    #[test]
    fn a_watch_is_stale_once_it_has_failed_for_longer_than_the_bound() {
        let health = WatchHealth::default();
        let t0 = Instant::now();
        let bound = Duration::from_secs(30);
        let wall = Utc::now();
        health.failed("Pod", "connection refused", (t0, wall));
        health.failed(
            "Pod",
            "pods is forbidden",
            (t0 + Duration::from_secs(5), wall),
        );
        assert!(health.is_failing("Pod") && !health.is_failing("Node"));
        let failing = health.failing();
        assert_eq!(failing["Pod"].since, t0, "failing since the first error");
        assert_eq!(failing["Pod"].error, "pods is forbidden", "the last error");
        assert!(stale(&failing, bound, t0 + Duration::from_secs(30)).is_empty());
        assert_eq!(
            next_stale(&failing, bound, t0 + Duration::from_secs(10)),
            Some(t0 + bound)
        );
        let later = t0 + Duration::from_secs(31);
        assert_eq!(
            stale(&failing, bound, later).keys().collect::<Vec<_>>(),
            ["Pod"]
        );
        assert_eq!(next_stale(&failing, bound, later), None);
        let message = describe(&stale(&failing, bound, later), bound);
        assert!(
            message.starts_with("the watch of Pod objects has been failing since ")
                && message.contains("(pods is forbidden): longer than 30s, so no eviction"),
            "{message}"
        );
        health.succeeded("Pod");
        assert!(health.failing().is_empty());
        health.failed("Pod", &"x".repeat(1000), (later, wall));
        assert_eq!(health.failing()["Pod"].since, later, "a new episode");
        assert_eq!(health.failing()["Pod"].error.len(), MAX_ERROR);
    }
}
