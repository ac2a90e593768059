//! Evictions and deletions the controller launched that its pod cache may not show yet
//! (docs/design.md §10). An entry is made before the request is sent and counts the pod as going
//! (its owner's budget held, the pod never acted on again): between an eviction's 201 and the watch
//! event that shows the pod terminating, the cache still counts it Ready, and the planner would
//! judge its workload healthier than it is. A definite refusal releases the entry; an accepted or
//! unknown outcome keeps it until the cache shows it, or a bound passes while the pod watch works.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};

use k8sm_planner::{ClusterView, InFlightEviction};

use crate::Error;
use crate::act::execute::Outcome;

/// How long an accepted removal may wait for the cache: far longer than watch latency, short enough
/// to never wedge a workload. Only once the pod watch has delivered something newer than the
/// answer: a watch that fails, or stalls without an error, keeps the cache as it was, with the
/// evicted pods Ready in it, so an entry must stay until the cache really shows its pod going. An
/// unanswered call has no bound here (the call has its own timeout, and its answer decides).
const MAX_AGE: Duration = Duration::from_secs(120);
/// How much later than an answer a delivery of the pod watch must come to be newer than it: the
/// apiserver's watch cache follows etcd within milliseconds, so what it sends this long after the
/// answer comes after the removal.
const WATCH_LAG: Duration = Duration::from_secs(5);

/// How the pod watch is doing, as [`InFlight::prune`] asks.
#[derive(Clone, Copy, Debug, Default)]
pub struct PodWatch {
    /// Failing now.
    pub failing: bool,
    /// When it last delivered an event or a bookmark.
    pub delivered: Option<DateTime<Utc>>,
}

#[derive(Debug, Default)]
pub struct InFlight {
    /// Pod UID → its removal, counted by the planner.
    entries: HashMap<String, InFlightEviction>,
    /// Pods whose call is launched and not answered yet. Kept apart from `entries`: once the cache
    /// shows the pod going its entry goes, but the pod must still not get a second call while
    /// the first one runs.
    calling: HashSet<String>,
}

impl InFlight {
    /// A call to evict or delete pod `pod_uid` of workload `owner_uid` is launched at `at`. False
    /// (and nothing recorded) when a call on that pod is still running.
    pub fn launch(&mut self, pod_uid: &str, owner_uid: Option<String>, at: DateTime<Utc>) -> bool {
        if !self.calling.insert(pod_uid.to_owned()) {
            return false;
        }
        self.entries.insert(
            pod_uid.to_owned(),
            InFlightEviction {
                pod_uid: pod_uid.to_owned(),
                owner_uid,
                at,
                unanswered: true,
            },
        );
        true
    }

    /// The answer to the call on `pod_uid`, at `at`. Only a definite refusal frees the budget the
    /// entry holds. Every other answer may mean the pod is going: the entry waits for the cache
    /// as an accepted one does, at most [`MAX_AGE`] from the answer (the cost of a call that in
    /// fact failed: its pod is tried again that much later).
    pub fn answered(&mut self, pod_uid: &str, outcome: &Result<Outcome, Error>, at: DateTime<Utc>) {
        if refused(outcome) {
            self.released(pod_uid);
        } else {
            // A lost answer may hide a refusal: what follows the pod on its node keeps waiting for
            // the cache.
            self.settle(pod_uid, at, outcome.is_ok());
        }
    }

    /// The call on `pod_uid` was accepted at `at`: its entry (unless the cache already shows the
    /// pod going) waits for the cache, at most [`MAX_AGE`] from now.
    #[cfg(test)]
    pub fn accepted(&mut self, pod_uid: &str, at: DateTime<Utc>) {
        self.settle(pod_uid, at, true);
    }

    /// The call on `pod_uid` ended at `at` without a refusal; `confirmed` when the apiserver said
    /// it was carried out.
    fn settle(&mut self, pod_uid: &str, at: DateTime<Utc>, confirmed: bool) {
        self.calling.remove(pod_uid);
        if let Some(entry) = self.entries.get_mut(pod_uid) {
            entry.at = at;
            entry.unanswered = !confirmed;
        }
    }

    /// The call on `pod_uid` was refused: nothing is on its way out because of it, and the budget
    /// it held is free again.
    pub fn released(&mut self, pod_uid: &str) {
        self.calling.remove(pod_uid);
        self.entries.remove(pod_uid);
    }

    /// Whether a call on `pod_uid` is running.
    #[cfg(test)]
    pub fn is_calling(&self, pod_uid: &str) -> bool {
        self.calling.contains(pod_uid)
    }

    /// Drops the entries whose pod `view` (built from the caches, without in-flight entries) shows
    /// terminating or gone, and accepted ones past the bound whose answer the pod watch has
    /// moved past: it delivered something (`pods_delivered`, before the view was built) newer
    /// than the answer, and is not failing.
    pub fn prune(&mut self, view: &ClusterView, now: DateTime<Utc>, pods: PodWatch) {
        // Only the entries' pods (a few), not a map of every pod of the fleet on every pass.
        let mut alive: HashMap<&str, bool> = HashMap::with_capacity(self.entries.len());
        if !self.entries.is_empty() {
            for pod in &view.pods {
                if self.entries.contains_key(&*pod.uid) {
                    alive.insert(&*pod.uid, !pod.terminating);
                }
            }
        }
        let calling = &self.calling;
        self.entries.retain(|uid, entry| {
            let seen_since = !pods.failing
                && pods
                    .delivered
                    .is_some_and(|at| (at - entry.at).to_std().is_ok_and(|lag| lag > WATCH_LAG));
            let young = !seen_since
                || calling.contains(uid)
                || (now - entry.at).to_std().is_ok_and(|age| age < MAX_AGE);
            young && alive.get(uid.as_str()).copied().unwrap_or(false)
        });
    }

    pub fn snapshot(&self) -> Vec<InFlightEviction> {
        self.entries.values().cloned().collect()
    }

    /// Entries counted by the planner.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Calls running.
    pub fn calls(&self) -> usize {
        self.calling.len()
    }
}

/// Whether a call's answer says that its pod was not removed, and is not going because of it.
///
/// Definite: a PodDisruptionBudget's refusal or the apiserver's throttling (429), any other 4xx but
/// 404 and 409 (the request was rejected before it was carried out: forbidden, invalid, throttled),
/// and a call never sent (leadership lost before it). Not definite: no answer at all (a timeout, a
/// reset connection, a panic: the request may have been carried out and its answer lost), a 5xx
/// (the apiserver or a proxy failed somewhere, perhaps after the pod's deletion was stored),
/// and 404/409 (the pod, with this UID, is gone or replaced: the owner may be down a pod the cache
/// still counts as ready, so the entry holds until the cache shows it, which is at once once the
/// watch delivers).
fn refused(outcome: &Result<Outcome, Error>) -> bool {
    match outcome {
        Ok(Outcome::DisruptionBudget(_) | Outcome::Throttled(_)) => true,
        Ok(Outcome::Done { .. } | Outcome::Stale(_)) => false,
        Err(error) if error.never_sent() => true,
        Err(error) => error
            .status_code()
            .is_some_and(|code| (400..500).contains(&code) && code != 404 && code != 409),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8sm_planner::testing::{at, replica_set};

    /// Launched at `at` and accepted at once.
    fn launched(in_flight: &mut InFlight, pod: &str, owner: &str, at: DateTime<Utc>) {
        assert!(in_flight.launch(pod, Some(owner.to_owned()), at));
        in_flight.accepted(pod, at);
    }

    /// The pod watch delivering, last at `at`.
    fn working(at: DateTime<Utc>) -> PodWatch {
        PodWatch {
            failing: false,
            delivered: Some(at),
        }
    }

    const FAILING: PodWatch = PodWatch {
        failing: true,
        delivered: None,
    };

    fn view(pods: Vec<k8sm_planner::PodView>) -> ClusterView {
        ClusterView {
            pods: k8sm_planner::testing::shared_pods(pods),
            ..ClusterView::default()
        }
    }

    #[test]
    fn an_eviction_is_kept_until_the_cache_shows_the_pod_going() {
        let rs = replica_set("shop", "web", 3);
        let mut in_flight = InFlight::default();
        launched(&mut in_flight, "shop/web-1", &rs.uid, at(0));
        in_flight.prune(&view(vec![rs.pod("web-1", "n1")]), at(1), working(at(1)));
        assert_eq!(in_flight.len(), 1, "not terminating in the cache yet");
        in_flight.prune(
            &view(vec![rs.pod("web-1", "n1").terminating()]),
            at(1),
            working(at(1)),
        );
        assert_eq!(in_flight.len(), 0);
        launched(&mut in_flight, "shop/web-2", &rs.uid, at(0));
        in_flight.prune(&view(vec![]), at(1), working(at(1)));
        assert_eq!(in_flight.len(), 0, "gone");
        launched(&mut in_flight, "shop/web-3", &rs.uid, at(0));
        in_flight.prune(&view(vec![rs.pod("web-3", "n1")]), at(3), working(at(3)));
        assert_eq!(in_flight.len(), 0, "past the bound");
    }

    #[test]
    fn an_eviction_is_kept_past_the_bound_while_the_pod_watch_fails() {
        let rs = replica_set("shop", "web", 3);
        let mut in_flight = InFlight::default();
        launched(&mut in_flight, "shop/web-1", &rs.uid, at(0));
        // The frozen cache still shows the pod Ready, an hour later: it still counts as evicted.
        let frozen = view(vec![rs.pod("web-1", "n1")]);
        in_flight.prune(&frozen, at(60), FAILING);
        assert_eq!(in_flight.len(), 1);
        // Once the watch works again, the fresh cache decides (here it shows the pod gone).
        in_flight.prune(&view(vec![]), at(61), working(at(61)));
        assert_eq!(in_flight.len(), 0);
    }

    #[test]
    fn an_eviction_is_kept_past_the_bound_until_the_pod_watch_delivers_something_newer() {
        let rs = replica_set("shop", "web", 3);
        let mut in_flight = InFlight::default();
        launched(&mut in_flight, "shop/web-1", &rs.uid, at(0));
        // A watch that stalled without an error: not failing, its last delivery before the answer
        // (or just after it, within the watch cache's lag). The cache still shows the pod
        // Ready an hour later: still evicted.
        let frozen = view(vec![rs.pod("web-1", "n1")]);
        for delivered in [
            None,
            Some(at(0) - chrono::Duration::seconds(1)),
            Some(at(0) + chrono::Duration::seconds(4)),
        ] {
            let stalled = PodWatch {
                failing: false,
                delivered,
            };
            in_flight.prune(&frozen, at(60), stalled);
            assert_eq!(in_flight.len(), 1, "{delivered:?}");
        }
        // Once it delivers something newer than the answer, the cache is past it: the entry goes at
        // the bound.
        in_flight.prune(&frozen, at(61), working(at(61)));
        assert_eq!(in_flight.len(), 0);
    }

    #[test]
    fn a_launched_call_holds_its_pod_from_the_launch_until_it_is_answered() {
        let rs = replica_set("shop", "web", 3);
        let mut in_flight = InFlight::default();
        assert!(in_flight.launch("shop/web-1", Some(rs.uid.clone()), at(0)));
        // Counted at once, before any answer, and no second call on the pod while the first runs.
        assert_eq!(
            in_flight.snapshot()[0].owner_uid.as_deref(),
            Some(rs.uid.as_str())
        );
        assert!(!in_flight.launch("shop/web-1", Some(rs.uid.clone()), at(1)));
        assert!(in_flight.is_calling("shop/web-1"));
        // A slow call is not dropped by the age bound: its answer decides.
        in_flight.prune(
            &view(vec![rs.pod("web-1", "n1")]),
            at(600),
            working(at(600)),
        );
        assert_eq!(in_flight.len(), 1);
        in_flight.accepted("shop/web-1", at(600));
        assert!(!in_flight.is_calling("shop/web-1"));
        // Accepted: kept until the cache shows it, the bound counted from the answer.
        in_flight.prune(
            &view(vec![rs.pod("web-1", "n1")]),
            at(601),
            working(at(601)),
        );
        assert_eq!(in_flight.len(), 1);
        in_flight.prune(
            &view(vec![rs.pod("web-1", "n1")]),
            at(800),
            working(at(800)),
        );
        assert_eq!(in_flight.len(), 0);
    }

    fn api_error(code: u16) -> Result<Outcome, Error> {
        let status = kube::core::Status::failure("no", "Whatever").with_code(code);
        Err(Error::Action {
            action: "evicting",
            object: "shop/web-1".into(),
            source: kube::Error::Api(Box::new(status)),
        })
    }

    /// The owners whose budget the entries hold.
    fn held(in_flight: &InFlight) -> Vec<Option<String>> {
        in_flight
            .snapshot()
            .into_iter()
            .map(|e| e.owner_uid)
            .collect()
    }

    #[test]
    fn a_call_whose_outcome_is_unknown_keeps_its_owners_budget_held() {
        // The eviction may have happened at the apiserver and its answer been lost: until the cache
        // shows the pod, the owner's budget stays held, or the planner could evict a second
        // pod of it and take it below its bound.
        let rs = replica_set("shop", "web", 3);
        let unknown = [
            Err(Error::Other("Evict timed out after 15s".into())),
            Err(Error::Other("the call panicked".into())),
            api_error(500),
            api_error(503),
            api_error(504),
            // The pod (this UID) is gone or replaced: the owner may be down a pod the cache still
            // counts as ready.
            Ok(Outcome::Stale(
                "pod shop/web-1 is gone or was replaced".into(),
            )),
        ];
        for outcome in unknown {
            let mut in_flight = InFlight::default();
            assert!(in_flight.launch("shop/web-1", Some(rs.uid.clone()), at(0)));
            in_flight.answered("shop/web-1", &outcome, at(10));
            assert_eq!(held(&in_flight), [Some(rs.uid.clone())], "{outcome:?}");
            // The call is over: the pod's entry now waits for the cache, the bound counted from the
            // failure.
            assert_eq!(in_flight.calls(), 0);
            in_flight.prune(&view(vec![rs.pod("web-1", "n1")]), at(11), working(at(11)));
            assert_eq!(in_flight.len(), 1, "{outcome:?}");
            in_flight.prune(&view(vec![rs.pod("web-1", "n1")]), at(13), working(at(13)));
            assert_eq!(in_flight.len(), 0, "{outcome:?}");
            // The cache showing the pod going releases it at once, too.
            assert!(in_flight.launch("shop/web-1", Some(rs.uid.clone()), at(20)));
            in_flight.answered("shop/web-1", &outcome, at(20));
            in_flight.prune(&view(vec![]), at(20), working(at(20)));
            assert_eq!(in_flight.len(), 0, "{outcome:?}");
        }
    }

    #[test]
    fn a_definite_refusal_releases_its_owners_budget() {
        let rs = replica_set("shop", "web", 3);
        let refused = [
            Ok(Outcome::DisruptionBudget("needs 3 healthy pods".into())),
            api_error(400),
            api_error(403),
            api_error(422),
            api_error(429),
            Err(Error::NotLeader(
                crate::leadership::leader::NotLeader::NotAcquired,
            )),
        ];
        for outcome in refused {
            let mut in_flight = InFlight::default();
            assert!(in_flight.launch("shop/web-1", Some(rs.uid.clone()), at(0)));
            in_flight.answered("shop/web-1", &outcome, at(1));
            assert_eq!(held(&in_flight), [], "{outcome:?}");
            assert_eq!(in_flight.calls(), 0);
        }
    }

    #[test]
    fn a_refused_or_failed_call_releases_its_budget() {
        let rs = replica_set("shop", "web", 3);
        let mut in_flight = InFlight::default();
        assert!(in_flight.launch("shop/web-1", Some(rs.uid.clone()), at(0)));
        assert!(in_flight.launch("shop/web-2", None, at(0)));
        in_flight.released("shop/web-1");
        let left: Vec<String> = in_flight
            .snapshot()
            .into_iter()
            .map(|e| e.pod_uid)
            .collect();
        assert_eq!(left, ["shop/web-2"]);
        assert_eq!(in_flight.calls(), 1);
        // The pod may be tried again.
        assert!(in_flight.launch("shop/web-1", Some(rs.uid.clone()), at(5)));
    }

    #[test]
    fn an_answer_after_the_cache_showed_the_pod_going_leaves_nothing_behind() {
        let rs = replica_set("shop", "web", 3);
        let mut in_flight = InFlight::default();
        assert!(in_flight.launch("shop/web-1", Some(rs.uid.clone()), at(0)));
        in_flight.prune(
            &view(vec![rs.pod("web-1", "n1").terminating()]),
            at(1),
            working(at(1)),
        );
        assert_eq!(in_flight.len(), 0);
        // Still calling: the pod gets no second call…
        assert!(!in_flight.launch("shop/web-1", Some(rs.uid.clone()), at(1)));
        // …and the answer does not bring the entry back.
        in_flight.accepted("shop/web-1", at(2));
        assert_eq!(in_flight.len(), 0);
        assert_eq!(in_flight.calls(), 0);
    }
}
